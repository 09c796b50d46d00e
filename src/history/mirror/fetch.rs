//! One fetch over smart HTTP with `gix` (its `reqwest` transport, on the
//! rustls and ring the rest of the binary uses), with the credentials kept
//! on the URL's host and errors in words an operator can act on.
//!
//! Credentials, as Flux's source-controller sends them:
//! - basic auth is `gix`'s identity: sent from the first request (no 401
//!   round trip), over plain `http://` too (Flux does the same), and
//!   dropped when a redirect leaves the host (`gix` clears the identity,
//!   and `reqwest` strips `Authorization` from the redirected request);
//! - a bearer token is a header added to each request whose scheme, host
//!   and port are the URL's; `gix` then refuses to follow redirects at all.
//!
//! A 401 is never answered with other credentials (there is no credential
//! helper, no prompt): the fetch fails and says so.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gix::protocol::transport::client::TransportWithoutIO as _;
use gix::protocol::transport::client::blocking_io::http;
use gix::remote::Direction;

use super::{Credentials, Remote};
use crate::error::{Error, GitFailure, Result};

/// What one fetch brought.
#[derive(Debug, Clone, Default)]
pub(super) struct Received {
    /// The commit each fetched branch points to on the server, by name.
    pub heads: Vec<(String, String)>,
    /// The size of the pack received (0: nothing was new).
    pub pack_bytes: u64,
    /// The objects in it.
    pub objects: u64,
}

/// Fetches `refspecs` (a branch's `+refs/heads/B:refs/heads/B`, or a
/// commit id) from `remote` into the bare repository at `git_dir`, no
/// tags. A branch the server does not have gives nothing (no heads).
pub(super) fn fetch(
    git_dir: &Path,
    remote: &Remote,
    refspecs: &[String],
    timeout: Duration,
    interrupt: &AtomicBool,
) -> Result<Received> {
    // rustls with ring, as everywhere in the binary; an error only means a
    // provider is installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let url = remote.url();
    let fail = |e: gix::Error| describe(remote, &e, interrupt);
    let opts = gix::open::Options::isolated()
        .with(gix::sec::Trust::Full)
        .config_overrides(["gitoxide.objects.allocLimitIfReducedTrust=0"]);
    let repo = gix::open_opts(git_dir, opts).map_err(|e| Error::Git {
        url: url.to_string(),
        message: format!("cannot open the mirror at {}: {e}", git_dir.display()),
        hint: Some(
            "the cache directory may be damaged; delete it and the mirror is cloned again".into(),
        ),
        kind: GitFailure::Other,
    })?;
    let specs: Vec<&str> = refspecs.iter().map(String::as_str).collect();
    let origin = repo
        .remote_at(url)
        .and_then(|r| r.with_refspecs(specs, Direction::Fetch))
        .map(|r| r.with_fetch_tags(gix::remote::fetch::Tags::None))
        .map_err(fail)?;
    let mut con = origin.connect(Direction::Fetch).map_err(fail)?;
    if let Some(Credentials::Basic { username, password }) = remote.credentials() {
        con.transport_mut()
            .set_identity(gix::sec::identity::Account {
                username: username.clone(),
                password: password.clone(),
                oauth_refresh_token: None,
            })
            .map_err(|e| describe(remote, &gix::Error::from_error(e), interrupt))?;
    }
    // No helper, no prompt: a 401 fails the fetch.
    con.set_credentials(|_| Ok(None));
    con.set_transport_options(Box::new(http_options(remote, timeout)));
    let prepare = con
        .prepare_fetch(gix::progress::Discard, Default::default())
        .map_err(fail)?;
    let mut heads = Vec::new();
    for m in &prepare.ref_map().mappings {
        if let (Some(name), Some(id)) = (m.remote.as_name(), m.remote.as_id()) {
            heads.push((name.to_string(), id.to_string()));
        }
    }
    if prepare.ref_map().mappings.is_empty() {
        // No such branch on the server: nothing to receive (the caller
        // says which branch is missing).
        return Ok(Received::default());
    }
    let outcome = prepare
        .receive(gix::progress::Discard, interrupt)
        .map_err(fail)?;
    let mut received = Received {
        heads,
        ..Received::default()
    };
    if let gix::remote::fetch::Status::Change {
        write_pack_bundle, ..
    } = &outcome.status
    {
        received.objects = u64::from(write_pack_bundle.index.num_objects);
        if let Some(path) = &write_pack_bundle.data_path {
            received.pack_bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        }
        // The `.keep` file guards the pack until refs point into it; they
        // do now, and a kept pack would only confuse a later `git gc`.
        if let Some(keep) = &write_pack_bundle.keep_path {
            let _ = std::fs::remove_file(keep);
        }
    }
    Ok(received)
}

/// The transport's options: redirects as git follows them (the first
/// request only), the CA, the timeout and the bearer token.
fn http_options(remote: &Remote, timeout: Duration) -> http::Options {
    let ca: Vec<reqwest::Certificate> = remote.ca_certificates();
    let plain = remote.url().starts_with("http://");
    let mut backend = http::reqwest::Options {
        configure_client: Some(Box::new(move |builder| {
            let builder = builder
                .timeout(timeout)
                .user_agent(concat!("settings-image/", env!("CARGO_PKG_VERSION")));
            Ok(if plain {
                // Nothing to verify: skip loading the system's CA store.
                builder.tls_certs_only(Vec::new())
            } else if ca.is_empty() {
                builder
            } else {
                // Flux adds the Secret's `ca.crt` to the system's roots.
                builder.tls_certs_merge(ca.clone())
            })
        })),
        configure_request: None,
    };
    if let Some(Credentials::Bearer(token)) = remote.credentials() {
        let origin = origin_of(remote.url());
        let value = reqwest::header::HeaderValue::from_str(&format!("Bearer {token}"))
            .map(|mut v| {
                v.set_sensitive(true);
                v
            })
            .ok();
        backend.configure_request = Some(Box::new(move |req| {
            if let Some(v) = &value
                && origin.is_some()
                && origin_of(req.url().as_str()) == origin
            {
                req.headers_mut()
                    .insert(reqwest::header::AUTHORIZATION, v.clone());
            }
            Ok(())
        }));
    }
    http::Options {
        follow_redirects: http::options::FollowRedirects::Initial,
        backend: Some(Arc::new(Mutex::new(backend))),
        ..http::Options::default()
    }
}

/// `(scheme, host, port)` of a URL: where a credential may go.
fn origin_of(url: &str) -> Option<(String, String, u16)> {
    let u = reqwest::Url::parse(url).ok()?;
    Some((
        u.scheme().to_string(),
        u.host_str()?.to_ascii_lowercase(),
        u.port_or_known_default()?,
    ))
}

/// A `gix` error as an [`Error::Git`] an operator can act on: which kind
/// of failure, the HTTP status when there is one, and what to check.
pub(super) fn describe(remote: &Remote, e: &gix::Error, interrupt: &AtomicBool) -> Error {
    let url = remote.url().to_string();
    let mut status = None;
    let mut auth_required = false;
    let mut connect = false;
    let mut timeout = false;
    let mut certificate = false;
    let interrupted = interrupt.load(std::sync::atomic::Ordering::Relaxed);
    let mut redirect_refused = false;
    for err in e.iter_errors() {
        if let Some(r) = err.downcast_ref::<reqwest::Error>() {
            status = status.or(r.status().map(|s| s.as_u16()));
            connect |= r.is_connect();
            timeout |= r.is_timeout();
            certificate |= crate::error::error_chain(r).contains("certificate");
        }
        if err
            .downcast_ref::<gix::protocol::transport::client::AuthenticationRequired>()
            .is_some()
        {
            auth_required = true;
        }
        let text = err.to_string();
        if text.contains("Received HTTP status")
            && let Some(code) = text
                .split_whitespace()
                .filter_map(|w| w.parse::<u16>().ok())
                .find(|c| (100..600).contains(c))
        {
            status = status.or(Some(code));
        }
        if text.contains("refusing to follow redirect") {
            redirect_refused = true;
        }
        if text.contains("certificate") {
            certificate = true;
        }
    }
    if e.classify().has(gix::error::Class::Unauthenticated) {
        auth_required = true;
    }
    let cause = crate::error::error_chain(e.probable_cause());
    let (kind, message, hint) = if interrupted {
        (
            GitFailure::Interrupted,
            "the fetch was interrupted".to_string(),
            None,
        )
    } else if redirect_refused {
        (
            GitFailure::Other,
            format!(
                "the server redirects {url} elsewhere, and a redirect is not followed with a bearer token (the token stays on {})",
                host_of(&url).unwrap_or_else(|| url.clone())
            ),
            Some("set spec.url to the repository's new location".into()),
        )
    } else if auth_required || status == Some(401) {
        let (message, hint) = match remote.credentials() {
            None => (
                "authentication required (HTTP 401), and no credentials were given".to_string(),
                "set the GitRepository's secretRef to a Secret with `username` and `password`, or `bearerToken`",
            ),
            Some(Credentials::Basic { .. }) => (
                format!("authentication failed for {url} (HTTP 401)"),
                "check the Secret's username/password: the server refused them",
            ),
            Some(Credentials::Bearer(_)) => (
                format!("authentication failed for {url} (HTTP 401)"),
                "check the Secret's bearerToken: the server refused it",
            ),
        };
        (GitFailure::Auth, message, Some(hint.to_string()))
    } else if status == Some(403) {
        (
            GitFailure::Auth,
            format!("access denied to {url} (HTTP 403)"),
            Some("the credentials are valid but may not read this repository: check their permissions".into()),
        )
    } else if status == Some(404) {
        (
            GitFailure::NotFound,
            format!("no repository at {url} (HTTP 404)"),
            Some("check the GitRepository's spec.url (private repositories may also answer 404 without credentials)".into()),
        )
    } else if let Some(code) = status.filter(|c| *c >= 500) {
        (
            GitFailure::Server,
            format!("the git server failed (HTTP {code}): {cause}"),
            Some("the server is failing; the fetch is retried later".into()),
        )
    } else if let Some(code) = status {
        (
            GitFailure::Server,
            format!("the git server answered HTTP {code}: {cause}"),
            Some("check that spec.url names a git repository served over smart HTTP".into()),
        )
    } else if certificate {
        (
            GitFailure::Unreachable,
            format!("the server's TLS certificate is not trusted: {cause}"),
            Some("put the CA that signed it into the Secret as `ca.crt`".into()),
        )
    } else if connect || timeout {
        (
            GitFailure::Unreachable,
            format!(
                "cannot reach {}: {cause}",
                host_of(&url).unwrap_or_else(|| url.clone())
            ),
            Some(
                "check that the host is up and reachable from here; the fetch is retried later"
                    .into(),
            ),
        )
    } else {
        (
            GitFailure::Other,
            format!("fetching failed: {}", crate::error::error_chain(e)),
            None,
        )
    };
    Error::Git {
        url,
        message,
        hint,
        kind,
    }
}

fn host_of(url: &str) -> Option<String> {
    let u = reqwest::Url::parse(url).ok()?;
    Some(match u.port() {
        Some(p) => format!("{}:{p}", u.host_str()?),
        None => u.host_str()?.to_string(),
    })
}
