//! What a reconcile writes, decided from what it observed: [`decide`] is a
//! pure function from the SettingsImage's generation and status, the
//! [`Step`] its attempt ended on and the failures in a row before it, to
//! the status, the Events, the log line, the metrics and the requeue.
//! `super::write` applies the [`Decision`] with one status write; nothing
//! here talks to the API server, so each row below is a unit test
//! (`decide_tests.rs`).
//!
//! The kstatus conventions, as Flux's objects follow them: `Ready` always
//! (`True`, or `False` with the reason), `Reconciling` and `Stalled` only
//! while true, never both; `status.observedGeneration` and each
//! condition's `observedGeneration` the generation the attempt read.
//!
//! | step | Ready | Reconciling | Stalled | Events | retried |
//! |---|---|---|---|---|---|
//! | published | True `Succeeded` | - | - | `Normal Published` per pushed image, then the notes | after `spec.interval` |
//! | same revision, checked within the interval | unchanged (no write) | | | none | at the interval |
//! | no artifact yet, or one not understood | False `ArtifactNotReady` / `InvalidRevision` | True (same reason) | - | none | when the GitRepository changes |
//! | bad spec, missing GitRepository or Secret key, a source in another namespace, a refused push | False (reason) | - | True (names the field) | `Warning` (reason) | after the interval, or when the spec changes |
//! | git, registry or API server failure | False (reason) | True `ProgressingWithRetry` | - | `Warning` (reason) | with backoff, 1 s doubling to 5 min |
//! | suspended | unchanged (no write) | | | none | when the spec changes |
//!
//! The status the API server refuses (`Stalled StatusRefused`) is decided
//! where it is refused, by `super::super::status::write_checked`.
//!
//! An anomaly of the push (a re-run of an older commit, a timestamp that
//! went backwards, ...) and a branch tag kept on a newer commit are Warning
//! Events and part of the Ready message: the cluster only moves forward. A
//! folder name lower-cased for its repository (the one mapping of
//! `many::repositories`) is a Normal Event and a notice in the Ready
//! message, the text `push` prints.

use std::time::Duration;

use serde_json::Value;

use super::step::Step;
use crate::controller::crd::{ImageStatus, SettingsImageStatus};
use crate::controller::logs::Level;
use crate::controller::redact::Held;
use crate::controller::status::{self, READY, RECONCILING, STALLED};
use crate::many::LowerCased;
use crate::pipeline::FolderImage;

/// The first retry after a failure; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// The longest wait between retries.
const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// What one reconcile observed: the input of [`decide`].
#[derive(Debug)]
pub struct Observed<'a> {
    /// `metadata.generation` of the SettingsImage read.
    pub generation: Option<i64>,
    /// Its status as read (`None`: none yet).
    pub status: Option<&'a SettingsImageStatus>,
    /// How the attempt ended.
    pub step: Step,
    /// `spec.interval`, raised to the floor.
    pub interval: Duration,
    /// The notice that the interval was raised, if it was.
    pub raised: Option<String>,
    /// Failures in a row before this attempt.
    pub failures: u32,
    /// The credentials the attempt read, kept out of every word written.
    pub held: &'a Held,
    /// Now, as `metav1.Time` (a condition's transition time).
    pub now: &'a str,
}

/// When to reconcile again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requeue {
    /// After this long.
    After(Duration),
    /// When the SettingsImage or its GitRepository changes.
    OnChange,
}

/// A note for Events and the Ready message: a Warning Event, or a Normal
/// one for a notice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventNote {
    /// The Event's reason.
    pub reason: &'static str,
    /// Its note.
    pub message: String,
    /// `Warning` (else `Normal`).
    pub warning: bool,
}

/// An Event to write, after the status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Emit {
    /// A `Normal Published` Event of its own (never folded into a series).
    Published(String),
    /// An Event through the recorder.
    Note(EventNote),
}

/// A log line about the SettingsImage.
#[derive(Debug, Clone, PartialEq)]
pub struct Log {
    /// Its level.
    pub level: Level,
    /// Its message.
    pub message: String,
    /// Its fields besides the object's namespace and name.
    pub fields: Vec<(&'static str, Value)>,
}

/// What the controller keeps in memory about the object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Remember {
    /// Nothing changes.
    Nothing,
    /// Published: no failures in a row, checked now.
    Published,
    /// Failed: this many failures in a row.
    Failed {
        /// Failures in a row, this one included.
        in_a_row: u32,
    },
}

/// What one reconcile writes, in the order it is written.
#[derive(Debug)]
pub struct Decision {
    /// `settings_image_reconciles_total{result}`.
    pub result: &'static str,
    /// `settings_image_failures_total{reason}`, when it failed.
    pub failure: Option<&'static str>,
    /// Each image's push: whether it changed the registry, and the bytes
    /// uploaded (`settings_image_publishes_total`, `_uploaded_bytes_total`).
    pub uploads: Vec<(bool, u64)>,
    /// The memory of the object.
    pub remember: Remember,
    /// The whole status to write, once (`None`: no write).
    pub status: Option<SettingsImageStatus>,
    /// The Events, after the status.
    pub events: Vec<Emit>,
    /// The log line.
    pub log: Option<Log>,
    /// When to reconcile again.
    pub requeue: Requeue,
}

impl Decision {
    /// Nothing written: only counted, and requeued.
    fn quiet(result: &'static str, requeue: Requeue) -> Decision {
        Decision {
            result,
            failure: None,
            uploads: Vec::new(),
            remember: Remember::Nothing,
            status: None,
            events: Vec::new(),
            log: None,
            requeue,
        }
    }
}

/// The kstatus state a step leaves the object in, besides `Ready`.
enum Abnormal<'a> {
    /// Neither `Reconciling` nor `Stalled`.
    None,
    /// `Reconciling=True` with this reason and message.
    Reconciling(&'a str, &'a str),
    /// `Stalled=True` with this reason and message.
    Stalled(&'a str, &'a str),
}

/// The generation observed, and now: what each condition written carries.
#[derive(Clone, Copy)]
struct Stamp<'a> {
    generation: Option<i64>,
    now: &'a str,
}

/// Sets `observedGeneration`, `Ready`, and `Reconciling`/`Stalled` as
/// `abnormal` says (absent when not true).
fn mark(
    st: &mut SettingsImageStatus,
    at: Stamp<'_>,
    ready: (bool, &str, &str),
    abnormal: Abnormal<'_>,
) {
    let (ready, reason, message) = ready;
    let Stamp { generation, now } = at;
    st.observed_generation = generation;
    let c = &mut st.conditions;
    status::set_at(c, READY, ready, reason, message, generation, now);
    match abnormal {
        Abnormal::None => {
            status::remove(c, RECONCILING);
            status::remove(c, STALLED);
        }
        Abnormal::Reconciling(reason, message) => {
            status::set_at(c, RECONCILING, true, reason, message, generation, now);
            status::remove(c, STALLED);
        }
        Abnormal::Stalled(reason, message) => {
            status::set_at(c, STALLED, true, reason, message, generation, now);
            status::remove(c, RECONCILING);
        }
    }
}

/// What to write for what was observed.
pub fn decide(o: Observed<'_>) -> Decision {
    let Observed {
        generation,
        status,
        step,
        interval,
        raised,
        failures,
        held,
        now,
    } = o;
    let st = status.cloned().unwrap_or_default();
    let at = Stamp { generation, now };
    match step.scrubbed(held) {
        Step::Suspended => Decision {
            log: Some(Log {
                level: Level::Info,
                message: "suspended: nothing published".into(),
                fields: Vec::new(),
            }),
            ..Decision::quiet("suspended", Requeue::OnChange)
        },
        Step::Unchanged { wait } => Decision::quiet("unchanged", Requeue::After(wait)),
        Step::Published {
            revision,
            images,
            notices,
        } => {
            let mut notes = notes(&images, &notices);
            notes.extend(raised.map(|message| EventNote {
                reason: "IntervalRaised",
                message,
                warning: false,
            }));
            for n in &mut notes {
                n.message = held.scrub(&n.message);
            }
            published(st, at, interval, revision, &images, notes)
        }
        Step::Waiting { reason, message } => waiting(st, at, reason, message),
        Step::Stalled { reason, message } => stalls(st, at, interval, reason, message),
        Step::Failed { reason, message } => retries(st, at, failures, reason, message),
    }
}

/// Waiting for the source: `Reconciling` with the reason; no Event.
fn waiting(
    mut st: SettingsImageStatus,
    at: Stamp<'_>,
    reason: &'static str,
    message: String,
) -> Decision {
    mark(
        &mut st,
        at,
        (false, reason, &message),
        Abnormal::Reconciling(reason, &message),
    );
    Decision {
        status: Some(st),
        log: Some(Log {
            level: Level::Info,
            message,
            fields: Vec::new(),
        }),
        ..Decision::quiet("waiting", Requeue::OnChange)
    }
}

/// An error a retry will not fix: `Stalled`, a Warning, and a look again
/// at the interval.
fn stalls(
    mut st: SettingsImageStatus,
    at: Stamp<'_>,
    interval: Duration,
    reason: &'static str,
    message: String,
) -> Decision {
    mark(
        &mut st,
        at,
        (false, reason, &message),
        Abnormal::Stalled(reason, &message),
    );
    Decision {
        failure: Some(reason),
        status: Some(st),
        events: vec![warning(reason, &message)],
        log: Some(Log {
            level: Level::Error,
            message,
            fields: vec![("reason", Value::from(reason))],
        }),
        // A Secret or GitRepository fixed later is found at the interval.
        ..Decision::quiet("stalled", Requeue::After(interval))
    }
}

/// An error a retry may fix: `Reconciling ProgressingWithRetry`, a
/// Warning, and a retry with backoff after `failures` before this one.
fn retries(
    mut st: SettingsImageStatus,
    at: Stamp<'_>,
    failures: u32,
    reason: &'static str,
    message: String,
) -> Decision {
    let in_a_row = failures.saturating_add(1);
    let wait = backoff(in_a_row);
    let retrying = format!("retrying in {} s: {message}", wait.as_secs());
    mark(
        &mut st,
        at,
        (false, reason, &message),
        Abnormal::Reconciling("ProgressingWithRetry", &retrying),
    );
    Decision {
        failure: Some(reason),
        remember: Remember::Failed { in_a_row },
        status: Some(st),
        events: vec![warning(reason, &message)],
        log: Some(Log {
            level: Level::Error,
            message,
            fields: vec![
                ("reason", Value::from(reason)),
                ("retryInSeconds", Value::from(wait.as_secs())),
            ],
        }),
        ..Decision::quiet("failed", Requeue::After(wait))
    }
}

fn warning(reason: &'static str, message: &str) -> Emit {
    Emit::Note(EventNote {
        reason,
        message: message.to_string(),
        warning: true,
    })
}

/// A published revision: `Ready=True`, the images, one Event per pushed
/// image, then the notes.
fn published(
    mut st: SettingsImageStatus,
    at: Stamp<'_>,
    interval: Duration,
    revision: String,
    images: &[FolderImage],
    notes: Vec<EventNote>,
) -> Decision {
    let uploads = images
        .iter()
        .filter_map(|img| img.report.push.as_ref())
        .map(|push| (push.pushed, push.uploaded_bytes))
        .collect();
    let pushed: Vec<&FolderImage> = images
        .iter()
        .filter(|p| p.report.push.as_ref().is_some_and(|x| x.pushed))
        .collect();
    let (listed, omitted) = status::bounded(images.iter().map(image_status).collect());
    let message = ready_message(
        &revision,
        images,
        pushed.len(),
        listed.len(),
        omitted,
        &notes,
    );
    st.images = listed;
    st.images_omitted = u32::try_from(omitted).ok().filter(|n| *n > 0);
    st.last_handled_revision = Some(revision.clone());
    mark(&mut st, at, (true, "Succeeded", &message), Abnormal::None);
    // One Event per pushed image, never folded into an earlier one's
    // series (the recorder would keep only the first note).
    let mut events: Vec<Emit> = pushed
        .iter()
        .map(|p| Emit::Published(format!("pushed {} for {revision}", reference(p))))
        .collect();
    events.extend(notes.into_iter().map(Emit::Note));
    Decision {
        uploads,
        remember: Remember::Published,
        status: Some(st),
        events,
        log: Some(Log {
            level: Level::Info,
            message,
            fields: vec![
                ("revision", Value::from(revision)),
                ("pushed", Value::from(pushed.len())),
            ],
        }),
        ..Decision::quiet("published", Requeue::After(interval))
    }
}

/// The Ready message of a publish: the image (or how many), the folders
/// `status.images` leaves out, and each note.
fn ready_message(
    revision: &str,
    images: &[FolderImage],
    pushed: usize,
    listed: usize,
    omitted: usize,
    notes: &[EventNote],
) -> String {
    let mut message = match images {
        [one] => format!(
            "{} {}",
            if pushed == 0 {
                "up to date"
            } else {
                "published"
            },
            reference(one)
        ),
        many => format!("{} images for {revision}, {pushed} pushed", many.len()),
    };
    if omitted > 0 {
        let first = images.get(listed).map(|p| p.path.as_str()).unwrap_or("");
        message.push_str(&format!(
            "; status.images lists the first {listed} of {} folders (it holds at most {} KiB); the other {omitted}, from {} on, are published as well",
            images.len(),
            status::IMAGES_BUDGET / 1024,
            cut(first, 200)
        ));
    }
    for n in notes {
        let what = if n.warning { "warning" } else { "notice" };
        message.push_str(&format!("; {what} {}: {}", n.reason, n.message));
    }
    message
}

/// The wait before checking again when `revision` was published under
/// this `generation` and checked (`since_checked` ago) within `interval`:
/// nothing to ask anyone. `None`: publish (or check) now.
pub fn unchanged(
    status: Option<&SettingsImageStatus>,
    generation: Option<i64>,
    revision: &str,
    since_checked: Option<Duration>,
    interval: Duration,
) -> Option<Duration> {
    let st = status?;
    let same = st.last_handled_revision.as_deref() == Some(revision)
        && st.observed_generation == generation
        && status::is_ready(st);
    let since = since_checked.filter(|_| same)?;
    (since < interval).then(|| interval - since)
}

/// The wait after `failures` failures in a row.
pub fn backoff(failures: u32) -> Duration {
    let exp = failures.saturating_sub(1).min(16);
    (FIRST_BACKOFF * 2u32.pow(exp)).min(MAX_BACKOFF)
}

/// `s` cut to at most `max` bytes (on a character boundary), with `...`
/// when cut.
fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

/// `HOST/NAME:TAG@DIGEST` of a folder's image.
fn reference(p: &FolderImage) -> String {
    p.report
        .push
        .as_ref()
        .map(|x| x.reference.clone())
        .unwrap_or_else(|| format!("{}@{}", p.repository, p.report.digest))
}

fn image_status(p: &FolderImage) -> ImageStatus {
    ImageStatus {
        path: p.path.clone(),
        repository: p.repository.clone(),
        tag: p.report.timestamp_tag.clone().unwrap_or_default(),
        digest: p.report.digest.clone(),
        commit: p.report.commit.clone().unwrap_or_default(),
        pushed: p.report.push.as_ref().is_some_and(|x| x.pushed),
    }
}

/// The mapping's notices (a folder name lower-cased, as `push` and `flux`
/// print it), then the anomalies, kept branch tags and warnings of a
/// publish, one note each.
fn notes(images: &[FolderImage], notices: &[LowerCased]) -> Vec<EventNote> {
    let mut out: Vec<EventNote> = notices
        .iter()
        .map(|n| EventNote {
            reason: "RepositoryLowerCased",
            message: n.text().render(&crate::controller::spec::Spec),
            warning: false,
        })
        .collect();
    for p in images {
        let r = &p.report;
        if let Some(a) = &r.anomaly {
            out.push(anomaly_note(&p.repository, a));
        }
        if let Some(message) = crate::controller::spec::branch_note(&p.repository, r) {
            out.push(EventNote {
                reason: "BranchTagKept",
                message,
                warning: true,
            });
        }
        out.extend(r.warnings.iter().map(|w| warning_note(&p.repository, w)));
    }
    out
}

/// The Event of an anomaly of the publish to `repository`.
pub(crate) fn anomaly_note(repository: &str, a: &crate::release::ordering::Anomaly) -> EventNote {
    EventNote {
        reason: anomaly_reason(a.kind),
        message: format!(
            "{repository}: {}",
            crate::show::anomaly::message(a, &crate::controller::spec::Spec)
        ),
        warning: true,
    }
}

/// The Event of a warning of the publish to `repository`.
pub(crate) fn warning_note(repository: &str, w: &crate::notice::Notice) -> EventNote {
    EventNote {
        reason: "PublishWarning",
        message: format!(
            "{repository}: {}",
            crate::show::notice(w).render(&crate::controller::spec::Spec)
        ),
        warning: true,
    }
}

fn anomaly_reason(kind: crate::release::ordering::AnomalyKind) -> &'static str {
    use crate::release::ordering::AnomalyKind as K;
    match kind {
        K::SameTimestamp => "SameTimestamp",
        K::BackwardsTimestamp => "BackwardsTimestamp",
        K::RerunOfOlder => "OlderRevision",
        K::RewoundHistory => "RewoundHistory",
    }
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
