//! Forward-only checks for `push`, as pure decisions over what the registry
//! holds (timestamp tags with the commit each image records) and an
//! ancestry oracle (local git history, or GitHub's compare API on a shallow
//! clone). The registry I/O lives in `publish`, the ancestry in
//! `history`; this module only decides.
//!
//! - [`check`] finds the anomalies Flux's numerical policy cannot see
//!   through: two commits with the same timestamp, a timestamp that went
//!   backwards (below a tagged ancestor, or below the prefix's highest tag
//!   after history was rewritten), a re-run of an old job, and a
//!   force-push that rewound the branch to an ancestor of what Flux serves.
//!   A re-run and a rewind look the same in the registry (the new commit is
//!   an ancestor of the newest tagged one); only the push event tells them
//!   apart (`forced: true` and the branch's previous head `before`), so the
//!   front end passes that along as a [`ForcedPush`].
//! - [`branch_move`] decides whether a moving branch tag (`--branch-tag`)
//!   may follow the new image, and [`repair_target`] where it should point
//!   after racing runs.

use serde::Serialize;

use super::channel::{self, Stamped};
use crate::error::Result;

/// A timestamp tag in the registry and the commit its image records
/// (`org.opencontainers.image.revision`, `None` when the image has none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tagged {
    /// The parsed tag.
    pub stamped: Stamped,
    /// The full commit id the image records.
    pub revision: Option<String>,
}

/// The kind of an [`Anomaly`], as `--json` spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AnomalyKind {
    /// Another tag has the same timestamp and a different commit: Flux
    /// serves the alphabetically smallest of them.
    SameTimestamp,
    /// The new timestamp is lower than that of a tagged ancestor.
    BackwardsTimestamp,
    /// The new commit is an ancestor of the newest tagged one. Flux keeps
    /// serving that one, unless both have the same second and the new tag
    /// sorts first: then Flux moves to the older commit.
    RerunOfOlder,
    /// A force-push rewound the branch to an ancestor of the newest tagged
    /// commit, which the branch no longer has: Flux keeps serving it, unless
    /// both have the same second and the new tag sorts first.
    RewoundHistory,
}

impl AnomalyKind {
    /// The kebab-case name (`same-timestamp`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            AnomalyKind::SameTimestamp => "same-timestamp",
            AnomalyKind::BackwardsTimestamp => "backwards-timestamp",
            AnomalyKind::RerunOfOlder => "rerun-of-older",
            AnomalyKind::RewoundHistory => "rewound-history",
        }
    }
}

/// Something about this push that Flux's numerical policy gets wrong or
/// that the user should know, as values: each face words it from
/// [`Anomaly::case`] (`crate::show::anomaly`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anomaly {
    /// What kind.
    pub kind: AnomalyKind,
    /// The facts its message states.
    pub case: Case,
    /// The tag Flux serves after this push (the pick of its numerical
    /// policy over the prefix's tags and this one): the tag the message
    /// names as served.
    pub served: String,
    /// The other tag involved.
    pub other_tag: String,
}

/// The facts of an [`Anomaly`], one variant per case [`check`] tells
/// apart. Every case has the pushed commit's full id or tag, its
/// committer time `ts` and its tag `new_tag`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Case {
    /// A force-push (the branch named `before`) dropped `rev`, the newest
    /// tagged commit (`newest`), going back to its ancestor `commit`.
    /// `moves_to_new`: the new tag has `newest`'s second and sorts first.
    Rewound {
        /// The pushed commit.
        commit: String,
        /// Its committer time.
        ts: u64,
        /// Its tag.
        new_tag: String,
        /// The newest tag, whose commit was dropped.
        newest: Stamped,
        /// The commit `newest` names.
        rev: String,
        /// The branch's head before the force-push.
        before: String,
        /// Flux moves to the new tag.
        moves_to_new: bool,
    },
    /// `commit` is an ancestor of `rev`, already published as `newest`: a
    /// re-run of an older job.
    Rerun {
        /// The pushed commit.
        commit: String,
        /// Its committer time.
        ts: u64,
        /// Its tag.
        new_tag: String,
        /// The newest tag, a descendant's.
        newest: Stamped,
        /// The commit `newest` names.
        rev: String,
        /// Flux moves to the new tag.
        moves_to_new: bool,
    },
    /// The committer time is lower than that of the tagged ancestor
    /// `ancestor`; Flux keeps serving [`Anomaly::served`].
    BelowAncestor {
        /// The pushed commit.
        commit: String,
        /// Its committer time.
        ts: u64,
        /// Its tag.
        new_tag: String,
        /// The ancestor's tag.
        ancestor: Stamped,
    },
    /// The committer time is lower than that of the prefix's highest tag
    /// `newest`, whose commit `revision` is not in this history.
    BelowOffHistory {
        /// The pushed commit.
        commit: String,
        /// Its committer time.
        ts: u64,
        /// Its tag.
        new_tag: String,
        /// The highest tag.
        newest: Stamped,
        /// The commit its image records.
        revision: Option<String>,
        /// The branch's head before a force-push, when the push event says so.
        forced_before: Option<String>,
    },
    /// Other commits' tags `names` have the same second; the new tag sorts
    /// first and Flux serves it. `older`: a same-second tag whose commit
    /// descends from this one.
    SameSecondServesNew {
        /// Its committer time.
        ts: u64,
        /// Its tag.
        new_tag: String,
        /// The other tags of that second.
        names: Vec<String>,
        /// A descendant's tag among them.
        older: Option<String>,
    },
    /// Another commit's tag `served` has the same second and sorts first:
    /// Flux serves it. `newer`: its commit, when this one descends from it.
    SameSecondServesOther {
        /// Its committer time.
        ts: u64,
        /// Its tag.
        new_tag: String,
        /// The 7 hex characters of the pushed commit.
        sha7: String,
        /// The tag Flux serves.
        served: Stamped,
        /// Its commit, when this one descends from it.
        newer: Option<String>,
    },
}

impl Anomaly {
    /// Whether Flux serves `new_tag` (this push's) after the push.
    pub fn serves(&self, new_tag: &str) -> bool {
        self.served == new_tag
    }
}

/// A push that rewrote the branch: GitHub's push event with `forced: true`.
/// `before` is the commit the branch named until then; the commits between
/// the new head and `before` are no longer on the branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForcedPush {
    /// The branch's previous head (the payload's `before`), a full commit id.
    pub before: String,
}

impl ForcedPush {
    /// Whether the push event proves that the force-push dropped `commit`:
    /// it is `before`, or ancestry shows it is one of `before`'s ancestors.
    /// Unlike [`Self::dropped`], an unanswered ancestry question proves
    /// nothing.
    fn proves_dropped(
        &self,
        commit: &str,
        is_ancestor: &mut impl FnMut(&str, &str) -> Result<bool>,
    ) -> bool {
        commit == self.before || is_ancestor(commit, &self.before).unwrap_or(false)
    }

    /// Whether the force-push dropped `commit` from the branch: it is
    /// `before` or one of its ancestors (and, as the callers ask only about
    /// commits that descend strictly from the new head, not on the branch
    /// any more). When the ancestry cannot be told (`before` is usually
    /// gone from a fresh clone and no GitHub API answers), the payload's
    /// word wins: the commit is taken as dropped.
    fn dropped(
        &self,
        commit: &str,
        is_ancestor: &mut impl FnMut(&str, &str) -> Result<bool>,
    ) -> bool {
        commit == self.before || is_ancestor(commit, &self.before).unwrap_or(true)
    }
}

/// The most ancestry questions [`check`] asks for the backwards case.
const MAX_ANCESTRY_CHECKS: usize = 16;

/// The tags [`check`] needs revisions for: the newest one (Flux's pick) and
/// every tag whose timestamp is not lower than `ts`. `tags` are all tags of
/// the repository; those not of `prefix` are ignored.
pub fn relevant<'a>(
    prefix: &str,
    ts: u64,
    tags: impl IntoIterator<Item = &'a String>,
) -> Vec<Stamped> {
    let stamped: Vec<Stamped> = tags
        .into_iter()
        .filter_map(|t| channel::parse(prefix, t))
        .collect();
    let newest = channel::highest(prefix, stamped.iter().map(|s| &s.tag));
    let mut out: Vec<Stamped> = stamped.into_iter().filter(|s| s.ts >= ts).collect();
    if let Some(n) = newest
        && !out.contains(&n)
    {
        out.push(n);
    }
    out.sort_by(|a, b| channel::flux_cmp(b, a));
    out
}

/// Checks a push of `commit` (full id) at committer time `ts` under
/// `new_tag` against the `existing` timestamp tags of the same prefix
/// (see [`relevant`]). `forced` is set when the push event rewrote the
/// branch. `is_ancestor(a, d)` answers whether commit `a` is an ancestor of
/// (or equal to) `d`. At most one anomaly is reported, the first of:
/// rewound history or re-run of an older commit (the newest tagged commit
/// descends from this one; a rewind when a force-push dropped it),
/// backwards timestamp (below a tagged ancestor, else below the prefix's
/// highest tag, which Flux keeps serving either way), same timestamp.
/// Every anomaly's message (`crate::show::anomaly`) names the tag Flux
/// serves after this push ([`Anomaly::served`], Flux's pick over
/// `existing` and `new_tag`, [`channel::flux_cmp`]): for a re-run or
/// a rewind that is the newest tag, or this commit's when it has the same
/// second and sorts first, and then the message says Flux moves to the
/// older commit.
pub fn check(
    commit: &str,
    ts: u64,
    new_tag: &str,
    existing: &[Tagged],
    forced: Option<&ForcedPush>,
    mut is_ancestor: impl FnMut(&str, &str) -> Result<bool>,
) -> Result<Option<Anomaly>> {
    let sha7 = commit.get(..7).unwrap_or(commit);
    let others: Vec<&Tagged> = existing
        .iter()
        .filter(|t| t.stamped.tag != new_tag && t.revision.as_deref() != Some(commit))
        .collect();
    // (c) The newest tagged commit (the tag Flux serves) descends from
    // this one: a re-run, or a force-push back to an ancestor.
    let newest = existing
        .iter()
        .max_by(|a, b| channel::flux_cmp(&a.stamped, &b.stamped));
    if let Some(n) = newest
        && n.stamped.tag != new_tag
        && let Some(rev) = &n.revision
        && rev != commit
        && is_ancestor(commit, rev)?
    {
        return Ok(Some(descendant_published(
            commit,
            ts,
            new_tag,
            n,
            rev,
            forced,
            &mut is_ancestor,
        )));
    }
    // (b) A tagged ancestor with a higher timestamp: Flux keeps it.
    if let Some(anomaly) =
        higher_tagged_ancestor(commit, ts, new_tag, &others, newest, &mut is_ancestor)?
    {
        return Ok(Some(anomaly));
    }
    // (b') No tagged ancestor is higher, but the prefix's highest tag is:
    // its commit is not in this history (a force-push to a new line of
    // commits). Flux orders numbers, not history, and keeps serving it.
    if let Some(n) = newest
        && n.stamped.ts > ts
        && n.stamped.tag != new_tag
        && n.revision.as_deref() != Some(commit)
    {
        return Ok(Some(higher_tag_off_history(commit, ts, new_tag, n, forced)));
    }
    // (a) The same second, another commit: Flux serves the alphabetically
    // smallest of the tags with that time (every other tag is lower here).
    Ok(same_second(
        commit,
        sha7,
        ts,
        new_tag,
        &others,
        &mut is_ancestor,
    ))
}

/// Check (c) once the newest tagged commit `n` (at `rev`) is known to
/// descend from `commit`: a rewind when a force-push dropped `rev`, else a
/// re-run of an older commit.
fn descendant_published(
    commit: &str,
    ts: u64,
    new_tag: &str,
    n: &Tagged,
    rev: &str,
    forced: Option<&ForcedPush>,
    is_ancestor: &mut impl FnMut(&str, &str) -> Result<bool>,
) -> Anomaly {
    let sha7 = commit.get(..7).unwrap_or(commit);
    // Flux's pick after this push: the new tag when it has the newest
    // tag's second and sorts first.
    let moves_to_new = n.stamped.ts == ts && sha7 < n.stamped.sha7.as_str();
    let served = if moves_to_new {
        new_tag.to_string()
    } else {
        n.stamped.tag.clone()
    };
    if let Some(f) = forced
        && f.dropped(rev, is_ancestor)
    {
        return Anomaly {
            kind: AnomalyKind::RewoundHistory,
            case: Case::Rewound {
                commit: commit.to_string(),
                ts,
                new_tag: new_tag.to_string(),
                newest: n.stamped.clone(),
                rev: rev.to_string(),
                before: f.before.clone(),
                moves_to_new,
            },
            served,
            other_tag: n.stamped.tag.clone(),
        };
    }
    Anomaly {
        kind: AnomalyKind::RerunOfOlder,
        case: Case::Rerun {
            commit: commit.to_string(),
            ts,
            new_tag: new_tag.to_string(),
            newest: n.stamped.clone(),
            rev: rev.to_string(),
            moves_to_new,
        },
        served,
        other_tag: n.stamped.tag.clone(),
    }
}

/// Check (b): one of the `others` with a higher timestamp than `ts` is a
/// tagged ancestor of `commit` (at most [`MAX_ANCESTRY_CHECKS`] asked).
fn higher_tagged_ancestor(
    commit: &str,
    ts: u64,
    new_tag: &str,
    others: &[&Tagged],
    newest: Option<&Tagged>,
    is_ancestor: &mut impl FnMut(&str, &str) -> Result<bool>,
) -> Result<Option<Anomaly>> {
    let mut asked = 0;
    for t in others.iter().filter(|t| t.stamped.ts > ts) {
        let Some(rev) = &t.revision else { continue };
        if asked >= MAX_ANCESTRY_CHECKS {
            break;
        }
        asked += 1;
        if is_ancestor(rev, commit)? {
            // The newest tag is at least as high: Flux keeps it.
            let kept = newest.map_or(&t.stamped.tag, |n| &n.stamped.tag);
            return Ok(Some(Anomaly {
                kind: AnomalyKind::BackwardsTimestamp,
                case: Case::BelowAncestor {
                    commit: commit.to_string(),
                    ts,
                    new_tag: new_tag.to_string(),
                    ancestor: t.stamped.clone(),
                },
                served: kept.clone(),
                other_tag: t.stamped.tag.clone(),
            }));
        }
    }
    Ok(None)
}

/// Check (b'): the prefix's highest tag `n` is above `ts` and its commit is
/// not in this commit's history.
fn higher_tag_off_history(
    commit: &str,
    ts: u64,
    new_tag: &str,
    n: &Tagged,
    forced: Option<&ForcedPush>,
) -> Anomaly {
    Anomaly {
        kind: AnomalyKind::BackwardsTimestamp,
        case: Case::BelowOffHistory {
            commit: commit.to_string(),
            ts,
            new_tag: new_tag.to_string(),
            newest: n.stamped.clone(),
            revision: n.revision.clone(),
            forced_before: forced.map(|f| f.before.clone()),
        },
        served: n.stamped.tag.clone(),
        other_tag: n.stamped.tag.clone(),
    }
}

/// Check (a): another commit among `others` has the same second `ts`;
/// Flux serves the alphabetically smallest tag of that second.
fn same_second(
    commit: &str,
    sha7: &str,
    ts: u64,
    new_tag: &str,
    others: &[&Tagged],
    is_ancestor: &mut impl FnMut(&str, &str) -> Result<bool>,
) -> Option<Anomaly> {
    let same: Vec<&&Tagged> = others
        .iter()
        .filter(|t| t.stamped.ts == ts && t.stamped.sha7 != sha7)
        .collect();
    let smallest = same
        .iter()
        .min_by(|a, b| a.stamped.tag.cmp(&b.stamped.tag))?;
    if new_tag < smallest.stamped.tag.as_str() {
        let names: Vec<String> = same.iter().map(|t| t.stamped.tag.clone()).collect();
        // A same-second descendant (not the newest tag, or (c) would have
        // answered): Flux moves from it to this older commit.
        let older = same
            .iter()
            .take(MAX_ANCESTRY_CHECKS)
            .find(|t| {
                t.revision
                    .as_ref()
                    .is_some_and(|rev| is_ancestor(commit, rev).unwrap_or(false))
            })
            .map(|t| t.stamped.tag.clone());
        return Some(Anomaly {
            kind: AnomalyKind::SameTimestamp,
            case: Case::SameSecondServesNew {
                ts,
                new_tag: new_tag.to_string(),
                names,
                older,
            },
            served: new_tag.to_string(),
            other_tag: smallest.stamped.tag.clone(),
        });
    }
    let served = &smallest.stamped;
    let newer = smallest
        .revision
        .as_ref()
        .filter(|rev| matches!(is_ancestor(rev, commit), Ok(true)))
        .cloned();
    Some(Anomaly {
        kind: AnomalyKind::SameTimestamp,
        case: Case::SameSecondServesOther {
            ts,
            new_tag: new_tag.to_string(),
            sha7: sha7.to_string(),
            served: served.clone(),
            newer,
        },
        served: served.tag.clone(),
        other_tag: served.tag.clone(),
    })
}

/// What `--branch-tag` does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BranchMove {
    /// The tag does not exist yet: create it.
    Create,
    /// The new commit descends from the tagged one: move it forward.
    Forward,
    /// The tag already names this commit.
    Same,
    /// The new commit is an ancestor of the tagged one (a re-run of an
    /// older job): leave the tag.
    KeepNewer {
        /// The commit the tag records.
        current: String,
    },
    /// A force-push dropped the tagged commit from the branch, and the new
    /// commit is an ancestor of it or on the rewritten line. When the push
    /// event proves the drop (`proven`: the tagged commit is `before` or
    /// one of its ancestors) the tag follows the rewritten branch; else it
    /// moves only when rewinding is allowed (and is kept, as
    /// [`Self::KeepNewer`], or refused, as [`Self::Diverged`], otherwise).
    Rewound {
        /// The commit the tag records, no longer on the branch.
        current: String,
        /// The push event proves the force-push dropped `current`.
        proven: bool,
    },
    /// Neither descends from the other (history was rewritten), or the
    /// tagged image records no commit: refused unless rewinding is allowed.
    Diverged {
        /// The commit the tag records, if any.
        current: Option<String>,
    },
}

/// Decides whether the branch tag may move from the image recording
/// `current` (`None`: the tag does not exist; `Some(None)`: it exists
/// but records no commit) to `commit`; `forced` when the push event
/// rewrote the branch.
pub fn branch_move(
    commit: &str,
    current: Option<Option<&str>>,
    forced: Option<&ForcedPush>,
    mut is_ancestor: impl FnMut(&str, &str) -> Result<bool>,
) -> Result<BranchMove> {
    let Some(current) = current else {
        return Ok(BranchMove::Create);
    };
    let Some(current) = current else {
        return Ok(BranchMove::Diverged { current: None });
    };
    if current == commit {
        return Ok(BranchMove::Same);
    }
    if is_ancestor(current, commit)? {
        return Ok(BranchMove::Forward);
    }
    if is_ancestor(commit, current)? {
        let current = current.to_string();
        if let Some(f) = forced
            && f.dropped(&current, &mut is_ancestor)
        {
            let proven = f.proves_dropped(&current, &mut is_ancestor);
            return Ok(BranchMove::Rewound { current, proven });
        }
        return Ok(BranchMove::KeepNewer { current });
    }
    // A new line of commits: the tag follows it when the event proves the
    // force-push dropped the tagged commit.
    if let Some(f) = forced
        && f.proves_dropped(current, &mut is_ancestor)
    {
        return Ok(BranchMove::Rewound {
            current: current.to_string(),
            proven: true,
        });
    }
    Ok(BranchMove::Diverged {
        current: Some(current.to_string()),
    })
}

/// After moving the branch tag to `commit`: the tag among `tagged` (the
/// prefix's timestamp tags) it should point to instead, if any. That is the
/// newest descendant of `commit`: a tagged commit that descends from
/// `commit` and from every other such tagged commit (the tip of the
/// forward line). `None` when `commit` is that tip or the descendants
/// diverge (no single tip to move to).
pub fn repair_target<'a>(
    commit: &str,
    tagged: &'a [Tagged],
    mut is_ancestor: impl FnMut(&str, &str) -> Result<bool>,
) -> Result<Option<&'a Tagged>> {
    let mut descendants: Vec<&Tagged> = Vec::new();
    for t in tagged {
        let Some(rev) = &t.revision else { continue };
        if rev == commit || descendants.iter().any(|d| d.revision.as_ref() == Some(rev)) {
            continue;
        }
        if is_ancestor(commit, rev)? {
            descendants.push(t);
        }
    }
    // Newest first by timestamp, so the usual tip is tried first.
    descendants.sort_by_key(|d| std::cmp::Reverse(d.stamped.ts.clone()));
    'candidates: for c in &descendants {
        let Some(crev) = &c.revision else { continue };
        for o in &descendants {
            let Some(orev) = &o.revision else { continue };
            if orev != crev && !is_ancestor(orev, crev)? {
                continue 'candidates;
            }
        }
        return Ok(Some(c));
    }
    Ok(None)
}

#[cfg(test)]
#[path = "ordering_tests.rs"]
mod tests;
