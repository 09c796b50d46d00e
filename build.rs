//! Stamps the commit the binary is built from, and whether the files that
//! make the binary differed from it, into `SETTINGS_IMAGE_BUILT_FROM`
//! (`commit HEX, clean tree`, `commit HEX, dirty tree`, or `commit
//! unknown: ...`), which `--version` prints after the version.
//!
//! Where they come from, the first that answers:
//! 1. git, when this package is the top of a git checkout (a clone, a
//!    worktree, CI's checkout): `git rev-parse HEAD`, and `git status` of
//!    the paths that make the binary (`src/`, `build.rs`, `Cargo.toml`,
//!    `Cargo.lock`): an edited README does not make a binary dirty.
//! 2. `.cargo_vcs_info.json`, which `cargo package` writes into a crate
//!    tarball (what `cargo install settings-image` builds from): the commit
//!    it was packaged from and whether that checkout was dirty.
//! 3. Neither (a source archive without `.git`): `unknown`, and the build
//!    goes on.
//!
//! Why not vergen or git-version: this is two git commands and one JSON
//! field; vergen's gix backend would compile gix a second time for the
//! build script, and neither reads `.cargo_vcs_info.json`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The paths whose changes make another binary: what `git status` checks
/// and what re-runs this script.
const INPUTS: [&str; 4] = ["src", "build.rs", "Cargo.toml", "Cargo.lock"];

fn main() {
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    for p in INPUTS {
        println!("cargo:rerun-if-changed={p}");
    }
    // Cargo counts a missing path as changed, which would re-run this
    // script, and recompile the crate, on every build: only paths that exist.
    rerun_if_changed(&dir.join(".cargo_vcs_info.json"));
    let built_from = match from_git(&dir).or_else(|| from_vcs_info(&dir)) {
        Some((commit, tree)) => format!("commit {commit}, {tree} tree"),
        None => "commit unknown: built outside a git checkout".to_string(),
    };
    println!("cargo:rustc-env=SETTINGS_IMAGE_BUILT_FROM={built_from}");
}

/// `git` in `dir`; the checkout may belong to another user (CI's container
/// runs as root over the runner's checkout), which git refuses unless told.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-c")
        .arg(format!("safe.directory={}", dir.display()))
        .arg("--no-optional-locks")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim_end().to_string())
}

fn from_git(dir: &Path) -> Option<(String, String)> {
    // Only this package's own checkout: an unpacked crate inside some other
    // repository (a vendor/ folder) is not that repository's commit.
    let top = git(dir, &["rev-parse", "--show-toplevel"])?;
    if std::fs::canonicalize(&top).ok()? != std::fs::canonicalize(dir).ok()? {
        return None;
    }
    let commit = git(dir, &["rev-parse", "HEAD"]).filter(|c| is_commit_id(c))?;
    // A new commit re-runs this script: HEAD, the branch it names, and
    // packed refs (a worktree's HEAD lives in its own git dir).
    for rel in ["HEAD", "packed-refs"] {
        if let Some(p) = git(
            dir,
            &["rev-parse", "--path-format=absolute", "--git-path", rel],
        ) {
            rerun_if_changed(Path::new(&p));
        }
    }
    if let Some(branch) = git(dir, &["symbolic-ref", "-q", "HEAD"])
        && let Some(p) = git(
            dir,
            &["rev-parse", "--path-format=absolute", "--git-path", &branch],
        )
    {
        // A fresh clone keeps the branch in packed-refs, with no loose ref
        // file yet: the folder the next commit writes it into.
        let p = Path::new(&p);
        if p.exists() {
            rerun_if_changed(p);
        } else if let Some(parent) = p.parent() {
            rerun_if_changed(parent);
        }
    }
    let mut status = vec!["status", "--porcelain", "--untracked-files=normal", "--"];
    status.extend(INPUTS);
    let tree = match git(dir, &status) {
        Some(s) if s.is_empty() => "clean",
        Some(_) => "dirty",
        None => "unknown",
    };
    Some((commit, tree.to_string()))
}

/// Re-runs this script when `path` changes, if it exists (cargo takes a
/// missing path for a changed one).
fn rerun_if_changed(path: &Path) {
    if path.exists() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

/// `{"git": {"sha1": "...", "dirty": true}}` from `cargo package`
/// (`dirty` is written only when true).
fn from_vcs_info(dir: &Path) -> Option<(String, String)> {
    let text = std::fs::read_to_string(dir.join(".cargo_vcs_info.json")).ok()?;
    let info: serde_json::Value = serde_json::from_str(&text).ok()?;
    let sha1 = info["git"]["sha1"].as_str().filter(|c| is_commit_id(c))?;
    let tree = if info["git"]["dirty"] == true {
        "dirty"
    } else {
        "clean"
    };
    Some((sha1.to_string(), tree.to_string()))
}

/// A full SHA-1 commit id: nothing else reaches the version line.
fn is_commit_id(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())
}
