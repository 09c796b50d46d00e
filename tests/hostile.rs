//! A careless or hostile user's inputs, each against a real registry
//! (distribution 2.8) or a loopback stub of a hostile server: the exit
//! code, the message, and that nothing is lost or leaked (skopeo reads
//! every tag afterwards). The action face's cases live in `tests/action.rs`.

use crate::common;
use crate::support_login;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::cmd::{Running, TestCommand};
use common::registry::{Action, Auth, Proxy, Registry, settings, skopeo_inspect, skopeo_tags};
use common::runner::Runner;

/// A git repository with `shop/` committed; returns (tempdir, work tree).
fn repo_with_folder() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let wt = tmp.path().join("repo");
    std::fs::create_dir_all(wt.join("shop")).unwrap();
    std::fs::write(wt.join("shop/app.yaml"), "replicas: 2\n").unwrap();
    common::git::git_at(&wt, &["init", "-q", "-b", "main"], 0);
    common::git::git_at(&wt, &["add", "."], 0);
    common::git::git_at(&wt, &["commit", "-q", "-m", "shop"], 1_700_000_000);
    (tmp, wt)
}

#[test]
fn credentials_in_a_repository_are_refused_unechoed_everywhere() {
    let password = "S3cretPW";
    let reg = Registry::start(Auth::Basic {
        user: "alice".into(),
        password: password.into(),
    });
    let dir = settings(2, "userinfo");
    let d = dir.path().to_str().unwrap();
    let with_userinfo = format!("alice:{password}@{}/shop", reg.host());
    let runs = [
        TestCommand::push_json(d, &with_userinfo)
            .tags(&["v1"])
            .run(),
        TestCommand::push_json(d, &format!("https://{with_userinfo}"))
            .tags(&["v1"])
            .run(),
        TestCommand::new()
            .args(["inspect", &format!("{with_userinfo}:v1")])
            .run(),
        TestCommand::new()
            .args([
                "promote",
                "--repository",
                &with_userinfo,
                "--from",
                "main",
                "--to",
                "prod",
            ])
            .run(),
    ];
    for r in &runs {
        assert_eq!(r.code, 2, "{}", r.stderr);
        assert!(
            r.stderr.contains("carries credentials (USER:PASSWORD@)"),
            "{}",
            r.stderr
        );
        assert!(r.stderr.contains("hint: "), "{}", r.stderr);
        for text in [&r.stdout, &r.stderr] {
            assert!(
                !text.contains(password) && !text.contains("alice"),
                "{text}"
            );
        }
    }
    let log = std::fs::read_to_string(&reg.log).unwrap();
    assert!(!log.contains("/v2/"), "the registry was contacted:\n{log}");
    let creds = format!("alice:{password}");
    assert!(skopeo_tags(&format!("{}/shop", reg.host()), Some(&creds)).is_empty());
}

#[test]
fn whitespace_and_percent_in_a_repository_say_what_is_wrong() {
    let reg = Registry::start(Auth::None);
    let dir = settings(1, "names");
    let d = dir.path().to_str().unwrap();
    let host = reg.host();
    for (repo, says) in [
        (format!(" {host}/shop"), "starts with whitespace"),
        (format!("{host}/shop "), "ends with whitespace"),
        (format!("{host}/sh%0Aop"), "percent-encoding"),
        (format!("{host}/sh\nop"), "contains whitespace"),
    ] {
        let r = TestCommand::push_json(d, &repo).tags(&["v1"]).run();
        assert_eq!(r.code, 2, "{repo:?}: {}", r.stderr);
        assert!(r.stderr.contains(says), "{repo:?}: {}", r.stderr);
        for misleading in ["international domain name", "upper-case"] {
            assert!(!r.stderr.contains(misleading), "{repo:?}: {}", r.stderr);
        }
    }
    for name in ["shop", "sh", "op"] {
        assert!(skopeo_tags(&format!("{host}/{name}"), None).is_empty());
    }
}

#[test]
fn a_tag_of_the_referrers_tag_schema_is_refused_and_the_index_survives() {
    let reg = Registry::start(Auth::None);
    let (_tmp, wt) = repo_with_folder();
    let shop = wt.join("shop");
    let d = shop.to_str().unwrap();
    let repo = format!("{}/shop", reg.host());
    let first = TestCommand::push_json(d, &repo).tags(&["v1"]).json();
    let digest = first["digest"].as_str().unwrap().to_string();
    let referrers_tag = digest.replace(':', "-");
    assert_eq!(
        skopeo_tags(&repo, None),
        [referrers_tag.clone(), "v1".to_string()],
        "the provenance went under the referrers tag (distribution 2.8 has no referrers API)"
    );
    let index_before = skopeo_raw(&format!("{repo}:{referrers_tag}"));

    let r = TestCommand::push_json(d, &repo)
        .tags(&[&referrers_tag])
        .run();
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("is reserved"), "{}", r.stderr);
    assert!(r.stderr.contains("referrers tag schema"), "{}", r.stderr);
    assert!(r.stdout.is_empty(), "{}", r.stdout);
    let r = TestCommand::push_json(d, &repo)
        .tags(&["v2"])
        .args(["--timestamp-tag", "main", "--branch-tag", &referrers_tag])
        .run();
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("is reserved"), "{}", r.stderr);

    assert_eq!(
        skopeo_tags(&repo, None),
        [referrers_tag.clone(), "v1".to_string()]
    );
    let index = skopeo_raw(&format!("{repo}:{referrers_tag}"));
    assert_eq!(index, index_before, "the referrers index was replaced");
    let index: serde_json::Value = serde_json::from_slice(&index).unwrap();
    assert_eq!(
        index["mediaType"],
        "application/vnd.oci.image.index.v1+json"
    );
    assert_eq!(index["manifests"].as_array().map(Vec::len), Some(1));
    let image = skopeo_inspect(&format!("{repo}:v1"), None).expect("v1 is there");
    assert_eq!(image["Digest"], digest.as_str());
}

/// `skopeo inspect --raw`: the manifest bytes a tag names.
fn skopeo_raw(reference: &str) -> Vec<u8> {
    let out = Command::new(common::require("skopeo"))
        .args(["inspect", "--raw", "--tls-verify=false", "--no-creds"])
        .arg(format!("docker://{reference}"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

#[test]
fn a_symlink_chain_error_reads_as_one_sentence() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("sub")).unwrap();
    std::fs::write(src.join("ok.yaml"), "ok: 1\n").unwrap();
    std::os::unix::fs::symlink("..", src.join("sub/up")).unwrap();
    std::os::unix::fs::symlink("sub/up/../x", src.join("esc")).unwrap();
    let out = dir.path().join("out");
    let r = TestCommand::new()
        .args([
            "build",
            "--path",
            src.to_str().unwrap(),
            "--output",
            out.to_str().unwrap(),
        ])
        .run();
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("leaves the folder once the folder's own links are followed; only links"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("  "), "a run of spaces: {:?}", r.stderr);
    assert!(!out.exists());
}

/// Runs `cmd` (its address space capped at 1 GiB) and returns the result;
/// a run still going after two minutes (blocked on a FIFO) is killed and
/// fails the test.
fn run_bounded(cmd: &mut TestCommand) -> common::cmd::Run {
    let mut running = cmd.memory_limit(1 << 30).spawn();
    let deadline = Instant::now() + Duration::from_secs(120);
    while running.child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = running.child.kill();
            panic!("still running after two minutes: {:?}", running.wait());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    running.wait()
}

/// Every file a flag or input names is read the same bounded way: a
/// device (`/dev/zero`, or a symlink to it, as a checkout may hold), a
/// FIFO and a directory are refused without reading or waiting, and a
/// file over 1 MiB names the bound; each exit 2, naming the flag and the
/// file. Before, `/dev/zero` ran out of memory and a FIFO blocked for ever.
#[test]
fn files_named_by_flags_are_read_bounded_and_only_when_regular() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join("ws/shop")).unwrap();
    std::fs::write(d.join("ws/shop/app.yaml"), "a: 1\n").unwrap();
    std::os::unix::fs::symlink("/dev/zero", d.join("ws/zero.yaml")).unwrap();
    let fifo = d.join("fifo");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let large = d.join("large");
    std::fs::write(&large, vec![b'#'; (1 << 20) + 1]).unwrap();
    let shop = d.join("ws/shop");
    // The command that reads `file` as what `words` names.
    let command = |words: &str, file: &Path| {
        let mut c = match words {
            "--policy" => {
                let mut c = TestCommand::new();
                c.args(["promote", "--repository", "127.0.0.1:9/acme/shop"])
                    .args(["--from", "main", "--to", "prod", "--policy"]);
                c
            }
            "--settings-image" => {
                let mut c = TestCommand::new();
                c.args(["flux", "--settings-image"]);
                c
            }
            _ => {
                let mut c = TestCommand::push(&shop, "127.0.0.1:9/acme/shop");
                c.args([
                    "--tag",
                    "v1",
                    "--login",
                    "jfrog",
                    "--jfrog-provider-name",
                    "ci",
                ])
                .arg("--id-token-file");
                c
            }
        };
        c.arg(file);
        c
    };
    let flags = ["--policy", "--settings-image", "the ID token file"];
    let only = "not a regular file; a file named by a flag or input is read only when it is a regular file";
    let cases = [
        (Path::new("/dev/zero"), format!("is a device, {only}")),
        (&d.join("ws/zero.yaml"), format!("is a device, {only}")),
        (&fifo, format!("is a FIFO (named pipe), {only}")),
        (d, format!("is a directory, {only}")),
        (
            &large,
            "is larger than 1 MiB, the most a file named by a flag or input may hold".to_string(),
        ),
    ];
    for words in flags {
        for (file, says) in &cases {
            let r = run_bounded(&mut command(words, file));
            assert_eq!(r.code, 2, "{words} {}: {r:?}", file.display());
            assert_eq!(
                r.stderr.lines().next().unwrap_or_default(),
                format!("error: {words} {}: {says}", file.display()),
                "{r:?}"
            );
        }
    }
    // The action's `policy` input: a path in the checkout, a symlink to
    // /dev/zero there.
    let r = Runner::new(common::TempDir::new(), d.join("ws"))
        .promote()
        .run_by(
            &[
                ("repository", "127.0.0.1:9/acme/shop"),
                ("from", "main"),
                ("to", "prod"),
                ("policy", "zero.yaml"),
            ],
            run_bounded,
        );
    r.exited(2);
    assert!(
        r.stdout.contains(&format!(
            "the input `policy` {}: is a device, not a regular file",
            d.join("ws/zero.yaml").display()
        )),
        "{}",
        r.stdout
    );
    // Standard input that never ends (`--password-stdin < /dev/zero`) is
    // read to its bound only, within the run's 1 GiB of memory.
    let r = run_bounded(
        TestCommand::push(&shop, "127.0.0.1:9/acme/shop")
            .args(["--tag", "v1", "--username", "ci", "--password-stdin"])
            .stdin_from(Path::new("/dev/zero")),
    );
    assert_eq!(r.code, 2, "{r:?}");
    assert_eq!(
        r.stderr.lines().next().unwrap_or_default(),
        "error: --password-stdin: standard input holds more than 1 MiB, the most it is read for",
        "{r:?}"
    );
}

/// Our temporary layer files in `dir`.
fn layer_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("settings-image-layer-"))
        })
        .collect()
}

/// Starts a push of `src` to a loopback server that accepts connections
/// and never answers (so the push holds its layer file), with `tmpdir` as
/// TMPDIR; returns once the layer file is written.
fn push_held_by_a_silent_server(src: &Path, tmpdir: &Path, silent: &TcpListener) -> Running {
    let repo = format!("127.0.0.1:{}/shop", silent.local_addr().unwrap().port());
    let mut run = TestCommand::push(src, &repo)
        .tags(&["v1"])
        .env("TMPDIR", tmpdir)
        .spawn();
    let child = &mut run.child;
    // The push connects only after the layer is built and closed. A push
    // that exits instead fails at once; the deadline only bounds the wait
    // for one that hangs elsewhere, generously.
    silent.set_nonblocking(true).unwrap();
    common::eventually(Duration::from_secs(600), Duration::from_millis(20), || {
        if let Ok((conn, _)) = silent.accept() {
            std::mem::forget(conn); // held open, never answered
            return Ok(());
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "the push exited before connecting"
        );
        Err("the push never connected".to_string())
    });
    assert_eq!(layer_files(tmpdir).len(), 1, "the layer file is staged");
    run
}

#[test]
fn sigterm_removes_the_layer_file_and_the_next_run_sweeps_a_killed_ones() {
    let tmpdir = tempfile::tempdir().unwrap();
    let src = settings(20, "signals");
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();

    let held = push_held_by_a_silent_server(src.path(), tmpdir.path(), &silent);
    let pid = held.child.id().to_string();
    let kill = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(kill.success());
    let out = held.wait();
    let stderr = out.stderr;
    assert_eq!(out.code, 143, "{stderr}");
    assert!(
        stderr.contains("stopped by SIGTERM; its temporary files are removed"),
        "{stderr}"
    );
    assert!(
        layer_files(tmpdir.path()).is_empty(),
        "left behind after SIGTERM"
    );

    // SIGKILL cannot be handled: the file stays, until the next run.
    let mut held = push_held_by_a_silent_server(src.path(), tmpdir.path(), &silent);
    held.child.kill().unwrap();
    held.child.wait().unwrap();
    let left = layer_files(tmpdir.path());
    assert_eq!(left.len(), 1, "SIGKILL leaves the file");
    // Older than the few seconds a brand-new file is spared for.
    let old = std::time::SystemTime::now() - Duration::from_secs(60);
    std::fs::File::options()
        .write(true)
        .open(&left[0])
        .unwrap()
        .set_modified(old)
        .unwrap();
    let out_dir = tmpdir.path().join("layout");
    TestCommand::new()
        .args(["build", "--path", src.path().to_str().unwrap(), "--output"])
        .arg(&out_dir)
        .env("TMPDIR", tmpdir.path())
        .ok();
    assert!(
        layer_files(tmpdir.path()).is_empty(),
        "the next run swept the killed run's file and removed its own"
    );
}

/// One push of the race: its exit code, the digest it reports (when it
/// exits 0) and its stderr.
struct Raced {
    code: i32,
    digest: Option<String>,
    stderr: String,
}

fn race_push(worktree: &Path, repo: &str) -> Raced {
    let shop = worktree.join("shop");
    let r = TestCommand::push_json(shop, repo)
        .args(["--timestamp-tag", "main", "--source", "worktree"])
        .run();
    let digest = (r.code == 0).then(|| r.json()["digest"].as_str().unwrap().to_string());
    Raced {
        code: r.code,
        digest,
        stderr: r.stderr,
    }
}

#[test]
fn racing_pushes_of_one_commit_leave_the_tag_on_a_run_that_reported_it() {
    let reg = Registry::start(Auth::None);
    let (tmp, wt) = repo_with_folder();
    // Two checkouts of the same commit, each with its own uncommitted content.
    let checkouts: Vec<PathBuf> = ["a", "b"]
        .iter()
        .map(|name| {
            let dir = tmp.path().join(name);
            common::git::git_at(
                tmp.path(),
                &["clone", "-q", wt.to_str().unwrap(), dir.to_str().unwrap()],
                0,
            );
            std::fs::write(
                dir.join("shop/app.yaml"),
                format!("replicas: 2\nby: {name}\n"),
            )
            .unwrap();
            dir
        })
        .collect();
    const ROUNDS: usize = 24;
    const AT_ONCE: usize = 4;
    // What the race guarantees, whatever the timing: every run exits 0 or
    // 3; the tag, read once both runs have ended, names the digest a run
    // that exited 0 reported (the last put's run reads its own digest
    // back); a run that exits 3 names that digest. Counted, not asserted
    // (docs/push.md: the read-back narrows the race, it does not close
    // it): which way each loser lost, and runs that exited 0 reporting a
    // digest the tag does not name (a racing put slower than their
    // read-back's wait; with two runs of different content, only in a
    // round where both exited 0, so asserting none is asserting exactly
    // one loser a round).
    let (mut refused_before, mut lost_at_read_back, mut claimed_unnamed) = (0, 0, 0);
    let mut rounds = 0;
    for batch in 0..ROUNDS / AT_ONCE {
        let results: Vec<(String, Vec<Raced>)> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..AT_ONCE)
                .map(|i| {
                    let repo = format!("{}/race{}", reg.host(), batch * AT_ONCE + i);
                    let checkouts = &checkouts;
                    s.spawn(move || {
                        let runs: Vec<_> = checkouts
                            .iter()
                            .map(|c| {
                                let (c, repo) = (c.clone(), repo.clone());
                                std::thread::spawn(move || race_push(&c, &repo))
                            })
                            .collect();
                        let runs = runs.into_iter().map(|h| h.join().unwrap()).collect();
                        (repo, runs)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (repo, runs) in results {
            let tags = skopeo_tags(&repo, None);
            assert_eq!(tags.len(), 1, "{repo}: {tags:?}");
            let named = skopeo_inspect(&format!("{repo}:{}", tags[0]), None).unwrap()["Digest"]
                .as_str()
                .unwrap()
                .to_string();
            let winners: Vec<&String> = runs.iter().filter_map(|r| r.digest.as_ref()).collect();
            assert!(
                winners.contains(&&named),
                "{repo}: {} names {named}, which no run that exited 0 reported: {winners:?}",
                tags[0]
            );
            claimed_unnamed += winners.iter().filter(|d| ***d != named).count();
            for r in runs.iter().filter(|r| r.digest.is_none()) {
                assert_eq!(r.code, 3, "{repo}: {}", r.stderr);
                if r.stderr.contains("when read back after this run put it") {
                    lost_at_read_back += 1;
                } else {
                    refused_before += 1;
                }
                assert!(r.stderr.contains(&named), "{repo}: {}", r.stderr);
                assert!(
                    r.stderr.contains("timestamp tags never move"),
                    "{}",
                    r.stderr
                );
            }
            rounds += 1;
        }
    }
    assert_eq!(rounds, ROUNDS);
    eprintln!(
        "{ROUNDS} rounds: {refused_before} losers refused before their put, \
         {lost_at_read_back} caught by the read-back, {claimed_unnamed} runs that exited 0 \
         with a digest the tag does not name (the race the read-back narrows but cannot close)"
    );
}

/// The read-back, without luck: the race test above only counts the runs
/// it catches. Here a proxy lets the run put its timestamp tag and, when
/// the run reads the tag back, first puts another image's manifest under
/// it (a racing put that landed within the wait). The run must fail with
/// exit 3 naming both digests, and the tag names the other image.
#[test]
fn a_racing_put_seen_by_the_read_back_fails_the_run_with_both_digests() {
    use std::sync::{Arc, Mutex};

    let reg = Registry::start(Auth::None);
    let proxy = Proxy::start(reg.port);
    let (tmp, wt) = repo_with_folder();
    // The rival: other content, already in the repository under `rival`.
    let other = settings(1, "rival");
    let rival = TestCommand::push_json(other.path(), &format!("{}/shop", reg.host()))
        .tags(&["rival"])
        .json()["digest"]
        .as_str()
        .unwrap()
        .to_string();
    let manifest = tmp.path().join("rival.json");
    common::run_ok(common::tool("curl").args([
        "-sf",
        "-o",
        manifest.to_str().unwrap(),
        "-H",
        "Accept: application/vnd.oci.image.manifest.v1+json",
        &format!("http://{}/v2/shop/manifests/rival", reg.host()),
    ]));
    // The tag the run put, once the rival has been put under it.
    let raced: Arc<Mutex<Option<String>>> = Arc::default();
    let (seen, host) = (raced.clone(), reg.host());
    let mut put = false;
    proxy.set_rule(move |method, path| {
        let Some(tag) = path.strip_prefix("/v2/shop/manifests/main-") else {
            return Action::Forward;
        };
        let tag = format!("main-{tag}");
        match method {
            "PUT" => put = true,
            "HEAD" | "GET" if put && seen.lock().unwrap().is_none() => {
                common::run_ok(common::tool("curl").args([
                    "-sf",
                    "-X",
                    "PUT",
                    "-H",
                    "Content-Type: application/vnd.oci.image.manifest.v1+json",
                    "--data-binary",
                    &format!("@{}", manifest.display()),
                    &format!("http://{host}/v2/shop/manifests/{tag}"),
                ]));
                *seen.lock().unwrap() = Some(tag);
            }
            _ => {}
        }
        Action::Forward
    });
    let shop = wt.join("shop");
    let r = TestCommand::push_json(shop, &format!("{}/shop", proxy.host()))
        .args(["--timestamp-tag", "main"])
        .run();
    let tag = raced.lock().unwrap().clone().unwrap_or_else(|| {
        panic!(
            "the run read no timestamp tag back after its put: {}",
            r.stderr
        )
    });
    assert_eq!(r.code, 3, "{}", r.stderr);
    let named = format!("shop:{tag} names {rival}, not sha256:");
    let ours = r
        .stderr
        .split_once(&named)
        .map(|(_, rest)| &rest[..rest.len().min(64)])
        .unwrap_or_else(|| panic!("wanted {named:?} in: {}", r.stderr));
    assert!(
        ours.len() == 64 && ours.bytes().all(|b| b.is_ascii_hexdigit()) && !rival.ends_with(ours),
        "our digest: {ours:?}"
    );
    assert!(
        r.stderr.contains("when read back after this run put it"),
        "{}",
        r.stderr
    );
    assert_eq!(
        common::registry::digest_of(&reg, "shop", &tag).as_deref(),
        Some(rival.as_str())
    );
}

#[test]
fn a_registry_echoing_the_authorization_header_shows_no_credentials() {
    use base64::Engine as _;
    let (user, password) = ("deployer", "Pa55-echoed-back");
    let stub = common::registry::echoing_registry();
    let dir = settings(1, "echo");
    let repo = format!("{}/shop", stub.host());
    let r = TestCommand::push_json(dir.path(), &repo)
        .tags(&["v1"])
        .args(["--username", user, "--password-stdin"])
        .stdin(password)
        .run();
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("refused; you sent Authorization: Basic <redacted>"),
        "{}",
        r.stderr
    );
    let b64 = |e: &base64::engine::GeneralPurpose| e.encode(format!("{user}:{password}"));
    let sent = stub.seen.lock().unwrap().clone();
    let basic = format!("Basic {}", b64(&base64::engine::general_purpose::STANDARD));
    assert!(
        sent.iter()
            .any(|(_, _, h)| h.iter().any(|(_, v)| *v == basic)),
        "the stub never saw the credentials, so it could not echo them"
    );
    for encoded in [
        b64(&base64::engine::general_purpose::STANDARD),
        b64(&base64::engine::general_purpose::STANDARD_NO_PAD),
        b64(&base64::engine::general_purpose::URL_SAFE_NO_PAD),
        password.to_string(),
    ] {
        assert!(!r.stderr.contains(&encoded), "{encoded} in:\n{}", r.stderr);
        assert!(!r.stdout.contains(&encoded), "{encoded} in:\n{}", r.stdout);
    }
}

#[test]
fn an_endless_error_body_is_cut_and_said_to_be() {
    use std::io::Write as _;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    const BODY: u64 = 600 * 1024 * 1024;
    let sent = Arc::new(AtomicU64::new(0));
    let counter = sent.clone();
    let stub = common::registry::api_stub(false, move |_, out| {
        let head = format!(
            "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: {BODY}\r\n\r\n"
        );
        if out.write_all(head.as_bytes()).is_err() {
            return false;
        }
        let chunk = vec![b'x'; 64 * 1024];
        while counter.load(Ordering::SeqCst) < BODY {
            if out.write_all(&chunk).is_err() {
                return false; // the client hung up: it stopped reading
            }
            counter.fetch_add(chunk.len() as u64, Ordering::SeqCst);
        }
        true
    });
    let dir = settings(1, "endless");
    let repo = format!("{}/shop", stub.host());
    let r = TestCommand::push_json(dir.path(), &repo)
        .tags(&["v1"])
        .run();
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(r.stderr.contains("HTTP 400 Bad Request"), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("the answer was cut at 65536 bytes of 629145600"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.len() < 4096, "{} bytes of stderr", r.stderr.len());
    // The client stopped reading: the socket buffers hold a few MiB at most.
    let read = sent.load(Ordering::SeqCst);
    assert!(
        read < 64 * 1024 * 1024,
        "the client took {read} bytes of the body"
    );
}

/// A registry that answers `/v2/` and then sends every other answer one
/// byte per 300 ms: each byte restarts a read timeout, so only a deadline
/// ends it.
fn dripping_registry() -> common::registry::Stub {
    use std::io::Write as _;
    common::registry::Stub::start(|head, out| {
        if head.path == "/v2/" {
            return common::registry::respond(out, "200 OK", &[], "{}");
        }
        let answer = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
        for b in answer {
            if out.write_all(&[*b]).is_err() {
                return false;
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        true
    })
}

#[test]
fn a_dripping_registry_meets_the_per_request_deadline() {
    let stub = dripping_registry();
    let dir = settings(1, "drip");
    let repo = format!("{}/shop", stub.host());
    let r = TestCommand::push_json(dir.path(), &repo)
        .tags(&["v1"])
        .envs([
            ("SETTINGS_IMAGE_REQUEST_TIMEOUT", "2"),
            ("SETTINGS_IMAGE_PUSH_TIMEOUT", "600"),
        ])
        .run();
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(r.stderr.contains(&stub.host()), "{}", r.stderr);
    assert!(r.stderr.contains("checking manifest"), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("no complete answer in time (the per-request deadline is 2 s)"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("SETTINGS_IMAGE_REQUEST_TIMEOUT"),
        "{}",
        r.stderr
    );
    // Retried like any transient failure, then given up.
    let heads = stub
        .seen
        .lock()
        .unwrap()
        .iter()
        .filter(|(m, _, _)| m == "HEAD")
        .count();
    assert_eq!(heads, 6, "tried 6 times");
}

#[test]
fn a_dripping_registry_meets_the_whole_push_deadline() {
    let stub = dripping_registry();
    let dir = settings(1, "drip");
    let repo = format!("{}/shop", stub.host());
    let r = TestCommand::push_json(dir.path(), &repo)
        .tags(&["v1"])
        .envs([
            ("SETTINGS_IMAGE_REQUEST_TIMEOUT", "600"),
            ("SETTINGS_IMAGE_PUSH_TIMEOUT", "5"),
        ])
        .run();
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(r.stderr.contains(&stub.host()), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("did not finish within 5 s (the whole-operation deadline)"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("while checking manifest"), "{}", r.stderr);
    assert!(
        r.stderr.contains("SETTINGS_IMAGE_PUSH_TIMEOUT"),
        "{}",
        r.stderr
    );
}

// ------------------------------------------------- credentials stay on their host

/// The query of a presigned S3 upload URL: a credential of its own, never
/// to be printed.
const PRESIGNED_SIGNATURE: &str =
    "5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7";
const PRESIGNED_TOKEN: &str = "FwoGZXIvYXdzEPresignedSessionT0kenOfTheBucket";

fn presigned_query() -> String {
    format!(
        "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=ASIAQSTUBCREDENTIAL%2F20260101%2Feu-west-1%2Fs3%2Faws4_request\
         &X-Amz-Date=20260101T000000Z&X-Amz-Expires=900&X-Amz-Security-Token={PRESIGNED_TOKEN}\
         &X-Amz-SignedHeaders=host&X-Amz-Signature={PRESIGNED_SIGNATURE}"
    )
}

/// What the other host does with an upload sent to it.
#[derive(Clone, Copy)]
enum Bucket {
    /// Refuses it as S3 does an expired URL (403), echoing the token.
    Refuses,
    /// Closes the connection without an answer.
    Hangs,
    /// Answers 401 with a Bearer challenge naming its own realm, as if
    /// asking for the registry's credentials.
    Challenges,
}

/// Another host, `127.0.0.2`: a token realm (`GET /token` gives
/// `bearer` for Basic `user:password`) and a storage bucket the registry
/// sends uploads to (`PUT /bucket/...`).
fn elsewhere(user: &str, password: &str, bearer: &str, bucket: Bucket) -> common::registry::Stub {
    use base64::Engine as _;
    use common::registry::respond;
    let basic = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    );
    let token = serde_json::json!({ "token": bearer }).to_string();
    common::registry::Stub::start_on("127.0.0.2", move |head, out| {
        if head.path.starts_with("/token") {
            return match head.header("authorization") {
                Some(a) if a == basic => respond(out, "200 OK", &[], &token),
                _ => respond(
                    out,
                    "401 Unauthorized",
                    &[],
                    r#"{"errors":[{"code":"UNAUTHORIZED"}]}"#,
                ),
            };
        }
        match bucket {
            Bucket::Hangs => false,
            Bucket::Challenges => {
                let challenge = format!(
                    "Bearer realm=\"http://{}/token\",service=\"bucket\"",
                    head.header("host").unwrap_or("127.0.0.2")
                );
                respond(
                    out,
                    "401 Unauthorized",
                    &[("WWW-Authenticate", &challenge)],
                    r#"{"errors":[{"code":"UNAUTHORIZED"}]}"#,
                )
            }
            Bucket::Refuses => {
                use std::io::Write as _;
                let xml = format!(
                    "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>AccessDenied</Code>\
                     <Message>Request has expired for X-Amz-Security-Token={PRESIGNED_TOKEN}</Message></Error>"
                );
                let r = format!(
                    "HTTP/1.1 403 Forbidden\r\nContent-Type: application/xml\r\nContent-Length: {}\r\n\r\n{xml}",
                    xml.len()
                );
                out.write_all(r.as_bytes()).is_ok()
            }
        }
    })
}

/// A registry on 127.0.0.1 that wants Basic credentials, or with `realm`
/// a Bearer token from that realm, and hands every upload to
/// `upload_to` (a presigned URL on another host).
fn registry_handing_uploads_to(
    upload_to: String,
    realm: Option<String>,
    bearer: &str,
) -> common::registry::Stub {
    use common::registry::respond;
    let bearer = format!("Bearer {bearer}");
    common::registry::Stub::start(move |head, out| {
        let authorized = match (&realm, head.header("authorization")) {
            (Some(_), Some(a)) => a == bearer,
            (None, Some(a)) => a.starts_with("Basic "),
            (_, None) => false,
        };
        let challenge = match &realm {
            Some(r) => format!("Bearer realm=\"{r}\",service=\"stub\""),
            None => "Basic realm=\"stub\"".to_string(),
        };
        if !authorized {
            return respond(
                out,
                "401 Unauthorized",
                &[("WWW-Authenticate", &challenge)],
                r#"{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}"#,
            );
        }
        match (head.method.as_str(), head.path.as_str()) {
            ("GET", "/v2/") => respond(out, "200 OK", &[], "{}"),
            ("HEAD", _) => respond(out, "404 Not Found", &[], ""),
            ("POST", p) if p.contains("/blobs/uploads/") => respond(
                out,
                "202 Accepted",
                &[("Location", &upload_to), ("Range", "0-0")],
                "",
            ),
            _ => respond(
                out,
                "500 Internal Server Error",
                &[],
                r#"{"errors":[{"code":"UNEXPECTED","message":"the stub did not expect this"}]}"#,
            ),
        }
    })
}

/// The requests `stub` saw, as (method, path, Authorization).
fn seen_auth(stub: &common::registry::Stub) -> Vec<(String, String, Option<String>)> {
    stub.seen
        .lock()
        .unwrap()
        .iter()
        .map(|(m, p, h)| {
            let auth = h
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case("authorization"))
                .map(|(_, v)| v.clone());
            (m.clone(), p.clone(), auth)
        })
        .collect()
}

/// Nothing of a presigned URL's query in `text`.
fn assert_no_presigned_query(text: &str) {
    for secret in [PRESIGNED_SIGNATURE, PRESIGNED_TOKEN, "ASIAQSTUBCREDENTIAL"] {
        assert!(!text.contains(secret), "{secret} is printed:\n{text}");
    }
}

#[test]
fn an_upload_location_on_another_host_gets_no_credentials_and_its_refusal_names_it() {
    let (user, password) = ("deployer", "Pa55-for-the-registry-only");
    let bearer = "stub-bearer-token-for-127.0.0.1-only";
    for token_auth in [false, true] {
        let other = elsewhere(user, password, bearer, Bucket::Refuses);
        let upload = format!(
            "http://{}/bucket/uploads/4f2a?{}",
            other.host(),
            presigned_query()
        );
        // With token auth the realm is on the other host too: docker's rule
        // sends Basic credentials to the realm the registry names.
        let realm = token_auth.then(|| format!("http://{}/token", other.host()));
        let reg = registry_handing_uploads_to(upload, realm, bearer);
        let dir = settings(1, "presigned");
        let repo = format!("{}/shop", reg.host());
        let r = TestCommand::push_json(dir.path(), &repo)
            .tags(&["v1"])
            .args(["--username", user, "--password-stdin"])
            .stdin(password)
            .run();
        let case = if token_auth { "Bearer" } else { "Basic" };
        assert_eq!(r.code, 4, "{case}: {}", r.stderr);
        // What each host received.
        let at_registry = seen_auth(&reg);
        let want = if token_auth {
            format!("Bearer {bearer}")
        } else {
            String::new()
        };
        assert!(
            at_registry.iter().any(|(m, _, a)| m == "POST"
                && a.as_deref()
                    .is_some_and(|a| a.starts_with("Basic ") || *a == want)),
            "{case}: the registry never got the credentials, so nothing could leak: {at_registry:?}"
        );
        let at_other = seen_auth(&other);
        let puts: Vec<_> = at_other.iter().filter(|(m, _, _)| m == "PUT").collect();
        assert!(
            !puts.is_empty(),
            "{case}: the upload never reached the other host"
        );
        for (m, p, a) in &puts {
            assert!(
                a.is_none(),
                "{case}: {m} {p} at the other host carried {a:?}"
            );
        }
        let tokens: Vec<_> = at_other
            .iter()
            .filter(|(_, p, _)| p.starts_with("/token"))
            .collect();
        assert_eq!(
            tokens.len(),
            usize::from(token_auth),
            "{case}: {at_other:?}"
        );
        // The refusal names the host that refused, not the registry, and
        // shows nothing of the URL's query, even where the answer echoes it.
        assert!(
            r.stderr.contains(&format!(
                "{}, where {} sent this request, answered HTTP 403 Forbidden",
                other.host(),
                reg.host()
            )),
            "{case}: {}",
            r.stderr
        );
        assert!(!r.stderr.contains("authentication failed"), "{}", r.stderr);
        for text in [&r.stdout, &r.stderr] {
            assert_no_presigned_query(text);
            assert!(!text.contains(password) && !text.contains(bearer), "{text}");
        }
    }
}

/// The host an upload went to answers 401 with a token realm of its own:
/// that is not the registry asking for a renewal, so no credential is
/// sent anywhere for it and the push stops naming that host.
#[test]
fn a_401_from_another_host_renews_nothing_and_sends_no_credentials() {
    let (user, password) = ("deployer", "Pa55-for-the-registry-only");
    let bearer = "stub-bearer-token-for-127.0.0.1-only";
    for token_auth in [false, true] {
        let case = if token_auth { "Bearer" } else { "Basic" };
        let other = elsewhere(user, password, bearer, Bucket::Challenges);
        let upload = format!("http://{}/bucket/uploads/4f2a", other.host());
        let realm = token_auth.then(|| format!("http://{}/token", other.host()));
        let reg = registry_handing_uploads_to(upload, realm, bearer);
        let dir = settings(1, "challenged");
        let repo = format!("{}/shop", reg.host());
        let r = TestCommand::push_json(dir.path(), &repo)
            .tags(&["v1"])
            .args(["--username", user, "--password-stdin"])
            .stdin(password)
            .run();
        assert_eq!(r.code, 4, "{case}: {}", r.stderr);
        assert!(
            r.stderr.contains(&format!(
                "{}, where {} sent this request, answered HTTP 401",
                other.host(),
                reg.host()
            )),
            "{case}: {}",
            r.stderr
        );
        let at_other = seen_auth(&other);
        assert!(
            at_other.iter().any(|(m, _, _)| m == "PUT"),
            "{case}: the upload never reached the other host: {at_other:?}"
        );
        for (m, p, a) in at_other.iter().filter(|(_, p, _)| !p.starts_with("/token")) {
            assert!(
                a.is_none(),
                "{case}: {m} {p} at the other host carried {a:?}"
            );
        }
        // Only the registry's own realm was asked, once, when it named it.
        let tokens = at_other
            .iter()
            .filter(|(_, p, _)| p.starts_with("/token"))
            .count();
        assert_eq!(tokens, usize::from(token_auth), "{case}: {at_other:?}");
        for text in [&r.stdout, &r.stderr] {
            assert!(!text.contains(password) && !text.contains(bearer), "{text}");
        }
    }
}

#[test]
fn a_presigned_upload_url_is_printed_without_its_query_in_debug_lines_and_json() {
    let (user, password) = ("deployer", "Pa55-for-the-registry-only");
    // The bucket hangs up: the error is reqwest's, which names the URL.
    let other = elsewhere(user, password, "unused", Bucket::Hangs);
    let upload = format!(
        "http://{}/bucket/uploads/4f2a?{}",
        other.host(),
        presigned_query()
    );
    let reg = registry_handing_uploads_to(upload.clone(), None, "unused");
    let ws = support_login::workspace();
    let repository = format!("{}/shop", reg.host());
    let run_ = support_login::run_action(
        ws.path(),
        &[
            ("path", "cfg"),
            ("repository", &repository),
            ("tags", "v1"),
            ("username", user),
            ("password", password),
        ],
        &[("RUNNER_DEBUG", "1".to_string())],
    );
    assert_eq!(run_.code, 4, "{}\n{}", run_.stdout, run_.stderr);
    let debug: Vec<&str> = run_
        .stdout
        .lines()
        .filter(|l| l.starts_with("::debug::") && l.contains(&other.host()))
        .collect();
    assert!(
        debug
            .iter()
            .any(|l| l.contains(&format!("http://{}/bucket/uploads/4f2a", other.host()))),
        "no debug line names the upload URL:\n{}",
        run_.stdout
    );
    let error = run_.error();
    assert!(
        error.contains(&format!(
            "{} (where {} sent this request)",
            other.host(),
            reg.host()
        )),
        "{error}"
    );
    for text in [&run_.stdout, &run_.stderr, &run_.output_file, &run_.summary] {
        assert_no_presigned_query(text);
    }
    for (m, p, a) in seen_auth(&other) {
        assert!(a.is_none(), "{m} {p} at the other host carried {a:?}");
    }

    // Several folders with --json: each folder's error is in the JSON.
    let other = elsewhere(user, password, "unused", Bucket::Refuses);
    let upload = format!(
        "http://{}/bucket/uploads/4f2a?{}",
        other.host(),
        presigned_query()
    );
    let reg = registry_handing_uploads_to(upload, None, "unused");
    let root = tempfile::tempdir().unwrap();
    for name in ["a", "b"] {
        std::fs::create_dir(root.path().join(name)).unwrap();
        std::fs::write(
            root.path().join(name).join("app.yaml"),
            format!("name: {name}\n"),
        )
        .unwrap();
    }
    let template = format!("{}/{{name}}", reg.host());
    let r = TestCommand::new()
        .args([
            "push",
            "--path",
            root.path().join("a").to_str().unwrap(),
            "--path",
            root.path().join("b").to_str().unwrap(),
            "--repository",
            &template,
            "--tag",
            "v1",
            "--json",
            "--username",
            user,
            "--password-stdin",
        ])
        .stdin(password)
        .run();
    // Two failed folders: exit 1 ("2 of 2 folders failed"), not the first
    // one's 4 (docs/monorepo.md promises non-zero; pipeline.rs's
    // into_result says the first one's kind).
    r.exited(1);
    let rows = r.report();
    let rows = rows.as_array().expect("one row per folder");
    assert_eq!(rows.len(), 2, "{rows:?}");
    for row in rows {
        let e = row["error"].as_str().unwrap_or_else(|| panic!("{row}"));
        assert!(
            e.contains(&format!(
                "{}, where {} sent this request",
                other.host(),
                reg.host()
            )),
            "{e}"
        );
    }
    for text in [&r.stdout, &r.stderr] {
        assert_no_presigned_query(text);
    }
}

/// A registry on 127.0.0.1 that wants Basic credentials, or with
/// `token_auth` the Bearer `bearer` from its own realm (`GET /token` with
/// Basic credentials), challenging every request without them; `serve`
/// answers the ones that carry them.
fn registry_behind_auth(
    token_auth: bool,
    bearer: &str,
    serve: impl Fn(&common::registry::Head, &mut std::net::TcpStream) -> bool + Send + Sync + 'static,
) -> common::registry::Stub {
    use common::registry::respond;
    let want_bearer = format!("Bearer {bearer}");
    let token = serde_json::json!({ "token": bearer }).to_string();
    let realm: std::sync::Arc<std::sync::Mutex<String>> = Default::default();
    let realm_at = realm.clone();
    let reg = common::registry::Stub::start(move |head, out| {
        let auth = head.header("authorization");
        if head.path.starts_with("/token") {
            return match auth {
                Some(a) if a.starts_with("Basic ") => respond(out, "200 OK", &[], &token),
                _ => respond(out, "401 Unauthorized", &[], "{}"),
            };
        }
        let authorized = match auth {
            Some(a) if token_auth => a == want_bearer,
            Some(a) => a.starts_with("Basic "),
            None => false,
        };
        if authorized {
            return serve(head, out);
        }
        let challenge = if token_auth {
            format!(
                "Bearer realm=\"{}\",service=\"stub\"",
                realm_at.lock().unwrap()
            )
        } else {
            "Basic realm=\"stub\"".to_string()
        };
        respond(
            out,
            "401 Unauthorized",
            &[("WWW-Authenticate", &challenge)],
            "{}",
        )
    });
    *realm.lock().unwrap() = format!("http://{}/token", reg.host());
    reg
}

/// Every request `other` got carried no `Authorization` and no `Referer`.
fn assert_bare(case: &str, other: &common::registry::Stub) {
    for (m, p, h) in other.seen.lock().unwrap().iter() {
        for name in ["authorization", "referer"] {
            assert!(
                !h.iter().any(|(k, _)| k.eq_ignore_ascii_case(name)),
                "{case}: {m} {p} at the other host carried {name}: {h:?}"
            );
        }
    }
}

/// A registry that redirects every request but `GET /v2/` (and its own
/// token realm) to another host, with Basic or Bearer credentials, for a
/// pull (`inspect`) and a push: the other host gets no credentials and no
/// Referer, whichever credential the registry took.
#[test]
fn a_registry_redirect_to_another_host_carries_no_credentials_nor_referer() {
    use common::registry::respond;
    let (user, password) = ("reader", "Pa55-read-only-but-secret");
    let bearer = "stub-bearer-for-127.0.0.1-only";
    for (token_auth, face) in [
        (false, "inspect"),
        (true, "inspect"),
        (false, "push"),
        (true, "push"),
    ] {
        let case = format!("{} {face}", if token_auth { "Bearer" } else { "Basic" });
        let other = common::registry::Stub::start_on("127.0.0.2", |_, out| {
            respond(
                out,
                "404 Not Found",
                &[],
                r#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"not here"}]}"#,
            )
        });
        let target = format!("http://{}/cdn/object", other.host());
        let reg = registry_behind_auth(token_auth, bearer, move |head, out| {
            match head.path.as_str() {
                "/v2/" => respond(out, "200 OK", &[], "{}"),
                _ => respond(out, "307 Temporary Redirect", &[("Location", &target)], ""),
            }
        });
        let dir = settings(1, "redirected");
        let repo = format!("{}/shop", reg.host());
        let r = if face == "inspect" {
            TestCommand::new()
                .args(["inspect", &format!("{repo}:v1")])
                .envs([
                    ("SETTINGS_IMAGE_USERNAME", user),
                    ("SETTINGS_IMAGE_PASSWORD", password),
                ])
                .run()
        } else {
            TestCommand::push_json(dir.path(), &repo)
                .tags(&["v1"])
                .args(["--username", user, "--password-stdin"])
                .stdin(password)
                .run()
        };
        // The other host's 404 is the run's answer: exit 4, naming the
        // repository, and for the push both hosts.
        assert_eq!(r.code, 4, "{case}: {}", r.stderr);
        let says = if face == "inspect" {
            format!("error: registry {repo}: reading v1 failed: no such tag or digest\n")
        } else {
            format!(
                "failed: {}, where {} sent this request, answered HTTP 404 Not Found",
                other.host(),
                reg.host()
            )
        };
        assert!(
            r.stderr.contains(&says) && r.stderr.starts_with(&format!("error: registry {repo}: ")),
            "{case}: {}",
            r.stderr
        );
        let followed = seen_auth(&other);
        assert!(
            !followed.is_empty(),
            "{case}: the redirect was not followed: {}",
            r.stderr
        );
        // No credentials, nor where it was sent from.
        assert_bare(&case, &other);
        let at_registry = seen_auth(&reg);
        assert!(
            at_registry.iter().any(|(_, p, a)| p != "/v2/"
                && !p.starts_with("/token")
                && a.as_deref().is_some_and(|a| if token_auth {
                    a == format!("Bearer {bearer}")
                } else {
                    a.starts_with("Basic ")
                })),
            "{case}: the registry never got the credentials, so nothing could leak: {at_registry:?}"
        );
        for text in [&r.stdout, &r.stderr] {
            assert!(
                !text.contains(password) && !text.contains(bearer),
                "{case}: {text}"
            );
        }
    }
}

/// A tag list whose `Link` names another host for the next page, with
/// Basic or Bearer credentials: the next page is read there without them
/// and without a Referer, and the registry's own pages carried them.
#[test]
fn a_tag_list_link_to_another_host_carries_no_credentials() {
    use common::registry::respond;
    let (user, password) = ("reader", "Pa55-link-but-secret");
    let bearer = "stub-bearer-for-the-registry-only";
    for token_auth in [false, true] {
        let case = if token_auth { "Bearer" } else { "Basic" };
        let other = common::registry::Stub::start_on("127.0.0.2", |head, out| {
            if head.path.starts_with("/v2/shop/tags/list") {
                respond(
                    out,
                    "200 OK",
                    &[],
                    r#"{"name":"shop","tags":["main-1700000000-abcdef0"]}"#,
                )
            } else {
                respond(out, "404 Not Found", &[], "{}")
            }
        });
        let next = format!(
            "<http://{}/v2/shop/tags/list?last=a&n=1000>; rel=\"next\"",
            other.host()
        );
        let reg = registry_behind_auth(token_auth, bearer, move |head, out| {
            if head.path == "/v2/" {
                respond(out, "200 OK", &[], "{}")
            } else if head.path.starts_with("/v2/shop/tags/list") {
                respond(
                    out,
                    "200 OK",
                    &[("Link", &next)],
                    r#"{"name":"shop","tags":["a"]}"#,
                )
            } else {
                respond(
                    out,
                    "403 Forbidden",
                    &[],
                    r#"{"errors":[{"code":"DENIED","message":"no"}]}"#,
                )
            }
        });
        let repo = format!("{}/shop", reg.host());
        let r = TestCommand::new()
            .args([
                "promote",
                "--repository",
                &repo,
                "--from",
                "main",
                "--to",
                "prod",
                "--explain",
            ])
            .envs([
                ("SETTINGS_IMAGE_USERNAME", user),
                ("SETTINGS_IMAGE_PASSWORD", password),
            ])
            .run();
        // The next page's tag is the candidate: the run goes on to read its
        // manifest (which the stub refuses, exit 5 naming it).
        assert_eq!(r.code, 5, "{case}: {}", r.stderr);
        assert!(
            r.stderr.starts_with(&format!(
                "error: authentication failed for {}: getting manifest {repo}:main-1700000000-abcdef0 ",
                reg.host()
            )),
            "{case}: {}",
            r.stderr
        );
        let followed = seen_auth(&other);
        assert!(
            followed
                .iter()
                .any(|(m, p, _)| m == "GET" && p.starts_with("/v2/shop/tags/list")),
            "{case}: the next page was not read: {followed:?}\n{}",
            r.stderr
        );
        assert_bare(case, &other);
        let at_registry = seen_auth(&reg);
        assert!(
            at_registry
                .iter()
                .any(|(_, p, a)| p.starts_with("/v2/shop/tags/list")
                    && a.as_deref().is_some_and(|a| if token_auth {
                        a == format!("Bearer {bearer}")
                    } else {
                        a.starts_with("Basic ")
                    })),
            "{case}: the registry's page never carried the credentials: {at_registry:?}"
        );
        for text in [&r.stdout, &r.stderr] {
            assert!(!text.contains(password), "{case}: the password was printed");
            assert!(!text.contains(bearer), "{case}: the token was printed");
        }
    }
}

#[test]
fn a_registry_that_accepts_connections_and_never_answers_meets_the_deadlines() {
    // Listening, so the kernel accepts every connection, and never read
    // nor answered.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let dir = settings(1, "silent");
    let repo = format!("127.0.0.1:{}/shop", silent.local_addr().unwrap().port());
    let push = || {
        let mut c = TestCommand::push_json(dir.path(), &repo);
        c.tags(&["v1"]);
        c
    };
    // The whole-operation deadline ends the push, whatever each try waits.
    let r = push().env("SETTINGS_IMAGE_PUSH_TIMEOUT", "3").run();
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(
        r.stderr.contains(
            "did not finish within 3 s (the whole-operation deadline) while contacting the registry (authentication)"
        ),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("127.0.0.1"), "{}", r.stderr);
    assert!(
        r.stderr.contains("SETTINGS_IMAGE_PUSH_TIMEOUT"),
        "{}",
        r.stderr
    );
    // Each try ends at the per-request deadline, six tries, then the host
    // is named with both limits.
    let r = push()
        .envs([
            ("SETTINGS_IMAGE_REQUEST_TIMEOUT", "1"),
            ("SETTINGS_IMAGE_PUSH_TIMEOUT", "600"),
        ])
        .run();
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("no complete answer in time (the per-request deadline is 1 s)"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("did not answer in time: a request gets 1 s in all")
            && r.stderr
                .contains("60 s without a byte; it was tried up to 6 times"),
        "{}",
        r.stderr
    );
}

// ------------------------------------------------ the tag list, read in bounds

/// Whether `path` asks for the tag list.
fn is_tag_list(path: &str) -> bool {
    path.contains("/tags/list")
}

/// A tag-list page: `tags`, with a `Link` to `next` when given.
fn tag_page(tags: &[String], next: Option<&str>) -> Action {
    let body = serde_json::json!({ "name": "shop", "tags": tags }).to_string();
    let headers = next
        .map(|n| vec![("Link".to_string(), format!("<{n}>; rel=\"next\""))])
        .unwrap_or_default();
    Action::RespondWith(200, headers, body)
}

/// Nothing of the push reached the registry: no tag, no manifest put.
fn assert_nothing_written(reg: &Registry, proxy: &Proxy) {
    let writes: Vec<String> = proxy
        .take()
        .into_iter()
        .filter(|s| matches!(s.method.as_str(), "PUT" | "POST" | "PATCH"))
        .map(|s| format!("{} {}", s.method, s.path))
        .collect();
    assert!(writes.is_empty(), "written: {writes:?}");
    assert!(
        skopeo_tags(&format!("{}/shop", reg.host()), None).is_empty(),
        "the registry holds tags"
    );
}

/// A registry whose `tags/list` pages never end, 20,000 new tags a page:
/// the push stops at the tag bound (100,000, or SETTINGS_IMAGE_MAX_TAGS),
/// before anything is written, in bounded memory. Before, it read page
/// after page (10,000 pages, the 15-minute deadline), growing ~100 MB/s.
#[test]
fn a_tag_list_that_pages_for_ever_stops_at_the_tag_bound() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let reg = Registry::start(Auth::None);
    let proxy = Proxy::start(reg.port);
    let (_tmp, wt) = repo_with_folder();
    let pages = Arc::new(AtomicUsize::new(0));
    let served = pages.clone();
    proxy.set_rule(move |_, path| {
        if !is_tag_list(path) {
            return Action::Forward;
        }
        let n = served.fetch_add(1, Ordering::SeqCst);
        let tags: Vec<String> = (0..20_000)
            .map(|i| format!("main-{}-{:07x}", 1_700_000_000 + n * 20_000 + i, i))
            .collect();
        tag_page(&tags, Some(&format!("/v2/shop/tags/list?n=1000&last=p{n}")))
    });
    let shop = wt.join("shop");
    for (max, env) in [(100_000, None), (30_000, Some("30000"))] {
        pages.store(0, Ordering::SeqCst);
        let mut cmd = TestCommand::push(&shop, &format!("{}/shop", proxy.host()));
        cmd.args(["--timestamp-tag", "main"]);
        if let Some(v) = env {
            cmd.env("SETTINGS_IMAGE_MAX_TAGS", v);
        }
        let (r, kib) = cmd.peak_rss();
        assert_eq!(r.code, 4, "{}", r.stderr);
        assert!(
            r.stderr.contains(&format!(
                "the tag list holds more than {max} tags (SETTINGS_IMAGE_MAX_TAGS), the most read; nothing was pushed"
            )),
            "{}",
            r.stderr
        );
        assert!(
            r.stderr
                .contains("delete old tags or raise SETTINGS_IMAGE_MAX_TAGS"),
            "{}",
            r.stderr
        );
        // It read pages only until the bound: no more.
        assert_eq!(pages.load(Ordering::SeqCst), max / 20_000 + 1);
        eprintln!("endless tag pages, bound {max}: peak {kib} KiB");
        assert!(kib < 128 * 1024, "the push peaked at {kib} KiB");
        assert_nothing_written(&reg, &proxy);
    }
}

/// A `Link` that leads back to a page already read: the loop is named,
/// not followed 10,000 times.
#[test]
fn a_tag_list_link_loop_is_seen_and_named() {
    let reg = Registry::start(Auth::None);
    let proxy = Proxy::start(reg.port);
    let (_tmp, wt) = repo_with_folder();
    proxy.set_rule(move |_, path| {
        if !is_tag_list(path) {
            return Action::Forward;
        }
        // Page 2 links back to page 1 (the same URL, in another spelling
        // of the same path).
        if path.contains("last=b") {
            tag_page(&["b".to_string()], Some("/v2/shop/tags/list?n=1000&last=a"))
        } else if path.contains("last=a") {
            tag_page(
                &["a2".to_string()],
                Some("/v2/shop/tags/list?n=1000&last=b"),
            )
        } else {
            tag_page(&["a".to_string()], Some("/v2/shop/tags/list?n=1000&last=a"))
        }
    });
    let r = TestCommand::push(wt.join("shop"), &format!("{}/shop", proxy.host()))
        .args(["--timestamp-tag", "main"])
        .run();
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "the tag list's Link leads back to a page it already sent (http://{}/v2/shop/tags/list): it would never end",
            proxy.host()
        )),
        "{}",
        r.stderr
    );
    let lists = proxy
        .take()
        .into_iter()
        .filter(|s| is_tag_list(&s.path))
        .count();
    assert_eq!(lists, 3, "pages read");
    assert!(skopeo_tags(&format!("{}/shop", reg.host()), None).is_empty());
}

/// One page larger than the most read of a page (16 MiB): refused there.
#[test]
fn a_tag_list_page_past_the_page_bound_is_refused() {
    let reg = Registry::start(Auth::None);
    let proxy = Proxy::start(reg.port);
    let (_tmp, wt) = repo_with_folder();
    let big = "x".repeat(17 << 20);
    proxy.set_rule(move |_, path| {
        if !is_tag_list(path) {
            return Action::Forward;
        }
        tag_page(std::slice::from_ref(&big), None)
    });
    let r = TestCommand::push(wt.join("shop"), &format!("{}/shop", proxy.host()))
        .args(["--timestamp-tag", "main"])
        .run();
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(
        r.stderr.contains(
            "the page of the tag list is larger than 16777216 bytes, more than is read into memory; nothing was pushed"
        ),
        "{}",
        r.stderr
    );
    assert_nothing_written(&reg, &proxy);
}

/// An unreadable tag list (200, not JSON) before the push: the push stops
/// there, exit 4, saying nothing was pushed: the anomaly and prefix checks
/// cannot be made, and the branch tag's read-back would fail on the same
/// list after the image was published. (Before, the answer was passed
/// over, the checks skipped without a word, and the push went on.)
#[test]
fn an_unreadable_tag_list_stops_the_push_before_anything_is_written() {
    let reg = Registry::start(Auth::None);
    let proxy = Proxy::start(reg.port);
    let (_tmp, wt) = repo_with_folder();
    proxy.set_rule(|_, path| {
        if is_tag_list(path) {
            Action::RespondWith(200, Vec::new(), "this is not a tag list".into())
        } else {
            Action::Forward
        }
    });
    let r = TestCommand::push(wt.join("shop"), &format!("{}/shop", proxy.host()))
        .args(["--timestamp-tag", "main", "--branch-tag", "main"])
        .run();
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "error: registry {}/shop: listing tags of {}/shop failed: unreadable tag list: expected ident at line 1 column 2; nothing was pushed: the push checks the existing tags before it writes anything, and cannot trust this list",
            proxy.host(),
            proxy.host()
        )),
        "{}",
        r.stderr
    );
    assert_nothing_written(&reg, &proxy);
}

/// The first tag list is fine; the branch tag's read-back gets an
/// unreadable one. The push has published the image, its timestamp tag,
/// its provenance and the branch tag: it fails (exit 4) and says so, in
/// text (with the warnings it had) and in `--json`. A re-run finds it all
/// in place.
#[test]
fn a_push_that_fails_after_publishing_says_what_it_published() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let reg = Registry::start(Auth::None);
    let proxy = Proxy::start(reg.port);
    let (_tmp, wt) = repo_with_folder();
    let lists = std::sync::Arc::new(AtomicUsize::new(0));
    let counted = lists.clone();
    proxy.set_rule(move |_, path| {
        if is_tag_list(path) && counted.fetch_add(1, Ordering::SeqCst) == 1 {
            Action::RespondWith(200, Vec::new(), "<html>maintenance</html>".into())
        } else {
            Action::Forward
        }
    });
    let repository = format!("{}/shop", proxy.host());
    let r = TestCommand::push_json(wt.join("shop"), &repository)
        .args(["--timestamp-tag", "main", "--branch-tag", "main"])
        .run();
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert_eq!(lists.load(Ordering::SeqCst), 2);
    // What the registry holds, by skopeo.
    let tags = skopeo_tags(&format!("{}/shop", reg.host()), None);
    let stamp = tags
        .iter()
        .find(|t| t.starts_with("main-"))
        .unwrap_or_else(|| panic!("no timestamp tag: {tags:?}"))
        .clone();
    let digest = common::registry::digest_of(&reg, "shop", &stamp).unwrap();
    assert_eq!(
        common::registry::digest_of(&reg, "shop", "main").as_deref(),
        Some(digest.as_str())
    );
    let reference = format!("{repository}:{stamp}@{digest}");
    // --json: what is there, on stdout.
    let v: serde_json::Value =
        serde_json::from_str(r.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {:?}", r.stdout));
    assert_eq!(v["exit_code"], 4);
    assert!(
        v["error"].as_str().unwrap().contains("unreadable tag list"),
        "{v}"
    );
    let p = &v["published"];
    assert_eq!(p["reference"], reference.as_str(), "{v}");
    assert_eq!(p["digest"], digest.as_str());
    assert_eq!(p["tags"], serde_json::json!([stamp]));
    assert_eq!(p["branch_tag"], "main");
    assert_eq!(p["pushed"], true);
    let provenance = p["provenance"].as_str().unwrap_or_else(|| panic!("{v}"));
    assert!(provenance.starts_with("sha256:"), "{v}");
    // The text says the same.
    assert!(
        r.stderr.contains(&format!(
            "unreadable tag list: expected value at line 1 column 1; already published: {reference}, tagged {stamp}, main (branch tag), provenance {provenance}"
        )),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("a re-run of the same push finds them there (pushed: false)"),
        "{}",
        r.stderr
    );
    // The re-run: everything in place, nothing new.
    let again = TestCommand::push_json(wt.join("shop"), &repository)
        .args(["--timestamp-tag", "main", "--branch-tag", "main"])
        .json();
    assert_eq!(again["digest"], digest.as_str());
    assert_eq!(again["pushed"], false, "{again}");
}

// ------------------------------------------------------------ SSL_CERT_FILE

/// `SSL_CERT_FILE`, the variable the docs tell users to set for a private
/// CA, replaces the system's store: set to a file that does not exist or
/// holds no certificate, no server can be trusted. Before, that was
/// skipped without a word and the push failed later on `UnknownIssuer`
/// with a hint at the system store or `insecure`. Now the run stops before
/// any request, naming the variable and its value (exit 2); a bundle
/// without the registry's CA fails on the certificate with a hint that
/// names the variable (exit 4); the CA itself works.
#[test]
fn an_unusable_ssl_cert_file_is_named() {
    let reg = Registry::start_tls(Auth::None);
    let ca = reg.ca.clone().expect("a TLS registry");
    let dir = common::TempDir::new();
    let missing = dir.join("missing.pem");
    let no_cert = dir.join("no-cert.pem");
    std::fs::write(&no_cert, "# the CA goes here\n").unwrap();
    let other = dir.join("other");
    std::fs::create_dir(&other).unwrap();
    let (other_ca, _, _) = common::registry::ca_signed(&other, "127.0.0.1");
    let shop = settings(1, "tls");
    let repository = format!("{}/shop", reg.host());
    let push = |file: &Path| {
        TestCommand::push(shop.path(), &repository)
            .args(["--tag", "v1"])
            .env("SSL_CERT_FILE", file)
            .run()
    };
    let log_lines = || {
        std::fs::read_to_string(&reg.log)
            .unwrap_or_default()
            .lines()
            .count()
    };
    let before = log_lines();
    for (file, why) in [
        (&missing, "which cannot be read (".to_string()),
        (
            &no_cert,
            "which holds no PEM certificate (-----BEGIN CERTIFICATE-----)".to_string(),
        ),
    ] {
        let r = push(file);
        assert_eq!(r.code, 2, "{}", r.stderr);
        assert!(
            r.stderr.contains(&format!(
                "error: SSL_CERT_FILE is set to {}, {why}",
                file.display()
            )),
            "{}",
            r.stderr
        );
        assert!(
            r.stderr.contains(
                "HTTPS trusts only the certificates SSL_CERT_FILE names, instead of the system's, so no server could be trusted"
            ),
            "{}",
            r.stderr
        );
        assert!(
            r.stderr
                .contains("hint: point SSL_CERT_FILE at a PEM bundle"),
            "{}",
            r.stderr
        );
    }
    // Not one request reached the registry.
    assert_eq!(log_lines(), before, "the registry was asked");
    // A usable bundle without the registry's CA: the certificate, and the
    // variable, are named.
    let r = push(&other_ca);
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "presented a TLS certificate that is not trusted: SSL_CERT_FILE is set to {}, and HTTPS trusts only the certificates in it",
            other_ca.display()
        )),
        "{}",
        r.stderr
    );
    assert!(skopeo_tags_tls(&reg, &ca).is_empty());
    // The CA: pushed.
    let r = push(&ca);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(skopeo_tags_tls(&reg, &ca), ["v1"]);
}

/// The tags of `shop` as skopeo reads them over TLS, trusting `ca`.
fn skopeo_tags_tls(reg: &Registry, ca: &Path) -> Vec<String> {
    let certs = common::TempDir::new();
    std::fs::copy(ca, certs.join("ca.crt")).unwrap();
    let out = Command::new(common::require("skopeo"))
        .args(["list-tags", "--no-creds", "--cert-dir"])
        .arg(certs.path())
        .arg(format!("docker://{}/shop", reg.host()))
        .output()
        .unwrap();
    if !out.status.success() {
        return Vec::new();
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["Tags"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}
