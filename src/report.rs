//! The one report every front end prints: `--json` serializes it, the human
//! summary formats it, and the action turns it into outputs.

use serde::Serialize;

use crate::publish::PushReport;
use crate::publish::guards::BranchReport;

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
    pub branch_tag: Option<BranchReport>,
    /// What a registry push did (`push` only).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub push: Option<PushReport>,
    /// Things the user should know that did not stop the run (the worktree
    /// differs from the commit, no provenance attached, ...). The CLI prints
    /// them on stderr; the action turns them into `::warning` annotations.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl Report {
    /// A short human summary.
    pub fn human(&self) -> String {
        let files = if self.files == 1 { "file" } else { "files" };
        let mut s = format!(
            "{} {files}, {} bytes\ndigest {}\nlayer  {} ({} bytes)\n",
            self.files, self.size, self.digest, self.layer.digest, self.layer.size
        );
        if let Some(commit) = &self.commit {
            s.push_str(&format!("commit {commit}\n"));
        }
        if let Some(out) = &self.output {
            let tags = if self.tags.is_empty() {
                "(untagged)".to_string()
            } else {
                self.tags.join(", ")
            };
            s.push_str(&format!(
                "wrote  {out} (OCI layout), tags: {tags}, new blobs: {}\n",
                self.new_blobs
            ));
        }
        if let Some(p) = &self.push {
            s.push_str(&format!(
                "{} {}, uploaded {} blobs ({} bytes)\n",
                if p.pushed { "pushed" } else { "up to date" },
                p.reference,
                p.uploaded_blobs,
                p.uploaded_bytes
            ));
            if let Some(d) = &p.provenance {
                s.push_str(&format!("provenance {d}\n"));
            }
        }
        if let Some(a) = &self.anomaly {
            s.push_str(&format!("anomaly {}: {}\n", a.kind.as_str(), a.message));
        }
        if let Some(b) = &self.branch_tag {
            s.push_str(&format!(
                "branch tag {}: {}{}{}\n",
                b.name,
                b.outcome.as_str(),
                b.commit
                    .as_deref()
                    .map(|c| format!(", commit {c}"))
                    .unwrap_or_default(),
                b.repaired_to
                    .as_deref()
                    .map(|t| format!(", moved on to {t} after a racing run"))
                    .unwrap_or_default()
            ));
        }
        s
    }
}
