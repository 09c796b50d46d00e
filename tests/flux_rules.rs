//! Flux's rules end to end, on one real `docker-registry` repository that
//! holds everything at once: timestamp tags of many prefixes, the
//! provenance referrers' `sha256-<hex>` index tags, branch tags and channel
//! tags. Histories are made with the git CLI at fixed committer times; the
//! ref each run builds comes from `GITHUB_REF`, as in CI (so branch names
//! git itself refuses, `*`, `^` and `?`, are names a prefix can come from).
//!
//! The oracles: Flux's pick from `tests/common/flux.rs` over the tags the
//! registry lists (curl), and for "which ImagePolicy follows which ref"
//! that pick's pattern over the tags with the ref each successful run
//! built. Checked:
//! - every tag the project says Flux serves (an anomaly's "Flux serves X",
//!   "keeps serving X") is the oracle's pick, and every `promote` picks it
//!   and makes the channel serve it;
//! - every push that would make one ImagePolicy follow two refs is refused
//!   (exit 3, both refs named, a prefix to use instead), writes nothing,
//!   and the prefix it offers works;
//! - a re-run on the same ref is not mistaken for that.
//!
//! `generated_histories_keep_flux_rules` checks all of it over one seeded
//! random sequence of steps (same-second commits in both sha orders and
//! both job orders, backwards committer times, re-runs, 27 refs whose names
//! collide or not, branch tags, a rewind and its fix); the other tests
//! script single cases.

use crate::common;

use common::rng::Rng;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use common::cmd::{Run, TestCommand};
use common::git::ScratchRepo;
use common::registry::{Auth, Registry};
use serde_json::Value;

const NAME: &str = "acme/settings";

fn run(dir: &Path, args: &[&str], git_ref: Option<&str>) -> Run {
    let mut c = TestCommand::new();
    c.current_dir(dir).args(args);
    if let Some(r) = git_ref {
        c.env("GITHUB_REF", r);
    }
    c.run()
}

struct World {
    reg: Registry,
    repo: ScratchRepo,
    /// Every timestamp tag a successful push wrote, with the ref it built.
    published: BTreeMap<String, String>,
}

impl World {
    fn new() -> World {
        World {
            reg: Registry::start(Auth::None),
            repo: ScratchRepo::new(),
            published: BTreeMap::new(),
        }
    }

    fn repository(&self) -> String {
        format!("{}/{NAME}", self.reg.host())
    }

    /// Commits a change to the folder `s` at committer time `t`.
    fn commit(&self, content: &str, t: i64) -> String {
        self.repo
            .commit_files(&[("s/app.yaml", content)], "change", t)
    }

    /// Commits a change to `s` at committer time `t` whose sha7 satisfies
    /// `wanted` (trying other contents until it does); HEAD must have a
    /// commit already.
    fn commit_where(&self, label: &str, t: i64, wanted: &dyn Fn(&str) -> bool) -> String {
        (0..400)
            .find_map(|i| {
                let c = self.commit(&format!("v: {label} {i}\n"), t);
                if wanted(&c[..7]) {
                    Some(c)
                } else {
                    self.repo.git(&["reset", "-q", "--hard", "HEAD~1"]);
                    None
                }
            })
            .expect("a commit of the wanted sha7 order")
    }

    /// The tags the registry lists (none before the first push).
    fn tags(&self) -> BTreeSet<String> {
        common::registry::tags_of(&self.reg, NAME)
    }

    /// `push --timestamp-tag PREFIX` as the run of `git_ref`.
    fn push(&mut self, git_ref: &str, prefix: &str, extra: &[&str]) -> Run {
        let repository = self.repository();
        let mut args = vec![
            "push",
            "--path",
            "s",
            "--repository",
            &repository,
            "--timestamp-tag",
            prefix,
            "--json",
        ];
        args.extend_from_slice(extra);
        let r = run(&self.repo.dir, &args, Some(git_ref));
        if r.code == 0 {
            let tag = r.json()["timestamp_tag"]
                .as_str()
                .expect("timestamp_tag")
                .to_string();
            self.published.insert(tag, git_ref.to_string());
        }
        r
    }

    /// The tag `settings-image tag` says this commit gets under `prefix`.
    fn tag_for(&self, prefix: &str) -> String {
        let r = run(
            &self.repo.dir,
            &["tag", "--path", "s", "--prefix", prefix],
            None,
        );
        assert_eq!(r.code, 0, "{}", r.stderr);
        r.stdout.trim().to_string()
    }

    /// Flux's pick for `prefix` over what the registry lists.
    fn served(&self, prefix: &str) -> Option<String> {
        common::flux::served(prefix, &self.tags())
    }

    /// The refs whose published tags the ImagePolicy of `prefix` follows.
    fn refs_followed(&self, prefix: &str) -> BTreeSet<String> {
        let re = regex::Regex::new(&common::flux::timestamp_pattern(prefix)).expect("regex");
        self.published
            .iter()
            .filter(|(t, _)| re.is_match(t))
            .map(|(_, r)| r.clone())
            .collect()
    }

    /// `promote --from FROM --to TO --json`, which must succeed.
    fn promote(&self, from: &str, to: &str) {
        run(
            &self.repo.dir,
            &[
                "promote",
                "--repository",
                &self.repository(),
                "--from",
                from,
                "--to",
                to,
                "--json",
            ],
            None,
        )
        .json();
    }

    /// `promote --explain --json`: the candidate it would promote.
    fn candidate(&self, from: &str, to: &str) -> Option<String> {
        let r = run(
            &self.repo.dir,
            &[
                "promote",
                "--repository",
                &self.repository(),
                "--from",
                from,
                "--to",
                to,
                "--explain",
                "--json",
            ],
            None,
        );
        r.json()["candidate"].as_str().map(str::to_string)
    }
}

/// The prefix of a timestamp tag `PREFIX-<ts>-<sha7>`.
fn prefix_of(tag: &str) -> String {
    let (rest, _) = tag.rsplit_once('-').expect("sha7");
    let (prefix, _) = rest.rsplit_once('-').expect("ts");
    prefix.to_string()
}

/// Every tag the text says Flux serves ("Flux serves X", "keeps serving X").
fn said_served(text: &str) -> Vec<String> {
    let re = regex::Regex::new(
        r"(?:Flux serves|keeps serving) ([A-Za-z0-9_][A-Za-z0-9_.-]*-[0-9]+-[0-9a-f]{7})",
    )
    .expect("regex");
    re.captures_iter(text).map(|c| c[1].to_string()).collect()
}

/// Checks what a push said Flux serves against the oracle.
fn check_said(w: &World, r: &Run, prefix: &str) {
    let served = w.served(prefix);
    let text = format!("{}\n{}", r.stdout, r.stderr);
    for said in said_served(&text) {
        assert_eq!(Some(&said), served.as_ref(), "{text}");
    }
}

/// 27 ref names: colliding groups (characters a tag cannot hold, a
/// leading '.', capitals that stay distinct, names cut at 109 characters,
/// one of them 120 long) and names of their own.
fn ref_names() -> Vec<String> {
    let long = "n".repeat(109);
    [
        "main",
        "Main",
        "feat-x",
        "feat/x",
        "feat+x",
        "feat*x",
        "feat|x",
        "feat$x",
        "feat^x",
        "feat?x",
        "feat_x",
        "feat.x",
        "release/1.x",
        "release-1.x",
        "release/2.x",
        ".hidden",
        "hidden",
        "UPPER/Case",
        "UPPER-Case",
        "dependabot/npm/x@1.0",
        "a$b^c?d*e|f",
        "a-b-c-d-e-f",
        "_under",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([
        format!("{long}/{}", "x".repeat(10)),
        format!("{long}+{}", "y".repeat(10)),
        long.clone(),
        "x".to_string(),
    ])
    .collect()
}

#[test]
fn one_imagepolicy_never_follows_two_refs() {
    let mut w = World::new();
    let names = ref_names();
    assert!(names.len() >= 25);
    assert!(names.iter().any(|n| n.len() == 120));
    let mut t = 1_700_000_000;
    let mut refused = 0;
    let mut commits: BTreeMap<&str, (String, i64)> = BTreeMap::new();
    let offer = regex::Regex::new(r"--timestamp-tag (\S+) \(").expect("regex");
    for name in &names {
        t += 100;
        let git_ref = format!("refs/heads/{name}");
        let c = w.commit(&format!("built by: {name}\n"), t);
        commits.insert(name, (c, t));
        let tag = w.tag_for(name);
        let prefix = prefix_of(&tag);
        // The oracle's answer: would the tag put a second ref under the
        // ImagePolicy of its prefix?
        let others: BTreeSet<String> = w
            .refs_followed(&prefix)
            .into_iter()
            .filter(|r| r != &git_ref)
            .collect();
        let before = w.tags();
        let r = w.push(&git_ref, name, &[]);
        if others.is_empty() {
            let report = r.json();
            assert_eq!(report["timestamp_tag"], tag.as_str());
            check_said(&w, &r, &prefix);
            continue;
        }
        refused += 1;
        assert_eq!(r.code, 3, "{name}: {}", r.stderr);
        assert!(r.stderr.contains(&git_ref), "{name}: {}", r.stderr);
        for o in &others {
            assert!(
                r.stderr.contains(o.as_str()),
                "{name}: {o} not named: {}",
                r.stderr
            );
        }
        assert_eq!(w.tags(), before, "{name}: a refused push wrote nothing");
        // The prefix it offers is one of its own, and works.
        let offered = offer
            .captures(&r.stderr)
            .unwrap_or_else(|| panic!("{name}: no prefix offered: {}", r.stderr))[1]
            .to_string();
        assert!(w.refs_followed(&offered).is_empty(), "{offered}");
        let r = w.push(&git_ref, &offered, &[]);
        assert_eq!(
            prefix_of(r.json()["timestamp_tag"].as_str().unwrap()),
            offered
        );
    }
    assert_eq!(
        refused, 13,
        "feat-x (7), release-1.x, hidden, UPPER-Case, a-b-c-d-e-f, n{{109}} (2)"
    );
    // The invariant, over everything the registry holds: each prefix's
    // ImagePolicy follows one ref.
    let prefixes: BTreeSet<String> = w.published.keys().map(|t| prefix_of(t)).collect();
    for p in &prefixes {
        assert_eq!(w.refs_followed(p).len(), 1, "{p}: {:?}", w.refs_followed(p));
        // And promote picks what Flux serves.
        assert_eq!(w.candidate(p, "chan"), w.served(p), "{p}");
    }
    assert!(
        w.tags().iter().any(|t| t.starts_with("sha256-")),
        "the provenance referrers' index tags are in the same repository"
    );

    // A re-run on the same ref is not a collision: feat-x's first commit
    // again, after its own newer push.
    let (feat, feat_t) = commits["feat-x"].clone();
    w.commit("built by: feat-x, later\n", t + 100);
    assert_eq!(w.push("refs/heads/feat-x", "feat-x", &[]).code, 0);
    w.repo.git(&["checkout", "-q", &feat]);
    let rerun = w.push("refs/heads/feat-x", "feat-x", &[]);
    assert_eq!(
        rerun.json()["anomaly"]["kind"],
        "rerun-of-older",
        "{}",
        rerun.stderr
    );
    check_said(&w, &rerun, "feat-x");
    assert!(
        rerun.json()["timestamp_tag"]
            .as_str()
            .unwrap()
            .contains(&format!("-{feat_t}-"))
    );
    // The same commit from a sharing ref: refused, not "rewritten history".
    let other = w.push("refs/heads/feat/x", "feat/x", &[]);
    assert_eq!(other.code, 3, "{}", other.stderr);
    assert!(!other.stderr.contains("rewritten"), "{}", other.stderr);
    w.repo.git(&["checkout", "-q", "main"]);
}

/// Two refs already share a prefix (the first pushed without provenance,
/// so nothing could tell): the first ref's re-run is refused as the
/// collision it is, naming both refs, instead of being reported as
/// rewritten history.
#[test]
fn a_rerun_after_another_ref_pushed_is_the_collision_not_a_rewrite() {
    let mut w = World::new();
    let a = w.commit("a\n", 1_700_000_100);
    assert_eq!(
        w.push("refs/heads/feat+x", "feat+x", &["--no-provenance"])
            .code,
        0
    );
    // Another line of commits, on feat-x.
    w.repo.git(&["checkout", "-q", "--orphan", "other"]);
    w.commit("b\n", 1_700_000_200);
    let b = w.push("refs/heads/feat-x", "feat-x", &[]);
    b.json();
    w.repo.git(&["checkout", "-q", &a]);
    let rerun = w.push("refs/heads/feat+x", "feat+x", &[]);
    assert_eq!(rerun.code, 3, "{}", rerun.stderr);
    assert!(
        rerun.stderr.contains("refs/heads/feat-x"),
        "{}",
        rerun.stderr
    );
    assert!(
        rerun.stderr.contains("refs/heads/feat+x"),
        "{}",
        rerun.stderr
    );
    assert!(
        rerun.stderr.contains("--timestamp-tag feat_2bx"),
        "{}",
        rerun.stderr
    );
    assert!(!rerun.stderr.contains("rewritten"), "{}", rerun.stderr);
}

#[test]
fn what_the_project_says_flux_serves_is_what_flux_serves() {
    let mut w = World::new();
    let main = "refs/heads/main";
    let with_branch = ["--branch-tag", "main"];
    let step = |w: &mut World, extra: &[&str]| -> Run {
        let mut args = with_branch.to_vec();
        args.extend_from_slice(extra);
        let r = w.push(main, "main", &args);
        r.json();
        check_said(w, &r, "main");
        // promote --explain picks what Flux serves on main.
        assert_eq!(w.candidate("main", "prod"), w.served("main"));
        r
    };
    let t = 1_700_000_000;
    let m1 = w.commit("v: 1\n", t + 100);
    step(&mut w, &[]);
    // Same second, both sha orders: a commit whose sha7 sorts after m1's,
    // then one that sorts before both.
    let find = |w: &World, wanted: &dyn Fn(&str) -> bool, label: &str| -> String {
        (0..200)
            .find_map(|i| {
                let c = w.commit(&format!("v: {label} {i}\n"), t + 100);
                if wanted(&c[..7]) {
                    Some(c)
                } else {
                    w.repo.git(&["reset", "-q", "--hard", "HEAD~1"]);
                    None
                }
            })
            .expect("a commit of the wanted sha7 order")
    };
    let m2 = find(&w, &|s| s > &m1[..7], "2");
    let r = step(&mut w, &[]);
    assert_eq!(r.json()["anomaly"]["kind"], "same-timestamp");
    assert_eq!(
        said_served(&r.stderr),
        [format!("main-{}-{}", t + 100, &m1[..7])]
    );
    let low = std::cmp::min(&m1[..7], &m2[..7]).to_string();
    let m3 = find(&w, &|s| s < low.as_str(), "3");
    let r = step(&mut w, &[]);
    let m3_tag = format!("main-{}-{}", t + 100, &m3[..7]);
    assert_eq!(said_served(&r.stderr), std::slice::from_ref(&m3_tag));
    // --explain shows the rule and the tie it broke.
    let explain = run(
        &w.repo.dir,
        &[
            "promote",
            "--repository",
            &w.repository(),
            "--from",
            "main",
            "--to",
            "prod",
            "--explain",
        ],
        None,
    );
    assert_eq!(explain.code, 0, "{}", explain.stderr);
    assert!(
        explain
            .stdout
            .contains("on equal timestamps the alphabetically smallest tag"),
        "{}",
        explain.stdout
    );
    let tie = explain
        .stdout
        .lines()
        .find(|l| l.starts_with("tie: "))
        .unwrap_or_else(|| panic!("{}", explain.stdout));
    assert!(tie.contains(&format!("Flux serves {m3_tag}")), "{tie}");
    assert_eq!(
        tie.matches("main-").count(),
        4,
        "the three tags of that second, and the pick: {tie}"
    );
    // A real promote: the channel then serves the same commit.
    w.promote("main", "prod");
    assert_eq!(
        w.served("prod"),
        Some(format!("prod-{}-{}", t + 100, &m3[..7]))
    );
    // Backwards: a commit with an earlier committer time.
    w.commit("v: 4\n", t + 50);
    let r = step(&mut w, &[]);
    assert_eq!(r.json()["anomaly"]["kind"], "backwards-timestamp");
    assert!(!said_served(&r.stderr).is_empty(), "{}", r.stderr);
    // Forward again, then a rewind back to m4's line with the branch tag.
    let m4 = w.repo.git(&["rev-parse", "HEAD"]);
    let m5 = w.commit("v: 5\n", t + 500);
    step(&mut w, &[]);
    w.repo.git(&["reset", "-q", "--hard", &m4]);
    let r = step(&mut w, &["--force-pushed-from", &m5]);
    assert_eq!(r.json()["anomaly"]["kind"], "rewound-history");
    assert_eq!(r.json()["branch_tag"]["outcome"], "rewound");
    assert_eq!(
        said_served(&r.stderr),
        [format!("main-{}-{}", t + 500, &m5[..7])]
    );
    // The fix as the message gives it: one more change, with the branch tag.
    let m6 = w.commit("v: 6 # after the rewind\n", t + 600);
    let r = step(&mut w, &[]);
    assert_eq!(r.json()["branch_tag"]["outcome"], "moved");
    assert_eq!(
        w.served("main"),
        Some(format!("main-{}-{}", t + 600, &m6[..7]))
    );
    assert_eq!(common::registry::revision_of(&w.reg, NAME, "main"), m6);
    w.promote("main", "prod");
    assert_eq!(
        w.served("prod"),
        Some(format!("prod-{}-{}", t + 600, &m6[..7]))
    );
}

/// An older commit's first run after a same-second descendant was tagged
/// (jobs finishing out of order), and a force-push back to such an older
/// commit: the older commit's tag sorts first, so Flux moves to it, and
/// the push says so, naming the tag the oracle picks, not the
/// descendant's.
#[test]
fn an_older_commit_pushed_after_its_same_second_descendant_is_what_flux_serves() {
    let mut w = World::new();
    let main = "refs/heads/main";
    let t = 1_700_000_000;
    w.commit("v: 0\n", t);
    // Older sorts first: a (t+100), then its child b (t+100) with b7 > a7.
    let a = w.commit_where("a", t + 100, &|_| true);
    let b = w.commit_where("b", t + 100, &|s| s > &a[..7]);
    w.push(main, "main", &[]).json();
    w.repo.git(&["checkout", "-q", &a]);
    let r = w.push(main, "main", &[]);
    let a_tag = format!("main-{}-{}", t + 100, &a[..7]);
    assert_eq!(
        r.json()["anomaly"]["kind"],
        "rerun-of-older",
        "{}",
        r.stderr
    );
    assert_eq!(w.served("main").as_deref(), Some(a_tag.as_str()));
    assert_eq!(
        said_served(&r.stderr),
        std::slice::from_ref(&a_tag),
        "{}",
        r.stderr
    );
    check_said(&w, &r, "main");
    let message = r.json()["anomaly"]["message"].as_str().unwrap().to_string();
    assert!(message.contains("older"), "{message}");
    assert!(message.contains("later second"), "{message}");
    assert_eq!(w.candidate("main", "prod"), w.served("main"));

    // The rewind: c (t+200), its child d (t+200) with d7 > c7, only d
    // pushed, then a force-push back to c.
    w.repo.git(&["checkout", "-q", "-B", "main", &b]);
    let c = w.commit_where("c", t + 200, &|_| true);
    let d = w.commit_where("d", t + 200, &|s| s > &c[..7]);
    w.push(main, "main", &["--branch-tag", "main"]).json();
    w.repo.git(&["reset", "-q", "--hard", &c]);
    let r = w.push(
        main,
        "main",
        &["--branch-tag", "main", "--force-pushed-from", &d],
    );
    let c_tag = format!("main-{}-{}", t + 200, &c[..7]);
    assert_eq!(
        r.json()["anomaly"]["kind"],
        "rewound-history",
        "{}",
        r.stderr
    );
    assert_eq!(w.served("main").as_deref(), Some(c_tag.as_str()));
    assert_eq!(
        said_served(&r.stderr),
        std::slice::from_ref(&c_tag),
        "{}",
        r.stderr
    );
    check_said(&w, &r, "main");
    assert_eq!(w.candidate("main", "prod"), w.served("main"));
}

/// `tag` and `plan` print the same warning when sanitising changes the
/// prefix (other names give the same tag prefix), with a prefix that is
/// one of its own; a note when the name is written as it is but names
/// that sanitising changes are written the same (`feat-x`), naming names
/// whose tags the prefix's ImagePolicy serves (the oracle); nothing for a
/// name no changed name reaches but by a leading character (`main`).
#[test]
fn tag_and_plan_warn_when_other_names_share_the_prefix() {
    let w = World::new();
    w.commit("a\n", 1_700_000_100);
    let repository = w.repository();
    let named = regex::Regex::new(r#""([^"]+)""#).expect("regex");
    // (prefix, "warning" or "note", what it is written as, the prefix to
    // use instead)
    for (prefix, label, written, own) in [
        ("feat/x", Some("warning"), "feat-x", Some("feat_2fx")),
        (".hidden", Some("warning"), "hidden", Some("_2ehidden")),
        ("feat-x", Some("note"), "feat-x", None),
        ("release-1.x", Some("note"), "release-1.x", None),
        ("main", None, "main", None),
    ] {
        let tag = run(
            &w.repo.dir,
            &["tag", "--path", "s", "--prefix", prefix],
            None,
        );
        let plan = run(
            &w.repo.dir,
            &[
                "plan",
                "--path",
                "s",
                "--repository",
                &repository,
                "--timestamp-tag",
                prefix,
            ],
            None,
        );
        for r in [&tag, &plan] {
            assert_eq!(r.code, 0, "{}", r.stderr);
            let said = r
                .stderr
                .lines()
                .find(|l| l.starts_with("warning: ") || l.starts_with("note: "));
            let Some(label) = label else {
                assert!(said.is_none(), "{prefix}: {}", r.stderr);
                continue;
            };
            let said = said.unwrap_or_else(|| panic!("{prefix}: {}", r.stderr));
            assert!(said.starts_with(&format!("{label}: ")), "{said}");
            match own {
                Some(own) => {
                    assert!(said.contains(&format!("written \"{written}\"")), "{said}");
                    assert!(said.contains(own), "{said}");
                }
                None => {
                    assert!(said.contains("is written as it is"), "{said}");
                    // Each name the note gives is one whose tag the
                    // prefix's ImagePolicy serves.
                    let others: Vec<String> = named
                        .captures_iter(said)
                        .map(|c| c[1].to_string())
                        .filter(|n| n != prefix)
                        .collect();
                    assert!(others.len() >= 2, "{said}");
                    for o in &others {
                        let theirs = w.tag_for(o);
                        assert_eq!(
                            common::flux::served(prefix, std::slice::from_ref(&theirs)),
                            Some(theirs.clone()),
                            "{o}: {said}"
                        );
                    }
                }
            }
        }
        assert!(tag.stdout.trim().starts_with(&format!("{written}-")));
    }
}

/// The owner check reuses the push's tag listing and manifest reads, and
/// reads the newest tag's provenance only when that tag names another
/// commit: nothing more for a first push or a re-push, one referrers
/// question (the referrers API, or on this registry, which has none, the
/// `sha256-<hex>` index tag after the one probe a run makes anyway) for a
/// push of a new commit. Requests are seen through a recording proxy.
#[test]
fn the_owner_check_reads_only_what_can_tell_something() {
    let mut w = World::new();
    let proxy = common::registry::Proxy::start(w.reg.port);
    let repository = format!("{}/{NAME}", proxy.host());
    let push = |w: &mut World| -> Value {
        let args = [
            "push",
            "--path",
            "s",
            "--repository",
            repository.as_str(),
            "--timestamp-tag",
            "main",
            "--branch-tag",
            "main",
            "--json",
        ];
        let r = run(&w.repo.dir, &args, Some("refs/heads/main"));
        r.json()
    };
    // Requests about another image's referrers than `ours`.
    let about_others = |seen: &[common::registry::Seen], ours: &str| -> Vec<String> {
        let ours = ours.trim_start_matches("sha256:");
        seen.iter()
            .filter(|r| {
                (r.path.contains("/referrers/sha256:") || r.path.contains("/manifests/sha256-"))
                    && !r.path.contains(ours)
            })
            .map(|r| format!("{} {}", r.method, r.path))
            .collect()
    };
    w.commit("a\n", 1_700_000_100);
    let a = push(&mut w);
    let seen = proxy.take();
    let a_digest = a["digest"].as_str().unwrap().to_string();
    assert_eq!(
        about_others(&seen, &a_digest),
        Vec::<String>::new(),
        "first push"
    );
    eprintln!("first push: {} requests", seen.len());
    let again = push(&mut w);
    assert_eq!(again["pushed"], false);
    let seen = proxy.take();
    assert_eq!(
        about_others(&seen, &a_digest),
        Vec::<String>::new(),
        "re-push"
    );
    // Its own provenance is read once (the attach that finds it there).
    let a_hex = a_digest.trim_start_matches("sha256:");
    let own = seen
        .iter()
        .filter(|r| r.path.contains(&format!("/manifests/sha256-{a_hex}")))
        .count();
    assert_eq!(own, 1, "re-push: {seen:?}");
    eprintln!("re-push: {} requests", seen.len());
    w.commit("b\n", 1_700_000_200);
    let b = push(&mut w);
    let seen = proxy.take();
    let b_digest = b["digest"].as_str().unwrap();
    let others = about_others(&seen, b_digest);
    assert!(
        !others.is_empty() && others.iter().all(|r| r.contains(a_hex)),
        "{others:?}"
    );
    // One referrers question about A: the tag list holds A's referrers
    // tag, so its index is read and the referrers API is not probed.
    let tag_reads = others
        .iter()
        .filter(|r| r.contains("/manifests/sha256-"))
        .count();
    let api_reads = others.iter().filter(|r| r.contains("/referrers/")).count();
    assert_eq!((tag_reads, api_reads), (1, 0), "{others:?}");
    // B is a new image: nothing can refer to it yet, so the run does not
    // ask about its referrers either.
    let own_probes = seen
        .iter()
        .filter(|r| {
            r.path.contains("/referrers/")
                && r.path.contains(b_digest.trim_start_matches("sha256:"))
        })
        .count();
    assert_eq!(own_probes, 0, "{seen:?}");
    eprintln!("new commit: {} requests, about A: {others:?}", seen.len());
}

// ------------------------------------------------------------------ generated histories

/// One ref of a generated history: its own git branch, the prefix it
/// publishes under once its first push went through, the commits it
/// published that its branch has (oldest first), and an optional branch
/// tag.
struct GenRef {
    name: String,
    git_ref: String,
    branch: String,
    prefix: Option<String>,
    /// The name its first push was refused under (another ref owned the
    /// prefix it is written as).
    refused_as: Option<String>,
    branch_tag: Option<String>,
    pushed: Vec<(String, i64)>,
}

/// What a checked push did.
enum Pushed {
    /// Exit 0: the report, and Flux's pick for the prefix afterwards.
    Ok(Value, String),
    /// Refused (exit 3) as a second ref under the prefix: the prefix it
    /// offers.
    Refused(String),
}

/// Pushes `r`'s checked-out commit under `prefix` and checks it against
/// the oracles: refused (exit 3, both refs named, nothing written) exactly
/// when another ref's tags match the prefix's ImagePolicy; otherwise every
/// tag the output says Flux serves, and the anomaly's `served`, is Flux's
/// pick over the registry's tag list; no anomaly means Flux serves this
/// push's tag; `promote` picks what Flux serves; and the prefix's
/// ImagePolicy follows this ref only.
fn push_checked(w: &mut World, r: &GenRef, prefix: &str, extra: &[&str]) -> Pushed {
    let tag = w.tag_for(prefix);
    let p = prefix_of(&tag);
    let others: BTreeSet<String> = w
        .refs_followed(&p)
        .into_iter()
        .filter(|o| o != &r.git_ref)
        .collect();
    let before = w.tags();
    let mut args: Vec<&str> = Vec::new();
    if let Some(bt) = &r.branch_tag {
        args.extend(["--branch-tag", bt.as_str()]);
    }
    args.extend_from_slice(extra);
    let run = w.push(&r.git_ref, prefix, &args);
    let what = format!("{} as {prefix:?}", r.git_ref);
    if !others.is_empty() {
        assert_eq!(run.code, 3, "{what}: {}", run.stderr);
        assert!(run.stderr.contains(&r.git_ref), "{what}: {}", run.stderr);
        for o in &others {
            assert!(
                run.stderr.contains(o.as_str()),
                "{what}: {o}: {}",
                run.stderr
            );
        }
        assert_eq!(w.tags(), before, "{what}: a refused push wrote nothing");
        let offer = regex::Regex::new(r"--timestamp-tag (\S+) \(").expect("regex");
        let offered = offer
            .captures(&run.stderr)
            .unwrap_or_else(|| panic!("{what}: no prefix offered: {}", run.stderr))[1]
            .to_string();
        assert!(w.refs_followed(&offered).is_empty(), "{offered}");
        return Pushed::Refused(offered);
    }
    let report = run.json();
    assert_eq!(report["timestamp_tag"], tag.as_str(), "{what}");
    let served = w.served(&p).expect("a tag Flux serves");
    check_said(w, &run, &p);
    let anomaly = &report["anomaly"];
    if anomaly.is_null() {
        assert_eq!(
            served, tag,
            "{what}: no anomaly, so Flux serves this push: {}",
            run.stderr
        );
    } else {
        // The message names the tag Flux serves (check_said: the
        // oracle's), and so does `served`.
        let message = anomaly["message"].as_str().expect("message");
        assert!(!said_served(message).is_empty(), "{what}: {message}");
        assert_eq!(anomaly["served"], served.as_str(), "{what}: {message}");
    }
    assert_eq!(
        w.candidate(&p, "promoted").as_deref(),
        Some(served.as_str()),
        "{what}"
    );
    assert_eq!(
        w.refs_followed(&p),
        BTreeSet::from([r.git_ref.clone()]),
        "{what}"
    );
    Pushed::Ok(report, served)
}

/// The step kinds of a generated history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Step {
    /// A ref's first push.
    Start,
    /// A commit at a later second.
    Forward,
    /// Two commits (a, then its child b) in one second; which sha7 sorts
    /// first and which job runs first.
    Pair { older_first: bool, in_order: bool },
    /// A commit with a committer time below its tagged parent's.
    Backwards,
    /// An older job of the ref runs again.
    Rerun,
    /// A ref pushes again under the name it was refused under.
    Intruder,
    /// A commit, a force-push back to its parent, and the fix (one more
    /// commit), with the branch tag.
    Rewind { same_second: bool },
}

/// Generated histories: one seeded sequence of steps over 27 refs (their
/// first pushes spread through it), each ref on its own git branch and
/// all in one registry repository with the provenance referrers and
/// branch tags; same-second commits pushed in both sha orders and both
/// job orders (an older commit's job after its descendant's), backwards
/// committer times, re-runs, refs pushing under a prefix another ref owns,
/// and rewinds with their fix. After every push, [`push_checked`]'s
/// oracles; after every push of `main`, a real `promote` into `prod`, which
/// then serves the same commit. `FLUX_RULES_SEED` replays another seed.
#[test]
fn generated_histories_keep_flux_rules() {
    let seed: u64 = std::env::var("FLUX_RULES_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_2020);
    eprintln!("FLUX_RULES_SEED={seed}");
    let mut rng = Rng(seed | 1);
    let mut w = World::new();
    let root = w.commit("root\n", 1_600_000_000);
    let names = ref_names();
    assert!(names.len() >= 25 && names.iter().any(|n| n.len() == 120));
    let mut refs: Vec<GenRef> = names
        .iter()
        .enumerate()
        .map(|(i, n)| GenRef {
            name: n.clone(),
            git_ref: format!("refs/heads/{n}"),
            branch: format!("r{i}"),
            prefix: None,
            refused_as: None,
            // main and every fourth ref move a branch tag.
            branch_tag: (i % 4 == 0).then(|| {
                if i == 0 {
                    "main".to_string()
                } else {
                    format!("head-{i}")
                }
            }),
            pushed: Vec::new(),
        })
        .collect();
    assert_eq!(refs[0].name, "main");
    let mut starts: Vec<usize> = (1..refs.len()).collect();
    rng.shuffle(&mut starts);
    starts.insert(0, 0);
    let mut steps: Vec<Step> = vec![Step::Start; refs.len() - 1];
    for older_first in [true, false] {
        for in_order in [true, false] {
            steps.extend(
                [Step::Pair {
                    older_first,
                    in_order,
                }; 2],
            );
        }
    }
    steps.extend([Step::Forward; 8]);
    steps.extend([Step::Backwards; 3]);
    steps.extend([Step::Rerun; 3]);
    steps.extend([Step::Intruder; 3]);
    steps.extend([
        Step::Rewind { same_second: false },
        Step::Rewind { same_second: false },
        Step::Rewind { same_second: true },
    ]);
    rng.shuffle(&mut steps);
    steps.insert(0, Step::Start);
    let mut t: i64 = 1_700_000_000;
    let mut starts = starts.into_iter();
    let mut done: BTreeMap<String, usize> = BTreeMap::new();
    let mut label = 0u32;
    for step in steps {
        label += 1;
        let started: Vec<usize> = (0..refs.len())
            .filter(|&i| refs[i].prefix.is_some())
            .collect();
        // The ref the step is about.
        let i = match step {
            Step::Start => starts.next().expect("a ref to start"),
            Step::Intruder => match started.iter().find(|&&i| refs[i].refused_as.is_some()) {
                Some(&i) => i,
                None => continue,
            },
            Step::Rewind { .. } => {
                let with: Vec<usize> = started
                    .iter()
                    .copied()
                    .filter(|&i| refs[i].branch_tag.is_some())
                    .collect();
                with[rng.range(0, with.len() as u64) as usize]
            }
            Step::Rerun if started.iter().all(|&i| refs[i].pushed.len() < 2) => continue,
            Step::Rerun => {
                let with: Vec<usize> = started
                    .iter()
                    .copied()
                    .filter(|&i| refs[i].pushed.len() >= 2)
                    .collect();
                with[rng.range(0, with.len() as u64) as usize]
            }
            _ => started[rng.range(0, started.len() as u64) as usize],
        };
        *done
            .entry(format!("{step:?}").split(' ').next().unwrap().to_string())
            .or_default() += 1;
        let branch = refs[i].branch.clone();
        let content = |l: u32| format!("ref: {}\nstep: {l}\n", refs[i].name);
        match step {
            Step::Start => {
                w.repo.git(&["checkout", "-q", "-B", &branch, &root]);
                t += rng.range(10, 60) as i64;
                let c = w.commit(&content(label), t);
                let name = refs[i].name.clone();
                let prefix = match push_checked(&mut w, &refs[i], &name, &[]) {
                    Pushed::Ok(..) => name,
                    Pushed::Refused(offered) => {
                        refs[i].refused_as = Some(name);
                        match push_checked(&mut w, &refs[i], &offered, &[]) {
                            Pushed::Ok(..) => offered,
                            Pushed::Refused(_) => panic!("the offered {offered} was refused"),
                        }
                    }
                };
                refs[i].prefix = Some(prefix);
                refs[i].pushed.push((c, t));
            }
            Step::Forward => {
                w.repo.git(&["checkout", "-q", &branch]);
                t += rng.range(10, 60) as i64;
                let c = w.commit(&content(label), t);
                let prefix = refs[i].prefix.clone().unwrap();
                let Pushed::Ok(report, _) = push_checked(&mut w, &refs[i], &prefix, &[]) else {
                    panic!("refused")
                };
                assert!(report["anomaly"].is_null(), "{report}");
                refs[i].pushed.push((c, t));
            }
            Step::Pair {
                older_first,
                in_order,
            } => {
                w.repo.git(&["checkout", "-q", &branch]);
                t += rng.range(10, 60) as i64;
                let a = w.commit_where(&content(label), t, &|s| ("4".."c").contains(&&s[..1]));
                let a7 = a[..7].to_string();
                let b = w.commit_where(&content(label + 1000), t, &|s| {
                    if older_first {
                        s > a7.as_str()
                    } else {
                        s < a7.as_str()
                    }
                });
                let prefix = refs[i].prefix.clone().unwrap();
                let (first, second) = if in_order { (&a, &b) } else { (&b, &a) };
                w.repo.git(&["checkout", "-q", first]);
                push_checked(&mut w, &refs[i], &prefix, &[]);
                w.repo.git(&["checkout", "-q", second]);
                let Pushed::Ok(report, served) = push_checked(&mut w, &refs[i], &prefix, &[])
                else {
                    panic!("refused")
                };
                w.repo.git(&["checkout", "-q", &branch]);
                let p = prefix_of(report["timestamp_tag"].as_str().unwrap());
                let tag_of = |c: &str| format!("{p}-{t}-{}", &c[..7]);
                // The older commit's tag sorts first: Flux serves it,
                // whichever job ran last.
                let want = if older_first { tag_of(&a) } else { tag_of(&b) };
                assert_eq!(served, want, "{step:?}");
                let kind = if in_order {
                    "same-timestamp"
                } else {
                    "rerun-of-older"
                };
                assert_eq!(report["anomaly"]["kind"], kind, "{step:?}: {report}");
                let message = report["anomaly"]["message"].as_str().unwrap();
                if older_first && !in_order {
                    assert!(message.contains("moves to the older commit"), "{message}");
                }
                refs[i].pushed.extend([(a, t), (b, t)]);
            }
            Step::Backwards => {
                w.repo.git(&["checkout", "-q", &branch]);
                let below = refs[i].pushed.iter().map(|(_, ts)| *ts).max().unwrap();
                let back = below - rng.range(1, 30) as i64;
                let c = w.commit(&content(label), back);
                let prefix = refs[i].prefix.clone().unwrap();
                let before = w.served(&prefix_of(&w.tag_for(&prefix)));
                let Pushed::Ok(report, served) = push_checked(&mut w, &refs[i], &prefix, &[])
                else {
                    panic!("refused")
                };
                assert_eq!(report["anomaly"]["kind"], "backwards-timestamp", "{report}");
                assert_eq!(Some(served), before, "Flux keeps what it served");
                refs[i].pushed.push((c, back));
            }
            Step::Rerun => {
                let n = refs[i].pushed.len() - 1;
                let (old, _) = refs[i].pushed[rng.range(0, n as u64) as usize].clone();
                w.repo.git(&["checkout", "-q", &old]);
                let prefix = refs[i].prefix.clone().unwrap();
                push_checked(&mut w, &refs[i], &prefix, &[]);
                w.repo.git(&["checkout", "-q", &branch]);
            }
            Step::Intruder => {
                w.repo.git(&["checkout", "-q", &branch]);
                let name = refs[i].refused_as.clone().unwrap();
                assert!(
                    matches!(
                        push_checked(&mut w, &refs[i], &name, &[]),
                        Pushed::Refused(_)
                    ),
                    "{name}"
                );
            }
            Step::Rewind { same_second } => {
                w.repo.git(&["checkout", "-q", &branch]);
                let (x, x_ts) = refs[i].pushed.last().unwrap().clone();
                let y_ts = if same_second {
                    x_ts
                } else {
                    t += rng.range(10, 60) as i64;
                    t
                };
                let y = w.commit(&content(label), y_ts);
                let prefix = refs[i].prefix.clone().unwrap();
                push_checked(&mut w, &refs[i], &prefix, &[]);
                // The force-push back to x, as the event (or
                // --force-pushed-from) proves it.
                w.repo.git(&["reset", "-q", "--hard", &x]);
                let Pushed::Ok(report, served) =
                    push_checked(&mut w, &refs[i], &prefix, &["--force-pushed-from", &y])
                else {
                    panic!("refused")
                };
                assert_eq!(report["branch_tag"]["outcome"], "rewound", "{report}");
                if !same_second {
                    assert_eq!(report["anomaly"]["kind"], "rewound-history", "{report}");
                    assert!(
                        served.ends_with(&format!("-{y_ts}-{}", &y[..7])),
                        "{served}"
                    );
                    let message = report["anomaly"]["message"].as_str().unwrap();
                    assert!(message.contains("commit one more change"), "{message}");
                }
                // The fix as the message gives it: one more commit.
                t += rng.range(10, 60) as i64;
                let z = w.commit(&content(label + 1000), t);
                let Pushed::Ok(report, served) = push_checked(&mut w, &refs[i], &prefix, &[])
                else {
                    panic!("refused")
                };
                assert_eq!(report["branch_tag"]["outcome"], "moved", "{report}");
                assert_eq!(served, report["timestamp_tag"].as_str().unwrap());
                let bt = refs[i].branch_tag.clone().unwrap();
                assert_eq!(common::registry::revision_of(&w.reg, NAME, &bt), z);
                refs[i].pushed.push((z, t));
            }
        }
        // `main` is promoted into `prod` after each of its pushes: the
        // channel then serves the commit Flux serves on main.
        if i == 0 && step != Step::Intruder {
            w.promote("main", "prod");
            let main = w.served("main").unwrap();
            assert_eq!(
                w.served("prod").map(|t| t.replacen("prod-", "main-", 1)),
                Some(main)
            );
        }
    }
    assert!(starts.next().is_none(), "every ref started");
    eprintln!("steps: {done:?}");
    for kind in [
        "Start",
        "Forward",
        "Pair",
        "Backwards",
        "Rerun",
        "Intruder",
        "Rewind",
    ] {
        assert!(
            done.get(kind).is_some_and(|&n| n > 0),
            "no {kind} step: {done:?}"
        );
    }
    // Over everything the registry holds: each prefix's ImagePolicy
    // follows one ref, and the referrers' index tags, the branch tags and
    // the channel's tags are in the same repository.
    let prefixes: BTreeSet<String> = w.published.keys().map(|t| prefix_of(t)).collect();
    for p in &prefixes {
        assert_eq!(w.refs_followed(p).len(), 1, "{p}: {:?}", w.refs_followed(p));
    }
    let tags = w.tags();
    assert!(tags.iter().any(|t| t.starts_with("sha256-")));
    assert!(tags.contains("main") && tags.iter().any(|t| t.starts_with("head-")));
    assert!(w.served("prod").is_some());
    assert!(refs.iter().filter(|r| r.refused_as.is_some()).count() >= 10);
}
