//! Unit tests of the requirements and their judgement
//! (`release/evidence.rs`); the times are worked out by hand.

use super::*;
use crate::release::policy::Policy;

const A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

fn t(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn record(cluster: &str, since: Option<&str>) -> Record {
    Record {
        cluster: cluster.into(),
        namespace: "shop".into(),
        kind: WorkloadKind::Deployment,
        name: "shop".into(),
        repository: "ghcr.io/acme/settings".into(),
        digest: A.into(),
        state: State::Ready,
        ready_since: since.map(Into::into),
        replicas: 1,
        ended_at: None,
        reason: None,
        superseded_by: None,
    }
}

fn ended(mut r: Record, at: &str, reason: EndReason) -> Record {
    r.state = State::Ended;
    r.ended_at = Some(at.into());
    r.reason = Some(reason);
    r
}

fn listed(d: &str, r: Record) -> Listed {
    Listed {
        digest: format!("sha256:{}", d.repeat(64 / d.len())),
        record: Ok(r),
    }
}

fn policy(yaml: &str) -> Policy {
    Policy::from_yaml(yaml).unwrap()
}

fn soak_2h() -> Vec<Requirement> {
    policy("requires:\n  - rollout: {cluster: staging, readyFor: 2h, notEnded: unavailable}\n")
        .requires
}

#[test]
fn the_policy_names_a_bad_requirement() {
    let p = policy(
        "requires:\n  - rollout:\n      cluster: staging\n      namespace: shop\n      workload: Deployment/shop\n      readyFor: 1h30m\n      notEnded: [unavailable, deleted]\n",
    );
    assert_eq!(
        p.requires,
        vec![Requirement::Rollout(RolloutRequirement {
            cluster: "staging".into(),
            namespace: Some("shop".into()),
            workload: Some((WorkloadKind::Deployment, "shop".into())),
            ready_for: SignedDuration::from_mins(90),
            not_ended: vec![EndReason::Unavailable, EndReason::Deleted],
        })]
    );
    assert_eq!(
        p.requires[0].describe(),
        "rollout in staging namespace shop Deployment/shop, Ready for 1h30m, not ended unavailable or deleted"
    );
    for (yaml, said) in [
        (
            "requires:\n  - rollout: {cluster: staging, readyFor: 2x}\n",
            "release policy, requirement 1: readyFor: duration \"2x\": unknown unit 'x' (use d, h, m, s)",
        ),
        (
            "requires:\n  - rollout: {cluster: staging}\n  - rollout: {cluster: Staging}\n",
            "release policy, requirement 2: cluster \"Staging\" is not a cluster name",
        ),
        (
            "requires:\n  - rollout: {cluster: staging, notEnded: crashed}\n",
            "release policy, requirement 1: notEnded: \"crashed\" is not a reason (unavailable, superseded, deleted)",
        ),
        (
            "requires:\n  - rollout: {cluster: staging, workload: Pod/shop}\n",
            "release policy, requirement 1: workload \"Pod/shop\": write KIND/NAME",
        ),
    ] {
        let e = Policy::from_yaml(yaml).unwrap_err().to_string();
        assert!(e.starts_with(said), "{yaml}: {e}");
    }
    // Unknown keys are named, as in a window.
    for (yaml, key) in [
        (
            "requires:\n  - rollout: {cluster: staging, readyfor: 2h}\n",
            "readyfor",
        ),
        ("requires:\n  - soak: {cluster: staging}\n", "soak"),
    ] {
        let e = Policy::from_yaml(yaml).unwrap_err().to_string();
        assert!(e.contains("unknown") && e.contains(key), "{e}");
    }
}

#[test]
fn a_run_counts_only_once_it_has_soaked_by_the_time_judged() {
    let req = soak_2h();
    let recs = vec![listed("1", record("staging", Some("2026-12-01T10:00:00Z")))];
    // 1h59m after it became ready: not yet.
    let j = judge(&req, &recs, t("2026-12-01T11:59:00Z"));
    assert!(!j.eligible);
    assert_eq!(
        j.lines,
        [
            "not met: rollout in staging, Ready for 2h, not ended unavailable (Deployment shop/shop \
          Ready from 2026-12-01T10:00:00Z: 1h59m of 2h)"
        ]
    );
    assert!(j.evidence.is_empty());
    // 2h after: met, citing the record.
    let j = judge(&req, &recs, t("2026-12-01T12:00:00Z"));
    assert!(j.eligible, "{j:?}");
    assert_eq!(j.evidence.len(), 1);
    assert_eq!(j.evidence[0].record, recs[0].digest);
    assert_eq!(j.evidence[0].workload, "shop/Deployment/shop");
    // Before it became ready, the record is not seen at all.
    let j = judge(&req, &recs, t("2026-12-01T09:00:00Z"));
    assert_eq!(
        j.lines,
        [
            "not met: rollout in staging, Ready for 2h, not ended unavailable (no rollout record \
          from cluster staging by 2026-12-01T09:00:00Z)"
        ]
    );
    // Another cluster's record is not this one's.
    let j = judge(
        &req,
        &[listed("2", record("prod", Some("2026-01-01T00:00:00Z")))],
        t("2026-12-02T00:00:00Z"),
    );
    assert!(!j.eligible);
}

#[test]
fn a_superseded_run_keeps_the_soak_it_had_and_an_unavailable_end_disqualifies() {
    let req = soak_2h();
    let open = record("staging", Some("2026-12-01T10:00:00Z"));
    // Superseded after 3h: it soaked, whatever time it is judged at later.
    let recs = vec![
        listed("1", open.clone()),
        listed(
            "2",
            ended(open.clone(), "2026-12-01T13:00:00Z", EndReason::Superseded),
        ),
    ];
    let j = judge(&req, &recs, t("2026-12-05T00:00:00Z"));
    assert!(j.eligible, "{j:?}");
    assert_eq!(j.evidence.len(), 2);
    // Superseded after 1h: never soaked, however long ago.
    let recs = vec![
        listed("1", open.clone()),
        listed(
            "2",
            ended(open.clone(), "2026-12-01T11:00:00Z", EndReason::Superseded),
        ),
    ];
    let j = judge(&req, &recs, t("2026-12-05T00:00:00Z"));
    assert!(!j.eligible);
    assert!(
        j.lines[0].ends_with("to 2026-12-01T11:00:00Z, superseded: 1h of 2h)"),
        "{j:?}"
    );
    // Crashed after 3h: disqualified from when it ended on, not before.
    let recs = vec![
        listed("1", open.clone()),
        listed(
            "2",
            ended(open.clone(), "2026-12-01T13:00:00Z", EndReason::Unavailable),
        ),
    ];
    let j = judge(&req, &recs, t("2026-12-01T14:00:00Z"));
    assert!(!j.eligible);
    assert_eq!(
        j.lines,
        [
            "not met: rollout in staging, Ready for 2h, not ended unavailable (Deployment shop/shop \
          ended unavailable at 2026-12-01T13:00:00Z)"
        ]
    );
    assert!(judge(&req, &recs, t("2026-12-01T12:30:00Z")).eligible);
    // Without notEnded the same crash does not disqualify the soak it had.
    let lax = policy("requires:\n  - rollout: {cluster: staging, readyFor: 2h}\n").requires;
    assert!(judge(&lax, &recs, t("2026-12-01T14:00:00Z")).eligible);
    // Never ready: an ended record with no readySince proves nothing.
    let never = ended(
        record("staging", None),
        "2026-12-01T10:05:00Z",
        EndReason::Unavailable,
    );
    let j = judge(&lax, &[listed("3", never)], t("2026-12-02T00:00:00Z"));
    assert!(!j.eligible);
    assert!(
        j.lines[0].contains("no run in staging was ever Ready"),
        "{j:?}"
    );
}

#[test]
fn bad_records_are_ignored_and_named() {
    let req = soak_2h();
    let recs = vec![Listed {
        digest: "sha256:bad".into(),
        record: Err("cluster \"Staging!\" is not a cluster name".into()),
    }];
    let j = judge(&req, &recs, t("2026-12-05T00:00:00Z"));
    assert!(!j.eligible);
    assert_eq!(
        j.ignored,
        [(
            "sha256:bad".to_string(),
            "cluster \"Staging!\" is not a cluster name".to_string()
        )]
    );
    // No requirements: every candidate is eligible, with nothing cited.
    let j = judge(&[], &recs, t("2026-12-05T00:00:00Z"));
    assert!(j.eligible && j.lines.is_empty());
    // A deletion without a time ends the run at its start: no soak.
    let open = record("staging", Some("2026-12-01T10:00:00Z"));
    let mut gone = ended(open.clone(), "x", EndReason::Deleted);
    gone.ended_at = None;
    let j = judge(
        &req,
        &[listed("1", open), listed("2", gone)],
        t("2026-12-05T00:00:00Z"),
    );
    assert!(!j.eligible, "{j:?}");
    assert_eq!(words(SignedDuration::from_secs(93_784)), "1d2h3m4s");
}
