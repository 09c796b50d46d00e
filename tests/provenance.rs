//! Provenance referrers: `push` attaches an in-toto SLSA provenance
//! statement to the image. Against the real `docker-registry`
//! (distribution 2.8, no referrers API) through the referrers tag schema,
//! checked by raw HTTP against the distribution spec v1.1; against a real
//! registry with the referrers API (go-containerregistry's, started as
//! `referrers-registry`: tests/common/oci.rs says what it shows); and
//! against a loopback stub for what no registry here does: answering
//! `OCI-Subject`, where no fallback tag may be written. `inspect` reads
//! each back.

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;

use common::cmd::TestCommand;
use common::forge;
use common::git::ScratchRepo;
use common::oci::ReferrersRegistry;
use common::registry::*;
use common::sha256_digest as sha256;
use common::subject_stub::{SubjectStub, read_head};
use serde_json::Value;

const IN_TOTO: &str = "application/vnd.in-toto+json";
const INDEX: &str = "application/vnd.oci.image.index.v1+json";
const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const EMPTY_DIGEST: &str =
    "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a";

// ------------------------------------------------------------------ git

/// A git repository with a `conf` folder, a GitHub remote and fixed dates.
struct Repo {
    repo: ScratchRepo,
}

impl Repo {
    fn new() -> Repo {
        let repo = ScratchRepo::new();
        repo.git(&[
            "remote",
            "add",
            "origin",
            "https://github.com/acme/settings.git",
        ]);
        Repo { repo }
    }

    /// Commits `conf/a.yaml` with `content` (at 2024-01-02T03:04:05Z);
    /// returns the commit id.
    fn commit(&self, content: &str) -> String {
        self.repo
            .commit_files(&[("conf/a.yaml", content)], content, 1_704_164_645)
    }

    fn conf(&self) -> String {
        self.repo.dir.join("conf").to_str().unwrap().to_string()
    }
}

/// GitHub Actions' environment for run `run_id`.
fn actions_env(run_id: &str) -> Vec<(&'static str, String)> {
    vec![
        ("GITHUB_SERVER_URL", "https://github.com".into()),
        ("GITHUB_REPOSITORY", "acme/settings".into()),
        ("GITHUB_REF", "refs/heads/main".into()),
        ("GITHUB_RUN_ID", run_id.into()),
        ("GITHUB_RUN_ATTEMPT", "2".into()),
        (
            "GITHUB_WORKFLOW_REF",
            "acme/settings/.github/workflows/settings.yml@refs/heads/main".into(),
        ),
        ("GITHUB_ACTION_REPOSITORY", "acme/settings-image".into()),
        ("GITHUB_ACTION_REF", "v1".into()),
    ]
}

// ------------------------------------------------------------ raw HTTP

struct Resp {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
}

/// One plain HTTP/1.1 GET (no client library between us and the registry).
fn http_get(host: &str, path: &str, accept: &str) -> Resp {
    let mut s = TcpStream::connect(host).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nAccept: {accept}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut r = BufReader::new(s);
    let (first, headers) = read_head(&mut r).expect("a response");
    let status = first.split(' ').nth(1).unwrap().parse().unwrap();
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let mut body = Vec::new();
    if chunked {
        loop {
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
            let n = usize::from_str_radix(line.trim(), 16).unwrap();
            let mut chunk = vec![0; n + 2];
            r.read_exact(&mut chunk).unwrap();
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    } else {
        r.read_to_end(&mut body).unwrap();
    }
    Resp {
        status,
        headers,
        body,
    }
}

/// The image manifest's descriptor as the registry serves it.
fn image_descriptor(host: &str, name: &str, tag: &str) -> Value {
    let r = http_get(host, &format!("/v2/{name}/manifests/{tag}"), MANIFEST);
    assert_eq!(r.status, 200);
    serde_json::json!({
        "mediaType": MANIFEST,
        "digest": sha256(&r.body),
        "size": r.body.len(),
    })
}

/// The referrers tag schema's index for `digest`, as raw HTTP sees it.
fn fallback_index(host: &str, name: &str, digest: &str) -> Option<(Resp, Value)> {
    let tag = digest.replace(':', "-");
    let r = http_get(host, &format!("/v2/{name}/manifests/{tag}"), INDEX);
    if r.status == 404 {
        return None;
    }
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let v = r.json();
    Some((r, v))
}

fn provenance_descriptors(index: &Value) -> Vec<Value> {
    index["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["artifactType"] == IN_TOTO)
        .cloned()
        .collect()
}

// ------------------------------------------------------------- the tests

#[test]
fn provenance_in_the_referrers_tag_schema_on_distribution() {
    let reg = Registry::start(Auth::None);
    let host = reg.host();
    let name = "acme/settings";
    let repo = format!("{host}/{name}");
    let git = Repo::new();
    let commit = git.commit("a: 1\n");

    let out = TestCommand::push_json(git.conf(), &repo)
        .tags(&["v1"])
        .envs(actions_env("1001"))
        .json();
    let digest = out["digest"].as_str().unwrap().to_string();
    let hexd = digest.strip_prefix("sha256:").unwrap().to_string();
    let prov = out["provenance"]
        .as_str()
        .expect("the report names the provenance referrer")
        .to_string();
    let subject = image_descriptor(&host, name, "v1");
    assert_eq!(subject["digest"], digest.as_str());

    // distribution 2.8 has no referrers API: the fallback path is what we test.
    let api = http_get(&host, &format!("/v2/{name}/referrers/{digest}"), INDEX);
    assert_ne!(api.status, 200, "distribution 2.8 grew a referrers API?");

    // The tag `sha256-<hex>` holds an image index of the referrers.
    let (resp, index) = fallback_index(&host, name, &digest).expect("referrers tag written");
    assert_eq!(resp.header("content-type"), Some(INDEX));
    assert_eq!(index["schemaVersion"], 2);
    assert_eq!(index["mediaType"], INDEX);
    let tags = http_get(&host, &format!("/v2/{name}/tags/list"), "*/*").json();
    assert!(
        tags["tags"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == &format!("sha256-{hexd}")),
        "{tags}"
    );
    let listed = provenance_descriptors(&index);
    assert_eq!(listed.len(), 1, "{index}");
    let d = &listed[0];
    assert_eq!(d["mediaType"], MANIFEST);
    assert_eq!(d["digest"], prov.as_str());
    assert_eq!(
        d["annotations"]["org.opencontainers.image.revision"],
        commit.as_str()
    );
    // The commit time, not the clock.
    assert_eq!(
        d["annotations"]["org.opencontainers.image.created"],
        "2024-01-02T03:04:05Z"
    );

    // The referrer manifest: subject = the image descriptor, empty config.
    let m = http_get(&host, &format!("/v2/{name}/manifests/{prov}"), MANIFEST);
    assert_eq!(m.status, 200);
    assert_eq!(sha256(&m.body), prov);
    assert_eq!(d["size"], m.body.len());
    let manifest = m.json();
    assert_eq!(manifest["subject"], subject);
    assert_eq!(manifest["artifactType"], IN_TOTO);
    assert_eq!(
        manifest["config"]["mediaType"],
        "application/vnd.oci.empty.v1+json"
    );
    assert_eq!(manifest["config"]["digest"], EMPTY_DIGEST);
    assert_eq!(manifest["config"]["size"], 2);
    assert_eq!(manifest["annotations"], d["annotations"]);
    let layers = manifest["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 1);
    assert_eq!(layers[0]["mediaType"], IN_TOTO);
    let empty = http_get(&host, &format!("/v2/{name}/blobs/{EMPTY_DIGEST}"), "*/*");
    assert_eq!(empty.body, b"{}");

    // The statement.
    let layer_digest = layers[0]["digest"].as_str().unwrap();
    let blob = http_get(&host, &format!("/v2/{name}/blobs/{layer_digest}"), "*/*");
    assert_eq!(blob.status, 200);
    assert_eq!(sha256(&blob.body), layer_digest);
    let st = blob.json();
    assert_eq!(st["_type"], "https://in-toto.io/Statement/v1");
    assert_eq!(st["predicateType"], "https://slsa.dev/provenance/v1");
    assert_eq!(st["subject"].as_array().unwrap().len(), 1);
    assert_eq!(st["subject"][0]["name"], repo.as_str());
    assert_eq!(st["subject"][0]["digest"]["sha256"], hexd.as_str());
    let p = &st["predicate"];
    let ext = &p["buildDefinition"]["externalParameters"];
    assert_eq!(ext["repository"], "https://github.com/acme/settings");
    assert_eq!(ext["ref"], "refs/heads/main");
    assert_eq!(ext["path"], "conf");
    assert_eq!(
        ext["workflow"]["ref"],
        "acme/settings/.github/workflows/settings.yml@refs/heads/main"
    );
    let dep = &p["buildDefinition"]["resolvedDependencies"][0];
    assert_eq!(
        dep["uri"],
        "git+https://github.com/acme/settings@refs/heads/main"
    );
    assert_eq!(dep["digest"]["gitCommit"], commit.as_str());
    assert_eq!(
        p["runDetails"]["builder"]["id"],
        "https://github.com/acme/settings-image@v1"
    );
    assert_eq!(
        p["runDetails"]["metadata"]["invocationId"],
        "https://github.com/acme/settings/actions/runs/1001/attempts/2"
    );

    // A re-run of the same commit (another run id) adds nothing.
    let before = resp.body.clone();
    let again = TestCommand::push_json(git.conf(), &repo)
        .tags(&["v1"])
        .envs(actions_env("1002"))
        .json();
    assert_eq!(again["pushed"], false);
    assert_eq!(again["provenance"], prov.as_str());
    let (resp2, index2) = fallback_index(&host, name, &digest).unwrap();
    assert_eq!(provenance_descriptors(&index2).len(), 1, "{index2}");
    assert_eq!(resp2.body, before, "the index was rewritten");

    // A second image's provenance has its own index; the first is untouched.
    let commit2 = git.commit("a: 2\n");
    let out2 = TestCommand::push_json(git.conf(), &repo)
        .tags(&["v2"])
        .envs(actions_env("1003"))
        .json();
    let digest2 = out2["digest"].as_str().unwrap().to_string();
    assert_ne!(digest2, digest);
    let (_, index3) = fallback_index(&host, name, &digest2).expect("second referrers tag");
    let listed3 = provenance_descriptors(&index3);
    assert_eq!(listed3.len(), 1);
    assert_eq!(
        listed3[0]["annotations"]["org.opencontainers.image.revision"],
        commit2.as_str()
    );
    let (resp4, _) = fallback_index(&host, name, &digest).unwrap();
    assert_eq!(resp4.body, before, "another subject's index changed");

    // inspect reads it back, by tag and by digest.
    for reference in [format!("{repo}:v1"), format!("{repo}@{digest}")] {
        let i = TestCommand::new()
            .args(["inspect", &reference, "--json"])
            .json();
        assert_eq!(i["digest"], digest.as_str());
        assert_eq!(
            i["annotations"]["org.opencontainers.image.revision"],
            commit.as_str()
        );
        assert_eq!(
            i["annotations"]["org.opencontainers.image.source"],
            "https://github.com/acme/settings"
        );
        assert_eq!(i["provenance"]["commit"], commit.as_str());
        assert_eq!(i["provenance"]["ref"], "refs/heads/main");
        assert_eq!(
            i["provenance"]["builder"],
            "https://github.com/acme/settings-image@v1"
        );
        assert_eq!(
            i["provenance"]["run"],
            "https://github.com/acme/settings/actions/runs/1001/attempts/2"
        );
        assert_eq!(i["provenance"]["subject_matches"], true);
        let refs = i["referrers"].as_array().unwrap();
        assert_eq!(refs.len(), 1);
        assert_eq!(refs[0]["kind"], "provenance");
        assert_eq!(refs[0]["digest"], prov.as_str());
    }
    let human = TestCommand::new()
        .args(["inspect", &format!("{repo}:v2")])
        .run();
    assert_eq!(human.code, 0, "{}", human.stderr);
    assert!(human.stdout.contains(&commit2), "{}", human.stdout);
    assert!(human.stdout.contains("provenance"), "{}", human.stdout);

    // --no-provenance writes no referrers tag; the CLI's builder id.
    let commit3 = git.commit("a: 3\n");
    let out3 = TestCommand::push_json(git.conf(), &repo)
        .tags(&["v3"])
        .args(["--no-provenance"])
        .json();
    assert!(out3.get("provenance").is_none(), "{out3}");
    let digest3 = out3["digest"].as_str().unwrap();
    assert!(fallback_index(&host, name, digest3).is_none());
    let i3 = TestCommand::new()
        .args(["inspect", &format!("{repo}:v3"), "--json"])
        .json();
    assert_eq!(i3["referrers"], serde_json::json!([]));
    assert_eq!(i3["provenance"], Value::Null);
    let out4 = TestCommand::push_json(git.conf(), &repo)
        .tags(&["v3"])
        .json();
    let i4 = TestCommand::new()
        .args(["inspect", &format!("{repo}:v3"), "--json"])
        .json();
    assert_eq!(i4["provenance"]["commit"], commit3.as_str());
    assert_eq!(
        i4["provenance"]["builder"],
        format!("settings-image/{}", env!("CARGO_PKG_VERSION")).as_str()
    );
    assert_eq!(i4["provenance"]["ref"], "refs/heads/main");
    assert!(i4["provenance"]["run"].is_null());
    assert_eq!(i4["referrers"][0]["digest"], out4["provenance"]);
}

#[test]
fn a_folder_outside_git_is_pushed_without_provenance() {
    let reg = Registry::start(Auth::None);
    let dir = settings(2, "nogit");
    let repo = format!("{}/nogit", reg.host());
    let r = TestCommand::push_json(dir.path(), &repo)
        .tags(&["v1"])
        .run();
    let out = r.json();
    assert!(out.get("provenance").is_none());
    assert!(r.stderr.contains("no provenance"), "{}", r.stderr);
    let digest = out["digest"].as_str().unwrap();
    assert!(fallback_index(&reg.host(), "nogit", digest).is_none());
}

#[test]
fn tokens_never_appear_with_provenance_and_inspect() {
    let password = "Pr0v-t0ken-Pa55";
    let ts = TokenServer::start("dora", password);
    let reg = Registry::start(Auth::Token(ts.clone()));
    let git = Repo::new();
    let commit = git.commit("a: 1\n");
    let repo = format!("{}/org/prov", reg.host());
    let mut env = actions_env("7");
    env.push(("SETTINGS_IMAGE_USERNAME", "dora".into()));
    env.push(("SETTINGS_IMAGE_PASSWORD", password.into()));
    let pushed = TestCommand::push_json(git.conf(), &repo)
        .tags(&["v1"])
        .envs(env.clone())
        .run();
    let out = pushed.json();
    assert!(out["provenance"].is_string(), "{out}");
    let inspected = TestCommand::new()
        .args(["inspect", &format!("{repo}:v1"), "--json"])
        .envs(env)
        .run();
    let i = inspected.json();
    assert_eq!(i["provenance"]["commit"], commit.as_str());
    // inspect asked for pull only.
    let reqs = ts.requests.lock().unwrap().clone();
    assert!(
        reqs.iter().any(|q| {
            let q = q
                .replace("%3A", ":")
                .replace("%2F", "/")
                .replace("%2C", ",");
            q.contains("repository:org/prov:pull") && !q.contains("repository:org/prov:pull,push")
        }),
        "{reqs:?}"
    );
    let issued = ts.issued.lock().unwrap().clone();
    assert!(!issued.is_empty());
    for r in [&pushed, &inspected] {
        for t in issued.iter().map(String::as_str).chain([password]) {
            assert!(!r.stdout.contains(t) && !r.stderr.contains(t));
        }
    }
    // Without credentials the token service refuses, and says so.
    let anon = TestCommand::new()
        .args(["inspect", &format!("{repo}:v1")])
        .run();
    assert_eq!(anon.code, 5, "{} {}", anon.stdout, anon.stderr);
    assert!(anon.stderr.contains("pull"), "{}", anon.stderr);
}

/// On a real registry with the referrers API (go-containerregistry's):
/// the registry lists the referrer itself, `inspect` finds the provenance
/// through `GET referrers/DIGEST` alone, and a re-run reuses it. This
/// registry lists the referrer with its config's media type as
/// `artifactType` (asserted: the client reads the manifest then) and sends
/// no `OCI-Subject`, so the client also writes the referrers tag, as the
/// spec has a client do when the registry does not confirm the subject.
#[test]
fn the_referrers_api_of_a_real_registry_lists_and_finds_the_provenance() {
    let reg = ReferrersRegistry::start();
    let (host, name) = (reg.host.clone(), "acme/settings");
    let repo = format!("{host}/{name}");
    let git = Repo::new();
    let commit = git.commit("a: 1\n");
    let out = TestCommand::push_json(git.conf(), &repo)
        .tags(&["v1"])
        .envs(actions_env("11"))
        .json();
    let digest = out["digest"].as_str().unwrap().to_string();
    let prov = out["provenance"].as_str().expect("provenance").to_string();

    // The registry's own listing, by raw HTTP.
    let api = http_get(&host, &format!("/v2/{name}/referrers/{digest}"), INDEX);
    assert_eq!(api.status, 200);
    assert_eq!(api.header("content-type"), Some(INDEX));
    let listed = api.json()["manifests"].as_array().unwrap().clone();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["digest"], prov.as_str());
    assert_eq!(
        listed[0]["annotations"]["org.opencontainers.image.revision"],
        commit.as_str()
    );
    assert_eq!(
        listed[0]["artifactType"], "application/vnd.oci.empty.v1+json",
        "go-containerregistry now lists the manifest's artifactType: update \
         tests/common/oci.rs and docs/push.md"
    );
    let m = http_get(&host, &format!("/v2/{name}/manifests/{prov}"), MANIFEST);
    assert_eq!(sha256(&m.body), prov);
    assert_eq!(m.json()["artifactType"], IN_TOTO);
    assert_eq!(m.json()["subject"]["digest"], digest.as_str());

    // No OCI-Subject in the PUT's answer: the referrers tag too.
    let (_, index) = fallback_index(&host, name, &digest).expect("referrers tag");
    assert_eq!(provenance_descriptors(&index).len(), 1);
    assert_eq!(provenance_descriptors(&index)[0]["digest"], prov.as_str());

    // A re-run adds no second referrer.
    let again = TestCommand::push_json(git.conf(), &repo)
        .tags(&["v1"])
        .envs(actions_env("12"))
        .json();
    assert_eq!(again["provenance"], prov.as_str());
    let api = http_get(&host, &format!("/v2/{name}/referrers/{digest}"), INDEX);
    assert_eq!(api.json()["manifests"].as_array().unwrap().len(), 1);

    // inspect: the referrers API alone, the provenance read from it.
    let before = reg.requests().len();
    let i = TestCommand::new()
        .args(["inspect", &format!("{repo}:v1"), "--json"])
        .json();
    assert_eq!(i["provenance"]["commit"], commit.as_str(), "{i}");
    assert_eq!(i["provenance"]["subject_matches"], true);
    let refs = i["referrers"].as_array().unwrap();
    assert_eq!(refs.len(), 1, "{i}");
    assert_eq!(refs[0]["digest"], prov.as_str());
    assert_eq!(refs[0]["artifact_type"], IN_TOTO, "{i}");
    let log = reg.requests();
    let after = &log[before..];
    assert!(
        after
            .iter()
            .any(|l| l.starts_with(&format!("GET /v2/{name}/referrers/{digest}"))),
        "{after:?}"
    );
    assert!(
        !after.iter().any(|l| l.contains("/manifests/sha256-")),
        "inspect read the referrers tag on a registry with the API: {after:?}"
    );
}

/// The stub answers `OCI-Subject` (no registry here does): the client
/// writes no referrers tag, never reads one, and a re-run and `inspect`
/// find the provenance through the referrers API.
#[test]
fn no_referrers_tag_when_the_registry_answers_oci_subject() {
    let stub = SubjectStub::start();
    let repo = format!("{}/acme/settings", stub.host());
    let git = Repo::new();
    let commit = git.commit("a: 1\n");
    let out = TestCommand::push_json(git.conf(), &repo)
        .tags(&["v1"])
        .envs(actions_env("11"))
        .json();
    let digest = out["digest"].as_str().unwrap().to_string();
    let prov = out["provenance"].as_str().expect("provenance").to_string();
    {
        let s = stub.store.lock().unwrap();
        assert!(
            !s.tags.keys().any(|t| t.starts_with("sha256-")),
            "a fallback tag was written: {:?}",
            s.tags.keys()
        );
        let (_, bytes) = s.manifests.get(&prov).expect("referrer stored by digest");
        let m: Value = serde_json::from_slice(bytes).unwrap();
        assert_eq!(m["subject"]["digest"], digest.as_str());
        assert_eq!(m["artifactType"], IN_TOTO);
    }
    let again = TestCommand::push_json(git.conf(), &repo)
        .tags(&["v1"])
        .envs(actions_env("12"))
        .json();
    assert_eq!(again["provenance"], prov.as_str());
    let i = TestCommand::new()
        .args(["inspect", &format!("{repo}:v1"), "--json"])
        .json();
    assert_eq!(i["provenance"]["commit"], commit.as_str());
    assert_eq!(i["referrers"].as_array().unwrap().len(), 1, "{i}");
    let log = stub.log();
    assert!(
        !log.iter().any(|l| l.contains("sha256-")),
        "the tag schema was consulted: {log:?}"
    );
    let subjects = {
        let s = stub.store.lock().unwrap();
        s.manifests
            .values()
            .filter(|(_, b)| {
                serde_json::from_slice::<Value>(b).unwrap()["subject"]["digest"] == digest.as_str()
            })
            .count()
    };
    assert_eq!(subjects, 1);
}

#[test]
fn inspect_flags_a_statement_about_another_image() {
    let reg = Registry::start(Auth::None);
    let repo = format!("{}/forged", reg.host());
    let git = Repo::new();
    let commit = git.commit("a: 1\n");
    let out = TestCommand::push_json(git.conf(), &repo)
        .tags(&["v1"])
        .args(["--no-provenance"])
        .json();
    let digest = out["digest"].as_str().unwrap();
    // A provenance referrer on this image whose statement names another,
    // written by hand and attached by another tool.
    let other = format!("sha256:{}", "1".repeat(64));
    let statement = forge::statement(&forge::Claims {
        subject_name: &repo,
        subject_digest: &other,
        commit: &commit,
        path: "conf",
        git_ref: None,
        builder: "elsewhere",
        annotations: Default::default(),
        labels: Default::default(),
    });
    forge::attach(
        &reg.host(),
        "forged",
        digest,
        &statement,
        &forge::referrer_annotations(&commit, "2024-01-02T03:04:05Z", None),
    );
    let i = TestCommand::new()
        .args(["inspect", &format!("{repo}:v1"), "--json"])
        .json();
    assert_eq!(i["provenance"]["subject_matches"], false);
    let human = TestCommand::new()
        .args(["inspect", &format!("{repo}:v1")])
        .run();
    assert!(human.stdout.contains("WARNING"), "{}", human.stdout);
    // A later push of the same commit from a branch records its own
    // statement: the forged one names no ref, so it is another run's.
    let again = TestCommand::push_json(git.conf(), &repo)
        .tags(&["v1"])
        .json();
    let own = again["provenance"]
        .as_str()
        .expect("provenance")
        .to_string();
    let listed =
        || provenance_descriptors(&fallback_index(&reg.host(), "forged", digest).unwrap().1);
    assert_eq!(listed().len(), 2);
    // Its re-run adds none: (commit, ref) is what re-runs compare.
    let rerun = TestCommand::push_json(git.conf(), &repo)
        .tags(&["v1"])
        .json();
    assert_eq!(rerun["provenance"], own.as_str());
    assert_eq!(listed().len(), 2);
}

#[test]
fn every_ref_that_publishes_a_digest_records_its_own_provenance() {
    let reg = Registry::start(Auth::None);
    let host = reg.host();
    let name = "acme/per-run";
    let repo = format!("{host}/{name}");
    let git = Repo::new();
    let commit = git.commit("a: 1\n");
    // The branch push publishes the commit.
    let main = TestCommand::push_json(git.conf(), &repo)
        .tags(&["main-1"])
        .envs(actions_env("2001"))
        .json();
    let digest = main["digest"].as_str().unwrap().to_string();
    let main_prov = main["provenance"].as_str().unwrap().to_string();
    // A tag push of the same commit: the same bytes, so the same digest,
    // and a statement of its own (its ref, its run).
    let mut tag_env = actions_env("2002");
    tag_env.retain(|(k, _)| *k != "GITHUB_REF");
    tag_env.push(("GITHUB_REF", "refs/tags/v1.0.0".into()));
    let tagged = TestCommand::push_json(git.conf(), &repo)
        .tags(&["v1.0.0"])
        .envs(tag_env.clone())
        .json();
    assert_eq!(tagged["digest"], digest.as_str(), "the same image");
    let tag_prov = tagged["provenance"].as_str().unwrap().to_string();
    assert_ne!(tag_prov, main_prov, "a statement of its own");
    let (_, index) = fallback_index(&host, name, &digest).expect("referrers tag");
    let listed = provenance_descriptors(&index);
    assert_eq!(listed.len(), 2, "{index}");
    for (d, r) in [
        (&main_prov, "refs/heads/main"),
        (&tag_prov, "refs/tags/v1.0.0"),
    ] {
        let desc = listed
            .iter()
            .find(|x| x["digest"] == d.as_str())
            .unwrap_or_else(|| panic!("{d} is not listed: {index}"));
        assert_eq!(desc["annotations"]["dev.settings-image.provenance.ref"], r);
        assert_eq!(
            desc["annotations"]["org.opencontainers.image.revision"],
            commit.as_str()
        );
    }
    // Re-runs of either (other run ids) add none.
    for (tag, env, prov) in [
        ("main-1", actions_env("2003"), &main_prov),
        ("v1.0.0", tag_env.clone(), &tag_prov),
    ] {
        let again = TestCommand::push_json(git.conf(), &repo)
            .tags(&[tag])
            .envs(env.clone())
            .json();
        assert_eq!(again["provenance"], prov.as_str());
    }
    let (_, index) = fallback_index(&host, name, &digest).unwrap();
    assert_eq!(provenance_descriptors(&index).len(), 2, "{index}");
    // inspect shows every ref, and each statement's run.
    let i = TestCommand::new()
        .args(["inspect", &format!("{repo}:main-1"), "--json"])
        .json();
    let mut refs: Vec<&str> = i["refs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    refs.sort();
    assert_eq!(refs, ["refs/heads/main", "refs/tags/v1.0.0"]);
    let runs: Vec<&str> = i["referrers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["details"]["run"].as_str().unwrap())
        .collect();
    assert!(
        runs.contains(&"https://github.com/acme/settings/actions/runs/2001/attempts/2"),
        "{runs:?}"
    );
    assert!(
        runs.contains(&"https://github.com/acme/settings/actions/runs/2002/attempts/2"),
        "{runs:?}"
    );
    let human = TestCommand::new()
        .args(["inspect", &format!("{repo}:v1.0.0")])
        .run();
    assert!(human.stdout.contains("published by: "), "{}", human.stdout);
    assert!(
        human.stdout.contains("refs/tags/v1.0.0"),
        "{}",
        human.stdout
    );

    // A statement written before the ref annotation existed: the ref is
    // read from the statement, so the same (commit, ref) adds none.
    let git2 = Repo::new();
    git2.commit("b: 1\n");
    let repo2 = format!("{host}/acme/legacy");
    let out = TestCommand::push_json(git2.conf(), &repo2)
        .tags(&["v1"])
        .args(["--no-provenance"])
        .json();
    let digest2 = out["digest"].as_str().unwrap().to_string();
    let commit2 = out["commit"].as_str().unwrap();
    let statement = forge::statement(&forge::Claims {
        subject_name: &repo2,
        subject_digest: &digest2,
        commit: commit2,
        path: "conf",
        git_ref: Some("refs/heads/main"),
        builder: "settings-image/0.0.1",
        annotations: Default::default(),
        labels: Default::default(),
    });
    // No ref annotation on the referrer: only the statement names it.
    let legacy = forge::attach(
        &host,
        "acme/legacy",
        &digest2,
        &statement,
        &forge::referrer_annotations(commit2, "2024-01-02T03:04:05Z", None),
    );
    let again = TestCommand::push_json(git2.conf(), &repo2)
        .tags(&["v1"])
        .json();
    assert_eq!(again["provenance"], legacy.as_str());
    let (_, index) = fallback_index(&host, "acme/legacy", &digest2).unwrap();
    assert_eq!(provenance_descriptors(&index).len(), 1, "{index}");
}

#[test]
fn a_statement_that_does_not_attest_the_callers_additions_is_not_reused() {
    let reg = Registry::start(Auth::None);
    let repo = format!("{}/acme/added", reg.host());
    let git = Repo::new();
    let commit = git.commit("a: 1\n");
    let additions = [
        "--annotation",
        "org.opencontainers.image.description=Shop",
        "--label",
        "team=shop",
    ];
    let env = actions_env("3001");
    let mut first: Vec<&str> = vec!["--no-provenance"];
    first.extend_from_slice(&additions);
    let out = TestCommand::push_json(git.conf(), &repo)
        .tags(&["v1"])
        .args(&first)
        .envs(env.clone())
        .json();
    let digest = out["digest"].as_str().unwrap().to_string();
    // A statement for the same commit and ref that does not record the
    // additions, as a settings-image before they were recorded wrote it
    // (by hand here, attached by another tool).
    let statement = forge::statement(&forge::Claims {
        subject_name: &repo,
        subject_digest: &digest,
        commit: &commit,
        path: "conf",
        git_ref: Some("refs/heads/main"),
        builder: "settings-image/0.0.1",
        annotations: Default::default(),
        labels: Default::default(),
    });
    let old = forge::attach(
        &reg.host(),
        "acme/added",
        &digest,
        &statement,
        &forge::referrer_annotations(&commit, "2024-01-02T03:04:05Z", Some("refs/heads/main")),
    );
    let referrers = || {
        provenance_descriptors(
            &fallback_index(&reg.host(), "acme/added", &digest)
                .unwrap()
                .1,
        )
    };
    let verify = || {
        TestCommand::new()
            .args(["verify", &format!("{repo}@{digest}"), "--path", &git.conf()])
            .run()
    };
    let r = verify();
    assert_eq!(r.code, 7, "{}", r.stderr);
    assert!(
        r.stderr.contains("extra label team=\"shop\""),
        "{}",
        r.stderr
    );
    // The same run again records a statement that attests them ...
    let again = TestCommand::push_json(git.conf(), &repo)
        .tags(&["v1"])
        .args(additions)
        .envs(env.clone())
        .json();
    let new = again["provenance"].as_str().unwrap().to_string();
    assert_ne!(new, old);
    assert_eq!(referrers().len(), 2);
    let i = TestCommand::new()
        .args(["inspect", &format!("{repo}:v1"), "--json"])
        .json();
    let listed: Vec<&Value> = i["referrers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["digest"] == new.as_str())
        .collect();
    assert_eq!(
        listed[0]["details"]["annotations"]["org.opencontainers.image.description"], "Shop",
        "{i}"
    );
    assert_eq!(listed[0]["details"]["labels"]["team"], "shop", "{i}");
    // ... which verify uses, and a further re-run finds and adds none.
    let r = verify();
    assert_eq!(r.code, 0, "{}", r.stderr);
    let third = TestCommand::push_json(git.conf(), &repo)
        .tags(&["v1"])
        .args(additions)
        .envs(env.clone())
        .json();
    assert_eq!(third["provenance"], new.as_str());
    assert_eq!(referrers().len(), 2);
}
