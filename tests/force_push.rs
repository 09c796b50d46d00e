//! Forward-only under force-pushes, as GitHub runs it: `settings-image
//! action` with the runner's inputs (action.yml's defaults), a real
//! `docker-registry` on loopback, and push events made from the real
//! payload `tests/fixtures/github/push/branch-push-1-commit.octokit-webhooks-js.json`
//! with the fields a forced push sets (`forced: true`, `before`, `after`,
//! `commits: []`, `head_commit.id`).
//!
//! The checkout is what actions/checkout leaves after a force-push: a fresh
//! clone of the rewritten branch, so the dropped commit is not in it. GitHub
//! still knows it, and its compare API is played by a loopback stub that
//! asks git in the origin repository (which keeps the dropped objects).
//!
//! Each scenario asserts the anomaly (output and annotation level and
//! text), the branch tag (output and what the registry holds), and Flux's
//! pick (tests/common/flux.rs, independent of the crate).

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::cmd::TestCommand;
use common::registry::{Auth, Registry};
use common::runner::{Runner, Step};
use serde_json::Value;

const DIR: &str = "configs/shop";
const GH_REPOSITORY: &str = "acme/settings";
const TOKEN: &str = "ghs_F0rcedPushT0kenNeverPrinted";

/// The settings repository on "GitHub": the origin every run clones.
struct Origin {
    tmp: common::TempDir,
    dir: PathBuf,
}

fn git_in(home: &Path, cwd: &Path, args: &[&str], time: Option<i64>) -> String {
    common::git::run(&mut common::git::git_cmd(home, cwd), args, time)
}

impl Origin {
    fn new() -> Origin {
        let tmp = common::TempDir::new();
        let dir = tmp.path().join("origin");
        std::fs::create_dir_all(tmp.path().join("home")).expect("home");
        std::fs::create_dir_all(dir.join(DIR)).expect("dir");
        let o = Origin { tmp, dir };
        o.git(&["init", "-q", "-b", "main"], None);
        o
    }

    fn home(&self) -> PathBuf {
        self.tmp.path().join("home")
    }

    fn git(&self, args: &[&str], time: Option<i64>) -> String {
        git_in(&self.home(), &self.dir, args, time)
    }

    /// Commits `app.yaml` with `content` at committer time `t`.
    fn change(&self, content: &str, t: i64) -> String {
        std::fs::write(self.dir.join(DIR).join("app.yaml"), content).expect("write");
        self.git(&["add", "-A"], None);
        self.git(&["commit", "-q", "-m", content.trim()], Some(t));
        self.git(&["rev-parse", "HEAD"], None)
    }

    /// The force-push: the branch now names `commit`; the dropped commits
    /// stay in the object store, as on GitHub.
    fn force_to(&self, commit: &str) {
        self.git(&["reset", "-q", "--hard", commit], None);
    }

    /// What actions/checkout leaves with `fetch-depth: 0`: a fresh clone of
    /// the branch as it is now.
    fn checkout(&self, name: &str) -> PathBuf {
        let p = self.tmp.path().join(name);
        self.git(
            &[
                "clone",
                "-q",
                &format!("file://{}", self.dir.display()),
                p.to_str().expect("utf-8"),
            ],
            None,
        );
        p
    }

    /// Whether the clone at `ws` has `commit` (a dropped one must not).
    fn has(&self, ws: &Path, commit: &str) -> bool {
        Command::new("git")
            .current_dir(ws)
            .env("HOME", self.home())
            .args(["cat-file", "-e", &format!("{commit}^{{commit}}")])
            .stderr(std::process::Stdio::null())
            .status()
            .expect("git")
            .success()
    }
}

/// A `push` event payload: the real one with `before`/`after`, the ref, and
/// for a forced push `forced: true` and `commits: []`.
fn payload(dir: &Path, name: &str, before: &str, after: &str, forced: bool) -> PathBuf {
    let real = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/github/push/branch-push-1-commit.octokit-webhooks-js.json");
    let text = std::fs::read_to_string(&real).expect("the real push payload");
    let mut v: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(v["forced"], false, "the fixture is a normal push");
    v["ref"] = "refs/heads/main".into();
    v["before"] = before.into();
    v["after"] = after.into();
    v["head_commit"]["id"] = after.into();
    if forced {
        v["forced"] = true.into();
        v["commits"] = Value::Array(Vec::new());
    }
    let p = dir.join(format!("{name}.json"));
    std::fs::write(&p, v.to_string()).expect("write payload");
    p
}

/// GitHub's compare API for the origin, played by git in it (it keeps the
/// dropped commits, as GitHub does). Returns the API base URL and the
/// pairs asked.
fn compare_api(origin: &Origin) -> (String, common::github::Asked) {
    let (dir, home) = (origin.dir.clone(), origin.home());
    let is_ancestor = move |a: &str, d: &str| {
        Command::new("git")
            .current_dir(&dir)
            .env("HOME", &home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .args(["merge-base", "--is-ancestor", a, d])
            .stderr(std::process::Stdio::null())
            .status()
            .expect("git")
            .success()
    };
    common::github::compare_api(GH_REPOSITORY, move |base, head| {
        if base == head {
            "identical"
        } else if is_ancestor(base, head) {
            "ahead"
        } else if is_ancestor(head, base) {
            "behind"
        } else {
            "diverged"
        }
    })
}

/// Runs `settings-image action` in checkout `ws` for the push event at
/// `event`, with `api` as GitHub's API and [`TOKEN`] as the job token,
/// which never shows.
fn run_action(ws: &Path, event: &Path, api: &str, with: &[(&str, &str)]) -> Step {
    let mut runner = Runner::on_push(common::TempDir::new(), ws.to_path_buf());
    runner.repository = GH_REPOSITORY.into();
    runner.github_token = TOKEN.into();
    runner.run_id = "77".into();
    runner.api_url = api.into();
    runner.event_path = event.to_path_buf();
    let step = runner.run(with);
    step.assert_masked(TOKEN);
    step
}

/// The tag Flux serves for the prefix `main` (tests/common/flux.rs).
fn flux_pick(tags: &BTreeSet<String>) -> String {
    common::flux::served("main", tags).expect("a timestamp tag of main")
}

fn tag_of(ts: i64, commit: &str) -> String {
    format!("main-{ts}-{}", &commit[..7])
}

#[test]
fn a_force_push_back_to_an_ancestor_is_a_rewound_history_warning_not_a_rerun() {
    let reg = Registry::start(Auth::None);
    let name = "acme/rewind";
    let repository = format!("{}/{name}", reg.host());
    let origin = Origin::new();
    let (api, asked) = compare_api(&origin);
    let events = common::TempDir::new();
    let with = [
        ("path", DIR),
        ("repository", repository.as_str()),
        ("timestamp-tag", "main"),
        ("branch-tag", "main"),
    ];
    let zero = "0".repeat(40);
    // A (t=100) and B (t=200), each published by its own normal push.
    let a = origin.change("replicas: 1\n", 1_700_000_100);
    let ws = origin.checkout("run-a");
    let first = run_action(
        &ws,
        &payload(events.path(), "a", &zero, &a, false),
        &api,
        &with,
    );
    assert_eq!(first.ok().out("branch-tag"), "created");
    let b = origin.change("replicas: 9\n", 1_700_000_200);
    let ws = origin.checkout("run-b");
    let second = run_action(
        &ws,
        &payload(events.path(), "b", &a, &b, false),
        &api,
        &with,
    );
    assert_eq!(second.ok().out("branch-tag"), "moved");
    assert_eq!(second.out("anomaly"), "");

    // `git push --force origin A:main`: the branch loses B.
    origin.force_to(&a);
    let ws = origin.checkout("run-forced");
    assert!(!origin.has(&ws, &b), "B is gone from the fresh checkout");
    let forced = payload(events.path(), "forced", &b, &a, true);
    let step = run_action(&ws, &forced, &api, &with);
    step.ok();
    // B is not in the checkout: GitHub ordered A against it.
    assert!(
        asked
            .lock()
            .expect("lock")
            .contains(&(a.clone(), b.clone())),
        "{asked:?}"
    );
    let all = tags(&reg, name);
    // Flux keeps serving B's content: its tag has the higher number.
    let pick = flux_pick(&all);
    assert_eq!(pick, tag_of(1_700_000_200, &b));
    assert_eq!(step.out("anomaly"), "rewound-history");
    assert_eq!(step.out("tag"), tag_of(1_700_000_100, &a));
    // A's tag was already there; the branch tag moved (below).
    assert_eq!(step.out("pushed"), "true");
    let message = step.out("anomaly-message");
    for needle in [
        format!("Flux keeps serving {pick}"),
        format!("from {}", &b[..12]),
        format!("to {}", &a[..12]),
        "reverts".to_string(),
        // Break-glass in the action's words: its inputs, no CLI flag.
        "the promote action with `force: true` and a `reason`".to_string(),
    ] {
        assert!(message.contains(&needle), "{needle:?} not in {message}");
    }
    assert!(!message.contains("--"), "{message}");
    // A warning, with the same text; not the re-run notice.
    let warning = step
        .annotation("warning", "settings-image: rewound-history")
        .unwrap_or_else(|| panic!("no rewound-history warning:\n{}", step.stdout));
    assert_eq!(warning, message);
    assert!(
        step.annotation("notice", "settings-image: rerun-of-older")
            .is_none(),
        "{}",
        step.stdout
    );
    assert!(step.summary.contains("rewound-history"), "{}", step.summary);
    // The event proves the force-push dropped B (`before` is the commit the
    // branch tag names): the tag follows the rewritten branch back to A,
    // without allow-rewind, and no repair moves it forward to B again.
    assert_eq!(step.out("branch-tag"), "rewound");
    assert_eq!(revision(&reg, name, "main"), a, "no repair forward to B");
    let note = step
        .annotation("warning", "settings-image: branch tag rewound")
        .unwrap_or_else(|| panic!("no branch tag warning:\n{}", step.stdout));
    assert!(note.contains("follows the force-push"), "{note}");
    assert!(!note.contains("allow-rewind"), "{note}");
    assert_eq!(flux_pick(&tags(&reg, name)), tag_of(1_700_000_200, &b));

    // The same checkout for a re-run of A's own (not forced) job: a re-run.
    let rerun = run_action(
        &ws,
        &payload(events.path(), "a", &zero, &a, false),
        &api,
        &with,
    );
    assert_eq!(rerun.ok().out("anomaly"), "rerun-of-older");
    assert!(
        rerun
            .annotation("notice", "settings-image: rerun-of-older")
            .is_some(),
        "{}",
        rerun.stdout
    );
    assert_eq!(rerun.out("branch-tag"), "unchanged");

    // The fix the message gives, as written: one more change to the folder
    // on the rewound branch, with the branch tag. Flux moves to it, and the
    // branch tag moves forward.
    let c = origin.change("replicas: 1 # after the rewind\n", 1_700_000_300);
    let ws = origin.checkout("run-c");
    let fix = run_action(
        &ws,
        &payload(events.path(), "c", &a, &c, false),
        &api,
        &with,
    );
    assert_eq!(fix.ok().out("anomaly"), "");
    assert_eq!(fix.out("branch-tag"), "moved");
    assert_eq!(flux_pick(&tags(&reg, name)), tag_of(1_700_000_300, &c));
    assert_eq!(revision(&reg, name, "main"), c);
}

#[test]
fn a_force_push_to_a_commit_below_an_orphaned_tag_is_a_backwards_timestamp_warning() {
    let reg = Registry::start(Auth::None);
    let name = "acme/orphan";
    let repository = format!("{}/{name}", reg.host());
    let origin = Origin::new();
    let (api, asked) = compare_api(&origin);
    let events = common::TempDir::new();
    let with = [
        ("path", DIR),
        ("repository", repository.as_str()),
        ("timestamp-tag", "main"),
        ("branch-tag", "main"),
    ];
    let zero = "0".repeat(40);
    let a = origin.change("replicas: 1\n", 1_700_000_100);
    let ws = origin.checkout("run-a");
    run_action(
        &ws,
        &payload(events.path(), "a", &zero, &a, false),
        &api,
        &with,
    )
    .ok();
    let b = origin.change("replicas: 9\n", 1_700_000_300);
    let ws = origin.checkout("run-b");
    run_action(
        &ws,
        &payload(events.path(), "b", &a, &b, false),
        &api,
        &with,
    )
    .ok();
    // Rewritten: B is replaced by C, committed at t=200 (a clock behind, or
    // a rebase keeping author dates), and force-pushed.
    origin.force_to(&a);
    let c = origin.change("replicas: 3\n", 1_700_000_200);
    let ws = origin.checkout("run-forced");
    assert!(!origin.has(&ws, &b));
    // A forced event whose `before` is not the commit the branch tag names
    // proves nothing about it: the sideways move is refused, nothing is
    // pushed, and the message names the input that moves it.
    let unproven = payload(events.path(), "unproven", &a, &c, true);
    let refused = run_action(&ws, &unproven, &api, &with);
    assert_eq!(refused.code, 6, "{}", refused.stdout);
    let error = refused
        .stdout
        .lines()
        .find(|l| l.starts_with("::error title="))
        .unwrap_or_else(|| panic!("no error annotation:\n{}", refused.stdout));
    assert!(error.contains("`allow-rewind: true`"), "{error}");
    assert!(!tags(&reg, name).contains(&tag_of(1_700_000_200, &c)));
    // The real event (`before` = B, the branch tag's commit) proves the
    // force-push: pushed, the branch tag follows the new line (`rewound`,
    // no allow-rewind), and the anomaly names the orphaned tag Flux keeps
    // serving.
    let forced = payload(events.path(), "forced", &b, &c, true);
    let step = run_action(&ws, &forced, &api, &with);
    step.ok();
    assert!(
        asked
            .lock()
            .expect("lock")
            .contains(&(c.clone(), b.clone())),
        "GitHub ordered C against the dropped B: {asked:?}"
    );
    let all = tags(&reg, name);
    assert!(all.contains(&tag_of(1_700_000_200, &c)));
    let pick = flux_pick(&all);
    assert_eq!(pick, tag_of(1_700_000_300, &b), "Flux keeps the orphan");
    assert_eq!(step.out("anomaly"), "backwards-timestamp");
    let message = step.out("anomaly-message");
    for needle in [
        format!("keeps serving {pick}"),
        "not in this commit's history".to_string(),
        format!(
            "a force-push rewrote the branch (it named {} before)",
            &b[..12]
        ),
        "commit one more change".to_string(),
    ] {
        assert!(message.contains(&needle), "{needle:?} not in {message}");
    }
    let warning = step
        .annotation("warning", "settings-image: backwards-timestamp")
        .unwrap_or_else(|| panic!("no backwards-timestamp warning:\n{}", step.stdout));
    assert_eq!(warning, message);
    assert_eq!(step.out("branch-tag"), "rewound");
    assert_eq!(revision(&reg, name, "main"), c);
    // The fix: one more commit with a correct clock overtakes the orphan.
    let d = origin.change("replicas: 4\n", 1_700_000_400);
    let ws = origin.checkout("run-d");
    let fix = run_action(
        &ws,
        &payload(events.path(), "d", &c, &d, false),
        &api,
        &with,
    );
    assert_eq!(fix.ok().out("anomaly"), "");
    assert_eq!(fix.out("branch-tag"), "moved");
    assert_eq!(flux_pick(&tags(&reg, name)), tag_of(1_700_000_400, &d));
}

/// `settings-image push` in `checkout` with the branch tag `main`.
fn cli_push(checkout: &Path, repository: &str, extra: &[&str]) -> (i32, Value, String) {
    let out = TestCommand::push_json(DIR, repository)
        .current_dir(checkout)
        .args([
            "--timestamp-tag",
            "main",
            "--branch-tag",
            "main",
            "--no-provenance",
        ])
        .args(extra)
        .run();
    (
        out.code,
        serde_json::from_str(&out.stdout).unwrap_or(Value::Null),
        out.stderr,
    )
}

#[test]
fn the_cli_takes_the_force_push_as_force_pushed_from() {
    let reg = Registry::start(Auth::None);
    let name = "acme/cli";
    let repository = format!("{}/{name}", reg.host());
    let origin = Origin::new();
    let a = origin.change("replicas: 1\n", 1_700_000_100);
    assert_eq!(cli_push(&origin.dir, &repository, &[]).0, 0);
    let b = origin.change("replicas: 9\n", 1_700_000_200);
    assert_eq!(cli_push(&origin.dir, &repository, &[]).0, 0);
    origin.force_to(&a);
    // Not a commit id: an input error before anything is read or pushed.
    let (code, _, stderr) = cli_push(
        &origin.dir,
        &repository,
        &["--force-pushed-from", "main@{1}"],
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--force-pushed-from"), "{stderr}");
    // Without the flag, the push is taken for a re-run: the branch tag
    // stays on B.
    let (_, report, _) = cli_push(&origin.dir, &repository, &[]);
    assert_eq!(report["anomaly"]["kind"], "rerun-of-older");
    assert_eq!(report["branch_tag"]["outcome"], "kept-newer");
    assert_eq!(revision(&reg, name, "main"), b);
    // The fix, one more change on the rewound branch, cannot move a branch
    // tag that names B without being told B was dropped: refused, nothing
    // pushed, and the message names exactly the flags that move it.
    let c = origin.change("replicas: 1 # after the rewind\n", 1_700_000_300);
    let (code, _, stderr) = cli_push(&origin.dir, &repository, &[]);
    assert_eq!(code, 6, "{stderr}");
    assert!(stderr.contains("--allow-rewind"), "{stderr}");
    assert!(
        stderr.contains(&format!("--force-pushed-from {b}")),
        "{stderr}"
    );
    assert!(!tags(&reg, name).contains(&tag_of(1_700_000_300, &c)));
    assert_eq!(flux_pick(&tags(&reg, name)), tag_of(1_700_000_200, &b));
    // Told so, it follows the rewritten branch (no --allow-rewind) and
    // Flux moves to the fix.
    let (code, report, stderr) = cli_push(&origin.dir, &repository, &["--force-pushed-from", &b]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(report["branch_tag"]["outcome"], "rewound");
    assert!(stderr.contains("follows the force-push"), "{stderr}");
    assert_eq!(revision(&reg, name, "main"), c);
    assert_eq!(flux_pick(&tags(&reg, name)), tag_of(1_700_000_300, &c));
}

/// A force-push back to an ancestor, told with `--force-pushed-from`: the
/// local repository still has B, so git answers every ancestry question and
/// proves B was dropped; the branch tag follows back to A.
#[test]
fn the_cli_branch_tag_follows_a_proven_rewind() {
    let reg = Registry::start(Auth::None);
    let name = "acme/cli-rewind";
    let repository = format!("{}/{name}", reg.host());
    let origin = Origin::new();
    let a = origin.change("replicas: 1\n", 1_700_000_100);
    assert_eq!(cli_push(&origin.dir, &repository, &[]).0, 0);
    let b = origin.change("replicas: 9\n", 1_700_000_200);
    assert_eq!(cli_push(&origin.dir, &repository, &[]).0, 0);
    origin.force_to(&a);
    let (code, report, stderr) = cli_push(&origin.dir, &repository, &["--force-pushed-from", &b]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(report["anomaly"]["kind"], "rewound-history");
    assert!(stderr.contains("warning: rewound-history"), "{stderr}");
    assert_eq!(report["branch_tag"]["outcome"], "rewound");
    assert_eq!(revision(&reg, name, "main"), a);
    assert_eq!(flux_pick(&tags(&reg, name)), tag_of(1_700_000_200, &b));
    // The fix: one more change on A; the branch tag moves forward, Flux
    // moves to it.
    let c = origin.change("replicas: 1 # fixed\n", 1_700_000_300);
    let (code, report, stderr) = cli_push(&origin.dir, &repository, &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(report["branch_tag"]["outcome"], "moved");
    assert_eq!(flux_pick(&tags(&reg, name)), tag_of(1_700_000_300, &c));
}

fn tags(reg: &Registry, name: &str) -> BTreeSet<String> {
    common::registry::tags_of(reg, name)
}

/// The revision annotation of the image under `tag`.
fn revision(reg: &Registry, name: &str, tag: &str) -> String {
    common::registry::revision_of(reg, name, tag)
}
