//! Who we are to a registry. [`Credentials`] come from the front end
//! (flags, inputs, environment) or, when it gives none, from the keychain:
//! docker's `config.json` (the front end says where it is) (`credHelpers`, `auths` entries with base64
//! `auth`, `username`/`password` or `identitytoken`, then `credsStore`),
//! the way `docker login` leaves it. [`Auth`] holds how each request is
//! authorized (anonymous, Basic, or a Bearer token from the token flow of
//! ghcr.io and distribution's `auth: token`) and where credentials may go:
//! [`Auth::apply`] authorizes requests to the registry's own origin only,
//! and [`Auth::realm_allows`] decides whether a token realm the registry
//! names may receive the credentials ([`Realms`]). `docs/registries.md`
//! ("Where credentials go") states the rule.
//!
//! This module knows nothing of sending requests: the transport runs the
//! token flow with its retries and renews a token after a 401.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::io::Write;
use std::path::Path;
use std::pin::Pin;
use std::process::{Command, Stdio};

use base64::Engine as _;
use reqwest::header::{HeaderMap, WWW_AUTHENTICATE};
use reqwest::{RequestBuilder, Url};
use serde_json::Value;

use super::name::Repository;
use crate::error::{Error, Result};
use crate::field::{Joint, Mention, Text};
use crate::text;

/// A username and a password (or token), and the token realms they may
/// be sent to. `Debug` never shows the password.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The username (`<token>` for an identity token).
    pub username: String,
    /// The password, personal access token or identity token.
    pub password: String,
    /// Which token realms may receive them (docker's rule unless they are
    /// the job token).
    pub realms: Realms,
}

impl Credentials {
    /// `username` and `password`, for the registry and any token realm it
    /// names (docker's rule).
    pub fn new(username: impl Into<String>, password: impl Into<String>) -> Credentials {
        Credentials {
            username: username.into(),
            password: password.into(),
            realms: Realms::Any,
        }
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .field("realms", &self.realms)
            .finish()
    }
}

/// What [`CredentialSource::credentials`] returns: the credentials, once
/// made.
pub type CredentialsFuture<'a> = Pin<Box<dyn Future<Output = Result<Credentials>> + 'a>>;

/// Credentials made on demand, and made again when they expire: what an
/// OIDC login is to the registry client (`crate::login::Login` implements
/// it). The client asks for credentials when it opens a repository without
/// explicit ones, and once more after the first 401 of a session (an ECR
/// password lives 12 hours, other exchanges' minutes). Where the
/// credentials then go is this module's rule ([`Realms`]), whoever made
/// them.
pub trait CredentialSource: fmt::Debug + Send + Sync {
    /// Makes fresh credentials (runs the exchange again).
    fn credentials(&self) -> CredentialsFuture<'_>;

    /// A copy of the source, for a copy of the options that hold it.
    fn clone_box(&self) -> Box<dyn CredentialSource>;
}

impl Clone for Box<dyn CredentialSource> {
    fn clone(&self) -> Self {
        self.clone_box()
    }
}

/// Where [`Credentials`] may go besides the registry itself: the token
/// realm (the `realm` of a `WWW-Authenticate: Bearer` challenge) that
/// trades them for a Bearer token. Requests are only ever authorized for
/// the registry's own origin; an upload `Location` or a redirect to
/// another host gets no `Authorization` header.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Realms {
    /// The realm the registry names, on whatever host: docker's rule
    /// (Docker Hub's realm is `auth.docker.io`, GitLab's `gitlab.com`).
    #[default]
    Any,
    /// Only a realm on one of these hosts (`HOST` or `HOST:PORT`), over
    /// HTTPS unless the registry itself is plain HTTP: the job token, which
    /// only GitHub's hosts may see.
    Only(Vec<String>),
}

/// `HOST` or `HOST:PORT` (an explicit, non-default port) of a URL.
pub(crate) fn host_port(url: &Url) -> String {
    let host = url.host_str().unwrap_or_default();
    match url.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    }
}

/// A URL as it may be printed: scheme, host, port and path, without user
/// information, query or fragment (an upload session's `Location` may be
/// presigned, its query holding `X-Amz-Signature` and `X-Amz-Security-Token`).
pub(crate) fn shown_url(url: &Url) -> String {
    format!("{}{}", url.origin().ascii_serialization(), url.path())
}

/// Whether two URLs reach the same registry: the same origin (scheme,
/// host, port), with Docker Hub's API hosts taken as one.
pub(crate) fn same_registry(a: &Url, b: &Url) -> bool {
    let hub = |u: &Url| {
        matches!(
            u.host_str(),
            Some("index.docker.io" | "registry-1.docker.io")
        )
    };
    a.origin() == b.origin()
        || (hub(a) && hub(b) && a.scheme() == b.scheme() && a.port() == b.port())
}

/// A `Bearer` challenge: where to ask for a token.
pub(crate) struct Challenge {
    /// The token realm.
    pub(crate) realm: Url,
    /// The `service` parameter, passed on to the realm.
    pub(crate) service: Option<String>,
}

/// The `Bearer` challenge among a response's `WWW-Authenticate` headers:
/// `Ok(None)` when there is none (no auth, or Basic: the credentials go to
/// the registry directly); `Err` when it names no usable realm.
pub(crate) fn bearer_challenge(
    headers: &HeaderMap,
) -> std::result::Result<Option<Challenge>, String> {
    for value in headers.get_all(WWW_AUTHENTICATE) {
        let Ok(text) = value.to_str() else {
            continue;
        };
        // Every challenge the parser can read, up to one it cannot.
        let Some(c) = http_auth::ChallengeParser::new(text)
            .filter_map(std::result::Result::ok)
            .find(|c| c.scheme.eq_ignore_ascii_case("bearer"))
        else {
            continue;
        };
        let param = |name: &str| {
            c.params
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.to_unescaped())
        };
        let Some(realm) = param("realm") else {
            return Err("its Bearer challenge names no realm".into());
        };
        let url = Url::parse(&realm)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some())
            .ok_or_else(|| format!("its token realm {realm:?} is not an http(s) URL"))?;
        return Ok(Some(Challenge {
            realm: url,
            service: param("service"),
        }));
    }
    Ok(None)
}

/// The token of a token service's answer (`token`, or OAuth 2's
/// `access_token`).
pub(crate) fn token_of(body: &[u8]) -> Option<String> {
    let v: Value = serde_json::from_slice(body).ok()?;
    ["token", "access_token"]
        .iter()
        .filter_map(|k| v.get(*k).and_then(Value::as_str))
        .find(|t| !t.is_empty())
        .map(str::to_string)
}

/// What a client is authenticated for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Reading only (`inspect`, `promote --explain`).
    Pull,
    /// Reading and writing.
    Push,
}

impl Access {
    fn word(self) -> &'static str {
        match self {
            Access::Pull => "pull",
            Access::Push => "push",
        }
    }
}

/// How requests are authorized now.
enum Authorization {
    None,
    Basic(Credentials),
    Bearer(String),
}

/// The authorization state of one session: the credentials it was opened
/// with and the header each request to the registry carries.
pub(crate) struct Auth {
    creds: RefCell<Option<Credentials>>,
    access: Access,
    current: RefCell<Authorization>,
    /// How often a 401 made us authenticate again.
    renewals: Cell<u32>,
}

impl Auth {
    /// An unauthenticated state; the token flow then [`Auth::use_token`]
    /// or [`Auth::use_credentials`] settle it.
    pub(crate) fn new(creds: Option<Credentials>, access: Access) -> Auth {
        Auth {
            creds: RefCell::new(creds),
            access,
            current: RefCell::new(Authorization::None),
            renewals: Cell::new(0),
        }
    }

    /// What must never reach output: the password, and the forms a
    /// registry echoing the `Authorization` header would show of it:
    /// `base64(username:password)`, standard, unpadded and URL-safe.
    pub(crate) fn secrets(&self) -> Vec<String> {
        use base64::Engine as _;
        use base64::engine::general_purpose::{
            STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD,
        };
        let creds = self.creds.borrow();
        let Some(c) = creds.as_ref().filter(|c| !c.password.is_empty()) else {
            return Vec::new();
        };
        let basic = format!("{}:{}", c.username, c.password);
        let mut out = vec![c.password.clone()];
        for engine in [STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD] {
            let encoded = engine.encode(&basic);
            if !out.contains(&encoded) {
                out.push(encoded);
            }
        }
        out
    }

    /// Pull, or pull and push.
    pub(crate) fn access(&self) -> Access {
        self.access
    }

    /// New credentials (an OIDC login renewed after they expired); the
    /// caller authenticates again.
    pub(crate) fn replace_credentials(&self, creds: Credentials) {
        *self.creds.borrow_mut() = Some(creds);
    }

    /// The scope a token is asked for: `repository:NAME:pull` or
    /// `repository:NAME:pull,push`.
    pub(crate) fn scope(&self, repo: &Repository) -> String {
        let actions = match self.access {
            Access::Pull => "pull",
            Access::Push => "pull,push",
        };
        format!("repository:{}:{actions}", repo.name)
    }

    /// The credentials for the token request to `realm`, named by the
    /// registry at `registry` (its API base URL): `Ok(None)` when there are
    /// none (an anonymous token); `Err` with the hosts they may go to when
    /// `realm` is not one of them. A realm on the registry's own origin
    /// always may; another host only under docker's rule ([`Realms::Any`]),
    /// never for the job token ([`Realms::Only`]) nor on ghcr.io, whose
    /// token service is its own.
    pub(crate) fn realm_allows(
        &self,
        realm: &Url,
        registry: &Url,
    ) -> std::result::Result<Option<Credentials>, String> {
        let Some(c) = self.creds.borrow().clone() else {
            return Ok(None);
        };
        if same_registry(realm, registry) {
            return Ok(Some(c));
        }
        let hosts = match (&c.realms, registry.host_str()) {
            (_, Some("ghcr.io")) => vec!["ghcr.io".to_string()],
            (Realms::Only(hosts), _) => hosts.clone(),
            (Realms::Any, _) => return Ok(Some(c)),
        };
        let secure = realm.scheme() == "https" || registry.scheme() == "http";
        let host = host_port(realm);
        if secure && hosts.iter().any(|h| h.eq_ignore_ascii_case(&host)) {
            Ok(Some(c))
        } else {
            Err(hosts.join(", "))
        }
    }

    /// Authorizes requests with a Bearer token.
    pub(crate) fn use_token(&self, token: String) {
        *self.current.borrow_mut() = Authorization::Bearer(token);
    }

    /// Authorizes requests with the credentials directly (Basic), or not at all.
    pub(crate) fn use_credentials(&self) {
        *self.current.borrow_mut() = match &*self.creds.borrow() {
            Some(c) => Authorization::Basic(c.clone()),
            None => Authorization::None,
        };
    }

    /// Adds the Authorization header to a request (the transport calls it
    /// for the registry's own origin only).
    pub(crate) fn apply(&self, rb: RequestBuilder) -> RequestBuilder {
        match &*self.current.borrow() {
            Authorization::None => rb,
            Authorization::Basic(c) => rb.basic_auth(&c.username, Some(&c.password)),
            Authorization::Bearer(t) => rb.bearer_auth(t),
        }
    }

    /// After a 401: true (and counted) when a Bearer token is held and it
    /// has been renewed fewer than twice, so a new token is worth fetching.
    pub(crate) fn may_renew(&self) -> bool {
        let bearer = matches!(&*self.current.borrow(), Authorization::Bearer(_));
        if !bearer || self.renewals.get() >= 2 {
            return false;
        }
        self.renewals.set(self.renewals.get() + 1);
        true
    }

    /// `push as USER` / `pull anonymously`, for a debug line.
    pub(crate) fn describe(&self) -> String {
        match &*self.creds.borrow() {
            Some(c) => format!("{} as {}", self.access.word(), c.username),
            None => format!("{} anonymously", self.access.word()),
        }
    }

    /// The refusal of the token service at `realm`, in words (not yet
    /// scrubbed).
    pub(crate) fn refusal(&self, repo: &Repository, realm: &Url, reason: &str) -> String {
        let who = match &*self.creds.borrow() {
            Some(c) => format!("as {}", c.username),
            None => "anonymously".to_string(),
        };
        format!(
            "the token service at {} refused {} access to {} {who}: {}",
            host_port(realm),
            self.access.word(),
            repo.name,
            reason.trim()
        )
    }
}

/// What to do about a refused authentication at `host`, for a client
/// that needed `access` (reading needs only pull rights).
pub(crate) fn auth_hint(host: &str, access: Access) -> Text {
    let push = access == Access::Push;
    text![
        format!(
            "give credentials that may {} {host}: ",
            if push { "push to" } else { "pull from" }
        ),
        Mention::Login {
            host: host.to_string(),
            push
        }
    ]
}

/// The host part of an `auths` key: `https://index.docker.io/v1/` ->
/// `index.docker.io`, `ghcr.io` -> `ghcr.io`.
fn key_host(key: &str) -> &str {
    let k = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    k.split('/').next().unwrap_or(k)
}

fn hosts_match(key: &str, host: &str) -> bool {
    let k = key_host(key);
    let docker_hub =
        |h: &str| matches!(h, "docker.io" | "index.docker.io" | "registry-1.docker.io");
    k.eq_ignore_ascii_case(host) || (docker_hub(k) && docker_hub(host))
}

fn config_err(path: &std::path::Path, message: String) -> Error {
    Error::input_hinted(
        format!("{}: {message}", path.display()),
        text![
            "fix or remove the docker config file, or give credentials with ",
            Mention::Credentials(Joint::And)
        ],
    )
}

/// The credentials docker's config at `path` (`config.json`, found by the
/// front end) holds for `host`, or `None` when it has none (then the push
/// is anonymous).
pub fn from_docker_config(path: Option<&Path>, host: &str) -> Result<Option<Credentials>> {
    let Some(path) = path else {
        return Ok(None);
    };
    let Some(text) = crate::named_file::read_if_present(path, "the docker config")? else {
        return Ok(None);
    };
    let config: Value = serde_json::from_str(&text)
        .map_err(|e| config_err(path, format!("not valid JSON: {e}")))?;
    if let Some(helpers) = config.get("credHelpers").and_then(Value::as_object) {
        for (key, helper) in helpers {
            if hosts_match(key, host)
                && let Some(helper) = helper.as_str()
            {
                return run_helper(helper, key, host);
            }
        }
    }
    if let Some(auths) = config.get("auths").and_then(Value::as_object) {
        for (key, entry) in auths {
            if !hosts_match(key, host) {
                continue;
            }
            if let Some(c) = from_entry(entry).map_err(|m| config_err(path, m))? {
                return Ok(Some(c));
            }
        }
    }
    if let Some(store) = config.get("credsStore").and_then(Value::as_str)
        && !store.is_empty()
    {
        return run_helper(store, host, host);
    }
    Ok(None)
}

/// The credentials the `auths` map of a docker config (e.g. the
/// `.dockerconfigjson` of a Kubernetes Secret) holds for `host`, without
/// credential helpers; `Err` says what is wrong with a matching entry.
pub fn from_auths(config: &Value, host: &str) -> std::result::Result<Option<Credentials>, String> {
    let Some(auths) = config.get("auths").and_then(Value::as_object) else {
        return Ok(None);
    };
    for (key, entry) in auths {
        if hosts_match(key, host)
            && let Some(c) = from_entry(entry)?
        {
            return Ok(Some(c));
        }
    }
    Ok(None)
}

fn from_entry(entry: &Value) -> std::result::Result<Option<Credentials>, String> {
    let s = |k: &str| {
        entry
            .get(k)
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
    };
    if let Some(token) = s("identitytoken") {
        return Ok(Some(Credentials::new("<token>", token)));
    }
    if let (Some(u), Some(p)) = (s("username"), s("password")) {
        return Ok(Some(Credentials::new(u, p)));
    }
    if let Some(auth) = s("auth") {
        let raw = base64::engine::general_purpose::STANDARD
            .decode(auth.trim())
            .map_err(|_| "an \"auth\" entry is not base64".to_string())?;
        let text =
            String::from_utf8(raw).map_err(|_| "an \"auth\" entry is not UTF-8".to_string())?;
        let (u, p) = text
            .split_once(':')
            .ok_or_else(|| "an \"auth\" entry is not base64 of USER:PASSWORD".to_string())?;
        return Ok(Some(Credentials::new(u, p)));
    }
    Ok(None)
}

/// Runs `docker-credential-<helper> get` with `server` on stdin.
fn run_helper(helper: &str, server: &str, host: &str) -> Result<Option<Credentials>> {
    let program = format!("docker-credential-{helper}");
    // A helper that cannot answer is a failure to authenticate (exit 5),
    // like a refused login: the request itself was fine.
    let refused = |message: String| Error::Auth {
        host: host.to_string(),
        message,
        hint: text![
            format!(
                "install {program} or remove it from the docker config, or give credentials with "
            ),
            Mention::Credentials(Joint::And)
        ],
    };
    let mut child = Command::new(&program)
        .arg("get")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| refused(format!("cannot run credential helper {program}: {e}")))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(server.as_bytes())
            .map_err(|e| Error::io(format!("writing to {program}"), e))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| Error::io(format!("running {program}"), e))?;
    if !out.status.success() {
        let said = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        if said.contains("credentials not found") {
            return Ok(None);
        }
        return Err(refused(format!(
            "credential helper {program} failed for {host}: {}",
            said.trim()
        )));
    }
    let v: Value = serde_json::from_slice(&out.stdout).map_err(|_| {
        refused(format!(
            "credential helper {program} printed no JSON credentials for {host}"
        ))
    })?;
    let username = v.get("Username").and_then(Value::as_str).unwrap_or("");
    let secret = v.get("Secret").and_then(Value::as_str).unwrap_or("");
    if secret.is_empty() {
        return Ok(None);
    }
    Ok(Some(Credentials::new(username, secret)))
}

#[cfg(test)]
#[path = "auth_tests.rs"]
mod tests;
