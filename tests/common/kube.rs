//! A real Kubernetes API server for the tests: etcd (Debian's `etcd-server`)
//! and kube-apiserver v1.36.3, built from the project's own
//! `tests/go/kube` and started by `scripts/kube.sh up` once per test run
//! (under cargo-nextest, shared by its processes: `service.rs`), on free
//! loopback ports, and stopped by `scripts/kube.sh down` when the run ends.
//! No kubelet and no controller-manager run beside it. The node cluster of
//! `flux_cluster.rs` is a [`Kube`] too.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;

use super::service::{self, Service};
use super::{eventually, output_with_stdin, repo, run_ok};

/// A running API server: its kubeconfig (admin, `system:masters`) and URL.
pub struct Kube {
    /// The admin kubeconfig `kube.sh up` wrote.
    pub kubeconfig: PathBuf,
    /// `https://127.0.0.1:PORT`.
    pub url: String,
    /// `kube.sh up`'s state folder (certificates, logs, PID files).
    pub state: PathBuf,
    /// The kubectl of the same build.
    kubectl: PathBuf,
}

impl From<&Service> for Kube {
    fn from(s: &Service) -> Kube {
        Kube {
            kubeconfig: PathBuf::from(s.var("KUBECONFIG_OUT")),
            url: s.var("APISERVER_URL").to_string(),
            state: PathBuf::from(s.var("KUBE_STATE_DIR")),
            kubectl: PathBuf::from(s.var("KUBECTL")),
        }
    }
}

/// The API server of this test run, started on first use.
pub fn kube() -> &'static Kube {
    static KUBE: OnceLock<Kube> = OnceLock::new();
    KUBE.get_or_init(|| Kube::from(&service::shared("kube", "scripts/kube.sh", &[])))
}

/// An API server of this test process alone (not shared with the run's
/// other tests), for a test that stops and restarts it; stopped when the
/// process exits.
pub fn private() -> Kube {
    Kube::from(&service::private("kube", "scripts/kube.sh", &[]))
}

impl Kube {
    /// `kubectl` against this API server as the admin.
    pub fn kubectl(&self) -> Command {
        let mut cmd = Command::new(&self.kubectl);
        cmd.env("KUBECONFIG", &self.kubeconfig)
            .env_remove("KUBERNETES_SERVICE_HOST");
        cmd
    }

    /// `kubectl ARGS` with `stdin`, whatever the result.
    pub fn kubectl_in(&self, args: &[&str], stdin: &str) -> Output {
        output_with_stdin(self.kubectl().args(args), stdin.as_bytes())
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

    /// The object `what` (`kind/name`, or a kind for a list) in `ns`, as
    /// JSON.
    pub fn get(&self, ns: &str, what: &str) -> Value {
        let out = self.kubectl_ok(&["get", what, "-n", ns, "-o", "json"]);
        serde_json::from_str(&out).expect("kubectl's JSON")
    }

    /// Merges `status` (`{"status": ...}`) into the status of `kind/name`
    /// in `ns` (`kubectl patch --subresource=status`), as the controller
    /// that owns it would write it.
    pub fn patch_status(&self, ns: &str, kind: &str, name: &str, status: &str) {
        run_ok(self.kubectl().args([
            "patch",
            kind,
            name,
            "-n",
            ns,
            "--subresource=status",
            "--type=merge",
            "-p",
            status,
        ]));
    }

    /// Polls `what` in `ns` (JSON; `null` while it does not exist) every
    /// `every` until `pred` holds; the object then. The deadline only keeps
    /// a broken run from hanging: it fails, showing the object's status
    /// and `more()` (the logs that say why).
    pub fn wait(
        &self,
        ns: &str,
        what: &str,
        desc: &str,
        every: Duration,
        pred: impl Fn(&Value) -> bool,
        more: impl Fn() -> String,
    ) -> Value {
        eventually(Duration::from_secs(240), every, || {
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
                Ok(v)
            } else {
                Err(format!(
                    "{ns}/{what} never {desc}:\n{:#}\n{}",
                    v["status"],
                    more()
                ))
            }
        })
    }

    /// `kubectl apply -f -` of `yaml`; panics unless the server takes it.
    pub fn apply(&self, yaml: &str) -> String {
        let out = self.kubectl_in(&["apply", "-f", "-"], yaml);
        assert!(
            out.status.success(),
            "kubectl apply failed:\n{}\n{yaml}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `kubectl apply --dry-run=server -f -` of `yaml`: the API server's
    /// schema, CEL and admission checks, nothing stored.
    pub fn dry_run(&self, yaml: &str) -> Output {
        self.kubectl_in(&["apply", "--dry-run=server", "-f", "-"], yaml)
    }

    /// [`Kube::dry_run`], which must pass; `what` names the objects in the
    /// failure.
    pub fn dry_run_ok(&self, yaml: &str, what: &str) {
        let out = self.dry_run(yaml);
        assert!(
            out.status.success(),
            "{what}: kubectl apply --dry-run=server refused it:\n{}\n{yaml}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Applies CRD files and waits until each is Established.
    pub fn install_crds(&self, files: &[&Path]) {
        for f in files {
            run_ok(self.kubectl().args(["apply", "--server-side", "-f"]).arg(f));
        }
        for f in files {
            run_ok(
                self.kubectl()
                    .args(["wait", "--for=condition=Established", "--timeout=60s", "-f"])
                    .arg(f),
            );
        }
    }

    /// Kills kube-apiserver (a crash: etcd keeps running, with every
    /// object; a SIGTERM would wait a minute for its graceful shutdown),
    /// and returns its command line for [`Kube::start_apiserver`].
    pub fn stop_apiserver(&self) -> Vec<String> {
        let pid_file = self.state.join("kube-apiserver.pid");
        let pid = fs::read_to_string(&pid_file).expect("kube-apiserver.pid");
        let pid = pid.trim();
        let cmdline = fs::read(format!("/proc/{pid}/cmdline")).expect("the apiserver's cmdline");
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        run_ok(Command::new("kill").args(["-KILL", pid]));
        // Gone means its port is free for the next one.
        eventually(Duration::from_secs(60), Duration::from_millis(50), || {
            (!Path::new(&format!("/proc/{pid}")).exists())
                .then_some(())
                .ok_or_else(|| format!("kube-apiserver {pid} still runs after SIGKILL"))
        });
        args
    }

    /// Starts kube-apiserver again with `args` (what
    /// [`Kube::stop_apiserver`] returned) and waits for its /readyz.
    pub fn start_apiserver(&self, args: &[String]) {
        // Detached as kube.sh starts it (bash prints its pid and exits).
        let out = Command::new("bash")
            .args([
                "-c",
                "setsid \"$@\" >>\"$LOG\" 2>&1 </dev/null & echo $!",
                "bash",
            ])
            .args(args)
            .env("LOG", self.state.join("kube-apiserver.log"))
            .stdin(Stdio::null())
            .output()
            .expect("starting kube-apiserver again");
        assert!(out.status.success(), "starting kube-apiserver again failed");
        fs::write(self.state.join("kube-apiserver.pid"), &out.stdout)
            .expect("writing kube-apiserver.pid");
        eventually(Duration::from_secs(120), Duration::from_millis(100), || {
            let ready = self
                .kubectl()
                .args(["get", "--raw", "/readyz"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            ready.then_some(()).ok_or_else(|| {
                format!(
                    "kube-apiserver not ready again (log: {})",
                    self.state.join("kube-apiserver.log").display()
                )
            })
        });
    }

    /// Flux's CRDs (image automation and GitRepository) from the fixtures,
    /// installed once per test process.
    pub fn install_flux_crds(&self) {
        static DONE: OnceLock<()> = OnceLock::new();
        DONE.get_or_init(|| {
            let dir = flux_crd_dir();
            let mut files: Vec<PathBuf> = fs::read_dir(&dir)
                .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
                .map(|e| e.expect("a directory entry").path())
                .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
                .collect();
            files.sort();
            assert!(
                files
                    .iter()
                    .any(|f| f.ends_with("source.toolkit.fluxcd.io_gitrepositories.yaml")),
                "{} lacks the GitRepository CRD",
                dir.display()
            );
            let refs: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
            self.install_crds(&refs);
        });
    }

    /// Creates namespace `name` (if missing). Namespaces never finish
    /// deleting here (no controller-manager), so tests use fresh names.
    pub fn namespace(&self, name: &str) {
        self.apply(&format!(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n"
        ));
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

/// Flux's CRDs kept in the repository (`tests/fixtures/flux-crds`).
pub fn flux_crd_dir() -> PathBuf {
    repo().join("tests/fixtures/flux-crds")
}
