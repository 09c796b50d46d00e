//! What one publish has read from its repository, so that each thing is
//! asked once per run and passed down: the tag list (read once, by the
//! anomaly check, then used by the branch tag, the push and provenance)
//! and what each tag named when this run read or wrote it. A timestamp
//! tag never moves, so its image is read at most once per run. A tag the
//! list does not hold was absent when the list was read: nothing asks
//! about it again, except the guards that read on purpose (a timestamp tag
//! just before its put and after it, the branch tag's read-back).

use std::collections::HashMap;

use crate::error::Result;
use crate::image::artifact::{Index, ManifestView};
use crate::image::{ANNOTATION_REVISION, Descriptor};
use crate::registry::{Client, TagListError};

/// The most manifests [`RepoCache::read_all`] asks for at once.
const READ_AT_ONCE: usize = 8;

/// The image a tag named when this run read (or wrote) it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagImage {
    /// The manifest digest.
    pub digest: String,
    /// The commit the image records (`org.opencontainers.image.revision`,
    /// lower case), `None` when it records none.
    pub revision: Option<String>,
}

impl TagImage {
    /// What the manifest `bytes` say.
    pub fn of(bytes: &[u8]) -> TagImage {
        TagImage {
            digest: crate::image::sha256_digest(bytes),
            revision: revision_in(bytes),
        }
    }
}

/// The commit the manifest `bytes` record, lower case.
pub fn revision_in(bytes: &[u8]) -> Option<String> {
    let view = ManifestView::parse(bytes).unwrap_or_default();
    view.annotations
        .get(ANNOTATION_REVISION)
        .map(|r| r.to_ascii_lowercase())
}

/// The per-run cache (see the module docs).
#[derive(Debug, Default)]
pub struct RepoCache {
    /// The tag list, as it was when first read; `None` until then.
    tags: Option<Vec<String>>,
    /// What each tag named when read: `None` when it did not exist.
    images: HashMap<String, Option<TagImage>>,
    /// The descriptors the index under a referrers tag (`sha256-<hex>`)
    /// listed, for those [`RepoCache::read_all`] read.
    indexes: HashMap<String, Vec<Descriptor>>,
}

impl RepoCache {
    /// The repository's tags, read on the first call only.
    pub fn tags(&mut self, client: &Client) -> Result<&[String]> {
        if self.tags.is_none() {
            self.tags = Some(client.list_tags()?);
        }
        Ok(self.tags.as_deref().unwrap_or_default())
    }

    /// The repository's tags, read on the first call only, saying why
    /// they could not be had ([`TagListError`]).
    pub fn tags_or_why(&mut self, client: &Client) -> Result<&[String], TagListError> {
        if self.tags.is_none() {
            self.tags = Some(client.list_tags_or_why()?);
        }
        Ok(self.tags.as_deref().unwrap_or_default())
    }

    /// The tag list, if this run has read it.
    pub fn listed(&self) -> Option<&[String]> {
        self.tags.as_deref()
    }

    /// Whether the tag list holds `tag`; `None` when it was not read.
    pub fn lists(&self, tag: &str) -> Option<bool> {
        self.tags.as_ref().map(|t| t.iter().any(|x| x == tag))
    }

    /// What `tag` named when this run last read or wrote it, if it did
    /// (`Some(None)`: it did not exist, also when the list proved it).
    pub fn known(&self, tag: &str) -> Option<Option<&TagImage>> {
        match self.images.get(tag) {
            Some(n) => Some(n.as_ref()),
            None if self.lists(tag) == Some(false) => Some(None),
            None => None,
        }
    }

    /// What `tag` names: what this run already knows (its tag list
    /// included), else one `GET`.
    pub fn image(&mut self, client: &Client, tag: &str) -> Result<Option<TagImage>> {
        if let Some(known) = self.known(tag) {
            return Ok(known.cloned());
        }
        self.read(client, tag)
    }

    /// What `tag`, found in a newer tag list, names: what this run read or
    /// wrote, else one `GET` (a tag missing from the first list may have
    /// been made since).
    pub fn listed_image(&mut self, client: &Client, tag: &str) -> Result<Option<TagImage>> {
        if let Some(known) = self.images.get(tag) {
            return Ok(known.clone());
        }
        self.read(client, tag)
    }

    /// Reads the images of `tags` side by side (at most
    /// [`READ_AT_ONCE`] at a time), for the reads one by one that follow
    /// ([`RepoCache::image`], [`RepoCache::listed_image`], and for a referrers tag
    /// [`RepoCache::referrers_index`]). Best effort: a tag whose read fails is
    /// left unread, to be read (and fail) where it is needed.
    pub fn read_all(&mut self, client: &Client, tags: &[String]) {
        use futures_util::stream::{self, StreamExt};
        if tags.len() < 2 {
            return;
        }
        let read = client.run(|s| async move {
            Ok(stream::iter(tags)
                .map(|t| async move { (t, s.get_manifest(t).await) })
                .buffer_unordered(READ_AT_ONCE)
                .collect::<Vec<_>>()
                .await)
        });
        for (tag, got) in read.unwrap_or_default() {
            let Ok(m) = got else { continue };
            if let Some(m) = &m
                && tag.starts_with("sha256-")
                && let Ok(index) = Index::parse(&m.bytes)
            {
                self.indexes.insert(tag.clone(), index.manifests);
            }
            let image = m.map(|m| TagImage::of(&m.bytes));
            self.images.insert(tag.clone(), image);
        }
    }

    /// What the index under the referrers tag `tag` listed when
    /// [`RepoCache::read_all`] read it, if it did.
    pub fn referrers_index(&self, tag: &str) -> Option<&[Descriptor]> {
        self.indexes.get(tag).map(Vec::as_slice)
    }

    fn read(&mut self, client: &Client, tag: &str) -> Result<Option<TagImage>> {
        let image = client.get_manifest(tag)?.map(|m| TagImage::of(&m.bytes));
        self.images.insert(tag.to_string(), image.clone());
        Ok(image)
    }

    /// Records that `tag` names `image` (this run read or put it).
    pub fn remember(&mut self, tag: &str, image: Option<TagImage>) {
        self.images.insert(tag.to_string(), image);
    }

    /// The revision of the image with manifest `digest`, if this run has
    /// read or written a tag naming it.
    pub fn revision_of_digest(&self, digest: &str) -> Option<Option<String>> {
        self.images
            .values()
            .flatten()
            .find(|n| n.digest == digest)
            .map(|n| n.revision.clone())
    }
}
