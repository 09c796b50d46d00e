//! The command line as a person and as a CI log see it. Progress bars are
//! drawn on stderr only when it is a terminal: checked through a real
//! pseudo-terminal (`script` from util-linux runs the binary on one), never
//! by faking `isatty`; a pipe, `CI` or `--json` get none. `-v` prints the
//! action's debug records (each registry request, each history step),
//! including the failed attempts a refused connection used to spend in
//! silence. `--version` names the commit; completions and man pages
//! describe every command.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::cmd::{CLEARED, TestCommand};
use common::registry::{Auth, Registry, random_file};

/// A git repository with the folder `cfg`: a settings file and 4 MiB of
/// random bytes, long enough to package and upload that a terminal shows
/// both.
fn big_folder(dir: &Path) {
    std::fs::create_dir_all(dir.join("cfg")).unwrap();
    std::fs::write(dir.join("cfg/app.yaml"), "a: 1\n").unwrap();
    random_file(&dir.join("cfg/blob.bin"), 4 << 20);
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["add", "-A"],
        &["commit", "-q", "-m", "settings"],
    ] {
        common::run_ok(
            common::tool("git")
                .args(["-c", "user.name=n", "-c", "user.email=n@example.com"])
                .args(args)
                .current_dir(dir),
        );
    }
}

/// Runs `settings-image ARGS` on a pseudo-terminal (`script -qec`), its
/// stdout redirected into `stdout_file`: what comes back is what the
/// terminal showed of stderr, escape codes included.
fn on_terminal(dir: &Path, args: &str, stdout_file: &Path, env: &[(&str, &str)]) -> (i32, String) {
    let docker = common::TempDir::new();
    let line = format!("'{}' {args} > '{}'", common::bin(), stdout_file.display());
    let mut cmd = common::tool("script");
    cmd.args(["-qec", &line, "/dev/null"])
        .current_dir(dir)
        .env("DOCKER_CONFIG", docker.path())
        .env("TERM", "xterm-256color")
        .env_remove("CI");
    for k in CLEARED {
        cmd.env_remove(k);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("running script");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// What a drawn bar leaves in the stream: its words and the escape codes
/// that redraw a line.
fn drew_progress(shown: &str) -> bool {
    shown.contains("packaging cfg") && shown.contains("uploading ") && shown.contains("\x1b[")
}

#[test]
fn a_terminal_shows_progress_and_a_pipe_ci_or_json_get_none() {
    let reg = Registry::start(Auth::None);
    let tmp = common::TempDir::new();
    big_folder(tmp.path());
    let push = |name: &str, json: &str| {
        format!(
            "push --path cfg --repository {}/{name} --timestamp-tag main{json}",
            reg.host()
        )
    };

    // On a terminal: the packaging and the upload drawn on stderr, the
    // report on stdout as always.
    let out = tmp.path().join("out.txt");
    let (code, shown) = on_terminal(tmp.path(), &push("tty", ""), &out, &[]);
    let report = std::fs::read_to_string(&out).unwrap();
    assert_eq!(code, 0, "{shown}\n{report}");
    assert!(
        drew_progress(&shown),
        "no progress on a terminal:\n{shown:?}"
    );
    assert!(report.starts_with("2 files, "), "{report}");
    assert!(!report.contains("\x1b["), "{report:?}");

    // The same push, stderr a pipe (a CI log): the same report, no bar.
    let piped = TestCommand::new()
        .current_dir(tmp.path())
        .args(push("piped", "").split(' '))
        .run();
    assert_eq!(piped.code, 0, "{}", piped.stderr);
    assert!(piped.stdout.starts_with("2 files, "), "{}", piped.stdout);
    assert!(
        !piped.stderr.contains("uploading ")
            && !piped.stderr.contains('\x1b')
            && !piped.stderr.contains('\r'),
        "progress in a pipe:\n{:?}",
        piped.stderr
    );

    // On a terminal under CI, or with --json: nothing drawn either.
    let (code, shown) = on_terminal(tmp.path(), &push("ci", ""), &out, &[("CI", "true")]);
    assert_eq!(code, 0, "{shown}");
    assert!(
        !shown.contains("uploading ") && !shown.contains('\x1b'),
        "{shown:?}"
    );
    let (code, shown) = on_terminal(tmp.path(), &push("json", " --json"), &out, &[]);
    assert_eq!(code, 0, "{shown}");
    assert!(
        !shown.contains("uploading ") && !shown.contains('\x1b'),
        "{shown:?}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).expect("one JSON object");
    assert_eq!(json["pushed"], true);
}

#[test]
fn verbose_shows_each_registry_request_and_history_step() {
    let reg = Registry::start(Auth::None);
    let dir = common::TempDir::new();
    big_folder(dir.path());
    let repo = format!("{}/shop", reg.host());
    let run = TestCommand::new()
        .current_dir(dir.path())
        .args([
            "-v",
            "push",
            "--path",
            "cfg",
            "--repository",
            &repo,
            "--timestamp-tag",
            "main",
        ])
        .run();
    assert_eq!(run.code, 0, "{}", run.stderr);
    let line = regex::Regex::new(r"^debug: \[ *\d+\.\d{3}s\] (history|registry): ").unwrap();
    let debug: Vec<&str> = run.stderr.lines().filter(|l| line.is_match(l)).collect();
    assert!(
        debug
            .iter()
            .any(|l| l.contains("history: the last commit that changed cfg is")),
        "{}",
        run.stderr
    );
    // Each request the registry logged, by method and path, has its line.
    let log = std::fs::read_to_string(&reg.log).unwrap();
    let manifest_puts = log.matches("\"PUT /v2/shop/manifests/").count();
    let shown_puts = debug
        .iter()
        .filter(|l| l.contains("putting manifest") && l.contains("-> 201 Created"))
        .count();
    assert!(manifest_puts >= 2, "{log}");
    assert_eq!(shown_puts, manifest_puts, "{}", run.stderr);
    // Without -v, none of it.
    let quiet = TestCommand::new()
        .current_dir(dir.path())
        .args([
            "push",
            "--path",
            "cfg",
            "--repository",
            &repo,
            "--timestamp-tag",
            "main",
        ])
        .run();
    assert_eq!(quiet.code, 0, "{}", quiet.stderr);
    assert!(!quiet.stderr.contains("debug:"), "{}", quiet.stderr);
}

#[test]
fn verbose_names_each_attempt_at_a_refused_connection() {
    // A port nothing listens on: the six attempts, each with its reason,
    // before the error (exit 4).
    let port = common::registry::free_port();
    let dir = common::TempDir::new();
    big_folder(dir.path());
    let run = TestCommand::new()
        .current_dir(dir.path())
        .args([
            "-v",
            "push",
            "--path",
            "cfg",
            "--repository",
            &format!("127.0.0.1:{port}/shop"),
        ])
        .run();
    assert_eq!(run.code, 4, "{}", run.stderr);
    let retries: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| {
            l.starts_with("debug: ") && l.contains("Connection refused") && l.contains(" of 6 in ")
        })
        .collect();
    assert_eq!(retries.len(), 5, "{}", run.stderr);
    assert!(retries[0].contains("attempt 2 of 6"), "{}", retries[0]);
}

#[test]
fn version_names_the_commit_and_whether_the_tree_was_dirty() {
    let git = |args: &[&str]| {
        let out = Command::new(common::require("git"))
            .args([
                "-c",
                &format!("safe.directory={}", common::repo().display()),
            ])
            .args(args)
            .current_dir(common::repo())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim_end().to_string()
    };
    let head = git(&["rev-parse", "HEAD"]);
    let changed = git(&[
        "status",
        "--porcelain",
        "--",
        "src",
        "build.rs",
        "Cargo.toml",
        "Cargo.lock",
    ]);
    let tree = if changed.is_empty() { "clean" } else { "dirty" };
    let version = TestCommand::new().arg("--version").ok();
    assert_eq!(
        version.trim_end(),
        format!(
            "settings-image {} (commit {head}, {tree} tree)",
            env!("CARGO_PKG_VERSION")
        )
    );
}

#[test]
fn completions_and_man_pages_describe_every_command() {
    // bash loads the completion script and completes a subcommand's flags.
    let script = TestCommand::new().args(["completions", "bash"]).ok();
    let tmp = common::TempDir::new();
    let file = tmp.path().join("settings-image.bash");
    std::fs::write(&file, &script).unwrap();
    let out = common::run_ok(common::tool("bash").arg("-c").arg(format!(
        "source '{}'; COMP_WORDS=(settings-image push --mono); COMP_CWORD=2; \
         _settings__image settings-image --mono push; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        file.display()
    )));
    let replies = String::from_utf8_lossy(&out.stdout);
    assert_eq!(replies.trim(), "--monolithic", "{replies}");
    // One man page per visible command, which man renders.
    let man = tmp.path().join("man");
    TestCommand::new().arg("man").arg(&man).ok();
    for cmd in ["build", "push", "inspect", "verify", "completions"] {
        let page = man.join(format!("settings-image-{cmd}.1"));
        let out = common::run_ok(
            common::tool("man")
                .arg("-l")
                .arg(&page)
                .env("MANWIDTH", "200")
                .env("MAN_KEEP_FORMATTING", "0"),
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains(&format!("settings-image-{cmd}")), "{text}");
    }
    let push = common::run_ok(
        common::tool("man")
            .arg("-l")
            .arg(man.join("settings-image-push.1")),
    );
    assert!(String::from_utf8_lossy(&push.stdout).contains("--monolithic"));
}
