//! Writes a [`Decision`]: the memory and the metrics, then the one status
//! write (`super::super::status::write_checked`), then the Events in
//! order, then the log line. Each pushed image is a `Normal Published`
//! Event of its own; other Events go through kube-runtime's recorder
//! (repeats of a reason within six minutes are one series).

use std::time::Instant;

use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::{Api, Resource, ResourceExt};
use serde_json::Value;

use super::decide::{Decision, Emit, EventNote, Remember, Requeue};
use super::{Ctx, StatusError};
use crate::controller::crd::SettingsImage;
use crate::controller::logs::{self, Level};
use crate::controller::status;

/// Writes what `d` says about `si` (`key` is `NAMESPACE/NAME`); `Err` when
/// the status could not be written at all (kube-runtime retries).
pub async fn apply(
    si: &SettingsImage,
    ctx: &Ctx,
    key: &str,
    d: Decision,
    started: Instant,
) -> Result<Action, StatusError> {
    match d.remember {
        Remember::Nothing => {}
        Remember::Published => ctx.remember(key, |m| {
            m.failures = 0;
            m.checked = Some(Instant::now());
        }),
        Remember::Failed { in_a_row } => ctx.remember(key, |m| m.failures = in_a_row),
    }
    if let Some(reason) = d.failure {
        ctx.metrics.failed(reason);
    }
    for (pushed, bytes) in &d.uploads {
        ctx.metrics.published(*pushed, *bytes);
    }
    if let Some(st) = &d.status {
        let api: Api<SettingsImage> =
            Api::namespaced(ctx.client.clone(), &si.namespace().unwrap_or_default());
        let w = status::write_checked(&api, si, st)
            .await
            .map_err(|source| StatusError {
                object: key.to_string(),
                source,
            })?;
        written(ctx, si, w).await;
        // Written: a later failure is new again, and retried from 5 s.
        ctx.remember(key, |m| {
            m.status_failures = 0;
            m.status_error = None;
        });
    }
    for e in d.events {
        match e {
            Emit::Published(note) => published_event(ctx, si, note).await,
            Emit::Note(n) => note_event(ctx, si, n).await,
        }
    }
    if let Some(log) = d.log {
        let ns = si.namespace().unwrap_or_default();
        logs::object(log.level, &ns, &si.name_any(), &log.message, &log.fields);
    }
    ctx.metrics
        .reconciled(d.result, started.elapsed().as_secs_f64());
    Ok(match d.requeue {
        Requeue::After(wait) => Action::requeue(wait),
        Requeue::OnChange => Action::await_change(),
    })
}

/// Says so when the API server refused the status as it was (the small
/// one written instead says it too).
async fn written(ctx: &Ctx, si: &SettingsImage, w: status::Written) {
    if let status::Written::Refused(why) = w {
        ctx.metrics.failed("StatusRefused");
        event(ctx, si, EventType::Warning, "StatusRefused", why.clone()).await;
        logs::object(
            Level::Error,
            &si.namespace().unwrap_or_default(),
            &si.name_any(),
            &why,
            &[("reason", Value::from("StatusRefused"))],
        );
    }
}

/// `note` cut to the 1 kB an Event's note may hold.
fn cut_note(mut note: String) -> String {
    if note.len() > 1000 {
        let mut end = 1000;
        while !note.is_char_boundary(end) {
            end -= 1;
        }
        note.truncate(end);
    }
    note
}

/// A `Normal Published` Event of its own (`events.k8s.io/v1`, a fresh
/// name): the recorder folds Events of one reason within six minutes into
/// the first one's series, which would name only the first image.
async fn published_event(ctx: &Ctx, si: &SettingsImage, note: String) {
    use k8s_openapi::api::events::v1::Event as K8sEvent;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
    let ns = si.namespace().unwrap_or_default();
    let now = k8s_openapi::jiff::Timestamp::now();
    let ev = K8sEvent {
        action: Some("Publish".into()),
        reason: Some("Published".into()),
        event_time: Some(MicroTime(now)),
        regarding: Some(si.object_ref(&())),
        note: Some(cut_note(note)),
        metadata: kube::api::ObjectMeta {
            namespace: Some(ns.clone()),
            name: Some(format!(
                "{}.{:x}{:08x}",
                si.name_any(),
                now.as_nanosecond(),
                fastrand::u32(..)
            )),
            ..Default::default()
        },
        reporting_controller: Some(ctx.reporter.controller.clone()),
        reporting_instance: Some(
            ctx.reporter
                .instance
                .clone()
                .unwrap_or_else(|| ctx.reporter.controller.clone()),
        ),
        type_: Some("Normal".into()),
        ..Default::default()
    };
    let api: Api<K8sEvent> = Api::namespaced(ctx.client.clone(), &ns);
    if let Err(e) = api.create(&Default::default(), &ev).await {
        logs::warn(&format!(
            "cannot write an Event on SettingsImage {ns}/{}: {e}",
            si.name_any()
        ));
    }
}

/// A note's Event: `Warning`, or `Normal` for a notice.
async fn note_event(ctx: &Ctx, si: &SettingsImage, n: EventNote) {
    let type_ = if n.warning {
        EventType::Warning
    } else {
        EventType::Normal
    };
    event(ctx, si, type_, n.reason, n.message).await;
}

async fn event(ctx: &Ctx, si: &SettingsImage, type_: EventType, reason: &str, note: String) {
    let note = cut_note(note);
    let ev = Event {
        type_,
        reason: reason.to_string(),
        note: Some(note),
        action: "Publish".into(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&ev, &si.object_ref(&())).await {
        logs::warn(&format!(
            "cannot write an Event on SettingsImage {}/{}: {e}",
            si.namespace().unwrap_or_default(),
            si.name_any()
        ));
    }
}
