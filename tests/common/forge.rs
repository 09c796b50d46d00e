//! Forged images and provenance written by other hands than the crate's:
//! `forge.py` (Python's tar, gzip, hashlib and HTTP client) copies and edits
//! images on a plain-HTTP registry and attaches referrers, and [`statement`]
//! writes an in-toto statement by hand from docs/push.md's table. What
//! `verify` and `inspect` then read, settings-image did not write.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{repo, run_ok, tool};

/// One change `forge.py image` makes to the copy.
pub enum Edit<'a> {
    /// A manifest annotation, added or replaced.
    Annotation(&'a str, &'a str),
    /// A config label, added or replaced.
    Label(&'a str, &'a str),
    /// A regular file's content in the layer (appended when absent).
    File(&'a str, &'a str),
}

fn forge_py() -> std::process::Command {
    let mut c = tool("python3");
    c.arg(repo().join("tests/common/forge.py"));
    c
}

fn last_line(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .expect("forge.py printed a digest")
        .trim()
        .to_string()
}

/// Copies `from_name:from_ref` to `to_name:tag` on `registry` (`HOST:PORT`)
/// with `edits` applied; returns the copy's manifest digest.
pub fn image(
    registry: &str,
    (from_name, from_ref): (&str, &str),
    (to_name, tag): (&str, &str),
    edits: &[Edit],
) -> String {
    let mut c = forge_py();
    c.args(["image", registry, from_name, from_ref, to_name, tag]);
    for e in edits {
        let (flag, k, v) = match e {
            Edit::Annotation(k, v) => ("--annotation", k, v),
            Edit::Label(k, v) => ("--label", k, v),
            Edit::File(k, v) => ("--file", k, v),
        };
        c.arg(flag).arg(format!("{k}={v}"));
    }
    last_line(&run_ok(&mut c))
}

/// Attaches `statement` to `name@subject` on `registry` as an in-toto
/// referrer with the manifest `annotations`, through the referrers tag
/// schema; returns the referrer's digest.
pub fn attach(
    registry: &str,
    name: &str,
    subject: &str,
    statement: &Value,
    annotations: &[(&str, &str)],
) -> String {
    let tmp = super::TempDir::new();
    let file = tmp.join("statement.json");
    std::fs::write(&file, statement.to_string()).expect("writing the statement");
    let mut c = forge_py();
    c.args(["attach", registry, name, subject]).arg(&file);
    for (k, v) in annotations {
        c.arg("--annotation").arg(format!("{k}={v}"));
    }
    last_line(&run_ok(&mut c))
}

/// What a statement claims (docs/push.md, "Provenance").
pub struct Claims<'a> {
    /// The subject, `HOST/NAME`.
    pub subject_name: &'a str,
    /// The subject's digest, `sha256:<hex>`.
    pub subject_digest: &'a str,
    /// `resolvedDependencies[0].digest.gitCommit`.
    pub commit: &'a str,
    /// `externalParameters.path`.
    pub path: &'a str,
    /// `externalParameters.ref`.
    pub git_ref: Option<&'a str>,
    /// `runDetails.builder.id`.
    pub builder: &'a str,
    /// `externalParameters.annotations` (left out when empty).
    pub annotations: BTreeMap<String, String>,
    /// `externalParameters.labels` (left out when empty).
    pub labels: BTreeMap<String, String>,
}

/// An in-toto Statement v1 with a SLSA provenance v1 predicate, written
/// by hand from the specs and docs/push.md's field table.
pub fn statement(c: &Claims) -> Value {
    let hex = c
        .subject_digest
        .strip_prefix("sha256:")
        .expect("a sha256 digest");
    let mut external = json!({ "path": c.path });
    if let Some(r) = c.git_ref {
        external["ref"] = json!(r);
    }
    if !c.annotations.is_empty() {
        external["annotations"] = json!(c.annotations);
    }
    if !c.labels.is_empty() {
        external["labels"] = json!(c.labels);
    }
    json!({
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{ "name": c.subject_name, "digest": { "sha256": hex } }],
        "predicateType": "https://slsa.dev/provenance/v1",
        "predicate": {
            "buildDefinition": {
                "buildType": "https://github.com/ConfigButler/settings-image/push/v1",
                "externalParameters": external,
                "internalParameters": {},
                "resolvedDependencies": [{
                    "uri": "git+unknown",
                    "digest": { "gitCommit": c.commit },
                }],
            },
            "runDetails": { "builder": { "id": c.builder }, "metadata": {} },
        },
    })
}

/// The referrer annotations docs/push.md lists: the commit, its time and,
/// when given, the ref.
pub fn referrer_annotations<'a>(
    commit: &'a str,
    created: &'a str,
    git_ref: Option<&'a str>,
) -> Vec<(&'a str, &'a str)> {
    let mut a = vec![
        ("org.opencontainers.image.revision", commit),
        ("org.opencontainers.image.created", created),
    ];
    if let Some(r) = git_ref {
        a.push(("dev.settings-image.provenance.ref", r));
    }
    a
}
