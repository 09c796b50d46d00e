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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rollout::EndReason;

    /// Each state in the words main printed (written out by hand).
    #[test]
    fn each_state_is_one_line() {
        let mut r = crate::rollout::tests::ready("staging", "2026-12-01T10:00:00Z");
        assert_eq!(
            record(&r),
            "ran in staging: Deployment shop/shop (2 replicas), ready from 2026-12-01T10:00:00Z"
        );
        r.state = State::Ended;
        r.reason = Some(EndReason::Superseded);
        r.ended_at = Some("2026-12-01T12:00:00Z".into());
        r.superseded_by = Some("sha256:b".into());
        assert_eq!(
            record(&r),
            "ran in staging: Deployment shop/shop (2 replicas), ready from 2026-12-01T10:00:00Z to \
             2026-12-01T12:00:00Z, superseded by sha256:b"
        );
        r.ready_since = None;
        r.superseded_by = None;
        r.reason = Some(EndReason::Unavailable);
        assert_eq!(
            record(&r),
            "ran in staging: Deployment shop/shop (2 replicas), never ready, ended 2026-12-01T12:00:00Z, \
             unavailable"
        );
    }
}
