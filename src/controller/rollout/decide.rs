//! The pure part of a SettingsRollout reconcile: from what the cluster
//! shows of each workload (its rollout status and its pods) and what the
//! status says was recorded, which records to write and what the status
//! says next.
//!
//! Every field of a record comes from what was observed: `readySince` is
//! the latest Ready transition of the pods running the digest (the moment
//! the last replica became Ready), a run that ends `superseded` ends when
//! the first pod of another version was created, one that ends
//! `unavailable` when its first replica stopped being Ready (or, never
//! Ready, when its first pod was created). `now` only decides whether the
//! grace period has passed. So a reconcile after a restart or by a new
//! leader derives the same records, byte for byte.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use crate::controller::crd::WorkloadStatus;
use crate::rollout::{EndReason, Record, State, WorkloadKind};

/// `Progressing`: not (yet) fully rolled out, nothing recorded.
pub const PROGRESSING: &str = "Progressing";
/// `Ready`: fully rolled out, the ready record written.
pub const READY: &str = "Ready";
/// `Unavailable`: ended so, the closing record written.
pub const UNAVAILABLE: &str = "Unavailable";

/// A workload's rollout counts, as `kubectl rollout status` reads them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// `metadata.generation`.
    pub generation: i64,
    /// `status.observedGeneration`.
    pub observed_generation: i64,
    /// The replicas wanted (a DaemonSet: `desiredNumberScheduled`).
    pub replicas: u32,
    /// The replicas of the current template (`updatedReplicas`,
    /// `updatedNumberScheduled`).
    pub updated: u32,
    /// Ready (`readyReplicas`, `numberReady`).
    pub ready: u32,
    /// Available (`availableReplicas`, `numberAvailable`).
    pub available: u32,
    /// All replicas, of any template (`status.replicas`,
    /// `currentNumberScheduled`): more than wanted while old ones remain.
    pub total: u32,
}

impl Progress {
    /// Every replica updated, available and Ready, no old one left, and
    /// the status is about the current spec.
    pub fn rolled_out(&self) -> bool {
        self.observed_generation >= self.generation
            && self.replicas > 0
            && self.updated == self.replicas
            && self.ready == self.replicas
            && self.available == self.replicas
            && self.total == self.replicas
    }
}

/// One pod of a workload, as far as a record needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodSeen {
    /// The digest of the repository its image volume references, if any.
    pub digest: Option<String>,
    /// `metadata.creationTimestamp`.
    pub created: Timestamp,
    /// The Ready condition: its status and last transition.
    pub ready: Option<(bool, Timestamp)>,
}

/// One workload of the namespace, as observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// Its kind.
    pub kind: WorkloadKind,
    /// Its name.
    pub name: String,
    /// The digest of the repository its pod template's image volume
    /// references (`HOST/NAME[:TAG]@sha256:...`); `None`: none.
    pub digest: Option<String>,
    /// Its rollout counts.
    pub progress: Progress,
    /// Its pods (by its selector).
    pub pods: Vec<PodSeen>,
}

/// What a reconcile knows.
#[derive(Debug, Clone)]
pub struct Input<'a> {
    /// `--cluster-name`.
    pub cluster: &'a str,
    /// The namespace.
    pub namespace: &'a str,
    /// `spec.repository`.
    pub repository: &'a str,
    /// `spec.gracePeriod`.
    pub grace: Duration,
    /// Now (decides only whether the grace period has passed).
    pub now: Timestamp,
    /// The status as read.
    pub before: &'a [WorkloadStatus],
    /// The selected workloads.
    pub seen: &'a [Seen],
}

/// One workload's change: the records to write, in order, then its next
/// status entry (`None`: no entry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// `(kind, name)`.
    pub key: (String, String),
    /// The records, in order.
    pub records: Vec<Record>,
    /// The entry once they are written.
    pub next: Option<WorkloadStatus>,
}

/// The plan of one reconcile.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// One per workload known before or now, by kind and name.
    pub changes: Vec<Change>,
    /// When to look again (a grace period running out), if before the
    /// next change of a workload.
    pub requeue: Option<Duration>,
}

fn ts(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn parse(t: &Option<String>) -> Option<Timestamp> {
    t.as_deref().and_then(|t| t.parse().ok())
}

/// Decides every workload's change.
pub fn decide(i: &Input) -> Plan {
    type Both<'b> = (Option<&'b WorkloadStatus>, Option<&'b Seen>);
    let mut keys: BTreeMap<(String, String), Both> = BTreeMap::new();
    for b in i.before {
        keys.entry((b.kind.clone(), b.name.clone())).or_default().0 = Some(b);
    }
    for s in i.seen {
        keys.entry((s.kind.as_str().to_string(), s.name.clone()))
            .or_default()
            .1 = Some(s);
    }
    let mut plan = Plan::default();
    for (key, (before, seen)) in keys {
        let mut wake = None;
        let (records, next) = one(i, before, seen, &mut wake);
        if let Some(w) = wake {
            plan.requeue = Some(plan.requeue.map_or(w, |r: Duration| r.min(w)));
        }
        plan.changes.push(Change { key, records, next });
    }
    plan
}

/// A record of `kind/name` running `digest`.
fn record(i: &Input, kind: WorkloadKind, name: &str, digest: &str, replicas: u32) -> Record {
    Record {
        cluster: i.cluster.to_string(),
        namespace: i.namespace.to_string(),
        kind,
        name: name.to_string(),
        repository: i.repository.to_string(),
        digest: digest.to_string(),
        state: State::Ready,
        ready_since: None,
        replicas,
        ended_at: None,
        reason: None,
        superseded_by: None,
    }
}

fn kind_of(s: &str) -> Option<WorkloadKind> {
    match s {
        "Deployment" => Some(WorkloadKind::Deployment),
        "StatefulSet" => Some(WorkloadKind::StatefulSet),
        "DaemonSet" => Some(WorkloadKind::DaemonSet),
        _ => None,
    }
}

/// The closing record of the run `b` describes.
fn closing(
    i: &Input,
    b: &WorkloadStatus,
    reason: EndReason,
    at: Option<Timestamp>,
    by: Option<String>,
) -> Option<Record> {
    let mut r = record(i, kind_of(&b.kind)?, &b.name, &b.digest, b.replicas);
    r.state = State::Ended;
    r.ready_since = b.ready_since.clone();
    r.ended_at = at.map(ts);
    r.reason = Some(reason);
    r.superseded_by = by;
    Some(r)
}

/// How long until `since + grace`, or `None` when it has passed.
fn left(i: &Input, since: Timestamp) -> Option<Duration> {
    let due = since
        .checked_add(SignedDuration::try_from(i.grace).ok()?)
        .ok()?;
    let wait = i.now.duration_until(due);
    (wait > SignedDuration::ZERO).then(|| Duration::try_from(wait).unwrap_or(i.grace))
}

fn one(
    i: &Input,
    before: Option<&WorkloadStatus>,
    seen: Option<&Seen>,
    wake: &mut Option<Duration>,
) -> (Vec<Record>, Option<WorkloadStatus>) {
    let mut records = Vec::new();
    let ready_before = before.filter(|b| b.state == READY);
    // Gone (deleted, or no longer selected): a recorded run ends, with no
    // time the cluster can show.
    let Some(s) = seen else {
        if let Some(r) = ready_before.and_then(|b| closing(i, b, EndReason::Deleted, None, None)) {
            records.push(r);
        }
        return (records, None);
    };
    // Moved to another digest (or off the repository): a recorded run
    // ends when the first pod of another version was created.
    let mut before = before;
    if let Some(b) = before
        && s.digest.as_deref() != Some(b.digest.as_str())
    {
        if let Some(rb) = ready_before {
            let since = parse(&rb.ready_since);
            let first_other = s
                .pods
                .iter()
                .filter(|p| p.digest.as_deref() != Some(rb.digest.as_str()))
                .filter(|p| since.is_none_or(|t| p.created >= t))
                .map(|p| p.created)
                .min();
            let Some(at) = first_other else {
                // No pod of the new version yet: look again soon.
                *wake = Some(Duration::from_secs(5));
                return (records, Some(rb.clone()));
            };
            if let Some(r) = closing(i, rb, EndReason::Superseded, Some(at), s.digest.clone()) {
                records.push(r);
            }
        }
        before = None;
    }
    let Some(digest) = s.digest.clone() else {
        return (records, None);
    };
    let running: Vec<&PodSeen> = s
        .pods
        .iter()
        .filter(|p| p.digest.as_deref() == Some(digest.as_str()))
        .collect();
    let entry = |state: &str, since: Option<String>, unavailable: Option<String>| WorkloadStatus {
        kind: s.kind.as_str().to_string(),
        name: s.name.clone(),
        digest: digest.clone(),
        state: state.to_string(),
        ready_since: since,
        unavailable_since: unavailable,
        replicas: s.progress.replicas,
        record: before.and_then(|b| b.record.clone()),
    };
    let state = before.map(|b| b.state.as_str());
    if s.progress.rolled_out() {
        if state == Some(READY) {
            let b = before.map(|b| b.ready_since.clone()).unwrap_or_default();
            return (records, Some(entry(READY, b, None)));
        }
        // The moment the last replica became Ready.
        let since = running
            .iter()
            .filter_map(|p| p.ready.filter(|(ready, _)| *ready).map(|(_, t)| t))
            .max();
        let Some(since) = since.filter(|_| running.len() >= s.progress.replicas as usize) else {
            *wake = Some(Duration::from_secs(5));
            return (records, Some(entry(PROGRESSING, None, None)));
        };
        let mut r = record(i, s.kind, &s.name, &digest, s.progress.replicas);
        r.ready_since = Some(ts(since));
        records.push(r);
        return (records, Some(entry(READY, Some(ts(since)), None)));
    }
    match state {
        // Ended unavailable and still not fully rolled out: recorded.
        Some(UNAVAILABLE) => (records, before.cloned()),
        // Recorded Ready, not fully available now: since the first
        // replica stopped being Ready (or a new one was created).
        Some(READY) => {
            let b = before.cloned().unwrap_or_default();
            let since = parse(&b.unavailable_since).or_else(|| {
                running
                    .iter()
                    .filter(|p| !p.ready.is_some_and(|(r, _)| r))
                    .map(|p| match p.ready {
                        Some((false, t)) => t.max(p.created),
                        _ => p.created,
                    })
                    .min()
            });
            let Some(since) = since else {
                *wake = Some(Duration::from_secs(5));
                return (records, Some(b));
            };
            match left(i, since) {
                Some(wait) => {
                    *wake = Some(wait);
                    (
                        records,
                        Some(WorkloadStatus {
                            unavailable_since: Some(ts(since)),
                            ..b
                        }),
                    )
                }
                None => {
                    records.extend(closing(i, &b, EndReason::Unavailable, Some(since), None));
                    (
                        records,
                        Some(entry(UNAVAILABLE, b.ready_since.clone(), Some(ts(since)))),
                    )
                }
            }
        }
        // Never Ready: since its first pod was created.
        _ => {
            let Some(started) = running.iter().map(|p| p.created).min() else {
                return (records, Some(entry(PROGRESSING, None, None)));
            };
            match left(i, started) {
                Some(wait) => {
                    *wake = Some(wait);
                    (records, Some(entry(PROGRESSING, None, Some(ts(started)))))
                }
                None => {
                    let mut r = record(i, s.kind, &s.name, &digest, s.progress.replicas);
                    r.state = State::Ended;
                    r.ended_at = Some(ts(started));
                    r.reason = Some(EndReason::Unavailable);
                    records.push(r);
                    (records, Some(entry(UNAVAILABLE, None, Some(ts(started)))))
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
