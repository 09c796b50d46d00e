//! Forward-only checks for `push`, as pure decisions over what the registry
//! holds (timestamp tags with the commit each image records) and an
//! ancestry oracle (local git history, or GitHub's compare API on a shallow
//! clone). The registry I/O lives in `publish`, the ancestry in
//! `history`; this module only decides.
//!
//! - [`check`] finds the anomalies Flux's numerical policy cannot see
//!   through: two commits with the same timestamp, a timestamp that went
//!   backwards, a re-run of an old job.
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
    /// Another tag has the same timestamp and a different commit.
    SameTimestamp,
    /// The new timestamp is lower than that of a tagged ancestor.
    BackwardsTimestamp,
    /// The new commit is an ancestor of the newest tagged one.
    RerunOfOlder,
}

impl AnomalyKind {
    /// The kebab-case name (`same-timestamp`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            AnomalyKind::SameTimestamp => "same-timestamp",
            AnomalyKind::BackwardsTimestamp => "backwards-timestamp",
            AnomalyKind::RerunOfOlder => "rerun-of-older",
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
    /// The other tag involved.
    #[serde(skip)]
    pub other_tag: String,
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
    out.sort_by(|a, b| b.ts.cmp(&a.ts).then_with(|| b.tag.cmp(&a.tag)));
    out
}

/// Checks a push of `commit` (full id) at committer time `ts` under
/// `new_tag` against the `existing` timestamp tags of the same prefix
/// (see [`relevant`]). `is_ancestor(a, d)` answers whether commit `a` is an
/// ancestor of (or equal to) `d`. At most one anomaly is reported, the
/// first of: re-run of an older commit, backwards timestamp, same
/// timestamp.
pub fn check(
    commit: &str,
    ts: u64,
    new_tag: &str,
    existing: &[Tagged],
    mut is_ancestor: impl FnMut(&str, &str) -> Result<bool>,
) -> Result<Option<Anomaly>> {
    let others: Vec<&Tagged> = existing
        .iter()
        .filter(|t| t.stamped.tag != new_tag && t.revision.as_deref() != Some(commit))
        .collect();
    // (c) A re-run: the newest tagged commit descends from this one.
    let newest = existing.iter().max_by(|a, b| {
        a.stamped
            .ts
            .cmp(&b.stamped.ts)
            .then_with(|| a.stamped.tag.cmp(&b.stamped.tag))
    });
    if let Some(n) = newest
        && n.stamped.tag != new_tag
        && let Some(rev) = &n.revision
        && rev != commit
        && is_ancestor(commit, rev)?
    {
        return Ok(Some(Anomaly {
            kind: AnomalyKind::RerunOfOlder,
            message: format!(
                "commit {} is an ancestor of {rev}, already published as {}: this is a re-run of an older job \
                 (or its first run after a newer commit was published); {new_tag} names the same content as before \
                 and Flux keeps {}",
                short(commit),
                n.stamped.tag,
                n.stamped.tag
            ),
            other_tag: n.stamped.tag.clone(),
        }));
    }
    // (b) A tagged ancestor with a higher timestamp: Flux keeps it.
    let mut asked = 0;
    for t in others.iter().filter(|t| t.stamped.ts > ts) {
        let Some(rev) = &t.revision else { continue };
        if asked >= MAX_ANCESTRY_CHECKS {
            break;
        }
        asked += 1;
        if is_ancestor(rev, commit)? {
            return Ok(Some(Anomaly {
                kind: AnomalyKind::BackwardsTimestamp,
                message: format!(
                    "the committer time of {} ({ts}) is lower than that of its ancestor {} ({}): \
                     Flux's numerical policy ignores {new_tag} until a later commit. The committer clock was \
                     behind, or history was rewritten (a rebase with --committer-date-is-author-date). \
                     Fix: commit one more change to the folder with a correct clock (an empty commit does not \
                     count; edit a comment in a settings file), or merge through GitHub, which stamps the time itself",
                    short(commit),
                    t.stamped.tag,
                    t.stamped.ts
                ),
                other_tag: t.stamped.tag.clone(),
            }));
        }
    }
    // (a) The same second, another commit.
    let sha7 = commit.get(..7).unwrap_or(commit);
    if let Some(t) = others
        .iter()
        .find(|t| t.stamped.ts == ts && t.stamped.sha7 != sha7)
    {
        return Ok(Some(Anomaly {
            kind: AnomalyKind::SameTimestamp,
            message: format!(
                "{} has the same timestamp ({ts}) as {new_tag} but another commit: Flux's numerical policy \
                 may pick either until the next commit that changes the folder",
                t.stamped.tag
            ),
            other_tag: t.stamped.tag.clone(),
        }));
    }
    Ok(None)
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
    /// Neither descends from the other (history was rewritten), or the
    /// tagged image records no commit: refused unless rewinding is allowed.
    Diverged {
        /// The commit the tag records, if any.
        current: Option<String>,
    },
}

/// Decides whether the branch tag may move from the image recording
/// `current` (`None`: the tag does not exist; `Some(None)`: it exists
/// but records no commit) to `commit`.
pub fn branch_move(
    commit: &str,
    current: Option<Option<&str>>,
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
        return Ok(BranchMove::KeepNewer {
            current: current.to_string(),
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
    descendants.sort_by_key(|d| std::cmp::Reverse(d.stamped.ts));
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
mod tests {
    use super::*;

    /// A linear history c0 -> c1 -> ... as full-looking ids.
    fn id(n: u32) -> String {
        format!("{n:x}{}", "0".repeat(39))
    }

    fn linear(a: &str, d: &str) -> Result<bool> {
        Ok(u32::from_str_radix(&a[..1], 16).unwrap() <= u32::from_str_radix(&d[..1], 16).unwrap())
    }

    fn tagged(ts: u64, n: u32) -> Tagged {
        let rev = id(n);
        Tagged {
            stamped: Stamped {
                tag: format!("main-{ts}-{}", &rev[..7]),
                ts,
                sha7: rev[..7].to_string(),
            },
            revision: Some(rev),
        }
    }

    #[test]
    fn normal_push_has_no_anomaly() {
        let existing = [tagged(100, 1), tagged(200, 2)];
        let a = check(&id(3), 300, "main-300-3000000", &existing, linear).unwrap();
        assert_eq!(a, None);
        // Re-pushing the newest tag itself is normal too.
        let a = check(&id(2), 200, "main-200-2000000", &existing, linear).unwrap();
        assert_eq!(a, None);
    }

    #[test]
    fn anomalies() {
        let existing = [tagged(100, 1), tagged(200, 2)];
        let a = check(&id(1), 100, "main-100-1000000", &existing, linear)
            .unwrap()
            .unwrap();
        assert_eq!(a.kind, AnomalyKind::RerunOfOlder);
        assert_eq!(a.other_tag, "main-200-2000000");
        let a = check(&id(3), 150, "main-150-3000000", &existing, linear)
            .unwrap()
            .unwrap();
        assert_eq!(a.kind, AnomalyKind::BackwardsTimestamp);
        assert!(a.message.contains("--committer-date-is-author-date"));
        let a = check(&id(3), 200, "main-200-3000000", &existing, linear)
            .unwrap()
            .unwrap();
        assert_eq!(a.kind, AnomalyKind::SameTimestamp);
        assert_eq!(a.other_tag, "main-200-2000000");
    }

    #[test]
    fn relevant_keeps_newest_and_not_lower() {
        let tags: Vec<String> = [
            "main-5-aaaaaaa",
            "main-9-bbbbbbb",
            "dev-20-ccccccc",
            "main-7-ddddddd",
        ]
        .map(String::from)
        .to_vec();
        let r: Vec<String> = relevant("main", 7, &tags)
            .into_iter()
            .map(|s| s.tag)
            .collect();
        assert_eq!(r, ["main-9-bbbbbbb", "main-7-ddddddd"]);
        let r: Vec<String> = relevant("main", 10, &tags)
            .into_iter()
            .map(|s| s.tag)
            .collect();
        assert_eq!(r, ["main-9-bbbbbbb"]);
    }

    #[test]
    fn branch_moves() {
        assert_eq!(
            branch_move(&id(2), None, linear).unwrap(),
            BranchMove::Create
        );
        assert_eq!(
            branch_move(&id(2), Some(Some(&id(1))), linear).unwrap(),
            BranchMove::Forward
        );
        assert_eq!(
            branch_move(&id(2), Some(Some(&id(2))), linear).unwrap(),
            BranchMove::Same
        );
        assert_eq!(
            branch_move(&id(1), Some(Some(&id(2))), linear).unwrap(),
            BranchMove::KeepNewer { current: id(2) }
        );
        let never = |_: &str, _: &str| Ok(false);
        assert_eq!(
            branch_move(&id(1), Some(Some(&id(2))), never).unwrap(),
            BranchMove::Diverged {
                current: Some(id(2))
            }
        );
        assert_eq!(
            branch_move(&id(1), Some(None), linear).unwrap(),
            BranchMove::Diverged { current: None }
        );
    }

    #[test]
    fn repair_finds_the_tip() {
        let tags = [tagged(100, 1), tagged(300, 3), tagged(200, 2)];
        let t = repair_target(&id(1), &tags, linear).unwrap().unwrap();
        assert_eq!(t.revision.as_deref(), Some(id(3).as_str()));
        assert!(repair_target(&id(3), &tags, linear).unwrap().is_none());
    }
}
