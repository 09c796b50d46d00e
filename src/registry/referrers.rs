//! OCI 1.1 referrers: listing an image's referrers (the referrers API when
//! the registry has it, else the `sha256-<hex>` referrers tag schema) and
//! attaching an artifact to an image (provenance, promotion records).

use reqwest::header;
use reqwest::{Method, StatusCode};

use super::Session;
use super::transport::next_link;
use crate::error::Result;
use crate::image::artifact::{self, Artifact, Index};
use crate::image::{Descriptor, INDEX_MEDIA_TYPE, MANIFEST_MEDIA_TYPE};

/// What [`super::Client::attach_referrer`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attached {
    /// The referrer manifest's descriptor (with `artifactType` and
    /// annotations), as it is listed among the subject's referrers.
    pub descriptor: Descriptor,
    /// The referrers tag (`sha256-<hex>`) that lists it, when the registry
    /// has no referrers API; `None` when the registry indexed it itself.
    pub referrers_tag: Option<String>,
}

impl Session {
    /// The referrers of `subject`, optionally only those of `artifact_type`:
    /// the referrers API when the registry has it, else the referrers tag
    /// schema (`sha256-<hex>`).
    pub(crate) async fn referrers(
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
    /// registry does not implement it (anything but 200 with an index);
    /// asked at most once per session when it does not.
    pub(crate) async fn referrers_api_list(
        &self,
        subject: &str,
        artifact_type: Option<&str>,
    ) -> Result<Option<Vec<Descriptor>>> {
        if self.referrers_api.get() == Some(false) {
            return Ok(None);
        }
        let what = format!("listing referrers of {}@{subject}", self.t.repo);
        let mut url = self.t.url(&format!("referrers/{subject}"))?;
        if let Some(t) = artifact_type {
            url.query_pairs_mut().append_pair("artifactType", t);
        }
        let mut list = Vec::new();
        for _ in 0..1000 {
            let resp = self
                .t
                .send(&what, true, |s| {
                    Ok(s.request(Method::GET, url.clone())
                        .header(header::ACCEPT, INDEX_MEDIA_TYPE))
                })
                .await?;
            match resp.status() {
                StatusCode::OK => {}
                StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                    return Err(self.t.fail(&what, resp).await);
                }
                s if s.is_server_error() => return Err(self.t.fail(&what, resp).await),
                _ => {
                    self.referrers_api.set(Some(false));
                    return Ok(None);
                }
            }
            let next = next_link(&resp);
            let body = self.t.small_body(&what, resp, "answer").await?;
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
                        .map_err(|e| self.t.registry_err(&what, format!("bad Link {n:?}: {e}")))?
                }
                None => {
                    for d in &mut list {
                        self.complete_listed(d).await?;
                    }
                    return Ok(Some(list));
                }
            }
        }
        Err(self.t.registry_err(
            &what,
            "the referrers list never ended (more than 1000 pages)",
        ))
    }

    /// Reads the artifact type and annotations of a listed image manifest
    /// from the manifest itself when the listing gives the empty config's
    /// media type (or none) as its artifact type. A manifest whose config
    /// is the empty descriptor must carry `artifactType` (image spec 1.1),
    /// and the referrers API must list it; a registry that takes the
    /// config's media type instead (go-containerregistry's pkg/registry,
    /// up to v0.22.1 at least) would hide every artifact of this kind from
    /// a filter on its type. One manifest read per such referrer.
    async fn complete_listed(&self, d: &mut Descriptor) -> Result<()> {
        let unread = d.artifact_type.is_none()
            || d.artifact_type.as_deref() == Some(artifact::EMPTY_MEDIA_TYPE);
        if !unread || d.media_type != MANIFEST_MEDIA_TYPE {
            return Ok(());
        }
        let Some(m) = self.get_manifest(&d.digest).await? else {
            return Ok(());
        };
        let view = artifact::ManifestView::parse(&m.bytes).map_err(|e| {
            self.t.registry_err(
                format!("reading the referrer {}@{}", self.t.repo, d.digest),
                format!("{e}"),
            )
        })?;
        if let Some(t) = view.effective_artifact_type() {
            d.artifact_type = Some(t);
        }
        if d.annotations.is_empty() {
            d.annotations = view.annotations;
        }
        Ok(())
    }

    /// The index under the referrers tag of `subject` (empty when missing).
    pub(crate) async fn referrers_tag_index(&self, subject: &str) -> Result<Index> {
        let tag = artifact::referrers_tag(subject);
        match self.get_manifest(&tag).await? {
            None => Ok(Index::empty()),
            Some(m) => Index::parse(&m.bytes).map_err(|e| {
                self.t.registry_err(
                    format!("reading the referrers index {}:{tag}", self.t.repo),
                    format!("{e}"),
                )
            }),
        }
    }

    /// Attaches `art` to `subject`: uploads its blobs, puts its manifest by
    /// digest and, when the registry does not confirm the subject with
    /// `OCI-Subject`, adds it to the referrers tag's index.
    pub(crate) async fn attach_referrer(
        &self,
        subject: &Descriptor,
        art: &Artifact,
    ) -> Result<Attached> {
        self.referrer_blobs(art).await?;
        let (descriptor, indexed) = self.put_referrer(subject, art).await?;
        let referrers_tag = match indexed {
            true => None,
            false => Some(self.index_referrer(subject, &descriptor).await?),
        };
        Ok(Attached {
            descriptor,
            referrers_tag,
        })
    }

    /// Uploads the blobs of `art` the registry does not have (the empty
    /// config and each layer), side by side.
    pub(crate) async fn referrer_blobs(&self, art: &Artifact) -> Result<()> {
        use futures_util::future::{try_join, try_join_all};
        let empty = artifact::empty_descriptor();
        try_join(
            self.put_blob(&empty.media_type, artifact::EMPTY_JSON),
            try_join_all(art.layers.iter().map(|(mt, b)| self.put_blob(mt, b))),
        )
        .await?;
        Ok(())
    }

    /// Puts the manifest of `art` about `subject` by digest (its blobs are
    /// there): its descriptor, and whether the registry indexed it itself
    /// (answered `OCI-Subject`, the referrers API).
    pub(crate) async fn put_referrer(
        &self,
        subject: &Descriptor,
        art: &Artifact,
    ) -> Result<(Descriptor, bool)> {
        let (bytes, descriptor) = artifact::manifest(subject, art)?;
        let put = self
            .put_manifest_bytes(&descriptor.digest, &bytes, MANIFEST_MEDIA_TYPE)
            .await?;
        let indexed = put.subject.as_deref() == Some(subject.digest.as_str());
        if indexed {
            self.referrers_api.set(Some(true));
        }
        Ok((descriptor, indexed))
    }

    /// Adds `descriptor` to the index under the referrers tag of `subject`
    /// (the referrers tag schema of distribution spec v1.1: read, add
    /// unless listed, write); returns the tag.
    pub(crate) async fn index_referrer(
        &self,
        subject: &Descriptor,
        descriptor: &Descriptor,
    ) -> Result<String> {
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
        Ok(tag)
    }
}
