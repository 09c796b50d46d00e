//! The plain-text renderings of what a run did: one function per value
//! the core returns. The command line prints them (`--json` prints the
//! values themselves) and the action writes them into its log's group;
//! both faces use this module, so neither reaches into the other.

use crate::pipeline::RunReport;
use crate::report::Report;

/// A report as lines: what was built and where it went.
pub(crate) fn report(r: &Report) -> String {
    let files = if r.files == 1 { "file" } else { "files" };
    let mut s = format!(
        "{} {files}, {} bytes\ndigest {}\nlayer  {} ({} bytes)\n",
        r.files, r.size, r.digest, r.layer.digest, r.layer.size
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
        s.push_str(&format!("anomaly {}: {}\n", a.kind.as_str(), a.message));
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
