//! One publish, as the reconciler hands it to the blocking pool: the
//! GitRepository's URL and credentials, the commit source-controller
//! fetched, and the SettingsImage's folder and registry. It goes through
//! the same request pipeline as `settings-image push --revision COMMIT`
//! (`crate::request`, `crate::many`) over the mirror `crate::history`
//! keeps of the URL, so the image, tag and digest are the ones a push from
//! a clone makes.

use std::path::PathBuf;

use super::source::GitAuth;
use crate::error::Result;
use crate::registry;
use crate::report::Report;

/// Everything one publish needs, owned (it moves to a blocking thread).
#[derive(Debug, Clone)]
pub struct Job {
    /// The GitRepository's `spec.url`.
    pub url: String,
    /// Its credentials.
    pub auth: Option<GitAuth>,
    /// The reference source-controller fetched (`main`), to fetch too.
    pub reference: Option<String>,
    /// The commit to publish.
    pub commit: String,
    /// The folder or glob, repository-relative.
    pub path: String,
    /// The timestamp tag prefix.
    pub prefix: String,
    /// The branch tag, if any.
    pub branch_tag: Option<String>,
    /// Attach provenance.
    pub provenance: bool,
    /// The registry (its `repository` may be a `{name}`/`{path}` template).
    pub registry: registry::Options,
    /// The mirrors' cache root.
    pub cache_dir: PathBuf,
    /// The provenance's builder facts.
    pub ci: crate::provenance::Ci,
}

/// One folder's result.
#[derive(Debug, Clone)]
pub struct Published {
    /// The folder, repository-relative.
    pub path: String,
    /// `HOST/NAME`.
    pub repository: String,
    /// What the pipeline did.
    pub report: Report,
}

/// Fetches the commit into the mirror and publishes the folder(s) from it.
/// Blocking: call it from `spawn_blocking`.
pub fn run(job: &Job) -> Result<Vec<Published>> {
    Err(crate::Error::input(
        format!(
            "publishing {} at {} from a mirror of {} is not wired yet",
            job.path, job.commit, job.url
        ),
        None,
    ))
}
