//! History tests, differential against the git CLI: every repository here
//! is made with `git` at fixed dates, and for every case the commit,
//! timestamp and tag `settings-image tag` prints must equal
//! `git log -1 --format='%H %ct' -- DIR`. Shallow clones exercise the
//! GitHub API fallback against a stub server on 127.0.0.1; a copy owned by
//! another uid proves no ownership check gets in the way; builds prove the
//! image holds the commit's tracked files only.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::common;

use common::rng::Rng;

use common::cmd::TestCommand;
use common::git::{ScratchRepo as Repo, git_cmd};
use common::github;

fn ok(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Asserts that `out` failed with the documented exit `code`
/// (docs/exit-codes.md: 1 git history or the GitHub API, 2 bad input) and
/// that stderr's first line is the error naming `subject`; stderr.
fn failed(out: &Output, code: i32, subject: &str) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(code), "wanted exit {code}:\n{err}");
    let first = err.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("error: ") && first.contains(subject),
        "the error does not name {subject:?}:\n{err}"
    );
    err
}

fn run(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    TestCommand::new()
        .current_dir(cwd)
        .args(args)
        .env("HOME", "/nonexistent")
        .envs(env.iter().copied())
        .output()
}

fn tag_json(cwd: &Path, dir: &str, env: &[(&str, &str)]) -> Value {
    let out = run(
        cwd,
        &["tag", "--path", dir, "--prefix", "feature/x", "--json"],
        env,
    );
    let s = ok(&out, &format!("settings-image tag --path {dir}"));
    serde_json::from_str(&s).expect("tag --json prints JSON")
}

/// Asserts that `tag` agrees with git for `dir` given relative to `cwd`.
fn check(repo: &Repo, cwd: &Path, dir: &str) {
    check_from(repo, cwd, cwd, dir)
}

/// As [`check`], with git asked from `oracle_cwd` (git needs a cwd inside
/// the repository; an absolute `dir` means the same from anywhere).
fn check_from(repo: &Repo, oracle_cwd: &Path, cwd: &Path, dir: &str) {
    let (id, ts) = repo.last_change_in(oracle_cwd, "HEAD", dir);
    let v = tag_json(cwd, dir, &[]);
    assert_eq!(
        v["commit"],
        id.as_str(),
        "commit for {dir} from {}",
        cwd.display()
    );
    assert_eq!(v["timestamp"], ts, "timestamp for {dir}");
    let want_tag = format!("feature-x-{ts}-{}", &id[..7]);
    assert_eq!(v["tag"], want_tag.as_str(), "tag for {dir}");
    // The plain form prints just the tag.
    let out = run(cwd, &["tag", "--path", dir, "--prefix", "feature/x"], &[]);
    assert_eq!(ok(&out, "tag").trim(), want_tag);
    // committed_at is the same instant in RFC 3339.
    let want_iso = git_utc(repo, &id);
    assert_eq!(v["committed_at"], want_iso.as_str());
}

/// The committer time of `id` in UTC RFC 3339, as git formats it.
fn git_utc(repo: &Repo, id: &str) -> String {
    let out = git_cmd(&repo.home, &repo.dir)
        .env("TZ", "UTC")
        .args([
            "show",
            "-s",
            "--date=format-local:%Y-%m-%dT%H:%M:%SZ",
            "--format=%cd",
            id,
        ])
        .output()
        .expect("git show");
    ok(&out, "git show").trim().to_string()
}

fn check_all(repo: &Repo) {
    check(repo, &repo.dir, "s");
}

/// One step of a linear history scenario.
enum Step {
    /// Write a file (creating folders).
    Write(&'static str, &'static str),
    /// `git rm -q -r PATH`.
    Rm(&'static str),
    /// `git mv FROM TO`.
    Mv(&'static str, &'static str),
    /// Make a file executable.
    Chmod(&'static str),
    /// Commit everything with this message at this committer time.
    Commit(&'static str, i64),
    /// Commit with committer time and a different author time.
    CommitAt(&'static str, i64, i64),
    /// `tag` must agree with git for this folder (commit, time, tag, RFC 3339).
    Check(&'static str),
    /// The folder's answer must be the commit with this message.
    Answer(&'static str, &'static str),
}

use Step::*;

/// Linear histories: after each step sequence, the tool agrees with
/// `git log -1 -- DIR` and names the commit the scenario expects.
const LINEAR: &[(&str, &[Step])] = &[
    (
        "linear history",
        &[
            Write("s/a.yaml", "a: 1\n"),
            Write("README", "x\n"),
            Commit("one", 1_600_000_000),
            Check("s"),
            Write("s/a.yaml", "a: 2\n"),
            Commit("two", 1_600_000_100),
            Check("s"),
            Write("s/deep/b.yaml", "b\n"),
            Commit("three", 1_600_000_200),
            Check("s"),
            Check("s/deep"),
        ],
    ),
    (
        "folder untouched by the latest commits",
        &[
            Write("s/a.yaml", "a\n"),
            Commit("one", 1_600_000_000),
            Write("s/a.yaml", "b\n"),
            Commit("two", 1_600_000_100),
            Write("other/x", "1\n"),
            Commit("three", 1_600_000_200),
            Write("s2/a.yaml", "look-alike name\n"),
            Commit("four", 1_600_000_300),
            Commit("empty", 1_600_000_400),
            Check("s"),
            Answer("s", "two"),
        ],
    ),
    (
        "rename into the folder",
        &[
            Write("s/a.yaml", "a\n"),
            Write("elsewhere/b.yaml", "b\n"),
            Commit("base", 1_600_000_000),
            Write("x", "1\n"),
            Commit("unrelated", 1_600_000_100),
            Mv("elsewhere/b.yaml", "s/b.yaml"),
            Commit("rename into s", 1_600_000_200),
            Write("y", "1\n"),
            Commit("unrelated 2", 1_600_000_300),
            Check("s"),
            Answer("s", "rename into s"),
        ],
    ),
    (
        "file deleted and re-added",
        &[
            Write("s/a.yaml", "a\n"),
            Write("s/b.yaml", "b\n"),
            Commit("base", 1_600_000_000),
            Rm("s/b.yaml"),
            Commit("delete", 1_600_000_100),
            Check("s"),
            Answer("s", "delete"),
            Write("s/b.yaml", "b\n"),
            Commit("re-add", 1_600_000_200),
            Write("x", "1\n"),
            Commit("unrelated", 1_600_000_300),
            Check("s"),
            Answer("s", "re-add"),
        ],
    ),
    (
        "a mode-only change is the answer",
        &[
            Write("s/run.sh", "echo hi\n"),
            Commit("base", 1_600_000_000),
            Chmod("s/run.sh"),
            Commit("chmod", 1_600_000_100),
            Write("x", "1\n"),
            Commit("unrelated", 1_600_000_200),
            Check("s"),
            Answer("s", "chmod"),
        ],
    ),
    (
        "committer dates going backwards and author dates differing",
        &[
            Write("s/a.yaml", "a\n"),
            Commit("base", 1_700_000_000),
            Write("s/a.yaml", "b\n"),
            // Older committer date than its parent, and an author date far away.
            CommitAt("backwards", 1_500_000_000, 1_800_000_000),
            Write("x", "1\n"),
            CommitAt("unrelated", 1_400_000_000, 1_900_000_000),
            Check("s"),
            Answer("s", "backwards"),
        ],
    ),
];

#[test]
fn linear_histories_agree_with_git() {
    for (name, steps) in LINEAR {
        let r = Repo::new();
        let mut commits: Vec<(&str, String)> = Vec::new();
        for step in *steps {
            match *step {
                Write(path, content) => r.write(path, content),
                Rm(path) => {
                    r.git(&["rm", "-q", "-r", path]);
                }
                Mv(from, to) => {
                    r.git(&["mv", from, to]);
                }
                Chmod(path) => {
                    use std::os::unix::fs::PermissionsExt;
                    std::fs::set_permissions(
                        r.dir.join(path),
                        std::fs::Permissions::from_mode(0o755),
                    )
                    .expect("chmod");
                }
                Commit(msg, t) => commits.push((msg, r.commit_all(msg, t))),
                CommitAt(msg, ct, at) => commits.push((msg, r.commit_at(msg, ct, at))),
                Check(dir) => check(&r, &r.dir, dir),
                Answer(dir, msg) => {
                    let want = &commits
                        .iter()
                        .rev()
                        .find(|(m, _)| *m == msg)
                        .unwrap_or_else(|| panic!("{name}: no commit {msg:?}"))
                        .1;
                    assert_eq!(
                        tag_json(&r.dir, dir, &[])["commit"],
                        want.as_str(),
                        "{name}: {dir} was last changed by {msg:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn committer_time_not_author_time() {
    let r = Repo::new();
    r.write("s/a.yaml", "a\n");
    r.commit_all("base", 1_700_000_000);
    r.write("s/a.yaml", "b\n");
    r.commit_at("backwards", 1_500_000_000, 1_800_000_000);
    let v = tag_json(&r.dir, "s", &[]);
    assert_eq!(
        v["timestamp"], 1_500_000_000,
        "committer time, not author time"
    );
    assert_eq!(v["committed_at"], "2017-07-14T02:40:00Z");
}

#[test]
fn merge_where_only_the_side_branch_changes_the_folder() {
    let r = Repo::new();
    r.write("s/a.yaml", "a\n");
    r.commit_all("base", 1_600_000_000);
    r.git(&["checkout", "-q", "-b", "side"]);
    r.write("s/a.yaml", "side\n");
    let side = r.commit_all("side changes s", 1_600_000_100);
    r.git(&["checkout", "-q", "main"]);
    r.write("other", "main\n");
    r.commit_all("main changes other", 1_600_000_200);
    r.merge("side", 1_600_000_300, |_| {});
    check_all(&r);
    // TREESAME to the side parent: the answer is the side commit.
    assert_eq!(tag_json(&r.dir, "s", &[])["commit"], side.as_str());
}

#[test]
fn merge_where_only_main_changes_the_folder() {
    let r = Repo::new();
    r.write("s/a.yaml", "a\n");
    r.commit_all("base", 1_600_000_000);
    r.git(&["checkout", "-q", "-b", "side"]);
    r.write("other", "side\n");
    r.commit_all("side changes other", 1_600_000_300);
    r.git(&["checkout", "-q", "main"]);
    r.write("s/a.yaml", "main\n");
    let main = r.commit_all("main changes s", 1_600_000_100);
    r.merge("side", 1_600_000_400, |_| {});
    check_all(&r);
    assert_eq!(tag_json(&r.dir, "s", &[])["commit"], main.as_str());
}

#[test]
fn merge_where_both_sides_change_the_folder() {
    let r = Repo::new();
    r.write("s/a.yaml", "a\n");
    r.write("s/b.yaml", "b\n");
    r.commit_all("base", 1_600_000_000);
    r.git(&["checkout", "-q", "-b", "side"]);
    r.write("s/b.yaml", "side\n");
    r.commit_all("side changes b", 1_600_000_200);
    r.git(&["checkout", "-q", "main"]);
    r.write("s/a.yaml", "main\n");
    r.commit_all("main changes a", 1_600_000_100);
    let merge = r.merge("side", 1_600_000_300, |_| {});
    check_all(&r);
    // TREESAME to neither parent: the merge itself.
    assert_eq!(tag_json(&r.dir, "s", &[])["commit"], merge.as_str());
    // After the merge, a commit elsewhere changes nothing.
    r.write("other", "x\n");
    r.commit_all("later", 1_600_000_400);
    check_all(&r);
}

#[test]
fn merges_that_resolve_to_one_sides_content() {
    let r = Repo::new();
    r.write("s/a.yaml", "a\n");
    r.commit_all("base", 1_600_000_000);
    r.git(&["checkout", "-q", "-b", "side"]);
    r.write("s/a.yaml", "side\n");
    let side = r.commit_all("side", 1_600_000_100);
    r.git(&["checkout", "-q", "main"]);
    r.write("s/a.yaml", "main\n");
    let main = r.commit_all("main", 1_600_000_200);
    // Conflict resolved to the side's content: TREESAME to the second parent.
    r.merge("side", 1_600_000_300, |r| {
        r.git(&["checkout", "side", "--", "s"]);
    });
    check_all(&r);
    assert_eq!(tag_json(&r.dir, "s", &[])["commit"], side.as_str());

    // Another round resolved to main's content: TREESAME to the first parent.
    r.git(&["checkout", "-q", "side"]);
    r.write("s/a.yaml", "side 2\n");
    r.commit_all("side 2", 1_600_000_400);
    r.git(&["checkout", "-q", "main"]);
    r.merge("side", 1_600_000_500, |r| {
        r.git(&["checkout", "HEAD", "--", "s"]);
    });
    check_all(&r);
    assert_eq!(tag_json(&r.dir, "s", &[])["commit"], side.as_str());
    let _ = main;
}

#[test]
fn merge_where_both_sides_make_the_same_change() {
    let r = Repo::new();
    r.write("s/a.yaml", "a\n");
    r.commit_all("base", 1_600_000_000);
    r.git(&["checkout", "-q", "-b", "side"]);
    r.write("s/a.yaml", "same\n");
    r.commit_all("side", 1_600_000_300);
    r.git(&["checkout", "-q", "main"]);
    r.write("s/a.yaml", "same\n");
    r.write("x", "1\n");
    r.commit_all("main", 1_600_000_100);
    r.merge("side", 1_600_000_400, |_| {});
    // TREESAME to both parents: git follows the first.
    check_all(&r);
}

#[test]
fn folder_deleted_and_re_created() {
    let r = Repo::new();
    r.write("s/a.yaml", "a\n");
    r.commit_all("base", 1_600_000_000);
    r.git(&["rm", "-q", "-r", "s"]);
    r.write("x", "1\n");
    r.commit_all("delete s", 1_600_000_100);
    // Not in HEAD: an error that says so, never a commit.
    check(&r, &r.dir, "x");
    std::fs::create_dir_all(r.dir.join("s")).expect("mkdir");
    let out = run(&r.dir, &["tag", "--path", "s", "--prefix", "main"], &[]);
    // A folder not in HEAD has no tag.
    let err = failed(&out, 2, "s: is not in the HEAD commit");
    assert!(err.contains("\nhint: "), "{err}");
    r.write("s/a.yaml", "a\n");
    let recreated = r.commit_all("re-create s", 1_600_000_200);
    r.write("x", "2\n");
    r.commit_all("unrelated", 1_600_000_300);
    check_all(&r);
    assert_eq!(tag_json(&r.dir, "s", &[])["commit"], recreated.as_str());
}

#[test]
fn file_replaced_by_a_folder_and_a_symlink_named_as_the_folder() {
    let r = Repo::new();
    r.write("s", "a file named s\n");
    r.commit_all("file", 1_600_000_000);
    r.git(&["rm", "-q", "s"]);
    r.write("s/sub/a.yaml", "a\n");
    let folder = r.commit_all("folder", 1_600_000_100);
    r.write("x", "1\n");
    r.commit_all("unrelated", 1_600_000_200);
    check(&r, &r.dir, "s");
    check(&r, &r.dir, "s/sub");
    assert_eq!(tag_json(&r.dir, "s", &[])["commit"], folder.as_str());
    // A symlink to the folder: git names the link's own history.
    std::os::unix::fs::symlink("s", r.dir.join("link")).expect("symlink");
    let link = r.commit_all("link", 1_600_000_300);
    r.write("s/sub/a.yaml", "b\n");
    r.commit_all("change s", 1_600_000_400);
    check(&r, &r.dir, "link");
    assert_eq!(tag_json(&r.dir, "link", &[])["commit"], link.as_str());
    check(&r, &r.dir, "s");
}

#[test]
fn path_forms_and_working_directories() {
    let r = Repo::new();
    r.write("s/sub/a.yaml", "a\n");
    r.write("s/b.yaml", "b\n");
    r.write("t/c.yaml", "c\n");
    r.commit_all("base", 1_600_000_000);
    r.write("s/sub/a.yaml", "a2\n");
    r.commit_all("sub", 1_600_000_100);
    r.write("s/b.yaml", "b2\n");
    r.commit_all("s", 1_600_000_200);
    r.write("t/c.yaml", "c2\n");
    r.commit_all("t", 1_600_000_300);
    for form in ["s", "s/", "./s", "./s/", "s/sub/..", "s//"] {
        check(&r, &r.dir, form);
    }
    let abs = r.dir.join("s");
    check(&r, &r.dir, abs.to_str().expect("utf-8 path"));
    let sub = r.dir.join("s/sub");
    check(&r, &sub, ".");
    check(&r, &sub, "..");
    check(&r, &sub, "../sub");
    check(&r, &sub, "../../t");
    check(&r, &r.dir.join("t"), "../s/sub/");
    // The repository root itself.
    check(&r, &r.dir, ".");
    check(&r, &sub, "../..");
    // An absolute path from a cwd outside the repository.
    check_from(
        &r,
        &r.dir,
        Path::new("/"),
        abs.to_str().expect("utf-8 path"),
    );
    let v = tag_json(&sub, "./", &[]);
    assert_eq!(v["path"], "s/sub", "path is repository-relative");
    assert_eq!(tag_json(&r.dir, ".", &[])["path"], ".");
}

#[test]
fn long_prefixes_are_cut_to_a_valid_tag() {
    let r = Repo::new();
    r.write("s/a.yaml", "a\n");
    let id = r.commit_all("base", 1_600_000_000);
    let prefix = format!("release/{}", "v".repeat(200));
    let out = run(&r.dir, &["tag", "--path", "s", "--prefix", &prefix], &[]);
    let tag = ok(&out, "tag").trim().to_string();
    assert_eq!(tag.len(), 128);
    assert!(tag.starts_with("release-vvv"));
    assert!(tag.ends_with(&format!("-1600000000-{}", &id[..7])));
    let out = run(&r.dir, &["tag", "--path", "s", "--prefix", "/"], &[]);
    failed(&out, 2, "the tag prefix \"/\" has no usable characters");
}

// ---------------------------------------------------------------- shallow

/// The GitHub REST fixtures of the repository (tests/fixtures/github/rest).
fn fixtures() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/github/rest");
    assert!(
        dir.join("commit-items.json").is_file(),
        "GitHub REST fixtures not found: expected commit-items.json in {}",
        dir.display()
    );
    dir
}

/// The shared GitHub stub answering every request with `status` and `body`.
fn stub(status: u16, body: String) -> (String, github::Log) {
    github::stub(move |_| (status, body.clone()))
}

/// An origin repository whose latest commits do not touch `s`, and a
/// `--depth N` clone of it.
fn origin_and_clone(depth: u32, head_changes_s: bool) -> (Repo, PathBuf) {
    let r = Repo::new();
    r.write("s/a.yaml", "a\n");
    r.commit_all("one", 1_600_000_000);
    r.write("s/a.yaml", "a2\n");
    r.commit_all("two", 1_600_000_100);
    r.write("x", "1\n");
    r.commit_all("three", 1_600_000_200);
    if head_changes_s {
        r.write("s/b.yaml", "b\n");
    } else {
        r.write("x", "2\n");
    }
    r.commit_all("four", 1_600_000_300);
    let clone = r
        .dir
        .parent()
        .expect("parent")
        .join(format!("clone{depth}"));
    let url = format!("file://{}", r.dir.display());
    r.git_in(
        r.dir.parent().expect("parent"),
        &[
            "clone",
            "-q",
            "--depth",
            &depth.to_string(),
            &url,
            clone.to_str().expect("utf-8"),
        ],
    );
    assert!(clone.join(".git/shallow").is_file(), "the clone is shallow");
    (r, clone)
}

#[test]
fn shallow_clone_without_api_fails_clearly() {
    let (r, clone) = origin_and_clone(1, false);
    // Every refusal: exit 1 (a history failure), nothing on stdout, and
    // the error names the folder and the boundary commit and says what to
    // do; never an answer from the boundary commit.
    let boundary = r.git_in(&clone, &["rev-parse", "HEAD"]);
    let refused = |out: &Output, what: &str| {
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{what}: {err}");
        assert!(out.stdout.is_empty(), "{what}: printed {:?}", out.stdout);
        assert!(
            err.starts_with(&format!(
                "error: s: this is a shallow clone and its history ends at commit {boundary} before \
                 showing which commit last changed the folder\n"
            )),
            "{what}: {err}"
        );
        assert!(
            err.contains(
                "hint: check out the full history (actions/checkout with `fetch-depth: 0`), or set \
                 GITHUB_REPOSITORY and a token (GITHUB_TOKEN) so the GitHub API can answer"
            ),
            "{what}: {err}"
        );
    };
    let out = run(&clone, &["tag", "--path", "s", "--prefix", "main"], &[]);
    refused(&out, "tag");
    // A token alone (no GITHUB_REPOSITORY) is not enough either.
    let out = run(
        &clone,
        &["tag", "--path", "s", "--prefix", "main"],
        &[("GITHUB_TOKEN", "t0ken-abc")],
    );
    refused(&out, "a token without GITHUB_REPOSITORY");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("t0ken-abc"));
    // Nor a repository without a token.
    let out = run(
        &clone,
        &["tag", "--path", "s", "--prefix", "main"],
        &[("GITHUB_REPOSITORY", "o/r")],
    );
    refused(&out, "GITHUB_REPOSITORY without a token");
    // --source worktree still builds (from disk, without commit
    // annotations), saying why.
    let wt_layout = clone.parent().expect("parent").join("layout-wt");
    let (v, stderr) = build_json(
        &clone,
        &[
            "--path",
            "s",
            "--output",
            wt_layout.to_str().expect("utf-8"),
            "--source",
            "worktree",
        ],
        &[],
    );
    assert!(v.get("commit").is_none(), "{v}");
    assert!(
        stderr.contains("warning") && stderr.contains("shallow"),
        "{stderr}"
    );
    // And with a timestamp tag it cannot.
    let out = run(
        &clone,
        &[
            "build",
            "--path",
            "s",
            "--output",
            wt_layout.to_str().expect("utf-8"),
            "--source",
            "worktree",
            "--timestamp-tag",
            "main",
        ],
        &[],
    );
    refused(&out, "--source worktree --timestamp-tag");
    // Building from the commit needs the commit too.
    let layout = clone.parent().expect("parent").join("layout-shallow");
    let out = run(
        &clone,
        &[
            "build",
            "--path",
            "s",
            "--output",
            layout.to_str().expect("utf-8"),
        ],
        &[],
    );
    refused(&out, "build");
    assert!(
        !layout.exists(),
        "a refused build left {}",
        layout.display()
    );
}

#[test]
fn shallow_depth_two_with_head_changing_the_folder_needs_no_api() {
    let (r, clone) = origin_and_clone(2, true);
    let (id, ts) = r.last_change_in(&r.dir, "HEAD", "s");
    let v = tag_json(&clone, "s", &[]);
    assert_eq!(v["commit"], id.as_str());
    assert_eq!(v["timestamp"], ts);
    // depth 2 where HEAD does not change the folder: the parent is the
    // boundary, so there is no proof.
    let (_r2, clone2) = origin_and_clone(2, false);
    let out = run(&clone2, &["tag", "--path", "s", "--prefix", "main"], &[]);
    let err = failed(&out, 1, "shallow");
    assert!(err.contains("fetch-depth: 0"), "{err}");
}

#[test]
fn shallow_clone_asks_the_github_api() {
    let body = std::fs::read_to_string(fixtures().join("commit-items.json")).expect("fixture");
    let items: Value = serde_json::from_str(&body).expect("fixture JSON");
    let want_sha = items[0]["sha"].as_str().expect("sha").to_string();
    let (base, seen) = stub(200, body);
    let (r, clone) = origin_and_clone(1, false);
    let head = r.git(&["rev-parse", "HEAD"]).trim().to_string();
    let token = "ghs_t0kenNeverPrinted";
    let env = [
        ("GITHUB_API_URL", base.as_str()),
        ("GITHUB_REPOSITORY", "octo-org/settings"),
        ("GITHUB_TOKEN", token),
    ];
    let out = run(
        &clone,
        &["tag", "--path", "s/", "--prefix", "main", "--json"],
        &env,
    );
    let stdout = ok(&out, "tag via the API");
    let v: Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(v["commit"], want_sha.as_str());
    // 2011-04-14T16:00:49Z, the fixture's committer date.
    assert_eq!(v["timestamp"], 1_302_796_849);
    assert_eq!(v["committed_at"], "2011-04-14T16:00:49Z");
    assert_eq!(
        v["tag"],
        format!("main-1302796849-{}", &want_sha[..7]).as_str()
    );
    assert!(!stdout.contains(token));
    assert!(!String::from_utf8_lossy(&out.stderr).contains(token));

    let seen = seen.lock().expect("lock").clone();
    assert_eq!(seen.len(), 1, "one request: {seen:?}");
    let req = &seen[0];
    let target = req
        .request_line
        .strip_prefix("GET ")
        .and_then(|s| s.strip_suffix(" HTTP/1.1"))
        .expect("GET request");
    let (path, query) = target.split_once('?').expect("a query");
    assert_eq!(path, "/repos/octo-org/settings/commits");
    let mut params: Vec<&str> = query.split('&').collect();
    params.sort();
    let sha_param = format!("sha={head}");
    let mut want = vec!["path=s", "per_page=1", sha_param.as_str()];
    want.sort();
    assert_eq!(params, want);
    let auth = req.header("authorization").expect("Authorization header");
    assert!(
        auth == format!("Bearer {token}") || auth == format!("token {token}"),
        "Authorization: {auth}"
    );
}

#[test]
fn build_on_a_shallow_clone_reads_content_from_head() {
    let body = std::fs::read_to_string(fixtures().join("commit-items.json")).expect("fixture");
    let (base, _seen) = stub(200, body);
    let (r, clone) = origin_and_clone(1, false);
    let tmp = common::TempDir::new();
    let shallow_layout = tmp.path().join("shallow");
    let env = [
        ("GITHUB_API_URL", base.as_str()),
        ("GITHUB_REPOSITORY", "octo-org/settings"),
        ("GITHUB_TOKEN", "ghs_x"),
    ];
    let out = run(
        &clone,
        &[
            "build",
            "--path",
            "s",
            "--output",
            shallow_layout.to_str().expect("utf-8"),
            "--timestamp-tag",
            "main",
            "--json",
        ],
        &env,
    );
    let v: Value = serde_json::from_str(&ok(&out, "build via the API")).expect("json");
    assert_eq!(v["commit"], "6dcb09b5b57875f334f61aebed695e2e4193db5e");
    assert_eq!(v["timestamp_tag"], "main-1302796849-6dcb09b");
    let full_layout = tmp.path().join("full");
    let out = run(
        &r.dir,
        &[
            "build",
            "--path",
            "s",
            "--output",
            full_layout.to_str().expect("utf-8"),
            "--json",
        ],
        &[],
    );
    let full: Value = serde_json::from_str(&ok(&out, "build from full history")).expect("json");
    assert_eq!(
        v["layer"], full["layer"],
        "the shallow build holds HEAD's folder, which is the answer's folder"
    );
}

/// The fixture's list-commits answer with its first item's sha replaced.
fn items_naming(sha: &str) -> String {
    let body = std::fs::read_to_string(fixtures().join("commit-items.json")).expect("fixture");
    let mut items: Value = serde_json::from_str(&body).expect("fixture JSON");
    items[0]["sha"] = Value::from(sha);
    items.to_string()
}

#[test]
fn api_answers_are_checked_against_local_history() {
    // depth 1, HEAD changed the folder: GitHub names HEAD (the boundary,
    // present locally); the timestamp is HEAD's own committer time, not
    // the date in the answer.
    let (r, clone) = origin_and_clone(1, true);
    let head = r.git(&["rev-parse", "HEAD"]).trim().to_string();
    let (base, _seen) = stub(200, items_naming(&head));
    let env = [
        ("GITHUB_API_URL", base.as_str()),
        ("GITHUB_REPOSITORY", "o/r"),
        ("GITHUB_TOKEN", "ghs_x"),
    ];
    let v = tag_json(&clone, "s", &env);
    let (id, ts) = r.last_change_in(&r.dir, "HEAD", "s");
    assert_eq!(v["commit"], id.as_str());
    assert_eq!(v["timestamp"], ts);

    // depth 2, HEAD did not change the folder: HEAD was walked past, so an
    // answer naming it contradicts the local history.
    let (r, clone) = origin_and_clone(2, false);
    let head = r.git(&["rev-parse", "HEAD"]).trim().to_string();
    let (base, _seen) = stub(200, items_naming(&head));
    let env = [
        ("GITHUB_API_URL", base.as_str()),
        ("GITHUB_REPOSITORY", "o/r"),
        ("GITHUB_TOKEN", "ghs_x"),
    ];
    let out = run(&clone, &["tag", "--path", "s", "--prefix", "main"], &env);
    failed(&out, 1, "did not change the folder");
}

#[test]
fn github_api_errors_are_clear_and_never_show_the_token() {
    let (base, _seen) = stub(
        404,
        r#"{"message":"Not Found","documentation_url":"https://docs.github.com/rest"}"#.to_string(),
    );
    let (_r, clone) = origin_and_clone(1, false);
    let token = "ghs_secretSecret";
    let out = run(
        &clone,
        &["tag", "--path", "s", "--prefix", "main"],
        &[
            ("GITHUB_API_URL", base.as_str()),
            ("GITHUB_REPOSITORY", "o/r"),
            ("GITHUB_TOKEN", token),
        ],
    );
    let err = failed(&out, 1, "404");
    assert!(err.contains("fetch-depth: 0"), "{err}");
    assert!(!err.contains(token), "{err}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains(token));
}

#[test]
fn github_api_redirects_are_followed_only_within_the_api_host() {
    let body = std::fs::read_to_string(fixtures().join("commit-items.json")).expect("fixture");
    let want_sha = serde_json::from_str::<Value>(&body).expect("fixture JSON")[0]["sha"]
        .as_str()
        .expect("sha")
        .to_string();
    let token = "ghs_redirectedNever";
    // GitHub answers 301 for a renamed repository: within the API host, the
    // request is asked again there, with the token.
    let (base, seen) = github::stub_on("127.0.0.1", move |req| {
        if req.target().starts_with("/repos/o/old/") {
            let to = req
                .target()
                .replacen("/repos/o/old/", "/repositories/42/", 1);
            (301, vec![("Location".into(), to)], String::new())
        } else {
            (200, Vec::new(), body.clone())
        }
    });
    let (_r, clone) = origin_and_clone(1, false);
    let env = [
        ("GITHUB_API_URL", base.as_str()),
        ("GITHUB_REPOSITORY", "o/old"),
        ("GITHUB_TOKEN", token),
    ];
    let v = tag_json(&clone, "s", &env);
    assert_eq!(v["commit"], want_sha.as_str());
    let seen = seen.lock().expect("lock").clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(
        seen[1].target().starts_with("/repositories/42/commits?"),
        "{seen:?}"
    );
    assert_eq!(
        seen[1].header("authorization"),
        Some(format!("Bearer {token}").as_str())
    );

    // To another host: not followed, so the token stays with the API.
    let (other, other_seen) = github::stub_on("127.0.0.2", |_| (200, Vec::new(), "[]".to_string()));
    let (base, seen) = github::stub_on("127.0.0.1", move |req| {
        (
            307,
            vec![("Location".into(), format!("{other}{}", req.target()))],
            String::new(),
        )
    });
    let out = run(
        &clone,
        &["tag", "--path", "s", "--prefix", "main"],
        &[
            ("GITHUB_API_URL", base.as_str()),
            ("GITHUB_REPOSITORY", "o/r"),
            ("GITHUB_TOKEN", token),
        ],
    );
    let err = failed(&out, 1, "307");
    assert!(
        err.contains("a redirect to 127.0.0.2, not followed"),
        "{err}"
    );
    assert!(!err.contains(token), "{err}");
    assert_eq!(seen.lock().expect("lock").len(), 1);
    let reached = other_seen.lock().expect("lock").clone();
    assert!(reached.is_empty(), "the other host was asked: {reached:?}");
}

// ---------------------------------------------------------------- builds

fn layer_blob(layout: &Path, digest: &str) -> PathBuf {
    layout
        .join("blobs/sha256")
        .join(digest.strip_prefix("sha256:").expect("sha256 digest"))
}

fn tar_list(blob: &Path) -> Vec<String> {
    let out = Command::new("tar")
        .arg("-tvzf")
        .arg(blob)
        .output()
        .expect("tar must be installed");
    ok(&out, "tar -tvzf").lines().map(str::to_string).collect()
}

fn tar_cat(blob: &Path, member: &str) -> String {
    let out = Command::new("tar")
        .arg("-xOzf")
        .arg(blob)
        .arg(member)
        .output()
        .expect("tar must be installed");
    ok(&out, "tar -xOzf")
}

fn build_json(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> (Value, String) {
    let mut all = vec!["build"];
    all.extend_from_slice(args);
    all.push("--json");
    let out = run(cwd, &all, env);
    let v = serde_json::from_str(&ok(&out, &format!("build {args:?}"))).expect("json");
    (v, String::from_utf8_lossy(&out.stderr).into_owned())
}

fn manifest(layout: &Path, digest: &str) -> Value {
    serde_json::from_slice(&std::fs::read(layer_blob(layout, digest)).expect("manifest blob"))
        .expect("manifest JSON")
}

#[test]
fn image_holds_tracked_files_only_with_commit_annotations() {
    let r = Repo::new();
    r.write(".gitignore", "secrets.local.yaml\n");
    r.write("s/a.yaml", "committed\n");
    r.write("s/run.sh", "#!/bin/sh\n");
    r.commit_all("base", 1_600_000_000);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        r.dir.join("s/run.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .expect("chmod");
    let id = r.commit_all("exec", 1_600_000_100);
    assert!(
        r.git(&["ls-tree", "HEAD", "s/run.sh"])
            .starts_with("100755")
    );
    r.git(&[
        "remote",
        "add",
        "origin",
        "https://x-access-token:ghs_remoteSecret@github.com/octo-org/settings.git",
    ]);
    // What must not leak: ignored, untracked, uncommitted, and a mode that
    // is only on disk.
    r.write("s/secrets.local.yaml", "password: hunter2\n");
    r.write("s/untracked.yaml", "u\n");
    r.write("s/a.yaml", "edited on disk\n");
    std::fs::set_permissions(
        r.dir.join("s/run.sh"),
        std::fs::Permissions::from_mode(0o644),
    )
    .expect("chmod");

    let tmp = common::TempDir::new();
    let l1 = tmp.path().join("l1");
    let (v, stderr) = build_json(
        &r.dir,
        &[
            "--path",
            "s",
            "--output",
            l1.to_str().expect("utf-8"),
            "--timestamp-tag",
            "feature/x",
        ],
        &[],
    );
    assert!(!stderr.contains("warning"), "{stderr}");
    assert_eq!(v["commit"], id.as_str());
    assert_eq!(v["timestamp"], 1_600_000_100);
    let want_tag = format!("feature-x-1600000100-{}", &id[..7]);
    assert_eq!(v["timestamp_tag"], want_tag.as_str());
    assert!(
        v["tags"]
            .as_array()
            .expect("tags")
            .contains(&Value::from(want_tag.as_str()))
    );
    let blob = layer_blob(&l1, v["layer"]["digest"].as_str().expect("layer digest"));
    let list = tar_list(&blob);
    let names: Vec<&str> = list
        .iter()
        .map(|l| l.rsplit(' ').next().expect("name"))
        .collect();
    assert_eq!(names, ["a.yaml", "run.sh"], "{list:?}");
    assert!(
        list[1].starts_with("-rwxr-xr-x"),
        "mode from git: {}",
        list[1]
    );
    assert_eq!(tar_cat(&blob, "a.yaml"), "committed\n");

    let m = manifest(&l1, v["digest"].as_str().expect("digest"));
    let ann = &m["annotations"];
    assert_eq!(ann["org.opencontainers.image.revision"], id.as_str());
    assert_eq!(
        ann["org.opencontainers.image.created"],
        "2020-09-13T12:28:20Z"
    );
    assert_eq!(
        ann["org.opencontainers.image.created"],
        git_utc(&r, &id).as_str()
    );
    assert_eq!(
        ann["org.opencontainers.image.source"],
        "https://github.com/octo-org/settings"
    );
    let config: Value = serde_json::from_slice(
        &std::fs::read(layer_blob(
            &l1,
            m["config"]["digest"].as_str().expect("config"),
        ))
        .expect("config blob"),
    )
    .expect("config JSON");
    assert_eq!(
        config["config"]["Labels"]["org.opencontainers.image.source"],
        "https://github.com/octo-org/settings"
    );
    let everything = format!("{}{}", serde_json::to_string(&m).expect("m"), config);
    assert!(!everything.contains("ghs_remoteSecret"));

    // The same commit builds the same digest, days later or not.
    let l2 = tmp.path().join("l2");
    let (v2, _) = build_json(
        &r.dir,
        &["--path", "./s/", "--output", l2.to_str().expect("utf-8")],
        &[],
    );
    assert_eq!(v2["digest"], v["digest"]);

    // GitHub Actions' variables name the source when set.
    let l3 = tmp.path().join("l3");
    let (v3, _) = build_json(
        &r.dir,
        &["--path", "s", "--output", l3.to_str().expect("utf-8")],
        &[
            ("GITHUB_SERVER_URL", "https://github.com"),
            ("GITHUB_REPOSITORY", "other/repo"),
        ],
    );
    let m3 = manifest(&l3, v3["digest"].as_str().expect("digest"));
    assert_eq!(
        m3["annotations"]["org.opencontainers.image.source"],
        "https://github.com/other/repo"
    );

    // --source worktree packages the disk, and warns that it differs.
    let l4 = tmp.path().join("l4");
    let (v4, stderr) = build_json(
        &r.dir,
        &[
            "--path",
            "s",
            "--output",
            l4.to_str().expect("utf-8"),
            "--source",
            "worktree",
        ],
        &[],
    );
    assert!(
        stderr.contains("warning") && stderr.contains("differs"),
        "{stderr}"
    );
    let list4 = tar_list(&layer_blob(
        &l4,
        v4["layer"]["digest"].as_str().expect("layer"),
    ));
    assert!(
        list4.iter().any(|l| l.ends_with("secrets.local.yaml")),
        "{list4:?}"
    );
    assert!(
        list4.iter().any(|l| l.ends_with("untracked.yaml")),
        "{list4:?}"
    );
}

#[test]
fn worktree_source_equal_to_the_commit_gives_the_same_image_without_warning() {
    let r = Repo::new();
    r.write("s/a.yaml", "a\n");
    r.write("s/d/b.yaml", "b\n");
    r.commit_all("base", 1_600_000_000);
    let tmp = common::TempDir::new();
    let (a, stderr_a) = build_json(
        &r.dir,
        &[
            "--path",
            "s",
            "--output",
            tmp.path().join("a").to_str().expect("utf-8"),
        ],
        &[],
    );
    let (b, stderr_b) = build_json(
        &r.dir,
        &[
            "--path",
            "s",
            "--output",
            tmp.path().join("b").to_str().expect("utf-8"),
            "--source",
            "worktree",
        ],
        &[],
    );
    assert!(
        !stderr_a.contains("warning") && !stderr_b.contains("warning"),
        "{stderr_a}{stderr_b}"
    );
    assert_eq!(a["digest"], b["digest"]);
    // A single changed byte is noticed.
    r.write("s/d/b.yaml", "c\n");
    let (_, stderr) = build_json(
        &r.dir,
        &[
            "--path",
            "s",
            "--output",
            tmp.path().join("c").to_str().expect("utf-8"),
            "--source",
            "worktree",
        ],
        &[],
    );
    assert!(stderr.contains("d/b.yaml differs"), "{stderr}");
}

#[test]
fn outside_git_the_worktree_is_used_and_timestamp_tags_are_refused() {
    let tmp = common::TempDir::new();
    // tempdir lives outside any repository; prove it.
    let probe = git_cmd(tmp.path(), tmp.path())
        .args(["rev-parse", "--git-dir"])
        .output()
        .expect("git");
    assert!(
        !probe.status.success(),
        "the temp dir must not be inside a git repository"
    );
    let s = tmp.path().join("s");
    std::fs::create_dir_all(&s).expect("mkdir");
    std::fs::write(s.join("a.yaml"), "a\n").expect("write");
    let out_dir = tmp.path().join("out");
    let (v, _) = build_json(
        tmp.path(),
        &["--path", "s", "--output", out_dir.to_str().expect("utf-8")],
        &[],
    );
    assert!(v.get("commit").is_none());
    let m = manifest(&out_dir, v["digest"].as_str().expect("digest"));
    assert!(
        m.get("annotations").is_none(),
        "no commit, no annotations: {m}"
    );
    let out = run(
        tmp.path(),
        &[
            "build",
            "--path",
            "s",
            "--output",
            out_dir.to_str().expect("utf-8"),
            "--timestamp-tag",
            "main",
        ],
        &[],
    );
    failed(&out, 2, "not inside a git repository");
    let out = run(tmp.path(), &["tag", "--path", "s", "--prefix", "main"], &[]);
    failed(&out, 2, "not inside a git repository");
}

/// README: "the same commit always yields the same digest" wherever it is
/// built from. The one input a clone decides is the source URL the image
/// records; it is normalized (ssh or https, credentials, the scheme's port,
/// the host's case, `.git`, doubled slashes), so a laptop's clone over ssh,
/// one over https with a token, the GitHub action (its variables, no
/// `origin`), and a mirror or a clone without `origin` given
/// `--source-url` all build one digest. `--source-url none` leaves it out
/// (the digest of a clone without `origin`); a mirror on another host
/// without the flag records its own URL, another digest, as
/// docs/format.md says.
#[test]
fn one_commit_gives_one_digest_from_every_clone_of_the_repository() {
    let r = Repo::new();
    r.write("s/a.yaml", "a: 1\n");
    r.commit_all("base", 1_600_000_000);
    let tmp = common::TempDir::new();
    let clone = |name: &str, origin: Option<&str>| -> PathBuf {
        let dir = tmp.path().join(name);
        r.git(&[
            "clone",
            "-q",
            r.dir.to_str().expect("utf-8"),
            dir.to_str().expect("utf-8"),
        ]);
        match origin {
            Some(url) => r.git_in(&dir, &["remote", "set-url", "origin", url]),
            None => r.git_in(&dir, &["remote", "remove", "origin"]),
        };
        dir
    };
    let built = |dir: &Path, extra: &[&str], env: &[(&str, &str)]| -> (String, Value) {
        let out = tmp.path().join(format!("out-{}", next_id()));
        let mut args = vec!["--path", "s", "--output", out.to_str().expect("utf-8")];
        args.extend_from_slice(extra);
        let (v, _) = build_json(dir, &args, env);
        let digest = v["digest"].as_str().expect("digest").to_string();
        let m = manifest(&out, &digest);
        (
            digest,
            m["annotations"]["org.opencontainers.image.source"].clone(),
        )
    };
    let github = "https://github.com/acme/settings";
    let laptop = clone("laptop", Some("git@github.com:acme/settings.git"));
    let token = clone(
        "token",
        Some("https://x-access-token:ghs_T0ken@GitHub.com:443//acme/settings.git/"),
    );
    let action = clone("action", None);
    let mirror = clone("mirror", Some("http://127.0.0.1:8080/settings.git"));
    let bare = clone("bare", None);
    let (want, source) = built(&laptop, &[], &[]);
    assert_eq!(source, github);
    for (dir, extra, env) in [
        (&token, &[][..], &[][..]),
        (
            &action,
            &[],
            &[
                ("GITHUB_SERVER_URL", "https://github.com"),
                ("GITHUB_REPOSITORY", "acme/settings"),
            ][..],
        ),
        (
            &mirror,
            &["--source-url", "git@github.com:acme/settings.git"],
            &[],
        ),
        (
            &bare,
            &["--source-url", "https://github.com/acme/settings"],
            &[],
        ),
    ] {
        assert_eq!(
            built(dir, extra, env),
            (want.clone(), Value::from(github)),
            "{}",
            dir.display()
        );
    }
    // Left out: the same digest from any clone, and a clone without origin's.
    let (none, source) = built(&laptop, &["--source-url", "none"], &[]);
    assert_eq!(source, Value::Null);
    assert_ne!(none, want);
    assert_eq!(built(&mirror, &["--source-url", "none"], &[]).0, none);
    assert_eq!(built(&bare, &[], &[]).0, none);
    // A mirror on another host, no flag: its own URL, its own digest.
    let (other, source) = built(&mirror, &[], &[]);
    assert_eq!(source, "https://127.0.0.1:8080/settings");
    assert!(other != want && other != none);
    // Not a repository URL: exit 2, naming the flag, nothing written.
    let out = run(
        &laptop,
        &[
            "build",
            "--path",
            "s",
            "--output",
            tmp.path().join("bad").to_str().expect("utf-8"),
            "--source-url",
            "/srv/settings",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("error: --source-url \"/srv/settings\" is not a repository URL\nhint: "),
        "{err}"
    );
    assert!(!tmp.path().join("bad").exists());
}

/// A name no other call in this process gives.
fn next_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// A commit whose folder nests 20,000 trees (a few kilobytes of pack) is
/// refused by name, exit 2, where the recursive walk overflowed its stack
/// (SIGABRT, exit 134); a folder at the bound (a file 2048 path
/// components deep) still builds, and the image holds that file.
#[test]
fn a_folder_nested_past_the_depth_bound_is_refused_by_name() {
    let r = Repo::new();
    let tmp = common::TempDir::new();
    let build = |out: &str| {
        run(
            &r.dir,
            &[
                "build",
                "--path",
                "s",
                "--source",
                "commit",
                "--json",
                "--output",
                tmp.path().join(out).to_str().expect("utf-8"),
            ],
            &[],
        )
    };
    // 2047 folders and the file: 2048 components.
    common::git::commit_nested(&r.home, &r.dir, "s", 2047, 1_600_000_000);
    let out = build("at-bound");
    let v: Value = serde_json::from_str(&ok(&out, "build at the bound")).expect("json");
    let deep = format!("{}deep.yaml", "a/".repeat(2047));
    let blob = layer_blob(
        &tmp.path().join("at-bound"),
        v["layer"]["digest"].as_str().expect("layer"),
    );
    assert_eq!(tar_cat(&blob, &deep), "deep: 1\n");
    for (levels, out) in [(2048, "past"), (20_000, "far")] {
        let commit = common::git::commit_nested(&r.home, &r.dir, "s", levels, 1_600_000_100);
        let run = build(out);
        let err = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{levels} levels: {err}");
        assert_eq!(
            err.lines().next().expect("an error line"),
            format!(
                "error: s: holds a folder nested more than 2048 levels deep in commit {commit} \
                 ({}...): 2048 levels is the most a settings image holds, as no deeper path fits \
                 Linux's PATH_MAX of 4096 bytes",
                "a/".repeat(30)
            ),
            "{levels} levels"
        );
        assert!(!tmp.path().join(out).join("index.json").exists());
    }
}

#[test]
fn submodules_and_escaping_symlinks_in_the_commit_are_errors() {
    let r = Repo::new();
    r.write("s/a.yaml", "a\n");
    let id = r.commit_all("base", 1_600_000_000);
    r.git(&[
        "update-index",
        "--add",
        "--cacheinfo",
        &format!("160000,{id},s/vendor"),
    ]);
    r.commit_staged("gitlink", 1_600_000_100, 1_600_000_100);
    assert!(r.git(&["ls-tree", "-r", "HEAD"]).contains("160000 commit"));
    let tmp = common::TempDir::new();
    let out = run(
        &r.dir,
        &[
            "build",
            "--path",
            "s",
            "--output",
            tmp.path().join("x").to_str().expect("utf-8"),
        ],
        &[],
    );
    let err = failed(&out, 2, "vendor");
    assert!(err.contains("submodule"), "{err}");

    let r = Repo::new();
    r.write("s/a.yaml", "a\n");
    std::os::unix::fs::symlink("a.yaml", r.dir.join("s/ok")).expect("symlink");
    r.commit_all("base", 1_600_000_000);
    let (v, _) = build_json(
        &r.dir,
        &[
            "--path",
            "s",
            "--output",
            tmp.path().join("y").to_str().expect("utf-8"),
        ],
        &[],
    );
    let list = tar_list(&layer_blob(
        &tmp.path().join("y"),
        v["layer"]["digest"].as_str().expect("layer"),
    ));
    assert!(
        list.iter()
            .any(|l| l.starts_with('l') && l.ends_with("ok -> a.yaml")),
        "{list:?}"
    );
    std::os::unix::fs::symlink("../../etc/passwd", r.dir.join("s/bad")).expect("symlink");
    r.commit_all("bad link", 1_600_000_100);
    let out = run(
        &r.dir,
        &[
            "build",
            "--path",
            "s",
            "--output",
            tmp.path().join("z").to_str().expect("utf-8"),
        ],
        &[],
    );
    let err = failed(&out, 2, "bad");
    assert!(err.contains("leaves the folder"), "{err}");
}

#[test]
fn repository_owned_by_another_uid() {
    let uid = Command::new("id").arg("-u").output().expect("id");
    assert_eq!(
        ok(&uid, "id -u").trim(),
        "0",
        "this test needs root to chown a repository to another uid (CI and dev machines run as root)"
    );
    let r = Repo::new();
    r.write("s/a.yaml", "a\n");
    // Larger than gitoxide's default allocation limit for repositories it
    // does not fully trust (16 MiB): must still be read.
    let big: String = (0..20 * 1024 * 1024 / 32)
        .map(|i| format!("{i:031}\n"))
        .collect();
    r.write("s/big.txt", &big);
    r.commit_all("one", 1_600_000_000);
    r.write("x", "1\n");
    r.commit_all("two", 1_600_000_100);
    r.git(&["gc", "-q"]);
    r.git(&[
        "remote",
        "add",
        "origin",
        "git@github.com:octo-org/settings.git",
    ]);
    let (id, ts) = r.last_change_in(&r.dir, "HEAD", "s");
    let copy = r.dir.parent().expect("parent").join("foreign");
    let out = Command::new("cp")
        .arg("-a")
        .arg(&r.dir)
        .arg(&copy)
        .output()
        .expect("cp");
    ok(&out, "cp -a");
    let out = Command::new("chown")
        .args(["-R", "1001:1001"])
        .arg(&copy)
        .output()
        .expect("chown");
    ok(&out, "chown");
    // git itself refuses it: the test is meaningful.
    let refused = git_cmd(&r.home, &copy)
        .args(["log", "-1", "--format=%H", "--", "s"])
        .output()
        .expect("git");
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("dubious ownership"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    let v = tag_json(&copy, "s", &[]);
    assert_eq!(v["commit"], id.as_str());
    assert_eq!(v["timestamp"], ts);
    let tmp = common::TempDir::new();
    let layout = tmp.path().join("l");
    let (b, _) = build_json(
        &copy,
        &[
            "--path",
            "s",
            "--output",
            layout.to_str().expect("utf-8"),
            "--timestamp-tag",
            "main",
        ],
        &[],
    );
    assert_eq!(b["commit"], id.as_str());
    let m = manifest(&layout, b["digest"].as_str().expect("digest"));
    assert_eq!(
        m["annotations"]["org.opencontainers.image.source"],
        "https://github.com/octo-org/settings"
    );
    let blob = layer_blob(&layout, b["layer"]["digest"].as_str().expect("layer"));
    let list = tar_list(&blob);
    assert_eq!(list.len(), 2, "{list:?}");
    assert!(tar_cat(&blob, "big.txt") == big, "the big file is intact");
}

// ---------------------------------------------------------------- random

/// Random histories with three branches, criss-cross merges resolved by
/// either side, repeated contents (so both sides can make the same change)
/// and committer dates jumping back and forth: after every step, the
/// answer must equal git's for several folders.
#[test]
fn random_histories_agree_with_git() {
    const FILES: [&str; 5] = ["s/a", "s/b", "s/sub/c", "t/d", "other"];
    const BRANCHES: [&str; 3] = ["main", "side", "third"];
    for seed in [0x9e37_79b9_7f4a_7c15_u64, 42, 7_777_777] {
        let mut rng = Rng(seed);
        let r = Repo::new();
        for f in FILES {
            r.write(f, "v0\n");
        }
        let mut t: i64 = 1_600_000_000;
        r.commit_all("root", t);
        r.git(&["branch", "side"]);
        r.git(&["branch", "third"]);
        let mut current = "main";
        for step in 0..36 {
            t += rng.below(2000) as i64 - 700;
            let branch = BRANCHES[rng.below(3) as usize];
            if branch != current {
                r.git(&["checkout", "-q", branch]);
                current = branch;
            }
            if rng.below(3) == 0 {
                let other = BRANCHES[rng.below(3) as usize];
                if other == current {
                    continue;
                }
                let strategy = ["-Xtheirs", "-Xours", "-sours"][rng.below(3) as usize];
                let out = git_cmd(&r.home, &r.dir)
                    .args(["merge", "-q", "--no-ff", "--no-commit", strategy, other])
                    .output()
                    .expect("git merge");
                ok(
                    &out,
                    &format!("seed {seed} step {step}: merge {strategy} {other}"),
                );
                r.commit_all(&format!("merge {other} into {current} ({strategy})"), t);
            } else {
                for _ in 0..=rng.below(2) {
                    let f = FILES[rng.below(FILES.len() as u64) as usize];
                    r.write(f, format!("v{}\n", rng.below(4)));
                }
                r.commit_all(&format!("step {step} on {current}"), t);
            }
            for dir in ["s", "s/sub", "t"] {
                let (id, ts) = r.last_change_in(&r.dir, "HEAD", dir);
                let v = tag_json(&r.dir, dir, &[]);
                assert_eq!(
                    (
                        v["commit"].as_str().unwrap_or(""),
                        v["timestamp"].as_i64().unwrap_or(-1)
                    ),
                    (id.as_str(), ts),
                    "seed {seed} step {step} dir {dir}:\n{}",
                    r.git(&["log", "--graph", "--format=%h %ct %s", "--all"])
                );
            }
        }
    }
}

#[test]
fn linked_worktrees_read_their_own_head() {
    let r = Repo::new();
    r.write("s/a.yaml", "a\n");
    r.commit_all("one", 1_600_000_000);
    r.git(&["branch", "other"]);
    r.write("s/a.yaml", "main\n");
    r.commit_all("main changes s", 1_600_000_100);
    let wt = r.dir.parent().expect("parent").join("linked");
    r.git(&[
        "worktree",
        "add",
        "-q",
        wt.to_str().expect("utf-8"),
        "other",
    ]);
    assert!(
        wt.join(".git").is_file(),
        "a linked worktree has a .git file"
    );
    check(&r, &wt, "s");
    let (id, _) = r.last_change_in(&wt, "HEAD", "s");
    let (main_id, _) = r.last_change_in(&r.dir, "HEAD", "s");
    assert_ne!(id, main_id, "each worktree answers for its own HEAD");
    let tmp = common::TempDir::new();
    let layout = tmp.path().join("l");
    let (v, _) = build_json(
        &wt,
        &["--path", "s", "--output", layout.to_str().expect("utf-8")],
        &[],
    );
    let blob = layer_blob(&layout, v["layer"]["digest"].as_str().expect("layer"));
    assert_eq!(tar_cat(&blob, "a.yaml"), "a\n");
}

// ---------------------------------------------------------------- revisions

#[test]
fn a_revision_is_walked_from_like_git_log_rev() {
    let r = Repo::new();
    r.write("s/a.yaml", "a\n");
    r.commit_all("base", 1_600_000_000);
    r.git(&["checkout", "-q", "-b", "side"]);
    r.write("s/a.yaml", "side\n");
    let side = r.commit_all("side changes s", 1_600_000_100);
    r.write("x", "1\n");
    let side_tip = r.commit_all("side changes x", 1_600_000_150);
    r.git(&["checkout", "-q", "main"]);
    r.write("s/b.yaml", "main\n");
    r.commit_all("main adds b", 1_600_000_200);
    let merge = r.merge("side", 1_600_000_300, |_| {});
    // HEAD (the merge, like a pull request's merge commit) names itself.
    assert_eq!(tag_json(&r.dir, "s", &[])["commit"], merge.as_str());
    for rev in [side_tip.as_str(), "side", "refs/heads/side"] {
        let line = r.git(&["log", "-1", "--format=%H %ct", rev, "--", "s"]);
        let (want, ts) = line.trim().split_once(' ').expect("git log");
        assert_eq!(want, side, "the oracle for {rev}");
        let out = run(
            &r.dir,
            &[
                "tag",
                "--path",
                "s",
                "--prefix",
                "pr",
                "--revision",
                rev,
                "--json",
            ],
            &[],
        );
        let v: Value = serde_json::from_str(&ok(&out, "tag --revision")).expect("json");
        assert_eq!(v["commit"], side.as_str(), "--revision {rev}");
        assert_eq!(v["tag"], format!("pr-{ts}-{}", &side[..7]).as_str());
    }
    // The content comes from the revision too: side's a.yaml, no b.yaml.
    let tmp = common::TempDir::new();
    let layout = tmp.path().join("layout");
    let out = run(
        &r.dir,
        &[
            "build",
            "--path",
            "s",
            "--output",
            layout.to_str().expect("utf-8"),
            "--revision",
            "side",
            "--timestamp-tag",
            "pr",
            "--json",
        ],
        &[],
    );
    let v: Value = serde_json::from_str(&ok(&out, "build --revision")).expect("json");
    assert_eq!(v["commit"], side.as_str());
    let blob = layer_blob(&layout, v["layer"]["digest"].as_str().expect("digest"));
    let list = tar_list(&blob).join("\n");
    assert!(
        list.contains("a.yaml") && !list.contains("b.yaml"),
        "{list}"
    );
    assert_eq!(tar_cat(&blob, "a.yaml"), "side\n");
    // A revision the clone does not have fails and says how to fetch it.
    for rev in ["0123456789abcdef0123456789abcdef01234567", "no-such-branch"] {
        let out = run(
            &r.dir,
            &["tag", "--path", "s", "--prefix", "pr", "--revision", rev],
            &[],
        );
        let err = failed(&out, 1, &format!("the revision {rev} is not in this clone"));
        assert!(err.contains("fetch-depth: 0"), "{err}");
    }
}

#[test]
fn a_shallow_revision_asks_the_github_api_from_that_revision() {
    let body = std::fs::read_to_string(fixtures().join("commit-items.json")).expect("fixture");
    let (base, seen) = stub(200, body);
    // depth 2: HEAD ("four") and its parent ("three"), whose parents are cut.
    let (_r, clone) = origin_and_clone(2, false);
    let rev = git_cmd(&clone, &clone)
        .args(["rev-parse", "HEAD~1"])
        .output()
        .expect("git rev-parse");
    let rev = ok(&rev, "git rev-parse").trim().to_string();
    let env = [
        ("GITHUB_API_URL", base.as_str()),
        ("GITHUB_REPOSITORY", "octo-org/settings"),
        ("GITHUB_TOKEN", "ghs_x"),
    ];
    let out = run(
        &clone,
        &[
            "tag",
            "--path",
            "s",
            "--prefix",
            "pr",
            "--revision",
            &rev,
            "--json",
        ],
        &env,
    );
    let v: Value = serde_json::from_str(&ok(&out, "tag --revision via the API")).expect("json");
    assert_eq!(v["commit"], "6dcb09b5b57875f334f61aebed695e2e4193db5e");
    let seen = seen.lock().expect("lock").clone();
    assert_eq!(seen.len(), 1, "one request: {seen:?}");
    assert!(
        seen[0].request_line.contains(&format!("sha={rev}")),
        "the API is asked from the revision, not HEAD: {}",
        seen[0].request_line
    );
}
