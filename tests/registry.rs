//! `settings-image push` against a real registry (CNCF distribution 2.8),
//! read back by independent consumers (skopeo, podman, containerd), with
//! faults injected by a proxy, and with Basic and Bearer-token auth.

use crate::common;

use common::cmd::TestCommand;
use common::registry::*;
use common::require;

fn s(v: &serde_json::Value, k: &str) -> String {
    v[k].as_str()
        .unwrap_or_else(|| panic!("no string {k} in {v}"))
        .to_string()
}

const TS_TAG: &str = "main-1700000000-abcdef0";

#[test]
fn push_is_read_by_skopeo_podman_and_containerd() {
    let reg = Registry::start(Auth::None);
    let dir = settings(3, "consumers");
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::write(dir.path().join("sub/app.toml"), "port = 8080\n").unwrap();
    let repo = format!("{}/team/settings", reg.host());
    let d = dir.path().to_str().unwrap();
    let out = TestCommand::push_json(d, &repo)
        .tags(&["latest", TS_TAG])
        .json();
    let digest = s(&out, "digest");
    assert!(digest.starts_with("sha256:") && digest.len() == 71);
    assert_eq!(s(&out, "reference"), format!("{repo}:latest@{digest}"));
    assert_eq!(out["tags"], serde_json::json!(["latest", TS_TAG]));
    assert_eq!(out["uploaded_blobs"], 2);
    let layer_size = out["layer"]["size"].as_u64().unwrap();
    let config_len = skopeo_config_len(&format!("{repo}:latest"));
    assert_eq!(
        out["uploaded_bytes"].as_u64().unwrap(),
        layer_size + config_len
    );
    assert_eq!(out["pushed"], true);

    // The same digest as `build` computes for the folder.
    let layout = common::TempDir::new();
    let out_dir = layout.path().join("l");
    let b = TestCommand::new()
        .args([
            "build",
            "--path",
            d,
            "--output",
            out_dir.to_str().unwrap(),
            "--json",
        ])
        .json();
    assert_eq!(s(&b, "digest"), digest);

    // skopeo: both tags name our digest.
    for tag in ["latest", TS_TAG] {
        let inspect = skopeo_inspect(&format!("{repo}:{tag}"), None).expect("tag exists");
        assert_eq!(inspect["Digest"].as_str(), Some(digest.as_str()), "{tag}");
    }

    // podman pulls it and mounts it as an image volume into a runc container.
    let (cat, ls) = podman_read(&reg.host(), &format!("{repo}:{TS_TAG}"), "sub/app.toml");
    assert_eq!(cat, "port = 8080\n");
    for f in ["f00.yaml", "f01.yaml", "f02.yaml", "sub"] {
        assert!(ls.lines().any(|l| l == f), "{f} missing from {ls}");
    }

    // containerd pulls over plain HTTP and mounts the image.
    let ctd_dir = common::TempDir::new();
    let cd = common::Containerd::start(ctd_dir.path());
    let reference = format!("{repo}:latest");
    let ctr = |args: &[&str]| common::stdout_of(cd.ctr().args(args));
    ctr(&[
        "images",
        "pull",
        "--plain-http",
        "--snapshotter",
        "native",
        &reference,
    ]);
    let listed = ctr(&["images", "ls"]);
    assert!(listed.contains(&digest), "ctr images ls: {listed}");
    let mnt = common::TempDir::new();
    let m = mnt.path().to_str().unwrap();
    ctr(&["images", "mount", "--snapshotter", "native", &reference, m]);
    let _unmount = common::MountGuard(mnt.path().to_path_buf());
    let content = std::fs::read_to_string(mnt.path().join("f01.yaml"));
    let app = std::fs::read_to_string(mnt.path().join("sub/app.toml"));
    ctr(&["images", "unmount", m]);
    assert_eq!(content.unwrap(), "key1: value-consumers-1\n");
    assert_eq!(app.unwrap(), "port = 8080\n");
}

fn skopeo_config_len(reference: &str) -> u64 {
    let out = std::process::Command::new("skopeo")
        .args(["inspect", "--tls-verify=false", "--no-creds", "--raw"])
        .arg(format!("docker://{reference}"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let m: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    m["config"]["size"].as_u64().unwrap()
}

#[test]
fn repush_uploads_nothing_and_makes_few_requests() {
    let reg = Registry::start(Auth::None);
    let proxy = Proxy::start(reg.port);
    let dir = settings(5, "repush");
    let d = dir.path().to_str().unwrap();
    let repo = format!("{}/repush", proxy.host());
    let first = TestCommand::push_json(d, &repo)
        .tags(&["latest", TS_TAG])
        .json();
    assert_eq!(first["pushed"], true);
    let seen = proxy.take();
    assert_eq!(
        seen.iter()
            .filter(|r| r.method == "PUT" && r.path.contains("/manifests/"))
            .count(),
        2,
        "one manifest PUT per tag: {seen:?}"
    );

    let again = TestCommand::push_json(d, &repo)
        .tags(&["latest", TS_TAG])
        .json();
    assert_eq!(again["uploaded_blobs"], 0);
    assert_eq!(again["uploaded_bytes"], 0);
    assert_eq!(again["pushed"], false);
    assert_eq!(again["digest"], first["digest"]);
    let seen = proxy.take();
    let after_auth: Vec<_> = seen.iter().filter(|r| r.path != "/v2/").collect();
    assert!(
        after_auth.iter().all(|r| r.method == "HEAD"),
        "a re-push only asks: {seen:?}"
    );
    assert!(
        after_auth.len() <= 3,
        "re-push made {} requests: {seen:?}",
        after_auth.len()
    );

    // Same content under one more tag: no blob, one manifest PUT.
    let more = TestCommand::push_json(d, &repo)
        .tags(&["latest", "stable"])
        .json();
    assert_eq!(more["uploaded_blobs"], 0);
    assert_eq!(more["pushed"], true);
    let seen = proxy.take();
    let puts: Vec<_> = seen
        .iter()
        .filter(|r| r.method != "HEAD" && r.path != "/v2/")
        .collect();
    assert_eq!(puts.len(), 1, "{seen:?}");
    assert!(puts[0].path.ends_with("/manifests/stable"), "{seen:?}");

    // Changed content: only the new layer and config go up.
    std::fs::write(dir.path().join("f00.yaml"), "changed: true\n").unwrap();
    let changed = TestCommand::push_json(d, &repo).tags(&["latest"]).json();
    assert_eq!(changed["uploaded_blobs"], 2);
    assert_ne!(changed["digest"], first["digest"]);
    let inspect = skopeo_inspect(&format!("{}/repush:latest", reg.host()), None).unwrap();
    assert_eq!(inspect["Digest"], changed["digest"]);
}

#[test]
fn timestamp_tags_never_move_and_other_tags_do() {
    let reg = Registry::start(Auth::None);
    let proxy = Proxy::start(reg.port);
    let dir = settings(2, "immutable");
    let d = dir.path().to_str().unwrap();
    let repo = format!("{}/immutable", proxy.host());
    let a = TestCommand::push_json(d, &repo)
        .tags(&["latest", TS_TAG])
        .json();
    proxy.take();

    std::fs::write(dir.path().join("f00.yaml"), "other: content\n").unwrap();
    let refused = TestCommand::push_json(d, &repo)
        .tags(&["latest", TS_TAG])
        .run();
    assert_eq!(refused.code, 3, "stderr: {}", refused.stderr);
    assert!(refused.stderr.contains(TS_TAG), "{}", refused.stderr);
    assert!(refused.stderr.contains("never move"), "{}", refused.stderr);
    let seen = proxy.take();
    assert!(
        seen.iter().all(|r| r.method == "HEAD" || r.method == "GET"),
        "nothing may be uploaded or tagged: {seen:?}"
    );
    let direct = format!("{}/immutable", reg.host());
    for tag in ["latest", TS_TAG] {
        let i = skopeo_inspect(&format!("{direct}:{tag}"), None).unwrap();
        assert_eq!(i["Digest"], a["digest"], "{tag} moved");
    }

    // The timestamp tag given after a movable one: still checked first.
    let refused = TestCommand::push_json(d, &repo)
        .tags(&["main", TS_TAG])
        .run();
    assert_eq!(refused.code, 3);
    assert!(skopeo_inspect(&format!("{direct}:main"), None).is_none());

    // `latest` alone moves.
    let b = TestCommand::push_json(d, &repo).tags(&["latest"]).json();
    assert_ne!(b["digest"], a["digest"]);
    let i = skopeo_inspect(&format!("{direct}:latest"), None).unwrap();
    assert_eq!(i["Digest"], b["digest"]);
    let i = skopeo_inspect(&format!("{direct}:{TS_TAG}"), None).unwrap();
    assert_eq!(i["Digest"], a["digest"]);
}

#[test]
fn transient_faults_are_retried() {
    let reg = Registry::start(Auth::None);
    let proxy = Proxy::start(reg.port);
    let dir = settings(4, "faults");
    let d = dir.path().to_str().unwrap();
    let repo = format!("{}/faults", proxy.host());
    let (mut posts, mut blob_puts, mut manifest_puts) = (0, 0, 0);
    proxy.set_rule(move |method, path| {
        if method == "POST" && path.contains("/blobs/uploads/") {
            posts += 1;
            if posts <= 2 {
                return Action::Respond(503, vec![]);
            }
        }
        if method == "PUT" && path.contains("/blobs/uploads/") {
            // The first blob body is cut off half way: a reset mid-upload.
            blob_puts += 1;
            if blob_puts == 1 {
                return Action::Reset;
            }
        }
        if method == "PUT" && path.contains("/manifests/") {
            manifest_puts += 1;
            if manifest_puts == 1 {
                return Action::Respond(429, vec![("Retry-After".into(), "1".into())]);
            }
        }
        Action::Forward
    });
    let started = std::time::Instant::now();
    let out = TestCommand::push_json(d, &repo).tags(&["latest"]).json();
    let elapsed = started.elapsed();
    assert_eq!(out["pushed"], true);
    assert_eq!(out["uploaded_blobs"], 2);
    let seen = proxy.take();
    assert_eq!(
        seen.iter().filter(|r| r.status == 503).count(),
        2,
        "{seen:?}"
    );
    assert_eq!(seen.iter().filter(|r| r.status == 0).count(), 1, "{seen:?}");
    assert_eq!(
        seen.iter().filter(|r| r.status == 429).count(),
        1,
        "{seen:?}"
    );
    assert!(
        elapsed >= std::time::Duration::from_secs(1),
        "Retry-After: 1 honoured"
    );
    let manifest_puts: Vec<_> = seen
        .iter()
        .filter(|r| r.method == "PUT" && r.path.contains("/manifests/"))
        .collect();
    assert_eq!(manifest_puts.len(), 2, "{seen:?}");
    let gap = manifest_puts[1].at - manifest_puts[0].at;
    assert!(
        gap >= std::time::Duration::from_millis(950),
        "the manifest PUT was retried after {gap:?}, before Retry-After: 1"
    );
    // The interrupted upload was restarted in a new session: one more POST.
    let posts = seen.iter().filter(|r| r.method == "POST").count();
    assert!(
        posts >= 5,
        "2 refused + 1 interrupted + 2 good sessions: {seen:?}"
    );
    let inspect = skopeo_inspect(&format!("{}/faults:latest", reg.host()), None).unwrap();
    assert_eq!(inspect["Digest"], out["digest"]);
}

/// distribution's answer to a manifest whose blob link it read while
/// another run's mount rewrote it (its filesystem driver writes link files
/// in place), or an object store that reads after write late: the blobs
/// are there, so the put is asked again after a moment, twice at most; a
/// registry that keeps saying so fails the push (exit 4, no tag).
#[test]
fn a_manifest_whose_blobs_the_registry_has_not_settled_is_put_again() {
    let unknown = r#"{"errors":[{"code":"MANIFEST_BLOB_UNKNOWN","message":"blob unknown to registry","detail":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"}]}"#;
    for refusals in [1, 2, 3] {
        let reg = Registry::start(Auth::None);
        let proxy = Proxy::start(reg.port);
        let dir = settings(2, "settle");
        let d = dir.path().to_str().unwrap();
        let repo = format!("{}/settle", proxy.host());
        let mut puts = 0;
        proxy.set_rule(move |method, path| {
            if method == "PUT" && path.contains("/manifests/") {
                puts += 1;
                if puts <= refusals {
                    return Action::RespondBody(400, unknown.to_string());
                }
            }
            Action::Forward
        });
        let out = TestCommand::push_json(d, &repo).tags(&["latest"]).run();
        let manifest_puts = proxy
            .take()
            .iter()
            .filter(|r| r.method == "PUT" && r.path.contains("/manifests/"))
            .count();
        let stored = skopeo_inspect(&format!("{}/settle:latest", reg.host()), None);
        if refusals < 3 {
            assert_eq!(out.code, 0, "{refusals} refusals: {}", out.stderr);
            assert_eq!(manifest_puts, refusals + 1);
            assert_eq!(stored.unwrap()["Digest"], out.json()["digest"]);
        } else {
            assert_eq!(out.code, 4, "{}", out.stderr);
            assert!(
                out.stderr.contains("MANIFEST_BLOB_UNKNOWN"),
                "{}",
                out.stderr
            );
            assert_eq!(manifest_puts, 3, "asked twice again, not more");
            assert!(stored.is_none());
        }
    }
}

#[test]
fn permanent_failure_writes_no_tag() {
    let reg = Registry::start(Auth::None);
    let proxy = Proxy::start(reg.port);
    let dir = settings(2, "permanent");
    let d = dir.path().to_str().unwrap();
    let repo = format!("{}/permanent", proxy.host());
    proxy.set_rule(|method, path| {
        if method == "PUT" && path.contains("/manifests/") {
            Action::Respond(500, vec![])
        } else {
            Action::Forward
        }
    });
    let out = TestCommand::push_json(d, &repo).tags(&["latest"]).run();
    assert_eq!(out.code, 4, "stdout {} stderr {}", out.stdout, out.stderr);
    assert!(out.stderr.contains("putting manifest"), "{}", out.stderr);
    assert!(out.stderr.contains("500"), "{}", out.stderr);
    assert!(out.stderr.contains("hint:"), "{}", out.stderr);
    let puts = proxy
        .take()
        .iter()
        .filter(|r| r.method == "PUT" && r.path.contains("/manifests/"))
        .count();
    assert!((2..=10).contains(&puts), "bounded retries, got {puts}");
    assert!(skopeo_inspect(&format!("{}/permanent:latest", reg.host()), None).is_none());
}

#[test]
fn large_layer_goes_in_chunks_of_at_most_4_mib_or_one_put() {
    let reg = Registry::start(Auth::None);
    let proxy = Proxy::start(reg.port);
    let dir = common::TempDir::new();
    random_file(&dir.path().join("blob.bin"), 9 * 1024 * 1024 + 123);
    let d = dir.path().to_str().unwrap();
    const MIB4: usize = 4 * 1024 * 1024;

    let out = TestCommand::push_json(d, &format!("{}/chunked", proxy.host()))
        .tags(&["v1"])
        .json();
    let layer = out["layer"]["size"].as_u64().unwrap() as usize;
    assert!(layer > 2 * MIB4, "incompressible layer is {layer} bytes");
    let seen = proxy.take();
    assert!(seen.iter().all(|r| r.body_len <= MIB4), "{seen:?}");
    let patches: Vec<_> = seen.iter().filter(|r| r.method == "PATCH").collect();
    assert!(patches.len() >= 3, "{seen:?}");
    let layer_bytes: usize = patches.iter().map(|r| r.body_len).sum::<usize>();
    assert!(layer_bytes >= layer, "{seen:?}");

    let out = TestCommand::push_json(d, &format!("{}/mono", proxy.host()))
        .tags(&["v1"])
        .args(["--monolithic"])
        .json();
    assert_eq!(out["uploaded_blobs"], 2);
    let seen = proxy.take();
    assert!(seen.iter().all(|r| r.method != "PATCH"), "{seen:?}");
    let blob_puts: Vec<_> = seen
        .iter()
        .filter(|r| r.method == "PUT" && r.path.contains("/blobs/uploads/"))
        .collect();
    assert_eq!(blob_puts.len(), 2, "{seen:?}");
    assert!(blob_puts.iter().any(|r| r.body_len == layer), "{seen:?}");
    let i = skopeo_inspect(&format!("{}/mono:v1", reg.host()), None).unwrap();
    assert_eq!(i["Digest"], out["digest"]);
}

#[test]
fn basic_auth_credentials_in_every_form() {
    let password = "S3cret-Pa55-basic";
    let reg = Registry::start(Auth::Basic {
        user: "alice".into(),
        password: password.into(),
    });
    let dir = settings(2, "basic");
    let d = dir.path().to_str().unwrap();
    let repo = format!("{}/basic", reg.host());

    // Anonymous: refused with a clear error and exit code 5.
    let anon = TestCommand::push_json(d, &repo).tags(&["latest"]).run();
    assert_eq!(anon.code, 5, "{}", anon.stderr);
    assert!(
        anon.stderr
            .contains(&format!("authentication failed for {}", reg.host())),
        "{}",
        anon.stderr
    );
    assert!(anon.stderr.contains("--password-stdin"), "{}", anon.stderr);

    // Wrong password: refused, and the password never shows.
    let wrong = "Wr0ng-Pa55-never-print";
    let mut login = TestCommand::push_json(d, &repo);
    login
        .tags(&["latest"])
        .args(["--username", "alice", "--password-stdin"]);
    let bad = login.stdin(format!("{wrong}\n")).run();
    assert_eq!(bad.code, 5, "{}", bad.stderr);
    assert!(!bad.stderr.contains(wrong) && !bad.stdout.contains(wrong));

    // --username with --password-stdin.
    let ok = login.stdin(format!("{password}\n")).run();
    let out = ok.json();
    assert_eq!(out["pushed"], true);
    assert!(!ok.stdout.contains(password) && !ok.stderr.contains(password));
    let creds = format!("alice:{password}");
    let i = skopeo_inspect(&format!("{repo}:latest"), Some(&creds)).unwrap();
    assert_eq!(i["Digest"], out["digest"]);

    // Environment variables.
    let out = TestCommand::push_json(d, &repo)
        .tags(&["env"])
        .envs([
            ("SETTINGS_IMAGE_USERNAME", "alice"),
            ("SETTINGS_IMAGE_PASSWORD", password),
        ])
        .json();
    assert_eq!(out["uploaded_blobs"], 0);

    // docker config.json with a base64 `auth` entry.
    let cfg = common::TempDir::new();
    use base64::Engine as _;
    // Explicit credentials win over a docker config holding wrong ones.
    let stale = base64::engine::general_purpose::STANDARD.encode("alice:stale-password");
    std::fs::write(
        cfg.path().join("config.json"),
        serde_json::json!({"auths": {(reg.host()): {"auth": stale}}}).to_string(),
    )
    .unwrap();
    let c = cfg.path().to_str().unwrap();
    let out = TestCommand::push_json(d, &repo)
        .tags(&["env"])
        .envs([
            ("DOCKER_CONFIG", c),
            ("SETTINGS_IMAGE_USERNAME", "alice"),
            ("SETTINGS_IMAGE_PASSWORD", password),
        ])
        .json();
    assert_eq!(out["pushed"], false);
    let stale_run = TestCommand::push_json(d, &repo)
        .tags(&["env"])
        .envs([("DOCKER_CONFIG", c)])
        .run();
    assert_eq!(
        stale_run.code, 5,
        "the stale docker config is used: {}",
        stale_run.stderr
    );
    let auth = base64::engine::general_purpose::STANDARD.encode(&creds);
    std::fs::write(
        cfg.path().join("config.json"),
        serde_json::json!({"auths": {(reg.host()): {"auth": auth}}}).to_string(),
    )
    .unwrap();
    let c = cfg.path().to_str().unwrap();
    let out = TestCommand::push_json(d, &repo)
        .tags(&["docker-config"])
        .envs([("DOCKER_CONFIG", c)])
        .json();
    assert_eq!(out["pushed"], true);

    // A credential helper (credHelpers), run with the server on stdin.
    let helper_dir = common::TempDir::new();
    let helper = helper_dir.path().join("docker-credential-testhelper");
    std::fs::write(
        &helper,
        format!(
            "#!/bin/sh\n[ \"$1\" = get ] || exit 1\nread server\n[ \"$server\" = \"{}\" ] || {{ echo 'credentials not found in native keychain'; exit 1; }}\necho '{{\"ServerURL\":\"'$server'\",\"Username\":\"alice\",\"Secret\":\"{password}\"}}'\n",
            reg.host()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        cfg.path().join("config.json"),
        serde_json::json!({"credHelpers": {(reg.host()): "testhelper"}}).to_string(),
    )
    .unwrap();
    let path = format!(
        "{}:{}",
        helper_dir.path().display(),
        std::env::var("PATH").unwrap()
    );
    let helped = TestCommand::push_json(d, &repo)
        .tags(&["helper"])
        .envs([("DOCKER_CONFIG", c), ("PATH", &path)])
        .run();
    assert_eq!(helped.json()["pushed"], true);
    assert!(!helped.stdout.contains(password) && !helped.stderr.contains(password));
    // credsStore used for every host.
    std::fs::write(
        cfg.path().join("config.json"),
        serde_json::json!({"credsStore": "testhelper"}).to_string(),
    )
    .unwrap();
    let stored = TestCommand::push_json(d, &repo)
        .tags(&["store"])
        .envs([("DOCKER_CONFIG", c), ("PATH", &path)])
        .run();
    assert_eq!(stored.json()["pushed"], true);
    for tag in ["latest", "env", "docker-config", "helper", "store"] {
        assert!(
            skopeo_inspect(&format!("{repo}:{tag}"), Some(&creds)).is_some(),
            "{tag}"
        );
    }
}

#[test]
fn bearer_token_flow_like_ghcr() {
    let password = "T0ken-server-Pa55";
    let ts = TokenServer::start("bob", password);
    let reg = Registry::start(Auth::Token(ts.clone()));
    let dir = settings(3, "token");
    let d = dir.path().to_str().unwrap();
    let repo = format!("{}/org/token", reg.host());

    let anon = TestCommand::push_json(d, &repo).tags(&["latest"]).run();
    assert_eq!(anon.code, 5, "{}", anon.stderr);
    assert!(
        anon.stderr.contains("authentication failed"),
        "{}",
        anon.stderr
    );

    let env = [
        ("SETTINGS_IMAGE_USERNAME", "bob"),
        ("SETTINGS_IMAGE_PASSWORD", password),
    ];
    let ok = TestCommand::push_json(d, &repo)
        .tags(&["latest", TS_TAG])
        .envs(env)
        .run();
    let out = ok.json();
    assert_eq!(out["pushed"], true);
    assert_eq!(out["uploaded_blobs"], 2);
    // The token request asked for push on this repository.
    let reqs = ts.requests.lock().unwrap().clone();
    assert!(
        reqs.iter()
            .any(|q| q.contains("repository%3Aorg%2Ftoken%3Apull%2Cpush")
                || q.contains("repository:org/token:pull,push")),
        "{reqs:?}"
    );
    let issued = ts.issued.lock().unwrap().clone();
    assert!(!issued.is_empty());
    for t in &issued {
        assert!(!ok.stdout.contains(t.as_str()) && !ok.stderr.contains(t.as_str()));
    }
    assert!(!ok.stdout.contains(password) && !ok.stderr.contains(password));
    let i = skopeo_inspect(
        &format!("{repo}:{TS_TAG}"),
        Some(&format!("bob:{password}")),
    )
    .unwrap();
    assert_eq!(i["Digest"], out["digest"]);

    let again = TestCommand::push_json(d, &repo)
        .tags(&["latest", TS_TAG])
        .envs(env)
        .json();
    assert_eq!(again["pushed"], false);
    assert_eq!(again["uploaded_blobs"], 0);

    let wrong = TestCommand::push_json(d, &repo)
        .tags(&["latest"])
        .envs([
            ("SETTINGS_IMAGE_USERNAME", "bob"),
            ("SETTINGS_IMAGE_PASSWORD", "nope-nope-nope"),
        ])
        .run();
    assert_eq!(wrong.code, 5, "{}", wrong.stderr);
    assert!(!wrong.stderr.contains("nope-nope-nope"), "{}", wrong.stderr);
}

#[test]
fn bad_repositories_are_refused_before_any_network() {
    let dir = settings(1, "bad");
    let d = dir.path().to_str().unwrap();
    // The registry host is a listener that counts connections (relaying
    // to a port nothing listens on).
    let counter = ConnCounter::start(free_port());
    let host = format!("127.0.0.1:{}", counter.port);
    let upper = TestCommand::push_json(d, &format!("{host}/Acme/Settings"))
        .tags(&["latest"])
        .run();
    assert_eq!(upper.code, 2, "{}", upper.stderr);
    assert!(
        upper.stderr.contains(&format!("{host}/acme/settings")),
        "{}",
        upper.stderr
    );
    // Each refusal: exit 2, the error names the input and says why, a hint.
    for (bad, why) in [
        (
            "settings".to_string(),
            "no registry host (expected HOST/NAME)",
        ),
        (
            format!("{host}/a/b:latest"),
            "give the tag with --tag, not in --repository",
        ),
        (format!("{host}/a//b"), "bad name \"a//b\""),
        (format!("{host}/"), "bad name \"\""),
    ] {
        let r = TestCommand::push_json(d, &bad).tags(&["latest"]).run();
        assert_eq!(r.code, 2, "{bad}: {}", r.stderr);
        assert!(
            r.stderr
                .starts_with(&format!("error: invalid repository {bad:?}: {why}\nhint: ")),
            "{bad}: {}",
            r.stderr
        );
        assert!(r.stdout.is_empty(), "{bad}: {}", r.stdout);
    }
    let repo = format!("{host}/x");
    let r = TestCommand::push_json(d, &repo).tags(&["bad tag"]).run();
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.starts_with("error: invalid tag \"bad tag\"\n"),
        "{}",
        r.stderr
    );
    // Username without password.
    let r = TestCommand::push_json(d, &repo)
        .tags(&["t"])
        .args(["--username", "u"])
        .run();
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.starts_with(
            "error: a registry username needs a password and a password needs a username\n\
             hint: give --username USER with --password-stdin"
        ),
        "{}",
        r.stderr
    );
    assert_eq!(counter.connections(), 0, "a refused input connected");
    // The control: a good input does connect (and fails there).
    let r = TestCommand::push_json(d, &repo).tags(&["t"]).run();
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(counter.connections() > 0, "the counter counts");
}

#[test]
fn unreachable_registry_fails_clearly() {
    let dir = settings(1, "down");
    let d = dir.path().to_str().unwrap();
    let port = free_port();
    let r = TestCommand::push_json(d, &format!("127.0.0.1:{port}/x"))
        .tags(&["latest"])
        .run();
    // docs/push.md: 4, the registry failed (after retries).
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!("127.0.0.1:{port}")),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("hint:"), "{}", r.stderr);
}

#[test]
fn push_with_a_timestamp_tag_from_git_history() {
    require("git");
    let reg = Registry::start(Auth::None);
    let proxy = Proxy::start(reg.port);
    let repo_dir = common::TempDir::new();
    let root = repo_dir.path();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(root)
            .env("GIT_AUTHOR_DATE", "2024-01-02T03:04:05Z")
            .env("GIT_COMMITTER_DATE", "2024-01-02T03:04:05Z")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    git(&["init", "-q", "-b", "main"]);
    git(&["config", "user.email", "t@example.com"]);
    git(&["config", "user.name", "t"]);
    std::fs::create_dir(root.join("conf")).unwrap();
    std::fs::write(root.join("conf/a.yaml"), "a: 1\n").unwrap();
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "settings"]);
    let sha7 = git(&["rev-parse", "--short=7", "HEAD"]);
    let conf = root.join("conf");
    let repo = format!("{}/history", proxy.host());
    let mut push = TestCommand::new();
    push.args([
        "push",
        "--path",
        conf.to_str().unwrap(),
        "--repository",
        &repo,
        "--tag",
        "latest",
        "--timestamp-tag",
        "main",
        "--json",
    ]);
    let out = push.json();
    let expected = format!("main-1704164645-{sha7}");
    // The timestamp tag comes first, so `reference` names the tag that never moves.
    assert_eq!(out["tags"], serde_json::json!([expected, "latest"]));
    assert_eq!(
        out["reference"],
        format!("{repo}:{expected}@{}", out["digest"].as_str().unwrap())
    );
    let i = skopeo_inspect(&format!("{repo}:{expected}"), None).unwrap();
    assert_eq!(i["Digest"], out["digest"]);
    // Pushing the same commit again changes nothing, and only reads: the
    // tag list and the newest tag's manifest (the anomaly check), the
    // `latest` tag, and the provenance lookup (referrers API probe, then the
    // referrers tag). The timestamp tag just read is not asked for again.
    proxy.take();
    let again = push.json();
    assert_eq!(again["pushed"], false);
    assert_eq!(again["provenance"], out["provenance"]);
    let seen = proxy.take();
    let after_auth: Vec<_> = seen.iter().filter(|r| r.path != "/v2/").collect();
    assert!(
        after_auth
            .iter()
            .all(|r| r.method == "GET" || r.method == "HEAD"),
        "a re-push only reads: {seen:?}"
    );
    assert!(
        !after_auth
            .iter()
            .any(|r| r.method == "HEAD" && r.path.ends_with(&format!("/manifests/{expected}"))),
        "the timestamp tag was read once already: {seen:?}"
    );
    assert!(
        after_auth.len() <= 5,
        "re-push made {} requests: {seen:?}",
        after_auth.len()
    );
}

#[test]
fn an_expired_token_is_renewed_mid_push() {
    let password = "T0ken-renew-Pa55";
    let ts = TokenServer::start("carol", password);
    let reg = Registry::start(Auth::Token(ts.clone()));
    let proxy = Proxy::start(reg.port);
    let challenge = format!(
        "Bearer realm=\"http://127.0.0.1:{}/token\",service=\"{}\",scope=\"repository:renew:pull,push\"",
        ts.port,
        TokenServer::SERVICE
    );
    let (mut blob_puts, mut manifest_puts) = (0, 0);
    proxy.set_rule(move |method, path| {
        let unauthorized =
            Action::Respond(401, vec![("WWW-Authenticate".into(), challenge.clone())]);
        if method == "PUT" && path.contains("/blobs/uploads/") {
            blob_puts += 1;
            if blob_puts == 1 {
                return unauthorized;
            }
        }
        if method == "PUT" && path.contains("/manifests/") {
            manifest_puts += 1;
            if manifest_puts == 1 {
                return unauthorized;
            }
        }
        Action::Forward
    });
    let dir = settings(2, "renew");
    let env = [
        ("SETTINGS_IMAGE_USERNAME", "carol"),
        ("SETTINGS_IMAGE_PASSWORD", password),
    ];
    let run_ = TestCommand::push_json(dir.path(), &format!("{}/renew", proxy.host()))
        .tags(&["v1"])
        .envs(env)
        .run();
    let out = run_.json();
    assert_eq!(out["pushed"], true);
    assert_eq!(
        ts.requests.lock().unwrap().len(),
        3,
        "one token, then one per 401"
    );
    let seen = proxy.take();
    let refused: Vec<_> = seen
        .iter()
        .filter(|r| r.status == 401 && r.path != "/v2/")
        .collect();
    assert_eq!(refused.len(), 2, "{seen:?}");
    // Each refused request went again, with the new token, and succeeded.
    let manifest: Vec<_> = seen
        .iter()
        .filter(|r| r.path.ends_with("/manifests/v1") && r.method == "PUT")
        .map(|r| r.status)
        .collect();
    assert_eq!(manifest, [401, 201], "{seen:?}");
    for t in ts.issued.lock().unwrap().iter() {
        assert!(!run_.stdout.contains(t.as_str()) && !run_.stderr.contains(t.as_str()));
    }
    let i = skopeo_inspect(
        &format!("{}/renew:v1", reg.host()),
        Some(&format!("carol:{password}")),
    )
    .unwrap();
    assert_eq!(i["Digest"], out["digest"]);
}

#[test]
fn https_unless_loopback_or_insecure() {
    // An IPv4-mapped IPv6 address reaches the loopback registry without
    // being a loopback name, so the default must be HTTPS.
    let reg = Registry::start(Auth::None);
    let dir = settings(2, "transport");
    let d = dir.path().to_str().unwrap();
    let mapped = format!("[::ffff:127.0.0.1]:{}/transport", reg.port);
    // Through a connection counter: TLS spoken to a plain-HTTP server is
    // not retried, so exactly one connection is made.
    let counter = ConnCounter::start(reg.port);
    let counted = format!("[::ffff:127.0.0.1]:{}/transport", counter.port);
    let refused = TestCommand::push_json(d, &counted).tags(&["v1"]).run();
    assert_eq!(refused.code, 4, "{}", refused.stderr);
    assert!(refused.stderr.contains("https://"), "{}", refused.stderr);
    assert!(refused.stderr.contains("--insecure"), "{}", refused.stderr);
    assert_eq!(
        counter.connections(),
        1,
        "a server that does not speak TLS is not retried: {}",
        refused.stderr
    );
    assert!(skopeo_inspect(&format!("{}/transport:v1", reg.host()), None).is_none());

    let out = TestCommand::push_json(d, &mapped)
        .tags(&["v1"])
        .arg("--insecure")
        .json();
    let i = skopeo_inspect(&format!("{}/transport:v1", reg.host()), None).unwrap();
    assert_eq!(i["Digest"], out["digest"]);

    // A TLS server with a certificate nobody trusts: refused, not retried.
    require("openssl");
    let tls = common::TempDir::new();
    let (key, cert) = (tls.path().join("key.pem"), tls.path().join("cert.pem"));
    let st = std::process::Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args(["-subj", "/CN=untrusted", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let port = free_port();
    let mut server = std::process::Command::new("openssl")
        .args(["s_server", "-quiet", "-www", "-accept"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("-cert")
        .arg(&cert)
        .arg("-key")
        .arg(&key)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    common::eventually(
        std::time::Duration::from_secs(10),
        std::time::Duration::from_millis(50),
        || {
            std::net::TcpStream::connect(("127.0.0.1", port))
                .map(drop)
                .map_err(|e| format!("openssl s_server did not start: {e}"))
        },
    );
    let counter = ConnCounter::start(port);
    let r = TestCommand::push_json(d, &format!("[::ffff:127.0.0.1]:{}/x", counter.port))
        .tags(&["v1"])
        .run();
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(r.stderr.contains("TLS certificate"), "{}", r.stderr);
    assert_eq!(
        counter.connections(),
        1,
        "an untrusted certificate is not retried: {}",
        r.stderr
    );
}
