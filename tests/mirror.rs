//! The git mirror the controller publishes from (`history::mirror`),
//! against a real smart-HTTP server (`git http-backend`, see
//! `tests/common/git_server.rs`), with the git CLI and
//! `settings-image push` run in a `git clone` of the same URL as oracles.

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use common::git::git_cmd;
use common::git_server::{GitServer, Options, Upstream};
use common::registry::{self as reg, Auth, Registry};
use common::{TempDir, run_ok};
use settings_image::history::SourceMode;
use settings_image::history::mirror::{Limits, Mirror, Mirrors, Remote};
use settings_image::request::{Forward, Request, Target};

static GO: AtomicBool = AtomicBool::new(false);

/// The request the controller builds for one folder at one commit.
fn request(folder: &str, commit: &str, target: Target) -> Request {
    Request {
        path: PathBuf::from(folder),
        tags: Vec::new(),
        target,
        source: SourceMode::Commit,
        timestamp_tag: Some("main".into()),
        github: None,
        source_url: None,
        ci: Default::default(),
        forward: Forward::default(),
        provenance: true,
        revision: Some(commit.to_string()),
        extra: Default::default(),
    }
}

fn registry_target(reg: &Registry, name: &str) -> Target {
    Target::Registry(settings_image::registry::Options {
        repository: format!("{}/{name}", reg.host()),
        insecure: false,
        monolithic: false,
        credentials: None,
        docker_config: None,
        login: None,
    })
}

/// `git clone URL` (the git CLI, with `extra` configuration such as an
/// auth header) into a new directory; returns it.
fn git_clone(up: &Upstream, url: &str, extra: &[&str], into: &Path) -> PathBuf {
    let dir = into.join("clone");
    let mut cmd = git_cmd(up.home(), into);
    for e in extra {
        cmd.args(["-c", e]);
    }
    run_ok(cmd.args(["clone", "-q", url]).arg(&dir));
    dir
}

/// `settings-image push --json` run in `dir` with `args`.
fn push_in(dir: &Path, args: &[&str]) -> serde_json::Value {
    let empty = TempDir::new();
    let out = run_ok(
        std::process::Command::new(common::bin())
            .current_dir(dir)
            .env("DOCKER_CONFIG", empty.path())
            .arg("push")
            .args(args)
            .arg("--json"),
    );
    serde_json::from_slice(&out.stdout).expect("push --json prints JSON")
}

fn git_dir_cmd(up: &Upstream, git_dir: &Path, args: &[&str]) -> String {
    let out = run_ok(
        git_cmd(up.home(), git_dir)
            .arg("--git-dir")
            .arg(git_dir)
            .args(args),
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn fetch(mirrors: &Mirrors, remote: &Remote, commit: Option<&str>) -> Mirror {
    mirrors
        .fetch(remote, "main", commit, &GO)
        .unwrap_or_else(|e| panic!("fetch failed: {e} (hint: {:?})", e.hint()))
}

/// Three commits: `configs/shop` and `configs/cart` made, then only
/// `configs/cart` changed, then `configs/shop` changed. Returns their ids.
fn three_commits(up: &Upstream) -> [String; 3] {
    let c1 = up.commit(
        &[
            ("configs/shop/app.yaml", "replicas: 1\n"),
            ("configs/shop/nested/deep.json", "{\"a\": 1}\n"),
            ("configs/cart/app.yaml", "currency: EUR\n"),
            ("README.md", "settings\n"),
        ],
        "one",
    );
    let c2 = up.commit(&[("configs/cart/app.yaml", "currency: USD\n")], "two");
    let c3 = up.commit(&[("configs/shop/app.yaml", "replicas: 3\n")], "three");
    [c1, c2, c3]
}

#[test]
fn a_commit_published_from_the_mirror_is_what_push_makes_in_a_clone() {
    let up = Upstream::new();
    let [c1, c2, c3] = three_commits(&up);
    let server = GitServer::start(&up.root, Options::default());
    let url = server.url("settings.git");
    let cache = TempDir::new();
    let mirrors = Mirrors::new(cache.path(), Limits::default()).unwrap();
    let remote = Remote::new(&url).unwrap();
    let mirror = fetch(&mirrors, &remote, Some(&c2));
    assert!(mirror.fetched().cloned);
    assert_eq!(mirror.head(), c3);
    // The git CLI reads the mirror: intact, and the branch where the server has it.
    git_dir_cmd(&up, mirror.dir(), &["fsck", "--strict"]);
    assert_eq!(
        git_dir_cmd(&up, mirror.dir(), &["rev-parse", "refs/heads/main"]),
        c3
    );

    let registry = Registry::start(Auth::None);
    let work = TempDir::new();
    let clone = git_clone(&up, &url, &[], work.path());
    // An older commit (the tag names c1, the last change reachable from
    // c2) and the newest one.
    for (commit, changed) in [(&c2, &c1), (&c3, &c3)] {
        let ours = settings_image::request::run_mirror(
            &request("configs/shop", commit, registry_target(&registry, "mirror")),
            &mirror,
        )
        .unwrap();
        let theirs = push_in(
            &clone,
            &[
                "--path",
                "configs/shop",
                "--revision",
                commit,
                "--timestamp-tag",
                "main",
                "--repository",
                &format!("{}/clone", registry.host()),
            ],
        );
        assert_eq!(
            ours.digest,
            theirs["digest"].as_str().unwrap(),
            "digest at {commit}"
        );
        assert_eq!(
            ours.timestamp_tag.as_deref(),
            theirs["timestamp_tag"].as_str(),
            "timestamp tag at {commit}"
        );
        assert_eq!(ours.commit.as_deref(), Some(changed.as_str()));
        let tag = ours.timestamp_tag.clone().unwrap();
        assert!(tag.ends_with(&changed[..7]), "{tag}");
        assert_eq!(reg::revision_of(&registry, "mirror", &tag), *changed);
        assert!(ours.push.as_ref().unwrap().pushed);
        // Into the clone's repository: nothing new, not even the
        // provenance (the clone's push attached the same statement).
        let again = settings_image::request::run_mirror(
            &request("configs/shop", commit, registry_target(&registry, "clone")),
            &mirror,
        )
        .unwrap();
        let again = again.push.unwrap();
        assert!(!again.pushed, "{again:?}");
        assert_eq!(again.uploaded_blobs, 0);
        assert_eq!(
            again.provenance.as_deref(),
            theirs["provenance"].as_str(),
            "provenance at {commit}"
        );
    }

    // Several folders by a glob, against the tree of the commit; in the
    // clone the same glob with the commit checked out.
    run_ok(git_cmd(up.home(), &clone).args(["checkout", "-q", &c3]));
    let folders =
        settings_image::many::select_in(&mirror, &c3, &["configs/*"], "spec.path").unwrap();
    let names: Vec<_> = folders
        .iter()
        .map(|f| f.path.display().to_string())
        .collect();
    assert_eq!(names, ["configs/cart", "configs/shop"]);
    let template = format!("{}/many-{{name}}", registry.host());
    let repositories =
        settings_image::many::targets(&template, &folders, "spec.repository").unwrap();
    let targets = settings_image::many::registry_targets(
        &settings_image::registry::Options {
            repository: String::new(),
            insecure: false,
            monolithic: false,
            credentials: None,
            docker_config: None,
            login: None,
        },
        repositories,
    );
    let outcome = settings_image::many::run_mirror(
        &request(".", &c3, Target::Layout(PathBuf::new())),
        &folders,
        targets,
        2,
        &mirror,
    )
    .unwrap();
    assert!(outcome.errors.is_empty(), "{:?}", outcome.errors);
    let theirs = push_in(
        &clone,
        &[
            "--path",
            "configs/*",
            "--revision",
            &c3,
            "--timestamp-tag",
            "main",
            "--repository",
            &format!("{}/many-clone-{{name}}", registry.host()),
        ],
    );
    let theirs = theirs.as_array().expect("several folders: a JSON array");
    assert_eq!(outcome.images.len(), theirs.len());
    for (ours, theirs) in outcome.images.iter().zip(theirs) {
        assert_eq!(ours.path, theirs["path"].as_str().unwrap());
        assert_eq!(ours.digest.as_deref(), theirs["digest"].as_str());
        assert_eq!(ours.tag.as_deref(), theirs["tag"].as_str());
    }
}
