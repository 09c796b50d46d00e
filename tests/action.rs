//! `settings-image action` as the GitHub runner runs it: inputs in the
//! environment under the runner's names (`INPUT_TIMESTAMP-TAG`, hyphen
//! kept) with action.yml's defaults, a workspace that is a real git
//! repository owned by the runner's uid 1001 (the action runs as root),
//! empty `$GITHUB_OUTPUT` and `$GITHUB_STEP_SUMMARY` files, real webhook
//! payloads, and a real registry (docker-registry) on loopback. The outputs
//! file is parsed with the runner's rules. One test builds the shipped
//! image from the Dockerfile with buildah and runs it under podman in the
//! runner's `docker run` shape.
//!
//! The pull_request payload is the real push payload of
//! `tests/fixtures/github/push` with the fields the action reads from a
//! pull_request event added (`action`, `number`, `pull_request.head/base`):
//! no pull_request example is among the fixtures, and only `head.sha` is read.

use crate::common;

use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::cmd::TestCommand;
use common::forge::{self, Edit};
use common::registry::{Auth, Registry, skopeo_inspect};
use common::runner::{Runner, chown_runner, parse_outputs};
use common::{Podman, TempDir};

const SERVER_URL: &str = "https://github.com";
const GH_REPOSITORY: &str = "acme/settings";
const ACTOR: &str = "octocat";
const DIR: &str = "configs/shop";
/// 2024-01-02T03:04:05Z
const T0: i64 = 1_704_164_645;

/// Runs git in `dir` as root on a repository owned by uid 1001
/// ([`common::git::git_cmd`] with a home beside `dir`, and
/// `safe.directory=*`), with a fixed author and committer time when `time`
/// is given.
fn git(dir: &Path, args: &[&str], time: Option<i64>) -> String {
    let mut cmd = common::git::git_cmd(&common::git::home_beside(dir), dir);
    common::git::run(cmd.envs(ANY_OWNER), args, time)
}

/// `safe.directory=*` from the environment: it reaches the git processes a
/// clone starts (upload-pack), where `-c` does not.
const ANY_OWNER: [(&str, &str); 3] = [
    ("GIT_CONFIG_COUNT", "1"),
    ("GIT_CONFIG_KEY_0", "safe.directory"),
    ("GIT_CONFIG_VALUE_0", "*"),
];

/// A workspace: `configs/shop` changed at T0, then an unrelated commit at
/// T0+100 (so HEAD is not the commit the tag names).
fn workspace(root: &Path) -> PathBuf {
    let ws = root.join("workspace");
    fs::create_dir_all(ws.join(DIR)).expect("creating the workspace");
    git(&ws, &["init", "-q", "-b", "main"], None);
    fs::write(ws.join(DIR).join("app.yaml"), "replicas: 2\n").expect("writing app.yaml");
    git(&ws, &["add", "."], None);
    git(&ws, &["commit", "-q", "-m", "shop settings"], Some(T0));
    fs::write(ws.join("README.md"), "unrelated\n").expect("writing README.md");
    git(&ws, &["add", "."], None);
    git(&ws, &["commit", "-q", "-m", "readme"], Some(T0 + 100));
    chown_runner(&ws);
    ws
}

/// `git log -1 --format=%ct/%H [REV] -- DIR`: the oracle for the tag.
fn last_change(ws: &Path, rev: Option<&str>) -> (String, String) {
    let mut args = vec!["log", "-1", "--format=%ct/%H"];
    args.extend(rev);
    args.extend(["--", DIR]);
    let out = git(ws, &args, None);
    let (ct, id) = out.split_once('/').expect("ct/H");
    (ct.to_string(), id.to_string())
}

fn fixture(rel: &str) -> PathBuf {
    let p = common::repo().join("tests/fixtures/github").join(rel);
    assert!(p.is_file(), "fixture {} is missing", p.display());
    p
}

fn with_base<'a>(repository: &'a str, extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut w = vec![
        ("path", DIR),
        ("repository", repository),
        ("timestamp-tag", "main"),
    ];
    for (k, v) in extra {
        w.retain(|(n, _)| n != k);
        w.push((k, v));
    }
    w
}

/// The registry's repository list (`GET /v2/_catalog`), anonymously.
fn catalog(port: u16) -> serde_json::Value {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connecting to the registry");
    s.write_all(b"GET /v2/_catalog HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .expect("asking for the catalog");
    let mut resp = String::new();
    s.read_to_string(&mut resp).expect("reading the catalog");
    let body = resp.split_once("\r\n\r\n").expect("an HTTP response").1;
    serde_json::from_str(body).unwrap_or_else(|e| panic!("catalog is not JSON ({e}): {resp}"))
}

#[test]
fn a_push_publishes_every_output_and_a_rerun_pushes_nothing() {
    let password = "ghs_Act10nT0kenNeverPrinted42";
    let reg = Registry::start(Auth::Basic {
        user: ACTOR.into(),
        password: password.into(),
    });
    let tmp = TempDir::new();
    let ws = workspace(tmp.path());
    let runner = Runner::on_push(tmp, ws);
    let repository = format!("{}/acme/settings-shop", reg.host());
    // The job token only goes to ghcr.io: any other registry gets `password`.
    let with = with_base(
        &repository,
        &[("tags", "latest, stable"), ("password", password)],
    );

    let step = runner.attempt(&with, 1);
    step.ok();
    step.assert_masked(password);

    let (ct, id) = last_change(&runner.ws, None);
    let tag = format!("main-{ct}-{}", &id[..7]);
    assert_eq!(ct, T0.to_string());
    assert_ne!(
        id, runner.sha,
        "the fixture's HEAD must not be the last change"
    );
    let keys: Vec<&str> = step.outputs.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "anomaly",
            "anomaly-message",
            "branch-tag",
            "commit",
            "digest",
            "image",
            "pushed",
            "reference",
            "subject-digest",
            "subject-name",
            "tag",
            "tags",
            "timestamp"
        ]
    );
    // Normal ordering and no branch tag asked for: present and empty, so a
    // later step can test them without checking that they exist.
    assert_eq!(step.out("anomaly"), "");
    assert_eq!(step.out("branch-tag"), "");
    assert_eq!(step.out("tag"), tag);
    assert_eq!(step.out("commit"), id);
    assert_eq!(step.out("timestamp"), ct);
    assert_eq!(step.out("tags"), format!("{tag}\nlatest\nstable"));
    assert_eq!(step.out("pushed"), "true");
    let digest = step.out("digest").to_string();
    assert_eq!(
        step.out("reference"),
        format!("{repository}:{tag}@{digest}")
    );
    // What cosign and actions/attest-build-provenance take.
    assert_eq!(step.out("image"), format!("{repository}@{digest}"));
    assert_eq!(step.out("subject-name"), repository);
    assert_eq!(step.out("subject-digest"), digest);
    let creds = format!("{ACTOR}:{password}");
    for t in [tag.as_str(), "latest", "stable"] {
        let i = skopeo_inspect(&format!("{repository}:{t}"), Some(&creds))
            .unwrap_or_else(|| panic!("tag {t} is not in the registry"));
        assert_eq!(i["Digest"], digest.as_str(), "tag {t}");
    }
    // Verbose logs are grouped; the summary links the commit and shows Flux.
    assert!(step.stdout.contains("\n::group::"), "{}", step.stdout);
    assert!(step.stdout.contains("\n::endgroup::\n"), "{}", step.stdout);
    assert!(
        step.summary
            .contains(&format!("`{}`", step.out("reference"))),
        "{}",
        step.summary
    );
    assert!(
        step.summary
            .contains(&format!("({SERVER_URL}/{GH_REPOSITORY}/commit/{id})")),
        "{}",
        step.summary
    );
    assert!(
        step.summary.contains("kind: ImagePolicy"),
        "{}",
        step.summary
    );
    // The summary's Flux objects are what the API server (with Flux's
    // CRDs) accepts, as a user would paste them.
    let yaml = step
        .summary
        .split_once("```yaml\n")
        .and_then(|(_, rest)| rest.split_once("```\n</details>"))
        .map(|(yaml, _)| yaml)
        .unwrap_or_else(|| panic!("no Flux objects in the summary:\n{}", step.summary));
    let kube = common::kube::kube();
    kube.install_flux_crds();
    for de in serde_yaml_ng::Deserializer::from_str(yaml) {
        let doc: serde_json::Value = serde::Deserialize::deserialize(de).expect("summary YAML");
        if let Some(ns) = doc["metadata"]["namespace"].as_str() {
            kube.namespace(ns);
        }
    }
    kube.dry_run_ok(yaml, "the summary's objects");

    // A re-run of the same job: same tag and digest, nothing pushed.
    let again = runner.attempt(&with, 2);
    again.ok();
    again.assert_masked(password);
    let mut expected = step.outputs.clone();
    expected.insert("pushed".into(), "false".into());
    assert_eq!(again.outputs, expected);
    assert!(again.summary.contains("| pushed | no"), "{}", again.summary);

    // `summary: false` writes none.
    let quiet = runner.attempt(
        &with_base(&repository, &[("summary", "false"), ("password", password)]),
        3,
    );
    quiet.ok();
    assert_eq!(quiet.summary, "");
    assert_eq!(quiet.out("digest"), digest);
}

#[test]
fn rerunning_an_older_job_pushes_nothing_and_keeps_the_branch_tag() {
    let reg = Registry::start(Auth::None);
    let tmp = TempDir::new();
    let ws = workspace(tmp.path());
    let old = git(&ws, &["rev-parse", "HEAD"], None);
    let repository = format!("{}/acme/rerun", reg.host());
    let with = with_base(&repository, &[("token", ""), ("branch-tag", "main")]);
    let first = Runner::on_push(TempDir::new(), ws.clone()).attempt(&with, 1);
    first.ok();
    assert_eq!(first.out("branch-tag"), "created");
    assert_eq!(first.out("anomaly"), "");
    // A newer commit changes the folder and is published by its own run.
    fs::write(ws.join(DIR).join("app.yaml"), "replicas: 5\n").expect("writing");
    git(
        &ws,
        &["commit", "-q", "-am", "five replicas"],
        Some(T0 + 500),
    );
    let newer = Runner::on_push(TempDir::new(), ws.clone()).attempt(&with, 1);
    newer.ok();
    assert!(newer.out("timestamp") > first.out("timestamp"));
    assert_eq!(newer.out("branch-tag"), "moved");
    // Re-running the old job (its checkout is the old commit): same tag and
    // digest as back then, nothing pushed, the branch tag stays on the newer
    // image, and notices (not failures) that say so.
    git(&ws, &["checkout", "-q", "--detach", &old], None);
    let rerun = Runner::on_push(TempDir::new(), ws.clone()).attempt(&with, 2);
    rerun.ok();
    let mut expected = first.outputs.clone();
    expected.insert("pushed".into(), "false".into());
    expected.insert("anomaly".into(), "rerun-of-older".into());
    expected.insert("branch-tag".into(), "kept-newer".into());
    expected.insert(
        "anomaly-message".into(),
        rerun.out("anomaly-message").to_string(),
    );
    assert_eq!(rerun.outputs, expected);
    assert!(
        rerun.out("anomaly-message").contains(newer.out("tag")),
        "{}",
        rerun.out("anomaly-message")
    );
    let notice = |title: &str| {
        rerun
            .stdout
            .lines()
            .any(|l| l.starts_with(&format!("::notice title={title}::")))
    };
    assert!(
        notice("settings-image%3A rerun-of-older"),
        "{}",
        rerun.stdout
    );
    assert!(notice("settings-image%3A branch tag"), "{}", rerun.stdout);
    assert!(!rerun.stdout.contains("::warning"), "{}", rerun.stdout);
    assert!(
        rerun.summary.contains("rerun-of-older") && rerun.summary.contains("left where it is"),
        "{}",
        rerun.summary
    );
    // The registry agrees: `main` names the newer image.
    let main = skopeo_inspect(&format!("{repository}:main"), None).expect("the main tag exists");
    assert_eq!(main["Digest"], newer.out("digest"));
}

#[test]
fn the_password_input_wins_over_the_token_and_neither_leaks() {
    let password = "dckr_pat_Pa55w0rdInput";
    let token = "ghs_DefaultTokenWrongHere";
    let reg = Registry::start(Auth::Basic {
        user: "deployer".into(),
        password: password.into(),
    });
    let tmp = TempDir::new();
    let ws = workspace(tmp.path());
    let mut runner = Runner::on_push(tmp, ws);
    runner.github_token = token.into();
    let repository = format!("{}/acme/shop", reg.host());

    let step = runner.run(&with_base(
        &repository,
        &[("username", "deployer"), ("password", password)],
    ));
    step.ok();
    step.assert_masked(password);
    step.assert_masked(token);
    assert_eq!(step.out("pushed"), "true");

    // Only the (wrong) token: an auth error annotation, exit 5, no leak.
    let step = runner.attempt(&with_base(&repository, &[("username", "deployer")]), 2);
    assert_eq!(
        step.code, 5,
        "stdout:\n{}\nstderr:\n{}",
        step.stdout, step.stderr
    );
    assert!(
        step.stdout
            .lines()
            .any(|l| l
                .starts_with("::error title=settings-image%3A registry authentication failed::")),
        "{}",
        step.stdout
    );
    step.assert_masked(token);
    assert!(step.outputs.is_empty(), "{:?}", step.outputs);
}

#[test]
fn bad_inputs_are_error_annotations_with_a_nonzero_exit() {
    let tmp = TempDir::new();
    let ws = workspace(tmp.path());
    let runner = Runner::on_push(tmp, ws);
    let secret = "ghs_ErrorPathT0ken";
    let mut runner = runner;
    runner.github_token = secret.into();
    let cases: [(&[(&str, &str)], &str); 5] = [
        (
            &[("repository", "127.0.0.1:9/a/b"), ("timestamp-tag", "main")],
            "::error title=settings-image%3A invalid input::the input `path` is required",
        ),
        (
            &[("path", DIR), ("timestamp-tag", "main")],
            "::error title=settings-image%3A invalid input::the input `repository` is required",
        ),
        (
            &[
                ("path", "../outside"),
                ("repository", "127.0.0.1:9/a/b"),
                ("timestamp-tag", "main"),
            ],
            "leaves the workspace",
        ),
        (
            &[
                ("path", "/etc"),
                ("repository", "127.0.0.1:9/a/b"),
                ("timestamp-tag", "main"),
            ],
            "leaves the workspace",
        ),
        (
            &[
                ("path", DIR),
                ("repository", "127.0.0.1:9/a/b"),
                ("timestamp-tag", "main"),
                ("insecure", "maybe"),
            ],
            "the input `insecure` is \"maybe\", not a boolean",
        ),
    ];
    for (i, (with, want)) in cases.iter().enumerate() {
        let step = runner.attempt(with, i as u32 + 1);
        assert_eq!(
            step.code, 2,
            "{with:?}: stdout:\n{}\nstderr:\n{}",
            step.stdout, step.stderr
        );
        let error = step
            .stdout
            .lines()
            .find(|l| l.starts_with("::error title="))
            .unwrap_or_else(|| panic!("{with:?}: no ::error line in:\n{}", step.stdout));
        assert!(error.contains(want), "{with:?}: {error}");
        assert!(
            error.contains("%0Ahint: "),
            "{with:?}: the hint is missing: {error}"
        );
        step.assert_masked(secret);
        assert!(step.outputs.is_empty(), "{with:?}: {:?}", step.outputs);
    }
}

/// The workflow commands a line of stdout would run, as the runner reads
/// it: lines end at LF or CR, and a command is `::name` after leading
/// whitespace, or the old `##[name`.
fn commands_in(stdout: &str) -> Vec<String> {
    stdout
        .split(['\n', '\r'])
        .filter_map(|l| {
            let l = l.trim_start();
            let rest = l.strip_prefix("::").or_else(|| l.strip_prefix("##["))?;
            let end = rest.find([':', ' ', ']']).unwrap_or(rest.len());
            Some(rest[..end].to_string())
        })
        .collect()
}

#[test]
fn hostile_values_write_no_workflow_command() {
    let reg = Registry::start(Auth::None);
    let tmp = TempDir::new();
    let ws = workspace(tmp.path());
    // A legal folder name that carries two workflow commands after
    // carriage returns, which the runner reads as line breaks (a newline
    // would make `path` several folders).
    let hostile = "cfg\r::add-mask::replicas\r::stop-commands::pwned";
    fs::create_dir_all(ws.join(hostile)).expect("creating the hostile folder");
    fs::write(ws.join(hostile).join("app.yaml"), "replicas: 3\n").expect("writing");
    git(&ws, &["add", "."], None);
    git(&ws, &["commit", "-q", "-m", "hostile name"], Some(T0 + 200));
    chown_runner(&ws);
    let mut runner = Runner::on_push(tmp, ws);
    let repository = format!("{}/acme/shop", reg.host());
    let allowed = [
        "add-mask", "group", "endgroup", "error", "warning", "notice",
    ];

    let step = runner.attempt(&with_base(&repository, &[("path", hostile)]), 1);
    step.ok();
    let cmds = commands_in(&step.stdout);
    assert!(
        cmds.iter().all(|c| allowed.contains(&c.as_str())),
        "{cmds:?} in:\n{}",
        step.stdout
    );
    // The masks are the token's (and its Basic forms), printed first; the
    // folder name is shown escaped, never run.
    let masks = cmds.iter().take_while(|c| *c == "add-mask").count();
    assert_eq!(cmds.iter().filter(|c| *c == "add-mask").count(), masks);
    assert!(
        !step.stdout.contains("\r::add-mask::replicas"),
        "{}",
        step.stdout
    );
    assert!(
        step.stdout
            .contains("cfg%0D::add-mask::replicas%0D::stop-commands::pwned"),
        "{}",
        step.stdout
    );
    let i = skopeo_inspect(&format!("{repository}:{}", step.out("tag")), None)
        .expect("the tag is in the registry");
    assert_eq!(i["Digest"], step.out("digest"));

    // Values that are refused: checked before anything is printed.
    let bad_repository = "127.0.0.1:9/a\n::stop-commands::pwned";
    let step = runner.attempt(&with_base(bad_repository, &[]), 2);
    assert_eq!(step.code, 2, "{}", step.stdout);
    let cmds = commands_in(&step.stdout);
    assert_eq!(
        cmds.last().map(String::as_str),
        Some("error"),
        "{}",
        step.stdout
    );
    assert!(
        cmds.iter().rev().skip(1).all(|c| c == "add-mask"),
        "{}",
        step.stdout
    );
    assert!(
        step.stdout.contains("contains whitespace"),
        "{}",
        step.stdout
    );

    runner.event_name = "push\n::add-mask::pwned".into();
    let step = runner.attempt(&with_base(&repository, &[]), 3);
    assert_eq!(step.code, 2, "{}", step.stdout);
    let cmds = commands_in(&step.stdout);
    assert_eq!(
        cmds.last().map(String::as_str),
        Some("error"),
        "{}",
        step.stdout
    );
    assert!(
        cmds.iter().rev().skip(1).all(|c| c == "add-mask"),
        "{}",
        step.stdout
    );
    assert!(step.stdout.contains("GITHUB_EVENT_NAME"), "{}", step.stdout);
    assert!(step.outputs.is_empty(), "{:?}", step.outputs);
}

#[test]
fn a_registry_echoing_basic_credentials_is_masked_and_scrubbed() {
    use base64::Engine as _;
    let (user, password) = ("deployer", "Pa55w0rd-echoed");
    let stub = common::registry::echoing_registry();
    let tmp = TempDir::new();
    let ws = workspace(tmp.path());
    let runner = Runner::on_push(tmp, ws);
    let repository = format!("{}/acme/shop", stub.host());
    let step = runner.run(&with_base(
        &repository,
        &[("username", user), ("password", password)],
    ));
    assert_eq!(step.code, 4, "{}\n{}", step.stdout, step.stderr);
    let error = step
        .stdout
        .lines()
        .find(|l| l.starts_with("::error title="))
        .unwrap_or_else(|| panic!("no ::error line in:\n{}", step.stdout));
    assert!(error.contains("Authorization: Basic <redacted>"), "{error}");
    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    let sent = stub.seen.lock().expect("lock").clone();
    assert!(
        sent.iter()
            .any(|(_, _, h)| h.iter().any(|(_, v)| *v == format!("Basic {encoded}"))),
        "the stub never saw the credentials"
    );
    // Masked before anything else is printed, and nowhere else.
    step.assert_masked(&encoded);
    step.assert_masked(password);
}

#[test]
fn credentials_in_the_repository_are_refused_and_never_shown() {
    let password = "S3cretPW-in-the-repository";
    let reg = Registry::start(Auth::Basic {
        user: "alice".into(),
        password: password.into(),
    });
    let tmp = TempDir::new();
    let ws = workspace(tmp.path());
    let runner = Runner::on_push(tmp, ws);
    let repository = format!("alice:{password}@{}/acme/shop", reg.host());
    let step = runner.attempt(&with_base(&repository, &[]), 1);
    assert_eq!(step.code, 2, "{}\n{}", step.stdout, step.stderr);
    let error = step
        .stdout
        .lines()
        .find(|l| l.starts_with("::error title=settings-image%3A invalid input::"))
        .unwrap_or_else(|| panic!("no ::error line in:\n{}", step.stdout));
    assert!(error.contains("credentials (USER:PASSWORD@)"), "{error}");
    // Masked first, for the steps that follow; shown nowhere else.
    step.assert_masked(password);
    for (what, text) in [
        ("stdout", &step.stdout),
        ("stderr", &step.stderr),
        ("outputs", &step.output_file),
        ("summary", &step.summary),
    ] {
        assert!(
            !text.contains("alice"),
            "the username is in {what}:\n{text}"
        );
    }
    // Nothing reached the registry: it holds no repository, and its log
    // shows no request at all.
    let log = fs::read_to_string(&reg.log).expect("reading the registry log");
    assert!(!log.contains("/v2/"), "the registry was contacted:\n{log}");
    let creds = format!("alice:{password}");
    let tags = common::registry::skopeo_tags(&format!("{}/acme/shop", reg.host()), Some(&creds));
    assert!(tags.is_empty(), "{tags:?}");
}

#[test]
fn a_deleted_branch_is_a_notice_and_nothing_is_pushed() {
    let reg = Registry::start(Auth::None);
    let tmp = TempDir::new();
    let ws = workspace(tmp.path());
    let mut runner = Runner::on_push(tmp, ws);
    runner.event_name = "delete".into();
    runner.event_path = fixture("other/delete.octokit-webhooks.json");
    let repository = format!("{}/acme/deleted", reg.host());
    let step = runner.attempt(&with_base(&repository, &[("token", "")]), 1);
    step.ok();
    assert!(
        step.stdout
            .lines()
            .any(|l| l.starts_with("::notice title=") && l.contains("deleted")),
        "{}",
        step.stdout
    );
    assert_eq!(
        step.outputs,
        BTreeMap::from([("pushed".to_string(), "false".to_string())])
    );
    assert_eq!(catalog(reg.port)["repositories"], serde_json::json!([]));
}

#[test]
fn workflow_dispatch_packages_the_checkout() {
    let reg = Registry::start(Auth::None);
    let tmp = TempDir::new();
    let ws = workspace(tmp.path());
    let mut runner = Runner::on_push(tmp, ws);
    runner.event_name = "workflow_dispatch".into();
    runner.event_path = fixture("other/workflow_dispatch.octokit-webhooks.json");
    let repository = format!("{}/acme/dispatch", reg.host());
    // Anonymous: no token, no password.
    let step = runner.run(&with_base(
        &repository,
        &[("token", ""), ("timestamp-tag", "release/1.x")],
    ));
    step.ok();
    let (ct, id) = last_change(&runner.ws, None);
    assert_eq!(step.out("tag"), format!("release-1.x-{ct}-{}", &id[..7]));
    assert_eq!(step.out("tags"), step.out("tag"));
    let i = skopeo_inspect(&format!("{repository}:{}", step.out("tag")), None)
        .expect("the tag is in the registry");
    assert_eq!(i["Digest"], step.out("digest"));
}

#[test]
fn a_pull_request_packages_its_head_commit_not_the_merge_commit() {
    let reg = Registry::start(Auth::None);
    let tmp = TempDir::new();
    let ws = workspace(tmp.path());
    // The pull request changes app.yaml on `feature`; main meanwhile adds
    // another file. GitHub checks out a merge of both (refs/pull/7/merge).
    let base = git(&ws, &["rev-parse", "HEAD"], None);
    git(&ws, &["checkout", "-q", "-b", "feature"], None);
    fs::write(ws.join(DIR).join("app.yaml"), "replicas: 3\n").expect("writing");
    git(
        &ws,
        &["commit", "-q", "-am", "more replicas"],
        Some(T0 + 200),
    );
    let head = git(&ws, &["rev-parse", "HEAD"], None);
    git(&ws, &["checkout", "-q", "main"], None);
    fs::write(ws.join(DIR).join("extra.yaml"), "extra: true\n").expect("writing");
    git(&ws, &["add", "."], None);
    git(
        &ws,
        &["commit", "-q", "-m", "extra on main"],
        Some(T0 + 300),
    );
    git(&ws, &["checkout", "-q", "--detach"], None);
    git(
        &ws,
        &["merge", "-q", "--no-ff", "-m", "Merge into main", &head],
        Some(T0 + 400),
    );
    let merge = git(&ws, &["rev-parse", "HEAD"], None);
    chown_runner(&ws);
    let (merge_ct, merge_change) = last_change(&ws, None);
    assert_eq!(
        merge_change, merge,
        "the merge commit itself changes the folder"
    );

    let mut payload: serde_json::Value = serde_json::from_str(
        &fs::read_to_string(fixture(
            "push/branch-push-1-commit.octokit-webhooks-js.json",
        ))
        .expect("reading the push payload"),
    )
    .expect("the payload is JSON");
    payload["action"] = "synchronize".into();
    payload["number"] = 7.into();
    payload["pull_request"] = serde_json::json!({
        "number": 7,
        "head": {"sha": head, "ref": "feature"},
        "base": {"sha": base, "ref": "main"},
    });
    let event = tmp_path(&ws, "pull_request.json");
    fs::write(&event, payload.to_string()).expect("writing the pull_request payload");

    let mut runner = Runner::on_push(TempDir::new(), ws.clone());
    runner.event_name = "pull_request".into();
    runner.event_path = event;
    runner.github_ref = "refs/pull/7/merge".into();
    assert_eq!(runner.sha, merge);
    let repository = format!("{}/acme/pr", reg.host());
    let step = runner.run(&with_base(
        &repository,
        &[("token", ""), ("timestamp-tag", "feature")],
    ));
    step.ok();
    let (ct, id) = last_change(&ws, Some(&head));
    assert_eq!(id, head);
    assert_eq!(step.out("commit"), head);
    assert_eq!(step.out("tag"), format!("feature-{ct}-{}", &head[..7]));
    assert_ne!(step.out("timestamp"), merge_ct);

    // The content is the head commit's: the same digest as a build from a
    // clone checked out at the head (with the same source annotation).
    let clone_dir = TempDir::new();
    let clone = clone_dir.join("clone");
    // A copy of the repository, so git runs no upload-pack on a
    // repository owned by another user.
    common::run_ok(Command::new("cp").arg("-a").arg(&ws).arg(&clone));
    git(&clone, &["checkout", "-q", "--detach", &head], None);
    assert!(!clone.join(DIR).join("extra.yaml").exists());
    let layout = clone_dir.join("layout");
    let report = common::build_cmd(&clone.join(DIR), &layout)
        .args(["--timestamp-tag", "feature"])
        .env("GITHUB_SERVER_URL", SERVER_URL)
        .env("GITHUB_REPOSITORY", GH_REPOSITORY)
        .json();
    assert_eq!(common::field(&report, "/timestamp_tag"), step.out("tag"));
    assert_eq!(common::field(&report, "/digest"), step.out("digest"));
    // And apart from both builds: the pushed image as skopeo and umoci read
    // it holds the head commit's folder as `git archive` gives it.
    let tar = clone_dir.join("head.tar");
    git(
        &clone,
        &[
            "archive",
            "--format=tar",
            "-o",
            tar.to_str().expect("utf-8"),
            &head,
            DIR,
        ],
        None,
    );
    let want = common::archived_files(&tar, DIR);
    assert_eq!(
        want.get("app.yaml"),
        Some(&common::Node::File(0o644, b"replicas: 3\n".to_vec()))
    );
    assert!(!want.contains_key("extra.yaml"), "{want:?}");
    assert_eq!(
        common::pulled_files(&format!("{repository}:{}", step.out("tag")), None),
        want
    );
}

/// A path next to the workspace (not inside it, so the repository stays clean).
fn tmp_path(ws: &Path, name: &str) -> PathBuf {
    ws.parent().expect("the workspace has a parent").join(name)
}

/// The repository root as the Dockerfile's build context, once the static
/// binary it copies is there: the test command builds it before the tests
/// (`bash scripts/action-image.sh`), never a test. A binary older than a
/// source it is built from would be a stale image: refused.
fn action_image_context() -> PathBuf {
    let root = common::repo();
    let binary = root.join("target/action-image/amd64/settings-image");
    let built = fs::metadata(&binary)
        .and_then(|m| m.modified())
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e}: build the action image's binary with `bash scripts/action-image.sh` \
                 (scripts/test.sh does, before the tests)",
                binary.display()
            )
        });
    let mut sources = vec![root.join("Cargo.toml"), root.join("Cargo.lock")];
    let mut dirs = vec![root.join("src")];
    while let Some(d) = dirs.pop() {
        for e in fs::read_dir(&d).expect("reading src") {
            let p = e.expect("a dir entry").path();
            if p.is_dir() {
                dirs.push(p);
            } else {
                sources.push(p);
            }
        }
    }
    for src in sources {
        let changed = fs::metadata(&src).and_then(|m| m.modified()).expect("stat");
        assert!(
            changed <= built,
            "{} changed after {} was built: run `bash scripts/action-image.sh` again",
            src.display(),
            binary.display()
        );
    }
    root
}

#[test]
fn the_shipped_image_runs_as_a_container_action_under_podman() {
    let root = action_image_context();
    let reg = Registry::start(Auth::None);
    let tmp = TempDir::new();

    // The Dockerfile, built offline with buildah as docker builds it on
    // GitHub (the repository as context, .dockerignore leaving only the
    // staged binary and CA bundle), pushed like action.yml's `docker://`
    // image.
    let builder = Podman::new(&tmp.join("b"));
    let image = format!("{}/configbutler/settings-image:v0", reg.host());
    common::run_ok(
        builder
            .buildah()
            .args(["bud", "--layers=false", "--format", "oci", "-f"])
            .arg(root.join("Dockerfile"))
            .args(["-t", &image])
            .arg(&root),
    );
    let unpacked: u64 = common::stdout_of(builder.cmd().args([
        "image",
        "inspect",
        "--format",
        "{{.Size}}",
        &image,
    ]))
    .trim()
    .parse()
    .expect("the image size");
    common::run_ok(builder.cmd().args(["push", "--tls-verify=false", &image]));
    let raw = common::stdout_of(
        common::tool("skopeo")
            .args(["inspect", "--raw", "--tls-verify=false"])
            .arg(format!("docker://{image}")),
    );
    let manifest: serde_json::Value = serde_json::from_str(&raw).expect("manifest JSON");
    let blobs: u64 = manifest["layers"]
        .as_array()
        .expect("layers")
        .iter()
        .chain([&manifest["config"]])
        .map(|d| d["size"].as_u64().expect("size"))
        .sum();
    let pulled = blobs + raw.len() as u64;
    println!(
        "action image {image}: {unpacked} bytes unpacked ({:.2} MiB), {pulled} bytes to pull ({:.2} MiB)",
        unpacked as f64 / 1048576.0,
        pulled as f64 / 1048576.0
    );
    // The image is the binary and the CA bundle, nothing else (the
    // .dockerignore, the two COPYs). The shipped binary is the release
    // build (Cargo.toml's [profile.release]): 17,967,704 bytes with the
    // controller and the SettingsRollout's typed watches in it
    // (CONTRIBUTING.md, "The action image", says where it goes and what
    // trims it). The release image is held to a 19 MiB budget, checked
    // here when the release binary is staged (`bash
    // scripts/action-image.sh`) and in ci.yml's image job, so a dependency
    // that adds 1 MB is seen.
    // The test command stages the test profile's, several times larger.
    let staged = root.join("target/action-image");
    let content = fs::metadata(staged.join("amd64/settings-image"))
        .expect("stat")
        .len()
        + fs::metadata(staged.join("ca-certificates.crt"))
            .expect("stat")
            .len();
    assert!(
        (content..content + 64 * 1024).contains(&unpacked),
        "the image holds {unpacked} bytes for {content} bytes of binary and CA bundle"
    );
    let profile = fs::read_to_string(staged.join("profile")).expect("the staged profile");
    if profile.trim() == "release" {
        assert!(
            unpacked < 19 * 1024 * 1024,
            "the action image is {unpacked} bytes unpacked, over its 19 MiB budget"
        );
    }

    // The runner's layout: workspace, file commands, workflow (event), home.
    let ws = workspace(tmp.path());
    let temp = tmp.join("_temp");
    let (file_commands, workflow, home) = (
        temp.join("_runner_file_commands"),
        temp.join("_github_workflow"),
        temp.join("_github_home"),
    );
    for d in [&file_commands, &workflow, &home] {
        fs::create_dir_all(d).expect("mkdir");
    }
    fs::write(file_commands.join("set_output_5f1c"), "").expect("GITHUB_OUTPUT");
    fs::write(file_commands.join("step_summary_5f1c"), "").expect("GITHUB_STEP_SUMMARY");
    fs::copy(
        fixture("push/branch-push-1-commit.octokit-webhooks-js.json"),
        workflow.join("event.json"),
    )
    .expect("the event");
    chown_runner(&temp);
    let mut runner = Runner::on_push(TempDir::new(), ws.clone());
    runner.github_token = String::new();
    // The registry by a host name that only the container's /etc/hosts
    // knows: the static binary resolves it without glibc's NSS modules.
    let target = format!("registry.test:{}/acme/from-container", reg.port);
    let podman = Podman::new(&tmp.join("r"));
    podman.insecure_registry(&reg.host());
    let env: Vec<(String, String)> = runner
        .github_env(
            1,
            "/github/file_commands/set_output_5f1c",
            "/github/file_commands/step_summary_5f1c",
            "/github/workspace",
            "/github/workflow/event.json",
        )
        .into_iter()
        .filter(|(k, _)| k != "CI" && k != "GITHUB_ACTIONS")
        .chain([("HOME".to_string(), "/github/home".to_string())])
        .chain(runner.inputs(&with_base(&target, &[("token", ""), ("insecure", "true")])))
        .collect();
    // The runner's `docker run` (actions/runner DockerCommandManager):
    // name, label, workdir, --rm, `-e NAME` for each variable (the value
    // from the client's environment), GITHUB_ACTIONS and CI, the network,
    // the four mounts, the image, no arguments. Here the network is the
    // host's (a bridge would need private-range addresses) with
    // `--add-host` for the registry's name; there is no docker.sock to mount.
    let mut cmd = podman.cmd();
    cmd.args([
        "run",
        "--name",
        "settings_image_5f1c",
        "--label",
        "f1c5e2",
        "--workdir",
        "/github/workspace",
        "--rm",
    ]);
    for (k, v) in &env {
        cmd.arg("-e").arg(k).env(k, v);
    }
    cmd.args(["-e", "GITHUB_ACTIONS=true", "-e", "CI=true"])
        .args(["--network", "host", "--add-host", "registry.test:127.0.0.1"]);
    for (from, to) in [
        (&home, "/github/home"),
        (&workflow, "/github/workflow"),
        (&file_commands, "/github/file_commands"),
        (&ws, "/github/workspace"),
    ] {
        cmd.arg("-v").arg(format!("{}:{to}", from.display()));
    }
    cmd.arg(&image);
    let out = cmd.output().expect("running podman");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success(),
        "the container action failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    let output_file =
        fs::read_to_string(file_commands.join("set_output_5f1c")).expect("reading the outputs");
    let outputs = parse_outputs(&output_file);
    let (ct, id) = last_change(&ws, None);
    let tag = format!("main-{ct}-{}", &id[..7]);
    assert_eq!(outputs["tag"], tag, "{stdout}");
    assert_eq!(outputs["pushed"], "true");
    let direct = format!("{}/acme/from-container:{tag}", reg.host());
    let i = skopeo_inspect(&direct, None).expect("pushed from the container");
    assert_eq!(i["Digest"], outputs["digest"].as_str());
    assert_eq!(
        outputs["reference"],
        format!("{target}:{tag}@{}", outputs["digest"])
    );
    let summary =
        fs::read_to_string(file_commands.join("step_summary_5f1c")).expect("reading the summary");
    assert!(summary.contains(&outputs["reference"]), "{summary}");
}

#[test]
fn worktree_warnings_become_warning_annotations() {
    let reg = Registry::start(Auth::None);
    let tmp = TempDir::new();
    let ws = workspace(tmp.path());
    // An uncommitted edit: the disk differs from the commit.
    fs::write(ws.join(DIR).join("app.yaml"), "replicas: 9\n").expect("writing");
    let repository = format!("{}/acme/worktree", reg.host());
    let with = with_base(&repository, &[("token", ""), ("source", "worktree")]);
    let step = Runner::on_push(tmp, ws).attempt(&with, 1);
    step.ok();
    let warnings: Vec<&str> = step
        .stdout
        .lines()
        .filter(|l| l.starts_with("::warning title=settings-image::"))
        .collect();
    assert!(
        warnings.iter().any(|l| l.contains("differs from commit")),
        "{}",
        step.stdout
    );
    assert!(
        warnings
            .iter()
            .any(|l| l.contains("no provenance attached")),
        "{}",
        step.stdout
    );
}

/// The raw manifest and the config of `reference`, as skopeo reads them.
fn manifest_and_config(reference: &str) -> (serde_json::Value, serde_json::Value) {
    let read = |extra: &str| -> serde_json::Value {
        let mut cmd = common::tool("skopeo");
        cmd.args(["inspect", "--tls-verify=false", "--no-creds", extra])
            .arg(format!("docker://{reference}"));
        serde_json::from_str(&common::stdout_of(&mut cmd)).expect("skopeo JSON")
    };
    (read("--raw"), read("--config"))
}

#[test]
fn an_owner_with_capitals_is_lower_cased_with_a_notice() {
    let reg = Registry::start(Auth::None);
    let tmp = TempDir::new();
    let ws = workspace(tmp.path());
    let runner = Runner::on_push(tmp, ws);
    // The README's quick start, as written, for the owner ConfigButler
    // (the runner fills in `github.repository_owner`; ghcr.io is the
    // loopback registry here).
    let readme = fs::read_to_string(common::repo().join("README.md")).expect("README.md");
    let written = readme
        .lines()
        .find_map(|l| l.trim().strip_prefix("repository: "))
        .expect("the README's quick start sets `repository`");
    assert_eq!(
        written,
        "ghcr.io/${{ github.repository_owner }}/settings-shop"
    );
    let given = written
        .replace("${{ github.repository_owner }}", "ConfigButler")
        .replace("ghcr.io", &reg.host());
    let lower = format!("{}/configbutler/settings-shop", reg.host());
    let step = runner.attempt(&with_base(&given, &[("token", "")]), 1);
    step.ok();
    let notice = step
        .stdout
        .lines()
        .find(|l| l.starts_with("::notice title=settings-image%3A repository lower-cased::"))
        .unwrap_or_else(|| panic!("no lower-case notice:\n{}", step.stdout));
    assert!(
        notice.contains(&given) && notice.contains(&lower),
        "{notice}"
    );
    assert!(step.out("reference").starts_with(&format!("{lower}:main-")));
    assert_eq!(step.out("subject-name"), lower);
    let i = skopeo_inspect(&format!("{lower}:{}", step.out("tag")), None)
        .expect("pushed under the lower-case name");
    assert_eq!(i["Digest"], step.out("digest"));
    assert_eq!(
        catalog(reg.port)["repositories"],
        serde_json::json!(["configbutler/settings-shop"])
    );
}

#[test]
fn errors_name_the_action_inputs_never_cli_flags() {
    let reg = Registry::start(Auth::None);
    let tmp = TempDir::new();
    let ws = workspace(tmp.path());
    let runner = Runner::on_push(tmp, ws.clone());
    let repository = format!("{}/acme/words", reg.host());
    // Each is bad input: exit 2.
    let cases: [(&[(&str, &str)], &str); 3] = [
        (
            &[("allow-rewind", "true")],
            "`allow-rewind: true` only applies to `branch-tag`",
        ),
        (
            &[("repository", "ghcr.io/acme/shop:v1")],
            "give the tag with `tags`, not in `repository`",
        ),
        (
            &[("source", "disk")],
            "the input `source` is \"disk\"%0Ahint: use `commit`",
        ),
    ];
    for (i, (extra, want)) in cases.iter().enumerate() {
        let mut all = vec![("token", "")];
        all.extend_from_slice(extra);
        let with = with_base(&repository, &all);
        let step = runner.attempt(&with, i as u32 + 1);
        assert_eq!(step.code, 2, "{extra:?}: {}", step.stdout);
        let error = step
            .stdout
            .lines()
            .find(|l| l.starts_with("::error title="))
            .unwrap_or_else(|| panic!("{extra:?}: no ::error line:\n{}", step.stdout));
        assert!(error.contains(want), "{extra:?}: {error}");
        assert!(!error.contains("--"), "{extra:?}: a CLI flag: {error}");
    }
    // A branch tag that would move sideways: exit 6, the hint names the input.
    let with = with_base(&repository, &[("token", ""), ("branch-tag", "main")]);
    runner.attempt(&with, 10).ok();
    // A force-push: the new history does not hold the tagged commit.
    git(&ws, &["checkout", "-q", "--orphan", "rewritten"], None);
    fs::write(ws.join(DIR).join("app.yaml"), "replicas: 7\n").expect("writing");
    git(&ws, &["add", "."], None);
    git(
        &ws,
        &["commit", "-q", "-m", "rewritten history"],
        Some(T0 + 900),
    );
    chown_runner(&ws);
    let step = Runner::on_push(TempDir::new(), ws).attempt(&with, 1);
    assert_eq!(step.code, 6, "{}", step.stdout);
    let error = step
        .stdout
        .lines()
        .find(|l| l.starts_with("::error title="))
        .expect("an ::error line");
    assert!(error.contains("`allow-rewind: true`"), "{error}");
    assert!(!error.contains("--"), "{error}");
}

#[test]
fn pushed_is_true_when_only_the_branch_tag_changed() {
    let reg = Registry::start(Auth::None);
    let tmp = TempDir::new();
    let ws = workspace(tmp.path());
    let runner = Runner::on_push(tmp, ws);
    let repository = format!("{}/acme/branch", reg.host());
    let first = runner.attempt(&with_base(&repository, &[("token", "")]), 1);
    first.ok();
    assert_eq!(first.out("pushed"), "true");
    // The same commit again, now with a branch tag: the image is there,
    // the tag `main` is new.
    let with = with_base(&repository, &[("token", ""), ("branch-tag", "main")]);
    let second = runner.attempt(&with, 2);
    second.ok();
    assert_eq!(second.out("branch-tag"), "created");
    assert_eq!(second.out("pushed"), "true");
    assert_eq!(second.out("digest"), first.out("digest"));
    let main = skopeo_inspect(&format!("{repository}:main"), None).expect("main exists");
    assert_eq!(main["Digest"], first.out("digest"));
    // Nothing left to change: false.
    let third = runner.attempt(&with, 3);
    third.ok();
    assert_eq!(third.out("branch-tag"), "unchanged");
    assert_eq!(third.out("pushed"), "false");
}

#[test]
fn runner_debug_shows_each_registry_request_and_history_step() {
    let reg = Registry::start(Auth::None);
    let tmp = TempDir::new();
    let ws = workspace(tmp.path());
    let mut runner = Runner::on_push(tmp, ws);
    let repository = format!("{}/acme/debug", reg.host());
    let with = with_base(&repository, &[("token", "")]);
    let quiet = runner.attempt(&with, 1);
    quiet.ok();
    assert!(!quiet.stdout.contains("::debug::"), "{}", quiet.stdout);
    runner.extra_env = vec![("RUNNER_DEBUG".into(), "1".into())];
    let step = runner.attempt(&with, 2);
    step.ok();
    let debug: Vec<&str> = step
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("::debug::"))
        .collect();
    let (_, id) = last_change(&runner.ws, None);
    assert!(
        debug
            .iter()
            .any(|l| l.starts_with("history: the last commit that changed") && l.contains(&id)),
        "{debug:#?}"
    );
    let host = format!("http://{}/v2/acme/debug/manifests/", reg.host());
    assert!(
        debug
            .iter()
            .any(|l| l.starts_with("registry: ") && l.contains(&host) && l.contains("-> 200 OK")),
        "{debug:#?}"
    );
    // Only our own records, one line each (the runner reads line by line).
    assert!(
        debug
            .iter()
            .all(|l| l.starts_with("registry: ") || l.starts_with("history: ")),
        "{debug:#?}"
    );
}

#[test]
fn push_false_builds_and_reports_without_touching_the_registry() {
    let reg = Registry::start(Auth::None);
    let tmp = TempDir::new();
    let ws = workspace(tmp.path());
    let runner = Runner::on_push(tmp, ws);
    let repository = format!("{}/acme/dry", reg.host());
    let dry = runner.run(&with_base(
        &repository,
        &[
            ("token", ""),
            ("push", "false"),
            ("tags", "pr-7"),
            ("branch-tag", "main"),
        ],
    ));
    dry.ok();
    assert_eq!(catalog(reg.port)["repositories"], serde_json::json!([]));
    assert_eq!(dry.out("pushed"), "false");
    assert_eq!(dry.out("image"), "");
    assert_eq!(dry.out("subject-digest"), "");
    assert_eq!(dry.out("branch-tag"), "");
    let (ct, id) = last_change(&runner.ws, None);
    let tag = format!("main-{ct}-{}", &id[..7]);
    assert_eq!(dry.out("tags"), format!("{tag}\npr-7"));
    // The digest is the one a real push makes.
    let real = runner.attempt(
        &with_base(&repository, &[("token", ""), ("tags", "pr-7")]),
        2,
    );
    real.ok();
    assert_eq!(real.out("digest"), dry.out("digest"));
    assert_eq!(real.out("reference"), dry.out("reference"));
    assert_eq!(real.out("pushed"), "true");
}

#[test]
fn metadata_action_annotations_and_labels_reach_the_image_and_history_wins() {
    let reg = Registry::start(Auth::None);
    let tmp = TempDir::new();
    let ws = workspace(tmp.path());
    let runner = Runner::on_push(tmp, ws);
    let repository = format!("{}/acme/meta", reg.host());
    // docker/metadata-action's outputs, in its format.
    let annotations = "manifest:org.opencontainers.image.created=2030-01-01T00:00:00.000Z\n\
         manifest:org.opencontainers.image.description=Shop settings\n\
         manifest:org.opencontainers.image.revision=ffffffffffffffffffffffffffffffffffffffff\n\
         index:org.opencontainers.image.title=index only\n\
         manifest:org.opencontainers.image.version=main";
    let labels = "org.opencontainers.image.created=2030-01-01T00:00:00.000Z\n\
         org.opencontainers.image.title=settings-shop\n\
         org.opencontainers.image.version=main";
    let with = with_base(
        &repository,
        &[
            ("token", ""),
            ("annotations", annotations),
            ("labels", labels),
        ],
    );
    let step = runner.attempt(&with, 1);
    step.ok();
    let (manifest, config) = manifest_and_config(&format!("{repository}:{}", step.out("tag")));
    let a = &manifest["annotations"];
    assert_eq!(a["org.opencontainers.image.description"], "Shop settings");
    assert_eq!(a["org.opencontainers.image.version"], "main");
    assert_eq!(a["org.opencontainers.image.revision"], step.out("commit"));
    assert_eq!(
        a["org.opencontainers.image.created"],
        "2024-01-02T03:04:05Z"
    );
    assert!(a.get("org.opencontainers.image.title").is_none(), "{a}");
    let l = &config["config"]["Labels"];
    assert_eq!(l["org.opencontainers.image.title"], "settings-shop");
    assert_eq!(l["org.opencontainers.image.version"], "main");
    assert!(l.get("org.opencontainers.image.created").is_none(), "{l}");
    let warnings: Vec<&str> = step
        .stdout
        .lines()
        .filter(|l| l.starts_with("::warning title=settings-image::"))
        .collect();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("image.revision=ffff") && w.contains("ignored")),
        "{}",
        step.stdout
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("image.created=2030") && w.contains("ignored")),
        "{}",
        step.stdout
    );
    // A re-run (metadata-action's clock has moved on) is the same image.
    let (annotations2, labels2) = (
        annotations.replace("2030", "2031"),
        labels.replace("2030", "2031"),
    );
    let later = with_base(
        &repository,
        &[
            ("token", ""),
            ("annotations", &annotations2),
            ("labels", &labels2),
        ],
    );
    let again = runner.attempt(&later, 2);
    again.ok();
    assert_eq!(again.out("digest"), step.out("digest"));
    assert_eq!(again.out("pushed"), "false");
}

/// `settings-image verify REFERENCE --path DIR` from the CLI, without any
/// GitHub environment.
fn verify_cli(reference: &str, folder: &Path) -> common::cmd::Run {
    let blank = [
        "GITHUB_REPOSITORY",
        "GITHUB_TOKEN",
        "GITHUB_REF",
        "GITHUB_SERVER_URL",
        "GITHUB_ACTIONS",
    ]
    .map(|k| (k, ""));
    let path = folder.to_str().expect("utf-8");
    TestCommand::new()
        .args(["verify", reference, "--path", path])
        .envs(blank)
        .run()
}

#[test]
fn annotations_and_labels_the_action_adds_are_attested_and_verify() {
    let reg = Registry::start(Auth::None);
    let tmp = TempDir::new();
    let ws = workspace(tmp.path());
    let folder = ws.join(DIR);
    let runner = Runner::on_push(tmp, ws);
    let repository = format!("{}/acme/attested", reg.host());
    let annotations = "manifest:org.opencontainers.image.created=2030-01-01T00:00:00.000Z\n\
         manifest:org.opencontainers.image.description=Shop settings\n\
         manifest:org.opencontainers.image.version=main";
    let labels = "org.opencontainers.image.title=settings-shop\n\
         org.opencontainers.image.version=main";
    let with = with_base(
        &repository,
        &[
            ("token", ""),
            ("annotations", annotations),
            ("labels", labels),
        ],
    );
    let step = runner.attempt(&with, 1);
    step.ok();
    let digest = step.out("digest").to_string();
    let pinned = format!("{repository}:{}@{digest}", step.out("tag"));
    // The provenance lists what was added, and only that (the history's
    // created won, so it is not among them).
    let i = TestCommand::new()
        .args(["inspect", &pinned, "--json"])
        .json();
    let p = &i["provenance"];
    assert_eq!(
        p["annotations"],
        serde_json::json!({
            "org.opencontainers.image.description": "Shop settings",
            "org.opencontainers.image.version": "main",
        }),
        "{i}"
    );
    assert_eq!(
        p["labels"],
        serde_json::json!({
            "org.opencontainers.image.title": "settings-shop",
            "org.opencontainers.image.version": "main",
        }),
        "{i}"
    );
    // A faithful push with extra metadata is what its commit and its
    // provenance say.
    let ok = verify_cli(&pinned, &folder);
    assert_eq!(ok.code, 0, "{}\n{}", ok.stdout, ok.stderr);
    assert!(ok.stdout.contains("verified"), "{}", ok.stdout);

    // One more annotation added by hand after the push (forge.py): a new
    // manifest.
    let name = "acme/attested";
    let edited = forge::image(
        &reg.host(),
        (name, &digest),
        (name, "approved"),
        &[Edit::Annotation("org.example.approved", "yes")],
    );
    assert_ne!(edited, digest);
    let hand = format!("{repository}:approved");
    let r = verify_cli(&hand, &folder);
    assert_eq!(r.code, 7, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("no provenance referrer"), "{}", r.stderr);
    // Even with the original provenance's claims copied onto the edited
    // image (a statement written by hand, docs/push.md), the annotation no
    // provenance lists is named.
    let s = |k: &str| p[k].as_str().expect(k).to_string();
    let (code, manifest) = common::registry::curl(
        &format!("http://{}/v2/{name}/manifests/{digest}", reg.host()),
        Some("application/vnd.oci.image.manifest.v1+json"),
    );
    assert_eq!(code, 200, "{manifest}");
    let manifest: serde_json::Value = serde_json::from_str(&manifest).unwrap();
    let created = manifest["annotations"]["org.opencontainers.image.created"]
        .as_str()
        .expect("created")
        .to_string();
    let commit = s("commit");
    let statement = forge::statement(&forge::Claims {
        subject_name: &repository,
        subject_digest: &edited,
        commit: &commit,
        path: &s("path"),
        git_ref: p["ref"].as_str(),
        builder: &s("builder"),
        annotations: serde_json::from_value(p["annotations"].clone()).unwrap(),
        labels: serde_json::from_value(p["labels"].clone()).unwrap(),
    });
    forge::attach(
        &reg.host(),
        name,
        &edited,
        &statement,
        &forge::referrer_annotations(&commit, &created, p["ref"].as_str()),
    );
    let r = verify_cli(&hand, &folder);
    assert_eq!(r.code, 7, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr
            .contains("extra annotation org.example.approved=\"yes\""),
        "{}",
        r.stderr
    );
    // The original is untouched and still verifies.
    assert_eq!(verify_cli(&pinned, &folder).code, 0);
}

/// `configs/shop` (the fixture) and `configs/billing`, changed at T0+200.
fn two_folder_workspace(root: &Path) -> PathBuf {
    let ws = workspace(root);
    fs::create_dir_all(ws.join("configs/billing")).expect("mkdir");
    fs::write(ws.join("configs/billing/app.yaml"), "pool: 4\n").expect("write");
    git(&ws, &["add", "."], None);
    git(&ws, &["commit", "-q", "-m", "billing"], Some(T0 + 200));
    chown_runner(&ws);
    ws
}

/// `main-<ct>-<sha7>` of `git log -1 -- DIR`.
fn tag_of(ws: &Path, dir: &str) -> String {
    let out = git(ws, &["log", "-1", "--format=%ct/%H", "--", dir], None);
    let (ct, id) = out.split_once('/').expect("ct/H");
    format!("main-{ct}-{}", &id[..7])
}

#[test]
fn several_folders_make_one_image_each_and_the_plan_names_the_changed_one() {
    let reg = Registry::start(Auth::None);
    let tmp = TempDir::new();
    let ws = two_folder_workspace(tmp.path());
    let mut runner = Runner::on_push(tmp, ws);
    runner.github_token = String::new(); // anonymous push
    let template = format!("{}/acme/{{name}}", reg.host());
    let with = with_base(&template, &[("path", "configs/*")]);

    let step = runner.attempt(&with, 1);
    step.ok();
    let keys: Vec<&str> = step.outputs.keys().map(String::as_str).collect();
    assert_eq!(keys, ["images", "pushed"]);
    assert_eq!(step.out("pushed"), "true");
    let images: serde_json::Value = serde_json::from_str(step.out("images")).expect("JSON");
    let images = images.as_array().expect("an array");
    assert_eq!(images.len(), 2);
    for (image, name) in images.iter().zip(["billing", "shop"]) {
        let dir = format!("configs/{name}");
        assert_eq!(image["path"], dir);
        assert_eq!(image["repository"], format!("{}/acme/{name}", reg.host()));
        assert_eq!(image["tag"], tag_of(&runner.ws, &dir));
        assert_eq!(image["pushed"], true);
        let reference = image["reference"].as_str().expect("reference");
        assert!(
            step.summary
                .contains(&format!("| `{dir}` | `{reference}` | yes |")),
            "{}",
            step.summary
        );
        let seen = skopeo_inspect(
            &format!(
                "{}/acme/{name}:{}",
                reg.host(),
                image["tag"].as_str().unwrap()
            ),
            None,
        )
        .expect("pushed");
        assert_eq!(seen["Digest"], image["digest"]);
    }
    assert_eq!(step.summary.matches("kind: ImagePolicy").count(), 2);

    // The plan after a change to one folder names that folder only.
    fs::write(runner.ws.join("configs/shop/app.yaml"), "replicas: 3\n").expect("write");
    git(
        &runner.ws,
        &["commit", "-q", "-am", "shop replicas"],
        Some(T0 + 300),
    );
    chown_runner(&runner.ws);
    let plan = runner.attempt(
        &with_base(&template, &[("path", "configs/*"), ("plan", "true")]),
        2,
    );
    plan.ok();
    let matrix: serde_json::Value = serde_json::from_str(plan.out("matrix")).expect("JSON");
    assert_eq!(
        matrix,
        serde_json::json!({ "include": [{
            "path": "configs/shop",
            "repository": format!("{}/acme/shop", reg.host()),
            "tag": tag_of(&runner.ws, "configs/shop"),
        }]})
    );
    // A matrix job for that folder is the single-folder action.
    let job = runner.attempt(
        &with_base(
            &format!("{}/acme/shop", reg.host()),
            &[("path", "configs/shop")],
        ),
        3,
    );
    job.ok();
    assert_eq!(job.out("tag"), tag_of(&runner.ws, "configs/shop"));
    assert_eq!(job.out("pushed"), "true");
    // Now nothing is left to do.
    let plan = runner.attempt(
        &with_base(&template, &[("path", "configs/*"), ("plan", "true")]),
        4,
    );
    plan.ok();
    assert_eq!(plan.out("matrix"), r#"{"include":[]}"#);
    // A glob matching nothing is an input error annotation, nothing pushed.
    let bad = runner.attempt(
        &with_base(&template, &[("path", "configs/*\nnothing/*")]),
        5,
    );
    assert_eq!(bad.code, 2, "{}", bad.stdout);
    assert!(bad.stdout.contains("matches no folder"), "{}", bad.stdout);
}

/// `settings-image` on the command line in `dir`, anonymous, no GitHub.
fn cli(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = TestCommand::new()
        .args(args)
        .current_dir(dir)
        .envs(ANY_OWNER)
        .run();
    (out.code, out.stdout, out.stderr)
}

/// The repositories a registry holds ([`catalog`]), as HOST/NAME.
fn repositories_of(reg: &Registry) -> std::collections::BTreeSet<String> {
    catalog(reg.port)["repositories"]
        .as_array()
        .expect("repositories")
        .iter()
        .map(|r| format!("{}/{}", reg.host(), r.as_str().expect("name")))
        .collect()
}

/// One mapping from folders to repositories: for `{name}` and `{path}` and
/// folder names with underscores, capitals and dots, `flux` names exactly
/// the repositories `plan` lists and that the CLI's and the action's
/// several-folder pushes write to (the registry's catalog is the oracle),
/// and every face gives the same lower-casing notice.
#[test]
fn flux_follows_the_repositories_push_plan_and_the_action_write_to() {
    let folders = ["shop", "shop_eu", "Cart", "shop.v2", "Mixed_Case.EU"];
    for template_tail in ["acme/settings-{name}", "acme/{path}"] {
        let (cli_reg, action_reg) = (Registry::start(Auth::None), Registry::start(Auth::None));
        let tmp = TempDir::new();
        let ws = workspace(tmp.path());
        for f in &folders[1..] {
            fs::create_dir_all(ws.join("configs").join(f)).expect("mkdir");
            fs::write(
                ws.join("configs").join(f).join("app.yaml"),
                format!("name: {f}\n"),
            )
            .expect("write");
        }
        git(&ws, &["add", "."], None);
        git(&ws, &["commit", "-q", "-m", "more folders"], Some(T0 + 200));
        chown_runner(&ws);
        let mut paths: Vec<String> = folders.iter().map(|f| format!("configs/{f}")).collect();
        paths.sort();
        let path_args: Vec<&str> = paths.iter().flat_map(|p| ["--path", p.as_str()]).collect();
        let capital_notices = |text: &str| -> Vec<String> {
            let mut n: Vec<String> = ["configs/Cart", "configs/Mixed_Case.EU"]
                .iter()
                .filter(|f| {
                    text.lines().any(|l| {
                        l.contains("lower-case")
                            && l.contains(&format!("the folder {f} has capitals"))
                    })
                })
                .map(|f| f.to_string())
                .collect();
            n.sort();
            n
        };
        let want_notices: Vec<String> = if template_tail.contains("{name}") {
            vec!["configs/Cart".into(), "configs/Mixed_Case.EU".into()]
        } else {
            Vec::new()
        };

        let by_face = |host: &str| {
            let template = format!("{host}/{template_tail}");
            // flux
            let mut args = vec!["flux", "--repository", &template, "--prefix", "main"];
            args.extend(&path_args);
            let (code, yaml, stderr) = cli(&ws, &args);
            assert_eq!(code, 0, "{stderr}");
            let flux: std::collections::BTreeSet<String> =
                serde_yaml_ng::Deserializer::from_str(&yaml)
                    .map(|d| serde::Deserialize::deserialize(d).expect("YAML"))
                    .filter(|v: &serde_json::Value| v["kind"] == "ImageRepository")
                    .map(|v| v["spec"]["image"].as_str().expect("image").to_string())
                    .collect();
            assert_eq!(capital_notices(&stderr), want_notices, "flux: {stderr}");
            (template, flux)
        };

        // The CLI: plan (before anything exists), then push.
        let (template, flux) = by_face(&cli_reg.host());
        let mut args = vec![
            "plan",
            "--repository",
            &template,
            "--timestamp-tag",
            "main",
            "--json",
        ];
        args.extend(&path_args);
        let (code, out, stderr) = cli(&ws, &args);
        assert_eq!(code, 0, "{stderr}");
        assert_eq!(capital_notices(&stderr), want_notices, "plan: {stderr}");
        let plan: serde_json::Value = serde_json::from_str(out.trim()).expect("plan JSON");
        let planned: std::collections::BTreeSet<String> = plan["include"]
            .as_array()
            .expect("include")
            .iter()
            .map(|e| e["repository"].as_str().expect("repository").to_string())
            .collect();
        let mut args = vec![
            "push",
            "--repository",
            &template,
            "--timestamp-tag",
            "main",
            "--json",
        ];
        args.extend(&path_args);
        let (code, out, stderr) = cli(&ws, &args);
        assert_eq!(code, 0, "{stderr}");
        assert_eq!(capital_notices(&stderr), want_notices, "push: {stderr}");
        let pushed: serde_json::Value = serde_json::from_str(out.trim()).expect("push JSON");
        assert_eq!(pushed.as_array().expect("images").len(), folders.len());
        assert_eq!(
            repositories_of(&cli_reg),
            flux,
            "{template}: flux watches where push wrote"
        );
        assert_eq!(planned, flux, "{template}: plan lists what flux watches");
        assert!(
            flux.contains(
                &template
                    .replace("{name}", "shop_eu")
                    .replace("{path}", "configs-shop_eu")
            )
        );

        // The action's several-folder face.
        let (template, flux) = by_face(&action_reg.host());
        let mut runner = Runner::on_push(TempDir::new(), ws.clone());
        runner.github_token = String::new();
        let step = runner.attempt(&with_base(&template, &[("path", "configs/*")]), 1);
        step.ok();
        assert_eq!(
            repositories_of(&action_reg),
            flux,
            "{template}: flux watches where the action wrote"
        );
        let notices: String = step
            .stdout
            .lines()
            .filter(|l| l.starts_with("::notice title=settings-image%3A repository lower-cased::"))
            .collect::<Vec<_>>()
            .join("\n");
        assert_eq!(capital_notices(&notices), want_notices, "{}", step.stdout);
    }
}

/// A push that fails after it published (the branch tag's read-back gets
/// an unreadable tag list): the step fails (exit 4) and says what is in the
/// registry, in its outputs (`failed-after-publish: true`, the digest, the
/// tags, the reference, `pushed`), its job summary and its `::error` line.
#[test]
fn a_push_that_fails_after_publishing_says_so_in_its_outputs_and_summary() {
    use common::registry::{Action, Proxy};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let reg = Registry::start(Auth::None);
    let proxy = Proxy::start(reg.port);
    let lists = std::sync::Arc::new(AtomicUsize::new(0));
    let counted = lists.clone();
    proxy.set_rule(move |_, path| {
        if path.contains("/tags/list") && counted.fetch_add(1, Ordering::SeqCst) == 1 {
            Action::RespondWith(200, Vec::new(), "<html>maintenance</html>".into())
        } else {
            Action::Forward
        }
    });
    let tmp = TempDir::new();
    let ws = workspace(tmp.path());
    let runner = Runner::new(tmp, ws);
    let repository = format!("{}/acme/settings-shop", proxy.host());
    let step = runner.run(&with_base(&repository, &[("branch-tag", "main")]));
    step.exited(4);
    let (ct, id) = last_change(&runner.ws, None);
    let tag = format!("main-{ct}-{}", &id[..7]);
    let digest = common::registry::digest_of(&reg, "acme/settings-shop", &tag)
        .unwrap_or_else(|| panic!("{tag} is not in the registry"));
    assert_eq!(
        common::registry::digest_of(&reg, "acme/settings-shop", "main").as_deref(),
        Some(digest.as_str())
    );
    let reference = format!("{repository}:{tag}@{digest}");
    assert_eq!(step.out("failed-after-publish"), "true");
    assert_eq!(step.out("digest"), digest);
    assert_eq!(step.out("tag"), tag);
    assert_eq!(step.out("tags"), tag);
    assert_eq!(step.out("reference"), reference);
    assert_eq!(step.out("image"), format!("{repository}@{digest}"));
    assert_eq!(step.out("pushed"), "true");
    assert!(
        step.summary.contains("published, then failed")
            && step
                .summary
                .contains(&format!("| reference | `{reference}` |"))
            && step.summary.contains("`main` (branch tag)")
            && step.summary.contains("then the run failed: registry"),
        "{}",
        step.summary
    );
    let error = step
        .stdout
        .lines()
        .find(|l| l.starts_with("::error title=settings-image%3A published%2C then failed::"))
        .unwrap_or_else(|| panic!("no ::error line in:\n{}", step.stdout));
    assert!(
        error.contains(&format!(
            "already published: {reference}, tagged {tag}, main (branch tag)"
        )),
        "{error}"
    );
}
