//! `settings-image controller` as the tests run it: a process against an
//! API server (the plain one of `kube.rs` or the node of
//! `flux_cluster.rs`), as the ServiceAccount `config/` installs or as the
//! admin, with its log in a file and its HTTP endpoints on loopback.
//! What the tests assert stays in the tests; this is how they start, read
//! and stop it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use super::kube::Kube;
use super::{bin, eventually, repo, require, run_ok, stdout_of};

/// The namespace `config/` installs into.
pub const SYSTEM: &str = "settings-image-system";

/// `kubectl apply --server-side -k config/` (server-side, with
/// `--force-conflicts`: each test is a process of its own and several may
/// install at once; a client-side apply races into AlreadyExists).
pub fn apply_config(k: &Kube) {
    let out = k
        .kubectl()
        .args(["apply", "--server-side", "--force-conflicts", "-k"])
        .arg(repo().join("config"))
        .output()
        .unwrap_or_else(|e| panic!("starting kubectl: {e}"));
    assert!(
        out.status.success(),
        "kubectl apply -k config/ failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Binds the ClusterRole of `config/` to the controller's ServiceAccount
/// in `ns`, as docs/controller.md says to for each watched namespace.
pub fn bind_controller(k: &Kube, ns: &str) {
    k.apply(&format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: settings-image-controller\n  namespace: {ns}\n\
         roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: settings-image-controller\n\
         subjects:\n- kind: ServiceAccount\n  name: settings-image-controller\n  namespace: {SYSTEM}\n"
    ));
}

/// A TokenRequest token of the controller's ServiceAccount, valid for
/// `duration` (`1h`).
pub fn service_account_token(k: &Kube, duration: &str) -> String {
    stdout_of(k.kubectl().args([
        "create",
        "token",
        "settings-image-controller",
        "-n",
        SYSTEM,
        &format!("--duration={duration}"),
    ]))
    .trim()
    .to_string()
}

/// Writes `DIR/sa.kubeconfig`: `server` (the API server's URL, or a relay
/// in front of it) with the CA of `k`'s admin kubeconfig, and `token`;
/// its path.
pub fn service_account_kubeconfig(k: &Kube, dir: &Path, server: &str, token: &str) -> PathBuf {
    let admin = std::fs::read_to_string(&k.kubeconfig)
        .unwrap_or_else(|e| panic!("reading {}: {e}", k.kubeconfig.display()));
    let ca = admin
        .lines()
        .find_map(|l| l.trim().strip_prefix("certificate-authority-data: "))
        .expect("the admin kubeconfig's CA");
    let path = dir.join("sa.kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\n\
             users:\n- name: sa\n  user:\n    token: {token}\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: sa\n    namespace: {SYSTEM}\n\
             current-context: c\n"
        ),
    )
    .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    path
}

/// `settings-image controller --namespace NS` serving metrics and probes
/// at the given `ADDR:PORT`s, its cache in `cache`, with no cluster from
/// the environment: the caller names it (`--kubeconfig` or `KUBECONFIG`)
/// and adds its flags.
pub fn controller_command(ns: &str, metrics: &str, probes: &str, cache: &Path) -> Command {
    let mut cmd = Command::new(bin());
    cmd.arg("controller")
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .args(["--namespace", ns])
        .arg(format!("--metrics-bind-address={metrics}"))
        .arg(format!("--health-probe-bind-address={probes}"))
        .arg("--cache-dir")
        .arg(cache);
    cmd
}

/// `GET http://127.0.0.1:PORT/PATH` with curl: (status, body); status 0
/// when nothing answers.
pub fn http_get(port: u16, path: &str) -> (u16, String) {
    let out = Command::new(require("curl"))
        .args(["-s", "-o", "-", "-w", "\n%{http_code}"])
        .arg(format!("http://127.0.0.1:{port}{path}"))
        .output()
        .unwrap_or_else(|e| panic!("starting curl: {e}"));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

/// A started process whose stderr goes to a log file; killed on drop.
pub struct Process {
    child: Option<Child>,
    log: PathBuf,
}

impl Process {
    /// Starts `cmd` with no stdin and no stdout, its stderr to `log`.
    pub fn spawn(cmd: &mut Command, log: PathBuf) -> Process {
        let stderr = std::fs::File::create(&log)
            .unwrap_or_else(|e| panic!("creating {}: {e}", log.display()));
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {cmd:?}: {e}"));
        Process {
            child: Some(child),
            log,
        }
    }

    /// What it has written to stderr so far.
    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.running().id()
    }

    fn running(&self) -> &Child {
        self.child
            .as_ref()
            .expect("the process was already waited for")
    }

    /// Its exit status once it has exited, `None` while it runs.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        let child = self
            .child
            .as_mut()
            .expect("the process was already waited for");
        child
            .try_wait()
            .unwrap_or_else(|e| panic!("waiting for {}: {e}", child.id()))
    }

    /// Waits for it to exit, however long; its exit status.
    pub fn wait_exit(&mut self) -> ExitStatus {
        let mut child = self
            .child
            .take()
            .expect("the process was already waited for");
        child
            .wait()
            .unwrap_or_else(|e| panic!("waiting for {}: {e}", child.id()))
    }

    /// Sends SIGTERM and waits for the exit code (a process still there
    /// after two minutes is a failure, not a hang).
    pub fn terminate(&mut self) -> i32 {
        run_ok(Command::new("kill").args(["-TERM", &self.pid().to_string()]));
        let status = eventually(Duration::from_secs(120), Duration::from_millis(50), || {
            self.exited()
                .ok_or_else(|| format!("still running after SIGTERM:\n{}", self.logs()))
        });
        self.child = None;
        status.code().unwrap_or(-1)
    }

    /// Polls `GET 127.0.0.1:PORT/PATH` every `every` until it answers 200
    /// (a process that exits first fails the test with its log).
    pub fn wait_serving(&mut self, port: u16, path: &str, every: Duration) {
        eventually(Duration::from_secs(120), every, || {
            let (code, body) = http_get(port, path);
            if code == 200 {
                return Ok(());
            }
            if let Some(status) = self.exited() {
                panic!("the process exited ({status}):\n{}", self.logs());
            }
            Err(format!(
                "{path} never 200 ({code} {body}):\n{}",
                self.logs()
            ))
        });
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
