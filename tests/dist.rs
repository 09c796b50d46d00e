//! The release archive, installed as a user without a compiler would: a
//! test unpacks what `scripts/dist.sh --staged` made (from the binary the
//! test command stages, `scripts/action-image.sh --test-profile`; the
//! release workflow packages its release binaries the same way) into an
//! empty container, `FROM scratch` plus Debian's static busybox, and runs
//! `--version` and a build there. The archive's names agree with what
//! `cargo binstall` derives from Cargo.toml, its SHA256SUMS checks out,
//! and two runs give the same bytes.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::cmd::TestCommand;

/// The package's version and `[package.metadata.binstall]`, as cargo reads
/// Cargo.toml.
fn package() -> serde_json::Value {
    let out = common::run_ok(
        Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args([
                "metadata",
                "--no-deps",
                "--format-version",
                "1",
                "--offline",
            ])
            .current_dir(common::repo()),
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "settings-image")
        .unwrap()
        .clone()
}

/// Runs `scripts/dist.sh --staged` into `out`; the archive's path.
fn dist(out: &Path) -> PathBuf {
    let staged = common::repo().join("target/action-image/amd64/settings-image");
    assert!(
        staged.is_file(),
        "no staged binary at {}: the test command stages it (`bash scripts/action-image.sh --test-profile`)",
        staged.display()
    );
    common::run_ok(
        common::tool("bash")
            .arg(common::repo().join("scripts/dist.sh"))
            .arg("--staged")
            .env("DIST_DIR", out),
    );
    let archives: Vec<PathBuf> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".tar.gz"))
        .collect();
    assert_eq!(archives.len(), 1, "{archives:?}");
    archives.into_iter().next().unwrap()
}

/// Expands a binstall template (`{ name }`, `{ version }`, ...).
fn expand(template: &str, vars: &[(&str, &str)]) -> String {
    let mut s = template.to_string();
    for (k, v) in vars {
        s = s.replace(&format!("{{ {k} }}"), v);
    }
    assert!(!s.contains('{'), "an unknown placeholder in {template}");
    s
}

#[test]
fn the_archive_installs_into_an_empty_container_and_builds() {
    let pkg = package();
    let version = pkg["version"].as_str().unwrap();
    let target = "x86_64-unknown-linux-gnu";
    let tmp = common::TempDir::new();
    let out = tmp.join("dist");
    let archive = dist(&out);

    // The names cargo binstall asks GitHub for: the release URL's file
    // name is the archive, and the binary is where bin-dir says.
    let binstall = &pkg["metadata"]["binstall"];
    let vars = [
        ("repo", pkg["repository"].as_str().unwrap()),
        ("name", "settings-image"),
        ("version", version),
        ("target", target),
        ("archive-suffix", ".tar.gz"),
        ("bin", "settings-image"),
        ("binary-ext", ""),
    ];
    let url = expand(binstall["pkg-url"].as_str().unwrap(), &vars);
    let file = archive.file_name().unwrap().to_str().unwrap();
    assert_eq!(
        url,
        format!(
            "https://github.com/ConfigButler/settings-image/releases/download/v{version}/{file}"
        )
    );
    let bin_dir = expand(binstall["bin-dir"].as_str().unwrap(), &vars);
    // A musl system gets the same static archive.
    let musl = &binstall["overrides"]["x86_64-unknown-linux-musl"];
    assert_eq!(expand(musl["pkg-url"].as_str().unwrap(), &vars), url);

    // SHA256SUMS checks out, as the README has users check it.
    common::run_ok(
        common::tool("sha256sum")
            .args(["-c", "--ignore-missing", "SHA256SUMS"])
            .current_dir(&out),
    );

    // What the archive holds.
    let listing = common::stdout_of(common::tool("tar").arg("-tzvf").arg(&archive));
    let top = file.trim_end_matches(".tar.gz");
    let entry = |rel: &str| {
        listing
            .lines()
            .find(|l| l.ends_with(&format!(" {top}/{rel}")))
            .unwrap_or_else(|| panic!("{rel} is not in the archive:\n{listing}"))
            .to_string()
    };
    assert!(entry(&bin_dir[top.len() + 1..]).starts_with("-rwxr-xr-x 0/0 "));
    for rel in [
        "README.md",
        "docs/README.md",
        "docs/cli.md",
        "completions/settings-image.bash",
        "completions/_settings-image",
        "completions/settings-image.fish",
        "man/settings-image.1",
        "man/settings-image-push.1",
    ] {
        assert!(entry(rel).starts_with("-rw-r--r-- 0/0 "), "{}", entry(rel));
    }
    for licence in ["LICENSE", "LICENSE-MIT", "LICENSE-APACHE", "COPYING"] {
        if common::repo().join(licence).is_file() {
            entry(licence);
        }
    }
    // The crates' licences travel with the binary that holds their code.
    // The oracle is the binary itself: the source paths its panic messages
    // keep (`index.crates.io-HASH/NAME-VERSION/src/...`) name crates
    // compiled into it, each of which the notices must list.
    assert!(entry("THIRD-PARTY-LICENSES.txt").starts_with("-rw-r--r-- 0/0 "));
    let notices = common::stdout_of(
        common::tool("tar")
            .arg("-xzOf")
            .arg(&archive)
            .arg(format!("{top}/THIRD-PARTY-LICENSES.txt")),
    );
    let binary = std::fs::read(common::repo().join("target/action-image/amd64/settings-image"))
        .expect("the staged binary");
    let paths = regex::bytes::Regex::new(
        r"index\.crates\.io-[0-9a-f]+/([A-Za-z0-9_-]+?)-([0-9]+\.[0-9]+\.[0-9]+[A-Za-z0-9.+-]*)/",
    )
    .unwrap();
    let in_binary: std::collections::BTreeSet<(String, String)> = paths
        .captures_iter(&binary)
        .map(|c| {
            (
                String::from_utf8_lossy(&c[1]).into_owned(),
                String::from_utf8_lossy(&c[2]).into_owned(),
            )
        })
        .collect();
    assert!(
        in_binary.len() > 50,
        "only {} crate source paths in the binary: the oracle no longer sees them",
        in_binary.len()
    );
    let listed: std::collections::BTreeSet<(String, String)> = notices
        .lines()
        .filter_map(|l| {
            let (crate_version, _) = l.split_once(": ")?;
            let (name, version) = crate_version.split_once(' ')?;
            Some((name.to_string(), version.to_string()))
        })
        .collect();
    let unlisted: Vec<_> = in_binary.difference(&listed).collect();
    assert!(
        unlisted.is_empty(),
        "crates compiled into the binary without their licence in THIRD-PARTY-LICENSES.txt: {unlisted:?}"
    );
    for (name, version) in [("tokio", ""), ("serde", ""), ("gix", "")] {
        assert!(
            listed
                .iter()
                .any(|(n, v)| n == name && v.starts_with(version)),
            "{name} is not listed"
        );
    }
    assert!(
        notices.contains("Permission is hereby granted, free of charge")
            && notices.contains("Apache License"),
        "the MIT and Apache-2.0 texts are not in the notices"
    );

    // The README's install, pasted into a shell with a fresh HOME and no
    // network: each `curl -fsSLO URL` takes the file of that name from
    // what dist.sh made (a release holds the same names). It verifies,
    // unpacks, installs and runs the binary, as printed.
    let readme = std::fs::read_to_string(common::repo().join("README.md")).unwrap();
    let install = readme
        .split("\n## Install\n")
        .nth(1)
        .and_then(|r| r.split("```sh\n").nth(1))
        .and_then(|b| b.split("```").next())
        .expect("the README's Install has an sh block");
    let user = tmp.join("user");
    std::fs::create_dir_all(user.join("home")).unwrap();
    let pasted = install.replace("curl -fsSLO ", "fetch ");
    assert_ne!(
        pasted, install,
        "the install no longer downloads with curl -fsSLO"
    );
    let shell = format!(
        "fetch() {{ cp \"{}/$(basename \"$1\")\" .; }}\n{pasted}",
        out.display()
    );
    let installed = common::run_ok(
        common::tool("bash")
            .args(["--noprofile", "--norc", "-euo", "pipefail", "-c", &shell])
            .current_dir(&user)
            .env_clear()
            .env("HOME", user.join("home"))
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"),
    );
    let said = String::from_utf8_lossy(&installed.stdout);
    assert!(
        said.contains(&format!("settings-image {version} (commit ")),
        "{said}"
    );
    assert!(user.join("home/.local/bin/settings-image").is_file());

    // Reproducible: packaging again gives the same bytes.
    let again = dist(&tmp.join("again"));
    assert_eq!(
        std::fs::read(&archive).unwrap(),
        std::fs::read(&again).unwrap(),
        "two runs of scripts/dist.sh gave different archives"
    );

    // FROM scratch, busybox, the archive unpacked by ADD, and a settings
    // folder: nothing else (no libc, no certificates).
    let ctx = tmp.join("ctx");
    std::fs::create_dir_all(ctx.join("shop")).unwrap();
    std::fs::copy(common::require("busybox"), ctx.join("busybox")).unwrap();
    std::fs::copy(&archive, ctx.join(file)).unwrap();
    for f in ["app.yaml", "database.json"] {
        std::fs::copy(
            common::repo().join("examples/shop").join(f),
            ctx.join("shop").join(f),
        )
        .unwrap();
    }
    std::fs::write(
        ctx.join("Containerfile"),
        format!("FROM scratch\nCOPY busybox /bin/busybox\nADD {file} /opt/\nCOPY shop /shop\n"),
    )
    .unwrap();
    let podman = common::Podman::new(&tmp.join("p"));
    let image = "localhost/settings-image-archive:test";
    common::run_ok(
        podman
            .buildah()
            .args(["bud", "--layers=false", "-f"])
            .arg(ctx.join("Containerfile"))
            .args(["-t", image])
            .arg(&ctx),
    );
    let work = tmp.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let inside = format!("/opt/{bin_dir}");
    let run = common::run_ok(
        podman
            .cmd()
            .args(["run", "--rm", "--network=none", "-e", "TMPDIR=/out", "-v"])
            .arg(format!("{}:/out", work.display()))
            .args([
                image,
                "/bin/busybox",
                "sh",
                "-c",
                &format!(
                    "{inside} --version && {inside} build --path /shop --output /out/layout --tag v1"
                ),
            ]),
    );
    let stdout = String::from_utf8_lossy(&run.stdout);
    // The version line of the binary the archive carries.
    let version_line = TestCommand::new().arg("--version").ok();
    assert!(
        stdout.starts_with(&version_line),
        "the archive's binary is not this build: it says\n{}\nthis build says\n{version_line}\
         stage it again: bash scripts/action-image.sh --test-profile",
        stdout.lines().next().unwrap_or("")
    );
    // The container built what the same binary builds outside it: the
    // same digest for the same files.
    let digest = |text: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix("digest "))
            .map(str::to_string)
            .unwrap_or_else(|| panic!("no digest in:\n{text}"))
    };
    let here = TestCommand::new()
        .args(["build", "--path"])
        .arg(ctx.join("shop"))
        .arg("--output")
        .arg(tmp.join("here"))
        .ok();
    assert_eq!(digest(&stdout), digest(&here));
    let inspect = common::stdout_of(
        common::tool("skopeo")
            .arg("inspect")
            .arg(format!("oci:{}:v1", work.join("layout").display())),
    );
    assert!(inspect.contains(&digest(&here)), "{inspect}");
}

/// The release workflow's pin step, run as GitHub runs it (bash, its
/// environment) in a clone of these manifests with a bare origin: the
/// actions and the controller's Deployment name one image, the release's
/// version and digest, and `vX.Y.Z` and `vX` move to that commit.
#[test]
fn the_release_pins_one_image_into_the_actions_and_the_deployment() {
    let wf: serde_yaml_ng::Value = serde_yaml_ng::from_str(
        &std::fs::read_to_string(common::repo().join(".github/workflows/release.yml")).unwrap(),
    )
    .unwrap();
    let step = wf["jobs"]["pin"]["steps"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|s| s["run"].as_str().is_some_and(|r| r.contains("git tag -f")))
        .expect("the pin step")
        .clone();
    let image = step["env"]["IMAGE"].as_str().unwrap().to_string();
    let script = step["run"].as_str().unwrap().to_string();

    let tmp = common::TempDir::new();
    let git = |dir: &Path, args: &[&str]| {
        common::stdout_of(
            common::tool("git")
                .args(["-c", "user.name=n", "-c", "user.email=n@example.com"])
                .args(args)
                .current_dir(dir),
        )
    };
    let origin = tmp.join("origin.git");
    std::fs::create_dir_all(&origin).unwrap();
    git(&origin, &["init", "-q", "--bare", "-b", "main"]);
    let wt = tmp.join("wt");
    std::fs::create_dir_all(&wt).unwrap();
    git(&wt, &["init", "-q", "-b", "main"]);
    for rel in [
        "action.yml",
        "promote/action.yml",
        "config/manager/deployment.yaml",
    ] {
        std::fs::create_dir_all(wt.join(rel).parent().unwrap()).unwrap();
        std::fs::copy(common::repo().join(rel), wt.join(rel)).unwrap();
    }
    git(&wt, &["add", "-A"]);
    git(&wt, &["commit", "-q", "-m", "release candidate"]);
    git(&wt, &["tag", "v9.8.7"]);
    git(&wt, &["remote", "add", "origin", origin.to_str().unwrap()]);
    git(&wt, &["push", "-q", "origin", "main", "v9.8.7"]);

    let pin = |digest: &str| {
        common::tool("bash")
            .args(["--noprofile", "--norc", "-eo", "pipefail", "-c", &script])
            .current_dir(&wt)
            .env("IMAGE", &image)
            .env("VERSION", "v9.8.7")
            .env("DIGEST", digest)
            .env("GITHUB_STEP_SUMMARY", tmp.join("summary.md"))
            .output()
            .unwrap()
    };
    // No digest from the image job: refused, nothing pinned.
    let refused = pin("");
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stdout).contains("::error::the image job gave no digest")
    );

    let digest = format!("sha256:{}", "ab".repeat(32));
    let out = pin(&digest);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let pinned = git(&origin, &["rev-parse", "v9.8.7^{commit}"]);
    assert_eq!(pinned, git(&origin, &["rev-parse", "v9^{commit}"]));
    let show = |rel: &str| git(&origin, &["show", &format!("v9.8.7:{rel}")]);
    let reference = format!("{image}:v9.8.7@{digest}");
    for rel in ["action.yml", "promote/action.yml"] {
        assert!(
            show(rel)
                .lines()
                .any(|l| l == format!("  image: docker://{reference}")),
            "{rel}:\n{}",
            show(rel)
        );
    }
    let deployment = show("config/manager/deployment.yaml");
    let images: Vec<&str> = deployment
        .lines()
        .filter_map(|l| l.trim().strip_prefix("image: "))
        .collect();
    assert_eq!(images, [reference.as_str()], "{deployment}");
}
