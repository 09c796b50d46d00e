//! Promotion with evidence on a real node (issue 38): our controller,
//! started with `--cluster-name staging`, watches a staging namespace of
//! the test run's node (Kubernetes v1.36.3's kubelet, containerd v2.4.2,
//! `scripts/flux.sh up --node`), where a Deployment runs three candidates
//! `settings-image push` published: healthy, crash-looping, healthy. Its
//! container checks the settings it mounts and exits when they are invalid
//! (no readiness probe: Ready is "the container kept running"), so the
//! second candidate really crash-loops on the kubelet, and every time in a
//! record is one the kubelet and controller-manager wrote.
//!
//! What the test asserts, each from a reader other than the code under
//! test: the records in the registry as `oras discover` lists them and
//! `oras pull` reads them (the times compared with the pods' own Ready
//! transitions and creation times from the API server); the SettingsRollout
//! status (`kubectl get` columns); what `promote --explain` and `promote`
//! decide before and after the soak (`--at`, from the records' times);
//! that the crash-looping candidate never reaches the channel (the
//! registry's tags); and that Flux's image-reflector-controller on the same
//! cluster serves the channel's promoted tag and a production pod in
//! another namespace, run from the reference Flux serves, prints the
//! promoted commit's file (`git show` is the oracle).
//!
//! Failure paths here, on the node: the registry refusing the records (the
//! SettingsRollout's Secret has a wrong password: the status and a Warning
//! Event say so, and once the Secret is right it is retried and written),
//! the controller down while the workload moves and restarted mid-rollout
//! (each record from the pods' times, not the restart's; none twice), the
//! workload deleted, and records pushed by hand (a bad cluster name, an
//! unknown field) ignored by the gate and named by `inspect`. The plain API
//! server versions of these (tests/controller/rollout.rs) stay: they choose
//! every time by hand (a soak of hours, a 403 from a proxy) where the node
//! gives real ones.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{Value, json};

use common::cmd::TestCommand;
use common::controller::{
    Process, bind_controller, controller_command, service_account_kubeconfig, service_account_token,
};
use common::flux_cluster::{FluxCluster, flux_cluster};
use common::git::ScratchRepo;
use common::kube::condition;
use common::node::PRINTED;
use common::oci::{attach_rollout_record, go_tool, rollout_records};
use common::registry::{Auth, Registry, free_port};
use common::{TempDir, bin, epoch_secs as secs, repo, rfc3339, run_ok, sleep_until, stdout_of};

/// The registry's login (push and pull).
const USER: &str = "ci";
const PASSWORD: &str = "s3cret-evidence-7c1";
/// The soak the production policy requires.
const SOAK: i64 = 30;
/// The SettingsRollout's grace period (seconds).
const GRACE: u64 = 20;

/// Our CRDs and RBAC (`config/` without the manager's Deployment, which
/// would pull an image this machine does not have) on the node's API
/// server, once per process.
fn install_ours(flux: &FluxCluster) {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let config = repo().join("config");
        let mut apply = flux.kubectl();
        apply.args(["apply", "--server-side", "--force-conflicts"]);
        for f in [
            "namespace.yaml",
            "crd/settings-image.configbutler.io_settingsimages.yaml",
            "crd/settings-image.configbutler.io_settingsrollouts.yaml",
            "rbac/service_account.yaml",
            "rbac/role.yaml",
        ] {
            apply.arg("-f").arg(config.join(f));
        }
        run_ok(&mut apply);
        flux.kubectl_ok(&[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/settingsrollouts.settings-image.configbutler.io",
        ]);
    });
}

/// `settings-image controller --cluster-name staging` for one namespace,
/// as its ServiceAccount, trusting the registry's CA ([`Process`]: its
/// log, SIGTERM and exit); killed on drop.
struct Ours {
    process: Process,
    _dir: TempDir,
}

impl std::ops::Deref for Ours {
    type Target = Process;

    fn deref(&self) -> &Process {
        &self.process
    }
}

impl std::ops::DerefMut for Ours {
    fn deref_mut(&mut self) -> &mut Process {
        &mut self.process
    }
}

impl Ours {
    fn start(flux: &FluxCluster, ns: &str, ca: &Path) -> Ours {
        let dir = TempDir::new();
        let token = service_account_token(flux, "1h");
        let kubeconfig = service_account_kubeconfig(flux, dir.path(), &flux.url, &token);
        let probes = free_port();
        let mut cmd =
            controller_command(ns, "0", &format!("127.0.0.1:{probes}"), &dir.join("cache"));
        cmd.arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["--cluster-name", "staging"])
            .env("SSL_CERT_FILE", ca);
        let mut ours = Ours {
            process: Process::spawn(&mut cmd, dir.join("controller.log")),
            _dir: dir,
        };
        // Ready means every watch is listed, the SettingsRollouts' too.
        ours.process
            .wait_serving(probes, "/readyz", Duration::from_millis(100));
        ours
    }
}

/// One candidate: what push reported and what its commit holds.
struct Candidate {
    tag: String,
    digest: String,
    /// `HOST/NAME:TAG@DIGEST`.
    reference: String,
    /// `configs/shop/app.yaml` at the commit (`git show`).
    file: String,
}

/// The test's world: the node, a TLS registry with a login, the settings
/// repository, the staging and production namespaces.
struct World {
    flux: &'static FluxCluster,
    registry: Registry,
    /// `HOST/settings-shop`.
    repository: String,
    staging: String,
    prod: String,
    settings: ScratchRepo,
    tmp: TempDir,
}

impl World {
    fn ca(&self) -> &Path {
        self.registry.ca.as_deref().expect("a TLS registry")
    }

    /// `settings-image ARGS` with the registry's CA and login.
    fn cli(&self) -> TestCommand {
        let mut c = TestCommand::new();
        c.env("SSL_CERT_FILE", self.ca())
            .env("SETTINGS_IMAGE_USERNAME", USER)
            .env("SETTINGS_IMAGE_PASSWORD", PASSWORD);
        c
    }

    /// Commits `app.yaml` at `time` and pushes the folder with
    /// `--timestamp-tag main`.
    fn candidate(&self, app: &str, time: i64) -> Candidate {
        let head = self
            .settings
            .commit_files(&[("configs/shop/app.yaml", app)], "settings", time);
        let report = self
            .cli()
            .args(["push", "--path", "configs/shop", "--repository"])
            .arg(&self.repository)
            .args(["--timestamp-tag", "main", "--json"])
            .current_dir(&self.settings.dir)
            .json();
        let s = |k: &str| report[k].as_str().expect("push's report").to_string();
        let (tag, digest) = (s("timestamp_tag"), s("digest"));
        Candidate {
            reference: format!("{}:{tag}@{digest}", self.repository),
            file: self
                .settings
                .git(&["show", &format!("{head}:configs/shop/app.yaml")])
                + "\n",
            tag,
            digest,
        }
    }

    /// The Deployment `shop` in `ns` mounting `reference`: the node's
    /// busybox exits 1 unless the settings say `valid: true`, else prints
    /// them and waits. No readiness probe: a container that exits at once
    /// is Ready for a moment, enough for the deployment controller to
    /// count it available and delete the old pod (seen on this node), so
    /// `minReadySeconds` asks for 5 s of Ready first.
    fn deploy(&self, ns: &str, reference: &str) {
        let script = format!(
            "grep -qx 'valid: true' /etc/settings/app.yaml || {{ echo 'invalid settings:'; cat /etc/settings/app.yaml; exit 1; }}; \
             cat /etc/settings/app.yaml; echo; echo '{PRINTED}'; trap 'exit 0' TERM; sleep 86400 & wait"
        );
        let command = serde_json::to_string(&["sh", "-c", &script]).expect("JSON");
        self.flux.apply(&format!(
            "apiVersion: apps/v1
kind: Deployment
metadata:
  name: shop
  namespace: {ns}
  labels:
    app: shop
spec:
  replicas: 1
  minReadySeconds: 5
  selector:
    matchLabels:
      app: shop
  template:
    metadata:
      labels:
        app: shop
    spec:
      terminationGracePeriodSeconds: 1
      imagePullSecrets:
        - name: pull
      volumes:
        - name: settings
          image:
            reference: {reference}
            pullPolicy: IfNotPresent
      containers:
        - name: shop
          image: {image}
          command: {command}
          volumeMounts:
            - name: settings
              mountPath: /etc/settings
",
            image = self.flux.busybox(),
        ));
    }

    /// The SettingsRollout `staging`, once it satisfies `pred`.
    fn rollout(&self, ours: &Ours, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        self.flux.kube.wait(
            &self.staging,
            "settingsrollout/staging",
            what,
            Duration::from_millis(250),
            pred,
            || format!("controller log:\n{}", ours.logs()),
        )
    }

    /// oras' flags for the registry: its CA and the login.
    fn oras_flags(&self) -> [&str; 6] {
        let ca = self.ca().to_str().expect("UTF-8");
        ["--ca-file", ca, "-u", USER, "-p", PASSWORD]
    }

    /// `oras ARGS` with the registry's CA and login.
    fn oras(&self, args: &[&str]) -> String {
        let mut all = args.to_vec();
        let at = all.len() - 1;
        all.splice(at..at, self.oras_flags());
        String::from_utf8_lossy(&go_tool("oras", &all).stdout).into_owned()
    }

    /// The rollout records of `digest` as oras lists and pulls them:
    /// (referrer digest, record), in oras' order.
    fn records(&self, digest: &str) -> Vec<(String, Value)> {
        rollout_records(&format!("{}@{digest}", self.repository), &self.oras_flags())
    }

    /// `oras discover` of `digest` as a person reads it.
    fn discover_tree(&self, digest: &str) -> String {
        self.oras(&["discover", &format!("{}@{digest}", self.repository)])
    }

    /// `promote --from main --to prod --json --policy POLICY ARGS`.
    fn promote(&self, policy: &Path, args: &[&str]) -> Value {
        self.cli()
            .promote_main_to_prod(&self.repository)
            .args(["--json", "--policy"])
            .arg(policy)
            .args(args)
            .json()
    }

    /// `promote --explain --at AT` as a person reads it.
    fn explain_text(&self, policy: &Path, at: &str) -> String {
        self.cli()
            .promote_main_to_prod(&self.repository)
            .args(["--explain", "--at", at])
            .arg("--policy")
            .arg(policy)
            .ok()
    }

    /// The repository's tags, read with curl (with the login).
    fn tags(&self) -> Vec<String> {
        let out = run_ok(self.registry.curl().args([
            "-fsS",
            "-u",
            &format!("{USER}:{PASSWORD}"),
            &format!("{}/v2/settings-shop/tags/list", self.registry.base()),
        ]));
        let v: Value = serde_json::from_slice(&out.stdout).expect("the tag list");
        let mut tags: Vec<String> = v["tags"]
            .as_array()
            .expect("tags")
            .iter()
            .map(|t| t.as_str().expect("a tag").to_string())
            .collect();
        tags.sort();
        tags
    }

    /// What Flux's ImagePolicy `settings-shop` in the production namespace
    /// serves once Flux has listed the tags as they are now: (tag, digest).
    fn served(&self) -> (String, String) {
        let (name, tag, digest) = self.flux.served(&self.prod, "settings-shop", &self.tags());
        assert_eq!(name, self.repository);
        (tag, digest)
    }

    /// Rolls the production Deployment out on `reference`; what its pod
    /// printed.
    fn production(&self, reference: &str) -> String {
        self.deploy(&self.prod, reference);
        let pod = self.flux.rolled_out(&self.prod, "shop");
        assert_eq!(pod.reference, reference, "{pod:?}");
        self.flux.printed(&self.prod, &pod.name)
    }
}

/// The one workload entry of the status: (digest, state, readySince,
/// unavailableSince).
fn entry(v: &Value) -> Option<(String, String, String, String)> {
    let w = v["status"]["workloads"].as_array()?;
    assert!(w.len() <= 1, "{w:?}");
    let w = w.first()?;
    let s = |k: &str| w[k].as_str().unwrap_or_default().to_string();
    Some((
        s("digest"),
        s("state"),
        s("readySince"),
        s("unavailableSince"),
    ))
}

/// The pod's Ready transition, as the kubelet wrote it.
fn ready_at(pod: &Value) -> String {
    pod["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
        .and_then(|c| c["lastTransitionTime"].as_str())
        .expect("a Ready condition")
        .to_string()
}

/// (tag, eligible) of each candidate `promote --explain` judged.
fn judged(x: &Value) -> Vec<(String, bool)> {
    x["candidates"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|c| {
            (
                c["tag"].as_str().unwrap_or_default().to_string(),
                c["eligible"] == true,
            )
        })
        .collect()
}

/// Healthy, crash-looping, healthy in staging; production promotes only
/// what soaked there, and its pod ends on the right file.
#[test]
fn three_candidates_on_the_node_gate_production_by_what_ran_in_staging() {
    let flux = flux_cluster();
    install_ours(flux);
    let registry = Registry::start_tls(Auth::Basic {
        user: USER.into(),
        password: PASSWORD.into(),
    });
    flux.trust_registry(&registry);
    let w = World {
        flux,
        repository: format!("{}/settings-shop", registry.host()),
        registry,
        staging: flux.fresh_namespace("staging"),
        prod: flux.fresh_namespace("prod"),
        settings: ScratchRepo::new(),
        tmp: TempDir::new(),
    };
    let host = w.registry.host();
    for ns in [&w.staging, &w.prod] {
        flux.kubectl_ok(&[
            "create",
            "secret",
            "docker-registry",
            "pull",
            "-n",
            ns,
            &format!("--docker-server={host}"),
            &format!("--docker-username={USER}"),
            &format!("--docker-password={PASSWORD}"),
        ]);
    }
    // The controller's registry Secret, with a password the registry
    // refuses: the records cannot be written at first.
    let records_secret = |password: &str| {
        let out = flux
            .kubectl()
            .args([
                "create",
                "secret",
                "docker-registry",
                "records",
                "-n",
                &w.staging,
                &format!("--docker-server={host}"),
                &format!("--docker-username={USER}"),
                &format!("--docker-password={password}"),
                "--dry-run=client",
                "-o",
                "yaml",
            ])
            .output()
            .expect("kubectl");
        assert!(out.status.success());
        flux.apply(&String::from_utf8_lossy(&out.stdout));
    };
    records_secret("not-the-password");
    bind_controller(flux, &w.staging);
    flux.apply(&format!(
        "apiVersion: settings-image.configbutler.io/v1alpha1\nkind: SettingsRollout\nmetadata:\n  name: staging\n  namespace: {ns}\n\
         spec:\n  repository: {repo}\n  secretRef: {{name: records}}\n  gracePeriod: {GRACE}s\n  selector: {{matchLabels: {{app: shop}}}}\n",
        ns = w.staging,
        repo = w.repository,
    ));

    // Three commits, three candidates; the second's settings are invalid.
    let t0 = 1_767_225_600; // 2026-01-01T00:00:00Z
    let c1 = w.candidate("valid: true\ngreeting: one\n", t0 + 100);
    let c2 = w.candidate("valid: false\ngreeting: two\n", t0 + 200);
    let c3 = w.candidate("valid: true\ngreeting: three\n", t0 + 300);
    let mut ours = Ours::start(flux, &w.staging, w.ca());

    // 1. The first candidate rolls out; the registry refuses its record.
    w.deploy(&w.staging, &c1.reference);
    let pod1 = flux.rolled_out(&w.staging, "shop");
    assert_eq!(pod1.reference, c1.reference);
    let printed1 = flux.printed(&w.staging, &pod1.name);
    assert_eq!(printed1, c1.file);
    let ready1 = ready_at(&flux.get(&w.staging, &format!("pod/{}", pod1.name)));
    let v = w.rollout(&ours, "RecordFailed", |v| {
        condition(v, "Ready").is_some_and(|c| c.1 == "RecordFailed")
    });
    let failed = condition(&v, "Ready").expect("Ready");
    eprintln!("observed: refused: {failed:?}");
    assert_eq!(failed.0, "False");
    assert!(
        failed.2.contains(&c1.digest) && failed.2.contains("retrying"),
        "{failed:?}"
    );
    assert!(!failed.2.contains("not-the-password"), "{failed:?}");
    assert_eq!(
        entry(&v).map(|e| e.1),
        Some("Progressing".into()),
        "nothing recorded: the status does not say Ready"
    );
    let (kind, _, note) = flux.wait_event(&w.staging, "staging", "RecordFailed", |e| {
        e.1 == "RecordFailed"
    });
    assert_eq!(kind, "Warning");
    assert!(note.contains(&c1.digest), "{note}");
    assert!(w.records(&c1.digest).is_empty());
    // The right password: retried, and written.
    records_secret(PASSWORD);
    let v = w.rollout(&ours, "the first candidate Ready", |v| {
        entry(v).is_some_and(|e| e.1 == "Ready")
            && condition(v, "Ready").is_some_and(|c| c.0 == "True")
    });
    assert_eq!(
        entry(&v),
        Some((
            c1.digest.clone(),
            "Ready".into(),
            ready1.clone(),
            String::new()
        ))
    );
    let columns = flux.kubectl_ok(&["get", "settingsrollout", "-n", &w.staging]);
    eprintln!("observed: kubectl get settingsrollout:\n{columns}");
    let header: Vec<&str> = columns
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["NAME", "READY", "WORKLOADS", "RUNNING", "SINCE", "AGE"],
        "{columns}"
    );
    let row: Vec<&str> = columns
        .lines()
        .nth(1)
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        row[..5],
        ["staging", "True", "shop", &c1.digest, &ready1],
        "{columns}"
    );
    let recs1 = w.records(&c1.digest);
    assert_eq!(recs1.len(), 1, "{recs1:?}");
    let base = |digest: &str| {
        json!({"cluster": "staging", "namespace": w.staging, "kind": "Deployment", "name": "shop",
               "repository": w.repository, "digest": digest, "replicas": 1})
    };
    let mut want = base(&c1.digest);
    want["state"] = "ready".into();
    want["readySince"] = ready1.as_str().into();
    assert_eq!(recs1[0].1, want);
    assert_eq!(v["status"]["workloads"][0]["record"], recs1[0].0.as_str());

    // 2. The second candidate crash-loops on the kubelet; the first pod
    //    keeps serving. It is applied once the first has run for the soak,
    //    while the controller is down (stopped by SIGTERM): the restarted
    //    controller ends the first run when the second's pod was created,
    //    not when it looked.
    sleep_until(secs(&ready1) + SOAK + 3, Duration::from_millis(500));
    assert_eq!(ours.terminate(), 0);
    w.deploy(&w.staging, &c2.reference);
    flux.wait(&w.staging, "pods", "a pod of the second candidate", |v| {
        v["items"].as_array().is_some_and(|ps| {
            ps.iter()
                .any(|p| p["spec"]["volumes"][0]["image"]["reference"] == c2.reference.as_str())
        })
    });
    let pod2 = flux.newest_mounting(&w.staging, "app=shop", &c2.reference);
    let name2 = pod2["metadata"]["name"].as_str().expect("name").to_string();
    let created2 = pod2["metadata"]["creationTimestamp"]
        .as_str()
        .expect("creationTimestamp")
        .to_string();
    sleep_until(secs(&created2) + 5, Duration::from_millis(200));
    let mut ours = Ours::start(flux, &w.staging, w.ca());
    let v = w.rollout(&ours, "the second candidate Progressing", |v| {
        entry(v).is_some_and(|e| e.0 == c2.digest && e.1 == "Progressing")
    });
    assert_eq!(entry(&v).map(|e| e.3), Some(created2.clone()));
    // The container really exits: restarted, exit code 1, its words.
    let pod2 = flux.wait(&w.staging, &format!("pod/{name2}"), "restarted", |p| {
        p["status"]["containerStatuses"][0]["restartCount"]
            .as_u64()
            .is_some_and(|n| n >= 1)
    });
    let last = &pod2["status"]["containerStatuses"][0]["lastState"]["terminated"];
    assert_eq!(last["exitCode"], 1, "{:#}", pod2["status"]);
    let said = flux.printed_before_restart(&w.staging, &name2);
    eprintln!("observed: the crash-looping pod {name2} printed {said:?}");
    assert_eq!(
        said,
        format!("invalid settings:\n{}", c2.file.trim_end_matches('\n')) + "\n"
    );
    // The first pod still runs and serves the first file.
    let still = flux.get(&w.staging, &format!("pod/{}", pod1.name));
    assert_eq!(still["status"]["phase"], "Running");
    // The controller restarts again mid-rollout, before the grace period
    // is over; the new one finds it over.
    assert_eq!(ours.terminate(), 0);
    sleep_until(
        secs(&created2) + GRACE as i64 + 2,
        Duration::from_millis(500),
    );
    let mut ours = Ours::start(flux, &w.staging, w.ca());
    let v = w.rollout(&ours, "the second candidate Unavailable", |v| {
        entry(v).is_some_and(|e| e.0 == c2.digest && e.1 == "Unavailable")
    });
    let recs1 = w.records(&c1.digest);
    assert_eq!(
        recs1.len(),
        2,
        "one record per change, none twice: {recs1:?}"
    );
    let mut ended1 = base(&c1.digest);
    ended1["state"] = "ended".into();
    ended1["readySince"] = ready1.as_str().into();
    ended1["endedAt"] = created2.as_str().into();
    ended1["reason"] = "superseded".into();
    ended1["supersededBy"] = c2.digest.as_str().into();
    assert!(
        recs1.iter().any(|r| r.1 == ended1),
        "{recs1:?}\nwant {ended1}"
    );
    let recs2 = w.records(&c2.digest);
    let mut ended2 = base(&c2.digest);
    ended2["state"] = "ended".into();
    ended2["endedAt"] = created2.as_str().into();
    ended2["reason"] = "unavailable".into();
    assert_eq!(
        recs2.iter().map(|r| &r.1).collect::<Vec<_>>(),
        [&ended2],
        "{recs2:?}"
    );
    assert_eq!(v["status"]["workloads"][0]["record"], recs2[0].0.as_str());

    // 3. The third candidate rolls out healthy.
    w.deploy(&w.staging, &c3.reference);
    let pod3 = flux.rolled_out(&w.staging, "shop");
    assert_eq!(pod3.reference, c3.reference);
    assert_eq!(flux.printed(&w.staging, &pod3.name), c3.file);
    let ready3 = ready_at(&flux.get(&w.staging, &format!("pod/{}", pod3.name)));
    let v = w.rollout(&ours, "the third candidate Ready", |v| {
        entry(v).is_some_and(|e| e.0 == c3.digest && e.1 == "Ready")
    });
    assert_eq!(entry(&v).map(|e| e.2), Some(ready3.clone()));
    let recs3 = w.records(&c3.digest);
    let mut ready3_record = base(&c3.digest);
    ready3_record["state"] = "ready".into();
    ready3_record["readySince"] = ready3.as_str().into();
    assert_eq!(
        recs3.iter().map(|r| &r.1).collect::<Vec<_>>(),
        [&ready3_record]
    );
    // The crashed candidate's run had no Ready to supersede: no record more.
    assert_eq!(w.records(&c2.digest).len(), 1);

    // Records pushed by hand onto the third candidate, claiming a long
    // soak: a cluster name no controller takes, and another shape.
    let subject3 = format!("{}@{}", w.repository, c3.digest);
    let login = w.oras_flags();
    let mut forged = ready3_record.clone();
    forged["cluster"] = "Staging!".into();
    forged["readySince"] = "2020-01-01T00:00:00Z".into();
    let bad_name = attach_rollout_record(&subject3, &forged, &login);
    let mut shaped = ready3_record.clone();
    shaped["readySince"] = "2020-01-01T00:00:00Z".into();
    shaped["trustMe"] = true.into();
    let bad_shape = attach_rollout_record(&subject3, &shaped, &login);
    for (digest, what) in [
        (&c1.digest, "first"),
        (&c2.digest, "second"),
        (&c3.digest, "third"),
    ] {
        eprintln!(
            "observed: oras discover of the {what} candidate:\n{}",
            w.discover_tree(digest)
        );
    }
    let inspected3 = w.cli().args(["inspect", &subject3]).ok();
    eprintln!("observed: inspect {subject3}:\n{inspected3}");
    assert!(
        inspected3.contains(&format!(
            "ran in staging: Deployment {}/shop (1 replicas), ready from {ready3}",
            w.staging
        )),
        "{inspected3}"
    );
    // Each named by its digest (`rollout DIGEST`), with why the gate
    // ignores it on the next line.
    let line_of = |digest: &str| {
        let lines: Vec<&str> = inspected3.lines().collect();
        let at = lines
            .iter()
            .position(|l| *l == format!("rollout {digest}"))
            .unwrap_or_else(|| panic!("no line names {digest}:\n{inspected3}"));
        lines.get(at + 1).copied().unwrap_or_default().to_string()
    };
    let said = line_of(&bad_name);
    assert!(
        said.contains(
            "cluster \"Staging!\" is not a cluster name (lowercase letters, digits and '-', at most 63); promote's requirements ignore it"
        ),
        "{said}"
    );
    let said = line_of(&bad_shape);
    assert!(
        said.contains("not a rollout record: unknown field `trustMe`")
            && said.contains("promote's requirements ignore it"),
        "{said}"
    );
    let inspected1 = w
        .cli()
        .args(["inspect", &format!("{}@{}", w.repository, c1.digest)])
        .ok();
    assert!(
        inspected1.contains(&format!(
            "ran in staging: Deployment {}/shop (1 replicas), ready from {ready1} to {created2}, superseded by {}",
            w.staging, c2.digest
        )),
        "{inspected1}"
    );
    let inspected2 = w
        .cli()
        .args(["inspect", &format!("{}@{}", w.repository, c2.digest)])
        .ok();
    eprintln!("observed: inspect of the second candidate:\n{inspected2}");
    assert!(
        inspected2.contains(&format!(
            "ran in staging: Deployment {}/shop (1 replicas), never ready, ended {created2}, unavailable",
            w.staging
        )),
        "{inspected2}"
    );

    // 4. Production: promote requires a soak in staging and no run ended
    //    unavailable. Flux follows the channel in the production namespace.
    let policy = w.tmp.join("release-policy.yaml");
    std::fs::write(
        &policy,
        format!("requires:\n  - rollout: {{cluster: staging, readyFor: {SOAK}s, notEnded: unavailable}}\n"),
    )
    .expect("the policy");
    flux.registry_ca_secret(&w.prod, &w.registry);
    let objects = stdout_of(
        Command::new(bin())
            .arg("flux")
            .args(["--repository", &w.repository, "--namespace", &w.prod])
            .args(["--prefix", "prod", "--interval", "10m", "--no-automation"])
            .args(["--secret-ref", "pull", "--cert-secret-ref", "registry-ca"]),
    );
    flux.apply(&objects);

    // Before the first candidate had soaked: nothing goes.
    let before = rfc3339(secs(&ready1) + 5);
    let x = w.promote(&policy, &["--explain", "--at", &before]);
    eprintln!(
        "observed: promote --explain --at {before}:\n{}",
        w.explain_text(&policy, &before)
    );
    assert_eq!(
        (x["decision"].as_str(), x["unmet"].as_bool()),
        (Some("wait"), Some(true)),
        "{x:#}"
    );
    assert_eq!(
        judged(&x),
        [
            (c3.tag.clone(), false),
            (c2.tag.clone(), false),
            (c1.tag.clone(), false)
        ]
    );
    // Just after the third became Ready: it has not soaked (the records
    // pushed by hand are ignored), the second ended unavailable, the first
    // soaked before it was superseded: the first goes.
    let soon = rfc3339(secs(&ready3) + 5);
    let text = w.explain_text(&policy, &soon);
    eprintln!("observed: promote --explain --at {soon}:\n{text}");
    let x = w.promote(&policy, &["--explain", "--at", &soon]);
    assert_eq!(
        judged(&x),
        [
            (c3.tag.clone(), false),
            (c2.tag.clone(), false),
            (c1.tag.clone(), true)
        ]
    );
    let ignored: Vec<&str> = x["candidates"][0]["ignored"]
        .as_array()
        .expect("ignored")
        .iter()
        .map(|i| i["record"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(ignored.len(), 2, "{x:#}");
    assert!(
        ignored.contains(&bad_name.as_str()) && ignored.contains(&bad_shape.as_str()),
        "{ignored:?}"
    );
    assert!(
        x["candidates"][1]["because"][0]
            .as_str()
            .is_some_and(|b| b.contains("ended unavailable")),
        "{x:#}"
    );
    assert_eq!(
        (x["decision"].as_str(), x["candidate"].as_str()),
        (Some("promote"), Some(c1.tag.as_str()))
    );
    let p = w.promote(&policy, &["--at", &soon]);
    let prod1 = c1.tag.replacen("main-", "prod-", 1);
    assert_eq!(
        (
            p["promoted"].as_bool(),
            p["tag"].as_str(),
            p["digest"].as_str()
        ),
        (Some(true), Some(prod1.as_str()), Some(c1.digest.as_str()))
    );
    let mut cited: Vec<&str> = p["evidence"]
        .as_array()
        .expect("evidence")
        .iter()
        .map(|e| e["record"].as_str().unwrap_or_default())
        .collect();
    cited.sort();
    let mut want: Vec<&str> = recs1.iter().map(|r| r.0.as_str()).collect();
    want.sort();
    assert_eq!(
        cited, want,
        "the promotion cites the first candidate's two records"
    );
    // The diff the reviewer saw is of the candidate promoted.
    assert_eq!(
        p["diff"]["new"]["name"],
        format!("{}:{}", w.repository, c1.tag),
        "{}",
        p["diff"]
    );
    // Flux serves it, and a production pod reads its file.
    let served = w.served();
    assert_eq!(served, (prod1.clone(), c1.digest.clone()));
    let printed = w.production(&format!("{}:{}@{}", w.repository, served.0, served.1));
    eprintln!("observed: production pod printed {printed:?}");
    assert_eq!(printed, c1.file);

    // Past the third candidate's soak: it goes; the crashed one never did.
    let later = rfc3339(secs(&ready3) + SOAK + 5);
    let text = w.explain_text(&policy, &later);
    eprintln!("observed: promote --explain --at {later}:\n{text}");
    let x = w.promote(&policy, &["--explain", "--at", &later]);
    assert_eq!(
        judged(&x),
        [(c3.tag.clone(), true), (c2.tag.clone(), false)]
    );
    let p = w.promote(&policy, &["--at", &later]);
    let prod3 = c3.tag.replacen("main-", "prod-", 1);
    assert_eq!(
        (p["promoted"].as_bool(), p["tag"].as_str()),
        (Some(true), Some(prod3.as_str()))
    );
    assert_eq!(
        (
            p["diff"]["old"]["name"].as_str(),
            p["diff"]["new"]["name"].as_str()
        ),
        (
            Some(format!("{}:{prod1}", w.repository).as_str()),
            Some(format!("{}:{}", w.repository, c3.tag).as_str())
        )
    );
    let channel: Vec<String> = w
        .tags()
        .into_iter()
        .filter(|t| t.starts_with("prod-"))
        .collect();
    assert_eq!(
        channel,
        [prod1.clone(), prod3.clone()],
        "the crash-looping candidate never reaches the channel"
    );
    let served = w.served();
    assert_eq!(served, (prod3.clone(), c3.digest.clone()));
    let printed = w.production(&format!("{}:{}@{}", w.repository, served.0, served.1));
    eprintln!("observed: production pod printed {printed:?}");
    assert_eq!(printed, c3.file);

    // 5. The staging workload deleted: its run ends, with no time the
    //    cluster shows.
    flux.kubectl_ok(&["delete", "deployment", "shop", "-n", &w.staging]);
    w.rollout(&ours, "no workload", |v| {
        v["status"]["workloads"]
            .as_array()
            .is_none_or(|w| w.is_empty())
    });
    let recs3 = w.records(&c3.digest);
    let mut deleted = ready3_record.clone();
    deleted["state"] = "ended".into();
    deleted["reason"] = "deleted".into();
    assert!(recs3.iter().any(|r| r.1 == deleted), "{recs3:?}");
    eprintln!(
        "observed: oras discover of the third candidate at the end:\n{}",
        w.discover_tree(&c3.digest)
    );
    assert_eq!(ours.terminate(), 0);
}
