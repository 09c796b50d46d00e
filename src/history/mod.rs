//! Git history: which commit last changed the settings folder, what that
//! commit holds, and where the repository lives. The only module that knows
//! git ([`git`], pure Rust through `gix`) and the GitHub REST API
//! ([`github`], the shallow-clone fallback).
//!
//! "Last changed" means exactly what `git log -1 -- DIR` answers from HEAD,
//! with git's default history simplification: a merge that is TREESAME to a
//! parent for DIR follows only the first such parent; a merge TREESAME to no
//! parent is the answer; any other commit is the answer when its DIR entry
//! differs from its parent's. Walking only through commits that are TREESAME
//! to the next one means the DIR tree at HEAD is the DIR tree at the answer:
//! the image content read from either is the same, which is why the GitHub
//! fallback (whose answer is not in a shallow clone) reads HEAD's tree.

pub(crate) mod blobs;
mod bloom;
pub mod git;
pub mod github;
pub mod mirror;
mod pack;
mod shallow;
mod walk;

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::field::{Field, Mention};
use crate::image::{ANNOTATION_CREATED, ANNOTATION_REVISION, ANNOTATION_SOURCE, Metadata};
use crate::source::{Source, worktree};
use shallow::{resolve, settle};

/// Where the image content comes from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum SourceMode {
    /// The folder exactly as the commit that last changed it holds it:
    /// tracked files only, modes from git.
    #[default]
    Commit,
    /// The folder as it is on disk, untracked and ignored files included.
    Worktree,
}

/// A GitHub token. Its `Debug` never shows the value, so it cannot leak
/// through a logged request.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// Wraps a token; an empty or blank string is no token.
    pub fn new(value: impl Into<String>) -> Option<Token> {
        let value = value.into();
        let value = value.trim();
        (!value.is_empty()).then(|| Token(value.to_string()))
    }

    /// The secret itself, for the Authorization header only.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(***)")
    }
}

/// One commit as the tag and the annotations need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitInfo {
    /// The full lowercase hex id.
    pub id: String,
    /// Committer time in unix seconds (`git log --format=%ct`).
    pub timestamp: i64,
}

impl CommitInfo {
    /// The committer time as RFC 3339 in UTC (`2024-01-02T03:04:05Z`).
    pub fn committed_at(&self) -> String {
        rfc3339(self.timestamp)
    }
}

/// The answer to "which commit last changed the folder".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastChange {
    /// The commit.
    pub commit: CommitInfo,
    /// The folder relative to the repository root, `/`-separated; `.` for
    /// the root itself.
    pub repo_path: String,
    /// True when the local history was shallow and the GitHub API answered.
    pub from_github: bool,
}

/// A git checkout opened once per run (isolated and trusted, as [`git`]
/// explains), with the GitHub API access built once: the history walk, the
/// ancestry checks and the provenance facts all ask it. Ancestry answers
/// are cached.
#[derive(Debug)]
pub struct Checkout {
    repo: git::Repo,
    api: Option<github::Api>,
    ancestry: RefCell<HashMap<(String, String), bool>>,
}

impl Checkout {
    /// Opens the repository holding `path`; `None` when there is none.
    /// `api` answers what a shallow clone cannot.
    pub fn open(path: &Path, api: Option<github::Api>) -> Result<Option<Checkout>> {
        Ok(git::Repo::discover(path)?.map(|repo| Checkout {
            repo,
            api,
            ancestry: RefCell::default(),
        }))
    }

    /// A checkout of `repo` as it is (e.g. a bare mirror's folder, see
    /// [`git::Repo::folder`]), with `api` for what its history cannot answer.
    pub fn from_repo(repo: git::Repo, api: Option<github::Api>) -> Checkout {
        Checkout {
            repo,
            api,
            ancestry: RefCell::default(),
        }
    }

    /// The same open repository for another folder in this worktree (see
    /// [`git::Repo::sibling`]), with the same GitHub API access; `None`
    /// when `path` is not in this worktree.
    pub fn sibling(&self, path: &Path) -> Result<Option<Checkout>> {
        Ok(self.repo.sibling(path)?.map(|repo| Checkout {
            repo,
            api: self.api.clone(),
            ancestry: RefCell::default(),
        }))
    }

    /// The repository.
    pub fn repo(&self) -> &git::Repo {
        &self.repo
    }

    /// The GitHub API access, when the front end gave one.
    pub fn api(&self) -> Option<&github::Api> {
        self.api.as_ref()
    }

    /// Finds the commit that last changed the folder at `path` (see the
    /// module docs for the exact meaning), walking from HEAD or from
    /// `revision` (a full commit id or a reference name). On a shallow
    /// clone whose history cannot prove the answer, asks the GitHub API,
    /// and fails without one.
    pub fn last_change(&self, path: &Path, revision: Option<&str>) -> Result<LastChange> {
        resolve(self, path, revision).map(|(lc, _)| lc)
    }

    /// Whether `ancestor` is an ancestor of (or the same as) `descendant`
    /// (see [`is_ancestor`]), cached.
    pub fn is_ancestor(&self, ancestor: &str, descendant: &str) -> Result<bool> {
        let key = (ancestor.to_string(), descendant.to_string());
        if let Some(&yes) = self.ancestry.borrow().get(&key) {
            return Ok(yes);
        }
        let (yes, _) = is_ancestor(&self.repo, ancestor, descendant, self.api.as_ref())?;
        self.ancestry.borrow_mut().insert(key, yes);
        Ok(yes)
    }
}

/// Finds the commit that last changed the folder at `path` (see
/// [`Checkout::last_change`]), opening the checkout for this one question.
pub fn last_change(
    path: &Path,
    revision: Option<&str>,
    api: Option<github::Api>,
) -> Result<LastChange> {
    let Some(checkout) = Checkout::open(path, api)? else {
        return Err(not_in_git(path));
    };
    checkout.last_change(path, revision)
}

/// Asking for a commit of a folder outside git is bad input (exit 2), as
/// a folder that does not exist is: nothing to ask of the history.
fn not_in_git(path: &Path) -> Error {
    Error::Source {
        path: path.to_path_buf(),
        message: "is not inside a git repository, so no commit names it".into(),
        hint: Some(crate::text![
            "run inside a git checkout, or build without ",
            crate::field::Field::TimestampTag,
            " (the folder is then packaged from disk)"
        ]),
    }
}

/// [`last_change`] for each folder, one walk per repository (see
/// [`prepare`]). One answer per folder, in order; `several`: a walk's
/// error is each folder's, naming it (see [`Reading::several`]).
pub fn last_changes(
    paths: &[PathBuf],
    revision: Option<&str>,
    api: Option<github::Api>,
    several: bool,
) -> Vec<Result<LastChange>> {
    let opened = Checkout::open_all(paths, api);
    let shown: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    let mut walks = walk_each(&shown, &opened, revision, several).into_iter();
    opened
        .into_iter()
        .zip(paths)
        .map(|(opened, path)| {
            let walk = walks.next().flatten();
            match (opened?, walk) {
                (Some(checkout), Some(walk)) => {
                    settle(&checkout, path, revision, walk?).map(|(lc, _)| lc)
                }
                _ => Err(not_in_git(path)),
            }
        })
        .collect()
}

/// How every folder of a run is read: the same for all of them.
#[derive(Debug, Clone, Copy)]
pub struct Reading<'a> {
    /// Inside git: package the commit's folder or the disk's.
    pub mode: SourceMode,
    /// A timestamp tag was asked for: a folder outside git is an error.
    pub need_commit: bool,
    /// The commit (a full id or a reference name) history starts from
    /// instead of HEAD.
    pub revision: Option<&'a str>,
    /// Where the image's source URL comes from.
    pub source_url: &'a SourceUrl,
    /// A run of several folders (a list or glob, a mirror's selection),
    /// even of one: a history walk's error is each folder's, naming it. A
    /// single-folder run gets the walk's error as it is.
    pub several: bool,
}

/// Where an image's source URL (`org.opencontainers.image.source`, its
/// annotation and label, and the provenance's repository) comes from. It
/// is the one input of the digest a clone decides rather than the commit
/// (docs/format.md, "What the digest depends on").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum SourceUrl {
    /// The clone's `origin` remote (a mirror's: its URL), normalized by
    /// [`github::normalize_remote_url`]; none when it has none.
    #[default]
    Origin,
    /// This URL (normalized), from a flag, an input or the CI's variables.
    Given(String),
    /// None: the image records no source URL.
    Omitted,
}

impl SourceUrl {
    /// `--source-url VALUE` (or the action's `source-url`): `none` leaves
    /// the URL out; anything else must be a repository URL, normalized
    /// (`git@github.com:Acme/shop.git` gives `https://github.com/Acme/shop`).
    pub fn parse(value: &str) -> Result<SourceUrl> {
        let value = value.trim();
        if value == "none" {
            return Ok(SourceUrl::Omitted);
        }
        github::normalize_remote_url(value)
            .map(SourceUrl::Given)
            .ok_or_else(|| {
                Error::input_hinted(
                    crate::text![
                        Field::SourceUrl,
                        format!(" {value:?} is not a repository URL")
                    ],
                    crate::text![
                        "give the repository's URL (https://HOST/OWNER/REPO, or the ssh form git clones), or ",
                        Mention::Set(Field::SourceUrl, "none".into()),
                        " to record none"
                    ],
                )
            })
    }

    /// [`SourceUrl::Given`] of `url` when the CI names one, else
    /// [`SourceUrl::Origin`].
    pub fn from_ci(url: Option<String>) -> SourceUrl {
        url.map_or(SourceUrl::Origin, SourceUrl::Given)
    }
}

/// Reads each folder for a build, and hands it back with its checkout
/// for the rest of its run. Inside git with [`SourceMode::Commit`] the
/// content is the folder as the last commit that changed it holds it; with
/// [`SourceMode::Worktree`] it is the disk, with a warning when that
/// differs from the commit (or, without a timestamp tag or a revision,
/// when the history cannot tell the commit). Outside git the disk is
/// read, and a timestamp tag asked for is an error. History starts at
/// HEAD, or at the revision when given (the head of a pull request: the
/// commit the tag names and, in commit mode, the content come from its
/// history).
///
/// `folders` are each folder's path as the run names it (in messages, and
/// on disk) with the checkout that holds it (`None`: not in git; see
/// [`Checkout::open_all`] and [`mirror::Mirror::checkout`]), or why it
/// could not be opened. Folders whose checkouts share a repository have
/// its history walked once for them all; a walk that fails is each one's
/// error. One answer per folder, in order; a folder's failure does not
/// stop the others.
pub fn prepare(
    folders: Vec<(&Path, Result<Option<Checkout>>)>,
    reading: &Reading<'_>,
) -> Vec<Result<(Option<Checkout>, Prepared)>> {
    let (paths, opened): (Vec<&Path>, Vec<Result<Option<Checkout>>>) = folders.into_iter().unzip();
    let mut walks = walk_each(&paths, &opened, reading.revision, reading.several).into_iter();
    opened
        .into_iter()
        .zip(paths)
        .map(|(opened, path)| {
            let walk = walks.next().flatten();
            let checkout = opened?;
            let prepared = read(checkout.as_ref(), walk, path, reading)?;
            Ok((checkout, prepared))
        })
        .collect()
}

impl Checkout {
    /// Opens the checkout of each of `paths` (see [`Checkout::open`]):
    /// each repository once, the other folders in it are its
    /// [`Checkout::sibling`]s. `None` for a folder outside git.
    pub fn open_all(paths: &[PathBuf], api: Option<github::Api>) -> Vec<Result<Option<Checkout>>> {
        let mut roots: Vec<Checkout> = Vec::new();
        let mut opened = Vec::new();
        for path in paths {
            let mut found = None;
            for root in &roots {
                match root.sibling(path) {
                    Ok(None) => {}
                    sibling => {
                        found = Some(sibling);
                        break;
                    }
                }
            }
            let found = found.unwrap_or_else(|| {
                let c = Checkout::open(path, api.clone())?;
                if let Some(c) = &c
                    && let Some(copy) = c.sibling(path)?
                {
                    roots.push(copy);
                }
                Ok(c)
            });
            opened.push(found);
        }
        opened
    }
}

/// Walks the history of each repository once for all the folders whose
/// checkouts share it (its root): one answer per folder of `paths`, `None`
/// for a folder without a checkout. A walk's error is given as it is to
/// the one folder of a single-folder run; in a run of `several` (even of
/// one), each folder of the walk gets a copy naming it.
fn walk_each(
    paths: &[&Path],
    opened: &[Result<Option<Checkout>>],
    revision: Option<&str>,
    several: bool,
) -> Vec<Option<Result<git::Walk>>> {
    let checkouts: Vec<Option<&Checkout>> = opened
        .iter()
        .map(|o| o.as_ref().ok().and_then(Option::as_ref))
        .collect();
    let mut answers: Vec<Option<Result<git::Walk>>> = checkouts.iter().map(|_| None).collect();
    for first in 0..checkouts.len() {
        let Some(walker) = checkouts[first] else {
            continue;
        };
        if answers[first].is_some() {
            continue;
        }
        let members: Vec<usize> = (first..checkouts.len())
            .filter(|&k| checkouts[k].is_some_and(|c| c.repo.root() == walker.repo.root()))
            .collect();
        let rels: Vec<&str> = members
            .iter()
            .filter_map(|&k| checkouts[k].map(|c| c.repo.repo_path()))
            .collect();
        match walker.repo.last_changes(&rels, revision) {
            Ok(walks) => {
                for (k, w) in members.into_iter().zip(walks) {
                    answers[k] = Some(Ok(w));
                }
            }
            Err(e) if members.len() == 1 && !several => answers[first] = Some(Err(e)),
            Err(e) => {
                for k in members {
                    answers[k] = Some(Err(Error::History {
                        path: paths[k].to_path_buf(),
                        message: e.text(),
                        hint: e.hint_text(),
                    }));
                }
            }
        }
    }
    answers
}

/// Where an ancestry answer came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AncestrySource {
    /// The local git objects proved it.
    Local,
    /// The clone could not prove it; GitHub's compare API answered.
    GitHub,
}

/// Whether commit `ancestor` is an ancestor of (or the same as) commit
/// `descendant`, as `git merge-base --is-ancestor` answers. Local history
/// first; when it cannot prove the answer (a shallow clone, a commit not
/// fetched) GitHub's compare API (`api`) answers, and without `api` this
/// is an error that says how to get the history.
pub fn is_ancestor(
    repo: &git::Repo,
    ancestor: &str,
    descendant: &str,
    api: Option<&github::Api>,
) -> Result<(bool, AncestrySource)> {
    match repo.is_ancestor(ancestor, descendant)? {
        git::LocalAncestry::Known(yes) => Ok((yes, AncestrySource::Local)),
        git::LocalAncestry::Unknown(why) => {
            let Some(api) = api else {
                return Err(Error::history(
                    repo.display_path(),
                    format!("cannot tell whether commit {ancestor} is an ancestor of {descendant}: {why}"),
                    Some(
                        "check out the full history (actions/checkout with `fetch-depth: 0`), or set GITHUB_REPOSITORY and a token (GITHUB_TOKEN) so the GitHub compare API can answer"
                            .to_string(),
                    ),
                ));
            };
            let cmp = api.compare(ancestor, descendant)?;
            Ok((cmp.base_is_ancestor(), AncestrySource::GitHub))
        }
    }
}

/// What a build packages, and the commit facts that go into the image.
#[derive(Debug)]
pub struct Prepared {
    /// The files to package.
    pub source: Source,
    /// The commit the image is built from, when the folder is in git.
    pub commit: Option<CommitInfo>,
    /// The repository's https URL, when known.
    pub source_url: Option<String>,
    /// Things the user should know (each face words them).
    pub warnings: Vec<crate::notice::Notice>,
}

impl Prepared {
    /// The annotations (revision, created, source) and labels (source) for
    /// this build. Empty outside git. Never the wall clock.
    pub fn metadata(&self) -> Metadata {
        let mut annotations = BTreeMap::new();
        let mut labels = BTreeMap::new();
        if let Some(c) = &self.commit {
            annotations.insert(ANNOTATION_REVISION.to_string(), c.id.clone());
            annotations.insert(ANNOTATION_CREATED.to_string(), c.committed_at());
            if let Some(url) = &self.source_url {
                annotations.insert(ANNOTATION_SOURCE.to_string(), url.clone());
                labels.insert(ANNOTATION_SOURCE.to_string(), url.clone());
            }
        }
        Metadata {
            annotations,
            labels,
        }
    }
}

/// Reads `path` outside git (a checkout of none): the disk as it is, or an
/// input error when a `revision` or a commit (`need_commit`) was asked for.
fn read_outside_git(path: &Path, revision: Option<&str>, need_commit: bool) -> Result<Prepared> {
    // Bad input (exit 2), not a history that cannot answer.
    if let Some(rev) = revision {
        return Err(Error::Source {
            path: path.to_path_buf(),
            message: format!(
                "is not inside a git repository, so there is no revision {rev} to package"
            )
            .into(),
            hint: Some(
                "build from a git checkout that holds the folder"
                    .to_string()
                    .into(),
            ),
        });
    }
    if need_commit {
        return Err(Error::Source {
            path: path.to_path_buf(),
            message:
                "is not inside a git repository, so there is no commit to take a timestamp tag from"
                    .into(),
            hint: Some(crate::text![
                "drop ",
                Field::TimestampTag,
                ", or build from a git checkout that holds the folder"
            ]),
        });
    }
    Ok(Prepared {
        source: worktree::read(path)?,
        commit: None,
        source_url: None,
        warnings: Vec::new(),
    })
}

/// Reads one folder for a build (see [`prepare`]): `checkout` is the
/// repository holding `path` (`None`: not in git), and `walk` its history
/// walked for the folder (`None` without a checkout: walked here).
fn read(
    checkout: Option<&Checkout>,
    walk: Option<Result<git::Walk>>,
    path: &Path,
    reading: &Reading<'_>,
) -> Result<Prepared> {
    let Reading {
        mode,
        need_commit,
        revision,
        source_url,
        several: _,
    } = *reading;
    let Some(checkout) = checkout else {
        return read_outside_git(path, revision, need_commit);
    };
    let repo = checkout.repo();
    let source_url = match source_url {
        SourceUrl::Origin => repo.remote_url(),
        SourceUrl::Given(url) => Some(url.clone()),
        SourceUrl::Omitted => None,
    };
    let resolve = |checkout: &Checkout, path: &Path, revision| match walk {
        Some(walk) => walk.and_then(|w| settle(checkout, path, revision, w)),
        None => resolve(checkout, path, revision),
    };
    log::debug!(
        "history: {} is in a git repository; source {mode:?}, history from {}",
        path.display(),
        revision.unwrap_or("HEAD")
    );
    match mode {
        SourceMode::Commit => {
            let (lc, content) = resolve(checkout, path, revision)?;
            let source = repo.read_folder(&content, path)?;
            Ok(Prepared {
                source,
                commit: Some(lc.commit),
                source_url,
                warnings: Vec::new(),
            })
        }
        SourceMode::Worktree => {
            let source = worktree::read(path)?;
            let mut warnings = Vec::new();
            let commit = match resolve(checkout, path, revision) {
                Ok((lc, content)) => {
                    let committed = repo.read_folder(&content, path)?;
                    if let Some(diff) = repo.first_difference(&source, &committed)? {
                        warnings.push(crate::notice::Notice::WorktreeDiffers {
                            path: path.to_path_buf(),
                            commit: lc.commit.id.clone(),
                            difference: diff,
                        });
                    }
                    Some(lc.commit)
                }
                Err(e) if !need_commit && revision.is_none() => {
                    warnings.push(crate::notice::Notice::NoCommit { cause: e.text() });
                    None
                }
                Err(e) => return Err(e),
            };
            Ok(Prepared {
                source,
                commit,
                source_url,
                warnings,
            })
        }
    }
}

/// Formats unix seconds as RFC 3339 in UTC, e.g. `2024-01-02T03:04:05Z`.
pub fn rfc3339(secs: i64) -> String {
    // Git timestamps fit jiff's range (years -9999..=9999) by far; the
    // fallback only keeps an impossible value from panicking.
    jiff::Timestamp::from_second(secs)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| format!("@{secs}"))
}

// Ancestry against `git merge-base --is-ancestor` (once tests/ancestry.rs).
#[cfg(test)]
#[path = "ancestry_tests.rs"]
mod ancestry_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_formatting() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(4_102_444_799), "2099-12-31T23:59:59Z");
        assert_eq!(rfc3339(-1), "1969-12-31T23:59:59Z");
    }

    #[test]
    fn token_debug_is_redacted() {
        let t = Token::new("ghp_secret").unwrap();
        assert!(!format!("{t:?}").contains("secret"));
        assert!(Token::new("  ").is_none());
    }
}
