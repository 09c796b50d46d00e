//! The transport: sending requests to one repository's registry API with
//! retries, error classification and secret scrubbing.
//!
//! Requests are retried on 429 (honouring `Retry-After`), 408, 5xx,
//! connection errors and timeouts with bounded exponential backoff and
//! jitter. A certificate problem or TLS spoken to a plain-HTTP server is
//! not retried: it cannot get better. A 401 while holding a Bearer token
//! fetches a new token (at most twice per session). Every error message
//! passes through [`Transport::scrub`], so neither the password nor a
//! token reaches output; [`error_chain`] is the one place an error and its
//! causes become one line, and a URL in one is shown without its query.
//!
//! Credentials stay on their host: a request carries the `Authorization`
//! header only when it goes to the registry's own origin (an upload
//! `Location` or a link elsewhere gets none, and reqwest drops the header
//! on a redirect to another host), and the token flow asks
//! [`Auth::realm_allows`] before it sends credentials to a token realm.

use std::cell::{Cell, RefCell};
use std::path::Path;
use std::time::Duration;

use reqwest::header;
use reqwest::{Method, RequestBuilder, Response, StatusCode, Url};

use super::auth::{
    self, Access, Auth, CredentialSource, Credentials, host_port, same_registry, shown_url,
};
use super::deadline;

mod token;
use super::name::{Repository, api_host, is_loopback, repo_hint};
use crate::error::{Error, Result, error_chain};
use crate::field::Field;
use crate::text;

/// How often one request (or one blob upload) is tried before giving up.
pub(crate) const MAX_ATTEMPTS: u32 = 6;
/// The first backoff delay; it doubles per attempt.
const BACKOFF_BASE: Duration = Duration::from_millis(200);
/// The longest single wait between attempts, `Retry-After` included.
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// The largest manifest or blob read into memory (`get_manifest`, `get_blob`).
pub const MAX_SMALL: usize = 16 * 1024 * 1024;
/// The most read of an error answer's body: registries explain an error in
/// a few hundred bytes of JSON; a hostile one may send gigabytes.
pub const MAX_ERROR_BODY: usize = 64 * 1024;

/// One try of a step of a larger operation (a blob upload session), which
/// starts over as a whole after a transient failure. A permanent failure is
/// the outer `Err`.
pub(crate) enum Attempt<T> {
    /// The step gave what was expected.
    Done(T),
    /// A transient failure: start the operation over after `wait`
    /// (`None`: the usual backoff).
    Retry {
        /// The error to report if no attempt is left.
        error: Error,
        /// How long the registry asked us to wait, if it did.
        wait: Option<Duration>,
    },
}

fn jitter(d: Duration) -> Duration {
    // 50% to 100% of d.
    let ms = d.as_millis() as u64;
    Duration::from_millis(ms / 2 + fastrand::u64(0..=ms / 2))
}

/// The wait before attempt `attempt + 1`: doubling, capped, jittered.
pub(crate) fn backoff(attempt: u32) -> Duration {
    let d = BACKOFF_BASE.saturating_mul(1 << attempt.saturating_sub(1).min(16));
    jitter(d.min(BACKOFF_MAX))
}

fn retry_after(resp: &Response) -> Option<Duration> {
    parse_retry_after(
        resp.headers().get(header::RETRY_AFTER)?.to_str().ok()?,
        jiff::Timestamp::now(),
    )
}

/// `Retry-After` as delay-seconds or an HTTP-date (the wait from `now`),
/// capped at [`BACKOFF_MAX`].
fn parse_retry_after(v: &str, now: jiff::Timestamp) -> Option<Duration> {
    let v = v.trim();
    let secs = match v.parse::<u64>() {
        Ok(s) => s,
        Err(_) => {
            let at = jiff::fmt::rfc2822::DateTimeParser::new()
                .parse_timestamp(v)
                .ok()?;
            u64::try_from(at.as_second() - now.as_second()).unwrap_or(0)
        }
    };
    Some(Duration::from_secs(secs).min(BACKOFF_MAX))
}

fn is_transient_status(s: StatusCode) -> bool {
    s == StatusCode::TOO_MANY_REQUESTS || s == StatusCode::REQUEST_TIMEOUT || s.is_server_error()
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

/// Reads at most [`MAX_ERROR_BODY`] bytes of an error answer, and says
/// when it stopped early: cut at the cap, or the answer stopped coming.
async fn error_body(mut resp: Response) -> (Vec<u8>, Option<String>) {
    let announced = resp.content_length();
    let mut body = Vec::new();
    loop {
        match resp.chunk().await {
            Ok(Some(chunk)) => {
                let room = MAX_ERROR_BODY - body.len();
                if chunk.len() > room {
                    body.extend_from_slice(&chunk[..room]);
                    let of = announced.map_or(String::new(), |n| format!(" of {n}"));
                    return (
                        body,
                        Some(format!(
                            "the answer was cut at {MAX_ERROR_BODY} bytes{of}; the rest was not read"
                        )),
                    );
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => return (body, None),
            Err(e) if e.is_timeout() => {
                let d = deadline::secs(deadline::get().request);
                return (
                    body,
                    Some(format!(
                        "the rest of the answer did not come within the per-request deadline of {d} s"
                    )),
                );
            }
            Err(e) => {
                return (
                    body,
                    Some(format!("the answer broke off: {}", reqwest_chain(&e))),
                );
            }
        }
    }
}

/// An HTTP error and its causes as one line, its URL shown without query
/// (a presigned upload URL's query holds a signature and a token).
fn reqwest_chain(e: &reqwest::Error) -> String {
    let text = error_chain(e);
    match e.url() {
        Some(u) => text.replace(u.as_str(), &shown_url(u)),
        None => text,
    }
}

/// The HTTP client could not be built: in practice, no CA certificates.
fn no_tls_client(repo: &Repository, e: &dyn std::error::Error) -> Error {
    Error::Registry {
        reference: repo.to_string(),
        what: "setting up the HTTPS client".into(),
        message: error_chain(e),
        hint: Some(
            "the system has no usable CA certificates: install them (ca-certificates, \
             /etc/ssl/certs/ca-certificates.crt) or point SSL_CERT_FILE at a CA bundle"
                .into(),
        ),
    }
}

/// A response header as trimmed text.
pub(crate) fn header_str(resp: &Response, name: &str) -> Option<String> {
    resp.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_string())
}

/// The `rel="next"` target of a `Link` header.
pub(crate) fn next_link(resp: &Response) -> Option<String> {
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

/// The connection to one repository: HTTP client, authorization, the
/// secrets to scrub and a request counter.
pub(crate) struct Transport {
    /// The repository every request is about.
    pub(crate) repo: Repository,
    base: Url,
    http: reqwest::Client,
    auth: Auth,
    /// Strings that must never reach output: password, its Basic
    /// encodings and tokens.
    secrets: RefCell<Vec<String>>,
    requests: Cell<u64>,
    /// The login the credentials came from, until it renewed them (once).
    login: RefCell<Option<Box<dyn CredentialSource>>>,
    /// What the latest request was for, for a deadline's message.
    doing: RefCell<String>,
}

impl Transport {
    /// Connects to `repo` (plain HTTP for loopback hosts or when `insecure`)
    /// and authenticates for `access` with `creds`, else with what docker's
    /// config at `docker_config` holds for the host, else anonymously.
    pub(crate) async fn open(
        repo: Repository,
        insecure: bool,
        creds: Option<Credentials>,
        docker_config: Option<&Path>,
        login: Option<Box<dyn CredentialSource>>,
        access: Access,
    ) -> Result<Self> {
        let plain = insecure || is_loopback(&repo.host);
        let scheme = if plain { "http" } else { "https" };
        let base = Url::parse(&format!(
            "{scheme}://{}/v2/{}/",
            api_host(&repo.host),
            repo.name
        ))
        .map_err(|e| Error::Input {
            message: format!("invalid repository {repo}: {e}").into(),
            hint: repo_hint(),
        })?;
        if !plain {
            // A CA bundle the user named must be usable: said here, by name.
            crate::trust::check()?;
        }
        let mut builder = reqwest::Client::builder();
        if plain {
            // Nothing to verify over plain HTTP: skip loading the system's CA
            // store (hundreds of files, a good part of a small push).
            builder = builder.tls_certs_only(Vec::new());
        }
        // A redirect to another host (a CDN for a blob) carries neither
        // the Authorization header (reqwest drops it) nor a Referer naming
        // the registry URL it came from.
        let http = builder
            .referer(false)
            .connect_timeout(Duration::from_secs(15))
            .read_timeout(Duration::from_secs(60))
            .user_agent(concat!("settings-image/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| no_tls_client(&repo, &e))?;
        let creds = match (creds, &login) {
            (Some(c), _) => Some(c),
            (None, Some(l)) => Some(l.credentials().await?),
            (None, None) => auth::from_docker_config(docker_config, &repo.host)?,
        };
        let auth = Auth::new(creds, access);
        let secrets = auth.secrets();
        let t = Transport {
            repo,
            base,
            http,
            auth,
            secrets: RefCell::new(secrets),
            requests: Cell::new(0),
            login: RefCell::new(login),
            doing: RefCell::new("contacting the registry".into()),
        };
        t.authenticate().await?;
        Ok(t)
    }

    /// HTTP requests sent so far (after authentication).
    pub(crate) fn requests(&self) -> u64 {
        self.requests.get()
    }

    /// What the latest request was for (e.g. `uploading blob sha256:...`).
    pub(crate) fn doing(&self) -> String {
        self.doing.borrow().clone()
    }

    fn start(&self, what: &str) {
        self.requests.set(self.requests.get() + 1);
        if *self.doing.borrow() != what {
            *self.doing.borrow_mut() = what.to_string();
        }
    }

    /// Removes every secret from `s`.
    pub(crate) fn scrub(&self, s: impl Into<String>) -> String {
        let mut s = s.into();
        for secret in self.secrets.borrow().iter() {
            if !secret.is_empty() {
                s = s.replace(secret.as_str(), "<redacted>");
            }
        }
        s
    }

    /// A registry error about this repository, scrubbed.
    pub(crate) fn registry_err(
        &self,
        what: impl Into<String>,
        message: impl Into<String>,
    ) -> Error {
        Error::Registry {
            reference: self.repo.to_string(),
            what: what.into(),
            message: self.scrub(message),
            hint: None,
        }
    }

    /// A failed HTTP exchange (no response), with what to check.
    pub(crate) fn http_err(&self, what: &str, e: &reqwest::Error) -> Error {
        // The host that failed: the registry, or where it sent us.
        let host = match e.url() {
            Some(u) if !same_registry(u, &self.base) => format!(
                "{} (where {} sent this request)",
                host_port(u),
                self.repo.host
            ),
            _ => self.repo.host.clone(),
        };
        let d = deadline::get();
        let hint = if e.is_timeout() {
            text![format!(
                "{host} did not answer in time: a request gets {} s in all (the per-request deadline, \
                 more for a large upload; SETTINGS_IMAGE_REQUEST_TIMEOUT sets it) and 60 s without a \
                 byte; it was tried up to {MAX_ATTEMPTS} times",
                deadline::secs(d.request)
            )]
        } else if is_not_tls_error(e) {
            text![
                format!(
                    "{host} does not answer HTTPS; if it is a registry that serves plain HTTP, add "
                ),
                Field::Insecure,
                " (plain HTTP is only used by itself for loopback hosts)"
            ]
        } else if is_certificate_error(e) {
            let store = match crate::trust::cert_file() {
                Some(f) => format!(
                    "SSL_CERT_FILE is set to {f}, and HTTPS trusts only the certificates in it: add \
                     the registry's CA there, or unset it to use the system's store; or use "
                ),
                None => "install its CA in the system trust store, or point SSL_CERT_FILE at a \
                         bundle that holds it; or use "
                    .to_string(),
            };
            text![
                format!("{host} presented a TLS certificate that is not trusted: {store}"),
                Field::Insecure,
                " for a registry that serves plain HTTP"
            ]
        } else if self.base.scheme() == "https" {
            text![
                format!(
                    "check that {host} is reachable over HTTPS (plain HTTP is only used for loopback \
                     hosts or with "
                ),
                Field::Insecure,
                format!("); transient failures were tried {MAX_ATTEMPTS} times")
            ]
        } else {
            text![format!(
                "check that {host} is reachable; transient failures were tried {MAX_ATTEMPTS} times"
            )]
        };
        let message = if e.is_timeout() {
            format!(
                "no complete answer in time (the per-request deadline is {} s): {}",
                deadline::secs(d.request),
                reqwest_chain(e)
            )
        } else {
            reqwest_chain(e)
        };
        Error::Registry {
            reference: self.repo.to_string(),
            what: what.to_string(),
            message: self.scrub(message),
            hint: Some(hint),
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
            Err(e) => (e.url(), format!("failed: {}", reqwest_chain(e))),
        };
        let url = url.map(shown_url).unwrap_or_default();
        log::debug!(
            "registry: {what}: {url} -> {status}{}",
            if attempt > 1 {
                format!(" (attempt {attempt})")
            } else {
                String::new()
            }
        );
    }

    /// On a terminal, while waiting to try again: what failed, the last
    /// words of why (`Connection refused (os error 111)`, `503 Service
    /// Unavailable`: one line; `-v` shows it all) and which attempt comes
    /// next (a refused connection is tried for seconds).
    fn retrying(&self, what: &str, attempt: u32, why: &str) -> crate::progress::Task {
        crate::progress::Task::start(
            || {
                let why = why.rsplit(": ").next().unwrap_or(why);
                self.scrub(format!(
                    "{}: {what}: {why}; attempt {} of {MAX_ATTEMPTS} next",
                    self.repo.host,
                    attempt + 1
                ))
            },
            None,
            crate::progress::Unit::Wait,
        )
    }

    /// `path` relative to `/v2/NAME/`.
    pub(crate) fn url(&self, path: &str) -> Result<Url> {
        self.base
            .join(path)
            .map_err(|e| self.registry_err("building a URL", e.to_string()))
    }

    /// A request with the per-request deadline (an upload sets a longer
    /// one for its body), and the current authorization when it goes to the
    /// registry itself: an upload `Location` or a `Link` on another host
    /// gets none.
    pub(crate) fn request(&self, method: Method, url: Url) -> RequestBuilder {
        let ours = same_registry(&url, &self.base);
        let rb = self
            .http
            .request(method, url)
            .timeout(deadline::get().request);
        if ours { self.auth.apply(rb) } else { rb }
    }

    /// Whether a response came from the registry itself (not from a host
    /// it sent us to): only then is a 401 about our credentials.
    fn ours(&self, resp: &Response) -> bool {
        same_registry(resp.url(), &self.base)
    }

    /// Sends a request built by `make`, retrying transient failures when
    /// `retry` is set. Returns the last response, whatever its status.
    pub(crate) async fn send(
        &self,
        what: &str,
        retry: bool,
        make: impl Fn(&Self) -> Result<RequestBuilder>,
    ) -> Result<Response> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let rb = make(self)?;
            self.start(what);
            let can_retry = retry && attempt < MAX_ATTEMPTS;
            let sent = rb.send().await;
            self.debug_response(what, attempt, &sent);
            match sent {
                Ok(resp) if can_retry && is_transient_status(resp.status()) => {
                    let wait = retry_after(&resp).unwrap_or_else(|| backoff(attempt));
                    let _shown = self.retrying(what, attempt, &resp.status().to_string());
                    drop(resp);
                    tokio::time::sleep(wait).await;
                }
                Ok(resp) if can_retry && self.ours(&resp) && self.renew(resp.status()).await? => {}
                Ok(resp) => return Ok(resp),
                Err(e) if can_retry && is_transient_error(&e) => {
                    let _shown = self.retrying(what, attempt, &reqwest_chain(&e));
                    tokio::time::sleep(backoff(attempt)).await;
                }
                Err(e) => return Err(self.http_err(what, &e)),
            }
        }
    }

    /// Sends one request of an operation that starts over as a whole
    /// (a blob upload session): `expect` is [`Attempt::Done`]; a transient
    /// failure, or a 401 that got a new token, is [`Attempt::Retry`].
    pub(crate) async fn send_once(
        &self,
        what: &str,
        rb: RequestBuilder,
        expect: StatusCode,
    ) -> Result<Attempt<Response>> {
        self.start(what);
        let sent = rb.send().await;
        self.debug_response(what, 1, &sent);
        match sent {
            Ok(resp) if resp.status() == expect => Ok(Attempt::Done(resp)),
            Ok(resp) if self.ours(&resp) && self.renew(resp.status()).await? => {
                // A new token: start the operation over.
                Ok(Attempt::Retry {
                    error: self.fail(what, resp).await,
                    wait: Some(Duration::ZERO),
                })
            }
            Ok(resp) if is_transient_status(resp.status()) => {
                let wait = retry_after(&resp);
                Ok(Attempt::Retry {
                    error: self.fail(what, resp).await,
                    wait,
                })
            }
            Ok(resp) => Err(self.fail(what, resp).await),
            Err(e) if is_transient_error(&e) => Ok(Attempt::Retry {
                error: self.http_err(what, &e),
                wait: None,
            }),
            Err(e) => Err(self.http_err(what, &e)),
        }
    }

    /// Turns a response with an unexpected status into an error.
    pub(crate) async fn fail(&self, what: &str, resp: Response) -> Error {
        let status = resp.status();
        let url = resp.url().clone();
        let (body, cut) = error_body(resp).await;
        let mut message = describe(status, &body);
        if let Some(cut) = cut {
            message = format!("{message} ({cut})");
        }
        if !same_registry(&url, &self.base) {
            // An upload location or a redirect target: another host, which
            // got no credentials from us.
            let host = host_port(&url);
            let registry = &self.repo.host;
            return Error::Registry {
                reference: self.repo.to_string(),
                what: what.to_string(),
                message: self.scrub(format!(
                    "{host}, where {registry} sent this request, answered {message}"
                )),
                hint: Some(format!(
                    "{registry} handed this request to {host} (an upload location or a redirect); \
                     credentials are only ever sent to {registry} itself, as docker does, so {host} \
                     must accept the request as it is (a presigned URL) or the registry's storage \
                     set-up is at fault"
                ).into()),
            };
        }
        if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
            return Error::Auth {
                host: self.repo.host.clone(),
                message: self.scrub(format!("{what} in {}: {message}", self.repo.name)),
                hint: auth::auth_hint(&self.repo.host, self.auth.access()),
            };
        }
        let hint: Option<crate::field::Text> = if status == StatusCode::NOT_FOUND {
            Some(text![format!(
                "check that the repository {} exists or that the registry creates repositories on push",
                self.repo
            )])
        } else if status == StatusCode::PAYLOAD_TOO_LARGE {
            Some("the registry limits request sizes; chunked uploads (the default) keep each request at 4 MiB".into())
        } else if status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS {
            Some(text![format!(
                "the registry kept failing after {MAX_ATTEMPTS} attempts; try again later"
            )])
        } else if status == StatusCode::METHOD_NOT_ALLOWED || status == StatusCode::NOT_IMPLEMENTED
        {
            Some(text![
                "if this registry does not support chunked uploads, try ",
                Field::Monolithic
            ])
        } else if status.is_client_error() {
            Some(
                "the registry refused this request as it was sent; its message says why (often a \
                 rule of the registry: immutable tags, sizes, names)"
                    .into(),
            )
        } else {
            None
        };
        Error::Registry {
            reference: self.repo.to_string(),
            what: what.to_string(),
            message: self.scrub(message),
            hint,
        }
    }

    /// Reads a body of at most [`MAX_SMALL`] bytes.
    pub(crate) async fn small_body(
        &self,
        what: &str,
        mut resp: Response,
        kind: &str,
    ) -> Result<Vec<u8>> {
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

    /// The `Location` header, resolved against the request URL. Its query
    /// values (a presigned URL's signature and token) become secrets: no
    /// message shows them.
    pub(crate) fn location(&self, what: &str, resp: &Response) -> Result<Url> {
        let loc = resp
            .headers()
            .get(header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| self.registry_err(what, "the registry sent no Location header"))?;
        let url = resp.url().join(loc).map_err(|e| {
            let shown = loc.split(['?', '#']).next().unwrap_or_default();
            self.registry_err(what, format!("bad Location {shown:?}: {e}"))
        })?;
        let raw = url.query().unwrap_or_default().split('&');
        let values = raw
            .filter_map(|kv| kv.split_once('=').map(|(_, v)| v.to_string()))
            .chain(url.query_pairs().map(|(_, v)| v.into_owned()));
        let mut secrets = self.secrets.borrow_mut();
        for v in values {
            if v.len() >= 16 && !secrets.contains(&v) {
                secrets.push(v);
            }
        }
        Ok(url)
    }
}

#[cfg(test)]
#[path = "transport_tests.rs"]
mod tests;
