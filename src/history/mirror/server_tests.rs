//! The git mirror the controller publishes from (`history::mirror`),
//! against a real smart-HTTP server (`git http-backend`, see
//! `tests/common/git_server.rs`) and a real registry, with the git CLI
//! (`git archive`, `git log`) and skopeo and umoci reading the pushed
//! images as oracles, and the same request read from a `git clone` of the
//! same URL.

use crate::testkit as common;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use crate::error::{Error, GitFailure};
use crate::history::SourceMode;
use crate::history::mirror::{Credentials, Limits, Mirror, Mirrors, Remote};
use crate::pipeline::{RunReport, Spec};
use crate::report::Report;
use crate::request::{Forward, Request, Target};
use common::git::git_cmd;
use common::git_server::{GitServer, Options, Upstream, tls_files};
use common::registry::{self as reg, Auth, Registry};
use common::{TempDir, run_ok};

static GO: AtomicBool = AtomicBool::new(false);

/// The request the controller builds for one folder at one commit.
fn request(folder: &str, commit: &str, target: Target) -> Request {
    Request {
        path: PathBuf::from(folder),
        tags: Vec::new(),
        target,
        source: SourceMode::Commit,
        timestamp_tag: Some("main".into()),
        github: None,
        source_url: crate::history::SourceUrl::Origin,
        ci: Default::default(),
        forward: Forward::default(),
        provenance: true,
        revision: Some(commit.to_string()),
        extra: Default::default(),
    }
}

/// One folder of a commit of `mirror` through the pipeline.
fn run_mirror(req: Request, mirror: &Mirror) -> crate::Result<Report> {
    crate::pipeline::run(&Spec::one(req).in_mirror(mirror)).and_then(RunReport::into_report)
}

fn registry_target(reg: &Registry, name: &str) -> Target {
    Target::Registry(crate::registry::Options {
        repository: format!("{}/{name}", reg.host()),
        insecure: false,
        monolithic: false,
        credentials: None,
        docker_config: None,
        login: None,
    })
}

/// `git clone URL` (the git CLI) into a new directory; returns it.
fn git_clone(up: &Upstream, url: &str, into: &Path) -> PathBuf {
    let dir = into.join("clone");
    run_ok(
        git_cmd(up.home(), into)
            .args(["clone", "-q", url])
            .arg(&dir),
    );
    dir
}

fn git_dir_cmd(up: &Upstream, git_dir: &Path, args: &[&str]) -> String {
    let out = run_ok(
        git_cmd(up.home(), git_dir)
            .arg("--git-dir")
            .arg(git_dir)
            .args(args),
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn fetch(mirrors: &Mirrors, remote: &Remote, commit: Option<&str>) -> Mirror {
    mirrors
        .fetch(remote, "main", commit, &GO)
        .unwrap_or_else(|e| panic!("fetch failed: {e} (hint: {:?})", e.hint()))
}

/// Three commits: `configs/shop` (with a subfolder, an executable file
/// and a symlink) and `configs/cart` made, then only `configs/cart`
/// changed, then `configs/shop` changed. Returns their ids.
fn three_commits(up: &Upstream) -> [String; 3] {
    use std::os::unix::fs::PermissionsExt as _;
    let shop = up.work.join("configs/shop");
    std::fs::create_dir_all(&shop).unwrap();
    std::fs::write(shop.join("hook.sh"), "#!/bin/sh\necho reload\n").unwrap();
    std::fs::set_permissions(shop.join("hook.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("app.yaml", shop.join("current.yaml")).unwrap();
    let c1 = up.commit(
        &[
            ("configs/shop/app.yaml", "replicas: 1\n"),
            ("configs/shop/nested/deep.json", "{\"a\": 1}\n"),
            ("configs/cart/app.yaml", "currency: EUR\n"),
            ("README.md", "settings\n"),
        ],
        "one",
    );
    assert_eq!(
        up.git(&[
            "ls-files",
            "-s",
            "configs/shop/hook.sh",
            "configs/shop/current.yaml"
        ])
        .lines()
        .map(|l| &l[..6])
        .collect::<Vec<_>>(),
        ["120000", "100755"]
    );
    let c2 = up.commit(&[("configs/cart/app.yaml", "currency: USD\n")], "two");
    let c3 = up.commit(&[("configs/shop/app.yaml", "replicas: 3\n")], "three");
    [c1, c2, c3]
}

#[test]
fn a_commit_published_from_the_mirror_is_what_push_makes_in_a_clone() {
    let up = Upstream::new();
    let [c1, c2, c3] = three_commits(&up);
    let server = GitServer::start(&up.root, Options::default());
    let url = server.url("settings.git");
    let cache = TempDir::new();
    let mirrors = Mirrors::new(cache.path(), Limits::default()).unwrap();
    let remote = Remote::new(&url).unwrap();
    let mirror = fetch(&mirrors, &remote, Some(&c2));
    assert!(mirror.fetched().cloned);
    assert_eq!(mirror.head(), c3);
    // The git CLI reads the mirror: intact, and the branch where the server has it.
    git_dir_cmd(&up, mirror.dir(), &["fsck", "--strict"]);
    assert_eq!(
        git_dir_cmd(&up, mirror.dir(), &["rev-parse", "refs/heads/main"]),
        c3
    );

    let registry = Registry::start(Auth::None);
    let work = TempDir::new();
    let clone = git_clone(&up, &url, work.path());
    // An older commit (the tag names c1, the last change reachable from
    // c2) and the newest one.
    for (commit, changed) in [(&c2, &c1), (&c3, &c3)] {
        let ours = run_mirror(
            request("configs/shop", commit, registry_target(&registry, "mirror")),
            &mirror,
        )
        .unwrap();
        // What `push --revision COMMIT` makes in a clone: the same request
        // read from the clone's repository, not the mirror.
        let theirs = crate::pipeline::run(&Spec::one(request(
            clone.join("configs/shop").to_str().unwrap(),
            commit,
            registry_target(&registry, "clone"),
        )))
        .and_then(RunReport::into_report)
        .unwrap();
        assert_eq!(ours.digest, theirs.digest, "digest at {commit}");
        assert_eq!(
            ours.timestamp_tag, theirs.timestamp_tag,
            "timestamp tag at {commit}"
        );
        assert_eq!(ours.commit.as_deref(), Some(changed.as_str()));
        let tag = ours.timestamp_tag.clone().unwrap();
        assert!(tag.ends_with(&changed[..7]), "{tag}");
        assert_eq!(reg::revision_of(&registry, "mirror", &tag), *changed);
        assert!(ours.push.as_ref().unwrap().pushed);
        // The content, apart from both builds: the pushed image as skopeo
        // and umoci read it is the folder `git archive` gives at the commit
        // (the executable hook, the symlink and the subfolder included).
        let tar = work.join(&format!("{commit}.tar"));
        run_ok(
            git_cmd(up.home(), &up.work)
                .args(["archive", "--format=tar", "-o"])
                .arg(&tar)
                .args([commit.as_str(), "configs/shop"]),
        );
        let want = common::archived_files(&tar, "configs/shop");
        assert_eq!(
            want["hook.sh"],
            common::Node::File(0o755, b"#!/bin/sh\necho reload\n".to_vec())
        );
        assert_eq!(want["current.yaml"], common::Node::Link("app.yaml".into()));
        assert_eq!(
            common::pulled_files(&format!("{}/mirror:{tag}", registry.host()), None),
            want,
            "content at {commit}"
        );
        // Into the clone's repository: nothing new, not even the
        // provenance (the clone's push attached the same statement).
        let again = run_mirror(
            request("configs/shop", commit, registry_target(&registry, "clone")),
            &mirror,
        )
        .unwrap();
        let again = again.push.unwrap();
        assert!(!again.pushed, "{again:?}");
        assert_eq!(again.uploaded_blobs, 0);
        assert_eq!(
            again.provenance,
            theirs.push.and_then(|p| p.provenance),
            "provenance at {commit}"
        );
    }

    // Several folders by a glob, against the tree of the commit.
    let selection =
        crate::many::Selection::in_mirror(&mirror, &c3, &["configs/*"], crate::field::Field::Path)
            .unwrap();
    let names: Vec<_> = selection
        .folders
        .iter()
        .map(|f| f.path.display().to_string())
        .collect();
    assert_eq!(names, ["configs/cart", "configs/shop"]);
    let template = format!("{}/many-{{name}}", registry.host());
    let (repositories, _) = selection
        .repositories(&template, crate::field::Field::Repository)
        .unwrap();
    let targets = crate::many::registry_targets(&crate::registry::Options::default(), repositories);
    let spec = Spec::new(
        request(".", &c3, Target::Layout(PathBuf::new())),
        &selection,
        targets,
        2,
    );
    let outcome = crate::pipeline::run(&spec.in_mirror(&mirror)).unwrap();
    let images = outcome.published().unwrap();
    // Each folder's image, apart from the pipeline: in the repository its
    // name gives, tagged from the last commit git says changed the folder
    // by c3 (c2 for configs/cart), holding what `git archive` gives.
    assert_eq!(images.len(), 2);
    for ours in &images {
        let name = ours.path.rsplit('/').next().unwrap();
        let repository = format!("{}/many-{name}", registry.host());
        assert_eq!(ours.repository, repository, "{}", ours.path);
        let line = up.git(&["log", "-1", "--format=%ct %H", &c3, "--", &ours.path]);
        let (ct, changed) = line.split_once(' ').unwrap();
        let tag = format!("main-{ct}-{}", &changed[..7]);
        assert_eq!(
            ours.report.timestamp_tag.as_deref(),
            Some(tag.as_str()),
            "{}",
            ours.path
        );
        assert_eq!(
            reg::revision_of(&registry, &format!("many-{name}"), &tag),
            changed
        );
        let tar = work.join(&format!("{name}.tar"));
        run_ok(
            git_cmd(up.home(), &up.work)
                .args(["archive", "--format=tar", "-o"])
                .arg(&tar)
                .args([c3.as_str(), ours.path.as_str()]),
        );
        assert_eq!(
            common::pulled_files(&format!("{repository}:{tag}"), None),
            common::archived_files(&tar, &ours.path),
            "content of {}",
            ours.path
        );
    }
    assert_eq!(
        images[0]
            .report
            .timestamp_tag
            .as_deref()
            .map(|t| t.ends_with(&c2[..7])),
        Some(true),
        "configs/cart last changed in c2"
    );
}

/// A history of `n` commits, each changing a 2 KiB file of its own
/// (incompressible-ish text) under `configs/`.
fn long_history(up: &Upstream, n: usize) {
    up.history(n, |i| {
        let body: String = (0..64)
            .map(|k| {
                format!(
                    "key{k}: {:016x}\n",
                    (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ k
                )
            })
            .collect();
        vec![(format!("configs/f{}/v.yaml", i % 10), body)]
    });
}

/// Bytes the server sent for `git-upload-pack` requests (the packs).
fn pack_bytes_served(server: &GitServer) -> u64 {
    server
        .hits()
        .iter()
        .filter(|h| h.method == "POST" && h.path.ends_with("/git-upload-pack"))
        .map(|h| h.bytes)
        .sum()
}

#[test]
fn later_fetches_download_only_the_new_commits() {
    let up = Upstream::new();
    long_history(&up, 60);
    let old = up.head();
    let server = GitServer::start(&up.root, Options::default());
    let remote = Remote::new(&server.url("settings.git")).unwrap();
    let cache = TempDir::new();
    let mirrors = Mirrors::new(cache.path(), Limits::default()).unwrap();

    let first = fetch(&mirrors, &remote, None);
    let first_bytes = pack_bytes_served(&server);
    let all_objects: usize = git_dir_cmd(&up, &up.bare, &["rev-list", "--objects", "main"])
        .lines()
        .count();
    assert_eq!(first.fetched().objects as usize, all_objects);
    drop(first);

    // Nothing new: one round trip, no pack.
    server.clear();
    let same = fetch(&mirrors, &remote, Some(&old));
    assert!(!same.fetched().cloned);
    assert_eq!(same.fetched().objects, 0);
    assert_eq!(same.head(), old);
    let hits = server.hits();
    assert!(
        hits.iter().all(|h| h.status == 200) && hits.len() <= 3,
        "an up-to-date fetch asks only for the branch: {hits:?}"
    );
    drop(same);

    up.commit(&[("configs/f3/v.yaml", "changed: true\n")], "new one");
    let new = up.commit(&[("configs/new/app.yaml", "hello: world\n")], "new two");
    server.clear();
    let second = fetch(&mirrors, &remote, Some(&new));
    assert_eq!(second.head(), new);
    // The objects git says are new (the oracle), not the history: the
    // server sends a thin pack, which the fetch completes with the delta
    // bases it already had (at most one per new object).
    let new_objects = git_dir_cmd(
        &up,
        &up.bare,
        &["rev-list", "--objects", &format!("{old}..{new}")],
    )
    .lines()
    .count();
    let got = second.fetched().objects as usize;
    assert!(
        (new_objects..=2 * new_objects).contains(&got),
        "{got} objects received for {new_objects} new ones"
    );
    let second_bytes = pack_bytes_served(&server);
    assert!(
        second_bytes * 10 < first_bytes,
        "the second fetch re-downloaded history: {second_bytes} bytes after {first_bytes}"
    );
    git_dir_cmd(&up, second.dir(), &["fsck", "--strict"]);
    assert_eq!(
        git_dir_cmd(
            &up,
            second.dir(),
            &["rev-list", "--count", "refs/heads/main"]
        ),
        git_dir_cmd(&up, &up.bare, &["rev-list", "--count", "main"])
    );
    // Only the branch asked for, no tags.
    up.git(&["tag", "v1"]);
    up.git(&["push", "-q", "origin", "v1", "main:other"]);
    drop(second);
    let third = fetch(&mirrors, &remote, None);
    assert_eq!(
        git_dir_cmd(&up, third.dir(), &["for-each-ref", "--format=%(refname)"]),
        "refs/heads/main"
    );
}

fn secret(pairs: &[(&str, &str)]) -> std::collections::BTreeMap<String, Vec<u8>> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
        .collect()
}

/// The error of a fetch that must fail, with its hint, as one text.
fn fetch_err(
    mirrors: &Mirrors,
    remote: &Remote,
    branch: &str,
    commit: Option<&str>,
) -> (Error, String) {
    let e = mirrors
        .fetch(remote, branch, commit, &GO)
        .expect_err("the fetch must fail");
    let text = format!("{e}\nhint: {}", e.hint().unwrap_or_default());
    (e, text)
}

fn kind(e: &Error) -> GitFailure {
    match e {
        Error::Git { kind, .. } => *kind,
        other => panic!("not a git error: {other:?}"),
    }
}

#[test]
fn basic_auth_right_wrong_and_missing() {
    let up = Upstream::new();
    let head = up.commit(&[("configs/shop/app.yaml", "a: 1\n")], "one");
    let pw = "s3cret-PASSWORD";
    let server = GitServer::start(
        &up.root,
        Options {
            basic: Some(("flux".into(), pw.into())),
            ..Options::default()
        },
    );
    let url = server.url("settings.git");
    let cache = TempDir::new();
    let mirrors = Mirrors::new(cache.path(), Limits::default()).unwrap();

    let right = Remote::from_flux(
        &url,
        Some(&secret(&[("username", "flux"), ("password", pw)])),
    )
    .unwrap();
    let m = fetch(&mirrors, &right, Some(&head));
    assert_eq!(m.head(), head);
    drop(m);
    // Sent from the first request on: no 401 round trip.
    let hits = server.hits();
    assert!(!hits.is_empty());
    for h in &hits {
        assert_eq!(h.status, 200, "{hits:?}");
        assert!(
            h.authorization
                .as_deref()
                .is_some_and(|a| a.starts_with("Basic ")),
            "{hits:?}"
        );
    }

    let wrong = Remote::from_flux(
        &url,
        Some(&secret(&[("username", "flux"), ("password", "nope-WRONG")])),
    )
    .unwrap();
    let (e, text) = fetch_err(&mirrors, &wrong, "main", None);
    assert_eq!(kind(&e), GitFailure::Auth, "{text}");
    assert!(text.contains("authentication failed for"), "{text}");
    assert!(text.contains(&url), "{text}");
    assert!(text.contains("username/password"), "{text}");
    assert!(!text.contains("nope-WRONG") && !text.contains(pw), "{text}");
    assert!(!format!("{e:?}").contains("nope-WRONG"));

    let none = Remote::new(&url).unwrap();
    let (e, text) = fetch_err(&mirrors, &none, "main", None);
    assert_eq!(kind(&e), GitFailure::Auth, "{text}");
    assert!(text.contains("no credentials"), "{text}");
    assert!(text.contains("secretRef"), "{text}");
}

#[test]
fn bearer_token_right_and_wrong() {
    let up = Upstream::new();
    let head = up.commit(&[("configs/shop/app.yaml", "a: 1\n")], "one");
    let token = "tok-0123456789";
    let server = GitServer::start(
        &up.root,
        Options {
            bearer: Some(token.into()),
            ..Options::default()
        },
    );
    let url = server.url("settings.git");
    let cache = TempDir::new();
    let mirrors = Mirrors::new(cache.path(), Limits::default()).unwrap();
    let right = Remote::from_flux(&url, Some(&secret(&[("bearerToken", token)]))).unwrap();
    assert_eq!(
        right.credentials(),
        Some(&Credentials::Bearer(token.into()))
    );
    let m = fetch(&mirrors, &right, Some(&head));
    assert_eq!(m.head(), head);
    drop(m);
    for h in server.hits() {
        assert_eq!(
            h.authorization.as_deref(),
            Some(format!("Bearer {token}").as_str())
        );
    }
    let wrong = Remote::from_flux(&url, Some(&secret(&[("bearerToken", "tok-WRONG")]))).unwrap();
    let (e, text) = fetch_err(&mirrors, &wrong, "main", None);
    assert_eq!(kind(&e), GitFailure::Auth, "{text}");
    assert!(text.contains("bearerToken"), "{text}");
    assert!(!text.contains("tok-"), "{text}");
}

#[test]
fn a_redirect_to_another_host_gets_no_credentials() {
    let up = Upstream::new();
    let head = up.commit(&[("configs/shop/app.yaml", "a: 1\n")], "one");
    // The other host: 127.0.0.2, serving the same repositories to anyone,
    // logging what it receives.
    let other = GitServer::start(
        &up.root,
        Options {
            bind: Some("127.0.0.2".into()),
            ..Options::default()
        },
    );
    let moved = GitServer::start(
        &up.root,
        Options {
            redirect_to: Some(other.base()),
            ..Options::default()
        },
    );
    let url = moved.url("settings.git");
    let cache = TempDir::new();
    let mirrors = Mirrors::new(cache.path(), Limits::default()).unwrap();

    // Basic auth: the redirect is followed (as git follows the first one),
    // without the credentials.
    let basic = Remote::from_flux(
        &url,
        Some(&secret(&[("username", "flux"), ("password", "pw-SECRET")])),
    )
    .unwrap();
    let m = fetch(&mirrors, &basic, Some(&head));
    assert_eq!(m.head(), head);
    drop(m);
    let sent = moved.hits();
    assert!(sent.iter().any(|h| h.status == 302), "{sent:?}");
    let received = other.hits();
    assert!(
        received.iter().any(|h| h.method == "POST"),
        "the fetch went on at 127.0.0.2: {received:?}"
    );
    for h in &received {
        assert_eq!(
            h.authorization, None,
            "credentials reached 127.0.0.2: {received:?}"
        );
    }

    // A bearer token: the redirect is refused; 127.0.0.2 sees no token.
    other.clear();
    let cache = TempDir::new();
    let mirrors = Mirrors::new(cache.path(), Limits::default()).unwrap();
    let bearer = Remote::from_flux(&url, Some(&secret(&[("bearerToken", "tok-SECRET")]))).unwrap();
    let result = mirrors.fetch(&bearer, "main", None, &GO);
    for h in other.hits() {
        assert_eq!(h.authorization, None, "the token reached 127.0.0.2");
    }
    let e = result.expect_err("a redirect with a bearer token is refused");
    assert!(e.to_string().contains("redirect"), "{e}");
    assert!(!e.to_string().contains("tok-SECRET"), "{e}");
}

#[test]
fn https_with_the_secrets_ca() {
    let up = Upstream::new();
    let head = up.commit(&[("configs/shop/app.yaml", "a: 1\n")], "one");
    let certs = TempDir::new();
    let (ca, cert, key) = tls_files(certs.path());
    let server = GitServer::start(
        &up.root,
        Options {
            basic: Some(("flux".into(), "pw".into())),
            tls: Some((cert, key)),
            ..Options::default()
        },
    );
    let url = server.url("settings.git");
    assert!(url.starts_with("https://"));
    let cache = TempDir::new();
    let mirrors = Mirrors::new(cache.path(), Limits::default()).unwrap();
    let ca_pem = std::fs::read_to_string(&ca).unwrap();
    let trusted = Remote::from_flux(
        &url,
        Some(&secret(&[
            ("username", "flux"),
            ("password", "pw"),
            ("ca.crt", &ca_pem),
        ])),
    )
    .unwrap();
    assert_eq!(fetch(&mirrors, &trusted, Some(&head)).head(), head);

    let untrusted = Remote::from_flux(
        &url,
        Some(&secret(&[("username", "flux"), ("password", "pw")])),
    )
    .unwrap();
    let (e, text) = fetch_err(&mirrors, &untrusted, "main", None);
    assert_eq!(kind(&e), GitFailure::Unreachable, "{text}");
    assert!(text.contains("certificate"), "{text}");
    assert!(text.contains("ca.crt"), "{text}");
}

#[test]
fn missing_repository_branch_commit_and_server() {
    let up = Upstream::new();
    let head = up.commit(&[("configs/shop/app.yaml", "a: 1\n")], "one");
    let server = GitServer::start(&up.root, Options::default());
    let cache = TempDir::new();
    let mirrors = Mirrors::new(cache.path(), Limits::default()).unwrap();

    let (e, text) = fetch_err(
        &mirrors,
        &Remote::new(&server.url("nothing.git")).unwrap(),
        "main",
        None,
    );
    assert_eq!(kind(&e), GitFailure::NotFound, "{text}");
    assert!(text.contains("404"), "{text}");

    let remote = Remote::new(&server.url("settings.git")).unwrap();
    let (e, text) = fetch_err(&mirrors, &remote, "nope", None);
    assert_eq!(kind(&e), GitFailure::NotFound, "{text}");
    assert!(text.contains("branch nope does not exist"), "{text}");

    // A commit the server does not have at all.
    let (e, text) = fetch_err(&mirrors, &remote, "main", Some(&"1".repeat(40)));
    assert_eq!(kind(&e), GitFailure::NotFound, "{text}");
    assert!(text.contains("is not on the branch main"), "{text}");
    // The mirror itself is fine and current.
    assert_eq!(fetch(&mirrors, &remote, Some(&head)).head(), head);

    let closed = format!("http://127.0.0.1:{}/settings.git", reg::free_port());
    let (e, text) = fetch_err(&mirrors, &Remote::new(&closed).unwrap(), "main", None);
    assert_eq!(kind(&e), GitFailure::Unreachable, "{text}");
    assert!(text.contains("cannot reach 127.0.0.1:"), "{text}");
}

/// Bytes `dir` takes on disk, as coreutils' `du -s --block-size=1` counts
/// them from outside the process (allocated blocks: what `max_bytes`
/// bounds, "bytes on disk").
fn du(dir: &Path) -> u64 {
    let out = common::stdout_of(common::tool("du").args(["-s", "--block-size=1"]).arg(dir));
    out.split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("du printed {out:?}"))
}

fn packs(dir: &Path) -> usize {
    std::fs::read_dir(dir.join("objects/pack"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".pack"))
        .count()
}

#[test]
fn the_cache_stays_within_its_byte_budget() {
    let ups: Vec<Upstream> = (0..3)
        .map(|_| {
            let up = Upstream::new();
            long_history(&up, 20);
            up
        })
        .collect();
    // One server for the three: links to their repositories.
    let served = TempDir::new();
    for (i, up) in ups.iter().enumerate() {
        std::os::unix::fs::symlink(&up.bare, served.join(&format!("r{i}.git"))).unwrap();
    }
    let server = GitServer::start(served.path(), Options::default());
    let remotes: Vec<Remote> = (0..3)
        .map(|i| Remote::new(&server.url(&format!("r{i}.git"))).unwrap())
        .collect();
    let cache = TempDir::new();
    let roomy = Mirrors::new(cache.path(), Limits::default()).unwrap();
    drop(fetch(&roomy, &remotes[0], None));
    let one = du(cache.path());
    assert!(one > 0);
    // Room for two and a half mirrors.
    let budget = one * 5 / 2;
    let mirrors = Mirrors::new(
        cache.path(),
        Limits {
            max_bytes: budget,
            ..Limits::default()
        },
    )
    .unwrap();
    let [a, b, c] = [0, 1, 2].map(|i| mirrors.dir_of(remotes[i].url()));
    let fb = fetch(&mirrors, &remotes[1], None);
    assert!(fb.fetched().evicted.is_empty());
    drop(fb);
    // The third does not fit: the least recently fetched (a) goes.
    let fc = fetch(&mirrors, &remotes[2], None);
    assert_eq!(fc.fetched().evicted.len(), 1, "{:?}", fc.fetched());
    assert!(!a.exists() && b.exists() && c.exists());
    let used = du(cache.path());
    assert!(used <= budget, "du: {used} > {budget}");
    assert_eq!(
        fc.fetched().cache_bytes,
        used,
        "the report says what du says"
    );
    drop(fc);

    // a comes back (cloned again); b is older than c but in use: c goes.
    let held_b = fetch(&mirrors, &remotes[1], None);
    let fc = fetch(&mirrors, &remotes[2], None);
    drop(fc);
    let fa = fetch(&mirrors, &remotes[0], None);
    assert!(fa.fetched().cloned);
    assert!(
        a.exists() && b.exists() && !c.exists(),
        "{:?}",
        fa.fetched()
    );
    drop(fa);
    // The mirror in use still reads fine.
    git_dir_cmd(&ups[1], held_b.dir(), &["fsck"]);
    drop(held_b);

    // A budget smaller than one mirror: the one fetched stays, alone.
    let tiny = Mirrors::new(
        cache.path(),
        Limits {
            max_bytes: 1,
            ..Limits::default()
        },
    )
    .unwrap();
    let only = fetch(&tiny, &remotes[2], None);
    assert!(c.exists() && !a.exists() && !b.exists());
    assert_eq!(only.fetched().cache_bytes, du(cache.path()));
    // Nothing but that mirror and its two lock files.
    let mut names: Vec<String> = std::fs::read_dir(cache.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let key = c.file_name().unwrap().to_string_lossy().into_owned();
    assert_eq!(
        names,
        [
            key.clone(),
            format!("{key}.fetch.lock"),
            format!("{key}.use.lock")
        ]
    );
}

#[test]
fn piled_up_packs_are_consolidated_by_a_fresh_clone() {
    let up = Upstream::new();
    long_history(&up, 5);
    let server = GitServer::start(&up.root, Options::default());
    let remote = Remote::new(&server.url("settings.git")).unwrap();
    let cache = TempDir::new();
    let mirrors = Mirrors::new(
        cache.path(),
        Limits {
            max_packs: 2,
            ..Limits::default()
        },
    )
    .unwrap();
    let dir = mirrors.dir_of(remote.url());
    let mut held = fetch(&mirrors, &remote, None);
    for n in 2..=3 {
        drop(held);
        up.commit(&[("configs/f1/v.yaml", &format!("n: {n}\n"))], "more");
        held = fetch(&mirrors, &remote, None);
        assert!(!held.fetched().cloned);
        assert_eq!(packs(&dir), n);
    }
    // In use (`held`): not replaced, the packs pile on.
    up.commit(&[("configs/f1/v.yaml", "n: 4\n")], "more");
    let m = fetch(&mirrors, &remote, None);
    assert!(!m.fetched().consolidated);
    assert_eq!(packs(&dir), 4);
    // Each open Mirror holds the mirror's lock (the failed attempt to
    // take it alone for the re-clone did not lose it).
    drop(held);
    let lock = std::fs::File::open(format!("{}.use.lock", dir.display())).unwrap();
    assert!(lock.try_lock().is_err(), "the open Mirror lost its lock");
    drop(m);
    lock.try_lock().expect("no Mirror open, no lock");
    drop(lock);
    // Unused: replaced by one pack with the same history.
    let head = up.commit(&[("configs/f1/v.yaml", "n: 5\n")], "more");
    let m = fetch(&mirrors, &remote, Some(&head));
    assert!(
        m.fetched().cloned && m.fetched().consolidated,
        "{:?}",
        m.fetched()
    );
    assert_eq!(packs(&dir), 1);
    assert_eq!(m.head(), head);
    git_dir_cmd(&up, &dir, &["fsck", "--strict"]);
    assert_eq!(
        git_dir_cmd(&up, &dir, &["rev-list", "--count", "refs/heads/main"]),
        git_dir_cmd(&up, &up.bare, &["rev-list", "--count", "main"])
    );
    // Nothing left behind beside it.
    let leftovers: Vec<String> = std::fs::read_dir(cache.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".new-") || n.contains(".old-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn concurrent_fetches_and_publishes_of_one_url() {
    let up = Upstream::new();
    long_history(&up, 30);
    let server = GitServer::start(&up.root, Options::default());
    let remote = Remote::new(&server.url("settings.git")).unwrap();
    let cache = TempDir::new();
    let mirrors = Mirrors::new(cache.path(), Limits::default()).unwrap();
    let out = TempDir::new();
    for round in 0..2 {
        let head = up.commit(
            &[("configs/f2/v.yaml", &format!("round: {round}\n"))],
            "round",
        );
        let n = 4;
        let barrier = std::sync::Barrier::new(n);
        let results: Vec<(bool, String, String)> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..n)
                .map(|i| {
                    let (barrier, mirrors, remote, out) = (&barrier, &mirrors, &remote, &out);
                    let head = head.clone();
                    s.spawn(move || {
                        barrier.wait();
                        let m = fetch(mirrors, remote, Some(&head));
                        let layout = out.join(&format!("r{round}-t{i}"));
                        let report =
                            run_mirror(request("configs/f2", &head, Target::Layout(layout)), &m)
                                .unwrap_or_else(|e| panic!("thread {i}: {e}"));
                        (m.fetched().cloned, report.digest, m.head().to_string())
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let clones = results.iter().filter(|r| r.0).count();
        assert_eq!(
            clones,
            usize::from(round == 0),
            "round {round}: {results:?}"
        );
        assert!(
            results.iter().all(|r| r.1 == results[0].1 && r.2 == head),
            "{results:?}"
        );
        git_dir_cmd(&up, &mirrors.dir_of(remote.url()), &["fsck", "--strict"]);
    }
}

#[test]
fn an_interrupted_first_fetch_leaves_nothing() {
    let up = Upstream::new();
    long_history(&up, 5);
    let server = GitServer::start(&up.root, Options::default());
    let remote = Remote::new(&server.url("settings.git")).unwrap();
    let cache = TempDir::new();
    let mirrors = Mirrors::new(cache.path(), Limits::default()).unwrap();
    let stop = AtomicBool::new(true);
    let e = mirrors
        .fetch(&remote, "main", None, &stop)
        .expect_err("an interrupted fetch fails");
    assert_eq!(kind(&e), GitFailure::Interrupted, "{e}");
    // No mirror, no half-made clone beside it: only the two lock files.
    let left: Vec<String> = std::fs::read_dir(cache.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".lock"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    assert!(fetch(&mirrors, &remote, None).fetched().cloned);
}

#[test]
fn a_commit_the_branch_no_longer_leads_to_is_fetched_by_id() {
    let up = Upstream::new();
    let c1 = up.commit(&[("configs/shop/app.yaml", "v: 1\n")], "one");
    let server = GitServer::start(&up.root, Options::default());
    let remote = Remote::new(&server.url("settings.git")).unwrap();
    let cache = TempDir::new();
    let mirrors = Mirrors::new(cache.path(), Limits::default()).unwrap();
    drop(fetch(&mirrors, &remote, Some(&c1)));
    // source-controller sees c2, then main is rewritten to c3 (c2 kept on
    // another branch, as a pull request's head would be).
    let c2 = up.commit(&[("configs/shop/app.yaml", "v: 2\n")], "two");
    up.git(&["push", "-q", "origin", "main:keep"]);
    up.git(&["reset", "-q", "--hard", &c1]);
    let c3 = up.commit(&[("configs/shop/app.yaml", "v: 3\n")], "three");
    let m = fetch(&mirrors, &remote, Some(&c2));
    assert!(m.fetched().by_id, "{:?}", m.fetched());
    assert_eq!(m.head(), c3);
    assert!(m.has_commit(&c2));
    let out = TempDir::new();
    let report = run_mirror(
        request("configs/shop", &c2, Target::Layout(out.join("l"))),
        &m,
    )
    .unwrap();
    assert_eq!(report.commit.as_deref(), Some(c2.as_str()));
}

#[test]
fn a_mirror_left_damaged_is_repaired() {
    let up = Upstream::new();
    long_history(&up, 5);
    let server = GitServer::start(&up.root, Options::default());
    let remote = Remote::new(&server.url("settings.git")).unwrap();
    let cache = TempDir::new();
    let mirrors = Mirrors::new(cache.path(), Limits::default()).unwrap();
    let dir = mirrors.dir_of(remote.url());
    drop(fetch(&mirrors, &remote, None));

    // What a fetch killed midway leaves: a reference lock and a temporary pack.
    std::fs::write(dir.join("refs/heads/main.lock"), "").unwrap();
    std::fs::write(dir.join("objects/pack/.tmpKILLED"), "partial").unwrap();
    let head = up.commit(&[("configs/f1/v.yaml", "after the kill\n")], "more");
    let m = fetch(&mirrors, &remote, Some(&head));
    assert!(!m.fetched().cloned, "{:?}", m.fetched());
    assert_eq!(m.head(), head);
    assert_eq!(
        git_dir_cmd(&up, &dir, &["rev-parse", "refs/heads/main"]),
        head
    );
    assert!(!dir.join("refs/heads/main.lock").exists());
    assert!(!dir.join("objects/pack/.tmpKILLED").exists());
    drop(m);

    // Its objects gone (a disk problem): cloned afresh.
    for e in std::fs::read_dir(dir.join("objects/pack"))
        .unwrap()
        .flatten()
    {
        std::fs::remove_file(e.path()).unwrap();
    }
    let head = up.commit(&[("configs/f1/v.yaml", "after the loss\n")], "more");
    let m = fetch(&mirrors, &remote, Some(&head));
    assert!(
        m.fetched().repaired && m.fetched().cloned,
        "{:?}",
        m.fetched()
    );
    assert_eq!(m.head(), head);
    git_dir_cmd(&up, &dir, &["fsck", "--strict"]);
}

#[test]
fn fetch_and_publish_from_a_tokio_blocking_task() {
    // How the controller calls it: from `spawn_blocking` on its runtime.
    let up = Upstream::new();
    let head = up.commit(&[("configs/shop/app.yaml", "a: 1\n")], "one");
    let server = GitServer::start(&up.root, Options::default());
    let registry = Registry::start(Auth::None);
    let cache = TempDir::new();
    let mirrors = Mirrors::new(cache.path(), Limits::default()).unwrap();
    let remote = Remote::new(&server.url("settings.git")).unwrap();
    let target = registry_target(&registry, "from-tokio");
    let commit = head.clone();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let report = rt
        .block_on(async move {
            tokio::task::spawn_blocking(move || {
                let stop = AtomicBool::new(false);
                let m = mirrors.fetch(&remote, "main", Some(&commit), &stop)?;
                run_mirror(request("configs/shop", &commit, target), &m)
            })
            .await
        })
        .expect("the blocking task ran")
        .expect("fetched and published");
    assert!(report.push.as_ref().unwrap().pushed);
    // Read back from the registry: the timestamp tag git names for the
    // commit, holding the reported digest, the commit and the folder.
    let ct = git_dir_cmd(&up, &up.bare, &["log", "-1", "--format=%ct", &head]);
    let tag = format!("main-{ct}-{}", &head[..7]);
    assert_eq!(report.timestamp_tag.as_deref(), Some(tag.as_str()));
    assert_eq!(
        reg::digest_of(&registry, "from-tokio", &tag).as_deref(),
        Some(report.digest.as_str())
    );
    assert_eq!(reg::revision_of(&registry, "from-tokio", &tag), head);
    let work = TempDir::new();
    let tar = work.join("archive.tar");
    run_ok(
        git_cmd(up.home(), &up.work)
            .args(["archive", "--format=tar", "-o"])
            .arg(&tar)
            .args([head.as_str(), "configs/shop"]),
    );
    assert_eq!(
        common::pulled_files(&format!("{}/from-tokio:{tag}", registry.host()), None),
        common::archived_files(&tar, "configs/shop")
    );
}
