//! The request every face (the CLI, the action, the controller) builds
//! for a folder, which the one pipeline ([`crate::pipeline`]) carries out.

use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::field::{Field, Mention};
use crate::history::mirror::Mirror;
use crate::history::{SourceMode, SourceUrl, github};
use crate::image;
use crate::notice::{MetadataKind, Notice};
use crate::provenance;
use crate::publish::Publisher;
use crate::publish::layout::LayoutDir;
use crate::publish::registry::RegistryRepo;
use crate::registry::Options;
use crate::tag;
use crate::text;

/// Where the image goes.
#[derive(Debug, Clone)]
pub enum Target {
    /// An OCI image layout directory.
    Layout(PathBuf),
    /// A registry repository.
    Registry(Options),
}

/// Everything needed to build and publish one settings image.
#[derive(Debug, Clone)]
pub struct Request {
    /// The settings folder.
    pub path: PathBuf,
    /// Tags to write, in order (the timestamp tag, when asked for, goes
    /// before them: the first tag is the one `reference` names).
    pub tags: Vec<String>,
    /// Where to write.
    pub target: Target,
    /// Inside git: package the commit's folder or the disk's.
    pub source: SourceMode,
    /// Adds the tag `<prefix>-<committer time>-<sha7>` of the commit that
    /// last changed the folder.
    pub timestamp_tag: Option<String>,
    /// The GitHub API that answers what a shallow clone cannot (the last
    /// change, ancestry), when the front end has a repository and a token.
    pub github: Option<github::Api>,
    /// Where the `source` annotation and the provenance's repository come
    /// from: given, left out, or the `origin` remote's.
    pub source_url: SourceUrl,
    /// What the CI run says about the build, for the provenance.
    pub ci: provenance::Ci,
    /// Forward-only options of a registry push.
    pub forward: Forward,
    /// After a registry push, attach SLSA provenance as a referrer (needs
    /// a commit: without one a warning says why there is none).
    pub provenance: bool,
    /// The commit to start history from instead of HEAD (a full commit id
    /// or a reference name), e.g. the head of a pull request: the timestamp
    /// tag names the last change reachable from it and, with
    /// [`SourceMode::Commit`], the content is the folder as it holds it.
    pub revision: Option<String>,
    /// Annotations (manifest) and labels (config) the caller adds, e.g.
    /// docker/metadata-action's. The history's own (`revision`, `created`,
    /// `source`) win, and `org.opencontainers.image.created` is never taken
    /// from the caller: it is a build clock, and a rebuild of the same
    /// commit must be byte-identical. Each value not taken is a warning.
    pub extra: image::Metadata,
}

/// Forward-only options of a registry push.
#[derive(Debug, Clone, Default)]
pub struct Forward {
    /// A moving tag (e.g. `main`) that follows the new image only when its
    /// commit descends from the one the tag's image records now.
    pub branch_tag: Option<String>,
    /// Move the branch tag even when history diverged (after a force-push).
    pub allow_rewind: bool,
    /// This run follows a force-push of the branch, which named this
    /// commit before it (GitHub's push event: `forced: true`, `before`).
    /// Tells a rewind from a re-run of an older job.
    pub forced_before: Option<String>,
}

impl Request {
    /// The folder `path` to `target`, every other field at its default:
    /// no tags, the commit's folder, no timestamp or branch tag, no GitHub
    /// API, the source URL from `origin`, no CI facts, no provenance, HEAD,
    /// no extra metadata. A face names what it sets:
    /// `Request { tags, ..Request::new(path, target) }`.
    pub fn new(path: impl Into<PathBuf>, target: Target) -> Request {
        Request {
            path: path.into(),
            tags: Vec::new(),
            target,
            source: SourceMode::Commit,
            timestamp_tag: None,
            github: None,
            source_url: SourceUrl::Origin,
            ci: provenance::Ci::default(),
            forward: Forward::default(),
            provenance: false,
            revision: None,
            extra: image::Metadata::default(),
        }
    }

    /// Checks everything that can be checked before any I/O.
    pub fn validate(&self) -> Result<()> {
        for t in &self.tags {
            tag::validate_writable(t).map_err(|e| e.about(Field::Tag))?;
        }
        if let Some(prefix) = &self.timestamp_tag {
            tag::sanitize_prefix(prefix).map_err(|e| e.about(Field::TimestampTag))?;
        }
        if let Target::Registry(opts) = &self.target {
            crate::registry::parse_repository(&opts.repository)
                .map_err(|e| e.about(Field::Repository))?;
        }
        if let Some(b) = &self.forward.branch_tag {
            tag::validate_writable(b).map_err(|e| e.about(Field::BranchTag))?;
            if tag::is_timestamp_tag(b) {
                return Err(Error::input_hinted(
                    text![Field::BranchTag, format!(" {b:?} is a timestamp tag")],
                    text![
                        "name the moving tag after the branch, e.g. ",
                        Mention::Set(Field::BranchTag, "main".into())
                    ],
                ));
            }
            if self.tags.contains(b) {
                return Err(Error::input_hinted(
                    text![
                        Field::BranchTag,
                        format!(" {b:?} is also given with "),
                        Field::Tag
                    ],
                    text![
                        "a tag either moves with the branch or never moves: drop it from ",
                        Field::Tag
                    ],
                ));
            }
            if !matches!(self.target, Target::Registry(_)) {
                return Err(Error::input_hinted(
                    text![
                        Field::BranchTag,
                        " moves a tag in a registry: it applies to push only"
                    ],
                    text!["push to a registry, or drop ", Field::BranchTag],
                ));
            }
            if self.timestamp_tag.is_none() {
                return Err(Error::input_hinted(
                    text![
                        Field::BranchTag,
                        format!(" {b:?} needs "),
                        Field::TimestampTag,
                        ": the branch tag moves only to a commit that descends from the one the timestamp tags record"
                    ],
                    text![
                        "add ",
                        Mention::Set(Field::TimestampTag, "BRANCH".into()),
                        " (e.g. ",
                        Mention::Set(Field::TimestampTag, "main".into()),
                        ")"
                    ],
                ));
            }
        }
        if let Some(before) = &self.forward.forced_before
            && !(matches!(before.len(), 40 | 64) && before.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            return Err(Error::input(
                text![
                    Field::ForcePushedFrom,
                    format!(" {before:?} is not a full commit id")
                ],
                Some(
                    "give the branch's previous head as 40 hex digits (the push event's `before`)"
                        .to_string(),
                ),
            ));
        }
        if self.forward.allow_rewind && self.forward.branch_tag.is_none() {
            return Err(Error::input_hinted(
                text![Field::AllowRewind, " only applies to ", Field::BranchTag],
                text![
                    "add ",
                    Mention::Set(Field::BranchTag, "NAME".into()),
                    ", or drop ",
                    Field::AllowRewind
                ],
            ));
        }
        if self.path.as_os_str().is_empty() {
            return Err(Error::input(
                text![Field::Path, " is empty"],
                Some("name the settings folder".to_string()),
            ));
        }
        Ok(())
    }
}

/// `ours` (from history) with the caller's `extra` added where it does
/// not override ours; every value left out is a warning. Also returns what
/// was added: the provenance records it, and `verify` rebuilds with it
/// through this same function.
pub fn merge_metadata(
    mut ours: image::Metadata,
    extra: &image::Metadata,
    warnings: &mut Vec<Notice>,
) -> (image::Metadata, image::Metadata) {
    let mut added = image::Metadata::default();
    for (what, theirs, mine, taken) in [
        (
            MetadataKind::Annotation,
            &extra.annotations,
            &mut ours.annotations,
            &mut added.annotations,
        ),
        (
            MetadataKind::Label,
            &extra.labels,
            &mut ours.labels,
            &mut added.labels,
        ),
    ] {
        for (k, v) in theirs {
            match mine.get(k) {
                Some(kept) if kept != v => warnings.push(Notice::MetadataKept {
                    kind: what,
                    key: k.clone(),
                    value: v.clone(),
                    kept: kept.clone(),
                }),
                Some(_) => {}
                None if k == image::ANNOTATION_CREATED => warnings.push(Notice::CreatedIgnored {
                    kind: what,
                    key: k.clone(),
                    value: v.clone(),
                }),
                None => {
                    mine.insert(k.clone(), v.clone());
                    taken.insert(k.clone(), v.clone());
                }
            }
        }
    }
    (ours, added)
}

/// `req` with what a mirror fills in: the revision (the branch's head),
/// the source URL and the provenance's ref; refused when the source mode
/// is not the commit or the mirror lacks the commit.
pub(crate) fn for_mirror(req: &Request, mirror: &Mirror) -> Result<Request> {
    if req.source != SourceMode::Commit {
        return Err(Error::input_hinted(
            text![
                "a mirror has no worktree: only ",
                Mention::Set(Field::Source, "commit".into()),
                " can be published from it"
            ],
            text![
                "publish the commit's folder: ",
                Mention::Set(Field::Source, "commit".into())
            ],
        ));
    }
    let mut req = req.clone();
    let revision = req
        .revision
        .get_or_insert_with(|| mirror.head().to_string())
        .to_ascii_lowercase();
    if !mirror.has_commit(&revision) {
        return Err(Error::history(
            &req.path,
            format!(
                "the commit {revision} is not in the mirror of {} (branch {})",
                mirror.url(),
                mirror.branch()
            ),
            Some("fetch it first: Mirrors::fetch with this commit".to_string()),
        ));
    }
    req.revision = Some(revision);
    if req.source_url == SourceUrl::Origin {
        req.source_url = mirror
            .source_url()
            .map_or(SourceUrl::Omitted, SourceUrl::Given);
    }
    if req.ci.git_ref.is_none() {
        req.ci.git_ref = Some(mirror.git_ref());
    }
    Ok(req)
}

impl Target {
    /// The place as a [`Publisher`]: the pipeline publishes through it
    /// without asking which it is.
    pub fn publisher(&self) -> Box<dyn Publisher + '_> {
        match self {
            Target::Layout(root) => Box::new(LayoutDir { root }),
            Target::Registry(options) => Box::new(RegistryRepo { options }),
        }
    }
}
