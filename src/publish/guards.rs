//! The guards of a registry push, as methods of
//! [`RegistryPush`]: before it tags an image, the prefix's owner (one ref
//! per prefix) and the anomaly check; after it, the guarded branch tag
//! (`--branch-tag`). Where each runs in the push, and how the branch tag
//! meets a racing run, is told once, at [`RegistryPush`].
//!
//! The decisions are [`crate::release::ordering`]'s; the guards read what
//! they need through the push's client (timestamp tags and the commit each
//! image records in `org.opencontainers.image.revision`), once per run
//! through its [`RepoCache`](super::cache::RepoCache), and ask the
//! checkout of its timestamp tag whether one commit descends from another.
//!
//! Both checks before tagging read the same things: one tag listing and
//! the manifests of the prefix's newest tags. The owner check adds reads
//! only when they can tell something: the provenance referrers of the
//! prefix's newest tag, when that tag names another commit than this
//! run's.

use std::cell::RefCell;
use std::time::{Duration, Instant};

use super::Stamp;
use super::cache::{TagImage, revision_in};
use super::registry::RegistryPush;
use super::upload::settle;
use crate::branch_tag::{BranchTag, Change, Unordered};
use crate::error::{Error, Result};
use crate::notice::Notice;
use crate::registry::{Client, TagListError};
use crate::release::channel::Stamped;
use crate::release::ordering::{self, Anomaly, BranchMove, Tagged};

/// The most timestamp tags whose manifests are read for one check.
const MAX_READ: usize = 64;

/// The commit the image under `reference` records, `Ok(None)` when the tag
/// does not exist, `Ok(Some(None))` when the image records none. Always
/// asks the registry (see [`super::cache::RepoCache::image`] for what a
/// run already knows).
pub fn revision_of(client: &Client, reference: &str) -> Result<Option<Option<String>>> {
    Ok(client
        .get_manifest(reference)?
        .map(|m| revision_in(&m.bytes)))
}

/// The prefix of a timestamp tag `PREFIX-<ts>-<sha7>` (the tag itself
/// for any other tag).
pub fn prefix_of(timestamp_tag: &str) -> &str {
    crate::tag::timestamp_prefix(timestamp_tag).unwrap_or(timestamp_tag)
}

impl RegistryPush<'_> {
    /// Step 2 of the push: with a timestamp tag, the tag list, what the
    /// guards read side by side ([`Self::read_ahead`]), the prefix's
    /// owner and the anomaly check. A prefix another ref publishes under
    /// is an error. A list the registry refuses (an HTTP error: some push
    /// credentials may not list) or an image that cannot be read is a
    /// warning (in `warnings`), and no anomaly. A list the registry
    /// answers with something that is not a tag list (not JSON, past a
    /// bound, a `Link` loop) stops the push here, before anything is
    /// written: the checks cannot be made on it, and the branch tag's
    /// read-back would fail on it after the image was published.
    pub(super) fn check_before_tagging(
        &mut self,
        warnings: &mut Vec<Notice>,
    ) -> Result<Option<Anomaly>> {
        if self.publication.stamp.is_none() {
            return Ok(None);
        }
        // One read serves both checks.
        let listed = match self.cache.tags_or_why(&self.client) {
            Ok(_) => Ok(()),
            Err(TagListError::NotListed(e)) => Err(e),
            Err(TagListError::Unreadable(e)) => return Err(nothing_pushed(e)),
        };
        let checked = match listed {
            Ok(()) => {
                self.read_ahead();
                if let Some(w) = self.check_prefix_owner()? {
                    warnings.push(w);
                }
                self.check_anomaly()
            }
            Err(e) => Err(e),
        };
        Ok(checked.unwrap_or_else(|e| {
            warnings.push(Notice::AnomaliesUnchecked { cause: e.text() });
            None
        }))
    }

    /// Reads side by side what the run then reads one by one, the ones its
    /// tag list holds (see [`super::cache::RepoCache::read_all`]): the
    /// images of the timestamp tags [`Self::check_anomaly`] and
    /// [`Self::check_prefix_owner`] look at, of the branch tag
    /// [`Self::plan_branch`] looks at, and the referrers index of the
    /// image, which the provenance looks at unless the push turns out to
    /// create the image. Nothing without a timestamp tag or before the tag
    /// list was read.
    pub fn read_ahead(&mut self) {
        let Some(stamp) = self.publication.stamp else {
            return;
        };
        let Some(tags) = self.cache.listed() else {
            return;
        };
        let mut want: Vec<String> = ordering::relevant(prefix_of(stamp.tag), stamp.time(), tags)
            .into_iter()
            .take(MAX_READ)
            .map(|s| s.tag)
            .collect();
        if let Some(b) = self.publication.branch_tag
            && self.cache.lists(b) == Some(true)
            && !want.iter().any(|t| t == b)
        {
            want.push(b.to_string());
        }
        if matches!(self.publication.provenance, super::Provenance::Attach(_)) {
            let tag = crate::image::artifact::referrers_tag(&self.publication.image.digest);
            if self.cache.lists(&tag) == Some(true) {
                want.push(tag);
            }
        }
        want.retain(|t| self.cache.known(t).is_none());
        self.cache.read_all(&self.client, &want);
    }

    /// Reads the revision of each of `stamped` (tags of a tag list, at most
    /// [`MAX_READ`]), each at most once per run.
    fn tagged(&mut self, stamped: Vec<Stamped>) -> Result<Vec<Tagged>> {
        let mut out = Vec::new();
        for s in stamped.into_iter().take(MAX_READ) {
            // A tag deleted between listing and reading is simply gone.
            if let Some(image) = self.cache.listed_image(&self.client, &s.tag)? {
                out.push(Tagged {
                    stamped: s,
                    revision: image.revision,
                });
            }
        }
        Ok(out)
    }

    /// The timestamp tags of the stamp's prefix that the checks before
    /// tagging compare with (see [`ordering::relevant`]), with the commit
    /// each image records.
    fn relevant(&mut self, stamp: Stamp<'_>) -> Result<Vec<Tagged>> {
        let relevant = ordering::relevant(
            prefix_of(stamp.tag),
            stamp.time(),
            self.cache.tags(&self.client)?,
        );
        self.tagged(relevant)
    }

    /// Checks the push of the stamp's commit under its timestamp tag
    /// against the repository's timestamp tags of the same prefix (see
    /// [`ordering::check`]), knowing whether the push event rewrote the
    /// branch. `None` without a timestamp tag.
    pub fn check_anomaly(&mut self) -> Result<Option<Anomaly>> {
        let Some(stamp) = self.publication.stamp else {
            return Ok(None);
        };
        let existing = self.relevant(stamp)?;
        ordering::check(
            &stamp.commit.id,
            stamp.time(),
            stamp.tag,
            &existing,
            self.publication.forced.as_ref(),
            |a, d| stamp.checkout.is_ancestor(a, d),
        )
    }

    /// Refuses ([`Error::PrefixShared`]) the push of the stamp's commit
    /// under its timestamp tag when the prefix's newest tag (the one Flux
    /// serves) names another commit and its provenance says another ref
    /// than this run's published it: the ImagePolicy for the prefix would
    /// follow both refs. The tags and their images come from the cache
    /// (what the anomaly check reads anyway); the newest tag's provenance
    /// referrers are read only then (one request, the referrers tag's
    /// index or the referrers API as the tag list says; the statement too
    /// for a referrer written before the ref annotation existed). Returns
    /// a warning when the question cannot be answered (the referrers
    /// cannot be read); nothing without a timestamp tag, when this run's
    /// ref is unknown, the tag has no provenance, or one ref is a pull
    /// request's and the other a branch's.
    pub fn check_prefix_owner(&mut self) -> Result<Option<Notice>> {
        let publication = self.publication;
        let (Some(stamp), Some(ours)) = (publication.stamp, publication.git_ref.as_deref()) else {
            return Ok(None);
        };
        let existing = self.relevant(stamp)?;
        let Some(newest) = existing
            .iter()
            .max_by(|a, b| crate::release::channel::flux_cmp(&a.stamped, &b.stamped))
        else {
            return Ok(None);
        };
        if newest.stamped.tag == stamp.tag
            || newest.revision.as_deref() == Some(stamp.commit.id.as_str())
        {
            return Ok(None);
        }
        let Some(Some(image)) = self.cache.known(&newest.stamped.tag).map(|n| n.cloned()) else {
            return Ok(None);
        };
        // The tag list already says whether the referrers tag schema holds
        // an index for the image: one request either way.
        let listed = self
            .cache
            .lists(&crate::image::artifact::referrers_tag(&image.digest));
        let refs = match crate::provenance::refs_of(&self.client, &image.digest, listed) {
            Ok(r) => r,
            Err(e) => {
                return Ok(Some(Notice::PrefixOwnerUnknown {
                    tag: newest.stamped.tag.clone(),
                    cause: e.text(),
                }));
            }
        };
        if refs.is_empty() || refs.iter().any(|r| same_ref(r, ours) != Some(false)) {
            return Ok(None);
        }
        Err(Error::PrefixShared {
            prefix: prefix_of(&newest.stamped.tag).to_string(),
            tag: format!("{}:{}", self.client.repository(), newest.stamped.tag),
            suggestion: free_prefix(ours, prefix_of(stamp.tag), self.cache.tags(&self.client)?),
            theirs: refs.join(", "),
            ours: ours.to_string(),
        })
    }
}

/// A branch tag put by [`RegistryPush::put_branch`], to be read back by
/// [`RegistryPush::finish_branch`] once a racing run's put has had time to
/// land (work done in between, such as the provenance, shortens the wait).
#[derive(Debug)]
pub struct Moving {
    report: BranchTag,
    /// When our put ended, and how long to let a racing put land after
    /// it; `None` when nothing was put.
    put: Option<(Instant, Duration)>,
    /// Nothing to read back (kept newer, or rewound on purpose).
    done: bool,
    /// The pushed manifest's digest.
    digest: String,
}

impl Moving {
    /// Whether this run put the branch tag.
    pub fn wrote(&self) -> bool {
        self.put.is_some()
    }

    /// The branch tag's name.
    pub fn name(&self) -> &str {
        &self.report.name
    }
}

impl RegistryPush<'_> {
    /// Step 3 of the push: decides, before anything is pushed, whether the
    /// branch tag may move to the stamp's commit; a diverged history is
    /// refused ([`Error::Rewind`]) unless the publication allows a rewind.
    /// After a force-push that the event proves dropped the tagged commit,
    /// the tag follows the rewritten branch; when the drop is not proven,
    /// it moves back only with a rewind allowed, and is kept otherwise.
    /// `None` without a branch tag or a timestamp tag.
    pub fn plan_branch(&mut self) -> Result<Option<BranchMove>> {
        let (Some(name), Some(stamp)) = (self.publication.branch_tag, self.publication.stamp)
        else {
            return Ok(None);
        };
        let allow_rewind = self.publication.allow_rewind;
        let commit = &stamp.commit.id;
        let current = self.cache.image(&self.client, name)?.map(|n| n.revision);
        let plan = ordering::branch_move(
            commit,
            current.as_ref().map(|c| c.as_deref()),
            self.publication.forced.as_ref(),
            |a, d| stamp.checkout.is_ancestor(a, d),
        )?;
        if let BranchMove::Rewound {
            current,
            proven: false,
        } = &plan
            && !allow_rewind
        {
            return Ok(Some(BranchMove::KeepNewer {
                current: current.clone(),
            }));
        }
        if let BranchMove::Diverged { current } = &plan
            && !allow_rewind
        {
            return Err(Error::Rewind {
                tag: format!("{}:{name}", self.client.repository()),
                current: current
                    .clone()
                    .unwrap_or_else(|| "no commit (the image has no revision annotation)".into()),
                new: commit.to_string(),
            });
        }
        Ok(Some(plan))
    }

    /// The first half of step 7: puts the branch tag on the pushed image as
    /// `plan` (from [`Self::plan_branch`]) allows.
    pub fn put_branch(&mut self, plan: Option<BranchMove>) -> Result<Option<Moving>> {
        let (Some(plan), Some(name), Some(stamp)) =
            (plan, self.publication.branch_tag, self.publication.stamp)
        else {
            return Ok(None);
        };
        let manifest = &self.publication.image.manifest;
        let commit = &stamp.commit.id;
        let digest = crate::image::sha256_digest(manifest);
        let mut moving = Moving {
            report: BranchTag {
                name: name.to_string(),
                commit: Some(commit.to_string()),
                recorded: Some(commit.to_string()),
                repaired_to: None,
                change: Change::of(&plan, self.publication.forced.is_some()),
                unordered: None,
            },
            put: None,
            done: false,
            digest: digest.clone(),
        };
        let put = match &plan {
            BranchMove::KeepNewer { current } => {
                moving.report.recorded = Some(current.clone());
                moving.done = true;
                return Ok(Some(moving));
            }
            // Same commit; rewrite only when the bytes differ (the plan read
            // what the tag names).
            BranchMove::Same => {
                self.cache.image(&self.client, name)?.map(|n| n.digest) != Some(digest.clone())
            }
            // Moved back on purpose: the tagged descendants are the commits
            // the force-push dropped, so no repair follows them.
            BranchMove::Rewound { .. } => {
                moving.done = true;
                true
            }
            _ => true,
        };
        if put {
            let started = Instant::now();
            self.client
                .put_manifest(name, manifest, crate::image::MANIFEST_MEDIA_TYPE)?;
            let image = TagImage {
                digest,
                revision: Some(commit.to_string()),
            };
            self.cache.remember(name, Some(image));
            moving.put = Some((Instant::now(), settle(started.elapsed())));
        }
        Ok(Some(moving))
    }

    /// The second half of step 7: after our put (once a racing run's put
    /// still in the registry's hands has had time to land), lists the tags
    /// again and, when the list holds a timestamp tag of another commit
    /// that a repair could follow, reads what the branch tag names and
    /// repairs a racing run's backwards move. Without a put of ours there
    /// is nothing to read back or repair (a racing run reads back its own
    /// put).
    pub fn finish_branch(&mut self, moving: Option<Moving>) -> Result<Option<BranchTag>> {
        let (Some(moving), Some(stamp)) = (moving, self.publication.stamp) else {
            return Ok(None);
        };
        let Moving {
            mut report,
            put,
            done,
            digest,
        } = moving;
        if done {
            return Ok(Some(report));
        }
        let prefix = prefix_of(stamp.tag);
        let ours =
            crate::release::channel::parse(prefix, stamp.tag).map_or_else(|| 0.into(), |s| s.ts);
        let before: Option<Vec<String>> = self.cache.listed().map(<[String]>::to_vec);
        // Nothing written: no racing run can have been overwritten by this
        // one, so there is nothing to repair. (Repairing anyway would follow
        // a tagged descendant that a force-push dropped: after a rewind, a
        // re-run of the rewound commit's job would move the tag forward to
        // the dropped commit again.)
        let Some((ended, settle)) = put else {
            return Ok(Some(report));
        };
        // Let a racing put land, then read back: a racing run may have tagged
        // a newer commit, or moved the tag after us.
        std::thread::sleep(settle.saturating_sub(ended.elapsed()));
        let tags = self.client.list_tags()?;
        // The tags a repair may follow: the ones at least as new as ours (the
        // anomaly check read those) and the ones a racing run made since the
        // list was read. An older tag that was already there is not a racing
        // run's, and Flux never picks it over ours.
        let mut stamped: Vec<Stamped> = tags
            .iter()
            .filter_map(|t| crate::release::channel::parse(prefix, t))
            .filter(|s| s.ts >= ours || before.as_ref().is_none_or(|b| !b.contains(&s.tag)))
            .collect();
        stamped.sort_by(|a, b| b.ts.cmp(&a.ts).then_with(|| b.tag.cmp(&a.tag)));
        let tagged = self.tagged(stamped)?;
        self.repair_branch(stamp, &mut report, &digest, &tagged)?;
        Ok(Some(report))
    }

    /// Moves the branch tag of `report` on to the newest tagged descendant
    /// in `tagged` when a racing run left it behind; `digest` is what our
    /// put wrote. A repair never moves the tag to our own commit: without
    /// a tag of another commit there is none, whatever the tag names now,
    /// so it is not asked. (A racing run that put the tag after us reads
    /// its own put back, and sees our newer tag then; a rewind on purpose
    /// is not undone either way.) The report keeps the commit this run
    /// put. Ordering here is best effort: a commit pushed by a racing run
    /// is often not in this checkout, and without the GitHub API it cannot
    /// be ordered; such a commit counts as "not a descendant" and a
    /// warning says so.
    fn repair_branch(
        &mut self,
        stamp: Stamp<'_>,
        report: &mut BranchTag,
        digest: &str,
        tagged: &[Tagged],
    ) -> Result<()> {
        let name = report.name.clone();
        let commit = report.commit.clone().unwrap_or_default();
        if !tagged
            .iter()
            .any(|t| t.revision.as_ref().is_some_and(|r| r != &commit))
        {
            return Ok(());
        }
        let unknown: RefCell<Vec<String>> = RefCell::default();
        let lenient = |a: &str, d: &str| -> Result<bool> {
            match stamp.checkout.is_ancestor(a, d) {
                Ok(yes) => Ok(yes),
                Err(e) => {
                    unknown.borrow_mut().push(e.to_string());
                    Ok(false)
                }
            }
        };
        let head = self.client.head_manifest(&name)?;
        let now = match head.map(|d| d.digest) {
            None => None,
            Some(d) if d == digest => Some(commit.clone()),
            Some(d) => match self.cache.revision_of_digest(&d) {
                Some(rev) => rev,
                None => revision_of(&self.client, &name)?.flatten(),
            },
        };
        let base = match &now {
            Some(rev) if rev != &commit && lenient(&commit, rev)? => rev.clone(),
            _ => commit.clone(),
        };
        if let Some(tip) = ordering::repair_target(&base, tagged, &lenient)?
            && tip.revision != now
            && let Some(m) = self.client.get_manifest(&tip.stamped.tag)?
        {
            self.client.put_manifest(&name, &m.bytes, &m.media_type)?;
            report.repaired_to = Some(tip.stamped.tag.clone());
            report.recorded = tip.revision.clone();
        } else if now.as_deref() != Some(commit.as_str()) {
            report.recorded = now;
        }
        let unknown = unknown.into_inner();
        if let Some(first) = unknown.first() {
            report.unordered = Some(Unordered {
                count: unknown.len(),
                first: first.clone(),
            });
        }
        Ok(())
    }
}

/// An unreadable tag list, before anything was written: the error says so.
fn nothing_pushed(e: Error) -> Error {
    let before = "nothing was pushed: the push checks the existing tags before it writes \
                  anything, and cannot trust this list";
    match e {
        Error::Registry {
            reference,
            what,
            message,
            hint,
        } => Error::Registry {
            reference,
            what,
            message: format!("{message}; {before}"),
            hint,
        },
        other => other,
    }
}

/// Which branch (or tag, or pull request) a git ref stands for when two
/// runs are compared: `refs/pull/N/merge` and `refs/pull/N/head` are the
/// same pull request. `None` for a pull request's ref compared with a
/// branch's: the ref names the pull request, not its head branch, so
/// whether they are one line of commits cannot be told.
fn same_ref(a: &str, b: &str) -> Option<bool> {
    let pull = |r: &str| {
        r.strip_prefix("refs/pull/")
            .and_then(|rest| rest.split('/').next())
            .map(str::to_string)
    };
    match (pull(a), pull(b)) {
        (Some(x), Some(y)) => Some(x == y),
        (None, None) => Some(a == b),
        _ => None,
    }
}

/// The short name of a ref for a prefix: `refs/heads/X` and `refs/tags/X`
/// give `X`, `refs/pull/N/...` gives `pr-N`.
fn ref_name(r: &str) -> String {
    if let Some(rest) = r.strip_prefix("refs/pull/") {
        return format!("pr-{}", rest.split('/').next().unwrap_or(rest));
    }
    r.strip_prefix("refs/heads/")
        .or_else(|| r.strip_prefix("refs/tags/"))
        .unwrap_or(r)
        .to_string()
}

/// A prefix for `our_ref` that no tag of the repository uses and that is
/// not `taken`: [`crate::tag::unique_prefix`] of the ref's short name,
/// else of the whole ref, else either with a number.
fn free_prefix(our_ref: &str, taken: &str, tags: &[String]) -> String {
    let used = |p: &str| {
        p == taken
            || tags
                .iter()
                .any(|t| crate::tag::timestamp_prefix(t) == Some(p) || t.as_str() == p)
    };
    let short = ref_name(our_ref);
    let bases: Vec<String> = [short.as_str(), our_ref.trim_start_matches("refs/")]
        .iter()
        .filter_map(|n| crate::tag::unique_prefix(n))
        .collect();
    for b in &bases {
        if !used(b) {
            return b.clone();
        }
    }
    let base = bases.first().cloned().unwrap_or_else(|| "ref".to_string());
    let base = &base[..base.len().min(crate::tag::MAX_PREFIX_LEN - 4)];
    (2..1000)
        .map(|n| format!("{base}-r{n}"))
        .find(|p| !used(p))
        .unwrap_or_else(|| format!("{base}-r1000"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes() {
        assert_eq!(prefix_of("main-1700000000-abcdef0"), "main");
        assert_eq!(prefix_of("feature-x-1-abcdef0"), "feature-x");
    }
}
