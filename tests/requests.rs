//! How many requests a push makes, counted per kind from the registry's own
//! access log: CNCF distribution logs every request it serves, before the
//! answer is complete, so the log is whole once the push has exited. On a
//! runner every request to ghcr.io costs 50-150 ms, so these counts, not
//! CPU, are what a user waits for (`scripts/bench-push.sh --latency` times
//! them). Each row has a budget per kind (method x resource); a count above
//! its budget fails, and so does a push that did not do its work (the tags,
//! the branch tag and the provenance are read back with curl).
//!
//! The rows: a 50-file folder in git, pushed as `--tag latest`,
//! `--timestamp-tag main --branch-tag main`, `--tag latest
//! --no-provenance`, and the second of these again for the next commit
//! into a repository that already holds three (what CI does on every
//! change). Each first push, then a re-push of the same commit.

use crate::common;

use std::collections::BTreeMap;

use common::cmd::TestCommand;
use common::git::ScratchRepo;
use common::registry::{Auth, Registry, curl, digest_of, revision_of, tags_of};
use common::runner::Runner;

/// A request kind: method and resource (`manifests`, `blobs`, `uploads`
/// for `blobs/uploads/`, `tags`, `referrers`), or `auth` for `GET /v2/`.
type Kind = (String, &'static str);

/// The requests in `log` (access log lines) about repository `name`, per
/// kind; a request about anything else panics.
fn count(log: &str, name: &str) -> BTreeMap<Kind, usize> {
    let mut out = BTreeMap::new();
    for line in log.lines() {
        // `127.0.0.1 - - [date] "GET /v2/NAME/tags/list?n=1000 HTTP/1.1" 200 ...`
        let Some(request) = line.split('"').nth(1) else {
            continue;
        };
        let mut parts = request.split(' ');
        let (Some(method), Some(path)) = (parts.next(), parts.next()) else {
            panic!("not a request: {line}");
        };
        let path = path.split('?').next().unwrap_or(path);
        let resource = if path == "/v2/" {
            "auth"
        } else {
            let rest = path
                .strip_prefix(&format!("/v2/{name}/"))
                .unwrap_or_else(|| panic!("a request about another repository: {line}"));
            match rest.split('/').next() {
                Some("manifests") => "manifests",
                Some("blobs") if rest.starts_with("blobs/uploads/") => "uploads",
                Some("blobs") => "blobs",
                Some("tags") => "tags",
                Some("referrers") => "referrers",
                _ => panic!("an unexpected request: {line}"),
            }
        };
        *out.entry((method.to_string(), resource)).or_default() += 1;
    }
    out
}

/// `(method, resource, at most)`.
type Budget = &'static [(&'static str, &'static str, usize)];

/// Fails when a kind's count is above its budget (a kind without one has
/// a budget of 0; authentication, `GET /v2/`, has 1), and when the total
/// after authentication is above the budgets' sum; returns that total.
fn within(row: &str, counts: &BTreeMap<Kind, usize>, budget: Budget) -> usize {
    let table: String = counts
        .iter()
        .map(|((m, r), n)| format!("\n  {m} {r}: {n}"))
        .collect();
    for ((m, r), n) in counts {
        let allowed = budget
            .iter()
            .find(|(bm, br, _)| bm == m && br == r)
            .map_or(usize::from(*r == "auth"), |b| b.2);
        assert!(
            *n <= allowed,
            "{row}: {n} x {m} {r}, the budget is {allowed}; all requests:{table}"
        );
    }
    let total: usize = counts
        .iter()
        .filter(|((_, r), _)| *r != "auth")
        .map(|(_, n)| n)
        .sum();
    let allowed: usize = budget.iter().map(|b| b.2).sum();
    assert!(
        total <= allowed,
        "{row}: {total} requests after authentication, the budget is {allowed}:{table}"
    );
    total
}

struct Folder {
    repo: ScratchRepo,
    time: i64,
}

impl Folder {
    /// A repository with `configs/shop`: 50 files, one commit.
    fn new() -> Folder {
        let repo = ScratchRepo::new();
        let shop = repo.dir.join("configs/shop");
        std::fs::create_dir_all(&shop).expect("mkdir");
        for i in 1..=50 {
            let body: String = (1..=40)
                .map(|j| format!("key_{i}_{j}: value-{i}-{j}\n"))
                .collect();
            std::fs::write(shop.join(format!("setting-{i:02}.yaml")), body).expect("write");
        }
        let mut f = Folder {
            repo,
            time: 1_700_000_000,
        };
        f.commit();
        f
    }

    /// Commits what the folder holds, 100 s after the last commit.
    fn commit(&mut self) -> String {
        self.time += 100;
        self.repo.commit_all("change", self.time)
    }

    /// Changes one file and commits it.
    fn change(&mut self) -> String {
        let f = self.repo.dir.join("configs/shop/setting-01.yaml");
        std::fs::write(f, format!("changed: {}\n", self.time)).expect("write");
        self.commit()
    }

    fn shop(&self) -> String {
        self.repo.dir.join("configs/shop").display().to_string()
    }
}

/// Pushes `folder` into `name` with `flags`: the `--json` report and the
/// requests it made, per kind.
fn push(
    reg: &Registry,
    folder: &Folder,
    name: &str,
    flags: &[&str],
) -> (serde_json::Value, BTreeMap<Kind, usize>) {
    let before = std::fs::read_to_string(&reg.log).expect("access log").len();
    let repository = format!("{}/{name}", reg.host());
    let out = TestCommand::push_json(folder.shop(), &repository)
        .args(flags)
        .json();
    let log = std::fs::read_to_string(&reg.log).expect("access log");
    (out, count(&log[before..], name))
}

/// The provenance referrers the referrers tag of `digest` lists.
fn provenance_of(reg: &Registry, name: &str, digest: &str) -> Vec<String> {
    let (code, body) = curl(
        &format!(
            "http://{}/v2/{name}/manifests/{}",
            reg.host(),
            digest.replace(':', "-")
        ),
        Some("application/vnd.oci.image.index.v1+json"),
    );
    assert_eq!(code, 200, "no referrers index for {digest}: {body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("index JSON");
    v["manifests"]
        .as_array()
        .expect("manifests")
        .iter()
        .filter(|d| d["artifactType"] == "application/vnd.in-toto+json")
        .map(|d| d["digest"].as_str().expect("digest").to_string())
        .collect()
}

/// The timestamp tag of `commit` at `time`, as `--timestamp-tag main` makes it.
fn stamp(time: i64, commit: &str) -> String {
    format!("main-{time}-{}", &commit[..7])
}

const STAMPED: &[&str] = &["--timestamp-tag", "main", "--branch-tag", "main"];

/// A first push of new content: the blobs (one `POST` that mounts from
/// this repository asks whether each is there and opens its upload; one
/// `PUT` sends it), the manifest under the tag (a `HEAD` of the tag
/// first), the provenance referrer (its manifest, and its index: read,
/// then written).
const PLAIN_FIRST: Budget = &[
    ("HEAD", "manifests", 1),
    ("POST", "uploads", 4),
    ("PUT", "uploads", 4),
    ("PUT", "manifests", 3),
    ("GET", "manifests", 1),
];
/// A re-push: the tag, and whether the provenance is there (the referrers
/// API, then the referrers tag).
const PLAIN_AGAIN: Budget = &[
    ("HEAD", "manifests", 1),
    ("GET", "referrers", 1),
    ("GET", "manifests", 1),
];
/// The tag list once; the timestamp tag read just before its put and
/// back after it; the branch tag put, then the tag list read back (the
/// branch tag itself is not asked: the list holds no timestamp tag of
/// another commit that a repair could move it to); the referrers index
/// read and written.
const STAMPED_FIRST: Budget = &[
    ("GET", "tags", 2),
    ("HEAD", "manifests", 2),
    ("POST", "uploads", 4),
    ("PUT", "uploads", 4),
    ("PUT", "manifests", 4),
    ("GET", "manifests", 1),
];
/// The tag list, the timestamp tag, the branch tag, the referrers tag.
const STAMPED_AGAIN: Budget = &[("GET", "tags", 1), ("GET", "manifests", 3)];
const NOPROV_FIRST: Budget = &[
    ("HEAD", "manifests", 1),
    ("POST", "uploads", 2),
    ("PUT", "uploads", 2),
    ("PUT", "manifests", 1),
];
const NOPROV_AGAIN: Budget = &[("HEAD", "manifests", 1)];
/// As [`STAMPED_FIRST`], plus the newest earlier tag (the anomaly check)
/// and the branch tag (the plan) read once each, and the referrers index
/// of the newest earlier tag (it names another commit: which ref published
/// it, docs/flux.md's one-ref-per-prefix rule; the tag list says the index
/// is there, so no referrers API probe); the empty config of the
/// provenance is there already (one `POST`).
const NEXT_FIRST: Budget = &[
    ("GET", "tags", 2),
    ("HEAD", "manifests", 2),
    ("POST", "uploads", 4),
    ("PUT", "uploads", 3),
    ("PUT", "manifests", 4),
    ("GET", "manifests", 4),
];

#[test]
fn a_push_makes_no_more_requests_than_it_needs() {
    let reg = Registry::start(Auth::None);
    let mut folder = Folder::new();
    // The repository with history: three commits pushed, one by one.
    let mut earlier = Vec::new();
    for _ in 0..3 {
        let c = folder.change();
        push(&reg, &folder, "next", STAMPED);
        earlier.push(stamp(folder.time, &c));
    }
    let commit = folder.change();
    let ts_tag = stamp(folder.time, &commit);
    let mut totals = Vec::new();

    // --tag latest
    let (first, n) = push(&reg, &folder, "plain", &["--tag", "latest"]);
    let digest = first["digest"].as_str().expect("digest").to_string();
    totals.push(("plain first", within("plain first push", &n, PLAIN_FIRST)));
    assert_eq!(digest_of(&reg, "plain", "latest"), Some(digest.clone()));
    let prov = first["provenance"]
        .as_str()
        .expect("provenance")
        .to_string();
    assert_eq!(provenance_of(&reg, "plain", &digest), [prov.as_str()]);
    let (again, n) = push(&reg, &folder, "plain", &["--tag", "latest"]);
    totals.push(("plain again", within("plain re-push", &n, PLAIN_AGAIN)));
    assert_eq!(
        (&again["pushed"], &again["provenance"]),
        (&false.into(), &prov.clone().into())
    );

    // --timestamp-tag main --branch-tag main
    let (first, n) = push(&reg, &folder, "stamped", STAMPED);
    totals.push((
        "stamped first",
        within("stamped first push", &n, STAMPED_FIRST),
    ));
    assert_eq!(
        first["digest"],
        digest.as_str(),
        "the same image as the plain row"
    );
    assert_eq!(first["branch_tag"]["outcome"], "created");
    assert_eq!(digest_of(&reg, "stamped", &ts_tag), Some(digest.clone()));
    assert_eq!(digest_of(&reg, "stamped", "main"), Some(digest.clone()));
    let prov = first["provenance"]
        .as_str()
        .expect("provenance")
        .to_string();
    assert_eq!(provenance_of(&reg, "stamped", &digest), [prov.as_str()]);
    let (again, n) = push(&reg, &folder, "stamped", STAMPED);
    totals.push((
        "stamped again",
        within("stamped re-push", &n, STAMPED_AGAIN),
    ));
    assert_eq!(
        (&again["pushed"], &again["provenance"]),
        (&false.into(), &prov.into())
    );
    assert_eq!(again["branch_tag"]["outcome"], "unchanged");

    // --tag latest --no-provenance
    let (first, n) = push(
        &reg,
        &folder,
        "noprov",
        &["--tag", "latest", "--no-provenance"],
    );
    totals.push((
        "noprov first",
        within("no-provenance first push", &n, NOPROV_FIRST),
    ));
    assert_eq!(digest_of(&reg, "noprov", "latest"), Some(digest.clone()));
    assert!(
        first.get("provenance").is_none_or(|p| p.is_null()),
        "{first}"
    );
    assert!(
        !tags_of(&reg, "noprov")
            .iter()
            .any(|t| t.starts_with("sha256-"))
    );
    let (again, n) = push(
        &reg,
        &folder,
        "noprov",
        &["--tag", "latest", "--no-provenance"],
    );
    totals.push((
        "noprov again",
        within("no-provenance re-push", &n, NOPROV_AGAIN),
    ));
    assert_eq!(again["pushed"], false);

    // The next commit into the repository with history.
    let (first, n) = push(&reg, &folder, "next", STAMPED);
    totals.push((
        "next first",
        within("next commit's first push", &n, NEXT_FIRST),
    ));
    assert_eq!(first["anomaly"], serde_json::Value::Null, "{first}");
    assert_eq!(first["branch_tag"]["outcome"], "moved");
    assert_eq!(revision_of(&reg, "next", "main"), commit);
    assert_eq!(digest_of(&reg, "next", &ts_tag), Some(digest.clone()));
    for t in &earlier {
        assert!(tags_of(&reg, "next").contains(t), "{t} is gone");
    }
    let prov = first["provenance"]
        .as_str()
        .expect("provenance")
        .to_string();
    assert_eq!(provenance_of(&reg, "next", &digest), [prov.as_str()]);
    let (again, n) = push(&reg, &folder, "next", STAMPED);
    totals.push((
        "next again",
        within("next commit's re-push", &n, STAMPED_AGAIN),
    ));
    assert_eq!(
        (&again["pushed"], &again["provenance"]),
        (&false.into(), &prov.into())
    );
    eprintln!("requests after authentication: {totals:?}");
    assert_eq!(docs_counts(), totals, "docs/push.md states other counts");
}

/// The request counts the docs state: docs/evidence.md's table's rows
/// (first push, re-push), and docs/push.md's step 2, "N requests ... for
/// one tag, M with `--no-provenance`", which must be the table's re-push
/// counts.
fn docs_counts() -> Vec<(&'static str, usize)> {
    let text =
        std::fs::read_to_string(common::repo().join("docs/evidence.md")).expect("evidence.md");
    let push_md = std::fs::read_to_string(common::repo().join("docs/push.md")).expect("push.md");
    let leading = |cell: &str| -> usize {
        cell.trim()
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no count in {cell:?}"))
    };
    let row = |name: &str| -> (usize, usize) {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("| {name} |")))
            .unwrap_or_else(|| panic!("no row {name:?} in docs/evidence.md"));
        let cells: Vec<&str> = line.split(" | ").collect();
        (leading(cells[1]), leading(cells[2]))
    };
    let plain = row("`--tag latest`, provenance on");
    let stamped = row("`--timestamp-tag main --branch-tag main`, provenance on");
    let noprov = row("`--tag latest --no-provenance`");
    let next = row("the second row, the next commit into a repository with earlier ones");
    let step2 = push_md
        .split("a re-push of unchanged content")
        .nth(1)
        .and_then(|t| t.split("(the table").next())
        .expect("step 2's re-push sentence");
    let step2 = step2.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        step2.contains(&format!(
            "{} requests after authentication for one tag, {} with `--no-provenance`",
            plain.1, noprov.1
        )),
        "docs/push.md's step 2 says other counts than the table: {step2}"
    );
    vec![
        ("plain first", plain.0),
        ("plain again", plain.1),
        ("stamped first", stamped.0),
        ("stamped again", stamped.1),
        ("noprov first", noprov.0),
        ("noprov again", noprov.1),
        ("next first", next.0),
        ("next again", next.1),
    ]
}

#[test]
fn the_counter_counts_what_distribution_logs() {
    // The oracle itself: two known requests, counted per kind.
    let reg = Registry::start(Auth::None);
    let before = std::fs::read_to_string(&reg.log).expect("access log").len();
    let base = format!("http://{}/v2", reg.host());
    assert_eq!(curl(&format!("{base}/"), None).0, 200);
    assert_eq!(curl(&format!("{base}/a/b/tags/list?n=5"), None).0, 404);
    assert_eq!(curl(&format!("{base}/a/b/manifests/x"), None).0, 404);
    let log = std::fs::read_to_string(&reg.log).expect("access log");
    let n = count(&log[before..], "a/b");
    let want: BTreeMap<Kind, usize> = [
        (("GET".to_string(), "auth"), 1),
        (("GET".to_string(), "tags"), 1),
        (("GET".to_string(), "manifests"), 1),
    ]
    .into_iter()
    .collect();
    assert_eq!(n, want);
}

/// Runs the publish action (one folder, `timestamp-tag: main`) on
/// `folder`'s checkout into `name`, with or without the job summary: the
/// summary and the requests it made, per kind.
fn publish_action(
    reg: &Registry,
    folder: &Folder,
    name: &str,
    summary: bool,
) -> (String, BTreeMap<Kind, usize>) {
    let before = std::fs::read_to_string(&reg.log).expect("access log").len();
    let repository = format!("{}/{name}", reg.host());
    let run = Runner::new(common::TempDir::new(), folder.repo.dir.clone()).run(&[
        ("path", "configs/shop"),
        ("repository", repository.as_str()),
        ("timestamp-tag", "main"),
        ("summary", if summary { "true" } else { "false" }),
    ]);
    run.ok();
    let log = std::fs::read_to_string(&reg.log).expect("access log");
    (run.summary, count(&log[before..], name))
}

/// The requests `with` made beyond `without`, per kind (none fewer).
fn extra(with: &BTreeMap<Kind, usize>, without: &BTreeMap<Kind, usize>) -> BTreeMap<Kind, usize> {
    for (k, n) in without {
        assert!(
            with.get(k).copied().unwrap_or(0) >= *n,
            "{k:?}: {with:?} {without:?}"
        );
    }
    with.iter()
        .map(|(k, n)| (k.clone(), n - without.get(k).copied().unwrap_or(0)))
        .filter(|(_, n)| *n > 0)
        .collect()
}

fn kinds(rows: &[(&str, &'static str, usize)]) -> BTreeMap<Kind, usize> {
    rows.iter()
        .map(|(m, r, n)| ((m.to_string(), *r), *n))
        .collect()
}

/// What the job summary's diff (docs/format.md, "The diff") costs a
/// publish: the same publish into two repositories with the same history,
/// one with the summary and one without. With an earlier image under the
/// prefix: its own authentication (a read-only client), the tag list,
/// the earlier image's manifest and both layers (the new layer's
/// descriptor is the push report's). A first image: the tag list only.
#[test]
fn the_summarys_diff_costs_a_publish_four_requests() {
    let reg = Registry::start(Auth::None);
    let mut folder = Folder::new();
    // The first image under the prefix.
    let (md, with) = publish_action(&reg, &folder, "sum", true);
    let (_, without) = publish_action(&reg, &folder, "nosum", false);
    assert!(md.contains("the first image under the prefix main"), "{md}");
    let first = extra(&with, &without);
    assert_eq!(
        first,
        kinds(&[("GET", "auth", 1), ("GET", "tags", 1)]),
        "{with:?}"
    );
    // The next commit: an earlier image to compare with.
    folder.change();
    let (md, with) = publish_action(&reg, &folder, "sum", true);
    let (_, without) = publish_action(&reg, &folder, "nosum", false);
    assert!(md.contains("1 change: 1 modified; 49 unchanged"), "{md}");
    let next = extra(&with, &without);
    assert_eq!(
        next,
        kinds(&[
            ("GET", "auth", 1),
            ("GET", "tags", 1),
            ("GET", "manifests", 1),
            ("GET", "blobs", 2),
        ]),
        "with the summary: {with:?}\nwithout: {without:?}"
    );
    eprintln!("the summary's diff: first image {first:?}, next {next:?}");
}

/// Pushes `folder` into `name` as `main-<ts>-<sha7>` (no provenance).
fn push_stamped(reg: &Registry, folder: &Folder, name: &str) {
    push(
        reg,
        folder,
        name,
        &["--timestamp-tag", "main", "--no-provenance"],
    );
}

/// `promote --from main --to prod` of `name` with `flags`: the requests it
/// made, per kind.
fn promote_counted(reg: &Registry, name: &str, flags: &[&str]) -> BTreeMap<Kind, usize> {
    let before = std::fs::read_to_string(&reg.log).expect("access log").len();
    let repository = format!("{}/{name}", reg.host());
    let run = TestCommand::new()
        .args([
            "promote",
            "--repository",
            &repository,
            "--from",
            "main",
            "--to",
            "prod",
        ])
        .args(flags)
        .run();
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("\nwhat changes:\n"), "{}", run.stdout);
    let log = std::fs::read_to_string(&reg.log).expect("access log");
    count(&log[before..], name)
}

/// A promotion's own requests, then its diff's: a read-only client of its
/// own (one authentication), the candidate's manifest and layer, and the
/// channel's release's manifest and layer when there is one. The
/// promotion itself reads no blob, so every `GET blobs` is the diff's.
const PROMOTE_FIRST: Budget = &[
    // promote: the tag list (once: candidates and channel share the
    // repository), the candidate's manifest and the referrers index
    // (read, then written), the channel tag, the record's two blobs and
    // manifest.
    ("GET", "tags", 1),
    ("HEAD", "manifests", 1),
    ("POST", "uploads", 2),
    ("PUT", "uploads", 2),
    ("PUT", "manifests", 3),
    // 2 of promote's, 1 of the diff's (the candidate; the channel is empty).
    ("GET", "manifests", 3),
    // The diff's: the candidate's layer.
    ("GET", "blobs", 1),
];
/// A promotion that waits: the tag list; the diff's two manifests and
/// two layers.
const PROMOTE_WAIT: Budget = &[
    ("GET", "tags", 1),
    ("GET", "manifests", 2),
    ("GET", "blobs", 2),
];

#[test]
fn a_promotes_diff_reads_two_manifests_and_two_layers() {
    let reg = Registry::start(Auth::None);
    let mut folder = Folder::new();
    push_stamped(&reg, &folder, "promo");
    // Two authentications: promote's client and the diff's (counted
    // apart: `within` allows one).
    let auth = ("GET".to_string(), "auth");
    let mut n = promote_counted(&reg, "promo", &[]);
    assert_eq!(n.remove(&auth), Some(2), "{n:?}");
    let first = within("first promotion", &n, PROMOTE_FIRST);
    folder.change();
    push_stamped(&reg, &folder, "promo");
    let tmp = common::TempDir::new();
    let policy = tmp.join("policy.yaml");
    std::fs::write(
        &policy,
        "windows:\n  - kind: deny\n    description: freeze\n    start: \"2000-01-01T00:00:00Z\"\n    end: \"2999-01-01T00:00:00Z\"\n",
    )
    .expect("policy");
    let mut n = promote_counted(
        &reg,
        "promo",
        &["--policy", policy.to_str().expect("utf-8")],
    );
    assert_eq!(n.remove(&auth), Some(2), "{n:?}");
    let wait = within("waiting promotion", &n, PROMOTE_WAIT);
    assert_eq!(n[&("GET".to_string(), "blobs")], 2, "{n:?}");
    eprintln!("requests after authentication: first promotion {first}, waiting {wait}");
}

/// A promotion under `requires:` (docs/release-management.md, "Evidence"):
/// per candidate judged, its manifest (one `GET`, whose bytes the
/// promotion copies: the eligible candidate is not read again) and its
/// referrers listing (distribution 2.8: the referrers API probed once,
/// answered 404, then the `sha256-<hex>` index), a manifest and a blob per
/// record; the tag list once (the channel is in the candidates'
/// repository); then the promotion's own writes and the diff's reads.
const PROMOTE_REQUIRES: Budget = &[
    ("GET", "tags", 1),
    ("GET", "referrers", 1),
    // The channel tag, before it is written.
    ("HEAD", "manifests", 1),
    // Judged: 2 candidates' manifests, 2 referrers indexes, 2 records;
    // the promotion record's referrers index (read, then written); the
    // diff's candidate.
    ("GET", "manifests", 8),
    // The 2 records' layers, the diff's candidate layer.
    ("GET", "blobs", 3),
    ("POST", "uploads", 2),
    ("PUT", "uploads", 2),
    ("PUT", "manifests", 3),
];

/// What the requirements cost a promotion that promotes (the newest
/// candidate ended unavailable in staging, the older one soaked: the
/// older goes), per kind.
#[test]
fn a_promote_under_requirements_reads_each_candidate_once() {
    use common::oci::attach_rollout_record;
    let reg = Registry::start(Auth::None);
    let name = "gated";
    let repository = format!("{}/{name}", reg.host());
    let mut folder = Folder::new();
    let (c1, _) = push(
        &reg,
        &folder,
        name,
        &["--timestamp-tag", "main", "--no-provenance"],
    );
    folder.change();
    let (c2, _) = push(
        &reg,
        &folder,
        name,
        &["--timestamp-tag", "main", "--no-provenance"],
    );
    let digest = |v: &serde_json::Value| v["digest"].as_str().expect("digest").to_string();
    let (d1, d2) = (digest(&c1), digest(&c2));
    let record = |d: &str, extra: serde_json::Value| {
        let mut r = serde_json::json!({"cluster": "staging", "namespace": "shop", "kind": "Deployment",
            "name": "shop", "repository": repository, "digest": d, "replicas": 1});
        for (k, v) in extra.as_object().expect("an object") {
            r[k] = v.clone();
        }
        r
    };
    attach_rollout_record(
        &format!("{repository}@{d1}"),
        &record(
            &d1,
            serde_json::json!({"state": "ready", "readySince": "2026-05-01T00:00:00Z"}),
        ),
        &["--plain-http"],
    );
    attach_rollout_record(
        &format!("{repository}@{d2}"),
        &record(
            &d2,
            serde_json::json!({"state": "ended", "endedAt": "2026-05-31T20:00:00Z", "reason": "unavailable"}),
        ),
        &["--plain-http"],
    );
    let tmp = common::TempDir::new();
    let policy = tmp.join("policy.yaml");
    std::fs::write(
        &policy,
        "requires:\n  - rollout: {cluster: staging, readyFor: 2h, notEnded: unavailable}\n",
    )
    .expect("policy");
    let mut n = promote_counted(
        &reg,
        name,
        &[
            "--policy",
            policy.to_str().expect("utf-8"),
            "--at",
            "2026-06-01T00:00:00Z",
        ],
    );
    let tags = tags_of(&reg, name);
    assert!(
        tags.contains(
            &c1["timestamp_tag"]
                .as_str()
                .expect("tag")
                .replace("main-", "prod-")
        ),
        "the older, soaked candidate is promoted: {tags:?}"
    );
    assert_eq!(n.remove(&("GET".to_string(), "auth")), Some(2), "{n:?}");
    let total = within("promotion under requirements", &n, PROMOTE_REQUIRES);
    eprintln!("promotion under requirements: {total} requests after authentication: {n:?}");
}
