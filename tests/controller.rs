//! `settings-image controller` against real things: the kube-apiserver of
//! `scripts/kube.sh` (one per test run), Flux's GitRepository CRD, a real
//! distribution registry, and a real smart-HTTP git server (`git
//! http-backend`) for the GitRepository's `spec.url`. No source-controller
//! runs here: the tests write `status.artifact` as it does (`kubectl patch
//! --subresource=status`, revision `<branch>@sha1:<commit>`). No kubelet
//! either: the controller runs as a process with `--kubeconfig`, as its own
//! ServiceAccount (a token of the ServiceAccount `config/` installs), so
//! every test also proves the RBAC of `config/` is enough.
//!
//! The oracles: git (the CLI) for the commit and its tag, `git archive`
//! against the pushed image as skopeo and umoci read it for the content,
//! `settings-image build` in a `git clone` of the same URL for the digest
//! (the controller and the CLI agree), the registry's own API (curl) for
//! tags, kubectl for status and Events, Python's `prometheus_client` parser
//! for the metrics.

use crate::common;
#[path = "controller/rollout.rs"]
mod rollout;
use crate::support_login;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use common::cmd::TestCommand;
use common::controller::{
    Process, SYSTEM, apply_config, bind_controller, controller_command, http_get,
    service_account_kubeconfig, service_account_token,
};
use common::git::{git_at, git_cmd};
use common::git_server::{GitServer, Options as GitOptions};
use common::kube::{Kube, condition, kube};
use common::registry::{Action, Auth, Proxy, Registry, free_port, tags_of};
use common::{Node, TempDir, bin, eventually, pulled_files, repo, require, run_ok, stdout_of};

/// The API server with Flux's CRDs, ours, and `config/` applied (once).
fn cluster() -> &'static Kube {
    static DONE: OnceLock<()> = OnceLock::new();
    let k = kube();
    DONE.get_or_init(|| {
        k.install_flux_crds();
        apply_config(k);
        run_ok(k.kubectl().args([
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/settingsimages.settings-image.configbutler.io",
        ]));
    });
    k
}

/// A fresh namespace the controller's ServiceAccount may work in: the
/// ClusterRole of `config/` bound there, as docs/controller.md says.
fn namespace(k: &Kube, name: &str) -> String {
    let ns = format!("{name}-{:x}", fastrand_u32());
    k.namespace(&ns);
    bind_controller(k, &ns);
    ns
}

fn fastrand_u32() -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    nanos ^ (std::process::id() << 16)
}

/// A kubeconfig for the controller's ServiceAccount (a TokenRequest token).
/// `server` is the API server's URL (or a relay in front of it).
fn service_account_kubeconfig_at(k: &Kube, dir: &Path, server: &str) -> PathBuf {
    // One token per API server (a test with a private one runs in the
    // same process as those on the shared one under `cargo test`).
    static TOKENS: OnceLock<Mutex<BTreeMap<PathBuf, String>>> = OnceLock::new();
    let token = TOKENS
        .get_or_init(Default::default)
        .lock()
        .unwrap()
        .entry(k.kubeconfig.clone())
        .or_insert_with(|| service_account_token(k, "2h"))
        .clone();
    service_account_kubeconfig(k, dir, server, &token)
}

// ------------------------------------------------------------------ git

/// An upstream repository on a smart-HTTP git server, written with git.
struct Upstream {
    _root: TempDir,
    work: PathBuf,
    home: PathBuf,
    server: GitServer,
    basic: Option<(String, String)>,
}

impl Upstream {
    fn start(opts: GitOptions) -> Upstream {
        require("git");
        let root = TempDir::new();
        let home = root.join("home");
        std::fs::create_dir_all(&home).unwrap();
        let bare = root.join("srv/settings.git");
        std::fs::create_dir_all(&bare).unwrap();
        run_ok(git_cmd(&home, &bare).args(["init", "--bare", "-q", "-b", "main"]));
        let work = root.join("work");
        run_ok(
            git_cmd(&home, root.path())
                .args(["clone", "-q"])
                .arg(&bare)
                .arg(&work),
        );
        run_ok(git_cmd(&home, &work).args(["checkout", "-q", "-b", "main"]));
        let basic = opts.basic.clone();
        let server = GitServer::start(&root.join("srv"), opts);
        Upstream {
            _root: root,
            work,
            home,
            server,
            basic,
        }
    }

    fn url(&self) -> String {
        self.server.url("settings.git")
    }

    /// Commits `files` (path -> content) at `time` and pushes; the commit id.
    fn commit(&self, files: &[(&str, &str)], time: i64) -> String {
        for (p, c) in files {
            let f = self.work.join(p);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, c).unwrap();
        }
        run_ok(git_cmd(&self.home, &self.work).args(["add", "-A"]));
        git_at(
            &self.work,
            &["commit", "-q", "-m", &format!("at {time}")],
            time,
        );
        run_ok(git_cmd(&self.home, &self.work).args(["push", "-q", "origin", "main"]));
        self.git(&["rev-parse", "HEAD"])
    }

    fn git(&self, args: &[&str]) -> String {
        stdout_of(git_cmd(&self.home, &self.work).args(args))
            .trim()
            .to_string()
    }

    /// What `git log -1 -- PATH` names from `commit`, as a timestamp tag.
    fn tag(&self, prefix: &str, commit: &str, path: &str) -> String {
        let line = self.git(&["log", "-1", "--format=%ct %H", commit, "--", path]);
        let (ct, id) = line.split_once(' ').unwrap();
        format!("{prefix}-{ct}-{}", &id[..7])
    }

    /// The files of `path` at `commit` as `git archive` gives them,
    /// normalized as an image shows them (`common::archived_files`).
    fn files(&self, commit: &str, path: &str) -> BTreeMap<String, Node> {
        let tmp = TempDir::new();
        let tar = tmp.join("archive.tar");
        run_ok(
            git_cmd(&self.home, &self.work)
                .args(["archive", "--format=tar", "-o"])
                .arg(&tar)
                .args([commit, path]),
        );
        common::archived_files(&tar, path)
    }

    /// The digest `settings-image build` makes for `commit` in a git clone
    /// of the server's URL.
    fn digest(&self, commit: &str, path: &str, prefix: &str) -> String {
        let tmp = TempDir::new();
        let clone = tmp.join("clone");
        let url = match &self.basic {
            Some((u, p)) => self.url().replacen("://", &format!("://{u}:{p}@"), 1),
            None => self.url(),
        };
        run_ok(
            git_cmd(&self.home, tmp.path())
                .args(["clone", "-q", &url])
                .arg(&clone),
        );
        // The image's `source` annotation reads origin: as a clone names it.
        run_ok(git_cmd(&self.home, &clone).args(["remote", "set-url", "origin", &self.url()]));
        let v: Value = TestCommand::new()
            .current_dir(&clone)
            .args(["build", "--path", path, "--timestamp-tag", prefix])
            .args(["--revision", commit, "--json", "--output"])
            .arg(tmp.join("layout"))
            .json();
        v["digest"].as_str().unwrap().to_string()
    }
}

/// What most tests start from: the shared API server, a fresh namespace
/// the controller may work in, a registry without auth and an upstream
/// whose first commit writes `app/a.yaml`.
struct Start {
    k: &'static Kube,
    ns: String,
    reg: Registry,
    up: Upstream,
    /// The first commit.
    c1: String,
}

/// [`Start`], its namespace named after `name`.
fn start(name: &str) -> Start {
    let k = cluster();
    let ns = namespace(k, name);
    let reg = Registry::start(Auth::None);
    let up = Upstream::start(GitOptions::default());
    let c1 = up.commit(&[("app/a.yaml", "a: 1\n")], 1_700_000_000);
    Start { k, ns, reg, up, c1 }
}

// ------------------------------------------------------------------ cluster objects

fn git_repository(k: &Kube, ns: &str, name: &str, url: &str, secret: Option<&str>) {
    let secret = secret
        .map(|s| format!("  secretRef:\n    name: {s}\n"))
        .unwrap_or_default();
    k.apply(&format!(
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: {name}\n  namespace: {ns}\n\
         spec:\n  interval: 1m\n  url: {url}\n  ref:\n    branch: main\n{secret}"
    ));
}

/// Writes `status.artifact` as source-controller does after a fetch.
fn fetched(k: &Kube, ns: &str, name: &str, commit: &str) {
    fetched_as(k, ns, name, &format!("main@sha1:{commit}"), commit);
}

/// Writes `status.artifact` with `revision` (`<ref>@sha1:<commit>`).
fn fetched_as(k: &Kube, ns: &str, name: &str, revision: &str, commit: &str) {
    let status = json!({"status": {"artifact": {
        "revision": revision,
        "digest": format!("sha256:{}", "0".repeat(64)),
        "path": format!("gitrepository/{ns}/{name}/{commit}.tar.gz"),
        "url": format!("http://source-controller.flux-system.svc.cluster.local./gitrepository/{ns}/{name}/{commit}.tar.gz"),
        "lastUpdateTime": "2026-01-01T00:00:00Z",
    }}});
    k.patch_status(ns, "gitrepository", name, &status.to_string());
}

fn settings_image(k: &Kube, ns: &str, name: &str, spec: &str) {
    k.apply(&format!(
        "apiVersion: settings-image.configbutler.io/v1alpha1\nkind: SettingsImage\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n{spec}"
    ));
}

/// SettingsImage `app`: the folder `app` of GitRepository `settings`
/// published to `HOST/app`, `more` (spec lines) added.
fn app_image(k: &Kube, ns: &str, host: &str, more: &str) {
    settings_image(
        k,
        ns,
        "app",
        &format!(
            "  sourceRef:\n    kind: GitRepository\n    name: settings\n  path: app\n  repository: {host}/app\n{more}"
        ),
    );
}

/// GitRepository `settings` of `up` (no Secret) and [`app_image`] of it.
fn follow_app(k: &Kube, ns: &str, up: &Upstream, host: &str, more: &str) {
    git_repository(k, ns, "settings", &up.url(), None);
    app_image(k, ns, host, more);
}

/// [`Kube::get`], as `controller/rollout.rs` calls it.
fn get(k: &Kube, ns: &str, what: &str) -> Value {
    k.get(ns, what)
}

/// The Events on SettingsImage `name`: (type, reason, note).
fn events(k: &Kube, ns: &str, name: &str) -> Vec<(String, String, String)> {
    events_of(k, ns, "SettingsImage", Some(name))
}

/// The Events (events.k8s.io) in `ns` regarding objects of `kind`, of the
/// one named `name` if given: (type, reason, note).
fn events_of(k: &Kube, ns: &str, kind: &str, name: Option<&str>) -> Vec<(String, String, String)> {
    let v = k.get(ns, "events.events.k8s.io");
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            e["regarding"]["kind"] == kind && name.is_none_or(|n| e["regarding"]["name"] == n)
        })
        .map(|e| {
            (
                e["type"].as_str().unwrap_or_default().to_string(),
                e["reason"].as_str().unwrap_or_default().to_string(),
                e["note"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// Waits until the Events on SettingsImage `name` satisfy `pred` (they
/// are written after the status); the Events.
fn wait_events(
    k: &Kube,
    ns: &str,
    name: &str,
    what: &str,
    pred: impl Fn(&[(String, String, String)]) -> bool,
) -> Vec<(String, String, String)> {
    eventually(Duration::from_secs(60), Duration::from_millis(200), || {
        let ev = events(k, ns, name);
        if pred(&ev) {
            Ok(ev)
        } else {
            Err(format!("no Events: {what}: {ev:?}"))
        }
    })
}

/// The notes of the `Normal Published` Events on `name`.
fn published_notes(ev: &[(String, String, String)]) -> Vec<&str> {
    ev.iter()
        .filter(|e| e.0 == "Normal" && e.1 == "Published")
        .map(|e| e.2.as_str())
        .collect()
}

// ------------------------------------------------------------------ the controller process

/// Where a started controller finds its cluster.
#[derive(Clone, Copy)]
enum ConfigFrom {
    /// `--kubeconfig PATH`.
    Flag,
    /// `KUBECONFIG=PATH`, no flag.
    Env,
}

/// `settings-image controller` as a process ([`Process`]: its log, pid,
/// SIGTERM and exit); killed on drop.
struct Controller {
    process: Process,
    /// Its TMPDIR (the temporary layer files land here).
    tmp: PathBuf,
    metrics: u16,
    probes: u16,
    _dir: TempDir,
}

impl std::ops::Deref for Controller {
    type Target = Process;

    fn deref(&self) -> &Process {
        &self.process
    }
}

impl std::ops::DerefMut for Controller {
    fn deref_mut(&mut self) -> &mut Process {
        &mut self.process
    }
}

impl Controller {
    fn start(k: &Kube, ns: &str, extra: &[&str]) -> Controller {
        Controller::start_env(k, ns, extra, &[])
    }

    fn start_env(k: &Kube, ns: &str, extra: &[&str], env: &[(&str, &str)]) -> Controller {
        Controller::start_from(k, ns, extra, env, ConfigFrom::Flag)
    }

    fn start_from(
        k: &Kube,
        ns: &str,
        extra: &[&str],
        env: &[(&str, &str)],
        from: ConfigFrom,
    ) -> Controller {
        Controller::start_at(k, &k.url, ns, extra, env, from)
    }

    /// Started with a kubeconfig naming `server` as the API server.
    fn start_at(
        k: &Kube,
        server: &str,
        ns: &str,
        extra: &[&str],
        env: &[(&str, &str)],
        from: ConfigFrom,
    ) -> Controller {
        let dir = TempDir::new();
        let kubeconfig = service_account_kubeconfig_at(k, dir.path(), server);
        let tmp = dir.join("tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        let (metrics, probes) = (free_port(), free_port());
        let mut cmd = controller_command(
            ns,
            &format!("127.0.0.1:{metrics}"),
            &format!("127.0.0.1:{probes}"),
            &dir.join("cache"),
        );
        match from {
            ConfigFrom::Flag => cmd.arg("--kubeconfig").arg(&kubeconfig),
            ConfigFrom::Env => cmd.env("KUBECONFIG", &kubeconfig),
        };
        cmd.args(extra)
            .envs(env.iter().copied())
            .env("TMPDIR", &tmp);
        let mut ctl = Controller {
            process: Process::spawn(&mut cmd, dir.join("controller.log")),
            tmp,
            metrics,
            probes,
            _dir: dir,
        };
        // Started means serving: every test reads /metrics or the probes,
        // and a scrape before the listener is bound sees no answer at all.
        ctl.process
            .wait_serving(metrics, "/metrics", Duration::from_millis(50));
        ctl
    }

    /// Waits until SettingsImage `name` satisfies `pred` (polling its
    /// status; the deadline only keeps a broken run from hanging).
    fn wait(
        &self,
        k: &Kube,
        ns: &str,
        name: &str,
        what: &str,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        // Each poll starts kubectl; four a second is plenty.
        k.wait(
            ns,
            &format!("settingsimage/{name}"),
            &format!("got to: {what}"),
            Duration::from_millis(250),
            pred,
            || format!("controller log:\n{}", self.logs()),
        )
    }

    /// Scrapes `/metrics` until `pred` holds of them; the metrics then.
    fn metrics_until(
        &self,
        what: &str,
        pred: impl Fn(&BTreeMap<String, f64>) -> bool,
    ) -> BTreeMap<String, f64> {
        eventually(Duration::from_secs(180), Duration::from_millis(100), || {
            let m = scrape(self.metrics);
            if pred(&m) {
                Ok(m)
            } else {
                Err(format!("{what}:\n{}", self.logs()))
            }
        })
    }
}

/// No temporary layer file of the controller is left in its TMPDIR.
fn assert_no_layer_files(ctl: &Controller) {
    let left: Vec<_> = std::fs::read_dir(&ctl.tmp)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(
        left.iter()
            .all(|n| !n.to_string_lossy().starts_with("settings-image-layer-")),
        "{left:?}"
    );
}

/// `settings_image_reconciles_total{result="RESULT"}` of scraped metrics
/// (0 before the first).
fn reconciles(m: &BTreeMap<String, f64>, result: &str) -> f64 {
    m.get(&format!(
        "settings_image_reconciles_total{{result=\"{result}\"}}"
    ))
    .copied()
    .unwrap_or(0.0)
}

/// Asks for a reconcile of SettingsImage `name` as Flux's CLI does (the
/// `reconcile.fluxcd.io/requestedAt` annotation): a trigger that changes
/// nothing the controller publishes.
fn request_reconcile(k: &Kube, ns: &str, name: &str) {
    run_ok(k.kubectl().args([
        "annotate",
        "--overwrite",
        "settingsimage",
        name,
        "-n",
        ns,
        "reconcile.fluxcd.io/requestedAt=1",
    ]));
}

fn is_ready_for(revision: &str) -> impl Fn(&Value) -> bool + '_ {
    move |v| {
        v["status"]["lastHandledRevision"] == revision
            && condition(v, "Ready").is_some_and(|c| c.0 == "True")
    }
}

/// The metric samples of the text `/metrics` serves, parsed by Python's
/// `prometheus_client` (OpenMetrics parser): name{labels} -> value.
fn scrape(port: u16) -> BTreeMap<String, f64> {
    let (code, body) = http_get(port, "/metrics");
    assert_eq!(code, 200, "{body}");
    let script = r#"
import sys, json
from prometheus_client.openmetrics.parser import text_string_to_metric_families
out = {}
for fam in text_string_to_metric_families(sys.stdin.read()):
    for s in fam.samples:
        labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
        out[s.name + ("{" + labels + "}" if labels else "")] = s.value
print(json.dumps(out))
"#;
    let out = common::output_with_stdin(
        Command::new(require("python3")).args(["-c", script]),
        body.as_bytes(),
    );
    assert!(
        out.status.success(),
        "prometheus_client could not parse /metrics (run scripts/deps.sh):\n{}\n{body}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

// ------------------------------------------------------------------ install

#[test]
fn the_committed_crd_is_what_the_types_generate() {
    for (flag, file) in [
        ("--print-crd", "settingsimages"),
        ("--print-crd=settingsrollouts", "settingsrollouts"),
    ] {
        let out = TestCommand::new().args(["controller", flag]).ok();
        let path = format!("config/crd/settings-image.configbutler.io_{file}.yaml");
        let committed = std::fs::read_to_string(repo().join(&path)).unwrap();
        assert_eq!(
            out, committed,
            "config/crd/ is stale: run `cargo run -- controller {flag} > {path}`"
        );
    }
}

#[test]
fn config_applies_and_its_service_account_has_least_privilege() {
    let k = cluster();
    // The base as a server dry run: schema, RBAC escalation checks, admission.
    let out = k
        .kubectl()
        .args(["apply", "--dry-run=server", "-k"])
        .arg(repo().join("config"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubectl apply --dry-run=server -k config/ failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let other = namespace(k, "rbac");
    let unbound = format!("unbound-{:x}", fastrand_u32());
    k.namespace(&unbound);
    let sa = format!("system:serviceaccount:{SYSTEM}:settings-image-controller");
    let can = |verb: &str, what: &str, ns: Option<&str>| -> bool {
        let mut cmd = k.kubectl();
        match what.split_once('/') {
            Some((resource, sub)) => {
                cmd.args(["auth", "can-i", verb, resource, "--subresource", sub])
            }
            None => cmd.args(["auth", "can-i", verb, what]),
        };
        cmd.args(["--as", &sa]);
        match ns {
            Some(ns) => cmd.args(["-n", ns]),
            None => cmd.arg("--all-namespaces"),
        };
        let out = cmd.output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim() == "yes"
    };
    for ns in [SYSTEM, other.as_str()] {
        for (verb, what) in [
            ("list", "settingsimages.settings-image.configbutler.io"),
            ("watch", "settingsimages.settings-image.configbutler.io"),
            (
                "patch",
                "settingsimages.settings-image.configbutler.io/status",
            ),
            ("watch", "gitrepositories.source.toolkit.fluxcd.io"),
            ("get", "secrets"),
            ("create", "events.events.k8s.io"),
            ("watch", "settingsrollouts.settings-image.configbutler.io"),
            (
                "patch",
                "settingsrollouts.settings-image.configbutler.io/status",
            ),
            ("watch", "deployments.apps"),
            ("watch", "statefulsets.apps"),
            ("watch", "daemonsets.apps"),
            ("list", "pods"),
        ] {
            assert!(
                can(verb, what, Some(ns)),
                "the controller cannot {verb} {what} in {ns}"
            );
        }
    }
    for (verb, what) in [
        ("get", "leases.coordination.k8s.io"),
        ("update", "leases.coordination.k8s.io"),
        ("create", "leases.coordination.k8s.io"),
    ] {
        assert!(
            can(verb, what, Some(SYSTEM)),
            "the controller cannot {verb} {what}"
        );
    }
    // Least privilege: nothing outside the watched namespaces, no listing
    // of Secrets, no writes to the spec or to GitRepositories.
    assert!(
        !can("get", "secrets", Some(&unbound)),
        "reads Secrets in a namespace it does not watch"
    );
    assert!(!can("get", "secrets", Some("kube-system")));
    assert!(!can("get", "secrets", None));
    assert!(!can("list", "secrets", Some(SYSTEM)));
    assert!(!can(
        "list",
        "settingsimages.settings-image.configbutler.io",
        Some(&unbound)
    ));
    assert!(!can(
        "update",
        "settingsimages.settings-image.configbutler.io",
        Some(SYSTEM)
    ));
    assert!(!can(
        "patch",
        "gitrepositories.source.toolkit.fluxcd.io",
        Some(SYSTEM)
    ));
    assert!(!can("update", "leases.coordination.k8s.io", Some(&other)));
    // Rollout records read workloads and pods, and write none of them.
    for (verb, what) in [
        ("update", "deployments.apps"),
        ("patch", "deployments.apps"),
        ("patch", "statefulsets.apps"),
        ("delete", "pods"),
        ("create", "pods"),
        ("get", "pods/log"),
        ("create", "pods/exec"),
        ("update", "settingsrollouts.settings-image.configbutler.io"),
    ] {
        assert!(
            !can(verb, what, Some(SYSTEM)),
            "the controller can {verb} {what}"
        );
    }
    assert!(!can("list", "pods", Some(&unbound)));
    assert!(!can("list", "deployments.apps", Some(&unbound)));
    // The Deployment as the API server stores it: non-root, read-only
    // root filesystem, limits, probes, the action image run as `controller`.
    let d = k.get(SYSTEM, "deployment/settings-image-controller");
    let pod = &d["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(c["args"][0], "controller");
    // The binary's defaults listen on loopback only: the pod names every
    // interface, or the kubelet's probes and Prometheus reach nothing.
    let args: Vec<&str> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    assert!(args.contains(&"--metrics-bind-address=:8080"), "{args:?}");
    assert!(
        args.contains(&"--health-probe-bind-address=:8081"),
        "{args:?}"
    );
    let port = |name: &str| {
        c["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .map(|p| p["containerPort"].clone())
    };
    assert_eq!(port("healthz"), Some(json!(8081)));
    assert_eq!(port("metrics"), Some(json!(8080)));
    assert!(c["resources"]["limits"]["memory"].is_string());
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
}

// ------------------------------------------------------------------ publishing

/// First publish, a new commit, the same revision again, an older one.
#[test]
fn publishes_each_fetched_revision_and_only_moves_forward() {
    let k = cluster();
    let ns = namespace(k, "publish");
    let reg = Registry::start(Auth::None);
    let proxy = Proxy::start(reg.port);
    let up = Upstream::start(GitOptions::default());
    let c1 = up.commit(
        &[
            ("configs/shop/app.yaml", "color: blue\n"),
            ("README", "x\n"),
        ],
        1_700_000_000,
    );
    git_repository(k, &ns, "settings", &up.url(), None);
    let repository = format!("{}/shop", proxy.host());
    settings_image(
        k,
        &ns,
        "shop",
        &format!(
            "  sourceRef:\n    kind: GitRepository\n    name: settings\n  path: configs/shop\n  repository: {repository}\n  branchTag: main\n"
        ),
    );
    let ctl = Controller::start(k, &ns, &[]);
    // No artifact yet: waiting, nothing pushed.
    let v = ctl.wait(k, &ns, "shop", "Ready=False ArtifactNotReady", |v| {
        condition(v, "Ready").is_some_and(|c| c.1 == "ArtifactNotReady")
    });
    assert_eq!(condition(&v, "Reconciling").unwrap().0, "True");
    assert!(tags_of(&reg, "shop").is_empty());

    // 1. The first revision.
    fetched(k, &ns, "settings", &c1);
    let rev1 = format!("main@sha1:{c1}");
    let v = ctl.wait(k, &ns, "shop", "published rev 1", is_ready_for(&rev1));
    let tag1 = up.tag("main", &c1, "configs/shop");
    let img = &v["status"]["images"][0];
    assert_eq!(img["tag"], tag1.as_str());
    assert_eq!(img["commit"], c1.as_str());
    assert_eq!(img["path"], "configs/shop");
    assert_eq!(img["repository"], repository.as_str());
    assert_eq!(img["pushed"], true);
    assert_eq!(
        img["digest"],
        up.digest(&c1, "configs/shop", "main").as_str()
    );
    assert_eq!(
        pulled_files(&format!("{}/shop:{tag1}", reg.host()), None),
        up.files(&c1, "configs/shop")
    );
    assert_eq!(
        v["status"]["observedGeneration"],
        v["metadata"]["generation"]
    );
    assert!(condition(&v, "Reconciling").is_none() && condition(&v, "Stalled").is_none());
    let t = tags_of(&reg, "shop");
    assert!(t.contains(&tag1) && t.contains("main"), "{t:?}");

    // 2. A commit that changes the folder, and one that does not.
    let c2 = up.commit(
        &[("configs/shop/app.yaml", "color: green\n")],
        1_700_000_100,
    );
    let c3 = up.commit(&[("README", "y\n")], 1_700_000_200);
    fetched(k, &ns, "settings", &c3);
    let rev3 = format!("main@sha1:{c3}");
    let v = ctl.wait(k, &ns, "shop", "published rev 3", is_ready_for(&rev3));
    let tag2 = up.tag("main", &c3, "configs/shop");
    assert_eq!(
        tag2,
        up.tag("main", &c2, "configs/shop"),
        "git names c2 as the folder's last change"
    );
    assert_eq!(v["status"]["images"][0]["tag"], tag2.as_str());
    assert_eq!(v["status"]["images"][0]["commit"], c2.as_str());
    // One `Normal Published` Event per pushed image: the second is an Event
    // of its own naming its tag, not a repeat in the first one's series.
    let ev = wait_events(k, &ns, "shop", "Published for rev 3", |ev| {
        published_notes(ev)
            .iter()
            .any(|n| n.contains(&format!(":{tag2}@")))
    });
    let notes = published_notes(&ev);
    assert_eq!(notes.len(), 2, "{ev:?}");
    assert!(
        notes
            .iter()
            .any(|n| n.contains(&format!(":{tag1}@")) && n.contains(&rev1)),
        "{ev:?}"
    );
    assert_eq!(
        v["status"]["images"][0]["digest"],
        up.digest(&c3, "configs/shop", "main").as_str()
    );
    assert_eq!(
        pulled_files(&format!("{}/shop:{tag2}", reg.host()), None),
        up.files(&c3, "configs/shop")
    );
    assert!(tags_of(&reg, "shop").contains(&tag2));

    // 3. The same revision again (source-controller re-fetches and writes
    // a new lastUpdateTime): not one request to the registry.
    proxy.take();
    let before = scrape(ctl.metrics);
    let status = json!({"status": {"artifact": {"lastUpdateTime": "2026-01-02T00:00:00Z"}}});
    k.patch_status(&ns, "gitrepository", "settings", &status.to_string());
    // Wait for the controller to have seen the change: the GitRepository's
    // resourceVersion moved and a later, unrelated trigger (an annotation
    // Flux uses to ask for a reconcile) is handled before we count.
    request_reconcile(k, &ns, "shop");
    ctl.metrics_until("no unchanged reconcile", |m| {
        reconciles(m, "unchanged") > reconciles(&before, "unchanged")
    });
    assert_eq!(
        proxy.take().len(),
        0,
        "the same revision sent requests to the registry"
    );

    // 4. An older revision (a rolled-back GitRepository): its tag exists,
    // the branch tag stays on the newer commit, and a Warning says so.
    fetched(k, &ns, "settings", &c1);
    let v = ctl.wait(
        k,
        &ns,
        "shop",
        "handled the older rev 1",
        is_ready_for(&rev1),
    );
    let ready = condition(&v, "Ready").unwrap();
    assert!(ready.2.contains("warning"), "{ready:?}");
    assert_eq!(v["status"]["images"][0]["tag"], tag1.as_str());
    assert_eq!(v["status"]["images"][0]["pushed"], false);
    let main_commit = common::registry::revision_of(&reg, "shop", "main");
    assert_eq!(main_commit, c2, "the branch tag moved back");
    let ev = events(k, &ns, "shop");
    assert!(
        ev.iter()
            .any(|e| e.0 == "Warning" && e.1 == "BranchTagKept"),
        "{ev:?}"
    );
    assert!(
        ev.iter()
            .any(|e| e.0 == "Warning" && e.1 == "OlderRevision"),
        "{ev:?}"
    );
    assert!(
        ev.iter().any(|e| e.0 == "Normal" && e.1 == "Published"),
        "{ev:?}"
    );

    // The metrics, parsed by Prometheus' own client library.
    let m = scrape(ctl.metrics);
    assert_eq!(m.get("settings_image_publishes_total"), Some(&2.0), "{m:?}");
    assert!(m["settings_image_uploaded_bytes_total"] > 0.0, "{m:?}");
    assert!(
        m["settings_image_reconciles_total{result=\"published\"}"] >= 3.0,
        "{m:?}"
    );
    assert!(
        m["settings_image_reconcile_duration_seconds_count"] >= 4.0,
        "{m:?}"
    );
    assert_eq!(m.get("settings_image_leader"), Some(&1.0));
    assert_eq!(http_get(ctl.probes, "/healthz").0, 200);
    assert_eq!(http_get(ctl.probes, "/readyz").0, 200);
    // JSON logs: every line is one object with ts, level and msg.
    for line in ctl.logs().lines() {
        let v: Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON: {line}: {e}"));
        assert!(
            v["ts"].is_string() && v["level"].is_string() && v["msg"].is_string(),
            "{line}"
        );
    }
}

/// A registry that fails, then works again: Ready=False with the reason,
/// retried with backoff, then Ready=True; nothing half-pushed.
#[test]
fn a_registry_outage_is_retried_until_it_publishes() {
    let Start { k, ns, reg, up, c1 } = start("outage");
    let proxy = Proxy::start(reg.port);
    proxy.set_rule(|_, _| Action::Respond(503, vec![]));
    follow_app(k, &ns, &up, &proxy.host(), "  provenance: false\n");
    fetched(k, &ns, "settings", &c1);
    let ctl = Controller::start(k, &ns, &[]);
    let v = ctl.wait(k, &ns, "app", "Ready=False RegistryOperationFailed", |v| {
        condition(v, "Ready").is_some_and(|c| c.0 == "False" && c.1 == "RegistryOperationFailed")
    });
    assert_eq!(
        condition(&v, "Reconciling").unwrap().1,
        "ProgressingWithRetry"
    );
    assert!(condition(&v, "Stalled").is_none());
    assert!(tags_of(&reg, "app").is_empty());
    assert!(
        events(k, &ns, "app")
            .iter()
            .any(|e| e.0 == "Warning" && e.1 == "RegistryOperationFailed")
    );
    proxy.set_rule(|_, _| Action::Forward);
    let v = ctl.wait(
        k,
        &ns,
        "app",
        "Ready after the outage",
        is_ready_for(&format!("main@sha1:{c1}")),
    );
    assert_eq!(
        v["status"]["images"][0]["tag"],
        up.tag("main", &c1, "app").as_str()
    );
    let m = scrape(ctl.metrics);
    assert!(
        m["settings_image_failures_total{reason=\"RegistryOperationFailed\"}"] >= 1.0,
        "{m:?}"
    );
}

/// A publish that fails after it published (the branch tag's read-back
/// gets an unreadable tag list): Ready=False with the registry's failure
/// and what is already in the registry, in the condition and the Warning
/// Event; the retry finds it all in place and is Ready (pushed: false).
#[test]
fn a_failure_after_publishing_says_what_is_published() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let k = cluster();
    let ns = namespace(k, "after");
    let reg = Registry::start(Auth::None);
    let proxy = Proxy::start(reg.port);
    let lists = Arc::new(AtomicUsize::new(0));
    let counted = lists.clone();
    proxy.set_rule(move |_, path| {
        if path.contains("/tags/list") && counted.fetch_add(1, Ordering::SeqCst) == 1 {
            Action::RespondWith(200, Vec::new(), "<html>maintenance</html>".into())
        } else {
            Action::Forward
        }
    });
    let up = Upstream::start(GitOptions::default());
    let c1 = up.commit(&[("app/a.yaml", "a: 1\n")], 1_700_000_000);
    follow_app(
        k,
        &ns,
        &up,
        &proxy.host(),
        "  branchTag: main\n  provenance: false\n",
    );
    fetched(k, &ns, "settings", &c1);
    let ctl = Controller::start(k, &ns, &[]);
    let tag = up.tag("main", &c1, "app");
    let digest = up.digest(&c1, "app", "main");
    let reference = format!("{}/app:{tag}@{digest}", proxy.host());
    let says = format!("already published: {reference}, tagged {tag}, main (branch tag)");
    let noted = wait_events(k, &ns, "app", "Warning RegistryOperationFailed", |ev| {
        ev.iter()
            .any(|e| e.0 == "Warning" && e.1 == "RegistryOperationFailed")
    });
    let note = &noted
        .iter()
        .find(|e| e.1 == "RegistryOperationFailed")
        .unwrap()
        .2;
    assert!(
        note.contains("unreadable tag list") && note.contains(&says),
        "{note}"
    );
    assert!(
        note.contains("a re-run of the same push finds them there (pushed: false)"),
        "{note}"
    );
    // The retry: everything in place.
    let v = ctl.wait(
        k,
        &ns,
        "app",
        "Ready after the retry",
        is_ready_for(&format!("main@sha1:{c1}")),
    );
    assert_eq!(v["status"]["images"][0]["digest"], digest.as_str());
    assert_eq!(v["status"]["images"][0]["pushed"], false, "{v:#}");
    assert_eq!(
        tags_of(&reg, "app"),
        std::collections::BTreeSet::from([tag.clone(), "main".to_string()])
    );
}

/// One cloud's workload identity as its webhook sets up the pod.
struct Cloud {
    /// `spec.provider`.
    provider: &'static str,
    /// The provider's registry host (the stub plays it as the controller's
    /// HTTP proxy).
    host: &'static str,
    /// The registry user the exchange ends in, and its password.
    user: String,
    password: String,
    /// The audience the projected token is minted for.
    audience: String,
    /// The controller's environment; `{token}` is the projected token's
    /// path, `{stub}` the stub's base URL, `{dir}` a scratch folder.
    env: Vec<(&'static str, String)>,
    /// Files written into `{dir}` first (name, content with the same
    /// placeholders).
    files: Vec<(&'static str, String)>,
    /// Stub routes and the checks each must have run.
    checks: Vec<(&'static str, Vec<String>)>,
    /// Secrets the exchange hands out on the way.
    secrets: Vec<String>,
}

/// `spec.provider` as the cloud runs the pod: its webhook's environment
/// and projected token file, the cloud's exchanges at the loopback login
/// stub (shaped from their documented requests and answers, verifying the
/// token's signature, audience and subject), in front of a real registry
/// that takes only what the exchange hands out, reached as the provider's
/// own host (the stub is the controller's HTTP proxy). The namespace is
/// allowed the controller's identity (`--provider-namespaces`). No Secret
/// is read; skopeo reads the tag back with the exchange's credentials.
fn publishes_with_workload_identity(cloud: impl FnOnce(&Value) -> Cloud) {
    use support_login::{Stub, allow, providers};
    let k = cluster();
    let p = providers();
    let cloud = cloud(&p);
    let ns = namespace(k, cloud.provider);
    let reg = Registry::start(Auth::Basic {
        user: "nobody".into(),
        password: "nothing-to-see-here".into(),
    });
    allow(&reg, &cloud.user, &cloud.password);
    let stub = Stub::start(&reg, p.clone(), json!({}));
    let up = Upstream::start(GitOptions::default());
    let c1 = up.commit(&[("app/a.yaml", "a: 1\n")], 1_700_000_000);
    git_repository(k, &ns, "settings", &up.url(), None);
    fetched(k, &ns, "settings", &c1);
    settings_image(
        k,
        &ns,
        "app",
        &format!(
            "  sourceRef:\n    kind: GitRepository\n    name: settings\n  path: app\n  repository: {}/acme/shop\n  provider: {}\n  insecure: true\n",
            cloud.host, cloud.provider
        ),
    );
    let dir = TempDir::new();
    let token_file = dir.join("token");
    let projected = stub.mint(&cloud.audience, 3600);
    std::fs::write(&token_file, &projected).unwrap();
    let fill = |v: &str| {
        v.replace("{token}", token_file.to_str().unwrap())
            .replace("{stub}", &stub.url(""))
            .replace("{dir}", dir.path().to_str().unwrap())
    };
    for (name, content) in &cloud.files {
        std::fs::write(dir.join(name), fill(content)).unwrap();
    }
    let mut env: Vec<(&str, String)> = cloud.env.iter().map(|(k, v)| (*k, fill(v))).collect();
    env.extend(stub.proxy_env());
    let env_refs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let ctl = Controller::start_env(k, &ns, &["--provider-namespaces", &ns], &env_refs);
    let v = ctl.wait(
        k,
        &ns,
        "app",
        &format!("published through the {} login", cloud.provider),
        is_ready_for(&format!("main@sha1:{c1}")),
    );
    let image = &v["status"]["images"][0];
    assert_eq!(
        image["digest"],
        up.digest(&c1, "app", "main").as_str(),
        "{v:#}"
    );
    let tag = image["tag"].as_str().unwrap();
    let found = common::registry::skopeo_inspect(
        &format!("{}/acme/shop:{tag}", reg.host()),
        Some(&format!("{}:{}", cloud.user, cloud.password)),
    )
    .unwrap_or_else(|| panic!("skopeo finds no acme/shop:{tag}"));
    assert_eq!(found["Digest"], image["digest"]);
    assert_eq!(
        pulled_files(
            &format!("{}/acme/shop:{tag}", reg.host()),
            Some(&format!("{}:{}", cloud.user, cloud.password)),
        ),
        up.files(&c1, "app")
    );
    for (route, want) in &cloud.checks {
        let entries = stub.route(route);
        let last = entries
            .last()
            .unwrap_or_else(|| panic!("the stub saw no {route} request:\n{}", ctl.logs()));
        assert_eq!(last["ok"], true, "{route} refused: {last}");
        assert_eq!(last["checks"], json!(want), "{route}");
    }
    let logs = ctl.logs();
    let status = v["status"].to_string();
    for secret in cloud
        .secrets
        .iter()
        .map(String::as_str)
        .chain([projected.as_str(), cloud.password.as_str()])
    {
        assert!(!logs.contains(secret), "a secret in the log:\n{logs}");
        assert!(!status.contains(secret), "a secret in the status: {status}");
    }
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// EKS IRSA: STS `AssumeRoleWithWebIdentity`, then a SigV4-signed ECR
/// `GetAuthorizationToken`.
#[test]
fn provider_aws_logs_in_with_the_pods_web_identity() {
    publishes_with_workload_identity(|p| Cloud {
        provider: "aws",
        host: support_login::ECR_HOST,
        user: "AWS".into(),
        password: p["aws"]["passwords"][0].as_str().unwrap().into(),
        audience: "sts.amazonaws.com".into(),
        env: vec![
            (
                "AWS_ROLE_ARN",
                p["aws"]["role_arn"].as_str().unwrap().into(),
            ),
            ("AWS_REGION", "eu-west-1".into()),
            ("AWS_WEB_IDENTITY_TOKEN_FILE", "{token}".into()),
            ("AWS_ENDPOINT_URL_STS", "{stub}/sts/".into()),
            ("AWS_ENDPOINT_URL_ECR", "{stub}/ecr/".into()),
        ],
        files: Vec::new(),
        checks: vec![
            (
                "/sts/",
                strings(&["action", "jwks", "aud=sts.amazonaws.com", "sub"]),
            ),
            ("/ecr/", strings(&["target", "sigv4"])),
        ],
        secrets: vec![
            p["aws"]["secret_key"].as_str().unwrap().into(),
            p["aws"]["session_token"].as_str().unwrap().into(),
        ],
    });
}

/// AKS workload identity: Entra's client-assertion grant, then ACR's
/// `/oauth2/exchange`.
#[test]
fn provider_azure_logs_in_with_the_pods_federated_token() {
    publishes_with_workload_identity(|p| Cloud {
        provider: "azure",
        host: support_login::ACR_HOST,
        user: "00000000-0000-0000-0000-000000000000".into(),
        password: p["azure"]["refresh_token"].as_str().unwrap().into(),
        audience: "api://AzureADTokenExchange".into(),
        env: vec![
            (
                "AZURE_CLIENT_ID",
                p["azure"]["client"].as_str().unwrap().into(),
            ),
            (
                "AZURE_TENANT_ID",
                p["azure"]["tenant"].as_str().unwrap().into(),
            ),
            ("AZURE_FEDERATED_TOKEN_FILE", "{token}".into()),
            ("AZURE_AUTHORITY_HOST", "{stub}/azure/".into()),
        ],
        files: Vec::new(),
        checks: vec![
            (
                "/azure/",
                strings(&["grant", "jwks", "aud=api://AzureADTokenExchange", "sub"]),
            ),
            ("/oauth2/exchange", strings(&["exchange"])),
        ],
        secrets: vec![p["azure"]["aad_token"].as_str().unwrap().into()],
    });
}

/// Workload identity federation: the `external_account` credential
/// configuration `gcloud` writes, Google STS, then the service account's
/// `generateAccessToken`.
#[test]
fn provider_gcp_logs_in_with_an_external_account_configuration() {
    publishes_with_workload_identity(|p| {
        let provider = p["gcp"]["provider"].as_str().unwrap();
        let account = p["gcp"]["service_account"].as_str().unwrap();
        let config = json!({
            "universe_domain": "googleapis.com",
            "type": "external_account",
            "audience": format!("//iam.googleapis.com/{provider}"),
            "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
            "token_url": "https://sts.googleapis.com/v1/token",
            "service_account_impersonation_url": format!(
                "https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/{account}:generateAccessToken"
            ),
            "credential_source": {"file": "{token}", "format": {"type": "text"}},
        });
        Cloud {
            provider: "gcp",
            host: support_login::GCP_HOST,
            user: "oauth2accesstoken".into(),
            password: p["gcp"]["token"].as_str().unwrap().into(),
            audience: format!("https://iam.googleapis.com/{provider}"),
            env: vec![
                (
                    "GOOGLE_APPLICATION_CREDENTIALS",
                    "{dir}/credentials.json".into(),
                ),
                (
                    "CLOUDSDK_API_ENDPOINT_OVERRIDES_STS",
                    "{stub}/gcp-sts/".into(),
                ),
                (
                    "CLOUDSDK_API_ENDPOINT_OVERRIDES_IAMCREDENTIALS",
                    "{stub}/gcp-iam/".into(),
                ),
            ],
            files: vec![("credentials.json", config.to_string())],
            checks: vec![
                (
                    "/gcp-sts/v1/token",
                    vec![
                        "grant".into(),
                        "jwks".into(),
                        format!("aud=https://iam.googleapis.com/{provider}"),
                        "sub".into(),
                    ],
                ),
                (
                    "/gcp-iam/v1/projects/-/serviceAccounts/",
                    strings(&["impersonation"]),
                ),
            ],
            secrets: vec![p["gcp"]["federated"].as_str().unwrap().into()],
        }
    });
}

/// `spec.provider` is the controller's own cloud identity: a tenant may
/// not lend it to a host of its own, nor use it at all outside the
/// namespaces the operator allows (`--provider-namespaces`, by default the
/// controller's own). Each SettingsImage stalls with the field, the
/// reason and what to do; the pod's projected token is never read out,
/// no exchange runs and nothing reaches the tenant's host (the stub, which
/// plays STS, ECR and the host, logs every request).
#[test]
fn a_tenant_cannot_use_the_controllers_identity_elsewhere() {
    use support_login::{ECR_HOST, Stub, providers};
    let k = cluster();
    let ns = namespace(k, "borrower");
    let reg = Registry::start(Auth::None);
    let p = providers();
    let stub = Stub::start(
        &reg,
        p.clone(),
        json!({"hosts": {"registry.evil.example": "self"}}),
    );
    let up = Upstream::start(GitOptions::default());
    let c1 = up.commit(&[("app/a.yaml", "a: 1\n")], 1_700_000_000);
    git_repository(k, &ns, "settings", &up.url(), None);
    fetched(k, &ns, "settings", &c1);
    let si = |name: &str, provider: &str, repository: &str| {
        settings_image(
            k,
            &ns,
            name,
            &format!(
                "  sourceRef:\n    kind: GitRepository\n    name: settings\n  path: app\n  repository: {repository}/acme/shop\n  provider: {provider}\n  insecure: true\n"
            ),
        )
    };
    si("own-host", "aws", "registry.evil.example");
    si("own-loopback", "azure", &stub.host());
    si("ecr", "aws", ECR_HOST);
    let dir = TempDir::new();
    let token = dir.join("token");
    std::fs::write(&token, stub.mint("sts.amazonaws.com", 3600)).unwrap();
    let mut env = vec![
        (
            "AWS_ROLE_ARN",
            p["aws"]["role_arn"].as_str().unwrap().to_string(),
        ),
        ("AWS_REGION", "eu-west-1".to_string()),
        ("AWS_WEB_IDENTITY_TOKEN_FILE", token.display().to_string()),
        ("AWS_ENDPOINT_URL_STS", stub.url("/sts/")),
        ("AWS_ENDPOINT_URL_ECR", stub.url("/ecr/")),
        (
            "AZURE_CLIENT_ID",
            p["azure"]["client"].as_str().unwrap().to_string(),
        ),
        (
            "AZURE_TENANT_ID",
            p["azure"]["tenant"].as_str().unwrap().to_string(),
        ),
        ("AZURE_FEDERATED_TOKEN_FILE", token.display().to_string()),
        ("AZURE_AUTHORITY_HOST", stub.url("/azure/")),
    ];
    env.extend(stub.proxy_env());
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    // Stalled for `reason` (the second controller finds the first one's
    // status in place).
    let stalled = |ctl: &Controller, name: &str, reason: &str| {
        let v = ctl.wait(k, &ns, name, &format!("Stalled {reason}"), |v| {
            condition(v, "Stalled").is_some_and(|c| c.0 == "True" && c.1 == reason)
        });
        let (_, reason, message) = condition(&v, "Stalled").unwrap();
        assert_eq!(
            condition(&v, "Ready").map(|c| (c.0, c.1)),
            Some(("False".to_string(), reason.clone()))
        );
        assert!(
            events(k, &ns, name)
                .iter()
                .any(|e| e.0 == "Warning" && e.1 == reason && e.2 == message),
            "{name}: no Warning {reason} Event"
        );
        (reason, message)
    };
    // The default: only the controller's own namespace may use it.
    {
        let ctl = Controller::start_env(k, &ns, &[], &env);
        for name in ["own-host", "own-loopback", "ecr"] {
            let (_, message) = stalled(&ctl, name, "AccessDenied");
            assert!(
                message.starts_with("spec.provider: ")
                    && message.contains(&format!(
                        "logs in with the controller's own cloud identity, which SettingsImages in namespace {ns} may not use (the controller's --provider-namespaces is {SYSTEM})"
                    ))
                    && message.contains(&format!(
                        "give spec.secretRef with this registry's credentials instead, or ask the cluster operator to add {ns} to --provider-namespaces"
                    )),
                "{name}: {message}"
            );
        }
        let seen = stub.log();
        assert!(seen.is_empty(), "{seen:?}\n{}", ctl.logs());
    }
    // Allowed here, but only to the provider's own hosts.
    let ctl = Controller::start_env(
        k,
        &ns,
        &["--provider-namespaces", &format!("other,{ns}")],
        &env,
    );
    for (name, says) in [
        (
            "own-host",
            "spec.provider: aws logs in only to Amazon ECR's registry hosts (ACCOUNT.dkr.ecr.REGION.amazonaws.com), and registry.evil.example is not one",
        ),
        (
            "own-loopback",
            "spec.provider: azure logs in only to Azure Container Registry's hosts",
        ),
    ] {
        let (_, message) = stalled(&ctl, name, "InvalidProvider");
        assert!(message.starts_with(says), "{name}: {message}");
        assert!(
            message.contains("nothing was requested or sent")
                && message.contains(
                    "set spec.repository to the provider's registry, or use spec.secretRef"
                ),
            "{name}: {message}"
        );
    }
    // The ECR one publishes: the namespace may use the identity there.
    let v = ctl.wait(
        k,
        &ns,
        "ecr",
        "published to ECR's host",
        is_ready_for(&format!("main@sha1:{c1}")),
    );
    assert_eq!(
        v["status"]["images"][0]["repository"],
        format!("{ECR_HOST}/acme/shop")
    );
    // Only that one logged in, and only ECR's host was asked: each request
    // the stub passed on to the registry came for ECR's host (no Entra
    // exchange, no request for the tenant's hosts).
    let log = stub.log();
    let for_ecr = log
        .iter()
        .filter(|e| e["route"] == "host" && e["host"] == ECR_HOST)
        .count();
    let passed_on = log.iter().filter(|e| e["route"] == "proxy").count();
    assert!(for_ecr > 0, "{log:?}");
    assert_eq!(passed_on, for_ecr, "{log:?}");
    for e in &log {
        let route = e["route"].as_str().unwrap_or_default();
        assert!(
            ["/sts/", "/ecr/", "proxy"].contains(&route)
                || (route == "host" && e["host"] == ECR_HOST),
            "a request the tenant's SettingsImages made: {e}"
        );
    }
}

/// A GitRepository behind basic auth, a registry behind basic auth with a
/// `kubernetes.io/dockerconfigjson` Secret, and a glob of folders.
#[test]
fn credentials_come_from_the_secrets_flux_uses() {
    let k = cluster();
    let ns = namespace(k, "creds");
    let reg = Registry::start(Auth::Basic {
        user: "pusher".into(),
        password: "reg-s3cret".into(),
    });
    let up = Upstream::start(GitOptions {
        basic: Some(("reader".into(), "git-s3cret".into())),
        ..GitOptions::default()
    });
    let c1 = up.commit(
        &[
            ("configs/shop/a.yaml", "a: 1\n"),
            ("configs/cart/b.yaml", "b: 2\n"),
        ],
        1_700_000_000,
    );
    k.apply(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: git-auth\n  namespace: {ns}\nstringData:\n  username: reader\n  password: git-s3cret\n"
    ));
    let auth = base64("pusher:reg-s3cret");
    let dockerconfig = json!({"auths": {reg.host(): {"auth": auth}}}).to_string();
    k.apply(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: registry\n  namespace: {ns}\ntype: kubernetes.io/dockerconfigjson\nstringData:\n  .dockerconfigjson: '{dockerconfig}'\n"
    ));
    git_repository(k, &ns, "settings", &up.url(), Some("git-auth"));
    settings_image(
        k,
        &ns,
        "all",
        &format!(
            "  sourceRef:\n    kind: GitRepository\n    name: settings\n  path: configs/*\n  repository: {}/settings-{{name}}\n  secretRef:\n    name: registry\n",
            reg.host()
        ),
    );
    fetched(k, &ns, "settings", &c1);
    let ctl = Controller::start(k, &ns, &[]);
    let v = ctl.wait(
        k,
        &ns,
        "all",
        "published both folders",
        is_ready_for(&format!("main@sha1:{c1}")),
    );
    let images = v["status"]["images"].as_array().unwrap();
    let paths: Vec<&str> = images.iter().map(|i| i["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["configs/cart", "configs/shop"]);
    for (name, img) in [("cart", &images[0]), ("shop", &images[1])] {
        assert_eq!(
            img["repository"],
            format!("{}/settings-{name}", reg.host()).as_str()
        );
        assert_eq!(
            img["digest"],
            up.digest(&c1, &format!("configs/{name}"), "main").as_str()
        );
        assert_eq!(
            pulled_files(
                &format!(
                    "{}/settings-{name}:{}",
                    reg.host(),
                    img["tag"].as_str().unwrap()
                ),
                Some("pusher:reg-s3cret"),
            ),
            up.files(&c1, &format!("configs/{name}"))
        );
    }
    // One `Normal Published` Event per image of the glob.
    let ev = wait_events(k, &ns, "all", "Published per folder", |ev| {
        published_notes(ev).len() >= 2
    });
    for name in ["cart", "shop"] {
        assert_eq!(
            published_notes(&ev)
                .iter()
                .filter(|n| n.contains(&format!("/settings-{name}:")))
                .count(),
            1,
            "{ev:?}"
        );
    }
    // The git server saw the credentials; nothing printed them.
    assert!(up.server.hits().iter().any(|h| {
        h.authorization
            .as_deref()
            .is_some_and(|a| a.starts_with("Basic "))
    }));
    let logs = ctl.logs();
    for secret in ["git-s3cret", "reg-s3cret", &auth] {
        assert!(!logs.contains(secret), "a secret in the log:\n{logs}");
        assert!(!v["status"].to_string().contains(secret));
    }
}

fn base64(s: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// A bad spec stalls with a message naming the field, and pushes nothing.
#[test]
fn a_bad_spec_stalls_naming_the_field() {
    let Start { k, ns, reg, up, c1 } = start("stall");
    git_repository(k, &ns, "settings", &up.url(), None);
    fetched(k, &ns, "settings", &c1);
    let source = "  sourceRef:\n    kind: GitRepository\n    name: settings\n  path: app\n";
    settings_image(
        k,
        &ns,
        "no-source",
        &format!(
            "  sourceRef:\n    kind: GitRepository\n    name: missing\n  path: app\n  repository: {}/a\n",
            reg.host()
        ),
    );
    settings_image(
        k,
        &ns,
        "bad-repo",
        &format!("{source}  repository: {}/Upper/Case\n", reg.host()),
    );
    settings_image(
        k,
        &ns,
        "no-key",
        &format!(
            "{source}  repository: {}/b\n  secretRef:\n    name: wrong\n",
            reg.host()
        ),
    );
    k.apply(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: wrong\n  namespace: {ns}\nstringData:\n  username: u\n"
    ));
    // A GitRepository that follows a tag (source-controller's revision
    // names the tag): docs/controller.md says what happens.
    k.apply(&format!(
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: tagged\n  namespace: {ns}\n\
         spec:\n  interval: 1m\n  url: {}\n  ref:\n    tag: v1.0.0\n",
        up.url()
    ));
    fetched_as(k, &ns, "tagged", &format!("v1.0.0@sha1:{c1}"), &c1);
    settings_image(
        k,
        &ns,
        "tagged",
        &format!(
            "  sourceRef:\n    kind: GitRepository\n    name: tagged\n  path: app\n  repository: {}/t\n  timestampTag: v1\n",
            reg.host()
        ),
    );
    let ctl = Controller::start(k, &ns, &[]);
    for (name, field, words) in [
        ("no-source", "spec.sourceRef", "missing"),
        ("bad-repo", "spec.repository", "Upper/Case"),
        ("no-key", "spec.secretRef", ".dockerconfigjson"),
        ("tagged", "spec.sourceRef", "does not follow a branch"),
    ] {
        let v = ctl.wait(k, &ns, name, "Stalled", |v| {
            condition(v, "Stalled").is_some_and(|c| c.0 == "True")
        });
        let (_, reason, message) = condition(&v, "Stalled").unwrap();
        assert!(
            message.starts_with(field) && message.contains(words),
            "{name}: {message}"
        );
        if name == "tagged" {
            assert_eq!(reason, "UnsupportedSource");
        }
        let ready = condition(&v, "Ready").unwrap();
        assert_eq!(
            (ready.0.as_str(), ready.2.as_str()),
            ("False", message.as_str())
        );
        assert!(condition(&v, "Reconciling").is_none());
        assert!(
            events(k, &ns, name)
                .iter()
                .any(|e| e.0 == "Warning" && e.2 == message)
        );
    }
    let (code, body) = common::registry::curl(&format!("http://{}/v2/_catalog", reg.host()), None);
    assert_eq!(code, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["repositories"],
        json!([]),
        "a stalled spec pushed"
    );
    // Fixing the spec publishes.
    settings_image(
        k,
        &ns,
        "bad-repo",
        &format!("{source}  repository: {}/lower\n", reg.host()),
    );
    ctl.wait(
        k,
        &ns,
        "bad-repo",
        "published after the fix",
        is_ready_for(&format!("main@sha1:{c1}")),
    );
}

/// Without `--kubeconfig`, `KUBECONFIG` names the cluster (the path a
/// laptop run takes); with neither, outside a pod and without
/// ~/.kube/config, it exits saying where it looked.
#[test]
fn the_cluster_comes_from_kubeconfig_and_without_one_the_error_says_where_it_looked() {
    let Start { k, ns, reg, up, c1 } = start("kubeconfig-env");
    git_repository(k, &ns, "settings", &up.url(), None);
    fetched(k, &ns, "settings", &c1);
    app_image(k, &ns, &reg.host(), "");
    let ctl = Controller::start_from(k, &ns, &[], &[], ConfigFrom::Env);
    ctl.wait(
        k,
        &ns,
        "app",
        "published with KUBECONFIG",
        is_ready_for(&format!("main@sha1:{c1}")),
    );
    assert!(
        ctl.logs().contains("connected to Kubernetes"),
        "{}",
        ctl.logs()
    );
    drop(ctl);

    let home = TempDir::new();
    let missing = home.path().join("no-such-kubeconfig");
    let fails = |kubeconfig: Option<&Path>| {
        let mut cmd = Command::new(bin());
        cmd.args(["controller", "--namespace", &ns])
            .arg(format!("--metrics-bind-address=127.0.0.1:{}", free_port()))
            .arg(format!(
                "--health-probe-bind-address=127.0.0.1:{}",
                free_port()
            ))
            .env("HOME", home.path())
            .env_remove("KUBECONFIG")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env_remove("KUBERNETES_SERVICE_PORT")
            .stdin(Stdio::null());
        if let Some(path) = kubeconfig {
            cmd.env("KUBECONFIG", path);
        }
        let out = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        // No cluster to talk to is the run's input: exit 2.
        assert_eq!(out.status.code(), Some(2), "{err}");
        err
    };
    // A KUBECONFIG that names nothing is that error, not a search elsewhere.
    let err = fails(Some(&missing));
    assert!(err.contains("using KUBECONFIG"), "{err}");
    let err = fails(None);
    assert!(
        err.contains("no cluster to talk to")
            && err.contains("not in a cluster")
            && err.contains("~/.kube/config"),
        "{err}"
    );
}

// ------------------------------------------------------------------ operations

/// Two replicas with --leader-elect: one publishes; when it stops, the
/// other takes the Lease and publishes the next revision.
#[test]
fn two_replicas_one_publishes_and_the_other_takes_over() {
    let Start { k, ns, reg, up, c1 } = start("leader");
    follow_app(k, &ns, &up, &reg.host(), "");
    let lease = format!("lease-{ns}");
    let args = [
        "--leader-elect",
        "--leader-election-namespace",
        SYSTEM,
        "--leader-election-id",
        &lease,
    ];
    let mut a = Controller::start(k, &ns, &args);
    let holder = || -> String {
        k.get(SYSTEM, &format!("lease/{lease}"))["spec"]["holderIdentity"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    a.metrics_until("A never led", |m| {
        m.get("settings_image_leader") == Some(&1.0)
    });
    let b = Controller::start(k, &ns, &args);
    fetched(k, &ns, "settings", &c1);
    a.wait(
        k,
        &ns,
        "app",
        "published by A",
        is_ready_for(&format!("main@sha1:{c1}")),
    );
    assert_eq!(
        scrape(b.metrics).get("settings_image_leader"),
        Some(&0.0),
        "B leads too"
    );
    assert_eq!(
        scrape(b.metrics).get("settings_image_publishes_total"),
        Some(&0.0)
    );
    assert_eq!(
        scrape(a.metrics).get("settings_image_publishes_total"),
        Some(&1.0)
    );
    let first = holder();
    assert!(!first.is_empty());
    // A stops (SIGTERM: it releases the Lease); B takes over.
    assert_eq!(a.terminate(), 0, "A's exit:\n{}", a.logs());
    let c2 = up.commit(&[("app/a.yaml", "a: 2\n")], 1_700_000_100);
    fetched(k, &ns, "settings", &c2);
    b.wait(
        k,
        &ns,
        "app",
        "published by B",
        is_ready_for(&format!("main@sha1:{c2}")),
    );
    assert_eq!(
        scrape(b.metrics).get("settings_image_publishes_total"),
        Some(&1.0)
    );
    assert_ne!(holder(), first);
    assert!(tags_of(&reg, "app").contains(&up.tag("main", &c2, "app")));
}

/// SIGTERM while a push is uploading: the controller lets it finish (or,
/// past --graceful-shutdown-timeout, abandons it without a tag) and exits
/// 0 without leaving temporary files.
#[test]
fn sigterm_mid_push_finishes_or_abandons_cleanly() {
    let Start { k, ns, reg, up, c1 } = start("sigterm");
    let proxy = Proxy::start(reg.port);
    follow_app(k, &ns, &up, &proxy.host(), "  provenance: false\n");
    fetched(k, &ns, "settings", &c1);

    // 1. Abandoned: a blob upload never ends within the 1 s grace.
    let (started, release) = proxy.hold_first(&["PUT", "PATCH"], "/blobs/uploads/", true);
    // The registry client would wait an hour for the held upload: only
    // abandoning it lets the process exit.
    let mut ctl = Controller::start_env(
        k,
        &ns,
        &["--graceful-shutdown-timeout=1s"],
        &[
            ("SETTINGS_IMAGE_REQUEST_TIMEOUT", "3600"),
            ("SETTINGS_IMAGE_PUSH_TIMEOUT", "3600"),
        ],
    );
    started
        .recv_timeout(Duration::from_secs(120))
        .unwrap_or_else(|_| panic!("no upload started:\n{}", ctl.logs()));
    assert_eq!(ctl.terminate(), 0, "{}", ctl.logs());
    assert!(ctl.logs().contains("abandoned"), "{}", ctl.logs());
    let _ = release.send(());
    assert!(
        tags_of(&reg, "app").is_empty(),
        "an abandoned push wrote a tag"
    );
    assert_no_layer_files(&ctl);

    // 2. Finished: the manifest's upload ends after SIGTERM, within the
    // grace. The proxy holds the manifest's PUT, SIGTERM comes, and the PUT
    // goes on to the registry only once the controller has taken the
    // signal (its log says so) or has exited: the proxy records whether
    // the controller was still connected when the registry's answer went
    // back to it, which a controller that exits at SIGTERM is not.
    proxy.take();
    let (started, release) = proxy.hold_first(&["PUT", "PATCH"], "/manifests/", false);
    let mut ctl = Controller::start(k, &ns, &["--graceful-shutdown-timeout=120s"]);
    started
        .recv_timeout(Duration::from_secs(120))
        .unwrap_or_else(|_| panic!("no upload started:\n{}", ctl.logs()));
    let pid = ctl.pid();
    run_ok(Command::new("kill").args(["-TERM", &pid.to_string()]));
    eventually(Duration::from_secs(120), Duration::from_millis(20), || {
        let logs = ctl.logs();
        let taken = logs.contains("SIGTERM: finishing the running publishes");
        if taken || ctl.exited().is_some() {
            Ok(())
        } else {
            Err(format!("SIGTERM neither taken nor fatal:\n{logs}"))
        }
    });
    release.send(()).unwrap();
    let status = ctl.wait_exit();
    assert_eq!(status.code(), Some(0), "{}", ctl.logs());
    let put = proxy
        .take()
        .into_iter()
        .find(|s| s.method == "PUT" && s.path.contains("/manifests/"))
        .unwrap_or_else(|| {
            panic!(
                "the held manifest PUT never reached the registry (its connection was gone when \
                 released):\n{}",
                ctl.logs()
            )
        });
    assert_eq!(put.status, 201, "{put:?}");
    assert!(
        put.client_open,
        "the controller was gone when the registry's answer to its manifest came back:\n{}",
        ctl.logs()
    );
    assert!(
        ctl.logs().contains("every running publish finished"),
        "{}",
        ctl.logs()
    );
    assert!(
        tags_of(&reg, "app").contains(&up.tag("main", &c1, "app")),
        "{}",
        ctl.logs()
    );
    assert_no_layer_files(&ctl);
}

/// The ImagePolicy among `docs` filters tags by a pattern that starts
/// with `start`.
fn assert_policy_pattern(docs: &[Value], start: &str) {
    let policy = docs
        .iter()
        .find(|d| d["kind"] == "ImagePolicy")
        .expect("an ImagePolicy");
    assert!(
        policy["spec"]["filterTags"]["pattern"]
            .as_str()
            .unwrap()
            .starts_with(start),
        "{policy}"
    );
}

/// `settings-image flux --settings-image FILE`: the Flux objects that follow
/// what a SettingsImage publishes, accepted by the API server with Flux's
/// CRDs (server dry run).
#[test]
fn flux_prints_the_objects_that_follow_a_settings_image() {
    let k = cluster();
    let ns = namespace(k, "follow");
    let dir = TempDir::new();
    let file = dir.join("si.yaml");
    std::fs::write(
        &file,
        format!(
            "apiVersion: settings-image.configbutler.io/v1alpha1\nkind: SettingsImage\nmetadata:\n  name: shop\n  namespace: {ns}\n\
             spec:\n  sourceRef:\n    kind: GitRepository\n    name: settings\n  path: configs/shop\n  repository: ghcr.io/acme/settings-{{name}}\n\
             \x20 timestampTag: main\n  secretRef:\n    name: ghcr-pull\n"
        ),
    )
    .unwrap();
    let out = TestCommand::new()
        .args(["flux", "--no-automation", "--settings-image"])
        .arg(&file)
        .ok();
    let docs = common::yaml_documents(&out);
    let repo = docs
        .iter()
        .find(|d| d["kind"] == "ImageRepository")
        .expect("an ImageRepository");
    assert_eq!(repo["spec"]["image"], "ghcr.io/acme/settings-shop");
    assert_eq!(repo["spec"]["secretRef"]["name"], "ghcr-pull");
    assert_eq!(repo["metadata"]["namespace"], ns.as_str());
    assert_policy_pattern(&docs, "^main-");
    k.dry_run_ok(&out, "the objects of --settings-image");
    // Without a timestampTag the controller's default is the branch of the
    // GitRepository: read from the same file, as docs/controller.md's
    // worked example keeps them (one file, two documents).
    let without = std::fs::read_to_string(&file)
        .unwrap()
        .replace("  timestampTag: main\n", "");
    let flux = |text: &str| {
        std::fs::write(&file, text).unwrap();
        TestCommand::new()
            .args(["flux", "--no-automation", "--settings-image"])
            .arg(&file)
            .output()
    };
    let git_repository = |reference: &str| {
        format!(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: settings\n  namespace: {ns}\n\
             spec:\n  interval: 1m\n  url: https://git.example.com/acme/settings.git\n  ref: {reference}\n"
        )
    };
    let out = flux(&format!(
        "{}---\n{without}",
        git_repository("{branch: prod}")
    ));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_policy_pattern(&common::yaml_documents(&printed), "^prod-");
    k.dry_run_ok(
        &printed,
        "the objects of a GitRepository and a SettingsImage",
    );
    // Neither a timestampTag nor the GitRepository: exit 2, with every way out.
    let out = flux(&without);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "spec.timestampTag is not set, and the file does not hold GitRepository settings"
        ) && err.contains("--prefix BRANCH"),
        "{err}"
    );
    // A GitRepository that follows a tag: what the controller does with it.
    let out = flux(&format!(
        "{without}---\n{}",
        git_repository("{tag: v1.0.0}")
    ));
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("Stalled UnsupportedSource"), "{err}");
}

/// A git server that cannot be reached is a retried `GitOperationFailed`
/// (nothing pushed) until the GitRepository names one that answers;
/// `suspend: true` then publishes nothing for a new revision, though the
/// reconcile runs (counted as `suspended`), and resuming publishes it.
#[test]
fn a_git_outage_is_retried_and_a_suspended_image_waits() {
    let Start { k, ns, reg, up, c1 } = start("gitdown");
    // Nothing listens on this port: the mirror's clone cannot connect.
    let dead = format!("http://127.0.0.1:{}/settings.git", free_port());
    git_repository(k, &ns, "settings", &dead, None);
    app_image(k, &ns, &reg.host(), "  provenance: false\n");
    fetched(k, &ns, "settings", &c1);
    let ctl = Controller::start(k, &ns, &[]);
    let v = ctl.wait(k, &ns, "app", "Ready=False GitOperationFailed", |v| {
        condition(v, "Ready").is_some_and(|c| c.0 == "False" && c.1 == "GitOperationFailed")
    });
    let ready = condition(&v, "Ready").unwrap();
    assert!(ready.2.contains("127.0.0.1"), "{ready:?}");
    assert_eq!(
        condition(&v, "Reconciling").unwrap().1,
        "ProgressingWithRetry"
    );
    assert!(condition(&v, "Stalled").is_none(), "{:#}", v["status"]);
    assert!(tags_of(&reg, "app").is_empty());
    assert!(
        events(k, &ns, "app")
            .iter()
            .any(|e| e.0 == "Warning" && e.1 == "GitOperationFailed"),
        "{:?}",
        events(k, &ns, "app")
    );
    // The GitRepository now names the server that answers.
    git_repository(k, &ns, "settings", &up.url(), None);
    fetched(k, &ns, "settings", &c1);
    ctl.wait(
        k,
        &ns,
        "app",
        "Ready once git answers",
        is_ready_for(&format!("main@sha1:{c1}")),
    );
    assert_eq!(
        tags_of(&reg, "app"),
        std::collections::BTreeSet::from([up.tag("main", &c1, "app")])
    );

    let suspended = |ctl: &Controller| {
        scrape(ctl.metrics)
            .get("settings_image_reconciles_total{result=\"suspended\"}")
            .copied()
            .unwrap_or(0.0)
    };
    let wait_suspended = |ctl: &Controller, at_least: f64| {
        eventually(Duration::from_secs(180), Duration::from_millis(100), || {
            if suspended(ctl) >= at_least {
                Ok(())
            } else {
                Err(format!("no suspended reconcile:\n{}", ctl.logs()))
            }
        })
    };
    app_image(
        k,
        &ns,
        &reg.host(),
        "  provenance: false\n  suspend: true\n",
    );
    wait_suspended(&ctl, 1.0);
    let before = suspended(&ctl);
    let c2 = up.commit(&[("app/a.yaml", "a: 2\n")], 1_700_000_100);
    fetched(k, &ns, "settings", &c2);
    // The new revision's reconcile ran and chose to publish nothing.
    wait_suspended(&ctl, before + 1.0);
    assert_eq!(
        tags_of(&reg, "app"),
        std::collections::BTreeSet::from([up.tag("main", &c1, "app")])
    );
    let v = k.get(&ns, "settingsimage/app");
    assert_eq!(
        v["status"]["lastHandledRevision"],
        format!("main@sha1:{c1}")
    );
    app_image(k, &ns, &reg.host(), "  provenance: false\n");
    let v = ctl.wait(
        k,
        &ns,
        "app",
        "Ready for the revision fetched while suspended",
        is_ready_for(&format!("main@sha1:{c2}")),
    );
    assert_eq!(
        v["status"]["images"][0]["tag"],
        up.tag("main", &c2, "app").as_str()
    );
    assert_eq!(
        tags_of(&reg, "app"),
        std::collections::BTreeSet::from([up.tag("main", &c1, "app"), up.tag("main", &c2, "app")])
    );
}

/// A folder with capitals under a `{name}` template: the controller writes
/// to the repository `flux --settings-image` generates for the same
/// SettingsImage (the one mapping, lower-cased), says so in the Ready
/// message and a Normal Event as `push` does in its notice, and Flux
/// (the oracle over the registry's tags) serves the tag the status names.
#[test]
fn a_folder_with_capitals_goes_where_flux_looks() {
    let k = cluster();
    let ns = namespace(k, "capitals");
    let reg = Registry::start(Auth::None);
    let up = Upstream::start(GitOptions::default());
    let c1 = up.commit(&[("configs/Cart/a.yaml", "a: 1\n")], 1_700_000_000);
    git_repository(k, &ns, "settings", &up.url(), None);
    let spec = format!(
        "  sourceRef:\n    kind: GitRepository\n    name: settings\n  path: configs/Cart\n  repository: {}/settings-{{name}}\n  timestampTag: main\n",
        reg.host()
    );
    settings_image(k, &ns, "cart", &spec);
    fetched(k, &ns, "settings", &c1);
    let ctl = Controller::start(k, &ns, &[]);
    let v = ctl.wait(
        k,
        &ns,
        "cart",
        "published",
        is_ready_for(&format!("main@sha1:{c1}")),
    );
    // What `flux --settings-image` generates for the same object, in a
    // checkout of the same commit.
    let dir = TempDir::new();
    let file = dir.join("si.yaml");
    std::fs::write(
        &file,
        format!(
            "apiVersion: settings-image.configbutler.io/v1alpha1\nkind: SettingsImage\nmetadata:\n  name: cart\n  namespace: {ns}\nspec:\n{spec}"
        ),
    )
    .unwrap();
    let flux = TestCommand::new()
        .current_dir(&up.work)
        .args(["flux", "--no-automation", "--settings-image"])
        .arg(&file)
        .output();
    assert!(
        flux.status.success(),
        "{}",
        String::from_utf8_lossy(&flux.stderr)
    );
    let flux_notice = String::from_utf8_lossy(&flux.stderr).into_owned();
    let generated = common::yaml_documents(&String::from_utf8_lossy(&flux.stdout));
    let watched = generated
        .iter()
        .find(|d| d["kind"] == "ImageRepository")
        .expect("an ImageRepository")["spec"]["image"]
        .as_str()
        .unwrap()
        .to_string();
    let img = &v["status"]["images"][0];
    assert_eq!(img["repository"], watched.as_str());
    assert_eq!(watched, format!("{}/settings-cart", reg.host()));
    let listed: Vec<String> = tags_of(&reg, "settings-cart").into_iter().collect();
    assert_eq!(
        common::flux::served("main", &listed).as_deref(),
        img["tag"].as_str(),
        "{listed:?}"
    );
    // The notice, as `flux` (and `push`) print it.
    let ready = condition(&v, "Ready").unwrap();
    assert!(
        ready
            .2
            .contains("notice RepositoryLowerCased: the folder configs/Cart has capitals"),
        "{ready:?}"
    );
    assert!(
        flux_notice.contains("the folder configs/Cart has capitals"),
        "{flux_notice}"
    );
    wait_events(k, &ns, "cart", "RepositoryLowerCased", |evs| {
        evs.iter().any(|(t, r, n)| {
            t == "Normal" && r == "RepositoryLowerCased" && n.contains("settings-cart")
        })
    });
}

// ------------------------------------------------------------------ hostile

/// A smart-HTTP advertisement from a git server that refuses with its own
/// words: its first line is `ERR <words>`, what the protocol lets a server
/// say (gix reports the words; the body of an HTTP error it does not).
fn git_err_line(out: &mut std::net::TcpStream, words: &str) -> bool {
    use std::io::Write as _;
    let pkt = |s: &str| format!("{:04x}{s}", s.len() + 4);
    let body = format!(
        "{}0000{}",
        pkt("# service=git-upload-pack\n"),
        pkt(&format!("ERR {words}\n"))
    );
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/x-git-upload-pack-advertisement\r\nContent-Length: {}\r\nCache-Control: no-cache\r\n\r\n",
        body.len()
    );
    out.write_all(head.as_bytes()).is_ok() && out.write_all(body.as_bytes()).is_ok()
}

/// Every form in which an echoing server shows `user:password` (what
/// `Authorization: Basic` carries: base64, padded or not, URL-safe too)
/// and the password itself.
fn basic_forms(user: &str, password: &str) -> Vec<String> {
    use base64::Engine as _;
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    let basic = format!("{user}:{password}");
    let mut v = vec![password.to_string(), basic.clone()];
    for e in [STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD] {
        v.push(e.encode(&basic));
    }
    v
}

/// Servers whose refusal quotes the request's `Authorization` header: a
/// git server's `ERR` line (basic auth and a bearer token from the
/// GitRepository's Secret) and a registry's error (the `.dockerconfigjson`
/// credentials). No credential appears in any status, Event or log line;
/// the servers' words do, with `<redacted>` where the credentials were.
#[test]
fn servers_echoing_the_credentials_leave_them_in_no_status_event_or_log() {
    use common::registry::{Stub, echoing_registry};
    let k = cluster();
    let ns = namespace(k, "echo");
    let reg = Registry::start(Auth::None);
    let commit = "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567";
    let (user, password, token) = ("reader", "git-s3cret-pw", "tok-s3cret-bearer");
    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)]);
    let git_cases: [Case; 2] = [
        ("basic", &[("username", user), ("password", password)]),
        ("bearer", &[("bearerToken", token)]),
    ];
    let mut stubs = Vec::new();
    for (name, data) in git_cases {
        let stub = Stub::start(move |head, out| {
            let sent = head.header("authorization").unwrap_or("nothing");
            git_err_line(
                out,
                &format!(
                    "access denied for {}: you sent Authorization: {sent}",
                    head.path
                ),
            )
        });
        let data: String = data.iter().map(|(k, v)| format!("  {k}: {v}\n")).collect();
        k.apply(&format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\n  namespace: {ns}\nstringData:\n{data}"
        ));
        git_repository(
            k,
            &ns,
            name,
            &format!("http://{}/settings.git", stub.host()),
            Some(name),
        );
        fetched(k, &ns, name, commit);
        settings_image(
            k,
            &ns,
            name,
            &format!(
                "  sourceRef:\n    kind: GitRepository\n    name: {name}\n  path: app\n  repository: {}/{name}\n",
                reg.host()
            ),
        );
        stubs.push(stub);
    }
    // The registry: a real git server, a registry stub whose upload error
    // echoes the header.
    let (push_user, push_password) = ("pusher", "reg-s3cret-pw");
    let registry = echoing_registry();
    let up = Upstream::start(GitOptions::default());
    let c1 = up.commit(&[("app/a.yaml", "a: 1\n")], 1_700_000_000);
    git_repository(k, &ns, "settings", &up.url(), None);
    fetched(k, &ns, "settings", &c1);
    let dockerconfig =
        json!({"auths": {registry.host(): {"username": push_user, "password": push_password}}})
            .to_string();
    k.apply(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: push\n  namespace: {ns}\ntype: kubernetes.io/dockerconfigjson\nstringData:\n  .dockerconfigjson: '{dockerconfig}'\n"
    ));
    settings_image(
        k,
        &ns,
        "registry",
        &format!(
            "  sourceRef:\n    kind: GitRepository\n    name: settings\n  path: app\n  repository: {}/app\n  secretRef:\n    name: push\n  provenance: false\n",
            registry.host()
        ),
    );
    let ctl = Controller::start(k, &ns, &[]);
    let mut secrets = basic_forms(user, password);
    secrets.push(token.to_string());
    secrets.extend(basic_forms(push_user, push_password));
    let sent_by = |stub: &Stub| -> Vec<String> {
        stub.seen
            .lock()
            .unwrap()
            .iter()
            .filter_map(|(_, _, h)| {
                h.iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case("authorization"))
                    .map(|(_, v)| v.clone())
            })
            .collect()
    };
    for (name, stub) in [
        ("basic", &stubs[0]),
        ("bearer", &stubs[1]),
        ("registry", &registry),
    ] {
        let v = ctl.wait(k, &ns, name, "Ready=False with the server's words", |v| {
            condition(v, "Ready")
                .is_some_and(|c| c.0 == "False" && c.2.contains("you sent Authorization"))
        });
        // The server did get the credentials (else there is nothing to hide).
        let sent = sent_by(stub);
        assert!(
            sent.iter()
                .any(|a| secrets.iter().any(|s| a.ends_with(s.as_str()))),
            "{name}: the server got no credentials: {sent:?}"
        );
        let status = v["status"].to_string();
        let notes: Vec<String> = events(k, &ns, name).into_iter().map(|e| e.2).collect();
        assert!(!notes.is_empty(), "{name}: no Event");
        for s in &secrets {
            assert!(
                !status.contains(s.as_str()),
                "{name}: {s} in the status: {status}"
            );
            assert!(
                notes.iter().all(|n| !n.contains(s.as_str())),
                "{name}: {s} in an Event: {notes:?}"
            );
        }
        let ready = condition(&v, "Ready").unwrap();
        assert!(ready.2.contains("<redacted>"), "{name}: {ready:?}");
    }
    let logs = ctl.logs();
    assert!(logs.contains("you sent Authorization"), "{logs}");
    for s in &secrets {
        assert!(!logs.contains(s.as_str()), "{s} in the log:\n{logs}");
    }
}

/// The documented several-namespace setup (the ClusterRole bound in each
/// tenant's namespace): a SettingsImage in tenant B that names tenant A's
/// private GitRepository (`spec.sourceRef.namespace`) stalls with
/// `AccessDenied` naming the field; A's git server is never asked and
/// nothing is pushed. Only `--allow-cross-namespace-refs` lets it publish.
#[test]
fn a_tenant_cannot_publish_another_tenants_repository() {
    let k = cluster();
    let ns_a = namespace(k, "tenant-a");
    let ns_b = namespace(k, "tenant-b");
    let reg = Registry::start(Auth::None);
    let up = Upstream::start(GitOptions {
        basic: Some(("a-reader".into(), "a-s3cret".into())),
        ..GitOptions::default()
    });
    let c1 = up.commit(&[("app/a.yaml", "private: 1\n")], 1_700_000_000);
    k.apply(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: git-auth\n  namespace: {ns_a}\nstringData:\n  username: a-reader\n  password: a-s3cret\n"
    ));
    git_repository(k, &ns_a, "private", &up.url(), Some("git-auth"));
    fetched(k, &ns_a, "private", &c1);
    settings_image(
        k,
        &ns_b,
        "stolen",
        &format!(
            "  sourceRef:\n    kind: GitRepository\n    name: private\n    namespace: {ns_a}\n  path: app\n  repository: {}/stolen\n",
            reg.host()
        ),
    );
    let ctl = Controller::start(k, &ns_b, &[]);
    let v = ctl.wait(k, &ns_b, "stolen", "Stalled", |v| {
        condition(v, "Stalled").is_some_and(|c| c.0 == "True")
    });
    let (_, reason, message) = condition(&v, "Stalled").unwrap();
    assert_eq!(reason, "AccessDenied", "{message}");
    assert!(
        message.starts_with("spec.sourceRef.namespace:")
            && message.contains(&format!("GitRepository {ns_a}/private"))
            && message.contains("--allow-cross-namespace-refs"),
        "{message}"
    );
    assert_eq!(
        condition(&v, "Ready").map(|c| (c.0, c.1)),
        Some(("False".into(), "AccessDenied".into()))
    );
    assert!(
        events(k, &ns_b, "stolen")
            .iter()
            .any(|e| e.0 == "Warning" && e.1 == "AccessDenied")
    );
    assert!(
        up.server.hits().is_empty(),
        "tenant A's git server was asked: {:?}",
        up.server.hits()
    );
    assert!(tags_of(&reg, "stolen").is_empty());
    drop(ctl);
    // The opt-in: the same object publishes (the reference itself is right).
    let ctl = Controller::start(k, &ns_b, &["--allow-cross-namespace-refs"]);
    ctl.wait(
        k,
        &ns_b,
        "stolen",
        "published with --allow-cross-namespace-refs",
        is_ready_for(&format!("main@sha1:{c1}")),
    );
    assert!(tags_of(&reg, "stolen").contains(&up.tag("main", &c1, "app")));
}

/// A commit whose folder nests more trees than the walk allows (served by
/// a git server that serves anything: `core.maxTreeDepth` raised, as a
/// hostile server would) stalls its SettingsImage, `BuildFailed`, naming
/// the bound; the controller, which aborted on a stack overflow with the
/// recursive walk, runs on and publishes the next tenant's folder.
#[test]
fn a_folder_nested_past_the_depth_bound_stalls_and_others_still_publish() {
    let Start { k, ns, reg, up, c1 } = start("nested");
    let bare = up._root.join("srv/settings.git");
    run_ok(git_cmd(&up.home, &bare).args(["config", "core.maxTreeDepth", "100000"]));
    // 2100 folders: past the bound, few enough that git's warnings about
    // paths longer than PATH_MAX stay short.
    let deep = common::git::commit_nested(&up.home, &bare, "deep", 2100, 1_700_000_100);
    git_repository(k, &ns, "settings", &up.url(), None);
    fetched(k, &ns, "settings", &deep);
    let spec = |path: &str, name: &str| {
        format!(
            "  sourceRef:\n    kind: GitRepository\n    name: settings\n  path: {path}\n  repository: {}/{name}\n",
            reg.host()
        )
    };
    settings_image(k, &ns, "deep", &spec("deep", "deep"));
    let mut ctl = Controller::start(k, &ns, &[]);
    let v = ctl.wait(k, &ns, "deep", "Stalled", |v| {
        condition(v, "Stalled").is_some_and(|c| c.0 == "True")
    });
    let (_, reason, message) = condition(&v, "Stalled").unwrap();
    assert_eq!(reason, "BuildFailed", "{message}");
    assert!(
        message.contains(&format!(
            "deep: holds a folder nested more than 2048 levels deep in commit {deep}"
        )) && message.contains("2048 levels is the most a settings image holds"),
        "{message}"
    );
    assert!(tags_of(&reg, "deep").is_empty());
    // Still running: the next tenant's folder publishes.
    settings_image(k, &ns, "fine", &spec("app", "fine"));
    ctl.wait(
        k,
        &ns,
        "fine",
        "published beside the stalled one",
        is_ready_for(&format!("main@sha1:{deep}")),
    );
    assert!(ctl.exited().is_none(), "{}", ctl.logs());
    // The folder's last change is the first commit (git names it).
    assert!(tags_of(&reg, "fine").contains(&up.tag("main", &c1, "app")));
}

/// A namespace where the controller may read SettingsImages but has no
/// RoleBinding to write their status: the failed write was logged as an
/// error every 5 s, for ever. Now it is one error line naming the missing
/// RoleBinding, then debug lines while retries back off (5 s, 10 s,
/// 20 s); once the RoleBinding is there, the status is written.
#[test]
fn a_namespace_without_a_role_binding_is_said_once_and_retried_with_backoff() {
    let k = cluster();
    let ns = format!("unbound-{:x}", fastrand_u32());
    k.namespace(&ns);
    // Enough to see the objects, not to write their status.
    k.apply(&format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: read-only\n  namespace: {ns}\n\
         rules:\n- apiGroups: [settings-image.configbutler.io, source.toolkit.fluxcd.io]\n  resources: [settingsimages, gitrepositories]\n  verbs: [get, list, watch]\n\
         ---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: read-only\n  namespace: {ns}\n\
         roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: read-only\n\
         subjects:\n- kind: ServiceAccount\n  name: settings-image-controller\n  namespace: {SYSTEM}\n"
    ));
    git_repository(k, &ns, "settings", "http://127.0.0.1:9/settings.git", None);
    settings_image(
        k,
        &ns,
        "shop",
        "  sourceRef:\n    kind: GitRepository\n    name: settings\n  path: app\n  repository: 127.0.0.1:9/shop\n",
    );
    let ctl = Controller::start(k, &ns, &["--log-level", "debug"]);
    let failed = "settings_image_reconciles_total{result=\"failed\"}";
    ctl.metrics_until("no third attempt", |m| {
        m.get(failed).copied().unwrap_or(0.0) >= 3.0
    });
    let lines: Vec<Value> = ctl
        .logs()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| {
            v["settingsimage"] == "shop"
                && v["msg"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("writing the status"))
        })
        .collect();
    let errors: Vec<&Value> = lines.iter().filter(|v| v["level"] == "error").collect();
    assert_eq!(errors.len(), 1, "one error line: {lines:#?}");
    assert_eq!(errors[0]["retryInSeconds"], 5);
    assert!(
        errors[0]["hint"]
            .as_str()
            .is_some_and(|h| h.contains(&format!("in namespace {ns} with a RoleBinding"))),
        "{:#}",
        errors[0]
    );
    let retries: Vec<(u64, u64)> = lines
        .iter()
        .filter(|v| v["level"] == "debug")
        .map(|v| {
            (
                v["failures"].as_u64().unwrap(),
                v["retryInSeconds"].as_u64().unwrap(),
            )
        })
        .collect();
    assert!(retries.starts_with(&[(2, 10), (3, 20)]), "{retries:?}");
    // Bound: the status is written (no artifact yet), on the next change.
    k.apply(&format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: settings-image-controller\n  namespace: {ns}\n\
         roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: settings-image-controller\n\
         subjects:\n- kind: ServiceAccount\n  name: settings-image-controller\n  namespace: {SYSTEM}\n"
    ));
    run_ok(k.kubectl().args([
        "annotate",
        "--overwrite",
        "-n",
        &ns,
        "settingsimage/shop",
        "touched=1",
    ]));
    ctl.wait(k, &ns, "shop", "Ready=False ArtifactNotReady", |v| {
        condition(v, "Ready").is_some_and(|c| c.1 == "ArtifactNotReady")
    });
}

/// `interval: 1ms` (the CRD's pattern accepts it) is raised to
/// `--min-interval`, and the Ready message says so: a reconcile within it
/// (Flux's requestedAt annotation) asks neither git nor the registry, where
/// a 1 ms interval would have fetched and checked again about ten times a
/// second, for ever.
#[test]
fn an_interval_below_the_floor_is_raised_to_it() {
    let Start { k, ns, reg, up, c1 } = start("floor");
    let proxy = Proxy::start(reg.port);
    git_repository(k, &ns, "settings", &up.url(), None);
    fetched(k, &ns, "settings", &c1);
    app_image(k, &ns, &proxy.host(), "  interval: 1ms\n");
    let ctl = Controller::start(k, &ns, &["--min-interval=1h"]);
    let v = ctl.wait(
        k,
        &ns,
        "app",
        "published",
        is_ready_for(&format!("main@sha1:{c1}")),
    );
    let ready = condition(&v, "Ready").unwrap();
    assert!(
        ready.2.contains(
            "notice IntervalRaised: spec.interval 1ms is below the controller's --min-interval: checked every 1h"
        ),
        "{ready:?}"
    );
    // The publish is counted after its status is written: wait for it.
    let before = ctl.metrics_until("no publish counted", |m| reconciles(m, "published") >= 1.0);
    let git_before = up.server.hits().len();
    proxy.take();
    request_reconcile(k, &ns, "app");
    // The next reconcile, whatever it decides.
    let after = ctl.metrics_until("no reconcile", |m| {
        reconciles(m, "unchanged") + reconciles(m, "published")
            > reconciles(&before, "unchanged") + reconciles(&before, "published")
    });
    assert_eq!(
        reconciles(&after, "published"),
        reconciles(&before, "published"),
        "published again within the floor"
    );
    assert_eq!(up.server.hits().len(), git_before, "git was asked again");
    assert!(proxy.take().is_empty(), "the registry was asked again");
}

/// A TCP relay on loopback in front of `127.0.0.1:target` that a test can
/// freeze: from then on it forwards nothing, either way, on any connection
/// (new ones are accepted and go nowhere) and closes nothing, as a network
/// that stops delivering leaves a client: its requests hang.
struct Relay {
    port: u16,
    frozen: Arc<std::sync::atomic::AtomicBool>,
}

impl Relay {
    fn start(target: u16) -> Relay {
        use std::io::{Read as _, Write as _};
        use std::sync::atomic::{AtomicBool, Ordering};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let frozen = Arc::new(AtomicBool::new(false));
        let f = frozen.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = std::net::TcpStream::connect(("127.0.0.1", target)) else {
                    continue;
                };
                for (mut from, mut to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    let f = f.clone();
                    std::thread::spawn(move || {
                        // Short reads, so a freeze takes effect between two.
                        from.set_read_timeout(Some(Duration::from_millis(50)))
                            .unwrap();
                        let mut buf = [0u8; 16 * 1024];
                        loop {
                            if f.load(Ordering::SeqCst) {
                                // Frozen: hold the connection, move nothing.
                                std::thread::sleep(Duration::from_millis(50));
                                continue;
                            }
                            match from.read(&mut buf) {
                                Ok(0) => {
                                    let _ = to.shutdown(std::net::Shutdown::Write);
                                    return;
                                }
                                Ok(n) => {
                                    if to.write_all(&buf[..n]).is_err() {
                                        return;
                                    }
                                }
                                Err(e)
                                    if matches!(
                                        e.kind(),
                                        std::io::ErrorKind::WouldBlock
                                            | std::io::ErrorKind::TimedOut
                                    ) => {}
                                Err(_) => return,
                            }
                        }
                    });
                }
            }
        });
        Relay { port, frozen }
    }

    fn freeze(&self) {
        self.frozen.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Two replicas with --leader-elect; the leader's connection to the API
/// server stops answering (nothing is closed) while it uploads. It must
/// stop leading, and exit, within --leader-elect-renew-deadline of its last
/// renewal, before the standby can take the Lease (after the lease
/// duration): at the moment the standby first reports leading, the old
/// leader's process is gone. The standby then publishes the revision.
#[test]
fn a_leader_cut_off_from_the_api_server_exits_before_another_leads() {
    let Start { k, ns, reg, up, c1 } = start("cutoff");
    let proxy = Proxy::start(reg.port);
    follow_app(k, &ns, &up, &proxy.host(), "  provenance: false\n");
    let lease = format!("lease-{ns}");
    let args = [
        "--leader-elect",
        "--leader-election-namespace",
        SYSTEM,
        "--leader-election-id",
        &lease,
        "--leader-elect-lease-duration=6s",
        "--leader-elect-renew-deadline=3s",
        "--leader-elect-retry-period=1s",
    ];
    let api_port: u16 = k.url.rsplit(':').next().unwrap().parse().unwrap();
    let relay = Relay::start(api_port);
    let mut a = Controller::start_at(
        k,
        &format!("https://127.0.0.1:{}", relay.port),
        &ns,
        &args,
        &[],
        ConfigFrom::Flag,
    );
    let leads = |c: &Controller| scrape(c.metrics).get("settings_image_leader") == Some(&1.0);
    a.metrics_until("A never led", |m| {
        m.get("settings_image_leader") == Some(&1.0)
    });
    let b = Controller::start(k, &ns, &args);
    // A's first blob upload is held at the registry: A is mid-publish.
    let (started_rx, release_tx) =
        proxy.hold_first(&["PUT", "PATCH", "POST"], "/blobs/uploads/", false);
    fetched(k, &ns, "settings", &c1);
    started_rx
        .recv_timeout(Duration::from_secs(120))
        .unwrap_or_else(|_| panic!("A started no upload:\n{}", a.logs()));
    relay.freeze();
    eventually(Duration::from_secs(180), Duration::from_millis(50), || {
        if !leads(&b) {
            return Err(format!("B never led:\nA:\n{}\nB:\n{}", a.logs(), b.logs()));
        }
        let a_gone = a.exited();
        assert!(
            a_gone.is_some(),
            "B leads while A still runs (two leaders):\nA:\n{}\nB:\n{}",
            a.logs(),
            b.logs()
        );
        // Its own exit code: not bad input (2), not a crash (1).
        assert_eq!(a_gone.unwrap().code(), Some(8), "{}", a.logs());
        Ok(())
    });
    assert!(
        a.logs().contains("lost the leader election Lease"),
        "{}",
        a.logs()
    );
    // A's held upload goes on now, from a process that is gone.
    let _ = release_tx.send(());
    b.wait(
        k,
        &ns,
        "app",
        "published by B",
        is_ready_for(&format!("main@sha1:{c1}")),
    );
    assert!(tags_of(&reg, "app").contains(&up.tag("main", &c1, "app")));
}

/// `/readyz`: (status, body).
fn readyz(ctl: &Controller) -> (u16, String) {
    http_get(ctl.probes, "/readyz")
}

/// Waits until `/readyz` satisfies `pred` (the deadline only keeps a
/// broken run from hanging); the time it took.
fn wait_readyz(ctl: &Controller, what: &str, pred: impl Fn(u16, &str) -> bool) -> Duration {
    let start = Instant::now();
    eventually(Duration::from_secs(180), Duration::from_millis(50), || {
        let (code, body) = readyz(ctl);
        if pred(code, &body) {
            Ok(start.elapsed())
        } else {
            Err(format!(
                "/readyz never got to: {what} (last: {code} {body})\n{}",
                ctl.logs()
            ))
        }
    })
}

/// An API server of its own (this test stops it): the controller with the
/// GitRepository CRD missing says so once (no raw 404 in a loop) and
/// /readyz answers 503 naming it; once installed it publishes; with the API
/// server down /readyz answers 503; after the restart (watches come back
/// through "too old resource version") it is ready again and publishes the
/// next revision.
#[test]
fn readyz_means_able_to_publish_through_a_missing_crd_and_an_api_server_restart() {
    let k = common::kube::private();
    apply_config(&k);
    run_ok(k.kubectl().args([
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/settingsimages.settings-image.configbutler.io",
    ]));
    let ns = namespace(&k, "restart");
    let reg = Registry::start(Auth::None);
    let up = Upstream::start(GitOptions::default());
    let c1 = up.commit(&[("app/a.yaml", "a: 1\n")], 1_700_000_000);
    app_image(&k, &ns, &reg.host(), "  provenance: false\n");
    let ctl = Controller::start(&k, &ns, &[]);

    // 1. No GitRepository CRD: not ready, said once, in words, and the
    // SettingsImage's status says the same.
    wait_readyz(&ctl, "503 naming the missing CRD", |code, body| {
        code == 503
            && body.contains(
                "gitrepositories: the GitRepository CRD (source.toolkit.fluxcd.io/v1) is not installed",
            )
    });
    let errors = |ctl: &Controller| {
        scrape(ctl.metrics)
            .get("settings_image_watch_errors_total{resource=\"gitrepositories\"}")
            .copied()
            .unwrap_or(0.0)
    };
    eventually(Duration::from_secs(120), Duration::from_millis(100), || {
        if errors(&ctl) >= 4.0 {
            Ok(())
        } else {
            Err(format!("no retries:\n{}", ctl.logs()))
        }
    });
    let logs = ctl.logs();
    let said: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains("GitRepository CRD") && l.contains("\"warn\""))
        .collect();
    assert_eq!(said.len(), 1, "said once, not per retry:\n{logs}");
    assert!(
        !logs.contains("404 page not found") && !logs.contains("Failed to parse"),
        "a raw 404 in the log:\n{logs}"
    );
    assert_eq!(readyz(&ctl).0, 503);
    let v = ctl.wait(&k, &ns, "app", "Ready=False SourceUnavailable", |v| {
        condition(v, "Ready").is_some_and(|c| c.1 == "SourceUnavailable")
    });
    let ready = condition(&v, "Ready").unwrap();
    assert!(
        ready.2.starts_with(
            "spec.sourceRef: the GitRepository CRD (source.toolkit.fluxcd.io/v1) is not installed"
        ),
        "{ready:?}"
    );

    // 2. Installed: ready, and it publishes.
    k.install_crds(&[
        &common::kube::flux_crd_dir().join("source.toolkit.fluxcd.io_gitrepositories.yaml")
    ]);
    wait_readyz(&ctl, "200 once the CRD is installed", |code, _| code == 200);
    git_repository(&k, &ns, "settings", &up.url(), None);
    fetched(&k, &ns, "settings", &c1);
    ctl.wait(
        &k,
        &ns,
        "app",
        "published rev 1",
        is_ready_for(&format!("main@sha1:{c1}")),
    );

    // 3. The API server goes away: not ready.
    let args = k.stop_apiserver();
    wait_readyz(&ctl, "503 while the API server is down", |code, _| {
        code == 503
    });
    // ... and comes back: ready again, and a new revision is published.
    k.start_apiserver(&args);
    let back = wait_readyz(&ctl, "200 after the restart", |code, _| code == 200);
    let c2 = up.commit(&[("app/a.yaml", "a: 2\n")], 1_700_000_100);
    let fetched_at = Instant::now();
    fetched(&k, &ns, "settings", &c2);
    ctl.wait(
        &k,
        &ns,
        "app",
        "published rev 2",
        is_ready_for(&format!("main@sha1:{c2}")),
    );
    // Measured, not limited (no wall-clock limits in tests): the resume
    // time nextest shows with --success-output.
    eprintln!(
        "ready again {:.1} s after the API server; rev 2 published {:.1} s after it was fetched",
        back.as_secs_f64(),
        fetched_at.elapsed().as_secs_f64()
    );
}

/// `git` in `dir` with `input` on stdin; its stdout, trimmed.
fn git_stdin(home: &Path, dir: &Path, args: &[&str], input: &str) -> String {
    let out = common::output_with_stdin(git_cmd(home, dir).args(args), input.as_bytes());
    assert!(out.status.success(), "git {args:?} failed");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A glob of 100 folders under a 16 KiB prefix (paths git stores as they
/// are, written with its plumbing; listing them all in the status would
/// take 1.7 MB, past the 1.5 MiB etcd stores): every image is pushed,
/// `status.images` lists the first ones that fit and `imagesOmitted`
/// counts the rest, the Ready message says so, and the revision is handled
/// once: a reconcile within the interval asks neither git nor the
/// registry (no write that cannot succeed is retried).
#[test]
fn a_large_glob_bounds_its_status_and_says_what_it_left_out() {
    let k = cluster();
    let ns = namespace(k, "bigglob");
    let reg = Registry::start(Auth::None);
    let proxy = Proxy::start(reg.port);
    let up = Upstream::start(GitOptions::default());
    let c0 = up.commit(&[("README", "x\n")], 1_700_000_000);
    let (home, work) = (&up.home, &up.work);
    let mut folders = String::new();
    for i in 0..100 {
        let blob = git_stdin(
            home,
            work,
            &["hash-object", "-w", "--stdin"],
            &format!("n: {i}\n"),
        );
        let tree = git_stdin(
            home,
            work,
            &["mktree"],
            &format!("100644 blob {blob}\ta.yaml\n"),
        );
        folders.push_str(&format!("040000 tree {tree}\tf{i:03}\n"));
    }
    let mut tree = git_stdin(home, work, &["mktree"], &folders);
    let mut components = Vec::new();
    for level in (0..80).rev() {
        let name = format!("p{level:02}{}", "x".repeat(197));
        tree = git_stdin(
            home,
            work,
            &["mktree"],
            &format!("040000 tree {tree}\t{name}\n"),
        );
        components.push(name);
    }
    components.reverse();
    let prefix = components.join("/");
    let c1 = common::git::run(
        &mut git_cmd(home, work),
        &[
            "commit-tree",
            &tree,
            "-p",
            &c0,
            "-m",
            "a hundred deep folders",
        ],
        Some(1_700_000_100),
    );
    up.git(&["update-ref", "refs/heads/main", &c1]);
    up.git(&["push", "-q", "origin", "main"]);
    git_repository(k, &ns, "settings", &up.url(), None);
    fetched(k, &ns, "settings", &c1);
    settings_image(
        k,
        &ns,
        "all",
        &format!(
            "  sourceRef:\n    kind: GitRepository\n    name: settings\n  path: {prefix}/*\n  repository: {}/settings-{{name}}\n  provenance: false\n",
            proxy.host()
        ),
    );
    let ctl = Controller::start(k, &ns, &[]);
    let v = ctl.wait(
        k,
        &ns,
        "all",
        "Ready for the revision",
        is_ready_for(&format!("main@sha1:{c1}")),
    );
    let images = v["status"]["images"].as_array().unwrap();
    let omitted = v["status"]["imagesOmitted"].as_u64().unwrap_or(0) as usize;
    assert!(
        omitted > 0 && !images.is_empty(),
        "{} listed, {omitted} left out",
        images.len()
    );
    assert_eq!(images.len() + omitted, 100);
    for (i, img) in images.iter().enumerate() {
        let path = format!("{prefix}/f{i:03}");
        assert_eq!(img["path"], path.as_str(), "path order");
        assert_eq!(img["tag"], up.tag("main", &c1, &path).as_str());
    }
    assert!(
        v.to_string().len() < 1024 * 1024,
        "the object is {} bytes",
        v.to_string().len()
    );
    let ready = condition(&v, "Ready").unwrap();
    assert!(
        ready.2.contains(&format!(
            "status.images lists the first {} of 100 folders (it holds at most 128 KiB); the other {omitted}, from {}",
            images.len(),
            &format!("{prefix}/f{:03}", images.len())[..200]
        )),
        "{}",
        &ready.2[..ready.2.len().min(2000)]
    );
    // Every folder was published, listed or not.
    for i in 0..100 {
        let path = format!("{prefix}/f{i:03}");
        assert!(
            tags_of(&reg, &format!("settings-f{i:03}")).contains(&up.tag("main", &c1, &path)),
            "f{i:03} not pushed"
        );
    }
    // Handled once: within the interval nobody is asked again.
    // The publish is counted after its status is written: wait for it.
    let before = ctl.metrics_until("no publish counted", |m| reconciles(m, "published") >= 1.0);
    let git_before = up.server.hits().len();
    proxy.take();
    request_reconcile(k, &ns, "all");
    let after = ctl.metrics_until("no unchanged reconcile", |m| {
        reconciles(m, "unchanged") > reconciles(&before, "unchanged")
    });
    assert_eq!(
        reconciles(&after, "published"),
        reconciles(&before, "published")
    );
    assert_eq!(up.server.hits().len(), git_before, "git was asked again");
    assert!(proxy.take().is_empty(), "the registry was asked again");
}
