//! One publish, as the reconciler hands it to the blocking pool: the
//! GitRepository's remote (URL and Secret, as `history::mirror` reads
//! Flux's keys), the commit source-controller fetched, and the
//! SettingsImage's folder and registry. It fetches the commit into the
//! mirror `crate::history` keeps of the URL and publishes through the same
//! pipeline as `settings-image push --revision COMMIT` in a clone
//! (`crate::pipeline::run` from the mirror, one folder or a glob), so the image, tag and
//! digest are the ones a push from a clone makes.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use crate::error::Result;
use crate::field::Field;
use crate::history::mirror::{Mirrors, Remote};
use crate::many::{LowerCased, Selection};
use crate::pipeline::{FolderImage, Spec};
use crate::registry;
use crate::request::{Forward, Request, Target};

/// Folders of one SettingsImage published at once (a glob's folders).
const JOBS: usize = 2;

/// Everything one publish needs, owned (it moves to a blocking thread).
#[derive(Debug, Clone)]
pub struct Job {
    /// The GitRepository's URL and credentials.
    pub remote: Remote,
    /// The branch source-controller follows.
    pub branch: String,
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
    /// The provenance's builder facts.
    pub ci: crate::provenance::Ci,
}

/// What one publish did: each folder's image, and the mapping's
/// lower-casing notices (a folder name with capitals), as `push` says them.
#[derive(Debug, Clone)]
pub struct PublishReport {
    /// Each folder's image.
    pub images: Vec<FolderImage>,
    /// The folders whose repository name was lower-cased.
    pub notices: Vec<LowerCased>,
}

/// Fetches the commit into the mirror and publishes the folder(s) from it;
/// the first folder's error when one fails (the others are published:
/// a retry of the whole is idempotent). `interrupt` abandons a download.
/// Blocking: call it from `spawn_blocking`.
pub fn run(job: &Job, mirrors: &Mirrors, interrupt: &AtomicBool) -> Result<PublishReport> {
    let mirror = mirrors.fetch(&job.remote, &job.branch, Some(&job.commit), interrupt)?;
    let base = Request {
        timestamp_tag: Some(job.prefix.clone()),
        ci: job.ci.clone(),
        forward: Forward {
            branch_tag: job.branch_tag.clone(),
            ..Forward::default()
        },
        provenance: job.provenance,
        revision: Some(job.commit.clone()),
        ..Request::new(PathBuf::new(), Target::Registry(job.registry.clone()))
    };
    let selection = Selection::in_mirror(&mirror, &job.commit, &[&job.path], Field::Path)?;
    let (repositories, notices) =
        selection.repositories(&job.registry.repository, Field::Repository)?;
    let targets = crate::many::registry_targets(&job.registry, repositories);
    let spec = Spec::new(base, &selection, targets, JOBS).in_mirror(&mirror);
    let images = crate::pipeline::run(&spec)?.published()?;
    Ok(PublishReport { images, notices })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::many::Folder;

    /// Each folder's repository from `spec.repository` (a `{name}`/`{path}`
    /// template for a glob) and the lower-casing notices: the one mapping
    /// ([`crate::many::repositories`]) that `push`, `plan`, the action and
    /// `flux --settings-image` use, so the controller writes where Flux looks.
    fn repositories(
        template: &str,
        folders: &[crate::many::Folder],
    ) -> Result<(Vec<String>, Vec<LowerCased>)> {
        crate::many::repositories(template, folders, Field::Repository)
    }

    /// A folder as `many::select_in` gives it, its `{path}` slug written
    /// out (lower case, `/` as `-`, underscores kept).
    fn folder(path: &str, slug: &str) -> Folder {
        let name = path.rsplit('/').next().unwrap_or(path).to_string();
        Folder {
            path: PathBuf::from(path),
            slug: slug.to_string(),
            name,
        }
    }

    /// The controller names the repositories push, plan, the action and
    /// `flux` name for every template and folder name: `{name}` is the
    /// folder's last component lower-cased (with a notice when it had
    /// capitals), `{path}` its path as a slug; two folders on one
    /// repository are refused, naming `spec.repository`.
    #[test]
    fn the_controller_maps_folders_as_push_and_flux_do() {
        let folders = [
            folder("configs/Cart", "configs-cart"),
            folder("configs/shop_eu", "configs-shop_eu"),
        ];
        let (repos, notices) = repositories("reg.example/acme/settings-{name}", &folders).unwrap();
        assert_eq!(
            repos,
            [
                "reg.example/acme/settings-cart",
                "reg.example/acme/settings-shop_eu"
            ]
        );
        let said: Vec<String> = notices.iter().map(|n| n.text().to_string()).collect();
        assert_eq!(
            said,
            [
                "the folder configs/Cart has capitals in its name; registries take lower-case names \
                 only, so its image goes to reg.example/acme/settings-cart"
            ]
        );
        let (repos, notices) = repositories("reg.example/acme/{path}", &folders).unwrap();
        assert_eq!(
            repos,
            [
                "reg.example/acme/configs-cart",
                "reg.example/acme/configs-shop_eu"
            ]
        );
        assert_eq!(notices, []);
        let err = repositories(
            "reg.example/acme/settings",
            &[folder("a/shop", "a-shop"), folder("b/shop", "b-shop")],
        )
        .unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert_eq!(
            err.render(&crate::controller::spec::Spec),
            "spec.repository \"reg.example/acme/settings\" maps the folders a/shop and b/shop to \
             the same reg.example/acme/settings"
        );
    }
}
