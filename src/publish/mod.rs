//! Where a built image goes: an OCI image layout on disk, or a registry.
//! Both are a [`Publisher`]: the pipeline (`crate::pipeline`) hands either
//! the same [`Publication`] and reads back one [`Published`], without
//! asking which it is. Each publisher owns its own idempotence: content
//! already present is not written again, and a timestamp tag never moves.
//!
//! - [`layout`]: the OCI image layout writer ([`layout::LayoutDir`]);
//! - [`registry`]: a push to a registry repository
//!   ([`registry::RegistryPush`], whose doc comment tells the push's order
//!   and how it meets a racing run);
//! - [`upload`]: the image's part of a push (tags asked, blobs, manifests);
//! - [`guards`]: what a registry push reads around it (the prefix's owner,
//!   the anomaly check, the guarded branch tag), deciding with
//!   [`crate::release::ordering`];
//! - [`cache`]: what one push has read from its repository.

pub mod cache;
pub mod guards;
pub mod layout;
pub mod registry;
pub mod upload;

use std::path::Path;

use serde::Serialize;

use crate::error::Result;
use crate::history::{Checkout, CommitInfo};
use crate::image::Image;
use crate::provenance;
use crate::release::ordering::{Anomaly, ForcedPush};

/// A place an image is published to: an OCI layout directory or a
/// registry repository.
pub trait Publisher {
    /// The place as a report names it: the layout directory, or the
    /// repository `HOST/NAME`.
    fn name(&self) -> String;

    /// Refuses, before the image is built, a place inside the settings
    /// folder `folder` (called when the folder is packaged from disk: the
    /// next build would package what this one writes).
    fn check_outside(&self, folder: &Path) -> Result<()>;

    /// Writes the image as `publication` says.
    fn publish(&self, publication: &Publication<'_>) -> Result<Published>;
}

/// The timestamp tag a publication carries, with the commit it names and
/// the checkout that orders commits: what turns on a registry push's
/// guards (the prefix's owner, the anomaly check, the branch tag).
#[derive(Debug, Clone, Copy)]
pub struct Stamp<'a> {
    /// The timestamp tag (`PREFIX-<committer time>-<sha7>`).
    pub tag: &'a str,
    /// The commit it names.
    pub commit: &'a CommitInfo,
    /// The checkout that holds the commit.
    pub checkout: &'a Checkout,
}

impl Stamp<'_> {
    /// The commit's committer time as the ordering compares it.
    pub fn time(&self) -> u64 {
        u64::try_from(self.commit.timestamp).unwrap_or(0)
    }
}

/// What to publish, and the forward-only rules around it. A layout takes
/// the image and its tags; a registry push all of it.
#[derive(Debug)]
pub struct Publication<'a> {
    /// The image.
    pub image: &'a Image,
    /// Its tags, the timestamp tag first when there is one.
    pub tags: &'a [String],
    /// The timestamp tag, when the image has one from a commit.
    pub stamp: Option<Stamp<'a>>,
    /// The guarded branch tag to move, if any.
    pub branch_tag: Option<&'a str>,
    /// Move the branch tag even when history diverged.
    pub allow_rewind: bool,
    /// This run follows a force-push of the branch (tells a rewind from a
    /// re-run of an older job).
    pub forced: Option<ForcedPush>,
    /// The git ref this run builds (`refs/heads/main`), when known: a
    /// prefix whose newest tag another ref published is refused.
    pub git_ref: Option<String>,
    /// Provenance after the push.
    pub provenance: Provenance,
}

/// Whether to attach provenance after the push.
#[derive(Debug)]
pub enum Provenance {
    /// Attach a statement of these facts.
    Attach(Box<provenance::Facts>),
    /// None was asked for.
    Off,
    /// It was asked for but cannot be given; the reason becomes a warning.
    Unattested(crate::notice::Unattested),
}

/// What publishing did, whichever the place.
#[derive(Debug)]
pub struct Published {
    /// The layout directory written to (a layout only).
    pub output: Option<String>,
    /// Blobs written that were not there before.
    pub new_blobs: usize,
    /// The push (a registry only).
    pub push: Option<PushReport>,
    /// What the anomaly check found before tagging.
    pub anomaly: Option<Anomaly>,
    /// What happened to the branch tag.
    pub branch: Option<crate::branch_tag::BranchTag>,
    /// What the user should know that did not stop the publish.
    pub warnings: Vec<crate::notice::Notice>,
}

/// The fields `push` adds to the report.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct PushReport {
    /// `HOST/NAME:FIRST_TAG@sha256:...`, the form Flux writes into a Deployment.
    pub reference: String,
    /// Blobs uploaded because the registry did not have them.
    pub uploaded_blobs: usize,
    /// Bytes of the uploaded blobs.
    pub uploaded_bytes: u64,
    /// True when the run changed anything in the registry: a blob, a
    /// manifest or tag put, or the branch tag created, moved or rewound;
    /// false when the registry already held it all.
    pub pushed: bool,
    /// The digest of the provenance referrer attached to the image (or
    /// found there from an earlier push of the same commit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provenance: Option<String>,
}
