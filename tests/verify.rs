//! `settings-image verify` against a real registry (CNCF distribution 2.8):
//! a faithful push passes, in every reference form; a re-pointed tag, a
//! manifest with an extra annotation, a changed file in the layer and a
//! missing provenance each fail with exit 7 and a reason; a shallow checkout
//! gets the same error as `push`. The forged images and their provenance
//! are written by another tool (tests/common/forge.py: Python's tar, gzip
//! and HTTP client; statements by hand), the way an attacker with push
//! access (or a buggy tool) would write them, so `verify` meets layers and
//! manifests it did not write.

use crate::common;

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use common::cmd::{Run, TestCommand};
use common::forge::{self, Edit};
use common::git::ScratchRepo;
use common::registry::{Auth, Registry, curl};
use common::runner::Runner;
use serde_json::Value;

/// A settings repository with `configs/shop`, commits at fixed times.
struct Settings {
    repo: ScratchRepo,
}

impl Settings {
    fn new() -> Settings {
        let s = Settings {
            repo: ScratchRepo::new(),
        };
        s.repo.commit_files(
            &[
                ("configs/shop/app.yaml", "port: 8080\n"),
                ("configs/shop/features/flags.yaml", "beta: false\n"),
                ("README.md", "settings\n"),
            ],
            "first",
            1_700_000_000,
        );
        s
    }

    fn folder(&self) -> PathBuf {
        self.repo.dir.join("configs/shop")
    }
}

/// `push --timestamp-tag main --json` of `folder` with `extra`: the report.
fn push(folder: &Path, repository: &str, extra: &[&str]) -> Value {
    TestCommand::push_json(folder, repository)
        .args(["--timestamp-tag", "main"])
        .args(extra)
        .json()
}

fn verify(folder: &Path, reference: &str) -> Run {
    TestCommand::new()
        .args(["verify", reference, "--path", folder.to_str().unwrap()])
        .run()
}

fn verify_json(folder: &Path, reference: &str) -> Value {
    let r = TestCommand::new()
        .args([
            "verify",
            reference,
            "--path",
            folder.to_str().unwrap(),
            "--json",
        ])
        .run();
    assert_eq!(r.code, 0, "verify {reference} failed: {}", r.stderr);
    serde_json::from_str(r.stdout.trim()).unwrap()
}

fn assert_mismatch(r: &Run, needles: &[&str]) {
    assert_eq!(
        r.code, 7,
        "want exit 7 (not what the commit holds)\nstdout: {}\nstderr: {}",
        r.stdout, r.stderr
    );
    assert!(
        r.stderr.contains("is not what its commit holds"),
        "{}",
        r.stderr
    );
    for n in needles {
        assert!(r.stderr.contains(n), "stderr lacks {n:?}:\n{}", r.stderr);
    }
}

fn s(v: &Value, k: &str) -> String {
    v[k].as_str()
        .unwrap_or_else(|| panic!("no {k} in {v}"))
        .to_string()
}

/// The manifest `reference` (a tag or digest) of `team/settings`-like
/// `name` names, read with curl.
fn manifest_of(reg: &Registry, name: &str, reference: &str) -> Value {
    let (code, body) = curl(
        &format!("http://{}/v2/{name}/manifests/{reference}", reg.host()),
        Some("application/vnd.oci.image.manifest.v1+json"),
    );
    assert_eq!(code, 200, "{name}:{reference}: {body}");
    serde_json::from_str(&body).unwrap()
}

/// The manifest annotations of `name@digest`, read with curl.
fn annotations(reg: &Registry, name: &str, digest: &str) -> BTreeMap<String, String> {
    serde_json::from_value(manifest_of(reg, name, digest)["annotations"].clone()).unwrap()
}

/// The config labels of `name@digest`, read with curl.
fn labels(reg: &Registry, name: &str, digest: &str) -> BTreeMap<String, String> {
    let config = manifest_of(reg, name, digest)["config"]["digest"].clone();
    let (code, body) = curl(
        &format!(
            "http://{}/v2/{name}/blobs/{}",
            reg.host(),
            config.as_str().unwrap()
        ),
        None,
    );
    assert_eq!(code, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    serde_json::from_value(v["config"]["Labels"].clone()).unwrap_or_default()
}

/// The caller's additions a forged provenance attests: annotations, labels.
type Added = (BTreeMap<String, String>, BTreeMap<String, String>);

/// Copies `from` (name and tag or digest) to `to` (name and tag) with
/// `edits`, by Python (tests/common/forge.py), and attaches a statement
/// written by hand that claims `commit`, `configs/shop` and
/// `refs/heads/main`, with `added` as the caller's annotations and labels:
/// a forgery that carries every claim a faithful image carries. Returns the
/// copy's digest.
fn forge_image(
    reg: &Registry,
    from: (&str, &str),
    to: (&str, &str),
    edits: &[Edit],
    commit: &str,
    added: &Added,
) -> String {
    let host = reg.host();
    let digest = forge::image(&host, from, to, edits);
    let created = annotations(reg, to.0, &digest)["org.opencontainers.image.created"].clone();
    let statement = forge::statement(&forge::Claims {
        subject_name: &format!("{host}/{}", to.0),
        subject_digest: &digest,
        commit,
        path: "configs/shop",
        git_ref: Some("refs/heads/main"),
        builder: "forger",
        annotations: added.0.clone(),
        labels: added.1.clone(),
    });
    forge::attach(
        &host,
        to.0,
        &digest,
        &statement,
        &forge::referrer_annotations(commit, &created, Some("refs/heads/main")),
    );
    digest
}

/// Points `tag` of `name` at `digest`, as anyone with push access can (a
/// copy of the manifest's bytes by forge.py, no provenance added).
fn re_point(reg: &Registry, name: &str, digest: &str, tag: &str) {
    let copied = forge::image(&reg.host(), (name, digest), (name, tag), &[]);
    assert_eq!(copied, digest, "an unedited copy keeps its bytes");
}

#[test]
fn a_faithful_push_verifies_in_every_reference_form() {
    let reg = Registry::start(Auth::None);
    let repo = format!("{}/team/settings", reg.host());
    let st = Settings::new();
    let a = push(&st.folder(), &repo, &[]);
    let (tag, digest, commit) = (s(&a, "timestamp_tag"), s(&a, "digest"), s(&a, "commit"));
    // History moves on; the old image still verifies from its own commit.
    st.repo.write("configs/shop/app.yaml", "port: 9090\n");
    let b_commit = st.repo.commit_all("second", 1_700_000_100);
    let b = push(&st.folder(), &repo, &[]);
    for reference in [
        format!("{repo}:{tag}"),
        format!("{repo}:{tag}@{digest}"),
        format!("{repo}@{digest}"),
    ] {
        let v = verify_json(&st.folder(), &reference);
        assert_eq!(v["digest"], digest.as_str(), "{reference}");
        assert_eq!(v["commit"], commit.as_str());
        assert_eq!(v["path"], "configs/shop");
        assert_eq!(v["blobs"], 2);
        assert_eq!(v["files"], 2);
    }
    let v = verify_json(&st.folder(), &s(&b, "reference"));
    assert_eq!(v["commit"], b_commit.as_str());
    let human = verify(&st.folder(), &format!("{repo}:{}", s(&b, "timestamp_tag")));
    assert_eq!(human.code, 0, "{}", human.stderr);
    assert!(human.stdout.contains("verified"), "{}", human.stdout);
}

#[test]
fn a_re_pointed_tag_fails() {
    let reg = Registry::start(Auth::None);
    let repo = format!("{}/team/settings", reg.host());
    let st = Settings::new();
    let a = push(&st.folder(), &repo, &[]);
    st.repo.write("configs/shop/app.yaml", "port: 9090\n");
    st.repo.commit_all("second", 1_700_000_100);
    let b = push(&st.folder(), &repo, &[]);
    let (tag_a, digest_a) = (s(&a, "timestamp_tag"), s(&a, "digest"));
    // The registry lets anyone with push access move a tag.
    re_point(&reg, "team/settings", &s(&b, "digest"), &tag_a);
    let r = verify(&st.folder(), &format!("{repo}:{tag_a}"));
    assert_mismatch(
        &r,
        &[
            "re-pointed",
            &tag_a,
            &s(&b, "commit"),
            &tag_a[tag_a.len() - 7..],
        ],
    );
    // Pinned by digest the old image is still what it was, but the
    // timestamp tag next to it no longer names it.
    let r = verify(&st.folder(), &format!("{repo}:{tag_a}@{digest_a}"));
    assert_mismatch(&r, &["never moves", &digest_a]);
    let ok = verify(&st.folder(), &format!("{repo}@{digest_a}"));
    assert_eq!(ok.code, 0, "{}", ok.stderr);
}

#[test]
fn a_manifest_with_an_extra_annotation_fails() {
    let reg = Registry::start(Auth::None);
    let repo = format!("{}/team/settings", reg.host());
    let st = Settings::new();
    let a = push(&st.folder(), &repo, &[]);
    let commit = s(&a, "commit");
    let forged = forge_image(
        &reg,
        ("team/settings", &s(&a, "digest")),
        ("team/settings", "annotated"),
        &[Edit::Annotation("org.example.approved", "yes")],
        &commit,
        &Added::default(),
    );
    assert_ne!(forged, s(&a, "digest"));
    let r = verify(&st.folder(), &format!("{repo}:annotated"));
    assert_mismatch(
        &r,
        &["extra annotation org.example.approved", "manifest differs"],
    );
    assert!(r.stderr.contains("hint:"), "{}", r.stderr);
}

/// docs/flux.md §7: an annotation added by hand after the push (the
/// manifest copied with one more, nothing else) is a new digest that no
/// provenance names, and verify says so, exit 7.
#[test]
fn an_annotation_added_by_hand_after_the_push_has_no_provenance() {
    let reg = Registry::start(Auth::None);
    let repo = format!("{}/team/settings", reg.host());
    let st = Settings::new();
    let a = push(&st.folder(), &repo, &[]);
    let edited = forge::image(
        &reg.host(),
        ("team/settings", &s(&a, "digest")),
        ("team/settings", "approved"),
        &[Edit::Annotation("org.example.approved", "yes")],
    );
    assert_ne!(edited, s(&a, "digest"));
    assert_eq!(
        annotations(&reg, "team/settings", &edited)["org.example.approved"],
        "yes"
    );
    let r = verify(&st.folder(), &format!("{repo}:approved"));
    assert_mismatch(
        &r,
        &[
            "the image has no provenance referrer",
            "or changed after the push: an annotation or label added by hand makes a new digest that no provenance names",
        ],
    );
}

#[test]
fn annotations_and_labels_from_the_cli_are_attested_and_verify() {
    let reg = Registry::start(Auth::None);
    let repo = format!("{}/team/settings", reg.host());
    let st = Settings::new();
    // No origin remote and no CI: the source annotation is the caller's.
    let source = "https://example.com/acme/settings";
    let source_flag = format!("org.opencontainers.image.source={source}");
    let flags = [
        "--annotation",
        "org.opencontainers.image.description=Shop settings",
        "--annotation",
        &source_flag,
        "--annotation",
        "org.opencontainers.image.created=2030-01-01T00:00:00Z",
        "--label",
        "org.opencontainers.image.title=settings-shop",
        "--label",
        "team=a=b",
    ];
    let a = push(&st.folder(), &repo, &flags);
    let (digest, commit) = (s(&a, "digest"), s(&a, "commit"));
    assert!(
        a["warnings"].to_string().contains("image.created=2030"),
        "{a}"
    );
    // `build` takes the same flags and makes the same image.
    let layout = common::TempDir::new();
    let folder = st.folder();
    let mut args = vec![
        "build",
        "--path",
        folder.to_str().unwrap(),
        "--output",
        layout.path().to_str().unwrap(),
        "--timestamp-tag",
        "main",
        "--json",
    ];
    args.extend_from_slice(&flags);
    assert_eq!(
        TestCommand::new().args(&args).json()["digest"],
        digest.as_str()
    );
    let pushed = annotations(&reg, "team/settings", &digest);
    assert_eq!(
        pushed["org.opencontainers.image.description"],
        "Shop settings"
    );
    assert_eq!(pushed["org.opencontainers.image.source"], source);
    assert_eq!(
        pushed["org.opencontainers.image.created"],
        "2023-11-14T22:13:20Z"
    );
    let pushed_labels = labels(&reg, "team/settings", &digest);
    assert_eq!(pushed_labels["team"], "a=b");
    assert!(!pushed_labels.contains_key("org.opencontainers.image.source"));
    // The provenance lists exactly what the caller added.
    let i = TestCommand::new()
        .args(["inspect", &s(&a, "reference"), "--json"])
        .json();
    assert_eq!(
        i["provenance"]["annotations"],
        serde_json::json!({
            "org.opencontainers.image.description": "Shop settings",
            "org.opencontainers.image.source": source,
        }),
        "{i}"
    );
    assert_eq!(
        i["provenance"]["labels"],
        serde_json::json!({"org.opencontainers.image.title": "settings-shop", "team": "a=b"}),
        "{i}"
    );
    let v = verify_json(&st.folder(), &s(&a, "reference"));
    assert_eq!(v["commit"], commit.as_str());
    // A label added by hand, with the provenance's claims (attested
    // additions included) forged onto the new image: the label is named.
    let added: Added = (
        serde_json::from_value(i["provenance"]["annotations"].clone()).unwrap(),
        serde_json::from_value(i["provenance"]["labels"].clone()).unwrap(),
    );
    forge_image(
        &reg,
        ("team/settings", &digest),
        ("team/settings", "labelled"),
        &[Edit::Label("org.example.approved", "yes")],
        &commit,
        &added,
    );
    let r = verify(&st.folder(), &format!("{repo}:labelled"));
    assert_mismatch(
        &r,
        &["config differs", "extra label org.example.approved=\"yes\""],
    );
    // A provenance claiming other additions than the image carries does
    // not make it verify: alone (another repository) it fails; next to the
    // faithful statement, the faithful one is what verifies.
    let mut claimed = added.clone();
    claimed
        .0
        .insert("org.opencontainers.image.version".into(), "v9".into());
    let repo2 = format!("{}/team/other", reg.host());
    let same = forge_image(
        &reg,
        ("team/settings", &digest),
        ("team/other", "overclaimed"),
        &[],
        &commit,
        &claimed,
    );
    assert_eq!(same, digest);
    let r = verify(&st.folder(), &format!("{repo2}:overclaimed"));
    assert_mismatch(
        &r,
        &["annotation org.opencontainers.image.version is missing"],
    );
    forge_image(
        &reg,
        ("team/settings", &digest),
        ("team/settings", "overclaimed"),
        &[],
        &commit,
        &claimed,
    );
    verify_json(&st.folder(), &format!("{repo}:overclaimed"));
}

#[test]
fn a_changed_file_in_the_layer_fails_and_is_named() {
    let reg = Registry::start(Auth::None);
    let repo = format!("{}/team/settings", reg.host());
    let st = Settings::new();
    let a = push(&st.folder(), &repo, &[]);
    // The same claims (revision, created, provenance), other bytes: the
    // layer re-written by Python's tarfile and gzip.
    let (commit, digest) = (s(&a, "commit"), s(&a, "digest"));
    forge_image(
        &reg,
        ("team/settings", &digest),
        ("team/settings", "changed"),
        &[Edit::File("features/flags.yaml", "beta: true\n")],
        &commit,
        &Added::default(),
    );
    let r = verify(&st.folder(), &format!("{repo}:changed"));
    assert_mismatch(&r, &["features/flags.yaml: different content", &commit]);
    // A file the commit does not hold.
    forge_image(
        &reg,
        ("team/settings", &digest),
        ("team/settings", "added"),
        &[Edit::File("backdoor.yaml", "x: 1\n")],
        &commit,
        &Added::default(),
    );
    let r = verify(&st.folder(), &format!("{repo}:added"));
    assert_mismatch(
        &r,
        &["extra file backdoor.yaml: in the image, not in the commit"],
    );
    // With the files named in --json of a scan too.
    let cluster = common::TempDir::new();
    std::fs::write(
        cluster.path().join("pod.yaml"),
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  volumes:\n    - name: settings\n      image:\n        reference: {repo}:changed\n"
        ),
    )
    .unwrap();
    let r = TestCommand::new()
        .args([
            "verify",
            "--scan",
            cluster.path().to_str().unwrap(),
            "--repository",
            &repo,
            "--path",
            st.folder().to_str().unwrap(),
            "--json",
        ])
        .run();
    assert_eq!(r.code, 7, "{}", r.stderr);
    let v: Value = serde_json::from_str(r.stdout.trim()).unwrap();
    assert_eq!(v["rows"][0]["status"], "mismatch");
    assert_eq!(v["rows"][0]["file_differs"], "features/flags.yaml");
    assert_eq!(v["rows"][0]["line"], 9);
}

#[test]
fn a_missing_provenance_fails() {
    let reg = Registry::start(Auth::None);
    let repo = format!("{}/team/settings", reg.host());
    let st = Settings::new();
    let a = push(&st.folder(), &repo, &["--no-provenance"]);
    let r = verify(&st.folder(), &s(&a, "reference"));
    assert_mismatch(&r, &["no provenance", "--no-provenance"]);
    // The same content pushed with provenance verifies.
    push(&st.folder(), &repo, &[]);
    assert_eq!(verify(&st.folder(), &s(&a, "reference")).code, 0);
}

#[test]
fn a_shallow_checkout_gets_the_same_error_as_push() {
    let reg = Registry::start(Auth::None);
    let repo = format!("{}/team/settings", reg.host());
    let st = Settings::new();
    let older = push(&st.folder(), &repo, &[]);
    // The folder's last change is HEAD, and not the root commit: a depth-1
    // clone holds it with its parents cut off.
    st.repo.write("configs/shop/app.yaml", "port: 9090\n");
    st.repo.commit_all("second", 1_700_000_050);
    let a = push(&st.folder(), &repo, &[]);
    // A depth-1 clone, as actions/checkout makes it.
    let clone = common::TempDir::new();
    let url = format!("file://{}", st.repo.dir.display());
    st.repo.git_in(
        clone.path(),
        &["clone", "-q", "--depth", "1", &url, "shallow"],
    );
    let folder = clone.path().join("shallow/configs/shop");
    let pushed = TestCommand::new()
        .args([
            "push",
            "--path",
            folder.to_str().unwrap(),
            "--repository",
            &repo,
            "--timestamp-tag",
            "main",
        ])
        .run();
    // A shallow clone the history cannot answer: exit 1.
    assert_eq!(pushed.code, 1, "{}", pushed.stderr);
    let verified = verify(&folder, &s(&a, "reference"));
    assert_eq!(verified.code, pushed.code, "{}", verified.stderr);
    let first = |t: &str| {
        t.lines()
            .find(|l| l.starts_with("error:"))
            .unwrap_or("")
            .to_string()
    };
    assert!(
        first(&pushed.stderr).contains("shallow clone"),
        "{}",
        pushed.stderr
    );
    assert_eq!(first(&verified.stderr), first(&pushed.stderr));
    assert!(
        verified.stderr.contains("fetch-depth: 0"),
        "{}",
        verified.stderr
    );
    // An older image's commit is not in the clone at all: as clear.
    let r = verify(&folder, &s(&older, "reference"));
    assert_eq!(r.code, 1, "{}", r.stderr);
    let missing = format!("the revision {} is not in this clone", s(&older, "commit"));
    assert!(
        r.stderr.contains(&missing) && r.stderr.contains("fetch-depth: 0"),
        "{}",
        r.stderr
    );
}

/// A cluster repository with every workload kind, multi-document files,
/// `kind: List` (as `kustomize build` / `flux build` render), files Flux
/// does not read (`.json`, `.YAML`, under `.git`), and references that are
/// not image volumes.
fn cluster(dir: &Path, repo: &str, a: &str, b: &str, bad: &str) {
    let w = |rel: &str, text: String| {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    let pod = |volumes: &str| {
        format!(
            "containers:\n  - name: app\n    image: {repo}-app:not-a-volume\nvolumes:\n{volumes}"
        )
    };
    let indent = |t: &str, n: usize| {
        t.lines()
            .map(|l| format!("{}{l}\n", " ".repeat(n)))
            .collect::<String>()
    };
    let vol = |name: &str, r: &str| {
        format!(
            "  - name: {name}\n    image:\n      reference: {r} # {{\"$imagepolicy\": \"flux-system:settings\"}}\n"
        )
    };
    w(
        "apps/shop/deployment.yaml",
        format!(
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: shop\nspec:\n  ports: [{{port: 80}}]\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: shop\n  namespace: shop\nspec:\n  template:\n    spec:\n{}",
            indent(&pod(&vol("settings", a)), 6)
        ),
    );
    w(
        "apps/shop/statefulset.yml",
        format!(
            "apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: db\nspec:\n  template:\n    spec:\n{}",
            indent(&pod(&vol("settings", b)), 6)
        ),
    );
    w(
        "apps/jobs.yaml",
        format!(
            "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: once\nspec:\n  template:\n    spec:\n{}---\napiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: nightly\nspec:\n  jobTemplate:\n    spec:\n      template:\n        spec:\n{}",
            indent(&pod(&vol("settings", a)), 6),
            indent(&pod(&vol("settings", a)), 10)
        ),
    );
    w(
        "apps/ds.yaml",
        format!(
            "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: agent\nspec:\n  template:\n    spec:\n{}",
            indent(
                &pod(&(vol("other", "ghcr.io/elsewhere/settings:v1") + &vol("mine", b))),
                6
            )
        ),
    );
    w(
        "apps/pod.yaml",
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: debug\nspec:\n{}",
            indent(&pod(&vol("settings", bad)), 2)
        ),
    );
    w(
        "rendered/all.yaml",
        format!(
            "---\napiVersion: v1\nkind: List\nitems:\n  - apiVersion: apps/v1\n    kind: Deployment\n    metadata:\n      name: rendered\n    spec:\n      template:\n        spec:\n{}---\n",
            indent(&pod(&vol("settings", b)), 10)
        ),
    );
    // Flux reads only `.yaml` and `.yml` files of a path: these are not applied.
    w(
        "apps/ignored.json",
        serde_json::json!({"kind": "Pod", "spec": {"volumes": [{"name": "s", "image": {"reference": bad}}]}})
            .to_string(),
    );
    w(
        "apps/ignored.YAML",
        format!("kind: Pod\nspec:\n{}", indent(&pod(&vol("s", bad)), 2)),
    );
    w(
        ".git/objects.yaml",
        format!("kind: Pod\nspec:\n{}", indent(&pod(&vol("s", bad)), 2)),
    );
    w("README.md", format!("reference: {bad}\n"));
}

#[test]
fn scan_verifies_every_workload_kind_and_fails_on_one_bad_reference() {
    let reg = Registry::start(Auth::None);
    let repo = format!("{}/team/settings", reg.host());
    let st = Settings::new();
    let a = push(&st.folder(), &repo, &[]);
    st.repo.write("configs/shop/app.yaml", "port: 9090\n");
    st.repo.commit_all("second", 1_700_000_100);
    let b = push(&st.folder(), &repo, &[]);
    let good_b = format!("{repo}@{}", s(&b, "digest"));
    let dir = common::TempDir::new();
    // First all faithful: exit 0.
    cluster(
        dir.path(),
        &repo,
        &s(&a, "reference"),
        &good_b,
        &s(&b, "reference"),
    );
    let folder = st.folder();
    let scan = |json: bool| {
        let mut args = vec![
            "verify",
            "--scan",
            dir.path().to_str().unwrap(),
            "--repository",
            &repo,
            "--path",
            folder.to_str().unwrap(),
        ];
        if json {
            args.push("--json");
        }
        TestCommand::new().args(&args).run()
    };
    let r = scan(true);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let v: Value = serde_json::from_str(r.stdout.trim()).unwrap();
    let mut objects: Vec<String> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            assert_eq!(r["status"], "verified", "{r}");
            format!(
                "{} {}",
                r["object"].as_str().unwrap(),
                r["volume"].as_str().unwrap()
            )
        })
        .collect();
    objects.sort();
    assert_eq!(
        objects,
        [
            "CronJob/nightly settings",
            "DaemonSet/agent mine",
            "Deployment/rendered settings",
            "Deployment/shop/shop settings",
            "Job/once settings",
            "Pod/debug settings",
            "StatefulSet/db settings",
        ]
    );
    // Now tag A's timestamp tag is re-pointed, and one Pod uses it.
    let tag_a = s(&a, "timestamp_tag");
    re_point(&reg, "team/settings", &s(&b, "digest"), &tag_a);
    let bad = format!("{repo}:{tag_a}");
    cluster(dir.path(), &repo, &s(&a, "reference"), &good_b, &bad);
    let r = scan(false);
    assert_eq!(r.code, 7, "{}\n{}", r.stdout, r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert!(lines[0].starts_with("STATUS"), "{}", r.stdout);
    let bad_lines: Vec<&&str> = lines.iter().filter(|l| l.starts_with("mismatch")).collect();
    // The Deployment, the Job and the CronJob pin A's digest next to the moved tag: the
    // tag no longer names it. The Pod uses the moved tag alone.
    assert_eq!(bad_lines.len(), 4, "{}", r.stdout);
    assert!(
        bad_lines
            .iter()
            .any(|l| l.contains("apps/pod.yaml:") && l.contains("re-pointed")),
        "{}",
        r.stdout
    );

    // The action face, as a cluster repository's workflow runs it: the
    // cluster checkout is the workspace, the settings repository is checked
    // out (full history) into a folder of it.
    let workspace = common::TempDir::new();
    let ws = workspace.path();
    cluster(
        &ws.join("cluster"),
        &repo,
        &s(&a, "reference"),
        &good_b,
        &bad,
    );
    let url = format!("file://{}", st.repo.dir.display());
    st.repo.git_in(ws, &["clone", "-q", &url, "settings"]);
    let runner = Runner::new(common::TempDir::new(), ws.to_path_buf());
    let with = |mode, scan| {
        [
            ("mode", mode),
            ("path", "settings/configs/shop"),
            ("repository", repo.as_str()),
            ("scan", scan),
        ]
    };
    let o = runner.run(&with("verify", "cluster/apps"));
    let stdout = &o.stdout;
    assert_eq!(o.code, 7, "{stdout}");
    assert!(
        stdout.contains("::error file=cluster/apps/pod.yaml,line=")
            && stdout.contains("re-pointed"),
        "{stdout}"
    );
    let text = &o.summary;
    assert!(text.contains("| ❌ | `pod.yaml:"), "{text}");
    assert!(text.contains("| ✅ | `shop/statefulset.yml:"), "{text}");
    assert_eq!(o.out("verified"), "false", "{:?}", o.outputs);
    // Only the faithful folder: the step passes.
    let o = runner.run(&with("verify", "cluster/apps/shop/statefulset.yml"));
    assert_eq!(o.code, 0, "{}", o.stdout);
    // A wrong mode is an input error.
    let o = runner.run(&with("audit", "cluster/apps/shop/statefulset.yml"));
    assert_eq!(o.code, 2);
    assert!(o.stdout.contains("the input `mode`"));
}

/// The arguments of the first `sh` block of `doc` (one command, lines
/// joined at `\`), without the program name.
fn first_command(doc: &str) -> Vec<String> {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(doc)).unwrap();
    let block = text
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .unwrap_or_else(|| panic!("{doc} has no sh block"));
    let words: Vec<String> = block
        .replace("\\\n", " ")
        .split_whitespace()
        .map(String::from)
        .collect();
    assert_eq!(words[0], "settings-image", "{block}");
    words[1..].to_vec()
}

#[test]
fn the_first_push_example_makes_images_that_verify() {
    let reg = Registry::start(Auth::None);
    let repo = format!("{}/team/settings", reg.host());
    let st = Settings::new();
    let folder = st.folder();
    let args: Vec<String> = first_command("docs/push.md")
        .into_iter()
        .map(|w| match w.as_str() {
            "settings" => folder.display().to_string(),
            "ghcr.io/OWNER/settings" => repo.clone(),
            _ => w,
        })
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let pushed = TestCommand::new().args(&args).json();
    let tags = pushed["tags"].as_array().unwrap();
    assert!(!tags.is_empty(), "{pushed}");
    // Every tag the example writes names what verify proves.
    for t in tags {
        let r = verify(&folder, &format!("{repo}:{}", t.as_str().unwrap()));
        assert_eq!(r.code, 0, "{t}: {}", r.stderr);
    }
    // A hand-written timestamp tag of another commit or time is refused
    // before anything is pushed; the commit's own is taken.
    let (tag, commit) = (s(&pushed, "timestamp_tag"), s(&pushed, "commit"));
    let ts = &tag["main-".len()..tag.len() - 8];
    for wrong in [
        format!(
            "main-1700000000-{}",
            if commit.starts_with("abcdef0") {
                "1234567"
            } else {
                "abcdef0"
            }
        ),
        format!("main-{}-{}", ts.parse::<i64>().unwrap() + 1, &commit[..7]),
    ] {
        let r = TestCommand::new()
            .args([
                "push",
                "--path",
                folder.to_str().unwrap(),
                "--repository",
                &repo,
                "--tag",
                &wrong,
            ])
            .run();
        assert_eq!(r.code, 2, "{wrong}: {}", r.stderr);
        assert!(
            r.stderr
                .contains(&format!("--tag {wrong} is shaped like a timestamp tag")),
            "{}",
            r.stderr
        );
        assert!(
            r.stderr.contains(&tag),
            "the hint names the right tag: {}",
            r.stderr
        );
        let listed = common::registry::skopeo_tags(&repo, None);
        assert!(!listed.contains(&wrong), "{listed:?}");
    }
    let other = format!("release-{ts}-{}", &commit[..7]);
    let r = TestCommand::new()
        .args([
            "push",
            "--path",
            folder.to_str().unwrap(),
            "--repository",
            &repo,
            "--tag",
            &other,
        ])
        .run();
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(verify(&folder, &format!("{repo}:{other}")).code, 0);
}

/// A faithful push of a new settings repository (`team/settings`).
fn pushed(reg: &Registry) -> (Settings, String, Value) {
    let repo = format!("{}/team/settings", reg.host());
    let st = Settings::new();
    let a = push(&st.folder(), &repo, &[]);
    (st, repo, a)
}

/// The faithful image of `a` copied to `tag` with `edits` by forge.py,
/// with a hand-written provenance claiming its commit.
fn forge_from(reg: &Registry, a: &Value, tag: &str, edits: &[Edit]) -> String {
    forge_image(
        reg,
        ("team/settings", &s(a, "digest")),
        ("team/settings", tag),
        edits,
        &s(a, "commit"),
        &Added::default(),
    )
}

/// `bytes` in a file under `dir`, for [`Edit::LayerFrom`].
fn blob_file(dir: &common::TempDir, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn a_missing_path_is_bad_input_named_before_any_request() {
    let reg = Registry::start(Auth::None);
    let (st, repo, a) = pushed(&reg);
    let missing = st.repo.dir.join("configs/shpo");
    // A faithful image, a typo in --path: not "do not deploy".
    let r = verify(&missing, &s(&a, "reference"));
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr
            .contains(&format!("{}: does not exist", missing.display())),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("do not deploy"), "{}", r.stderr);
    // A file is not a folder either.
    let file = st.folder().join("app.yaml");
    let r = verify(&file, &s(&a, "reference"));
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("is not a folder"), "{}", r.stderr);
    // The scan says it once, not once per row.
    let cluster = common::TempDir::new();
    std::fs::write(
        cluster.path().join("pod.yaml"),
        pod_yaml(&s(&a, "reference")),
    )
    .unwrap();
    let r = TestCommand::new()
        .args([
            "verify",
            "--scan",
            cluster.path().to_str().unwrap(),
            "--repository",
            &repo,
            "--path",
            missing.to_str().unwrap(),
        ])
        .run();
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("does not exist"), "{}", r.stderr);
    assert!(r.stdout.is_empty(), "{}", r.stdout);
    // A --scan folder that does not exist: named, bad input too.
    let gone = cluster.path().join("clusters");
    let (r, _) = scan_json(&gone, &repo, &st.folder(), &[]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr
            .contains(&format!("{}: does not exist", gone.display())),
        "{}",
        r.stderr
    );
}

#[test]
fn a_layer_that_is_not_gzip_is_a_mismatch() {
    let reg = Registry::start(Auth::None);
    let (st, repo, a) = pushed(&reg);
    let commit = s(&a, "commit");
    let tmp = common::TempDir::new();
    let plain = blob_file(&tmp, "plain", b"port: 8080\n, not gzip at all");
    forge_from(&reg, &a, "plain", &[Edit::LayerFrom(&plain)]);
    let r = verify(&st.folder(), &format!("{repo}:plain"));
    assert_mismatch(&r, &["is not the gzip-compressed tar", "not gzip", &commit]);
    // gzip, but not of a tar.
    let notar = blob_file(&tmp, "notar", &gzip(b"port: 8080\n"));
    forge_from(&reg, &a, "notar", &[Edit::LayerFrom(&notar)]);
    let r = verify(&st.folder(), &format!("{repo}:notar"));
    assert_mismatch(&r, &["is not the gzip-compressed tar"]);
}

/// `tar` (GNU tar, 512-byte records, no recursion) of `names` in `dir`,
/// as uid/gid 0 and without group or other write bits (the modes the
/// rebuilt layer gives).
fn gnu_tar(dir: &Path, names: &[&str]) -> Vec<u8> {
    let out = common::run_ok(
        common::tool("tar")
            .arg("-C")
            .arg(dir)
            .args([
                "-b1",
                "--format=gnu",
                "--no-recursion",
                "--owner=0",
                "--group=0",
                "--numeric-owner",
                "--mode=go-w",
                "-cf",
                "-",
            ])
            .args(names),
    );
    out.stdout
}

#[test]
fn a_second_gzip_member_that_adds_a_file_is_named() {
    let reg = Registry::start(Auth::None);
    let (st, repo, a) = pushed(&reg);
    let commit = s(&a, "commit");
    // The commit's files, then one more: the tar stream of all four cut
    // where extra.yaml's header starts, each part gzipped on its own by
    // GNU gzip (two members: what `gzip a; gzip b; cat` makes).
    let tmp = common::TempDir::new();
    let dir = tmp.join("files");
    std::fs::create_dir_all(dir.join("features")).unwrap();
    std::fs::write(dir.join("app.yaml"), "port: 8080\n").unwrap();
    std::fs::write(dir.join("features/flags.yaml"), "beta: false\n").unwrap();
    std::fs::write(dir.join("extra.yaml"), "debug: true\n").unwrap();
    let committed = ["app.yaml", "features", "features/flags.yaml"];
    let without = gnu_tar(&dir, &committed);
    let with = gnu_tar(&dir, &[&committed[..], &["extra.yaml"]].concat());
    // GNU tar ends an archive with two zero blocks: the commit's entries
    // are everything before them, and the longer archive starts with them.
    let cut = without.len() - 1024;
    assert!(without[cut..].iter().all(|&b| b == 0));
    assert_eq!(with[..cut], without[..cut]);
    let mut layer = gzip(&with[..cut]);
    layer.extend(gzip(&with[cut..]));
    let two = blob_file(&tmp, "two-members.tar.gz", &layer);
    // The oracle: GNU gzip and tar read every member and list the file.
    let listed = common::run_ok(
        common::tool("sh")
            .arg("-c")
            .arg(format!("gzip -dc '{}' | tar -tf -", two.display())),
    );
    let listed = String::from_utf8_lossy(&listed.stdout).to_string();
    assert!(listed.lines().any(|l| l == "extra.yaml"), "{listed}");
    forge_from(&reg, &a, "two-members", &[Edit::LayerFrom(&two)]);
    let r = verify(&st.folder(), &format!("{repo}:two-members"));
    assert_mismatch(
        &r,
        &[
            "extra file extra.yaml: in the image, not in the commit",
            &commit,
        ],
    );
    assert!(!r.stderr.contains("the same files"), "{}", r.stderr);
    // The same two members, the first one's CRC-32 broken: what containerd
    // refuses to unpack is no harmless re-encoding either.
    let first = gzip(&with[..cut]);
    let mut broken = first.clone();
    let at = first.len() - 8;
    broken[at] ^= 0xff;
    broken.extend(gzip(&with[cut..]));
    let broken = blob_file(&tmp, "broken-crc.tar.gz", &broken);
    forge_from(&reg, &a, "broken-crc", &[Edit::LayerFrom(&broken)]);
    let r = verify(&st.folder(), &format!("{repo}:broken-crc"));
    assert_mismatch(
        &r,
        &["is not the gzip-compressed tar", "gzip member 1's CRC-32"],
    );
}

#[test]
fn a_config_that_differs_names_each_field() {
    let reg = Registry::start(Auth::None);
    let (st, repo, a) = pushed(&reg);
    forge_from(
        &reg,
        &a,
        "env",
        &[
            Edit::Config("config.Env", r#"["MODE=debug"]"#),
            Edit::Config("config.Entrypoint", r#"["/bin/sh", "-c"]"#),
            Edit::Config("history", r#"[{"created_by": "forger"}]"#),
        ],
    );
    let r = verify(&st.folder(), &format!("{repo}:env"));
    assert_mismatch(
        &r,
        &[
            "config differs",
            "extra field config.Env = [\"MODE=debug\"]",
            "extra field config.Entrypoint = [\"/bin/sh\",\"-c\"]",
            "extra field history",
        ],
    );
    assert!(!r.stderr.contains("platform or diff_ids"), "{}", r.stderr);
}

/// `data` gzip-compressed by the system's gzip (an independent encoder).
fn gzip(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut child = common::tool("gzip")
        .args(["-c", "-n", "-1"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let data = data.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&data).unwrap());
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(out.status.success());
    out.stdout
}

#[test]
fn a_small_layer_that_inflates_hugely_is_stopped_at_the_limit() {
    let reg = Registry::start(Auth::None);
    let (st, repo, a) = pushed(&reg);
    // One file of zeros, 16 MiB past the documented limit (docs/flux.md:
    // the rebuilt tar, a few KiB, plus 64 MiB): about 80 KiB of gzip.
    let size: u64 = (64 << 20) + (16 << 20);
    let mut tar = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_ustar();
    h.set_path("zeros.yaml").unwrap();
    h.set_size(size);
    h.set_mode(0o644);
    h.set_cksum();
    tar.append(&h, std::io::repeat(0).take(size)).unwrap();
    let bomb = gzip(&tar.into_inner().unwrap());
    assert!(bomb.len() < 1 << 20, "{}", bomb.len());
    let tmp = common::TempDir::new();
    let bomb = blob_file(&tmp, "bomb", &bomb);
    forge_from(&reg, &a, "bomb", &[Edit::LayerFrom(&bomb)]);
    let folder = st.folder();
    let (r, peak_kib) = TestCommand::new()
        .args([
            "verify",
            &format!("{repo}:bomb"),
            "--path",
            folder.to_str().unwrap(),
        ])
        .peak_rss();
    assert_mismatch(&r, &["inflates to more than", "plus 64 MiB"]);
    // Inflated as a stream: the 80 MiB never sit in memory at once
    // (docs/flux.md: well under 64 MiB however large the bomb).
    assert!(
        peak_kib < 64 * 1024,
        "verify of an 80 MiB bomb peaked at {peak_kib} KiB"
    );
}

/// A Pod that mounts `reference` as an image volume.
fn pod_yaml(reference: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n    - name: app\n      image: busybox\n  volumes:\n    - name: settings\n      image:\n        reference: {reference}\n"
    )
}

/// `verify --scan DIR --repository REPO --path FOLDER --json [extra]`.
fn scan_json(dir: &Path, repo: &str, folder: &Path, extra: &[&str]) -> (Run, Value) {
    let mut args = vec![
        "verify",
        "--scan",
        dir.to_str().unwrap(),
        "--repository",
        repo,
        "--path",
        folder.to_str().unwrap(),
        "--json",
    ];
    args.extend_from_slice(extra);
    let r = TestCommand::new().args(&args).run();
    let v = serde_json::from_str(r.stdout.trim()).unwrap_or(Value::Null);
    (r, v)
}

/// `(status, file, object)` of each row, sorted.
fn rows(v: &Value) -> Vec<(String, String, String)> {
    let mut out: Vec<(String, String, String)> = v["rows"]
        .as_array()
        .unwrap_or_else(|| panic!("no rows in {v}"))
        .iter()
        .map(|r| {
            (
                r["status"].as_str().unwrap().to_string(),
                r["file"].as_str().unwrap().to_string(),
                r["object"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn scan_reads_manifests_as_the_cluster_does() {
    let reg = Registry::start(Auth::None);
    let (st, repo, a) = pushed(&reg);
    let reference = s(&a, "reference");
    let dir = common::TempDir::new();
    let d = dir.path();
    let w = |rel: &str, text: &str| {
        let p = d.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    // An anchor, an alias and a merge key (`<<:`), as kubectl's YAML
    // reader resolves them: the merged item's own `name` wins.
    w(
        "apps/list.yaml",
        &"apiVersion: v1
kind: List
items:
  - apiVersion: apps/v1
    kind: Deployment
    metadata: {name: anchored}
    spec:
      template:
        spec:
          containers: [{name: app, image: busybox}]
          volumes:
            - &settings
              name: settings
              image:
                reference: REF
  - apiVersion: apps/v1
    kind: StatefulSet
    metadata: {name: aliased}
    spec:
      template:
        spec:
          containers: [{name: app, image: busybox}]
          volumes:
            - *settings
  - apiVersion: apps/v1
    kind: DaemonSet
    metadata: {name: merged}
    spec:
      template:
        spec:
          containers: [{name: app, image: busybox}]
          volumes:
            - <<: *settings
              name: merged-settings
"
        .replace("REF", &reference),
    );
    w(
        "apps/rc.yaml",
        &format!(
            "apiVersion: v1\nkind: ReplicationController\nmetadata:\n  name: legacy\nspec:\n  template:\n    spec:\n      containers: [{{name: app, image: busybox}}]\n      volumes:\n        - name: settings\n          image:\n            reference: {reference}\n"
        ),
    );
    let json = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "from-json"},
        "spec": {"containers": [{"name": "app", "image": "busybox"}],
                 "volumes": [{"name": "settings", "image": {"reference": reference}}]}
    });
    // JSON is YAML: Flux reads it in a `.yml` file (not in a `.json` one).
    w(
        "apps/pod-as-json.yml",
        &serde_json::to_string_pretty(&json).unwrap(),
    );
    // A symlinked file and a symlinked folder inside the tree are followed.
    std::fs::create_dir_all(d.join("overlays")).unwrap();
    std::os::unix::fs::symlink("../apps/rc.yaml", d.join("overlays/rc.yaml")).unwrap();
    std::os::unix::fs::symlink("apps", d.join("mirror")).unwrap();
    // A loop back to the root is walked once.
    std::os::unix::fs::symlink("..", d.join("apps/up")).unwrap();
    let (r, v) = scan_json(d, &repo, &st.folder(), &[]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let ok = |f: &str, o: &str| ("verified".to_string(), f.to_string(), o.to_string());
    let mut want = vec![
        ok("apps/list.yaml", "Deployment/anchored"),
        ok("apps/list.yaml", "StatefulSet/aliased"),
        ok("apps/list.yaml", "DaemonSet/merged"),
        ok("apps/pod-as-json.yml", "Pod/from-json"),
        ok("apps/rc.yaml", "ReplicationController/legacy"),
        ok("overlays/rc.yaml", "ReplicationController/legacy"),
        ok("mirror/list.yaml", "Deployment/anchored"),
        ok("mirror/list.yaml", "StatefulSet/aliased"),
        ok("mirror/list.yaml", "DaemonSet/merged"),
        ok("mirror/pod-as-json.yml", "Pod/from-json"),
        ok("mirror/rc.yaml", "ReplicationController/legacy"),
    ];
    want.sort();
    assert_eq!(rows(&v), want, "{v}");
    let merged = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["object"] == "DaemonSet/merged")
        .unwrap();
    assert_eq!(merged["volume"], "merged-settings");
    assert_eq!(merged["reference"], reference.as_str());

    // What it cannot read is a row each, and fails the gate (exit 2).
    let outside = common::TempDir::new();
    std::fs::write(outside.path().join("pod.yaml"), pod_yaml(&reference)).unwrap();
    std::os::unix::fs::symlink(outside.path().join("pod.yaml"), d.join("outside.yaml")).unwrap();
    std::os::unix::fs::symlink(outside.path(), d.join("outside-dir")).unwrap();
    let mut latin1 = pod_yaml(&reference).into_bytes();
    latin1.extend_from_slice(b"# caf\xe9\n");
    std::fs::write(d.join("latin1.yaml"), latin1).unwrap();
    let big = std::fs::File::create(d.join("big.yaml")).unwrap();
    big.set_len(17 << 20).unwrap();
    w(
        "notyaml.yaml",
        &format!("{{{{ if .x }}}}\nreference: {reference}\n"),
    );
    let (r, v) = scan_json(d, &repo, &st.folder(), &[]);
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    let errors: BTreeMap<String, String> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] == "error")
        .map(|r| {
            (
                r["file"].as_str().unwrap().to_string(),
                r["detail"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let says = |f: &str, n: &str| {
        assert!(
            errors.get(f).is_some_and(|d| d.contains(n)),
            "{f}: want {n:?} in {errors:?}"
        )
    };
    says("outside.yaml", "outside the scanned folder");
    says("outside-dir", "outside the scanned folder");
    says("latin1.yaml", "is not UTF-8");
    says("big.yaml", "larger than 3 MiB");
    says("notyaml.yaml", "the scan cannot read");
    assert_eq!(errors.len(), 5, "{errors:?}");
    assert_eq!(
        v["rows"].as_array().unwrap().len(),
        want.len() + 5,
        "the readable rows are still verified: {v}"
    );
    // The table names them too.
    let table = TestCommand::new()
        .args([
            "verify",
            "--scan",
            d.to_str().unwrap(),
            "--repository",
            &repo,
            "--path",
            st.folder().to_str().unwrap(),
        ])
        .run();
    assert_eq!(table.code, 2);
    assert!(
        table
            .stdout
            .lines()
            .any(|l| l.starts_with("error") && l.contains("latin1.yaml")),
        "{}",
        table.stdout
    );
}

#[test]
fn a_scan_that_finds_no_reference_fails_unless_allowed() {
    let reg = Registry::start(Auth::None);
    let (st, repo, a) = pushed(&reg);
    let dir = common::TempDir::new();
    std::fs::write(dir.path().join("pod.yaml"), pod_yaml(&s(&a, "reference"))).unwrap();
    // A typo in the repository: nothing matches, and the gate must not pass.
    let typo = format!("{}/team/setings", reg.host());
    let (r, _) = scan_json(dir.path(), &typo, &st.folder(), &[]);
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr
            .contains(&format!("no image-volume reference to {typo}")),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("--allow-empty"), "{}", r.stderr);
    let (r, v) = scan_json(dir.path(), &typo, &st.folder(), &["--allow-empty"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(v["rows"], serde_json::json!([]));
    let (r, _) = scan_json(dir.path(), &repo, &st.folder(), &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);

    // The action face, the pull-request gate: the same, in its words.
    let ws = common::TempDir::new();
    std::fs::create_dir_all(ws.path().join("cluster")).unwrap();
    std::fs::write(
        ws.path().join("cluster/pod.yaml"),
        pod_yaml(&s(&a, "reference")),
    )
    .unwrap();
    let url = format!("file://{}", st.repo.dir.display());
    st.repo
        .git_in(ws.path(), &["clone", "-q", &url, "settings"]);
    let runner = Runner::new(common::TempDir::new(), ws.path().to_path_buf());
    let mut with = vec![
        ("mode", "verify"),
        ("path", "settings/configs/shop"),
        ("repository", typo.as_str()),
        ("scan", "cluster"),
    ];
    let o = runner.run(&with);
    let stdout = &o.stdout;
    assert_eq!(o.code, 2, "{stdout}");
    assert!(
        stdout.contains("::error") && stdout.contains("`allow-empty: true`"),
        "{stdout}"
    );
    with.push(("allow-empty", "true"));
    let o = runner.run(&with);
    assert_eq!(o.code, 0, "{}", o.stdout);
}

#[test]
fn scan_fails_closed_on_what_the_cluster_may_apply_unverified() {
    let reg = Registry::start(Auth::None);
    let (st, repo, a) = pushed(&reg);
    let reference = s(&a, "reference");
    let host = reg.host();
    let tail = reference.strip_prefix(host.as_str()).unwrap().to_string();
    // An image of the repository that is no commit's folder: pushed from a
    // plain folder, without provenance.
    let plain = common::TempDir::new();
    std::fs::write(plain.path().join("app.yaml"), "port: 1\n").unwrap();
    let r = TestCommand::new()
        .args([
            "push",
            "--path",
            plain.path().to_str().unwrap(),
            "--repository",
            &repo,
            "--tag",
            "hand-1",
            "--no-provenance",
        ])
        .run();
    assert_eq!(r.code, 0, "{}", r.stderr);
    let pod_spec = |reference: &str, indent: usize| {
        format!(
            "containers: [{{name: app, image: busybox}}]\nvolumes:\n  - name: settings\n    image:\n      reference: {reference}\n"
        )
        .lines()
        .map(|l| format!("{}{l}\n", " ".repeat(indent)))
        .collect::<String>()
    };
    let deployment = |name: &str, reference: &str| {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\nspec:\n  template:\n    spec:\n{}",
            pod_spec(reference, 6)
        )
    };
    // What every case holds: a faithful Deployment and Flux's objects (the
    // ImageRepository names the repository it scans, the Kustomization
    // applies ./apps as it is): one verified row.
    let base: Vec<(&str, String)> = vec![
        ("apps/base/deployment.yaml", deployment("shop", &reference)),
        (
            "flux/image-repository.yaml",
            format!(
                "apiVersion: image.toolkit.fluxcd.io/v1beta2\nkind: ImageRepository\nmetadata:\n  name: settings\n  namespace: flux-system\nspec:\n  image: {repo}\n  interval: 5m\n"
            ),
        ),
        (
            "flux/apps.yaml",
            "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: apps\n  namespace: flux-system\nspec:\n  path: ./apps\n  prune: true\n".into(),
        ),
    ];
    let case = |extra: &[(&str, String)]| {
        let dir = common::TempDir::new();
        for (rel, text) in base.iter().chain(extra) {
            let p = dir.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        let (r, v) = scan_json(dir.path(), &repo, &st.folder(), &[]);
        (r, v)
    };
    let (r, v) = case(&[]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(
        rows(&v),
        [(
            "verified".to_string(),
            "apps/base/deployment.yaml".to_string(),
            "Deployment/shop".to_string()
        )]
    );
    let flux_kustomization = |spec: &str| {
        format!(
            "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: prod\n  namespace: flux-system\nspec:\n  path: ./apps/prod\n{spec}"
        )
    };
    // (case, files, (file, status, what the detail says) of each row it must add, exit code)
    type Want<'a> = (&'a str, &'a str, String);
    type Case<'a> = (&'a str, Vec<(&'a str, String)>, Vec<Want<'a>>, i32);
    let cases: Vec<Case> = vec![
        (
            "an overlay's kustomization (kustomize renders it)",
            vec![
                (
                    "apps/prod/kustomization.yaml",
                    "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [../base]\npatches:\n  - path: settings.yaml\n".into(),
                ),
                ("apps/prod/settings.yaml", deployment("shop", "evil.example/settings:1")),
            ],
            vec![(
                "apps/prod/kustomization.yaml",
                "error",
                "kubectl kustomize".into(),
            )],
            2,
        ),
        (
            "a Flux Kustomization that substitutes",
            vec![(
                "flux/prod.yaml",
                flux_kustomization(&format!(
                    "  postBuild:\n    substitute:\n      REGISTRY: \"{host}\"\n"
                )),
            )],
            vec![(
                "flux/prod.yaml",
                "error",
                "flux build kustomization prod --path ./apps/prod".into(),
            )],
            2,
        ),
        (
            "a Flux Kustomization's images entry",
            vec![(
                "flux/prod.yaml",
                flux_kustomization(&format!(
                    "  images:\n    - name: {repo}\n      newName: evil.example/settings\n"
                )),
            )],
            vec![("flux/prod.yaml", "error", "whose images change what it applies".into())],
            2,
        ),
        (
            "an Argo Rollout mounts another image of the repository",
            vec![(
                "apps/rollout.yaml",
                format!(
                    "apiVersion: argoproj.io/v1alpha1\nkind: Rollout\nmetadata:\n  name: canary\nspec:\n  strategy: {{canary: {{}}}}\n  template:\n    spec:\n{}",
                    pod_spec(&format!("{repo}:hand-1"), 6)
                ),
            )],
            vec![("apps/rollout.yaml", "mismatch", "names no commit".into())],
            7,
        ),
        (
            "a host that Flux's postBuild substitutes",
            vec![(
                "apps/substituted.yaml",
                deployment("substituted", &format!("${{REGISTRY}}{tail}")),
            )],
            vec![(
                "apps/substituted.yaml",
                "error",
                "holds a substitution or template".into(),
            )],
            2,
        ),
        (
            "a container image of the repository",
            vec![(
                "apps/sidecar.yaml",
                format!(
                    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: sidecar\nspec:\n  containers:\n    - name: app\n      image: {repo}:hand-1\n"
                ),
            )],
            vec![(
                "apps/sidecar.yaml",
                "error",
                format!("mentions {repo} at spec.containers.0.image"),
            )],
            2,
        ),
    ];
    for (what, files, wants, code) in cases {
        let (r, v) = case(&files);
        assert_eq!(r.code, code, "{what}: {}\n{}", r.stdout, r.stderr);
        let got = v["rows"]
            .as_array()
            .unwrap_or_else(|| panic!("{what}: {v}"));
        for (file, status, says) in &wants {
            assert!(
                got.iter().any(|row| row["file"] == *file
                    && row["status"] == *status
                    && row["detail"].as_str().unwrap().contains(says.as_str())
                    && row["line"].as_u64().is_some()),
                "{what}: no {status} row for {file} saying {says:?}: {v:#}"
            );
        }
        assert_eq!(
            got.iter().filter(|row| row["status"] != "verified").count(),
            wants.len(),
            "{what}: {v:#}"
        );
        assert!(
            got.iter().any(
                |row| row["file"] == "apps/base/deployment.yaml" && row["status"] == "verified"
            ),
            "{what}: {v:#}"
        );
    }
}
