//! The project met by the OCI tools of the Go ecosystem (pinned by
//! tests/go/oci): `oras discover` lists the provenance and promotion
//! referrers that `push` and `promote` attach and `oras pull` gives their
//! content, on distribution 2.8 (no referrers API: the referrers tag
//! schema) and on go-containerregistry's registry (the referrers API);
//! `crane manifest`, `crane config` and `crane export` read a pushed image
//! as `build` wrote it, with the files of `git archive`; `verify` and
//! `inspect` pass through the referrers API of a real registry.
//!
//! What go-containerregistry's registry shows and does not (v0.22.1): it
//! lists a referrer with its config's media type as `artifactType`
//! (`application/vnd.oci.empty.v1+json` for ours, whose `artifactType` is
//! in the manifest), so `oras discover` prints that type there and
//! `oras discover --artifact-type application/vnd.in-toto+json` lists
//! nothing; it sends no `OCI-Subject`, so `push` writes the referrers tag
//! as well (tests/common/subject_stub.rs is the stub that answers it).

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use common::TempDir;
use common::cmd::TestCommand;
use common::git::ScratchRepo;
use common::oci::{ReferrersRegistry, crane, oras, oras_discover, oras_discover_tree};
use common::registry::{Auth, Registry};
use serde_json::Value;

const IN_TOTO: &str = "application/vnd.in-toto+json";
const PROMOTION: &str = "application/vnd.settings-image.promotion.v1+json";
const EMPTY: &str = "application/vnd.oci.empty.v1+json";
const NAME: &str = "acme/shop";

/// A registry of each kind the tests run oras on.
enum Reg {
    /// distribution 2.8: the referrers tag schema.
    Distribution(Registry),
    /// go-containerregistry's: the referrers API.
    Referrers(ReferrersRegistry),
}

impl Reg {
    fn both() -> [Reg; 2] {
        [
            Reg::Distribution(Registry::start(Auth::None)),
            Reg::Referrers(ReferrersRegistry::start()),
        ]
    }

    fn host(&self) -> String {
        match self {
            Reg::Distribution(r) => r.host(),
            Reg::Referrers(r) => r.host.clone(),
        }
    }

    fn repo(&self) -> String {
        format!("{}/{NAME}", self.host())
    }

    /// The artifact type the registry lists for one of our referrers of
    /// type `t`: ours from the tag schema's index, the empty config's from
    /// go-containerregistry's API.
    fn listed_type(&self, t: &str) -> &'static str {
        match self {
            Reg::Distribution(_) => match t {
                IN_TOTO => IN_TOTO,
                _ => PROMOTION,
            },
            Reg::Referrers(_) => EMPTY,
        }
    }

    fn what(&self) -> &'static str {
        match self {
            Reg::Distribution(_) => "distribution 2.8 (referrers tag schema)",
            Reg::Referrers(_) => "go-containerregistry (referrers API)",
        }
    }
}

/// A settings repository with `configs/shop` (a file in a subfolder, an
/// executable one), committed at a fixed time, with a GitHub remote.
struct Settings {
    repo: ScratchRepo,
}

impl Settings {
    fn new() -> Settings {
        let s = Settings {
            repo: ScratchRepo::new(),
        };
        let dir = &s.repo.dir;
        std::fs::create_dir_all(dir.join("configs/shop/features")).unwrap();
        std::fs::write(dir.join("configs/shop/app.yaml"), "port: 8080\n").unwrap();
        std::fs::write(dir.join("configs/shop/features/flags.yaml"), "beta: true\n").unwrap();
        std::fs::write(dir.join("configs/shop/hook.sh"), "#!/bin/sh\necho hi\n").unwrap();
        std::fs::write(dir.join("README.md"), "not in the image\n").unwrap();
        std::fs::set_permissions(
            dir.join("configs/shop/hook.sh"),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        s.repo.git(&[
            "remote",
            "add",
            "origin",
            "https://github.com/acme/settings.git",
        ]);
        s.repo.commit_all("shop", 1_700_000_000);
        s
    }

    fn folder(&self) -> String {
        self.repo.dir.join("configs/shop").display().to_string()
    }

    /// The commit, as git names it (the oracle).
    fn head(&self) -> String {
        self.repo.git(&["rev-parse", "HEAD"])
    }
}

fn push(s: &Settings, repo: &str, extra: &[&str]) -> Value {
    TestCommand::push_json(s.folder(), repo).args(extra).json()
}

fn str_of(v: &Value, k: &str) -> String {
    v[k].as_str()
        .unwrap_or_else(|| panic!("{k} missing in {v}"))
        .to_string()
}

/// The referrer of `digest` in `oras discover`'s JSON.
fn discovered<'a>(d: &'a Value, digest: &str) -> &'a Value {
    d["referrers"]
        .as_array()
        .expect("referrers")
        .iter()
        .find(|r| r["digest"] == digest)
        .unwrap_or_else(|| panic!("oras discover does not list {digest}: {d}"))
}

/// `oras pull` of `reference` into a fresh folder: the file `name` it
/// saved, as JSON.
fn oras_pull(reference: &str, name: &str) -> Value {
    let out = TempDir::new();
    oras(&[
        "pull",
        "--plain-http",
        "-o",
        out.path().to_str().unwrap(),
        reference,
    ]);
    let file = out.join(name);
    let bytes = std::fs::read(&file).unwrap_or_else(|e| {
        panic!(
            "oras pull {reference} saved no {name} ({e}); it saved {:?}",
            std::fs::read_dir(out.path())
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect::<Vec<_>>()
        )
    });
    serde_json::from_slice(&bytes).expect("the pulled file is JSON")
}

#[test]
fn oras_discover_and_pull_give_the_provenance_on_both_registries() {
    let s = Settings::new();
    let commit = s.head();
    for reg in Reg::both() {
        let repo = reg.repo();
        let out = push(&s, &repo, &["--timestamp-tag", "main"]);
        let digest = str_of(&out, "digest");
        let prov = str_of(&out, "provenance");
        let subject = format!("{repo}@{digest}");
        // As a person reads it (printed for the record of a run).
        eprintln!(
            "oras discover on {}:\n{}",
            reg.what(),
            oras_discover_tree(&subject)
        );

        let d = oras_discover(&subject, &[]);
        assert_eq!(d["digest"], digest.as_str());
        let listed = d["referrers"].as_array().unwrap();
        assert_eq!(listed.len(), 1, "{}: {d}", reg.what());
        let r = discovered(&d, &prov);
        assert_eq!(
            r["artifactType"],
            reg.listed_type(IN_TOTO),
            "{}: {r}",
            reg.what()
        );
        assert_eq!(
            r["annotations"]["org.opencontainers.image.revision"],
            commit.as_str()
        );
        // oras filters on the type the registry lists.
        let filtered = oras_discover(&subject, &["--artifact-type", IN_TOTO]);
        let n = filtered["referrers"].as_array().map_or(0, Vec::len);
        assert_eq!(
            n,
            usize::from(reg.listed_type(IN_TOTO) == IN_TOTO),
            "{}: {filtered}",
            reg.what()
        );
        // The manifest itself says in-toto on both.
        let m: Value = serde_json::from_slice(
            &oras(&[
                "manifest",
                "fetch",
                "--plain-http",
                &format!("{repo}@{prov}"),
            ])
            .stdout,
        )
        .unwrap();
        assert_eq!(m["artifactType"], IN_TOTO);
        assert_eq!(m["subject"]["digest"], digest.as_str());

        // oras pull: the statement, naming the image and the commit.
        let st = oras_pull(&format!("{repo}@{prov}"), "provenance.intoto.json");
        assert_eq!(st["_type"], "https://in-toto.io/Statement/v1");
        assert_eq!(
            st["subject"][0]["digest"]["sha256"],
            digest.trim_start_matches("sha256:")
        );
        assert_eq!(
            st["predicate"]["buildDefinition"]["resolvedDependencies"][0]["digest"]["gitCommit"],
            commit.as_str(),
            "{st}"
        );
    }
}

#[test]
fn oras_discover_lists_the_promotion_record_and_pull_gives_it() {
    let s = Settings::new();
    for reg in Reg::both() {
        let repo = reg.repo();
        let out = push(&s, &repo, &["--timestamp-tag", "main"]);
        let digest = str_of(&out, "digest");
        let prov = str_of(&out, "provenance");
        let p = TestCommand::new()
            .args([
                "promote",
                "--repository",
                &repo,
                "--from",
                "main",
                "--to",
                "prod",
                "--json",
            ])
            .json();
        assert_eq!(p["promoted"], true, "{p}");
        let record = str_of(&p, "record");
        let tag = str_of(&p, "tag");
        let subject = format!("{repo}@{digest}");
        eprintln!(
            "oras discover after promote on {}:\n{}",
            reg.what(),
            oras_discover_tree(&subject)
        );

        let d = oras_discover(&subject, &[]);
        let mut kinds: Vec<(String, String)> = d["referrers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["digest"].as_str().unwrap().to_string(),
                    r["artifactType"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect();
        kinds.sort();
        let mut want = vec![
            (prov.clone(), reg.listed_type(IN_TOTO).to_string()),
            (record.clone(), reg.listed_type(PROMOTION).to_string()),
        ];
        want.sort();
        assert_eq!(kinds, want, "{}: {d}", reg.what());
        assert_eq!(
            discovered(&d, &record)["annotations"]["dev.settings-image.promotion.tag"],
            tag.as_str()
        );

        let rec = oras_pull(&format!("{repo}@{record}"), "promotion.json");
        assert_eq!(rec["tag"], tag.as_str());
        assert_eq!(rec["digest"], digest.as_str());
        assert!(
            out["tags"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| *t == rec["from_tag"]),
            "{rec} {out}"
        );
    }
}

/// Files of a folder: relative path -> (content, executable).
fn tree(root: &Path) -> BTreeMap<String, (Vec<u8>, bool)> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            if meta.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(root).unwrap().display().to_string();
                let exec = meta.permissions().mode() & 0o111 != 0;
                out.insert(rel, (std::fs::read(&p).unwrap(), exec));
            }
        }
    }
    out
}

/// Extracts the tar stream `bytes` with GNU tar into a fresh folder.
fn untar(bytes: &[u8]) -> TempDir {
    use std::io::Write;
    let dir = TempDir::new();
    let mut child = Command::new(common::require("tar"))
        .args(["-x", "--no-same-owner", "-C"])
        .arg(dir.path())
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    assert!(child.wait().unwrap().success(), "tar -x failed");
    dir
}

#[test]
fn crane_reads_the_pushed_image_as_build_wrote_it() {
    let s = Settings::new();
    // The files, as git has them in the commit (the oracle).
    let archive = s
        .repo
        .cmd(&s.repo.dir)
        .args(["archive", "--format=tar", "HEAD:configs/shop"])
        .output()
        .unwrap();
    assert!(archive.status.success());
    let want = tree(untar(&archive.stdout).path());
    assert_eq!(want.len(), 3, "{:?}", want.keys());

    let layout = TempDir::new();
    let built = common::build(Path::new(&s.folder()), &layout.join("oci"), &["v1"]);
    let blob = |d: &str| {
        std::fs::read(
            layout
                .join("oci/blobs/sha256")
                .join(d.trim_start_matches("sha256:")),
        )
        .unwrap()
    };
    let built_digest = str_of(&built, "digest");
    let built_manifest = blob(&built_digest);
    let built_config = blob(&str_of(&built, "config_digest"));

    for reg in Reg::both() {
        let repo = reg.repo();
        let out = push(&s, &repo, &["--tag", "v1"]);
        assert_eq!(out["digest"], built_digest.as_str(), "{}", reg.what());
        let image = format!("{repo}:v1");
        assert_eq!(
            String::from_utf8(crane(&["digest", &image]).stdout)
                .unwrap()
                .trim(),
            built_digest
        );
        assert_eq!(
            crane(&["manifest", &image]).stdout,
            built_manifest,
            "crane manifest on {}",
            reg.what()
        );
        assert_eq!(
            crane(&["config", &image]).stdout,
            built_config,
            "crane config on {}",
            reg.what()
        );
        let exported = crane(&["export", &image, "-"]).stdout;
        let got = tree(untar(&exported).path());
        assert_eq!(got, want, "crane export on {} vs git archive", reg.what());
    }
}

#[test]
fn verify_and_inspect_pass_through_the_referrers_api_of_a_real_registry() {
    let s = Settings::new();
    let reg = ReferrersRegistry::start();
    let repo = format!("{}/{NAME}", reg.host);
    let out = push(&s, &repo, &["--tag", "v1"]);
    let digest = str_of(&out, "digest");
    let before = reg.requests().len();
    let v = TestCommand::new()
        .args(["verify", &format!("{repo}:v1"), "--path", &s.folder()])
        .run();
    assert_eq!(v.code, 0, "verify failed: {} {}", v.stdout, v.stderr);
    let asked = reg.requests()[before..].to_vec();
    assert!(
        asked
            .iter()
            .any(|l| l.starts_with(&format!("GET /v2/{NAME}/referrers/{digest}"))),
        "{asked:?}"
    );
    assert!(
        !asked.iter().any(|l| l.contains("/manifests/sha256-")),
        "verify read the referrers tag on a registry with the API: {asked:?}"
    );
    let i = TestCommand::new()
        .args(["inspect", &format!("{repo}:v1"), "--json"])
        .json();
    assert_eq!(i["provenance"]["commit"], s.head().as_str(), "{i}");

    // An image without provenance fails there as on distribution (exit 7).
    let bare = push(
        &s,
        &format!("{}/acme/bare", reg.host),
        &["--tag", "v1", "--no-provenance"],
    );
    assert!(bare["provenance"].is_null(), "{bare}");
    let v = TestCommand::new()
        .args([
            "verify",
            &format!("{}/acme/bare:v1", reg.host),
            "--path",
            &s.folder(),
        ])
        .run();
    assert_eq!(v.code, 7, "{} {}", v.stdout, v.stderr);
}
