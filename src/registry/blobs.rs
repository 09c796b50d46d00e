//! Blobs: existence checks, small reads, cross-repository mounts and
//! uploads. An upload is one session (`POST`, then one `PUT`, or `PATCH`
//! chunks of at most [`CHUNK_SIZE`] read from disk and a closing `PUT`);
//! a transient failure anywhere starts the whole session over, at most
//! [`MAX_ATTEMPTS`] times. [`Session::ensure_blob`] asks whether the
//! repository has a blob and opens its upload session in one request.

use std::os::unix::fs::FileExt;
use std::path::Path;

use reqwest::header::{self, HeaderMap, HeaderValue};
use reqwest::{Method, Response, StatusCode, Url};

use super::Session;
use super::deadline;
use super::transport::{Attempt, MAX_ATTEMPTS, backoff};
use crate::error::{Error, Result};
use crate::image::Descriptor;
use crate::progress::{Task, Unit};

/// The largest request body sent in a chunked upload (ghcr.io rejects
/// larger ones).
pub const CHUNK_SIZE: u64 = 4 * 1024 * 1024;
/// Read size when streaming a blob for a monolithic upload.
const STREAM_BUF: usize = 256 * 1024;

/// The body of one upload request.
enum Body<'a> {
    Empty,
    Bytes(Vec<u8>),
    File(&'a Path),
}

/// Where a blob's bytes come from.
pub(crate) enum Blob<'a> {
    /// Bytes in memory (a config, an artifact layer).
    Memory(&'a [u8]),
    /// A file on disk (a built layer), streamed or read in chunks.
    File(&'a Path),
}

impl Session {
    /// A small blob's bytes, checked against its digest.
    pub(crate) async fn get_blob(&self, digest: &str) -> Result<Vec<u8>> {
        let what = format!("getting blob {digest}");
        let url = self.t.url(&format!("blobs/{digest}"))?;
        let resp = self
            .t
            .send(&what, true, |s| Ok(s.request(Method::GET, url.clone())))
            .await?;
        if resp.status() != StatusCode::OK {
            return Err(self.t.fail(&what, resp).await);
        }
        let bytes = self.t.small_body(&what, resp, "blob").await?;
        let got = crate::image::sha256_digest(&bytes);
        if got != digest {
            return Err(self.t.registry_err(
                &what,
                format!("the registry sent content with digest {got}"),
            ));
        }
        Ok(bytes)
    }

    /// Uploads `bytes` as a blob unless the registry has it.
    pub(crate) async fn put_blob(&self, media_type: &str, bytes: &[u8]) -> Result<Descriptor> {
        let desc = Descriptor::of(media_type, bytes);
        self.ensure_blob(&desc, Blob::Memory(bytes)).await?;
        Ok(desc)
    }

    /// Uploads a blob unless the repository holds it, asking both in one
    /// request: a `POST` that mounts the blob from this very repository.
    /// A registry that holds it answers 201 and nothing is sent; else it
    /// answers 202 with the upload session the blob then goes into (what
    /// the distribution spec has a registry answer when it cannot mount).
    /// A registry that refuses the mount parameters outright gets a plain
    /// upload. True when the blob was uploaded (it was not there).
    pub(crate) async fn ensure_blob(&self, desc: &Descriptor, blob: Blob<'_>) -> Result<bool> {
        let what = format!("uploading blob {}", desc.digest);
        let mut url = self.t.url("blobs/uploads/")?;
        url.query_pairs_mut()
            .append_pair("mount", &desc.digest)
            .append_pair("from", &self.t.repo.name);
        let resp = self
            .t
            .send(&what, true, |s| {
                Ok(s.request(Method::POST, url.clone())
                    .header(header::CONTENT_LENGTH, 0))
            })
            .await?;
        let opened = match resp.status() {
            StatusCode::CREATED => {
                return match resp
                    .headers()
                    .get("docker-content-digest")
                    .and_then(|v| v.to_str().ok())
                {
                    Some(d) if d != desc.digest => Err(self.t.registry_err(
                        &what,
                        format!("asked for {}, the registry has {d}", desc.digest),
                    )),
                    _ => Ok(false),
                };
            }
            StatusCode::ACCEPTED => Some(self.t.location(&what, &resp)?),
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                return Err(self.t.fail(&what, resp).await);
            }
            s if s.is_server_error() => return Err(self.t.fail(&what, resp).await),
            _ => None,
        };
        self.upload_blob(desc, blob, opened).await?;
        Ok(true)
    }

    /// Mounts `digest` from `from` (a repository name on the same
    /// registry). False when the registry did not mount it (it opened an
    /// upload session instead, which is cancelled): upload it then.
    pub(crate) async fn mount_blob(&self, digest: &str, from: &str) -> Result<bool> {
        let what = format!("mounting blob {digest} from {from}");
        let mut url = self.t.url("blobs/uploads/")?;
        url.query_pairs_mut()
            .append_pair("mount", digest)
            .append_pair("from", from);
        let resp = self
            .t
            .send(&what, true, |s| {
                Ok(s.request(Method::POST, url.clone())
                    .header(header::CONTENT_LENGTH, 0))
            })
            .await?;
        match resp.status() {
            StatusCode::CREATED => Ok(true),
            StatusCode::ACCEPTED => {
                // An upload session we do not need: cancel it, best effort.
                if let Ok(loc) = self.t.location(&what, &resp) {
                    let _ = self
                        .t
                        .send(&what, false, |s| Ok(s.request(Method::DELETE, loc.clone())))
                        .await;
                }
                Ok(false)
            }
            _ => Err(self.t.fail(&what, resp).await),
        }
    }

    /// Sends one request of an upload session; `progress` counts its
    /// body's bytes as they are sent.
    #[allow(clippy::too_many_arguments)]
    async fn upload_step(
        &self,
        what: &str,
        method: Method,
        url: &Url,
        body: Body<'_>,
        headers: HeaderMap,
        expect: StatusCode,
        progress: &Task,
    ) -> Result<Attempt<Response>> {
        let (body, len) = match body {
            Body::Empty => (reqwest::Body::from(Vec::new()), 0),
            Body::Bytes(b) => {
                let len = b.len() as u64;
                (bytes_stream(b, progress.clone()), len)
            }
            Body::File(path) => {
                let len = std::fs::metadata(path).map_or(0, |m| m.len());
                let body = file_stream(path, progress.clone())
                    .await
                    .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
                (body, len)
            }
        };
        // An upload's deadline grows with its body (see `deadline`).
        let rb = self
            .t
            .request(method, url.clone())
            .timeout(deadline::get().for_request(len))
            .headers(headers)
            .body(body);
        self.t.send_once(what, rb, expect).await
    }

    /// Uploads one blob (the first session in `opened` when it is open
    /// already), restarting in a new session after a transient failure,
    /// at most [`MAX_ATTEMPTS`] times.
    async fn upload_blob(
        &self,
        desc: &Descriptor,
        blob: Blob<'_>,
        mut opened: Option<Url>,
    ) -> Result<()> {
        let what = format!("uploading blob {}", desc.digest);
        // On a terminal: the layer's bytes sent so far (config and
        // provenance blobs are a few hundred bytes: not shown).
        let progress = match blob {
            Blob::File(_) => Task::start(
                || {
                    let hex = desc.digest.trim_start_matches("sha256:");
                    format!("uploading {} to {}", &hex[..hex.len().min(12)], self.t.repo)
                },
                Some(desc.size),
                Unit::Bytes,
            ),
            Blob::Memory(_) => Task::none(),
        };
        let mut attempt = 0;
        loop {
            attempt += 1;
            // A new session sends the blob from its start again.
            progress.set(0);
            match self
                .upload_session(&what, desc, &blob, opened.take(), &progress)
                .await?
            {
                Attempt::Done(()) => return Ok(()),
                Attempt::Retry { error, wait } => {
                    if attempt >= MAX_ATTEMPTS {
                        return Err(error);
                    }
                    tokio::time::sleep(wait.unwrap_or_else(|| backoff(attempt))).await;
                }
            }
        }
    }

    /// One upload session: opened by a `POST` unless `opened` is its
    /// `Location` already.
    async fn upload_session(
        &self,
        what: &str,
        desc: &Descriptor,
        blob: &Blob<'_>,
        opened: Option<Url>,
        progress: &Task,
    ) -> Result<Attempt<()>> {
        let mut loc = match opened {
            Some(loc) => loc,
            None => match self.open_session(what).await? {
                Attempt::Done(loc) => loc,
                Attempt::Retry { error, wait } => return Ok(Attempt::Retry { error, wait }),
            },
        };
        let octet = HeaderValue::from_static("application/octet-stream");
        // A blob that fits in one request goes in one PUT either way.
        if self.monolithic || desc.size <= CHUNK_SIZE {
            return self
                .put_whole(what, desc, blob, &loc, octet, progress)
                .await;
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
            let chunk = read_chunk(file.as_ref(), blob, offset, len)?;
            let step = self
                .patch_chunk(what, &loc, chunk, (offset, len), octet.clone(), progress)
                .await?;
            loc = match step {
                Attempt::Done(next) => next,
                Attempt::Retry { error, wait } => return Ok(Attempt::Retry { error, wait }),
            };
            offset += len;
        }
        let mut url = loc;
        url.query_pairs_mut().append_pair("digest", &desc.digest);
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(0));
        let step = self
            .upload_step(
                what,
                Method::PUT,
                &url,
                Body::Empty,
                h,
                StatusCode::CREATED,
                &Task::none(),
            )
            .await?;
        self.finish(what, desc, step)
    }

    /// Opens an upload session with a `POST`: its `Location`.
    async fn open_session(&self, what: &str) -> Result<Attempt<Url>> {
        let start = self.t.url("blobs/uploads/")?;
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(0));
        let step = self
            .upload_step(
                what,
                Method::POST,
                &start,
                Body::Empty,
                h,
                StatusCode::ACCEPTED,
                &Task::none(),
            )
            .await?;
        let resp = match step {
            Attempt::Done(r) => r,
            Attempt::Retry { error, wait } => return Ok(Attempt::Retry { error, wait }),
        };
        Ok(Attempt::Done(self.t.location(what, &resp)?))
    }

    /// Uploads the whole blob in one `PUT` to the session at `loc`.
    async fn put_whole(
        &self,
        what: &str,
        desc: &Descriptor,
        blob: &Blob<'_>,
        loc: &Url,
        octet: HeaderValue,
        progress: &Task,
    ) -> Result<Attempt<()>> {
        let mut url = loc.clone();
        url.query_pairs_mut().append_pair("digest", &desc.digest);
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_TYPE, octet);
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(desc.size));
        let body = match blob {
            Blob::Memory(b) => Body::Bytes(b.to_vec()),
            Blob::File(p) => Body::File(p),
        };
        let step = self
            .upload_step(
                what,
                Method::PUT,
                &url,
                body,
                h,
                StatusCode::CREATED,
                progress,
            )
            .await?;
        self.finish(what, desc, step)
    }

    /// Sends one chunk (`len` bytes at `offset`) in a `PATCH` to the
    /// session at `loc`: the session's next `Location`.
    async fn patch_chunk(
        &self,
        what: &str,
        loc: &Url,
        chunk: Vec<u8>,
        (offset, len): (u64, u64),
        octet: HeaderValue,
        progress: &Task,
    ) -> Result<Attempt<Url>> {
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_TYPE, octet);
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
        let range = format!("{}-{}", offset, offset + len - 1);
        h.insert(
            header::CONTENT_RANGE,
            HeaderValue::from_str(&range).map_err(|e| self.t.registry_err(what, e.to_string()))?,
        );
        let step = self
            .upload_step(
                what,
                Method::PATCH,
                loc,
                Body::Bytes(chunk),
                h,
                StatusCode::ACCEPTED,
                progress,
            )
            .await?;
        let resp = match step {
            Attempt::Done(r) => r,
            Attempt::Retry { error, wait } => return Ok(Attempt::Retry { error, wait }),
        };
        Ok(Attempt::Done(self.t.location(what, &resp)?))
    }

    /// The closing `PUT`'s answer: the registry must have stored our digest.
    fn finish(
        &self,
        what: &str,
        desc: &Descriptor,
        step: Attempt<Response>,
    ) -> Result<Attempt<()>> {
        let resp = match step {
            Attempt::Done(r) => r,
            Attempt::Retry { error, wait } => return Ok(Attempt::Retry { error, wait }),
        };
        if let Some(d) = resp
            .headers()
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok())
            && d != desc.digest
        {
            return Err(self.t.registry_err(
                what,
                format!("the registry stored digest {d}, expected {}", desc.digest),
            ));
        }
        Ok(Attempt::Done(()))
    }
}

/// The chunk of `len` bytes at `offset`: read from `file` (the blob's
/// file, open), or cut from the blob in memory.
fn read_chunk(
    file: Option<&std::fs::File>,
    blob: &Blob<'_>,
    offset: u64,
    len: u64,
) -> Result<Vec<u8>> {
    Ok(match (file, blob) {
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
    })
}

/// A request body that streams `path` from disk, counting into `progress`
/// each piece as the connection takes it.
async fn file_stream(path: &Path, progress: Task) -> std::io::Result<reqwest::Body> {
    use tokio::io::AsyncReadExt;
    let file = tokio::fs::File::open(path).await?;
    let stream = futures_util::stream::try_unfold(file, move |mut f| {
        let progress = progress.clone();
        async move {
            let mut buf = vec![0u8; STREAM_BUF];
            let n = f.read(&mut buf).await?;
            if n == 0 {
                Ok::<_, std::io::Error>(None)
            } else {
                buf.truncate(n);
                progress.inc(n as u64);
                Ok(Some((buf, f)))
            }
        }
    });
    Ok(reqwest::Body::wrap_stream(stream))
}

/// A request body of `bytes`: in one piece when nothing shows progress,
/// else in pieces counted into `progress` as the connection takes them.
fn bytes_stream(bytes: Vec<u8>, progress: Task) -> reqwest::Body {
    if !progress.shown() {
        return reqwest::Body::from(bytes);
    }
    let pieces: Vec<Vec<u8>> = bytes.chunks(STREAM_BUF).map(<[u8]>::to_vec).collect();
    let stream = futures_util::stream::iter(pieces.into_iter().map(move |piece| {
        progress.inc(piece.len() as u64);
        Ok::<_, std::io::Error>(piece)
    }));
    reqwest::Body::wrap_stream(stream)
}
