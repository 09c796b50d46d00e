//! The one pipeline every face (the CLI, the action, the controller) runs,
//! for one folder or many: a [`Spec`] in (the folders with their targets,
//! and what they share: history, access, forward rules), a [`RunReport`]
//! out (one entry per folder). Each folder goes source -> image ->
//! publisher -> report:
//!
//! 1. every folder's request is checked before any I/O
//!    ([`Request::validate`]): an input error stops the run before
//!    anything is read or pushed;
//! 2. the folders are read ([`history::prepare`]), each repository's
//!    history walked once for all its folders;
//! 3. at most [`Spec::jobs`] folders at once build their image
//!    ([`image::build`]) and publish it through their target's
//!    [`Publisher`](crate::publish::Publisher) (an OCI layout or a registry push), a folder's failure
//!    kept in its entry without stopping the others.
//!
//! A single folder is the one-element case: [`RunReport::into_report`]
//! gives its report or its error, as a single-folder face prints them.
//!
//! Why threads and not async tasks: each folder's pipeline is blocking (its
//! registry client owns a small runtime); a bounded pool of scoped threads
//! runs N of them at once without a second pipeline.

use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::{Error, Result};
use crate::field::{Field, Mention};
use crate::history::mirror::Mirror;
use crate::history::{self, Checkout, Reading, SourceMode};
use crate::image;
use crate::many::Selection;
use crate::notice::{Notice, Unattested};
use crate::provenance;
use crate::publish::{Provenance, Publication, Stamp};
use crate::release::ordering::ForcedPush;
use crate::report::{LayerReport, Report};
use crate::request::{Request, Target, for_mirror, merge_metadata};
use crate::tag;
use crate::text;

/// Where a run reads its folders from.
#[derive(Debug, Clone, Copy)]
pub enum Origin<'a> {
    /// Checkouts on disk: each folder's path is relative to the current
    /// directory, and a folder outside git is read from disk.
    Disk,
    /// A commit of a mirror (see [`crate::history::mirror`]): each folder's
    /// path is relative to the repository root, and the image, timestamp
    /// tag and digest are those `settings-image push --revision COMMIT
    /// --path PATH` makes in the root of a clone of the mirror's URL. The
    /// content always comes from the commit ([`SourceMode::Commit`];
    /// `Worktree` is an input error: a mirror has no worktree). The base
    /// request's revision names the commit (a full id, which the mirror
    /// must hold; `None` means the branch's head as fetched); unless it
    /// says otherwise, the `source` annotation is the URL as a clone's
    /// `origin` gives it and the provenance's ref is `refs/heads/BRANCH`.
    Mirror(&'a Mirror),
}

/// What one run publishes: each folder with where its image goes, what
/// the folders share, where they are read from, and how many go at once.
#[derive(Debug, Clone)]
pub struct Spec<'a> {
    /// What every folder shares: the tags, the history (source mode,
    /// timestamp tag, revision, GitHub API, source URL), the CI's facts,
    /// the forward rules, provenance and extra metadata. Its `path` and
    /// `target` are the folders' own, from `folders` (its `path` names the
    /// run in an error about a mirror's commit).
    pub base: Request,
    /// Each folder and its target (a layout directory, or a registry
    /// repository with the access to it), in the order of the report.
    pub folders: Vec<(PathBuf, Target)>,
    /// Where the folders are read from.
    pub origin: Origin<'a>,
    /// At most this many folders build and publish at once.
    pub jobs: usize,
    /// A several-folder face's run (a list or glob of folders, a mirror's
    /// selection), even of one folder: a history walk's error names each
    /// folder (see [`Reading::several`]).
    pub several: bool,
}

impl Spec<'static> {
    /// One folder: `request` as it is, read from disk.
    pub fn one(request: Request) -> Spec<'static> {
        Spec {
            folders: vec![(request.path.clone(), request.target.clone())],
            base: request,
            origin: Origin::Disk,
            jobs: 1,
            several: false,
        }
    }

    /// Every folder of `selection` with its target (in the same order, see
    /// [`Selection::layouts`] and [`Selection::repositories`]), `base` for
    /// the rest, read from disk, at most `jobs` at once: what every face
    /// builds, for one folder as for several.
    pub fn new(base: Request, selection: &Selection, targets: Vec<Target>, jobs: usize) -> Self {
        Spec {
            base,
            folders: selection.paths().into_iter().zip(targets).collect(),
            origin: Origin::Disk,
            jobs,
            several: selection.several,
        }
    }
}

impl Spec<'_> {
    /// Checks every folder's request before any I/O, as [`run`] does
    /// first (for a face that says more before it runs).
    pub fn validate(&self) -> Result<()> {
        self.requests(&self.base)
            .iter()
            .try_for_each(Request::validate)
    }

    /// Each folder's request: `base` with the folder and its target.
    fn requests(&self, base: &Request) -> Vec<Request> {
        self.folders
            .iter()
            .map(|(path, target)| Request {
                path: path.clone(),
                target: target.clone(),
                ..base.clone()
            })
            .collect()
    }

    /// The same run, reading its folders from a commit of `mirror`
    /// (see [`Origin::Mirror`]).
    pub fn in_mirror(self, mirror: &Mirror) -> Spec<'_> {
        Spec {
            base: self.base,
            folders: self.folders,
            origin: Origin::Mirror(mirror),
            jobs: self.jobs,
            several: self.several,
        }
    }
}

/// Builds and publishes every folder of `spec` (see the module docs). A
/// folder's request that does not validate, a commit the mirror lacks or
/// a folder name a mirror cannot hold is the run's error, before anything
/// is read; any other failure is its folder's, in the report.
pub fn run(spec: &Spec<'_>) -> Result<RunReport> {
    let mirrored;
    let base = match spec.origin {
        Origin::Disk => &spec.base,
        Origin::Mirror(mirror) => {
            mirrored = for_mirror(&spec.base, mirror)?;
            &mirrored
        }
    };
    let requests = spec.requests(base);
    for r in &requests {
        r.validate()?;
    }
    let paths: Vec<PathBuf> = requests.iter().map(|r| r.path.clone()).collect();
    let opened: Vec<Result<Option<Checkout>>> = match spec.origin {
        Origin::Disk => Checkout::open_all(&paths, base.github.clone()),
        Origin::Mirror(mirror) => paths
            .iter()
            .map(|p| mirror.checkout(&p.to_string_lossy()).map(|c| Ok(Some(c))))
            .collect::<Result<_>>()?,
    };
    let reading = Reading {
        mode: base.source,
        need_commit: base.timestamp_tag.is_some(),
        revision: base.revision.as_deref(),
        source_url: &base.source_url,
        several: spec.several,
    };
    let folders = paths.iter().map(PathBuf::as_path).zip(opened).collect();
    let prepared = history::prepare(folders, &reading);
    Ok(publish_all(&requests, prepared, spec.jobs))
}

/// One folder's build and publish, once its checkout is open and its
/// source read; `req` is validated.
fn build_and_publish(
    req: &Request,
    checkout: Option<&Checkout>,
    prepared: history::Prepared,
) -> Result<Report> {
    let mut warnings = prepared.warnings.clone();
    let (tags, timestamp_tag) = tags_of(req, &prepared, &mut warnings)?;
    let target = req.target.publisher();
    // Packaged from disk, a layout inside the folder would go into the next build.
    if req.source == SourceMode::Worktree || prepared.commit.is_none() {
        target.check_outside(&req.path)?;
    }
    let (metadata, added) = merge_metadata(prepared.metadata(), &req.extra, &mut warnings);
    let img = image::build(&prepared.source, &metadata)?;
    let stamp = match (&timestamp_tag, &prepared.commit, checkout) {
        (Some(tag), Some(commit), Some(checkout)) => Some(Stamp {
            tag,
            commit,
            checkout,
        }),
        _ => None,
    };
    let published = target.publish(&Publication {
        image: &img,
        tags: &tags,
        stamp,
        branch_tag: req.forward.branch_tag.as_deref(),
        allow_rewind: req.forward.allow_rewind,
        forced: req.forward.forced_before.as_ref().map(|before| ForcedPush {
            before: before.to_ascii_lowercase(),
        }),
        // The ref the provenance records (see provenance::Facts).
        git_ref: req
            .ci
            .git_ref
            .clone()
            .or_else(|| checkout.and_then(|c| c.repo().head_ref())),
        provenance: provenance_of(req, checkout, &prepared, &added),
    })?;
    warnings.extend(published.warnings);
    Ok(Report {
        digest: img.digest.clone(),
        config_digest: img.config_descriptor.digest.clone(),
        layer: LayerReport {
            digest: img.layer.digest.clone(),
            diff_id: img.layer.diff_id.clone(),
            size: img.layer.size,
            uncompressed_size: img.layer.uncompressed_size,
        },
        files: img.files,
        size: img.content_size,
        tags,
        output: published.output,
        new_blobs: published.new_blobs,
        commit: prepared.commit.as_ref().map(|c| c.id.clone()),
        timestamp: prepared.commit.as_ref().map(|c| c.timestamp),
        timestamp_tag,
        anomaly: published.anomaly,
        branch_tag: published.branch,
        push: published.push,
        warnings,
    })
}

/// The image's tags, the timestamp tag (when asked for and the folder has
/// a commit) first, so `reference` names the tag that never moves; and
/// that timestamp tag. A hand-written tag shaped like a timestamp tag
/// claims a commit and a time: Flux orders by it and `verify` checks it,
/// so it must be this folder's commit's (a build outside git has none to
/// check it against: a warning).
fn tags_of(
    req: &Request,
    prepared: &history::Prepared,
    warnings: &mut Vec<Notice>,
) -> Result<(Vec<String>, Option<String>)> {
    let mut tags = req.tags.clone();
    let timestamp_tag = match (&req.timestamp_tag, &prepared.commit) {
        (Some(prefix), Some(c)) => {
            let t = tag::timestamp_tag(prefix, c.timestamp, &c.id)?;
            tags.retain(|x| x != &t);
            tags.insert(0, t.clone());
            Some(t)
        }
        _ => None,
    };
    for t in req.tags.iter().filter(|t| tag::is_timestamp_tag(t)) {
        match &prepared.commit {
            Some(c) if tag::names_commit(t, c.timestamp, &c.id) == Some(true) => {}
            Some(c) => {
                let ours = tag::timestamp_tag(
                    tag::timestamp_prefix(t).unwrap_or("main"),
                    c.timestamp,
                    &c.id,
                )?;
                return Err(Error::input_hinted(
                    text![
                        Mention::Set(Field::Tag, t.clone()),
                        format!(
                            " is shaped like a timestamp tag (PREFIX-TIME-SHA7), but the folder's last change is \
                             commit {} committed at {}: the tag would name another commit, and verify rejects such an image",
                            c.id, c.timestamp
                        )
                    ],
                    text![
                        "let ",
                        Mention::Set(Field::TimestampTag, "PREFIX".into()),
                        format!(
                            " make the tag from the commit (for this commit: {ours}), or choose a tag \
                             that is not PREFIX-DIGITS-7HEX"
                        )
                    ],
                ));
            }
            None => warnings.push(Notice::StampedOutsideGit { tag: t.clone() }),
        }
    }
    Ok((tags, timestamp_tag))
}

/// Whether a registry push attaches provenance: only when asked for, and
/// only of a commit's folder (`added`: the caller's metadata the image
/// carries, which the statement records).
fn provenance_of(
    req: &Request,
    checkout: Option<&Checkout>,
    prepared: &history::Prepared,
    added: &image::Metadata,
) -> Provenance {
    match (&prepared.commit, checkout, req.provenance) {
        (_, _, false) => Provenance::Off,
        (Some(commit), Some(checkout), true) if req.source == SourceMode::Commit => {
            Provenance::Attach(Box::new(provenance::Facts::collect(
                checkout,
                commit,
                prepared.source_url.clone(),
                &req.ci,
                added,
            )))
        }
        (None, _, true) | (_, None, true) => Provenance::Unattested(Unattested::NoCommit),
        (Some(_), Some(_), true) => Provenance::Unattested(Unattested::Worktree),
    }
}

/// A folder's checkout (`None` outside git) and what it packages, or why
/// it could not be read.
type Read = Result<(Option<Checkout>, history::Prepared)>;

/// Builds and publishes each prepared folder, at most `jobs` at once (on
/// the calling thread when one at a time), and gathers the report.
fn publish_all(requests: &[Request], prepared: Vec<Read>, jobs: usize) -> RunReport {
    let one = |req: &Request, read: Read| {
        read.and_then(|(checkout, p)| build_and_publish(req, checkout.as_ref(), p))
    };
    let workers = jobs.clamp(1, requests.len().max(1));
    let results: Vec<Result<Report>> = if workers == 1 {
        requests
            .iter()
            .zip(prepared)
            .map(|(r, p)| one(r, p))
            .collect()
    } else {
        let work: Vec<Mutex<Option<Read>>> =
            prepared.into_iter().map(|p| Mutex::new(Some(p))).collect();
        let done: Vec<Mutex<Option<Result<Report>>>> =
            requests.iter().map(|_| Mutex::new(None)).collect();
        let next = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(req) = requests.get(i) else { break };
                        let Some(read) = work[i].lock().ok().and_then(|mut w| w.take()) else {
                            continue;
                        };
                        let result = one(req, read);
                        if let Ok(mut slot) = done[i].lock() {
                            *slot = Some(result);
                        }
                    }
                });
            }
        });
        requests
            .iter()
            .zip(done)
            .map(|(req, slot)| {
                slot.into_inner()
                    .ok()
                    .flatten()
                    .unwrap_or_else(|| Err(Error::history(&req.path, "was not built", None)))
            })
            .collect()
    };
    RunReport {
        folders: requests
            .iter()
            .zip(results)
            .map(|(req, result)| FolderReport {
                path: req.path.display().to_string(),
                repository: req.target.publisher().name(),
                result,
            })
            .collect(),
    }
}

/// What a run did, folder by folder: the one value every face renders.
#[derive(Debug)]
pub struct RunReport {
    /// One entry per folder, in the spec's order.
    pub folders: Vec<FolderReport>,
}

/// One folder's outcome.
#[derive(Debug)]
pub struct FolderReport {
    /// The folder as selected.
    pub path: String,
    /// The repository pushed to (push) or the layout written (build).
    pub repository: String,
    /// What it published, or why it failed (the others still ran).
    pub result: Result<Report>,
}

/// A folder that published ([`RunReport::published`]).
#[derive(Debug, Clone)]
pub struct FolderImage {
    /// The folder as selected.
    pub path: String,
    /// The repository pushed to.
    pub repository: String,
    /// What it published.
    pub report: Report,
}

impl RunReport {
    /// The folders that failed, with their errors, in the spec's order.
    pub fn errors(&self) -> impl Iterator<Item = (&str, &Error)> {
        self.folders
            .iter()
            .filter_map(|f| f.result.as_ref().err().map(|e| (f.path.as_str(), e)))
    }

    /// The error a several-folder run ends with when any folder failed:
    /// the first one's kind (exit code), naming how many failed.
    pub fn into_result(self) -> Result<()> {
        let total = self.folders.len();
        let mut errors = self
            .folders
            .into_iter()
            .filter_map(|f| f.result.err().map(|e| (f.path, e)));
        let Some((path, first)) = errors.next() else {
            return Ok(());
        };
        let n = 1 + errors.count();
        if n == 1 {
            return Err(first);
        }
        Err(Error::History {
            path: path.into(),
            message: text![format!("{n} of {total} folders failed; the first: ")]
                .then(first.text()),
            hint: first.hint_text(),
        })
    }

    /// The first folder's report, or its error: what a single-folder face
    /// prints (a [`Spec::one`] run has that folder only).
    pub fn into_report(self) -> Result<Report> {
        match self.folders.into_iter().next() {
            Some(f) => f.result,
            None => Err(Error::history(".", "no folder was built", None)),
        }
    }

    /// Every folder's image, or the first failed folder's error when one
    /// failed: what the controller publishes (the others are published: a
    /// retry of the whole is idempotent).
    pub fn published(self) -> Result<Vec<FolderImage>> {
        self.folders
            .into_iter()
            .map(|f| {
                f.result.map(|report| FolderImage {
                    path: f.path,
                    repository: f.repository,
                    report,
                })
            })
            .collect()
    }
}
