//! `settings-image controller`: the Kubernetes face. It watches
//! `SettingsImage` resources and the Flux `GitRepository`s they follow, and
//! when source-controller announces a new revision
//! (`status.artifact.revision`) it publishes exactly that commit through the
//! same request pipeline as `settings-image push`, from a mirror of the
//! GitRepository's URL that `crate::history` keeps.
//!
//! Like the CLI and the action, this face only reads its world (flags, the
//! cluster, the pod's environment) and builds requests; `kube` and
//! `k8s-openapi` stay inside this module.
//!
//! - [`crd`]: the resource types (and the CRD they generate);
//! - `reconcile`: one reconcile: observe, decide (a pure function of what
//!   was observed), then one status write;
//! - `status`: kstatus conditions and the status write;
//! - `leader`: the Lease loop (`--leader-elect`);
//! - `metrics`: Prometheus metrics and the probes;
//! - `watch`: the watches' health (for `/readyz`) and their retries;
//! - `redact`: the credentials a reconcile holds, kept out of its words;
//! - `rollout`: SettingsRollouts, the rollout records (`--cluster-name`);
//! - [`logs`]: JSON lines on stderr.
//!
//! Why a current-thread runtime: the controller's own work is waiting on
//! the API server; each publish runs on the blocking pool
//! (`spawn_blocking`), as the library is blocking and runs its own small
//! runtimes. SIGTERM (through `crate::scratch`, which owns the signals)
//! stops new reconciles, lets the running publishes finish within
//! `--graceful-shutdown-timeout` (or abandons them: a push writes its tags
//! last, so an abandoned one leaves no tag, and its temporary files are
//! removed), releases the Lease and exits 0.

pub mod crd;
mod leader;
mod login;
pub mod logs;
mod metrics;
mod publish;
pub(crate) mod reconcile;
mod redact;
mod rollout;
mod source;
pub(crate) mod spec;
mod status;
mod watch;

use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures_util::StreamExt;
use kube::api::Api;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::controller::{Config as ControllerConfig, Controller};
use kube::runtime::events::Reporter;
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use tokio::sync::oneshot;

use crate::error::{Error, Result};
use crd::{GitRepository, SettingsImage};

/// Arguments of `controller` (controller-runtime's flag names).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A kubeconfig to use outside a cluster (else KUBECONFIG, else the
    /// in-cluster ServiceAccount, else ~/.kube/config).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// Where /metrics listens: HOST:PORT, :PORT (all interfaces), or 0 for
    /// off. The default is loopback only (a run on a laptop serves no one
    /// else); in a pod give :8080, as config/manager/deployment.yaml does.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    pub metrics_bind_address: String,
    /// Where /healthz and /readyz listen: HOST:PORT, :PORT (all
    /// interfaces), or 0 for off. The default is loopback only; the
    /// kubelet probes the pod's IP, so a pod gives :8081.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8081")]
    pub health_probe_bind_address: String,
    /// Publish only while holding a coordination.k8s.io Lease, so one of
    /// several replicas publishes.
    #[arg(long)]
    pub leader_elect: bool,
    /// The Lease's name.
    #[arg(long, value_name = "NAME", default_value = "settings-image-controller")]
    pub leader_election_id: String,
    /// The Lease's namespace (default: the pod's, else the kubeconfig's).
    #[arg(long, value_name = "NS")]
    pub leader_election_namespace: Option<String>,
    /// How long a Lease holds without renewal.
    #[arg(long, value_name = "DURATION", default_value = "15s")]
    pub leader_elect_lease_duration: String,
    /// How long the leader tries to renew before it gives up leading.
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub leader_elect_renew_deadline: String,
    /// How often candidates try and the leader renews.
    #[arg(long, value_name = "DURATION", default_value = "2s")]
    pub leader_elect_retry_period: String,
    /// Watch SettingsImages (and GitRepositories) in this namespace only
    /// (default: all namespaces).
    #[arg(long, value_name = "NS")]
    pub namespace: Option<String>,
    /// Let a SettingsImage follow a GitRepository in another namespace
    /// (`spec.sourceRef.namespace`), read with that namespace's git Secret.
    /// Off by default: such a reference stalls (`AccessDenied`), as Flux's
    /// controllers refuse them under `--no-cross-namespace-refs` (this
    /// flag has the opposite polarity: the refusal is the default).
    #[arg(long)]
    pub allow_cross_namespace_refs: bool,
    /// The namespaces whose SettingsImages may log in with the
    /// controller's own cloud identity (`spec.provider: aws`, `azure`,
    /// `gcp`), comma-separated; `*` for every namespace, empty
    /// (`--provider-namespaces=`) for none. Default: the controller's own
    /// namespace (the pod's). Elsewhere such a SettingsImage stalls
    /// (`AccessDenied`) and no token is requested.
    #[arg(long, value_name = "NS,...")]
    pub provider_namespaces: Option<String>,
    /// The shortest `spec.interval` honoured: a shorter one is raised to
    /// it (and the Ready message says so), so one SettingsImage cannot
    /// keep the git server, the registry and the workers busy.
    #[arg(long, value_name = "DURATION", default_value = "1m")]
    pub min_interval: String,
    /// How many SettingsImages publish at once.
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..))]
    pub concurrency: u16,
    /// Where the git mirrors are kept (a writable volume).
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// The mirrors' disk budget: after a fetch, the least recently
    /// fetched mirrors not in use are removed to stay under it.
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 30)]
    pub cache_max_bytes: u64,
    /// The most bytes of pack one git fetch may receive; a server that
    /// sends more (or never stops) fails the fetch there.
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 30)]
    pub fetch_max_bytes: u64,
    /// The most objects one git fetch may receive (checked in the pack's
    /// header, before any object is read).
    #[arg(long, value_name = "N", default_value_t = 1_000_000)]
    pub fetch_max_objects: u64,
    /// The largest object (a file, inflated) one git fetch may receive
    /// (checked in each object's header, before its data is read). Default
    /// 100 MiB: GitHub refuses larger files.
    #[arg(long, value_name = "BYTES", default_value_t = 100 << 20)]
    pub fetch_max_object_bytes: u64,
    /// The most bytes a git server may send one fetch before its pack:
    /// the ref advertisement (`info/refs`, `ls-refs`) and the
    /// negotiation's answers, which are held in memory.
    #[arg(long, value_name = "BYTES", default_value_t = 16 << 20)]
    pub fetch_max_ref_bytes: u64,
    /// The most refs a git server's ref advertisement may list for one
    /// fetch.
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    pub fetch_max_refs: u64,
    /// On SIGTERM, how long running publishes may take to finish before
    /// they are abandoned.
    #[arg(long, value_name = "DURATION", default_value = "30s")]
    pub graceful_shutdown_timeout: String,
    /// The least severe log lines written.
    #[arg(long, value_enum, default_value = "info")]
    pub log_level: logs::Level,
    /// Print a CRD (YAML) and exit: `settingsimages` (the default) or
    /// `settingsrollouts`.
    #[arg(long, value_name = "PLURAL", num_args = 0..=1, default_missing_value = "settingsimages")]
    pub print_crd: Option<String>,
    /// This cluster's name in rollout records (a DNS label, e.g.
    /// `staging`). Without it SettingsRollouts are not watched and nothing
    /// is recorded.
    #[arg(long, value_name = "NAME")]
    pub cluster_name: Option<String>,
}

/// A duration flag.
fn duration(value: &str, flag: &str) -> Result<Duration> {
    spec::parse_duration(value).ok_or_else(|| {
        Error::input(
            format!("{flag} {value:?} is not a duration"),
            Some(format!("give {flag} as a Go duration, e.g. 15s or 1m30s")),
        )
    })
}

/// The settings `Args` turn into, checked before anything connects.
struct Settings {
    metrics: Option<std::net::SocketAddr>,
    probes: Option<std::net::SocketAddr>,
    lease_duration: Duration,
    renew_deadline: Duration,
    retry_period: Duration,
    grace: Duration,
    min_interval: Duration,
    cache_dir: PathBuf,
}

fn settings(args: &Args) -> Result<Settings> {
    let s = Settings {
        metrics: metrics::bind_address(&args.metrics_bind_address, "--metrics-bind-address")?,
        probes: metrics::bind_address(
            &args.health_probe_bind_address,
            "--health-probe-bind-address",
        )?,
        lease_duration: duration(
            &args.leader_elect_lease_duration,
            "--leader-elect-lease-duration",
        )?,
        renew_deadline: duration(
            &args.leader_elect_renew_deadline,
            "--leader-elect-renew-deadline",
        )?,
        retry_period: duration(
            &args.leader_elect_retry_period,
            "--leader-elect-retry-period",
        )?,
        grace: duration(
            &args.graceful_shutdown_timeout,
            "--graceful-shutdown-timeout",
        )?,
        min_interval: duration(&args.min_interval, "--min-interval")?,
        cache_dir: args
            .cache_dir
            .clone()
            .unwrap_or_else(|| std::env::temp_dir().join("settings-image-mirrors")),
    };
    // A zero interval passes the duration grammar: every SettingsImage
    // (spec.interval 0s) or every candidate would go round back to back.
    if s.min_interval < Duration::from_secs(1) {
        return Err(Error::input(
            format!(
                "--min-interval {:?} is shorter than 1s: a SettingsImage asking for less would be checked against git and the registry back to back",
                args.min_interval
            ),
            Some("give --min-interval 1m (the default) or more".to_string()),
        ));
    }
    if s.retry_period.is_zero() {
        return Err(Error::input(
            format!(
                "--leader-elect-retry-period {:?} is zero: candidates would ask for the Lease back to back",
                args.leader_elect_retry_period
            ),
            Some("e.g. 2s (the default)".to_string()),
        ));
    }
    if let Some(name) = &args.cluster_name
        && !crate::rollout::is_label(name)
    {
        return Err(Error::input(
            format!("--cluster-name {name:?} is not a cluster name"),
            Some(
                "give a DNS label: lowercase letters, digits and '-', at most 63, e.g. staging"
                    .to_string(),
            ),
        ));
    }
    if s.renew_deadline >= s.lease_duration || s.retry_period >= s.renew_deadline {
        return Err(Error::input(
            "leader election needs --leader-elect-retry-period < --leader-elect-renew-deadline < --leader-elect-lease-duration",
            Some("e.g. 2s, 10s and 15s (the defaults)".to_string()),
        ));
    }
    Ok(s)
}

/// Runs the controller until SIGTERM (exit 0) or a lost Lease
/// ([`Error::LeaseLost`], exit 8).
pub fn run(args: Args) -> Result<()> {
    if let Some(plural) = &args.print_crd {
        crate::output::print(&crd::crd_yaml(plural)?)?;
        return Ok(());
    }
    let settings = settings(&args)?;
    logs::init(args.log_level);
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::io("starting the async runtime", e))?;
    let result = rt.block_on(serve(args, settings));
    // A publish abandoned at shutdown still runs on the blocking pool;
    // dropping the runtime would wait for it. Exit without it.
    rt.shutdown_background();
    crate::scratch::remove_live();
    result
}

/// The namespace the pod runs in, when in a cluster.
const POD_NAMESPACE_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

fn kube_error(doing: &str, e: impl std::fmt::Display) -> Error {
    Error::input(
        format!("{doing}: {e}"),
        Some(
            "run the controller in a cluster (its ServiceAccount), or give --kubeconfig PATH (or KUBECONFIG)"
                .to_string(),
        ),
    )
}

/// controller-runtime's order: `--kubeconfig`, `KUBECONFIG`, the
/// in-cluster ServiceAccount, `~/.kube/config`.
async fn client_config(args: &Args) -> Result<kube::Config> {
    let opts = KubeConfigOptions::default();
    if let Some(path) = &args.kubeconfig {
        let text = crate::named_file::read(path, "--kubeconfig")?;
        let kc = Kubeconfig::from_yaml(&text)
            .map_err(|e| kube_error(&format!("reading --kubeconfig {}", path.display()), e))?;
        return kube::Config::from_custom_kubeconfig(kc, &opts)
            .await
            .map_err(|e| kube_error(&format!("using --kubeconfig {}", path.display()), e));
    }
    if std::env::var_os("KUBECONFIG").is_some_and(|v| !v.is_empty()) {
        return kube::Config::from_kubeconfig(&opts)
            .await
            .map_err(|e| kube_error("using KUBECONFIG", e));
    }
    match kube::Config::incluster() {
        Ok(c) => Ok(c),
        Err(in_cluster) => kube::Config::from_kubeconfig(&opts).await.map_err(|e| {
            kube_error(
                "no cluster to talk to",
                format!("not in a cluster ({in_cluster}), and ~/.kube/config: {e}"),
            )
        }),
    }
}

/// This replica's name for the Lease: the pod's name and a random suffix.
fn identity() -> String {
    let host = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "settings-image".to_string());
    format!("{host}_{:016x}", fastrand::u64(..))
}

/// Which SettingsImage changes start a reconcile: a new generation (the
/// spec), or Flux's `reconcile.fluxcd.io/requestedAt` annotation; never
/// our own status writes.
fn spec_or_request(si: &SettingsImage) -> Option<u64> {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    si.metadata.generation.hash(&mut h);
    si.annotations()
        .get("reconcile.fluxcd.io/requestedAt")
        .hash(&mut h);
    Some(h.finish())
}

/// Which GitRepository changes matter: the fetched revision, and the spec
/// (URL, reference, Secret).
fn revision_or_spec(repo: &GitRepository) -> Option<u64> {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    repo.metadata.generation.hash(&mut h);
    repo.status
        .as_ref()
        .and_then(|s| s.artifact.as_ref())
        .map(|a| a.revision.as_str())
        .hash(&mut h);
    Some(h.finish())
}

async fn serve(args: Args, settings: Settings) -> Result<()> {
    let (stop_rx, graceful_rx) = on_signals();
    let metrics = Arc::new(metrics::Metrics::new());
    for (addr, what) in [
        (settings.metrics, metrics::Endpoint::Metrics),
        (settings.probes, metrics::Endpoint::Probes),
    ] {
        if let Some(addr) = addr {
            let (bound, serving) = metrics::listen(addr, what, metrics.clone()).await?;
            logs::info(&format!("serving {what:?} on {bound}"));
            tokio::spawn(serving);
        }
    }
    let (client, default_ns) = connect(&args).await?;
    let own = own_namespace(default_ns);
    let policy = reconcile::Policy {
        cross_namespace_refs: args.allow_cross_namespace_refs,
        min_interval: settings.min_interval,
        provider_namespaces: reconcile::ProviderNamespaces::parse(
            args.provider_namespaces.as_deref(),
            &own,
        ),
    };
    logs::info(&format!(
        "spec.provider may use the controller's cloud identity in: {} (--provider-namespaces)",
        policy.provider_namespaces.shown()
    ));
    metrics.set_ready("api", None);
    let mut elector = None;
    if args.leader_elect {
        match campaign(&args, &settings, &client, own, &stop_rx).await {
            Some(e) => elector = Some(e),
            None => return Ok(()),
        }
    }
    metrics.set_leader(true);
    let ctx = Arc::new(reconcile::Ctx::new(
        client.clone(),
        Reporter {
            controller: status::MANAGER.to_string(),
            instance: std::env::var("POD_NAME").ok(),
        },
        metrics.clone(),
        mirrors(&args, &settings)?,
        crate::front::process_env(),
        policy.clone(),
    ));
    let interrupt = ctx.interrupt.clone();
    let rollouts = match &args.cluster_name {
        Some(cluster) => {
            logs::info(&format!(
                "recording rollouts as cluster {cluster} (SettingsRollouts)"
            ));
            let rctx = Arc::new(rollout::Ctx::new(
                client.clone(),
                crate::front::process_env(),
                cluster.clone(),
                policy.provider_namespaces.clone(),
            ));
            futures_util::future::Either::Left(rollout::controller(
                args.namespace.as_deref(),
                client.clone(),
                rctx,
                metrics.clone(),
                stop_rx.clone(),
            ))
        }
        None => {
            logs::info(
                "no --cluster-name: SettingsRollouts are not watched and no rollout is recorded",
            );
            futures_util::future::Either::Right(std::future::ready(()))
        }
    };
    let controller =
        futures_util::future::join(controller(&args, client, ctx, graceful_rx), rollouts);
    logs::info(&format!(
        "watching SettingsImages in {}",
        args.namespace
            .as_deref()
            .map(|n| format!("namespace {n}"))
            .unwrap_or_else(|| "all namespaces".into())
    ));

    let mut stop = stop_rx.clone();
    let grace = settings.grace;
    let abandon = async move {
        let _ = stop.wait_for(|s| *s).await;
        tokio::time::sleep(grace).await;
    };
    let leading = async {
        match elector.as_mut() {
            Some(e) => e.hold().await,
            None => std::future::pending().await,
        }
    };
    let ended = tokio::select! {
        _ = controller => Ended::Finished,
        _ = abandon => Ended::Abandoned,
        _ = leading => Ended::LostLease,
    };
    metrics.set_leader(false);
    match ended {
        Ended::Finished => logs::info("every running publish finished"),
        Ended::Abandoned => {
            interrupt.store(true, Ordering::Relaxed);
            crate::scratch::remove_live();
            logs::warn(&format!(
                "abandoned the publishes still running after {} s; an abandoned push wrote no tag, and the next run publishes again",
                grace.as_secs()
            ));
        }
        Ended::LostLease => {
            // Stop the running downloads; the process exits with this
            // error at once (the runtime is not waited for), so nothing
            // of this replica writes after the renew deadline.
            interrupt.store(true, Ordering::Relaxed);
            return Err(Error::LeaseLost {
                lease: args.leader_election_id,
            });
        }
    }
    if let Some(e) = elector.as_mut() {
        e.release().await;
        logs::info("released the Lease");
    }
    Ok(())
}

/// On SIGTERM (and the other signals `crate::scratch` handles): `true` on
/// the first receiver (stop campaigning, start the grace period), and the
/// second one ends (kube-runtime's graceful shutdown).
fn on_signals() -> (tokio::sync::watch::Receiver<bool>, oneshot::Receiver<()>) {
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let (graceful_tx, graceful_rx) = oneshot::channel::<()>();
    let graceful_tx = std::sync::Mutex::new(Some(graceful_tx));
    crate::scratch::on_signal(move |name| {
        logs::info(&format!(
            "{name}: finishing the running publishes, then exiting (a second signal stops at once)"
        ));
        if let Some(tx) = graceful_tx.lock().ok().and_then(|mut t| t.take()) {
            let _ = tx.send(());
        }
        let _ = stop_tx.send(true);
    });
    (stop_rx, graceful_rx)
}

/// The API client, checked by asking the API server its version, and the
/// kubeconfig's namespace.
async fn connect(args: &Args) -> Result<(Client, String)> {
    let config = client_config(args).await?;
    let default_ns = config.default_namespace.clone();
    let client =
        Client::try_from(config).map_err(|e| kube_error("configuring the API client", e))?;
    let version = client
        .apiserver_version()
        .await
        .map_err(|e| kube_error("asking the API server for its version", e))?;
    logs::info(&format!(
        "connected to Kubernetes {}.{} ({})",
        version.major, version.minor, version.git_version
    ));
    Ok((client, default_ns))
}

/// The controller's own namespace: the pod's, else the kubeconfig's.
fn own_namespace(default_ns: String) -> String {
    std::fs::read_to_string(POD_NAMESPACE_FILE)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or(default_ns)
}

/// Waits to lead (`--leader-elect`); `None` when a signal came first.
async fn campaign(
    args: &Args,
    settings: &Settings,
    client: &Client,
    own: String,
    stop_rx: &tokio::sync::watch::Receiver<bool>,
) -> Option<leader::Elector> {
    let ns = args.leader_election_namespace.clone().unwrap_or(own);
    let cfg = leader::Config {
        name: args.leader_election_id.clone(),
        identity: identity(),
        lease_duration: settings.lease_duration,
        renew_deadline: settings.renew_deadline,
        retry_period: settings.retry_period,
    };
    logs::info(&format!(
        "waiting to lead: Lease {ns}/{} as {}",
        cfg.name, cfg.identity
    ));
    let mut e = leader::Elector::new(Api::namespaced(client.clone(), &ns), cfg);
    if !e.acquire(&mut stop_rx.clone()).await {
        logs::info("stopped before leading; exiting");
        return None;
    }
    logs::info(&format!("leading: Lease {ns}/{}", args.leader_election_id));
    Some(e)
}

/// The git mirrors under `--cache-dir`, bounded by the `--cache-*` and
/// `--fetch-*` flags.
fn mirrors(args: &Args, settings: &Settings) -> Result<crate::history::mirror::Mirrors> {
    crate::history::mirror::Mirrors::new(
        &settings.cache_dir,
        crate::history::mirror::Limits {
            max_bytes: args.cache_max_bytes,
            max_fetch_bytes: args.fetch_max_bytes,
            max_objects: args.fetch_max_objects,
            max_object_bytes: args.fetch_max_object_bytes,
            max_ref_bytes: args.fetch_max_ref_bytes,
            max_refs: args.fetch_max_refs,
            ..Default::default()
        },
    )
}

/// The controller: SettingsImages and the GitRepositories they follow
/// watched, each change reconciled, until `graceful` ends and the running
/// reconciles finish.
fn controller(
    args: &Args,
    client: Client,
    ctx: Arc<reconcile::Ctx>,
    graceful: oneshot::Receiver<()>,
) -> impl std::future::Future<Output = ()> {
    let metrics = ctx.metrics.clone();
    let (sis, repos): (Api<SettingsImage>, Api<GitRepository>) = match &args.namespace {
        Some(ns) => (
            Api::namespaced(client.clone(), ns),
            Api::namespaced(client, ns),
        ),
        None => (Api::all(client.clone()), Api::all(client)),
    };
    // Each watch reports and paces its own failures (`watch::resilient`);
    // the controller gets only what they saw. Its own trigger backoff
    // (kube-runtime's 0.8 s doubling to 30 s over both watches together)
    // would stall every trigger for a failure of either, and after an API
    // server restart add tens of seconds.
    let (reader, writer) = reflector::store::<SettingsImage>();
    let si_stream = watch::resilient(
        watcher(sis, watcher::Config::default()),
        watch::SETTINGS_IMAGES,
        metrics.clone(),
    )
    .reflect(writer)
    .touched_objects()
    .predicate_filter(spec_or_request, Default::default())
    .filter(|r| std::future::ready(r.is_ok()));
    let repo_stream = watch::resilient(
        watcher(repos, watcher::Config::default()),
        watch::GIT_REPOSITORIES,
        metrics,
    )
    .touched_objects()
    .predicate_filter(revision_or_spec, Default::default())
    .filter(|r| std::future::ready(r.is_ok()));
    let store = reader.clone();
    let followers = move |repo: GitRepository| {
        let ns = repo.namespace().unwrap_or_default();
        let name = repo.name_any();
        store
            .state()
            .into_iter()
            .filter(|si| {
                let r = &si.spec.source_ref;
                let si_ns = si.namespace().unwrap_or_default();
                r.name == name && r.namespace.as_deref().unwrap_or(&si_ns) == ns
            })
            .map(|si| ObjectRef::from_obj(&*si))
            .collect::<Vec<_>>()
    };
    Controller::for_stream(si_stream, reader)
        .watches_stream(repo_stream, followers)
        .with_config(ControllerConfig::default().concurrency(args.concurrency))
        .graceful_shutdown_on(async move {
            let _ = graceful.await;
        })
        .run(reconcile::reconcile, reconcile::error_policy, ctx)
        .for_each(|r| async move {
            match r {
                // A failed list or watch: `watch::resilient` said so once,
                // and /readyz says so until it is listed again.
                Err(kube::runtime::controller::Error::QueueError(e)) => {
                    logs::write(
                        logs::Level::Debug,
                        &format!("controller: {e}"),
                        Default::default(),
                    );
                }
                Err(e) => logs::warn(&format!("controller: {e}")),
                Ok(_) => {}
            }
        })
}

enum Ended {
    Finished,
    Abandoned,
    LostLease,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    #[derive(clap::Parser)]
    struct Command {
        #[command(flatten)]
        args: Args,
    }

    /// A lost Lease is neither bad input (2) nor a failure of the
    /// registry: exit 8, with the words and hint the log has always had.
    #[test]
    fn a_lost_lease_exits_8_naming_the_lease() {
        let e = Error::LeaseLost {
            lease: "settings-image-controller".into(),
        };
        assert_eq!(e.exit_code(), 8);
        assert_eq!(
            e.to_string(),
            "lost the leader election Lease settings-image-controller (not renewed within the \
             renew deadline); exiting so that one replica publishes"
        );
        assert_eq!(
            e.hint().as_deref(),
            Some("the API server was unreachable or slow; the pod restarts and campaigns again")
        );
    }

    /// Run without flags (a laptop), nothing listens beyond loopback; the
    /// flags the Deployment gives listen on every interface.
    #[test]
    fn the_default_addresses_are_loopback_only() {
        let c = Command::try_parse_from(["controller"]).unwrap();
        let s = settings(&c.args).unwrap();
        for addr in [s.metrics, s.probes] {
            assert!(addr.is_some_and(|a| a.ip().is_loopback()), "{addr:?}");
        }
        let c = Command::try_parse_from([
            "controller",
            "--metrics-bind-address=:8080",
            "--health-probe-bind-address=:8081",
        ])
        .unwrap();
        let s = settings(&c.args).unwrap();
        assert!(
            s.metrics
                .is_some_and(|a| a.ip().is_unspecified() && a.port() == 8080)
        );
        assert!(
            s.probes
                .is_some_and(|a| a.ip().is_unspecified() && a.port() == 8081)
        );
    }
}
