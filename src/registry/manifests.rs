//! Manifests and tags: `HEAD`/`GET`/`PUT` of `manifests/REFERENCE` with our
//! exact bytes (never re-serialized: the digest is of the bytes). The tag
//! list is [`super::tags`].

use reqwest::header;
use reqwest::{Method, Response, StatusCode};

use super::Session;
use super::transport::header_str;
use crate::error::{Error, Result};
use crate::image::{Descriptor, MANIFEST_MEDIA_TYPE};

/// Manifest media types we accept when asking what a tag names.
const ACCEPT_MANIFESTS: &str = "application/vnd.oci.image.manifest.v1+json, \
     application/vnd.oci.image.index.v1+json, \
     application/vnd.docker.distribution.manifest.v2+json, \
     application/vnd.docker.distribution.manifest.list.v2+json";

/// `REPO:TAG`, or `REPO@DIGEST` for a digest (a tag holds no `:`): a
/// manifest reference as a person writes it, in errors.
pub(crate) fn named(repo: &impl std::fmt::Display, reference: &str) -> String {
    if reference.contains(':') {
        format!("{repo}@{reference}")
    } else {
        format!("{repo}:{reference}")
    }
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

impl Session {
    /// The digest a tag (or digest) names, or `None` when it does not exist.
    pub(crate) async fn manifest_digest(&self, reference: &str) -> Result<Option<String>> {
        Ok(self.head_manifest(reference).await?.map(|d| d.digest))
    }

    /// `HEAD` or `GET` of `manifests/REFERENCE`: the response when it
    /// exists, `None` on 404, the registry's error otherwise.
    pub(crate) async fn manifest_request(
        &self,
        method: Method,
        what: &str,
        reference: &str,
    ) -> Result<Option<Response>> {
        let url = self.t.url(&format!("manifests/{reference}"))?;
        let resp = self
            .t
            .send(what, true, |s| {
                Ok(s.request(method.clone(), url.clone())
                    .header(header::ACCEPT, ACCEPT_MANIFESTS))
            })
            .await?;
        match resp.status() {
            StatusCode::OK => Ok(Some(resp)),
            StatusCode::NOT_FOUND => Ok(None),
            _ => Err(self.t.fail(what, resp).await),
        }
    }

    /// What a tag (or digest) names, or `None` when it does not exist.
    pub(crate) async fn head_manifest(&self, reference: &str) -> Result<Option<Descriptor>> {
        let what = format!("checking manifest {}", named(&self.t.repo, reference));
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
    pub(crate) async fn get_manifest(&self, reference: &str) -> Result<Option<Manifest>> {
        let what = format!("getting manifest {}", named(&self.t.repo, reference));
        let Some(resp) = self.manifest_request(Method::GET, &what, reference).await? else {
            return Ok(None);
        };
        let header_type = header_str(&resp, header::CONTENT_TYPE.as_str());
        let bytes = self.t.small_body(&what, resp, "manifest").await?;
        let digest = crate::image::sha256_digest(&bytes);
        if reference.starts_with("sha256:") && digest != reference {
            return Err(self.t.registry_err(
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

    /// Puts manifest `bytes` under `reference` (a tag or its digest).
    pub(crate) async fn put_manifest_bytes(
        &self,
        reference: &str,
        bytes: &[u8],
        media_type: &str,
    ) -> Result<PutManifest> {
        let what = format!("putting manifest {}", named(&self.t.repo, reference));
        let url = self.t.url(&format!("manifests/{reference}"))?;
        let digest = crate::image::sha256_digest(bytes);
        let mut waits = BLOB_SETTLE.iter();
        let resp = loop {
            let resp = self
                .t
                .send(&what, true, |s| {
                    Ok(s.request(Method::PUT, url.clone())
                        .header(header::CONTENT_TYPE, media_type)
                        .body(bytes.to_vec()))
                })
                .await?;
            if resp.status() == StatusCode::CREATED {
                break resp;
            }
            let bad_request = resp.status() == StatusCode::BAD_REQUEST;
            let err = self.t.fail(&what, resp).await;
            // A manifest is only put after every blob it names is in the
            // registry; one it then calls unknown or unreadable is a
            // registry catching up (distribution's filesystem driver
            // rewrites a blob's link file in place when another run mounts
            // the same blob; object stores read after write late). Asked
            // again after a moment, it answers.
            match waits.next() {
                Some(wait) if bad_request && blob_not_settled(&err) => {
                    log::debug!("{what}: {err}; asking again in {} ms", wait.as_millis());
                    tokio::time::sleep(*wait).await;
                }
                _ => return Err(err),
            }
        };
        if let Some(d) = header_str(&resp, "docker-content-digest")
            && d != digest
        {
            return Err(self.t.registry_err(
                what,
                format!("the registry stored the manifest as {d}, not as {digest}"),
            ));
        }
        Ok(PutManifest {
            digest,
            subject: header_str(&resp, "oci-subject"),
        })
    }
}

/// How long to wait before putting a manifest again whose blobs the
/// registry did not see yet (see `Session::put_manifest_bytes`).
const BLOB_SETTLE: [std::time::Duration; 2] = [
    std::time::Duration::from_millis(100),
    std::time::Duration::from_millis(500),
];

/// Whether `err`, a refused manifest put, says a blob it names is unknown
/// or its link unreadable (distribution's `MANIFEST_BLOB_UNKNOWN`, and
/// `DIGEST_INVALID` for a link file read while it is rewritten).
fn blob_not_settled(err: &Error) -> bool {
    match err {
        Error::Registry { message, .. } => {
            message.contains("MANIFEST_BLOB_UNKNOWN") || message.contains("DIGEST_INVALID")
        }
        _ => false,
    }
}

#[cfg(test)]
mod named_tests {
    use super::named;

    #[test]
    fn a_digest_is_named_with_an_at_sign_a_tag_with_a_colon() {
        let d = format!("sha256:{}", "a".repeat(64));
        assert_eq!(named(&"r.example/shop", &d), format!("r.example/shop@{d}"));
        assert_eq!(
            named(&"r.example/shop", "main-1-abcdef0"),
            "r.example/shop:main-1-abcdef0"
        );
    }
}
