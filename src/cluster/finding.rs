//! What a scan of a cluster repository records: an image-volume reference
//! to the repository ([`Found`]) and what it cannot verify
//! ([`Unverified`]). Shared by the reading of files and streams
//! ([`super::scan`]) and the walk through each YAML document
//! ([`super::mentions`]).

use serde::Serialize;

/// One image-volume reference found in the cluster repository.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Found {
    /// The file, relative to the scanned folder (`-` for standard input).
    pub file: String,
    /// The 1-based line of the reference, when it can be told.
    pub line: Option<usize>,
    /// `Kind/name` (with `namespace/` when the object names one).
    pub object: String,
    /// The volume's name.
    pub volume: String,
    /// The reference as written.
    pub reference: String,
    /// The reference in the repository's spelling as the user named it
    /// (`GHCR.IO:443/acme/shop:t` is verified as `ghcr.io/acme/shop:t`):
    /// what is verified, and the only host asked.
    #[serde(skip)]
    pub verify_as: String,
}

/// What the cluster may apply that the scan did not verify: a manifest it
/// cannot read, a folder or object the cluster renders again, a mention of
/// the repository outside an image-volume reference, a reference that a
/// substitution or template may turn into one of the repository.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unverified {
    /// Where (`reference` holds the text in question).
    pub found: Found,
    /// Why it is not verified, and what to do.
    pub reason: String,
}
