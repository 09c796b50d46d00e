//! A real Kubernetes API server for the tests: etcd (Debian's `etcd-server`)
//! and kube-apiserver v1.32 started by `shared/kube/start.sh`, once per test
//! binary (once per run under cargo-nextest), on free loopback ports, and
//! stopped when the test binary (or nextest) exits.
//!
//! The workplace keeps the control plane beside the repository
//! (`../shared/kube`); `SETTINGS_IMAGE_KUBE_DIR` names another copy. A
//! missing one is a failure with the fix, never a skip.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use super::{repo, require, run_ok};

/// A running API server: its kubeconfig (admin, `system:masters`) and URL.
pub struct Kube {
    /// The admin kubeconfig start.sh wrote.
    pub kubeconfig: PathBuf,
    /// `https://127.0.0.1:PORT`.
    pub url: String,
    /// start.sh's state directory (certificates, logs).
    pub state: PathBuf,
}

/// Where start.sh and stop.sh live.
pub fn kube_dir() -> PathBuf {
    let candidates: Vec<PathBuf> = std::env::var_os("SETTINGS_IMAGE_KUBE_DIR")
        .map(PathBuf::from)
        .into_iter()
        .chain([
            repo().join("../shared/kube"),
            PathBuf::from("/work/shared/kube"),
        ])
        .collect();
    candidates
        .iter()
        .find(|d| d.join("start.sh").is_file())
        .cloned()
        .unwrap_or_else(|| {
            panic!(
                "the Kubernetes control plane for the tests (start.sh) is not in any of {candidates:?}: \
                 set SETTINGS_IMAGE_KUBE_DIR to the folder holding start.sh, stop.sh and kube-apiserver.xz"
            )
        })
}

/// The API server of this test binary, started on first use. Under
/// cargo-nextest (scripts/test.sh), which runs each test in a process of its
/// own, the processes of one run share one server instead: the first starts
/// it, the others find it by the run's `NEXTEST_RUN_ID`, and it stops when
/// nextest exits.
pub fn kube() -> &'static Kube {
    static KUBE: OnceLock<Kube> = OnceLock::new();
    KUBE.get_or_init(|| match std::env::var("NEXTEST_RUN_ID") {
        Ok(run) if !run.is_empty() => shared(&run),
        _ => {
            let state = std::env::temp_dir().join(format!(
                "kube-env.si-{}-{}",
                std::process::id(),
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.subsec_nanos())
                    .unwrap_or(0)
            ));
            start(state, std::process::id())
        }
    })
}

/// The server of nextest run `run`: started by the first test process that
/// asks (under a file lock), found by the others.
fn shared(run: &str) -> Kube {
    let dir = std::env::temp_dir().join(format!("kube-env.si-nextest-{run}"));
    fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    let lock = fs::File::create(dir.join("lock")).expect("creating the lock file");
    lock.lock().expect("locking the shared API server");
    let saved = dir.join("kube.env");
    if let Ok(text) = fs::read_to_string(&saved) {
        let mut lines = text.lines().map(String::from);
        let mut next = || lines.next().expect("kube.env holds three lines");
        return Kube {
            kubeconfig: PathBuf::from(next()),
            url: next(),
            state: PathBuf::from(next()),
        };
    }
    // nextest spawns every test process itself: the server lives as long
    // as it does.
    let kube = start(dir.join("state"), std::os::unix::process::parent_id());
    fs::write(
        &saved,
        format!(
            "{}\n{}\n{}\n",
            kube.kubeconfig.display(),
            kube.url,
            kube.state.display()
        ),
    )
    .expect("writing kube.env");
    kube
}

/// An API server of this test process alone (not shared with the run's
/// other tests), for a test that stops and restarts it; stopped when the
/// process exits.
pub fn private() -> Kube {
    let state = std::env::temp_dir().join(format!(
        "kube-env.si-private-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0)
    ));
    start(state, std::process::id())
}

/// Starts a server with its state in `state`, stopped once process `owner`
/// is gone.
fn start(state: PathBuf, owner: u32) -> Kube {
    require("etcd");
    require("kubectl");
    require("openssl");
    let dir = kube_dir();
    let out = Command::new("bash")
        .arg(dir.join("start.sh"))
        .env("KUBE_STATE_DIR", &state)
        .env("KUBECONFIG_OUT", state.join("kubeconfig"))
        .stdin(Stdio::null())
        .output()
        .expect("running start.sh");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "start.sh failed ({}):\n{text}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let value = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| panic!("start.sh printed no {key}: {text}"))
            .to_string()
    };
    let kube = Kube {
        kubeconfig: PathBuf::from(value("KUBECONFIG_OUT")),
        url: value("APISERVER_URL"),
        state: PathBuf::from(value("KUBE_STATE_DIR")),
    };
    // The harness has no hook after the last test: a watchdog outside the
    // process group stops the control plane once its owner is gone.
    let watchdog = format!(
        "while kill -0 {pid} 2>/dev/null; do sleep 1; done; bash '{stop}' '{state}' >/dev/null 2>&1",
        pid = owner,
        stop = dir.join("stop.sh").display(),
        state = kube.state.display(),
    );
    // `setsid -f` forks the watchdog off and returns at once.
    let started = Command::new("setsid")
        .args(["-f", "bash", "-c", &watchdog])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("starting the control plane's watchdog");
    assert!(started.success(), "setsid -f failed: {started}");
    kube
}

impl Kube {
    /// `kubectl` against this API server as the admin.
    pub fn kubectl(&self) -> Command {
        let mut cmd = Command::new(require("kubectl"));
        cmd.env("KUBECONFIG", &self.kubeconfig)
            .env_remove("KUBERNETES_SERVICE_HOST");
        cmd
    }

    /// `kubectl ARGS` with `stdin`, whatever the result.
    pub fn kubectl_in(&self, args: &[&str], stdin: &str) -> Output {
        use std::io::Write;
        let mut child = self
            .kubectl()
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting kubectl");
        child
            .stdin
            .take()
            .expect("kubectl's stdin")
            .write_all(stdin.as_bytes())
            .expect("writing to kubectl");
        child.wait_with_output().expect("waiting for kubectl")
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
        while Path::new(&format!("/proc/{pid}")).exists() {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        args
    }

    /// Starts kube-apiserver again with `args` (what
    /// [`Kube::stop_apiserver`] returned) and waits for its /readyz.
    pub fn start_apiserver(&self, args: &[String]) {
        // Detached as start.sh starts it (bash prints its pid and exits).
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
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while !self
            .kubectl()
            .args(["get", "--raw", "/readyz"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
        {
            assert!(
                std::time::Instant::now() < deadline,
                "kube-apiserver not ready again after two minutes (log: {})",
                self.state.join("kube-apiserver.log").display()
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }

    /// Flux's CRDs (image automation and GitRepository) from the fixtures,
    /// installed once per test binary.
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

/// Flux's CRDs kept in the repository (`tests/fixtures/flux-crds`).
pub fn flux_crd_dir() -> PathBuf {
    repo().join("tests/fixtures/flux-crds")
}
