//! One checkout per run: a push with a timestamp tag, a guarded branch tag
//! and provenance walks history, orders commits for the anomaly check and
//! the branch tag, and collects the provenance facts, all from one open of
//! the repository. `settings-image push --timestamp-tag main --branch-tag
//! main` runs against a real `docker-registry` under `strace`, which counts
//! the opens of the repository's `.git/config` from outside the process
//! (opening a repository reads its config; nothing after that does); git is
//! the oracle for the commits.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::git::ScratchRepo;
use common::registry::{Auth, Registry};
use common::{TempDir, bin, require};
use serde_json::Value;

/// `settings-image push --path configs --timestamp-tag main --branch-tag
/// main --json` in `dir`, every process of it traced by strace: the report,
/// and how many times any of them opened `dir/.git/config`.
fn traced_push(dir: &Path, repository: &str) -> (Value, usize) {
    let tmp = TempDir::new();
    let trace = tmp.join("trace");
    let out = Command::new(require("strace"))
        .args(["-f", "-qq", "-e", "trace=open,openat,openat2", "-o"])
        .arg(&trace)
        .arg(bin())
        .current_dir(dir)
        .env("DOCKER_CONFIG", tmp.path())
        .args(["push", "--path", "configs", "--repository", repository])
        .args(["--timestamp-tag", "main", "--branch-tag", "main", "--json"])
        .output()
        .expect("running strace");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let config = format!("\"{}\"", dir.join(".git/config").display());
    let trace = std::fs::read_to_string(&trace).expect("reading the trace");
    let opens = trace
        .lines()
        .filter(|l| l.contains(&config) && !l.contains("= -1 "))
        .count();
    let report = serde_json::from_slice(&out.stdout).expect("push --json prints JSON");
    (report, opens)
}

#[test]
fn a_push_with_timestamp_and_branch_tags_opens_the_repository_once() {
    let reg = Registry::start(Auth::None);
    let repository = format!("{}/one-checkout", reg.host());
    let repo = ScratchRepo::new();
    let first = repo.commit_files(&[("configs/app.yaml", "a: 1\n")], "app.yaml", 1_700_000_000);

    let (report, opens) = traced_push(&repo.dir, &repository);
    assert_eq!(
        opens, 1,
        "the first push must open the repository exactly once"
    );
    assert_eq!(report["commit"], first.as_str());
    assert_eq!(report["branch_tag"]["outcome"], "created", "{report}");
    assert!(
        report["provenance"].is_string(),
        "provenance must be attached (its facts come from the same checkout): {report}"
    );

    // A second commit: the anomaly check and the branch tag now ask
    // whether the tagged commit is an ancestor of the new one.
    let second = repo.commit_files(&[("configs/app.yaml", "a: 2\n")], "app.yaml", 1_700_000_100);
    let (report, opens) = traced_push(&repo.dir, &repository);
    assert_eq!(
        opens, 1,
        "the second push (ancestry questions included) must open the repository exactly once"
    );
    assert_eq!(report["commit"], second.as_str());
    assert!(report.get("anomaly").is_none(), "{report}");
    assert_eq!(report["branch_tag"]["outcome"], "moved", "{report}");
    assert_eq!(report["branch_tag"]["commit"], second.as_str());
}
