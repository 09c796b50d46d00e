//! Artifact manifests that refer to another manifest (OCI 1.1 `subject`),
//! and the image index that lists them. Pure: bytes in, bytes out.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Descriptor, INDEX_MEDIA_TYPE, MANIFEST_MEDIA_TYPE};
use crate::error::{Error, Result};

/// Media type of the OCI empty descriptor's content (`{}`).
pub const EMPTY_MEDIA_TYPE: &str = "application/vnd.oci.empty.v1+json";
/// The annotation of a layer descriptor that names its file.
pub const ANNOTATION_TITLE: &str = "org.opencontainers.image.title";
/// The content of the OCI empty descriptor.
pub const EMPTY_JSON: &[u8] = b"{}";

/// An artifact to attach to a subject manifest: its type, layers and
/// manifest annotations. The config is always the OCI empty descriptor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    /// The manifest's `artifactType`, e.g. `application/vnd.in-toto+json`.
    pub artifact_type: String,
    /// The layers, as media type and exact bytes, in order.
    pub layers: Vec<(String, Vec<u8>)>,
    /// Annotations of the artifact manifest (listed in referrers too).
    pub annotations: BTreeMap<String, String>,
    /// The file name of the first layer (`org.opencontainers.image.title`
    /// on its descriptor): what `oras pull` saves it as; without one,
    /// `oras pull` skips the layer.
    pub title: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ArtifactManifestJson<'a> {
    schema_version: u32,
    media_type: &'a str,
    artifact_type: &'a str,
    config: &'a Descriptor,
    layers: &'a [Descriptor],
    subject: &'a Descriptor,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    annotations: &'a BTreeMap<String, String>,
}

/// A manifest as far as referrers need it: its `subject`, `artifactType`,
/// `config`, `layers` and `annotations`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManifestView {
    /// `artifactType`, when set.
    #[serde(default)]
    pub artifact_type: Option<String>,
    /// The config descriptor.
    #[serde(default)]
    pub config: Option<Descriptor>,
    /// The layer descriptors.
    #[serde(default)]
    pub layers: Vec<Descriptor>,
    /// Manifest annotations.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

impl ManifestView {
    /// Parses manifest bytes.
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        serde_json::from_slice(bytes).map_err(|e| Error::json("reading a manifest", e))
    }

    /// The artifact type as the referrers API reports it: `artifactType`,
    /// else the config's media type.
    pub fn effective_artifact_type(&self) -> Option<String> {
        self.artifact_type
            .clone()
            .or_else(|| self.config.as_ref().map(|c| c.media_type.clone()))
    }
}

/// An OCI image index (`manifests` plus annotations).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Index {
    /// Always 2.
    pub schema_version: u32,
    /// `application/vnd.oci.image.index.v1+json`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// The listed manifests.
    #[serde(default)]
    pub manifests: Vec<Descriptor>,
    /// Index annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl Index {
    /// An empty index with the OCI media type.
    pub fn empty() -> Self {
        Index {
            schema_version: 2,
            media_type: Some(INDEX_MEDIA_TYPE.to_string()),
            manifests: Vec::new(),
            annotations: BTreeMap::new(),
        }
    }

    /// Parses index bytes.
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        serde_json::from_slice(bytes).map_err(|e| Error::json("reading an image index", e))
    }

    /// The exact bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        super::to_json(self)
    }
}

/// The empty descriptor (`application/vnd.oci.empty.v1+json`, `{}`).
pub fn empty_descriptor() -> Descriptor {
    Descriptor::of(EMPTY_MEDIA_TYPE, EMPTY_JSON)
}

/// Builds the manifest bytes of `artifact` referring to `subject`, and the
/// descriptor that lists it as a referrer (with `artifactType` and the
/// manifest's annotations).
pub fn manifest(subject: &Descriptor, artifact: &Artifact) -> Result<(Vec<u8>, Descriptor)> {
    let mut layers: Vec<Descriptor> = artifact
        .layers
        .iter()
        .map(|(mt, bytes)| Descriptor::of(mt, bytes))
        .collect();
    if let (Some(first), Some(title)) = (layers.first_mut(), &artifact.title) {
        first
            .annotations
            .insert(ANNOTATION_TITLE.to_string(), title.clone());
    }
    let subject = Descriptor {
        media_type: subject.media_type.clone(),
        digest: subject.digest.clone(),
        size: subject.size,
        artifact_type: None,
        annotations: BTreeMap::new(),
    };
    let bytes = super::to_json(&ArtifactManifestJson {
        schema_version: 2,
        media_type: MANIFEST_MEDIA_TYPE,
        artifact_type: &artifact.artifact_type,
        config: &empty_descriptor(),
        layers: &layers,
        subject: &subject,
        annotations: &artifact.annotations,
    })?;
    let mut desc = Descriptor::of(MANIFEST_MEDIA_TYPE, &bytes);
    desc.artifact_type = Some(artifact.artifact_type.clone());
    desc.annotations = artifact.annotations.clone();
    Ok((bytes, desc))
}

/// The referrers tag schema's tag for `digest`: `sha256:<hex>` becomes
/// `sha256-<hex>` (truncated to the 128 characters a tag may have).
pub fn referrers_tag(digest: &str) -> String {
    let t = digest.replacen(':', "-", 1);
    t.chars().take(128).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_has_subject_and_empty_config() {
        let subject = Descriptor::of(MANIFEST_MEDIA_TYPE, b"x");
        let art = Artifact {
            artifact_type: "application/vnd.in-toto+json".into(),
            layers: vec![("application/vnd.in-toto+json".into(), b"{}".to_vec())],
            annotations: BTreeMap::from([("a".to_string(), "b".to_string())]),
            title: Some("s.json".into()),
        };
        let (bytes, desc) = manifest(&subject, &art).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(v["subject"]["digest"], subject.digest.as_str());
        assert_eq!(v["config"]["mediaType"], EMPTY_MEDIA_TYPE);
        assert_eq!(
            v["config"]["digest"],
            "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
        assert_eq!(v["artifactType"], "application/vnd.in-toto+json");
        assert_eq!(v["layers"][0]["annotations"][ANNOTATION_TITLE], "s.json");
        assert_eq!(
            desc.artifact_type.as_deref(),
            Some(art.artifact_type.as_str())
        );
        assert_eq!(desc.annotations["a"], "b");
        assert_eq!(desc.digest, crate::image::sha256_digest(&bytes));
        assert_eq!(
            referrers_tag(&subject.digest),
            subject.digest.replace(':', "-")
        );
    }
}
