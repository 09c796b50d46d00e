//! The two sides of a diff: an image read back from a registry (its
//! manifest, then its one layer streamed to a temporary file), a folder
//! built as `build` builds it (nothing pushed), or nothing (a channel with
//! no release yet).

use std::collections::BTreeMap;
use std::path::Path;

use super::layer::{self, Bounds, Tree};
use super::text::size;
use super::{Limits, Side};
use crate::error::{Error, Result};
use crate::history::{self, Checkout, SourceMode, github};
use crate::image::artifact::ManifestView;
use crate::image::{ANNOTATION_CREATED, ANNOTATION_REVISION};
use crate::registry::Client;

/// The layer media types read: OCI's and docker's gzip-compressed tar.
const LAYER_TYPES: [&str; 2] = [
    crate::image::LAYER_MEDIA_TYPE,
    "application/vnd.docker.image.rootfs.diff.tar.gzip",
];

/// A compressed layer on disk, mapped into memory: the operating system
/// pages it in as the gzip reader walks it, so a large layer takes no
/// more memory than a small one.
struct Mapped {
    map: memmap2::Mmap,
    /// Keeps the file (and its lock and signal cleanup) alive.
    _file: tempfile::NamedTempFile,
    _scratch: crate::scratch::Registered,
}

/// Where a side's layer is.
enum Blob {
    /// No layer: an empty side.
    None,
    /// A layer in memory (a test's).
    #[cfg(test)]
    Bytes(Vec<u8>),
    /// A layer in a temporary file of ours.
    Mapped(Mapped),
}

/// One side of a diff: what it is, and its layer.
pub struct Image {
    /// What it is, as the diff shows it.
    pub side: Side,
    blob: Blob,
    /// Things to know that do not stop the diff (a worktree that differs
    /// from its commit, for a folder).
    pub warnings: Vec<crate::notice::Notice>,
}

impl std::fmt::Debug for Image {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Image")
            .field("side", &self.side)
            .finish_non_exhaustive()
    }
}

/// Maps the temporary file `file`, ours and locked: nobody else writes it.
fn mapped(file: tempfile::NamedTempFile, scratch: crate::scratch::Registered) -> Result<Mapped> {
    // SAFETY: the file is a temporary file this process created and holds
    // an exclusive lock on (`scratch::layer_file`); it is not written or
    // truncated while the map lives (the map is dropped with it).
    let map = unsafe { memmap2::Mmap::map(file.as_file()) }
        .map_err(|e| Error::io("mapping the layer file", e))?;
    Ok(Mapped {
        map,
        _file: file,
        _scratch: scratch,
    })
}

impl Image {
    /// An empty side named `name`: every file of the other side is added
    /// (or removed).
    pub fn empty(name: impl Into<String>) -> Image {
        Image {
            side: Side {
                name: name.into(),
                ..Side::default()
            },
            blob: Blob::None,
            warnings: Vec::new(),
        }
    }

    /// A side whose layer is `gz` in memory.
    #[cfg(test)]
    pub fn from_layer(side: Side, gz: Vec<u8>) -> Image {
        Image {
            side,
            blob: Blob::Bytes(gz),
            warnings: Vec::new(),
        }
    }

    fn bytes(&self) -> Option<&[u8]> {
        match &self.blob {
            Blob::None => None,
            #[cfg(test)]
            Blob::Bytes(b) => Some(b),
            Blob::Mapped(m) => Some(&m.map),
        }
    }

    fn unreadable(&self, why: String) -> Error {
        Error::Registry {
            reference: self.side.name.clone(),
            what: "reading the layer back".into(),
            message: format!("the layer is not one settings-image can read: {why}"),
            hint: Some(
                "a settings image's layer is a gzip-compressed tar of its files; `skopeo inspect` shows what this one is"
                    .into(),
            ),
        }
    }

    /// The layer's entries, at most `limits`.
    pub(super) fn tree(&self, limits: &Limits) -> Result<Tree> {
        let Some(gz) = self.bytes() else {
            return Ok(Tree::default());
        };
        layer::read_tree(gz, bounds(limits)).map_err(|why| self.unreadable(why))
    }

    /// The contents of the files of `wanted` (path: most bytes kept).
    pub(super) fn contents(
        &self,
        limits: &Limits,
        wanted: &BTreeMap<String, u64>,
    ) -> Result<BTreeMap<String, Vec<u8>>> {
        let Some(gz) = self.bytes() else {
            return Ok(BTreeMap::new());
        };
        layer::read_contents(gz, bounds(limits), wanted).map_err(|why| self.unreadable(why))
    }

    /// Reads the image `reference` (a tag or a `sha256:` digest) through
    /// `client`; `name` is how the diff shows it. Its one layer is
    /// streamed to a temporary file, at most [`Limits::layer_bytes`].
    pub fn from_registry(
        client: &Client,
        reference: &str,
        name: String,
        limits: &Limits,
    ) -> Result<Image> {
        let not_a_settings_image = |why: String| {
            Error::input(
                format!("{name} is not a settings image: {why}"),
                Some(
                    "compare images that settings-image built (one gzip-compressed tar layer)"
                        .to_string(),
                ),
            )
        };
        let m = client
            .get_manifest(reference)?
            .ok_or_else(|| Error::Registry {
                reference: name.clone(),
                what: format!("reading {reference}"),
                message: "no such tag or digest".into(),
                hint: Some("check the reference; list the tags with `skopeo list-tags`".into()),
            })?;
        if m.media_type != crate::image::MANIFEST_MEDIA_TYPE
            && m.media_type != "application/vnd.docker.distribution.manifest.v2+json"
        {
            return Err(not_a_settings_image(format!(
                "its manifest is {}, not an image manifest",
                m.media_type
            )));
        }
        let view = ManifestView::parse(&m.bytes)?;
        let [layer] = view.layers.as_slice() else {
            return Err(not_a_settings_image(format!(
                "it has {} layers; a settings image has one",
                view.layers.len()
            )));
        };
        if !LAYER_TYPES.contains(&layer.media_type.as_str()) {
            return Err(not_a_settings_image(format!(
                "its layer is {}, not a gzip-compressed tar",
                layer.media_type
            )));
        }
        let side = Side {
            name,
            digest: Some(m.digest.clone()),
            revision: view.annotations.get(ANNOTATION_REVISION).cloned(),
            created: view.annotations.get(ANNOTATION_CREATED).cloned(),
            files: 0,
        };
        Image::from_registry_layer(client, (&layer.digest, layer.size), side, limits)
    }

    /// The side `side` whose layer is the blob `(digest, size)` of
    /// `client`'s repository, streamed to a temporary file, at most
    /// [`Limits::layer_bytes`].
    pub fn from_registry_layer(
        client: &Client,
        (digest, bytes): (&str, u64),
        side: Side,
        limits: &Limits,
    ) -> Result<Image> {
        if bytes > limits.layer_bytes {
            return Err(Error::input(
                format!(
                    "{}'s layer is {}, more than the {} a diff reads",
                    side.name,
                    size(bytes),
                    size(limits.layer_bytes)
                ),
                Some(
                    "compare smaller images, or their files with skopeo and a diff tool"
                        .to_string(),
                ),
            ));
        }
        let (mut file, scratch) = crate::scratch::layer_file()?;
        client.get_blob_into(digest, bytes, file.as_file_mut())?;
        Ok(Image {
            side,
            blob: Blob::Mapped(mapped(file, scratch)?),
            warnings: Vec::new(),
        })
    }

    /// Builds the folder `path` as `build` does (the commit's folder, or
    /// the disk's with [`SourceMode::Worktree`] or outside git; history
    /// from `revision` when given; `github` answers for a shallow clone),
    /// pushing nothing.
    pub fn from_folder(
        path: &Path,
        revision: Option<&str>,
        mode: SourceMode,
        github: Option<github::Api>,
    ) -> Result<Image> {
        let checkout = Checkout::open(path, github);
        let reading = history::Reading {
            mode,
            need_commit: false,
            revision,
            source_url: &history::SourceUrl::Origin,
            several: false,
        };
        let (_, prepared) = history::prepare(vec![(path, checkout)], &reading)
            .pop()
            .unwrap_or_else(|| Err(Error::history(path, "was not read", None)))?;
        let img = crate::image::build(&prepared.source, &prepared.metadata())?;
        let commit = prepared.commit.as_ref();
        let name = match commit {
            Some(_) if mode == SourceMode::Worktree => format!("folder {} on disk", path.display()),
            _ => format!("folder {}", path.display()),
        };
        let layer = img.layer;
        Ok(Image {
            side: Side {
                name,
                digest: Some(img.digest),
                revision: commit.map(|c| c.id.clone()),
                created: commit.map(|c| c.committed_at()),
                files: img.files,
            },
            blob: Blob::Mapped(mapped(layer.file, layer.scratch)?),
            warnings: prepared.warnings,
        })
    }
}

fn bounds(limits: &Limits) -> Bounds {
    Bounds {
        inflated: limits.inflated,
        entries: limits.entries,
    }
}
