//! The plain-text renderings of what a run did: one function per value
//! the core returns. The command line prints them (`--json` prints the
//! values themselves) and the action writes them into its log's group;
//! both faces use this module, so neither reaches into the other. The
//! core's values are worded here, not in the core: notices
//! ([`notice`]), anomalies ([`anomaly`]) and the summaries of the other
//! commands.

pub(crate) mod anomaly;
pub(crate) mod diff;
pub(crate) mod inspect;
pub(crate) mod notice;
pub(crate) mod promote;
pub(crate) mod rollout;
pub(crate) mod verify;

use serde::Serialize;

use crate::branch_tag::BranchTag;
use crate::error::PublishedSoFar;
use crate::field::Face;
use crate::pipeline::{FolderReport, RunReport};
use crate::publish::PushReport;
use crate::report::{LayerReport, Report};

pub(crate) use anomaly::AnomalyLine;
pub(crate) use notice::notice;

/// `n` files: `1 file`, `2 files`.
pub(crate) fn files(n: usize) -> String {
    if n == 1 {
        "1 file".to_string()
    } else {
        format!("{n} files")
    }
}

/// A report as lines: what was built and where it went.
pub(crate) fn report(r: &Report) -> String {
    let mut s = format!(
        "{}, {} bytes\ndigest {}\nlayer  {} ({} bytes)\n",
        files(r.files),
        r.size,
        r.digest,
        r.layer.digest,
        r.layer.size
    );
    if let Some(commit) = &r.commit {
        s.push_str(&format!("commit {commit}\n"));
    }
    if let Some(out) = &r.output {
        let tags = if r.tags.is_empty() {
            "(untagged)".to_string()
        } else {
            r.tags.join(", ")
        };
        s.push_str(&format!(
            "wrote  {out} (OCI layout), tags: {tags}, new blobs: {}\n",
            r.new_blobs
        ));
    }
    if let Some(p) = &r.push {
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
    if let Some(a) = &r.anomaly {
        s.push_str(&format!(
            "anomaly {}: {}\n",
            a.kind.as_str(),
            anomaly::message(a, &crate::field::Cli)
        ));
    }
    if let Some(b) = &r.branch_tag {
        s.push_str(&format!(
            "branch tag {}: {}{}{}\n",
            b.name,
            b.outcome(),
            b.recorded
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

/// One line per folder of a run.
pub(crate) fn folders(run: &RunReport) -> String {
    let mut s = String::new();
    for f in &run.folders {
        let what = match &f.result {
            Err(e) => format!("FAILED: {e}"),
            Ok(r) => match &r.push {
                Some(p) if p.pushed => format!("pushed {}", p.reference),
                Some(p) => format!("up to date {}", p.reference),
                None => format!("wrote {} {}", f.repository, r.digest),
            },
        };
        s.push_str(&format!("{}: {what}\n", f.path));
    }
    s
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
    pub anomaly: Option<AnomalyLine>,
    /// Why this folder failed (the others still ran).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The several-folder line (the CLI's and the action's `--json` and
/// `images`).
impl ImageLine {
    /// The line of `folder`, its error rendered by `face`. A folder that
    /// failed after it published says what is there.
    pub fn of(folder: &FolderReport, face: &dyn Face) -> ImageLine {
        let (path, repository) = (folder.path.clone(), folder.repository.clone());
        match &folder.result {
            Ok(report) => ImageLine {
                path,
                repository,
                tag: report
                    .timestamp_tag
                    .clone()
                    .or_else(|| report.tags.first().cloned()),
                digest: Some(report.digest.clone()),
                reference: report.push.as_ref().map(|p| p.reference.clone()),
                pushed: report.push.as_ref().map(|p| p.pushed),
                anomaly: report.anomaly.as_ref().map(|a| AnomalyLine::of(a, face)),
                error: None,
            },
            Err(e) => {
                let published = match e {
                    crate::Error::AfterPublish { published, .. } => Some(published),
                    _ => None,
                };
                ImageLine {
                    path,
                    repository,
                    tag: published.and_then(|p| p.tags.first().cloned()),
                    digest: published.map(|p| p.digest.clone()),
                    reference: published.map(|p| p.reference.clone()),
                    pushed: published.map(|p| p.pushed),
                    anomaly: None,
                    error: Some(e.render(face)),
                }
            }
        }
    }
}

/// A report as the CLI's `--json` prints it: the report's values, its
/// anomaly and warnings in words.
#[derive(Debug, Serialize)]
pub(crate) struct ReportJson<'a> {
    digest: &'a str,
    config_digest: &'a str,
    layer: &'a LayerReport,
    files: usize,
    size: u64,
    tags: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<&'a str>,
    new_blobs: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    commit: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timestamp: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timestamp_tag: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    anomaly: Option<AnomalyLine>,
    #[serde(skip_serializing_if = "Option::is_none")]
    branch_tag: Option<&'a BranchTag>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    push: Option<&'a PushReport>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<String>,
}

impl<'a> ReportJson<'a> {
    /// `r` with its anomaly and warnings in `face`'s words.
    pub(crate) fn of(r: &'a Report, face: &dyn Face) -> ReportJson<'a> {
        ReportJson {
            digest: &r.digest,
            config_digest: &r.config_digest,
            layer: &r.layer,
            files: r.files,
            size: r.size,
            tags: &r.tags,
            output: r.output.as_deref(),
            new_blobs: r.new_blobs,
            commit: r.commit.as_deref(),
            timestamp: r.timestamp,
            timestamp_tag: r.timestamp_tag.as_deref(),
            anomaly: r.anomaly.as_ref().map(|a| AnomalyLine::of(a, face)),
            branch_tag: r.branch_tag.as_ref(),
            push: r.push.as_ref(),
            warnings: r.warnings.iter().map(|w| notice(w).render(face)).collect(),
        }
    }
}

/// What a push had published when it failed, as the CLI's `--json`
/// prints it: its warnings in words.
#[derive(Debug, Serialize)]
pub(crate) struct PublishedJson<'a> {
    reference: &'a str,
    digest: &'a str,
    tags: &'a [String],
    pushed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    branch_tag: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    provenance: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<String>,
}

impl<'a> PublishedJson<'a> {
    /// `p` with its warnings in `face`'s words.
    pub(crate) fn of(p: &'a PublishedSoFar, face: &dyn Face) -> PublishedJson<'a> {
        PublishedJson {
            reference: &p.reference,
            digest: &p.digest,
            tags: &p.tags,
            pushed: p.pushed,
            branch_tag: p.branch_tag.as_deref(),
            provenance: p.provenance.as_deref(),
            warnings: p.warnings.iter().map(|w| notice(w).render(face)).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::Cli;
    use crate::notice::{Notice, Unattested};

    /// `--json` of a push keeps main's keys, their order and the warnings'
    /// words (the JSON written out by hand from what main printed).
    #[test]
    fn the_report_json_is_main_s() {
        let r = Report {
            digest: "sha256:d".into(),
            config_digest: "sha256:c".into(),
            layer: LayerReport {
                digest: "sha256:l".into(),
                diff_id: "sha256:u".into(),
                size: 10,
                uncompressed_size: 20,
            },
            files: 1,
            size: 5,
            tags: vec!["v1".into()],
            output: None,
            new_blobs: 2,
            commit: Some("abc".into()),
            timestamp: Some(1700000000),
            timestamp_tag: None,
            anomaly: None,
            branch_tag: None,
            push: Some(PushReport {
                reference: "r/s:v1@sha256:d".into(),
                uploaded_blobs: 2,
                uploaded_bytes: 30,
                pushed: true,
                provenance: None,
            }),
            warnings: vec![Notice::NoProvenance(Unattested::Worktree)],
        };
        assert_eq!(
            serde_json::to_string(&ReportJson::of(&r, &Cli)).unwrap(),
            "{\"digest\":\"sha256:d\",\"config_digest\":\"sha256:c\",\"layer\":{\"digest\":\"sha256:l\",\
             \"diff_id\":\"sha256:u\",\"size\":10,\"uncompressed_size\":20},\"files\":1,\"size\":5,\
             \"tags\":[\"v1\"],\"new_blobs\":2,\"commit\":\"abc\",\"timestamp\":1700000000,\
             \"reference\":\"r/s:v1@sha256:d\",\"uploaded_blobs\":2,\"uploaded_bytes\":30,\"pushed\":true,\
             \"warnings\":[\"no provenance attached: --source worktree packages the disk, which no commit \
             attests\"]}"
        );
    }

    #[test]
    fn one_file_many_files() {
        assert_eq!(files(0), "0 files");
        assert_eq!(files(1), "1 file");
        assert_eq!(files(2), "2 files");
    }
}
