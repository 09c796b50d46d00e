//! The request both front ends (CLI and action) build, and the one pipeline
//! that carries it out: source -> image -> publisher -> report.

use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::field::{Field, Mention};
use crate::history::mirror::Mirror;
use crate::history::{self, Checkout, SourceMode, github};
use crate::image;
use crate::provenance;
use crate::publish::registry::{Plan, Provenance};
use crate::publish::{layout, registry};
use crate::registry::Options;
use crate::release::ordering::ForcedPush;
use crate::report::{LayerReport, Report};
use crate::tag;
use crate::text;

/// Where the image goes.
#[derive(Debug, Clone)]
pub enum Target {
    /// An OCI image layout directory.
    Layout(PathBuf),
    /// A registry repository.
    Registry(Options),
}

/// Everything needed to build and publish one settings image.
#[derive(Debug, Clone)]
pub struct Request {
    /// The settings folder.
    pub path: PathBuf,
    /// Tags to write, in order (the timestamp tag, when asked for, goes
    /// before them: the first tag is the one `reference` names).
    pub tags: Vec<String>,
    /// Where to write.
    pub target: Target,
    /// Inside git: package the commit's folder or the disk's.
    pub source: SourceMode,
    /// Adds the tag `<prefix>-<committer time>-<sha7>` of the commit that
    /// last changed the folder.
    pub timestamp_tag: Option<String>,
    /// The GitHub API that answers what a shallow clone cannot (the last
    /// change, ancestry), when the front end has a repository and a token.
    pub github: Option<github::Api>,
    /// The repository's URL as the CI names it (else the `origin` remote's
    /// is used): the `source` annotation and the provenance's repository.
    pub source_url: Option<String>,
    /// What the CI run says about the build, for the provenance.
    pub ci: provenance::Ci,
    /// Forward-only options of a registry push.
    pub forward: Forward,
    /// After a registry push, attach SLSA provenance as a referrer (needs
    /// a commit: without one a warning says why there is none).
    pub provenance: bool,
    /// The commit to start history from instead of HEAD (a full commit id
    /// or a reference name), e.g. the head of a pull request: the timestamp
    /// tag names the last change reachable from it and, with
    /// [`SourceMode::Commit`], the content is the folder as it holds it.
    pub revision: Option<String>,
    /// Annotations (manifest) and labels (config) the caller adds, e.g.
    /// docker/metadata-action's. The history's own (`revision`, `created`,
    /// `source`) win, and `org.opencontainers.image.created` is never taken
    /// from the caller: it is a build clock, and a rebuild of the same
    /// commit must be byte-identical. Each value not taken is a warning.
    pub extra: image::Metadata,
}

/// Forward-only options of a registry push.
#[derive(Debug, Clone, Default)]
pub struct Forward {
    /// A moving tag (e.g. `main`) that follows the new image only when its
    /// commit descends from the one the tag's image records now.
    pub branch_tag: Option<String>,
    /// Move the branch tag even when history diverged (after a force-push).
    pub allow_rewind: bool,
    /// This run follows a force-push of the branch, which named this
    /// commit before it (GitHub's push event: `forced: true`, `before`).
    /// Tells a rewind from a re-run of an older job.
    pub forced_before: Option<String>,
}

impl Request {
    /// Checks everything that can be checked before any I/O.
    pub fn validate(&self) -> Result<()> {
        for t in &self.tags {
            tag::validate_writable(t)?;
        }
        if let Some(prefix) = &self.timestamp_tag {
            tag::sanitize_prefix(prefix)?;
        }
        if let Target::Registry(opts) = &self.target {
            crate::registry::parse_repository(&opts.repository)?;
        }
        if let Some(b) = &self.forward.branch_tag {
            tag::validate_writable(b)?;
            if tag::is_timestamp_tag(b) || self.tags.contains(b) {
                return Err(Error::input_hinted(
                    text![
                        Field::BranchTag,
                        format!(" {b:?} is a timestamp tag or also given with "),
                        Field::Tag
                    ],
                    text![
                        "name the moving tag after the branch, e.g. ",
                        Mention::Set(Field::BranchTag, "main".into())
                    ],
                ));
            }
            if !matches!(self.target, Target::Registry(_)) {
                return Err(Error::input_hinted(
                    text![
                        Field::BranchTag,
                        " moves a tag in a registry: it applies to push only"
                    ],
                    text!["push to a registry, or drop ", Field::BranchTag],
                ));
            }
            if self.timestamp_tag.is_none() {
                return Err(Error::input_hinted(
                    text![
                        Field::BranchTag,
                        format!(" {b:?} needs "),
                        Field::TimestampTag,
                        ": the branch tag moves only to a commit that descends from the one the timestamp tags record"
                    ],
                    text![
                        "add ",
                        Mention::Set(Field::TimestampTag, "BRANCH".into()),
                        " (e.g. ",
                        Mention::Set(Field::TimestampTag, "main".into()),
                        ")"
                    ],
                ));
            }
        }
        if let Some(before) = &self.forward.forced_before
            && !(matches!(before.len(), 40 | 64) && before.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            return Err(Error::input(
                text![
                    Field::ForcePushedFrom,
                    format!(" {before:?} is not a full commit id")
                ],
                Some(
                    "give the branch's previous head as 40 hex digits (the push event's `before`)"
                        .to_string(),
                ),
            ));
        }
        if self.forward.allow_rewind && self.forward.branch_tag.is_none() {
            return Err(Error::input_hinted(
                text![Field::AllowRewind, " only applies to ", Field::BranchTag],
                text![
                    "add ",
                    Mention::Set(Field::BranchTag, "NAME".into()),
                    ", or drop ",
                    Field::AllowRewind
                ],
            ));
        }
        if self.path.as_os_str().is_empty() {
            return Err(Error::input(
                text![Field::Path, " is empty"],
                Some("name the settings folder".to_string()),
            ));
        }
        Ok(())
    }
}

/// `ours` (from history) with the caller's `extra` added where it does
/// not override ours; every value left out is a warning. Also returns what
/// was added: the provenance records it, and `verify` rebuilds with it
/// through this same function.
pub fn merge_metadata(
    mut ours: image::Metadata,
    extra: &image::Metadata,
    warnings: &mut Vec<String>,
) -> (image::Metadata, image::Metadata) {
    let mut added = image::Metadata::default();
    for (what, theirs, mine, taken) in [
        (
            "annotation",
            &extra.annotations,
            &mut ours.annotations,
            &mut added.annotations,
        ),
        ("label", &extra.labels, &mut ours.labels, &mut added.labels),
    ] {
        for (k, v) in theirs {
            match mine.get(k) {
                Some(kept) if kept != v => warnings.push(format!(
                    "{what} {k}={v} ignored: the history sets {kept}"
                )),
                Some(_) => {}
                None if k == image::ANNOTATION_CREATED => warnings.push(format!(
                    "{what} {k}={v} ignored: a build time would make every rebuild of the commit a new image"
                )),
                None => {
                    mine.insert(k.clone(), v.clone());
                    taken.insert(k.clone(), v.clone());
                }
            }
        }
    }
    (ours, added)
}

/// Builds the image and publishes it as the request says.
pub fn run(req: &Request) -> Result<Report> {
    req.validate()?;
    // The one open of the repository in this run: the history walk, the
    // ancestry checks and the provenance facts all use it.
    let checkout = Checkout::open(&req.path, req.github.clone())?;
    let prepared = history::prepare(
        checkout.as_ref(),
        &req.path,
        req.source,
        req.timestamp_tag.is_some(),
        req.revision.as_deref(),
        req.source_url.clone(),
    )?;
    run_prepared(req, checkout.as_ref(), prepared)
}

/// [`run`] for a commit of a mirror (see [`crate::history::mirror`]): the
/// image, the timestamp tag and the digest `settings-image push --revision
/// COMMIT --path PATH` makes in the root of a clone of the mirror's URL.
/// `req.path` names the folder relative to the repository root;
/// `req.revision` the commit (a full id, which the mirror must hold; `None`
/// means the branch's head as fetched). The content always comes from the
/// commit ([`SourceMode::Commit`]; `Worktree` is an input error: a mirror
/// has no worktree). Unless `req` says otherwise, the `source` annotation
/// is the URL as a clone's `origin` gives it and the provenance's ref is
/// `refs/heads/BRANCH`. Blocking, like [`run`].
pub fn run_mirror(req: &Request, mirror: &Mirror) -> Result<Report> {
    let req = for_mirror(req, mirror)?;
    req.validate()?;
    let checkout = mirror.checkout(&req.path.to_string_lossy())?;
    let prepared = history::prepare(
        Some(&checkout),
        &req.path,
        SourceMode::Commit,
        req.timestamp_tag.is_some(),
        req.revision.as_deref(),
        req.source_url.clone(),
    )?;
    run_prepared(&req, Some(&checkout), prepared)
}

/// `req` with what a mirror fills in: the revision (the branch's head),
/// the source URL and the provenance's ref; refused when the source mode
/// is not the commit or the mirror lacks the commit.
pub(crate) fn for_mirror(req: &Request, mirror: &Mirror) -> Result<Request> {
    if req.source != SourceMode::Commit {
        return Err(Error::input(
            "a mirror has no worktree: only --source commit can be published from it",
            Some("publish the commit's folder (SourceMode::Commit)".to_string()),
        ));
    }
    let mut req = req.clone();
    let revision = req
        .revision
        .get_or_insert_with(|| mirror.head().to_string())
        .to_ascii_lowercase();
    if !mirror.has_commit(&revision) {
        return Err(Error::history(
            &req.path,
            format!(
                "the commit {revision} is not in the mirror of {} (branch {})",
                mirror.url(),
                mirror.branch()
            ),
            Some("fetch it first: Mirrors::fetch with this commit".to_string()),
        ));
    }
    req.revision = Some(revision);
    if req.source_url.is_none() {
        req.source_url = mirror.source_url();
    }
    if req.ci.git_ref.is_none() {
        req.ci.git_ref = Some(mirror.git_ref());
    }
    Ok(req)
}

/// [`run`] once the checkout is open and the source read (several folders
/// read theirs in one history walk, see [`crate::many`]); `req` is
/// validated by the caller.
pub fn run_prepared(
    req: &Request,
    checkout: Option<&Checkout>,
    prepared: history::Prepared,
) -> Result<Report> {
    let mut warnings = prepared.warnings.clone();
    let mut tags = req.tags.clone();
    let timestamp_tag = match (&req.timestamp_tag, &prepared.commit) {
        (Some(prefix), Some(c)) => {
            let t = tag::timestamp_tag(prefix, c.timestamp, &c.id)?;
            // First, so `reference` names the tag that never moves.
            tags.retain(|x| x != &t);
            tags.insert(0, t.clone());
            Some(t)
        }
        _ => None,
    };
    // A hand-written tag shaped like a timestamp tag claims a commit and a
    // time: Flux orders by it and `verify` checks it, so it must be this
    // folder's commit's (a build outside git has none to check it against).
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
            None => warnings.push(format!(
                "tag {t} is shaped like a timestamp tag, but the folder is not in a git commit: nothing attests the commit it names"
            )),
        }
    }
    // Packaged from disk, a layout inside the folder would go into the next build.
    if req.source == SourceMode::Worktree || prepared.commit.is_none() {
        match &req.target {
            Target::Layout(dir) => layout::check_outside(dir, &req.path)?,
            Target::Registry(_) => {}
        }
    }
    let (metadata, added) = merge_metadata(prepared.metadata(), &req.extra, &mut warnings);
    let img = image::build(&prepared.source, &metadata)?;
    let mut anomaly = None;
    let mut branch = None;
    let (output, new_blobs, push) = match &req.target {
        Target::Layout(dir) => {
            let w = layout::write(dir, &img, &tags)?;
            (Some(dir.display().to_string()), w.new_blobs, None)
        }
        Target::Registry(opts) => {
            let stamp = match (&timestamp_tag, &prepared.commit, checkout) {
                (Some(t), Some(c), Some(checkout)) => Some((t.as_str(), c, checkout)),
                _ => None,
            };
            let provenance = match (&prepared.commit, checkout, req.provenance) {
                (_, _, false) => Provenance::Off,
                (Some(commit), Some(checkout), true) if req.source == SourceMode::Commit => {
                    Provenance::Attach(Box::new(provenance::Facts::collect(
                        checkout,
                        commit,
                        prepared.source_url.clone(),
                        &req.ci,
                        &added,
                    )))
                }
                (None, _, true) | (_, None, true) => {
                    Provenance::Unattested("the folder is not in a git commit")
                }
                (Some(_), Some(_), true) => Provenance::Unattested(
                    "--source worktree packages the disk, which no commit attests",
                ),
            };
            let published = registry::publish(
                opts,
                Plan {
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
                    provenance,
                },
            )?;
            warnings.extend(published.warnings);
            anomaly = published.anomaly;
            branch = published.branch;
            let blobs = published.push.uploaded_blobs;
            (None, blobs, Some(published.push))
        }
    };
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
        output,
        new_blobs,
        commit: prepared.commit.as_ref().map(|c| c.id.clone()),
        timestamp: prepared.commit.as_ref().map(|c| c.timestamp),
        timestamp_tag,
        anomaly,
        branch_tag: branch,
        push,
        warnings,
    })
}
