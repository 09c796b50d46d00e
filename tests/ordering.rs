//! Forward-only publishing end to end: a real `docker-registry`, git
//! histories made with the git CLI at fixed committer dates, and the
//! binary's `push --timestamp-tag main --branch-tag main`. For every
//! scenario: the final tags (listed with curl), what Flux's numerical
//! policy picks (implemented here independently from the crate), the
//! anomaly each push reports, and where the branch tag points.

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::cmd::{Run, TestCommand};
use common::git::ScratchRepo;
use common::github;
use common::registry::{Auth, Registry};
use serde_json::Value;

/// The scratch repository whose folder `s` the tests push.
struct Git {
    repo: ScratchRepo,
}

impl Git {
    fn new() -> Git {
        Git {
            repo: ScratchRepo::new(),
        }
    }

    fn git(&self, args: &[&str]) -> String {
        self.repo.git(args)
    }

    /// Writes `s/app.yaml` and commits at committer time `ct` (author `at`).
    fn change(&self, content: &str, ct: i64, at: i64) -> String {
        self.repo.write("s/app.yaml", content);
        self.repo.commit_at(content.trim(), ct, at)
    }

    /// A worktree detached at `commit`, for a run that must not see HEAD move.
    fn worktree(&self, name: &str, commit: &str) -> PathBuf {
        let p = self.repo.dir.parent().expect("a parent").join(name);
        self.git(&[
            "worktree",
            "add",
            "-q",
            "--detach",
            p.to_str().expect("utf-8"),
            commit,
        ]);
        p
    }
}

struct Push {
    code: i32,
    stderr: String,
    json: Option<Value>,
}

impl Push {
    fn ok(&self) -> &Value {
        assert_eq!(self.code, 0, "push failed: {}", self.stderr);
        self.json.as_ref().expect("JSON report")
    }

    fn anomaly(&self) -> Option<String> {
        self.ok()
            .get("anomaly")
            .map(|a| a["kind"].as_str().expect("kind").to_string())
    }
}

impl From<Run> for Push {
    fn from(run: Run) -> Push {
        Push {
            code: run.code,
            json: serde_json::from_str(run.stdout.trim()).ok(),
            stderr: run.stderr,
        }
    }
}

/// `settings-image push --json` of `checkout/s` to `repo`, run in
/// `checkout`, with the timestamp tag prefix `main` and the branch tag
/// `branch_tag` (none: no `--branch-tag`).
fn push_cmd(checkout: &Path, repo: &str, branch_tag: Option<&str>) -> TestCommand {
    let mut c = TestCommand::push_json("s", repo);
    c.current_dir(checkout).args(["--timestamp-tag", "main"]);
    if let Some(b) = branch_tag {
        c.args(["--branch-tag", b]);
    }
    c
}

/// [`push_cmd`] with the branch tag `main` and `extra`, run.
fn push(checkout: &Path, repo: &str, extra: &[&str]) -> Push {
    push_cmd(checkout, repo, Some("main"))
        .args(extra)
        .run()
        .into()
}

/// The tag Flux serves for the prefix `main` (tests/common/flux.rs).
fn flux_pick(tags: &BTreeSet<String>) -> Option<String> {
    common::flux::served("main", tags)
}

fn tag_of(ts: i64, commit: &str) -> String {
    format!("main-{ts}-{}", &commit[..7])
}

fn repo_of(reg: &Registry) -> String {
    format!("{}/settings", reg.host())
}

/// `push` without `--branch-tag`: the image and its timestamp tag only.
fn push_without_branch_tag(checkout: &Path, repo: &str) -> Push {
    push_cmd(checkout, repo, None).run().into()
}

#[test]
fn pushed_is_true_when_only_the_branch_tag_is_made_or_moved() {
    let reg = Registry::start(Auth::None);
    let repo = repo_of(&reg);
    let g = Git::new();
    let c1 = g.change("v: 1\n", 1_700_000_100, 1_700_000_100);
    let first = push_without_branch_tag(&g.repo.dir, &repo);
    assert_eq!(first.ok()["pushed"], true);
    assert!(first.ok().get("branch_tag").is_none(), "{}", first.ok());
    // The image is there; only the branch tag is new: a change to the
    // registry (the action's output says true for it too).
    let made = push(&g.repo.dir, &repo, &[]);
    assert_eq!(made.ok()["branch_tag"]["outcome"], "created");
    assert_eq!(made.ok()["uploaded_blobs"], 0);
    assert_eq!(made.ok()["pushed"], true, "{}", made.ok());
    assert_eq!(
        common::registry::digest_of(&reg, "settings", "main").as_deref(),
        made.ok()["digest"].as_str()
    );
    // The next commit's image, pushed without the branch tag; then the
    // branch tag moves to it, nothing else changes.
    let c2 = g.change("v: 2\n", 1_700_000_200, 1_700_000_200);
    assert_eq!(
        push_without_branch_tag(&g.repo.dir, &repo).ok()["pushed"],
        true
    );
    let moved = push(&g.repo.dir, &repo, &[]);
    assert_eq!(moved.ok()["branch_tag"]["outcome"], "moved");
    assert_eq!(moved.ok()["uploaded_blobs"], 0);
    assert_eq!(moved.ok()["pushed"], true, "{}", moved.ok());
    assert_eq!(moved.ok()["commit"], c2.as_str());
    // Nothing left to change.
    let again = push(&g.repo.dir, &repo, &[]);
    assert_eq!(again.ok()["branch_tag"]["outcome"], "unchanged");
    assert_eq!(again.ok()["pushed"], false, "{}", again.ok());
    assert_ne!(c1, c2);
}

#[test]
fn rerun_of_an_old_commit_is_a_no_op_and_keeps_the_branch_tag() {
    let reg = Registry::start(Auth::None);
    let repo = repo_of(&reg);
    let g = Git::new();
    let c1 = g.change("v: 1\n", 1_700_000_100, 1_700_000_100);
    let old = g.worktree("old", &c1);
    let c2 = g.change("v: 2\n", 1_700_000_200, 1_700_000_200);
    let p1 = push(&old, &repo, &[]);
    assert_eq!(p1.anomaly(), None);
    assert_eq!(p1.ok()["branch_tag"]["outcome"], "created");
    let p2 = push(&g.repo.dir, &repo, &[]);
    assert_eq!(p2.anomaly(), None);
    assert_eq!(p2.ok()["branch_tag"]["outcome"], "moved");
    // The re-run of the old job.
    let p3 = push(&old, &repo, &[]);
    assert_eq!(p3.anomaly().as_deref(), Some("rerun-of-older"));
    assert!(p3.stderr.contains("rerun-of-older"), "{}", p3.stderr);
    assert_eq!(p3.ok()["pushed"], false, "nothing new was written");
    assert_eq!(p3.ok()["branch_tag"]["outcome"], "kept-newer");
    let want: BTreeSet<String> = [
        tag_of(1_700_000_100, &c1),
        tag_of(1_700_000_200, &c2),
        "main".into(),
    ]
    .into_iter()
    .collect();
    let t = tags(&reg);
    // Beside the provenance referrers' `sha256-<hex>` index tags.
    let named: BTreeSet<String> = t
        .iter()
        .filter(|t| !t.starts_with("sha256-"))
        .cloned()
        .collect();
    assert_eq!(named, want);
    assert_eq!(flux_pick(&t), Some(tag_of(1_700_000_200, &c2)));
    assert_eq!(revision(&reg, "main"), c2);
}

#[test]
fn concurrent_runs_of_consecutive_commits_converge_forward_in_either_order() {
    let reg = Registry::start(Auth::None);
    let repo = repo_of(&reg);
    let g = Git::new();
    let mut t = 1_700_000_000;
    let c0 = g.change("v: 0\n", t, t);
    push(&g.repo.dir, &repo, &[]).ok();
    assert_eq!(revision(&reg, "main"), c0);
    let mut left_behind = 0;
    for round in 0..6 {
        t += 100;
        let older = g.change(&format!("v: {round}a\n"), t, t);
        t += 100;
        let newer = g.change(&format!("v: {round}b\n"), t, t);
        let wo = g.worktree(&format!("o{round}"), &older);
        let wn = g.worktree(&format!("n{round}"), &newer);
        // Even rounds start the older run first, odd rounds the newer.
        let (first, second) = if round % 2 == 0 {
            (&wo, &wn)
        } else {
            (&wn, &wo)
        };
        let a = push_cmd(first, &repo, Some("main")).spawn();
        let b = push_cmd(second, &repo, Some("main")).spawn();
        let (a, b) = (Push::from(a.wait()), Push::from(b.wait()));
        for p in [&a, &b] {
            p.ok();
            // The older run may see the newer tag already: a re-run, never
            // a timestamp problem.
            assert!(
                matches!(p.anomaly().as_deref(), None | Some("rerun-of-older")),
                "round {round}: {:?}",
                p.anomaly()
            );
        }
        let all = tags(&reg);
        assert!(all.contains(&tag_of(t - 100, &older)) && all.contains(&tag_of(t, &newer)));
        assert_eq!(flux_pick(&all), Some(tag_of(t, &newer)), "round {round}");
        // The branch tag's read-back repairs a racing backwards move, but
        // only one that lands within its wait (docs/push.md): counted, and
        // the next run of the newer commit must move it forward.
        let main = revision(&reg, "main");
        assert!(
            main == newer || main == older,
            "round {round}: main names {main}"
        );
        if main == older {
            left_behind += 1;
            push(&wn, &repo, &[]).ok();
        }
        assert_eq!(
            revision(&reg, "main"),
            newer,
            "round {round}: the branch tag converged forward"
        );
    }
    eprintln!("6 rounds: the branch tag was left on the older commit in {left_behind}");
}

#[test]
fn same_second_commits_are_reported_with_the_tag_flux_serves() {
    // Both orders of the two commits' sha7: the newer commit's tag sorting
    // after the older one's (Flux keeps the older content) and before it
    // (Flux serves the newer one).
    for newer_sorts_first in [false, true] {
        let reg = Registry::start(Auth::None);
        let repo = repo_of(&reg);
        let g = Git::new();
        let c1 = g.change("v: 1\n", 1_700_000_300, 1_700_000_300);
        push(&g.repo.dir, &repo, &[]).ok();
        let c2 = (0..64)
            .find_map(|i| {
                let c = g.change(&format!("v: 2 # {i}\n"), 1_700_000_300, 1_700_000_300);
                if (c[..7] < c1[..7]) == newer_sorts_first {
                    Some(c)
                } else {
                    g.git(&["reset", "-q", "--hard", "HEAD~1"]);
                    None
                }
            })
            .expect("a commit whose sha7 sorts as wanted");
        let p = push(&g.repo.dir, &repo, &[]);
        assert_eq!(p.anomaly().as_deref(), Some("same-timestamp"));
        let msg = p.ok()["anomaly"]["message"].as_str().expect("message");
        assert!(p.stderr.contains("warning: same-timestamp"), "{}", p.stderr);
        let t = tags(&reg);
        let served = flux_pick(&t).expect("a pick");
        let (old_tag, new_tag) = (tag_of(1_700_000_300, &c1), tag_of(1_700_000_300, &c2));
        assert!(msg.contains(&old_tag), "{msg}");
        assert!(!msg.contains("either"), "{msg}");
        if newer_sorts_first {
            assert_eq!(served, new_tag);
            assert!(
                msg.contains(&format!("Flux serves {new_tag}, this commit")),
                "{msg}"
            );
        } else {
            assert_eq!(served, old_tag);
            assert!(
                msg.contains(&format!("Flux serves {old_tag}, not this commit")),
                "{msg}"
            );
            assert!(msg.contains("the newer one"), "{msg}");
            assert!(msg.contains("a later second"), "what settles it: {msg}");
        }
        assert_eq!(revision(&reg, "main"), c2);
    }
}

#[test]
fn a_backwards_committer_date_is_reported_with_the_fix() {
    let reg = Registry::start(Auth::None);
    let repo = repo_of(&reg);
    let g = Git::new();
    let c1 = g.change("v: 1\n", 1_700_000_500, 1_700_000_500);
    push(&g.repo.dir, &repo, &[]).ok();
    // A skewed clock: the child is "older".
    let c2 = g.change("v: 2\n", 1_700_000_400, 1_700_000_400);
    let p = push(&g.repo.dir, &repo, &[]);
    assert_eq!(p.anomaly().as_deref(), Some("backwards-timestamp"));
    let msg = p.ok()["anomaly"]["message"].as_str().expect("message");
    assert!(msg.contains("ignores"), "{msg}");
    assert!(
        msg.contains("commit one more change"),
        "says how to fix it: {msg}"
    );
    let t = tags(&reg);
    assert_eq!(
        flux_pick(&t),
        Some(tag_of(1_700_000_500, &c1)),
        "Flux keeps the ancestor"
    );
    assert!(t.contains(&tag_of(1_700_000_400, &c2)));
    // The branch tag follows history, not the clock.
    assert_eq!(revision(&reg, "main"), c2);
}

#[test]
fn a_force_push_is_refused_unless_rewinding_is_allowed() {
    let reg = Registry::start(Auth::None);
    let repo = repo_of(&reg);
    let g = Git::new();
    let c1 = g.change("v: 1\n", 1_700_000_100, 1_700_000_100);
    let c2 = g.change("v: 2\n", 1_700_000_200, 1_700_000_200);
    push(&g.repo.dir, &repo, &[]).ok();
    // Force-push: the branch is reset and goes another way.
    g.git(&["reset", "-q", "--hard", &c1]);
    let c3 = g.change("v: 3\n", 1_700_000_300, 1_700_000_300);
    let p = push(&g.repo.dir, &repo, &[]);
    assert_eq!(p.code, 6, "a distinct exit code: {}", p.stderr);
    assert!(p.stderr.contains("--allow-rewind"), "{}", p.stderr);
    assert!(
        p.stderr.contains(&c2),
        "names the current commit: {}",
        p.stderr
    );
    let t = tags(&reg);
    assert!(
        !t.contains(&tag_of(1_700_000_300, &c3)),
        "refused before pushing anything"
    );
    assert_eq!(revision(&reg, "main"), c2);
    let p = push(&g.repo.dir, &repo, &["--allow-rewind"]);
    assert_eq!(p.ok()["branch_tag"]["outcome"], "rewound");
    assert!(
        p.stderr.contains("--allow-rewind"),
        "said loudly: {}",
        p.stderr
    );
    assert_eq!(p.anomaly(), None);
    assert_eq!(revision(&reg, "main"), c3);
    assert_eq!(flux_pick(&tags(&reg)), Some(tag_of(1_700_000_300, &c3)));
}

#[test]
fn a_revert_moves_the_branch_tag_forward() {
    let reg = Registry::start(Auth::None);
    let repo = repo_of(&reg);
    let g = Git::new();
    g.change("v: 1\n", 1_700_000_100, 1_700_000_100);
    let first = push(&g.repo.dir, &repo, &[]).ok().clone();
    let c2 = g.change("v: 2\n", 1_700_000_200, 1_700_000_200);
    push(&g.repo.dir, &repo, &[]).ok();
    g.repo.git_at(&["revert", "--no-edit", &c2], 1_700_000_300);
    let c3 = g.git(&["rev-parse", "HEAD"]);
    let p = push(&g.repo.dir, &repo, &[]);
    assert_eq!(p.anomaly(), None);
    assert_eq!(p.ok()["branch_tag"]["outcome"], "moved");
    // The content is the first commit's again; the image is a new version.
    assert_eq!(p.ok()["layer"]["digest"], first["layer"]["digest"]);
    assert_ne!(p.ok()["digest"], first["digest"]);
    assert_eq!(revision(&reg, "main"), c3);
    assert_eq!(flux_pick(&tags(&reg)), Some(tag_of(1_700_000_300, &c3)));
}

#[test]
fn a_rebase_with_author_dates_goes_backwards_and_is_reported() {
    let reg = Registry::start(Auth::None);
    let repo = repo_of(&reg);
    let g = Git::new();
    g.change("v: 1\n", 1_700_000_100, 1_700_000_100);
    push(&g.repo.dir, &repo, &[]).ok();
    // A feature branch written at t=150 (author date).
    g.git(&["checkout", "-q", "-b", "feature"]);
    std::fs::write(g.repo.dir.join("s/extra.yaml"), "e: 1\n").expect("write");
    g.git(&["add", "-A"]);
    g.repo
        .git_at(&["commit", "-q", "-m", "feature"], 1_700_000_150);
    // Main moves on at t=200 and is published.
    g.git(&["checkout", "-q", "main"]);
    let c2 = g.change("v: 2\n", 1_700_000_200, 1_700_000_200);
    push(&g.repo.dir, &repo, &[]).ok();
    // Rebase keeping the author date as committer date, then fast-forward.
    g.git(&["checkout", "-q", "feature"]);
    common::git::run(
        g.repo
            .cmd(&g.repo.dir)
            .env("GIT_COMMITTER_DATE", "@1700000900 +0000"),
        &["rebase", "-q", "--committer-date-is-author-date", "main"],
        None,
    );
    let f = g.git(&["rev-parse", "HEAD"]);
    assert_eq!(g.git(&["log", "-1", "--format=%ct"]), "1700000150");
    g.git(&["checkout", "-q", "main"]);
    g.git(&["merge", "-q", "--ff-only", "feature"]);
    let p = push(&g.repo.dir, &repo, &[]);
    assert_eq!(p.anomaly().as_deref(), Some("backwards-timestamp"));
    let msg = p.ok()["anomaly"]["message"].as_str().expect("message");
    assert!(msg.contains(&tag_of(1_700_000_200, &c2)), "{msg}");
    assert_eq!(flux_pick(&tags(&reg)), Some(tag_of(1_700_000_200, &c2)));
    assert_eq!(revision(&reg, "main"), f);
}

#[test]
fn branch_tag_needs_a_timestamp_tag() {
    TestCommand::push(".", "127.0.0.1:1/settings")
        .args(["--branch-tag", "main"])
        .fails_with(2)
        .says("--timestamp-tag");
}

#[test]
fn on_a_shallow_clone_the_branch_tag_is_guarded_by_the_github_compare_api() {
    let reg = Registry::start(Auth::None);
    let repo = repo_of(&reg);
    let g = Git::new();
    let c1 = g.change("v: 1\n", 1_700_000_100, 1_700_000_100);
    push(&g.repo.dir, &repo, &[]).ok();
    g.change("v: 2\n", 1_700_000_200, 1_700_000_200);
    let c3 = g.change("v: 3\n", 1_700_000_300, 1_700_000_300);
    let c4 = g.change("v: 4\n", 1_700_000_400, 1_700_000_400);
    // Holds c4 and c3; c3 records its parent c2's id, and c1 is beyond.
    let clone = g.repo.dir.parent().expect("a parent").join("shallow");
    g.git(&[
        "clone",
        "-q",
        "--depth",
        "2",
        &format!("file://{}", g.repo.dir.display()),
        clone.to_str().expect("utf-8"),
    ]);
    // Without the API the branch tag cannot be proven forward: refused,
    // and nothing is pushed.
    let p = push(&clone, &repo, &[]);
    assert_eq!(p.code, 1, "{}", p.stderr);
    assert!(p.stderr.contains("fetch-depth: 0"), "{}", p.stderr);
    assert!(
        !tags(&reg).contains(&tag_of(1_700_000_400, &c4)),
        "{}",
        p.stderr
    );
    assert_eq!(revision(&reg, "main"), c1);
    // With it: GitHub says c4 is ahead of c1.
    let (c1a, c4a) = (c1.clone(), c4.clone());
    let (base, seen) = github::compare_api("o/r", move |b, h| {
        if b == c1a && h == c4a {
            "ahead"
        } else {
            "behind"
        }
    });
    let p = Push::from(
        push_cmd(&clone, &repo, Some("main"))
            .env("GITHUB_API_URL", &base)
            .env("GITHUB_REPOSITORY", "o/r")
            .env("GITHUB_TOKEN", "ghs_test")
            .run(),
    );
    assert_eq!(p.anomaly(), None);
    assert_eq!(p.ok()["branch_tag"]["outcome"], "moved");
    assert_eq!(revision(&reg, "main"), c4);
    let asked = seen.lock().expect("lock").clone();
    assert!(asked.contains(&(c1.clone(), c4.clone())), "{asked:?}");
    // What the clone proves (c3 -> c4) is never asked.
    assert!(!asked.iter().any(|(b, _)| b == &c3), "{asked:?}");
    assert_eq!(flux_pick(&tags(&reg)), Some(tag_of(1_700_000_400, &c4)));
}

#[test]
fn racing_runs_in_separate_checkouts_converge_through_the_compare_api() {
    let reg = Registry::start(Auth::None);
    let repo = repo_of(&reg);
    let g = Git::new();
    let mut t = 1_700_000_000;
    g.change("v: 0\n", t, t);
    push(&g.repo.dir, &repo, &[]).ok();
    // GitHub, played by the origin repository and git itself.
    let origin = g.repo.dir.clone();
    let home = g.repo.home.clone();
    let (base, _seen) = github::compare_api("o/r", move |b, h| {
        let st = Command::new("git")
            .current_dir(&origin)
            .env("HOME", &home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .args(["merge-base", "--is-ancestor", b, h])
            .status()
            .expect("git");
        match (b == h, st.success()) {
            (true, _) => "identical",
            (false, true) => "ahead",
            (false, false) => "behind",
        }
    });
    let clone = |name: &str| {
        let p = g.repo.dir.parent().expect("a parent").join(name);
        g.git(&[
            "clone",
            "-q",
            &format!("file://{}", g.repo.dir.display()),
            p.to_str().expect("utf-8"),
        ]);
        p
    };
    for round in 0..6 {
        // Each run's checkout holds only its own commit's history, as in
        // CI: the older run has never seen the newer commit.
        t += 100;
        let older = g.change(&format!("v: {round}a\n"), t, t);
        let wo = clone(&format!("o{round}"));
        t += 100;
        let newer = g.change(&format!("v: {round}b\n"), t, t);
        let wn = clone(&format!("n{round}"));
        let (first, second) = if round % 2 == 0 {
            (&wo, &wn)
        } else {
            (&wn, &wo)
        };
        let spawn = |dir: &PathBuf| {
            push_cmd(dir, &repo, Some("main"))
                .env("GITHUB_API_URL", &base)
                .env("GITHUB_REPOSITORY", "o/r")
                .env("GITHUB_TOKEN", "ghs_test")
                .spawn()
        };
        let a = spawn(first);
        let b = spawn(second);
        for p in [Push::from(a.wait()), Push::from(b.wait())] {
            p.ok();
            assert!(
                !p.stderr.contains("could not be ordered"),
                "round {round}: {}",
                p.stderr
            );
        }
        assert_eq!(revision(&reg, "main"), newer, "round {round}");
        assert!(tags(&reg).contains(&tag_of(t - 100, &older)));
        assert_eq!(
            flux_pick(&tags(&reg)),
            Some(tag_of(t, &newer)),
            "round {round}"
        );
    }
}

/// The branch tag's read-back, deterministically: while the older
/// commit's branch-tag put is held at a proxy, the newer commit's run
/// does all of its push (timestamp tag, branch tag, read-back); the older
/// put then lands over it, and the older run's read-back finds the newer
/// timestamp tag in its tag list, asks what the branch tag names, and
/// moves it on. (A read-back whose list holds no tag of another commit
/// does not ask: tests/requests.rs counts that.)
#[test]
fn an_older_branch_tag_put_landing_last_is_moved_on_by_its_read_back() {
    use common::registry::{Action, Proxy};
    use std::sync::{Arc, Mutex};
    let reg = Registry::start(Auth::None);
    let proxy = Proxy::start(reg.port);
    let g = Git::new();
    let c1 = g.change("v: 1\n", 1_700_000_100, 1_700_000_100);
    let c2 = g.change("v: 2\n", 1_700_000_200, 1_700_000_200);
    let older = g.worktree("older", &c1);
    let newer: Arc<Mutex<Option<Push>>> = Arc::default();
    let (held, newer_dir, direct) = (newer.clone(), g.repo.dir.clone(), repo_of(&reg));
    proxy.set_rule(move |method, path| {
        let mut held = held.lock().expect("lock");
        if method == "PUT" && path == "/v2/settings/manifests/main" && held.is_none() {
            *held = Some(push(&newer_dir, &direct, &[]));
        }
        Action::Forward
    });
    let p = push(&older, &format!("{}/settings", proxy.host()), &[]);
    let newer = newer
        .lock()
        .expect("lock")
        .take()
        .expect("the newer run ran");
    assert_eq!(newer.ok()["branch_tag"]["outcome"], "created");
    assert_eq!(newer.ok()["branch_tag"]["commit"], c2.as_str());
    let branch = &p.ok()["branch_tag"];
    assert_eq!(branch["outcome"], "created", "{branch}");
    assert_eq!(
        branch["repaired_to"],
        tag_of(1_700_000_200, &c2).as_str(),
        "{branch}"
    );
    assert_eq!(branch["commit"], c2.as_str(), "{branch}");
    assert_eq!(revision(&reg, "main"), c2);
    // After its put of the branch tag: the tag list, then the branch tag,
    // then the repair.
    let after: Vec<String> = proxy
        .take()
        .iter()
        .skip_while(|r| !(r.method == "PUT" && r.path.ends_with("/manifests/main")))
        .filter(|r| r.path.contains("/tags/list") || r.path.ends_with("/manifests/main"))
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert_eq!(
        after,
        [
            "PUT /v2/settings/manifests/main",
            "GET /v2/settings/tags/list?n=1000",
            "HEAD /v2/settings/manifests/main",
            "PUT /v2/settings/manifests/main",
        ],
        "{after:?}"
    );
}

fn tags(reg: &Registry) -> BTreeSet<String> {
    common::registry::tags_of(reg, "settings")
}

/// The revision annotation of the image under `tag`, read with curl.
fn revision(reg: &Registry, tag: &str) -> String {
    common::registry::revision_of(reg, "settings", tag)
}
