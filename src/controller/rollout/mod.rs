//! SettingsRollouts: the evidence of what ran where. With `--cluster-name`
//! the controller watches SettingsRollouts and the Deployments,
//! StatefulSets and DaemonSets of their namespaces; each reconcile reads
//! the workloads of the resource's own namespace ([`observe`]), decides
//! which rollout records to write ([`decide`], pure), attaches them to the
//! digests as OCI referrers with the resource's registry login (the same
//! code as a SettingsImage's), and writes the status: per workload the
//! digest it runs and since when.
//!
//! A record the registry refuses leaves the status where it was (so the
//! same record is written again on the next try), says so in the Ready
//! condition and a `RecordFailed` Event, and is retried with a backoff of
//! 5 s doubling to 5 min.

mod decide;
mod observe;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::EventType;
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};

use super::crd::{SettingsRollout, SettingsRolloutStatus, WorkloadStatus};
use super::logs::{self, Level};
use super::metrics::Metrics;
use super::reconcile::observe::{Access, Login, registry_options};
use super::reconcile::step::Step;
use super::redact::Held;
use super::{spec, status, watch};
use crate::image::Descriptor;
use crate::registry::{self, Client as Registry};
use crate::rollout::{self, Record};
use decide::{Change, Input, Plan};

/// The default `spec.gracePeriod`.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(600);
/// How often a quiet SettingsRollout is looked at again.
const RESYNC: Duration = Duration::from_secs(600);

/// What every SettingsRollout reconcile shares.
pub struct Ctx {
    /// The API client.
    pub client: Client,
    /// The controller's environment (workload identity).
    pub env: crate::front::Env,
    /// `--cluster-name`.
    pub cluster: String,
    /// `--provider-namespaces`, as for SettingsImages.
    pub provider_namespaces: crate::controller::reconcile::ProviderNamespaces,
    /// Per object: failed reconciles in a row.
    failures: Mutex<HashMap<String, u32>>,
}

impl Ctx {
    /// A context with no memory yet.
    pub fn new(
        client: Client,
        env: crate::front::Env,
        cluster: String,
        provider_namespaces: crate::controller::reconcile::ProviderNamespaces,
    ) -> Ctx {
        Ctx {
            client,
            env,
            cluster,
            provider_namespaces,
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// Counts a failure (or clears the count); returns the backoff.
    fn failed(&self, key: &str, failed: bool) -> Duration {
        let Ok(mut m) = self.failures.lock() else {
            return Duration::from_secs(5);
        };
        if !failed {
            m.remove(key);
            return Duration::ZERO;
        }
        let n = m.entry(key.to_string()).or_insert(0);
        *n += 1;
        Duration::from_secs(5)
            .saturating_mul(1 << (*n - 1).min(6))
            .min(Duration::from_secs(300))
    }
}

/// A failure to write the status (the API server is unreachable); the
/// controller retries.
#[derive(Debug, thiserror::Error)]
#[error("writing the status of SettingsRollout {object}: {source}")]
pub struct StatusError {
    object: String,
    #[source]
    source: kube::Error,
}

/// What one reconcile ends on.
struct Outcome {
    ready: bool,
    reason: &'static str,
    message: String,
    stalled: bool,
    workloads: Vec<WorkloadStatus>,
    events: Vec<(EventType, &'static str, String)>,
    requeue: Action,
}

/// Reconciles one SettingsRollout.
pub async fn reconcile(sr: Arc<SettingsRollout>, ctx: Arc<Ctx>) -> Result<Action, StatusError> {
    let ns = sr.namespace().unwrap_or_default();
    let key = format!("{ns}/{}", sr.name_any());
    let held = Held::new();
    let _holding = logs::hold(&key, &held);
    let before: Vec<WorkloadStatus> = sr
        .status
        .as_ref()
        .map(|s| s.workloads.clone())
        .unwrap_or_default();
    let out = match attempt(&sr, &ctx, &ns, &before, &held).await {
        Ok(o) => o,
        Err(o) => o,
    };
    let failed = !out.ready;
    let backoff = ctx.failed(&key, failed && !out.stalled);
    let requeue = if failed && !out.stalled {
        Action::requeue(backoff)
    } else {
        out.requeue.clone()
    };
    let generation = sr.metadata.generation;
    let now = status::now();
    let mut conditions = sr
        .status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default();
    let message = held.scrub(&out.message);
    status::set_at(
        &mut conditions,
        status::READY,
        out.ready,
        out.reason,
        &message,
        generation,
        &now,
    );
    if out.stalled {
        status::set_at(
            &mut conditions,
            status::STALLED,
            true,
            out.reason,
            &message,
            generation,
            &now,
        );
    } else {
        status::remove(&mut conditions, status::STALLED);
    }
    let st = SettingsRolloutStatus {
        observed_generation: generation,
        conditions,
        workloads: out.workloads,
    };
    let api: Api<SettingsRollout> = Api::namespaced(ctx.client.clone(), &ns);
    let body = serde_json::json!({
        "apiVersion": SettingsRollout::api_version(&()),
        "kind": SettingsRollout::kind(&()),
        "status": st,
    });
    api.patch_status(
        &sr.name_any(),
        &PatchParams::apply(status::MANAGER).force(),
        &Patch::Apply(body),
    )
    .await
    .map_err(|source| StatusError {
        object: key.clone(),
        source,
    })?;
    for (type_, reason, note) in out.events {
        let note = held.scrub(&note);
        let level = if type_ == EventType::Warning {
            Level::Warn
        } else {
            Level::Info
        };
        logs::object(
            level,
            &ns,
            &sr.name_any(),
            &note,
            &[("reason", reason.into())],
        );
        event(&ctx, &sr, type_, reason, note).await;
    }
    Ok(requeue)
}

/// An Event of its own (`events.k8s.io/v1`, a fresh name): kube-runtime's
/// recorder folds Events of one reason within six minutes into the first
/// one's series, which would name only the first record.
async fn event(ctx: &Ctx, sr: &SettingsRollout, type_: EventType, reason: &str, note: String) {
    use k8s_openapi::api::events::v1::Event as K8sEvent;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
    let ns = sr.namespace().unwrap_or_default();
    let now = k8s_openapi::jiff::Timestamp::now();
    let ev = K8sEvent {
        action: Some("Record".into()),
        reason: Some(reason.into()),
        event_time: Some(MicroTime(now)),
        regarding: Some(sr.object_ref(&())),
        note: Some(note.chars().take(1000).collect()),
        metadata: kube::api::ObjectMeta {
            namespace: Some(ns.clone()),
            name: Some(format!(
                "{}.{:x}{:08x}",
                sr.name_any(),
                now.as_nanosecond(),
                fastrand::u32(..)
            )),
            ..Default::default()
        },
        reporting_controller: Some(status::MANAGER.into()),
        reporting_instance: Some(
            std::env::var("POD_NAME").unwrap_or_else(|_| status::MANAGER.into()),
        ),
        type_: Some(
            if type_ == EventType::Warning {
                "Warning"
            } else {
                "Normal"
            }
            .into(),
        ),
        ..Default::default()
    };
    let api: Api<K8sEvent> = Api::namespaced(ctx.client.clone(), &ns);
    if let Err(e) = api.create(&Default::default(), &ev).await {
        logs::warn(&format!(
            "cannot write an Event on SettingsRollout {ns}/{}: {e}",
            sr.name_any()
        ));
    }
}

fn stalled(reason: &'static str, message: String, before: &[WorkloadStatus]) -> Outcome {
    Outcome {
        ready: false,
        reason,
        message,
        stalled: true,
        workloads: before.to_vec(),
        events: vec![],
        requeue: Action::await_change(),
    }
}

fn failed(reason: &'static str, message: String, before: &[WorkloadStatus]) -> Outcome {
    Outcome {
        ready: false,
        reason,
        events: vec![(EventType::Warning, reason, message.clone())],
        message,
        stalled: false,
        workloads: before.to_vec(),
        requeue: Action::requeue(Duration::from_secs(5)),
    }
}

async fn attempt(
    sr: &SettingsRollout,
    ctx: &Ctx,
    ns: &str,
    before: &[WorkloadStatus],
    held: &Held,
) -> Result<Outcome, Outcome> {
    let spec = &sr.spec;
    registry::parse_repository(&spec.repository).map_err(|e| {
        stalled(
            "InvalidSpec",
            format!("spec.repository: {}", spec::said(&e)),
            before,
        )
    })?;
    let grace = match &spec.grace_period {
        None => DEFAULT_GRACE,
        Some(g) => spec::parse_duration(g)
            .filter(|d| !d.is_zero())
            .ok_or_else(|| {
                stalled(
                    "InvalidSpec",
                    format!("spec.gracePeriod: {g:?} is not a duration above zero (e.g. 10m)"),
                    before,
                )
            })?,
    };
    let known: BTreeSet<(String, String)> = before
        .iter()
        .map(|b| (b.kind.clone(), b.name.clone()))
        .collect();
    let seen = observe::workloads(
        &ctx.client,
        ns,
        spec.selector.as_ref(),
        &spec.repository,
        &known,
    )
    .await
    .map_err(|e| {
        failed(
            "WorkloadsUnreadable",
            format!("reading the workloads of {ns}: {e}"),
            before,
        )
    })?;
    let now = jiff::Timestamp::now();
    let plan = decide::decide(&Input {
        cluster: &ctx.cluster,
        namespace: ns,
        repository: &spec.repository,
        grace,
        now,
        before,
        seen: &seen,
    });
    let writes: Vec<(usize, Vec<Record>)> = plan
        .changes
        .iter()
        .enumerate()
        .filter(|(_, c)| !c.records.is_empty())
        .map(|(i, c)| (i, c.records.clone()))
        .collect();
    let mut written = HashMap::new();
    if !writes.is_empty() {
        let login = Login {
            repository: &spec.repository,
            insecure: spec.insecure,
            secret_ref: spec.secret_ref.as_ref(),
            provider: spec.provider,
        };
        let access = Access {
            client: &ctx.client,
            env: &ctx.env,
            provider_namespaces: &ctx.provider_namespaces,
        };
        let options = registry_options(&login, &access, ns, held)
            .await
            .map_err(|s| step_outcome(s, before))?;
        let results = tokio::task::spawn_blocking(move || write_records(&options, writes))
            .await
            .map_err(|e| {
                failed(
                    "RecordFailed",
                    format!("writing the records stopped: {e}"),
                    before,
                )
            })?;
        written = results;
    }
    Ok(outcome(&ctx.cluster, &plan, before, written))
}

fn step_outcome(s: Step, before: &[WorkloadStatus]) -> Outcome {
    match s {
        Step::Stalled { reason, message } => stalled(reason, message, before),
        Step::Failed { reason, message } | Step::Waiting { reason, message } => {
            failed(reason, message, before)
        }
        _ => failed(
            "RecordFailed",
            "the registry login ended early".into(),
            before,
        ),
    }
}

/// Writes each change's records in order, stopping a change at its first
/// failure: per change, the digests written, or why not.
fn write_records(
    options: &registry::Options,
    writes: Vec<(usize, Vec<Record>)>,
) -> HashMap<usize, Result<Vec<String>, String>> {
    let mut out = HashMap::new();
    let client = match Registry::open(options) {
        Ok(c) => c,
        Err(e) => {
            for (i, _) in writes {
                out.insert(i, Err(e.to_string()));
            }
            return out;
        }
    };
    for (i, records) in writes {
        let mut digests = Vec::new();
        let mut result = Ok(());
        for r in &records {
            match attach(&client, r) {
                Ok(d) => digests.push(d),
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        out.insert(i, result.map(|()| digests));
    }
    out
}

/// Attaches `r` to its digest; the referrer's digest.
fn attach(client: &Registry, r: &Record) -> Result<String, String> {
    let what = format!(
        "the {} record of {} {}/{} for {}@{}",
        r.reason.map(|e| e.as_str()).unwrap_or("ready"),
        r.kind,
        r.namespace,
        r.name,
        r.repository,
        r.digest
    );
    let subject: Descriptor = client
        .head_manifest(&r.digest)
        .map_err(|e| format!("{what}: {e}"))?
        .ok_or_else(|| {
            format!(
                "{what}: the registry does not hold {}@{}",
                r.repository, r.digest
            )
        })?;
    let art = rollout::artifact(r).map_err(|e| format!("{what}: {e}"))?;
    client
        .attach_referrer(&subject, &art)
        .map(|a| a.descriptor.digest)
        .map_err(|e| format!("{what}: {e}"))
}

/// The status and Events of a plan, given what was written.
fn outcome(
    cluster: &str,
    plan: &Plan,
    before: &[WorkloadStatus],
    written: HashMap<usize, Result<Vec<String>, String>>,
) -> Outcome {
    let mut workloads = Vec::new();
    let mut events = Vec::new();
    let mut errors = Vec::new();
    for (i, Change { key, records, next }) in plan.changes.iter().enumerate() {
        let kept = || {
            before
                .iter()
                .find(|b| (&b.kind, &b.name) == (&key.0, &key.1))
                .cloned()
        };
        match written.get(&i) {
            Some(Err(e)) => {
                errors.push(e.clone());
                workloads.extend(kept());
            }
            Some(Ok(digests)) => {
                for (r, d) in records.iter().zip(digests) {
                    events.push((
                        EventType::Normal,
                        "Recorded",
                        format!("{} (record {d})", crate::show::rollout::record(r)),
                    ));
                }
                if let Some(mut n) = next.clone() {
                    if let Some(last) = digests.last() {
                        n.record = Some(last.clone());
                    }
                    workloads.push(n);
                }
            }
            None => workloads.extend(next.clone()),
        }
    }
    let requeue = plan.requeue.unwrap_or(RESYNC).min(RESYNC);
    if !errors.is_empty() {
        let message = format!(
            "the registry refused {} record(s); retrying: {}",
            errors.len(),
            errors.join("; ")
        );
        events.push((EventType::Warning, "RecordFailed", message.clone()));
        return Outcome {
            ready: false,
            reason: "RecordFailed",
            message,
            stalled: false,
            workloads,
            events,
            requeue: Action::requeue(Duration::from_secs(5)),
        };
    }
    let ready = workloads
        .iter()
        .filter(|w| w.state == decide::READY)
        .count();
    Outcome {
        ready: true,
        reason: "Recorded",
        message: format!(
            "cluster {cluster}: {} workload(s) of the repository, {ready} fully rolled out",
            workloads.len()
        ),
        stalled: false,
        workloads,
        events,
        requeue: Action::requeue(requeue),
    }
}

/// After a reconcile whose status could not be written.
pub fn error_policy(sr: Arc<SettingsRollout>, err: &StatusError, _ctx: Arc<Ctx>) -> Action {
    logs::object(
        Level::Error,
        &sr.namespace().unwrap_or_default(),
        &sr.name_any(),
        &err.to_string(),
        &[],
    );
    Action::requeue(Duration::from_secs(5))
}

/// The SettingsRollout controller: SettingsRollouts and the workloads of
/// their namespaces watched (in `namespace` only, when given); a change of
/// a workload reconciles every SettingsRollout of its namespace.
///
/// Each of the four watches reports its health to `/readyz` and paces its
/// retries as the SettingsImage watches do ([`watch::resilient`]): a
/// SettingsRollout CRD that is not installed, or RBAC that does not let
/// the controller list Deployments, answers 503 naming it, and is said
/// once in the log at `warn`.
pub fn controller(
    namespace: Option<&str>,
    client: Client,
    ctx: Arc<Ctx>,
    metrics: Arc<Metrics>,
    stop: tokio::sync::watch::Receiver<bool>,
) -> impl std::future::Future<Output = ()> {
    fn api<K>(client: &Client, ns: Option<&str>) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        match ns {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        }
    }
    /// The objects a watch touched, its failures left to `/readyz` and
    /// the log ([`watch::resilient`] said them).
    fn touched<K>(
        api: Api<K>,
        w: watch::Watched,
        metrics: &Arc<Metrics>,
    ) -> impl futures_util::Stream<Item = Result<K, watcher::Error>> + Send + use<K>
    where
        K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
    {
        watch::resilient(watcher(api, watcher::Config::default()), w, metrics.clone())
            .touched_objects()
            .filter(|r| std::future::ready(r.is_ok()))
    }
    let (reader, writer) = reflector::store::<SettingsRollout>();
    let rollouts = watch::resilient(
        watcher(
            api::<SettingsRollout>(&client, namespace),
            watcher::Config::default(),
        ),
        watch::SETTINGS_ROLLOUTS,
        metrics.clone(),
    )
    .reflect(writer)
    .touched_objects()
    .filter(|r| std::future::ready(r.is_ok()));
    let store = reader.clone();
    let of_namespace = move |ns: Option<String>| {
        store
            .state()
            .into_iter()
            .filter(|sr| sr.namespace() == ns)
            .map(|sr| ObjectRef::from_obj(&*sr))
            .collect::<Vec<_>>()
    };
    let (a, b, d) = (of_namespace.clone(), of_namespace.clone(), of_namespace);
    let mut stop = stop;
    Controller::for_stream(rollouts, reader)
        .watches_stream(
            touched(
                api::<Deployment>(&client, namespace),
                watch::DEPLOYMENTS,
                &metrics,
            ),
            move |w| a(w.namespace()),
        )
        .watches_stream(
            touched(
                api::<StatefulSet>(&client, namespace),
                watch::STATEFUL_SETS,
                &metrics,
            ),
            move |w| b(w.namespace()),
        )
        .watches_stream(
            touched(
                api::<DaemonSet>(&client, namespace),
                watch::DAEMON_SETS,
                &metrics,
            ),
            move |w| d(w.namespace()),
        )
        .graceful_shutdown_on(async move {
            let _ = stop.wait_for(|s| *s).await;
        })
        .run(reconcile, error_policy, ctx)
        .for_each(|r| async move {
            match r {
                // A failed list or watch: `watch::resilient` said so once,
                // and /readyz says so until it is listed again.
                Err(kube::runtime::controller::Error::QueueError(e)) => logs::write(
                    Level::Debug,
                    &format!("rollout controller: {e}"),
                    Default::default(),
                ),
                Err(e) => logs::warn(&format!("rollout controller: {e}")),
                Ok(_) => {}
            }
        })
}
