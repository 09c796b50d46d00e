//! One fetch over smart HTTP with `gix`'s protocol (its `reqwest`
//! transport, on the rustls and ring the rest of the binary uses), the
//! received pack taken in by [`super::intake`] within the fetch's bounds,
//! with the credentials kept on the URL's host and errors in words an
//! operator can act on.
//!
//! The steps `gix::Remote`'s fetch takes, by hand so that the pack goes
//! through the intake: the handshake, the ref listing (`ls-refs`), the
//! negotiation (`gix`'s, against the mirror's refs), the fetch command,
//! then the refs of the refspecs updated.
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

use gix::protocol::fetch::negotiate;
use gix::protocol::transport::client::TransportWithoutIO as _;
use gix::protocol::transport::client::blocking_io::http;

use super::intake::{self, Stop};
use super::wire;
use super::{Credentials, Limits, Remote};
use crate::error::{Error, GitFailure, Result};
use crate::field::FetchBound;

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

/// `gix`'s negotiation (what the server should send, from what the mirror
/// has), as `gix::Remote`'s fetch runs it.
struct Negotiator<'a, 'b, 'c> {
    objects: &'a gix::OdbHandle,
    refs: &'a gix::refs::file::Store,
    graph: &'a mut gix::negotiate::Graph<'b, 'c>,
    ref_map: &'a gix::protocol::fetch::RefMap,
    negotiator: Box<dyn gix::negotiate::Negotiator>,
}

const SHALLOW: gix::protocol::fetch::Shallow = gix::protocol::fetch::Shallow::NoChange;

impl gix::protocol::fetch::Negotiate for Negotiator<'_, '_, '_> {
    fn mark_complete_and_common_ref(&mut self) -> gix::Result<negotiate::Action> {
        negotiate::mark_complete_and_common_ref(
            self.objects,
            self.refs,
            // Mirrors have no alternates.
            || Ok(std::iter::empty::<(gix::refs::file::Store, gix::odb::Handle)>()),
            self.negotiator.as_mut(),
            &mut *self.graph,
            self.ref_map,
            &SHALLOW,
            negotiate::make_refmapping_ignore_predicate(
                gix::protocol::fetch::Tags::None,
                self.ref_map,
            ),
        )
    }

    fn add_wants(
        &mut self,
        arguments: &mut gix::protocol::fetch::Arguments,
        remote_ref_target_known: &[bool],
    ) -> bool {
        negotiate::add_wants(
            self.objects,
            arguments,
            self.ref_map,
            remote_ref_target_known,
            &SHALLOW,
            negotiate::make_refmapping_ignore_predicate(
                gix::protocol::fetch::Tags::None,
                self.ref_map,
            ),
        )
    }

    fn one_round(
        &mut self,
        state: &mut negotiate::one_round::State,
        arguments: &mut gix::protocol::fetch::Arguments,
        previous_response: Option<&gix::protocol::fetch::Response>,
    ) -> gix::Result<(negotiate::Round, bool)> {
        negotiate::one_round(
            self.negotiator.as_mut(),
            &mut *self.graph,
            state,
            arguments,
            previous_response,
        )
    }
}

/// Fetches `refspecs` (a branch's `+refs/heads/B:refs/heads/B`, or a
/// commit id) from `remote` into the bare repository at `git_dir`, no
/// tags, within `limits` (the request timeout, the fetch's bounds). A
/// branch the server does not have gives nothing (no heads).
pub(super) fn fetch(
    git_dir: &Path,
    remote: &Remote,
    refspecs: &[String],
    limits: &Limits,
    interrupt: &AtomicBool,
) -> Result<Received> {
    // rustls with ring, as everywhere in the binary; an error only means a
    // provider is installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let url = remote.url();
    let fail = |e: gix::Error| describe(remote, &e, interrupt);
    if url.starts_with("https://") {
        // A CA bundle the controller's environment names must be usable.
        crate::trust::check().map_err(|e| Error::Git {
            url: url.to_string(),
            message: e.to_string(),
            hint: e.hint(),
            kind: GitFailure::Other,
        })?;
    }
    let repo = open_mirror(git_dir, url)?;
    let budget = wire::Budget::new(limits.max_ref_bytes, limits.max_refs);
    // A bound passed before the pack is the error, whatever `gix` made of
    // the failed read.
    let fail = |e: gix::Error| match budget.tripped() {
        Some(bound) => too_much(remote, bound),
        None => fail(e),
    };
    let mut transport = connect(remote, limits, budget.clone(), interrupt)?;
    let mut progress = gix::progress::Discard;
    // No helper, no prompt: a 401 fails the fetch.
    let mut handshake = gix::protocol::handshake(
        &mut transport,
        gix::protocol::transport::Service::UploadPack,
        |_| Ok(None),
        Vec::new(),
        &mut progress,
    )
    .map_err(fail)?;
    let specs = parse_refspecs(url, refspecs)?;
    let agent = (
        "agent",
        Some(concat!("settings-image/", env!("CARGO_PKG_VERSION")).to_string()),
    );
    let ref_map = handshake
        .prepare_lsrefs_or_extract_refmap(
            agent.clone(),
            true,
            gix::protocol::fetch::refmap::init::Context {
                fetch_refspecs: specs,
                extra_refspecs: Vec::new(),
            },
        )
        .map_err(fail)?
        .fetch_blocking(&mut progress, &mut transport, false)
        .map_err(fail)?;
    budget.refs_read();
    let mut heads = Vec::new();
    for m in &ref_map.mappings {
        if let (Some(name), Some(id)) = (m.remote.as_name(), m.remote.as_id()) {
            heads.push((name.to_string(), id.to_string()));
        }
    }
    if ref_map.mappings.is_empty() {
        // No such branch on the server: nothing to receive (the caller
        // says which branch is missing).
        return Ok(Received::default());
    }
    let mut received = Received {
        heads,
        ..Received::default()
    };
    let taken = receive_pack(
        &repo,
        &ref_map,
        Session {
            handshake: &mut handshake,
            transport: &mut transport,
            agent,
        },
        remote,
        limits,
        &budget,
        interrupt,
    )?;
    update_refs(&repo, &ref_map, url)?;
    if let Some(t) = taken {
        received.pack_bytes = t.bytes;
        received.objects = t.objects;
        // A `.keep` file guards a pack until refs point into it; they do
        // now, and a kept pack would only confuse a later `git gc`.
        for keep in t.keep {
            let _ = std::fs::remove_file(keep);
        }
    }
    if handshake.server_protocol_version == gix::protocol::transport::Protocol::V2 {
        let _ = gix::protocol::indicate_end_of_interaction(&mut transport, false);
    }
    Ok(received)
}

/// A local failure (the URL, a refspec, a ref) as an [`Error::Git`] of
/// kind [`GitFailure::Other`]: `what` failed with `e`.
fn other_failure(url: &str, what: &str, e: &dyn std::fmt::Display) -> Error {
    Error::Git {
        url: url.to_string(),
        message: format!("{what}: {e}"),
        hint: None,
        kind: GitFailure::Other,
    }
}

/// Opens the bare mirror at `git_dir`, trusted, with no allocation limit.
fn open_mirror(git_dir: &Path, url: &str) -> Result<gix::Repository> {
    let opts = gix::open::Options::isolated()
        .with(gix::sec::Trust::Full)
        .config_overrides(["gitoxide.objects.allocLimitIfReducedTrust=0"]);
    gix::open_opts(git_dir, opts).map_err(|e| Error::Git {
        url: url.to_string(),
        message: format!("cannot open the mirror at {}: {e}", git_dir.display()),
        hint: Some(
            "the cache directory may be damaged; delete it and the mirror is cloned again".into(),
        ),
        kind: GitFailure::Other,
    })
}

/// The HTTP transport to `remote` (protocol v2), with its basic
/// credentials and its options (see [`http_options`]).
fn connect(
    remote: &Remote,
    limits: &Limits,
    budget: Arc<wire::Budget>,
    interrupt: &AtomicBool,
) -> Result<http::Transport<wire::Bounded>> {
    let url = remote.url();
    let parsed = gix::url::parse(gix::bstr::BStr::new(url))
        .map_err(|e| other_failure(url, "the URL", &e))?;
    let mut transport = http::connect_http(
        wire::Bounded::new(budget),
        parsed,
        gix::protocol::transport::Protocol::V2,
        false,
    );
    if let Some(Credentials::Basic { username, password }) = remote.credentials() {
        transport
            .set_identity(gix::sec::identity::Account {
                username: username.clone(),
                password: password.clone(),
                oauth_refresh_token: None,
            })
            .map_err(|e| describe(remote, &gix::Error::from_error(e), interrupt))?;
    }
    transport
        .configure(&http_options(remote, limits.timeout))
        .map_err(|e| describe(remote, &e, interrupt))?;
    Ok(transport)
}

/// `refspecs` parsed as fetch refspecs.
fn parse_refspecs(url: &str, refspecs: &[String]) -> Result<Vec<gix::refspec::RefSpec>> {
    refspecs
        .iter()
        .map(|s| {
            gix::refspec::parse(s.as_str().into(), gix::refspec::parse::Operation::Fetch)
                .map(|r| r.to_owned())
                .map_err(|e| other_failure(url, &format!("the refspec {s}"), &e))
        })
        .collect::<Result<Vec<_>>>()
}

/// The connection a fetch goes on with after the handshake.
struct Session<'a> {
    handshake: &'a mut gix::protocol::Handshake,
    transport: &'a mut http::Transport<wire::Bounded>,
    agent: (&'static str, Option<String>),
}

/// Negotiates with the server and takes the pack it sends in through
/// [`intake::take`]: what was taken, if a pack came.
fn receive_pack(
    repo: &gix::Repository,
    ref_map: &gix::protocol::fetch::RefMap,
    session: Session<'_>,
    remote: &Remote,
    limits: &Limits,
    budget: &wire::Budget,
    interrupt: &AtomicBool,
) -> Result<Option<intake::Taken>> {
    let fail = |e: gix::Error| match budget.tripped() {
        Some(bound) => too_much(remote, bound),
        None => describe(remote, &e, interrupt),
    };
    let mut taken = None;
    let mut stopped = None;
    let graph_repo = {
        let mut r = repo.clone();
        // What the negotiation reads is cached in its graph.
        r.objects.refresh = gix::odb::store::RefreshMode::Never;
        r.objects.unset_object_cache();
        r
    };
    let cache = graph_repo.commit_graph_if_enabled().ok().flatten();
    let mut graph = graph_repo.revision_graph(cache.as_ref());
    let mut negotiator = Negotiator {
        objects: &graph_repo.objects,
        refs: &graph_repo.refs,
        graph: &mut graph,
        ref_map,
        negotiator: gix::negotiate::Algorithm::Consecutive.into_negotiator(),
    };
    let shallow_file = repo.shallow_file().map_err(fail)?;
    let fetched = gix::protocol::fetch(
        &mut negotiator,
        |pack, _, should_interrupt| {
            budget.pack_started();
            match intake::take(pack, repo, limits, should_interrupt) {
                Ok(t) => {
                    taken = Some(t);
                    Ok(true)
                }
                Err(stop) => {
                    stopped = Some(stop);
                    Err(gix::error::message("the received pack was refused").into())
                }
            }
        },
        gix::progress::Discard,
        interrupt,
        gix::protocol::fetch::Context {
            handshake: session.handshake,
            transport: session.transport,
            user_agent: session.agent,
            trace_packetlines: false,
        },
        gix::protocol::fetch::Options {
            shallow_file,
            shallow: &SHALLOW,
            tags: gix::protocol::fetch::Tags::None,
            reject_shallow_remote: false,
        },
    );
    if let Some(stop) = stopped {
        return Err(refused(remote, stop, interrupt));
    }
    fetched.map_err(fail)?;
    Ok(taken)
}

/// Points the refs the refspecs name at what the server sent, now that
/// their objects are here.
fn update_refs(
    repo: &gix::Repository,
    ref_map: &gix::protocol::fetch::RefMap,
    url: &str,
) -> Result<()> {
    for m in &ref_map.mappings {
        if let (Some(local), Some(id)) = (&m.local, m.remote.as_id()) {
            let name = gix::refs::FullName::try_from(local.clone())
                .map_err(|e| other_failure(url, &format!("the ref {local}"), &e))?;
            repo.reference(
                name,
                id.to_owned(),
                gix::refs::transaction::PreviousValue::Any,
                "fetch",
            )
            .map_err(|e| other_failure(url, &format!("updating {local}"), &e))?;
        }
    }
    Ok(())
}

/// A bound on what comes before the pack, passed ([`wire::Budget`]).
fn too_much(remote: &Remote, (bound, message): (FetchBound, String)) -> Error {
    Error::Git {
        url: remote.url().to_string(),
        message,
        hint: Some(
            "the server is failing or hostile, or the repository has that many refs; if it is meant to"
                .to_string(),
        ),
        kind: GitFailure::TooLarge(bound),
    }
}

/// The intake's refusal as an [`Error::Git`].
fn refused(remote: &Remote, stop: Stop, interrupt: &AtomicBool) -> Error {
    let url = remote.url().to_string();
    let (kind, message, hint) = match stop {
        Stop::Bound(bound, message) => (
            GitFailure::TooLarge(bound),
            message,
            Some("if the repository is meant to be this large".to_string()),
        ),
        Stop::Broken(why) if !interrupt.load(std::sync::atomic::Ordering::Relaxed) => (
            GitFailure::Server,
            format!("the server sent a broken pack: {why}"),
            Some("the server is failing or is not a git server; the fetch is retried later".into()),
        ),
        Stop::Broken(_) | Stop::Interrupted => (
            GitFailure::Interrupted,
            "the fetch was interrupted".to_string(),
            None,
        ),
        Stop::Local(why) => (
            GitFailure::Other,
            format!("storing the received pack: {why}"),
            None,
        ),
    };
    Error::Git {
        url,
        message,
        hint,
        kind,
    }
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
    let interrupted = interrupt.load(std::sync::atomic::Ordering::Relaxed);
    let signs = Signs::of(e);
    let (kind, message, hint) = classify(remote, &url, e, &signs, interrupted);
    Error::Git {
        url,
        message,
        hint,
        kind,
    }
}

/// What a `gix` error's chain says about the failure.
#[derive(Default)]
struct Signs {
    /// The HTTP status, when there is one.
    status: Option<u16>,
    auth_required: bool,
    connect: bool,
    timeout: bool,
    certificate: bool,
    redirect_refused: bool,
}

impl Signs {
    /// Reads the signs off every error in `e`'s chain.
    fn of(e: &gix::Error) -> Signs {
        let mut s = Signs::default();
        for err in e.iter_errors() {
            if let Some(r) = err.downcast_ref::<reqwest::Error>() {
                s.status = s.status.or(r.status().map(|s| s.as_u16()));
                s.connect |= r.is_connect();
                s.timeout |= r.is_timeout();
                s.certificate |= crate::error::error_chain(r).contains("certificate");
            }
            if err
                .downcast_ref::<gix::protocol::transport::client::AuthenticationRequired>()
                .is_some()
            {
                s.auth_required = true;
            }
            let text = err.to_string();
            if text.contains("Received HTTP status")
                && let Some(code) = text
                    .split_whitespace()
                    .filter_map(|w| w.parse::<u16>().ok())
                    .find(|c| (100..600).contains(c))
            {
                s.status = s.status.or(Some(code));
            }
            if text.contains("refusing to follow redirect") {
                s.redirect_refused = true;
            }
            if text.contains("certificate") {
                s.certificate = true;
            }
        }
        if e.classify().has(gix::error::Class::Unauthenticated) {
            s.auth_required = true;
        }
        s
    }
}

/// The kind, message and hint of a failure with `s`'s signs.
fn classify(
    remote: &Remote,
    url: &str,
    e: &gix::Error,
    s: &Signs,
    interrupted: bool,
) -> (GitFailure, String, Option<String>) {
    let cause = crate::error::error_chain(e.probable_cause());
    if interrupted {
        (
            GitFailure::Interrupted,
            "the fetch was interrupted".to_string(),
            None,
        )
    } else if s.redirect_refused {
        (
            GitFailure::Other,
            format!(
                "the server redirects {url} elsewhere, and a redirect is not followed with a bearer token (the token stays on {})",
                host_of(url).unwrap_or_else(|| url.to_string())
            ),
            Some("set spec.url to the repository's new location".into()),
        )
    } else if s.auth_required || s.status == Some(401) {
        unauthenticated(remote, url)
    } else if s.status == Some(403) {
        (
            GitFailure::Auth,
            format!("access denied to {url} (HTTP 403)"),
            Some("the credentials are valid but may not read this repository: check their permissions".into()),
        )
    } else if s.status == Some(404) {
        (
            GitFailure::NotFound,
            format!("no repository at {url} (HTTP 404)"),
            Some("check the GitRepository's spec.url (private repositories may also answer 404 without credentials)".into()),
        )
    } else if let Some(code) = s.status.filter(|c| *c >= 500) {
        (
            GitFailure::Server,
            format!("the git server failed (HTTP {code}): {cause}"),
            Some("the server is failing; the fetch is retried later".into()),
        )
    } else if let Some(code) = s.status {
        (
            GitFailure::Server,
            format!("the git server answered HTTP {code}: {cause}"),
            Some("check that spec.url names a git repository served over smart HTTP".into()),
        )
    } else if s.certificate {
        (
            GitFailure::Unreachable,
            format!("the server's TLS certificate is not trusted: {cause}"),
            Some("put the CA that signed it into the Secret as `ca.crt`".into()),
        )
    } else if s.connect || s.timeout {
        (
            GitFailure::Unreachable,
            format!(
                "cannot reach {}: {cause}",
                host_of(url).unwrap_or_else(|| url.to_string())
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
    }
}

/// The message and hint of a 401, by the credentials given.
fn unauthenticated(remote: &Remote, url: &str) -> (GitFailure, String, Option<String>) {
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
}

fn host_of(url: &str) -> Option<String> {
    let u = reqwest::Url::parse(url).ok()?;
    Some(match u.port() {
        Some(p) => format!("{}:{p}", u.host_str()?),
        None => u.host_str()?.to_string(),
    })
}
