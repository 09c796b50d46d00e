//! The status a reconcile writes: kstatus conditions (`Ready` always;
//! `Reconciling` and `Stalled` only while true, as Flux's controllers do)
//! and one server-side apply of the whole status subresource, so fields
//! left out are removed and nothing else is touched.
//!
//! The status is bounded: `images` holds at most [`IMAGES_BUDGET`] bytes of
//! entries ([`bounded`]; a glob of a hundred folders under a deep prefix
//! would outgrow the 1.5 MiB etcd stores), and a write the API server
//! refuses as such (too large, invalid) is not retried as it is: a small
//! status saying so is written instead ([`write_checked`]), and the object
//! is reconciled again at its interval, not every few seconds.

use kube::api::{Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};

use super::crd::{Condition, ImageStatus, SettingsImage, SettingsImageStatus};

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
/// does not change; `now` (as `metav1.Time`) is the new one when it does.
pub fn set_at(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: bool,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: &str,
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
        last_transition_time: now.to_string(),
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

/// The most bytes of `status.images` entries (as JSON) a status holds.
pub const IMAGES_BUDGET: usize = 128 * 1024;

/// The first entries of `images` (in their order) that fit in
/// [`IMAGES_BUDGET`], and how many are left out.
pub fn bounded(images: Vec<ImageStatus>) -> (Vec<ImageStatus>, usize) {
    let total = images.len();
    let mut used = 0;
    let mut kept = Vec::new();
    for img in images {
        let size = serde_json::to_vec(&img)
            .map(|v| v.len() + 1)
            .unwrap_or(usize::MAX);
        if used + size > IMAGES_BUDGET {
            break;
        }
        used += size;
        kept.push(img);
    }
    let omitted = total - kept.len();
    (kept, omitted)
}

/// How a status write went.
pub enum Written {
    /// As given.
    Whole,
    /// The API server refused it as given (this says why); a small status
    /// saying so was written instead.
    Refused(String),
}

/// Whether the API server refused a write for what it holds (too large,
/// invalid), so the same write can never succeed.
fn refused(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s)
        if matches!(s.code, 400 | 413 | 422) || s.message.contains("too large"))
}

/// Writes `status`; when the API server refuses it for what it holds,
/// writes `Ready=False StatusRefused` and `Stalled=True` with the server's
/// reason instead (no images listed, `imagesOmitted` counting them all).
/// `Err` only when neither could be written (the API server is
/// unreachable: worth retrying).
pub async fn write_checked(
    api: &Api<SettingsImage>,
    si: &SettingsImage,
    status: &SettingsImageStatus,
) -> Result<Written, kube::Error> {
    let e = match write(api, si, status).await {
        Ok(()) => return Ok(Written::Whole),
        Err(e) if refused(&e) => e,
        Err(e) => return Err(e),
    };
    let said = match &e {
        kube::Error::Api(s) => format!("HTTP {}: {}", s.code, s.message.trim()),
        other => other.to_string(),
    };
    let (small, why) = refused_instead(status, &said, si.metadata.generation, &now());
    write(api, si, &small).await?;
    Ok(Written::Refused(why))
}

/// The small status written instead of `status` when the API server
/// refused it (`said` is its answer): `Ready=False StatusRefused` and
/// `Stalled=True`, no images listed, `imagesOmitted` counting them all;
/// and the reason, for the Warning Event.
pub fn refused_instead(
    status: &SettingsImageStatus,
    said: &str,
    generation: Option<i64>,
    now: &str,
) -> (SettingsImageStatus, String) {
    let listed = status.images.len() + status.images_omitted.unwrap_or(0) as usize;
    let why = format!(
        "the API server refused the status listing {listed} images ({said}); it is not written again until the interval, the spec or the source changes"
    );
    let mut small = status.clone();
    small.images.clear();
    small.images_omitted = u32::try_from(listed).ok().filter(|n| *n > 0);
    let c = &mut small.conditions;
    set_at(c, READY, false, "StatusRefused", &why, generation, now);
    set_at(c, STALLED, true, "StatusRefused", &why, generation, now);
    remove(c, RECONCILING);
    (small, why)
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

    fn image(path: &str) -> ImageStatus {
        ImageStatus {
            path: path.into(),
            repository: "reg.example/acme/x".into(),
            tag: "main-1700000000-0a1b2c3".into(),
            digest: format!("sha256:{}", "0".repeat(64)),
            commit: "0".repeat(40),
            pushed: true,
        }
    }

    #[test]
    fn images_are_bounded_in_order_and_the_rest_counted() {
        let small: Vec<ImageStatus> = (0..10).map(|i| image(&format!("c/{i}"))).collect();
        assert_eq!(bounded(small.clone()), (small, 0));
        // 100 folders under a 16 KiB prefix: 1.6 MB of entries.
        let deep = "d".repeat(16 * 1024);
        let many: Vec<ImageStatus> = (0..100)
            .map(|i| image(&format!("{deep}/f{i:03}")))
            .collect();
        let (kept, omitted) = bounded(many.clone());
        assert_eq!(kept.len() + omitted, 100);
        assert!(omitted > 0 && !kept.is_empty());
        assert_eq!(kept[..], many[..kept.len()]);
        let bytes = serde_json::to_vec(&kept).unwrap().len();
        assert!(bytes <= IMAGES_BUDGET, "{bytes}");
        // One entry larger than the whole budget: listed as left out.
        let (kept, omitted) = bounded(vec![image(&"x".repeat(IMAGES_BUDGET))]);
        assert_eq!((kept.len(), omitted), (0, 1));
    }

    /// Row "the status refused by the API server": a small status instead,
    /// Ready=False and Stalled=True `StatusRefused` with the server's
    /// words, Reconciling gone, the images counted and not listed.
    #[test]
    fn a_refused_status_is_replaced_by_a_small_stalled_one() {
        let now = "2026-12-02T20:00:00Z";
        let mut big = SettingsImageStatus {
            images: vec![image("c/1"), image("c/2")],
            images_omitted: Some(98),
            ..Default::default()
        };
        set_at(
            &mut big.conditions,
            READY,
            true,
            "Succeeded",
            "ok",
            Some(3),
            "2020-01-01T00:00:00Z",
        );
        set_at(
            &mut big.conditions,
            RECONCILING,
            true,
            "x",
            "x",
            Some(3),
            now,
        );
        let (small, why) = refused_instead(&big, "HTTP 422: too large", Some(3), now);
        assert_eq!(
            why,
            "the API server refused the status listing 100 images (HTTP 422: too large); it is \
             not written again until the interval, the spec or the source changes"
        );
        assert!(small.images.is_empty());
        assert_eq!(small.images_omitted, Some(100));
        let said: Vec<_> = small
            .conditions
            .iter()
            .map(|c| {
                (
                    c.type_.as_str(),
                    c.status.as_str(),
                    c.reason.as_str(),
                    c.message == why,
                )
            })
            .collect();
        assert_eq!(
            said,
            [
                (READY, "False", "StatusRefused", true),
                (STALLED, "True", "StatusRefused", true)
            ]
        );
        assert!(
            small
                .conditions
                .iter()
                .all(|c| c.last_transition_time == now)
        );
    }

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
        let now = "2026-12-02T20:00:00Z";
        set_at(&mut c, READY, true, "Succeeded", "new", Some(2), now);
        assert_eq!(c[0].last_transition_time, "2020-01-01T00:00:00Z");
        assert_eq!(
            (c[0].message.as_str(), c[0].observed_generation),
            ("new", Some(2))
        );
        set_at(&mut c, STALLED, true, "InvalidSpec", "x", Some(2), now);
        set_at(&mut c, READY, false, "InvalidSpec", "x", Some(2), now);
        assert_eq!(c[0].last_transition_time, now);
        assert_eq!(
            c.iter().map(|c| c.type_.as_str()).collect::<Vec<_>>(),
            [READY, STALLED]
        );
        remove(&mut c, STALLED);
        assert_eq!(c.len(), 1);
    }
}
