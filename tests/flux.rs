//! `settings-image flux`: the generated objects checked against Flux's own
//! CRD schemas (the served `v1` versions, `tests/fixtures/flux-crds`), and
//! the generated `filterTags` applied the way Flux's image-reflector applies
//! it to the tags of generated git histories (git is the oracle for which
//! commit is newest).

mod common;

use std::process::Command;

use common::TempDir;
use common::git::ScratchRepo;
use serde_json::Value;

fn flux(args: &[&str]) -> std::process::Output {
    Command::new(common::bin())
        .arg("flux")
        .args(args)
        .output()
        .expect("running settings-image flux")
}

fn flux_ok(args: &[&str]) -> String {
    let out = flux(args);
    assert!(
        out.status.success(),
        "flux {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 YAML")
}

/// Every document of a YAML stream, as JSON values (comments dropped).
fn documents(yaml: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(yaml)
        .map(|de| serde::Deserialize::deserialize(de).expect("generated YAML parses"))
        .filter(|v: &Value| !v.is_null())
        .collect()
}

/// The served `v1` schema of the CRD for `kind`, from the fixture folder.
fn crd_schema(kind: &str) -> Value {
    let dir = common::repo().join("tests/fixtures/flux-crds");
    assert!(
        dir.join("SOURCE.txt").is_file(),
        "tests/fixtures/flux-crds holds Flux's CRDs (part of the repository)"
    );
    for entry in std::fs::read_dir(&dir).expect("reading the CRD folder") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let crd: Value =
            serde_yaml_ng::from_str(&std::fs::read_to_string(&path).expect("CRD")).expect("CRD");
        if crd["spec"]["names"]["kind"] != kind {
            continue;
        }
        assert_eq!(crd["spec"]["group"], "image.toolkit.fluxcd.io");
        let v1 = crd["spec"]["versions"]
            .as_array()
            .expect("versions")
            .iter()
            .find(|v| v["name"] == "v1")
            .unwrap_or_else(|| panic!("{kind}: no v1 version"));
        assert_eq!(v1["served"], true, "{kind} v1 is served");
        return v1["schema"]["openAPIV3Schema"].clone();
    }
    panic!("no CRD for kind {kind}");
}

/// Validates objects with python's jsonschema; returns (ok, messages).
fn validate(objects: &[Value]) -> (bool, String) {
    let tmp = TempDir::new();
    let mut cmd = common::tool("python3");
    cmd.arg(common::repo().join("tests/common/flux_crd.py"));
    for (i, obj) in objects.iter().enumerate() {
        let kind = obj["kind"].as_str().expect("kind");
        assert_eq!(
            obj["apiVersion"], "image.toolkit.fluxcd.io/v1",
            "{kind} uses the served v1 API"
        );
        let schema = tmp.join(&format!("schema-{i}.json"));
        let doc = tmp.join(&format!("doc-{i}.json"));
        std::fs::write(&schema, crd_schema(kind).to_string()).expect("schema");
        std::fs::write(&doc, obj.to_string()).expect("doc");
        cmd.arg(schema).arg(doc);
    }
    let out = cmd.output().expect("running python3");
    let msg = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    match out.status.code() {
        Some(0) => (true, msg),
        Some(1) => (false, msg),
        _ => panic!("the CRD validator could not run: {msg}"),
    }
}

fn kinds(docs: &[Value]) -> Vec<&str> {
    docs.iter().map(|d| d["kind"].as_str().unwrap()).collect()
}

#[test]
fn generated_objects_validate_against_fluxs_crd_schemas() {
    let cases: Vec<Vec<&str>> = vec![
        vec![
            "--repository",
            "ghcr.io/acme/settings-shop",
            "--prefix",
            "main",
        ],
        vec![
            "--repository",
            "ghcr.io/acme/settings-{name}",
            "--prefix",
            "feature/x",
            "--path",
            "configs/shop",
            "--path",
            "configs/billing",
            "--secret-ref",
            "ghcr-read",
            "--namespace",
            "apps",
            "--interval",
            "1m30s",
            "--git-branch",
            "staging",
            "--git-push-branch",
            "flux/settings",
            "--git-path",
            "./clusters/prod",
            "--automation-name",
            "settings-prod",
        ],
        vec![
            "--repository",
            "123456789012.dkr.ecr.eu-west-1.amazonaws.com/settings",
            "--prefix",
            "release-1.2",
            "--no-automation",
        ],
        vec![
            "--repository",
            "europe-docker.pkg.dev/p/r/settings",
            "--prefix",
            "main",
            "--provider",
            "generic",
            "--name",
            "shop-settings",
        ],
    ];
    let kube = common::kube::kube();
    kube.install_flux_crds();
    for args in cases {
        let yaml = flux_ok(&args);
        let docs = documents(&yaml);
        let (ok, msg) = validate(&docs);
        assert!(ok, "{args:?}: {msg}");
        // The API server's own check: the CRDs' schemas and CEL rules
        // (admission wants the namespaces to exist, even for a dry run).
        for d in &docs {
            if let Some(ns) = d["metadata"]["namespace"].as_str() {
                kube.namespace(ns);
            }
        }
        let applied = kube.dry_run(&yaml);
        assert!(
            applied.status.success(),
            "{args:?}: kubectl apply --dry-run=server refused the objects:\n{}",
            String::from_utf8_lossy(&applied.stderr)
        );
        for d in &docs {
            assert_eq!(
                d["metadata"]["labels"]["app.kubernetes.io/managed-by"], "settings-image",
                "{d}"
            );
            if d["kind"] == "ImagePolicy" {
                let spec = &d["spec"];
                assert_eq!(spec["digestReflectionPolicy"], "IfNotPresent");
                assert_eq!(spec["policy"]["numerical"]["order"], "asc");
                assert_eq!(spec["filterTags"]["extract"], "$ts");
                // The CRD's CEL rule: an interval only with `Always`.
                assert!(spec.get("interval").is_none(), "{d}");
                let repo = docs
                    .iter()
                    .find(|o| {
                        o["kind"] == "ImageRepository"
                            && o["metadata"]["name"] == spec["imageRepositoryRef"]["name"]
                    })
                    .expect("the policy's ImageRepository is generated");
                assert_eq!(repo["metadata"]["namespace"], d["metadata"]["namespace"]);
            }
            if d["kind"] == "ImageUpdateAutomation" {
                // It selects exactly the generated policies.
                assert_eq!(
                    d["spec"]["policySelector"]["matchLabels"]["app.kubernetes.io/managed-by"],
                    "settings-image"
                );
                assert_eq!(d["spec"]["update"]["strategy"], "Setters");
            }
        }
    }
    let two = documents(&flux_ok(&[
        "--repository",
        "ghcr.io/acme/settings-{name}",
        "--prefix",
        "main",
        "--path",
        "configs/shop",
        "--path",
        "configs/billing",
        "--secret-ref",
        "ghcr-read",
    ]));
    assert_eq!(
        kinds(&two),
        [
            "ImageRepository",
            "ImagePolicy",
            "ImageRepository",
            "ImagePolicy",
            "ImageUpdateAutomation"
        ]
    );
    assert_eq!(two[2]["spec"]["image"], "ghcr.io/acme/settings-billing");
    assert_eq!(two[2]["spec"]["secretRef"]["name"], "ghcr-read");
    let ecr = documents(&flux_ok(&[
        "--repository",
        "123456789012.dkr.ecr.eu-west-1.amazonaws.com/settings",
        "--prefix",
        "main",
    ]));
    assert_eq!(ecr[0]["spec"]["provider"], "aws");
}

#[test]
fn the_validator_rejects_what_flux_would_reject() {
    // The control: the same objects, broken the way a hand edit breaks them.
    let docs = documents(&flux_ok(&[
        "--repository",
        "ghcr.io/acme/settings",
        "--prefix",
        "main",
    ]));
    let policy = docs.iter().find(|d| d["kind"] == "ImagePolicy").unwrap();
    let mut typo = policy.clone();
    let v = typo["spec"]
        .as_object_mut()
        .unwrap()
        .remove("digestReflectionPolicy")
        .unwrap();
    typo["spec"]["digestReflectPolicy"] = v;
    let mut bad_enum = policy.clone();
    bad_enum["spec"]["policy"]["numerical"]["order"] = "ascending".into();
    let mut no_image = docs[0].clone();
    no_image["spec"].as_object_mut().unwrap().remove("image");
    let mut bad_interval = docs[0].clone();
    bad_interval["spec"]["interval"] = "5 minutes".into();
    for broken in [typo, bad_enum, no_image, bad_interval] {
        let (ok, msg) = validate(std::slice::from_ref(&broken));
        assert!(!ok, "the validator accepted {broken}: {msg}");
    }
}

#[test]
fn bad_flux_options_are_input_errors_and_print_nothing() {
    // Each bad input, and what its error line must name: the value given
    // and, where the message points at it, the flag.
    let cases: [(Vec<&str>, &[&str]); 7] = [
        (
            vec!["--repository", "ghcr.io/acme/s", "--prefix", "/"],
            &["error: the tag prefix \"/\""],
        ),
        (
            vec![
                "--repository",
                "ghcr.io/acme/s",
                "--prefix",
                "main",
                "--interval",
                "soon",
            ],
            &["error: interval \"soon\""],
        ),
        (
            vec![
                "--repository",
                "ghcr.io/acme/s",
                "--prefix",
                "main",
                "--namespace",
                "Bad_NS",
            ],
            &["error: namespace \"Bad_NS\""],
        ),
        (
            vec![
                "--repository",
                "ghcr.io/acme/s",
                "--prefix",
                "main",
                "--path",
                "a",
                "--path",
                "b",
            ],
            &[
                "error: 2 folders but one repository \"ghcr.io/acme/s\"",
                "--repository",
            ],
        ),
        (
            vec![
                "--repository",
                "ghcr.io/acme/s-{name}",
                "--prefix",
                "main",
                "--path",
                "x/shop",
                "--path",
                "y/shop",
            ],
            &["error: x/shop and y/shop both map to ghcr.io/acme/s-shop"],
        ),
        (
            vec!["--repository", "ghcr.io/acme/s-{name}", "--prefix", "main"],
            &[
                "error: --repository \"ghcr.io/acme/s-{name}\" is a template",
                "--path",
            ],
        ),
        (
            vec!["--repository", "ghcr.io/Acme/S", "--prefix", "main"],
            &[
                "error: invalid repository \"ghcr.io/Acme/S\"",
                "--repository ghcr.io/acme/s",
            ],
        ),
    ];
    for (args, names) in cases {
        let out = flux(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?} printed objects");
        let stderr = String::from_utf8_lossy(&out.stderr);
        for n in names {
            assert!(stderr.contains(n), "{args:?}: wanted {n:?} in:\n{stderr}");
        }
    }
}

#[test]
fn output_writes_one_file_per_image_and_one_for_the_automation() {
    let tmp = TempDir::new();
    let dir = tmp.join("flux");
    let printed = flux_ok(&[
        "--repository",
        "ghcr.io/acme/{path}",
        "--prefix",
        "main",
        "--path",
        "configs/shop",
        "--path",
        "configs/cart",
        "--output",
        dir.to_str().unwrap(),
    ]);
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        files,
        ["configs-cart.yaml", "configs-shop.yaml", "settings.yaml"]
    );
    assert_eq!(printed.lines().count(), 3, "{printed}");
    let shop = std::fs::read_to_string(dir.join("configs-shop.yaml")).unwrap();
    assert!(
        shop.contains(r#"# {"$imagepolicy": "flux-system:configs-shop"}"#),
        "{shop}"
    );
    let (ok, msg) = validate(&documents(&shop));
    assert!(ok, "{msg}");
}

// ---- Flux's tag selection, as image-reflector-controller does it ----

/// Flux's RegexFilter followed by the numerical policy (`order: asc`):
/// tags matching `pattern` (Go RE2 semantics; Rust's `regex` has the same
/// syntax and leftmost-first matching) are mapped to `extract` expanded
/// from the match (`$ts`), each value is parsed as a 64-bit float (one
/// unparsable value fails the whole policy), and the highest wins; on equal
/// values the tag that comes later in the list wins.
fn flux_latest(pattern: &str, extract: &str, tags: &[String]) -> Result<Option<String>, String> {
    let re = regex::Regex::new(pattern).map_err(|e| e.to_string())?;
    let mut best: Option<(f64, &String)> = None;
    for tag in tags {
        let Some(caps) = re.captures(tag) else {
            continue;
        };
        let mut value = String::new();
        caps.expand(extract, &mut value);
        let v: f64 = value
            .parse()
            .map_err(|e| format!("{tag}: {value:?} is not a number: {e}"))?;
        if best.is_none_or(|(b, _)| v >= b) {
            best = Some((v, tag));
        }
    }
    Ok(best.map(|(_, t)| t.clone()))
}

fn policy_filter(prefix: &str) -> (String, String) {
    let docs = documents(&flux_ok(&[
        "--repository",
        "127.0.0.1:5000/acme/settings",
        "--prefix",
        prefix,
    ]));
    let p = docs.iter().find(|d| d["kind"] == "ImagePolicy").unwrap();
    (
        p["spec"]["filterTags"]["pattern"].as_str().unwrap().into(),
        p["spec"]["filterTags"]["extract"].as_str().unwrap().into(),
    )
}

#[test]
fn flux_numerical_semantics_later_tag_wins_on_equal_values() {
    let (pattern, extract) = policy_filter("main");
    let tags: Vec<String> = [
        "main-5-aaaaaaa",
        "main-7-bbbbbbb",
        "main-7-ccccccc",
        "main-6-ddddddd",
    ]
    .map(String::from)
    .to_vec();
    assert_eq!(
        flux_latest(&pattern, &extract, &tags).unwrap().as_deref(),
        Some("main-7-ccccccc")
    );
    // Numbers, not strings: 10 > 9 although "10" < "9".
    let tags: Vec<String> = ["main-10-aaaaaaa", "main-9-bbbbbbb"]
        .map(String::from)
        .to_vec();
    assert_eq!(
        flux_latest(&pattern, &extract, &tags).unwrap().as_deref(),
        Some("main-10-aaaaaaa")
    );
}

struct History {
    repo: ScratchRepo,
}

impl History {
    fn commit(&self, file: &str, content: &str, time: i64) -> String {
        let path = self.repo.dir.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
        self.repo.git(&["add", "-A"]);
        let date = format!("@{time} +0000");
        let out = self
            .repo
            .cmd(&self.repo.dir)
            .args(["commit", "-q", "--allow-empty", "-m", file])
            .env("GIT_COMMITTER_DATE", &date)
            .env("GIT_AUTHOR_DATE", &date)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.repo.git(&["rev-parse", "HEAD"])
    }

    /// `settings-image tag` for the folder at `rev`.
    fn tag(&self, folder: &str, prefix: &str, rev: &str) -> String {
        let out = Command::new(common::bin())
            .args([
                "tag",
                "--path",
                folder,
                "--prefix",
                prefix,
                "--revision",
                rev,
            ])
            .current_dir(&self.repo.dir)
            .env_remove("GITHUB_TOKEN")
            .env_remove("GITHUB_REPOSITORY")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    /// git's answer: `<ct>-<sha7>` of the last commit that changed `folder`.
    fn oracle(&self, folder: &str) -> String {
        self.repo
            .git(&["log", "-1", "--format=%ct-%h", "--abbrev=7", "--", folder])
    }
}

#[test]
fn the_policy_picks_the_newest_commit_of_generated_histories() {
    for (prefix, flux_prefix) in [("main", "main"), ("release/1.2", "release-1.2")] {
        let h = History {
            repo: ScratchRepo::new(),
        };
        let base = 1_700_000_000;
        let mut tags = Vec::new();
        let mut folder_commits = Vec::new();
        // Commits to the folder (out-of-order times included: a skewed
        // clock), commits elsewhere, and one last commit elsewhere that is
        // the newest of all but does not change the folder.
        let plan: &[(&str, i64)] = &[
            ("configs/shop/app.yaml", 0),
            ("other/x.yaml", 50),
            ("configs/shop/app.yaml", 100),
            ("configs/shop/flags.yaml", 300),
            ("other/y.yaml", 400),
            ("configs/shop/app.yaml", 200),
            ("configs/shop/app.yaml", 900),
            ("other/z.yaml", 5000),
        ];
        for (i, (file, dt)) in plan.iter().enumerate() {
            let id = h.commit(file, &format!("v{i}\n"), base + dt);
            if file.starts_with("configs/shop") {
                folder_commits.push(id.clone());
            }
            // What CI pushes at each commit: the folder's timestamp tag.
            tags.push(h.tag("configs/shop", prefix, &id));
        }
        tags.sort();
        tags.dedup();
        // Tags Flux must never pick for this prefix.
        let newest_ts = base + 99_999;
        let mut decoys = vec![
            format!("feature-x-{newest_ts}-abcdef0"),
            format!("{flux_prefix}x-{newest_ts}-abcdef0"),
            format!("x{flux_prefix}-{newest_ts}-abcdef0"),
            format!("{flux_prefix}-{newest_ts}-abcdef01"),
            format!("{flux_prefix}-{newest_ts}-ABCDEF0"),
            format!("{flux_prefix}-{newest_ts}"),
            format!("{flux_prefix}-a{newest_ts}-abcdef0"),
            flux_prefix.to_string(),
            "latest".to_string(),
            format!("{flux_prefix}-latest"),
        ];
        if flux_prefix.contains('.') {
            // An unescaped `.` would match any character.
            decoys.push(flux_prefix.replace('.', "x") + &format!("-{newest_ts}-abcdef0"));
        }
        tags.extend(decoys.iter().cloned());
        tags.sort();
        let (pattern, extract) = policy_filter(prefix);
        let picked = flux_latest(&pattern, &extract, &tags)
            .unwrap()
            .expect("the policy matches the timestamp tags");
        let want = format!("{flux_prefix}-{}", h.oracle("configs/shop"));
        // The highest committer time among the folder's commits: the
        // skewed commit (200) lost to the later 900, and the newest commit
        // overall (elsewhere) is not a candidate.
        assert_eq!(picked, want, "pattern {pattern} over {tags:?}");
        assert!(picked.contains(&format!("-{}-", base + 900)));
        for d in &decoys {
            assert_eq!(
                flux_latest(&pattern, &extract, std::slice::from_ref(d)).unwrap(),
                None,
                "{pattern} matched {d}"
            );
        }
        // After one more commit to the folder, the new tag wins.
        let id = h.commit("configs/shop/app.yaml", "new\n", base + 950);
        tags.push(h.tag("configs/shop", prefix, &id));
        tags.sort();
        let picked = flux_latest(&pattern, &extract, &tags).unwrap().unwrap();
        assert_eq!(
            picked,
            format!("{flux_prefix}-{}", h.oracle("configs/shop"))
        );
        assert!(folder_commits.iter().all(|c| !picked.ends_with(&c[..7])));
    }
}

#[test]
fn the_objects_in_docs_flux_md_are_the_generators_output() {
    let doc = std::fs::read_to_string(common::repo().join("docs/flux.md")).unwrap();
    let marker = "<!-- generated: settings-image ";
    let start = doc
        .find(marker)
        .expect("docs/flux.md shows generated objects");
    let rest = &doc[start + marker.len()..];
    let (cmd, rest) = rest
        .split_once(" -->\n```yaml\n")
        .expect("a yaml block follows");
    let (shown, _) = rest.split_once("\n```\n").expect("the block ends");
    let args: Vec<&str> = cmd.split_whitespace().collect();
    assert_eq!(args[0], "flux");
    let generated = flux_ok(&args[1..]);
    assert_eq!(
        shown.trim_end(),
        generated.trim_end(),
        "regenerate the block in docs/flux.md"
    );
    let (ok, msg) = validate(&documents(shown));
    assert!(ok, "{msg}");
}

/// Every `<!-- generated: settings-image ... -->` block of `doc`, as
/// (arguments, the YAML shown).
fn generated_blocks(doc: &str) -> Vec<(Vec<String>, String)> {
    let text = std::fs::read_to_string(common::repo().join(doc)).unwrap();
    text.split("<!-- generated: settings-image ")
        .skip(1)
        .map(|rest| {
            let (cmd, rest) = rest
                .split_once(" -->\n```yaml\n")
                .expect("a yaml block follows");
            let (shown, _) = rest.split_once("\n```\n").expect("the block ends");
            (
                cmd.split_whitespace().map(String::from).collect(),
                shown.to_string(),
            )
        })
        .collect()
}

#[test]
fn the_objects_in_docs_monorepo_md_are_the_generators_and_followed() {
    let blocks = generated_blocks("docs/monorepo.md");
    assert!(
        !blocks.is_empty(),
        "docs/monorepo.md shows generated objects"
    );
    for (args, shown) in &blocks {
        assert_eq!(args[0], "flux");
        let args: Vec<&str> = args[1..].iter().map(String::as_str).collect();
        assert_eq!(
            shown.trim_end(),
            flux_ok(&args).trim_end(),
            "regenerate the block in docs/monorepo.md"
        );
    }
    // Every ImagePolicy a YAML block of the page shows is one the
    // generated automation's policySelector picks (Flux's label selector:
    // every matchLabels pair among the policy's labels), or it would never
    // be followed.
    let automation = documents(&flux_ok(&[
        "--repository",
        "ghcr.io/acme/settings",
        "--prefix",
        "main",
    ]))
    .into_iter()
    .find(|d| d["kind"] == "ImageUpdateAutomation")
    .unwrap();
    let selector = automation["spec"]["policySelector"]["matchLabels"]
        .as_object()
        .expect("the automation selects policies by label")
        .clone();
    let page = std::fs::read_to_string(common::repo().join("docs/monorepo.md")).unwrap();
    let mut policies = 0;
    for block in page.split("```yaml\n").skip(1) {
        let block = block.split("\n```").next().unwrap();
        let docs: Vec<Value> = serde_yaml_ng::Deserializer::from_str(block)
            .filter_map(|de| serde::Deserialize::deserialize(de).ok())
            .collect();
        for d in docs.iter().filter(|d| d["kind"] == "ImagePolicy") {
            policies += 1;
            for (k, v) in &selector {
                assert_eq!(
                    &d["metadata"]["labels"][k], v,
                    "the policy {} lacks the label {k}: the automation never follows it",
                    d["metadata"]["name"]
                );
            }
        }
    }
    assert!(policies >= 2, "{policies}");
}
