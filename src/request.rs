//! The request both front ends (CLI and action) build, and the one pipeline
//! that carries it out: source -> image -> publisher -> report.

use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::history::{self, SourceMode, Token};
use crate::image;
use crate::provenance;
use crate::publish::{layout, registry};
use crate::report::{LayerReport, PushReport, Report};
use crate::tag;

/// Where the image goes.
#[derive(Debug, Clone)]
pub enum Target {
    /// An OCI image layout directory.
    Layout(PathBuf),
    /// A registry repository.
    Registry(registry::Options),
}

/// Everything needed to build and publish one settings image.
#[derive(Debug, Clone)]
pub struct Request {
    /// The settings folder.
    pub path: PathBuf,
    /// Tags to write, in order.
    pub tags: Vec<String>,
    /// Where to write.
    pub target: Target,
    /// Inside git: package the commit's folder or the disk's.
    pub source: SourceMode,
    /// Adds the tag `<prefix>-<committer time>-<sha7>` of the commit that
    /// last changed the folder.
    pub timestamp_tag: Option<String>,
    /// Token for the GitHub API fallback on shallow clones.
    pub github_token: Option<Token>,
    /// After a registry push, attach SLSA provenance as a referrer (needs
    /// a commit: without one a warning says why there is none).
    pub provenance: bool,
}

impl Request {
    /// Checks everything that can be checked before any I/O.
    pub fn validate(&self) -> Result<()> {
        for t in &self.tags {
            tag::validate(t)?;
        }
        if let Some(prefix) = &self.timestamp_tag {
            tag::sanitize_prefix(prefix)?;
        }
        if let Target::Registry(opts) = &self.target {
            registry::parse_repository(&opts.repository)?;
        }
        if self.path.as_os_str().is_empty() {
            return Err(Error::input(
                "--path is empty",
                Some("name the settings folder".to_string()),
            ));
        }
        Ok(())
    }
}

/// Builds the image and publishes it as the request says.
pub fn run(req: &Request) -> Result<Report> {
    req.validate()?;
    let prepared = history::prepare(
        &req.path,
        req.source,
        req.timestamp_tag.is_some(),
        req.github_token.as_ref(),
    )?;
    for w in &prepared.warnings {
        eprintln!("warning: {w}");
    }
    let mut tags = req.tags.clone();
    let timestamp_tag = match (&req.timestamp_tag, &prepared.commit) {
        (Some(prefix), Some(c)) => {
            let t = tag::timestamp_tag(prefix, c.timestamp, &c.id)?;
            if !tags.contains(&t) {
                tags.push(t.clone());
            }
            Some(t)
        }
        _ => None,
    };
    // Packaged from disk, a layout inside the folder would go into the next build.
    if req.source == SourceMode::Worktree || prepared.commit.is_none() {
        match &req.target {
            Target::Layout(dir) => layout::check_outside(dir, &req.path)?,
            Target::Registry(_) => {}
        }
    }
    let img = image::build(&prepared.source, &prepared.metadata())?;
    let (output, new_blobs, push) = match &req.target {
        Target::Layout(dir) => {
            let w = layout::write(dir, &img, &tags)?;
            (Some(dir.display().to_string()), w.new_blobs, None)
        }
        Target::Registry(opts) => {
            let client = registry::Client::open(opts)?;
            let p = client.push(&img, &tags)?;
            let provenance = match (&prepared.commit, req.provenance) {
                (Some(commit), true) if req.source == SourceMode::Commit => {
                    let facts =
                        provenance::Facts::collect(&req.path, commit, prepared.source_url.clone())?;
                    Some(
                        provenance::attach(&client, &img, &facts)
                            .map_err(|e| provenance::after_push_error(e, &p.reference))?,
                    )
                }
                (_, true) => {
                    eprintln!(
                        "warning: no provenance attached: {}",
                        if prepared.commit.is_none() {
                            "the folder is not in a git commit"
                        } else {
                            "--source worktree packages the disk, which no commit attests"
                        }
                    );
                    None
                }
                (_, false) => None,
            };
            let report = PushReport {
                reference: p.reference,
                uploaded_blobs: p.uploaded_blobs,
                uploaded_bytes: p.uploaded_bytes,
                pushed: p.pushed,
                provenance,
            };
            (None, p.uploaded_blobs, Some(report))
        }
    };
    Ok(Report {
        digest: img.digest.clone(),
        config_digest: img.config_descriptor.digest.clone(),
        layer: LayerReport {
            digest: img.layer.digest.clone(),
            diff_id: img.layer.diff_id.clone(),
            size: img.layer.size,
            uncompressed_size: img.layer.uncompressed_size,
        },
        files: img.files,
        size: img.content_size,
        tags,
        output,
        new_blobs,
        commit: prepared.commit.as_ref().map(|c| c.id.clone()),
        timestamp: prepared.commit.as_ref().map(|c| c.timestamp),
        timestamp_tag,
        push,
    })
}
