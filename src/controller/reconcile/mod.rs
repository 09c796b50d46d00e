//! One reconcile of a SettingsImage: check the spec, read the
//! GitRepository's fetched revision, publish exactly that commit when it is
//! new (or when `spec.interval` has passed since the last check), and say
//! what happened in the status, in Events and in the metrics.
//!
//! It runs in three parts, as Flux's reconcilers mark conditions while
//! they work and patch once at the end:
//!
//! - [`observe`]: reads (the GitRepository, the Secrets, the login) and
//!   publishes; every early end is a [`step::Step`] made by the pure
//!   readings of [`step`];
//! - [`decide`]: a pure function from what was observed (the generation,
//!   the status as read, the step, the failures in a row) to the status,
//!   Events, log line, metrics and requeue; its module holds the table of
//!   what each outcome writes (see `docs/controller.md`);
//! - [`write`]: one status write, then the Events and the log line.
//!
//! The interval is at least `--min-interval`. Every message is scrubbed of
//! the credentials the reconcile read (`super::redact`), whatever a server
//! echoed into it.

pub(crate) mod decide;
pub(crate) mod observe;
pub(crate) mod step;
mod write;

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::runtime::controller::Action;
use kube::runtime::events::{Recorder, Reporter};
use kube::{Client, ResourceExt};

use super::crd::SettingsImage;
use super::logs::{self, Level};
use super::metrics::Metrics;
use super::redact::Held;
use super::status;
use crate::history::mirror::Mirrors;
use decide::Observed;
use observe::Attempt;
use step::Step;

/// What the operator allows every SettingsImage (the controller's flags).
#[derive(Debug, Clone)]
pub struct Policy {
    /// `--allow-cross-namespace-refs`: a source in another namespace may
    /// be read (with that namespace's Secret).
    pub cross_namespace_refs: bool,
    /// `--min-interval`: shorter `spec.interval`s are raised to it.
    pub min_interval: Duration,
    /// `--provider-namespaces`: where `spec.provider` may log in with the
    /// controller's own cloud identity.
    pub provider_namespaces: ProviderNamespaces,
}

/// The namespaces whose SettingsImages may log in with the controller's
/// own cloud identity (`spec.provider`), from `--provider-namespaces`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderNamespaces {
    /// `*`: every namespace the controller watches.
    Every,
    /// These namespaces only (none: provider logins are off).
    Only(Vec<String>),
}

impl ProviderNamespaces {
    /// `--provider-namespaces`: `*`, a comma-separated list, or empty for
    /// none; `own` (the controller's namespace) when the flag is not given.
    pub fn parse(flag: Option<&str>, own: &str) -> ProviderNamespaces {
        match flag.map(str::trim) {
            None => ProviderNamespaces::Only(vec![own.to_string()]),
            Some("*") => ProviderNamespaces::Every,
            Some(list) => ProviderNamespaces::Only(
                list.split(',')
                    .map(str::trim)
                    .filter(|n| !n.is_empty())
                    .map(str::to_string)
                    .collect(),
            ),
        }
    }

    /// Whether a SettingsImage in `ns` may use the identity.
    pub fn allows(&self, ns: &str) -> bool {
        match self {
            ProviderNamespaces::Every => true,
            ProviderNamespaces::Only(list) => list.iter().any(|n| n == ns),
        }
    }

    /// The flag's value, for messages and the log.
    pub fn shown(&self) -> String {
        match self {
            ProviderNamespaces::Every => "*".into(),
            ProviderNamespaces::Only(list) if list.is_empty() => "empty (no namespace)".into(),
            ProviderNamespaces::Only(list) => list.join(","),
        }
    }
}

/// What every reconcile shares.
pub struct Ctx {
    /// The API client.
    pub client: Client,
    /// Writes Events on SettingsImages.
    pub recorder: Recorder,
    /// Who writes them (for the Events written without the recorder).
    reporter: Reporter,
    /// The metrics.
    pub metrics: Arc<Metrics>,
    /// The git mirrors.
    pub mirrors: Mirrors,
    /// Set when a shutdown abandons the running publishes: stops their
    /// downloads.
    pub interrupt: Arc<AtomicBool>,
    /// The process environment (workload identity variables), read once.
    pub env: crate::front::Env,
    /// What the operator allows.
    pub policy: Policy,
    /// Per object: failures in a row, and when its revision was last
    /// checked against the registry.
    state: Mutex<HashMap<String, ObjectState>>,
}

/// Per object: failures in a row, when its revision was last checked,
/// and its status writes that failed in a row with the last error logged.
#[derive(Debug, Default, Clone)]
struct ObjectState {
    failures: u32,
    checked: Option<Instant>,
    status_failures: u32,
    status_error: Option<String>,
}

impl Ctx {
    /// A context with no memory yet.
    pub fn new(
        client: Client,
        reporter: Reporter,
        metrics: Arc<Metrics>,
        mirrors: Mirrors,
        env: crate::front::Env,
        policy: Policy,
    ) -> Ctx {
        Ctx {
            recorder: Recorder::new(client.clone(), reporter.clone()),
            reporter,
            client,
            metrics,
            mirrors,
            interrupt: Arc::new(AtomicBool::new(false)),
            env,
            policy,
            state: Mutex::new(HashMap::new()),
        }
    }

    /// What the registry login reads.
    pub fn access(&self) -> observe::Access<'_> {
        observe::Access {
            client: &self.client,
            env: &self.env,
            provider_namespaces: &self.policy.provider_namespaces,
        }
    }

    fn memory(&self, key: &str) -> ObjectState {
        self.state
            .lock()
            .ok()
            .and_then(|m| m.get(key).cloned())
            .unwrap_or_default()
    }

    fn remember(&self, key: &str, f: impl FnOnce(&mut ObjectState)) {
        if let Ok(mut m) = self.state.lock() {
            f(m.entry(key.to_string()).or_default());
        }
    }
}

/// A failure to write the status (the API server is unreachable, or
/// refuses: no RoleBinding); the controller retries with backoff.
#[derive(Debug, thiserror::Error)]
#[error("writing the status of SettingsImage {object}: {source}")]
pub struct StatusError {
    object: String,
    #[source]
    source: kube::Error,
}

impl StatusError {
    /// Whether the API server refused the write (403: no RoleBinding).
    fn forbidden(&self) -> bool {
        matches!(&self.source, kube::Error::Api(e) if e.code == 403)
    }
}

/// Reconciles one SettingsImage: observe, decide, write.
pub async fn reconcile(si: Arc<SettingsImage>, ctx: Arc<Ctx>) -> Result<Action, StatusError> {
    let started = Instant::now();
    let key = format!("{}/{}", si.namespace().unwrap_or_default(), si.name_any());
    // The credentials this reconcile reads; no message it writes (status,
    // Event, log) carries them, whatever a server echoed.
    let held = Held::new();
    let _holding = logs::hold(&key, &held);
    let attempt = if si.spec.suspend {
        // Nothing read; a suspended object waits for a change, so no
        // interval counts.
        Attempt {
            step: Step::Suspended,
            interval: Duration::ZERO,
            raised: None,
        }
    } else {
        observe::attempt(&si, &ctx, &key, &held).await
    };
    let now = status::now();
    let decision = decide::decide(Observed {
        generation: si.metadata.generation,
        status: si.status.as_ref(),
        step: attempt.step,
        interval: attempt.interval,
        raised: attempt.raised,
        failures: ctx.memory(&key).failures,
        held: &held,
        now: &now,
    });
    write::apply(&si, &ctx, &key, decision, started).await
}

/// The first retry after a status write failed; it doubles up to
/// [`STATUS_RETRY_MAX`].
const STATUS_RETRY_FIRST: Duration = Duration::from_secs(5);
/// The longest wait between status writes that fail.
const STATUS_RETRY_MAX: Duration = Duration::from_secs(300);

/// The wait after the `failures`-th status write in a row failed: 5 s,
/// doubling, at most 5 min.
fn status_retry(failures: u32) -> Duration {
    let exp = failures.saturating_sub(1).min(16);
    (STATUS_RETRY_FIRST * 2u32.pow(exp)).min(STATUS_RETRY_MAX)
}

/// After a failed reconcile whose status could not be written (the API
/// server unreachable, or no RoleBinding in the object's namespace): a
/// retry with backoff, 5 s doubling to 5 min, and an error line only when
/// the error is new for the object (the repeats are debug lines), so a
/// namespace the controller may not write in is said once, not every 5 s
/// for ever. A status written resets both ([`write::apply`]).
pub fn error_policy(si: Arc<SettingsImage>, err: &StatusError, ctx: Arc<Ctx>) -> Action {
    ctx.metrics.reconciled("failed", 0.0);
    let (ns, name) = (si.namespace().unwrap_or_default(), si.name_any());
    let key = format!("{ns}/{name}");
    let message = err.to_string();
    let (mut failures, mut new) = (0, false);
    ctx.remember(&key, |m| {
        m.status_failures = m.status_failures.saturating_add(1);
        failures = m.status_failures;
        new = m.status_error.as_deref() != Some(message.as_str());
        m.status_error = Some(message.clone());
    });
    let wait = status_retry(failures);
    let mut fields = vec![
        ("failures", serde_json::Value::from(failures)),
        ("retryInSeconds", serde_json::Value::from(wait.as_secs())),
    ];
    if new {
        if err.forbidden() {
            fields.push((
                "hint",
                serde_json::Value::from(format!(
                    "the controller may not write here: bind the ClusterRole settings-image-controller \
                     in namespace {ns} with a RoleBinding (docs/controller.md)"
                )),
            ));
        }
        fields.push((
            "retry",
            serde_json::Value::from(
                "with backoff, 5s doubling to 5m; logged again when the error changes (debug lines until then)",
            ),
        ));
    }
    let level = if new { Level::Error } else { Level::Debug };
    logs::object(level, &ns, &name, &message, &fields);
    Action::requeue(wait)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A status write that keeps failing is retried at 5 s, 10 s, 20 s, ...
    /// and never less often than every 5 minutes.
    #[test]
    fn failed_status_writes_back_off_to_five_minutes() {
        let waits: Vec<u64> = (1..=8).map(|n| status_retry(n).as_secs()).collect();
        assert_eq!(waits, [5, 10, 20, 40, 80, 160, 300, 300]);
        assert_eq!(status_retry(u32::MAX).as_secs(), 300);
    }
}
