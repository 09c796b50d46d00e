//! The one report every front end prints, as values: the CLI's `--json`
//! and human summary (`crate::show`) and the action's outputs are made
//! from it.

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
#[derive(Debug, Clone, PartialEq, Eq)]
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
    pub output: Option<String>,
    /// Blobs written that were not there before.
    pub new_blobs: usize,
    /// The full id of the commit the image was built from, inside git.
    pub commit: Option<String>,
    /// That commit's committer time in unix seconds.
    pub timestamp: Option<i64>,
    /// The timestamp tag added by `--timestamp-tag`.
    pub timestamp_tag: Option<String>,
    /// Something Flux's numerical policy gets wrong about this push
    /// (`push` with a timestamp tag only; absent when normal).
    pub anomaly: Option<crate::release::ordering::Anomaly>,
    /// What `--branch-tag` did.
    pub branch_tag: Option<BranchTag>,
    /// What a registry push did (`push` only).
    pub push: Option<PushReport>,
    /// Things the user should know that did not stop the run (the worktree
    /// differs from the commit, no provenance attached, ...). Each face
    /// words them (`crate::show::notice`): the CLI prints them on stderr,
    /// the action turns them into `::warning` annotations.
    pub warnings: Vec<crate::notice::Notice>,
}
