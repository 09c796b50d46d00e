//! One reconcile of a SettingsImage: check the spec, read the
//! GitRepository's fetched revision, publish exactly that commit when it is
//! new (or when `spec.interval` has passed since the last check), and say
//! what happened in the status, in Events and in the metrics.
//!
//! What each outcome writes (see `docs/controller.md`):
//!
//! | outcome | Ready | Reconciling | Stalled | retried |
//! |---|---|---|---|---|
//! | published | True `Succeeded` | - | - | after `spec.interval` |
//! | same revision, checked within the interval | unchanged | - | - | at the interval |
//! | no artifact yet | False `ArtifactNotReady` | True | - | when the GitRepository changes |
//! | bad spec, missing GitRepository or Secret key, a source in another namespace | False (reason) | - | True (names the field) | when the spec changes, or after the interval |
//! | git or registry failure | False (reason) | True `ProgressingWithRetry` | - | with backoff, 1 s doubling to 5 min |
//! | the status refused by the API server | False `StatusRefused` | - | True | at the interval |
//!
//! The interval is at least `--min-interval`. Every message is scrubbed of
//! the credentials the reconcile read (`super::redact`), whatever a server
//! echoed into it. Each pushed image is a `Normal Published` Event of its
//! own; other Events go through kube-runtime's recorder (repeats of a
//! reason within six minutes are one series).
//!
//! An anomaly of the push (a re-run of an older commit, a timestamp that
//! went backwards, ...) and a branch tag kept on a newer commit are Warning
//! Events and part of the Ready message: the cluster only moves forward. A
//! folder name lower-cased for its repository (the one mapping of
//! `many::repositories`) is a Normal Event and a notice in the Ready
//! message, the text `push` prints.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::Value;

use super::crd::{GitRepository, ImageStatus, Provider, SettingsImage};
use super::logs::{self, Level};
use super::metrics::Metrics;
use super::publish::{self, Job, Published};
use super::redact::Held;
use super::source;
use super::status::{self, READY, RECONCILING, STALLED};
use super::{login, spec};
use crate::error::{Error, GitFailure};
use crate::history::mirror::{Mirrors, Remote};
use crate::publish::guards::BranchOutcome;
use crate::registry;

/// The first retry after a failure; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// The longest wait between retries.
const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// What the operator allows every SettingsImage (the controller's flags).
#[derive(Debug, Clone, Copy)]
pub struct Policy {
    /// `--allow-cross-namespace-refs`: a source in another namespace may
    /// be read (with that namespace's Secret).
    pub cross_namespace_refs: bool,
    /// `--min-interval`: shorter `spec.interval`s are raised to it.
    pub min_interval: Duration,
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
    state: Mutex<HashMap<String, Memory>>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Memory {
    failures: u32,
    checked: Option<Instant>,
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

    fn memory(&self, key: &str) -> Memory {
        self.state
            .lock()
            .ok()
            .and_then(|m| m.get(key).copied())
            .unwrap_or_default()
    }

    fn remember(&self, key: &str, f: impl FnOnce(&mut Memory)) {
        if let Ok(mut m) = self.state.lock() {
            f(m.entry(key.to_string()).or_default());
        }
    }
}

/// A failure to write the status (the API server is unreachable); the
/// controller retries.
#[derive(Debug, thiserror::Error)]
#[error("writing the status of SettingsImage {object}: {source}")]
pub struct StatusError {
    object: String,
    #[source]
    source: kube::Error,
}

/// A note for Events and the Ready message: a Warning Event, or a Normal
/// one for a notice.
struct Note {
    reason: &'static str,
    message: String,
    warning: bool,
}

/// How an attempt ended.
enum Step {
    Published {
        revision: String,
        images: Vec<Published>,
        notices: Vec<String>,
        /// The controller's own notices (an interval raised to the floor).
        extra: Vec<Note>,
    },
    Unchanged {
        wait: Duration,
    },
    Waiting {
        reason: &'static str,
        message: String,
    },
    Stalled {
        reason: &'static str,
        message: String,
    },
    Failed {
        reason: &'static str,
        message: String,
    },
}

fn stalled(reason: &'static str, message: impl Into<String>) -> Step {
    Step::Stalled {
        reason,
        message: message.into(),
    }
}

fn failed(reason: &'static str, message: impl Into<String>) -> Step {
    Step::Failed {
        reason,
        message: message.into(),
    }
}

/// The Ready reason, and whether it stalls, for an error of the pipeline.
fn classify(e: &Error) -> (&'static str, bool) {
    match e {
        Error::Git { kind, .. } => match kind {
            GitFailure::Auth => ("GitAuthenticationFailed", false),
            GitFailure::NotFound => ("GitRevisionNotFound", false),
            _ => ("GitOperationFailed", false),
        },
        Error::Registry { .. } => ("RegistryOperationFailed", false),
        Error::Auth { .. } => ("RegistryAuthenticationFailed", false),
        Error::TagExists { .. } | Error::TagRaced { .. } | Error::ChannelMismatch { .. } => {
            ("TagConflict", true)
        }
        Error::Rewind { .. } => ("HistoryRewritten", true),
        // Another ref publishes under spec.timestampTag: a new prefix fixes it.
        Error::PrefixShared { .. } => ("PrefixShared", true),
        Error::Input { .. } => ("InvalidSpec", true),
        Error::Source { .. } | Error::History { .. } => ("BuildFailed", true),
        Error::Io { .. }
        | Error::Json { .. }
        | Error::Layout { .. }
        | Error::GitHub { .. }
        | Error::Mismatch { .. } => ("PublishFailed", false),
    }
}

/// An error and its hint as one message.
fn message_of(e: &Error) -> String {
    match e.hint() {
        Some(h) => format!("{} ({h})", crate::error::error_chain(e)),
        None => crate::error::error_chain(e),
    }
}

/// Reconciles one SettingsImage.
pub async fn reconcile(si: Arc<SettingsImage>, ctx: Arc<Ctx>) -> Result<Action, StatusError> {
    let started = Instant::now();
    let ns = si.namespace().unwrap_or_default();
    let name = si.name_any();
    let key = format!("{ns}/{name}");
    if si.spec.suspend {
        ctx.metrics
            .reconciled("suspended", started.elapsed().as_secs_f64());
        logs::object(Level::Info, &ns, &name, "suspended: nothing published", &[]);
        return Ok(Action::await_change());
    }
    // The credentials this reconcile reads; no message it writes (status,
    // Event, log) carries them, whatever a server echoed.
    let held = Held::new();
    let _holding = logs::hold(&key, &held);
    let (step, interval) = attempt(&si, &ctx, &ns, &key, &held).await;
    let step = step.scrubbed(&held);
    let api: Api<SettingsImage> = Api::namespaced(ctx.client.clone(), &ns);
    let generation = si.metadata.generation;
    let mut st = si.status.clone().unwrap_or_default();
    let write_err = |source| StatusError {
        object: key.clone(),
        source,
    };
    let (result, action) = match step {
        Step::Unchanged { wait } => {
            ctx.metrics
                .reconciled("unchanged", started.elapsed().as_secs_f64());
            return Ok(Action::requeue(wait));
        }
        Step::Published {
            revision,
            images,
            notices,
            extra,
        } => {
            ctx.remember(&key, |m| {
                m.failures = 0;
                m.checked = Some(Instant::now());
            });
            let mut notes = notes(&images, &notices);
            notes.extend(extra);
            for n in &mut notes {
                n.message = held.scrub(&n.message);
            }
            for img in &images {
                if let Some(push) = &img.report.push {
                    ctx.metrics.published(push.pushed, push.uploaded_bytes);
                }
            }
            let pushed: Vec<&Published> = images
                .iter()
                .filter(|p| p.report.push.as_ref().is_some_and(|x| x.pushed))
                .collect();
            let mut message = match images.as_slice() {
                [one] => format!(
                    "{} {}",
                    if pushed.is_empty() {
                        "up to date"
                    } else {
                        "published"
                    },
                    reference(one)
                ),
                many => format!(
                    "{} images for {revision}, {} pushed",
                    many.len(),
                    pushed.len()
                ),
            };
            let (listed, omitted) = status::bounded(images.iter().map(image_status).collect());
            if omitted > 0 {
                let first = &images[listed.len()].path;
                message.push_str(&format!(
                    "; status.images lists the first {} of {} folders (it holds at most {} KiB); the other {omitted}, from {} on, are published as well",
                    listed.len(),
                    images.len(),
                    status::IMAGES_BUDGET / 1024,
                    cut(first, 200)
                ));
            }
            for n in &notes {
                let what = if n.warning { "warning" } else { "notice" };
                message.push_str(&format!("; {what} {}: {}", n.reason, n.message));
            }
            st.images = listed;
            st.images_omitted = u32::try_from(omitted).ok().filter(|n| *n > 0);
            st.last_handled_revision = Some(revision.clone());
            st.observed_generation = generation;
            status::set(
                &mut st.conditions,
                READY,
                true,
                "Succeeded",
                &message,
                generation,
            );
            status::remove(&mut st.conditions, RECONCILING);
            status::remove(&mut st.conditions, STALLED);
            written(
                &ctx,
                &si,
                status::write_checked(&api, &si, &st)
                    .await
                    .map_err(write_err)?,
            )
            .await;
            // One Event per pushed image, never folded into an earlier
            // one's series (the recorder would keep only the first note).
            for p in &pushed {
                published_event(&ctx, &si, format!("pushed {} for {revision}", reference(p))).await;
            }
            for n in notes {
                let type_ = if n.warning {
                    EventType::Warning
                } else {
                    EventType::Normal
                };
                event(&ctx, &si, type_, n.reason, n.message).await;
            }
            logs::object(
                Level::Info,
                &ns,
                &name,
                &message,
                &[
                    ("revision", Value::from(revision)),
                    ("pushed", Value::from(pushed.len())),
                ],
            );
            ("published", Action::requeue(interval))
        }
        Step::Waiting { reason, message } => {
            st.observed_generation = generation;
            status::set(
                &mut st.conditions,
                READY,
                false,
                reason,
                &message,
                generation,
            );
            status::set(
                &mut st.conditions,
                RECONCILING,
                true,
                reason,
                &message,
                generation,
            );
            status::remove(&mut st.conditions, STALLED);
            written(
                &ctx,
                &si,
                status::write_checked(&api, &si, &st)
                    .await
                    .map_err(write_err)?,
            )
            .await;
            logs::object(Level::Info, &ns, &name, &message, &[]);
            ("waiting", Action::await_change())
        }
        Step::Stalled { reason, message } => {
            ctx.metrics.failed(reason);
            st.observed_generation = generation;
            status::set(
                &mut st.conditions,
                READY,
                false,
                reason,
                &message,
                generation,
            );
            status::set(
                &mut st.conditions,
                STALLED,
                true,
                reason,
                &message,
                generation,
            );
            status::remove(&mut st.conditions, RECONCILING);
            written(
                &ctx,
                &si,
                status::write_checked(&api, &si, &st)
                    .await
                    .map_err(write_err)?,
            )
            .await;
            event(&ctx, &si, EventType::Warning, reason, message.clone()).await;
            logs::object(
                Level::Error,
                &ns,
                &name,
                &message,
                &[("reason", Value::from(reason))],
            );
            // A Secret or GitRepository fixed later is found at the interval.
            ("stalled", Action::requeue(interval))
        }
        Step::Failed { reason, message } => {
            ctx.metrics.failed(reason);
            let mut failures = 0;
            ctx.remember(&key, |m| {
                m.failures += 1;
                failures = m.failures;
            });
            let wait = backoff(failures);
            st.observed_generation = generation;
            status::set(
                &mut st.conditions,
                READY,
                false,
                reason,
                &message,
                generation,
            );
            status::set(
                &mut st.conditions,
                RECONCILING,
                true,
                "ProgressingWithRetry",
                &format!("retrying in {} s: {message}", wait.as_secs()),
                generation,
            );
            status::remove(&mut st.conditions, STALLED);
            written(
                &ctx,
                &si,
                status::write_checked(&api, &si, &st)
                    .await
                    .map_err(write_err)?,
            )
            .await;
            event(&ctx, &si, EventType::Warning, reason, message.clone()).await;
            logs::object(
                Level::Error,
                &ns,
                &name,
                &message,
                &[
                    ("reason", Value::from(reason)),
                    ("retryInSeconds", Value::from(wait.as_secs())),
                ],
            );
            ("failed", Action::requeue(wait))
        }
    };
    ctx.metrics
        .reconciled(result, started.elapsed().as_secs_f64());
    Ok(action)
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

/// After a failed reconcile whose status could not be written.
pub fn error_policy(si: Arc<SettingsImage>, err: &StatusError, ctx: Arc<Ctx>) -> Action {
    ctx.metrics.reconciled("failed", 0.0);
    logs::object(
        Level::Error,
        &si.namespace().unwrap_or_default(),
        &si.name_any(),
        &err.to_string(),
        &[],
    );
    Action::requeue(Duration::from_secs(5))
}

/// The wait after `failures` failures in a row.
fn backoff(failures: u32) -> Duration {
    let exp = failures.saturating_sub(1).min(16);
    (FIRST_BACKOFF * 2u32.pow(exp)).min(MAX_BACKOFF)
}

/// Everything up to and including the publish; the interval rides along
/// for the requeue.
async fn attempt(
    si: &SettingsImage,
    ctx: &Ctx,
    ns: &str,
    key: &str,
    held: &Held,
) -> (Step, Duration) {
    let checked = match spec::check(&si.spec) {
        Ok(c) => c,
        Err(invalid) => {
            return (
                stalled("InvalidSpec", invalid.to_string()),
                spec::DEFAULT_INTERVAL,
            );
        }
    };
    // A floor on the interval: the spec asks, the operator bounds.
    let mut checked = checked;
    let raised = (checked.interval < ctx.policy.min_interval).then(|| {
        format!(
            "spec.interval {} is below the controller's --min-interval: checked every {}",
            si.spec.interval.as_deref().unwrap_or_default(),
            spec::format_duration(ctx.policy.min_interval),
        )
    });
    if raised.is_some() {
        checked.interval = ctx.policy.min_interval;
    }
    let interval = checked.interval;
    let mut step = prepare_and_publish(si, ctx, ns, key, checked, held).await;
    if let (Some(message), Step::Published { extra, .. }) = (raised, &mut step) {
        extra.push(Note {
            reason: "IntervalRaised",
            message,
            warning: false,
        });
    }
    (step, interval)
}

async fn prepare_and_publish(
    si: &SettingsImage,
    ctx: &Ctx,
    ns: &str,
    key: &str,
    checked: spec::Checked,
    held: &Held,
) -> Step {
    let spec = &si.spec;
    let source_ns = spec
        .source_ref
        .namespace
        .as_deref()
        .filter(|n| !n.is_empty())
        .unwrap_or(ns);
    let source_name = &spec.source_ref.name;
    let what = format!("GitRepository {source_ns}/{source_name}");
    // One tenant may not read another's repository (with its Secret) by
    // naming it: Flux's rule for cross-namespace references.
    if source_ns != ns && !ctx.policy.cross_namespace_refs {
        return stalled(
            "AccessDenied",
            format!(
                "spec.sourceRef.namespace: {what} is in another namespace than this SettingsImage ({ns}); cross-namespace references are refused (the controller runs without --allow-cross-namespace-refs)"
            ),
        );
    }
    let repos: Api<GitRepository> = Api::namespaced(ctx.client.clone(), source_ns);
    let repo = match repos.get_opt(source_name).await {
        Ok(Some(r)) => r,
        Ok(None) => {
            return stalled(
                "SourceNotFound",
                format!("spec.sourceRef: {what} does not exist"),
            );
        }
        Err(kube::Error::Api(e)) if e.code == 403 => {
            return stalled(
                "SourceForbidden",
                format!(
                    "spec.sourceRef: the controller may not read {what} ({}); a source in another namespace needs the controller to watch it",
                    e.message
                ),
            );
        }
        // The type itself is not served: the API server's plain 404.
        Err(e) if super::watch::type_not_served(&e) => {
            let w = super::watch::GIT_REPOSITORIES;
            return failed(
                "SourceUnavailable",
                format!(
                    "spec.sourceRef: the {} CRD ({}) is not installed: {}",
                    w.kind, w.api, w.install
                ),
            );
        }
        Err(e) => return failed("SourceUnavailable", format!("reading {what}: {e}")),
    };
    let Some(revision) = repo
        .status
        .as_ref()
        .and_then(|s| s.artifact.as_ref())
        .map(|a| a.revision.clone())
        .filter(|r| !r.is_empty())
    else {
        return Step::Waiting {
            reason: "ArtifactNotReady",
            message: format!(
                "waiting for source-controller to fetch {what} (no status.artifact.revision yet)"
            ),
        };
    };
    let Some(parsed) = source::parse_revision(&revision) else {
        return Step::Waiting {
            reason: "InvalidRevision",
            message: format!(
                "{what} status.artifact.revision {revision:?} is not <ref>@sha1:<commit>"
            ),
        };
    };
    let branch = repo
        .spec
        .reference
        .as_ref()
        .and_then(|r| r.branch.clone())
        .filter(|b| !b.is_empty());
    // The mirror follows a branch: the GitRepository's, else the one the
    // revision names.
    let Some(fetch_branch) = branch.clone().or_else(|| {
        parsed
            .reference
            .as_deref()
            .and_then(|r| r.strip_prefix("refs/heads/"))
            .map(str::to_string)
    }) else {
        return stalled(
            "UnsupportedSource",
            format!(
                "spec.sourceRef: {what} does not follow a branch (spec.ref.branch); the controller publishes from a branch's history"
            ),
        );
    };
    // The default prefix: the branch (`spec.ref.branch`, or the one
    // `spec.ref.name: refs/heads/B` names), as `flux --settings-image`
    // reads it from the GitRepository.
    let prefix = spec
        .timestamp_tag
        .clone()
        .unwrap_or_else(|| fetch_branch.clone());
    // The same revision and spec, published and checked within the
    // interval: nothing to ask anyone.
    let st = si.status.clone().unwrap_or_default();
    let memory = ctx.memory(key);
    if st.last_handled_revision.as_deref() == Some(revision.as_str())
        && st.observed_generation == si.metadata.generation
        && status::is_ready(&st)
        && let Some(at) = memory.checked
        && at.elapsed() < checked.interval
    {
        return Step::Unchanged {
            wait: checked.interval - at.elapsed(),
        };
    }
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), source_ns);
    let remote = match &repo.spec.secret_ref {
        None => Remote::from_flux(&repo.spec.url, None)
            .map_err(|e| stalled("InvalidSource", format!("{what}: {}", message_of(&e)))),
        Some(r) => match read_secret(&secrets, &r.name).await {
            Ok(s) => {
                let data: BTreeMap<String, Vec<u8>> = source::data(&s)
                    .into_iter()
                    .map(|(k, v)| (k, v.0))
                    .collect();
                hold_git_secret(held, &data);
                Remote::from_flux(&repo.spec.url, Some(&data)).map_err(|e| {
                    stalled(
                        "InvalidSecret",
                        format!(
                            "{what} spec.secretRef (Secret {source_ns}/{}): {}",
                            r.name,
                            message_of(&e)
                        ),
                    )
                })
            }
            Err(step) => Err(step.within(&format!("{what} spec.secretRef"))),
        },
    };
    let remote = match remote {
        Ok(r) => r,
        Err(step) => return step,
    };
    let options = match registry_options(si, ctx, ns, held).await {
        Ok(o) => o,
        Err(step) => return step,
    };
    let job = Job {
        remote,
        branch: fetch_branch,
        commit: parsed.commit.clone(),
        path: checked.path,
        prefix,
        branch_tag: spec.branch_tag.clone(),
        provenance: spec.provenance,
        registry: options,
        ci: crate::provenance::Ci {
            // The mirror's `refs/heads/BRANCH`, as a clone names it.
            git_ref: None,
            builder_id: Some(format!(
                "https://github.com/configbutler/settings-image/controller@v{}",
                env!("CARGO_PKG_VERSION")
            )),
            invocation_id: si.uid().map(|uid| {
                format!(
                    "kubernetes://settings-image.configbutler.io/namespaces/{ns}/settingsimages/{}?uid={uid}&revision={revision}",
                    si.name_any()
                )
            }),
            workflow_ref: None,
        },
    };
    let mirrors = ctx.mirrors.clone();
    let interrupt = ctx.interrupt.clone();
    match tokio::task::spawn_blocking(move || publish::run(&job, &mirrors, &interrupt)).await {
        Ok(Ok(outcome)) => Step::Published {
            revision,
            images: outcome.images,
            notices: outcome.notices,
            extra: Vec::new(),
        },
        Ok(Err(e)) => {
            let (reason, stalls) = classify(&e);
            let message = format!("revision {revision}: {}", message_of(&e));
            if stalls {
                stalled(reason, message)
            } else {
                failed(reason, message)
            }
        }
        Err(e) => failed("PublishFailed", format!("the publish stopped: {e}")),
    }
}

/// Holds the credentials of a GitRepository's Secret (Flux's keys), read
/// as text whatever else is wrong with them.
fn hold_git_secret(held: &Held, data: &BTreeMap<String, Vec<u8>>) {
    let text = |k: &str| data.get(k).map(|v| String::from_utf8_lossy(v).into_owned());
    if let Some(token) = text("bearerToken") {
        held.add_token(&token);
    }
    if let Some(password) = text("password") {
        held.add_basic(&text("username").unwrap_or_default(), &password);
    }
}

impl Step {
    /// The step with every credential `held` holds taken out of its words.
    fn scrubbed(self, held: &Held) -> Step {
        let s = |m: String| held.scrub(&m);
        match self {
            Step::Waiting { reason, message } => Step::Waiting {
                reason,
                message: s(message),
            },
            Step::Stalled { reason, message } => Step::Stalled {
                reason,
                message: s(message),
            },
            Step::Failed { reason, message } => Step::Failed {
                reason,
                message: s(message),
            },
            // The notes are scrubbed where they are made (from reports).
            other => other,
        }
    }
}

/// A Secret read failed: which step to take.
enum SecretError {
    Missing(String),
    Forbidden(String),
    Api(String),
}

impl SecretError {
    fn within(self, field: &str) -> Step {
        match self {
            SecretError::Missing(m) => stalled("SecretNotFound", format!("{field}: {m}")),
            SecretError::Forbidden(m) => stalled("SecretForbidden", format!("{field}: {m}")),
            SecretError::Api(m) => failed("SecretUnavailable", format!("{field}: {m}")),
        }
    }
}

async fn read_secret(api: &Api<Secret>, name: &str) -> Result<Secret, SecretError> {
    let ns = api.namespace().unwrap_or_default();
    match api.get_opt(name).await {
        Ok(Some(s)) => Ok(s),
        Ok(None) => Err(SecretError::Missing(format!(
            "Secret {ns}/{name} does not exist"
        ))),
        Err(kube::Error::Api(e)) if e.code == 403 => Err(SecretError::Forbidden(format!(
            "the controller may not read Secret {ns}/{name} ({})",
            e.message
        ))),
        Err(e) => Err(SecretError::Api(format!("reading Secret {ns}/{name}: {e}"))),
    }
}

/// The registry options: the repository (a template for a glob), plain
/// HTTP, and the login `spec.secretRef` or `spec.provider` says.
async fn registry_options(
    si: &SettingsImage,
    ctx: &Ctx,
    ns: &str,
    held: &Held,
) -> Result<registry::Options, Step> {
    let spec = &si.spec;
    let host = spec
        .repository
        .split_once('/')
        .map(|(h, _)| h.to_string())
        .unwrap_or_default();
    let mut options = registry::Options {
        repository: spec.repository.clone(),
        insecure: spec.insecure,
        monolithic: false,
        credentials: None,
        docker_config: None,
        login: None,
    };
    if let Some(r) = &spec.secret_ref {
        let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), ns);
        let secret = read_secret(&secrets, &r.name)
            .await
            .map_err(|e| e.within("spec.secretRef"))?;
        let creds =
            source::registry_credentials(&secret, &format!("Secret {ns}/{}", r.name), &host)
                .map_err(|m| stalled("InvalidSecret", format!("spec.secretRef: {m}")))?;
        held.add_basic(&creds.username, &creds.password);
        options.credentials = Some(creds);
    } else if spec.provider != Provider::Generic {
        let scheme = if spec.insecure || registry::is_loopback(&host) {
            "http"
        } else {
            "https"
        };
        let mut l = login::workload_identity(spec.provider, &host, scheme, &ctx.env)
            .map_err(|m| stalled("InvalidProvider", format!("spec.provider: {m}")))?;
        // The projected token and what the exchanges hand out.
        l.on_secret = Some(held.sink());
        options.login = Some(Box::new(l));
    }
    Ok(options)
}

/// `HOST/NAME:TAG@DIGEST` of a folder's image.
fn reference(p: &Published) -> String {
    p.report
        .push
        .as_ref()
        .map(|x| x.reference.clone())
        .unwrap_or_else(|| format!("{}@{}", p.repository, p.report.digest))
}

fn image_status(p: &Published) -> ImageStatus {
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
fn notes(images: &[Published], notices: &[String]) -> Vec<Note> {
    let mut out: Vec<Note> = notices
        .iter()
        .map(|n| Note {
            reason: "RepositoryLowerCased",
            message: n.clone(),
            warning: false,
        })
        .collect();
    for p in images {
        let r = &p.report;
        if let Some(a) = &r.anomaly {
            out.push(Note {
                reason: anomaly_reason(a.kind),
                message: format!("{}: {}", p.repository, a.message),
                warning: true,
            });
        }
        if let Some(b) = &r.branch_tag
            && b.outcome == BranchOutcome::KeptNewer
        {
            out.push(Note {
                reason: "BranchTagKept",
                message: format!(
                    "{}: branch tag {} stays on commit {}, newer than {}: an older revision never moves it back",
                    p.repository,
                    b.name,
                    b.commit.as_deref().unwrap_or("?"),
                    r.commit.as_deref().unwrap_or("?")
                ),
                warning: true,
            });
        }
        for w in &r.warnings {
            out.push(Note {
                reason: "PublishWarning",
                message: format!("{}: {w}", p.repository),
                warning: true,
            });
        }
    }
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_five_minutes() {
        assert_eq!(backoff(1), Duration::from_secs(1));
        assert_eq!(backoff(2), Duration::from_secs(2));
        assert_eq!(backoff(4), Duration::from_secs(8));
        assert_eq!(backoff(40), MAX_BACKOFF);
    }

    #[test]
    fn a_lower_cased_folder_is_a_notice_not_a_warning() {
        let n = notes(&[], &["the folder configs/Cart has capitals".to_string()]);
        assert_eq!(n.len(), 1);
        assert_eq!(n[0].reason, "RepositoryLowerCased");
        assert!(!n[0].warning);
        assert!(n[0].message.contains("configs/Cart"));
    }

    #[test]
    fn spec_and_history_errors_stall_and_network_errors_retry() {
        assert_eq!(classify(&Error::input("x", None)), ("InvalidSpec", true));
        let reg = Error::Registry {
            reference: "r".into(),
            what: "w".into(),
            message: "m".into(),
            hint: None,
        };
        assert_eq!(classify(&reg), ("RegistryOperationFailed", false));
    }
}
