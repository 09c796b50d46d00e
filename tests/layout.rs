//! Reproducibility of the digest, the golden digest of `examples/shop`, and
//! how `build` treats an OCI layout it writes into.

use crate::common;

use std::fs;
use std::os::unix::fs::{PermissionsExt, lchown, symlink};
use std::path::Path;

use common::TempDir;
use common::cmd::TestCommand;
use serde_json::Value;

/// The golden digests of `examples/shop`, built from a plain copy.
///
/// These guard the format against drift, nothing more: the values were
/// made by this tool, so they cannot show that its image is right. What
/// proves the image of `examples/shop` correct are the independent readers
/// in tests/readers.rs (`skopeo_reads_the_layout_and_agrees_on_the_digest`:
/// skopeo's manifest hashes to the reported digest and names the reported
/// layer; `podman_mounts_the_image_into_a_runc_container` and
/// `containerd_imports_unpacks_and_mounts_the_image`: runtimes mount a
/// copy of it, with one file or link added, as exactly the source's files)
/// and the OCI JSON schemas in tests/schema.rs.
///
/// Update them ONLY together with a format version bump in docs/format.md,
/// in the same commit, saying which rule changed and why. Any other reason
/// for a new value is a bug.
/// History: format 2 (deflate with 64 probes instead of 128) changed the layer.
const SHOP_MANIFEST: &str =
    "sha256:5333a3d67d8e3e66cc391db59bfc5e83121dc5d6991e08801a3a7a25a9e53b94";
const SHOP_LAYER: &str = "sha256:ee0d9e8ac5b5db045760fe77e8277dc3d6c7a09846cad381f20c7f7d1bdbcd50";

#[test]
fn golden_digest_of_examples_shop() {
    let tmp = TempDir::new();
    let src = tmp.join("shop");
    // A copy: no git metadata, fresh mtimes, whatever the checkout's modes were.
    common::copy_tree(&common::repo().join("examples/shop"), &src);
    let report = common::build(&src, &tmp.join("layout"), &[]);
    assert_eq!(common::field(&report, "/layer/digest"), SHOP_LAYER);
    assert_eq!(common::field(&report, "/digest"), SHOP_MANIFEST);
}

/// The same content, in every variant of metadata the build must ignore.
struct Variant {
    reverse_order: bool,
    file_mode: u32,
    exec_mode: u32,
    dir_mode: u32,
    mtime: Option<&'static str>,
    owner: Option<(u32, u32)>,
}

const FILES: &[(&str, &[u8], bool)] = &[
    ("app.yaml", b"name: shop\nport: 8080\n", false),
    ("conf/db.json", b"{\"host\": \"db\", \"pool\": 5}\n", false),
    ("conf/deep/flags.yaml", b"beta: false\n", false),
    ("hooks/reload.sh", b"#!/bin/sh\nkill -HUP 1\n", true),
    ("empty.yaml", b"", false),
];

fn make_tree(root: &Path, v: &Variant) {
    let mut files: Vec<_> = FILES.to_vec();
    if v.reverse_order {
        files.reverse();
    }
    for (rel, content, exec) in files {
        common::write_file(
            root,
            rel,
            content,
            if exec { v.exec_mode } else { v.file_mode },
        );
    }
    symlink("conf/db.json", root.join("db.json")).unwrap();
    for dir in ["conf", "conf/deep", "hooks"] {
        fs::set_permissions(root.join(dir), fs::Permissions::from_mode(v.dir_mode)).unwrap();
    }
    let all = common::snapshot(root);
    for rel in all.keys() {
        let p = root.join(rel);
        if let Some(when) = v.mtime {
            common::run_ok(common::tool("touch").args(["-h", "-d", when]).arg(&p));
        }
        if let Some((uid, gid)) = v.owner {
            lchown(&p, Some(uid), Some(gid)).unwrap();
        }
    }
}

fn digests(src: &Path, out: &Path) -> (String, String, String) {
    let r = common::build(src, out, &[]);
    (
        common::field(&r, "/digest"),
        common::field(&r, "/layer/digest"),
        common::field(&r, "/layer/diff_id"),
    )
}

#[test]
fn metadata_the_format_ignores_does_not_change_the_digest() {
    let tmp = TempDir::new();
    let a = tmp.join("a");
    make_tree(
        &a,
        &Variant {
            reverse_order: false,
            file_mode: 0o644,
            exec_mode: 0o755,
            dir_mode: 0o755,
            mtime: None,
            owner: None,
        },
    );
    let b = tmp.join("b-elsewhere");
    make_tree(
        &b,
        &Variant {
            reverse_order: true,
            file_mode: 0o600,
            exec_mode: 0o700,
            dir_mode: 0o700,
            mtime: Some("2001-02-03 04:05:06"),
            owner: Some((1234, 5678)),
        },
    );
    // The variants really differ on disk.
    let meta = |p: &Path| fs::symlink_metadata(p).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_ne!(
        meta(&a.join("app.yaml")).uid(),
        meta(&b.join("app.yaml")).uid()
    );
    assert_ne!(
        meta(&a.join("app.yaml")).mtime(),
        meta(&b.join("app.yaml")).mtime()
    );
    assert_ne!(
        meta(&a.join("app.yaml")).mode(),
        meta(&b.join("app.yaml")).mode()
    );

    let da = digests(&a, &tmp.join("out-a"));
    let db = digests(&b, &tmp.join("out-b"));
    assert_eq!(da, db);
}

/// A named edit of a folder.
type Change = (&'static str, fn(&Path));

#[test]
fn content_names_and_the_exec_bit_change_the_digest() {
    let tmp = TempDir::new();
    let base_variant = Variant {
        reverse_order: false,
        file_mode: 0o644,
        exec_mode: 0o755,
        dir_mode: 0o755,
        mtime: None,
        owner: None,
    };
    let base = tmp.join("base");
    make_tree(&base, &base_variant);
    let (_, base_layer, _) = digests(&base, &tmp.join("out-base"));

    let changes: [Change; 5] = [
        ("one byte of content", |d| {
            common::write_file(d, "conf/deep/flags.yaml", b"beta: falsE\n", 0o644)
        }),
        ("a file name", |d| {
            fs::rename(d.join("app.yaml"), d.join("app.yml")).unwrap()
        }),
        ("the exec bit set", |d| {
            fs::set_permissions(d.join("app.yaml"), fs::Permissions::from_mode(0o744)).unwrap()
        }),
        ("the exec bit cleared", |d| {
            fs::set_permissions(d.join("hooks/reload.sh"), fs::Permissions::from_mode(0o644))
                .unwrap()
        }),
        ("a symlink target", |d| {
            fs::remove_file(d.join("db.json")).unwrap();
            symlink("conf/deep/flags.yaml", d.join("db.json")).unwrap();
        }),
    ];
    for (i, (what, change)) in changes.iter().enumerate() {
        let dir = tmp.join(&format!("changed-{i}"));
        make_tree(&dir, &base_variant);
        // Unchanged, the copy gives the base digest; changed, it must not.
        let (_, same, _) = digests(&dir, &tmp.join(&format!("out-same-{i}")));
        assert_eq!(
            same, base_layer,
            "an identical copy differs before changing {what}"
        );
        change(&dir);
        let (_, layer, _) = digests(&dir, &tmp.join(&format!("out-{i}")));
        assert_ne!(
            layer, base_layer,
            "changing {what} left the layer digest unchanged"
        );
    }
}

fn shop_copy(tmp: &TempDir, name: &str) -> std::path::PathBuf {
    let src = tmp.join(name);
    common::copy_tree(&common::repo().join("examples/shop"), &src);
    src
}

fn blob_names(layout: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(layout.join("blobs/sha256"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn index_tags(layout: &Path) -> Vec<(String, String)> {
    let index: Value =
        serde_json::from_slice(&fs::read(layout.join("index.json")).unwrap()).unwrap();
    index["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["annotations"]["org.opencontainers.image.ref.name"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                m["digest"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn building_twice_into_the_same_layout_writes_nothing() {
    let tmp = TempDir::new();
    let src = shop_copy(&tmp, "src");
    let layout = tmp.join("layout");
    let first = common::build(&src, &layout, &["dev", "main-1700000000-abcdef0"]);
    assert_eq!(first["new_blobs"], 3);
    let index = fs::read(layout.join("index.json")).unwrap();
    let blobs = blob_names(&layout);
    assert_eq!(blobs.len(), 3);

    let second = common::build(&src, &layout, &["dev", "main-1700000000-abcdef0"]);
    assert_eq!(second["new_blobs"], 0);
    assert_eq!(second["digest"], first["digest"]);
    assert_eq!(fs::read(layout.join("index.json")).unwrap(), index);
    assert_eq!(blob_names(&layout), blobs);
    // No temporary file left next to the blobs or the index.
    let mut top: Vec<_> = fs::read_dir(&layout)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    top.sort();
    assert_eq!(top, ["blobs", "index.json", "oci-layout"]);
}

#[test]
fn a_timestamp_tag_never_moves_but_other_tags_do() {
    let tmp = TempDir::new();
    let src = shop_copy(&tmp, "src");
    let layout = tmp.join("layout");
    let stamp = "main-1700000000-abcdef0";
    let first = common::build(&src, &layout, &["dev", stamp]);
    let index = fs::read(layout.join("index.json")).unwrap();
    let blobs = blob_names(&layout);

    common::write_file(&src, "app.yaml", b"changed: true\n", 0o644);
    let out = common::build_raw(&src, &layout, &["dev", stamp]);
    let stderr = &out.stderr;
    assert_eq!(out.code, 3, "stderr: {stderr}");
    assert!(stderr.contains(stamp), "{stderr}");
    assert!(
        stderr.contains(&common::field(&first, "/digest")),
        "{stderr}"
    );
    assert!(stderr.contains("hint:"), "{stderr}");
    assert!(out.stdout.is_empty());
    assert_eq!(
        fs::read(layout.join("index.json")).unwrap(),
        index,
        "index.json changed"
    );
    assert_eq!(
        blob_names(&layout),
        blobs,
        "blobs were written for a refused build"
    );

    // A moving tag alone is fine and moves; the timestamp tag stays put.
    let moved = common::build(&src, &layout, &["dev"]);
    let tags = index_tags(&layout);
    assert!(
        tags.contains(&("dev".into(), common::field(&moved, "/digest"))),
        "{tags:?}"
    );
    assert!(
        tags.contains(&(stamp.into(), common::field(&first, "/digest"))),
        "{tags:?}"
    );
    assert_eq!(tags.len(), 2);
}

#[test]
fn a_failed_build_leaves_an_existing_layout_untouched() {
    let tmp = TempDir::new();
    let src = shop_copy(&tmp, "src");
    let layout = tmp.join("layout");
    common::build(&src, &layout, &["dev"]);
    let index = fs::read(layout.join("index.json")).unwrap();
    let blobs = blob_names(&layout);

    symlink("/etc/passwd", src.join("passwd")).unwrap();
    let out = common::build_raw(&src, &layout, &["v2"]);
    let stderr = &out.stderr;
    assert_eq!(out.code, 2, "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "error: {}: symlink points to the absolute path \"/etc/passwd\"; only relative links \
             inside the folder are kept\n",
            src.join("passwd").display()
        )),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "{out:?}");
    assert_eq!(fs::read(layout.join("index.json")).unwrap(), index);
    assert_eq!(blob_names(&layout), blobs);
}

#[test]
fn a_failed_build_into_a_new_directory_leaves_no_directory() {
    let tmp = TempDir::new();
    let src = shop_copy(&tmp, "src");
    symlink("../../outside", src.join("features/escape")).unwrap();
    for output in ["new", "parent/child/layout"] {
        let out = common::build_raw(&src, &tmp.join(output), &["dev"]);
        let stderr = &out.stderr;
        assert_eq!(out.code, 2, "{output}: {stderr}");
        assert!(
            stderr.starts_with(&format!(
                "error: {}: symlink target \"../../outside\" leaves the folder; only links inside \
                 the folder are kept\n",
                src.join("features/escape").display()
            )),
            "{output}: {stderr}"
        );
        let first = output.split('/').next().unwrap();
        assert!(
            !tmp.join(first).exists(),
            "{output}: the failed build left {first}"
        );
    }
}

#[test]
fn an_output_that_is_not_a_layout_is_refused() {
    let tmp = TempDir::new();
    let src = shop_copy(&tmp, "src");
    let other = tmp.join("other");
    common::write_file(&other, "notes.txt", b"mine\n", 0o644);
    let out = common::build_raw(&src, &other, &["dev"]);
    let stderr = &out.stderr;
    assert_eq!(out.code, 1, "{stderr}");
    assert!(stderr.contains("without an oci-layout file"), "{stderr}");
    assert_eq!(
        common::snapshot(&other).len(),
        1,
        "the build wrote into a foreign directory"
    );
}

#[test]
fn blobs_are_named_by_their_sha256_whether_linked_or_copied() {
    use std::os::unix::fs::MetadataExt;
    let tmp = TempDir::new();
    let src = shop_copy(&tmp, "src");
    // The layer is built in TMPDIR: on the layout's file system it is hard
    // linked into place, on another (/dev/shm is a tmpfs) it is copied.
    let shm = Path::new("/dev/shm");
    assert!(shm.is_dir(), "/dev/shm is missing");
    for (name, tmpdir) in [("same-fs", tmp.path()), ("other-fs", shm)] {
        let layout = tmp.join(name);
        TestCommand::new()
            .env("TMPDIR", tmpdir)
            .args(["build", "--path"])
            .arg(&src)
            .arg("--output")
            .arg(&layout)
            .ok();
        let blobs = blob_names(&layout);
        assert_eq!(blobs.len(), 3);
        for blob in blobs {
            let path = layout.join("blobs/sha256").join(&blob);
            // coreutils' sha256sum: not the hash library the tool uses.
            let sum = common::stdout_of(common::tool("sha256sum").arg(&path));
            let hex = sum.split_whitespace().next().unwrap_or_default();
            assert_eq!(hex, blob, "{name}: {blob}");
            let meta = fs::metadata(&path).unwrap();
            assert_eq!(meta.mode() & 0o777, 0o644, "{name}: {blob}");
            assert_eq!(
                meta.nlink(),
                1,
                "{name}: a temporary name of {blob} is left"
            );
        }
    }
}

#[test]
fn an_output_inside_the_folder_is_refused() {
    // Otherwise the next build would package the layout itself.
    let tmp = TempDir::new();
    let src = shop_copy(&tmp, "src");
    for output in [
        "out",
        "features/../out",
        "features/new/layout",
        "new/../out",
        ".",
    ] {
        let out = common::build_raw(&src, &src.join(output), &["dev"]);
        let stderr = &out.stderr;
        assert_eq!(out.code, 2, "{output}: {stderr}");
        assert!(stderr.contains("inside the settings folder"), "{stderr}");
        assert!(stderr.contains("hint:"), "{stderr}");
    }
    assert_eq!(
        common::snapshot(&src),
        common::snapshot(&common::repo().join("examples/shop"))
    );
    // A sibling whose name merely starts the same is fine.
    common::build(&src, &tmp.join("src-out"), &["dev"]);
}

#[test]
fn concurrent_builds_into_one_layout_keep_every_tag() {
    let tmp = TempDir::new();
    let layout = tmp.join("layout");
    let n = 8;
    let sources: Vec<_> = (0..n)
        .map(|i| {
            let src = shop_copy(&tmp, &format!("src{i}"));
            common::write_file(&src, "id.yaml", format!("id: {i}\n").as_bytes(), 0o644);
            src
        })
        .collect();
    let children: Vec<_> = sources
        .iter()
        .enumerate()
        .map(|(i, src)| {
            common::build_cmd(src, &layout)
                .args(["--tag", &format!("t{i}")])
                .spawn()
        })
        .collect();
    for c in children {
        let run = c.wait();
        assert_eq!(run.code, 0, "{run:?}");
    }
    let mut tags: Vec<String> = index_tags(&layout).into_iter().map(|(t, _)| t).collect();
    tags.sort();
    let want: Vec<String> = (0..n).map(|i| format!("t{i}")).collect();
    assert_eq!(tags, want, "a concurrent build lost another's index entry");
}
