//! The request both front ends (CLI and action) build, and the one pipeline
//! that carries it out: source -> image -> publisher -> report.

use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::image::{self, Metadata};
use crate::publish::layout;
use crate::report::{LayerReport, Report};
use crate::source::worktree;
use crate::tag;

/// Where the image goes.
#[derive(Debug, Clone)]
pub enum Target {
    /// An OCI image layout directory.
    Layout(PathBuf),
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
}

impl Request {
    /// Checks everything that can be checked before any I/O.
    pub fn validate(&self) -> Result<()> {
        for t in &self.tags {
            tag::validate(t)?;
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
    let source = worktree::read(&req.path)?;
    let meta = Metadata::default();
    let img = image::build(&source, &meta)?;
    let (output, new_blobs) = match &req.target {
        Target::Layout(dir) => {
            let w = layout::write(dir, &img, &req.tags)?;
            (Some(dir.display().to_string()), w.new_blobs)
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
        tags: req.tags.clone(),
        output,
        new_blobs,
    })
}
