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

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Stdio};

use common::git::ScratchRepo;
use common::registry::{Auth, Registry, bin};
use serde_json::Value;

const NAME: &str = "acme/settings";

/// What one run of the binary did.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn json(&self) -> Value {
        serde_json::from_str(self.stdout.trim())
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", self.stdout, self.stderr))
    }

    fn ok(&self) -> Value {
        assert_eq!(self.code, 0, "failed:\n{}", self.stderr);
        self.json()
    }
}

fn run(dir: &Path, args: &[&str], git_ref: Option<&str>) -> Run {
    let empty = common::TempDir::new();
    let mut c = Command::new(bin());
    c.current_dir(dir)
        .args(args)
        .env("DOCKER_CONFIG", empty.path())
        .stdin(Stdio::null());
    for v in [
        "GITHUB_TOKEN",
        "GITHUB_REPOSITORY",
        "GITHUB_API_URL",
        "GITHUB_SERVER_URL",
        "GITHUB_REF",
        "GH_TOKEN",
        "SETTINGS_IMAGE_USERNAME",
        "SETTINGS_IMAGE_PASSWORD",
    ] {
        c.env_remove(v);
    }
    if let Some(r) = git_ref {
        c.env("GITHUB_REF", r);
    }
    let out = c.output().expect("running settings-image");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
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
        std::fs::create_dir_all(self.repo.dir.join("s")).expect("folder");
        std::fs::write(self.repo.dir.join("s/app.yaml"), content).expect("write");
        self.repo.git(&["add", "-A"]);
        common::git::git_at(&self.repo.dir, &["commit", "-q", "-m", "change"], t);
        self.repo.git(&["rev-parse", "HEAD"])
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
        r.ok()["candidate"].as_str().map(str::to_string)
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

#[test]
fn one_imagepolicy_never_follows_two_refs() {
    let mut w = World::new();
    // 27 names: colliding groups (characters a tag cannot hold, a leading
    // '.', capitals that stay distinct, names cut at 109 characters) and
    // names of their own.
    let long = "n".repeat(109);
    let names: Vec<String> = [
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
    .collect();
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
            let report = r.ok();
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
            prefix_of(r.ok()["timestamp_tag"].as_str().unwrap()),
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
        rerun.ok()["anomaly"]["kind"],
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
    b.ok();
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
        r.ok();
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
    let p = run(
        &w.repo.dir,
        &[
            "promote",
            "--repository",
            &w.repository(),
            "--from",
            "main",
            "--to",
            "prod",
            "--json",
        ],
        None,
    );
    p.ok();
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
    let p = run(
        &w.repo.dir,
        &[
            "promote",
            "--repository",
            &w.repository(),
            "--from",
            "main",
            "--to",
            "prod",
            "--json",
        ],
        None,
    );
    p.ok();
    assert_eq!(
        w.served("prod"),
        Some(format!("prod-{}-{}", t + 600, &m6[..7]))
    );
}

/// `tag` and `plan` print the same warning when the prefix is not one of
/// its own (other names give the same tag prefix), with a prefix that is;
/// a prefix used as it is gets none.
#[test]
fn tag_and_plan_warn_when_other_names_share_the_prefix() {
    let w = World::new();
    w.commit("a\n", 1_700_000_100);
    let repository = w.repository();
    for (prefix, shared_as, own) in [
        ("feat/x", Some("feat-x"), "feat_2fx"),
        (".hidden", Some("hidden"), "_2ehidden"),
        ("main", None, "main"),
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
            let warning = r.stderr.lines().find(|l| l.starts_with("warning: "));
            match shared_as {
                Some(s) => {
                    let warning = warning.unwrap_or_else(|| panic!("{prefix}: {}", r.stderr));
                    assert!(warning.contains(&format!("written \"{s}\"")), "{warning}");
                    assert!(warning.contains(own), "{warning}");
                }
                None => assert!(warning.is_none(), "{prefix}: {}", r.stderr),
            }
        }
        assert!(
            tag.stdout
                .trim()
                .starts_with(&format!("{}-", shared_as.unwrap_or(own)))
        );
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
        r.ok()
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
