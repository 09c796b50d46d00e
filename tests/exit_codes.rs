//! Every exit code the docs list, each caused for real (a registry, git,
//! the fault proxy) and checked with its message, and the docs' lists
//! checked against the codes tested here, so the two cannot drift.

use crate::common;

use std::collections::BTreeSet;
use std::path::Path;

use common::cmd::{Run, TestCommand};
use common::git::ScratchRepo;
use common::registry::{Action, Auth, Proxy, Registry, settings, skopeo_inspect, skopeo_tags};

/// The codes of `push` this file causes (128+n for a signal is in
/// `tests/hostile.rs`; 141, a closed standard output, is here).
const TESTED: [i32; 8] = [0, 1, 2, 3, 4, 5, 6, 141];
/// The codes of other commands this file causes: `verify`'s mismatch.
const TESTED_OTHER: [i32; 1] = [7];
/// The codes other files cause: `controller --leader-elect`'s lost Lease
/// (`a_leader_cut_off_from_the_api_server_exits_before_another_leads` in
/// `tests/controller.rs`), `diff --exit-code`'s differences
/// (`two_real_images_diff_as_written_by_hand_in_text_and_json` in
/// `tests/diff.rs`).
const TESTED_ELSEWHERE: [i32; 2] = [8, 9];

/// What half-given push credentials say.
const HALF_GIVEN: &str = "error: a registry username needs a password and a password needs a username\n\
     hint: give --username USER with --password-stdin (or set SETTINGS_IMAGE_USERNAME and SETTINGS_IMAGE_PASSWORD)\n";

/// What a deadline variable `k` set to `v` (not a number of seconds from 1
/// to a week) says.
fn not_seconds(k: &str, v: &str) -> String {
    format!(
        "error: {k} is {v:?}, not a number of seconds from 1 to 604800 (a week)\n\
         hint: set {k} to a whole number of seconds from 1 to 604800, or unset it\n"
    )
}

/// `r` exited with `code` and said exactly `stderr` (an error and its
/// hint).
fn exactly(r: &Run, code: i32, stderr: &str) {
    r.exited(code).stderr_is(stderr);
}

fn expect(r: &Run, code: i32, says: &str) {
    assert_eq!(r.code, code, "stdout: {}\nstderr: {}", r.stdout, r.stderr);
    assert!(r.stderr.contains(says), "wanted {says:?} in:\n{}", r.stderr);
    if code != 0 {
        assert!(r.stderr.contains("\nhint: "), "no hint:\n{}", r.stderr);
    }
}

/// A repository whose `shop/app.yaml` is committed at given times.
fn commit_shop(g: &ScratchRepo, content: &str, time: i64) {
    g.commit_files(&[("shop/app.yaml", content)], content, time);
}

fn shop(g: &ScratchRepo) -> String {
    g.dir.join("shop").display().to_string()
}

#[test]
fn the_docs_list_exactly_the_codes_tested() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let push_md = std::fs::read_to_string(root.join("docs/push.md")).unwrap();
    let table = push_md
        .split("## Exit codes")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("docs/push.md has an Exit codes section");
    let in_table: BTreeSet<i32> = table
        .lines()
        .filter_map(|l| l.strip_prefix("| ")?.split(' ').next()?.parse().ok())
        .collect();
    // docs/exit-codes.md, generated from error::EXIT_CODES (tests/reference.rs).
    let reference = std::fs::read_to_string(root.join("docs/exit-codes.md")).unwrap();
    let in_reference: BTreeSet<i32> = reference
        .lines()
        .filter_map(|l| l.strip_prefix("| ")?.split(' ').next()?.parse().ok())
        .collect();
    let tested: BTreeSet<i32> = TESTED.into_iter().collect();
    assert_eq!(in_table, tested, "docs/push.md's table");
    let mut all = tested.clone();
    all.extend(TESTED_OTHER);
    all.extend(TESTED_ELSEWHERE);
    assert_eq!(in_reference, all, "docs/exit-codes.md's table");
}

#[test]
fn exit_0_pushed_and_exit_2_bad_input_pushes_nothing() {
    let reg = Registry::start(Auth::None);
    let dir = settings(2, "codes");
    let d = dir.path().to_str().unwrap();
    let repo = format!("{}/shop", reg.host());
    let ok = TestCommand::push(d, &repo).args(["--tag", "v1"]).run();
    assert_eq!(ok.code, 0, "stdout: {}\nstderr: {}", ok.stdout, ok.stderr);
    assert!(!ok.stderr.contains("error"), "{}", ok.stderr);
    // It says what it pushed, and the registry holds that.
    let digest = skopeo_inspect(&format!("{repo}:v1"), None).unwrap()["Digest"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(ok.stdout.contains("pushed "), "{}", ok.stdout);
    assert!(ok.stdout.contains(&digest), "{digest} in:\n{}", ok.stdout);

    // Half-given credentials: an error, no longer a silently anonymous push.
    let half = TestCommand::push(d, &repo)
        .args(["--tag", "v2"])
        .env("SETTINGS_IMAGE_PASSWORD", "pw-without-user")
        .run();
    exactly(&half, 2, HALF_GIVEN);
    let half = TestCommand::push(d, &repo)
        .args(["--tag", "v2"])
        .env("SETTINGS_IMAGE_USERNAME", "u")
        .run();
    exactly(&half, 2, HALF_GIVEN);
    let half = TestCommand::new()
        .args(["inspect", &format!("{repo}:v1")])
        .env("SETTINGS_IMAGE_PASSWORD", "pw-without-user")
        .run();
    exactly(
        &half,
        2,
        "error: a registry username needs a password and a password needs a username\n\
         hint: set both SETTINGS_IMAGE_USERNAME and SETTINGS_IMAGE_PASSWORD, or neither to read anonymously\n",
    );
    // A deadline that is not a number of seconds.
    for (k, v) in [
        ("SETTINGS_IMAGE_PUSH_TIMEOUT", "15m"),
        ("SETTINGS_IMAGE_REQUEST_TIMEOUT", "0"),
    ] {
        let r = TestCommand::push(d, &repo)
            .args(["--tag", "v2"])
            .env(k, v)
            .run();
        exactly(&r, 2, &not_seconds(k, v));
    }
    // An unusable folder inside git: missing, or untracked.
    let g = ScratchRepo::new();
    commit_shop(&g, "a: 1\n", 1_700_000_000);
    std::fs::create_dir_all(g.dir.join("untracked")).unwrap();
    std::fs::write(g.dir.join("untracked/x.yaml"), "x: 1\n").unwrap();
    for (folder, says) in [
        (
            "untracked",
            "is not in the HEAD commit (untracked, ignored or deleted)\n\
             hint: commit the folder first, or use --source worktree to package it from disk without a timestamp tag",
        ),
        (
            "missing",
            "does not exist (not on disk, not in the HEAD commit)\n\
             hint: check the folder's name: --path names the settings folder, relative to the current directory",
        ),
    ] {
        let p = g.dir.join(folder).display().to_string();
        let r = TestCommand::push(&p, &repo)
            .args(["--timestamp-tag", "main"])
            .run();
        exactly(&r, 2, &format!("error: {p}: {says}\n"));
    }
    // A typo is not told to commit the folder or package it from disk.
    let p = g.dir.join("missing").display().to_string();
    let r = TestCommand::push(&p, &repo)
        .args(["--timestamp-tag", "main"])
        .run();
    assert!(!r.stderr.contains("--source worktree"), "{}", r.stderr);
    assert_eq!(skopeo_tags(&repo, None), ["v1"]);
}

/// A closed standard output (`build --json | true`, the reader gone
/// before the first write) made the run panic, exit 101, 30 runs of 30.
/// Now it says nothing and exits 141, as a death by SIGPIPE would, its
/// work done: the layout holds the image, the registry the tag.
#[test]
fn exit_141_a_closed_stdout_ends_the_run_quietly_with_its_work_done() {
    let dir = settings(2, "closed");
    let d = dir.path().to_str().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let build = |out: &Path| {
        let mut c = TestCommand::new();
        c.args(["build", "--path", d, "--tag", "v1", "--json", "--output"])
            .arg(out);
        c
    };
    let want = build(&tmp.path().join("open")).json()["digest"]
        .as_str()
        .unwrap()
        .to_string();
    let index_digest = |layout: &Path| -> String {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(layout.join("index.json")).unwrap())
                .unwrap();
        v["manifests"][0]["digest"].as_str().unwrap().to_string()
    };
    for i in 0..30 {
        let out = tmp.path().join(format!("closed-{i}"));
        let r = build(&out).closed_stdout().run();
        assert_eq!((r.code, r.stderr.as_str()), (141, ""), "run {i}");
        assert_eq!(index_digest(&out), want, "run {i}");
    }
    let reg = Registry::start(Auth::None);
    let repo = format!("{}/shop", reg.host());
    let r = TestCommand::push_json(d, &repo)
        .tags(&["v1"])
        .arg("--no-provenance")
        .closed_stdout()
        .run();
    assert_eq!((r.code, r.stderr.as_str()), (141, ""));
    assert_eq!(
        skopeo_inspect(&format!("{repo}:v1"), None).unwrap()["Digest"],
        want.as_str()
    );
    // Every command writes through the same place: flux's YAML too.
    let r = TestCommand::new()
        .args([
            "flux",
            "--repository",
            "ghcr.io/acme/shop",
            "--prefix",
            "main",
        ])
        .closed_stdout()
        .run();
    assert_eq!((r.code, r.stderr.as_str()), (141, ""));
}

#[test]
fn exit_2_a_commit_asked_of_a_folder_outside_git() {
    let reg = Registry::start(Auth::None);
    let dir = settings(1, "nogit");
    let d = dir.path().to_str().unwrap();
    let repo = format!("{}/shop", reg.host());
    // Bad input, as a missing folder is: nothing to ask of a history.
    let no_commit = format!(
        "error: {d}: is not inside a git repository, so there is no commit to take a timestamp tag from\n\
         hint: drop --timestamp-tag, or build from a git checkout that holds the folder\n"
    );
    let r = TestCommand::push(d, &repo)
        .args(["--timestamp-tag", "main"])
        .run();
    exactly(&r, 2, &no_commit);
    let r = TestCommand::push(d, &repo)
        .args(["--revision", "HEAD"])
        .run();
    exactly(
        &r,
        2,
        &format!(
            "error: {d}: is not inside a git repository, so there is no revision HEAD to package\n\
             hint: build from a git checkout that holds the folder\n"
        ),
    );
    assert!(skopeo_tags(&repo, None).is_empty());
    let out = dir.path().join("layout");
    let out = out.to_str().unwrap();
    let r = TestCommand::new()
        .args([
            "build",
            "--path",
            d,
            "--output",
            out,
            "--timestamp-tag",
            "main",
        ])
        .run();
    exactly(&r, 2, &no_commit);
    assert!(!Path::new(out).exists(), "nothing half-written");
}

#[test]
fn exit_1_history_cannot_answer() {
    // A shallow clone whose HEAD does not change the folder: the walk
    // reaches the boundary without proof of the folder's last change, and
    // no GitHub API is there to ask.
    let reg = Registry::start(Auth::None);
    let g = ScratchRepo::new();
    commit_shop(&g, "a: 1\n", 1_700_000_000);
    std::fs::write(g.dir.join("other.txt"), "x\n").unwrap();
    g.git_at(&["add", "."], 1_700_000_100);
    g.git_at(&["commit", "-q", "-m", "other"], 1_700_000_100);
    let clone = g.dir.parent().unwrap().join("shallow");
    let url = format!("file://{}", g.dir.display());
    g.git_at(
        &["clone", "-q", "--depth", "1", &url, clone.to_str().unwrap()],
        1_700_000_200,
    );
    assert!(clone.join(".git/shallow").is_file(), "the clone is shallow");
    let repo = format!("{}/shop", reg.host());
    let shop = clone.join("shop").display().to_string();
    let r = TestCommand::push(&shop, &repo)
        .args(["--timestamp-tag", "main"])
        .run();
    expect(&r, 1, "shallow");
    assert!(skopeo_tags(&repo, None).is_empty());
}

#[test]
fn exit_3_a_timestamp_tag_never_moves() {
    let reg = Registry::start(Auth::None);
    let g = ScratchRepo::new();
    commit_shop(&g, "a: 1\n", 1_700_000_000);
    let repo = format!("{}/shop", reg.host());
    let shop = shop(&g);
    let mut cmd = TestCommand::push(&shop, &repo);
    cmd.args(["--timestamp-tag", "main", "--source", "worktree", "--json"]);
    let first = cmd.json();
    let tag = first["timestamp_tag"].as_str().unwrap().to_string();
    std::fs::write(g.dir.join("shop/app.yaml"), "a: 2 (not committed)\n").unwrap();
    let r = cmd.run();
    expect(&r, 3, "timestamp tags never move");
    assert!(
        r.stderr.contains(first["digest"].as_str().unwrap()),
        "{}",
        r.stderr
    );
    let i = skopeo_inspect(&format!("{repo}:{tag}"), None).unwrap();
    assert_eq!(i["Digest"], first["digest"]);
}

/// The tag CI published from GitHub (its source URL recorded), pushed
/// again from a clone without `origin`: another source URL, another
/// digest, exit 3, and the hint names `--source-url`; with the URL CI
/// recorded the push is the same image, `pushed: false`.
#[test]
fn exit_3_from_a_clone_that_records_another_source_url_and_the_flag_that_agrees() {
    let reg = Registry::start(Auth::None);
    let g = ScratchRepo::new();
    commit_shop(&g, "a: 1\n", 1_700_000_000);
    let repo = format!("{}/shop", reg.host());
    let shop = shop(&g);
    let push = |env: &[(&str, &str)], extra: &[&str]| {
        TestCommand::push(&shop, &repo)
            .args(["--timestamp-tag", "main", "--json"])
            .args(extra)
            .envs(env.iter().copied())
            .run()
    };
    let ci = push(
        &[
            ("GITHUB_SERVER_URL", "https://github.com"),
            ("GITHUB_REPOSITORY", "acme/settings"),
        ],
        &[],
    )
    .json();
    let r = push(&[], &[]);
    expect(&r, 3, "timestamp tags never move");
    assert!(
        r.stderr.contains("records another source URL")
            && r.stderr
                .contains("(org.opencontainers.image.source) with --source-url"),
        "{}",
        r.stderr
    );
    let again = push(&[], &["--source-url", "git@github.com:acme/settings.git"]).json();
    assert_eq!(again["digest"], ci["digest"]);
    assert_eq!(again["pushed"], false);
}

#[test]
fn exit_4_the_registry_refuses_and_no_tag_is_written() {
    let reg = Registry::start(Auth::None);
    let proxy = Proxy::start(reg.port);
    proxy.set_rule(|method, path| {
        if method == "PUT" && path.contains("/manifests/") {
            Action::Respond(400, vec![])
        } else {
            Action::Forward
        }
    });
    let dir = settings(1, "refused");
    let d = dir.path().to_str().unwrap();
    let r = TestCommand::push(d, &format!("{}/shop", proxy.host()))
        .args(["--tag", "v1"])
        .run();
    exactly(
        &r,
        4,
        &format!(
            "error: registry {host}/shop: putting manifest {host}/shop:v1 failed: HTTP 400 Bad Request: INJECTED: injected 400 by the test proxy\n\
             hint: the registry refused this request as it was sent; its message says why (often a rule of the registry: immutable tags, sizes, names)\n",
            host = proxy.host()
        ),
    );
    assert!(skopeo_tags(&format!("{}/shop", reg.host()), None).is_empty());
}

#[test]
fn exit_5_authentication_failed() {
    let reg = Registry::start(Auth::Basic {
        user: "alice".into(),
        password: "right".into(),
    });
    let dir = settings(1, "auth");
    let d = dir.path().to_str().unwrap();
    let repo = format!("{}/shop", reg.host());
    let r = TestCommand::push(d, &repo)
        .args(["--tag", "v1", "--username", "alice", "--password-stdin"])
        .run();
    // No stdin: an empty password is half-given credentials.
    exactly(&r, 2, HALF_GIVEN);
    let r = TestCommand::push(d, &repo)
        .args(["--tag", "v1", "--username", "alice", "--password-stdin"])
        .stdin("wrong-password\n")
        .run();
    let host = reg.host();
    exactly(
        &r,
        5,
        &format!(
            "error: authentication failed for {host}: checking manifest {host}/shop:v1 in shop: HTTP 401 Unauthorized\n\
             hint: give credentials that may push to {host}: --username with --password-stdin, SETTINGS_IMAGE_USERNAME and SETTINGS_IMAGE_PASSWORD, or `docker login {host}`\n"
        ),
    );
    // Reading needs pull rights only, and the hint says so.
    let r = TestCommand::new()
        .args(["inspect", &format!("{repo}:v1")])
        .envs([
            ("SETTINGS_IMAGE_USERNAME", "alice"),
            ("SETTINGS_IMAGE_PASSWORD", "wrong-password"),
        ])
        .run();
    exactly(
        &r,
        5,
        &format!(
            "error: authentication failed for {host}: getting manifest {host}/shop:v1 in shop: HTTP 401 Unauthorized: UNAUTHORIZED: authentication required\n\
             hint: give credentials that may pull from {host}: SETTINGS_IMAGE_USERNAME and SETTINGS_IMAGE_PASSWORD, or `docker login {host}`\n"
        ),
    );
    assert!(skopeo_tags(&repo, Some("alice:right")).is_empty());
}

#[test]
fn exit_6_a_branch_tag_never_moves_sideways() {
    let reg = Registry::start(Auth::None);
    let g = ScratchRepo::new();
    commit_shop(&g, "a: 1\n", 1_700_000_000);
    let repo = format!("{}/shop", reg.host());
    let shop = shop(&g);
    let mut cmd = TestCommand::push(&shop, &repo);
    cmd.args(["--timestamp-tag", "main", "--branch-tag", "live", "--json"]);
    let first = cmd.json();
    // History rewritten: `main` becomes a new root commit that does not
    // descend from it (the same ref: another would be refused as a second
    // ref under the prefix).
    g.git_at(&["checkout", "-q", "--orphan", "rewritten"], 0);
    commit_shop(&g, "a: 2\n", 1_700_000_100);
    g.git_at(&["branch", "-q", "-M", "main"], 0);
    let r = cmd.run();
    expect(&r, 6, "refusing to move it sideways");
    let tags = skopeo_tags(&repo, None);
    assert!(
        !tags.iter().any(|t| t.starts_with("main-1700000100-")),
        "{tags:?}"
    );
    let live = skopeo_inspect(&format!("{repo}:live"), None).unwrap();
    assert_eq!(live["Digest"], first["digest"]);
}

#[test]
fn exit_2_a_deadline_too_long_for_the_clock() {
    // `now + seconds` overflows the clock near u64::MAX: refused before any
    // request (the ECR host is never contacted: no name resolves here), never
    // a panic. (ECR's host: the ecr login is for ECR's hosts only.)
    let dir = settings(1, "deadline");
    let d = dir.path().to_str().unwrap();
    for k in [
        "SETTINGS_IMAGE_PUSH_TIMEOUT",
        "SETTINGS_IMAGE_REQUEST_TIMEOUT",
        "SETTINGS_IMAGE_LOGIN_TIMEOUT",
    ] {
        for v in ["18446744073709551615", "9223372036854775807", "604801"] {
            let r = TestCommand::push(d, "123456789012.dkr.ecr.eu-west-1.amazonaws.com/shop")
                .args(["--tag", "v1", "--login", "ecr", "--id-token-file", d])
                .env(k, v)
                .run();
            exactly(&r, 2, &not_seconds(k, v));
        }
    }
    // A week is accepted (the push then fails on the closed port, exit 4,
    // naming the repository and the host to check).
    let r = TestCommand::push(d, "127.0.0.1:1/shop")
        .args(["--tag", "v1"])
        .env("SETTINGS_IMAGE_PUSH_TIMEOUT", "604800")
        .run();
    expect(
        &r,
        4,
        "error: registry 127.0.0.1:1/shop: contacting the registry failed: ",
    );
    assert!(
        r.stderr
            .contains("hint: check that 127.0.0.1:1 is reachable"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("604800"), "{}", r.stderr);
}

#[test]
fn exit_2_a_branch_tag_without_a_timestamp_tag_says_so() {
    let g = ScratchRepo::new();
    commit_shop(&g, "a: 1\n", 1_700_000_000);
    let shop = shop(&g);
    // Port 1 is closed: the refusal comes before any request.
    let r = TestCommand::push(&shop, "127.0.0.1:1/shop")
        .args(["--tag", "v1", "--branch-tag", "live"])
        .run();
    exactly(
        &r,
        2,
        "error: --branch-tag \"live\" needs --timestamp-tag: the branch tag moves only to a commit that descends from the one the timestamp tags record\n\
         hint: add --timestamp-tag BRANCH (e.g. --timestamp-tag main)\n",
    );
}

#[test]
fn the_hint_for_a_missing_tag_runs_as_printed() {
    // The registry is plain HTTP on loopback, as this tool assumes; the
    // hint's skopeo command must say so too, or it fails on TLS.
    let reg = Registry::start(Auth::None);
    let dir = settings(1, "hint");
    let d = dir.path().to_str().unwrap();
    let repo = format!("{}/shop", reg.host());
    expect(
        &TestCommand::push(d, &repo).args(["--tag", "v1"]).run(),
        0,
        "",
    );
    let r = TestCommand::new()
        .args(["inspect", &format!("{repo}:v2")])
        .run();
    expect(&r, 4, "no such tag");
    let hint = r.stderr.split("\nhint: ").nth(1).unwrap_or_default();
    let command = hint.split('`').nth(1).expect("a command in backticks");
    assert!(command.starts_with("skopeo "), "{hint}");
    common::require("skopeo");
    let out = std::process::Command::new("sh")
        .args(["-c", command])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "`{command}` failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"v1\""));
}

#[test]
fn exit_7_verify_finds_an_image_that_is_not_what_its_commit_holds() {
    let reg = Registry::start(Auth::None);
    let g = ScratchRepo::new();
    commit_shop(&g, "a: 1\n", 1_700_000_000);
    let repo = format!("{}/shop", reg.host());
    let shop = shop(&g);
    let mut cmd = TestCommand::push(&shop, &repo);
    cmd.args(["--timestamp-tag", "main", "--json"]);
    let first = cmd.json();
    commit_shop(&g, "a: 2\n", 1_700_000_100);
    let second = cmd.json();
    let tag = first["timestamp_tag"].as_str().unwrap();
    let verify = || {
        TestCommand::new()
            .args(["verify", &format!("{repo}:{tag}"), "--path", &shop])
            .run()
    };
    let ok = verify();
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    assert!(ok.stdout.contains("verified"), "{}", ok.stdout);
    // Anyone with push access moves the first commit's tag to the second
    // image (a copy of its manifest by another tool).
    let moved = common::forge::image(
        &reg.host(),
        ("shop", second["digest"].as_str().unwrap()),
        ("shop", tag),
        &[],
    );
    assert_eq!(moved, second["digest"].as_str().unwrap());
    let r = verify();
    expect(&r, 7, "is not what its commit holds");
    assert!(r.stderr.contains("re-pointed"), "{}", r.stderr);
}
