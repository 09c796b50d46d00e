//! A newcomer's first hour: the README's quick start puts the binary on
//! PATH and says what the test command costs, its commands run as printed
//! (twice, as people re-run them), and `scripts/deps.sh` names every
//! command the tests run.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn readme() -> String {
    std::fs::read_to_string(repo().join("README.md")).unwrap()
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
    // The release image's path to the binary is the Dockerfile's.
    let dockerfile = std::fs::read_to_string(repo().join("Dockerfile")).unwrap();
    let (path, _) = dockerfile
        .split("ENTRYPOINT [\"")
        .nth(1)
        .and_then(|e| e.split_once('"'))
        .unwrap();
    assert!(prose.contains(&format!(":{path}\"")), "{prose}");
    // What the test command costs, in numbers.
    let re = regex::Regex::new(r"about (\d+)\s+minutes and leaves about (\d+) GB").unwrap();
    assert!(re.is_match(&prose.replace('\n', " ")), "{prose}");
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

#[test]
fn the_readme_builds_and_looks_at_the_result_twice() {
    for tool in ["jq", "skopeo", "umoci"] {
        common::require(tool);
    }
    // A clone's examples/shop, in a repository of its own (the timestamp
    // tag needs its history).
    let tmp = common::TempDir::new();
    let dir = tmp.path();
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
    let (quick, _) = section("Quick start");
    let build: String = quick
        .lines()
        .flat_map(|l| l.split(" && "))
        .filter(|l| l.starts_with("settings-image "))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(!build.is_empty(), "{quick}");
    let (look, _) = section("Look at the result");
    for round in 1..=2 {
        let out = bash(dir, &format!("{build}{look}"));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "round {round}:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // skopeo read the image; ls listed the unpacked files.
        assert!(stdout.contains("\"Digest\": \"sha256:"), "{stdout}");
        for f in std::fs::read_dir(repo().join("examples/shop")).unwrap() {
            let name = f.unwrap().file_name();
            assert!(
                stdout.contains(name.to_str().unwrap()),
                "{name:?} not listed:\n{stdout}"
            );
        }
    }
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
    let mut run = BTreeSet::new();
    for dir in ["tests", "tests/common", "tests/support_login"] {
        for e in std::fs::read_dir(repo().join(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "rs") {
                let text = std::fs::read_to_string(&p).unwrap();
                for c in re.captures_iter(&text) {
                    run.insert(c[1].to_string());
                }
            }
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
