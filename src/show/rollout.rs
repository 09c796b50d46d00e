//! A rollout record in words: `inspect` shows it as the record's
//! summary, the controller in the Event it emits when it records one.

use crate::rollout::{Record, State};

/// A line for people: `ran in staging: Deployment shop, ready from
/// ... to ..., superseded`.
pub(crate) fn record(r: &Record) -> String {
    let from = r.ready_since.as_deref();
    let mut s = format!(
        "ran in {}: {} {}/{} ({} replicas)",
        r.cluster, r.kind, r.namespace, r.name, r.replicas
    );
    match (r.state, from) {
        (State::Ready, Some(f)) => s.push_str(&format!(", ready from {f}")),
        (State::Ended, Some(f)) => s.push_str(&format!(
            ", ready from {f} to {}",
            r.ended_at.as_deref().unwrap_or("(a time not shown)")
        )),
        (State::Ended, None) => s.push_str(&format!(
            ", never ready, ended {}",
            r.ended_at.as_deref().unwrap_or("(a time not shown)")
        )),
        (State::Ready, None) => {}
    }
    if let Some(why) = r.reason {
        s.push_str(&format!(", {}", why.as_str()));
    }
    if let Some(d) = &r.superseded_by {
        s.push_str(&format!(" by {d}"));
    }
    s
}
