//! One checkout per run: a push with a timestamp tag, a guarded branch tag
//! and provenance walks history, orders commits for the anomaly check and
//! the branch tag, and collects the provenance facts, all from one open of
//! the repository. Driven through the library (the same `Request` the CLI
//! builds for `push --timestamp-tag main --branch-tag main`) against a real
//! `docker-registry`, with git as the oracle for the commits.

mod common;

use std::path::Path;

use common::git::ScratchRepo;
use common::registry::{Auth, Registry};
use settings_image::history::{SourceMode, git};
use settings_image::provenance::Ci;
use settings_image::publish::guards::BranchOutcome;
use settings_image::registry::Options;
use settings_image::request::{self, Forward, Request, Target};

fn commit(repo: &ScratchRepo, file: &str, content: &str, time: u64) -> String {
    let path = repo.dir.join("configs").join(file);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(&path, content).expect("write");
    repo.git(&["add", "-A"]);
    let date = format!("@{time} +0000");
    let out = repo
        .cmd(&repo.dir)
        .args(["commit", "-q", "-m", file])
        .env("GIT_AUTHOR_DATE", &date)
        .env("GIT_COMMITTER_DATE", &date)
        .output()
        .expect("git");
    assert!(out.status.success(), "{out:?}");
    repo.git(&["rev-parse", "HEAD"])
}

fn push_request(folder: &Path, repository: &str) -> Request {
    Request {
        path: folder.to_path_buf(),
        tags: Vec::new(),
        target: Target::Registry(Options {
            repository: repository.to_string(),
            insecure: false,
            monolithic: false,
            credentials: None,
            docker_config: None,
            login: None,
        }),
        source: SourceMode::Commit,
        timestamp_tag: Some("main".into()),
        github: None,
        source_url: None,
        ci: Ci::default(),
        forward: Forward {
            branch_tag: Some("main".into()),
            allow_rewind: false,
            forced_before: None,
        },
        provenance: true,
        revision: None,
        extra: Default::default(),
    }
}

#[test]
fn a_push_with_timestamp_and_branch_tags_opens_the_repository_once() {
    let reg = Registry::start(Auth::None);
    let repository = format!("{}/one-checkout", reg.host());
    let repo = ScratchRepo::new();
    let first = commit(&repo, "app.yaml", "a: 1\n", 1_700_000_000);
    let folder = repo.dir.join("configs");
    let req = push_request(&folder, &repository);

    let before = git::opens();
    let report = request::run(&req).expect("first push");
    assert_eq!(
        git::opens() - before,
        1,
        "the first push must open the repository exactly once"
    );
    assert_eq!(report.commit.as_deref(), Some(first.as_str()));
    let branch = report.branch_tag.expect("branch tag report");
    assert_eq!(branch.outcome, BranchOutcome::Created);
    assert!(
        report
            .push
            .as_ref()
            .and_then(|p| p.provenance.as_ref())
            .is_some(),
        "provenance must be attached (its facts come from the same checkout)"
    );

    // A second commit: the anomaly check and the branch tag now ask
    // whether the tagged commit is an ancestor of the new one.
    let second = commit(&repo, "app.yaml", "a: 2\n", 1_700_000_100);
    let before = git::opens();
    let report = request::run(&req).expect("second push");
    assert_eq!(
        git::opens() - before,
        1,
        "the second push (ancestry questions included) must open the repository exactly once"
    );
    assert_eq!(report.commit.as_deref(), Some(second.as_str()));
    assert_eq!(report.anomaly, None);
    let branch = report.branch_tag.expect("branch tag report");
    assert_eq!(branch.outcome, BranchOutcome::Moved);
    assert_eq!(branch.commit.as_deref(), Some(second.as_str()));
}
