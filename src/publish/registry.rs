//! The registry publisher: pushes an [`Image`] to an OCI distribution
//! registry. This is the one module that talks HTTP to registries.
//!
//! The order of operations is what makes a push safe and idempotent:
//!
//! 1. authenticate (anonymous, Basic, or the Bearer-token challenge flow of
//!    ghcr.io and distribution's `auth: token`, through `oci-client`);
//! 2. `HEAD` every tag: a timestamp tag that names another digest stops the
//!    push before anything is uploaded ([`Error::TagExists`]); when every tag
//!    already names our digest there is nothing to do;
//! 3. every blob the registry does not have is uploaded (`HEAD` first; layer
//!    and config side by side): in one PUT when it fits in [`CHUNK_SIZE`],
//!    else in PATCH chunks of at most [`CHUNK_SIZE`] bytes read from disk,
//!    or in one streamed PUT with `monolithic`;
//! 4. only then the manifest is put, with our exact bytes, under each tag
//!    that does not already name it.
//!
//! Beyond a push, [`Client`] is the public, blocking registry API other
//! commands build on: tags, manifests, small blobs, cross-repository mounts
//! and OCI 1.1 referrers (the referrers API when the registry has it, else
//! the `sha256-<hex>` referrers tag schema), see `docs/push.md`.
//!
//! Requests are retried on 429 (honouring `Retry-After`), 5xx, connection
//! errors and timeouts with bounded exponential backoff and jitter; an
//! interrupted blob upload starts over in a new upload session. A 401 while
//! holding a Bearer token fetches a new token (at most twice per push).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Duration;

use reqwest::header::{self, HeaderMap, HeaderValue};
use reqwest::{Method, RequestBuilder, Response, StatusCode, Url};

use crate::error::{Error, Result};
use crate::image::artifact::{self, Artifact, Index};
use crate::image::{Descriptor, INDEX_MEDIA_TYPE, Image, MANIFEST_MEDIA_TYPE};
use crate::publish::credentials;
use crate::tag::is_timestamp_tag;

/// The largest request body sent in a chunked upload (ghcr.io rejects
/// larger ones).
pub const CHUNK_SIZE: u64 = 4 * 1024 * 1024;
/// How often one request (or one blob upload) is tried before giving up.
const MAX_ATTEMPTS: u32 = 6;
/// The first backoff delay; it doubles per attempt.
const BACKOFF_BASE: Duration = Duration::from_millis(200);
/// The longest single wait between attempts, `Retry-After` included.
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// The largest manifest or blob read into memory (`get_manifest`, `get_blob`).
pub const MAX_SMALL: usize = 16 * 1024 * 1024;
/// Read size when streaming a blob for a monolithic upload.
const STREAM_BUF: usize = 256 * 1024;
/// Manifest media types we accept when asking what a tag names.
const ACCEPT_MANIFESTS: &str = "application/vnd.oci.image.manifest.v1+json, \
     application/vnd.oci.image.index.v1+json, \
     application/vnd.docker.distribution.manifest.v2+json, \
     application/vnd.docker.distribution.manifest.list.v2+json";

/// A username and a password (or token). `Debug` never shows the password.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The username (`<token>` for an identity token).
    pub username: String,
    /// The password, personal access token or identity token.
    pub password: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// How to push.
#[derive(Debug, Clone)]
pub struct Options {
    /// `HOST/NAME`, e.g. `ghcr.io/acme/settings`.
    pub repository: String,
    /// Use plain HTTP even for a non-loopback host.
    pub insecure: bool,
    /// Upload each blob in one PUT, however large, instead of PATCH chunks
    /// for blobs over [`CHUNK_SIZE`].
    pub monolithic: bool,
    /// Explicit credentials (flags or environment); when `None`, docker's
    /// `config.json` and its credential helpers are asked, then anonymous.
    pub credentials: Option<Credentials>,
    /// An OIDC login that makes the credentials (when `credentials` is
    /// `None`), and makes them again, once, when they expire mid-push.
    pub login: Option<Box<crate::login::Login>>,
}

/// What a push did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    /// `HOST/NAME:FIRST_TAG@sha256:...` (or `HOST/NAME@sha256:...` untagged).
    pub reference: String,
    /// Blobs uploaded (the registry did not have them).
    pub uploaded_blobs: usize,
    /// Bytes of the uploaded blobs.
    pub uploaded_bytes: u64,
    /// False when the registry already held everything under every tag.
    pub pushed: bool,
    /// HTTP requests sent to the registry after authentication.
    pub requests: u64,
}

/// A parsed `HOST/NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repository {
    /// The registry host, with port when given.
    pub host: String,
    /// The repository name inside the registry.
    pub name: String,
}

impl fmt::Display for Repository {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.host, self.name)
    }
}

fn repo_hint() -> Option<String> {
    Some(
        "--repository is HOST/NAME with a registry host, e.g. ghcr.io/OWNER/settings or \
         localhost:5000/settings; NAME is lower-case [a-z0-9] words joined by '.', '_', '__' or '-', \
         separated by '/'"
            .to_string(),
    )
}

fn name_component_ok(c: &str) -> bool {
    // [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*
    let b = c.as_bytes();
    if b.is_empty() || !b[0].is_ascii_alphanumeric() || !b[b.len() - 1].is_ascii_alphanumeric() {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        let ch = b[i];
        if ch.is_ascii_lowercase() || ch.is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && matches!(b[i], b'.' | b'_' | b'-') {
            i += 1;
        }
        let sep = &c[start..i];
        let ok = sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|x| x == b'-');
        if !ok || sep.is_empty() {
            return false;
        }
    }
    true
}

/// Parses and checks `HOST/NAME` before any network use: a host is required,
/// the name must follow the distribution grammar (lower case only; ghcr.io
/// gets its own explanation), and neither tag nor digest may be attached.
pub fn parse_repository(s: &str) -> Result<Repository> {
    let bad = |msg: String| Error::input(msg, repo_hint());
    let Some((host, name)) = s.split_once('/') else {
        return Err(bad(format!(
            "invalid repository {s:?}: no registry host (expected HOST/NAME)"
        )));
    };
    let looks_like_host = host.contains('.') || host.contains(':') || host == "localhost";
    if !looks_like_host || host.is_empty() {
        return Err(bad(format!(
            "invalid repository {s:?}: {host:?} is not a registry host (expected HOST/NAME, e.g. ghcr.io/OWNER/NAME)"
        )));
    }
    if name.contains('@') || name.rsplit('/').next().is_some_and(|l| l.contains(':')) {
        return Err(bad(format!(
            "invalid repository {s:?}: give the tag with --tag, not in --repository"
        )));
    }
    if name.bytes().any(|b| b.is_ascii_uppercase()) {
        let hint = if host == "ghcr.io" {
            format!(
                "ghcr.io only accepts lower-case package names, and GitHub owners are often written with capitals: \
                 use --repository {}",
                format!("{host}/{name}").to_ascii_lowercase()
            )
        } else {
            format!(
                "repository names are lower case: use --repository {}",
                format!("{host}/{name}").to_ascii_lowercase()
            )
        };
        return Err(Error::input(
            format!("invalid repository {s:?}: upper-case letters in the name"),
            Some(hint),
        ));
    }
    if name.is_empty() || !name.split('/').all(name_component_ok) || s.len() > 255 {
        return Err(bad(format!("invalid repository {s:?}: bad name {name:?}")));
    }
    // (oci-client's own `Reference` parser agrees on this grammar, but it
    // compiles a large regex: ~100 ms per process, more than a whole push.)
    Ok(Repository {
        host: host.to_string(),
        name: name.to_string(),
    })
}

/// True when `host` (with or without port) is a loopback address.
pub fn is_loopback(host: &str) -> bool {
    let h = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or(rest)
    } else if host.matches(':').count() == 1 {
        host.split(':').next().unwrap_or(host)
    } else {
        host
    };
    h.eq_ignore_ascii_case("localhost") || h.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The host that serves the registry API: Docker Hub's `docker.io` is
/// served by `index.docker.io` (as oci-client resolves it for auth).
fn api_host(host: &str) -> &str {
    if host == "docker.io" {
        "index.docker.io"
    } else {
        host
    }
}

/// Pushes `image` under `tags` to the repository in `opts`.
pub fn push(image: &Image, tags: &[String], opts: &Options) -> Result<Pushed> {
    Client::open(opts)?.push(image, tags)
}

/// A manifest as the registry holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// The exact bytes.
    pub bytes: Vec<u8>,
    /// Its media type (the manifest's `mediaType`, else `Content-Type`).
    pub media_type: String,
    /// `sha256:` of the bytes.
    pub digest: String,
}

/// What a manifest PUT answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutManifest {
    /// `sha256:` of the bytes put.
    pub digest: String,
    /// The `OCI-Subject` response header: the registry indexed the
    /// manifest's `subject` for the referrers API.
    pub subject: Option<String>,
}

/// What [`Client::attach_referrer`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attached {
    /// The referrer manifest's descriptor (with `artifactType` and
    /// annotations), as it is listed among the subject's referrers.
    pub descriptor: Descriptor,
    /// The referrers tag (`sha256-<hex>`) that lists it, when the registry
    /// has no referrers API; `None` when the registry indexed it itself.
    pub referrers_tag: Option<String>,
}

/// A blocking client for one repository. Each call runs on the client's
/// own single-threaded runtime, with the retries, token renewal and secret
/// scrubbing described in the module documentation.
pub struct Client {
    rt: tokio::runtime::Runtime,
    session: Session,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("repository", &self.session.repo)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Opens `opts.repository` with pull and push access (credentials from
    /// `opts`, else docker's config, else anonymous).
    pub fn open(opts: &Options) -> Result<Client> {
        Self::open_with(opts, Access::Push)
    }

    /// Opens `opts.repository` with pull access only (reading: `inspect`).
    pub fn open_read_only(opts: &Options) -> Result<Client> {
        Self::open_with(opts, Access::Pull)
    }

    fn open_with(opts: &Options, access: Access) -> Result<Client> {
        let repo = parse_repository(&opts.repository)?;
        // rustls with ring: pure Rust plus a little C that builds for musl,
        // so the binary stays static. An error only means a provider is
        // installed.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::io("starting the async runtime", e))?;
        let session = rt.block_on(Session::open(repo, opts, access))?;
        Ok(Client { rt, session })
    }

    /// The repository this client talks to.
    pub fn repository(&self) -> &Repository {
        &self.session.repo
    }

    /// HTTP requests sent so far (after authentication).
    pub fn requests(&self) -> u64 {
        self.session.requests.get()
    }

    /// Pushes `image` under `tags` (see the module documentation).
    pub fn push(&self, image: &Image, tags: &[String]) -> Result<Pushed> {
        self.rt.block_on(self.session.push(image, tags))
    }

    /// Every tag of the repository (all `Link` pages); empty when the
    /// repository does not exist yet.
    pub fn list_tags(&self) -> Result<Vec<String>> {
        self.rt.block_on(self.session.list_tags())
    }

    /// What `reference` (a tag or `sha256:` digest) names, or `None`.
    pub fn head_manifest(&self, reference: &str) -> Result<Option<Descriptor>> {
        self.rt.block_on(self.session.head_manifest(reference))
    }

    /// The manifest `reference` names (at most [`MAX_SMALL`] bytes), or
    /// `None`; a digest reference is verified against the bytes.
    pub fn get_manifest(&self, reference: &str) -> Result<Option<Manifest>> {
        self.rt.block_on(self.session.get_manifest(reference))
    }

    /// A small blob (at most [`MAX_SMALL`] bytes), verified against `digest`.
    pub fn get_blob(&self, digest: &str) -> Result<Vec<u8>> {
        self.rt.block_on(self.session.get_blob(digest))
    }

    /// Uploads `bytes` as a blob unless the registry already has it.
    pub fn put_blob(&self, media_type: &str, bytes: &[u8]) -> Result<Descriptor> {
        self.rt.block_on(self.session.put_blob(media_type, bytes))
    }

    /// Puts manifest `bytes` (exactly) under `reference`, a tag or the
    /// bytes' digest. The answer carries the `OCI-Subject` header.
    pub fn put_manifest(
        &self,
        reference: &str,
        bytes: &[u8],
        media_type: &str,
    ) -> Result<PutManifest> {
        self.rt.block_on(
            self.session
                .put_manifest_bytes(reference, bytes, media_type),
        )
    }

    /// Cross-repository mount of blob `digest` from `from_repo` (a name on
    /// the same registry, without host). False when the registry did not
    /// mount it (not there, not allowed, or no mount support): upload it.
    /// With token auth the token is scoped to this repository only, so
    /// registries that check pull access on `from_repo` answer false.
    pub fn mount_blob(&self, digest: &str, from_repo: &str) -> Result<bool> {
        self.rt.block_on(self.session.mount_blob(digest, from_repo))
    }

    /// The referrers of the manifest `subject_digest`, only those of
    /// `artifact_type` when given: the referrers API when the registry
    /// implements it, else the referrers tag schema (`sha256-<hex>`).
    pub fn referrers(
        &self,
        subject_digest: &str,
        artifact_type: Option<&str>,
    ) -> Result<Vec<Descriptor>> {
        self.rt
            .block_on(self.session.referrers(subject_digest, artifact_type))
    }

    /// True when the registry answered the referrers API; `None` before
    /// any referrers call or attach told.
    pub fn has_referrers_api(&self) -> Option<bool> {
        self.session.referrers_api.get()
    }

    /// Attaches `artifact` to the manifest `subject`: uploads its blobs
    /// (the empty config and each layer), puts its manifest by digest and,
    /// unless the registry answers `OCI-Subject`, adds its descriptor to
    /// the index under the referrers tag `sha256-<hex>` (read, add unless
    /// the digest is listed, write). Concurrent attaches to the same
    /// subject on such a registry can lose one descriptor (last write wins).
    pub fn attach_referrer(&self, subject: &Descriptor, artifact: &Artifact) -> Result<Attached> {
        self.rt
            .block_on(self.session.attach_referrer(subject, artifact))
    }
}

/// What a client was authenticated for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    Pull,
    Push,
}

enum Authorization {
    None,
    Basic(Credentials),
    Bearer(String),
}

struct Session {
    repo: Repository,
    base: Url,
    http: reqwest::Client,
    auth: RefCell<Authorization>,
    /// The credentials authentication used (for a new token after a 401).
    creds: RefCell<Option<Credentials>>,
    /// The OIDC login the credentials came from, until it was used to
    /// renew them (once).
    login: RefCell<Option<crate::login::Login>>,
    /// The oci-client that runs the authentication flow.
    oci: oci_client::Client,
    /// How often a 401 made us authenticate again.
    reauths: Cell<u32>,
    monolithic: bool,
    /// Strings that must never reach output: password and tokens.
    secrets: RefCell<Vec<String>>,
    requests: Cell<u64>,
    uploaded_blobs: Cell<usize>,
    uploaded_bytes: Cell<u64>,
    /// Pull, or pull and push.
    access: Access,
    /// Whether `GET /v2/NAME/referrers/DIGEST` answered 200 (once asked).
    referrers_api: Cell<Option<bool>>,
    /// The digest each tag named when this session last read its manifest
    /// (the anomaly check reads them just before a push). Only used to skip
    /// a push's HEAD of a tag already known to name the very digest being
    /// pushed; anything else is asked afresh.
    named: RefCell<HashMap<String, String>>,
}

/// The body of one upload request.
enum Body<'a> {
    Empty,
    Bytes(Vec<u8>),
    File(&'a Path),
}

/// Where a blob's bytes come from.
enum Blob<'a> {
    Memory(&'a [u8]),
    File(&'a Path),
}

fn jitter(d: Duration) -> Duration {
    // 50% to 100% of d.
    let ms = d.as_millis() as u64;
    Duration::from_millis(ms / 2 + fastrand::u64(0..=ms / 2))
}

fn backoff(attempt: u32) -> Duration {
    let d = BACKOFF_BASE.saturating_mul(1 << attempt.saturating_sub(1).min(16));
    jitter(d.min(BACKOFF_MAX))
}

fn retry_after(resp: &Response) -> Option<Duration> {
    parse_retry_after(resp.headers().get(header::RETRY_AFTER)?.to_str().ok()?)
}

/// `Retry-After` as delay-seconds or an HTTP-date, capped at [`BACKOFF_MAX`].
fn parse_retry_after(v: &str) -> Option<Duration> {
    let v = v.trim();
    let secs = match v.parse::<u64>() {
        Ok(s) => s,
        Err(_) => {
            let at = jiff::fmt::rfc2822::DateTimeParser::new()
                .parse_timestamp(v)
                .ok()?;
            u64::try_from(at.as_second() - jiff::Timestamp::now().as_second()).unwrap_or(0)
        }
    };
    Some(Duration::from_secs(secs).min(BACKOFF_MAX))
}

fn is_transient_status(s: StatusCode) -> bool {
    s == StatusCode::TOO_MANY_REQUESTS || s == StatusCode::REQUEST_TIMEOUT || s.is_server_error()
}

/// The error and its sources as one line.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut msg = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        let text = s.to_string();
        if !msg.contains(&text) {
            msg.push_str(": ");
            msg.push_str(&text);
        }
        src = s.source();
    }
    msg
}

/// A TLS certificate problem: retrying cannot help.
fn is_certificate_error(e: &reqwest::Error) -> bool {
    let chain = error_chain(e).to_ascii_lowercase();
    chain.contains("certificate")
}

/// TLS spoken to a server that answers in plain HTTP: retrying cannot help.
fn is_not_tls_error(e: &reqwest::Error) -> bool {
    let chain = error_chain(e).to_ascii_lowercase();
    chain.contains("invalidcontenttype") || chain.contains("corrupt message")
}

fn is_transient_error(e: &reqwest::Error) -> bool {
    (e.is_connect() || e.is_timeout() || e.is_request() || e.is_body() || e.is_decode())
        && !is_certificate_error(e)
        && !is_not_tls_error(e)
}

/// Formats a registry error body (`{"errors":[{"code","message"}]}`).
fn describe(status: StatusCode, body: &[u8]) -> String {
    let mut parts = Vec::new();
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(body)
        && let Some(errs) = v.get("errors").and_then(|e| e.as_array())
    {
        for e in errs {
            let code = e.get("code").and_then(|c| c.as_str()).unwrap_or("");
            let msg = e.get("message").and_then(|c| c.as_str()).unwrap_or("");
            parts.push(
                format!("{code}: {msg}")
                    .trim_matches([' ', ':'])
                    .to_string(),
            );
        }
    }
    if parts.is_empty() {
        let text = String::from_utf8_lossy(body);
        let text = text.trim();
        if !text.is_empty() && text.len() < 300 {
            parts.push(text.to_string());
        }
    }
    if parts.is_empty() {
        format!("HTTP {status}")
    } else {
        format!("HTTP {status}: {}", parts.join("; "))
    }
}

fn auth_hint(host: &str) -> String {
    let mut h = format!(
        "give credentials that may push to {host}: --username with --password-stdin, \
         SETTINGS_IMAGE_USERNAME and SETTINGS_IMAGE_PASSWORD, or `docker login {host}`"
    );
    if host == "ghcr.io" {
        h.push_str(
            "; in GitHub Actions the workflow needs `permissions: packages: write`, and a package \
             first created by hand needs this repository added under the package's \
             \"Manage Actions access\" settings",
        );
    }
    h
}

/// The HTTP client could not be built: in practice, no CA certificates.
fn no_tls_client(repo: &Repository, e: &dyn std::error::Error) -> Error {
    let mut message = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        message = format!("{message}: {s}");
        source = s.source();
    }
    Error::Registry {
        reference: repo.to_string(),
        what: "setting up the HTTPS client".into(),
        message,
        hint: Some(
            "the system has no usable CA certificates: install them (ca-certificates, \
             /etc/ssl/certs/ca-certificates.crt) or point SSL_CERT_FILE at a CA bundle"
                .into(),
        ),
    }
}

impl Session {
    async fn open(repo: Repository, opts: &Options, access: Access) -> Result<Self> {
        let plain = opts.insecure || is_loopback(&repo.host);
        let scheme = if plain { "http" } else { "https" };
        let base = Url::parse(&format!(
            "{scheme}://{}/v2/{}/",
            api_host(&repo.host),
            repo.name
        ))
        .map_err(|e| Error::input(format!("invalid repository {repo}: {e}"), repo_hint()))?;
        let mut builder = reqwest::Client::builder();
        if plain {
            // Nothing to verify over plain HTTP: skip loading the system's CA
            // store (hundreds of files, a good part of a small push).
            builder = builder.tls_certs_only(Vec::new());
        }
        let http = builder
            .connect_timeout(Duration::from_secs(15))
            .read_timeout(Duration::from_secs(60))
            .user_agent(concat!("settings-image/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| no_tls_client(&repo, &e))?;
        let creds = match (&opts.credentials, &opts.login) {
            (Some(c), _) => Some(c.clone()),
            (None, Some(login)) => Some(login.credentials().await?),
            (None, None) => credentials::from_docker_config(&repo.host)?,
        };
        let mut secrets = Vec::new();
        if let Some(c) = &creds
            && !c.password.is_empty()
        {
            secrets.push(c.password.clone());
        }
        // `Client::new` falls back to a default client, which panics when
        // the system has no CA certificates (a `FROM scratch` image without
        // a CA bundle): `try_from` reports it instead.
        let oci = oci_client::Client::try_from(oci_client::client::ClientConfig {
            protocol: if plain {
                oci_client::client::ClientProtocol::Http
            } else {
                oci_client::client::ClientProtocol::Https
            },
            connect_timeout: Some(Duration::from_secs(15)),
            read_timeout: Some(Duration::from_secs(60)),
            ..Default::default()
        })
        .map_err(|e| no_tls_client(&repo, &e))?;
        let session = Session {
            repo,
            base,
            http,
            auth: RefCell::new(Authorization::None),
            creds: RefCell::new(creds),
            login: RefCell::new(opts.login.as_deref().cloned()),
            oci,
            reauths: Cell::new(0),
            monolithic: opts.monolithic,
            secrets: RefCell::new(secrets),
            requests: Cell::new(0),
            uploaded_blobs: Cell::new(0),
            uploaded_bytes: Cell::new(0),
            access,
            referrers_api: Cell::new(None),
            named: RefCell::new(HashMap::new()),
        };
        session.authenticate().await?;
        Ok(session)
    }

    /// Removes every secret from `s`.
    fn scrub(&self, s: impl Into<String>) -> String {
        let mut s = s.into();
        for secret in self.secrets.borrow().iter() {
            if !secret.is_empty() {
                s = s.replace(secret.as_str(), "<redacted>");
            }
        }
        s
    }

    fn registry_err(&self, what: impl Into<String>, message: impl Into<String>) -> Error {
        Error::Registry {
            reference: self.repo.to_string(),
            what: what.into(),
            message: self.scrub(message),
            hint: None,
        }
    }

    fn http_err(&self, what: &str, e: &reqwest::Error) -> Error {
        let mut err = self.registry_err(what, error_chain(e));
        let host = &self.repo.host;
        if let Error::Registry { hint, .. } = &mut err {
            *hint = Some(if is_not_tls_error(e) {
                format!(
                    "{host} does not answer HTTPS; if it is a registry that serves plain HTTP, \
                     add --insecure (plain HTTP is only used by itself for loopback hosts)"
                )
            } else if is_certificate_error(e) {
                format!(
                    "{host} presented a TLS certificate that is not trusted: install its CA in the \
                     system trust store, or use --insecure for a registry that serves plain HTTP"
                )
            } else if self.base.scheme() == "https" {
                format!(
                    "check that {host} is reachable over HTTPS (plain HTTP is only used for loopback \
                     hosts or with --insecure); transient failures were retried {MAX_ATTEMPTS} times"
                )
            } else {
                format!(
                    "check that {host} is reachable; transient failures were retried {MAX_ATTEMPTS} times"
                )
            });
        }
        err
    }

    /// Authenticates for push through `oci-client`: GET /v2/, and for a
    /// Bearer challenge the token request (with Basic credentials when we
    /// have them). Basic challenges keep using the credentials directly.
    async fn authenticate(&self) -> Result<()> {
        use oci_client::errors::OciDistributionError;
        use oci_client::secrets::RegistryAuth;
        let creds = self.creds.borrow().clone();
        let reference = oci_client::Reference::with_tag(
            self.repo.host.clone(),
            self.repo.name.clone(),
            "latest".to_string(),
        );
        let auth = match &creds {
            Some(c) => RegistryAuth::Basic(c.username.clone(), c.password.clone()),
            None => RegistryAuth::Anonymous,
        };
        let mut attempt = 0;
        loop {
            attempt += 1;
            log::debug!(
                "registry: authenticating to {} for {} {}",
                self.repo.host,
                match self.access {
                    Access::Pull => "pull",
                    Access::Push => "push",
                },
                match &creds {
                    Some(c) => format!("as {}", c.username),
                    None => "anonymously".to_string(),
                }
            );
            match self
                .oci
                .auth(
                    &reference,
                    &auth,
                    match self.access {
                        Access::Pull => oci_client::RegistryOperation::Pull,
                        Access::Push => oci_client::RegistryOperation::Push,
                    },
                )
                .await
            {
                Ok(Some(token)) => {
                    self.secrets.borrow_mut().push(token.clone());
                    *self.auth.borrow_mut() = Authorization::Bearer(token);
                    return Ok(());
                }
                Ok(None) => {
                    *self.auth.borrow_mut() = match creds {
                        Some(c) => Authorization::Basic(c.clone()),
                        None => Authorization::None,
                    };
                    return Ok(());
                }
                Err(OciDistributionError::RequestError(e))
                    if is_transient_error(&e) && attempt < MAX_ATTEMPTS =>
                {
                    tokio::time::sleep(backoff(attempt)).await;
                }
                Err(OciDistributionError::AuthenticationFailure(reason)) => {
                    let who = match &creds {
                        Some(c) => format!("as {}", c.username),
                        None => "anonymously".to_string(),
                    };
                    return Err(Error::Auth {
                        host: self.repo.host.clone(),
                        message: self.scrub(format!(
                            "the token service refused {} access to {} {who}: {}",
                            match self.access {
                                Access::Pull => "pull",
                                Access::Push => "push",
                            },
                            self.repo.name,
                            reason.trim()
                        )),
                        hint: auth_hint(&self.repo.host),
                    });
                }
                Err(OciDistributionError::RequestError(e)) => {
                    return Err(self.http_err("contacting the registry", &e));
                }
                Err(e) => {
                    return Err(self.registry_err("contacting the registry", e.to_string()));
                }
            }
        }
    }

    /// One `debug` record per registry request (the action shows it as a
    /// `::debug::` line under `RUNNER_DEBUG=1`): what, the URL without its
    /// query (upload session state) and the status. Never a header.
    fn debug_response(&self, what: &str, attempt: u32, sent: &reqwest::Result<Response>) {
        if !log::log_enabled!(log::Level::Debug) {
            return;
        }
        let (url, status) = match sent {
            Ok(r) => (Some(r.url()), r.status().to_string()),
            Err(e) => (e.url(), format!("failed: {}", error_chain(e))),
        };
        let url = url
            .map(|u| format!("{}{}", u.origin().ascii_serialization(), u.path()))
            .unwrap_or_default();
        log::debug!(
            "registry: {what}: {url} -> {status}{}",
            if attempt > 1 {
                format!(" (attempt {attempt})")
            } else {
                String::new()
            }
        );
    }

    fn url(&self, path: &str) -> Result<Url> {
        self.base
            .join(path)
            .map_err(|e| self.registry_err("building a URL", e.to_string()))
    }

    fn request(&self, method: Method, url: Url) -> RequestBuilder {
        let rb = self.http.request(method, url);
        match &*self.auth.borrow() {
            Authorization::None => rb,
            Authorization::Basic(c) => rb.basic_auth(&c.username, Some(&c.password)),
            Authorization::Bearer(t) => rb.bearer_auth(t),
        }
    }

    /// After a 401 with a Bearer token (expired during a long push): gets a
    /// new token, at most twice per push. With an OIDC login, the first 401
    /// also renews the exchanged credentials (once). True when the request
    /// is worth sending again.
    async fn reauthenticate(&self, status: StatusCode) -> Result<bool> {
        if status != StatusCode::UNAUTHORIZED {
            return Ok(false);
        }
        let login = self.login.borrow_mut().take();
        if let Some(login) = login {
            let fresh = login.credentials().await?;
            self.secrets.borrow_mut().push(fresh.password.clone());
            *self.creds.borrow_mut() = Some(fresh);
            self.authenticate().await?;
            return Ok(true);
        }
        let bearer = matches!(&*self.auth.borrow(), Authorization::Bearer(_));
        if !bearer || self.reauths.get() >= 2 {
            return Ok(false);
        }
        self.reauths.set(self.reauths.get() + 1);
        self.authenticate().await?;
        Ok(true)
    }

    /// Sends a request built by `make`, retrying transient failures when
    /// `retry` is set. Returns the last response, whatever its status.
    async fn send(
        &self,
        what: &str,
        retry: bool,
        make: impl Fn(&Self) -> Result<RequestBuilder>,
    ) -> Result<Response> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let rb = make(self)?;
            self.requests.set(self.requests.get() + 1);
            let can_retry = retry && attempt < MAX_ATTEMPTS;
            let sent = rb.send().await;
            self.debug_response(what, attempt, &sent);
            match sent {
                Ok(resp) if can_retry && is_transient_status(resp.status()) => {
                    let wait = retry_after(&resp).unwrap_or_else(|| backoff(attempt));
                    drop(resp);
                    tokio::time::sleep(wait).await;
                }
                Ok(resp) if can_retry && self.reauthenticate(resp.status()).await? => {}
                Ok(resp) => return Ok(resp),
                Err(e) if can_retry && is_transient_error(&e) => {
                    tokio::time::sleep(backoff(attempt)).await;
                }
                Err(e) => return Err(self.http_err(what, &e)),
            }
        }
    }

    /// Turns a response with an unexpected status into an error.
    async fn fail(&self, what: &str, resp: Response) -> Error {
        let status = resp.status();
        let body = resp.bytes().await.map(|b| b.to_vec()).unwrap_or_default();
        let message = describe(status, &body);
        if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
            return Error::Auth {
                host: self.repo.host.clone(),
                message: self.scrub(format!("{what} in {}: {message}", self.repo.name)),
                hint: auth_hint(&self.repo.host),
            };
        }
        let hint = if status == StatusCode::NOT_FOUND {
            Some(format!(
                "check that the repository {} exists or that the registry creates repositories on push",
                self.repo
            ))
        } else if status == StatusCode::PAYLOAD_TOO_LARGE {
            Some("the registry limits request sizes; chunked uploads (the default) keep each request at 4 MiB".into())
        } else if status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS {
            Some(format!(
                "the registry kept failing after {MAX_ATTEMPTS} attempts; try again later"
            ))
        } else if status == StatusCode::METHOD_NOT_ALLOWED || status == StatusCode::NOT_IMPLEMENTED
        {
            Some("if this registry does not support chunked uploads, try --monolithic".into())
        } else {
            None
        };
        let mut err = self.registry_err(what, message);
        if let Error::Registry { hint: h, .. } = &mut err {
            *h = hint;
        }
        err
    }

    /// The digest a tag (or digest) names, or `None` when it does not exist.
    async fn manifest_digest(&self, reference: &str) -> Result<Option<String>> {
        Ok(self.head_manifest(reference).await?.map(|d| d.digest))
    }

    /// Reads a body of at most [`MAX_SMALL`] bytes.
    async fn small_body(&self, what: &str, mut resp: Response, kind: &str) -> Result<Vec<u8>> {
        let too_large = || {
            self.registry_err(
                what,
                format!(
                    "the {kind} is larger than {MAX_SMALL} bytes, more than is read into memory"
                ),
            )
        };
        if resp.content_length().is_some_and(|n| n > MAX_SMALL as u64) {
            return Err(too_large());
        }
        let mut body = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| self.http_err(what, &e))? {
            if body.len() + chunk.len() > MAX_SMALL {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    /// `HEAD` or `GET` of `manifests/REFERENCE`: the response when it
    /// exists, `None` on 404, the registry's error otherwise.
    async fn manifest_request(
        &self,
        method: Method,
        what: &str,
        reference: &str,
    ) -> Result<Option<Response>> {
        let url = self.url(&format!("manifests/{reference}"))?;
        let resp = self
            .send(what, true, |s| {
                Ok(s.request(method.clone(), url.clone())
                    .header(header::ACCEPT, ACCEPT_MANIFESTS))
            })
            .await?;
        match resp.status() {
            StatusCode::OK => Ok(Some(resp)),
            StatusCode::NOT_FOUND => Ok(None),
            _ => Err(self.fail(what, resp).await),
        }
    }

    /// What a tag (or digest) names, or `None` when it does not exist.
    async fn head_manifest(&self, reference: &str) -> Result<Option<Descriptor>> {
        let what = format!("checking manifest {}:{reference}", self.repo);
        let Some(resp) = self
            .manifest_request(Method::HEAD, &what, reference)
            .await?
        else {
            return Ok(None);
        };
        let digest = header_str(&resp, "docker-content-digest");
        let media_type = header_str(&resp, header::CONTENT_TYPE.as_str());
        let size =
            header_str(&resp, header::CONTENT_LENGTH.as_str()).and_then(|v| v.parse::<u64>().ok());
        if let (Some(digest), Some(media_type), Some(size)) = (digest, media_type, size) {
            return Ok(Some(Descriptor {
                media_type,
                digest,
                size,
                artifact_type: None,
                annotations: Default::default(),
            }));
        }
        // Not everything in the headers: fetch the manifest and hash it.
        Ok(self.get_manifest(reference).await?.map(|m| Descriptor {
            size: m.bytes.len() as u64,
            media_type: m.media_type,
            digest: m.digest,
            artifact_type: None,
            annotations: Default::default(),
        }))
    }

    /// The manifest a tag (or digest) names, or `None` when it does not exist.
    async fn get_manifest(&self, reference: &str) -> Result<Option<Manifest>> {
        let what = format!("getting manifest {}:{reference}", self.repo);
        let Some(resp) = self.manifest_request(Method::GET, &what, reference).await? else {
            return Ok(None);
        };
        let header_type = header_str(&resp, header::CONTENT_TYPE.as_str());
        let bytes = self.small_body(&what, resp, "manifest").await?;
        let digest = crate::image::sha256_digest(&bytes);
        if !reference.starts_with("sha256:") {
            self.named
                .borrow_mut()
                .insert(reference.to_string(), digest.clone());
        }
        if reference.starts_with("sha256:") && digest != reference {
            return Err(self.registry_err(
                &what,
                format!("the registry sent content with digest {digest}"),
            ));
        }
        // The manifest's own mediaType wins over a generic Content-Type.
        let media_type = serde_json::from_slice::<serde_json::Value>(&bytes)
            .ok()
            .and_then(|v| {
                v.get("mediaType")
                    .and_then(|m| m.as_str())
                    .map(String::from)
            })
            .or(header_type)
            .unwrap_or_else(|| MANIFEST_MEDIA_TYPE.to_string());
        Ok(Some(Manifest {
            bytes,
            media_type,
            digest,
        }))
    }

    /// A small blob's bytes, checked against its digest.
    async fn get_blob(&self, digest: &str) -> Result<Vec<u8>> {
        let what = format!("getting blob {digest}");
        let url = self.url(&format!("blobs/{digest}"))?;
        let resp = self
            .send(&what, true, |s| Ok(s.request(Method::GET, url.clone())))
            .await?;
        if resp.status() != StatusCode::OK {
            return Err(self.fail(&what, resp).await);
        }
        let bytes = self.small_body(&what, resp, "blob").await?;
        let got = crate::image::sha256_digest(&bytes);
        if got != digest {
            return Err(self.registry_err(
                &what,
                format!("the registry sent content with digest {got}"),
            ));
        }
        Ok(bytes)
    }

    /// Uploads `bytes` as a blob unless the registry has it.
    async fn put_blob(&self, media_type: &str, bytes: &[u8]) -> Result<Descriptor> {
        let desc = Descriptor::of(media_type, bytes);
        if !self.blob_exists(&desc.digest).await? {
            self.upload_blob(&desc, Blob::Memory(bytes)).await?;
        }
        Ok(desc)
    }

    /// Mounts `digest` from `from` (a repository name on the same
    /// registry). False when the registry did not mount it (it opened an
    /// upload session instead, which is cancelled): upload it then.
    async fn mount_blob(&self, digest: &str, from: &str) -> Result<bool> {
        let what = format!("mounting blob {digest} from {from}");
        let mut url = self.url("blobs/uploads/")?;
        url.query_pairs_mut()
            .append_pair("mount", digest)
            .append_pair("from", from);
        let resp = self
            .send(&what, true, |s| {
                Ok(s.request(Method::POST, url.clone())
                    .header(header::CONTENT_LENGTH, 0))
            })
            .await?;
        match resp.status() {
            StatusCode::CREATED => Ok(true),
            StatusCode::ACCEPTED => {
                // An upload session we do not need: cancel it, best effort.
                if let Ok(loc) = self.location(&what, &resp) {
                    let _ = self
                        .send(&what, false, |s| Ok(s.request(Method::DELETE, loc.clone())))
                        .await;
                }
                Ok(false)
            }
            _ => Err(self.fail(&what, resp).await),
        }
    }

    /// Puts manifest `bytes` under `reference` (a tag or its digest).
    async fn put_manifest_bytes(
        &self,
        reference: &str,
        bytes: &[u8],
        media_type: &str,
    ) -> Result<PutManifest> {
        let what = format!("putting manifest {}:{reference}", self.repo);
        let url = self.url(&format!("manifests/{reference}"))?;
        let digest = crate::image::sha256_digest(bytes);
        let resp = self
            .send(&what, true, |s| {
                Ok(s.request(Method::PUT, url.clone())
                    .header(header::CONTENT_TYPE, media_type)
                    .body(bytes.to_vec()))
            })
            .await?;
        if resp.status() != StatusCode::CREATED {
            return Err(self.fail(&what, resp).await);
        }
        if let Some(d) = header_str(&resp, "docker-content-digest")
            && d != digest
        {
            return Err(self.registry_err(
                what,
                format!("the registry stored the manifest as {d}, not as {digest}"),
            ));
        }
        Ok(PutManifest {
            digest,
            subject: header_str(&resp, "oci-subject"),
        })
    }

    /// Every tag of the repository, following `Link` pagination. Empty
    /// when the repository does not exist yet.
    async fn list_tags(&self) -> Result<Vec<String>> {
        #[derive(serde::Deserialize)]
        struct TagList {
            #[serde(default)]
            tags: Option<Vec<String>>,
        }
        let what = format!("listing tags of {}", self.repo);
        let mut url = self.url("tags/list")?;
        url.query_pairs_mut().append_pair("n", "1000");
        let mut tags = Vec::new();
        for _ in 0..10_000 {
            let resp = self
                .send(&what, true, |s| Ok(s.request(Method::GET, url.clone())))
                .await?;
            match resp.status() {
                StatusCode::OK => {}
                StatusCode::NOT_FOUND if tags.is_empty() => return Ok(tags),
                _ => return Err(self.fail(&what, resp).await),
            }
            let next = next_link(&resp);
            let body = self.small_body(&what, resp, "answer").await?;
            let page: TagList = serde_json::from_slice(&body)
                .map_err(|e| self.registry_err(&what, format!("unreadable tag list: {e}")))?;
            tags.extend(page.tags.unwrap_or_default());
            match next {
                Some(n) => {
                    url = url
                        .join(&n)
                        .map_err(|e| self.registry_err(&what, format!("bad Link {n:?}: {e}")))?
                }
                None => return Ok(tags),
            }
        }
        Err(self.registry_err(&what, "the tag list never ended (more than 10000 pages)"))
    }

    /// The referrers of `subject`, optionally only those of `artifact_type`:
    /// the referrers API when the registry has it, else the referrers tag
    /// schema (`sha256-<hex>`).
    async fn referrers(
        &self,
        subject: &str,
        artifact_type: Option<&str>,
    ) -> Result<Vec<Descriptor>> {
        let mut list = match self.referrers_api_list(subject, artifact_type).await? {
            Some(l) => l,
            None => self.referrers_tag_index(subject).await?.manifests,
        };
        if let Some(t) = artifact_type {
            list.retain(|d| d.artifact_type.as_deref() == Some(t));
        }
        Ok(list)
    }

    /// `GET /v2/NAME/referrers/DIGEST` (all pages), or `None` when the
    /// registry does not implement it (anything but 200 with an index).
    async fn referrers_api_list(
        &self,
        subject: &str,
        artifact_type: Option<&str>,
    ) -> Result<Option<Vec<Descriptor>>> {
        if self.referrers_api.get() == Some(false) {
            return Ok(None);
        }
        let what = format!("listing referrers of {}@{subject}", self.repo);
        let mut url = self.url(&format!("referrers/{subject}"))?;
        if let Some(t) = artifact_type {
            url.query_pairs_mut().append_pair("artifactType", t);
        }
        let mut list = Vec::new();
        for _ in 0..1000 {
            let resp = self
                .send(&what, true, |s| {
                    Ok(s.request(Method::GET, url.clone())
                        .header(header::ACCEPT, INDEX_MEDIA_TYPE))
                })
                .await?;
            match resp.status() {
                StatusCode::OK => {}
                StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                    return Err(self.fail(&what, resp).await);
                }
                s if s.is_server_error() => return Err(self.fail(&what, resp).await),
                _ => {
                    self.referrers_api.set(Some(false));
                    return Ok(None);
                }
            }
            let next = next_link(&resp);
            let body = self.small_body(&what, resp, "answer").await?;
            let Ok(index) = Index::parse(&body) else {
                // Some registries answer 200 with an HTML page or an error.
                self.referrers_api.set(Some(false));
                return Ok(None);
            };
            self.referrers_api.set(Some(true));
            list.extend(index.manifests);
            match next {
                Some(n) => {
                    url = url
                        .join(&n)
                        .map_err(|e| self.registry_err(&what, format!("bad Link {n:?}: {e}")))?
                }
                None => return Ok(Some(list)),
            }
        }
        Err(self.registry_err(
            &what,
            "the referrers list never ended (more than 1000 pages)",
        ))
    }

    /// The index under the referrers tag of `subject` (empty when missing).
    async fn referrers_tag_index(&self, subject: &str) -> Result<Index> {
        let tag = artifact::referrers_tag(subject);
        match self.get_manifest(&tag).await? {
            None => Ok(Index::empty()),
            Some(m) => Index::parse(&m.bytes).map_err(|e| {
                self.registry_err(
                    format!("reading the referrers index {}:{tag}", self.repo),
                    format!("{e}"),
                )
            }),
        }
    }

    /// Attaches `art` to `subject`: uploads its blobs, puts its manifest by
    /// digest and, when the registry does not confirm the subject with
    /// `OCI-Subject`, adds it to the referrers tag's index.
    async fn attach_referrer(&self, subject: &Descriptor, art: &Artifact) -> Result<Attached> {
        use futures_util::future::try_join_all;
        let (bytes, descriptor) = artifact::manifest(subject, art)?;
        let empty = artifact::empty_descriptor();
        self.put_blob(&empty.media_type, artifact::EMPTY_JSON)
            .await?;
        try_join_all(art.layers.iter().map(|(mt, b)| self.put_blob(mt, b))).await?;
        let put = self
            .put_manifest_bytes(&descriptor.digest, &bytes, MANIFEST_MEDIA_TYPE)
            .await?;
        if put.subject.as_deref() == Some(subject.digest.as_str()) {
            self.referrers_api.set(Some(true));
            return Ok(Attached {
                descriptor,
                referrers_tag: None,
            });
        }
        // Referrers tag schema (distribution spec v1.1): read, add, write.
        let tag = artifact::referrers_tag(&subject.digest);
        let mut index = self.referrers_tag_index(&subject.digest).await?;
        if !index
            .manifests
            .iter()
            .any(|d| d.digest == descriptor.digest)
        {
            index.manifests.push(descriptor.clone());
            index.media_type = Some(INDEX_MEDIA_TYPE.to_string());
            index.schema_version = 2;
            let bytes = index.to_bytes()?;
            self.put_manifest_bytes(&tag, &bytes, INDEX_MEDIA_TYPE)
                .await?;
        }
        Ok(Attached {
            descriptor,
            referrers_tag: Some(tag),
        })
    }

    async fn blob_exists(&self, digest: &str) -> Result<bool> {
        let what = format!("checking blob {digest}");
        let url = self.url(&format!("blobs/{digest}"))?;
        let resp = self
            .send(&what, true, |s| Ok(s.request(Method::HEAD, url.clone())))
            .await?;
        match resp.status() {
            s if s.is_success() => Ok(true),
            StatusCode::NOT_FOUND => Ok(false),
            _ => Err(self.fail(&what, resp).await),
        }
    }

    fn location(&self, what: &str, resp: &Response) -> Result<Url> {
        let loc = resp
            .headers()
            .get(header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| self.registry_err(what, "the registry sent no Location header"))?;
        resp.url()
            .join(loc)
            .map_err(|e| self.registry_err(what, format!("bad Location {loc:?}: {e}")))
    }

    /// Sends one request of an upload session. Errors are classified as
    /// retryable (the session is restarted) or permanent.
    async fn upload_step(
        &self,
        what: &str,
        method: Method,
        url: &Url,
        body: Body<'_>,
        headers: HeaderMap,
        expect: StatusCode,
    ) -> Result<Result<Response, (Error, Option<Duration>)>> {
        let body = match body {
            Body::Empty => reqwest::Body::from(Vec::new()),
            Body::Bytes(b) => reqwest::Body::from(b),
            Body::File(path) => file_stream(path)
                .await
                .map_err(|e| Error::io(format!("reading {}", path.display()), e))?,
        };
        let rb = self
            .request(method, url.clone())
            .headers(headers)
            .body(body);
        self.requests.set(self.requests.get() + 1);
        let sent = rb.send().await;
        self.debug_response(what, 1, &sent);
        match sent {
            Ok(resp) if resp.status() == expect => Ok(Ok(resp)),
            Ok(resp) if self.reauthenticate(resp.status()).await? => {
                // A new token: start the upload over in a new session.
                Ok(Err((self.fail(what, resp).await, Some(Duration::ZERO))))
            }
            Ok(resp) if is_transient_status(resp.status()) => {
                let wait = retry_after(&resp);
                Ok(Err((self.fail(what, resp).await, wait)))
            }
            Ok(resp) => Err(self.fail(what, resp).await),
            Err(e) if is_transient_error(&e) => Ok(Err((self.http_err(what, &e), None))),
            Err(e) => Err(self.http_err(what, &e)),
        }
    }

    /// Uploads one blob, restarting in a new session after a transient
    /// failure, at most [`MAX_ATTEMPTS`] times.
    async fn upload_blob(&self, desc: &Descriptor, blob: Blob<'_>) -> Result<()> {
        let what = format!("uploading blob {}", desc.digest);
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.upload_session(&what, desc, &blob).await? {
                Ok(()) => {
                    self.uploaded_blobs.set(self.uploaded_blobs.get() + 1);
                    self.uploaded_bytes
                        .set(self.uploaded_bytes.get() + desc.size);
                    return Ok(());
                }
                Err((err, wait)) => {
                    if attempt >= MAX_ATTEMPTS {
                        return Err(err);
                    }
                    tokio::time::sleep(wait.unwrap_or_else(|| backoff(attempt))).await;
                }
            }
        }
    }

    async fn upload_session(
        &self,
        what: &str,
        desc: &Descriptor,
        blob: &Blob<'_>,
    ) -> Result<Result<(), (Error, Option<Duration>)>> {
        let start = self.url("blobs/uploads/")?;
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(0));
        let resp = match self
            .upload_step(
                what,
                Method::POST,
                &start,
                Body::Empty,
                h,
                StatusCode::ACCEPTED,
            )
            .await?
        {
            Ok(r) => r,
            Err(e) => return Ok(Err(e)),
        };
        let mut loc = self.location(what, &resp)?;
        drop(resp);
        let octet = HeaderValue::from_static("application/octet-stream");
        // A blob that fits in one request goes in one PUT either way.
        if self.monolithic || desc.size <= CHUNK_SIZE {
            let mut url = loc.clone();
            url.query_pairs_mut().append_pair("digest", &desc.digest);
            let mut h = HeaderMap::new();
            h.insert(header::CONTENT_TYPE, octet);
            h.insert(header::CONTENT_LENGTH, HeaderValue::from(desc.size));
            let body = match blob {
                Blob::Memory(b) => Body::Bytes(b.to_vec()),
                Blob::File(p) => Body::File(p),
            };
            return Ok(
                match self
                    .upload_step(what, Method::PUT, &url, body, h, StatusCode::CREATED)
                    .await?
                {
                    Ok(resp) => self.check_blob_digest(what, desc, &resp).map(Ok)?,
                    Err(e) => Err(e),
                },
            );
        }
        let file = match blob {
            Blob::File(p) => Some(
                std::fs::File::open(p)
                    .map_err(|e| Error::io(format!("reading {}", p.display()), e))?,
            ),
            Blob::Memory(_) => None,
        };
        let mut offset = 0u64;
        while offset < desc.size {
            let len = CHUNK_SIZE.min(desc.size - offset);
            let chunk = match (&file, blob) {
                (Some(f), _) => {
                    let mut buf = vec![0u8; len as usize];
                    f.read_exact_at(&mut buf, offset)
                        .map_err(|e| Error::io("reading the layer", e))?;
                    buf
                }
                (None, Blob::Memory(b)) => b
                    .get(offset as usize..(offset + len) as usize)
                    .unwrap_or_default()
                    .to_vec(),
                (None, Blob::File(_)) => Vec::new(),
            };
            let mut h = HeaderMap::new();
            h.insert(header::CONTENT_TYPE, octet.clone());
            h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
            let range = format!("{}-{}", offset, offset + len - 1);
            h.insert(
                header::CONTENT_RANGE,
                HeaderValue::from_str(&range)
                    .map_err(|e| self.registry_err(what, e.to_string()))?,
            );
            let resp = match self
                .upload_step(
                    what,
                    Method::PATCH,
                    &loc,
                    Body::Bytes(chunk),
                    h,
                    StatusCode::ACCEPTED,
                )
                .await?
            {
                Ok(r) => r,
                Err(e) => return Ok(Err(e)),
            };
            loc = self.location(what, &resp)?;
            offset += len;
        }
        let mut url = loc;
        url.query_pairs_mut().append_pair("digest", &desc.digest);
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(0));
        Ok(
            match self
                .upload_step(what, Method::PUT, &url, Body::Empty, h, StatusCode::CREATED)
                .await?
            {
                Ok(resp) => self.check_blob_digest(what, desc, &resp).map(Ok)?,
                Err(e) => Err(e),
            },
        )
    }

    fn check_blob_digest(&self, what: &str, desc: &Descriptor, resp: &Response) -> Result<()> {
        if let Some(d) = resp
            .headers()
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok())
            && d != desc.digest
        {
            return Err(self.registry_err(
                what,
                format!("the registry stored digest {d}, expected {}", desc.digest),
            ));
        }
        Ok(())
    }

    async fn put_manifest(&self, image: &Image, reference: &str) -> Result<()> {
        let put = self
            .put_manifest_bytes(reference, &image.manifest, MANIFEST_MEDIA_TYPE)
            .await?;
        if put.digest != image.digest {
            return Err(self.registry_err(
                format!("putting manifest {}:{reference}", self.repo),
                format!("the manifest digest {} is not {}", put.digest, image.digest),
            ));
        }
        Ok(())
    }

    async fn push(&self, image: &Image, tags: &[String]) -> Result<Pushed> {
        use futures_util::future::{try_join, try_join_all};
        // 1. What does every tag name now? Refuse before uploading anything.
        // A tag this session just read as naming this very digest (a re-push)
        // needs no second request.
        let current = try_join_all(tags.iter().map(|t| async move {
            let known = self.named.borrow().get(t.as_str()).cloned();
            match known {
                Some(d) if d == image.digest => Ok(Some(d)),
                _ => self.manifest_digest(t).await,
            }
        }))
        .await?;
        let mut to_tag = Vec::new();
        let mut content_present = false;
        for (tag, digest) in tags.iter().zip(current) {
            match digest {
                Some(d) if d == image.digest => content_present = true,
                Some(d) if is_timestamp_tag(tag) => {
                    return Err(Error::TagExists {
                        tag: format!("{}:{tag}", self.repo),
                        existing: d,
                        new: image.digest.clone(),
                    });
                }
                _ => to_tag.push(tag.clone()),
            }
        }
        let untagged = tags.is_empty();
        if untagged {
            content_present = self.manifest_digest(&image.digest).await?.is_some();
        }
        // 2. Blobs, unless a manifest naming them is already there (a
        // registry only accepts a manifest whose blobs it holds). Layer and
        // config go side by side.
        if !content_present && (untagged || !to_tag.is_empty()) {
            let layer = async {
                if !self.blob_exists(&image.layer_descriptor.digest).await? {
                    self.upload_blob(&image.layer_descriptor, Blob::File(image.layer.file.path()))
                        .await?;
                }
                Ok::<_, Error>(())
            };
            let config = async {
                if !self.blob_exists(&image.config_descriptor.digest).await? {
                    self.upload_blob(&image.config_descriptor, Blob::Memory(&image.config))
                        .await?;
                }
                Ok::<_, Error>(())
            };
            try_join(layer, config).await?;
        }
        // 3. The manifest, under each tag that does not name it yet.
        let mut manifests_put = 0;
        if untagged {
            if !content_present {
                self.put_manifest(image, &image.digest).await?;
                manifests_put += 1;
            }
        } else {
            try_join_all(to_tag.iter().map(|t| self.put_manifest(image, t))).await?;
            manifests_put += to_tag.len();
        }
        let reference = match tags.first() {
            Some(t) => format!("{}:{t}@{}", self.repo, image.digest),
            None => format!("{}@{}", self.repo, image.digest),
        };
        let uploaded_blobs = self.uploaded_blobs.get();
        Ok(Pushed {
            reference,
            uploaded_blobs,
            uploaded_bytes: self.uploaded_bytes.get(),
            pushed: manifests_put > 0 || uploaded_blobs > 0,
            requests: self.requests.get(),
        })
    }
}

fn header_str(resp: &Response, name: &str) -> Option<String> {
    resp.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_string())
}

/// The `rel="next"` target of a `Link` header.
fn next_link(resp: &Response) -> Option<String> {
    resp.headers()
        .get_all(header::LINK)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .find(|l| l.contains("rel=\"next\"") || l.contains("rel=next"))
        .and_then(|l| {
            let start = l.find('<')? + 1;
            let end = l[start..].find('>')? + start;
            Some(l[start..end].to_string())
        })
}

/// A request body that streams `path` from disk.
async fn file_stream(path: &Path) -> std::io::Result<reqwest::Body> {
    use tokio::io::AsyncReadExt;
    let file = tokio::fs::File::open(path).await?;
    let stream = futures_util::stream::try_unfold(file, |mut f| async move {
        let mut buf = vec![0u8; STREAM_BUF];
        let n = f.read(&mut buf).await?;
        if n == 0 {
            Ok::<_, std::io::Error>(None)
        } else {
            buf.truncate(n);
            Ok(Some((buf, f)))
        }
    });
    Ok(reqwest::Body::wrap_stream(stream))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repositories() {
        let r = parse_repository("ghcr.io/acme/settings").unwrap();
        assert_eq!(r.host, "ghcr.io");
        assert_eq!(r.name, "acme/settings");
        assert!(parse_repository("localhost:5000/a/b-c__d.e").is_ok());
        for bad in [
            "settings",
            "acme/settings",
            "ghcr.io/",
            "ghcr.io/a//b",
            "ghcr.io/a/b:tag",
            "ghcr.io/a/b@sha256:00",
            "ghcr.io/-a",
            "ghcr.io/a_-b",
        ] {
            assert!(parse_repository(bad).is_err(), "{bad}");
        }
        let err = parse_repository("ghcr.io/Acme/settings").unwrap_err();
        assert!(err.hint().unwrap().contains("ghcr.io/acme/settings"));
        assert_eq!(err.exit_code(), 2);
    }

    #[test]
    fn loopback() {
        for h in [
            "localhost",
            "localhost:5000",
            "127.0.0.1:1",
            "127.9.9.9",
            "[::1]:5000",
            "::1",
        ] {
            assert!(is_loopback(h), "{h}");
        }
        for h in [
            "ghcr.io",
            "10.0.0.1:5000",
            "localhost.example.com",
            "[::2]:1",
        ] {
            assert!(!is_loopback(h), "{h}");
        }
    }

    #[test]
    fn credentials_debug_redacts() {
        let c = Credentials {
            username: "u".into(),
            password: "hunter2".into(),
        };
        assert!(!format!("{c:?}").contains("hunter2"));
    }

    #[test]
    fn ghcr_auth_hint_names_the_workflow_fixes() {
        let h = auth_hint("ghcr.io");
        assert!(h.contains("permissions: packages: write"), "{h}");
        assert!(h.contains("Manage Actions access"), "{h}");
        assert!(!auth_hint("quay.io").contains("Manage Actions"));
    }

    #[test]
    fn registry_error_bodies_are_summarised() {
        let body = br#"{"errors":[{"code":"NAME_UNKNOWN","message":"repository name not known to registry"}]}"#;
        assert_eq!(
            describe(StatusCode::NOT_FOUND, body),
            "HTTP 404 Not Found: NAME_UNKNOWN: repository name not known to registry"
        );
        assert_eq!(
            describe(StatusCode::BAD_GATEWAY, b""),
            "HTTP 502 Bad Gateway"
        );
    }

    #[test]
    fn retry_after_forms() {
        assert_eq!(parse_retry_after("3"), Some(Duration::from_secs(3)));
        assert_eq!(parse_retry_after("100000"), Some(BACKOFF_MAX));
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(Duration::ZERO)
        );
        let soon = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(5);
        let http_date = jiff::fmt::rfc2822::DateTimePrinter::new()
            .timestamp_to_rfc9110_string(&soon)
            .unwrap();
        let d = parse_retry_after(&http_date).unwrap();
        assert!(
            d >= Duration::from_secs(3) && d <= Duration::from_secs(5),
            "{d:?}"
        );
        assert_eq!(parse_retry_after("soon"), None);
    }

    #[test]
    fn backoff_is_bounded() {
        for a in 1..40 {
            assert!(backoff(a) <= BACKOFF_MAX);
        }
        assert!(backoff(1) <= BACKOFF_BASE);
    }
}
