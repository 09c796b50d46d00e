//! Requirements of the release policy (`requires:`), and the pure judgement
//! of a candidate's rollout records against them at one instant.
//!
//! ```yaml
//! requires:
//!   - rollout:
//!       cluster: staging            # the records of this cluster
//!       namespace: shop             # optional: only this namespace
//!       workload: Deployment/shop   # optional: only this workload
//!       readyFor: 2h                # optional: Ready at least this long
//!       notEnded: [unavailable]     # optional: no run ended so
//! ```
//!
//! A candidate meets a requirement at `at` when one run of the digest in
//! that scope (a `ready` record, and the `ended` record of the same run
//! when there is one) had been Ready for `readyFor` by `at`, and no run in
//! that scope ended for a reason `notEnded` names by `at`. Records whose
//! times come after `at` are not seen: `--at` judges the evidence as it
//! stood then. A record of another shape, or about another image, is
//! ignored and named.

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

use crate::rollout::{EndReason, Listed, Record, State, WorkloadKind, is_label};

/// One requirement of the policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    /// Rollout records of a cluster.
    Rollout(RolloutRequirement),
}

/// `rollout:` requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolloutRequirement {
    /// The cluster whose records count.
    pub cluster: String,
    /// Only records of this namespace.
    pub namespace: Option<String>,
    /// Only records of this workload.
    pub workload: Option<(WorkloadKind, String)>,
    /// How long a run must have been Ready (zero: any ready record).
    pub ready_for: SignedDuration,
    /// Ends that disqualify.
    pub not_ended: Vec<EndReason>,
}

/// A requirement as the policy file holds it.
/// (serde_yaml_ng reads an enum as a YAML tag, `!rollout`; a map with one
/// known key reads as people write it.)
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RequirementFile {
    rollout: Option<RolloutFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct RolloutFile {
    cluster: String,
    namespace: Option<String>,
    workload: Option<String>,
    ready_for: Option<String>,
    not_ended: Option<serde_yaml_ng::Value>,
}

impl RequirementFile {
    /// The validated requirement, or what is wrong with it; `duration`
    /// reads `readyFor` (the policy's grammar: `8h`, `90m`, `2d`).
    pub(super) fn validate(
        self,
        duration: fn(&str) -> Result<SignedDuration, String>,
    ) -> Result<Requirement, String> {
        let Some(f) = self.rollout else {
            return Err("name what is required: rollout".into());
        };
        if !is_label(&f.cluster) {
            return Err(format!(
                "cluster {:?} is not a cluster name (lowercase letters, digits and '-', as the \
                 controller's --cluster-name)",
                f.cluster
            ));
        }
        if let Some(ns) = &f.namespace
            && !is_label(ns)
        {
            return Err(format!("namespace {ns:?} is not a namespace name"));
        }
        let workload = match &f.workload {
            None => None,
            Some(w) => {
                let (kind, name) = w.split_once('/').unwrap_or(("", w));
                let kind = match kind {
                    "Deployment" => WorkloadKind::Deployment,
                    "StatefulSet" => WorkloadKind::StatefulSet,
                    "DaemonSet" => WorkloadKind::DaemonSet,
                    _ => {
                        return Err(format!(
                            "workload {w:?}: write KIND/NAME, KIND one of Deployment, StatefulSet, DaemonSet"
                        ));
                    }
                };
                if name.is_empty() {
                    return Err(format!("workload {w:?} names no workload"));
                }
                Some((kind, name.to_string()))
            }
        };
        let ready_for = match &f.ready_for {
            None => SignedDuration::ZERO,
            Some(d) => duration(d).map_err(|m| format!("readyFor: {m}"))?,
        };
        let words: Vec<serde_yaml_ng::Value> = match f.not_ended {
            None => vec![],
            Some(serde_yaml_ng::Value::Sequence(v)) => v,
            Some(one) => vec![one],
        };
        let mut not_ended = Vec::new();
        for w in words {
            let r = match w.as_str() {
                Some("unavailable") => EndReason::Unavailable,
                Some("superseded") => EndReason::Superseded,
                Some("deleted") => EndReason::Deleted,
                _ => {
                    return Err(format!(
                        "notEnded: {} is not a reason (unavailable, superseded, deleted)",
                        serde_json::to_string(&w).unwrap_or_else(|_| "?".into())
                    ));
                }
            };
            if !not_ended.contains(&r) {
                not_ended.push(r);
            }
        }
        Ok(Requirement::Rollout(RolloutRequirement {
            cluster: f.cluster,
            namespace: f.namespace,
            workload,
            ready_for,
            not_ended,
        }))
    }
}

impl Requirement {
    /// The requirement in words (`rollout in staging, Ready for 2h, not
    /// ended unavailable`).
    pub fn describe(&self) -> String {
        let Requirement::Rollout(r) = self;
        let mut s = format!("rollout in {}", r.cluster);
        if let Some(ns) = &r.namespace {
            s.push_str(&format!(" namespace {ns}"));
        }
        if let Some((k, n)) = &r.workload {
            s.push_str(&format!(" {k}/{n}"));
        }
        if r.ready_for.is_zero() {
            s.push_str(", Ready");
        } else {
            s.push_str(&format!(", Ready for {}", words(r.ready_for)));
        }
        if !r.not_ended.is_empty() {
            let names: Vec<&str> = r.not_ended.iter().map(|e| e.as_str()).collect();
            s.push_str(&format!(", not ended {}", names.join(" or ")));
        }
        s
    }
}

/// `d` as a person reads it: `2h`, `1h30m`, `45s`, `0s`.
pub fn words(d: SignedDuration) -> String {
    let total = d.as_secs().max(0);
    let (days, h, m, s) = (
        total / 86_400,
        total / 3600 % 24,
        total / 60 % 60,
        total % 60,
    );
    let mut out = String::new();
    for (n, unit) in [(days, "d"), (h, "h"), (m, "m"), (s, "s")] {
        if n > 0 {
            out.push_str(&format!("{n}{unit}"));
        }
    }
    if out.is_empty() { "0s".into() } else { out }
}

/// A record cited as evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cited {
    /// The record's referrer digest.
    pub record: String,
    /// Its cluster.
    pub cluster: String,
    /// `NAMESPACE/KIND/NAME`.
    pub workload: String,
    /// `ready` or `ended: REASON`.
    pub state: String,
}

/// How one candidate fares.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Judged {
    /// Every requirement is met.
    pub eligible: bool,
    /// One line per requirement: `met: ...` or `not met: ...`.
    pub lines: Vec<String>,
    /// The records the met requirements rest on.
    pub evidence: Vec<Cited>,
    /// Records ignored (referrer digest, why).
    pub ignored: Vec<(String, String)>,
}

/// One run of the digest: a workload's stretch between a `ready` record
/// and the `ended` record of the same run.
struct Run<'a> {
    ready: Option<(&'a str, &'a Record)>,
    ended: Option<(&'a str, &'a Record)>,
}

fn cite(digest: &str, r: &Record) -> Cited {
    Cited {
        record: digest.to_string(),
        cluster: r.cluster.clone(),
        workload: format!("{}/{}", r.namespace, r.workload()),
        state: match r.reason {
            Some(e) => format!("ended: {}", e.as_str()),
            None => "ready".into(),
        },
    }
}

/// Judges the rollout records of one candidate at `at`.
pub fn judge(requires: &[Requirement], records: &[Listed], at: Timestamp) -> Judged {
    let mut out = Judged {
        eligible: true,
        ..Judged::default()
    };
    let mut valid = Vec::new();
    for l in records {
        match &l.record {
            Ok(r) => valid.push((l.digest.as_str(), r)),
            Err(why) => out.ignored.push((l.digest.clone(), why.clone())),
        }
    }
    for req in requires {
        let Requirement::Rollout(want) = req;
        let (met, line, cited) = judge_rollout(want, &valid, at);
        out.eligible &= met;
        out.lines.push(format!(
            "{}: {} ({line})",
            if met { "met" } else { "not met" },
            req.describe()
        ));
        for c in cited {
            if !out.evidence.contains(&c) {
                out.evidence.push(c);
            }
        }
    }
    out
}

fn judge_rollout(
    want: &RolloutRequirement,
    records: &[(&str, &Record)],
    at: Timestamp,
) -> (bool, String, Vec<Cited>) {
    let seen: Vec<(&str, &Record)> = records
        .iter()
        .copied()
        .filter(|(_, r)| r.cluster == want.cluster)
        .filter(|(_, r)| want.namespace.as_ref().is_none_or(|n| &r.namespace == n))
        .filter(|(_, r)| {
            want.workload
                .as_ref()
                .is_none_or(|(k, n)| r.kind == *k && &r.name == n)
        })
        // As it stood at `at`: a ready record from its readySince on, an
        // ended one from its endedAt on (a deletion without a time: seen).
        .filter(|(_, r)| match r.state {
            State::Ready => r.ready_since_at().is_some_and(|t| t <= at),
            State::Ended => r.ended_at_at().is_none_or(|t| t <= at),
        })
        .collect();
    if seen.is_empty() {
        return (
            false,
            format!("no rollout record from cluster {} by {at}", want.cluster),
            vec![],
        );
    }
    // A disqualifying end anywhere in scope.
    if let Some((d, r)) = seen
        .iter()
        .find(|(_, r)| r.reason.is_some_and(|e| want.not_ended.contains(&e)))
    {
        return (
            false,
            format!(
                "{} {}/{} ended {} at {}",
                r.kind,
                r.namespace,
                r.name,
                r.reason.map(|e| e.as_str()).unwrap_or("?"),
                r.ended_at.as_deref().unwrap_or("(no time)")
            ),
            vec![cite(d, r)],
        );
    }
    // Runs: a workload's records with the same readySince.
    let mut runs: BTreeMap<(String, WorkloadKind, String, String), Run> = BTreeMap::new();
    for (d, r) in &seen {
        let Some(since) = &r.ready_since else {
            continue; // never ready: no soak to count
        };
        let run = runs
            .entry((r.namespace.clone(), r.kind, r.name.clone(), since.clone()))
            .or_insert(Run {
                ready: None,
                ended: None,
            });
        match r.state {
            State::Ready => run.ready = Some((d, r)),
            State::Ended => run.ended = Some((d, r)),
        }
    }
    // The longest soak among the runs.
    let mut best: Option<(SignedDuration, &Run)> = None;
    for run in runs.values() {
        let Some(r) = run.ready.or(run.ended).map(|(_, r)| r) else {
            continue;
        };
        let Some(since) = r.ready_since_at() else {
            continue;
        };
        let until = match run.ended {
            // A deletion the cluster gave no time for proves no soak.
            Some((_, e)) => e.ended_at_at().unwrap_or(since),
            None => at,
        };
        let soak = until.duration_since(since);
        if best.as_ref().is_none_or(|(b, _)| soak > *b) {
            best = Some((soak, run));
        }
    }
    let Some((soak, run)) = best else {
        return (
            false,
            format!("no run in {} was ever Ready by {at}", want.cluster),
            vec![],
        );
    };
    let r = run.ready.or(run.ended).map(|(_, r)| r);
    let who = r
        .map(|r| format!("{} {}/{}", r.kind, r.namespace, r.name))
        .unwrap_or_default();
    let since = r.and_then(|r| r.ready_since.clone()).unwrap_or_default();
    let cited: Vec<Cited> = [run.ready, run.ended]
        .into_iter()
        .flatten()
        .map(|(d, r)| cite(d, r))
        .collect();
    let ended = run
        .ended
        .map(|(_, e)| {
            format!(
                " to {}, {}",
                e.ended_at.as_deref().unwrap_or("(no time)"),
                e.reason.map(|x| x.as_str()).unwrap_or("?")
            )
        })
        .unwrap_or_default();
    let line = format!(
        "{who} Ready from {since}{ended}: {} of {}",
        words(soak),
        words(want.ready_for)
    );
    if soak >= want.ready_for {
        (true, line, cited)
    } else {
        (false, line, vec![])
    }
}

#[cfg(test)]
#[path = "evidence_tests.rs"]
mod tests;
