//! `verify --scan` verifies what Flux applies, not what it can parse
//! (issue 39, failures 4 to 8). Each case is a cluster folder an attacker
//! or a careless change could write, against a real registry (distribution
//! 2.8): `kubectl kustomize` is the oracle of what kustomize renders, skopeo
//! of what a registry client pulls. A folder the scan cannot render is
//! refused (exit 2) with the command that renders it; the rendered stream,
//! piped in with `--scan -`, then shows the unverified image (exit 7).

use crate::common;

use std::path::Path;

use common::cmd::{Run, TestCommand};
use common::git::ScratchRepo;
use common::registry::{Auth, Registry, skopeo_inspect};
use serde_json::Value;

/// A settings repository, a registry, a faithful image of `configs/shop`
/// (`good`) and an image of the same repository that is no commit's folder
/// (`hand`: pushed from a plain folder without provenance).
struct World {
    reg: Registry,
    settings: ScratchRepo,
    repo: String,
    good: String,
    hand: String,
}

impl World {
    fn new() -> World {
        let reg = Registry::start(Auth::None);
        let repo = format!("{}/team/settings", reg.host());
        World::with(reg, repo)
    }

    /// A world whose repository is named `repo` (on `reg`).
    fn with(reg: Registry, repo: String) -> World {
        let settings = ScratchRepo::new();
        let folder = settings.dir.join("configs/shop");
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join("app.yaml"), "port: 8080\n").unwrap();
        settings.git(&["add", "-A"]);
        let out = settings
            .cmd(&settings.dir)
            .args(["commit", "-q", "-m", "first"])
            .env("GIT_COMMITTER_DATE", "@1700000000 +0000")
            .env("GIT_AUTHOR_DATE", "@1700000000 +0000")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let good = TestCommand::push_json(&folder, &repo)
            .args(["--timestamp-tag", "main"])
            .json()["reference"]
            .as_str()
            .unwrap()
            .to_string();
        let plain = common::TempDir::new();
        std::fs::write(plain.path().join("app.yaml"), "port: 1\n").unwrap();
        TestCommand::new()
            .args(["push", "--path", plain.path().to_str().unwrap()])
            .args(["--repository", &repo, "--tag", "hand-1", "--no-provenance"])
            .fails_with(0);
        let hand = format!("{repo}:hand-1");
        World {
            reg,
            settings,
            repo,
            good,
            hand,
        }
    }

    /// `verify --scan INPUT --json` (with `stdin` piped in).
    fn scan(&self, input: &str, stdin: Option<&str>) -> (Run, Value) {
        let mut cmd = TestCommand::new();
        cmd.args(["verify", "--scan", input, "--repository", &self.repo])
            .args([
                "--path",
                self.settings.dir.join("configs/shop").to_str().unwrap(),
            ])
            .arg("--json");
        if let Some(text) = stdin {
            cmd.stdin(text);
        }
        let r = cmd.run();
        let v = serde_json::from_str(r.stdout.trim()).unwrap_or(Value::Null);
        (r, v)
    }

    /// The folder scanned, then the stream `kubectl kustomize` renders from
    /// it: each run and its report, and the rendered text.
    fn folder_then_rendered(&self, dir: &Path) -> ((Run, Value), (Run, Value), String) {
        let rendered = kustomize(dir);
        let folder = self.scan(dir.to_str().unwrap(), None);
        let piped = self.scan("-", Some(&rendered));
        (folder, piped, rendered)
    }
}

/// What `kubectl kustomize DIR` renders (the oracle): the kubectl of the
/// project's own Kubernetes build (scripts/kube.sh), kustomize built in;
/// rendering asks the API server nothing.
fn kustomize(dir: &Path) -> String {
    common::stdout_of(common::kube::kube().kubectl().arg("kustomize").arg(dir))
}

/// A Deployment `name` mounting `reference` as the image volume `settings`.
fn deployment(name: &str, reference: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\nspec:\n  template:\n    spec:\n      containers: [{{name: app, image: busybox}}]\n      volumes:\n        - name: settings\n          image:\n            reference: {reference}\n"
    )
}

/// Writes `files` under a new folder.
fn folder(files: &[(&str, String)]) -> common::TempDir {
    let dir = common::TempDir::new();
    for (rel, text) in files {
        let p = dir.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    dir
}

/// The rows of a report with `status`.
fn with_status<'v>(v: &'v Value, status: &str) -> Vec<&'v Value> {
    v["rows"]
        .as_array()
        .unwrap_or_else(|| panic!("no rows in {v}"))
        .iter()
        .filter(|r| r["status"] == status)
        .collect()
}

/// The folder is refused at its kustomization, naming the command that
/// renders it; nothing in it passes.
fn assert_refused_kustomization(case: &str, run: &(Run, Value)) {
    assert_refused_kustomization_named(case, "kustomization.yaml", run);
}

/// As [`assert_refused_kustomization`], for a kustomization file `name`.
fn assert_refused_kustomization_named(case: &str, name: &str, (r, v): &(Run, Value)) {
    assert_eq!(r.code, 2, "{case}: {}\n{}", r.stdout, r.stderr);
    let errors = with_status(v, "error");
    assert!(
        errors.iter().any(|row| row["file"] == name
            && row["detail"]
                .as_str()
                .unwrap()
                .contains("kubectl kustomize")),
        "{case}: {v:#}"
    );
}

/// The rendered stream shows `hand` mounted by `object`: a mismatch.
fn assert_rendered_mismatch(case: &str, w: &World, (r, v): &(Run, Value), object: &str) {
    assert_eq!(r.code, 7, "{case}: {}\n{}", r.stdout, r.stderr);
    assert!(
        with_status(v, "mismatch")
            .iter()
            .any(|row| row["object"] == object
                && row["reference"] == w.hand.as_str()
                && row["file"] == "-"
                && row["line"].as_u64().is_some()),
        "{case}: {v:#}"
    );
}

/// Failure 4: kustomize loads resources the scan never read (any file
/// name: `evil.txt`, `evil`, `evil.YAML`). The folder is refused; the
/// rendered stream shows each.
#[test]
fn kustomize_resources_of_any_name_are_refused_and_seen_once_rendered() {
    let w = World::new();
    // Each of the three names kustomize looks for.
    for (evil, kustomization) in [
        ("evil.txt", "kustomization.yaml"),
        ("evil", "kustomization.yml"),
        ("evil.YAML", "Kustomization"),
    ] {
        let dir = folder(&[
            ("deployment.yaml", deployment("shop", &w.good)),
            (evil, deployment("evil", &w.hand)),
            // A kustomization without apiVersion and kind, as kustomize
            // accepts it: only its file name says what it is.
            (
                kustomization,
                format!("resources: [deployment.yaml, {evil}]\n"),
            ),
        ]);
        let (folder, piped, rendered) = w.folder_then_rendered(dir.path());
        assert!(
            rendered.contains(&w.hand),
            "kustomize loads {evil}: {rendered}"
        );
        assert_refused_kustomization_named(evil, kustomization, &folder);
        assert_rendered_mismatch(evil, &w, &piped, "Deployment/evil");
        // The faithful reference is verified in the rendered stream too.
        assert!(
            with_status(&piped.1, "verified")
                .iter()
                .any(|row| row["object"] == "Deployment/shop"),
            "{:#}",
            piped.1
        );
    }
}

/// Failure 5: kustomize rewrites a verified reference (replacements of a
/// whole volume, the volumes list or the pod spec; a JSON 6902 `move`;
/// PatchTransformer and PatchStrategicMergeTransformer with a patch file).
#[test]
fn kustomize_rewrites_are_refused_and_seen_once_rendered() {
    let w = World::new();
    let holder = format!(
        "apiVersion: example.com/v1\nkind: Holder\nmetadata:\n  name: donor\nspec:\n  volume: {{name: settings, image: {{reference: \"{h}\"}}}}\n  volumes: [{{name: settings, image: {{reference: \"{h}\"}}}}]\n  pod:\n    containers: [{{name: app, image: busybox}}]\n    volumes: [{{name: settings, image: {{reference: \"{h}\"}}}}]\n",
        h = w.hand
    );
    let replace = |source: &str, target: &str| {
        format!(
            "resources: [deployment.yaml, holder.yaml]\nreplacements:\n  - source: {{kind: Holder, name: donor, fieldPath: spec.{source}}}\n    targets:\n      - select: {{kind: Deployment, name: shop}}\n        fieldPaths: [\"{target}\"]\n"
        )
    };
    let stashed = deployment("shop", &w.good).replace(
        "spec:\n  template:",
        &format!(
            "spec:\n  stash:\n    containers: [{{name: app, image: busybox}}]\n    volumes: [{{name: settings, image: {{reference: \"{}\"}}}}]\n  template:",
            w.hand
        ),
    );
    let patch = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: shop}}\nspec:\n  template:\n    spec:\n      volumes: [{{name: settings, image: {{reference: \"{}\"}}}}]\n",
        w.hand
    );
    let cases: Vec<(&str, Vec<(&str, String)>)> = vec![
        (
            "replacements: a whole volume",
            vec![
                ("holder.yaml", holder.clone()),
                (
                    "kustomization.yaml",
                    replace("volume", "spec.template.spec.volumes.[name=settings]"),
                ),
            ],
        ),
        (
            "replacements: the volumes list",
            vec![
                ("holder.yaml", holder.clone()),
                (
                    "kustomization.yaml",
                    replace("volumes", "spec.template.spec.volumes"),
                ),
            ],
        ),
        (
            "replacements: the pod spec",
            vec![
                ("holder.yaml", holder.clone()),
                ("kustomization.yaml", replace("pod", "spec.template.spec")),
            ],
        ),
        (
            "a JSON 6902 move onto /spec/template/spec",
            vec![
                ("deployment.yaml", stashed),
                (
                    "kustomization.yaml",
                    "resources: [deployment.yaml]\npatches:\n  - target: {kind: Deployment, name: shop}\n    patch: |-\n      - op: move\n        from: /spec/stash\n        path: /spec/template/spec\n".into(),
                ),
            ],
        ),
        (
            "PatchTransformer with a patch file",
            vec![
                ("evil.patch", patch.clone()),
                (
                    "transformer.yaml",
                    "apiVersion: builtin\nkind: PatchTransformer\nmetadata: {name: evil}\npath: evil.patch\ntarget: {kind: Deployment, name: shop}\n".into(),
                ),
                (
                    "kustomization.yaml",
                    "resources: [deployment.yaml]\ntransformers: [transformer.yaml]\n".into(),
                ),
            ],
        ),
        (
            "PatchStrategicMergeTransformer with a patch file",
            vec![
                ("evil.patch", patch.clone()),
                (
                    "transformer.yaml",
                    "apiVersion: builtin\nkind: PatchStrategicMergeTransformer\nmetadata: {name: evil}\npaths: [evil.patch]\n".into(),
                ),
                (
                    "kustomization.yaml",
                    "resources: [deployment.yaml]\ntransformers: [transformer.yaml]\n".into(),
                ),
            ],
        ),
    ];
    for (case, files) in cases {
        let mut all = vec![("deployment.yaml", deployment("shop", &w.good))];
        for (rel, text) in files {
            all.retain(|(r, _)| *r != rel);
            all.push((rel, text));
        }
        let dir = folder(&all);
        let (folder, piped, rendered) = w.folder_then_rendered(dir.path());
        // The oracle: kustomize replaced the shop's verified reference.
        let shop = rendered
            .split("\n---\n")
            .find(|d| d.contains("kind: Deployment"))
            .unwrap_or_default();
        assert!(
            shop.contains(&w.hand) && !shop.contains(&w.good),
            "{case}: kustomize rewrites the reference: {rendered}"
        );
        assert_refused_kustomization(case, &folder);
        assert_rendered_mismatch(case, &w, &piped, "Deployment/shop");
    }
}

/// Failure 4: a manifest the old YAML reader refused but kustomize reads
/// (a byte order mark; values nested 200 deep, the repository spelled
/// with a YAML escape) was skipped with a warning. A byte order mark is
/// now read; a document nested past the reader's bound is an error row
/// naming the bound; a HelmRelease is refused naming `helm template`.
#[test]
fn what_the_reader_refused_is_read_or_an_error_never_skipped() {
    let w = World::new();
    // The repository's last letter as a YAML escape: `\x73` is `s`.
    let escaped = w.hand.replacen("settings:", "setting\\x73:", 1);
    let bom = format!("\u{feff}{}", deployment("bom", &format!("\"{escaped}\"")));
    let mut deep = String::from("{a: ");
    for _ in 0..200 {
        deep.push_str("{a: ");
    }
    deep.push_str(&format!("\"{escaped}\""));
    deep.push_str(&"}".repeat(201));
    let helm = |values: &str| {
        format!(
            "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: shop\nspec:\n  chart:\n    spec: {{chart: shop, sourceRef: {{kind: HelmRepository, name: charts}}}}\n  values:\n    settings: {values}\n"
        )
    };
    // The oracle: kustomize reads both files and renders the repository.
    let oracle = folder(&[
        ("bom.yaml", bom.clone()),
        ("deep.yaml", helm(&deep)),
        (
            "kustomization.yaml",
            "resources: [bom.yaml, deep.yaml]\n".into(),
        ),
    ]);
    let rendered = kustomize(oracle.path());
    assert_eq!(rendered.matches(&w.hand).count(), 2, "{rendered}");

    let dir = folder(&[
        ("apps/shop.yaml", deployment("shop", &w.good)),
        ("apps/bom.yaml", bom),
    ]);
    let (r, v) = w.scan(dir.path().to_str().unwrap(), None);
    assert_eq!(r.code, 7, "{}\n{}", r.stdout, r.stderr);
    let bad = with_status(&v, "mismatch");
    assert!(
        bad.iter()
            .any(|row| row["object"] == "Deployment/bom" && row["reference"] == w.hand.as_str()),
        "{v:#}"
    );

    std::fs::write(dir.path().join("apps/deep.yaml"), helm(&deep)).unwrap();
    std::fs::write(dir.path().join("apps/shallow.yaml"), helm("{a: 1}")).unwrap();
    std::fs::remove_file(dir.path().join("apps/bom.yaml")).unwrap();
    let (r, v) = w.scan(dir.path().to_str().unwrap(), None);
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    let errors = with_status(&v, "error");
    let says = |file: &str, text: &str| {
        assert!(
            errors.iter().any(|row| row["file"] == file
                && row["line"].as_u64().is_some()
                && row["detail"].as_str().unwrap().contains(text)),
            "{file}: want {text:?}: {v:#}"
        );
    };
    says("apps/deep.yaml", "nested deeper than 128 levels");
    says("apps/shallow.yaml", "helm template shop");
    assert_eq!(errors.len(), 2, "{v:#}");
    // The table and its exit code say the same to a person.
    let table = TestCommand::new()
        .args(["verify", "--scan", dir.path().to_str().unwrap()])
        .args(["--repository", &w.repo, "--path"])
        .arg(w.settings.dir.join("configs/shop"))
        .run();
    assert_eq!(table.code, 2, "{}", table.stderr);
    assert!(
        table
            .stdout
            .lines()
            .any(|l| l.starts_with("error") && l.contains("apps/deep.yaml:")),
        "{}",
        table.stdout
    );
    assert!(!table.stderr.contains("skipped"), "{}", table.stderr);
}

/// Failure 6: the repository was matched as a case-sensitive literal
/// prefix, so `LOCALHOST:PORT/...` was not seen at all, though skopeo pulls
/// through it. Any spelling of the repository is now a reference of it,
/// verified in the spelling the user named.
#[test]
fn every_spelling_of_the_repository_is_verified() {
    let reg = Registry::start(Auth::None);
    let port = reg.host().rsplit(':').next().unwrap().to_string();
    let w = World::with(reg, format!("localhost:{port}/team/settings"));
    let spellings = [
        format!("LOCALHOST:{port}/team/settings:hand-1"),
        format!("LocalHost:{port}/team/settings:hand-1"),
    ];
    for s in &spellings {
        // The oracle: a registry client pulls the unverified image through it.
        let seen = skopeo_inspect(s, None).unwrap_or_else(|| panic!("skopeo pulls {s}"));
        assert!(seen["Digest"].as_str().is_some(), "{seen}");
    }
    let mut files = vec![("shop.yaml", deployment("shop", &w.good))];
    let names: Vec<String> = (0..spellings.len())
        .map(|i| format!("spelled-{i}.yaml"))
        .collect();
    for (name, s) in names.iter().zip(&spellings) {
        files.push((name.as_str(), deployment(name.trim_end_matches(".yaml"), s)));
    }
    let dir = folder(&files);
    let (r, v) = w.scan(dir.path().to_str().unwrap(), None);
    assert_eq!(r.code, 7, "{}\n{}", r.stdout, r.stderr);
    for (i, s) in spellings.iter().enumerate() {
        assert!(
            with_status(&v, "mismatch")
                .iter()
                .any(|row| row["reference"] == s.as_str()
                    && row["object"] == format!("Deployment/spelled-{i}")
                    && row["detail"]
                        .as_str()
                        .unwrap()
                        .contains(&format!("(verified as {})", w.hand))),
            "{s}: {v:#}"
        );
    }
    // The faithful reference in another spelling verifies.
    let upper = w.good.replacen("localhost", "LOCALHOST", 1);
    let dir = folder(&[("shop.yaml", deployment("shop", &upper))]);
    let (r, v) = w.scan(dir.path().to_str().unwrap(), None);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(with_status(&v, "verified").len(), 1, "{v:#}");
    // Elsewhere than an image volume, a spelling is a mention: an error.
    let dir = folder(&[
        ("shop.yaml", deployment("shop", &w.good)),
        (
            "sidecar.yaml",
            format!(
                "apiVersion: v1\nkind: Pod\nmetadata: {{name: sidecar}}\nspec:\n  containers: [{{name: app, image: \"{}\"}}]\n",
                spellings[0]
            ),
        ),
    ]);
    let (r, v) = w.scan(dir.path().to_str().unwrap(), None);
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(
        with_status(&v, "error")
            .iter()
            .any(|row| row["file"] == "sidecar.yaml"
                && row["detail"]
                    .as_str()
                    .unwrap()
                    .contains("at spec.containers.0.image")),
        "{v:#}"
    );
    drop(w.reg);
}

/// Failure 7: a Helm template reference passed while the same reference
/// with `${SETTINGS_REGISTRY}` was an error row. Both are now error rows,
/// and a chart's folder is refused naming `helm template`.
#[test]
fn helm_templates_are_refused_like_substitutions() {
    let w = World::new();
    let tail = w
        .good
        .split_once('/')
        .unwrap()
        .1
        .split(['@', ':'])
        .next()
        .unwrap()
        .to_string();
    let template = format!("\"{{{{ .Values.registry }}}}/{tail}@{{{{ .Values.digest }}}}\"");
    let substituted = format!("\"${{SETTINGS_REGISTRY}}/{tail}:main\"");
    for (case, reference) in [("template", &template), ("substitution", &substituted)] {
        let dir = folder(&[
            ("shop.yaml", deployment("shop", &w.good)),
            ("apps/web.yaml", deployment("web", reference)),
        ]);
        let (r, v) = w.scan(dir.path().to_str().unwrap(), None);
        assert_eq!(r.code, 2, "{case}: {}\n{}", r.stdout, r.stderr);
        assert!(
            with_status(&v, "error")
                .iter()
                .any(|row| row["file"] == "apps/web.yaml"
                    && row["object"] == "Deployment/web"
                    && row["line"] == 12
                    && row["detail"]
                        .as_str()
                        .unwrap()
                        .contains("holds a substitution or template")),
            "{case}: {v:#}"
        );
    }
    // A chart: its templates are not read, the folder is refused.
    let dir = folder(&[
        ("shop.yaml", deployment("shop", &w.good)),
        (
            "charts/web/Chart.yaml",
            "apiVersion: v2\nname: web\nversion: 1.0.0\n".into(),
        ),
        (
            "charts/web/templates/web.yaml",
            deployment("web", &template),
        ),
    ]);
    let (r, v) = w.scan(dir.path().to_str().unwrap(), None);
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    let errors = with_status(&v, "error");
    assert_eq!(errors.len(), 1, "{v:#}");
    assert_eq!(errors[0]["file"], "charts/web/Chart.yaml");
    assert!(
        errors[0]["detail"].as_str().unwrap().contains(&format!(
            "helm template NAME {}",
            dir.path().join("charts/web").display()
        )),
        "{v:#}"
    );
}

/// Failure 8: the scan kept every manifest's text and YAML (4 files of
/// 15 MiB took about 3.4 GB, 50 times the bytes). Documents are now read one
/// at a time: 8 MiB of manifests in 8 files, and as one file of 8 MiB,
/// take less than 64 MiB (GNU time's peak resident set: about 37 MiB
/// here; the old scan took 108 MiB for 8 MiB of manifests, and grew with
/// them: `FILES=8 MIB=1 scripts/bench-scan-memory.sh`), and a stream four
/// times larger takes less than 12 MiB more.
#[test]
fn memory_stays_flat_in_the_manifests_scanned() {
    let w = World::new();
    let dir = common::TempDir::new();
    // A Deployment of about 3 KiB: a reference and some data.
    let doc = format!(
        "---\n{}      labels: {{{}}}\n",
        deployment("shop", &w.good).replace(
            "metadata:\n  name: shop",
            "metadata:\n  name: shop\n  annotations: {note: x}"
        ),
        (0..100)
            .map(|i| format!("k{i}: value-{i:020}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let per_file = (1 << 20) / doc.len();
    let mut stream = String::new();
    for f in 0..8 {
        let text = doc.repeat(per_file);
        std::fs::write(dir.path().join(format!("m{f}.yaml")), &text).unwrap();
        if f == 0 {
            stream = text.repeat(8);
        }
    }
    let path = w.settings.dir.join("configs/shop");
    let run = |input: &Path| {
        let mut cmd = TestCommand::new();
        cmd.args(["verify", "--scan"])
            .arg(input)
            .args(["--repository", &w.repo, "--path"])
            .arg(&path)
            .arg("--json");
        cmd.peak_rss()
    };
    let (r, kib) = run(dir.path());
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: Value = serde_json::from_str(r.stdout.trim()).unwrap();
    assert_eq!(with_status(&v, "verified").len(), 8 * per_file);
    assert!(kib < 64 * 1024, "peak {kib} KiB for 8 MiB of manifests");
    let file = dir.path().join("stream.txt");
    std::fs::write(&file, &stream).unwrap();
    for f in 0..8 {
        std::fs::remove_file(dir.path().join(format!("m{f}.yaml"))).unwrap();
    }
    let (r, kib) = run(&file);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(kib < 64 * 1024, "peak {kib} KiB for an 8 MiB stream");
    // Four times the bytes: the peak grows by the rows reported (about
    // 2 MiB more here), not by the 24 MiB more that were read. Keeping
    // each document's text would add those 24 MiB.
    let stream = stream.repeat(4);
    std::fs::write(&file, &stream).unwrap();
    let (r, kib4) = run(&file);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: Value = serde_json::from_str(r.stdout.trim()).unwrap();
    assert_eq!(with_status(&v, "verified").len(), 32 * per_file);
    assert!(
        kib4 < kib + 12 * 1024,
        "peak {kib4} KiB for a 32 MiB stream, {kib} KiB for 8 MiB: it grows with the bytes read"
    );
}
