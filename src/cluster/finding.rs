//! What a scan of a cluster repository records: an image-volume reference
//! to the repository ([`Found`]) and a mention it cannot verify
//! ([`Unverified`]). Shared by the file walk ([`super::scan`]) and the
//! walk through each YAML document ([`super::mentions`]).

use serde::Serialize;

/// One image-volume reference found in the cluster repository.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Found {
    /// The file, relative to the scanned folder.
    pub file: String,
    /// The 1-based line of the reference, when it can be told.
    pub line: Option<usize>,
    /// `Kind/name` (with `namespace/` when the object names one).
    pub object: String,
    /// The volume's name.
    pub volume: String,
    /// The reference as written.
    pub reference: String,
}

/// What the cluster may apply that the scan did not verify: a mention of
/// the repository outside an image-volume reference, a reference Flux
/// substitutes, a kustomize patch, image entry or field spec that can
/// rewrite a reference.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unverified {
    /// Where (`reference` holds the text in question).
    pub found: Found,
    /// Why it is not verified, and what to do.
    pub reason: String,
}

/// True when `reference` names an image in `repository` (`R:tag`, `R@sha256:...`).
pub fn in_repository(reference: &str, repository: &str) -> bool {
    reference
        .strip_prefix(repository)
        .is_some_and(|rest| rest.starts_with(':') || rest.starts_with('@'))
}
