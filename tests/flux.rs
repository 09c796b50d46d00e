//! `settings-image flux`: the generated objects checked against Flux's own
//! CRD schemas (the served `v1` versions, `tests/fixtures/flux-crds`), and
//! the generated `filterTags` applied the way Flux's image-reflector applies
//! it to the tags of generated git histories (git is the oracle for which
//! commit is newest).

use crate::common;

use common::TempDir;
use common::cmd::{Run, TestCommand};
use common::flux::Pick;
use common::git::ScratchRepo;
use common::yaml_documents as documents;
use serde_json::{Value, json};

fn flux(args: &[&str]) -> Run {
    TestCommand::new().arg("flux").args(args).run()
}

fn flux_ok(args: &[&str]) -> String {
    TestCommand::new().arg("flux").args(args).ok()
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
        kube.dry_run_ok(&yaml, &format!("{args:?}"));
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
    let cases: [(Vec<&str>, &[&str]); 8] = [
        (
            vec!["--repository", "ghcr.io/acme/s", "--prefix", "/"],
            &["error: the tag prefix \"/\""],
        ),
        // `0s` passes Flux's CRD pattern, and Flux would list the tags
        // and run the automation back to back.
        (
            vec![
                "--repository",
                "ghcr.io/acme/s",
                "--prefix",
                "main",
                "--interval",
                "0s",
            ],
            &[
                "error: interval \"0s\" is shorter than 1s: Flux would list the registry's tags and run the automation back to back",
                "hint: give an interval such as 1m or 5m (the default)",
            ],
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
            &[
                "error: --repository \"ghcr.io/acme/s-{name}\" maps the folders x/shop and y/shop to the same ghcr.io/acme/s-shop",
                "hint: put {name}",
            ],
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
        assert_eq!(out.code, 2, "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?} printed objects");
        let stderr = out.stderr;
        for n in names {
            assert!(stderr.contains(n), "{args:?}: wanted {n:?} in:\n{stderr}");
        }
    }
}

/// The controller's interval flags refuse zero too, before it connects
/// to anything: `--min-interval 0s` let a SettingsImage with
/// `interval: 0s` be checked back to back, and a zero retry period had
/// candidates ask for the Lease in a loop.
#[test]
fn the_controllers_interval_flags_refuse_zero() {
    for (flag, says) in [
        (
            "--min-interval=0s",
            "error: --min-interval \"0s\" is shorter than 1s: a SettingsImage asking for less would be checked against git and the registry back to back",
        ),
        (
            "--leader-elect-retry-period=0s",
            "error: --leader-elect-retry-period \"0s\" is zero: candidates would ask for the Lease back to back",
        ),
    ] {
        let out = TestCommand::new()
            .args(["controller", "--kubeconfig", "/nonexistent", flag])
            .run();
        assert_eq!(out.code, 2, "{flag}: {}", out.stderr);
        assert_eq!(out.stderr.lines().next(), Some(says), "{}", out.stderr);
    }
}

/// docs/controller.md's worked example: the objects generated from a
/// SettingsImage land in its namespace, and the automation must name the
/// bootstrap's GitRepository where it is, `flux-system/flux-system`
/// (without a namespace Flux looked in the automation's own and said
/// `GitRepository "flux-system" not found`); `--git-source-namespace`
/// names another, and a GitRepository of another name is looked for
/// beside the objects. Flux's own controllers follow the worked example
/// in tests/flux_observed.rs (`the_controller_publishes_what_source_controller_fetched`).
#[test]
fn the_automation_names_the_namespace_of_its_git_repository() {
    let tmp = TempDir::new();
    let file = tmp.join("shop.yaml");
    std::fs::write(
        &file,
        "apiVersion: settings-image.configbutler.io/v1alpha1\nkind: SettingsImage\n\
         metadata: {name: shop, namespace: settings-image-system}\n\
         spec:\n  sourceRef: {kind: GitRepository, name: settings}\n  path: configs/shop\n  \
         repository: ghcr.io/acme/settings-shop\n  timestampTag: main\n",
    )
    .unwrap();
    let file = file.to_str().unwrap();
    let automation = |extra: &[&str]| -> Value {
        let mut args = extra.to_vec();
        args.extend(["--git-path", "./clusters/prod"]);
        documents(&flux_ok(&args))
            .into_iter()
            .find(|d| d["kind"] == "ImageUpdateAutomation")
            .expect("an ImageUpdateAutomation")
    };
    let a = automation(&["--settings-image", file]);
    assert_eq!(a["metadata"]["namespace"], "settings-image-system");
    assert_eq!(
        a["spec"]["sourceRef"],
        json!({"kind": "GitRepository", "name": "flux-system", "namespace": "flux-system"})
    );
    let a = automation(&["--settings-image", file, "--git-source-namespace", "infra"]);
    assert_eq!(a["spec"]["sourceRef"]["namespace"], "infra");
    let a = automation(&["--settings-image", file, "--git-source", "cluster"]);
    assert_eq!(
        a["spec"]["sourceRef"],
        json!({"kind": "GitRepository", "name": "cluster"})
    );
    // Objects in flux-system (the default) need no namespace.
    let a = automation(&[
        "--repository",
        "ghcr.io/acme/settings-shop",
        "--prefix",
        "main",
    ]);
    assert_eq!(
        a["spec"]["sourceRef"],
        json!({"kind": "GitRepository", "name": "flux-system"})
    );
    let out = flux(&[
        "--settings-image",
        file,
        "--git-source-namespace",
        "Infra_NS",
    ]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("git source namespace \"Infra_NS\""),
        "{}",
        out.stderr
    );
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

/// Flux's pick (tests/common/flux.rs) for the generated policy's
/// `filterTags`: the tag, `None` when nothing matches.
fn flux_latest(pattern: &str, extract: &str, tags: &[String]) -> Result<Option<String>, String> {
    match common::flux::pick(pattern, extract, tags) {
        Pick::Tag(t) => Ok(Some(t)),
        Pick::NoMatch => Ok(None),
        other => Err(format!("{other:?}")),
    }
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
fn flux_serves_the_smallest_tag_on_equal_values_in_any_listing_order() {
    let (pattern, extract) = policy_filter("main");
    let base = [
        "main-5-aaaaaaa",
        "main-7-ccccccc",
        "main-7-bbbbbbb",
        "main-6-ddddddd",
        "main-7-fffffff",
    ];
    // Every order the registry could list them in.
    for rotation in 0..base.len() {
        for reverse in [false, true] {
            let mut tags: Vec<String> = base.iter().map(|t| t.to_string()).collect();
            tags.rotate_left(rotation);
            if reverse {
                tags.reverse();
            }
            assert_eq!(
                flux_latest(&pattern, &extract, &tags).unwrap().as_deref(),
                Some("main-7-bbbbbbb"),
                "{tags:?}"
            );
        }
    }
    // Numbers, not strings: 10 > 9 although "10" < "9".
    let tags: Vec<String> = ["main-10-aaaaaaa", "main-9-bbbbbbb"]
        .map(String::from)
        .to_vec();
    assert_eq!(
        flux_latest(&pattern, &extract, &tags).unwrap().as_deref(),
        Some("main-10-aaaaaaa")
    );
    // `.sig` tags are dropped before any policy; a leading zero makes two
    // values one number, which Go's map order then decides at random.
    let wild = common::flux::pick(
        "^main-(?P<ts>.*)$",
        "$ts",
        &["main-9".into(), "main-99.sig".into()],
    );
    assert_eq!(wild, Pick::Tag("main-9".into()));
    assert!(matches!(
        common::flux::pick(
            &pattern,
            &extract,
            &["main-07-aaaaaaa".into(), "main-7-bbbbbbb".into()]
        ),
        Pick::Undetermined(_)
    ));
}

/// Rows of image-reflector-controller's own test tables, run through the
/// oracle: internal/policy/numerical_test.go (TestNumerical_Latest),
/// internal/policy/filter_test.go (TestRegexFilter), and
/// internal/controller/imagerepository_controller_test.go
/// (TestSortTagsAndGetLatestTags, TestFilterOutTags).
#[test]
fn the_flux_oracle_reproduces_upstreams_test_tables() {
    use common::flux::{Order, filter_out, latest_tags, numerical_latest, regex_filter};
    let v = |s: &[&str]| -> Vec<String> { s.iter().map(|x| x.to_string()).collect() };
    // TestNumerical_Latest: (versions, order, expected); upstream shuffles
    // the list, so every rotation and its reverse must agree.
    let rows: &[(&[&str], Order, &str)] = &[
        (
            &[
                "-62", "-88", "73", "72", "15", "16", "15", "29", "-33", "-91",
            ],
            Order::Asc,
            "73",
        ),
        (
            &["5", "-8", "-78", "25", "70", "-4", "80", "92", "-20", "-24"],
            Order::Desc,
            "-78",
        ),
        (
            &[
                "47.40896403322944",
                "-27.8520927455902",
                "-27.930666514224427",
                "-31.352485948094568",
                "-50.41072694704882",
                "-21.962849842263736",
                "24.71884721436865",
                "-39.99177354004344",
                "53.47333823144817",
                "3.2008658570411086",
            ],
            Order::Asc,
            "53.47333823144817",
        ),
        (
            &[
                "-65.27202780220686",
                "57.82948329142309",
                "22.40184684363291",
                "-86.36934305697784",
                "-90.29082099756083",
                "-12.041712603564264",
                "77.70488240399305",
                "-38.98425003883552",
                "16.06867070412028",
                "53.735674335181216",
            ],
            Order::Desc,
            "-90.29082099756083",
        ),
        (
            &[
                "1606234201",
                "1606364286",
                "1606334092",
                "1606334284",
                "1606334201",
            ],
            Order::Asc,
            "1606364286",
        ),
        (
            &[
                "1606234201",
                "1606364286",
                "1606334092",
                "1606334284",
                "1606334201",
            ],
            Order::Desc,
            "1606234201",
        ),
        (&["1"], Order::Asc, "1"),
        (&["1"], Order::Desc, "1"),
    ];
    for (versions, order, want) in rows {
        for r in 0..versions.len() {
            for reverse in [false, true] {
                let mut list = v(versions);
                list.rotate_left(r);
                if reverse {
                    list.reverse();
                }
                assert_eq!(
                    numerical_latest(&list, *order).as_deref(),
                    Ok(*want),
                    "{list:?}"
                );
            }
        }
    }
    // "With invalid numerical value" and "Empty version list" fail.
    assert!(numerical_latest(&v(&["0", "1a", "b"]), Order::Asc).is_err());
    assert!(numerical_latest(&[], Order::Asc).is_err());
    // strconv.ParseFloat's documented edges: out of range is an error
    // (ErrRange), so one such value fails the policy; infinities and NaN
    // are spelled out; a sign before NaN is a syntax error.
    use common::flux::parse_float;
    assert!(parse_float(&"9".repeat(400)).is_err());
    assert!(parse_float("1e309").is_err());
    assert_eq!(parse_float("1e308"), Ok(1e308));
    assert_eq!(parse_float("017"), Ok(17.0));
    assert_eq!(parse_float("-Inf"), Ok(f64::NEG_INFINITY));
    assert_eq!(parse_float("+infinity"), Ok(f64::INFINITY));
    assert!(parse_float("NaN").is_ok_and(f64::is_nan));
    assert!(parse_float("+nan").is_err());
    assert!(parse_float("").is_err() && parse_float("1.2.3").is_err());
    assert!(numerical_latest(&v(&["1", &"9".repeat(400)]), Order::Asc).is_err());
    // TestRegexFilter (the expected items; upstream's comparison is inverted).
    let tags = v(&["ver1", "ver2", "ver3", "rel1"]);
    let items = |m: std::collections::BTreeMap<String, String>| m.into_keys().collect::<Vec<_>>();
    assert_eq!(items(regex_filter("", "", &v(&["a"])).unwrap()), ["a"]);
    assert_eq!(
        items(regex_filter("^ver", "", &tags).unwrap()),
        ["ver1", "ver2", "ver3"]
    );
    assert_eq!(
        items(regex_filter(r"ver(\d+)", "$1", &tags).unwrap()),
        ["1", "2", "3"]
    );
    // TestSortTagsAndGetLatestTags.
    let sort_rows: &[(&[&str], &[&str])] = &[
        (&[], &[]),
        (
            &["1.0.0", "0.0.8", "1.2.5", "3.0.1", "1.0.1"],
            &["3.0.1", "1.2.5", "1.0.1", "1.0.0", "0.0.8"],
        ),
        (
            &[
                "1.0.0", "0.0.8", "1.2.5", "3.0.1", "1.0.1", "5.1.1", "4.1.0", "4.5.0", "4.0.3",
                "2.2.2", "0.5.1", "0.1.0",
            ],
            &[
                "5.1.1", "4.5.0", "4.1.0", "4.0.3", "3.0.1", "2.2.2", "1.2.5", "1.0.1", "1.0.0",
                "0.5.1",
            ],
        ),
        (
            &["-62", "-88", "73", "72", "15"],
            &["73", "72", "15", "-88", "-62"],
        ),
        (
            &[
                "-62", "-88", "73", "72", "15", "16", "15", "29", "-33", "-91", "100", "101",
            ],
            &[
                "73", "72", "29", "16", "15", "15", "101", "100", "-91", "-88",
            ],
        ),
        (&["aaa", "bbb", "ccc"], &["ccc", "bbb", "aaa"]),
        (
            &[
                "aaa", "bbb", "ccc", "ddd", "eee", "fff", "ggg", "hhh", "iii", "jjj", "kkk", "lll",
            ],
            &[
                "lll", "kkk", "jjj", "iii", "hhh", "ggg", "fff", "eee", "ddd", "ccc",
            ],
        ),
    ];
    for (tags, want) in sort_rows {
        assert_eq!(latest_tags(&v(tags)), v(want), "{tags:?}");
    }
    // TestFilterOutTags.
    let abcd = v(&["a", "b", "c", "d"]);
    assert_eq!(filter_out(&abcd, &[]).unwrap(), abcd);
    assert_eq!(filter_out(&abcd, &["[abc]"]).unwrap(), v(&["d"]));
    assert_eq!(filter_out(&abcd, &["[a]", "[d]"]).unwrap(), v(&["b", "c"]));
    assert!(filter_out(&[], &["[="]).is_err());
    assert_eq!(
        filter_out(
            &v(&[
                "0.1.0",
                "0.2.0",
                "0.2.-alpha",
                "0.3.0",
                "0.4.0",
                "0.4.0.sig"
            ]),
            &[r"^.*\-alpha$", r"^.*\.sig$"]
        )
        .unwrap(),
        v(&["0.1.0", "0.2.0", "0.3.0", "0.4.0"])
    );
    assert_eq!(
        filter_out(&v(&["aaa", "bbb", "ccc", "ddd"]), &["aaa|ccc"]).unwrap(),
        v(&["bbb", "ddd"])
    );
}

struct History {
    repo: ScratchRepo,
}

impl History {
    /// `settings-image tag` for the folder at `rev`.
    fn tag(&self, folder: &str, prefix: &str, rev: &str) -> String {
        TestCommand::new()
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
            .ok()
            .trim()
            .to_string()
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
            let id = h
                .repo
                .commit_files(&[(file, &format!("v{i}\n"))], file, base + dt);
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
        let want = h.repo.tag_at(flux_prefix, "HEAD", "configs/shop");
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
        let id = h
            .repo
            .commit_files(&[("configs/shop/app.yaml", "new\n")], "new", base + 950);
        tags.push(h.tag("configs/shop", prefix, &id));
        tags.sort();
        let picked = flux_latest(&pattern, &extract, &tags).unwrap().unwrap();
        assert_eq!(picked, h.repo.tag_at(flux_prefix, "HEAD", "configs/shop"));
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

/// Values that break YAML written by hand: line breaks (LF, CR, NEL, the
/// Unicode line separator), a key, a comment, a list item, anchors, tags,
/// flow collections, quotes, block scalars, and plain scalars YAML reads
/// as booleans, null or numbers.
const HOSTILE: &[&str] = &[
    "x\ny: z",
    "x\r\nkind: Secret",
    "x\u{85}y",
    "x\u{2028}kind: Secret",
    "a: b",
    "#c",
    "x #c",
    "- x",
    "? x",
    "*alias",
    "&anchor x",
    "!!str x",
    "{a: b}",
    "[a]",
    "'q",
    "\"q",
    "| x",
    "> x",
    "% x",
    "@x",
    "`x",
    "yes",
    "null",
    "~",
    "1e3",
    "---",
    "...",
];

/// Every generator option either refuses a hostile value (exit 2, nothing
/// printed) or carries it as data: the output parses to exactly the
/// objects the same options with a plain value give, with only the flag's
/// own fields replaced (by the value, or by the tag prefix or repository
/// name the value turns into, written out in PREFIXES and FOLDERS).
#[test]
fn no_generator_option_can_inject_yaml() {
    let base = [
        "--repository",
        "ghcr.io/acme/settings-shop",
        "--prefix",
        "main",
        "--git-push-branch",
        "flux-updates",
    ];
    let plain = documents(&flux_ok(&base));
    assert_eq!(
        kinds(&plain),
        ["ImageRepository", "ImagePolicy", "ImageUpdateAutomation"]
    );
    // (flag, the field it fills: document index and JSON pointer)
    let fields: &[(&str, Option<(usize, &str)>)] = &[
        ("--git-branch", Some((2, "/spec/git/checkout/ref/branch"))),
        ("--git-push-branch", Some((2, "/spec/git/push/branch"))),
        ("--git-path", Some((2, "/spec/update/path"))),
        ("--namespace", None),
        ("--name", None),
        ("--interval", None),
        ("--secret-ref", None),
        ("--cert-secret-ref", None),
        ("--automation-name", None),
        ("--git-source", None),
        ("--git-source-namespace", None),
        ("--repository", None),
        ("--prefix", None),
        ("--path", None),
    ];
    let mut accepted = Vec::new();
    for (flag, field) in fields {
        for value in HOSTILE {
            let mut args: Vec<&str> = base.to_vec();
            match args.iter().position(|a| a == flag) {
                Some(i) => args[i + 1] = value,
                None => args.extend([*flag, *value]),
            }
            if *flag == "--path" {
                args[1] = "ghcr.io/acme/settings-{name}";
            }
            let out = flux(&args);
            if out.code == 2 {
                assert!(out.stdout.is_empty(), "{flag} {value:?} printed objects");
                continue;
            }
            assert_eq!(out.code, 0, "{flag} {value:?}: {out:?}");
            if field.is_none() {
                accepted.push((*flag, *value));
            }
            let yaml = out.stdout;
            let docs = documents(&yaml);
            // The plain objects with only this flag's own fields replaced.
            let mut want = plain.clone();
            match field {
                Some((i, ptr)) => {
                    *want[*i].pointer_mut(ptr).expect("field") = Value::from(*value);
                }
                None => fill(&mut want, flag, value),
            }
            assert_eq!(docs, want, "{flag} {value:?}:\n{yaml}");
        }
    }
    // What is data and what is refused for the ten: Kubernetes names
    // take only the YAML-looking words, the prefix and a folder's name are
    // turned into a tag or repository grammar, and the interval and the
    // repository refuse all of them.
    let words = ["yes", "null", "1e3"];
    let mut want: Vec<(&str, &str)> = Vec::new();
    for flag in [
        "--namespace",
        "--name",
        "--secret-ref",
        "--cert-secret-ref",
        "--automation-name",
        "--git-source",
        "--git-source-namespace",
    ] {
        want.extend(words.map(|w| (flag, w)));
    }
    want.extend(PREFIXES.iter().map(|(v, _)| ("--prefix", *v)));
    want.extend(FOLDERS.iter().map(|(v, _)| ("--path", *v)));
    accepted.sort();
    want.sort();
    assert_eq!(accepted, want);
}

/// Hostile prefixes `flux` takes, and the tag prefix each becomes (every
/// character outside `[A-Za-z0-9_.-]` written `-`, no leading `-` or `.`).
const PREFIXES: &[(&str, &str)] = &[
    ("a: b", "a--b"),
    ("#c", "c"),
    ("x #c", "x--c"),
    ("? x", "x"),
    ("*alias", "alias"),
    ("&anchor x", "anchor-x"),
    ("!!str x", "str-x"),
    ("{a: b}", "a--b-"),
    ("[a]", "a-"),
    ("'q", "q"),
    ("\"q", "q"),
    ("| x", "x"),
    ("> x", "x"),
    ("% x", "x"),
    ("@x", "x"),
    ("`x", "x"),
    ("yes", "yes"),
    ("null", "null"),
    ("1e3", "1e3"),
];

/// Hostile folder names `flux --path` takes, and the `{name}` each gives
/// (lower case, each run of characters outside `[a-z0-9._]` one `-`, none
/// at either end).
const FOLDERS: &[(&str, &str)] = &[
    ("x\ny: z", "x-y-z"),
    ("x\r\nkind: Secret", "x-kind-secret"),
    ("x\u{85}y", "x-y"),
    ("x\u{2028}kind: Secret", "x-kind-secret"),
    ("a: b", "a-b"),
    ("#c", "c"),
    ("x #c", "x-c"),
    ("&anchor x", "anchor-x"),
    ("!!str x", "str-x"),
    ("{a: b}", "a-b"),
    ("[a]", "a"),
    ("'q", "q"),
    ("\"q", "q"),
    ("| x", "x"),
    ("> x", "x"),
    ("% x", "x"),
    ("@x", "x"),
    ("`x", "x"),
    ("yes", "yes"),
    ("null", "null"),
    ("1e3", "1e3"),
];

/// The plain objects (`--repository ghcr.io/acme/settings-shop --prefix
/// main`) as `flag value` changes them, for the flags whose value fills
/// more than one field or is turned into a grammar first.
fn fill(docs: &mut [Value], flag: &str, value: &str) {
    let mut set = |i: usize, ptr: &str, v: Value| {
        // A field the plain objects leave out (sourceRef.namespace) is added.
        let (parent, key) = ptr.rsplit_once('/').expect("a pointer");
        docs[i]
            .pointer_mut(parent)
            .and_then(Value::as_object_mut)
            .unwrap_or_else(|| panic!("{ptr}"))
            .insert(key.to_string(), v);
    };
    match flag {
        "--namespace" => {
            for i in 0..3 {
                set(i, "/metadata/namespace", value.into());
            }
            // The bootstrap's GitRepository stays in flux-system.
            set(2, "/spec/sourceRef/namespace", "flux-system".into());
        }
        "--git-source-namespace" => set(2, "/spec/sourceRef/namespace", value.into()),
        "--name" => {
            set(0, "/metadata/name", value.into());
            set(1, "/metadata/name", value.into());
            set(1, "/spec/imageRepositoryRef/name", value.into());
        }
        "--automation-name" => set(2, "/metadata/name", value.into()),
        "--git-source" => set(2, "/spec/sourceRef/name", value.into()),
        "--secret-ref" | "--cert-secret-ref" => {
            let key = if flag == "--secret-ref" {
                "secretRef"
            } else {
                "certSecretRef"
            };
            let spec = docs[0]["spec"].as_object_mut().expect("spec");
            assert!(spec.insert(key.into(), json!({ "name": value })).is_none());
        }
        "--prefix" => {
            let (_, p) = PREFIXES
                .iter()
                .find(|(v, _)| *v == value)
                .unwrap_or_else(|| panic!("--prefix {value:?} is not expected to be taken"));
            let pattern = format!("^{p}-(?P<ts>[0-9]+)-[0-9a-f]{{7}}$");
            set(1, "/spec/filterTags/pattern", pattern.into());
        }
        "--path" => {
            let (_, n) = FOLDERS
                .iter()
                .find(|(v, _)| *v == value)
                .unwrap_or_else(|| panic!("--path {value:?} is not expected to be taken"));
            let name = format!("settings-{n}");
            set(0, "/metadata/name", name.clone().into());
            set(0, "/spec/image", format!("ghcr.io/acme/{name}").into());
            set(1, "/metadata/name", name.clone().into());
            set(1, "/spec/imageRepositoryRef/name", name.into());
        }
        other => panic!("{other} {value:?} is not expected to be taken"),
    }
}

#[test]
fn output_never_writes_through_a_symlink() {
    let tmp = TempDir::new();
    let outside = tmp.join("outside.yaml");
    std::fs::write(&outside, "keep: me\n").unwrap();
    let args = |dir: &std::path::Path| -> Vec<String> {
        [
            "--repository",
            "ghcr.io/acme/settings-shop",
            "--prefix",
            "main",
            "--output",
            dir.to_str().unwrap(),
        ]
        .map(String::from)
        .to_vec()
    };
    // A file of the output folder is a symlink.
    let dir = tmp.join("flux");
    std::fs::create_dir(&dir).unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("settings.yaml")).unwrap();
    let a = args(&dir);
    let out = flux(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains("symlink"), "{out:?}");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep: me\n");
    assert!(
        !dir.join("settings-shop.yaml").exists(),
        "nothing written before the refusal"
    );
    // The output folder itself is a symlink.
    let real = tmp.join("real");
    std::fs::create_dir(&real).unwrap();
    let link = tmp.join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let a = args(&link);
    let out = flux(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(out.code, 2, "{out:?}");
    assert_eq!(std::fs::read_dir(&real).unwrap().count(), 0);
    // A plain folder is written.
    let ok = tmp.join("ok");
    let a = args(&ok);
    let out = flux(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(out.code, 0, "{out:?}");
    assert!(ok.join("settings.yaml").is_file());
}

/// Every Pod and Deployment with an image volume shown in README.md and
/// docs/*.md: complete objects that the real API server (kube-apiserver
/// with ImageVolume on) accepts with `kubectl apply --dry-run=server`. A
/// YAML block with `volumes:` that is not such a complete object fails.
#[test]
fn every_documented_workload_with_an_image_volume_passes_the_api_server() {
    let mut files = vec![common::repo().join("README.md")];
    for e in std::fs::read_dir(common::repo().join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            files.push(p);
        }
    }
    files.sort();
    let kube = common::kube::kube();
    let mut checked = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let mut rest = text.as_str();
        while let Some(start) = rest.find("```yaml\n") {
            let body = &rest[start + 8..];
            // A fence may be indented (a block inside a list item).
            let end = body
                .match_indices("\n")
                .map(|(i, _)| i)
                .find(|&i| {
                    body[i + 1..]
                        .trim_start_matches([' ', '\t'])
                        .starts_with("```")
                })
                .expect("the block ends");
            let block = &body[..end];
            rest = &body[end..];
            if !block.contains("volumes:") {
                continue;
            }
            let where_ = format!("{}: {}", f.display(), block.lines().next().unwrap_or(""));
            let docs: Vec<Value> = serde_yaml_ng::Deserializer::from_str(block)
                .map(|d| serde::Deserialize::deserialize(d).unwrap_or(Value::Null))
                .filter(|v: &Value| !v.is_null())
                .collect();
            let workloads: Vec<&Value> = docs
                .iter()
                .filter(|d| matches!(d["kind"].as_str(), Some("Pod" | "Deployment")))
                .collect();
            assert!(
                !workloads.is_empty(),
                "{where_}: a block with volumes that is not a complete Pod or Deployment"
            );
            for w in workloads {
                let spec = if w["kind"] == "Pod" {
                    &w["spec"]
                } else {
                    &w["spec"]["template"]["spec"]
                };
                assert!(
                    spec["volumes"]
                        .as_array()
                        .is_some_and(|v| v.iter().any(|v| v["image"]["reference"].is_string())),
                    "{where_}: no image volume"
                );
                kube.dry_run_ok(&serde_json::to_string(w).unwrap(), &where_);
                checked.push(where_.clone());
            }
        }
    }
    assert!(checked.len() >= 3, "{checked:?}");
}

/// kubectl reads manifests with YAML 1.1 rules (go-yaml), where `yes`,
/// `on`, `n` or `1e3` written plainly are a boolean or a number and the
/// object does not decode ("cannot unmarshal bool into ... namespace").
/// Names that look like those are valid Kubernetes names: kubectl itself
/// (a client-side dry run against the test API server, which maps Flux's
/// kinds) must read each field back as the string given.
#[test]
fn kubectl_reads_yaml_looking_names_as_the_names_given() {
    let kube = common::kube::kube();
    kube.install_flux_crds();
    for value in [
        "yes", "on", "off", "y", "n", "no", "null", "1e3", "0755", "0x1f", "12",
    ] {
        let yaml = flux_ok(&[
            "--repository",
            "ghcr.io/acme/settings-shop",
            "--prefix",
            "main",
            "--namespace",
            value,
            "--name",
            value,
            "--secret-ref",
            value,
            "--git-source",
            value,
        ]);
        let out = kube.kubectl_in(
            &[
                "create",
                "--dry-run=client",
                "--validate=false",
                "-o",
                "json",
                "-f",
                "-",
            ],
            &yaml,
        );
        assert!(
            out.status.success(),
            "kubectl could not read the objects for {value:?}: {}\n{yaml}",
            String::from_utf8_lossy(&out.stderr)
        );
        // One JSON object per document, one after the other.
        let items: Vec<Value> = serde_json::Deserializer::from_slice(&out.stdout)
            .into_iter::<Value>()
            .collect::<Result<_, _>>()
            .expect("kubectl's JSON");
        assert_eq!(items.len(), 3, "{items:#?}");
        for item in &items {
            assert_eq!(item["metadata"]["namespace"], value, "{item:#}");
        }
        assert_eq!(items[0]["metadata"]["name"], value);
        assert_eq!(items[0]["spec"]["secretRef"]["name"], value);
        assert_eq!(items[1]["spec"]["imageRepositoryRef"]["name"], value);
        assert_eq!(items[2]["spec"]["sourceRef"]["name"], value);
    }
}
