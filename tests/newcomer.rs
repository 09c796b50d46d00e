//! A newcomer's first hour: the README's quick start puts the binary on
//! PATH, its build runs as printed (twice, as people re-run them), the
//! five-minute walkthrough runs as pasted against a real registry and
//! podman, every documented workflow checks out the history, CONTRIBUTING.md
//! says what the test command costs, and `scripts/deps.sh` names every
//! command the tests run.

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn readme() -> String {
    std::fs::read_to_string(repo().join("README.md")).unwrap()
}

/// The text of `## {section}` up to the next `## ` heading.
fn section_text(section: &str) -> String {
    let text = readme();
    let rest = text
        .split(&format!("\n## {section}\n"))
        .nth(1)
        .unwrap_or_else(|| panic!("the README has no section {section:?}"));
    rest.split("\n## ").next().unwrap().to_string()
}

/// Every `sh` block of `text`, in order.
fn sh_blocks(text: &str) -> Vec<String> {
    text.split("```sh\n")
        .skip(1)
        .map(|b| b.split("```").next().unwrap().to_string())
        .collect()
}

/// The first `sh` block after the heading `## {section}`, and the prose
/// between the block and the next heading.
fn section(section: &str) -> (String, String) {
    let text = readme();
    let rest = text
        .split(&format!("\n## {section}\n"))
        .nth(1)
        .unwrap_or_else(|| panic!("the README has no section {section:?}"));
    let rest = rest.split("\n## ").next().unwrap();
    let block = rest
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .unwrap_or_else(|| panic!("{section:?} has no sh block"))
        .to_string();
    let prose = rest.rsplit("```").next().unwrap().to_string();
    (block, prose)
}

#[test]
fn the_quick_start_puts_the_binary_on_path_and_says_what_the_tests_cost() {
    let (block, prose) = section("Quick start");
    // The commands in order: a line may chain several with `&&`.
    let commands: Vec<&str> = block
        .lines()
        .flat_map(|l| l.split(" && "))
        .map(str::trim)
        .collect();
    let install = commands
        .iter()
        .position(|c| c.starts_with("cargo install --path . "))
        .unwrap_or_else(|| panic!("the quick start does not install the binary:\n{block}"));
    let first_use = commands
        .iter()
        .position(|c| c.starts_with("settings-image "))
        .expect("the quick start runs settings-image");
    assert!(install < first_use, "{block}");
    // The first two lines a newcomer copies: the main job on the bundled
    // example into an OCI layout (no registry), then the test command.
    let lines: Vec<&str> = block.lines().collect();
    assert!(
        lines[0]
            .split(" && ")
            .any(|c| c.starts_with("settings-image build --path examples/")
                && c.contains(" --output ")),
        "the first line does not build the example into a layout:\n{block}"
    );
    assert_eq!(
        lines.get(1).copied(),
        Some("bash scripts/test.sh"),
        "{block}"
    );
    // What `cargo install --path .` installs: the package's binaries, as
    // cargo itself lists them.
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let bins: Vec<&str> = meta["packages"][0]["targets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["kind"].as_array().unwrap().iter().any(|k| k == "bin"))
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(bins, ["settings-image"]);
    assert!(prose.contains("~/.cargo/bin/settings-image"), "{prose}");
    // Install: the release image's path to the binary is the Dockerfile's.
    let install = section_text("Install");
    let dockerfile = std::fs::read_to_string(repo().join("Dockerfile")).unwrap();
    let (path, _) = dockerfile
        .split("ENTRYPOINT [\"")
        .nth(1)
        .and_then(|e| e.split_once('"'))
        .unwrap();
    assert!(install.contains(&format!(":{path}\"")), "{install}");
    // What the test command costs, in numbers, where contributors look.
    let contributing = std::fs::read_to_string(repo().join("CONTRIBUTING.md")).unwrap();
    assert!(
        prose.contains("CONTRIBUTING.md"),
        "the quick start does not say where the test command is explained:\n{prose}"
    );
    let re = regex::Regex::new(r"about (\d+)\s+minutes and leaves about (\d+) GB").unwrap();
    assert!(
        re.is_match(&contributing.replace('\n', " ")),
        "CONTRIBUTING.md does not say what the test command costs"
    );
}

/// Runs `script` with bash in `dir`, the binary under test first on PATH.
fn bash(dir: &Path, script: &str) -> std::process::Output {
    let bin_dir = Path::new(common::bin()).parent().unwrap().to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new(common::require("bash"))
        .args(["-euo", "pipefail", "-c", script])
        .current_dir(dir)
        .env("PATH", path)
        .output()
        .unwrap()
}

/// A clone's examples/shop in a repository of its own (the timestamp tag
/// needs its history).
fn example_repo(dir: &Path) {
    common::copy_tree(&repo().join("examples/shop"), &dir.join("examples/shop"));
    let git = |args: &[&str]| {
        let out = Command::new(common::require("git"))
            .args(["-c", "user.name=n", "-c", "user.email=n@example.com"])
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    git(&["init", "-q", "-b", "main"]);
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "shop"]);
}

#[test]
fn the_quick_start_builds_the_example_twice() {
    common::require("skopeo");
    let tmp = common::TempDir::new();
    let dir = tmp.path();
    example_repo(dir);
    let (quick, _) = section("Quick start");
    let build: String = quick
        .lines()
        .flat_map(|l| l.split(" && "))
        .filter(|l| l.starts_with("settings-image "))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(!build.is_empty(), "{quick}");
    let mut printed = Vec::new();
    for round in 1..=2 {
        let out = bash(dir, &build);
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            out.status.success(),
            "round {round}:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        printed.push(stdout);
    }
    // The same digest twice, and skopeo reads the layout under the tag
    // git's history gives (the commit's committer time and id).
    let digest_line = |s: &str| {
        s.lines()
            .find(|l| l.starts_with("digest "))
            .map(str::to_string)
    };
    assert!(digest_line(&printed[0]).is_some(), "{}", printed[0]);
    assert_eq!(digest_line(&printed[0]), digest_line(&printed[1]));
    let log = Command::new("git")
        .args(["log", "-1", "--format=%ct-%h", "--abbrev=7"])
        .current_dir(dir)
        .output()
        .unwrap();
    let tag = format!("main-{}", String::from_utf8_lossy(&log.stdout).trim());
    let layout = quick
        .split(" --output ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap();
    let inspect = common::stdout_of(
        common::tool("skopeo")
            .arg("inspect")
            .arg(format!("oci:{}:{tag}", dir.join(layout).display())),
    );
    let digest: serde_json::Value = serde_json::from_str(&inspect).unwrap();
    let digest = digest["Digest"].as_str().unwrap();
    assert!(
        printed[0].contains(digest),
        "{digest} not in:\n{}",
        printed[0]
    );
}

/// The README's walkthrough, pasted block by block into one shell as a
/// user would, with the registry it starts moved to a free port and the
/// two things a sandbox has no network for given locally: podman's
/// configuration (a private store, runc) and the busybox image.
#[test]
fn the_five_minute_walkthrough_runs_as_pasted() {
    let section = section_text("Five minutes: from a folder to a mounted image");
    let blocks = sh_blocks(&section);
    assert_eq!(blocks.len(), 7, "the walkthrough's steps moved:\n{section}");
    // The registry step starts Debian's docker-registry itself.
    assert!(blocks[1].contains("docker-registry serve"), "{}", blocks[1]);
    common::require("docker-registry");
    let tmp = common::TempDir::new();
    let podman = common::Podman::new(tmp.path());
    // docker.io/library/busybox, made here: busybox with `cat` on PATH.
    let rootfs = tmp.path().join("busybox-rootfs");
    std::fs::create_dir_all(rootfs.join("bin")).unwrap();
    std::fs::copy(common::require("busybox"), rootfs.join("bin/busybox")).unwrap();
    std::os::unix::fs::symlink("busybox", rootfs.join("bin/cat")).unwrap();
    let tar = tmp.path().join("busybox.tar");
    common::run_ok(
        common::tool("tar")
            .arg("-C")
            .arg(&rootfs)
            .arg("-cf")
            .arg(&tar)
            .arg("."),
    );
    common::run_ok(
        podman
            .cmd()
            .arg("import")
            .arg(&tar)
            .arg("localhost/busybox:test"),
    );
    let port = common::registry::free_port().to_string();
    // `podman` in the pasted lines is the test's private podman.
    let podman_fn = {
        let cmd = podman.cmd();
        let mut words = vec![cmd.get_program().to_string_lossy().to_string()];
        words.extend(cmd.get_args().map(|a| format!("'{}'", a.to_string_lossy())));
        let envs: Vec<String> = cmd
            .get_envs()
            .filter_map(|(k, v)| {
                Some(format!(
                    "{}='{}'",
                    k.to_string_lossy(),
                    v?.to_string_lossy()
                ))
            })
            .collect();
        format!(
            "podman() {{ env {} {} \"$@\"; }}\n",
            envs.join(" "),
            words.join(" ")
        )
    };
    let pasted: String = blocks
        .iter()
        .map(|b| {
            b.replace(":5000", &format!(":{port}"))
                .replace("docker.io/library/busybox", "localhost/busybox:test")
        })
        .collect::<Vec<_>>()
        .join("");
    let script = format!(
        "trap 'kill $(jobs -p) 2>/dev/null' EXIT\n{podman_fn}\
         wait_for() {{ for _ in $(seq 100); do (echo > /dev/tcp/127.0.0.1/{port}) 2>/dev/null && return; sleep 0.1; done; }}\n\
         {pasted}"
    );
    // The registry starts in the background: the push after it waits
    // until it listens (a user types slower).
    let script = script.replacen(
        "registry.log 2>&1 &\n",
        "registry.log 2>&1 &\nwait_for\n",
        1,
    );
    let out = bash(tmp.path(), &script);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{script}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let demo = tmp.path().join("demo");
    let tag = {
        let log = Command::new("git")
            .args(["log", "-1", "--format=%ct-%h", "--abbrev=7"])
            .current_dir(&demo)
            .output()
            .unwrap();
        format!("main-{}", String::from_utf8_lossy(&log.stdout).trim())
    };
    // Pushed under the tag git's history gives; inspect named the commit;
    // verify rebuilt it; flux printed the policy; podman read the file.
    assert!(
        stdout.contains(&format!("pushed localhost:{port}/shop:{tag}@sha256:")),
        "{stdout}"
    );
    let commit = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(&demo)
        .output()
        .unwrap();
    let commit = String::from_utf8_lossy(&commit.stdout).trim().to_string();
    assert!(stdout.matches(&commit).count() >= 2, "{stdout}");
    assert!(stdout.contains("kind: ImagePolicy"), "{stdout}");
    let app = std::fs::read_to_string(demo.join("configs/shop/app.yaml")).unwrap();
    assert!(
        stdout.ends_with(&app),
        "podman did not read app.yaml back:\n{stdout}"
    );
}

#[test]
fn deps_sh_names_every_command_the_tests_run() {
    let deps = std::fs::read_to_string(repo().join("scripts/deps.sh")).unwrap();
    let list = deps
        .split("\ncommands=(\n")
        .nth(1)
        .and_then(|r| r.split("\n)\n").next())
        .expect("scripts/deps.sh has a commands=( ... ) list");
    let listed: BTreeSet<&str> = list
        .lines()
        .flat_map(|l| l.split('#').next().unwrap().split_whitespace())
        .collect();
    let re = regex::Regex::new(r#"(?:Command::new|require|tool|find_tool)\(\s*"([^"]+)""#).unwrap();
    // Every Rust file of tests/ and every unit test file of src/ (the
    // unit tests that run tools: src/**/*_tests.rs).
    fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                rust_files(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    rust_files(&repo().join("tests"), &mut files);
    let mut src = Vec::new();
    rust_files(&repo().join("src"), &mut src);
    files.extend(
        src.into_iter()
            .filter(|p| p.to_string_lossy().ends_with("_tests.rs")),
    );
    let mut run = BTreeSet::new();
    for p in files {
        let text = std::fs::read_to_string(&p).unwrap();
        for c in re.captures_iter(&text) {
            run.insert(c[1].to_string());
        }
    }
    assert!(run.len() > 20, "{run:?}");
    let missing: Vec<&String> = run
        .iter()
        .filter(|t| !listed.contains(t.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "the tests run {missing:?}, which scripts/deps.sh does not install and check"
    );
    // And each is here (deps.sh checks the same after installing).
    for c in &listed {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {c}")])
            .output()
            .unwrap();
        assert!(
            found.status.success(),
            "{c} is not on PATH: run scripts/deps.sh"
        );
    }
}

#[test]
fn the_flux_commands_write_their_files_in_a_fresh_cluster_checkout() {
    // Pasted into an empty checkout (no clusters/prod yet), as printed:
    // the README's and docs/flux.md's (its first sh block after "## 2.").
    let (readme_block, _) = section("With Flux");
    let flux_doc = std::fs::read_to_string(repo().join("docs/flux.md")).unwrap();
    let flux_block = flux_doc
        .split("\n## 2. The cluster repository\n")
        .nth(1)
        .and_then(|rest| rest.split("```sh\n").nth(1))
        .and_then(|b| b.split("```").next())
        .expect("docs/flux.md's section 2 has an sh block")
        .to_string();
    for (block, prose) in [(readme_block, readme()), (flux_block, flux_doc.clone())] {
        let tmp = common::TempDir::new();
        let out = bash(tmp.path(), &block);
        assert!(
            out.status.success(),
            "{block}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // The files it printed, each named in the doc, hold the three objects.
        let mut kinds = BTreeSet::new();
        for path in String::from_utf8_lossy(&out.stdout).lines() {
            let file = path
                .strip_prefix("clusters/prod/")
                .unwrap_or_else(|| panic!("{path}"));
            assert!(
                prose.contains(&format!("`{file}`")) || prose.contains(&format!("`{path}`")),
                "the doc does not name {path}"
            );
            let text = std::fs::read_to_string(tmp.path().join(path)).unwrap();
            kinds.extend(
                text.lines()
                    .filter_map(|l| l.strip_prefix("kind: "))
                    .map(str::to_string),
            );
        }
        assert_eq!(
            kinds,
            BTreeSet::from(
                ["ImagePolicy", "ImageRepository", "ImageUpdateAutomation"].map(String::from)
            ),
            "{block}"
        );
    }
}

/// Every documented workflow step that publishes with the action follows
/// a checkout with the whole history (`fetch-depth: 0`): the timestamp tag
/// is the last commit that changed the folder, which a one-commit clone
/// does not hold. (`mode: verify` checks out the settings repository
/// under `path`, with its own `fetch-depth`, and promote needs none.)
#[test]
fn every_documented_publish_step_checks_out_the_history() {
    let mut files = vec![repo().join("README.md")];
    for e in std::fs::read_dir(repo().join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            files.push(p);
        }
    }
    let mut checked = 0;
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for block in text.split("```yaml\n").skip(1) {
            let block = block.split("```").next().unwrap();
            let steps: Vec<&str> = block.split("\n      - ").collect();
            for (i, step) in steps.iter().enumerate() {
                if !step.starts_with("uses: ConfigButler/settings-image@")
                    || step.contains("mode: verify")
                {
                    continue;
                }
                checked += 1;
                let checkout = steps[..i]
                    .iter()
                    .rev()
                    .find(|s| s.starts_with("uses: actions/checkout@"))
                    .unwrap_or_else(|| {
                        panic!(
                            "{}: a publish step without a checkout:\n{block}",
                            f.display()
                        )
                    });
                assert!(
                    checkout.contains("fetch-depth: 0"),
                    "{}: the checkout before a publish step fetches one commit (add `with: fetch-depth: 0`):\n{block}",
                    f.display()
                );
            }
        }
    }
    assert!(
        checked > 10,
        "only {checked} publish steps found: the pattern no longer matches the docs"
    );
}
