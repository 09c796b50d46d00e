//! Our images read by real, independent tools: umoci, skopeo, podman (runc)
//! and containerd. None of these tests parse the layer themselves.

use crate::common;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;

use common::{Node, TempDir};
use sha2::{Digest as _, Sha256};

/// What a reader must show for a source tree: same names and contents,
/// files 0644 (0755 when any execute bit was set), directories 0755.
fn expected_from_source(src: &Path) -> BTreeMap<String, Node> {
    common::snapshot(src)
        .into_iter()
        .filter(|(path, _)| !path.split('/').any(|part| part == ".git"))
        .map(|(path, node)| {
            let node = match node {
                Node::Dir(_) => Node::Dir(0o755),
                Node::File(mode, content) => {
                    Node::File(if mode & 0o111 != 0 { 0o755 } else { 0o644 }, content)
                }
                link => link,
            };
            (path, node)
        })
        .collect()
}

/// A folder whose modes are all over the place.
fn messy_modes(src: &Path) {
    common::write_file(src, "private.yaml", b"password: hunter2\n", 0o600);
    common::write_file(src, "public.json", b"{\"a\": 1}\n", 0o644);
    common::write_file(src, "group.yaml", b"x: 1\n", 0o640);
    common::write_file(src, "hook.sh", b"#!/bin/sh\necho hi\n", 0o700);
    common::write_file(src, "wide-open.sh", b"#!/bin/sh\n", 0o777);
    common::write_file(src, "empty.txt", b"", 0o600);
    common::write_file(src, "secret/nested/deep.yaml", b"deep: true\n", 0o600);
    fs::set_permissions(src.join("secret"), fs::Permissions::from_mode(0o700)).unwrap();
    fs::set_permissions(src.join("secret/nested"), fs::Permissions::from_mode(0o777)).unwrap();
    fs::create_dir(src.join("empty-dir")).unwrap();
    fs::set_permissions(src.join("empty-dir"), fs::Permissions::from_mode(0o700)).unwrap();
}

#[test]
fn umoci_unpacks_exactly_the_files_with_normalized_modes() {
    let tmp = TempDir::new();
    let src = tmp.join("src");
    messy_modes(&src);
    let layout = tmp.join("layout");
    common::build(&src, &layout, &["v1"]);
    let rootfs = common::umoci_unpack(&layout, "v1", &tmp.join("bundle"));
    let got = common::snapshot(&rootfs);
    let want = expected_from_source(&src);
    assert_eq!(got, want);
    // The expectation itself must hold normalized modes, or this test proves nothing.
    assert_eq!(
        want["private.yaml"],
        Node::File(0o644, b"password: hunter2\n".to_vec())
    );
    assert_eq!(
        want["wide-open.sh"],
        Node::File(0o755, b"#!/bin/sh\n".to_vec())
    );
    assert_eq!(want["secret"], Node::Dir(0o755));
}

#[test]
fn umoci_sees_symlinks_hard_links_long_names_and_no_git() {
    let tmp = TempDir::new();
    let src = tmp.join("src");
    common::write_file(&src, "base.yaml", b"base: 1\n", 0o644);
    common::write_file(&src, "dir/inner.yaml", b"inner: 2\n", 0o644);
    symlink("base.yaml", src.join("alias.yaml")).unwrap();
    symlink("../base.yaml", src.join("dir/up.yaml")).unwrap();
    symlink("dir", src.join("dir-link")).unwrap();
    fs::hard_link(src.join("base.yaml"), src.join("hard.yaml")).unwrap();
    // Names and link targets over tar's 100-byte field.
    let long_dir = "d".repeat(120);
    let long_file = format!("{}.yaml", "f".repeat(150));
    let long_path = format!("{long_dir}/{long_file}");
    common::write_file(&src, &long_path, b"long: yes\n", 0o644);
    symlink(&long_path, src.join("long-link")).unwrap();
    // .git below the top: a directory (a nested clone) and a gitfile (as in a
    // linked worktree or submodule). A .git at the top is a real repository:
    // see the next test.
    common::write_file(&src, "vendor/.git/config", b"[core]\n", 0o644);
    common::write_file(&src, "vendor/.git/objects/ab/cdef", b"blob", 0o444);
    common::write_file(&src, "vendor/settings.yaml", b"vendored: true\n", 0o644);
    common::write_file(&src, "dir/.git", b"gitdir: /elsewhere\n", 0o644);

    let layout = tmp.join("layout");
    common::build(&src, &layout, &["v1"]);
    let rootfs = common::umoci_unpack(&layout, "v1", &tmp.join("bundle"));
    let got = common::snapshot(&rootfs);

    let want = expected_from_source(&src);
    assert_eq!(got, want);
    assert_eq!(got["alias.yaml"], Node::Link("base.yaml".into()));
    assert_eq!(got["dir/up.yaml"], Node::Link("../base.yaml".into()));
    assert_eq!(got["dir-link"], Node::Link("dir".into()));
    assert_eq!(got["long-link"], Node::Link(long_path.clone()));
    assert_eq!(got["hard.yaml"], Node::File(0o644, b"base: 1\n".to_vec()));
    assert_eq!(got[&long_path], Node::File(0o644, b"long: yes\n".to_vec()));
    assert!(
        got.keys().all(|k| !k.contains(".git")),
        "a .git entry reached the image: {:?}",
        got.keys().collect::<Vec<_>>()
    );
}

#[test]
fn a_repository_root_packaged_from_disk_leaves_out_git() {
    let tmp = TempDir::new();
    let src = tmp.join("repo");
    common::write_file(&src, "app.yaml", b"app: 1\n", 0o644);
    common::write_file(&src, "nested/more.json", b"{}\n", 0o644);
    let git = |args: &[&str]| {
        common::run_ok(
            common::tool("git")
                .arg("-C")
                .arg(&src)
                .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
                .args(args),
        )
    };
    git(&["init", "-q"]);
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "settings"]);
    common::write_file(&src, "untracked.yaml", b"new: true\n", 0o600);
    assert!(src.join(".git/HEAD").is_file());

    let layout = tmp.join("layout");
    common::build_cmd(&src, &layout)
        .args(["--source", "worktree", "--tag", "v1"])
        .json();
    let rootfs = common::umoci_unpack(&layout, "v1", &tmp.join("bundle"));
    let got = common::snapshot(&rootfs);
    assert_eq!(got, expected_from_source(&src));
    assert!(got.contains_key("untracked.yaml"));
    assert!(got.keys().all(|k| !k.contains(".git")), "{:?}", got.keys());
}

#[test]
fn skopeo_reads_the_layout_and_agrees_on_the_digest() {
    let tmp = TempDir::new();
    let src = tmp.join("src");
    common::copy_tree(&common::repo().join("examples/shop"), &src);
    let layout = tmp.join("layout");
    let report = common::build(&src, &layout, &["dev", "v1.0"]);
    for tag in ["dev", "v1.0"] {
        let out = common::stdout_of(
            common::tool("skopeo")
                .arg("inspect")
                .arg(format!("oci:{}:{tag}", layout.display())),
        );
        let inspect: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            common::field(&inspect, "/Digest"),
            common::field(&report, "/digest")
        );
        assert_eq!(
            inspect["Layers"],
            serde_json::json!([common::field(&report, "/layer/digest")])
        );
        assert_eq!(common::field(&inspect, "/Os"), "linux");
    }
    // skopeo's raw manifest is byte-for-byte the blob our digest names.
    let raw = common::run_ok(
        common::tool("skopeo")
            .args(["inspect", "--raw"])
            .arg(format!("oci:{}:dev", layout.display())),
    )
    .stdout;
    assert_eq!(
        format!("sha256:{}", hex::encode(Sha256::digest(&raw))),
        common::field(&report, "/digest")
    );
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[test]
fn podman_mounts_the_image_into_a_runc_container() {
    let tmp = TempDir::new();
    let src = tmp.join("src");
    common::copy_tree(&common::repo().join("examples/shop"), &src);
    common::write_file(&src, "bin/reload.sh", b"#!/bin/sh\nexit 0\n", 0o700);
    let layout = tmp.join("layout");
    let report = common::build(&src, &layout, &["dev"]);

    let podman = common::Podman::new(tmp.path());
    let pulled = common::stdout_of(
        podman
            .cmd()
            .args(["pull", "--quiet"])
            .arg(format!("oci:{}:dev", layout.display())),
    );
    // podman names an image by its config digest.
    let image_id = pulled.trim().to_string();
    assert_eq!(
        format!("sha256:{image_id}"),
        common::field(&report, "/config_digest"),
        "podman pulled another image than the one we built"
    );
    podman.import_busybox("localhost/busybox:test");
    let script = "cd /etc/settings && for f in $(find . -mindepth 1 | sort); do \
                  if [ -f \"$f\" ]; then echo \"$(stat -c '%a %u:%g' \"$f\") $(sha256sum \"$f\")\"; \
                  else echo \"$(stat -c '%a %u:%g' \"$f\") dir $f\"; fi; done; \
                  touch /etc/settings/new 2>/dev/null && echo WRITABLE; true";
    let out = common::stdout_of(
        podman
            .cmd()
            .args(["run", "--rm", "--network", "none", "--mount"])
            .arg(format!(
                "type=image,source={image_id},destination=/etc/settings"
            ))
            .args(["localhost/busybox:test", "/bin/busybox", "sh", "-c", script]),
    );
    // One line per entry, nothing else: the image volume is read-only, so a
    // WRITABLE line would fail the comparison too. The mount point itself is
    // podman's (0555) and not listed; the layer has no root entry.
    let mut want = Vec::new();
    for (path, node) in expected_from_source(&src) {
        want.push(match node {
            Node::Dir(mode) => format!("{mode:o} 0:0 dir ./{path}"),
            Node::File(mode, content) => {
                format!("{mode:o} 0:0 {}  ./{path}", sha256_hex(&content))
            }
            Node::Link(_) => unreachable!("no links in this tree"),
        });
    }
    let got: Vec<String> = out.lines().map(str::to_string).collect();
    assert_eq!(got, want, "container output:\n{out}");
    assert!(
        want.iter()
            .any(|l| l.starts_with("755 0:0 ") && l.ends_with("./bin/reload.sh"))
    );
}

#[test]
fn containerd_imports_unpacks_and_mounts_the_image() {
    let tmp = TempDir::new();
    let src = tmp.join("src");
    common::copy_tree(&common::repo().join("examples/shop"), &src);
    symlink("app.yaml", src.join("current.yaml")).unwrap();
    let layout = tmp.join("layout");
    let report = common::build(&src, &layout, &["dev"]);
    let archive = tmp.join("layout.tar");
    common::run_ok(
        common::tool("tar")
            .arg("-C")
            .arg(&layout)
            .arg("-cf")
            .arg(&archive)
            .arg("."),
    );

    let ctd = common::Containerd::start(tmp.path());
    // Import unpacks into the snapshotter: a wrong diff_id fails right here.
    common::run_ok(
        ctd.ctr()
            .args(["images", "import", "--snapshotter", "native"])
            .args(["--base-name", "localhost/settings"])
            .arg(&archive),
    );
    let images = common::stdout_of(ctd.ctr().args(["images", "ls"]));
    assert!(
        images.contains("localhost/settings:dev")
            && images.contains(&common::field(&report, "/digest")),
        "{images}"
    );
    // One layer: the snapshot's chain id is the layer's diff_id.
    let snapshots =
        common::stdout_of(
            ctd.ctr()
                .args(["snapshots", "--snapshotter", "native", "ls"]),
        );
    assert!(
        snapshots.contains(&common::field(&report, "/layer/diff_id")),
        "no snapshot named by our diff_id:\n{snapshots}"
    );

    let mnt = tmp.join("mnt");
    fs::create_dir(&mnt).unwrap();
    let guard = common::MountGuard(mnt.clone());
    common::run_ok(
        ctd.ctr()
            .args([
                "images",
                "mount",
                "--snapshotter",
                "native",
                "localhost/settings:dev",
            ])
            .arg(&mnt),
    );
    assert!(common::is_mounted(&mnt));
    assert_eq!(common::snapshot(&mnt), expected_from_source(&src));
    common::run_ok(ctd.ctr().args(["images", "unmount", "--rm"]).arg(&mnt));
    assert!(
        !common::is_mounted(&mnt),
        "ctr images unmount left {} mounted",
        mnt.display()
    );
    drop(guard);
}
