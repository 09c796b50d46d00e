//! `settings-image promote` against a real `docker-registry` (CNCF
//! distribution, no referrers API: records go through the `sha256-<hex>`
//! tag index), with a recording proxy to count what goes over the wire.

use crate::common;

use std::process::Command;

use common::bin;
use common::cmd::Run;
use common::cmd::TestCommand;
use common::registry::*;
use common::runner::{Runner, Step};
use serde_json::Value;

/// The binary (the variables every run clears cleared, see
/// [`TestCommand::new`]) without `USER` either: a promotion's actor is then
/// a GitHub variable a test sets, `LOGNAME` or the user database's name.
fn cli() -> TestCommand {
    let mut c = TestCommand::new();
    c.env_remove("USER");
    c
}

/// Pushes a fresh folder under `tag`; returns the push report.
fn push_candidate(repo: &str, tag: &str) -> Value {
    let dir = settings(3, tag);
    let d = dir.path().to_str().expect("utf-8");
    cli()
        .args([
            "push",
            "--path",
            d,
            "--repository",
            repo,
            "--tag",
            tag,
            "--json",
            "--no-provenance",
        ])
        .json()
}

fn promote(repo: &str, extra: &[&str], env: &[(&str, &str)]) -> Run {
    let mut args = vec![
        "promote",
        "--repository",
        repo,
        "--from",
        "main",
        "--to",
        "prod",
        "--json",
    ];
    args.extend_from_slice(extra);
    cli().args(&args).envs(env.iter().copied()).run()
}

/// The tags of repository `name`, sorted.
fn tags(reg: &Registry, name: &str) -> Vec<String> {
    tags_of(reg, name).into_iter().collect()
}

/// The tag Flux serves following the channel `prod` (tests/common/flux.rs).
fn flux_prod(tags: &[String]) -> Option<String> {
    common::flux::served("prod", tags)
}

#[test]
fn the_channel_tag_holds_the_candidates_digest_with_no_blob_uploads_and_repeats_are_no_ops() {
    let reg = Registry::start(Auth::None);
    let proxy = Proxy::start(reg.port);
    let repo = format!("{}/settings", reg.host());
    push_candidate(&repo, "main-1700000100-aaaaaaa");
    let newest = push_candidate(&repo, "main-1700000200-bbbbbbb");
    let via_proxy = format!("{}/settings", proxy.host());
    proxy.take();
    let out = promote(&via_proxy, &[], &[]).json();
    assert_eq!(out["decision"], "promote");
    assert_eq!(out["promoted"], true);
    assert_eq!(out["tag"], "prod-1700000200-bbbbbbb");
    assert_eq!(out["candidate"], "main-1700000200-bbbbbbb");
    assert_eq!(out["digest"], newest["digest"]);
    assert_eq!(out["uploaded_blobs"], 0);
    assert_eq!(
        digest_of(&reg, "settings", "prod-1700000200-bbbbbbb").as_deref(),
        newest["digest"].as_str()
    );
    // On the wire: no request writes or mounts the image's layer or config
    // blob (only the diff it shows reads the layer, once), and the only
    // uploads are the record's (empty config and one layer).
    let seen = proxy.take();
    for (blob, reads) in [
        (&newest["layer"]["digest"], 1),
        (&newest["config_digest"], 0),
    ] {
        let hex = blob.as_str().expect("digest").trim_start_matches("sha256:");
        let named: Vec<_> = seen.iter().filter(|r| r.path.contains(hex)).collect();
        assert!(
            named.len() == reads && named.iter().all(|r| r.method == "GET"),
            "the image's blob {hex} went over the wire: {seen:?}"
        );
    }
    let uploads = seen
        .iter()
        .filter(|r| r.method == "POST" && r.path.contains("/blobs/uploads"))
        .count();
    assert!(uploads <= 2, "{seen:?}");
    // Again: up to date, nothing written.
    let again = promote(&via_proxy, &[], &[]).json();
    assert_eq!(again["decision"], "up-to-date");
    assert_eq!(again["promoted"], false);
    let seen = proxy.take();
    assert!(
        seen.iter().all(|r| r.method == "GET" || r.method == "HEAD"),
        "a repeated promote writes nothing: {seen:?}"
    );
    let all = tags(&reg, "settings");
    assert_eq!(
        all.iter().filter(|t| t.starts_with("prod-")).count(),
        1,
        "{all:?}"
    );
}

#[test]
fn an_older_candidate_is_never_promoted_not_even_by_break_glass() {
    let reg = Registry::start(Auth::None);
    let repo = format!("{}/settings", reg.host());
    push_candidate(&repo, "main-1700000100-aaaaaaa");
    push_candidate(&repo, "main-1700000200-bbbbbbb");
    // The channel already holds the newest.
    assert_eq!(promote(&repo, &[], &[]).json()["promoted"], true);
    let out = promote(&repo, &["--force", "--reason", "incident 9"], &[]).json();
    assert_eq!(out["decision"], "up-to-date");
    assert_eq!(out["promoted"], false);
    let all = tags(&reg, "settings");
    assert!(
        !all.iter().any(|t| t == "prod-1700000100-aaaaaaa"),
        "{all:?}"
    );
    assert_eq!(flux_prod(&all).as_deref(), Some("prod-1700000200-bbbbbbb"));
}

#[test]
fn a_squatted_channel_tag_is_refused_with_both_digests() {
    let reg = Registry::start(Auth::None);
    let host = reg.host();
    let repo = format!("{host}/settings");
    let cand = push_candidate(&repo, "main-1700000200-bbbbbbb");
    let cand_digest = cand["digest"].as_str().expect("digest").to_string();
    // Pushed by hand under the candidate's channel name, other content.
    let squat = push_candidate(&repo, "prod-1700000200-bbbbbbb");
    let squat_digest = squat["digest"].as_str().expect("digest").to_string();
    assert_ne!(squat_digest, cand_digest);
    let all = tags(&reg, "settings");
    // Flux following the channel serves the squatted content.
    assert_eq!(flux_prod(&all).as_deref(), Some("prod-1700000200-bbbbbbb"));
    for extra in [
        &[][..],
        &["--explain"][..],
        &["--force", "--reason", "x"][..],
    ] {
        let out = promote(&repo, extra, &[]);
        assert_eq!(out.code, 3, "{extra:?}: {}{}", out.stdout, out.stderr);
        assert!(out.stderr.contains(&squat_digest), "{}", out.stderr);
        assert!(out.stderr.contains(&cand_digest), "{}", out.stderr);
        assert!(
            out.stderr.contains("main-1700000200-bbbbbbb"),
            "{}",
            out.stderr
        );
        assert!(!out.stdout.contains("up-to-date"), "{}", out.stdout);
    }
    assert_eq!(tags(&reg, "settings"), all, "nothing written");

    // A channel tag above every candidate, whose candidate does not exist.
    let reg2 = Registry::start(Auth::None);
    let repo2 = format!("{}/settings", reg2.host());
    push_candidate(&repo2, "main-1700000100-aaaaaaa");
    let high = push_candidate(&repo2, "prod-1700009999-ccccccc");
    let out = promote(&repo2, &[], &[]);
    assert_eq!(out.code, 3, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .contains(high["digest"].as_str().expect("digest")),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("main-1700009999-ccccccc does not exist"),
        "{}",
        out.stderr
    );

    // The action face: an ::error and exit 3.
    let ws = common::TempDir::new();
    let run = action(&repo, ws.path(), &[]);
    assert_eq!(run.code, 3, "{}{}", run.stdout, run.stderr);
    let error = run
        .stdout
        .lines()
        .find(|l| l.starts_with("::error title="))
        .unwrap_or_else(|| panic!("no ::error line: {}", run.stdout));
    assert!(
        error.contains(&squat_digest) && error.contains(&cand_digest),
        "{error}"
    );
    assert!(
        !run.output_file.contains("up-to-date"),
        "{}",
        run.output_file
    );
}

#[test]
fn break_glass_without_a_reason_is_refused() {
    let reg = Registry::start(Auth::None);
    let repo = format!("{}/settings", reg.host());
    push_candidate(&repo, "main-1700000100-aaaaaaa");
    for extra in [&["--force"][..], &["--force", "--reason", "  "][..]] {
        let out = promote(&repo, extra, &[]);
        assert_eq!(out.code, 2, "{}", out.stderr);
        assert!(out.stderr.contains("--reason"), "{}", out.stderr);
    }
    assert!(
        !tags(&reg, "settings")
            .iter()
            .any(|t| t.starts_with("prod-"))
    );
}

const FREEZE: &str = "windows:
  - kind: deny
    description: year-end freeze
    start: \"2026-12-20T00:00:00\"
    end: \"2027-01-04T00:00:00\"
    timeZone: Europe/Amsterdam
";

#[test]
fn a_closed_gate_waits_explain_changes_nothing_and_break_glass_is_recorded() {
    let reg = Registry::start(Auth::None);
    let repo = format!("{}/settings", reg.host());
    let cand = push_candidate(&repo, "main-1700000100-aaaaaaa");
    let dir = common::TempDir::new();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, FREEZE).expect("policy");
    let p = policy.to_str().expect("utf-8");
    let at = "2026-12-21T10:00:00Z";
    let wait = promote(&repo, &["--policy", p, "--at", at], &[]).json();
    assert_eq!(wait["decision"], "wait");
    assert_eq!(wait["promoted"], false);
    assert_eq!(wait["gate"]["open"], false);
    assert_eq!(wait["gate"]["active"][0], "year-end freeze");
    // 2027-01-04T00:00 in Amsterdam is 23:00 UTC the day before.
    assert_eq!(wait["next_open"], "2027-01-03T23:00:00Z");
    let explain = cli()
        .args([
            "promote",
            "--repository",
            &repo,
            "--from",
            "main",
            "--to",
            "prod",
            "--policy",
            p,
            "--at",
            "2027-01-05T10:00:00Z",
            "--explain",
        ])
        .run();
    assert_eq!(explain.code, 0, "{}", explain.stderr);
    for want in [
        "would promote main-1700000100-aaaaaaa as prod-1700000100-aaaaaaa",
        "decision: promote",
        "current:   (none)",
        "next close",
        "calendar (14 days)",
    ] {
        assert!(explain.stdout.contains(want), "{want}: {}", explain.stdout);
    }
    assert!(
        !tags(&reg, "settings")
            .iter()
            .any(|t| t.starts_with("prod-")),
        "explain wrote nothing"
    );
    // Break-glass during the freeze: promoted, loudly, and recorded.
    let env = [
        ("GITHUB_ACTOR", "octocat"),
        ("GITHUB_SERVER_URL", "https://github.com"),
        ("GITHUB_REPOSITORY", "acme/settings"),
        ("GITHUB_RUN_ID", "42"),
    ];
    let before = jiff::Timestamp::now().as_second();
    let forced = promote(
        &repo,
        &[
            "--policy",
            p,
            "--at",
            at,
            "--force",
            "--reason",
            "incident 7",
        ],
        &env,
    );
    let after = jiff::Timestamp::now().as_second();
    assert!(forced.stderr.contains("BREAK-GLASS"), "{}", forced.stderr);
    let out = forced.json();
    assert_eq!(out["promoted"], true);
    assert_eq!(out["forced"], true);
    assert_eq!(out["digest"], cand["digest"]);
    let record = out["record"].as_str().expect("record digest").to_string();

    // The record by raw HTTP: the referrers tag index, its manifest, its layer.
    let digest = cand["digest"].as_str().expect("digest");
    let index_tag = digest.replace(':', "-");
    let (code, body) = curl(
        &format!("http://{}/v2/settings/manifests/{index_tag}", reg.host()),
        Some("application/vnd.oci.image.index.v1+json"),
    );
    assert_eq!(code, 200);
    let index: Value = serde_json::from_str(&body).expect("index");
    let entry = index["manifests"]
        .as_array()
        .expect("manifests")
        .iter()
        .find(|m| m["artifactType"] == "application/vnd.settings-image.promotion.v1+json")
        .expect("the promotion is listed")
        .clone();
    assert_eq!(entry["digest"], record.as_str());
    let (code, body) = curl(
        &format!("http://{}/v2/settings/manifests/{record}", reg.host()),
        Some("application/vnd.oci.image.manifest.v1+json"),
    );
    assert_eq!(code, 200);
    let m: Value = serde_json::from_str(&body).expect("record manifest");
    assert_eq!(m["subject"]["digest"], digest);
    let layer = m["layers"][0]["digest"].as_str().expect("layer");
    let (code, body) = curl(
        &format!("http://{}/v2/settings/blobs/{layer}", reg.host()),
        None,
    );
    assert_eq!(code, 200);
    let r: Value = serde_json::from_str(&body).expect("record JSON");
    assert_eq!(r["actor"], "octocat");
    // The record keeps the real time of the promotion and, apart, the time
    // the gate was judged at.
    assert_eq!(r["gate_at"], at);
    let when: jiff::Timestamp = r["at"].as_str().expect("at").parse().expect("RFC 3339");
    assert!(
        (before..=after).contains(&when.as_second()),
        "record time {when} is not the clock while promote ran ({before}..={after})"
    );
    assert_eq!(r["from_tag"], "main-1700000100-aaaaaaa");
    assert_eq!(r["tag"], "prod-1700000100-aaaaaaa");
    assert_eq!(r["forced"], true);
    assert_eq!(r["reason"], "incident 7");
    assert!(
        r["because"]
            .as_str()
            .expect("because")
            .contains("year-end freeze")
    );
    assert_eq!(
        r["run_url"],
        "https://github.com/acme/settings/actions/runs/42"
    );

    // And by inspect.
    let ins = cli()
        .args([
            "inspect",
            &format!("{repo}:prod-1700000100-aaaaaaa"),
            "--json",
        ])
        .json();
    assert_eq!(ins["promotions"][0]["actor"], "octocat");
    assert_eq!(ins["promotions"][0]["reason"], "incident 7");
    let human = cli()
        .args(["inspect", &format!("{repo}:prod-1700000100-aaaaaaa")])
        .run();
    assert!(human.stdout.contains("promotion "), "{}", human.stdout);
}

#[test]
fn racing_promotes_converge_on_the_newest_candidate() {
    let reg = Registry::start(Auth::None);
    let repo = format!("{}/settings", reg.host());
    let spawn = || {
        cli()
            .args([
                "promote",
                "--repository",
                &repo,
                "--from",
                "main",
                "--to",
                "prod",
                "--json",
            ])
            .spawn()
    };
    let mut ts = 1_700_000_000u64;
    for round in 1..=3u64 {
        // Run A starts with candidate `older` the newest; `newer` lands
        // while A runs; run B starts after it. A may promote either.
        ts += 100;
        let older = format!("main-{ts}-{:07x}", round * 2);
        push_candidate(&repo, &older);
        let a = spawn();
        ts += 100;
        let newer = format!("main-{ts}-{:07x}", round * 2 + 1);
        let cand = push_candidate(&repo, &newer);
        let b = spawn();
        let mut promoted = Vec::new();
        for child in [a, b] {
            let v: Value = child.wait().json();
            assert!(
                matches!(v["decision"].as_str(), Some("promote" | "up-to-date")),
                "{v}"
            );
            if let Some(t) = v["tag"].as_str() {
                promoted.push(t.to_string());
            }
        }
        let all = tags(&reg, "settings");
        let want = newer.replacen("main-", "prod-", 1);
        assert!(
            promoted.contains(&want),
            "round {round}: B promotes the newest: {promoted:?}"
        );
        assert_eq!(
            flux_prod(&all).as_deref(),
            Some(want.as_str()),
            "round {round}: {all:?}"
        );
        assert_eq!(
            digest_of(&reg, "settings", &want).as_deref(),
            cand["digest"].as_str()
        );
    }
}

#[test]
fn a_target_repository_gets_the_blobs_by_mount() {
    let reg = Registry::start(Auth::None);
    let repo = format!("{}/settings", reg.host());
    let cand = push_candidate(&repo, "main-1700000100-aaaaaaa");
    let target = format!("{}/settings-prod", reg.host());
    let logged = std::fs::read_to_string(&reg.log)
        .expect("reading the registry log")
        .len();
    let out = promote(&repo, &["--target-repository", &target], &[]).json();
    assert_eq!(out["promoted"], true);
    // What the registry saw (its access log, not the run's own counters):
    // each of the image's two blobs mounted from settings into
    // settings-prod (a 201 to `POST ...?mount=`), and not one of them
    // uploaded there (no upload session finished with its digest).
    let log = std::fs::read_to_string(&reg.log).expect("reading the registry log");
    let requests: Vec<(String, String, u16)> = log[logged..]
        .lines()
        .filter_map(|l| {
            let (_, rest) = l.split_once(" \"")?;
            let (request, rest) = rest.split_once('"')?;
            let mut r = request.split(' ');
            let method = r.next()?.to_string();
            // The query as sent: `:` percent-encoded.
            let path = r.next()?.replace("%3A", ":");
            let status = rest.split_whitespace().next()?.parse().ok()?;
            Some((method, path, status))
        })
        .collect();
    let (code, manifest) = curl(
        &format!(
            "http://{}/v2/settings/manifests/main-1700000100-aaaaaaa",
            reg.host()
        ),
        Some("application/vnd.oci.image.manifest.v1+json"),
    );
    assert_eq!(code, 200, "{manifest}");
    let manifest: Value = serde_json::from_str(&manifest).expect("manifest JSON");
    let blobs: Vec<String> = std::iter::once(&manifest["config"])
        .chain(manifest["layers"].as_array().expect("layers"))
        .map(|d| d["digest"].as_str().expect("digest").to_string())
        .collect();
    assert_eq!(blobs.len(), 2, "{manifest}");
    let uploads = "/v2/settings-prod/blobs/uploads/";
    for blob in &blobs {
        let mounted = requests.iter().any(|(m, p, status)| {
            m == "POST"
                && p.starts_with(uploads)
                && p.contains(&format!("mount={blob}"))
                && p.contains("from=settings")
                && *status == 201
        });
        assert!(mounted, "{blob} was not mounted:\n{}", &log[logged..]);
        let uploaded = requests.iter().any(|(m, p, _)| {
            m == "PUT" && p.starts_with(uploads) && p.contains(&format!("digest={blob}"))
        });
        assert!(!uploaded, "{blob} was uploaded:\n{}", &log[logged..]);
    }
    assert_eq!(out["mounted_blobs"], 2);
    assert_eq!(out["uploaded_blobs"], 0);
    assert_eq!(
        digest_of(&reg, "settings-prod", "prod-1700000100-aaaaaaa").as_deref(),
        cand["digest"].as_str()
    );
    assert!(
        !tags(&reg, "settings")
            .iter()
            .any(|t| t.starts_with("prod-"))
    );
    // The channel's state is read from the target: a second run is a no-op.
    let again = promote(&repo, &["--target-repository", &target], &[]).json();
    assert_eq!(again["decision"], "up-to-date");
}

/// The promote action from `main` to `prod` of `repo` on the simulated
/// runner, in workspace `ws`, with the inputs `extra` besides.
fn action(repo: &str, ws: &std::path::Path, extra: &[(&str, &str)]) -> Step {
    let runner = Runner::new(common::TempDir::new(), ws.to_path_buf()).promote();
    // `extra` first: the runner takes the first value given for an input.
    let mut with = extra.to_vec();
    with.extend([
        ("repository", repo),
        ("from", "main"),
        ("to", "prod"),
        ("force", "false"),
    ]);
    runner.run(&with)
}

#[test]
fn the_action_face_promotes_waits_and_refuses_with_outputs_and_annotations() {
    let reg = Registry::start(Auth::None);
    let repo = format!("{}/settings", reg.host());
    let ws = common::TempDir::new();
    let cand = push_candidate(&repo, "main-1700000100-aaaaaaa");
    // A freeze that is always on: the gate is shut, the run succeeds.
    std::fs::write(
        ws.path().join("policy.yaml"),
        "windows:\n  - kind: deny\n    description: forever freeze\n    start: \"2000-01-01T00:00:00Z\"\n    end: \"2999-01-01T00:00:00Z\"\n",
    )
    .expect("policy");
    let run = action(&repo, ws.path(), &[("policy", "policy.yaml")]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let o = &run.outputs;
    assert_eq!(o["decision"], "wait");
    assert_eq!(o["promoted"], "false");
    assert_eq!(o["next-open"], "");
    assert!(run.stdout.contains("::warning title="), "{}", run.stdout);
    assert!(run.summary.contains("**Waiting**"), "{}", run.summary);
    assert!(
        run.summary.contains("main-1700000100-aaaaaaa"),
        "{}",
        run.summary
    );
    assert!(
        run.summary.contains("Release windows, next 7 days"),
        "{}",
        run.summary
    );
    assert!(run.summary.contains("| shut |"), "{}", run.summary);
    // Break-glass without a reason: an ::error and exit 2.
    let run = action(
        &repo,
        ws.path(),
        &[("policy", "policy.yaml"), ("force", "true")],
    );
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert!(run.stdout.contains("::error title="), "{}", run.stdout);
    assert!(
        !tags(&reg, "settings")
            .iter()
            .any(|t| t.starts_with("prod-"))
    );
    // No policy: always open; promoted with the outputs Flux users need.
    let run = action(&repo, ws.path(), &[]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let o = &run.outputs;
    assert_eq!(o["promoted"], "true");
    assert_eq!(o["decision"], "promote");
    assert_eq!(o["tag"], "prod-1700000100-aaaaaaa");
    assert_eq!(o["digest"], cand["digest"].as_str().expect("digest"));
    assert_eq!(
        o["reference"],
        format!("{repo}:prod-1700000100-aaaaaaa@{}", o["digest"])
    );
    assert!(run.summary.contains("**Promoted**"), "{}", run.summary);
    assert!(run.summary.contains("| open |"), "{}", run.summary);
    // Again: up to date, a notice.
    let run = action(&repo, ws.path(), &[]);
    assert_eq!(run.outputs["decision"], "up-to-date");
    assert!(run.stdout.contains("::notice title="), "{}", run.stdout);
}

#[test]
fn the_action_face_has_the_registry_inputs_and_an_explain_dry_run() {
    let reg = Registry::start(Auth::None);
    let repo = format!("{}/settings", reg.host());
    let ws = common::TempDir::new();
    push_candidate(&repo, "main-1700000100-aaaaaaa");
    // Weekday windows: open on Monday 2026-12-21 10:00 UTC, shut on Sunday.
    std::fs::write(
        ws.path().join("policy.yaml"),
        "windows:\n  - kind: allow\n    description: office hours\n    schedule: \"0 9 * * 1-5\"\n    duration: 8h\n    timeZone: UTC\n",
    )
    .expect("policy");
    // The owner's capitals, as `${{ github.repository_owner }}` gives them.
    let given = format!("{}/Settings", reg.host());
    let target = format!("{}/Prod-Settings", reg.host());
    let dry = |at: &str| {
        action(
            &given,
            ws.path(),
            &[
                ("policy", "policy.yaml"),
                ("target-repository", &target),
                ("explain", "true"),
                ("at", at),
                ("insecure", "false"),
                ("password", ""),
            ],
        )
    };
    let run = dry("2026-12-20T10:00:00Z");
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let o = &run.outputs;
    assert_eq!(o["decision"], "wait", "{}", run.stdout);
    assert_eq!(o["next-open"], "2026-12-21T09:00:00Z");
    assert!(run.summary.contains("**Waiting**"), "{}", run.summary);
    let run = dry("2026-12-21T10:00:00Z");
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let o = &run.outputs;
    assert_eq!(o["decision"], "promote", "{}", run.stdout);
    assert_eq!(o["promoted"], "false", "explain writes nothing");
    assert!(
        run.stdout
            .lines()
            .any(|l| l
                .starts_with("::notice title=settings-image promote%3A repository lower-cased::")),
        "{}",
        run.stdout
    );
    // Nothing was written: no channel tag, no target repository.
    assert!(
        !tags(&reg, "settings")
            .iter()
            .any(|t| t.starts_with("prod-"))
    );
    let (code, _) = curl(
        &format!("http://{}/v2/prod-settings/tags/list", reg.host()),
        None,
    );
    assert_eq!(code, 404);
    // A bad `at` is an error in the action's words.
    let run = dry("next monday");
    assert_eq!(run.code, 2, "{}", run.stdout);
    let error = run
        .stdout
        .lines()
        .find(|l| l.starts_with("::error title="))
        .expect("an ::error line");
    assert!(
        error.contains("`at` \"next monday\" is not a time"),
        "{error}"
    );
    assert!(!error.contains("--"), "{error}");
}

#[test]
fn without_user_the_record_names_the_user_database_name() {
    // cron, containers and `env -i` run without USER or LOGNAME; the record
    // still says who, as `id -un` does.
    let reg = Registry::start(Auth::None);
    let repo = format!("{}/settings", reg.host());
    push_candidate(&repo, "main-1700000100-aaaaaaa");
    let r = promote(&repo, &[], &[("LOGNAME", "")]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let id = Command::new("id").arg("-un").output().expect("id -un");
    let name = String::from_utf8_lossy(&id.stdout).trim().to_string();
    assert!(!name.is_empty());
    let ins = cli()
        .args([
            "inspect",
            &format!("{repo}:prod-1700000100-aaaaaaa"),
            "--json",
        ])
        .json();
    assert_eq!(ins["promotions"][0]["actor"], name.as_str(), "{ins}");
}

#[test]
fn a_tag_whose_number_does_not_fit_64_bits_is_a_tag_flux_follows() {
    // A channel tag pushed by hand with a number above u64::MAX: Flux
    // (ParseFloat) serves it on the channel, so promote must see it as the
    // channel's current tag, and refuse as for any channel tag promote did
    // not write, not promote beside it as if the channel were empty.
    let reg = Registry::start(Auth::None);
    let repo = format!("{}/settings", reg.host());
    let cand = push_candidate(&repo, "main-1700000200-bbbbbbb");
    let huge = "prod-99999999999999999999-ccccccc";
    let hand = push_candidate(&repo, huge);
    let hand_digest = hand["digest"].as_str().expect("digest").to_string();
    let all = tags(&reg, "settings");
    assert_eq!(flux_prod(&all).as_deref(), Some(huge));
    for extra in [
        &[][..],
        &["--explain"][..],
        &["--force", "--reason", "x"][..],
    ] {
        let out = promote(&repo, extra, &[]);
        assert_eq!(out.code, 3, "{extra:?}: {}{}", out.stdout, out.stderr);
        assert!(
            out.stderr.contains(&format!("{repo}:{huge}")),
            "{}",
            out.stderr
        );
        assert!(out.stderr.contains(&hand_digest), "{}", out.stderr);
        assert!(
            out.stderr
                .contains("main-99999999999999999999-ccccccc does not exist"),
            "{}",
            out.stderr
        );
        assert!(!out.stdout.contains("\"promoted\":true"), "{}", out.stdout);
    }
    assert_eq!(tags(&reg, "settings"), all, "nothing written");
    assert_ne!(cand["digest"], hand["digest"]);

    // A candidate above u64 (pushed by hand too) is what Flux serves on
    // the prefix: promote picks it and writes the channel tag with its
    // number as written, which Flux then serves on the channel.
    let reg = Registry::start(Auth::None);
    let repo = format!("{}/settings", reg.host());
    push_candidate(&repo, "main-1700000200-bbbbbbb");
    let big = push_candidate(&repo, "main-18446744073709551616-ddddddd");
    let before = tags(&reg, "settings");
    assert_eq!(
        common::flux::served("main", &before).as_deref(),
        Some("main-18446744073709551616-ddddddd")
    );
    let out = promote(&repo, &[], &[]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let out = out.json();
    assert_eq!(out["candidate"], "main-18446744073709551616-ddddddd");
    assert_eq!(out["tag"], "prod-18446744073709551616-ddddddd");
    assert_eq!(out["digest"], big["digest"]);
    let after = tags(&reg, "settings");
    assert_eq!(
        flux_prod(&after).as_deref(),
        Some("prod-18446744073709551616-ddddddd")
    );
    // And again: up to date (the channel holds it), nothing written.
    let again = promote(&repo, &[], &[]).json();
    assert_eq!(again["decision"], "up-to-date");
    assert_eq!(again["current"], "prod-18446744073709551616-ddddddd");
    assert_eq!(tags(&reg, "settings"), after);
}

/// The text of the first ```LANG block after the heading `## HEADING` of
/// docs/release-management.md.
fn release_doc_block(heading: &str, lang: &str) -> String {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/release-management.md"),
    )
    .expect("docs/release-management.md");
    let section = doc
        .split(&format!("\n## {heading}\n"))
        .nth(1)
        .unwrap_or_else(|| panic!("no section {heading:?}"));
    section
        .split(&format!("```{lang}\n"))
        .nth(1)
        .and_then(|b| b.split("```").next())
        .unwrap_or_else(|| panic!("{heading:?} has no {lang} block"))
        .to_string()
}

#[test]
fn the_release_management_doc_runs_as_printed() {
    // Its command, pasted into a shell beside its policy file, against a
    // registry holding a candidate (the doc's repository pointed at it).
    let reg = Registry::start(Auth::None);
    let repo = format!("{}/acme/settings-shop", reg.host());
    push_candidate(&repo, "main-1700000100-aaaaaaa");
    let dir = common::TempDir::new();
    std::fs::write(
        dir.path().join("release-policy.yaml"),
        release_doc_block("The policy file", "yaml"),
    )
    .expect("policy");
    let command =
        release_doc_block("The command", "sh").replace("ghcr.io/acme/settings-shop", &repo);
    assert!(command.starts_with("settings-image promote "), "{command}");
    let bin_dir = std::path::Path::new(bin()).parent().expect("bin dir");
    let out = Command::new(common::require("bash"))
        .args(["-euo", "pipefail", "-c", &command])
        .current_dir(dir.path())
        .env(
            "PATH",
            format!(
                "{}:{}",
                bin_dir.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .env("DOCKER_CONFIG", dir.path())
        .output()
        .expect("bash");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{command}\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("main-1700000100-aaaaaaa"), "{stdout}");
    assert_eq!(
        tags(&reg, "acme/settings-shop"),
        ["main-1700000100-aaaaaaa"]
    );

    // Its production ImagePolicy carries every label the automation that
    // `flux` generates selects its policies on.
    let flux = cli()
        .args([
            "flux",
            "--repository",
            "ghcr.io/acme/settings-shop",
            "--prefix",
            "prod",
        ])
        .run();
    assert_eq!(flux.code, 0, "{}", flux.stderr);
    let selector = flux
        .stdout
        .split("\n---\n")
        .map(|d| serde_yaml_ng::from_str::<serde_yaml_ng::Value>(d).expect("generated YAML"))
        .find(|d| d["kind"] == "ImageUpdateAutomation")
        .expect("an automation")["spec"]["policySelector"]["matchLabels"]
        .clone();
    let policy: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(&release_doc_block("The production cluster", "yaml"))
            .expect("the doc's ImagePolicy");
    assert_eq!(policy["kind"], "ImagePolicy");
    let labels = selector.as_mapping().expect("matchLabels");
    assert!(!labels.is_empty());
    for (k, v) in labels {
        assert_eq!(
            &policy["metadata"]["labels"][k], v,
            "the doc's ImagePolicy lacks {k:?}: {policy:?}"
        );
    }
}

/// Attaches `record` to `repo@digest` as a rollout record, with oras (as
/// anyone who can push to the repository can).
fn attach_record(repo: &str, digest: &str, record: &Value) {
    common::oci::attach_rollout_record(&format!("{repo}@{digest}"), record, &["--plain-http"]);
}

fn rollout_record(repo: &str, digest: &str, since: Option<&str>, ended: Option<&str>) -> Value {
    let mut r = serde_json::json!({"cluster": "staging", "namespace": "shop", "kind": "Deployment",
        "name": "shop", "repository": repo, "digest": digest, "state": "ready", "replicas": 2});
    if let Some(s) = since {
        r["readySince"] = s.into();
    }
    if let Some(e) = ended {
        r["state"] = "ended".into();
        r["endedAt"] = e.into();
        r["reason"] = "unavailable".into();
    }
    r
}

/// What the release policy's requirements cost on the wire, counted by the
/// proxy: per candidate newer than the channel, its manifest (a `GET` of
/// its tag, whose bytes a promotion of it copies), its referrers listing (distribution 2.8 has no referrers API: one probe
/// answered 404, then the `sha256-<hex>` index), and a manifest and a blob
/// read per record. Without requirements none of these is sent. And the
/// decision: the newest candidate that soaked and never ended unavailable;
/// the diff shown (`promote::review`) is of that candidate, the one
/// promoted or waited on, not of the newest skipped.
#[test]
fn requirements_read_each_candidates_records_and_nothing_without_them() {
    let reg = Registry::start(Auth::None);
    let proxy = Proxy::start(reg.port);
    let repo = format!("{}/settings", proxy.host());
    let c1 = push_candidate(&repo, "main-1700000100-aaaaaaa");
    let c2 = push_candidate(&repo, "main-1700000200-bbbbbbb");
    let c3 = push_candidate(&repo, "main-1700000300-ccccccc");
    let d = |v: &Value| v["digest"].as_str().expect("digest").to_string();
    let (d1, d2, d3) = (d(&c1), d(&c2), d(&c3));
    attach_record(
        &repo,
        &d1,
        &rollout_record(&repo, &d1, Some("2026-05-01T00:00:00Z"), None),
    );
    attach_record(
        &repo,
        &d2,
        &rollout_record(&repo, &d2, None, Some("2026-05-31T20:00:00Z")),
    );
    attach_record(
        &repo,
        &d3,
        &rollout_record(&repo, &d3, Some("2026-05-31T23:00:00Z"), None),
    );
    let dir = common::TempDir::new();
    let policy = dir.join("policy.yaml");
    std::fs::write(
        &policy,
        "requires:\n  - rollout: {cluster: staging, readyFor: 2h, notEnded: unavailable}\n",
    )
    .expect("policy");
    let at = "2026-06-01T00:00:00Z";
    let kinds = |seen: &[Seen]| -> Vec<String> {
        seen.iter()
            .map(|r| {
                let what = if r.path.contains("/referrers/") {
                    "referrers-api"
                } else if r.path.contains("/manifests/sha256-") {
                    "referrers-tag"
                } else if r.path.contains("/manifests/sha256:") {
                    "manifest-by-digest"
                } else if r.path.contains("/manifests/") {
                    "manifest-by-tag"
                } else if r.path.contains("/blobs/") {
                    "blob"
                } else if r.path.contains("/tags/list") {
                    "tags"
                } else {
                    "other"
                };
                format!("{} {what}", r.method)
            })
            .collect()
    };
    proxy.take();
    let plain = promote(&repo, &["--explain", "--at", at], &[]).json();
    let without = kinds(&proxy.take());
    assert_eq!(plain["candidate"], "main-1700000300-ccccccc");
    let policy_arg = policy.to_str().expect("utf-8");
    let judged = promote(
        &repo,
        &["--explain", "--at", at, "--policy", policy_arg],
        &[],
    )
    .json();
    let with = kinds(&proxy.take());
    eprintln!(
        "promote --explain, no requirements: {} requests {without:?}\nwith requirements: {} requests {with:?}",
        without.len(),
        with.len()
    );
    let mut extra = with.clone();
    for w in &without {
        let i = extra
            .iter()
            .position(|e| e == w)
            .expect("a request the plain run made");
        extra.remove(i);
    }
    extra.sort();
    assert_eq!(
        extra,
        [
            "GET blob",
            "GET blob",
            "GET blob",
            "GET manifest-by-digest",
            "GET manifest-by-digest",
            "GET manifest-by-digest",
            "GET manifest-by-tag",
            "GET manifest-by-tag",
            "GET referrers-api",
            "GET referrers-tag",
            "GET referrers-tag",
            "GET referrers-tag",
        ]
    );
    assert!(
        !without.iter().any(|k| k.contains("referrers")),
        "{without:?}"
    );
    // The newest has Ready for 1h of 2h, the middle one crashed: the
    // oldest goes.
    let eligible: Vec<(&str, bool)> = judged["candidates"]
        .as_array()
        .expect("candidates")
        .iter()
        .map(|c| (c["tag"].as_str().unwrap_or(""), c["eligible"] == true))
        .collect();
    assert_eq!(
        eligible,
        [
            ("main-1700000300-ccccccc", false),
            ("main-1700000200-bbbbbbb", false),
            ("main-1700000100-aaaaaaa", true)
        ]
    );
    let out = promote(&repo, &["--at", at, "--policy", policy_arg], &[]).json();
    let promoting = kinds(&proxy.take());
    eprintln!(
        "promote with requirements: {} requests {promoting:?}",
        promoting.len()
    );
    assert_eq!(out["tag"], "prod-1700000100-aaaaaaa");
    assert_eq!(out["evidence"].as_array().map(Vec::len), Some(1));
    // What changes is the candidate promoted, against the empty channel;
    // --explain showed the same.
    let sides = |v: &Value| {
        (
            v["diff"]["old"]["name"].as_str().map(str::to_string),
            v["diff"]["new"]["name"].as_str().map(str::to_string),
            v["diff"]["new"]["digest"].as_str().map(str::to_string),
        )
    };
    let promoted = (
        Some("channel prod (no release yet)".to_string()),
        Some(format!("{repo}:main-1700000100-aaaaaaa")),
        Some(d1.clone()),
    );
    assert_eq!(sides(&out), promoted, "{}", out["diff"]);
    assert_eq!(sides(&judged), promoted, "{}", judged["diff"]);
    // Then nothing newer is eligible: it waits on the newest, and the diff
    // is the channel's release against it.
    let waiting = promote(&repo, &["--at", at, "--policy", policy_arg], &[]).json();
    assert_eq!(
        (waiting["decision"].as_str(), waiting["unmet"].as_bool()),
        (Some("wait"), Some(true))
    );
    assert_eq!(
        sides(&waiting),
        (
            Some(format!("{repo}:prod-1700000100-aaaaaaa")),
            Some(format!("{repo}:main-1700000300-ccccccc")),
            Some(d3.clone()),
        ),
        "{}",
        waiting["diff"]
    );
    // Break-glass still bypasses, recorded with its reason and no evidence.
    let forced = promote(
        &repo,
        &[
            "--at",
            at,
            "--policy",
            policy_arg,
            "--force",
            "--reason",
            "hotfix 12",
        ],
        &[],
    )
    .json();
    assert_eq!(
        (forced["tag"].as_str(), forced["forced"].as_bool()),
        (Some("prod-1700000300-ccccccc"), Some(true))
    );
    assert!(forced.get("evidence").is_none(), "{forced}");
    let shown = cli()
        .args([
            "inspect",
            "--json",
            &format!("{repo}:prod-1700000300-ccccccc"),
        ])
        .json();
    let rec = &shown["promotions"][0];
    assert_eq!(
        (rec["forced"].as_bool(), rec["reason"].as_str()),
        (Some(true), Some("hotfix 12"))
    );
    assert!(rec.get("evidence").is_none(), "{rec}");
}
