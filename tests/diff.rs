//! `settings-image diff` between two settings images pushed to a real
//! `docker-registry`, and between an image and a folder, checked against
//! outputs written by hand (the key paths, values and unified diffs below
//! are what a reviewer reads, worked out from the files, not from the
//! code). Digests come from the push report and from sha256 of the bytes
//! the test wrote. Also: what the bounds leave out and say, a hostile layer
//! (written by forge.py and the tar crate, never by settings-image), and the
//! diff that `promote` and the publish action's job summary show.

use crate::common;

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::PathBuf;

use common::cmd::{Run, TestCommand};
use common::forge::{self, Edit};
use common::git::{ScratchRepo, git_at};
use common::registry::{Auth, Registry};
use common::runner::{Runner, Step};
use serde_json::{Value, json};
use sha2::Digest as _;

/// `sha256:<hex>` of `bytes`: the oracle for the digests of files.
fn sha(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes)))
}

const APP_V1: &str = "name: shop\nreplicas: 2\nimage:\n  tag: \"1.4\"\nfeatures: [search, cart]\nlimits:\n  cpu: 500m\n";
const APP_V2: &str =
    "replicas: 3\nname: shop\nimage:\n  tag: \"1.5\"\n  pullPolicy: Always\nfeatures: [search]\n";
const JSON_V1: &str = "{\"timeout\": 30, \"endpoints\": {\"api\": \"https://a.example\", \"auth\": \"https://b.example\"}, \"flags\": {\"beta\": false}}\n";
const JSON_V2: &str = "{\"timeout\": 45, \"endpoints\": {\"api\": \"https://a2.example\", \"auth\": \"https://b.example\"}, \"flags\": {\"beta\": false, \"dark.mode\": true}}\n";
const NOTES_V1: &str = "one\ntwo\nthree\nfour\nfive\n";
const NOTES_V2: &str = "one\ntwo\nTHREE\nfour\nfive\n";

/// A binary file: every byte value once, then zeros, `n` bytes in all.
fn logo(n: usize) -> Vec<u8> {
    (0..=255u8).chain(std::iter::repeat_n(0, n - 256)).collect()
}

/// A git repository whose `configs/shop` has two commits: the second
/// changes YAML, JSON, text and a binary file, renames one file, turns a
/// file into a symlink and another into a folder, makes a script
/// executable, removes one file and adds one; `unchanged.yaml` stays.
struct Shop {
    repo: ScratchRepo,
    commits: Vec<String>,
}

impl Shop {
    fn new() -> Shop {
        let mut shop = Shop {
            repo: ScratchRepo::new(),
            commits: Vec::new(),
        };
        let f = shop.folder();
        std::fs::create_dir_all(&f).expect("mkdir");
        let w = |name: &str, data: &[u8]| std::fs::write(f.join(name), data).expect("write");
        w("app.yaml", APP_V1.as_bytes());
        w("settings.json", JSON_V1.as_bytes());
        w("notes.txt", NOTES_V1.as_bytes());
        w("logo.bin", &logo(300));
        w("old-name.yaml", b"moved: true\n");
        w("current.yaml", b"current: 1\n");
        w("extra", b"ext\n");
        w("run.sh", b"#!/bin/sh\necho hi\n");
        w("removed.txt", b"bye\n");
        w("unchanged.yaml", b"same: 1\n");
        shop.commit(1_700_000_100);
        w("app.yaml", APP_V2.as_bytes());
        w("settings.json", JSON_V2.as_bytes());
        w("notes.txt", NOTES_V2.as_bytes());
        w("logo.bin", &logo(301));
        std::fs::rename(f.join("old-name.yaml"), f.join("new-name.yaml")).expect("mv");
        std::fs::remove_file(f.join("current.yaml")).expect("rm");
        symlink("app.yaml", f.join("current.yaml")).expect("ln -s");
        std::fs::remove_file(f.join("extra")).expect("rm");
        std::fs::create_dir(f.join("extra")).expect("mkdir");
        w("extra/inner.txt", b"inner\n");
        std::fs::set_permissions(f.join("run.sh"), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        std::fs::remove_file(f.join("removed.txt")).expect("rm");
        w("added.yaml", b"added: yes\n");
        shop.commit(1_700_000_200);
        shop
    }

    fn folder(&self) -> PathBuf {
        self.repo.dir.join("configs/shop")
    }

    fn commit(&mut self, time: i64) {
        self.commits.push(self.repo.commit_all("change", time));
    }

    /// Pushes each commit's folder to `repository` as `main-<ts>-<sha7>`
    /// and `v1`, `v2`; returns the two push reports.
    fn push(&self, repository: &str) -> Vec<Value> {
        (0..self.commits.len())
            .map(|i| self.push_one(repository, i))
            .collect()
    }

    /// Pushes commit `i`'s folder as `main-<ts>-<sha7>` and `v<i+1>`.
    fn push_one(&self, repository: &str, i: usize) -> Value {
        TestCommand::push_json(self.folder(), repository)
            .args(["--timestamp-tag", "main", "--revision", &self.commits[i]])
            .args(["--tag", &format!("v{}", i + 1)])
            .json()
    }
}

fn s(v: &Value, k: &str) -> String {
    v[k].as_str()
        .unwrap_or_else(|| panic!("no {k} in {v}"))
        .to_string()
}

fn diff(args: &[&str]) -> Run {
    TestCommand::new().arg("diff").args(args).run()
}

/// What the diff of the two commits of [`Shop`] prints after its header,
/// written by hand from the files.
fn shop_changes() -> String {
    let (l1, l2) = (sha(&logo(300)), sha(&logo(301)));
    format!(
        "\
11 changes: 2 added, 1 removed, 5 modified, 1 renamed, 2 type changed; 1 unchanged

added     added.yaml (file, 11 bytes)
modified  app.yaml: YAML, 5 changed keys
    features[1]: \"cart\" -> (absent)
    image.pullPolicy: (absent) -> \"Always\"
    image.tag: \"1.4\" -> \"1.5\"
    limits: {{\"cpu\":\"500m\"}} -> (absent)
    replicas: 2 -> 3
type      current.yaml: file, 11 bytes -> symlink to app.yaml
type      extra: file, 4 bytes -> directory
added     extra/inner.txt (file, 6 bytes)
modified  logo.bin: binary, 300 bytes -> 301 bytes, {} -> {}
renamed   new-name.yaml (from old-name.yaml, same content)
modified  notes.txt: text, 24 bytes -> 24 bytes
    --- a/notes.txt
    +++ b/notes.txt
    @@ -1,5 +1,5 @@
     one
     two
    -three
    +THREE
     four
     five
removed   removed.txt (file, 4 bytes)
modified  run.sh: mode 0644 -> 0755
modified  settings.json: JSON, 3 changed keys
    endpoints.api: \"https://a.example\" -> \"https://a2.example\"
    flags[\"dark.mode\"]: (absent) -> true
    timeout: 30 -> 45
",
        &l1[..19],
        &l2[..19]
    )
}

/// A file's facts as `--json` gives them.
fn file(mode: &str, data: &[u8]) -> Value {
    json!({"kind": "file", "mode": mode, "size": data.len(), "digest": sha(data)})
}

/// `counts` and `changes` of the diff of [`Shop`]'s commits as `--json`
/// prints them, written by hand (docs/format.md, "The diff").
fn shop_changes_json() -> Value {
    json!({
        "counts": {"added": 2, "removed": 1, "modified": 5, "renamed": 1, "type_changed": 2, "unchanged": 1},
        "changes": [
            {"path": "added.yaml", "status": "added", "new": file("0644", b"added: yes\n")},
            {"path": "app.yaml", "status": "modified",
             "old": file("0644", APP_V1.as_bytes()), "new": file("0644", APP_V2.as_bytes()),
             "content": {"kind": "keys", "format": "yaml", "not_shown": 0, "changes": [
                 {"path": "features[1]", "old": "cart"},
                 {"path": "image.pullPolicy", "new": "Always"},
                 {"path": "image.tag", "old": "1.4", "new": "1.5"},
                 {"path": "limits", "old": {"cpu": "500m"}},
                 {"path": "replicas", "old": 2, "new": 3},
             ]}},
            {"path": "current.yaml", "status": "type-changed", "old": file("0644", b"current: 1\n"),
             "new": {"kind": "symlink", "mode": "0777", "target": "app.yaml"}},
            {"path": "extra", "status": "type-changed", "old": file("0644", b"ext\n"),
             "new": {"kind": "directory", "mode": "0755"}},
            {"path": "extra/inner.txt", "status": "added", "new": file("0644", b"inner\n")},
            {"path": "logo.bin", "status": "modified", "old": file("0644", &logo(300)),
             "new": file("0644", &logo(301)), "content": {"kind": "binary"}},
            {"path": "new-name.yaml", "status": "renamed", "from": "old-name.yaml",
             "old": file("0644", b"moved: true\n"), "new": file("0644", b"moved: true\n")},
            {"path": "notes.txt", "status": "modified",
             "old": file("0644", NOTES_V1.as_bytes()), "new": file("0644", NOTES_V2.as_bytes()),
             "content": {"kind": "text", "not_shown": 0, "diff":
                 "--- a/notes.txt\n+++ b/notes.txt\n@@ -1,5 +1,5 @@\n one\n two\n-three\n+THREE\n four\n five\n"}},
            {"path": "removed.txt", "status": "removed", "old": file("0644", b"bye\n")},
            {"path": "run.sh", "status": "modified", "old": file("0644", b"#!/bin/sh\necho hi\n"),
             "new": file("0755", b"#!/bin/sh\necho hi\n")},
            {"path": "settings.json", "status": "modified",
             "old": file("0644", JSON_V1.as_bytes()), "new": file("0644", JSON_V2.as_bytes()),
             "content": {"kind": "keys", "format": "json", "not_shown": 0, "changes": [
                 {"path": "endpoints.api", "old": "https://a.example", "new": "https://a2.example"},
                 {"path": "flags[\"dark.mode\"]", "new": true},
                 {"path": "timeout", "old": 30, "new": 45},
             ]}},
        ],
    })
}

#[test]
fn two_real_images_diff_as_written_by_hand_in_text_and_json() {
    let reg = Registry::start(Auth::None);
    let repo = format!("{}/diff/shop", reg.host());
    let shop = Shop::new();
    let pushed = shop.push(&repo);
    let (d1, d2) = (s(&pushed[0], "digest"), s(&pushed[1], "digest"));
    let (c1, c2) = (&shop.commits[0], &shop.commits[1]);
    let (old, new) = (format!("{repo}:v1"), format!("{repo}:v2"));

    let r = diff(&[&old, &new]);
    assert_eq!(r.code, 0, "{r:?}");
    let want = format!(
        "old: {old} ({d1}, commit {c1}, 10 files)\nnew: {new} ({d2}, commit {c2}, 9 files)\n{}",
        shop_changes()
    );
    assert_eq!(r.stdout, want, "stderr: {}", r.stderr);
    eprintln!("{}", r.stdout);

    let r = diff(&[&old, &new, "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let got = r.json();
    let mut want = shop_changes_json();
    want["old"] = json!({"name": old, "digest": d1, "revision": c1,
                         "created": "2023-11-14T22:15:00Z", "files": 10});
    want["new"] = json!({"name": new, "digest": d2, "revision": c2,
                         "created": "2023-11-14T22:16:40Z", "files": 9});
    want["different"] = json!(true);
    want["changes_not_shown"] = json!(0);
    assert_eq!(got, want);
    eprintln!("{}", r.stdout);

    // By digest and by timestamp tag: the same diff.
    let by_digest = diff(&[
        &format!("{repo}@{d1}"),
        &format!("{repo}:{}", s(&pushed[1], "timestamp_tag")),
        "--json",
    ])
    .json();
    assert_eq!(by_digest["changes"], want["changes"]);

    // --exit-code: 9 when different, 0 when not; without it 0 either way.
    assert_eq!(diff(&[&old, &new, "--exit-code"]).code, 9);
    let same = diff(&[&new, &format!("{repo}@{d2}"), "--exit-code"]);
    assert_eq!(same.code, 0, "{same:?}");
    assert!(
        same.stdout.ends_with("no changes (10 unchanged)\n"),
        "{}",
        same.stdout
    );
    // The other way round: added is removed, old is new.
    let back = diff(&[&new, &old, "--json"]).json();
    let counts = &back["counts"];
    assert_eq!(
        (&counts["added"], &counts["removed"]),
        (&json!(1), &json!(2))
    );
    assert_eq!(back["changes"][1]["content"]["changes"][0]["new"], "cart");
}

#[test]
fn an_image_and_a_folder_diff_as_the_pushed_images_do() {
    let reg = Registry::start(Auth::None);
    let repo = format!("{}/diff/shop", reg.host());
    let shop = Shop::new();
    let pushed = shop.push(&repo);
    let tags_before = common::registry::tags_of(&reg, "diff/shop");
    let folder = shop.folder();
    let f = folder.to_str().expect("utf-8");
    let old = format!("{repo}:v1");

    // The folder at HEAD, built as `build` builds it: the pushed v2's
    // digest, the same changes.
    let r = diff(&[&old, "--path", f]);
    assert_eq!(r.code, 0, "{r:?}");
    let want = format!(
        "old: {old} ({}, commit {c1}, 10 files)\nnew: folder {f} ({}, commit {c2}, 9 files)\n{}",
        s(&pushed[0], "digest"),
        s(&pushed[1], "digest"),
        shop_changes(),
        c1 = shop.commits[0],
        c2 = shop.commits[1],
    );
    assert_eq!(r.stdout, want);
    let j = diff(&[&old, "--path", f, "--json"]).json();
    let hand = shop_changes_json();
    assert_eq!(
        (&j["counts"], &j["changes"]),
        (&hand["counts"], &hand["changes"])
    );
    assert_eq!(j["new"]["digest"], pushed[1]["digest"]);
    assert_eq!(j["new"]["name"], format!("folder {f}"));
    // Nothing is pushed.
    assert_eq!(common::registry::tags_of(&reg, "diff/shop"), tags_before);

    // --revision: the folder as the first commit holds it is v1.
    let r = diff(&[
        &old,
        "--path",
        f,
        "--revision",
        &shop.commits[0],
        "--exit-code",
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.ends_with("no changes (10 unchanged)\n"),
        "{}",
        r.stdout
    );

    // An edit on disk: the commit's folder (the default) does not see it,
    // --source worktree does.
    std::fs::write(folder.join("unchanged.yaml"), "same: 2\n").expect("write");
    let v2 = format!("{repo}:v2");
    let r = diff(&[&v2, "--path", f, "--exit-code"]);
    assert_eq!(r.code, 0, "{r:?}");
    let r = diff(&[&v2, "--path", f, "--source", "worktree", "--exit-code"]);
    assert_eq!(r.code, 9, "{r:?}");
    assert!(
        r.stdout.ends_with(
            "1 change: 1 modified; 9 unchanged\n\nmodified  unchanged.yaml: YAML, 1 changed key\n    same: 1 -> 2\n"
        ),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains(&format!("new: folder {f} on disk (")),
        "{}",
        r.stdout
    );

    // Bad input: exit 2 before anything is read.
    let r = diff(&[&old]);
    assert_eq!(r.code, 2, "{r:?}");
    let r = diff(&[&old, "--path", "/nonexistent/settings"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("does not exist"), "{}", r.stderr);
    let r = diff(&[&old, &format!("{repo}:nope")]);
    assert_eq!(r.code, 4, "{r:?}");
    assert!(r.stderr.contains("no such tag or digest"), "{}", r.stderr);
}

/// A repository with one file too large to compare, one with 80 keys that
/// all change, one with 400 lines that all change.
#[test]
fn the_bounds_say_what_they_left_out() {
    let reg = Registry::start(Auth::None);
    let repo = format!("{}/diff/big", reg.host());
    let st = ScratchRepo::new();
    let f = st.dir.join("configs/big");
    std::fs::create_dir_all(&f).expect("mkdir");
    let big = |last: u8| {
        let mut v = vec![b'x'; 3 << 20];
        v[(3 << 20) - 1] = last;
        v
    };
    let many = |n: u32| -> String { (0..80).map(|i| format!("key{i:02}: {n}\n")).collect() };
    let long = |word: &str| -> String { (0..400).map(|i| format!("{word} {i}\n")).collect() };
    let mut tags = Vec::new();
    for (i, (b, m, l)) in [(b'\n', 0, "line"), (b'y', 1, "LINE")]
        .into_iter()
        .enumerate()
    {
        std::fs::write(f.join("big.txt"), big(b)).expect("write");
        std::fs::write(f.join("many.yaml"), many(m)).expect("write");
        std::fs::write(f.join("long.txt"), long(l)).expect("write");
        git_at(&st.dir, &["add", "-A"], 1_700_000_000 + i as i64);
        git_at(&st.dir, &["commit", "-qm", "c"], 1_700_000_000 + i as i64);
        let tag = format!("v{i}");
        TestCommand::push_json(&f, &repo)
            .args(["--tag", &tag])
            .json();
        tags.push(format!("{repo}:{tag}"));
    }
    let r = diff(&[&tags[0], &tags[1]]);
    assert_eq!(r.code, 0, "{r:?}");
    let body = r.stdout.split_once("\n\n").expect("a blank line").1;
    // Written by hand: every one of the 400 lines changes, so the unified
    // diff is 2 headers, 1 hunk header, 400 removals and 400 additions
    // (803 lines); 200 are shown. 80 keys change; 50 are shown.
    let mut want = String::from(
        "modified  big.txt: file too large to diff: 3 MiB (the diff compares files up to 1 MiB)\n",
    );
    // 400 lines of `line N\n`: 10 x 7 + 90 x 8 + 300 x 9 = 3490 bytes,
    // 3.4 KiB.
    assert_eq!(long("line").len(), 3490);
    want.push_str("modified  long.txt: text, 3.4 KiB -> 3.4 KiB\n");
    want.push_str("    --- a/long.txt\n    +++ b/long.txt\n    @@ -1,400 +1,400 @@\n");
    for i in 0..197 {
        want.push_str(&format!("    -line {i}\n"));
    }
    want.push_str("    ... 603 more diff lines not shown\n");
    want.push_str("modified  many.yaml: YAML, 80 changed keys\n");
    for i in 0..50 {
        want.push_str(&format!("    key{i:02}: 0 -> 1\n"));
    }
    want.push_str("    ... 30 more changed keys not shown\n");
    assert_eq!(body, want);
    let j = diff(&[&tags[0], &tags[1], "--json"]).json();
    assert_eq!(
        j["changes"][0]["content"],
        json!({"kind": "too-large", "limit": 1 << 20})
    );
    assert_eq!(j["changes"][1]["content"]["not_shown"], 603);
    assert_eq!(j["changes"][2]["content"]["not_shown"], 30);
    assert_eq!(
        j["changes"][2]["content"]["changes"]
            .as_array()
            .expect("changes")
            .len(),
        50
    );
}

/// `data` gzip-compressed by the system's gzip (an independent encoder).
fn gzip(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut child = common::tool("gzip")
        .args(["-c", "-n", "-1"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("gzip");
    let mut stdin = child.stdin.take().expect("stdin");
    let data = data.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&data).expect("writing to gzip"));
    let out = child.wait_with_output().expect("gzip");
    writer.join().expect("writer");
    assert!(out.status.success());
    out.stdout
}

/// A tar of `(name, type, data or link target)` with each name written
/// into the header as it is (the tar crate's own checks would refuse
/// `..` and absolute names, which a hostile layer holds).
fn raw_tar(entries: &[(&[u8], u8, &[u8])]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (name, kind, data) in entries {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::new(*kind));
        h.set_mode(if *kind == b'2' { 0o777 } else { 0o644 });
        let gnu = h.as_gnu_mut().expect("a GNU header");
        gnu.name[..name.len()].copy_from_slice(name);
        if *kind == b'2' {
            gnu.linkname[..data.len()].copy_from_slice(data);
            h.set_size(0);
            h.set_cksum();
            b.append(&h, std::io::empty()).expect("append");
        } else {
            h.set_size(data.len() as u64);
            h.set_cksum();
            b.append(&h, *data).expect("append");
        }
    }
    b.into_inner().expect("tar")
}

#[test]
fn a_hostile_layer_is_never_followed_or_printed() {
    let reg = Registry::start(Auth::None);
    let repo = format!("{}/diff/hostile", reg.host());
    let st = ScratchRepo::new();
    let f = st.dir.join("configs/shop");
    std::fs::create_dir_all(&f).expect("mkdir");
    std::fs::write(f.join("app.yaml"), "a: 0\n").expect("write");
    std::fs::write(f.join("passwd.yaml"), "p: 1\n").expect("write");
    git_at(&st.dir, &["add", "-A"], 1_700_000_000);
    git_at(&st.dir, &["commit", "-qm", "c"], 1_700_000_000);
    let v1 = TestCommand::push_json(&f, &repo)
        .args(["--tag", "v1"])
        .json();
    // The new side: forge.py copies v1 with this layer instead.
    let layer = gzip(&raw_tar(&[
        (b"app.yaml", b'0', b"a: 1\n"),
        (b"../escape.yaml", b'0', b"stolen: TOPSECRET-ESCAPE\n"),
        (b"/abs.yaml", b'0', b"TOPSECRET-ABSOLUTE\n"),
        (b"link", b'2', b"/etc"),
        (b"link/passwd", b'0', b"TOPSECRET-BELOW-LINK\n"),
        (b"passwd.yaml", b'2', b"../../../../../../../../etc/passwd"),
        (b"evil\x1b[2J\nname.yaml", b'0', b"x: 1\n"),
    ]));
    let tmp = common::TempDir::new();
    let blob = tmp.join("layer.tar.gz");
    std::fs::write(&blob, &layer).expect("write");
    forge::image(
        &reg.host(),
        ("diff/hostile", &s(&v1, "digest")),
        ("diff/hostile", "hostile"),
        &[Edit::LayerFrom(&blob)],
    );
    // A file beside the diff's working directory with the escaping name:
    // never read.
    std::fs::write(tmp.join("escape.yaml"), "TOPSECRET-CWD\n").expect("write");
    let r = TestCommand::new()
        .args(["diff", &format!("{repo}:v1"), &format!("{repo}:hostile")])
        .current_dir(tmp.join("."))
        .run();
    assert_eq!(r.code, 0, "{r:?}");
    let body = r.stdout.split_once("\n\n").expect("a blank line").1;
    assert_eq!(
        body,
        "\
modified  app.yaml: YAML, 1 changed key
    a: 0 -> 1
added     evil\\u{1b}[2J\\nname.yaml (file, 5 bytes)
added     link (symlink to /etc)
type      passwd.yaml: file, 5 bytes -> symlink to ../../../../../../../../etc/passwd
set aside (new image): ../escape.yaml: a path with `..`: it leaves the image root
set aside (new image): /abs.yaml: an absolute path: it names a file outside the image
set aside (new image): link/passwd: below the symlink link: it names a file wherever the link points
"
    );
    let passwd = std::fs::read_to_string("/etc/passwd").expect("/etc/passwd");
    let first = passwd.lines().next().expect("a line");
    for out in [&r.stdout, &r.stderr] {
        assert!(!out.contains("TOPSECRET"), "{out}");
        assert!(!out.contains(first), "{out}");
        assert!(!out.contains('\u{1b}'), "{out}");
    }
    let j = TestCommand::new()
        .args([
            "diff",
            &format!("{repo}:v1"),
            &format!("{repo}:hostile"),
            "--json",
        ])
        .json();
    assert!(!j.to_string().contains("TOPSECRET"), "{j}");
    assert_eq!(
        j["refused"][0],
        json!({"side": "new", "path": "../escape.yaml",
        "why": "a path with `..`: it leaves the image root"})
    );

    // A layer of more entries than a diff reads (200,000): stopped there,
    // an error that says so.
    let many: Vec<(&[u8], u8, &[u8])> = vec![(b"same.yaml", b'0', b""); 200_001];
    std::fs::write(&blob, gzip(&raw_tar(&many))).expect("write");
    forge::image(
        &reg.host(),
        ("diff/hostile", &s(&v1, "digest")),
        ("diff/hostile", "many"),
        &[Edit::LayerFrom(&blob)],
    );
    let r = diff(&[&format!("{repo}:v1"), &format!("{repo}:many")]);
    assert_eq!(r.code, 4, "{r:?}");
    assert!(
        r.stderr
            .contains("it holds more than 200000 entries, where reading stopped"),
        "{}",
        r.stderr
    );
}

/// A freeze that never ends: promote waits.
const FREEZE: &str = "windows:\n  - kind: deny\n    description: freeze\n    start: \"2000-01-01T00:00:00Z\"\n    end: \"2999-01-01T00:00:00Z\"\n";

fn promote(repo: &str, extra: &[&str]) -> Run {
    TestCommand::new()
        .args([
            "promote",
            "--repository",
            repo,
            "--from",
            "main",
            "--to",
            "prod",
        ])
        .args(extra)
        .run()
}

#[test]
fn promote_shows_what_changes_in_the_cli_and_the_action_summary() {
    let reg = Registry::start(Auth::None);
    let repo = format!("{}/diff/shop", reg.host());
    let shop = Shop::new();
    let first = shop.push_one(&repo, 0);
    let t1 = s(&first, "timestamp_tag");
    // The first promotion: the channel is empty, every file is added.
    let r = promote(&repo, &[]);
    assert_eq!(r.code, 0, "{r:?}");
    let (old, new) = (format!("{repo}:prod-{}", &t1[5..]), format!("{repo}:{t1}"));
    let d1 = s(&first, "digest");
    let c1 = &shop.commits[0];
    assert!(
        r.stdout.ends_with(&format!(
            "\n\nwhat changes:\nold: channel prod (no release yet) (0 files)\nnew: {new} ({d1}, commit {c1}, 10 files)\n\
             10 changes: 10 added; 0 unchanged\n\n\
             added     app.yaml (file, 88 bytes)\n\
             added     current.yaml (file, 11 bytes)\n\
             added     extra (file, 4 bytes)\n\
             added     logo.bin (file, 300 bytes)\n\
             added     notes.txt (file, 24 bytes)\n\
             added     old-name.yaml (file, 12 bytes)\n\
             added     removed.txt (file, 4 bytes)\n\
             added     run.sh (file, 18 bytes)\n\
             added     settings.json (file, 114 bytes)\n\
             added     unchanged.yaml (file, 8 bytes)\n"
        )),
        "{}",
        r.stdout
    );
    // The second commit waits behind a freeze: the diff is what would
    // change, the channel's release against the candidate.
    let second = shop.push_one(&repo, 1);
    let t2 = s(&second, "timestamp_tag");
    let (d2, c2) = (s(&second, "digest"), &shop.commits[1]);
    let tmp = common::TempDir::new();
    std::fs::write(tmp.join("policy.yaml"), FREEZE).expect("write");
    let policy = tmp.join("policy.yaml");
    let p = policy.to_str().expect("utf-8");
    let r = promote(&repo, &["--policy", p]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.starts_with("waiting: "), "{}", r.stdout);
    let want = format!(
        "\n\nwhat changes:\nold: {old} ({d1}, commit {c1}, 10 files)\nnew: {repo}:{t2} ({d2}, commit {c2}, 9 files)\n{}",
        shop_changes()
    );
    assert!(r.stdout.ends_with(&want), "{}", r.stdout);
    let j = promote(&repo, &["--policy", p, "--json"]).json();
    assert_eq!(j["decision"], "wait");
    let hand = shop_changes_json();
    assert_eq!(
        (&j["diff"]["counts"], &j["diff"]["changes"]),
        (&hand["counts"], &hand["changes"])
    );
    assert_eq!(j["diff"]["old"]["name"], old);

    // The action: the same diff in the job summary, as Markdown.
    let ws = common::TempDir::new();
    std::fs::copy(&policy, ws.join("policy.yaml")).expect("copy");
    let r = Runner::new(common::TempDir::new(), ws.path().to_path_buf())
        .promote()
        .run(&[
            ("repository", repo.as_str()),
            ("from", "main"),
            ("to", "prod"),
            ("policy", "policy.yaml"),
        ]);
    r.ok();
    let md = &r.summary;
    let section = md
        .split_once("### What changes\n\n")
        .expect("a What changes section")
        .1
        .split("\n### ")
        .next()
        .expect("the section");
    let table = format!(
        "from <code>{old}</code> to <code>{repo}:{t2}</code>: 11 changes: 2 added, 1 removed, 5 modified, 1 renamed, 2 type changed; 1 unchanged

| change | path | |
|---|---|---|
| added | <code>added.yaml</code> | (file, 11 bytes) |
| modified | <code>app.yaml</code> | YAML, 5 changed keys |
| type | <code>current.yaml</code> | file, 11 bytes -&gt; symlink to app.yaml |
| type | <code>extra</code> | file, 4 bytes -&gt; directory |
| added | <code>extra/inner.txt</code> | (file, 6 bytes) |
| modified | <code>logo.bin</code> | binary, 300 bytes -&gt; 301 bytes, {} -&gt; {} |
| renamed | <code>new-name.yaml</code> | (from old-name.yaml, same content) |
| modified | <code>notes.txt</code> | text, 24 bytes -&gt; 24 bytes |
| removed | <code>removed.txt</code> | (file, 4 bytes) |
| modified | <code>run.sh</code> | mode 0644 -&gt; 0755 |
| modified | <code>settings.json</code> | JSON, 3 changed keys |

<details><summary><code>app.yaml</code></summary>

```
features[1]: \"cart\" -> (absent)
image.pullPolicy: (absent) -> \"Always\"
image.tag: \"1.4\" -> \"1.5\"
limits: {{\"cpu\":\"500m\"}} -> (absent)
replicas: 2 -> 3
```
</details>

<details><summary><code>notes.txt</code></summary>

```diff
--- a/notes.txt
+++ b/notes.txt
@@ -1,5 +1,5 @@
 one
 two
-three
+THREE
 four
 five
```
</details>

<details><summary><code>settings.json</code></summary>

```
endpoints.api: \"https://a.example\" -> \"https://a2.example\"
flags[\"dark.mode\"]: (absent) -> true
timeout: 30 -> 45
```
</details>
",
        &sha(&logo(300))[..19],
        &sha(&logo(301))[..19]
    );
    assert_eq!(section, table);

    // Promoted: the same diff; up to date: none.
    let r = promote(&repo, &[]);
    assert!(r.stdout.starts_with("promoted "), "{r:?}");
    assert!(r.stdout.ends_with(&want), "{}", r.stdout);
    let r = promote(&repo, &["--json"]).json();
    assert_eq!(r["decision"], "up-to-date");
    assert!(r.get("diff").is_none(), "{r}");
}

#[test]
fn the_publish_summary_shows_what_changed_since_the_image_before() {
    let reg = Registry::start(Auth::None);
    let repo = format!("{}/diff/shop", reg.host());
    let shop = Shop::new();
    let ws = &shop.repo.dir;
    let runner = Runner::new(common::TempDir::new(), ws.clone());
    let run = |revision: &str| -> (Step, String) {
        // The first commit is checked out for the first run.
        shop.repo.git(&["checkout", "-q", revision]);
        let step = runner.run(&[
            ("path", "configs/shop"),
            ("repository", repo.as_str()),
            ("timestamp-tag", "main"),
            ("provenance", "false"),
        ]);
        let md = step.summary.clone();
        (step, md)
    };
    let (r, md) = run(&shop.commits[0]);
    r.ok();
    assert!(
        md.contains(
            "\n#### What changed since the image before it\n\nthe first image under the prefix main: nothing to compare with\n"
        ),
        "{md}"
    );
    let (r, md) = run(&shop.commits[1]);
    r.ok();
    let t1 = format!("main-1700000100-{}", &shop.commits[0][..7]);
    let t2 = format!("main-1700000200-{}", &shop.commits[1][..7]);
    assert!(
        md.contains(&format!(
            "\n#### What changed since the image before it\n\nfrom <code>{repo}:{t1}</code> to <code>{repo}:{t2}</code>: \
             11 changes: 2 added, 1 removed, 5 modified, 1 renamed, 2 type changed; 1 unchanged\n\n\
             | change | path | |\n|---|---|---|\n| added | <code>added.yaml</code> | (file, 11 bytes) |\n"
        )),
        "{md}"
    );
    assert!(
        md.contains("<details><summary><code>app.yaml</code></summary>\n\n```\nfeatures[1]: \"cart\" -> (absent)\n"),
        "{md}"
    );
}
