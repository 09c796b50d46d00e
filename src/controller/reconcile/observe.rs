//! What a reconcile reads and does before anything is decided: the spec
//! checked, the GitRepository and the revision it announces, the git and
//! registry Secrets (or the workload identity login), and the publish of
//! that commit on the blocking pool. Every early end is a [`Step`], made
//! by the pure readings of `super::step`; the credentials read go into the
//! reconcile's [`Held`], so no word written carries them.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::{Api, ResourceExt};

use super::Ctx;
use super::decide;
use super::step::{self, Fetched, Followed, Step, failed, message_of, stalled};
use crate::controller::crd::{GitRepository, LocalObjectReference, Provider, SettingsImage};
use crate::controller::publish::{self, Job};
use crate::controller::redact::Held;
use crate::controller::{login, source, spec};
use crate::history::mirror::Remote;
use crate::registry;

/// What one attempt found, and the interval its requeue counts.
#[derive(Debug)]
pub struct Attempt {
    /// How it ended.
    pub step: Step,
    /// `spec.interval`, raised to the operator's floor.
    pub interval: Duration,
    /// The notice that it was raised, if it was.
    pub raised: Option<String>,
}

/// Everything up to and including the publish.
pub async fn attempt(si: &SettingsImage, ctx: &Ctx, key: &str, held: &Held) -> Attempt {
    let mut checked = match spec::check(&si.spec) {
        Ok(c) => c,
        Err(e) => {
            return Attempt {
                step: stalled("InvalidSpec", spec::said(&e)),
                interval: spec::DEFAULT_INTERVAL,
                raised: None,
            };
        }
    };
    // A floor on the interval: the spec asks, the operator bounds.
    let (interval, raised) = step::interval_floor(
        checked.interval,
        ctx.policy.min_interval,
        si.spec.interval.as_deref(),
    );
    checked.interval = interval;
    let step = match publish_if_new(si, ctx, key, checked, held).await {
        Ok(step) | Err(step) => step,
    };
    Attempt {
        step,
        interval,
        raised,
    }
}

/// Reads the source and, unless its revision was checked within the
/// interval, the credentials, then publishes; `Err` is the step it ended
/// on early.
async fn publish_if_new(
    si: &SettingsImage,
    ctx: &Ctx,
    key: &str,
    checked: spec::Checked,
    held: &Held,
) -> Result<Step, Step> {
    let ns = si.namespace().unwrap_or_default();
    let source = Followed::of(&si.spec, &ns, ctx.policy.cross_namespace_refs)?;
    let repos: Api<GitRepository> = Api::namespaced(ctx.client.clone(), &source.namespace);
    let repo = source.found(repos.get_opt(&source.name).await)?;
    let fetched = step::fetched(&repo, &source.what)?;
    // The same revision and spec, published and checked within the
    // interval: nothing to ask anyone.
    let since_checked = ctx.memory(key).checked.map(|at| at.elapsed());
    if let Some(wait) = decide::unchanged(
        si.status.as_ref(),
        si.metadata.generation,
        &fetched.revision,
        since_checked,
        checked.interval,
    ) {
        return Ok(Step::Unchanged { wait });
    }
    let remote = git_remote(ctx, &repo, &source, held).await?;
    let registry = registry_options(&Login::of_image(&si.spec), &ctx.access(), &ns, held).await?;
    let revision = fetched.revision.clone();
    let job = job(si, &ns, checked, fetched, remote, registry);
    Ok(run(ctx, job, revision).await)
}

/// The publish of `fetched`'s commit, as the blocking pool runs it.
fn job(
    si: &SettingsImage,
    ns: &str,
    checked: spec::Checked,
    fetched: Fetched,
    remote: Remote,
    registry: registry::Options,
) -> Job {
    let spec = &si.spec;
    // The default prefix: the branch (`spec.ref.branch`, or the one
    // `spec.ref.name: refs/heads/B` names), as `flux --settings-image`
    // reads it from the GitRepository.
    let prefix = spec
        .timestamp_tag
        .clone()
        .unwrap_or_else(|| fetched.branch.clone());
    let revision = &fetched.revision;
    Job {
        remote,
        branch: fetched.branch.clone(),
        commit: fetched.commit.clone(),
        path: checked.path,
        prefix,
        branch_tag: spec.branch_tag.clone(),
        provenance: spec.provenance,
        registry,
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
    }
}

/// Runs `job` on the blocking pool.
async fn run(ctx: &Ctx, job: Job, revision: String) -> Step {
    let mirrors = ctx.mirrors.clone();
    let interrupt = ctx.interrupt.clone();
    match tokio::task::spawn_blocking(move || publish::run(&job, &mirrors, &interrupt)).await {
        Ok(outcome) => step::published(revision, outcome),
        Err(e) => failed("PublishFailed", format!("the publish stopped: {e}")),
    }
}

/// The GitRepository's URL with the credentials of its Secret (Flux's
/// keys, read in the GitRepository's namespace).
async fn git_remote(
    ctx: &Ctx,
    repo: &GitRepository,
    source: &Followed,
    held: &Held,
) -> Result<Remote, Step> {
    let what = &source.what;
    let Some(r) = &repo.spec.secret_ref else {
        return Remote::from_flux(&repo.spec.url, None)
            .map_err(|e| stalled("InvalidSource", format!("{what}: {}", message_of(&e))));
    };
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &source.namespace);
    let secret = step::secret_found(secrets.get_opt(&r.name).await, &source.namespace, &r.name)
        .map_err(|e| e.within(&format!("{what} spec.secretRef")))?;
    let data: BTreeMap<String, Vec<u8>> = source::data(&secret)
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect();
    hold_git_secret(held, &data);
    Remote::from_flux(&repo.spec.url, Some(&data)).map_err(|e| {
        stalled(
            "InvalidSecret",
            format!(
                "{what} spec.secretRef (Secret {}/{}): {}",
                source.namespace,
                r.name,
                message_of(&e)
            ),
        )
    })
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

/// The registry fields of a resource's spec: a SettingsImage's, or a
/// SettingsRollout's (the same fields, the same login).
pub struct Login<'a> {
    /// `spec.repository` (a template for a glob).
    pub repository: &'a str,
    /// `spec.insecure`.
    pub insecure: bool,
    /// `spec.secretRef`.
    pub secret_ref: Option<&'a LocalObjectReference>,
    /// `spec.provider`.
    pub provider: Provider,
}

impl<'a> Login<'a> {
    /// A SettingsImage's.
    pub fn of_image(spec: &'a crate::controller::crd::SettingsImageSpec) -> Login<'a> {
        Login {
            repository: &spec.repository,
            insecure: spec.insecure,
            secret_ref: spec.secret_ref.as_ref(),
            provider: spec.provider,
        }
    }
}

/// What the registry login reads: the API (Secrets) and the process
/// environment (workload identity).
pub struct Access<'a> {
    /// The API client.
    pub client: &'a kube::Client,
    /// The controller's environment.
    pub env: &'a crate::front::Env,
    /// `--provider-namespaces`: who may log in with the controller's
    /// cloud identity.
    pub provider_namespaces: &'a super::ProviderNamespaces,
}

/// The registry options: the repository (a template for a glob), plain
/// HTTP, and the login `spec.secretRef` or `spec.provider` says.
pub async fn registry_options(
    spec: &Login<'_>,
    ctx: &Access<'_>,
    ns: &str,
    held: &Held,
) -> Result<registry::Options, Step> {
    let host = spec
        .repository
        .split_once('/')
        .map(|(h, _)| h.to_string())
        .unwrap_or_default();
    let mut options = registry::Options {
        insecure: spec.insecure,
        ..registry::Options::new(spec.repository)
    };
    if let Some(r) = spec.secret_ref {
        let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), ns);
        let secret = step::secret_found(secrets.get_opt(&r.name).await, ns, &r.name)
            .map_err(|e| e.within("spec.secretRef"))?;
        let creds =
            source::registry_credentials(&secret, &format!("Secret {ns}/{}", r.name), &host)
                .map_err(|m| stalled("InvalidSecret", format!("spec.secretRef: {m}")))?;
        held.add_basic(&creds.username, &creds.password);
        options.credentials = Some(creds);
    } else if spec.provider != Provider::Generic {
        step::provider_allowed(spec.provider, ns, ctx.provider_namespaces, &host)?;
        let scheme = if spec.insecure || registry::is_loopback(&host) {
            "http"
        } else {
            "https"
        };
        let mut l = login::workload_identity(spec.provider, &host, scheme, ctx.env)
            .map_err(|m| stalled("InvalidProvider", format!("spec.provider: {m}")))?;
        // The projected token and what the exchanges hand out.
        l.on_secret = Some(held.sink());
        options.login = Some(Box::new(l));
    }
    Ok(options)
}
