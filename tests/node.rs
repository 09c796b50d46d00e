//! The kubelet mounts what `push` publishes: pods on the test run's node
//! (Kubernetes v1.36.3's kubelet, containerd v2.4.2, runc v1.5.3, started by
//! `scripts/kube.sh up --node` through `scripts/flux.sh`) with an image
//! volume of an image `settings-image push` published. Each test asserts
//! what the kubelet did, as a user sees it: what the container prints and
//! reads (`kubectl logs`, `kubectl exec`), the pod's status and Events. The
//! oracle for the mount is `git archive` of the commit, extracted by GNU
//! tar: not the code under test.
//!
//! Each test has its own namespace and registry (distribution 2.8 over TLS
//! with a CA of its own, on this machine's routable address), which the
//! node's containerd is told about as a cluster admin would (a hosts.toml
//! naming the CA).

use crate::common;

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use common::cmd::TestCommand;
use common::flux_cluster::{FluxCluster, flux_cluster};
use common::git::ScratchRepo;
use common::node::print_and_wait;
use common::registry::{Auth, Registry, random_file};
use common::{Node, TempDir, archived_files, run_ok, write_file};

/// 2026-01-01T00:00:00Z: the commits' committer time.
const T: i64 = 1_767_225_600;

/// One test's corner of the node: a namespace and a registry the node can
/// pull from.
struct Place {
    flux: &'static FluxCluster,
    ns: String,
    registry: Registry,
}

impl Place {
    fn new(name: &str, auth: Auth) -> Place {
        let p = Place::untrusted(name, auth);
        p.flux.trust_registry(&p.registry);
        p
    }

    /// A place whose registry the node does not know yet.
    fn untrusted(name: &str, auth: Auth) -> Place {
        let flux = flux_cluster();
        let ns = flux.fresh_namespace(name);
        let registry = Registry::start_tls(auth);
        Place { flux, ns, registry }
    }

    /// `settings-image push` of `folder` at the head of `repo` to
    /// `HOST/NAME` (with `creds` as the registry login); the reference Flux
    /// would write, `HOST/NAME:TAG@DIGEST`.
    fn push(
        &self,
        repo: &ScratchRepo,
        folder: &str,
        name: &str,
        creds: Option<(&str, &str)>,
    ) -> String {
        let repository = format!("{}/{name}", self.registry.host());
        let mut push = TestCommand::push_json(folder, &repository);
        push.args(["--timestamp-tag", "main"])
            .current_dir(&repo.dir)
            .env(
                "SSL_CERT_FILE",
                self.registry.ca.as_ref().expect("a TLS registry"),
            );
        if let Some((user, password)) = creds {
            push.env("SETTINGS_IMAGE_USERNAME", user)
                .env("SETTINGS_IMAGE_PASSWORD", password);
        }
        let report = push.json();
        let field = |k: &str| {
            report[k]
                .as_str()
                .unwrap_or_else(|| panic!("no {k}: {report}"))
                .to_string()
        };
        format!(
            "{repository}:{}@{}",
            field("timestamp_tag"),
            field("digest")
        )
    }

    /// Creates pod `name`: the node's busybox printing
    /// `/etc/settings/app.yaml`, the image volume `reference` mounted at
    /// `/etc/settings` (not marked read-only), `more` mounts added, and the
    /// pull Secret `secret` when given.
    fn pod(&self, name: &str, reference: &str, more: &str, secret: Option<&str>) {
        let secrets = secret
            .map(|s| format!("  imagePullSecrets:\n    - name: {s}\n"))
            .unwrap_or_default();
        self.flux.apply(&format!(
            "apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: {ns}
spec:
  terminationGracePeriodSeconds: 1
{secrets}  volumes:
    - name: settings
      image:
        reference: {reference}
        pullPolicy: IfNotPresent
  containers:
    - name: app
      image: {image}
      command: {command}
      volumeMounts:
        - name: settings
          mountPath: /etc/settings
{more}",
            ns = self.ns,
            image = self.flux.busybox(),
            command = print_and_wait("/etc/settings/app.yaml"),
        ));
    }

    /// Waits until pod `name` runs; its phase.
    fn running(&self, name: &str) -> String {
        let pod = self
            .flux
            .wait(&self.ns, &format!("pod/{name}"), "Running", |v| {
                v["status"]["phase"] == "Running"
            });
        let phase = pod["status"]["phase"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        eprintln!("observed: pod {}/{name} {phase}", self.ns);
        phase
    }
}

/// A tree as the pod lists it, and as `git archive` holds it: per path,
/// `D MODE`, `F MODE SHA256` or `L TARGET`.
type Listing = BTreeMap<String, String>;

/// What `dir` holds inside pod `pod`, listed by the pod's own busybox.
fn listed_in_pod(p: &Place, pod: &str, dir: &str) -> Listing {
    let script = format!(
        "cd {dir} && find . -mindepth 1 | sort | while IFS= read -r p; do
           if [ -L \"$p\" ]; then echo \"${{p#./}}	L $(readlink \"$p\")\";
           elif [ -d \"$p\" ]; then echo \"${{p#./}}	D $(stat -c %a \"$p\")\";
           else echo \"${{p#./}}	F $(stat -c %a \"$p\") $(sha256sum < \"$p\" | cut -d' ' -f1)\"; fi
         done"
    );
    let out = p.flux.exec(&p.ns, pod, &script);
    assert!(out.status.success(), "listing {dir} in {pod}: {out:?}");
    String::from_utf8(out.stdout)
        .expect("UTF-8 names")
        .lines()
        .map(|l| {
            let (path, what) = l.split_once('\t').expect("PATH\\tWHAT");
            (path.to_string(), what.to_string())
        })
        .collect()
}

/// The same listing of a tree `git archive` holds (normalized as an image
/// of the folder shows it: files 0644 or 0755, folders 0755).
fn listed(tree: &BTreeMap<String, Node>) -> Listing {
    tree.iter()
        .map(|(path, node)| {
            let what = match node {
                Node::Dir(mode) => format!("D {mode:o}"),
                Node::File(mode, bytes) => {
                    format!("F {mode:o} {}", hex::encode(Sha256::digest(bytes)))
                }
                Node::Link(target) => format!("L {target}"),
            };
            (path.clone(), what)
        })
        .collect()
}

/// The files of `folder` at `rev` of `repo`, from `git archive`.
fn archived(repo: &ScratchRepo, rev: &str, folder: &str) -> BTreeMap<String, Node> {
    let tmp = TempDir::new();
    let tar = tmp.join("archive.tar");
    run_ok(
        repo.cmd(&repo.dir)
            .args(["archive", "--format=tar", "-o"])
            .arg(&tar)
            .args([rev, folder]),
    );
    archived_files(&tar, folder)
}

/// docs/format.md, as the kubelet mounts it: every file of the commit's
/// folder with its bytes, nested folders, the executable bit and 0644, a
/// symlink inside the folder, a non-ASCII name and a 64 MiB file are in
/// the pod as `git archive` has them; the mount is read-only even though
/// the pod does not ask for it (a write fails); `subPath` mounts one
/// folder of the image.
#[test]
fn the_mount_holds_what_git_archive_holds() {
    let p = Place::new("mount", Auth::None);
    let repo = ScratchRepo::new();
    let root = repo.dir.join("configs/shop");
    write_file(
        &root,
        "app.yaml",
        b"greeting: hello from the commit\n",
        0o644,
    );
    write_file(&root, "nested/deeper/leaf.json", b"{\"depth\": 2}\n", 0o644);
    write_file(&root, "nested/deeper/more/limits.yaml", b"cpu: 2\n", 0o664);
    write_file(&root, "hooks/reload.sh", b"#!/bin/sh\necho reload\n", 0o755);
    write_file(&root, "größe-設定.yaml", "größe: 設定\n".as_bytes(), 0o644);
    std::os::unix::fs::symlink("app.yaml", root.join("current.yaml")).expect("symlink");
    std::fs::create_dir_all(root.join("blobs")).expect("blobs");
    random_file(&root.join("blobs/big.bin"), 64 << 20);
    repo.git(&["add", "-A"]);
    common::git::git_at(&repo.dir, &["commit", "-q", "-m", "settings"], T);
    let head = repo.git(&["rev-parse", "HEAD"]);
    let expected = archived(&repo, &head, "configs/shop");
    // The oracle holds what the test means to check.
    assert!(matches!(
        expected.get("hooks/reload.sh"),
        Some(Node::File(0o755, _))
    ));
    assert!(matches!(
        expected.get("nested/deeper/more/limits.yaml"),
        Some(Node::File(0o644, _))
    ));
    assert_eq!(
        expected.get("current.yaml"),
        Some(&Node::Link("app.yaml".into()))
    );
    assert!(matches!(expected.get("blobs/big.bin"), Some(Node::File(_, b)) if b.len() == 64 << 20));
    assert!(expected.contains_key("größe-設定.yaml"));

    let reference = p.push(&repo, "configs/shop", "settings-shop", None);
    p.pod(
        "shop",
        &reference,
        "        - name: settings\n          mountPath: /etc/deeper\n          subPath: nested/deeper\n",
        None,
    );
    let phase = p.running("shop");
    assert_eq!(phase, "Running");
    let printed = p.flux.printed(&p.ns, "shop");
    assert_eq!(printed, "greeting: hello from the commit\n");

    let mounted = listed_in_pod(&p, "shop", "/etc/settings");
    assert_eq!(mounted, listed(&expected));
    // subPath: that folder alone.
    let deeper: BTreeMap<String, Node> = expected
        .iter()
        .filter_map(|(k, v)| {
            k.strip_prefix("nested/deeper/")
                .map(|k| (k.to_string(), v.clone()))
        })
        .collect();
    assert_eq!(deeper.len(), 3, "{deeper:?}");
    assert_eq!(listed_in_pod(&p, "shop", "/etc/deeper"), listed(&deeper));

    // Read-only, though the pod did not ask for it.
    for target in [
        "/etc/settings/new.yaml",
        "/etc/settings/app.yaml",
        "/etc/deeper/leaf.json",
    ] {
        let write = p
            .flux
            .exec(&p.ns, "shop", &format!("echo changed > {target}"));
        let err = String::from_utf8_lossy(&write.stderr);
        assert!(!write.status.success(), "writing {target} worked");
        assert!(err.contains("Read-only file system"), "{target}: {err}");
    }
    let mount = p
        .flux
        .exec(&p.ns, "shop", "grep ' /etc/settings ' /proc/mounts");
    let mount = String::from_utf8_lossy(&mount.stdout).into_owned();
    eprintln!("observed: {mount}");
    assert!(
        mount
            .split_whitespace()
            .nth(3)
            .is_some_and(|o| o.split(',').any(|x| x == "ro")),
        "{mount}"
    );
}

/// docs/kubernetes.md, troubleshooting: a reference whose digest the
/// registry does not have: the pod never runs, and its status and Events
/// say the image was not found, naming the digest. A tag the registry does
/// not have with a digest it has mounts.
#[test]
fn a_digest_that_does_not_exist_is_what_the_pod_says() {
    let p = Place::new("missing", Auth::None);
    let repo = ScratchRepo::new();
    write_file(&repo.dir, "configs/shop/app.yaml", b"a: 1\n", 0o644);
    repo.git(&["add", "-A"]);
    common::git::git_at(&repo.dir, &["commit", "-q", "-m", "settings"], T);
    // The repository exists, with a tag; only the digest is wrong.
    let real = p.push(&repo, "configs/shop", "settings-shop", None);
    let (name_tag, digest) = real.split_once('@').expect("NAME:TAG@DIGEST");
    let missing = format!("sha256:{}", hex::encode(Sha256::digest(b"no such image")));
    assert_ne!(digest, missing);
    let reference = format!("{name_tag}@{missing}");
    p.pod("shop", &reference, "", None);

    let (kind, reason, message) = p
        .flux
        .wait_event(&p.ns, "shop", "saying the pull failed", |e| {
            e.1 == "Failed" && e.2.contains(&missing)
        });
    assert_eq!(kind, "Warning");
    assert_eq!(reason, "Failed");
    assert!(message.contains("not found"), "{message}");
    let pod = p.flux.wait(&p.ns, "pod/shop", "waiting on the pull", |v| {
        v["status"]["containerStatuses"][0]["state"]["waiting"]["reason"]
            .as_str()
            .is_some_and(|r| r == "ErrImagePull" || r == "ImagePullBackOff")
    });
    let status = &pod["status"];
    eprintln!(
        "observed: phase {} container {}",
        status["phase"], status["containerStatuses"][0]["state"]
    );
    assert_eq!(status["phase"], "Pending");
    let waiting = &status["containerStatuses"][0]["state"]["waiting"];
    assert!(
        waiting["message"]
            .as_str()
            .is_some_and(|m| m.contains(&missing)),
        "{waiting}"
    );
    // The other way round: a tag the registry does not have, with the
    // right digest, mounts: the node pulls by digest alone.
    let name = name_tag.rsplit_once(':').expect("NAME:TAG").0;
    p.pod(
        "wrong-tag",
        &format!("{name}:no-such-tag@{digest}"),
        "",
        None,
    );
    assert_eq!(p.running("wrong-tag"), "Running");
    assert_eq!(p.flux.printed(&p.ns, "wrong-tag"), "a: 1\n");
}

/// docs/kubernetes.md, a private ghcr.io package: an image on a registry
/// that needs a login. Without the pod's `imagePullSecrets` the kubelet's
/// pull is refused (the Event says why) and the pod never runs; with a
/// `kubernetes.io/dockerconfigjson` Secret it mounts, and the registry saw
/// the pull carry that login.
#[test]
fn a_registry_that_needs_a_login_mounts_only_with_the_pods_pull_secret() {
    let (user, password) = ("puller", "s3cret-pull-9f2");
    let p = Place::new(
        "login",
        Auth::Basic {
            user: user.into(),
            password: password.into(),
        },
    );
    let repo = ScratchRepo::new();
    write_file(
        &repo.dir,
        "configs/shop/app.yaml",
        b"private: true\n",
        0o644,
    );
    repo.git(&["add", "-A"]);
    common::git::git_at(&repo.dir, &["commit", "-q", "-m", "settings"], T);
    let reference = p.push(
        &repo,
        "configs/shop",
        "settings-shop",
        Some((user, password)),
    );

    p.pod("anonymous", &reference, "", None);
    // containerd's words for a registry that wants a login it was not given.
    let (_, reason, message) =
        p.flux
            .wait_event(&p.ns, "anonymous", "saying the pull was refused", |e| {
                e.1 == "Failed" && e.2.contains("authorization failed")
            });
    assert_eq!(reason, "Failed");
    assert!(message.contains("no basic auth credentials"), "{message}");
    let pod = p.flux.get(&p.ns, "pod/anonymous");
    assert_eq!(pod["status"]["phase"], "Pending", "{:#}", pod["status"]);

    p.flux.kubectl_ok(&[
        "create",
        "secret",
        "docker-registry",
        "pull",
        "-n",
        &p.ns,
        &format!("--docker-server={}", p.registry.host()),
        &format!("--docker-username={user}"),
        &format!("--docker-password={password}"),
    ]);
    p.pod("with-secret", &reference, "", Some("pull"));
    assert_eq!(p.running("with-secret"), "Running");
    assert_eq!(p.flux.printed(&p.ns, "with-secret"), "private: true\n");
    // The anonymous pod still cannot pull: the Secret is the pod's, not the node's.
    let pod = p.flux.get(&p.ns, "pod/anonymous");
    assert_eq!(pod["status"]["phase"], "Pending", "{:#}", pod["status"]);
}

/// docs/format.md ("Why `amd64`") and docs/kubernetes.md's troubleshooting
/// entry on platforms: a plain manifest mounts on this node whatever architecture
/// its config names (the one `push` wrote, and the same layer under a
/// config naming the other architecture); the manifest inside an OCI index
/// mounts only while the index lists it for the node's platform: an index
/// that names only another platform fails the pull with containerd's "no
/// match for platform".
#[test]
fn an_index_must_list_the_nodes_platform_a_plain_manifest_need_not() {
    let p = Place::new("platform", Auth::None);
    let repo = ScratchRepo::new();
    write_file(
        &repo.dir,
        "configs/shop/app.yaml",
        b"platform: any\n",
        0o644,
    );
    repo.git(&["add", "-A"]);
    common::git::git_at(&repo.dir, &["commit", "-q", "-m", "settings"], T);
    let reference = p.push(&repo, "configs/shop", "settings-shop", None);
    let (name_tag, digest) = reference.split_once('@').expect("NAME:TAG@DIGEST");
    let name = name_tag.rsplit_once(':').expect("NAME:TAG").0;
    let path = name.split_once('/').expect("HOST/NAME").1;
    let manifest = run_ok(p.registry.curl().args([
        "-fsS",
        "-H",
        "Accept: application/vnd.oci.image.manifest.v1+json",
        &format!("{}/v2/{path}/manifests/{digest}", p.registry.base()),
    ]))
    .stdout;
    // An index holding the very manifest `push` wrote, for `arch`.
    let index_of = |arch: &str| -> String {
        let index = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [{
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": digest,
                "size": manifest.len(),
                "platform": {"architecture": arch, "os": "linux"},
            }],
        })
        .to_string();
        let tmp = TempDir::new();
        let file = tmp.join("index.json");
        std::fs::write(&file, &index).expect("index.json");
        run_ok(p.registry.curl().args([
            "-fsS",
            "-X",
            "PUT",
            "-H",
            "Content-Type: application/vnd.oci.image.index.v1+json",
            "--data-binary",
            &format!("@{}", file.display()),
            &format!("{}/v2/{path}/manifests/index-{arch}", p.registry.base()),
        ]));
        format!(
            "{name}:index-{arch}@sha256:{}",
            hex::encode(Sha256::digest(index.as_bytes()))
        )
    };
    let node_arch = p.flux.kubectl_ok(&[
        "get",
        "node",
        p.flux.var("NODE_NAME"),
        "-o",
        "jsonpath={.status.nodeInfo.architecture}",
    ]);
    let other = if node_arch == "arm64" {
        "amd64"
    } else {
        "arm64"
    };

    p.pod("plain", &reference, "", None);
    assert_eq!(p.running("plain"), "Running");
    assert_eq!(p.flux.printed(&p.ns, "plain"), "platform: any\n");
    // The same layer under a config that names the other architecture, in
    // a plain manifest: the node mounts it all the same.
    let mut image: serde_json::Value = serde_json::from_slice(&manifest).expect("the manifest");
    let config_digest = image["config"]["digest"]
        .as_str()
        .expect("config digest")
        .to_string();
    let blobs = format!("{}/v2/{path}/blobs", p.registry.base());
    let config = run_ok(
        p.registry
            .curl()
            .args(["-fsS", &format!("{blobs}/{config_digest}")]),
    )
    .stdout;
    let mut config: serde_json::Value = serde_json::from_slice(&config).expect("the config");
    assert_eq!(config["architecture"], "amd64", "{config}");
    config["architecture"] = other.into();
    let config = config.to_string();
    let config_digest = format!("sha256:{}", hex::encode(Sha256::digest(config.as_bytes())));
    let upload = run_ok(p.registry.curl().args([
        "-fsS",
        "-X",
        "POST",
        "-o",
        "/dev/null",
        "-D",
        "-",
        &format!("{blobs}/uploads/"),
    ]))
    .stdout;
    let location = String::from_utf8_lossy(&upload)
        .lines()
        .find_map(|l| {
            l.strip_prefix("Location: ")
                .or_else(|| l.strip_prefix("location: "))
        })
        .expect("the upload's Location")
        .trim()
        .to_string();
    let location = if location.starts_with('/') {
        format!("{}{location}", p.registry.base())
    } else {
        location
    };
    let sep = if location.contains('?') { '&' } else { '?' };
    run_ok(p.registry.curl().args([
        "-fsS",
        "-X",
        "PUT",
        "-H",
        "Content-Type: application/octet-stream",
        "--data-binary",
        &config,
        &format!("{location}{sep}digest={config_digest}"),
    ]));
    image["config"]["digest"] = config_digest.into();
    image["config"]["size"] = config.len().into();
    let other_manifest = image.to_string();
    p.registry
        .put_manifest(path, &format!("plain-{other}"), other_manifest.as_bytes());
    p.pod(
        "plain-other",
        &format!(
            "{name}:plain-{other}@sha256:{}",
            hex::encode(Sha256::digest(other_manifest.as_bytes()))
        ),
        "",
        None,
    );
    assert_eq!(p.running("plain-other"), "Running");
    assert_eq!(p.flux.printed(&p.ns, "plain-other"), "platform: any\n");
    p.pod("index-node", &index_of(&node_arch), "", None);
    assert_eq!(p.running("index-node"), "Running");
    assert_eq!(p.flux.printed(&p.ns, "index-node"), "platform: any\n");

    p.pod("index-other", &index_of(other), "", None);
    let (_, reason, message) =
        p.flux
            .wait_event(&p.ns, "index-other", "saying no platform matched", |e| {
                e.1 == "Failed"
            });
    assert_eq!(reason, "Failed");
    assert!(message.contains("no match for platform"), "{message}");
    let pod = p.flux.get(&p.ns, "pod/index-other");
    assert_eq!(pod["status"]["phase"], "Pending", "{:#}", pod["status"]);
}

/// docs/kubernetes.md, troubleshooting, a private CA: a registry whose certificate
/// a CA the node does not know signed is refused with the x509 error in
/// the pod's Events; once the node's containerd is given the CA (a
/// hosts.toml), the kubelet's next pull of the same pod mounts.
#[test]
fn a_registry_of_a_ca_the_node_does_not_know_is_refused_until_it_does() {
    let p = Place::untrusted("ca", Auth::None);
    let repo = ScratchRepo::new();
    write_file(&repo.dir, "configs/shop/app.yaml", b"ca: private\n", 0o644);
    repo.git(&["add", "-A"]);
    common::git::git_at(&repo.dir, &["commit", "-q", "-m", "settings"], T);
    let reference = p.push(&repo, "configs/shop", "settings-shop", None);
    p.pod("shop", &reference, "", None);
    let (_, reason, message) =
        p.flux
            .wait_event(&p.ns, "shop", "saying the certificate is unknown", |e| {
                e.1 == "Failed" && e.2.contains("x509")
            });
    assert_eq!(reason, "Failed");
    assert!(
        message.contains("certificate signed by unknown authority"),
        "{message}"
    );
    p.flux.trust_registry(&p.registry);
    assert_eq!(p.running("shop"), "Running");
    assert_eq!(p.flux.printed(&p.ns, "shop"), "ca: private\n");
}
