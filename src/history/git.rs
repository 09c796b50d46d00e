//! Pure-Rust git access through `gix`: no git binary, no global or system
//! configuration (there may be none in a `FROM scratch` image), and full
//! trust in the repository whoever owns it (in GitHub Actions a container
//! action runs as root on a workspace owned by uid 1001, which the git CLI
//! refuses as "dubious ownership"). Only objects are read, never hooks or
//! filters, so trusting the repository runs nothing from it.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use gix::ObjectId;
use gix::objs::tree::EntryKind as GitKind;

mod folder;

pub use folder::GitObjects;

use crate::error::{Error, Result};

/// The delta-base cache of a history walk (git's `core.deltaBaseCacheLimit`
/// default is 96 MiB; the walk reads small trees).
const PACK_CACHE_BYTES: usize = 32 << 20;

/// An open repository and the settings folder's place in it.
pub struct Repo {
    repo: gix::ThreadSafeRepository,
    /// The worktree root (canonical).
    root: PathBuf,
    /// The folder relative to the root, `/`-separated, "" for the root.
    rel: String,
    /// Commits whose parents are cut off (`.git/shallow`).
    shallow: HashSet<ObjectId>,
}

impl std::fmt::Debug for Repo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Repo")
            .field("root", &self.root)
            .field("rel", &self.rel)
            .finish_non_exhaustive()
    }
}

pub use super::walk::Walk;

/// What local history says about "is A an ancestor of B".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocalAncestry {
    /// Proven from local objects.
    Known(bool),
    /// Not provable locally; the reason (e.g. a shallow boundary).
    Unknown(String),
}

/// `cwd.join(path)` with `.` and `..` resolved by name.
fn lexical_absolute(cwd: &Path, path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in cwd.join(path).components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The folder `abs` (lexically absolute, shown as `path`) relative to the
/// worktree `root`, `/`-separated, "" for the root itself.
fn relative(path: &Path, abs: &Path, root: &Path) -> Result<String> {
    let rel_path = abs.strip_prefix(root).unwrap_or(Path::new(""));
    let mut parts = Vec::new();
    for c in rel_path.components() {
        let Some(s) = c.as_os_str().to_str() else {
            return Err(Error::source(path, "the path is not valid UTF-8"));
        };
        parts.push(s.to_string());
    }
    if parts.iter().any(|p| p == ".git") {
        return Err(Error::input_hinted(
            format!("{} is inside a .git directory", path.display()),
            crate::text![
                "name the settings folder in the worktree with ",
                crate::field::Field::Path
            ],
        ));
    }
    Ok(parts.join("/"))
}

fn git_err(path: &Path, what: &str, e: impl std::fmt::Display) -> Error {
    Error::history(
        path,
        format!("{what}: {e}"),
        Some(
            "check that the repository is intact (`git fsck`) and that HEAD points to a commit"
                .to_string(),
        ),
    )
}

impl Repo {
    /// Finds the repository holding `path` by looking for `.git` (a
    /// directory, or a file as in linked worktrees) in the folder and its
    /// parents, and opens it. `None` when there is none. Like git's
    /// pathspecs, `path` is resolved against the current directory
    /// lexically (`.` and `..` by name, symlinks not followed), so a
    /// symlink named as the folder means the link, as in `git log -- LINK`.
    pub fn discover(path: &Path) -> Result<Option<Repo>> {
        let cwd =
            std::env::current_dir().map_err(|e| Error::io("reading the current directory", e))?;
        let abs = lexical_absolute(&cwd, path);
        let Some(root) = abs.ancestors().find(|d| d.join(".git").exists()) else {
            return Ok(None);
        };
        let root = root.to_path_buf();
        let rel = relative(path, &abs, &root)?;
        // Isolated: only the repository's own config, no environment, no
        // global or system files. Full trust in the git dir; a worktree
        // owned by someone else still lowers trust to "reduced", which caps
        // object allocations at 16 MiB unless told otherwise: lift the cap,
        // a settings file may be larger, and we read only blobs we package.
        let opts = gix::open::Options::isolated()
            .with(gix::sec::Trust::Full)
            .config_overrides(["gitoxide.objects.allocLimitIfReducedTrust=0"]);
        let repo = gix::open_opts(&root, opts)
            .map_err(|e| git_err(path, "cannot open the git repository", e))?;
        let shallow = repo
            .shallow_commits()
            .map_err(|e| git_err(path, "cannot read .git/shallow", e))?
            .map(|c| c.iter().copied().collect())
            .unwrap_or_default();
        Ok(Some(Repo {
            repo: repo.into_sync(),
            root,
            rel,
            shallow,
        }))
    }

    /// Opens the bare repository at `git_dir` (a mirror, see
    /// [`super::mirror`]) for its root folder; [`Repo::folder`] names
    /// another folder in it. Isolated and fully trusted, as
    /// [`Repo::discover`]; the root shown in messages is `git_dir`.
    pub fn open_bare(git_dir: &Path) -> Result<Repo> {
        let opts = gix::open::Options::isolated()
            .with(gix::sec::Trust::Full)
            .config_overrides(["gitoxide.objects.allocLimitIfReducedTrust=0"]);
        let repo = gix::open_opts(git_dir, opts)
            .map_err(|e| git_err(git_dir, "cannot open the git repository", e))?;
        let shallow = repo
            .shallow_commits()
            .map_err(|e| git_err(git_dir, "cannot read the shallow file", e))?
            .map(|c| c.iter().copied().collect())
            .unwrap_or_default();
        Ok(Repo {
            repo: repo.into_sync(),
            root: git_dir.to_path_buf(),
            rel: String::new(),
            shallow,
        })
    }

    /// The same open repository for the folder `rel` (relative to the
    /// repository root, `/`-separated, `""` for the root), without looking
    /// at the disk: how a bare repository names its folders.
    pub fn folder(&self, rel: &str) -> Repo {
        Repo {
            repo: self.repo.clone(),
            root: self.root.clone(),
            rel: rel.to_string(),
            shallow: self.shallow.clone(),
        }
    }

    /// Whether the repository holds the commit `id` (full hex).
    pub fn has_commit(&self, id: &str) -> bool {
        let repo = self.repo.to_thread_local();
        ObjectId::from_hex(id.as_bytes()).is_ok_and(|oid| repo.find_commit(oid).is_ok())
    }

    /// The names of the folders (trees) directly inside the folder `dir`
    /// (`/`-separated, `""` for the root) in `commit`, sorted by name;
    /// `None` when the commit does not hold `dir` as a folder. What a glob
    /// expands against when there is no worktree.
    pub fn subfolders(&self, commit: &str, dir: &str) -> Result<Option<Vec<String>>> {
        let repo = self.repo.to_thread_local();
        let id = ObjectId::from_hex(commit.as_bytes())
            .map_err(|e| self.err(&format!("{commit:?} is not a commit id"), e))?;
        let c = repo
            .find_commit(id)
            .map_err(|e| self.err(&format!("cannot read commit {id}"), e))?;
        let root = c
            .tree_id()
            .map_err(|e| self.err("cannot read a commit's tree", e))?
            .detach();
        let tree_id = if dir.is_empty() {
            root
        } else {
            let tree = repo
                .find_tree(root)
                .map_err(|e| self.err("cannot read a tree", e))?;
            match tree
                .lookup_entry(dir.split('/').map(str::as_bytes))
                .map_err(|e| self.err("cannot look up a folder in a tree", e))?
            {
                Some(e) if e.mode().kind() == GitKind::Tree => e.object_id(),
                _ => return Ok(None),
            }
        };
        let tree = repo
            .find_tree(tree_id)
            .map_err(|e| self.err(&format!("cannot read tree {tree_id}"), e))?;
        let decoded = tree
            .decode()
            .map_err(|e| self.err(&format!("cannot decode tree {tree_id}"), e))?;
        let mut names: Vec<String> = decoded
            .entries
            .iter()
            .filter(|e| e.mode.kind() == GitKind::Tree)
            .filter_map(|e| std::str::from_utf8(e.filename).ok().map(str::to_string))
            .collect();
        names.sort();
        Ok(Some(names))
    }

    /// The same open repository for another folder, when `path` lies in
    /// this worktree (its nearest `.git` is this root's); `None` otherwise.
    /// Opening once serves every folder of a run.
    pub fn sibling(&self, path: &Path) -> Result<Option<Repo>> {
        let cwd =
            std::env::current_dir().map_err(|e| Error::io("reading the current directory", e))?;
        let abs = lexical_absolute(&cwd, path);
        let Some(root) = abs.ancestors().find(|d| d.join(".git").exists()) else {
            return Ok(None);
        };
        if root != self.root {
            return Ok(None);
        }
        Ok(Some(Repo {
            repo: self.repo.clone(),
            root: self.root.clone(),
            rel: relative(path, &abs, root)?,
            shallow: self.shallow.clone(),
        }))
    }

    /// The worktree root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The folder relative to the repository root ("" for the root).
    pub fn repo_path(&self) -> &str {
        &self.rel
    }

    /// The folder relative to the repository root, `.` for the root.
    pub fn display_path(&self) -> String {
        if self.rel.is_empty() {
            ".".to_string()
        } else {
            self.rel.clone()
        }
    }

    fn err(&self, what: &str, e: impl std::fmt::Display) -> Error {
        git_err(&self.root.join(&self.rel), what, e)
    }

    /// The folder's entry (mode and id) in the tree of `commit`, `None` when
    /// the commit does not hold it.
    fn folder_entry(
        &self,
        repo: &gix::Repository,
        commit: &gix::Commit<'_>,
    ) -> Result<Option<(gix::objs::tree::EntryMode, ObjectId)>> {
        let tree_id = commit
            .tree_id()
            .map_err(|e| self.err("cannot read a commit's tree", e))?
            .detach();
        if self.rel.is_empty() {
            return Ok(Some((GitKind::Tree.into(), tree_id)));
        }
        let tree = repo
            .find_tree(tree_id)
            .map_err(|e| self.err("cannot read a tree", e))?;
        let entry = tree
            .lookup_entry(self.rel.split('/').map(str::as_bytes))
            .map_err(|e| self.err("cannot look up the folder in a tree", e))?;
        Ok(entry.map(|e| (e.mode(), e.object_id())))
    }

    /// Resolves the commit a walk starts from: HEAD, or `revision` (a full
    /// commit id or a reference name such as `refs/heads/main` or `main`).
    fn start(&self, repo: &gix::Repository, revision: Option<&str>) -> Result<ObjectId> {
        let Some(rev) = revision else {
            return Ok(repo
                .head_id()
                .map_err(|e| self.err("cannot resolve HEAD", e))?
                .detach());
        };
        let missing = || {
            Error::history(
                self.root.join(&self.rel),
                format!("the revision {rev} is not in this clone"),
                Some(
                    "fetch it first: with actions/checkout use `fetch-depth: 0` (the head commit of a \
                     pull request is a parent of the merge commit the workflow checks out)"
                        .to_string(),
                ),
            )
        };
        if rev.len() == repo.object_hash().len_in_hex()
            && let Ok(id) = ObjectId::from_hex(rev.as_bytes())
        {
            return if repo.has_object(id) {
                Ok(id)
            } else {
                Err(missing())
            };
        }
        let mut reference = repo
            .try_find_reference(rev)
            .map_err(|e| self.err(&format!("cannot look up the reference {rev}"), e))?
            .ok_or_else(missing)?;
        let id = reference
            .peel_to_id()
            .map_err(|e| self.err(&format!("cannot resolve the reference {rev}"), e))?
            .detach();
        Ok(id)
    }

    /// Walks from HEAD (or from `revision`) the way `git log -1 REV -- DIR`
    /// does (see the module docs of [`super`]), with the walk of
    /// [`super::walk`] for this one folder.
    pub fn last_change(&self, revision: Option<&str>) -> Result<Walk> {
        let mut walks = self.last_changes(&[self.rel.as_str()], revision)?;
        walks
            .pop()
            .ok_or_else(|| self.err("walking history", "no answer for the folder"))
    }

    /// [`Repo::last_change`] for several folders in one walk: `folders`
    /// are relative to the repository root, `/`-separated (`""` for the
    /// root); the answers come in the same order.
    pub fn last_changes(&self, folders: &[&str], revision: Option<&str>) -> Result<Vec<Walk>> {
        let mut repo = self.repo.to_thread_local();
        // A delta-base cache: without one (gix sets none up unless built
        // with `max-performance`) every tree read inflates its whole delta
        // chain again; the walk reads trees whose bases it just read.
        repo.objects.set_pack_cache(|| {
            Box::new(gix::odb::pack::cache::lru::MemoryCappedHashmap::new(
                PACK_CACHE_BYTES,
            ))
        });
        let head = self.start(&repo, revision)?;
        super::walk::last_changes(&repo, &self.shallow, head, folders)
            .map_err(|f| self.err(&f.what, f.message))
    }

    /// Whether `ancestor` is reachable from `descendant` through parent
    /// links (a commit is its own ancestor), as `git merge-base
    /// --is-ancestor` answers. Walks every commit reachable from
    /// `descendant` (no pruning by committer time: clocks may be skewed).
    /// [`LocalAncestry::Unknown`] when the local objects cannot prove the
    /// answer: `descendant` is missing, or the walk reaches a commit whose
    /// parents are missing (a shallow clone) without meeting `ancestor`.
    pub fn is_ancestor(&self, ancestor: &str, descendant: &str) -> Result<LocalAncestry> {
        let parse = |id: &str| {
            ObjectId::from_hex(id.as_bytes()).map_err(|e| {
                Error::input(
                    format!("{id:?} is not a full commit id: {e}"),
                    Some("give the 40-hex-digit commit id".to_string()),
                )
            })
        };
        let a = parse(ancestor)?;
        let d = parse(descendant)?;
        if a == d {
            return Ok(LocalAncestry::Known(true));
        }
        let repo = self.repo.to_thread_local();
        if !repo.has_object(d) {
            return Ok(LocalAncestry::Unknown(format!(
                "commit {d} is not in the local repository"
            )));
        }
        let mut seen: HashSet<ObjectId> = HashSet::from([d]);
        let mut queue = std::collections::VecDeque::from([d]);
        let mut cut = None;
        while let Some(id) = queue.pop_front() {
            let commit = repo
                .find_commit(id)
                .map_err(|e| self.err(&format!("cannot read commit {id}"), e))?;
            for p in commit.parent_ids() {
                let p = p.detach();
                if p == a {
                    return Ok(LocalAncestry::Known(true));
                }
                if !repo.has_object(p) {
                    cut.get_or_insert(id);
                    continue;
                }
                if seen.insert(p) {
                    queue.push_back(p);
                }
            }
        }
        Ok(match cut {
            None => LocalAncestry::Known(false),
            Some(boundary) => LocalAncestry::Unknown(format!(
                "the local history ends at commit {boundary}{} before reaching {a}",
                if self.shallow.contains(&boundary) {
                    " (shallow clone)"
                } else {
                    ""
                }
            )),
        })
    }

    /// The committer time of `id` when the commit is in the repository.
    pub fn commit_time(&self, id: &str) -> Option<i64> {
        let repo = self.repo.to_thread_local();
        let oid = ObjectId::from_hex(id.as_bytes()).ok()?;
        let commit = repo.find_commit(oid).ok()?;
        commit.time().ok().map(|t| t.seconds)
    }

    /// The checked-out branch (`refs/heads/NAME`), `None` when HEAD is
    /// detached or unreadable.
    pub fn head_ref(&self) -> Option<String> {
        let repo = self.repo.to_thread_local();
        let name = repo.head_name().ok()??;
        Some(name.as_bstr().to_string())
    }

    /// The `origin` remote's URL as an https URL without credentials, when
    /// it names a remote host.
    pub fn remote_url(&self) -> Option<String> {
        let repo = self.repo.to_thread_local();
        let snapshot = repo.config_snapshot();
        let url = snapshot.plumbing().string("remote.origin.url")?;
        super::github::normalize_remote_url(&url.to_string())
    }
}
