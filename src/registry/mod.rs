//! The OCI distribution client that `publish`, `promote`, `inspect` and
//! `provenance` use: the one place that talks HTTP to registries. Split as
//! go-containerregistry splits `name/`, `authn/`, `remote/transport/` and
//! `remote/`:
//!
//! - [`name`]: `HOST/NAME` references and host rules;
//! - [`auth`]: credentials, docker's config and credential helpers, the
//!   token flow;
//! - [`transport`]: send, retry, error classification, scrubbing;
//! - [`manifests`], [`tags`], [`blobs`], [`referrers`]: the API's resources.
//!
//! [`Client`] is the blocking facade: each call runs on the client's own
//! single-threaded runtime, inside the whole-operation deadline that
//! started when the client was opened ([`deadline`]: no registry holds a
//! run forever). Where a built image goes, and in which order
//! (the push), is `crate::publish`'s; see `docs/push.md`.
//!
//! Why not `oci-client` (checked in December 2026 against 0.17.0 and its
//! repository as it stands): it now streams blobs (`push_blob_stream`,
//! `pull_blob` into a writer) and, when the referrers API answers 404,
//! reads the referrers tag schema (`sha256-<hex>`); but it cannot write
//! that tag, which attaching provenance needs on every registry without
//! the API ([`Client::attach_referrer`]). Its token flow sends the
//! credentials to whatever realm host a registry names, so a credential
//! cannot be kept to the hosts it belongs to, as the job token is
//! ([`Realms`]). `Client::push` still uploads every blob without a `HEAD`
//! first. (Its repository now tests that no credentials go to an upload
//! `Location` on another host, the rule [`transport`] keeps too.) The
//! token flow here is the spec's two requests ([`transport`]), with the
//! challenge parsed by `http-auth`.

pub mod auth;
pub mod blobs;
pub mod deadline;
pub mod manifests;
pub mod name;
pub mod referrers;
pub mod tags;
pub mod transport;

use std::cell::Cell;
use std::fmt;
use std::path::PathBuf;

pub use auth::{CredentialSource, Credentials, CredentialsFuture, Realms};
pub use blobs::CHUNK_SIZE;
pub use manifests::{Manifest, PutManifest};
pub use name::{Repository, check_repository_text, is_loopback, parse_repository};
pub use referrers::Attached;
pub use tags::TagListError;
pub use transport::MAX_SMALL;

use crate::error::{Error, Result};
use crate::image::Descriptor;
use crate::image::artifact::{Artifact, ManifestView};
use auth::Access;
use transport::Transport;

/// How to reach a repository: plain HTTP only when `insecure` (or on a
/// loopback host); `credentials` when given, else those `login` makes (and
/// makes again, once, when they expire), else docker's `config.json` at
/// `docker_config` and its credential helpers, else anonymous. Large blobs
/// go up in chunks (set `monolithic` for one streamed `PUT` per blob).
/// Built as [`Options::new`] with the rest named:
/// `Options { insecure: true, ..Options::new("ghcr.io/acme/settings") }`.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// `HOST/NAME`, e.g. `ghcr.io/acme/settings` (a template or empty
    /// while the folders' repositories are not named yet).
    pub repository: String,
    /// Use plain HTTP even for a non-loopback host.
    pub insecure: bool,
    /// Upload each blob in one PUT, however large, instead of PATCH chunks
    /// for blobs over [`CHUNK_SIZE`].
    pub monolithic: bool,
    /// Explicit credentials (flags or environment); when `None`, docker's
    /// `config.json` and its credential helpers are asked, then anonymous.
    pub credentials: Option<Credentials>,
    /// Docker's `config.json` (`$DOCKER_CONFIG/config.json`, else
    /// `~/.docker/config.json`, as the front end finds it); `None`: none.
    pub docker_config: Option<PathBuf>,
    /// A login that makes the credentials (when `credentials` is `None`),
    /// and makes them again, once, when they expire mid-push: an OIDC
    /// exchange, through [`CredentialSource`].
    pub login: Option<Box<dyn CredentialSource>>,
}

impl Options {
    /// How to reach `repository` over HTTPS, anonymously or with docker's
    /// defaults: every other field at its default.
    pub fn new(repository: impl Into<String>) -> Options {
        Options {
            repository: repository.into(),
            ..Options::default()
        }
    }
}

/// The whole-operation deadline passed while `doing`.
fn overrun(repo: &Repository, doing: &str) -> Error {
    let limit = deadline::secs(deadline::get().operation);
    Error::Registry {
        reference: repo.to_string(),
        what: "the whole operation".into(),
        message: format!(
            "did not finish within {limit} s (the whole-operation deadline) while {doing}"
        ),
        hint: Some(format!(
            "{} is too slow or stalls; try again later. A slow registry that does finish can be \
             given longer with SETTINGS_IMAGE_PUSH_TIMEOUT (seconds)",
            repo.host
        ).into()),
    }
}

/// One authenticated session with a repository and what it has learnt:
/// the async core under [`Client`].
pub(crate) struct Session {
    pub(crate) t: Transport,
    monolithic: bool,
    /// Whether `GET /v2/NAME/referrers/DIGEST` answered 200 (once asked).
    referrers_api: Cell<Option<bool>>,
}

/// A blocking client for one repository, with the retries, token renewal
/// and secret scrubbing of [`transport`].
pub struct Client {
    rt: tokio::runtime::Runtime,
    session: Session,
    /// When the whole operation must be over (set when opened).
    until: tokio::time::Instant,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("repository", &self.session.t.repo)
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
        let limit = deadline::get().operation;
        let until = rt.block_on(async { tokio::time::Instant::now() + limit });
        let opening = Transport::open(
            repo.clone(),
            opts.insecure,
            opts.credentials.clone(),
            opts.docker_config.as_deref(),
            opts.login.clone(),
            access,
        );
        let t = rt
            .block_on(async { tokio::time::timeout_at(until, opening).await })
            .map_err(|_| overrun(&repo, "contacting the registry (authentication)"))??;
        let session = Session {
            t,
            monolithic: opts.monolithic,
            referrers_api: Cell::new(None),
        };
        Ok(Client { rt, session, until })
    }

    /// Runs `f` over the async session on this client's runtime, inside
    /// the whole-operation deadline: for operations that send requests
    /// side by side (the push).
    pub(crate) fn run<'a, T, F>(&'a self, f: impl FnOnce(&'a Session) -> F) -> Result<T>
    where
        F: Future<Output = Result<T>> + 'a,
    {
        self.rt
            .block_on(async { tokio::time::timeout_at(self.until, f(&self.session)).await })
            .map_err(|_| overrun(&self.session.t.repo, &self.session.t.doing()))?
    }

    /// The repository this client talks to.
    pub fn repository(&self) -> &Repository {
        &self.session.t.repo
    }

    /// HTTP requests sent so far (after authentication).
    pub fn requests(&self) -> u64 {
        self.session.t.requests()
    }

    /// Every tag of the repository (all `Link` pages, within the bounds of
    /// [`tags`]); empty when the repository does not exist yet.
    pub fn list_tags(&self) -> Result<Vec<String>> {
        self.list_tags_or_why().map_err(TagListError::into_error)
    }

    /// [`Client::list_tags`], saying whether the registry refused to list
    /// or answered something that is not a tag list.
    pub fn list_tags_or_why(&self) -> std::result::Result<Vec<String>, TagListError> {
        let listed = self.run(|s| async move { Ok(s.list_tags().await) });
        match listed {
            Ok(result) => result,
            // The whole-operation deadline.
            Err(e) => Err(TagListError::NotListed(e)),
        }
    }

    /// What `reference` (a tag or `sha256:` digest) names, or `None`.
    pub fn head_manifest(&self, reference: &str) -> Result<Option<Descriptor>> {
        self.run(|s| s.head_manifest(reference))
    }

    /// The manifest `reference` names (at most [`MAX_SMALL`] bytes), or
    /// `None`; a digest reference is verified against the bytes.
    pub fn get_manifest(&self, reference: &str) -> Result<Option<Manifest>> {
        self.run(|s| s.get_manifest(reference))
    }

    /// A small blob (at most [`MAX_SMALL`] bytes), verified against `digest`.
    pub fn get_blob(&self, digest: &str) -> Result<Vec<u8>> {
        self.run(|s| s.get_blob(digest))
    }

    /// Streams blob `digest` (`size` bytes, as its descriptor says) into
    /// `out`, checked against its size and digest; for blobs of any size.
    pub fn get_blob_into(
        &self,
        digest: &str,
        size: u64,
        out: &mut dyn std::io::Write,
    ) -> Result<()> {
        self.run(|s| s.get_blob_into(digest, size, out))
    }

    /// Uploads `bytes` as a blob unless the registry already has it.
    pub fn put_blob(&self, media_type: &str, bytes: &[u8]) -> Result<Descriptor> {
        self.run(|s| s.put_blob(media_type, bytes))
    }

    /// Puts manifest `bytes` (exactly) under `reference`, a tag or the
    /// bytes' digest. The answer carries the `OCI-Subject` header.
    pub fn put_manifest(
        &self,
        reference: &str,
        bytes: &[u8],
        media_type: &str,
    ) -> Result<PutManifest> {
        self.run(|s| s.put_manifest_bytes(reference, bytes, media_type))
    }

    /// Cross-repository mount of blob `digest` from `from_repo` (a name on
    /// the same registry, without host). False when the registry did not
    /// mount it (not there, not allowed, or no mount support): upload it.
    /// With token auth the token is scoped to this repository only, so
    /// registries that check pull access on `from_repo` answer false.
    pub fn mount_blob(&self, digest: &str, from_repo: &str) -> Result<bool> {
        self.run(|s| s.mount_blob(digest, from_repo))
    }

    /// The first layer of media type `media_type` of the referrer `desc`
    /// (a provenance statement, a promotion record): its manifest read by
    /// digest, then the layer found in it.
    pub fn referrer_layer(&self, desc: &Descriptor, media_type: &str) -> Result<Descriptor> {
        let what = format!("reading referrer {}", desc.digest);
        let m = self
            .get_manifest(&desc.digest)?
            .ok_or_else(|| Error::Registry {
                reference: self.repository().to_string(),
                what: what.clone(),
                message: "listed as a referrer, but the manifest is not there".into(),
                hint: None,
            })?;
        let view = ManifestView::parse(&m.bytes)?;
        view.layers
            .into_iter()
            .find(|l| l.media_type == media_type)
            .ok_or_else(|| Error::Registry {
                reference: self.repository().to_string(),
                what,
                message: format!("the referrer has no {media_type} layer"),
                hint: None,
            })
    }

    /// The referrers of the manifest `subject_digest`, only those of
    /// `artifact_type` when given: the referrers API when the registry
    /// implements it, else the referrers tag schema (`sha256-<hex>`).
    pub fn referrers(
        &self,
        subject_digest: &str,
        artifact_type: Option<&str>,
    ) -> Result<Vec<Descriptor>> {
        self.run(|s| s.referrers(subject_digest, artifact_type))
    }

    /// The referrers of the manifest `subject_digest` as the referrers API
    /// lists them (only those of `artifact_type` when given), or `None`
    /// when the registry has no referrers API (then never asked again by
    /// this client).
    pub fn referrers_api(
        &self,
        subject_digest: &str,
        artifact_type: Option<&str>,
    ) -> Result<Option<Vec<Descriptor>>> {
        let listed = self.run(|s| s.referrers_api_list(subject_digest, artifact_type))?;
        Ok(listed.map(|mut list| {
            if let Some(t) = artifact_type {
                list.retain(|d| d.artifact_type.as_deref() == Some(t));
            }
            list
        }))
    }

    /// The referrers of the manifest `subject_digest` that the referrers
    /// tag `sha256-<hex>` lists (only those of `artifact_type` when given);
    /// empty when the tag does not exist.
    pub fn referrers_tag_list(
        &self,
        subject_digest: &str,
        artifact_type: Option<&str>,
    ) -> Result<Vec<Descriptor>> {
        let mut list = self
            .run(|s| s.referrers_tag_index(subject_digest))?
            .manifests;
        if let Some(t) = artifact_type {
            list.retain(|d| d.artifact_type.as_deref() == Some(t));
        }
        Ok(list)
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
        self.run(|s| s.attach_referrer(subject, artifact))
    }
}

// Every call against real registries and a stub (once part of
// tests/provenance.rs).
#[cfg(test)]
#[path = "client_tests.rs"]
mod client_tests;
