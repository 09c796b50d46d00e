//! Helpers for the login tests: the loopback provider stub (`stub.py`, an
//! issuer with an RS256 key made by `openssl`, its JWKS, and every token
//! service shaped from its documented request and answer, proxying the
//! registry API to a real distribution registry), and runs of the action
//! and the CLI against it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use base64::Engine as _;
use serde_json::{Value, json};

use crate::common::TempDir;
use crate::common::registry::Registry;
use crate::common::require;
use crate::common::runner::{Runner, Step};

/// The GitHub actor the action runs as.
pub const ACTOR: &str = "octocat";
/// The job token the runner would pass as `github-token`'s default.
pub const JOB_TOKEN: &str = "ghs_JobT0kenOnlyForGitHub000000000000";
/// The runner's ID-token request token.
pub const REQUEST_TOKEN: &str = "eyRequestT0kenForIdTokens";
/// The `kid` of the stub issuer's key.
pub const KID: &str = "stub-issuer-key-1";

/// A running stub; killed on drop.
pub struct Stub {
    child: Child,
    pub port: u16,
    pub dir: tempfile::TempDir,
    pub key: PathBuf,
}

fn b64url(b: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b)
}

/// The provider sections every stub knows: what each service expects and
/// what it hands out. Tests change fields before starting.
pub fn providers() -> Value {
    json!({
        "aws": {
            "role_arn": "arn:aws:iam::123456789012:role/settings-push",
            "region": "eu-west-1",
            "access_key": "ASIAEXAMPLESTUBKEY01",
            "secret_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYSTUBSECRET",
            "session_token": "FwoGZXIvYXdzEStubSessionToken0123456789",
            "passwords": ["ecrPassw0rd-one-12h", "ecrPassw0rd-two-renewed"],
        },
        "gcp": {
            "provider": "projects/123456789/locations/global/workloadIdentityPools/github/providers/github",
            "service_account": "settings-push@acme-prod.iam.gserviceaccount.com",
            "federated": "ya29.federatedStubToken",
            "token": "ya29.c.ServiceAccountStubToken",
        },
        "azure": {
            "tenant": "72f988bf-86f1-41af-91ab-2d7cd011db47",
            "client": "0c4b6b2a-5f5e-4d6e-9b1a-3f2e1d0c9b8a",
            "aad_token": "eyAadAccessTokenStub",
            "refresh_token": "eyAcrRefreshTokenStub",
        },
        "dockerhub": {
            "connection": "8f14e45f-ceea-467f-a8b1-6d7e2b2d0c11",
            "token": "dckr_oat_StubOidcToken",
        },
        "quay": {"robot": "acme+settings_push", "token": "QUAYROBOTFEDERATEDTOKEN"},
        "jfrog": {
            "provider": "github-oidc",
            "token": "cmVmdGtuOjAxOjJfrogStubAccessToken",
            "username": "deployer",
        },
    })
}

/// The registry host each cloud provider owns, as the tests name it: the
/// logins send their credentials to no other host. The stub plays each
/// one as an HTTP proxy ([`Stub::proxy_env`], with `insecure`).
pub const ECR_HOST: &str = "123456789012.dkr.ecr.eu-west-1.amazonaws.com";
/// Artifact Registry.
pub const GCP_HOST: &str = "europe-docker.pkg.dev";
/// Azure Container Registry.
pub const ACR_HOST: &str = "acme.azurecr.io";
/// Docker Hub (its registry API is `index.docker.io`).
pub const HUB_HOST: &str = "docker.io";

impl Stub {
    /// Starts the stub in front of `registry` with `providers` (see
    /// [`providers`]) and `extra` top-level settings. It also plays the
    /// providers' registry hosts ([`ECR_HOST`] ...) for clients that use it
    /// as their HTTP proxy.
    pub fn start(registry: &Registry, providers: Value, extra: Value) -> Stub {
        require("openssl");
        require("python3");
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("issuer.pem");
        let st = Command::new("openssl")
            .args(["genrsa", "-out"])
            .arg(&key)
            .arg("2048")
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success(), "openssl genrsa failed");
        let out = Command::new("openssl")
            .args(["rsa", "-noout", "-modulus", "-in"])
            .arg(&key)
            .output()
            .unwrap();
        assert!(out.status.success(), "openssl rsa -modulus failed");
        let hexmod = String::from_utf8_lossy(&out.stdout)
            .trim()
            .trim_start_matches("Modulus=")
            .to_string();
        let n = hex::decode(&hexmod).unwrap();
        let jwks = json!({"keys": [{
            "kty": "RSA", "alg": "RS256", "use": "sig", "kid": KID,
            "n": b64url(&n), "e": b64url(&[1, 0, 1]),
        }]});
        let jwks_path = dir.path().join("jwks.json");
        std::fs::write(&jwks_path, jwks.to_string()).unwrap();
        let mut cfg = providers;
        cfg["jwks"] = json!(jwks_path);
        cfg["key"] = json!(key);
        cfg["kid"] = json!(KID);
        cfg["request_token"] = json!(REQUEST_TOKEN);
        cfg["sub"] = json!("repo:acme/shop:ref:refs/heads/main");
        cfg["upstream"] = json!(registry.host());
        cfg["log"] = json!(dir.path().join("log.jsonl"));
        cfg["hosts"] = json!({
            ECR_HOST: "self",
            GCP_HOST: "self",
            ACR_HOST: "self",
            "index.docker.io": "self",
            "registry-1.docker.io": "self",
        });
        if let Value::Object(m) = extra {
            for (k, v) in m {
                match (k.as_str(), v) {
                    ("hosts", Value::Object(h)) => {
                        for (host, to) in h {
                            cfg["hosts"][host] = to;
                        }
                    }
                    (_, v) => cfg[k] = v,
                }
            }
        }
        let cfg_path = dir.path().join("config.json");
        std::fs::write(&cfg_path, cfg.to_string()).unwrap();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support_login/stub.py");
        let mut child = Command::new("python3")
            .arg(script)
            .arg("serve")
            .arg(&cfg_path)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(dir.path().join("stub.err")).unwrap())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .strip_prefix("PORT ")
            .unwrap_or_else(|| panic!("the stub did not start: {line:?}"))
            .parse()
            .unwrap();
        Stub {
            child,
            port,
            dir,
            key,
        }
    }

    /// `127.0.0.1:PORT`: the stub is also the registry host the client sees.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The environment that makes the binary reach a provider's registry
    /// host ([`ECR_HOST`] ...) through the stub: its HTTP proxy (for plain
    /// HTTP, `insecure`), and no proxy for the stub's own loopback routes.
    pub fn proxy_env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("http_proxy", self.url("")),
            ("no_proxy", "127.0.0.1,localhost".to_string()),
        ]
    }

    /// `http://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Every exchange the stub handled.
    pub fn log(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.path().join("log.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The entries of one route.
    pub fn route(&self, route: &str) -> Vec<Value> {
        self.log()
            .into_iter()
            .filter(|e| e["route"] == route)
            .collect()
    }

    /// Every ID token the runner endpoint minted.
    pub fn minted(&self) -> Vec<String> {
        self.route("minted")
            .iter()
            .map(|e| e["jwt"].as_str().unwrap().to_string())
            .collect()
    }

    /// A JWT from the stub issuer (`openssl dgst -sign`), as another CI
    /// system would hand it to a job.
    pub fn mint(&self, aud: &str, exp_in: i64) -> String {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support_login/stub.py");
        let out = Command::new("python3")
            .arg(script)
            .arg("mint")
            .arg(&self.key)
            .args([
                KID,
                "https://token.actions.githubusercontent.com",
                aud,
                "repo:acme/shop:ref:refs/heads/main",
                &exp_in.to_string(),
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }
}

impl Drop for Stub {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Adds `user:password` to the registry's htpasswd (distribution re-reads
/// the file when it changes).
pub fn allow(registry: &Registry, user: &str, password: &str) {
    let file = registry.dir.path().join("htpasswd");
    let st = Command::new("htpasswd")
        .args(["-Bb"])
        .arg(&file)
        .args([user, password])
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "htpasswd failed");
}

/// Replaces the registry's htpasswd with exactly `user:password`.
pub fn only_allow(registry: &Registry, user: &str, password: &str) {
    let out = Command::new("htpasswd")
        .args(["-Bbn", user, password])
        .output()
        .unwrap();
    assert!(out.status.success());
    std::fs::write(registry.dir.path().join("htpasswd"), out.stdout).unwrap();
}

/// A workspace with a settings folder `cfg` (not a git repository: the
/// login does not care where the content comes from).
pub fn workspace() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join("cfg")).unwrap();
    std::fs::write(ws.path().join("cfg/app.yaml"), "replicas: 2\n").unwrap();
    ws
}

/// Runs the publish action (`action.yml`) in `ws` with `with` inputs and
/// `env` (the runner's ID-token variables, endpoint overrides).
pub fn run_action(ws: &Path, with: &[(&str, &str)], env: &[(&str, String)]) -> Step {
    run_face(ws, "action.yml", &[], with, env)
}

/// Runs `settings-image action [mode...]` for `action_yml`'s inputs on the
/// simulated runner, as repository `acme/shop` with [`JOB_TOKEN`] as the
/// job token.
pub fn run_face(
    ws: &Path,
    action_yml: &str,
    mode: &[&str],
    with: &[(&str, &str)],
    env: &[(&str, String)],
) -> Step {
    let mut runner = Runner::new(TempDir::new(), ws.to_path_buf());
    runner.action_yml = crate::common::repo().join(action_yml);
    runner.mode = mode.iter().map(|m| m.to_string()).collect();
    runner.repository = "acme/shop".into();
    runner.actor = ACTOR.into();
    runner.github_token = JOB_TOKEN.into();
    runner.extra_env = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    runner.run(with)
}

/// The runner's ID-token variables pointing at the stub (its real URL has
/// a query string already, the audience is appended).
pub fn id_token_env(stub: &Stub) -> Vec<(&'static str, String)> {
    vec![
        (
            "ACTIONS_ID_TOKEN_REQUEST_URL",
            stub.url("/idtoken?api-version=2.0"),
        ),
        ("ACTIONS_ID_TOKEN_REQUEST_TOKEN", REQUEST_TOKEN.to_string()),
    ]
}
