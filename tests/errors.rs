//! Folders that cannot become a settings image: each fails with exit code 2,
//! a message naming the path and what to do, and writes nothing.

use crate::common;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use common::TempDir;
use common::cmd::TestCommand;

/// Builds `src` into a new output directory and checks the refusal: exit
/// code 2, every `needles` in stderr, a hint, no stdout, no output dir.
fn refused(tmp: &TempDir, src: &Path, needles: &[&str]) -> String {
    let output = tmp.join("out");
    let out = common::build_raw(src, &output, &["dev"]);
    let stderr = out.stderr;
    assert_eq!(out.code, 2, "stderr: {stderr}");
    for n in needles {
        assert!(stderr.contains(n), "stderr lacks {n:?}:\n{stderr}");
    }
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(stderr.contains("\nhint: "), "no hint:\n{stderr}");
    assert!(out.stdout.is_empty(), "stdout: {}", out.stdout);
    assert!(
        !output.exists(),
        "a refused build created {}",
        output.display()
    );
    stderr
}

fn folder(tmp: &TempDir) -> PathBuf {
    let src = tmp.join("src");
    common::write_file(&src, "ok.yaml", b"ok: true\n", 0o644);
    src
}

fn shown(p: &Path) -> String {
    p.display().to_string()
}

#[test]
fn missing_folder() {
    let tmp = TempDir::new();
    let src = tmp.join("does-not-exist");
    refused(
        &tmp,
        &src,
        &[&shown(&src), "cannot read the settings folder"],
    );
}

#[test]
fn a_file_instead_of_a_folder() {
    let tmp = TempDir::new();
    let src = folder(&tmp).join("ok.yaml");
    refused(&tmp, &src, &[&shown(&src), "is not a directory"]);
}

#[test]
fn empty_folder_even_with_subfolders_and_git() {
    let tmp = TempDir::new();
    let src = tmp.join("src");
    std::fs::create_dir_all(src.join("sub/deeper")).unwrap();
    common::write_file(&src, "sub/.git/HEAD", b"ref: refs/heads/main\n", 0o644);
    refused(&tmp, &src, &[&shown(&src), "holds no files"]);
}

#[test]
fn absolute_symlink() {
    let tmp = TempDir::new();
    let src = folder(&tmp);
    let link = src.join("passwd");
    symlink("/etc/passwd", &link).unwrap();
    refused(
        &tmp,
        &src,
        &[&shown(&link), "absolute path \"/etc/passwd\""],
    );
}

#[test]
fn symlink_escaping_the_folder() {
    let tmp = TempDir::new();
    let src = folder(&tmp);
    common::write_file(&src, "sub/a.yaml", b"a: 1\n", 0o644);
    let link = src.join("sub/escape");
    // Lexically outside, even though it comes back in.
    symlink("../../src/ok.yaml", &link).unwrap();
    refused(&tmp, &src, &[&shown(&link), "leaves the folder"]);
}

#[test]
fn fifo() {
    let tmp = TempDir::new();
    let src = folder(&tmp);
    let fifo = src.join("pipe");
    common::run_ok(common::tool("mkfifo").arg(&fifo));
    refused(&tmp, &src, &[&shown(&fifo), "is a fifo"]);
}

#[test]
fn socket() {
    let tmp = TempDir::new();
    let src = folder(&tmp);
    let sock = src.join("control.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    refused(&tmp, &src, &[&shown(&sock), "is a socket"]);
}

#[test]
fn non_utf8_file_name() {
    let tmp = TempDir::new();
    let src = folder(&tmp);
    let bad = src.join("sub").join(OsStr::from_bytes(b"caf\xe9.yaml"));
    common::write_file(&src, "sub/fine.yaml", b"x: 1\n", 0o644);
    std::fs::write(&bad, b"x: 2\n").unwrap();
    // The name is shown with a replacement character; its folder and the
    // readable part of the name are there.
    refused(
        &tmp,
        &src,
        &[
            &shown(&src.join("sub")),
            "caf\u{fffd}.yaml",
            "not valid UTF-8",
        ],
    );
}

#[test]
fn an_invalid_tag_is_refused_before_reading_anything() {
    let tmp = TempDir::new();
    let src = folder(&tmp);
    let output = tmp.join("out");
    let out = common::build_raw(&src, &output, &["bad/tag"]);
    let stderr = out.stderr;
    assert_eq!(out.code, 2, "{stderr}");
    assert!(stderr.contains("invalid tag \"bad/tag\""), "{stderr}");
    assert!(!output.exists());
}

#[test]
fn symlink_escaping_through_another_symlink() {
    // Each link is inside the folder on its own path, but `esc` goes through
    // `sub/up` (the folder itself) and then one level up: out of the folder.
    let tmp = TempDir::new();
    let src = folder(&tmp);
    std::fs::create_dir(src.join("sub")).unwrap();
    symlink("..", src.join("sub/up")).unwrap();
    let esc = src.join("esc");
    symlink("sub/up/../ok.yaml", &esc).unwrap();
    // The kernel agrees it leaves the folder: it resolves next to `src`.
    common::write_file(tmp.path(), "ok.yaml", b"outside: true\n", 0o644);
    assert_eq!(
        std::fs::canonicalize(&esc).unwrap_or_default(),
        tmp.path().join("ok.yaml")
    );
    refused(&tmp, &src, &[&shown(&esc), "leaves the folder"]);
}

#[test]
fn symlink_loop() {
    let tmp = TempDir::new();
    let src = folder(&tmp);
    symlink("b", src.join("a")).unwrap();
    symlink("a", src.join("b")).unwrap();
    refused(&tmp, &src, &[&shown(&src.join("a")), "loop"]);
}

#[test]
fn non_utf8_symlink_target() {
    let tmp = TempDir::new();
    let src = folder(&tmp);
    let link = src.join("link");
    symlink(OsStr::from_bytes(b"caf\xe9.yaml"), &link).unwrap();
    refused(&tmp, &src, &[&shown(&link), "not valid UTF-8"]);
}

#[test]
fn symlink_escaping_through_another_symlink_in_a_commit() {
    // The same chain, read from git (the default inside a repository).
    let tmp = TempDir::new();
    let repo = tmp.join("repo");
    let src = repo.join("settings");
    common::write_file(&src, "ok.yaml", b"ok: true\n", 0o644);
    std::fs::create_dir(src.join("sub")).unwrap();
    symlink("..", src.join("sub/up")).unwrap();
    symlink("sub/up/../README", src.join("esc")).unwrap();
    common::write_file(&repo, "README", b"outside the folder\n", 0o644);
    let git = |args: &[&str]| {
        common::run_ok(
            common::tool("git")
                .arg("-C")
                .arg(&repo)
                .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
                .args(args),
        )
    };
    git(&["init", "-q"]);
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "settings"]);
    refused(
        &tmp,
        &src,
        &[&shown(&src.join("esc")), "leaves the folder", "commit"],
    );
}

/// A file tracked with git LFS: the commit holds the pointer git-lfs
/// wrote (git-lfs is the oracle for the format), so the image would mount
/// the pointer's text. The build refuses it by name, exit 2, writing
/// nothing; with the LFS files checked out, `--source worktree` packages
/// the file itself.
#[test]
fn a_git_lfs_pointer_is_refused_and_the_checked_out_file_packages() {
    common::require("git-lfs");
    let r = common::git::ScratchRepo::new();
    r.git(&["lfs", "install", "--local"]);
    r.git(&["lfs", "track", "*.bin"]);
    let src = r.dir.join("settings");
    common::write_file(&src, "ok.yaml", b"ok: true\n", 0o644);
    let data: Vec<u8> = (0..3000u32).map(|i| (i * 7 % 251) as u8).collect();
    common::write_file(&src, "model.bin", &data, 0o644);
    r.git(&["add", "."]);
    r.git(&["commit", "-q", "-m", "settings"]);
    let pointer = r.git(&["cat-file", "-p", "HEAD:settings/model.bin"]);
    assert!(
        pointer.starts_with("version https://git-lfs.github.com/spec/v1\noid sha256:"),
        "{pointer}"
    );
    let oid = pointer
        .lines()
        .find_map(|l| l.strip_prefix("oid "))
        .expect("an oid line")
        .to_string();
    let tmp = TempDir::new();
    let stderr = refused(&tmp, &src, &[]);
    assert_eq!(
        stderr.lines().next().unwrap_or_default(),
        format!(
            "error: {}: is a git LFS pointer (oid {oid}, size 3000): the commit holds only this \
             pointer, so the image would mount its text, not the file",
            shown(&src.join("model.bin"))
        )
    );
    assert!(stderr.contains("--source worktree"), "{stderr}");
    // The disk holds the file (git-lfs's smudge wrote it): packaged as it is.
    let out = tmp.join("worktree");
    let v = TestCommand::new()
        .args(["build", "--source", "worktree", "--json", "--output"])
        .arg(&out)
        .arg("--path")
        .arg(&src)
        .json();
    let digest = v["layer"]["digest"].as_str().unwrap();
    let blob = out.join("blobs/sha256").join(&digest["sha256:".len()..]);
    let listed = common::run_ok(common::tool("tar").arg("-xOzf").arg(&blob).arg("model.bin"));
    assert_eq!(listed.stdout, data);
}

#[test]
fn help_shows_no_value_for_an_unset_variable() {
    // clap prints `[env: NAME=]` for an unset variable: it reads as if the
    // variable were set to the empty string.
    for command in [
        "build", "push", "inspect", "promote", "tag", "plan", "flux", "verify", "action",
    ] {
        let help = TestCommand::new()
            .args([command, "--help"])
            .env_clear()
            .ok();
        assert!(!help.contains("=]"), "{command} --help:\n{help}");
    }
    // A set variable's value is not shown either (a username, a token).
    let help = TestCommand::new()
        .args(["push", "--help"])
        .env_clear()
        .env("SETTINGS_IMAGE_USERNAME", "alice-in-help")
        .run()
        .stdout;
    assert!(help.contains("[env: SETTINGS_IMAGE_USERNAME]"), "{help}");
    assert!(!help.contains("alice-in-help"), "{help}");
}

#[test]
fn the_reading_commands_help_says_how_to_log_in_and_it_does() {
    use base64::Engine as _;
    use common::registry::{Auth, Registry, settings};
    for command in ["inspect", "verify"] {
        let help = TestCommand::new()
            .args([command, "--help"])
            .env_clear()
            .run()
            .stdout;
        for says in [
            "SETTINGS_IMAGE_USERNAME and SETTINGS_IMAGE_PASSWORD",
            "$DOCKER_CONFIG/config.json, else ~/.docker/config.json",
        ] {
            assert!(
                help.contains(says),
                "{command} --help lacks {says:?}:\n{help}"
            );
        }
    }
    // What it says works: a registry that takes one login, an image on it,
    // read by inspect with each way the help names, and not without one.
    let reg = Registry::start(Auth::Basic {
        user: "reader".into(),
        password: "s3cret-in-help-test".into(),
    });
    let env = [
        ("SETTINGS_IMAGE_USERNAME", "reader"),
        ("SETTINGS_IMAGE_PASSWORD", "s3cret-in-help-test"),
    ];
    let dir = settings(1, "help");
    let repo = format!("{}/shop", reg.host());
    let pushed = TestCommand::push(dir.path(), &repo)
        .tags(&["v1"])
        .envs(env)
        .run();
    assert_eq!(pushed.code, 0, "{}", pushed.stderr);
    let image = format!("{repo}:v1");
    let inspect = || {
        let mut c = TestCommand::new();
        c.args(["inspect", &image]);
        c
    };
    assert_eq!(inspect().run().code, 5);
    let r = inspect().envs(env).run();
    assert_eq!(r.code, 0, "{}", r.stderr);
    let docker = TempDir::new();
    let auth = base64::engine::general_purpose::STANDARD.encode("reader:s3cret-in-help-test");
    std::fs::write(
        docker.join("config.json"),
        format!(
            "{{\"auths\": {{\"{}\": {{\"auth\": \"{auth}\"}}}}}}",
            reg.host()
        ),
    )
    .unwrap();
    let r = inspect().env("DOCKER_CONFIG", docker.path()).run();
    assert_eq!(r.code, 0, "{}", r.stderr);
}
