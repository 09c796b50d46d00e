//! Forward-only publishing on a registry: the anomaly check before a push
//! tags an image, and the guarded branch tag (`--branch-tag`) after it.
//! The decisions are [`crate::release::ordering`]'s; this module reads what
//! they need through [`crate::registry::Client`] (timestamp tags and the commit
//! each image records in `org.opencontainers.image.revision`) and asks the
//! run's [`Checkout`] whether one commit descends from another.

use std::cell::RefCell;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::history::Checkout;
use crate::image::ANNOTATION_REVISION;
use crate::image::artifact::ManifestView;
use crate::registry::Client;
use crate::release::channel::Stamped;
use crate::release::ordering::{self, Anomaly, BranchMove, ForcedPush, Tagged};

/// The most timestamp tags whose manifests are read for one check.
const MAX_READ: usize = 64;

/// The commit the image under `reference` records, `Ok(None)` when the tag
/// does not exist, `Ok(Some(None))` when the image records none.
pub fn revision_of(client: &Client, reference: &str) -> Result<Option<Option<String>>> {
    let Some(m) = client.get_manifest(reference)? else {
        return Ok(None);
    };
    let view = ManifestView::parse(&m.bytes).unwrap_or_default();
    Ok(Some(
        view.annotations
            .get(ANNOTATION_REVISION)
            .map(|r| r.to_ascii_lowercase()),
    ))
}

/// Reads the revision of each of `stamped` (at most [`MAX_READ`]).
fn tagged(client: &Client, stamped: Vec<Stamped>) -> Result<Vec<Tagged>> {
    let mut out = Vec::new();
    for s in stamped.into_iter().take(MAX_READ) {
        // A tag deleted between listing and reading is simply gone.
        if let Some(revision) = revision_of(client, &s.tag)? {
            out.push(Tagged {
                stamped: s,
                revision,
            });
        }
    }
    Ok(out)
}

/// The prefix of a timestamp tag `PREFIX-<ts>-<sha7>` (the tag itself
/// for any other tag).
pub fn prefix_of(timestamp_tag: &str) -> &str {
    crate::tag::timestamp_prefix(timestamp_tag).unwrap_or(timestamp_tag)
}

/// Checks a push of `commit` at `ts` under `new_tag` against the
/// repository's timestamp tags of the same prefix (see
/// [`ordering::check`]); `forced` when the push event rewrote the branch.
pub fn check_anomaly(
    client: &Client,
    ancestry: &Checkout,
    commit: &str,
    ts: u64,
    new_tag: &str,
    forced: Option<&ForcedPush>,
) -> Result<Option<Anomaly>> {
    let tags = client.list_tags()?;
    let relevant = ordering::relevant(prefix_of(new_tag), ts, &tags);
    let existing = tagged(client, relevant)?;
    ordering::check(commit, ts, new_tag, &existing, forced, |a, d| {
        ancestry.is_ancestor(a, d)
    })
}

/// What happened to the branch tag, as `--json` and the action's
/// `branch-tag` output spell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BranchOutcome {
    /// The tag did not exist and was made.
    Created,
    /// Moved forward to a descendant.
    Moved,
    /// Already named this commit.
    Unchanged,
    /// Left on a newer commit (a re-run of an older job).
    KeptNewer,
    /// Moved to a commit that does not descend from its old one (allowed
    /// rewind).
    Rewound,
}

impl BranchOutcome {
    /// The kebab-case name (`created`, `kept-newer`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            BranchOutcome::Created => "created",
            BranchOutcome::Moved => "moved",
            BranchOutcome::Unchanged => "unchanged",
            BranchOutcome::KeptNewer => "kept-newer",
            BranchOutcome::Rewound => "rewound",
        }
    }
}

/// What `--branch-tag` did, in the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BranchReport {
    /// The branch tag.
    pub name: String,
    /// What happened.
    pub outcome: BranchOutcome,
    /// The commit the tag's image records after this run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// The timestamp tag whose image the branch tag was moved on to after
    /// a racing run (repair), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repaired_to: Option<String>,
    /// The move decided before the push (for the front end's words; not
    /// in `--json`).
    #[serde(skip)]
    pub plan: BranchMove,
    /// What the user should know (racing runs that could not be ordered).
    #[serde(skip)]
    pub warnings: Vec<String>,
}

/// Decides, before anything is pushed, whether branch tag `name` may move
/// to `commit`; a diverged history is refused ([`Error::Rewind`]) unless
/// `allow_rewind`. After a force-push back to an ancestor (`forced`) the
/// tag moves back only with `allow_rewind`, and is kept otherwise.
pub fn plan_branch(
    client: &Client,
    ancestry: &Checkout,
    name: &str,
    commit: &str,
    allow_rewind: bool,
    forced: Option<&ForcedPush>,
) -> Result<BranchMove> {
    let current = revision_of(client, name)?;
    let plan = ordering::branch_move(
        commit,
        current.as_ref().map(|c| c.as_deref()),
        forced,
        |a, d| ancestry.is_ancestor(a, d),
    )?;
    if let BranchMove::Rewound { current } = &plan
        && !allow_rewind
    {
        return Ok(BranchMove::KeepNewer {
            current: current.clone(),
        });
    }
    if let BranchMove::Diverged { current } = &plan
        && !allow_rewind
    {
        return Err(Error::Rewind {
            tag: format!("{}:{name}", client.repository()),
            current: current
                .clone()
                .unwrap_or_else(|| "no commit (the image has no revision annotation)".into()),
            new: commit.to_string(),
        });
    }
    Ok(plan)
}

/// Moves branch tag `name` to `manifest` (the image manifest just pushed for
/// `commit`, whose timestamp tag is `timestamp_tag`) as `plan` allows, then
/// reads the tag back with the timestamp tags and, when a racing run left
/// it behind the newest descendant, moves it on to that one.
pub fn move_branch(
    client: &Client,
    ancestry: &Checkout,
    name: &str,
    plan: &BranchMove,
    manifest: &[u8],
    commit: &str,
    timestamp_tag: &str,
) -> Result<BranchReport> {
    let outcome = match plan {
        BranchMove::Create => BranchOutcome::Created,
        BranchMove::Forward => BranchOutcome::Moved,
        BranchMove::Same => BranchOutcome::Unchanged,
        BranchMove::KeepNewer { .. } => BranchOutcome::KeptNewer,
        BranchMove::Diverged { .. } | BranchMove::Rewound { .. } => BranchOutcome::Rewound,
    };
    let media_type = crate::image::MANIFEST_MEDIA_TYPE;
    let mut report = BranchReport {
        name: name.to_string(),
        outcome,
        commit: Some(commit.to_string()),
        repaired_to: None,
        plan: plan.clone(),
        warnings: Vec::new(),
    };
    let started = std::time::Instant::now();
    let put = match plan {
        BranchMove::KeepNewer { current } => {
            report.commit = Some(current.clone());
            return Ok(report);
        }
        BranchMove::Same => {
            // Same commit; rewrite only when the bytes differ.
            let now = client.head_manifest(name)?;
            let differs = now.map(|d| d.digest) != Some(crate::image::sha256_digest(manifest));
            if differs {
                client.put_manifest(name, manifest, media_type)?;
            }
            differs
        }
        BranchMove::Rewound { .. } => {
            // Moved back on purpose: the tagged descendants are the commits
            // the force-push dropped, so no repair follows them.
            client.put_manifest(name, manifest, media_type)?;
            return Ok(report);
        }
        _ => {
            client.put_manifest(name, manifest, media_type)?;
            true
        }
    };
    // A racing run's put still in the registry's hands lands within about
    // one put's time: let it, so the read-back below sees it.
    if put {
        std::thread::sleep(super::registry::settle(started.elapsed()));
    }
    // Read back: a racing run may have moved the tag after us. Ordering
    // here is best effort: a commit pushed by a racing run is often not in
    // this checkout, and without the GitHub API it cannot be ordered; such
    // a commit counts as "not a descendant" and a warning says so.
    let unknown: RefCell<Vec<String>> = RefCell::default();
    let lenient = |a: &str, d: &str| -> Result<bool> {
        match ancestry.is_ancestor(a, d) {
            Ok(yes) => Ok(yes),
            Err(e) => {
                unknown.borrow_mut().push(e.to_string());
                Ok(false)
            }
        }
    };
    let now = revision_of(client, name)?.flatten();
    let base = match &now {
        Some(rev) if rev != commit && lenient(commit, rev)? => rev.clone(),
        _ => commit.to_string(),
    };
    let tags = client.list_tags()?;
    let prefix = prefix_of(timestamp_tag);
    let mut stamped: Vec<Stamped> = tags
        .iter()
        .filter_map(|t| crate::release::channel::parse(prefix, t))
        .collect();
    stamped.sort_by(|a, b| b.ts.cmp(&a.ts).then_with(|| b.tag.cmp(&a.tag)));
    let tagged = tagged(client, stamped)?;
    if let Some(tip) = ordering::repair_target(&base, &tagged, &lenient)?
        && tip.revision != now
        && let Some(m) = client.get_manifest(&tip.stamped.tag)?
    {
        client.put_manifest(name, &m.bytes, &m.media_type)?;
        report.repaired_to = Some(tip.stamped.tag.clone());
        report.commit = tip.revision.clone();
    } else if now.as_deref() != Some(commit) {
        report.commit = now;
    }
    let unknown = unknown.into_inner();
    if let Some(first) = unknown.first() {
        report.warnings.push(format!(
            "branch tag {name}: {} tagged commit(s) could not be ordered against this one, so a racing \
             run's newer image may not have been followed ({first}); set GITHUB_REPOSITORY and GITHUB_TOKEN so \
             the GitHub compare API can answer",
            unknown.len()
        ));
    }
    Ok(report)
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
