//! The one report every front end prints: `--json` serializes it, the human
//! summary formats it, and the action turns it into outputs.

use serde::Serialize;

use crate::branch_tag::BranchTag;
use crate::publish::PushReport;

/// The layer as the report shows it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct LayerReport {
    /// `sha256:` of the compressed layer.
    pub digest: String,
    /// `sha256:` of the uncompressed layer (the config's diff_id).
    pub diff_id: String,
    /// Compressed size in bytes.
    pub size: u64,
    /// Uncompressed tar size in bytes.
    pub uncompressed_size: u64,
}

/// What a build (and publish) did.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Report {
    /// The manifest digest.
    pub digest: String,
    /// The config digest.
    pub config_digest: String,
    /// The layer.
    pub layer: LayerReport,
    /// Number of regular files in the image.
    pub files: usize,
    /// Total bytes of the files' contents, uncompressed.
    pub size: u64,
    /// The tags the image was written under.
    pub tags: Vec<String>,
    /// The OCI layout directory written to, for `build`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// Blobs written that were not there before.
    pub new_blobs: usize,
    /// The full id of the commit the image was built from, inside git.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// That commit's committer time in unix seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<i64>,
    /// The timestamp tag added by `--timestamp-tag`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timestamp_tag: Option<String>,
    /// Something Flux's numerical policy gets wrong about this push
    /// (`push` with a timestamp tag only; absent when normal).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub anomaly: Option<crate::release::ordering::Anomaly>,
    /// What `--branch-tag` did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch_tag: Option<BranchTag>,
    /// What a registry push did (`push` only).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub push: Option<PushReport>,
    /// Things the user should know that did not stop the run (the worktree
    /// differs from the commit, no provenance attached, ...). The CLI prints
    /// them on stderr; the action turns them into `::warning` annotations.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// One folder's line in the several-folder outputs (the CLI's `--json`
/// array, the action's `images`), its error in the face's words.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ImageLine {
    /// The folder as selected.
    pub path: String,
    /// The repository pushed to (push) or the layout written (build).
    pub repository: String,
    /// The tag `reference` names: the timestamp tag when asked for, else
    /// the first tag.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// The manifest digest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// `HOST/NAME:TAG@sha256:...` after a push.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// Whether the push changed the registry (false: an unchanged folder).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pushed: Option<bool>,
    /// What Flux's numerical policy gets wrong about this push.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub anomaly: Option<crate::release::ordering::Anomaly>,
    /// Why this folder failed (the others still ran).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}
