//! The OCI tools of the Go ecosystem the project is checked against,
//! pinned by tests/go/oci (go.mod + go.sum) and put on PATH by
//! `scripts/deps.sh`: `referrers-registry` (go-containerregistry's
//! registry with its referrers API on, see
//! tests/go/oci/referrers-registry/main.go), `oras` and `crane`.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};

use super::{TempDir, require};

/// A running `referrers-registry` on a free loopback port; killed on drop.
///
/// What it shows, and what it does not (go-containerregistry v0.22.1's
/// pkg/registry): `GET /v2/NAME/referrers/DIGEST` answers an index of the
/// manifests whose `subject` is DIGEST, with their annotations, but with
/// `artifactType` taken from each manifest's config media type; it ignores
/// the `artifactType` query (no `OCI-Filters-Applied`), sends no
/// `OCI-Subject` on a manifest `PUT`, and pages no tag list with a `Link`.
pub struct ReferrersRegistry {
    child: Child,
    /// Its blobs, and its request log.
    _dir: TempDir,
    /// `127.0.0.1:PORT`.
    pub host: String,
    /// Every request, one line each (`DATE TIME METHOD URL [STATUS ...]`).
    pub log: PathBuf,
}

impl ReferrersRegistry {
    /// Starts one and waits until it accepts connections.
    pub fn start() -> ReferrersRegistry {
        let dir = TempDir::new();
        let log = dir.join("requests.log");
        let mut child = Command::new(require("referrers-registry"))
            .arg("--blobs")
            .arg(dir.join("blobs"))
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("starting referrers-registry");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("reading referrers-registry's address");
        let host = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| {
                let _ = child.kill();
                panic!(
                    "referrers-registry did not start: {line:?} {}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                )
            })
            .to_string();
        ReferrersRegistry {
            child,
            _dir: dir,
            host,
            log,
        }
    }

    /// `METHOD PATH?QUERY` of every request so far, in order.
    pub fn requests(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                let i = w.iter().position(|x| x.starts_with("/v2"))?;
                (i > 0).then(|| format!("{} {}", w[i - 1], w[i]))
            })
            .collect()
    }
}

impl Drop for ReferrersRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs a pinned Go tool (`oras`, `crane`) with `args`, with a docker
/// config folder of its own (no credentials of the machine's) and HOME in
/// a temporary folder; panics with its output unless it succeeds.
pub fn go_tool(name: &str, args: &[&str]) -> Output {
    let out = go_tool_status(name, args);
    assert!(
        out.status.success(),
        "{name} {args:?} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// [`go_tool`] without the check.
pub fn go_tool_status(name: &str, args: &[&str]) -> Output {
    let home = TempDir::new();
    Command::new(require(name))
        .args(args)
        .env("HOME", home.path())
        .env("DOCKER_CONFIG", home.path())
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("starting {name}: {e}"))
}

/// `oras ARGS` (plain HTTP: the test registries are on loopback).
pub fn oras(args: &[&str]) -> Output {
    go_tool("oras", args)
}

/// `crane ARGS --insecure` (plain HTTP).
pub fn crane(args: &[&str]) -> Output {
    let mut a = args.to_vec();
    a.push("--insecure");
    go_tool("crane", &a)
}

/// `oras discover --format json` of `reference`: the subject and its
/// referrers, as oras lists them.
pub fn oras_discover(reference: &str, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["discover", "--plain-http", "--format", "json"];
    args.extend_from_slice(extra);
    args.push(reference);
    let out = oras(&args);
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "oras discover printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// `oras discover` of `reference` as a person reads it (the tree).
pub fn oras_discover_tree(reference: &str) -> String {
    String::from_utf8_lossy(&oras(&["discover", "--plain-http", reference]).stdout).into()
}

/// The `artifactType` of a rollout record (docs/format.md).
pub const ROLLOUT: &str = "application/vnd.settings-image.rollout.v1+json";

/// Attaches `record` (a rollout record's JSON, of any shape) to
/// `reference` (`HOST/NAME@DIGEST`) as `oras attach` does, with `flags`
/// (`--plain-http`, or `--ca-file` and a login): what anyone who can push
/// to the repository can do. The referrer's digest.
pub fn attach_rollout_record(
    reference: &str,
    record: &serde_json::Value,
    flags: &[&str],
) -> String {
    let dir = TempDir::new();
    std::fs::write(dir.join("rollout.json"), record.to_string()).expect("writing rollout.json");
    let file = format!("rollout.json:{ROLLOUT}");
    let mut args = vec!["attach", "--format", "json", "--artifact-type", ROLLOUT];
    args.extend_from_slice(flags);
    args.extend_from_slice(&[reference, &file]);
    let out = Command::new(require("oras"))
        .current_dir(dir.path())
        .env("HOME", dir.path())
        .env("DOCKER_CONFIG", dir.path())
        .args(&args)
        .stdin(Stdio::null())
        .output()
        .expect("running oras attach");
    assert!(
        out.status.success(),
        "oras {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "oras attach printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    v["digest"]
        .as_str()
        .unwrap_or_else(|| panic!("no digest in oras attach's output: {v}"))
        .to_string()
}

/// The rollout records attached to `subject` (`HOST/NAME@DIGEST`) as
/// `oras discover` lists them and `oras pull` reads them, with `flags`
/// (`--plain-http`, or `--ca-file` and a login): (referrer digest,
/// record), in oras' order.
pub fn rollout_records(subject: &str, flags: &[&str]) -> Vec<(String, serde_json::Value)> {
    let mut args = vec!["discover", "--format", "json"];
    args.extend_from_slice(flags);
    args.push(subject);
    let listed = go_tool("oras", &args);
    let d: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap_or_else(|e| {
        panic!(
            "oras discover printed no JSON ({e}): {}",
            String::from_utf8_lossy(&listed.stdout)
        )
    });
    let repository = subject.split('@').next().unwrap_or(subject);
    d["referrers"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter(|r| r["artifactType"] == ROLLOUT)
        .map(|r| {
            let digest = r["digest"]
                .as_str()
                .expect("a referrer's digest")
                .to_string();
            let out = TempDir::new();
            let dir = out.path().to_str().expect("a UTF-8 temporary folder");
            let reference = format!("{repository}@{digest}");
            let mut args = vec!["pull", "-o", dir];
            args.extend_from_slice(flags);
            args.push(&reference);
            go_tool("oras", &args);
            let text = std::fs::read_to_string(out.join("rollout.json")).expect("rollout.json");
            let record = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("the record {reference} is no JSON ({e}): {text}"));
            (digest, record)
        })
        .collect()
}
