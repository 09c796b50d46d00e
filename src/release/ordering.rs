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
/// that the user should know; reported in `--json` and on stderr.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Anomaly {
    /// What kind.
    pub kind: AnomalyKind,
    /// What it means and what to do about it.
    pub message: String,
    /// The tag Flux serves after this push (the pick of its numerical
    /// policy over the prefix's tags and this one): the tag the message
    /// names as served.
    pub served: String,
    /// The other tag involved.
    #[serde(skip)]
    pub other_tag: String,
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
/// Every message names the tag Flux serves after this push (Flux's pick
/// over `existing` and `new_tag`, [`channel::flux_cmp`]): for a re-run or
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
            message: rewound_message(commit, ts, new_tag, n, rev, f, moves_to_new),
            served,
            other_tag: n.stamped.tag.clone(),
        };
    }
    let message = if moves_to_new {
        format!(
            "commit {} is an ancestor of {rev}, already published as {} in the same second ({ts}): this is the \
             first run (or a re-run) of an older job after its descendant was published. {TIE_RULE}, and \
             {new_tag} sorts before {}, so after this push Flux serves {new_tag}: Flux moves to the older \
             commit's content and stops serving {}'s newer one (`promote` picks it too). {SETTLE}",
            short(commit),
            n.stamped.tag,
            n.stamped.tag,
            n.stamped.tag
        )
    } else {
        format!(
            "commit {} is an ancestor of {rev}, already published as {}: this is a re-run of an older job \
             (or its first run after a newer commit was published); {new_tag} names this older commit's \
             content and Flux keeps serving {} ({})",
            short(commit),
            n.stamped.tag,
            n.stamped.tag,
            why_kept(&n.stamped, ts, new_tag)
        )
    };
    Anomaly {
        kind: AnomalyKind::RerunOfOlder,
        message,
        served,
        other_tag: n.stamped.tag.clone(),
    }
}

/// The message of a rewind: force-push `f` dropped `rev`, the newest
/// tagged commit `n`, going back to its ancestor `commit`.
fn rewound_message(
    commit: &str,
    ts: u64,
    new_tag: &str,
    n: &Tagged,
    rev: &str,
    f: &ForcedPush,
    moves_to_new: bool,
) -> String {
    let rewound = format!(
        "a force-push rewound the branch from {} to {}, an ancestor of {rev}, which the branch no longer \
         has",
        short(&f.before),
        short(commit),
    );
    if moves_to_new {
        format!(
            "{rewound}. {new_tag} has the same timestamp ({ts}) as {}, the dropped commit's tag, and sorts \
             before it ({TIE_RULE_LOWER}), so after this push Flux serves {new_tag}, this commit: Flux moves \
             back to the older commit, the content the rewound branch has, and `promote` picks it too. \
             Nothing more is needed for Flux: the dropped commit's tag sorts after this one, and the next \
             commit in a later second is served as usual",
            n.stamped.tag
        )
    } else {
        format!(
            "{rewound}: Flux keeps serving {} (the dropped commit's content), because {}. To serve this \
             commit's content, a new commit must carry it with a current timestamp: push the dropped \
             commits back and then a commit that reverts them, or commit one more change to the folder on \
             the rewound branch (an empty commit does not count; edit a comment in a settings file). Into \
             a gated channel, `promote --force --reason ...` then releases it at once; promoting before \
             that would copy {} into the channel",
            n.stamped.tag,
            why_kept(&n.stamped, ts, new_tag),
            n.stamped.tag
        )
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
                message: format!(
                    "the committer time of {} ({ts}) is lower than that of its ancestor {} ({}): \
                     Flux's numerical policy keeps serving {} and ignores {new_tag} until a later commit. The \
                     committer clock was behind, or history was rewritten (a rebase with \
                     --committer-date-is-author-date). Fix: commit one more change to the folder with a correct \
                     clock (an empty commit does not count; edit a comment in a settings file), or merge through \
                     GitHub, which stamps the time itself",
                    short(commit),
                    t.stamped.tag,
                    t.stamped.ts,
                    kept,
                ),
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
    let what = match &forced {
        Some(f) => format!(
            "a force-push rewrote the branch (it named {} before)",
            short(&f.before)
        ),
        None => "history was rewritten (a force-push or reset)".to_string(),
    };
    Anomaly {
        kind: AnomalyKind::BackwardsTimestamp,
        message: format!(
            "the committer time of {} ({ts}) is lower than that of {} ({}), whose commit {} is not in this \
             commit's history: {what}. Flux's numerical policy keeps serving {}, content the branch no longer \
             has, and ignores {new_tag} until a commit with a later time. Fix: commit one more change to the \
             folder with a correct clock (an empty commit does not count; edit a comment in a settings file), \
             or merge through GitHub, which stamps the time itself",
            short(commit),
            n.stamped.tag,
            n.stamped.ts,
            n.revision.as_deref().map_or("(none recorded)", short),
            n.stamped.tag
        ),
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
        let names: Vec<&str> = same.iter().map(|t| t.stamped.tag.as_str()).collect();
        // A same-second descendant (not the newest tag, or (c) would have
        // answered): Flux moves from it to this older commit.
        let mut older = String::new();
        for t in same.iter().take(MAX_ANCESTRY_CHECKS) {
            if let Some(rev) = &t.revision
                && is_ancestor(commit, rev).unwrap_or(false)
            {
                older = format!(
                    " This commit is the older one ({} descends from it): Flux moves to the older content.",
                    t.stamped.tag
                );
                break;
            }
        }
        return Some(Anomaly {
            kind: AnomalyKind::SameTimestamp,
            message: format!(
                "{} {} the same timestamp ({ts}) as {new_tag} but another commit: {TIE_RULE_LOWER}, so Flux serves \
                 {new_tag}, this commit, whatever order the registry lists them in.{older} {SETTLE}",
                names.join(", "),
                if names.len() == 1 { "has" } else { "have" },
            ),
            served: new_tag.to_string(),
            other_tag: smallest.stamped.tag.clone(),
        });
    }
    let served = &smallest.stamped;
    let newer = match &smallest.revision {
        Some(rev) => match is_ancestor(rev, commit) {
            Ok(true) => format!(
                " This commit is the newer one (it descends from {}): Flux keeps serving the older content.",
                short(rev)
            ),
            _ => String::new(),
        },
        None => String::new(),
    };
    Some(Anomaly {
        kind: AnomalyKind::SameTimestamp,
        message: format!(
            "{} has the same timestamp ({ts}) as {new_tag} but another commit: {TIE_RULE_LOWER}, so Flux serves {}, not \
             this commit, whose {sha7} sorts after {}.{newer} {SETTLE}",
            served.tag, served.tag, served.sha7,
        ),
        served: served.tag.clone(),
        other_tag: served.tag.clone(),
    })
}

/// Flux's tie rule, as the messages state it.
const TIE_RULE: &str = "On equal timestamps Flux serves the alphabetically smallest tag";
const TIE_RULE_LOWER: &str = "on equal timestamps Flux serves the alphabetically smallest tag";
/// What settles a same-second pick.
const SETTLE: &str = "It settles with the next commit that changes the folder in a later second (an empty \
                      commit does not count; edit a comment in a settings file)";

/// Why Flux keeps serving `kept` over a new tag `new_tag` at `ts` (kept
/// is Flux's pick over both).
fn why_kept(kept: &Stamped, ts: u64, new_tag: &str) -> String {
    if kept.ts > ts {
        format!("its timestamp is higher than {new_tag}'s")
    } else {
        format!("it has the same timestamp ({ts}) and sorts before {new_tag}: {TIE_RULE_LOWER}")
    }
}

fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
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
