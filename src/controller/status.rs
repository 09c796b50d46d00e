//! The status a reconcile writes: kstatus conditions (`Ready` always;
//! `Reconciling` and `Stalled` only while true, as Flux's controllers do)
//! and one server-side apply of the whole status subresource, so fields
//! left out are removed and nothing else is touched.

use kube::api::{Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};

use super::crd::{Condition, SettingsImage, SettingsImageStatus};

/// The field manager of every status write.
pub const MANAGER: &str = "settings-image-controller";

/// `Ready`.
pub const READY: &str = "Ready";
/// `Reconciling`.
pub const RECONCILING: &str = "Reconciling";
/// `Stalled`.
pub const STALLED: &str = "Stalled";

/// Now, as `metav1.Time` writes it.
pub fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Sets condition `type_`, keeping its transition time when its status
/// does not change.
pub fn set(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: bool,
    reason: &str,
    message: &str,
    generation: Option<i64>,
) {
    let status = if status { "True" } else { "False" }.to_string();
    let mut message = message.to_string();
    // metav1.Condition caps the message at 32768 bytes.
    if message.len() > 32_000 {
        let mut end = 32_000;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
    }
    let new = Condition {
        type_: type_.to_string(),
        status,
        observed_generation: generation,
        last_transition_time: now(),
        reason: reason.to_string(),
        message,
    };
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            let since = if c.status == new.status {
                c.last_transition_time.clone()
            } else {
                new.last_transition_time.clone()
            };
            *c = Condition {
                last_transition_time: since,
                ..new
            };
        }
        None => conditions.push(new),
    }
    // Ready first, then the abnormal-true ones, as `kubectl describe` reads best.
    conditions.sort_by_key(|c| match c.type_.as_str() {
        READY => 0,
        RECONCILING => 1,
        STALLED => 2,
        _ => 3,
    });
}

/// Removes condition `type_` (the abnormal-true conditions are absent
/// rather than False).
pub fn remove(conditions: &mut Vec<Condition>, type_: &str) {
    conditions.retain(|c| c.type_ != type_);
}

/// Whether `Ready` is `True` in `status`.
pub fn is_ready(status: &SettingsImageStatus) -> bool {
    status
        .conditions
        .iter()
        .any(|c| c.type_ == READY && c.status == "True")
}

/// Writes `status` as the whole status of `si` (server-side apply).
pub async fn write(
    api: &Api<SettingsImage>,
    si: &SettingsImage,
    status: &SettingsImageStatus,
) -> Result<(), kube::Error> {
    let body = serde_json::json!({
        "apiVersion": SettingsImage::api_version(&()),
        "kind": SettingsImage::kind(&()),
        "status": status,
    });
    api.patch_status(
        &si.name_any(),
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(body),
    )
    .await
    .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transition_time_moves_only_with_the_status() {
        let mut c = vec![Condition {
            type_: READY.into(),
            status: "True".into(),
            observed_generation: Some(1),
            last_transition_time: "2020-01-01T00:00:00Z".into(),
            reason: "Succeeded".into(),
            message: "old".into(),
        }];
        set(&mut c, READY, true, "Succeeded", "new", Some(2));
        assert_eq!(c[0].last_transition_time, "2020-01-01T00:00:00Z");
        assert_eq!(
            (c[0].message.as_str(), c[0].observed_generation),
            ("new", Some(2))
        );
        set(&mut c, STALLED, true, "InvalidSpec", "x", Some(2));
        set(&mut c, READY, false, "InvalidSpec", "x", Some(2));
        assert_ne!(c[0].last_transition_time, "2020-01-01T00:00:00Z");
        assert_eq!(
            c.iter().map(|c| c.type_.as_str()).collect::<Vec<_>>(),
            [READY, STALLED]
        );
        remove(&mut c, STALLED);
        assert_eq!(c.len(), 1);
    }
}
