//! The decisions of a SettingsRollout reconcile, one story at a time; the
//! expected records are written out by hand.

use super::*;

const D1: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
const D2: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";

fn t(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn pod(digest: &str, created: &str, ready: Option<(bool, &str)>) -> PodSeen {
    PodSeen {
        digest: Some(digest.into()),
        created: t(created),
        ready: ready.map(|(r, at)| (r, t(at))),
    }
}

fn done(replicas: u32) -> Progress {
    Progress {
        generation: 2,
        observed_generation: 2,
        replicas,
        updated: replicas,
        ready: replicas,
        available: replicas,
        total: replicas,
    }
}

fn rolling(replicas: u32) -> Progress {
    Progress {
        total: replicas + 1,
        ready: replicas,
        ..done(replicas)
    }
}

fn shop(digest: &str, progress: Progress, pods: Vec<PodSeen>) -> Seen {
    Seen {
        kind: WorkloadKind::Deployment,
        name: "shop".into(),
        digest: Some(digest.into()),
        progress,
        pods,
    }
}

fn plan(now: &str, before: &[WorkloadStatus], seen: &[Seen]) -> Plan {
    decide(&Input {
        cluster: "staging",
        namespace: "team",
        repository: "reg.example/acme/shop",
        grace: Duration::from_secs(600),
        now: t(now),
        before,
        seen,
    })
}

fn json(r: &Record) -> String {
    String::from_utf8(serde_json::to_vec(r).unwrap()).unwrap()
}

#[test]
fn rolled_out_means_every_replica_updated_available_and_ready_of_the_current_spec() {
    assert!(done(2).rolled_out());
    for p in [
        Progress {
            observed_generation: 1,
            ..done(2)
        },
        Progress {
            updated: 1,
            ..done(2)
        },
        Progress {
            ready: 1,
            ..done(2)
        },
        Progress {
            available: 1,
            ..done(2)
        },
        rolling(2),
        done(0),
    ] {
        assert!(!p.rolled_out(), "{p:?}");
    }
}

#[test]
fn a_full_rollout_is_recorded_once_with_the_last_replicas_ready_time() {
    let seen = [shop(
        D1,
        done(2),
        vec![
            pod(
                D1,
                "2026-12-01T10:00:00Z",
                Some((true, "2026-12-01T10:00:20Z")),
            ),
            pod(
                D1,
                "2026-12-01T10:00:01Z",
                Some((true, "2026-12-01T10:00:31Z")),
            ),
        ],
    )];
    let p = plan("2026-12-01T10:05:00Z", &[], &seen);
    assert_eq!(p.changes.len(), 1);
    let c = &p.changes[0];
    assert_eq!(c.records.len(), 1);
    assert_eq!(
        json(&c.records[0]),
        format!(
            r#"{{"cluster":"staging","namespace":"team","kind":"Deployment","name":"shop","repository":"reg.example/acme/shop","digest":"{D1}","state":"ready","readySince":"2026-12-01T10:00:31Z","replicas":2}}"#
        )
    );
    let next = c.next.clone().unwrap();
    assert_eq!(
        (next.state.as_str(), next.ready_since.as_deref()),
        (READY, Some("2026-12-01T10:00:31Z"))
    );
    // The same state again: nothing to write.
    let again = plan("2026-12-01T11:00:00Z", std::slice::from_ref(&next), &seen);
    assert!(again.changes[0].records.is_empty());
    assert_eq!(again.changes[0].next.as_ref(), Some(&next));
    // A restart that lost the status (or a new leader) an hour later:
    // the same bytes.
    let later = plan("2026-12-01T11:05:00Z", &[], &seen);
    assert_eq!(later.changes[0].records, c.records);
    // Fully rolled out by the counts but a pod not there yet: wait.
    let short = [shop(D1, done(2), seen[0].pods[..1].to_vec())];
    let p = plan("2026-12-01T10:05:00Z", &[], &short);
    assert!(p.changes[0].records.is_empty());
    assert_eq!(p.changes[0].next.as_ref().unwrap().state, PROGRESSING);
}

fn ready_d1() -> WorkloadStatus {
    WorkloadStatus {
        kind: "Deployment".into(),
        name: "shop".into(),
        digest: D1.into(),
        state: READY.into(),
        ready_since: Some("2026-12-01T10:00:31Z".into()),
        unavailable_since: None,
        replicas: 1,
        record: Some("sha256:r1".into()),
    }
}

#[test]
fn moving_to_a_crashing_digest_supersedes_the_run_then_records_it_unavailable_after_the_grace() {
    // The template moved to D2; its pod crashes; the old pod still serves.
    let seen = [shop(
        D2,
        rolling(1),
        vec![
            pod(
                D1,
                "2026-12-01T10:00:00Z",
                Some((true, "2026-12-01T10:00:31Z")),
            ),
            pod(
                D2,
                "2026-12-01T12:00:00Z",
                Some((false, "2026-12-01T12:00:00Z")),
            ),
        ],
    )];
    let p = plan("2026-12-01T12:01:00Z", &[ready_d1()], &seen);
    let c = &p.changes[0];
    assert_eq!(c.records.len(), 1);
    let r = &c.records[0];
    assert_eq!(
        (
            r.state,
            r.reason,
            r.ready_since.as_deref(),
            r.ended_at.as_deref(),
            r.superseded_by.as_deref(),
            r.digest.as_str()
        ),
        (
            State::Ended,
            Some(EndReason::Superseded),
            Some("2026-12-01T10:00:31Z"),
            Some("2026-12-01T12:00:00Z"),
            Some(D2),
            D1
        )
    );
    let next = c.next.clone().unwrap();
    assert_eq!(
        (next.digest.as_str(), next.state.as_str()),
        (D2, PROGRESSING)
    );
    assert_eq!(
        next.unavailable_since.as_deref(),
        Some("2026-12-01T12:00:00Z")
    );
    // Looked at again when the grace period (10m) runs out.
    assert_eq!(p.requeue, Some(Duration::from_secs(540)));
    // Within the grace period: nothing.
    let p = plan("2026-12-01T12:09:59Z", std::slice::from_ref(&next), &seen);
    assert!(p.changes[0].records.is_empty());
    // After it: never Ready, unavailable from its first pod on.
    let p = plan("2026-12-01T12:10:00Z", std::slice::from_ref(&next), &seen);
    let c = &p.changes[0];
    assert_eq!(
        json(&c.records[0]),
        format!(
            r#"{{"cluster":"staging","namespace":"team","kind":"Deployment","name":"shop","repository":"reg.example/acme/shop","digest":"{D2}","state":"ended","replicas":1,"endedAt":"2026-12-01T12:00:00Z","reason":"unavailable"}}"#
        )
    );
    let after = c.next.clone().unwrap();
    assert_eq!(after.state, UNAVAILABLE);
    // Recorded: nothing more while it stays so.
    let p = plan("2026-12-01T13:00:00Z", std::slice::from_ref(&after), &seen);
    assert!(p.changes[0].records.is_empty());
    assert_eq!(p.requeue, None);
    // A superseded run whose new pods do not exist yet waits for them.
    let none_yet = [shop(D2, rolling(1), vec![seen[0].pods[0].clone()])];
    let p = plan("2026-12-01T12:01:00Z", &[ready_d1()], &none_yet);
    assert!(p.changes[0].records.is_empty());
    assert_eq!(p.changes[0].next.as_ref(), Some(&ready_d1()));
}

#[test]
fn a_ready_run_that_stays_unavailable_past_the_grace_ends_unavailable_from_its_first_failure() {
    let seen = [shop(
        D1,
        Progress {
            ready: 0,
            available: 0,
            ..done(1)
        },
        vec![pod(
            D1,
            "2026-12-01T10:00:00Z",
            Some((false, "2026-12-01T14:00:00Z")),
        )],
    )];
    let p = plan("2026-12-01T14:03:00Z", &[ready_d1()], &seen);
    assert!(p.changes[0].records.is_empty());
    assert_eq!(p.requeue, Some(Duration::from_secs(420)));
    let waiting = p.changes[0].next.clone().unwrap();
    assert_eq!(
        waiting.unavailable_since.as_deref(),
        Some("2026-12-01T14:00:00Z")
    );
    let p = plan("2026-12-01T14:11:00Z", &[waiting], &seen);
    let r = &p.changes[0].records[0];
    assert_eq!(
        (r.reason, r.ready_since.as_deref(), r.ended_at.as_deref()),
        (
            Some(EndReason::Unavailable),
            Some("2026-12-01T10:00:31Z"),
            Some("2026-12-01T14:00:00Z")
        )
    );
    // Recovered within the grace period: still the same run, nothing written.
    let back = [shop(
        D1,
        done(1),
        vec![pod(
            D1,
            "2026-12-01T10:00:00Z",
            Some((true, "2026-12-01T14:02:00Z")),
        )],
    )];
    let mut w = ready_d1();
    w.unavailable_since = Some("2026-12-01T14:00:00Z".into());
    let p = plan("2026-12-01T14:03:00Z", &[w], &back);
    assert!(p.changes[0].records.is_empty());
    assert_eq!(p.changes[0].next.as_ref(), Some(&ready_d1()));
}

#[test]
fn a_deleted_workload_ends_its_run_without_a_time() {
    let p = plan("2026-12-01T14:03:00Z", &[ready_d1()], &[]);
    let c = &p.changes[0];
    assert_eq!(c.next, None);
    assert_eq!(
        json(&c.records[0]),
        format!(
            r#"{{"cluster":"staging","namespace":"team","kind":"Deployment","name":"shop","repository":"reg.example/acme/shop","digest":"{D1}","state":"ended","readySince":"2026-12-01T10:00:31Z","replicas":1,"reason":"deleted"}}"#
        )
    );
    // A workload that never ran the repository has no entry.
    let other = Seen {
        digest: None,
        ..shop(D1, done(1), vec![])
    };
    let p = plan("2026-12-01T14:03:00Z", &[], &[other]);
    assert_eq!(p.changes[0].next, None);
    assert!(p.changes[0].records.is_empty());
}
