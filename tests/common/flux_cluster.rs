//! Flux's own controllers (source-controller, image-reflector-controller,
//! image-automation-controller, kustomize-controller) on a whole
//! Kubernetes v1.36.3 node (`scripts/kube.sh up --node`: control plane,
//! containerd, kubelet, and a registry the node pulls from), started by
//! `scripts/flux.sh up --node` once per test run (`service.rs`) and stopped
//! by `scripts/flux.sh down` when the run ends. The test asks Flux, through
//! the objects' status and the commits Flux pushes, what Flux did, and the
//! kubelet, through the pods' own output, what it mounted; nothing here
//! decides either.
//!
//! Reconciles are requested the way `flux reconcile` requests them: the
//! `reconcile.fluxcd.io/requestedAt` annotation, then a wait until the
//! object's `status.lastHandledReconcileAt` names that request.

use std::fs;
use std::ops::Deref;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde_json::Value;

use super::kube::Kube;
use super::registry::Registry;
use super::service::{self, Service};

/// The running controllers and their cluster: a [`Kube`] (its API server,
/// kubectl and the waits), with what Flux adds.
pub struct FluxCluster {
    /// The cluster's API server.
    pub kube: Kube,
    /// The folder `flux.sh up` was given (state, storage, logs).
    pub dir: PathBuf,
    /// What `flux.sh up` printed (its own variables and `kube.sh up`'s).
    service: Service,
}

impl Deref for FluxCluster {
    type Target = Kube;

    fn deref(&self) -> &Kube {
        &self.kube
    }
}

/// The four controllers, as `flux.sh` names them.
pub const CONTROLLERS: [&str; 4] = [
    "source-controller",
    "image-reflector-controller",
    "image-automation-controller",
    "kustomize-controller",
];

/// The controllers and node of this test run, started on first use.
pub fn flux_cluster() -> &'static FluxCluster {
    static FLUX: OnceLock<FluxCluster> = OnceLock::new();
    FLUX.get_or_init(|| {
        let service = service::shared("flux", "scripts/flux.sh", &["--node"]);
        FluxCluster {
            kube: Kube::from(&service),
            dir: PathBuf::from(service.var("FLUX_DIR")),
            service,
        }
    })
}

impl FluxCluster {
    /// A variable `flux.sh up` printed.
    pub fn var(&self, name: &str) -> &str {
        self.service.var(name)
    }

    /// A new namespace `PREFIX-N` (namespaces never finish deleting here).
    pub fn fresh_namespace(&self, prefix: &str) -> String {
        static N: AtomicU32 = AtomicU32::new(0);
        let ns = format!(
            "{prefix}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        self.kubectl_ok(&["create", "namespace", &ns]);
        ns
    }

    /// Creates the Secret `registry-ca` in `ns` holding `registry`'s CA as
    /// `ca.crt`: what an ImageRepository's `certSecretRef` names.
    pub fn registry_ca_secret(&self, ns: &str, registry: &Registry) {
        let path = registry.ca.as_ref().expect("a TLS registry");
        let ca = fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("reading the CA {}: {e}", path.display()));
        self.kubectl_ok(&[
            "create",
            "secret",
            "generic",
            "registry-ca",
            "-n",
            ns,
            &format!("--from-literal=ca.crt={ca}"),
        ]);
    }

    /// What ImagePolicy `name` in `ns` serves once Flux has scanned the
    /// registry's `tags` as they are now: `status.latestRef`'s (name, tag,
    /// digest). A new ImageRepository can answer its first requested
    /// reconcile before its first scan (`observedGeneration: -1`, no scan
    /// result): it is asked again until a scan has run, ten times at most;
    /// then the scan must count the registry's tags.
    pub fn served(&self, ns: &str, name: &str, tags: &[String]) -> (String, String, String) {
        let mut repo = Value::Null;
        for _ in 0..10 {
            repo = self.reconcile(ns, &format!("imagerepository/{name}"));
            if repo["status"]["lastScanResult"]["tagCount"].is_u64() {
                break;
            }
        }
        assert_eq!(
            repo["status"]["lastScanResult"]["tagCount"].as_u64(),
            Some(tags.len() as u64),
            "the scan Flux made does not count the registry's tags {tags:?}: {:#}",
            repo["status"]
        );
        let policy = self.reconcile(ns, &format!("imagepolicy/{name}"));
        let latest = &policy["status"]["latestRef"];
        let s = |k: &str| {
            latest[k]
                .as_str()
                .unwrap_or_else(|| panic!("no latestRef.{k}: {:#}", policy["status"]))
                .to_string()
        };
        (s("name"), s("tag"), s("digest"))
    }

    /// Asks Flux to reconcile `what` now (`flux reconcile`'s annotation)
    /// and waits until its status says it handled that request; the object
    /// then.
    pub fn reconcile(&self, ns: &str, what: &str) -> Value {
        static N: AtomicU32 = AtomicU32::new(0);
        let token = format!(
            "{}-{}-{}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("a clock after 1970")
                .as_nanos(),
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        self.kubectl_ok(&[
            "annotate",
            "--overwrite",
            what,
            "-n",
            ns,
            &format!("reconcile.fluxcd.io/requestedAt={token}"),
        ]);
        self.wait(
            ns,
            what,
            &format!("handled the reconcile request {token}"),
            |v| v["status"]["lastHandledReconcileAt"] == token.as_str(),
        )
    }

    /// Polls `what` in `ns` until `pred` holds ([`Kube::wait`]; a failure
    /// shows the end of each controller's log about `ns`).
    pub fn wait(&self, ns: &str, what: &str, desc: &str, pred: impl Fn(&Value) -> bool) -> Value {
        self.kube
            .wait(ns, what, desc, Duration::from_millis(200), pred, || {
                self.log_tails(ns)
            })
    }

    /// Each controller's log lines that name `ns`, the last 15 of each.
    pub fn log_tails(&self, ns: &str) -> String {
        let mut s = String::new();
        for c in CONTROLLERS {
            let text = fs::read_to_string(self.dir.join(format!("{c}.log"))).unwrap_or_default();
            let lines: Vec<&str> = text.lines().filter(|l| l.contains(ns)).collect();
            s.push_str(&format!("--- {c} ({} lines about {ns}):\n", lines.len()));
            for l in &lines[lines.len().saturating_sub(15)..] {
                s.push_str(l);
                s.push('\n');
            }
        }
        s
    }
}
