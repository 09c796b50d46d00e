//! Large files pushed with memory bounds: a commit that holds one very
//! large file is packaged as a stream (`push --source commit`), whatever
//! git stores it as (a loose object, an object stored whole in a pack, a
//! delta). Peak memory is GNU time's (`%M`) for the binary. The bound is
//! generous (64 MiB where the file is 256 MiB): it catches a whole-file
//! read, not noise. It is a memory bound, not a time limit. The mirror's
//! side (the controller's fetch and publish, hostile git servers) is
//! tested beside it, in src/history/mirror/large_files_tests.rs.
//!
//! The oracles: the git CLI for what the commit holds, GNU gzip and tar
//! for what the pushed layer holds.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::cmd::{Run, TestCommand};
use common::git::ScratchRepo;
use common::registry::{Auth, Registry};
use common::{large_text as text, require, run_ok, sha256_of};
use serde_json::Value;

/// A memory bound that a whole read of a 64 MiB (or larger) file passes:
/// the debug binary packaging a small folder peaks near 30 MiB.
const BOUND_KIB: u64 = 64 * 1024;

/// `settings-image push --json` of `folder` (a checkout's path) at its
/// commit, under GNU time.
fn push_timed(cwd: &Path, folder: &str, repository: &str) -> (Run, u64) {
    TestCommand::push_json(folder, repository)
        .current_dir(cwd)
        .args(["--source", "commit", "--tag", "big"])
        .peak_rss()
}

/// The sha256 of `file` inside the gzip-compressed tar the registry holds
/// as `repository`'s (HOST/NAME) first layer under `tag`, read by curl,
/// GNU gzip and GNU tar.
fn pushed_file_sha256(reg: &Registry, name: &str, tag: &str, file: &str) -> String {
    let base = format!("http://{}/v2/{name}", reg.host());
    let (code, body) = common::registry::curl(
        &format!("{base}/manifests/{tag}"),
        Some("application/vnd.oci.image.manifest.v1+json"),
    );
    assert_eq!(code, 200, "{body}");
    let m: Value = serde_json::from_str(&body).expect("a manifest");
    let layer = m["layers"][0]["digest"]
        .as_str()
        .expect("a layer")
        .to_string();
    sha256_of(&format!(
        "curl -sf '{base}/blobs/{layer}' | gzip -dc | tar -xOf - '{file}'"
    ))
}

#[test]
fn a_large_loose_file_is_pushed_as_a_stream() {
    // 256 MiB of zeros: 256 KiB in git (a loose object: what `git add`
    // writes), 256 MiB read whole before.
    let reg = Registry::start(Auth::None);
    let r = ScratchRepo::new();
    let cfg = r.dir.join("cfg");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(cfg.join("app.yaml"), "port: 8080\n").unwrap();
    let size: u64 = 256 << 20;
    run_ok(Command::new(require("sh")).args([
        "-c",
        &format!(
            "head -c {size} /dev/zero > '{}'",
            cfg.join("big.bin").display()
        ),
    ]));
    r.git(&["add", "-A"]);
    r.git(&["commit", "-q", "-m", "a large file"]);
    let blob = r.git(&["rev-parse", "HEAD:cfg/big.bin"]);
    let loose = r.dir.join(".git/objects").join(&blob[..2]).join(&blob[2..]);
    assert!(loose.is_file(), "git stored the file as a loose object");
    let repository = format!("{}/team/big", reg.host());
    let (run, kib) = push_timed(&r.dir, "cfg", &repository);
    assert_eq!(run.code, 0, "{}", run.stderr);
    eprintln!("push --source commit: peak {kib} KiB");
    assert!(
        kib < BOUND_KIB,
        "push --source commit of a {} MiB file peaked at {kib} KiB",
        size >> 20
    );
    let report: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(report["size"], size + "port: 8080\n".len() as u64);
    let want = sha256_of(&format!(
        "git -C '{}' cat-file blob {blob}",
        r.dir.display()
    ));
    assert_eq!(pushed_file_sha256(&reg, "team/big", "big", "big.bin"), want);
}

#[test]
fn a_large_file_packed_whole_or_as_a_delta_is_pushed_as_a_stream() {
    // Two versions of a 64 MiB file, repacked: git keeps one whole in the
    // pack and stores the other as a delta against it (git verify-pack
    // says which). Both commits push with flat memory and their content.
    let reg = Registry::start(Auth::None);
    let r = ScratchRepo::new();
    let cfg = r.dir.join("cfg");
    std::fs::create_dir_all(&cfg).unwrap();
    let size = 64 << 20;
    std::fs::write(cfg.join("big.txt"), text(size, 1000, "first")).unwrap();
    r.git(&["add", "-A"]);
    r.git(&["commit", "-q", "-m", "first"]);
    let first = r.git(&["rev-parse", "HEAD"]);
    std::fs::write(cfg.join("big.txt"), text(size, 2_000_000, "second")).unwrap();
    r.git(&["commit", "-q", "-am", "second"]);
    let second = r.git(&["rev-parse", "HEAD"]);
    r.git(&[
        "repack",
        "-q",
        "-a",
        "-d",
        "-f",
        "--window=10",
        "--depth=50",
    ]);
    let blobs: Vec<String> = [&first, &second]
        .iter()
        .map(|c| r.git(&["rev-parse", &format!("{c}:cfg/big.txt")]))
        .collect();
    let packs = r.git(&["count-objects", "-v"]);
    assert!(
        packs.contains("count: 0"),
        "no loose objects left:\n{packs}"
    );
    // verify-pack -v: "ID TYPE SIZE SIZE-IN-PACK OFFSET [DEPTH BASE]".
    let idx = std::fs::read_dir(r.dir.join(".git/objects/pack"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "idx"))
        .expect("a pack index");
    let listing = r.git(&["verify-pack", "-v", idx.to_str().unwrap()]);
    let stored: Vec<usize> = blobs
        .iter()
        .map(|b| {
            listing
                .lines()
                .find(|l| l.starts_with(b.as_str()))
                .map(|l| l.split_whitespace().count())
                .unwrap_or_else(|| panic!("{b} is not in the pack:\n{listing}"))
        })
        .collect();
    let mut forms = stored.clone();
    forms.sort_unstable();
    assert_eq!(
        forms,
        [5, 7],
        "one whole (5 fields), one delta (7): {listing}"
    );
    for (commit, blob) in [&first, &second].iter().zip(&blobs) {
        let wt = r.dir.parent().unwrap().join(format!("wt-{}", &commit[..7]));
        r.git(&[
            "worktree",
            "add",
            "-q",
            "--detach",
            wt.to_str().unwrap(),
            commit,
        ]);
        let name = format!("team/big-{}", &commit[..7]);
        let (run, kib) = push_timed(&wt, "cfg", &format!("{}/{name}", reg.host()));
        assert_eq!(run.code, 0, "{}", run.stderr);
        eprintln!("push of {commit}: peak {kib} KiB");
        assert!(
            kib < BOUND_KIB,
            "push of {commit} (a 64 MiB file stored as {} fields) peaked at {kib} KiB",
            stored[if *commit == &first { 0 } else { 1 }]
        );
        let want = sha256_of(&format!(
            "git -C '{}' cat-file blob {blob}",
            r.dir.display()
        ));
        assert_eq!(pushed_file_sha256(&reg, &name, "big", "big.txt"), want);
    }
}
