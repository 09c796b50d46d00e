//! The last change of a folder when the local walk may end at a shallow
//! clone's boundary (`actions/checkout` clones with depth 1): a boundary
//! the walk proves is the answer is kept; otherwise the GitHub API names
//! the commit ([`ask_github`]), checked against what the walk passed.

use std::path::Path;

use super::{Checkout, CommitInfo, LastChange, git, github};
use crate::error::{Error, Result};
use crate::field::{Field, Mention};

/// Resolves the last change, falling back to GitHub on a shallow boundary.
/// Also returns the commit to read the content from.
pub(super) fn resolve(
    checkout: &Checkout,
    path: &Path,
    revision: Option<&str>,
) -> Result<(LastChange, String)> {
    settle(
        checkout,
        path,
        revision,
        checkout.repo.last_change(revision)?,
    )
}

/// [`resolve`] from a walk already made (one walk serves many folders).
pub(super) fn settle(
    checkout: &Checkout,
    path: &Path,
    revision: Option<&str>,
    walk: git::Walk,
) -> Result<(LastChange, String)> {
    let repo = &checkout.repo;
    let repo_path = repo.display_path();
    match walk {
        git::Walk::Found(commit) => {
            log::debug!(
                "history: the last commit that changed {repo_path} is {} (committer time {})",
                commit.id,
                commit.timestamp
            );
            let content = commit.id.clone();
            Ok((
                LastChange {
                    commit,
                    repo_path,
                    from_github: false,
                },
                content,
            ))
        }
        // An unusable folder (missing or untracked), so bad input: exit 2.
        // Neither on disk nor in the commit: most likely a typo.
        git::Walk::NotInHead if std::fs::symlink_metadata(path).is_err() => Err(Error::Source {
            path: path.to_path_buf(),
            message: crate::text![
                "does not exist (",
                Mention::Looked(revision.map(str::to_string)),
                ")"
            ],
            hint: Some(crate::text![
                "check the folder's name: ",
                Field::Path,
                " names the settings folder, relative to ",
                Mention::PathRoot
            ]),
        }),
        git::Walk::NotInHead => Err(Error::Source {
            path: path.to_path_buf(),
            message: match revision {
                None => "is not in the HEAD commit (untracked, ignored or deleted)"
                    .to_string()
                    .into(),
                Some(rev) => {
                    format!("is not in the commit {rev} (untracked, ignored or deleted)").into()
                }
            },
            hint: Some(crate::text![
                "commit the folder first, or use ",
                Mention::Set(Field::Source, "worktree".into()),
                " to package it from disk without a timestamp tag"
            ]),
        }),
        git::Walk::Boundary {
            head,
            boundary,
            shallow,
            passed,
        } => {
            log::debug!(
                "history: the walk from {head} ends at {boundary} (shallow: {shallow}) after {} commits that did not change {repo_path}",
                passed.len()
            );
            let Some(api) = checkout.api() else {
                let what = if shallow {
                    "this is a shallow clone and its history ends"
                } else {
                    "the repository lacks the parents of a commit (history ends)"
                };
                return Err(Error::history(
                    path,
                    format!(
                        "{what} at commit {boundary} before showing which commit last changed the folder"
                    ),
                    Some(
                        "check out the full history (actions/checkout with `fetch-depth: 0`), or set GITHUB_REPOSITORY and a token (GITHUB_TOKEN) so the GitHub API can answer"
                            .to_string(),
                    ),
                ));
            };
            let commit = ask_github(repo, api, &head, &passed)?;
            Ok((
                LastChange {
                    commit,
                    repo_path,
                    from_github: true,
                },
                head,
            ))
        }
    }
}

/// The last change of `repo`'s folder from `head` as the GitHub API names
/// it, when the local walk ended at a boundary after `passed` (commits
/// that did not change the folder: GitHub naming one of them is an error).
fn ask_github(
    repo: &git::Repo,
    api: &github::Api,
    head: &str,
    passed: &[String],
) -> Result<CommitInfo> {
    let repo_path = repo.display_path();
    log::debug!(
        "history: asking the GitHub API for the last commit that changed {repo_path} from {head}"
    );
    let mut commit = api.last_change(repo.repo_path(), head)?;
    log::debug!("history: the GitHub API names {}", commit.id);
    if passed.contains(&commit.id) {
        return Err(Error::GitHub {
            what: format!("list commits for {repo_path}"),
            message: format!(
                "GitHub named commit {}, but the local history shows it did not change the folder",
                commit.id
            ),
            hint: Some(
                "check that GITHUB_REPOSITORY names this repository, or check out the full history (`fetch-depth: 0`)"
                    .to_string(),
            ),
        });
    }
    // When the commit is here (often the boundary itself), its own
    // committer time is the exact `%ct`.
    if let Some(ts) = repo.commit_time(&commit.id) {
        commit.timestamp = ts;
    }
    Ok(commit)
}
