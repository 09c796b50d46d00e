//! Mirrors of remote git repositories, kept by the binary itself (the
//! action image is `FROM scratch`: there is no `git`): what the controller
//! publishes from when Flux's source-controller announces a commit, since
//! the artifact it serves has no history and a timestamp tag needs it.
//!
//! - **What a mirror is**: a bare repository per URL under a cache root the
//!   caller gives ([`Mirrors::new`]), holding the branches asked for
//!   (`refs/heads/B`, full history, no tags, no worktree). The first
//!   [`Mirrors::fetch`] of a URL clones it; later ones fetch what is new
//!   (one pack of the new objects, negotiated against what the mirror has).
//! - **Credentials** ([`Credentials`]), as a Flux GitRepository's
//!   `secretRef` holds them: `username` + `password` (basic auth) or
//!   `bearerToken`, and `ca.crt` to trust a private CA. They go to the
//!   URL's scheme, host and port only: a redirect to another host gets
//!   none (see [`fetch`]). Every fetch authenticates, even when nothing is
//!   new, so a caller without valid credentials reads nothing from a
//!   mirror another caller filled.
//! - **Bounded on disk** ([`Limits`]): after each fetch, while the cache
//!   root holds more than `max_bytes`, the least-recently-fetched mirror
//!   not in use is deleted (its next fetch clones again). The mirror just
//!   fetched always stays, so a single repository larger than the budget
//!   still works, alone. Each fetch adds a pack; when a mirror holds more
//!   than `max_packs` and nobody uses it, the next fetch clones it afresh
//!   into a new directory and swaps it in (one pack again; branches other
//!   than the one fetched are dropped and fetched again when asked for).
//!   A mirror a fetch cannot update for a local reason (damaged by a
//!   crash or a full disk) is cloned afresh the same way; the lock files
//!   and temporary packs a killed fetch leaves are removed first.
//! - **Safe under concurrency**: fetches of one URL take turns (an
//!   exclusive lock per mirror); reading (an open [`Mirror`]) goes on
//!   beside a fetch (git adds packs and moves refs atomically), and a
//!   mirror is only replaced or deleted when no reader holds it. The
//!   locks are `flock`s beside each mirror, across threads and processes,
//!   released by the kernel when their holder dies. See [`store`].
//! - **Blocking**: every call blocks on the network or the disk (from
//!   async code, call it in `spawn_blocking`); [`Mirrors`] and [`Mirror`]
//!   are `Send + Sync`.
//!
//! Publishing a commit from a mirror goes through the same pipeline as
//! `settings-image push --revision COMMIT` in a clone of the URL:
//! [`crate::pipeline::run`] of a spec [`crate::pipeline::Spec::in_mirror`].

mod fetch;
mod intake;
mod refresh;
mod store;
mod wire;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use super::{Checkout, git};
use crate::error::{Error, GitFailure, Result};

/// Credentials for the git server, as a Flux GitRepository's `secretRef`
/// holds them. `Debug` never shows a secret.
#[derive(Clone, PartialEq, Eq)]
pub enum Credentials {
    /// HTTP basic auth (`username`, `password`).
    Basic {
        /// The user name.
        username: String,
        /// The password or access token.
        password: String,
    },
    /// `Authorization: Bearer` (`bearerToken`).
    Bearer(String),
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Credentials::Basic { username, .. } => f
                .debug_struct("Basic")
                .field("username", username)
                .field("password", &"***")
                .finish(),
            Credentials::Bearer(_) => f.write_str("Bearer(***)"),
        }
    }
}

/// The repository to mirror: its URL, credentials and CA.
#[derive(Clone, Debug)]
pub struct Remote {
    url: String,
    credentials: Option<Credentials>,
    ca: Vec<reqwest::Certificate>,
}

impl Remote {
    /// An `https://` or `http://` URL, as a GitRepository's `spec.url`
    /// (other schemes, and URLs that carry credentials, are refused: the
    /// credentials belong in the Secret).
    pub fn new(url: &str) -> Result<Remote> {
        let url = url.trim();
        let bad = |why: &str| {
            Error::input(
                format!("spec.url {:?} {why}", without_userinfo(url)),
                Some(
                    "give the repository's https:// (or http://) URL, credentials in the secretRef"
                        .to_string(),
                ),
            )
        };
        if url
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '"' | '\\'))
        {
            return Err(bad("holds spaces, quotes or control characters"));
        }
        let parsed = reqwest::Url::parse(url).map_err(|e| bad(&format!("is not a URL ({e})")))?;
        if !matches!(parsed.scheme(), "https" | "http") {
            return Err(bad(&format!(
                "has the scheme {}: only https:// and http:// are fetched (no ssh or git://)",
                parsed.scheme()
            )));
        }
        if parsed.host_str().is_none_or(str::is_empty) {
            return Err(bad("names no host"));
        }
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(bad(
                "carries credentials: put them into the Secret the secretRef names",
            ));
        }
        if parsed.fragment().is_some() {
            return Err(bad("has a #fragment"));
        }
        Ok(Remote {
            url: url.to_string(),
            credentials: None,
            ca: Vec::new(),
        })
    }

    /// The remote of a Flux GitRepository: `url` (`spec.url`) and the data
    /// of the Secret its `spec.secretRef` names, if any. The Secret's keys,
    /// as Flux reads them: `username` and `password` (basic auth; a
    /// password without a username is an error), `bearerToken` (not with a
    /// password), `ca.crt` (PEM, added to the system's roots). Other keys
    /// are ignored. Errors name the key at fault and never a value.
    pub fn from_flux(url: &str, secret: Option<&BTreeMap<String, Vec<u8>>>) -> Result<Remote> {
        let mut remote = Remote::new(url)?;
        let Some(data) = secret else {
            return Ok(remote);
        };
        let text = |key: &str| -> Result<Option<String>> {
            match data.get(key) {
                None => Ok(None),
                Some(v) => String::from_utf8(v.clone()).map(Some).map_err(|_| {
                    Error::input(
                        format!("the secretRef's key `{key}` is not UTF-8 text"),
                        Some(format!("store the {key} as plain text in the Secret")),
                    )
                }),
            }
        };
        let username = text("username")?.filter(|s| !s.is_empty());
        let password = text("password")?.filter(|s| !s.is_empty());
        let bearer = text("bearerToken")?.filter(|s| !s.trim().is_empty());
        remote.credentials = match (username, password, bearer) {
            (_, Some(_), Some(_)) | (Some(_), _, Some(_)) => {
                return Err(Error::input(
                    "the secretRef has both `username`/`password` and `bearerToken`",
                    Some("keep one way to authenticate in the Secret".to_string()),
                ));
            }
            (None, Some(_), None) => {
                return Err(Error::input(
                    "the secretRef has `password` but no `username`",
                    Some("add the `username` key to the Secret".to_string()),
                ));
            }
            (Some(username), password, None) => Some(Credentials::Basic {
                username,
                password: password.unwrap_or_default(),
            }),
            (None, None, Some(token)) => Some(Credentials::Bearer(token.trim().to_string())),
            (None, None, None) => None,
        };
        if let Some(pem) = data.get("ca.crt").or_else(|| data.get("caFile")) {
            remote = remote.with_ca(pem)?;
        }
        Ok(remote)
    }

    /// The same remote with `credentials`.
    pub fn with_credentials(mut self, credentials: Option<Credentials>) -> Remote {
        self.credentials = credentials;
        self
    }

    /// The same remote trusting the CA certificates in `pem` too.
    pub fn with_ca(mut self, pem: &[u8]) -> Result<Remote> {
        let certs = reqwest::Certificate::from_pem_bundle(pem)
            .ok()
            .filter(|c| !c.is_empty())
            .ok_or_else(|| {
                Error::input(
                    "the secretRef's `ca.crt` holds no PEM certificate",
                    Some(
                        "put the CA certificate (-----BEGIN CERTIFICATE-----) into ca.crt"
                            .to_string(),
                    ),
                )
            })?;
        self.ca = certs;
        Ok(self)
    }

    /// The URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The credentials, if any.
    pub fn credentials(&self) -> Option<&Credentials> {
        self.credentials.as_ref()
    }

    fn ca_certificates(&self) -> Vec<reqwest::Certificate> {
        self.ca.clone()
    }
}

/// The bounds of a cache root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes on disk the cache root may hold after a fetch; older mirrors
    /// not in use are evicted to stay under it (the one just fetched
    /// always stays).
    pub max_bytes: u64,
    /// Packs a mirror may hold before its next fetch, when nobody uses
    /// it, clones it afresh (one pack).
    pub max_packs: usize,
    /// The longest one HTTP request of a fetch may take, the whole pack
    /// download included.
    pub timeout: Duration,
    /// The most bytes of pack one fetch may receive: counted as they
    /// arrive, the fetch fails once more come.
    pub max_fetch_bytes: u64,
    /// The most objects one fetch may receive (the count in the pack's
    /// header, checked before any object is read).
    pub max_objects: u64,
    /// The largest object one fetch may receive, inflated (the size each
    /// object's header declares, checked before its data is read; for a
    /// delta, the object it builds too).
    pub max_object_bytes: u64,
    /// The most bytes a server may send a fetch before its pack: the ref
    /// advertisement and the negotiation's answers, which are read into
    /// memory (counted as they arrive).
    pub max_ref_bytes: u64,
    /// The most refs (lines naming an object) a server's ref
    /// advertisement may list.
    pub max_refs: u64,
}

impl Default for Limits {
    /// 1 GiB, 32 packs, 10 minutes; a fetch of at most 1 GiB, 1,000,000
    /// objects, and objects of at most 100 MiB (GitHub refuses larger
    /// files); before the pack at most 16 MiB and 100,000 refs.
    fn default() -> Limits {
        Limits {
            max_bytes: 1 << 30,
            max_packs: 32,
            timeout: Duration::from_secs(600),
            max_fetch_bytes: 1 << 30,
            max_objects: 1_000_000,
            max_object_bytes: 100 << 20,
            max_ref_bytes: 16 << 20,
            max_refs: 100_000,
        }
    }
}

/// A cache root of mirrors, one per URL.
#[derive(Debug, Clone)]
pub struct Mirrors {
    root: PathBuf,
    limits: Limits,
}

/// What a [`Mirrors::fetch`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fetched {
    /// The mirror was cloned: the first fetch of the URL, after an
    /// eviction, or a consolidation.
    pub cloned: bool,
    /// The clone replaced a mirror whose packs had piled up.
    pub consolidated: bool,
    /// The clone replaced a mirror a fetch could not update for a local
    /// reason (a damaged repository).
    pub repaired: bool,
    /// Bytes of pack received (0 when nothing was new).
    pub pack_bytes: u64,
    /// Objects received.
    pub objects: u64,
    /// The commit had to be fetched by its id: the branch no longer
    /// leads to it (a force-push after source-controller fetched it).
    pub by_id: bool,
    /// Mirrors of other URLs evicted to stay within the budget (their
    /// directory names).
    pub evicted: Vec<String>,
    /// Bytes the cache root holds afterwards.
    pub cache_bytes: u64,
}

impl Mirrors {
    /// The mirrors under `root` (created if missing), kept within `limits`.
    pub fn new(root: impl Into<PathBuf>, limits: Limits) -> Result<Mirrors> {
        let root = root.into();
        std::fs::create_dir_all(&root)
            .map_err(|e| Error::io(format!("creating the mirror cache {}", root.display()), e))?;
        Ok(Mirrors { root, limits })
    }

    /// The cache root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The bounds in force.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The directory of the mirror of `url` (which may not exist yet).
    pub fn dir_of(&self, url: &str) -> PathBuf {
        self.root.join(store::key(url.trim()))
    }

    /// Bytes the cache root holds on disk now.
    pub fn usage(&self) -> u64 {
        store::disk_usage(&self.root)
    }

    /// Brings the mirror of `remote` up to date for `branch` (clones it
    /// first when there is none) and makes sure it holds `commit` (a full
    /// commit id, e.g. the one source-controller announced): when the
    /// branch no longer leads to it, the commit is asked for by id.
    /// Returns the mirror, held open (see [`Mirror`]). `interrupt` stops
    /// the download when set (from another thread), leaving the mirror as
    /// it was. Blocking.
    ///
    /// Errors: [`Error::Git`] for the server's refusals and failures
    /// (authentication, no such repository, branch or commit, unreachable,
    /// 5xx), [`Error::Input`] for a bad branch name or commit id,
    /// [`Error::Io`] for the local disk.
    pub fn fetch(
        &self,
        remote: &Remote,
        branch: &str,
        commit: Option<&str>,
        interrupt: &AtomicBool,
    ) -> Result<Mirror> {
        let branch_ref = branch_ref(branch)?;
        let branch = &branch_ref["refs/heads/".len()..];
        let commit = commit.map(commit_id).transpose()?;
        let key = store::key(remote.url());
        let dir = self.root.join(&key);
        let io = |what: &str, e: std::io::Error| refresh::io_error(&dir, what, e);
        let lock_path = |what: &str| self.root.join(format!("{key}.{what}.lock"));
        let fetching = store::Lock::take(&lock_path("fetch"), store::Mode::Exclusive, true)
            .map_err(|e| io("locking the fetch", e))?
            .ok_or_else(|| io("locking the fetch", std::io::ErrorKind::WouldBlock.into()))?;
        store::sweep_leftovers(&dir);
        let using = store::Lock::take(&lock_path("use"), store::Mode::Shared, true)
            .map_err(|e| io("locking the use", e))?
            .ok_or_else(|| io("locking the use", std::io::ErrorKind::WouldBlock.into()))?;
        let spec = format!("+{branch_ref}:{branch_ref}");
        let mut fetched = Fetched::default();
        let received =
            self.receive(&dir, remote, branch, &spec, &using, &mut fetched, interrupt)?;
        fetched.pack_bytes = received.pack_bytes;
        fetched.objects = received.objects;
        let head = head_of(&received, remote, branch)?;
        let repo = git::Repo::open_bare(&dir)?;
        if let Some(c) = &commit
            && !repo.has_commit(c)
        {
            self.fetch_by_id(
                &dir,
                &repo,
                remote,
                branch,
                &head,
                c,
                &mut fetched,
                interrupt,
            )?;
        }
        store::touch(&dir).map_err(|e| io("marking the use", e))?;
        drop(fetching);
        let (evicted, cache_bytes) = store::evict(&self.root, &key, self.limits.max_bytes);
        fetched.evicted = evicted;
        fetched.cache_bytes = cache_bytes;
        if cache_bytes > self.limits.max_bytes {
            log::warn!(
                "mirror: the cache {} holds {cache_bytes} bytes, more than its budget of {} (mirrors in use, or {} alone is larger)",
                self.root.display(),
                self.limits.max_bytes,
                remote.url()
            );
        }
        Ok(Mirror {
            repo,
            url: remote.url().to_string(),
            branch: branch.to_string(),
            head,
            fetched,
            _using: using,
        })
    }

    /// Clones `remote`'s `branch` into a new directory beside `dir` and
    /// renames it into place (replacing what is there: the caller holds
    /// the use lock exclusively, or there is nothing).
    fn clone_into(
        &self,
        dir: &Path,
        remote: &Remote,
        branch: &str,
        spec: &str,
        interrupt: &AtomicBool,
    ) -> Result<fetch::Received> {
        let new = store::sibling(dir, "new");
        let io = |what: &str, e: std::io::Error| Error::io(format!("{what} {}", new.display()), e);
        store::init_bare(&new, remote.url(), branch).map_err(|e| io("creating the mirror", e))?;
        let received =
            match fetch::fetch(&new, remote, &[spec.to_string()], &self.limits, interrupt)
                .and_then(|r| head_of(&r, remote, branch).map(|_| r))
            {
                Ok(r) => r,
                Err(e) => {
                    let _ = std::fs::remove_dir_all(&new);
                    return Err(e);
                }
            };
        if dir.exists() {
            let old = store::sibling(dir, "old");
            std::fs::rename(dir, &old).map_err(|e| io("replacing the mirror with", e))?;
            std::fs::rename(&new, dir).map_err(|e| io("moving into place", e))?;
            let _ = std::fs::remove_dir_all(&old);
        } else {
            std::fs::rename(&new, dir).map_err(|e| io("moving into place", e))?;
        }
        Ok(received)
    }
}

/// The commit the server's `branch` points to, from what a fetch saw.
fn head_of(received: &fetch::Received, remote: &Remote, branch: &str) -> Result<String> {
    let full = format!("refs/heads/{branch}");
    received
        .heads
        .iter()
        .find(|(name, _)| *name == full)
        .map(|(_, id)| id.clone())
        .ok_or_else(|| Error::Git {
            url: remote.url().to_string(),
            message: format!("the branch {branch} does not exist there"),
            hint: Some("check the GitRepository's spec.ref.branch".to_string()),
            kind: GitFailure::NotFound,
        })
}

/// `refs/heads/BRANCH` for `BRANCH` or `refs/heads/BRANCH`, checked to be
/// a valid reference name.
fn branch_ref(branch: &str) -> Result<String> {
    let branch = branch.strip_prefix("refs/heads/").unwrap_or(branch);
    let full = format!("refs/heads/{branch}");
    let valid = !branch.is_empty()
        && !branch.starts_with('-')
        && gix::refs::FullName::try_from(full.as_str()).is_ok();
    if !valid {
        return Err(Error::input(
            format!("the branch {branch:?} is not a valid branch name"),
            Some(
                "name the branch as git does, e.g. main (the GitRepository's spec.ref.branch)"
                    .to_string(),
            ),
        ));
    }
    Ok(full)
}

/// `url` as errors show it: a `user:password@` in front of the host left
/// out, so that no credential written into the URL is repeated.
fn without_userinfo(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..end].rfind('@') {
        Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
        None => url.to_string(),
    }
}

/// A full commit id, lowercase.
fn commit_id(id: &str) -> Result<String> {
    let id = id.trim();
    if id.len() == 40 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(id.to_ascii_lowercase())
    } else if id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
        Err(Error::input(
            format!("{id} is a SHA-256 commit id: SHA-256 repositories are not supported"),
            Some("publish from a SHA-1 repository (git's default)".to_string()),
        ))
    } else {
        Err(Error::input(
            format!("{id:?} is not a full commit id"),
            Some("give the 40 hex digits of the commit (status.artifact.revision: BRANCH@sha1:COMMIT)".to_string()),
        ))
    }
}

/// A fetched mirror, open for reading: the fetch's outcome and the
/// repository to publish from. While it lives, the mirror is neither
/// replaced nor evicted (other fetches of the URL still proceed). Drop it
/// when done publishing.
#[derive(Debug)]
pub struct Mirror {
    repo: git::Repo,
    url: String,
    branch: String,
    head: String,
    fetched: Fetched,
    _using: store::Lock,
}

impl Mirror {
    /// The repository URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The branch fetched.
    pub fn branch(&self) -> &str {
        &self.branch
    }

    /// `refs/heads/BRANCH`: the ref a clone of the branch has checked out
    /// (the provenance's `ref`).
    pub fn git_ref(&self) -> String {
        format!("refs/heads/{}", self.branch)
    }

    /// The commit the branch pointed to on the server at the fetch.
    pub fn head(&self) -> &str {
        &self.head
    }

    /// What the fetch did.
    pub fn fetched(&self) -> &Fetched {
        &self.fetched
    }

    /// The bare repository on disk.
    pub fn dir(&self) -> &Path {
        self.repo.root()
    }

    /// The repository, for its root folder.
    pub fn repo(&self) -> &git::Repo {
        &self.repo
    }

    /// Whether the mirror holds the commit `id`.
    pub fn has_commit(&self, id: &str) -> bool {
        self.repo.has_commit(id)
    }

    /// The URL as the image's `source` annotation names it: what `push`
    /// in a clone of it reads from the `origin` remote.
    pub fn source_url(&self) -> Option<String> {
        super::github::normalize_remote_url(&self.url)
    }

    /// The checkout of `folder` (see [`folder`]) in this mirror.
    pub fn checkout(&self, folder: &str) -> Result<Checkout> {
        Ok(Checkout::from_repo(
            self.repo.folder(&folder_path(folder)?),
            None,
        ))
    }
}

/// A folder named relative to the repository root, as `push --path`
/// takes it in the root of a clone: `/`-separated, `.` or empty for the
/// root, `./` and trailing `/` allowed. Returned normalized (`""` for the
/// root). Absolute paths, `..` and `.git` are refused.
pub fn folder_path(folder: &str) -> Result<String> {
    let bad = |why: &str| {
        Error::input_hinted(
            crate::text![crate::field::Field::Path, format!(" {folder:?} {why}")],
            "name the folder relative to the repository root, e.g. configs/shop",
        )
    };
    if folder.starts_with('/') {
        return Err(bad("is absolute"));
    }
    let mut parts = Vec::new();
    for p in folder.split('/') {
        match p {
            "" | "." => {}
            ".." => return Err(bad("leaves the repository (..)")),
            ".git" => return Err(bad("is inside .git")),
            p => parts.push(p),
        }
    }
    Ok(parts.join("/"))
}

#[cfg(test)]
mod tests;

// Against a real smart-HTTP server and registry (once tests/mirror.rs).
#[cfg(test)]
#[path = "server_tests.rs"]
mod server_tests;

// Large files and hostile servers, memory bounded (once part of
// tests/large_files.rs).
#[cfg(test)]
#[path = "large_files_tests.rs"]
mod large_files_tests;
