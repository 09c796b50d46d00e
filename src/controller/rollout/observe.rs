//! What a SettingsRollout reconcile reads: the Deployments, StatefulSets
//! and DaemonSets of its own namespace (those its selector matches), and
//! the pods of each that references the repository, turned into the pure
//! facts of [`super::decide`]. Nothing outside the namespace is read, and
//! nothing here is written.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as K8sSelector;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};

use super::decide::{PodSeen, Progress, Seen};
use crate::controller::crd::LabelSelector;
use crate::rollout::WorkloadKind;

/// The digest `reference` names when it is an image of `repository`
/// (`HOST/NAME`, `HOST/NAME:TAG`, either with `@sha256:...`); `None` for
/// another repository or a reference without a digest.
pub fn digest_of(reference: &str, repository: &str) -> Option<String> {
    let (name, digest) = reference.trim().split_once('@')?;
    let repo = match name.rfind(':') {
        Some(i) if !name[i..].contains('/') => &name[..i],
        _ => name,
    };
    (repo == repository && digest.starts_with("sha256:")).then(|| digest.to_string())
}

/// The digest of `repository` a pod spec's image volumes reference (the
/// first one, in volume order).
fn template_digest(
    spec: Option<&k8s_openapi::api::core::v1::PodSpec>,
    repository: &str,
) -> Option<String> {
    spec?
        .volumes
        .as_ref()?
        .iter()
        .filter_map(|v| v.image.as_ref()?.reference.as_deref())
        .find_map(|r| digest_of(r, repository))
}

fn selector_text(s: &K8sSelector) -> String {
    let mut parts: Vec<String> = s
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    for e in s.match_expressions.iter().flatten() {
        let values = e.values.clone().unwrap_or_default().join(",");
        parts.push(match e.operator.as_str() {
            "In" => format!("{} in ({values})", e.key),
            "NotIn" => format!("{} notin ({values})", e.key),
            "Exists" => e.key.clone(),
            _ => format!("!{}", e.key),
        });
    }
    parts.join(",")
}

/// One workload, read: its facts without pods, and its pod selector.
struct Read {
    seen: Seen,
    selector: Option<String>,
}

fn read(
    kind: WorkloadKind,
    meta: &kube::api::ObjectMeta,
    template: &PodTemplateSpec,
    selector: &K8sSelector,
    progress: Progress,
    repository: &str,
) -> Read {
    Read {
        seen: Seen {
            kind,
            name: meta.name.clone().unwrap_or_default(),
            digest: template_digest(template.spec.as_ref(), repository),
            progress,
            pods: Vec::new(),
        },
        selector: Some(selector_text(selector)).filter(|s| !s.is_empty()),
    }
}

fn n(v: Option<i32>) -> u32 {
    v.unwrap_or(0).max(0) as u32
}

/// The selected workloads of `ns`, with the pods of those that reference
/// `repository` or are in `known` (a run the status holds).
pub async fn workloads(
    client: &Client,
    ns: &str,
    selector: Option<&LabelSelector>,
    repository: &str,
    known: &BTreeSet<(String, String)>,
) -> Result<Vec<Seen>, kube::Error> {
    let lp = ListParams::default();
    let wanted = |labels: &BTreeMap<String, String>| selector.is_none_or(|s| s.matches(labels));
    let mut reads = Vec::new();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    for d in deployments.list(&lp).await? {
        let (Some(spec), true) = (&d.spec, wanted(d.labels())) else {
            continue;
        };
        let st = d.status.clone().unwrap_or_default();
        let progress = Progress {
            generation: d.metadata.generation.unwrap_or(0),
            observed_generation: st.observed_generation.unwrap_or(-1),
            replicas: n(Some(spec.replicas.unwrap_or(1))),
            updated: n(st.updated_replicas),
            ready: n(st.ready_replicas),
            available: n(st.available_replicas),
            total: n(st.replicas),
        };
        let sel = &spec.selector;
        reads.push(read(
            WorkloadKind::Deployment,
            &d.metadata,
            &spec.template,
            sel,
            progress,
            repository,
        ));
    }
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), ns);
    for s in sets.list(&lp).await? {
        let (Some(spec), true) = (&s.spec, wanted(s.labels())) else {
            continue;
        };
        let st = s.status.clone().unwrap_or_default();
        let progress = Progress {
            generation: s.metadata.generation.unwrap_or(0),
            observed_generation: st.observed_generation.unwrap_or(-1),
            replicas: n(Some(spec.replicas.unwrap_or(1))),
            updated: n(st.updated_replicas),
            ready: n(st.ready_replicas),
            available: n(st.available_replicas),
            total: n(Some(st.replicas)),
        };
        let sel = &spec.selector;
        reads.push(read(
            WorkloadKind::StatefulSet,
            &s.metadata,
            &spec.template,
            sel,
            progress,
            repository,
        ));
    }
    let daemons: Api<DaemonSet> = Api::namespaced(client.clone(), ns);
    for d in daemons.list(&lp).await? {
        let (Some(spec), true) = (&d.spec, wanted(d.labels())) else {
            continue;
        };
        let st = d.status.clone().unwrap_or_default();
        let progress = Progress {
            generation: d.metadata.generation.unwrap_or(0),
            observed_generation: st.observed_generation.unwrap_or(-1),
            replicas: n(Some(st.desired_number_scheduled)),
            updated: n(st.updated_number_scheduled),
            ready: n(Some(st.number_ready)),
            available: n(st.number_available),
            total: n(Some(st.current_number_scheduled)),
        };
        let sel = &spec.selector;
        reads.push(read(
            WorkloadKind::DaemonSet,
            &d.metadata,
            &spec.template,
            sel,
            progress,
            repository,
        ));
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let mut out = Vec::new();
    for mut r in reads {
        let key = (r.seen.kind.as_str().to_string(), r.seen.name.clone());
        if r.seen.digest.is_some() || known.contains(&key) {
            // A workload without a selector selects no pod.
            if let Some(sel) = &r.selector {
                let list = pods.list(&ListParams::default().labels(sel)).await?;
                r.seen.pods = list
                    .into_iter()
                    .filter_map(|p| pod_seen(&p, repository))
                    .collect();
            }
        }
        if r.seen.digest.is_some() || known.contains(&key) {
            out.push(r.seen);
        }
    }
    Ok(out)
}

/// A time of the API (k8s-openapi's jiff) as this crate's.
fn stamp(t: &k8s_openapi::jiff::Timestamp) -> Option<jiff::Timestamp> {
    jiff::Timestamp::new(t.as_second(), t.subsec_nanosecond()).ok()
}

fn pod_seen(p: &Pod, repository: &str) -> Option<PodSeen> {
    let created = stamp(&p.metadata.creation_timestamp.as_ref()?.0)?;
    let ready = p
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .and_then(|c| {
            let at = stamp(&c.last_transition_time.as_ref()?.0)?;
            Some((c.status == "True", at))
        });
    Some(PodSeen {
        digest: template_digest(p.spec.as_ref(), repository),
        created,
        ready,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_digest_of_the_repository_counts() {
        let d = format!("sha256:{}", "a".repeat(64));
        let repo = "localhost:5000/acme/shop";
        for (r, want) in [
            (format!("{repo}:main-1-abcdef0@{d}"), Some(d.clone())),
            (format!("{repo}@{d}"), Some(d.clone())),
            (format!("{repo}:main-1-abcdef0"), None),
            (format!("{repo}-other@{d}"), None),
            (format!("localhost:5000/acme/shop/x@{d}"), None),
        ] {
            assert_eq!(digest_of(&r, repo), want, "{r}");
        }
    }
}
