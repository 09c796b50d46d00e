//! A careless or hostile user's inputs, each against a real registry
//! (distribution 2.8) or a loopback stub of a hostile server: the exit
//! code, the message, and that nothing is lost or leaked (skopeo reads
//! every tag afterwards). The action face's cases live in `tests/action.rs`.

mod common;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::registry::{Auth, Registry, bin, run, settings, skopeo_inspect, skopeo_tags};

fn push_args<'a>(dir: &'a str, repo: &'a str, tags: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec!["push", "--path", dir, "--repository", repo, "--json"];
    for t in tags {
        a.extend(["--tag", t]);
    }
    a
}

/// Git in `dir` with a fixed identity and committer time, no global config.
fn git(dir: &Path, args: &[&str], time: i64) {
    let home = dir.join("../home");
    std::fs::create_dir_all(&home).unwrap();
    let d = format!("@{time} +0000");
    let out = Command::new(common::require("git"))
        .args(args)
        .current_dir(dir)
        .env("HOME", &home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "A")
        .env("GIT_AUTHOR_EMAIL", "a@example.com")
        .env("GIT_COMMITTER_NAME", "C")
        .env("GIT_COMMITTER_EMAIL", "c@example.com")
        .env("GIT_AUTHOR_DATE", &d)
        .env("GIT_COMMITTER_DATE", &d)
        .env_remove("GIT_DIR")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A git repository with `shop/` committed; returns (tempdir, work tree).
fn repo_with_folder() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let wt = tmp.path().join("repo");
    std::fs::create_dir_all(wt.join("shop")).unwrap();
    std::fs::write(wt.join("shop/app.yaml"), "replicas: 2\n").unwrap();
    git(&wt, &["init", "-q", "-b", "main"], 0);
    git(&wt, &["add", "."], 0);
    git(&wt, &["commit", "-q", "-m", "shop"], 1_700_000_000);
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
        run(&push_args(d, &with_userinfo, &["v1"]), &[], None),
        run(
            &push_args(d, &format!("https://{with_userinfo}"), &["v1"]),
            &[],
            None,
        ),
        run(&["inspect", &format!("{with_userinfo}:v1")], &[], None),
        run(
            &[
                "promote",
                "--repository",
                &with_userinfo,
                "--from",
                "main",
                "--to",
                "prod",
            ],
            &[],
            None,
        ),
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
        let r = run(&push_args(d, &repo, &["v1"]), &[], None);
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
    let first = run(&push_args(d, &repo, &["v1"]), &[], None).json();
    let digest = first["digest"].as_str().unwrap().to_string();
    let referrers_tag = digest.replace(':', "-");
    assert_eq!(
        skopeo_tags(&repo, None),
        [referrers_tag.clone(), "v1".to_string()],
        "the provenance went under the referrers tag (distribution 2.8 has no referrers API)"
    );
    let index_before = skopeo_raw(&format!("{repo}:{referrers_tag}"));

    let r = run(&push_args(d, &repo, &[&referrers_tag]), &[], None);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("is reserved"), "{}", r.stderr);
    assert!(r.stderr.contains("referrers tag schema"), "{}", r.stderr);
    assert!(r.stdout.is_empty(), "{}", r.stdout);
    let r = run(
        &[
            &push_args(d, &repo, &["v2"])[..],
            &["--timestamp-tag", "main", "--branch-tag", &referrers_tag],
        ]
        .concat(),
        &[],
        None,
    );
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
    let r = run(
        &[
            "build",
            "--path",
            src.to_str().unwrap(),
            "--output",
            out.to_str().unwrap(),
        ],
        &[],
        None,
    );
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
fn push_held_by_a_silent_server(
    src: &Path,
    tmpdir: &Path,
    silent: &TcpListener,
) -> std::process::Child {
    let repo = format!("127.0.0.1:{}/shop", silent.local_addr().unwrap().port());
    let empty = tempfile::tempdir().unwrap();
    let child = Command::new(bin())
        .args([
            "push",
            "--path",
            src.to_str().unwrap(),
            "--repository",
            &repo,
        ])
        .args(["--tag", "v1"])
        .env("TMPDIR", tmpdir)
        .env("DOCKER_CONFIG", empty.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The push connects only after the layer is built and closed.
    let deadline = Instant::now() + Duration::from_secs(60);
    silent.set_nonblocking(true).unwrap();
    loop {
        if let Ok((conn, _)) = silent.accept() {
            std::mem::forget(conn); // held open, never answered
            break;
        }
        assert!(Instant::now() < deadline, "the push never connected");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(layer_files(tmpdir).len(), 1, "the layer file is staged");
    child
}

#[test]
fn sigterm_removes_the_layer_file_and_the_next_run_sweeps_a_killed_ones() {
    let tmpdir = tempfile::tempdir().unwrap();
    let src = settings(20, "signals");
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();

    let child = push_held_by_a_silent_server(src.path(), tmpdir.path(), &silent);
    let pid = child.id().to_string();
    let kill = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(kill.success());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(143), "{stderr}");
    assert!(
        stderr.contains("stopped by SIGTERM; its temporary files are removed"),
        "{stderr}"
    );
    assert!(
        layer_files(tmpdir.path()).is_empty(),
        "left behind after SIGTERM"
    );

    // SIGKILL cannot be handled: the file stays, until the next run.
    let mut child = push_held_by_a_silent_server(src.path(), tmpdir.path(), &silent);
    child.kill().unwrap();
    child.wait().unwrap();
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
    let built = Command::new(bin())
        .args(["build", "--path", src.path().to_str().unwrap(), "--output"])
        .arg(&out_dir)
        .env("TMPDIR", tmpdir.path())
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    assert!(
        layer_files(tmpdir.path()).is_empty(),
        "the next run swept the killed run's file and removed its own"
    );
}
