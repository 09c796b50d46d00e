//! The mirror and large files, with memory bounds (once the mirror's half
//! of tests/large_files.rs): a commit that holds one very large file is
//! fetched and packaged as a stream, as the controller does, whatever git
//! stores it as; a git server whose pack never ends, or claims huge sizes,
//! or whose ref advertisement or negotiation never ends, gets a clear
//! error at once. Peak memory is GNU time's (`%M`) for this
//! test binary run again as a child process (only the test asked for, with
//! `LARGE_FILES_CHILD` set: it fetches and builds, as the controller does,
//! and exits). The bounds are generous (64 MiB where the file is 256 MiB,
//! or the stream endless): they catch a whole-file read, not noise. They
//! are memory bounds, not time limits.
//!
//! The oracles: the git CLI for what the commit holds and what the
//! mirror's packs are (`git fsck`, `git verify-pack`), GNU gzip and tar for
//! what the written layer holds.

use crate::testkit as common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;

use common::cmd::Run;
use common::git_server::{GitServer, Options as GitOptions, Upstream};
use common::registry::peak_rss;
use common::{TempDir, large_text as text, repo, require, run_ok, sha256_of};
use serde_json::Value;

/// A memory bound that a whole read of a 64 MiB (or larger) file passes.
const BOUND_KIB: u64 = 64 * 1024;

// ------------------------------------------------------------ the mirror

/// What the child process fetches (and builds), from `LARGE_FILES_CHILD`.
const CHILD: &str = "LARGE_FILES_CHILD";

/// In the child process: fetches the mirror (and builds the folder into
/// an OCI layout when asked) as the controller does, prints the fetch's
/// outcome or the error with its hint, and exits 0 or 1. In the parent
/// (no `LARGE_FILES_CHILD`): returns.
fn child_fetch_if_asked() {
    let Ok(spec) = std::env::var(CHILD) else {
        return;
    };
    use crate::history::SourceMode;
    use crate::history::mirror::{Limits, Mirrors, Remote};
    use crate::pipeline::{RunReport, Spec};
    use crate::request::{Forward, Request, Target};
    let spec: Value = serde_json::from_str(&spec).expect("the child's spec");
    let s = |k: &str| spec[k].as_str().unwrap_or_default().to_string();
    let mut limits = Limits::default();
    if let Some(b) = spec["max_fetch_bytes"].as_u64() {
        limits.max_fetch_bytes = b;
    }
    if let Some(b) = spec["max_object_bytes"].as_u64() {
        limits.max_object_bytes = b;
    }
    if let Some(b) = spec["max_ref_bytes"].as_u64() {
        limits.max_ref_bytes = b;
    }
    if let Some(n) = spec["max_refs"].as_u64() {
        limits.max_refs = n;
    }
    let work = || -> crate::Result<String> {
        let mirrors = Mirrors::new(s("cache"), limits)?;
        let mirror = mirrors.fetch(
            &Remote::new(&s("url"))?,
            "main",
            None,
            &AtomicBool::new(false),
        )?;
        let mut line = format!("{:?}", mirror.fetched());
        if !s("folder").is_empty() {
            let report = crate::pipeline::run(
                &Spec::one(Request {
                    path: PathBuf::from(s("folder")),
                    tags: vec!["big".into()],
                    target: Target::Layout(PathBuf::from(s("layout"))),
                    source: SourceMode::Commit,
                    timestamp_tag: Some("main".into()),
                    github: None,
                    source_url: crate::history::SourceUrl::Origin,
                    ci: Default::default(),
                    forward: Forward::default(),
                    provenance: false,
                    revision: None,
                    extra: Default::default(),
                })
                .in_mirror(&mirror),
            )
            .and_then(RunReport::into_report)?;
            line.push_str(&format!(" layer {}", report.layer.digest));
        }
        Ok(line)
    };
    match work() {
        Ok(line) => {
            println!("{line}");
            std::process::exit(0);
        }
        Err(e) => {
            eprintln!("error: {e}");
            if let Some(h) = e.hint() {
                eprintln!("hint: {h}");
            }
            std::process::exit(1);
        }
    }
}

/// The child's address space: a fetch whose memory ran away (the bug
/// these tests are about) fails there, instead of taking the machine's.
const CHILD_ADDRESS_SPACE_KIB: u64 = 4 << 20;

/// Runs this test binary again for the test `name` (of this module)
/// alone with `spec` in `LARGE_FILES_CHILD`, under GNU time, its address
/// space limited.
fn in_child(name: &str, spec: Value) -> (Run, u64) {
    let exe = std::env::current_exe().expect("the test binary");
    // The harness names a test by its path below the crate root.
    let module = module_path!().split_once("::").map_or("", |(_, m)| m);
    let name = format!("{module}::{name}");
    let mut cmd = Command::new(require("sh"));
    cmd.args([
        "-c",
        &format!("ulimit -v {CHILD_ADDRESS_SPACE_KIB} && exec \"$0\" \"$@\""),
    ])
    .arg(exe)
    .args([name.as_str(), "--exact", "--nocapture", "--test-threads=1"])
    .env(CHILD, spec.to_string());
    peak_rss(cmd)
}

#[test]
fn the_mirror_fetches_and_builds_a_large_file_as_a_stream() {
    child_fetch_if_asked();
    let up = Upstream::new();
    let cfg = up.work.join("configs/shop");
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
    up.git(&["add", "-A"]);
    up.git(&["commit", "-q", "-m", "a large file"]);
    up.push();
    let server = GitServer::start(&up.root, GitOptions::default());
    let tmp = TempDir::new();
    let cache = tmp.join("cache");
    let layout = tmp.join("layout");
    let (run, kib) = in_child(
        "the_mirror_fetches_and_builds_a_large_file_as_a_stream",
        serde_json::json!({
            "cache": cache,
            "url": server.url("settings.git"),
            "folder": "configs/shop",
            "layout": layout,
            // Above the default 100 MiB, as --fetch-max-object-bytes raises it.
            "max_object_bytes": 512u64 << 20,
        }),
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    eprintln!("the mirror's fetch and build: peak {kib} KiB");
    assert!(
        kib < BOUND_KIB,
        "the mirror's fetch and build of a {} MiB file peaked at {kib} KiB",
        size >> 20
    );
    // The mirror is a repository git reads: every object, every pack.
    let mirror = std::fs::read_dir(&cache)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.is_dir())
        .expect("the mirror");
    run_ok(
        Command::new(require("git"))
            .arg("-C")
            .arg(&mirror)
            .args(["fsck", "--full", "--strict"]),
    );
    let blob = up.git(&["rev-parse", "HEAD:configs/shop/big.bin"]);
    for e in std::fs::read_dir(mirror.join("objects/pack"))
        .unwrap()
        .flatten()
    {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "idx") {
            run_ok(
                Command::new("git")
                    .arg("-C")
                    .arg(&mirror)
                    .arg("verify-pack")
                    .arg(&p),
            );
        }
    }
    let have = run_ok(
        Command::new("git")
            .arg("-C")
            .arg(&mirror)
            .args(["cat-file", "-s", &blob]),
    );
    assert_eq!(
        String::from_utf8_lossy(&have.stdout).trim(),
        size.to_string()
    );
    // The layer written holds the file, as GNU tar reads it.
    let digest = run
        .stdout
        .split("layer sha256:")
        .nth(1)
        .and_then(|d| d.split_whitespace().next())
        .unwrap_or_else(|| panic!("no layer in {}", run.stdout))
        .to_string();
    let blob_file = layout.join("blobs/sha256").join(&digest);
    let got = sha256_of(&format!(
        "gzip -dc '{}' | tar -xOf - big.bin",
        blob_file.display()
    ));
    let want = sha256_of(&format!("head -c {size} /dev/zero"));
    assert_eq!(got, want);
}

/// `git fsck --full --strict` of the repository at `git_dir`, and the
/// sha256 of `path` in each of `commits` there.
fn fsck_and_contents(git_dir: &Path, commits: &[String], path: &str) -> Vec<String> {
    run_ok(
        Command::new(require("git"))
            .arg("-C")
            .arg(git_dir)
            .args(["fsck", "--full", "--strict"]),
    );
    commits
        .iter()
        .map(|c| {
            sha256_of(&format!(
                "git -C '{}' cat-file blob {c}:{path}",
                git_dir.display()
            ))
        })
        .collect()
}

/// `git verify-pack -v` of every pack of the repository at `git_dir`.
fn verify_packs(git_dir: &Path) -> String {
    let mut all = String::new();
    for e in std::fs::read_dir(git_dir.join("objects/pack"))
        .unwrap()
        .flatten()
    {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "idx") {
            let out = run_ok(
                Command::new(require("git"))
                    .arg("-C")
                    .arg(git_dir)
                    .args(["verify-pack", "-v"])
                    .arg(&p),
            );
            all.push_str(&String::from_utf8_lossy(&out.stdout));
        }
    }
    all
}

#[test]
fn a_large_file_and_its_deltas_arrive_intact_in_the_mirror() {
    // The server's pack holds a 20 MiB file whole and its next version as
    // a delta against it (the bare repository repacked), among commits and
    // trees that are deltas too: the large object goes into a pack of its
    // own, the rest is rewritten around it (a delta against it then names
    // it by id). A later fetch gets a thin pack whose delta's base is that
    // large object.
    use crate::history::mirror::{Limits, Mirrors, Remote};
    let up = Upstream::new();
    let size = 20 << 20;
    let mut commits = Vec::new();
    for (i, line) in [1000, 200_000, 400_000].iter().enumerate() {
        std::fs::create_dir_all(up.work.join("configs/big")).unwrap();
        std::fs::write(
            up.work.join("configs/big/big.txt"),
            text(size, *line, &format!("version {i}")),
        )
        .unwrap();
        std::fs::create_dir_all(up.work.join("configs/small")).unwrap();
        for j in 0..20 {
            std::fs::write(
                up.work.join(format!("configs/small/f{j:02}.yaml")),
                format!("value: {}\n", i * 100 + j),
            )
            .unwrap();
        }
        up.git(&["add", "-A"]);
        up.git(&["commit", "-q", "-m", &format!("version {i}")]);
        commits.push(up.head());
        if i == 1 {
            // The first two versions, served from one repacked pack.
            up.push();
            run_ok(common::git::git_cmd(up.home(), &up.bare).args([
                "repack",
                "-q",
                "-a",
                "-d",
                "-f",
                "--window=10",
                "--depth=50",
            ]));
        }
    }
    let want = fsck_and_contents(&up.bare, &commits[..2], "configs/big/big.txt");
    // The served pack: one version whole, the other a delta against it.
    let listing = verify_packs(&up.bare);
    let forms: Vec<usize> = commits[..2]
        .iter()
        .map(|c| {
            let id = up.git(&["rev-parse", &format!("{c}:configs/big/big.txt")]);
            listing
                .lines()
                .find(|l| l.starts_with(&id))
                .map(|l| l.split_whitespace().count())
                .unwrap_or_else(|| panic!("{id} not in:\n{listing}"))
        })
        .collect();
    assert!(
        forms.contains(&5) && forms.contains(&7),
        "{forms:?}\n{listing}"
    );
    let server = GitServer::start(&up.root, GitOptions::default());
    let tmp = TempDir::new();
    let mirrors = Mirrors::new(tmp.join("cache"), Limits::default()).unwrap();
    let remote = Remote::new(&server.url("settings.git")).unwrap();
    let no = AtomicBool::new(false);
    let first = mirrors.fetch(&remote, "main", None, &no).unwrap();
    let dir = first.dir().to_path_buf();
    assert_eq!(first.head(), commits[1]);
    let all = |git_dir: &Path| {
        let out = run_ok(Command::new("git").arg("-C").arg(git_dir).args([
            "rev-list",
            "--objects",
            "main",
        ]));
        String::from_utf8_lossy(&out.stdout).lines().count() as u64
    };
    assert_eq!(first.fetched().objects, all(&up.bare));
    assert_eq!(
        fsck_and_contents(&dir, &commits[..2], "configs/big/big.txt"),
        want
    );
    // A pack of its own holds the large object alone.
    let singles = verify_packs(&dir)
        .lines()
        .filter(|l| l.contains("non delta: 1 object"))
        .count();
    assert_eq!(singles, 1, "{}", verify_packs(&dir));
    drop(first);
    // The third version: a thin pack, its delta against a large object the
    // mirror holds.
    up.push();
    let want = fsck_and_contents(&up.bare, &commits, "configs/big/big.txt");
    let second = mirrors.fetch(&remote, "main", None, &no).unwrap();
    assert_eq!(second.head(), commits[2]);
    assert!(!second.fetched().cloned, "{:?}", second.fetched());
    assert_eq!(
        fsck_and_contents(&dir, &commits, "configs/big/big.txt"),
        want
    );
}

/// A hostile server (`tests/support_git/hostile_pack.py --mode MODE`).
struct Hostile {
    child: std::process::Child,
    port: u16,
    log: PathBuf,
    _tmp: TempDir,
}

impl Hostile {
    fn start(mode: &str) -> Hostile {
        use std::io::BufRead as _;
        let tmp = TempDir::new();
        let log = tmp.join("log");
        let mut child = Command::new(require("python3"))
            .arg(repo().join("tests/support_git/hostile_pack.py"))
            .args(["--mode", mode, "--log"])
            .arg(&log)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("starting hostile_pack.py");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("the port");
        let port = line.trim().parse().expect("a port");
        Hostile {
            child,
            port,
            log,
            _tmp: tmp,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/settings.git", self.port)
    }

    /// Bytes of the answers to `command` (`fetch`, `ls-refs`, `info/refs`)
    /// written before the client hung up, once the server logged them.
    fn bytes_of(&self, command: &str) -> u64 {
        common::eventually(
            std::time::Duration::from_secs(60),
            std::time::Duration::from_millis(20),
            || {
                let logged: Vec<u64> = std::fs::read_to_string(&self.log)
                    .unwrap_or_default()
                    .lines()
                    .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                    .filter(|v| v["command"] == command)
                    .map(|v| v["bytes"].as_u64().unwrap_or_default())
                    .collect();
                if logged.is_empty() {
                    Err(format!(
                        "the server never logged the end of its {command} answer (the client still reading?)"
                    ))
                } else {
                    Ok(logged.iter().sum())
                }
            },
        )
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Fetches from a hostile server in `mode` in a child process; asserts a
/// clear failure with flat memory and returns the error text and the bytes
/// the server got to send.
fn refused(test: &str, mode: &str, extra: Value, says: &[&str]) -> u64 {
    refused_at(test, mode, "fetch", extra, says)
}

/// [`refused`], returning the bytes the server sent for `command`.
fn refused_at(test: &str, mode: &str, command: &str, extra: Value, says: &[&str]) -> u64 {
    let server = Hostile::start(mode);
    let tmp = TempDir::new();
    let mut spec = serde_json::json!({ "cache": tmp.join("cache"), "url": server.url() });
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
        s.extend(e.clone());
    }
    let (run, kib) = in_child(test, spec);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    for s in says {
        assert!(run.stderr.contains(s), "{s:?} not in:\n{}", run.stderr);
    }
    eprintln!("a fetch from the {mode} server: peak {kib} KiB");
    assert!(
        kib < BOUND_KIB,
        "a fetch from the {mode} server peaked at {kib} KiB"
    );
    // Nothing of the pack stays behind.
    let packs: Vec<PathBuf> = walk(&tmp.join("cache"))
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("/objects/pack/"))
        .collect();
    assert!(packs.is_empty(), "{packs:?}");
    server.bytes_of(command)
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn an_object_that_claims_a_huge_size_and_never_ends_is_refused_at_its_header() {
    child_fetch_if_asked();
    let sent = refused(
        "an_object_that_claims_a_huge_size_and_never_ends_is_refused_at_its_header",
        "huge-object",
        Value::Null,
        &[
            "the server sent an object of 1099511627776 bytes",
            "more than the 100 MiB one object may have\n",
            "hint: if the repository is meant to be this large: raise the controller's --fetch-max-object-bytes",
        ],
    );
    // Read no further than the header: what the server got to write is
    // what the sockets buffer, not the stream.
    assert!(sent < 64 << 20, "the server wrote {sent} bytes");
}

#[test]
fn an_object_that_inflates_past_its_claim_is_refused_there() {
    child_fetch_if_asked();
    let sent = refused(
        "an_object_that_inflates_past_its_claim_is_refused_there",
        "endless-object",
        Value::Null,
        &[
            "the server sent a broken pack: the object at offset 12 inflates past the 100 bytes its header declares",
        ],
    );
    assert!(sent < 64 << 20, "the server wrote {sent} bytes");
}

#[test]
fn a_pack_that_claims_too_many_objects_is_refused_at_its_header() {
    child_fetch_if_asked();
    let sent = refused(
        "a_pack_that_claims_too_many_objects_is_refused_at_its_header",
        "many-objects",
        Value::Null,
        &[
            "the server's pack holds 4294967295 objects, more than the 1000000 a fetch may hold\n",
            "hint: if the repository is meant to be this large: raise the controller's --fetch-max-objects",
        ],
    );
    assert!(sent < 64 << 20, "the server wrote {sent} bytes");
}

#[test]
fn a_pack_that_never_ends_stops_at_the_byte_bound() {
    child_fetch_if_asked();
    // Stored blocks that inflate to nothing: no size claim is passed, the
    // bytes are (8 MiB here, --fetch-max-bytes).
    let sent = refused(
        "a_pack_that_never_ends_stops_at_the_byte_bound",
        "endless-nothing",
        serde_json::json!({ "max_fetch_bytes": 8 << 20 }),
        &[
            "the server sent a pack larger than 8 MiB, and more was coming\n",
            "raise the controller's --fetch-max-bytes",
        ],
    );
    assert!(sent >= 8 << 20, "the server wrote {sent} bytes");
    assert!(sent < 72 << 20, "the server wrote {sent} bytes");
}

// ------------------------------------------- what comes before the pack

/// A protocol v1 server (no v2) whose `info/refs` lists new branches
/// without end: stopped at `--fetch-max-refs` (100,000 refs by default,
/// about 5 MB of these), memory flat. Before, `gix` parsed the stream
/// into memory until the address space ran out.
#[test]
fn an_endless_v1_ref_advertisement_stops_at_the_ref_bound() {
    child_fetch_if_asked();
    let sent = refused_at(
        "an_endless_v1_ref_advertisement_stops_at_the_ref_bound",
        "endless-v1-refs",
        "info/refs",
        Value::Null,
        &[
            "the server's ref advertisement lists more than 100000 refs, and more were coming\n",
            "hint: the server is failing or hostile, or the repository has that many refs; if it is meant to: \
             raise the controller's --fetch-max-refs",
        ],
    );
    assert!(sent < 64 << 20, "the server wrote {sent} bytes");
}

/// A v2 server whose `ls-refs` answer never ends, the ref bound raised:
/// stopped at `--fetch-max-ref-bytes` (16 MiB by default).
#[test]
fn an_endless_ls_refs_answer_stops_at_the_byte_bound() {
    child_fetch_if_asked();
    let sent = refused_at(
        "an_endless_ls_refs_answer_stops_at_the_byte_bound",
        "endless-ls-refs",
        "ls-refs",
        serde_json::json!({ "max_refs": 1u64 << 40 }),
        &[
            "the server's ref advertisement is larger than 16 MiB, and more was coming\n",
            "raise the controller's --fetch-max-ref-bytes",
        ],
    );
    assert!(sent >= 16 << 20, "the server wrote {sent} bytes");
    assert!(sent < 80 << 20, "the server wrote {sent} bytes");
}

/// A v2 `ls-refs` answer that ends, but lists 200,001 refs: more than
/// `--fetch-max-refs` lets in (here 150,000), within the byte bound.
#[test]
fn a_ref_advertisement_with_too_many_refs_is_refused() {
    child_fetch_if_asked();
    refused_at(
        "a_ref_advertisement_with_too_many_refs_is_refused",
        "many-refs",
        "ls-refs",
        serde_json::json!({ "max_refs": 150_000 }),
        &[
            "the server's ref advertisement lists more than 150000 refs, and more were coming\n",
            "raise the controller's --fetch-max-refs",
        ],
    );
}

/// A negotiation whose `acknowledgments` section never ends: the same
/// byte bound covers everything before the pack.
#[test]
fn an_endless_negotiation_stops_at_the_byte_bound() {
    child_fetch_if_asked();
    let sent = refused(
        "an_endless_negotiation_stops_at_the_byte_bound",
        "endless-acks",
        serde_json::json!({ "max_ref_bytes": 4u64 << 20 }),
        &[
            "the server's answers before the pack (the negotiation) is larger than 4 MiB, and more was coming\n",
            "raise the controller's --fetch-max-ref-bytes",
        ],
    );
    assert!(sent >= 4 << 20, "the server wrote {sent} bytes");
    assert!(sent < 64 << 20, "the server wrote {sent} bytes");
}
