//! index.json, the manifest and the config checked against the official OCI
//! image-spec JSON schemas (draft-04) in `tests/fixtures/oci-schema`, with
//! python's `jsonschema` (a real draft-04 implementation).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::TempDir;
use serde_json::Value;

/// The schemas, kept in the repository (byte-for-byte copies; see SOURCE.txt
/// there for the upstream commit and the id -> file map).
fn schema_dir() -> PathBuf {
    let dir = common::repo().join("tests/fixtures/oci-schema");
    assert!(
        dir.join("SOURCE.txt").is_file() && dir.join("image-manifest-schema.json").is_file(),
        "{} does not hold the OCI schemas (tests/fixtures/oci-schema is part of the repository)",
        dir.display()
    );
    dir
}

/// Runs the validator on (kind, file) pairs.
fn validate(docs: &[(&str, &Path)]) -> Output {
    let mut cmd = common::tool("python3");
    cmd.arg(common::repo().join("tests/common/oci_schema.py"))
        .arg(schema_dir());
    for (kind, path) in docs {
        cmd.arg(kind).arg(path);
    }
    let out = cmd.output().expect("running python3");
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "the schema validator could not run ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn blob(layout: &Path, digest: &str) -> PathBuf {
    layout
        .join("blobs/sha256")
        .join(digest.trim_start_matches("sha256:"))
}

fn build_example(tmp: &TempDir) -> (PathBuf, Value) {
    let src = tmp.join("src");
    common::copy_tree(&common::repo().join("examples/shop"), &src);
    let layout = tmp.join("layout");
    let report = common::build(&src, &layout, &["dev", "main-1700000000-abcdef0"]);
    (layout, report)
}

#[test]
fn layout_index_manifest_and_config_match_the_oci_schemas() {
    let tmp = TempDir::new();
    let (layout, report) = build_example(&tmp);
    let manifest = blob(&layout, &common::field(&report, "/digest"));
    let config = blob(&layout, &common::field(&report, "/config_digest"));
    let out = validate(&[
        ("layout", &layout.join("oci-layout")),
        ("index", &layout.join("index.json")),
        ("manifest", &manifest),
        ("config", &config),
    ]);
    assert!(
        out.status.success(),
        "schema violations:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn an_image_built_from_git_with_annotations_and_labels_matches_too() {
    let tmp = TempDir::new();
    let repo = tmp.join("repo");
    common::copy_tree(&common::repo().join("examples/shop"), &repo.join("shop"));
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
    git(&[
        "remote",
        "add",
        "origin",
        "https://github.com/example/settings.git",
    ]);
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "shop"]);
    let layout = tmp.join("layout");
    let report = common::build_cmd(&repo.join("shop"), &layout)
        .env_remove("GITHUB_SERVER_URL")
        .env_remove("GITHUB_REPOSITORY")
        .args(["--timestamp-tag", "main"])
        .json();
    let manifest = blob(&layout, &common::field(&report, "/digest"));
    let config = blob(&layout, &common::field(&report, "/config_digest"));
    // The documents really carry what this test is about.
    let m: Value = serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    assert!(
        m["annotations"]["org.opencontainers.image.revision"].is_string(),
        "{m}"
    );
    let c: Value = serde_json::from_slice(&std::fs::read(&config).unwrap()).unwrap();
    assert!(
        c["config"]["Labels"]["org.opencontainers.image.source"].is_string(),
        "{c}"
    );
    let out = validate(&[
        ("index", &layout.join("index.json")),
        ("manifest", &manifest),
        ("config", &config),
    ]);
    assert!(
        out.status.success(),
        "schema violations:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Writes `doc` to a file and validates it as `kind`; returns stderr when invalid.
fn expect_invalid(tmp: &TempDir, kind: &str, name: &str, doc: &Value) -> String {
    let path = tmp.join(name);
    std::fs::write(&path, serde_json::to_vec(doc).unwrap()).unwrap();
    let out = validate(&[(kind, &path)]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "the validator accepted a corrupted {kind}: {doc}"
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn corrupted_documents_fail_validation() {
    let tmp = TempDir::new();
    let (layout, report) = build_example(&tmp);
    let manifest: Value = serde_json::from_slice(
        &std::fs::read(blob(&layout, &common::field(&report, "/digest"))).unwrap(),
    )
    .unwrap();

    // A required top-level field missing.
    let mut m = manifest.clone();
    m.as_object_mut().unwrap().remove("config");
    let err = expect_invalid(&tmp, "manifest", "no-config.json", &m);
    assert!(err.contains("config"), "{err}");

    // A bad digest inside a layer descriptor: caught only if the $refs to
    // content-descriptor.json and defs-descriptor.json really resolve.
    let mut m = manifest.clone();
    m["layers"][0]["digest"] = Value::from("sha256 without a colon");
    let err = expect_invalid(&tmp, "manifest", "bad-digest.json", &m);
    assert!(err.contains("layers/0/digest"), "{err}");

    // A negative size, again through the descriptor schema.
    let mut m = manifest;
    m["config"]["size"] = Value::from(-1);
    let err = expect_invalid(&tmp, "manifest", "bad-size.json", &m);
    assert!(err.contains("config/size"), "{err}");

    // index.json whose entry lacks a media type's required shape.
    let mut index: Value =
        serde_json::from_slice(&std::fs::read(layout.join("index.json")).unwrap()).unwrap();
    index["manifests"][0]["mediaType"] = Value::from("not a media type");
    let err = expect_invalid(&tmp, "index", "bad-index.json", &index);
    assert!(err.contains("manifests/0/mediaType"), "{err}");
}
