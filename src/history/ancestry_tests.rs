//! Ancestry, differential against `git merge-base --is-ancestor`: random
//! histories with branches and merges (and skewed committer dates) made with
//! the git CLI, every pair of commits asked both ways. Shallow clones must
//! say "unknown" locally and then ask GitHub's compare API, here a loopback
//! stub answering in the shape of tests/fixtures/github/rest/commit-comparison.json.

use std::path::PathBuf;

use crate::testkit as common;

use common::git::ScratchRepo as Git;
use common::github;

use crate::history::git::{LocalAncestry, Repo};
use crate::history::github::Api;
use crate::history::{self, AncestrySource, Token};

/// A commit with `parents` (none: a root) made with `git commit-tree`
/// at committer time `t`, its tree `f` holding `n`; its id (no branch
/// moves).
fn commit_tree(g: &Git, parents: &[String], n: usize, t: i64) -> String {
    g.write("f", format!("{n}\n"));
    g.git(&["add", "f"]);
    let tree = g.git(&["write-tree"]);
    let msg = format!("c{n}");
    let mut args = vec!["commit-tree", tree.as_str(), "-m", msg.as_str()];
    for p in parents {
        args.extend(["-p", p.as_str()]);
    }
    g.git_at(&args, t)
}

/// Whether `a` is an ancestor of `d` as `git merge-base --is-ancestor`
/// says.
fn is_ancestor(g: &Git, a: &str, d: &str) -> bool {
    let st = g
        .cmd(&g.dir)
        .args(["merge-base", "--is-ancestor", a, d])
        .status()
        .expect("git merge-base");
    match st.code() {
        Some(0) => true,
        Some(1) => false,
        other => panic!("git merge-base --is-ancestor {a} {d}: {other:?}"),
    }
}

/// A random DAG of `n` commits: each picks one or two earlier commits as
/// parents (sometimes none: a second root), with committer times that go
/// backwards now and then.
fn random_history(g: &Git, seed: u64, n: usize) -> Vec<String> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut ids: Vec<String> = Vec::new();
    for i in 0..n {
        let mut parents = Vec::new();
        if !ids.is_empty() && rng.u32(0..20) != 0 {
            // Mostly extend a recent commit, so the DAG has long chains.
            let lo = ids.len().saturating_sub(4);
            parents.push(ids[rng.usize(lo..ids.len())].clone());
            if rng.u32(0..4) == 0 {
                let other = ids[rng.usize(0..ids.len())].clone();
                if !parents.contains(&other) {
                    parents.push(other);
                }
            }
        }
        let skew = if rng.u32(0..5) == 0 { -5000 } else { 0 };
        ids.push(commit_tree(
            g,
            &parents,
            i,
            1_700_000_000 + i as i64 * 60 + skew,
        ));
    }
    g.git(&["update-ref", "refs/heads/main", &ids[n - 1]]);
    for (i, id) in ids.iter().enumerate() {
        g.git(&["update-ref", &format!("refs/keep/{i}"), id]);
    }
    ids
}

#[test]
fn every_pair_agrees_with_git_merge_base() {
    for seed in [1u64, 7, 42] {
        let g = Git::new();
        let ids = random_history(&g, seed, 18);
        let repo = Repo::discover(&g.dir).expect("open").expect("a repo");
        let (mut yes, mut no) = (0, 0);
        for a in &ids {
            for d in &ids {
                let want = is_ancestor(&g, a, d);
                let got = history::is_ancestor(&repo, a, d, None).expect("local answer");
                assert_eq!(
                    got,
                    (want, AncestrySource::Local),
                    "seed {seed}: {a} -> {d}"
                );
                if want { yes += 1 } else { no += 1 }
            }
        }
        // The generator made a DAG with both answers plenty.
        assert!(yes > 30 && no > 30, "seed {seed}: {yes} yes, {no} no");
    }
}

/// A linear origin of 6 commits and a `--depth 2` clone of it.
fn shallow() -> (Git, PathBuf, Vec<String>) {
    let g = Git::new();
    let mut ids = Vec::new();
    for i in 0..6 {
        let parents: Vec<String> = ids.last().cloned().into_iter().collect();
        ids.push(commit_tree(&g, &parents, i, 1_700_000_000 + i as i64));
    }
    g.git(&["update-ref", "refs/heads/main", &ids[5]]);
    g.git(&["checkout", "-q", "main"]);
    let clone = g.dir.parent().expect("parent").join("clone");
    let url = format!("file://{}", g.dir.display());
    g.git_in(
        g.dir.parent().expect("parent"),
        &[
            "clone",
            "-q",
            "--depth",
            "2",
            &url,
            clone.to_str().expect("utf-8"),
        ],
    );
    (g, clone, ids)
}

#[test]
fn a_shallow_clone_answers_what_it_can_and_says_unknown_otherwise() {
    let (_g, clone, ids) = shallow();
    let repo = Repo::discover(&clone).expect("open").expect("a repo");
    // Inside the clone's two commits: provable.
    assert_eq!(
        repo.is_ancestor(&ids[4], &ids[5]).expect("ok"),
        LocalAncestry::Known(true)
    );
    // The boundary ids[4] records its parent's id: that much is proven.
    assert_eq!(
        repo.is_ancestor(&ids[3], &ids[5]).expect("ok"),
        LocalAncestry::Known(true)
    );
    // ids[4] is the boundary: nothing proves what lies behind it.
    assert!(matches!(
        repo.is_ancestor(&ids[5], &ids[4]).expect("ok"),
        LocalAncestry::Unknown(_)
    ));
    // Older than the boundary: unknown, naming the shallow boundary.
    match repo.is_ancestor(&ids[1], &ids[5]).expect("ok") {
        LocalAncestry::Unknown(why) => {
            assert!(why.contains("shallow"), "{why}");
            assert!(why.contains(&ids[4]), "names the boundary: {why}");
        }
        other => panic!("{other:?}"),
    }
    // Without the API: an error that says how to get the history.
    let err = history::is_ancestor(&repo, &ids[1], &ids[5], None).expect_err("unprovable");
    assert!(
        err.hint().unwrap_or_default().contains("fetch-depth: 0"),
        "{err}"
    );
}

/// The shared GitHub stub answering every request with the comparison
/// fixture whose `status` is `status`.
fn compare_stub(status: &'static str) -> (String, github::Log) {
    github::stub(move |_| (200, github::comparison(status)))
}

#[test]
fn a_shallow_clone_asks_the_github_compare_api() {
    let (_g, clone, ids) = shallow();
    let repo = Repo::discover(&clone).expect("open").expect("a repo");
    for (status, want) in [
        ("ahead", true),
        ("identical", true),
        ("behind", false),
        ("diverged", false),
    ] {
        let (base, seen) = compare_stub(status);
        let token = Token::new("ghs_secretToken").expect("token");
        let api = Api::new(base, "octo-org", "settings", token);
        let got = history::is_ancestor(&repo, &ids[1], &ids[5], Some(&api)).expect(status);
        assert_eq!(got, (want, AncestrySource::GitHub), "{status}");
        let seen = seen.lock().expect("lock").clone();
        assert_eq!(seen.len(), 1, "{seen:?}");
        assert_eq!(
            seen[0].request_line,
            format!(
                "GET /repos/octo-org/settings/compare/{}...{} HTTP/1.1",
                ids[1], ids[5]
            )
        );
        let auth = seen[0].header("authorization").unwrap_or_default();
        assert!(auth.ends_with("ghs_secretToken"), "{auth:?}");
    }
    // A local answer never calls the API (the stub would say "diverged").
    let (base, seen) = compare_stub("diverged");
    let api = Api::new(base, "o", "r", Token::new("t").expect("token"));
    let got = history::is_ancestor(&repo, &ids[4], &ids[5], Some(&api)).expect("local");
    assert_eq!(got, (true, AncestrySource::Local));
    assert!(seen.lock().expect("lock").is_empty());
}
