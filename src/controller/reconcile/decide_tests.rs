//! [`decide`] for each row of the kstatus table in `decide.rs` (and
//! docs/controller.md), without an API server: the status written, its
//! conditions (`Ready` always; `Reconciling` or `Stalled` only while true),
//! `observedGeneration`, the Events, the log line, the metrics and the
//! requeue.

use super::super::step::{failed, stalled};
use super::*;
use crate::branch_tag::{BranchTag, Change};
use crate::controller::crd::Condition;
use crate::notice::{Notice, Unattested};
use crate::publish::PushReport;
use crate::release::ordering::{Anomaly, AnomalyKind, Case};
use crate::report::{LayerReport, Report};

const NOW: &str = "2026-12-02T20:00:00Z";
const EARLIER: &str = "2026-11-30T08:00:00Z";
const GENERATION: Option<i64> = Some(3);
const INTERVAL: Duration = Duration::from_secs(600);
const C: &str = "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567";

fn revision() -> String {
    format!("main@sha1:{C}")
}

fn decided(status: Option<&SettingsImageStatus>, step: Step, failures: u32) -> Decision {
    let held = Held::new();
    decide(Observed {
        generation: GENERATION,
        status,
        step,
        interval: INTERVAL,
        raised: None,
        failures,
        held: &held,
        now: NOW,
    })
}

fn condition(type_: &str, status: &str, reason: &str, message: &str, at: &str) -> Condition {
    Condition {
        type_: type_.into(),
        status: status.into(),
        observed_generation: GENERATION,
        last_transition_time: at.into(),
        reason: reason.into(),
        message: message.into(),
    }
}

/// A status as a failed attempt of generation 2 left it: Ready=False and
/// both abnormal conditions (so each row shows which it removes).
fn failing_before() -> SettingsImageStatus {
    let old = |type_: &str, status: &str| Condition {
        type_: type_.into(),
        status: status.into(),
        observed_generation: Some(2),
        last_transition_time: EARLIER.into(),
        reason: "GitOperationFailed".into(),
        message: "old".into(),
    };
    SettingsImageStatus {
        observed_generation: Some(2),
        conditions: vec![
            old(READY, "False"),
            old(RECONCILING, "True"),
            old(STALLED, "True"),
        ],
        ..Default::default()
    }
}

/// A folder's published image as `publish::run` reports it.
fn image(path: &str, repository: &str, pushed: bool) -> FolderImage {
    let digest = format!("sha256:{}", "d".repeat(64));
    let tag = "main-1700000000-0a1b2c3";
    FolderImage {
        path: path.into(),
        repository: repository.into(),
        report: Report {
            digest: digest.clone(),
            config_digest: format!("sha256:{}", "c".repeat(64)),
            layer: LayerReport {
                digest: format!("sha256:{}", "1".repeat(64)),
                diff_id: format!("sha256:{}", "2".repeat(64)),
                size: 10,
                uncompressed_size: 20,
            },
            files: 1,
            size: 5,
            tags: vec![tag.into()],
            output: None,
            new_blobs: 0,
            commit: Some(C.into()),
            timestamp: Some(1_700_000_000),
            timestamp_tag: Some(tag.into()),
            anomaly: None,
            branch_tag: None,
            push: Some(PushReport {
                reference: format!("{repository}:{tag}@{digest}"),
                uploaded_blobs: usize::from(pushed),
                uploaded_bytes: if pushed { 10 } else { 0 },
                pushed,
                provenance: None,
            }),
            warnings: Vec::new(),
        },
    }
}

fn published(images: Vec<FolderImage>, notices: Vec<LowerCased>) -> Step {
    Step::Published {
        revision: revision(),
        images,
        notices,
    }
}

/// Row "published": Ready=True Succeeded with `observedGeneration`, the
/// abnormal conditions gone, the image listed, one `Normal Published`
/// Event per pushed image, checked again after the interval.
#[test]
fn published_is_ready_and_neither_reconciling_nor_stalled() {
    let before = failing_before();
    let d = decided(
        Some(&before),
        published(vec![image("app", "reg.example/acme/app", true)], vec![]),
        4,
    );
    let reference = format!(
        "reg.example/acme/app:main-1700000000-0a1b2c3@sha256:{}",
        "d".repeat(64)
    );
    let message = format!("published {reference}");
    let st = d.status.expect("a status is written");
    assert_eq!(
        st.conditions,
        [condition(READY, "True", "Succeeded", &message, NOW)]
    );
    assert_eq!(st.observed_generation, GENERATION);
    assert_eq!(st.last_handled_revision, Some(revision()));
    assert_eq!(st.images.len(), 1);
    assert_eq!(
        (st.images[0].path.as_str(), st.images[0].pushed),
        ("app", true)
    );
    assert_eq!(st.images_omitted, None);
    assert_eq!(
        d.events,
        [Emit::Published(format!(
            "pushed {reference} for {}",
            revision()
        ))]
    );
    assert_eq!(d.requeue, Requeue::After(INTERVAL));
    assert_eq!(
        (d.result, d.failure, d.remember),
        ("published", None, Remember::Published)
    );
    assert_eq!(d.uploads, [(true, 10)]);
    let log = d.log.expect("a log line");
    assert_eq!(
        (log.level, log.message.as_str()),
        (Level::Info, message.as_str())
    );
    assert_eq!(
        log.fields,
        [
            ("revision", Value::from(revision())),
            ("pushed", Value::from(1)),
        ]
    );
}

/// Ready stays True across publishes: its transition time does not move,
/// and an image the registry already held is "up to date", no Event.
#[test]
fn an_image_already_there_is_up_to_date_and_ready_keeps_its_transition_time() {
    let before = SettingsImageStatus {
        conditions: vec![condition(READY, "True", "Succeeded", "old", EARLIER)],
        ..Default::default()
    };
    let d = decided(
        Some(&before),
        published(vec![image("app", "reg.example/acme/app", false)], vec![]),
        0,
    );
    let st = d.status.unwrap();
    assert_eq!(st.conditions.len(), 1);
    assert_eq!(st.conditions[0].last_transition_time, EARLIER);
    assert!(
        st.conditions[0]
            .message
            .starts_with("up to date reg.example/acme/app:"),
        "{:?}",
        st.conditions[0]
    );
    assert_eq!(d.events, []);
    assert_eq!(d.uploads, [(false, 0)]);
}

/// A glob: how many images and how many pushed; what `status.images`
/// leaves out is counted and named.
#[test]
fn a_glob_says_how_many_were_pushed_and_what_the_status_leaves_out() {
    let two = vec![
        image("configs/a", "reg.example/acme/a", true),
        image("configs/b", "reg.example/acme/b", false),
    ];
    let d = decided(None, published(two, vec![]), 0);
    let st = d.status.unwrap();
    assert_eq!(
        st.conditions[0].message,
        format!("2 images for {}, 1 pushed", revision())
    );
    assert_eq!(d.events.len(), 1, "{:?}", d.events);
    // 100 folders under a 16 KiB prefix: more than status.images holds.
    let deep = "d".repeat(16 * 1024);
    let many: Vec<FolderImage> = (0..100)
        .map(|i| {
            image(
                &format!("{deep}/f{i:03}"),
                &format!("reg.example/acme/f{i:03}"),
                false,
            )
        })
        .collect();
    let d = decided(None, published(many, vec![]), 0);
    let st = d.status.unwrap();
    let listed = st.images.len();
    let omitted = 100 - listed;
    assert!(listed > 0 && omitted > 0, "{listed}");
    assert_eq!(st.images_omitted, Some(omitted as u32));
    assert_eq!(
        st.conditions[0].message,
        format!(
            "100 images for {}, 0 pushed; status.images lists the first {listed} of 100 folders \
             (it holds at most 128 KiB); the other {omitted}, from {}... on, are published as well",
            revision(),
            &deep[..200]
        )
    );
}

/// The notes of a publish (a folder lower-cased, an anomaly, a branch tag
/// kept, a warning, the interval raised): Ready stays True, each is part
/// of its message and an Event after the Published ones, Warning or
/// Normal; a credential a server echoed into one is taken out.
#[test]
fn the_notes_of_a_publish_are_events_and_part_of_the_ready_message() {
    let mut img = image("configs/Cart", "reg.example/acme/cart", true);
    img.report.anomaly = Some(Anomaly {
        kind: AnomalyKind::RerunOfOlder,
        // A server's echo of a credential, where a commit id goes.
        case: Case::Rerun {
            commit: "2222222222222222".into(),
            ts: 1_700_000_000,
            new_tag: "main-1700000000-2222222".into(),
            newest: crate::release::channel::parse("main", "main-1800000000-1111111").unwrap(),
            rev: "s3cr3t-t0ken-value".into(),
            moves_to_new: false,
        },
        served: "main-1800000000-1111111".into(),
        other_tag: "main-1800000000-1111111".into(),
    });
    img.report.branch_tag = Some(BranchTag {
        name: "main".into(),
        commit: img.report.commit.clone(),
        recorded: Some("1111111".into()),
        repaired_to: None,
        change: Change::Held {
            current: "1111111".into(),
            force_push: false,
            rewound: false,
        },
        unordered: None,
    });
    img.report.warnings = vec![Notice::NoProvenance(Unattested::NoCommit)];
    let held = Held::new();
    held.add_token("s3cr3t-t0ken-value");
    let d = decide(Observed {
        generation: GENERATION,
        status: None,
        step: published(
            vec![img],
            vec![LowerCased {
                folder: "configs/Cart".into(),
                repository: "reg.example/acme/cart".into(),
            }],
        ),
        interval: INTERVAL,
        raised: Some(
            "spec.interval 1ms is below the controller's --min-interval: checked every 1m".into(),
        ),
        failures: 0,
        held: &held,
        now: NOW,
    });
    let note = |reason, message: &str, warning| {
        Emit::Note(EventNote {
            reason,
            message: message.into(),
            warning,
        })
    };
    let notes = [
        note(
            "RepositoryLowerCased",
            "the folder configs/Cart has capitals in its name; registries take lower-case names only, \
             so its image goes to reg.example/acme/cart",
            false,
        ),
        note(
            "OlderRevision",
            "reg.example/acme/cart: commit 222222222222 is an ancestor of <redacted>, already published as \
             main-1800000000-1111111: this is a re-run of an older job (or its first run after a newer commit \
             was published); main-1700000000-2222222 names this older commit's content and Flux keeps serving \
             main-1800000000-1111111 (its timestamp is higher than main-1700000000-2222222's)",
            true,
        ),
        note(
            "BranchTagKept",
            &format!(
                "reg.example/acme/cart: branch tag main stays on commit 1111111, newer than {C}: \
                 an older revision never moves it back"
            ),
            true,
        ),
        note(
            "PublishWarning",
            "reg.example/acme/cart: no provenance attached: the folder is not in a git commit",
            true,
        ),
        note(
            "IntervalRaised",
            "spec.interval 1ms is below the controller's --min-interval: checked every 1m",
            false,
        ),
    ];
    assert!(matches!(d.events[0], Emit::Published(_)), "{:?}", d.events);
    assert_eq!(d.events[1..], notes);
    let st = d.status.unwrap();
    let ready = &st.conditions[0];
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("True", "Succeeded")
    );
    let said: Vec<String> = notes
        .iter()
        .map(|n| match n {
            Emit::Note(n) => format!(
                "; {} {}: {}",
                if n.warning { "warning" } else { "notice" },
                n.reason,
                n.message
            ),
            Emit::Published(_) => unreachable!(),
        })
        .collect();
    assert!(ready.message.ends_with(&said.concat()), "{}", ready.message);
    assert!(!ready.message.contains("s3cr3t"), "{}", ready.message);
}

/// Row "no artifact yet": Ready=False and Reconciling=True with the
/// reason, Stalled gone, no Event; waits for the GitRepository to change.
#[test]
fn waiting_for_the_artifact_is_reconciling() {
    let before = failing_before();
    let message = "waiting for source-controller to fetch GitRepository ns/settings (no status.artifact.revision yet)";
    let d = decided(
        Some(&before),
        Step::Waiting {
            reason: "ArtifactNotReady",
            message: message.into(),
        },
        2,
    );
    let st = d.status.unwrap();
    assert_eq!(
        st.conditions,
        [
            condition(READY, "False", "ArtifactNotReady", message, EARLIER),
            condition(RECONCILING, "True", "ArtifactNotReady", message, EARLIER),
        ]
    );
    assert_eq!(st.observed_generation, GENERATION);
    assert_eq!(d.events, []);
    assert_eq!(d.requeue, Requeue::OnChange);
    assert_eq!(
        (d.result, d.failure, d.remember),
        ("waiting", None, Remember::Nothing)
    );
    assert_eq!(d.log.map(|l| l.level), Some(Level::Info));
}

/// Row "bad spec, missing source or Secret, refused push": Ready=False
/// and Stalled=True with the reason, Reconciling gone, a Warning Event;
/// checked again at the interval, not with backoff.
#[test]
fn an_error_a_retry_will_not_fix_stalls() {
    let before = failing_before();
    let message = "spec.secretRef: Secret ns/reg does not exist";
    let d = decided(Some(&before), stalled("SecretNotFound", message), 2);
    let st = d.status.unwrap();
    assert_eq!(
        st.conditions,
        [
            condition(READY, "False", "SecretNotFound", message, EARLIER),
            condition(STALLED, "True", "SecretNotFound", message, EARLIER),
        ]
    );
    assert_eq!(st.observed_generation, GENERATION);
    assert_eq!(
        d.events,
        [Emit::Note(EventNote {
            reason: "SecretNotFound",
            message: message.into(),
            warning: true,
        })]
    );
    assert_eq!(d.requeue, Requeue::After(INTERVAL));
    assert_eq!(
        (d.result, d.failure, d.remember),
        ("stalled", Some("SecretNotFound"), Remember::Nothing)
    );
    let log = d.log.unwrap();
    assert_eq!(log.level, Level::Error);
    assert_eq!(log.fields, [("reason", Value::from("SecretNotFound"))]);
}

/// Row "git or registry failure": Ready=False with the reason,
/// Reconciling=True `ProgressingWithRetry` saying when, Stalled gone, a
/// Warning Event; retried with backoff from the failures in a row.
#[test]
fn an_error_a_retry_may_fix_is_retried_with_backoff() {
    let message = "revision main@sha1:c: registry reg/x: PUT failed: 503";
    let d = decided(None, failed("RegistryOperationFailed", message), 0);
    let st = d.status.unwrap();
    assert_eq!(
        st.conditions,
        [
            condition(READY, "False", "RegistryOperationFailed", message, NOW),
            condition(
                RECONCILING,
                "True",
                "ProgressingWithRetry",
                &format!("retrying in 1 s: {message}"),
                NOW
            ),
        ]
    );
    assert_eq!(d.requeue, Requeue::After(Duration::from_secs(1)));
    assert_eq!(d.remember, Remember::Failed { in_a_row: 1 });
    assert_eq!(d.failure, Some("RegistryOperationFailed"));
    assert_eq!(d.result, "failed");
    assert_eq!(d.events.len(), 1);
    let log = d.log.unwrap();
    assert_eq!(
        log.fields,
        [
            ("reason", Value::from("RegistryOperationFailed")),
            ("retryInSeconds", Value::from(1)),
        ]
    );
    // The fourth failure in a row waits 8 s; a stalled object that now
    // fails loses Stalled.
    let before = failing_before();
    let d = decided(Some(&before), failed("GitOperationFailed", "x"), 3);
    assert_eq!(d.requeue, Requeue::After(Duration::from_secs(8)));
    assert_eq!(d.remember, Remember::Failed { in_a_row: 4 });
    let st = d.status.unwrap();
    assert_eq!(
        st.conditions
            .iter()
            .map(|c| (c.type_.as_str(), c.reason.as_str()))
            .collect::<Vec<_>>(),
        [
            (READY, "GitOperationFailed"),
            (RECONCILING, "ProgressingWithRetry")
        ]
    );
    assert_eq!(st.conditions[1].message, "retrying in 8 s: x");
}

/// Rows "same revision within the interval" and "suspended": nothing is
/// written; only the requeue.
#[test]
fn unchanged_and_suspended_write_nothing() {
    let before = failing_before();
    let d = decided(
        Some(&before),
        Step::Unchanged {
            wait: Duration::from_secs(42),
        },
        0,
    );
    assert!(d.status.is_none() && d.events.is_empty() && d.log.is_none());
    assert_eq!(d.requeue, Requeue::After(Duration::from_secs(42)));
    assert_eq!((d.result, d.remember), ("unchanged", Remember::Nothing));
    let d = decided(Some(&before), Step::Suspended, 0);
    assert!(d.status.is_none() && d.events.is_empty());
    assert_eq!(d.requeue, Requeue::OnChange);
    assert_eq!(d.result, "suspended");
    assert_eq!(
        d.log.map(|l| l.message),
        Some("suspended: nothing published".into())
    );
}

/// Whatever the step, a written status has Ready, never Reconciling and
/// Stalled together, and every condition observed this generation.
#[test]
fn every_written_status_follows_kstatus() {
    let before = failing_before();
    let steps = || {
        vec![
            published(vec![image("app", "reg.example/acme/app", true)], vec![]),
            Step::Waiting {
                reason: "InvalidRevision",
                message: "m".into(),
            },
            stalled("InvalidSpec", "spec.path: m"),
            failed("GitOperationFailed", "m"),
        ]
    };
    for before in [None, Some(&before)] {
        for step in steps() {
            let st = decided(before, step, 0).status.unwrap();
            let has = |t: &str| st.conditions.iter().any(|c| c.type_ == t);
            assert!(has(READY), "{st:?}");
            assert!(!(has(RECONCILING) && has(STALLED)), "{st:?}");
            assert_eq!(st.observed_generation, GENERATION);
            assert!(
                st.conditions
                    .iter()
                    .all(|c| c.observed_generation == GENERATION),
                "{st:?}"
            );
        }
    }
}

/// What `observe` asks before it reads any Secret or asks git: the same
/// revision, under the same generation, Ready, checked within the interval.
#[test]
fn a_revision_checked_within_the_interval_is_not_asked_again() {
    let ready = SettingsImageStatus {
        observed_generation: GENERATION,
        last_handled_revision: Some(revision()),
        conditions: vec![condition(READY, "True", "Succeeded", "m", EARLIER)],
        ..Default::default()
    };
    let rev = revision();
    let ago = |s| Some(Duration::from_secs(s));
    assert_eq!(
        unchanged(Some(&ready), GENERATION, &rev, ago(100), INTERVAL),
        Some(Duration::from_secs(500))
    );
    // Past the interval; never checked by this process; a new revision;
    // a new generation; not Ready; no status yet.
    assert_eq!(
        unchanged(Some(&ready), GENERATION, &rev, ago(600), INTERVAL),
        None
    );
    assert_eq!(
        unchanged(Some(&ready), GENERATION, &rev, None, INTERVAL),
        None
    );
    assert_eq!(
        unchanged(
            Some(&ready),
            GENERATION,
            "main@sha1:other",
            ago(1),
            INTERVAL
        ),
        None
    );
    assert_eq!(
        unchanged(Some(&ready), Some(4), &rev, ago(1), INTERVAL),
        None
    );
    let mut failing = ready.clone();
    failing.conditions = vec![condition(READY, "False", "GitOperationFailed", "m", NOW)];
    assert_eq!(
        unchanged(Some(&failing), GENERATION, &rev, ago(1), INTERVAL),
        None
    );
    assert_eq!(unchanged(None, GENERATION, &rev, ago(1), INTERVAL), None);
}

#[test]
fn backoff_doubles_to_five_minutes() {
    assert_eq!(backoff(1), Duration::from_secs(1));
    assert_eq!(backoff(2), Duration::from_secs(2));
    assert_eq!(backoff(4), Duration::from_secs(8));
    assert_eq!(backoff(40), MAX_BACKOFF);
}

#[test]
fn a_lower_cased_folder_is_a_notice_not_a_warning() {
    let n = notes(
        &[],
        &[LowerCased {
            folder: "configs/Cart".into(),
            repository: "reg.example/acme/cart".into(),
        }],
    );
    assert_eq!(n.len(), 1);
    assert_eq!(n[0].reason, "RepositoryLowerCased");
    assert!(!n[0].warning);
    assert!(n[0].message.contains("configs/Cart"));
}
