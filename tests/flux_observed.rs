//! Observed with Flux: every promise the README and docs make about what
//! Flux does, checked against Flux's own controllers (source-controller
//! v1.9.1, image-reflector-controller v1.2.0, image-automation-controller
//! v1.2.3, kustomize-controller v1.9.4, built and started by
//! `scripts/flux.sh`) on a whole Kubernetes v1.36.3 node
//! (`scripts/kube.sh up --node`). What each test asserts is what Flux
//! wrote: the ImagePolicy's `status.latestRef`, the commits
//! image-automation-controller pushed to the cluster repository (served by
//! `git http-backend`, push enabled), and the Deployment kustomize-controller
//! applied to the API server; and, where a test follows the chain to its
//! end, what the kubelet did: the pod of the Deployment's new ReplicaSet
//! prints the settings file it mounts (`kubectl logs`). The expected tags
//! come from git (`git log`), the expected digests from what `push`
//! reported and the registry answers, the expected file from `git show`.
//!
//! The registry is distribution 2.8 over TLS with a CA of its own, on this
//! machine's routable address: Flux reads it through the ImageRepository's
//! `certSecretRef`, `settings-image push` through `SSL_CERT_FILE`, as in
//! production (docs/flux.md, "Observed with Flux").
//!
//! Reconciles are requested with `reconcile.fluxcd.io/requestedAt` and
//! awaited on `status.lastHandledReconcileAt`; intervals are long (10m), so
//! nothing happens between the test's requests but what watches trigger.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use base64::Engine as _;
use serde_json::Value;

use common::controller::{Process, controller_command};
use common::flux_cluster::{FluxCluster, flux_cluster};
use common::git::git_cmd;
use common::git_server::{GitServer, Options as GitOptions};
use common::kube::condition;
use common::node::{Pod, print_and_wait};
use common::registry::{Auth, Registry, digest_of, tags_of};
use common::runner::Runner;
use common::{TempDir, bin, repo, run_ok, stdout_of};

/// The settings folder.
const DIR: &str = "configs/shop";
/// The image repository's name on the registry (and the generated objects' name).
const NAME: &str = "settings-shop";
/// 2025-11-30T00:00:00Z: the first commit's committer time.
const T0: i64 = 1_764_460_800;

/// A git repository served by the world's `git http-backend`, with a work
/// tree that commits at given committer times and pushes to it.
struct Repo {
    /// The bare repository the server serves.
    bare: PathBuf,
    /// The work tree (a clone of `bare`, branch `main`).
    work: PathBuf,
    home: PathBuf,
}

impl Repo {
    fn new(tmp: &Path, name: &str) -> Repo {
        let home = tmp.join("home");
        std::fs::create_dir_all(&home).expect("home");
        let bare = tmp.join("srv").join(format!("{name}.git"));
        std::fs::create_dir_all(&bare).expect("bare");
        run_ok(git_cmd(&home, &bare).args(["init", "-q", "--bare", "-b", "main"]));
        // git http-backend takes pushes only where the repository allows it.
        run_ok(git_cmd(&home, &bare).args(["config", "http.receivepack", "true"]));
        let work = tmp.join(name);
        run_ok(
            git_cmd(&home, tmp)
                .args(["clone", "-q"])
                .arg(&bare)
                .arg(&work),
        );
        run_ok(git_cmd(&home, &work).args(["checkout", "-q", "-B", "main"]));
        Repo { bare, work, home }
    }

    fn git(&self, args: &[&str]) -> String {
        stdout_of(git_cmd(&self.home, &self.work).args(args))
            .trim()
            .to_string()
    }

    /// Writes `files`, commits them at committer time `time` and pushes
    /// `main` (forced: tests rewind it); the commit id.
    fn commit(&self, files: &[(&str, &str)], time: i64) -> String {
        self.commit_unpushed(files, time);
        self.push();
        self.git(&["rev-parse", "HEAD"])
    }

    fn commit_unpushed(&self, files: &[(&str, &str)], time: i64) {
        for (p, c) in files {
            let f = self.work.join(p);
            std::fs::create_dir_all(f.parent().expect("a parent")).expect("mkdir");
            std::fs::write(f, c).expect("writing a file");
        }
        self.git(&["add", "-A"]);
        let d = format!("@{time} +0000");
        run_ok(
            git_cmd(&self.home, &self.work)
                .args(["commit", "-q", "-m", &format!("at {time}")])
                .env("GIT_AUTHOR_DATE", &d)
                .env("GIT_COMMITTER_DATE", &d),
        );
    }

    /// A commit changing `file` at `time` whose short id satisfies `want`
    /// (contents vary until it does), pushed; its id.
    fn commit_where(&self, file: &str, time: i64, want: &dyn Fn(&str) -> bool) -> String {
        for salt in 0.. {
            self.commit_unpushed(&[(file, &format!("salt: {salt}\n"))], time);
            let id = self.git(&["rev-parse", "HEAD"]);
            if want(&id[..7]) {
                self.push();
                return id;
            }
            self.git(&["reset", "-q", "--hard", "HEAD~1"]);
        }
        unreachable!()
    }

    fn push(&self) {
        self.git(&["push", "-q", "-f", "origin", "main"]);
    }

    /// What the served repository's `main` names now.
    fn served_head(&self) -> String {
        stdout_of(git_cmd(&self.home, &self.bare).args(["rev-parse", "main"]))
            .trim()
            .to_string()
    }

    /// The bytes of `path` at `rev` (`git show`): what a pod mounting the
    /// image of `rev` must print.
    fn file_at(&self, rev: &str, path: &str) -> String {
        stdout_of(git_cmd(&self.home, &self.work).args(["show", &format!("{rev}:{path}")]))
    }

    /// `git log -1 --format=%ct %H REV -- DIR` as a timestamp tag: the
    /// oracle for the tag of the folder at `rev`.
    fn tag_at(&self, prefix: &str, rev: &str) -> String {
        let line = self.git(&["log", "-1", "--format=%ct %H", rev, "--", DIR]);
        let (ct, id) = line.split_once(' ').expect("ct id");
        format!("{prefix}-{ct}-{}", &id[..7])
    }
}

/// What image-automation-controller committed to the cluster repository.
#[derive(Debug)]
struct FluxCommit {
    /// How many commits Flux made since the last rollout the test saw.
    commits: usize,
    author: String,
    message: String,
    /// The Deployment's image-volume reference line, as committed.
    line: String,
}

/// One test's world: its own namespace, a TLS registry, a git server with
/// the settings and cluster repositories, and the Flux objects.
struct World {
    flux: &'static FluxCluster,
    ns: String,
    registry: Registry,
    git: GitServer,
    settings: Repo,
    cluster: Repo,
    /// `HOST/settings-shop`.
    repository: String,
    /// The `{"$imagepolicy": ...}` marker the generator printed.
    marker: String,
    /// The cluster repository's head after the last rollout the test saw.
    seen: std::cell::RefCell<String>,
    tmp: TempDir,
}

impl World {
    /// The world, with the cluster repository's Deployment, its
    /// GitRepository and Kustomization, and the objects `settings-image
    /// flux --prefix PREFIX` generates (`extra` flags added), applied as
    /// generated.
    fn new(name: &str, prefix: &str) -> World {
        let flux = flux_cluster();
        let tmp = TempDir::new();
        let ns = flux.fresh_namespace(name);
        let registry = Registry::start_tls(Auth::None);
        flux.trust_registry(&registry);
        let repository = format!("{}/{NAME}", registry.host());
        let settings = Repo::new(tmp.path(), "settings");
        let cluster = Repo::new(tmp.path(), "cluster");
        let git = GitServer::start(&tmp.join("srv"), GitOptions::default());
        flux.registry_ca_secret(&ns, &registry);
        let mut w = World {
            flux,
            ns,
            registry,
            git,
            settings,
            cluster,
            repository,
            marker: String::new(),
            seen: Default::default(),
            tmp,
        };
        let objects = w.generate(&["--prefix", prefix]);
        w.marker = marker_of(&objects);
        w.cluster.commit(
            &[(
                "clusters/prod/shop.yaml",
                &deployment(&format!("{}:{prefix}-0-0000000", w.repository), &w.marker),
            )],
            T0,
        );
        *w.seen.borrow_mut() = w.cluster.served_head();
        w.flux.apply(&format!(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: cluster\n  namespace: {ns}\n\
             spec:\n  interval: 10m\n  url: {url}\n  ref:\n    branch: main\n---\n\
             apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: apps\n  namespace: {ns}\n\
             spec:\n  interval: 10m\n  sourceRef:\n    kind: GitRepository\n    name: cluster\n  path: ./clusters/prod\n  prune: false\n  targetNamespace: {ns}\n",
            ns = w.ns,
            url = w.git.url("cluster.git"),
        ));
        w.flux.apply(&objects);
        w
    }

    /// `settings-image flux` for this world's repository, namespace and
    /// cluster repository, with `extra`; its output.
    fn generate(&self, extra: &[&str]) -> String {
        self.generate_for(&self.repository, extra)
    }

    /// [`World::generate`] for the repository (or template) `repository`.
    fn generate_for(&self, repository: &str, extra: &[&str]) -> String {
        let out = Command::new(bin())
            .arg("flux")
            .args(["--repository", repository, "--namespace", &self.ns])
            .args(["--interval", "10m", "--git-source", "cluster"])
            .args([
                "--git-path",
                "./clusters/prod",
                "--cert-secret-ref",
                "registry-ca",
            ])
            .args(extra)
            .output()
            .expect("running settings-image flux");
        assert!(
            out.status.success(),
            "settings-image flux failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("UTF-8")
    }

    /// The environment a user gives `settings-image` for this registry:
    /// its CA as the trusted roots.
    fn trust(&self) -> [(&'static str, PathBuf); 1] {
        [(
            "SSL_CERT_FILE",
            self.registry.ca.clone().expect("a TLS registry"),
        )]
    }

    /// `settings-image ARGS` in `dir`, trusting the registry's CA.
    fn run_in(&self, dir: &Path, args: &[&str]) -> Output {
        Command::new(bin())
            .current_dir(dir)
            .args(args)
            .envs(self.trust())
            .output()
            .expect("running settings-image")
    }

    /// `settings-image push` of the settings folder from `dir` (`extra`
    /// added); its `--json` report.
    fn push_in(&self, dir: &Path, extra: &[&str]) -> Value {
        self.push_prefix(dir, "main", extra)
    }

    /// [`World::push_in`] with the timestamp tag prefix `prefix`.
    fn push_prefix(&self, dir: &Path, prefix: &str, extra: &[&str]) -> Value {
        let mut args = vec![
            "push",
            "--path",
            DIR,
            "--repository",
            &self.repository,
            "--timestamp-tag",
            prefix,
            "--json",
        ];
        args.extend(extra);
        let out = self.run_in(dir, &args);
        assert!(
            out.status.success(),
            "push failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("push --json")
    }

    fn push(&self, extra: &[&str]) -> Value {
        self.push_in(&self.settings.work, extra)
    }

    /// What the ImagePolicy `name` serves once Flux has listed the
    /// registry's tags as they are now: (tag, digest) of `status.latestRef`.
    fn served_by(&self, name: &str) -> (String, String) {
        let tags: Vec<String> = tags_of(&self.registry, name).into_iter().collect();
        let (served, tag, digest) = self.flux.served(&self.ns, name, &tags);
        assert_eq!(
            served,
            format!("{}/{name}", self.registry.host()),
            "latestRef's name"
        );
        (tag, digest)
    }

    fn served(&self) -> (String, String) {
        self.served_by(NAME)
    }

    /// Runs the ImageUpdateAutomation now; what it committed since the
    /// last rollout the test saw (one commit at most), `None` when nothing.
    fn flux_commit(&self) -> Option<FluxCommit> {
        let auto = self
            .flux
            .reconcile(&self.ns, "imageupdateautomation/settings");
        let head = self.cluster.served_head();
        let before = self.seen.replace(head.clone());
        if head == before {
            return None;
        }
        let git =
            |args: &[&str]| stdout_of(git_cmd(&self.cluster.home, &self.cluster.bare).args(args));
        let commits = git(&["rev-list", "--count", &format!("{before}..{head}")])
            .trim()
            .parse()
            .expect("a count");
        let show = |fmt: &str| git(&["log", "-1", &format!("--format={fmt}"), "main"]);
        let line = self.committed_line("clusters/prod/shop.yaml");
        assert_eq!(
            auto["status"]["lastPushCommit"], head,
            "the automation's status names another commit than the repository's head"
        );
        Some(FluxCommit {
            commits,
            author: show("%an <%ae>").trim().to_string(),
            message: show("%B").trim().to_string(),
            line,
        })
    }

    /// The image-volume reference line of `file` in the cluster
    /// repository's `main`, as committed.
    fn committed_line(&self, file: &str) -> String {
        let text = stdout_of(
            git_cmd(&self.cluster.home, &self.cluster.bare).args(["show", &format!("main:{file}")]),
        );
        text.lines()
            .find(|l| l.contains("reference:"))
            .unwrap_or_else(|| panic!("no reference line in {file}:\n{text}"))
            .trim()
            .to_string()
    }

    /// Has source-controller fetch the cluster repository's head and
    /// kustomize-controller apply it; the image-volume reference of the
    /// Deployment in the API server then.
    fn applied(&self) -> String {
        let head = self.cluster.served_head();
        let revision = format!("main@sha1:{head}");
        let source = self.flux.reconcile(&self.ns, "gitrepository/cluster");
        assert_eq!(
            source["status"]["artifact"]["revision"], revision,
            "source-controller did not fetch the head"
        );
        let ks = self.flux.reconcile(&self.ns, "kustomization/apps");
        assert_eq!(
            ks["status"]["lastAppliedRevision"], revision,
            "kustomize-controller did not apply the head: {:#}",
            ks["status"]
        );
        self.deployed("shop")
    }

    /// The image-volume reference of Deployment `name` in the API server.
    fn deployed(&self, name: &str) -> String {
        let d = self.flux.get(&self.ns, &format!("deployment/{name}"));
        d["spec"]["template"]["spec"]["volumes"][0]["image"]["reference"]
            .as_str()
            .expect("the Deployment's image volume")
            .to_string()
    }

    /// The reference line Flux writes for `tag` and `digest`.
    fn line_for(&self, tag: &str, digest: &str) -> String {
        format!(
            "reference: {}:{tag}@{digest} # {}",
            self.repository, self.marker
        )
    }

    /// Asserts the whole chain for (tag, digest): Flux serves it, commits
    /// it behind the marker, and the applied Deployment carries it.
    fn assert_rolled_out(&self, tag: &str, digest: &str) -> FluxCommit {
        assert_eq!(self.served(), (tag.to_string(), digest.to_string()));
        let commit = self.flux_commit().expect("Flux commits the new reference");
        assert_eq!(
            commit.commits, 1,
            "one commit per move of the policy: {commit:?}"
        );
        assert_eq!(
            commit.author,
            "fluxcdbot <fluxcdbot@users.noreply.github.com>"
        );
        assert_eq!(commit.line, self.line_for(tag, digest), "{commit:?}");
        assert!(
            commit
                .message
                .ends_with(&format!("-> {}:{tag}@{digest}", self.repository)),
            "the generated message template: {commit:?}"
        );
        let applied = self.applied();
        assert_eq!(applied, format!("{}:{tag}@{digest}", self.repository));
        // What Flux wrote, for the run's record (nextest shows it on failure,
        // or always with --success-output).
        eprintln!(
            "observed: latestRef {tag} {digest}\n  commit {} {:?}\n  Deployment {applied}",
            commit.author, commit.message
        );
        commit
    }

    /// The kubelet's side of a rollout: the one pod of the Deployment's
    /// current ReplicaSet, Running, every older pod gone, mounting the
    /// applied reference; and what it printed.
    fn pod(&self) -> (Pod, String) {
        let pod = self.flux.rolled_out(&self.ns, "shop");
        assert_eq!(pod.reference, self.deployed("shop"), "{pod:?}");
        let printed = self.flux.printed(&self.ns, &pod.name);
        eprintln!(
            "observed: pod {} {} of {}",
            pod.name, pod.phase, pod.replica_set
        );
        (pod, printed)
    }

    /// Asserts that Flux, asked again, serves (tag, digest) and commits nothing.
    fn assert_unmoved(&self, tag: &str, digest: &str) {
        assert_eq!(self.served(), (tag.to_string(), digest.to_string()));
        eprintln!("observed: latestRef stays {tag} {digest}, no commit");
        assert!(
            self.flux_commit().is_none(),
            "Flux committed although the served tag did not change"
        );
    }

    /// A clone of the settings repository checked out at `rev` on branch
    /// `main` (the job of an older commit: its checkout).
    fn checkout(&self, rev: &str) -> PathBuf {
        let dir = self.tmp.join(&format!("checkout-{}", &rev[..7]));
        if dir.exists() {
            // A re-run checks out again: the repository as it is now.
            run_ok(git_cmd(&self.settings.home, &dir).args(["fetch", "-q", "-f", "origin"]));
        } else {
            run_ok(
                git_cmd(&self.settings.home, self.tmp.path())
                    .args(["clone", "-q"])
                    .arg(&self.settings.bare)
                    .arg(&dir),
            );
        }
        run_ok(git_cmd(&self.settings.home, &dir).args(["checkout", "-q", "-B", "main", rev]));
        dir
    }
}

/// The `{"$imagepolicy": "NS:NAME"}` marker of the generator's header.
fn marker_of(objects: &str) -> String {
    let line = objects
        .lines()
        .find(|l| l.contains("{\"$imagepolicy\""))
        .expect("the generator prints the marker");
    let at = line.find("{\"$imagepolicy\"").expect("marker");
    line[at..].trim().to_string()
}

/// docs/flux.md's Deployment, its image volume at `reference` behind
/// `marker`; its container, the node's busybox, prints the settings file.
fn deployment(reference: &str, marker: &str) -> String {
    let image = flux_cluster().busybox();
    let command = print_and_wait("/etc/settings/app.yaml");
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: shop
spec:
  selector:
    matchLabels:
      app: shop
  template:
    metadata:
      labels:
        app: shop
    spec:
      volumes:
        - name: settings
          image:
            reference: {reference} # {marker}
            pullPolicy: IfNotPresent
      containers:
        - name: shop
          image: {image}
          command: {command}
          volumeMounts:
            - name: settings
              mountPath: /etc/settings
              readOnly: true
"
    )
}

fn text(v: &Value, pointer: &str) -> String {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no {pointer} in {v:#}"))
        .to_string()
}

/// The tag a push says Flux serves after it: the anomaly's `served`, or
/// with no anomaly its own timestamp tag (the highest number).
fn said_served(report: &Value) -> String {
    match report["anomaly"]["served"].as_str() {
        Some(t) => t.to_string(),
        None => text(report, "/timestamp_tag"),
    }
}

/// README and docs/flux.md §1-2: a commit to the settings folder, `push`,
/// the objects `settings-image flux` generates: Flux serves the tag push
/// reported, commits `name:tag@sha256:<push's digest>` behind the marker of
/// the Deployment's image volume, kustomize-controller applies it, and the
/// kubelet runs a pod that prints the commit's file. Then the same for the
/// action face, run as the runner runs it: a new ReplicaSet, whose pod
/// prints the new file, and the old pod gone.
#[test]
fn the_designs_flow_ends_in_a_pod_printing_the_commits_file() {
    let w = World::new("flow", "main");
    let c1 = w
        .settings
        .commit(&[("configs/shop/app.yaml", "replicas: 2\n")], T0 + 10);
    // A later commit elsewhere: the tag names the folder's last change.
    w.settings.commit(&[("README.md", "unrelated\n")], T0 + 20);
    // With the moving tag `main` too, which Flux never follows.
    let report = w.push(&["--branch-tag", "main"]);
    assert!(tags_of(&w.registry, NAME).contains("main"));
    let tag = text(&report, "/timestamp_tag");
    assert_eq!(tag, format!("main-{}-{}", T0 + 10, &c1[..7]));
    assert_eq!(tag, w.settings.tag_at("main", "HEAD"));
    let digest = text(&report, "/digest");
    assert_eq!(
        digest_of(&w.registry, NAME, &tag).as_deref(),
        Some(digest.as_str())
    );
    let commit = w.assert_rolled_out(&tag, &digest);
    // The provenance referrer's tag (the referrers tag schema on
    // distribution 2.8) is among the tags Flux lists, first as text.
    let scanned = w.flux.get(&w.ns, &format!("imagerepository/{NAME}"));
    let referrers_tag = digest.replacen(':', "-", 1);
    assert_eq!(
        scanned["status"]["lastScanResult"]["latestTags"][0],
        referrers_tag.as_str(),
        "{:#}",
        scanned["status"]
    );
    assert_eq!(
        commit.message,
        format!(
            "{}:main-0-0000000 -> {}:{tag}@{digest}",
            w.repository, w.repository
        )
    );
    let (first, printed) = w.pod();
    assert_eq!(first.reference, format!("{}:{tag}@{digest}", w.repository));
    assert_eq!(printed, w.settings.file_at(&c1, "configs/shop/app.yaml"));

    // The action face: the next commit, published by `settings-image
    // action` with the runner's environment and inputs.
    let c2 = w
        .settings
        .commit(&[("configs/shop/app.yaml", "replicas: 3\n")], T0 + 30);
    let ws = w.checkout(&c2);
    let outputs = action_publish(&w, &ws, &c2);
    let tag2 = outputs["tag"].clone();
    assert_eq!(tag2, w.settings.tag_at("main", &c2));
    let digest2 = outputs["digest"].clone();
    assert_eq!(
        outputs["reference"],
        format!("{}:{tag2}@{digest2}", w.repository),
        "the action's reference output is what Flux writes"
    );
    w.assert_rolled_out(&tag2, &digest2);
    assert_eq!(w.applied(), outputs["reference"]);
    let (second, printed) = w.pod();
    assert_ne!(second.replica_set, first.replica_set, "a new ReplicaSet");
    assert_eq!(second.reference, outputs["reference"]);
    assert_eq!(printed, w.settings.file_at(&c2, "configs/shop/app.yaml"));
    w.flux.gone(&w.ns, &first.name);
}

/// Runs `settings-image action` (publish) on the simulated runner for a
/// push of `sha` checked out in `ws`, plus `SSL_CERT_FILE` as a workflow's
/// `env:` gives it. The outputs as the runner parses them.
fn action_publish(w: &World, ws: &Path, sha: &str) -> std::collections::BTreeMap<String, String> {
    let mut runner = Runner::on_push(TempDir::new(), ws.to_path_buf());
    runner.sha = sha.into();
    runner.extra_env = w
        .trust()
        .map(|(k, v)| (k.to_string(), v.display().to_string()))
        .into();
    let with = [
        ("path", DIR),
        ("repository", w.repository.as_str()),
        ("timestamp-tag", "main"),
    ];
    let step = runner.run(&with);
    step.ok();
    step.outputs
}

/// docs/flux.md §8 and "Observed with Flux": Flux reads the registry over
/// TLS through the CA in `certSecretRef` (the generator's
/// `--cert-secret-ref`); without it the scan fails on the certificate,
/// not quietly over plain HTTP. `push` trusts the CA through
/// `SSL_CERT_FILE` and fails without it (a bundle of another CA), naming
/// the certificate and the variable.
#[test]
fn flux_and_push_reach_a_tls_registry_only_through_its_ca() {
    let w = World::new("tls", "main");
    w.settings
        .commit(&[("configs/shop/app.yaml", "a: 1\n")], T0 + 10);
    let elsewhere = TempDir::new();
    let (other_ca, _, _) = common::registry::ca_signed(elsewhere.path(), "127.0.0.1");
    let untrusted = Command::new(bin())
        .current_dir(&w.settings.work)
        .args(["push", "--path", DIR, "--repository", &w.repository])
        .args(["--timestamp-tag", "main"])
        .env("SSL_CERT_FILE", &other_ca)
        .env_remove("SSL_CERT_DIR")
        .output()
        .expect("running push");
    let err = String::from_utf8_lossy(&untrusted.stderr);
    assert_eq!(untrusted.status.code(), Some(4), "{err}");
    assert!(
        err.contains("presented a TLS certificate that is not trusted: SSL_CERT_FILE is set to"),
        "the error names the certificate and the variable: {err}"
    );
    assert!(tags_of(&w.registry, NAME).is_empty(), "nothing was pushed");

    let report = w.push(&[]);
    let tag = text(&report, "/timestamp_tag");
    let digest = text(&report, "/digest");
    assert_eq!(w.served(), (tag, digest));

    // The same ImageRepository without certSecretRef.
    let objects = w.generate(&["--prefix", "main", "--name", "no-ca", "--no-automation"]);
    let objects = objects.replace("  certSecretRef:\n    name: registry-ca\n", "");
    assert!(!objects.contains("certSecretRef"), "{objects}");
    w.flux.apply(&objects);
    let repo = w
        .flux
        .wait(&w.ns, "imagerepository/no-ca", "failed its scan", |v| {
            condition(v, "Ready").is_some_and(|c| c.0 == "False" && !c.2.contains("processing"))
        });
    let (_, reason, message) = condition(&repo, "Ready").expect("Ready");
    assert!(
        message.contains("x509") && message.contains("certificate"),
        "{reason}: {message}"
    );
    assert!(
        repo["status"]["lastScanResult"].is_null(),
        "{:#}",
        repo["status"]
    );
}

/// README ("the cluster only moves forward") and docs/flux.md §3:
/// re-running the job of an older commit re-pushes the same digest, and
/// an older commit's first push after a newer one adds a lower tag; in
/// both Flux keeps serving the newest tag and commits nothing.
#[test]
fn rerunning_an_older_job_moves_nothing() {
    let w = World::new("forward", "main");
    let c0 = w
        .settings
        .commit(&[("configs/shop/app.yaml", "v: 0\n")], T0 + 10);
    let c1 = w
        .settings
        .commit(&[("configs/shop/app.yaml", "v: 1\n")], T0 + 20);
    let first = w.push_in(&w.checkout(&c1), &[]);
    let (tag1, digest1) = (text(&first, "/timestamp_tag"), text(&first, "/digest"));
    w.assert_rolled_out(&tag1, &digest1);
    let c2 = w
        .settings
        .commit(&[("configs/shop/app.yaml", "v: 2\n")], T0 + 30);
    let second = w.push(&[]);
    let (tag2, digest2) = (text(&second, "/timestamp_tag"), text(&second, "/digest"));
    assert_eq!(tag2, w.settings.tag_at("main", &c2));
    w.assert_rolled_out(&tag2, &digest2);
    let head = w.cluster.served_head();

    // The job of c1 again: the same tag and digest, nothing pushed.
    let rerun = w.push_in(&w.checkout(&c1), &[]);
    assert_eq!(text(&rerun, "/timestamp_tag"), tag1);
    assert_eq!(text(&rerun, "/digest"), digest1);
    assert_eq!(rerun["pushed"], false, "{rerun:#}");
    assert_eq!(rerun["anomaly"]["kind"], "rerun-of-older", "{rerun:#}");
    assert_eq!(said_served(&rerun), tag2);
    w.assert_unmoved(&tag2, &digest2);

    // c0's job, queued behind the others, runs for the first time.
    let late = w.push_in(&w.checkout(&c0), &[]);
    let tag0 = text(&late, "/timestamp_tag");
    assert_eq!(tag0, w.settings.tag_at("main", &c0));
    assert_eq!(late["pushed"], true, "{late:#}");
    assert_eq!(said_served(&late), tag2, "{late:#}");
    w.assert_unmoved(&tag2, &digest2);
    assert_eq!(
        w.cluster.served_head(),
        head,
        "no commit in the cluster repository"
    );
    assert_eq!(w.applied(), format!("{}:{tag2}@{digest2}", w.repository));
}

/// docs/flux.md §4-6: for each anomaly a push reports (same-second
/// commits, an older commit tagged after its same-second descendant, a
/// backwards committer date, a rewind and its documented fix), the tag the
/// push says Flux serves is the ImagePolicy's `latestRef`, every time, with
/// the digest the registry holds under it.
#[test]
fn each_anomaly_names_the_tag_flux_serves() {
    let w = World::new("anomaly", "main");
    let check = |report: &Value, kind: Option<&str>| {
        assert_eq!(report["anomaly"]["kind"].as_str(), kind, "{report:#}");
        let said = said_served(report);
        let (tag, digest) = w.served();
        eprintln!("observed: {kind:?}: push said {said}, latestRef {tag}");
        assert_eq!(tag, said, "push said Flux serves {said}: {report:#}");
        assert_eq!(digest_of(&w.registry, NAME, &tag), Some(digest));
        tag
    };
    let t = T0 + 1000;
    // Same second, the newer commit's tag sorting after the older's: Flux
    // keeps the older (the smallest tag).
    let a = w.settings.commit_where("configs/shop/a.yaml", t, &|_| true);
    check(&w.push(&[]), None);
    let b = w
        .settings
        .commit_where("configs/shop/b.yaml", t, &|s| s > &a[..7]);
    let r = w.push(&[]);
    assert_eq!(
        check(&r, Some("same-timestamp")),
        format!("main-{t}-{}", &a[..7])
    );
    let _ = b;

    // An older commit pushed after its same-second descendant, sorting
    // first: Flux moves to it.
    let t2 = t + 100;
    let c = w
        .settings
        .commit_where("configs/shop/c.yaml", t2, &|_| true);
    let d = w
        .settings
        .commit_where("configs/shop/d.yaml", t2, &|s| s > &c[..7]);
    check(&w.push(&[]), None);
    let r = w.push_in(&w.checkout(&c), &[]);
    assert_eq!(
        check(&r, Some("rerun-of-older")),
        format!("main-{t2}-{}", &c[..7])
    );

    // A backwards committer date on d's child: Flux keeps the higher tag.
    run_ok(git_cmd(&w.settings.home, &w.settings.work).args(["checkout", "-q", "-B", "main", &d]));
    w.settings
        .commit(&[("configs/shop/e.yaml", "e: 1\n")], t2 - 500);
    let r = w.push(&[]);
    let kept = check(&r, Some("backwards-timestamp"));
    assert!(kept.starts_with(&format!("main-{t2}-")), "{kept}");

    // A rewind: f, then g; a force-push back to f (dropping g): Flux keeps
    // g's tag. The fix, one more commit changing the folder: Flux moves.
    let f = w
        .settings
        .commit(&[("configs/shop/app.yaml", "f: 1\n")], t2 + 100);
    let g = w
        .settings
        .commit(&[("configs/shop/app.yaml", "g: 1\n")], t2 + 200);
    check(&w.push(&[]), None);
    run_ok(git_cmd(&w.settings.home, &w.settings.work).args(["reset", "-q", "--hard", &f]));
    w.settings.push();
    let r = w.push(&["--force-pushed-from", &g]);
    assert_eq!(
        check(&r, Some("rewound-history")),
        format!("main-{}-{}", t2 + 200, &g[..7])
    );
    w.settings.commit(
        &[("configs/shop/app.yaml", "f: 1 # released again\n")],
        t2 + 300,
    );
    let r = w.push(&[]);
    assert_eq!(check(&r, None), w.settings.tag_at("main", "HEAD"));
}

/// docs/release-management.md: an ImagePolicy on the channel `promote`
/// fills moves only when promote moves the channel: inside a release
/// window promote makes Flux commit the new reference and the pod reads
/// the promoted content, outside it nothing changes (the running pod keeps
/// reading the old content), and `--force --reason` releases at once, with
/// its record, to a new pod.
#[test]
fn a_channel_moves_only_when_promote_moves_it() {
    let w = World::new("channel", "prod");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64;
    let policy = |start: i64, end: i64| {
        let at = common::rfc3339;
        let file = w.tmp.join(&format!("policy-{start}.yaml"));
        std::fs::write(
            &file,
            format!(
                "windows:\n  - kind: allow\n    description: the test's window\n    start: \"{}\"\n    end: \"{}\"\n",
                at(start),
                at(end)
            ),
        )
        .expect("policy file");
        file
    };
    let open = policy(now - 3600, now + 3600);
    let shut = policy(now + 86_400, now + 2 * 86_400);
    let promote = |policy: &Path, extra: &[&str]| -> Value {
        let mut args = vec![
            "promote",
            "--repository",
            &w.repository,
            "--from",
            "main",
            "--to",
            "prod",
            "--json",
            "--policy",
        ];
        let p = policy.to_str().expect("utf-8");
        args.push(p);
        args.extend(extra);
        let out = w.run_in(w.tmp.path(), &args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "promote {extra:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("promote --json")
    };

    let c1 = w
        .settings
        .commit(&[("configs/shop/app.yaml", "v: 1\n")], T0 + 10);
    let p1 = w.push(&[]);
    let r = promote(&open, &[]);
    assert_eq!(r["decision"], "promote", "{r:#}");
    let prod1 = format!("prod-{}-{}", T0 + 10, &c1[..7]);
    assert_eq!(
        digest_of(&w.registry, NAME, &prod1).as_deref(),
        Some(text(&p1, "/digest").as_str())
    );
    w.assert_rolled_out(&prod1, &text(&p1, "/digest"));
    let (released, printed) = w.pod();
    let v1 = w.settings.file_at(&c1, "configs/shop/app.yaml");
    assert_eq!(printed, v1);

    // A newer candidate outside the window: the channel, Flux and the
    // cluster stay.
    let c2 = w
        .settings
        .commit(&[("configs/shop/app.yaml", "v: 2\n")], T0 + 20);
    let p2 = w.push(&[]);
    let r = promote(&shut, &[]);
    assert_eq!(r["decision"], "wait", "{r:#}");
    let prod2 = format!("prod-{}-{}", T0 + 20, &c2[..7]);
    assert!(!tags_of(&w.registry, NAME).contains(&prod2));
    w.assert_unmoved(&prod1, &text(&p1, "/digest"));
    // The running pod: the same one, never restarted, reading the old file.
    let (kept, _) = w.pod();
    assert_eq!(kept.name, released.name);
    let pod = w.flux.get(&w.ns, &format!("pod/{}", kept.name));
    assert_eq!(pod["status"]["containerStatuses"][0]["restartCount"], 0);
    let read = w.flux.exec(&w.ns, &kept.name, "cat /etc/settings/app.yaml");
    assert!(read.status.success(), "{read:?}");
    assert_eq!(String::from_utf8_lossy(&read.stdout), v1);

    // Break-glass: released now, and the record says why.
    let r = promote(&shut, &["--force", "--reason", "incident 42"]);
    assert_eq!(r["decision"], "promote", "{r:#}");
    w.assert_rolled_out(&prod2, &text(&p2, "/digest"));
    let (forced, printed) = w.pod();
    assert_ne!(forced.replica_set, released.replica_set);
    assert_eq!(printed, w.settings.file_at(&c2, "configs/shop/app.yaml"));
    w.flux.gone(&w.ns, &released.name);
    let out = w.run_in(
        w.tmp.path(),
        &["inspect", &format!("{}:{prod2}", w.repository), "--json"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let inspected: Value = serde_json::from_slice(&out.stdout).expect("inspect --json");
    let records = inspected["promotions"].as_array().expect("promotions");
    assert!(
        records.iter().any(|p| p["tag"] == prod2.as_str()
            && p["forced"] == true
            && p["reason"] == "incident 42"),
        "{inspected:#}"
    );
}

/// docs/controller.md: a real source-controller fetches the settings
/// repository from `git http-backend` and announces the commit; `settings-image
/// controller` publishes it (nothing in the test writes a status); the
/// objects `flux --settings-image` generates from the SettingsImage follow
/// it, committing through the bootstrap's GitRepository in `flux-system`
/// as the worked example does, and the chain ends in Flux's commit, the
/// applied Deployment and its pod printing the commit's file; the next
/// commit in a new pod.
#[test]
fn the_controller_publishes_what_source_controller_fetched() {
    let w = World::new("controller", "main");
    let crd = repo().join("config/crd/settings-image.configbutler.io_settingsimages.yaml");
    w.flux.kubectl_ok(&[
        "apply",
        "--server-side",
        "--force-conflicts",
        "-f",
        crd.to_str().expect("utf-8"),
    ]);
    w.flux.kubectl_ok(&[
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/settingsimages.settings-image.configbutler.io",
    ]);
    let c1 = w
        .settings
        .commit(&[("configs/shop/app.yaml", "replicas: 2\n")], T0 + 10);
    w.settings.commit(&[("README.md", "unrelated\n")], T0 + 20);
    // The settings repository behind basic auth: one Secret, in Flux's
    // keys, read by source-controller and by the controller alike.
    let private = GitServer::start(
        &w.tmp.join("srv"),
        GitOptions {
            basic: Some(("flux".into(), "s3cret-g1t".into())),
            ..Default::default()
        },
    );
    w.flux.kubectl_ok(&[
        "create",
        "secret",
        "generic",
        "git-auth",
        "-n",
        &w.ns,
        "--from-literal=username=flux",
        "--from-literal=password=s3cret-g1t",
    ]);
    w.flux.apply(&format!(
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: settings\n  namespace: {ns}\n\
         spec:\n  interval: 10m\n  url: {url}\n  ref:\n    branch: main\n  secretRef:\n    name: git-auth\n",
        ns = w.ns,
        url = private.url("settings.git"),
    ));
    let manifest = format!(
        "apiVersion: settings-image.configbutler.io/v1alpha1\nkind: SettingsImage\nmetadata:\n  name: shop\n  namespace: {ns}\n\
         spec:\n  sourceRef:\n    kind: GitRepository\n    name: settings\n  path: {DIR}\n  repository: {repository}\n  timestampTag: main\n",
        ns = w.ns,
        repository = w.repository,
    );
    let manifest_file = w.tmp.join("shop.yaml");
    std::fs::write(&manifest_file, &manifest).expect("writing the manifest");
    w.flux.apply(&manifest);

    let controller = Controller::start(&w);
    let source = w
        .flux
        .wait(&w.ns, "gitrepository/settings", "fetched the head", |v| {
            v["status"]["artifact"]["revision"].as_str().is_some()
        });
    let head = w.settings.served_head();
    assert_eq!(
        source["status"]["artifact"]["revision"],
        format!("main@sha1:{head}"),
        "source-controller's announcement"
    );
    let si = w.flux.wait(
        &w.ns,
        "settingsimage/shop",
        "published the fetched revision",
        |v| {
            v["status"]["lastHandledRevision"] == format!("main@sha1:{head}")
                && condition(v, "Ready").is_some_and(|c| c.0 == "True")
        },
    );
    let image = &si["status"]["images"][0];
    let tag = text(image, "/tag");
    assert_eq!(tag, format!("main-{}-{}", T0 + 10, &c1[..7]));
    let digest = text(image, "/digest");
    assert_eq!(digest_of(&w.registry, NAME, &tag), Some(digest.clone()));

    // The objects generated from the SettingsImage itself (no --prefix:
    // it comes from spec.timestampTag), applied as generated, replacing
    // the world's. As in docs/controller.md's worked example, the cluster
    // repository is Flux's bootstrap GitRepository, `flux-system` in
    // namespace `flux-system`, and no flag names it: the automation, in
    // the SettingsImage's namespace, must find it there (Flux said
    // `GitRepository "flux-system" not found` when it was looked for in
    // the automation's own namespace).
    w.flux.apply(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: flux-system\n---\n\
         apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: flux-system\n  namespace: flux-system\n\
         spec:\n  interval: 10m\n  url: {url}\n  ref:\n    branch: main\n",
        url = w.git.url("cluster.git"),
    ));
    let out = Command::new(bin())
        .args(["flux", "--settings-image"])
        .arg(&manifest_file)
        .args(["--interval", "10m"])
        .args([
            "--git-path",
            "./clusters/prod",
            "--cert-secret-ref",
            "registry-ca",
        ])
        .output()
        .expect("settings-image flux");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let objects = String::from_utf8(out.stdout).expect("UTF-8");
    assert_eq!(marker_of(&objects), w.marker);
    w.flux.apply(&objects);
    w.assert_rolled_out(&tag, &digest);
    let (first, printed) = w.pod();
    assert_eq!(printed, w.settings.file_at(&c1, "configs/shop/app.yaml"));

    // The next commit: fetched, published, rolled out; no status from the test.
    let c2 = w
        .settings
        .commit(&[("configs/shop/app.yaml", "replicas: 3\n")], T0 + 30);
    w.flux.reconcile(&w.ns, "gitrepository/settings");
    let si = w.flux.wait(
        &w.ns,
        "settingsimage/shop",
        "published the next revision",
        |v| {
            v["status"]["lastHandledRevision"] == format!("main@sha1:{c2}")
                && condition(v, "Ready").is_some_and(|c| c.0 == "True")
        },
    );
    let tag2 = text(&si["status"]["images"][0], "/tag");
    assert_eq!(tag2, w.settings.tag_at("main", &c2));
    let digest2 = text(&si["status"]["images"][0], "/digest");
    w.assert_rolled_out(&tag2, &digest2);
    let (second, printed) = w.pod();
    assert_ne!(second.replica_set, first.replica_set, "a new ReplicaSet");
    assert_eq!(printed, w.settings.file_at(&c2, "configs/shop/app.yaml"));
    w.flux.gone(&w.ns, &first.name);
    // Both fetched through the Secret: every answered request carried it.
    let hits = private.hits();
    let basic = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode("flux:s3cret-g1t")
    );
    assert!(hits.iter().any(|h| h.status == 200), "{hits:?}");
    for h in hits.iter().filter(|h| h.status == 200) {
        assert_eq!(h.authorization.as_deref(), Some(basic.as_str()), "{h:?}");
    }
    drop(controller);
}

/// `settings-image controller` as a process against the Flux cluster's API
/// server (its admin kubeconfig), trusting the registry's CA; killed on drop.
struct Controller {
    _process: Process,
    _dir: TempDir,
}

impl Controller {
    fn start(w: &World) -> Controller {
        let dir = TempDir::new();
        let mut cmd = controller_command(
            &w.ns,
            &format!("127.0.0.1:{}", common::registry::free_port()),
            &format!("127.0.0.1:{}", common::registry::free_port()),
            &dir.join("cache"),
        );
        cmd.arg("--kubeconfig")
            .arg(&w.flux.kubeconfig)
            .envs(w.trust())
            .env("TMPDIR", dir.path());
        Controller {
            _process: Process::spawn(&mut cmd, dir.join("controller.log")),
            _dir: dir,
        }
    }
}

/// docs/flux.md §7: `verify --scan` of the cluster repository after Flux's
/// commits passes, for the reference the running pod mounts; after a
/// digest is edited by hand to another image's, it fails with exit 7
/// naming the reference.
#[test]
fn verify_scan_passes_fluxs_commits_and_fails_a_hand_edit() {
    let w = World::new("gate", "main");
    w.settings
        .commit(&[("configs/shop/app.yaml", "v: 1\n")], T0 + 10);
    // Another image to edit a digest to, under a tag no policy follows:
    // Flux's own scan may run between two pushes, and a followed tag
    // would then be a rollout (a commit) of its own.
    let other = w.push_prefix(&w.settings.work, "other", &[]);
    w.settings
        .commit(&[("configs/shop/app.yaml", "v: 2\n")], T0 + 20);
    let report = w.push(&[]);
    let (tag, digest) = (text(&report, "/timestamp_tag"), text(&report, "/digest"));
    w.assert_rolled_out(&tag, &digest);
    // What the running pod mounts, and prints.
    let (pod, printed) = w.pod();
    assert_eq!(printed, "v: 2\n");

    let clone = w.tmp.join("cluster-clone");
    run_ok(
        git_cmd(&w.cluster.home, w.tmp.path())
            .args(["clone", "-q", &w.git.url("cluster.git")])
            .arg(&clone),
    );
    let scan = |dir: &Path| {
        w.run_in(
            &w.settings.work,
            &[
                "verify",
                "--scan",
                dir.to_str().expect("utf-8"),
                "--repository",
                &w.repository,
                "--path",
                DIR,
                "--json",
            ],
        )
    };
    let ok = scan(&clone.join("clusters"));
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let rows: Value = serde_json::from_slice(&ok.stdout).expect("verify --json");
    let verified: Vec<&Value> = rows["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .filter(|r| r["status"] == "verified")
        .collect();
    assert!(
        verified
            .iter()
            .any(|r| r["reference"] == pod.reference.as_str()),
        "the scan verified the reference the running pod mounts ({}): {rows:#}",
        pod.reference
    );

    let file = clone.join("clusters/prod/shop.yaml");
    let edited = std::fs::read_to_string(&file)
        .expect("shop.yaml")
        .replace(&digest, &text(&other, "/digest"));
    std::fs::write(&file, edited).expect("editing by hand");
    let bad = scan(&clone.join("clusters"));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(
        bad.status.code(),
        Some(7),
        "{err}\n{}",
        String::from_utf8_lossy(&bad.stdout)
    );
}

/// `scripts/flux.sh up`: a controller that does not start fails `up` with
/// its name and its log's tail, and nothing it started keeps running.
#[test]
fn flux_sh_up_fails_loudly_and_leaves_nothing_running() {
    let tmp = TempDir::new();
    let dir = tmp.join("flux");
    let out = Command::new("bash")
        .arg(repo().join("scripts/flux.sh"))
        .arg("up")
        .arg(&dir)
        .env("IMAGE_AUTOMATION_CONTROLLER_ARGS", "--no-such-flag")
        .output()
        .expect("running scripts/flux.sh up");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("image-automation-controller did not become ready (exited)"),
        "{err}"
    );
    assert!(
        err.contains("unknown flag: --no-such-flag"),
        "the log's tail: {err}"
    );
    // Every process it started, by the PIDs it wrote (kube.sh's among
    // them): gone.
    let env = std::fs::read_to_string(dir.join("flux.env")).expect("flux.env");
    let pids: Vec<&str> = env
        .lines()
        .filter(|l| l.split('=').next().is_some_and(|k| k.ends_with("_PID")))
        .filter_map(|l| l.split('=').nth(1))
        .collect();
    assert_eq!(
        pids.len(),
        6,
        "4 controllers, etcd and the API server: {env}"
    );
    for pid in pids {
        let alive = Command::new("kill")
            .args(["-0", pid])
            .status()
            .expect("kill -0");
        assert!(!alive.success(), "process {pid} still runs:\n{env}");
    }
}

/// docs/flux.md §3: with `digestReflectionPolicy: IfNotPresent` Flux reads
/// a tag's digest once: a tag moved in the registry afterwards (what
/// settings-image refuses to do, exit 3) is invisible to Flux, which keeps
/// the digest it read, and commits nothing.
#[test]
fn flux_reads_a_tags_digest_once() {
    let w = World::new("digest", "main");
    w.settings
        .commit(&[("configs/shop/app.yaml", "v: 1\n")], T0 + 10);
    let first = w.push(&[]);
    let (tag, digest) = (text(&first, "/timestamp_tag"), text(&first, "/digest"));
    w.assert_rolled_out(&tag, &digest);

    // Another image of the same repository, under a tag no policy follows.
    w.settings
        .commit(&[("configs/shop/app.yaml", "v: 2\n")], T0 + 20);
    let other = w.push_prefix(&w.settings.work, "other", &[]);
    let other_tag = text(&other, "/timestamp_tag");
    assert!(other_tag.starts_with("other-"), "{other:#}");
    // Moved by hand: the manifest of that image PUT under the served tag.
    let manifest = format!("{}/v2/{NAME}/manifests", w.registry.base());
    let accept = "Accept: application/vnd.oci.image.manifest.v1+json";
    let body =
        run_ok(
            w.registry
                .curl()
                .args(["-fsS", "-H", accept, &format!("{manifest}/{other_tag}")]),
        )
        .stdout;
    w.registry.put_manifest(NAME, &tag, &body);
    assert_eq!(
        digest_of(&w.registry, NAME, &tag),
        Some(text(&other, "/digest")),
        "the registry now names the other image under {tag}"
    );
    w.assert_unmoved(&tag, &digest);
    assert_eq!(w.applied(), format!("{}:{tag}@{digest}", w.repository));
}

/// README and docs/monorepo.md: several folders, one image each (`--path`
/// per folder, `{name}` in the repository template): one ImagePolicy per
/// image from the generator, one automation for all; a commit that
/// changes one folder moves only that image's line.
#[test]
fn several_folders_each_follow_their_own_policy() {
    let w = World::new("many", "main");
    let template = format!("{}/settings-{{name}}", w.registry.host());
    let objects = w.generate_for(
        &template,
        &[
            "--prefix",
            "main",
            "--path",
            "configs/shop",
            "--path",
            "configs/cart",
        ],
    );
    let cart_marker = objects
        .lines()
        .filter_map(|l| {
            l.find("{\"$imagepolicy\"")
                .map(|at| l[at..].trim().to_string())
        })
        .find(|m| m.contains(":settings-cart\""))
        .expect("the generator prints the cart image's marker");
    w.cluster.commit(
        &[(
            "clusters/prod/cart.yaml",
            &deployment(
                &format!("{}/settings-cart:main-0-0000000", w.registry.host()),
                &cart_marker,
            )
            .replace("name: shop", "name: cart")
            .replace("app: shop", "app: cart"),
        )],
        T0 + 1,
    );
    // A copy of shop's ImagePolicy without the generated label, marked on
    // a Deployment of its own: the automation's policySelector never
    // follows it (docs/monorepo.md).
    let copy_marker = w.marker.replace(":settings-shop\"", ":settings-copy\"");
    w.cluster.commit(
        &[(
            "clusters/prod/copy.yaml",
            &deployment(&format!("{}:main-0-0000000", w.repository), &copy_marker)
                .replace("name: shop", "name: copy")
                .replace("app: shop", "app: copy"),
        )],
        T0 + 2,
    );
    *w.seen.borrow_mut() = w.cluster.served_head();
    w.flux.apply(&objects);
    let mut copy: Value = serde_yaml_ng::Deserializer::from_str(&objects)
        .map(|d| serde::Deserialize::deserialize(d).expect("generated YAML"))
        .find(|d: &Value| d["kind"] == "ImagePolicy" && d["metadata"]["name"] == NAME)
        .expect("shop's ImagePolicy");
    copy["metadata"]["name"] = "settings-copy".into();
    copy["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("labels")
        .expect("the generated label");
    w.flux.apply(&copy.to_string());

    w.settings.commit(
        &[
            ("configs/shop/app.yaml", "shop: 1\n"),
            ("configs/cart/app.yaml", "cart: 1\n"),
        ],
        T0 + 10,
    );
    let push = |extra: &[&str]| -> Vec<Value> {
        let mut args = vec![
            "push",
            "--path",
            "configs/*",
            "--repository",
            &template,
            "--timestamp-tag",
            "main",
            "--json",
        ];
        args.extend(extra);
        let out = w.run_in(&w.settings.work, &args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<Vec<Value>>(&out.stdout).expect("one entry per folder")
    };
    let entry = |all: &[Value], path: &str| -> (String, String, bool) {
        let e = all
            .iter()
            .find(|e| e["path"] == path)
            .unwrap_or_else(|| panic!("no {path} in {all:?}"));
        (text(e, "/tag"), text(e, "/digest"), e["pushed"] == true)
    };
    let first = push(&[]);
    let (shop_tag, shop_digest, _) = entry(&first, "configs/shop");
    let (cart_tag, cart_digest, _) = entry(&first, "configs/cart");
    assert_eq!(shop_tag, w.settings.tag_at("main", "HEAD"));
    assert_eq!(
        w.served_by("settings-shop"),
        (shop_tag.clone(), shop_digest.clone())
    );
    assert_eq!(
        w.served_by("settings-cart"),
        (cart_tag.clone(), cart_digest.clone())
    );
    // The automation runs as each policy moves: one commit, or one per image.
    let commit = w.flux_commit().expect("Flux commits both images");
    assert!((1..=2).contains(&commit.commits), "{commit:?}");
    assert_eq!(commit.line, w.line_for(&shop_tag, &shop_digest));
    let cart_ref =
        |tag: &str, digest: &str| format!("{}/settings-cart:{tag}@{digest}", w.registry.host());
    assert_eq!(
        w.committed_line("clusters/prod/cart.yaml"),
        format!(
            "reference: {} # {cart_marker}",
            cart_ref(&cart_tag, &cart_digest)
        )
    );
    assert_eq!(
        w.applied(),
        format!("{}:{shop_tag}@{shop_digest}", w.repository)
    );
    assert_eq!(w.deployed("cart"), cart_ref(&cart_tag, &cart_digest));
    let copy_policy = w.flux.reconcile(&w.ns, "imagepolicy/settings-copy");
    assert_eq!(
        copy_policy["status"]["latestRef"]["tag"], shop_tag,
        "the copy resolves the same tag"
    );
    assert_eq!(
        w.committed_line("clusters/prod/copy.yaml"),
        format!("reference: {}:main-0-0000000 # {copy_marker}", w.repository),
        "the automation never writes a line of a policy without the label"
    );

    // Only cart changes: only cart's line moves.
    let c2 = w
        .settings
        .commit(&[("configs/cart/app.yaml", "cart: 2\n")], T0 + 20);
    let second = push(&[]);
    let (shop_again, _, shop_pushed) = entry(&second, "configs/shop");
    let (cart_tag2, cart_digest2, cart_pushed) = entry(&second, "configs/cart");
    assert_eq!(
        (shop_again.as_str(), shop_pushed),
        (shop_tag.as_str(), false)
    );
    assert!(cart_pushed);
    assert_eq!(cart_tag2, format!("main-{}-{}", T0 + 20, &c2[..7]));
    assert_eq!(
        w.served_by("settings-shop"),
        (shop_tag.clone(), shop_digest.clone())
    );
    assert_eq!(
        w.served_by("settings-cart"),
        (cart_tag2.clone(), cart_digest2.clone())
    );
    let commit = w.flux_commit().expect("a commit for cart");
    assert_eq!(commit.commits, 1, "{commit:?}");
    assert_eq!(
        commit.line,
        w.line_for(&shop_tag, &shop_digest),
        "shop's line stays"
    );
    assert_eq!(
        w.committed_line("clusters/prod/cart.yaml"),
        format!(
            "reference: {} # {cart_marker}",
            cart_ref(&cart_tag2, &cart_digest2)
        )
    );
    w.applied();
    assert_eq!(w.deployed("cart"), cart_ref(&cart_tag2, &cart_digest2));
}

/// docs/flux.md §6: after a backwards committer date Flux keeps the higher
/// tag; deleting that image from the registry is a fix: at its next scan
/// Flux serves the lower tag.
#[test]
fn deleting_the_kept_image_lets_flux_move_on() {
    let w = World::new("delete", "main");
    w.settings
        .commit(&[("configs/shop/app.yaml", "v: 1\n")], T0 + 100);
    let kept = w.push(&[]);
    let (high, high_digest) = (text(&kept, "/timestamp_tag"), text(&kept, "/digest"));
    w.assert_rolled_out(&high, &high_digest);
    // Its child, committed by a clock 50 s behind.
    w.settings
        .commit(&[("configs/shop/app.yaml", "v: 2\n")], T0 + 50);
    let behind = w.push(&[]);
    assert_eq!(
        behind["anomaly"]["kind"], "backwards-timestamp",
        "{behind:#}"
    );
    assert_eq!(said_served(&behind), high);
    w.assert_unmoved(&high, &high_digest);

    let deleted = run_ok(w.registry.curl().args([
        "-sS",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "-X",
        "DELETE",
        &format!("{}/v2/{NAME}/manifests/{high_digest}", w.registry.base()),
    ]));
    assert_eq!(String::from_utf8_lossy(&deleted.stdout), "202");
    assert!(!tags_of(&w.registry, NAME).contains(&high));
    w.assert_rolled_out(&text(&behind, "/timestamp_tag"), &text(&behind, "/digest"));
}
