//! The image model: one layer, one config, one manifest, all as exact
//! bytes. Pure: it knows nothing of registries or layouts. Publishers take
//! an [`Image`] and write it somewhere.

pub mod artifact;
pub mod gunzip;
pub mod gzip;
pub mod layer;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::error::{Error, Result};
use crate::source::Source;

/// Media type of the manifest we write.
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// Media type of the image config.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.image.config.v1+json";
/// Media type of the one layer.
pub const LAYER_MEDIA_TYPE: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
/// Media type of an image index (layout `index.json`, referrers).
pub const INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";

/// The architecture written into every config. Runtimes do not check it for
/// a plain (non-index) manifest, and the content is not executable, so one
/// fixed value keeps the digest the same whichever machine built it.
pub const ARCHITECTURE: &str = "amd64";
/// The OS written into every config.
pub const OS: &str = "linux";

/// Annotation: the commit the content comes from.
pub const ANNOTATION_REVISION: &str = "org.opencontainers.image.revision";
/// Annotation: the commit's committer time (RFC 3339).
pub const ANNOTATION_CREATED: &str = "org.opencontainers.image.created";
/// Annotation: the source repository URL.
pub const ANNOTATION_SOURCE: &str = "org.opencontainers.image.source";
/// Annotation: a tag's name in an OCI layout `index.json`.
pub const ANNOTATION_REF_NAME: &str = "org.opencontainers.image.ref.name";

/// An OCI content descriptor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// Media type of the referenced content.
    pub media_type: String,
    /// `sha256:<hex>` of the content.
    pub digest: String,
    /// Size of the content in bytes.
    pub size: u64,
    /// The artifact type, for artifact manifests listed as referrers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<String>,
    /// Annotations, sorted by key.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl Descriptor {
    /// A descriptor for `bytes` with no annotations.
    pub fn of(media_type: &str, bytes: &[u8]) -> Self {
        Descriptor {
            media_type: media_type.to_string(),
            digest: sha256_digest(bytes),
            size: bytes.len() as u64,
            artifact_type: None,
            annotations: BTreeMap::new(),
        }
    }
}

/// `sha256:<hex>` of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

#[derive(Serialize)]
struct ConfigJson<'a> {
    architecture: &'a str,
    os: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    config: Option<RuntimeConfig<'a>>,
    rootfs: RootFs<'a>,
}

#[derive(Serialize)]
struct RuntimeConfig<'a> {
    #[serde(rename = "Labels")]
    labels: &'a BTreeMap<String, String>,
}

#[derive(Serialize)]
struct RootFs<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    diff_ids: [&'a str; 1],
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ManifestJson<'a> {
    schema_version: u32,
    media_type: &'a str,
    config: &'a Descriptor,
    layers: [&'a Descriptor; 1],
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    annotations: &'a BTreeMap<String, String>,
}

/// What goes into the image besides the files.
#[derive(Debug, Clone, Default)]
pub struct Metadata {
    /// Manifest annotations (revision, created, source).
    pub annotations: BTreeMap<String, String>,
    /// Config labels (the source URL, for ghcr.io's repository link).
    pub labels: BTreeMap<String, String>,
}

/// A built image: exact manifest and config bytes, and the layer on disk.
#[derive(Debug)]
pub struct Image {
    /// The manifest bytes, exactly as they are pushed or written.
    pub manifest: Vec<u8>,
    /// `sha256:` of [`Image::manifest`].
    pub digest: String,
    /// The config bytes.
    pub config: Vec<u8>,
    /// The config's descriptor.
    pub config_descriptor: Descriptor,
    /// The layer's descriptor.
    pub layer_descriptor: Descriptor,
    /// The layer itself, with its diff_id.
    pub layer: layer::LayerBlob,
    /// Number of regular files in the layer.
    pub files: usize,
    /// Total bytes of the regular files.
    pub content_size: u64,
}

fn to_json<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    serde_json::to_vec(value).map_err(|e| Error::json("serializing JSON", e))
}

/// Builds the image for `source`: the layer first (streamed to disk), then
/// the config and the manifest as exact bytes.
pub fn build(source: &Source, meta: &Metadata) -> Result<Image> {
    let layer = layer::write(source)?;
    let layer_descriptor = Descriptor {
        media_type: LAYER_MEDIA_TYPE.into(),
        digest: layer.digest.clone(),
        size: layer.size,
        artifact_type: None,
        annotations: BTreeMap::new(),
    };
    let config = to_json(&ConfigJson {
        architecture: ARCHITECTURE,
        os: OS,
        config: (!meta.labels.is_empty()).then_some(RuntimeConfig {
            labels: &meta.labels,
        }),
        rootfs: RootFs {
            kind: "layers",
            diff_ids: [&layer.diff_id],
        },
    })?;
    let config_descriptor = Descriptor::of(CONFIG_MEDIA_TYPE, &config);
    let manifest = to_json(&ManifestJson {
        schema_version: 2,
        media_type: MANIFEST_MEDIA_TYPE,
        config: &config_descriptor,
        layers: [&layer_descriptor],
        annotations: &meta.annotations,
    })?;
    Ok(Image {
        digest: sha256_digest(&manifest),
        manifest,
        config,
        config_descriptor,
        layer_descriptor,
        layer,
        files: source.file_count(),
        content_size: source.content_size(),
    })
}

impl Image {
    /// The manifest's own descriptor (for `index.json` and tag listings).
    pub fn manifest_descriptor(&self) -> Descriptor {
        Descriptor::of(MANIFEST_MEDIA_TYPE, &self.manifest)
    }
}
