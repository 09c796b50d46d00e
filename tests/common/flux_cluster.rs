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
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::service::{self, Service};

/// The running controllers and their cluster.
pub struct FluxCluster {
    /// The folder `flux.sh up` was given (state, storage, logs).
    pub dir: PathBuf,
    /// The admin kubeconfig of the API server.
    pub kubeconfig: PathBuf,
    /// What `flux.sh up` printed (its own variables and `kube.sh up`'s).
    service: Service,
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
            dir: PathBuf::from(service.var("FLUX_DIR")),
            kubeconfig: PathBuf::from(service.var("KUBECONFIG")),
            service,
        }
    })
}

impl FluxCluster {
    /// A variable `flux.sh up` printed.
    pub fn var(&self, name: &str) -> &str {
        self.service.var(name)
    }

    /// `kubectl` (the cluster's own build) against the API server the
    /// controllers use, as the admin.
    pub fn kubectl(&self) -> Command {
        let mut cmd = Command::new(self.var("KUBECTL"));
        cmd.env("KUBECONFIG", &self.kubeconfig)
            .env_remove("KUBERNETES_SERVICE_HOST");
        cmd
    }

    /// `kubectl ARGS`; panics with kubectl's words unless it succeeds;
    /// its stdout.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let out = self.kubectl().args(args).output().expect("running kubectl");
        assert!(
            out.status.success(),
            "kubectl {args:?} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `kubectl apply -f -` of `yaml`.
    pub fn apply(&self, yaml: &str) {
        use std::io::Write;
        let mut child = self
            .kubectl()
            .args(["apply", "-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting kubectl");
        child
            .stdin
            .take()
            .expect("kubectl's stdin")
            .write_all(yaml.as_bytes())
            .expect("writing to kubectl");
        let out = child.wait_with_output().expect("waiting for kubectl");
        assert!(
            out.status.success(),
            "kubectl apply failed:\n{}\n{yaml}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A new namespace `PREFIX-N` (namespaces never finish deleting here).
    pub fn namespace(&self, prefix: &str) -> String {
        static N: AtomicU32 = AtomicU32::new(0);
        let ns = format!(
            "{prefix}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        self.kubectl_ok(&["create", "namespace", &ns]);
        ns
    }

    /// The object `what` (`kind/name`) in `ns`, as JSON.
    pub fn get(&self, ns: &str, what: &str) -> Value {
        let out = self.kubectl_ok(&["get", what, "-n", ns, "-o", "json"]);
        serde_json::from_str(&out).expect("kubectl's JSON")
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

    /// Polls `what` in `ns` until `pred` holds (the deadline only keeps a
    /// broken run from hanging: it fails, showing the object and the end
    /// of each controller's log).
    pub fn wait(&self, ns: &str, what: &str, desc: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(240);
        loop {
            let out = self
                .kubectl()
                .args(["get", what, "-n", ns, "-o", "json"])
                .output()
                .expect("running kubectl");
            let v: Value = if out.status.success() {
                serde_json::from_slice(&out.stdout).expect("kubectl's JSON")
            } else {
                Value::Null
            };
            if pred(&v) {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "{ns}/{what} never {desc}:\n{:#}\n{}",
                v["status"],
                self.log_tails(ns)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
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

/// The condition `type_` of an object's status: (status, reason, message).
pub fn condition(v: &Value, type_: &str) -> Option<(String, String, String)> {
    v["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .map(|c| {
            (
                c["status"].as_str().unwrap_or_default().to_string(),
                c["reason"].as_str().unwrap_or_default().to_string(),
                c["message"].as_str().unwrap_or_default().to_string(),
            )
        })
}
