//! Pure-Rust git access through `gix`: no git binary, no global or system
//! configuration (there may be none in a `FROM scratch` image), and full
//! trust in the repository whoever owns it (in GitHub Actions a container
//! action runs as root on a workspace owned by uid 1001, which the git CLI
//! refuses as "dubious ownership"). Only objects are read, never hooks or
//! filters, so trusting the repository runs nothing from it.

use std::collections::HashSet;
use std::io::{Cursor, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use gix::ObjectId;
use gix::objs::tree::EntryKind as GitKind;

use super::CommitInfo;
use crate::error::{Error, Result};
use crate::source::{
    Content, Entries, EntryKind, ObjectStore, Source, check_symlink_chains, check_symlink_target,
};

/// The delta-base cache of a history walk (git's `core.deltaBaseCacheLimit`
/// default is 96 MiB; the walk reads small trees).
const PACK_CACHE_BYTES: usize = 32 << 20;

/// The longest symlink target Linux stores (`PATH_MAX` less the NUL).
const MAX_LINK_TARGET: u64 = 4095;

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

/// Where the walk for the last change ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Walk {
    /// The commit that last changed the folder.
    Found(CommitInfo),
    /// The start commit (HEAD or the revision) does not hold the folder.
    NotInHead,
    /// The walk reached a commit whose parents are missing (a shallow-clone
    /// boundary) while the folder still looked unchanged: the local history
    /// cannot prove the answer.
    Boundary {
        /// Whether the commit is listed in `.git/shallow` (else the
        /// repository is incomplete some other way).
        shallow: bool,
        /// The start commit's id (HEAD or the revision).
        head: String,
        /// The boundary commit (never an answer).
        boundary: String,
        /// The commits walked before it, proven not to change the folder.
        passed: Vec<String>,
    },
}

/// What local history says about "is A an ancestor of B".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocalAncestry {
    /// Proven from local objects.
    Known(bool),
    /// Not provable locally; the reason (e.g. a shallow boundary).
    Unknown(String),
}

thread_local! {
    /// Repositories opened on this thread (see [`opens`]).
    static OPENS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// How many repositories [`Repo::discover`] has opened on the calling
/// thread. A run opens its checkout once and passes it down; a test holds
/// a whole push to that (opening is the costly part: config, refs, the
/// shallow file).
pub fn opens() -> usize {
    OPENS.with(|o| o.get())
}

/// How many tree objects history walks on the calling thread have read
/// (trees found in the walk's cache are not counted): a walk that the
/// commit-graph's changed-path filters answer reads almost none.
pub fn tree_reads() -> usize {
    super::walk::tree_reads()
}

pub use super::walk::ObjectReads;

/// Where history walks on the calling thread have read trees and commits
/// from (see [`ObjectReads`]): a complete clone's are read from its packs.
pub fn object_reads() -> ObjectReads {
    super::walk::object_reads()
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
        return Err(Error::input(
            format!("{} is inside a .git directory", path.display()),
            Some("name the settings folder in the worktree".to_string()),
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
        OPENS.with(|o| o.set(o.get() + 1));
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
        OPENS.with(|o| o.set(o.get() + 1));
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

    /// Reads the folder as `commit` holds it: tracked files only, modes from
    /// git (100755 executable, 120000 symlink checked like the worktree
    /// reader's, 160000 submodule an error naming the path). `shown` is the
    /// path as the user gave it, for messages.
    pub fn read_folder(&self, commit: &str, shown: &Path) -> Result<Source> {
        let repo = self.repo.to_thread_local();
        let id = ObjectId::from_hex(commit.as_bytes())
            .map_err(|e| self.err(&format!("{commit:?} is not a commit id"), e))?;
        let c = repo
            .find_commit(id)
            .map_err(|e| self.err(&format!("cannot read commit {id}"), e))?;
        let Some((mode, tree_id)) = self.folder_entry(&repo, &c)? else {
            return Err(Error::history(
                shown,
                format!("commit {id} does not hold the folder"),
                Some("commit the folder first".to_string()),
            ));
        };
        if mode.kind() != GitKind::Tree {
            return Err(Error::Source {
                path: shown.to_path_buf(),
                message: format!("is not a directory in commit {id}").into(),
                hint: Some(crate::text![
                    crate::field::Field::Path,
                    " must name the folder that holds the settings files"
                ]),
            });
        }
        let mut entries = Entries::new();
        self.walk_tree(&repo, tree_id, "", shown, &mut entries)?;
        entries.sort();
        check_symlink_chains(&entries).map_err(|(link, message)| Error::Source {
            path: shown.join(&link),
            message: format!("{message} (commit {id})").into(),
            hint: Some(format!(
                "replace the link with a copy of the file, or point it inside {} without going through another link",
                shown.display()
            ).into()),
        })?;
        if entries.iter().all(|e| matches!(e.kind, EntryKind::Dir)) {
            return Err(Error::Source {
                path: shown.to_path_buf(),
                message: format!("the settings folder holds no files in commit {id}").into(),
                hint: Some(
                    "an empty image would mount as an empty directory; commit the settings files first"
                        .into(),
                ),
            });
        }
        Ok(Source {
            root: shown.to_path_buf(),
            entries,
            objects: Some(Arc::new(GitObjects::new(self.repo.clone()))),
        })
    }

    fn walk_tree(
        &self,
        repo: &gix::Repository,
        tree_id: ObjectId,
        rel: &str,
        shown: &Path,
        out: &mut Entries,
    ) -> Result<()> {
        let tree = repo
            .find_tree(tree_id)
            .map_err(|e| self.err(&format!("cannot read tree {tree_id}"), e))?;
        let decoded = tree
            .decode()
            .map_err(|e| self.err(&format!("cannot decode tree {tree_id}"), e))?;
        for e in &decoded.entries {
            let Ok(name) = std::str::from_utf8(e.filename) else {
                return Err(Error::Source {
                    path: shown
                        .join(rel)
                        .join(String::from_utf8_lossy(e.filename).as_ref()),
                    message: "the name is not valid UTF-8".into(),
                    hint: Some(
                        "rename the file; image layers and Kubernetes need UTF-8 paths".into(),
                    ),
                });
            };
            let path = if rel.is_empty() {
                name.to_string()
            } else {
                format!("{rel}/{name}")
            };
            let oid = e.oid.to_owned();
            match e.mode.kind() {
                GitKind::Tree => {
                    out.push_dir(&path)?;
                    self.walk_tree(repo, oid, &path, shown, out)?;
                }
                kind @ (GitKind::Blob | GitKind::BlobExecutable) => {
                    let header = repo.find_header(oid).map_err(|err| {
                        self.err(&format!("cannot read blob {oid} ({path})"), err)
                    })?;
                    let mut hex = [0u8; 64];
                    out.push_file(
                        &path,
                        header.size(),
                        kind == GitKind::BlobExecutable,
                        Content::Object(oid.hex_to_buf(&mut hex)),
                    )?;
                }
                GitKind::Link => {
                    // A link target is at most 4095 bytes (PATH_MAX): a
                    // larger "link" is not read at all.
                    let size = repo
                        .find_header(oid)
                        .map_err(|err| self.err(&format!("cannot read link {oid} ({path})"), err))?
                        .size();
                    if size > MAX_LINK_TARGET {
                        return Err(Error::Source {
                            path: shown.join(&path),
                            message: format!(
                                "is a symlink whose target is {size} bytes long; a target holds at most {MAX_LINK_TARGET}"
                            ).into(),
                            hint: Some("replace the link with a copy of the file".into()),
                        });
                    }
                    let blob = repo.find_blob(oid).map_err(|err| {
                        self.err(&format!("cannot read link {oid} ({path})"), err)
                    })?;
                    let Ok(target) = std::str::from_utf8(&blob.data).map(str::to_string) else {
                        return Err(Error::source(
                            shown.join(&path),
                            "the symlink target is not valid UTF-8",
                        ));
                    };
                    check_symlink_target(&path, &target).map_err(|m| Error::Source {
                        path: shown.join(&path),
                        message: m.into(),
                        hint: Some(
                            format!(
                                "replace the link with a copy of the file, or point it inside {}",
                                shown.display()
                            )
                            .into(),
                        ),
                    })?;
                    out.push_symlink(&path, &target)?;
                }
                GitKind::Commit => {
                    return Err(Error::Source {
                        path: shown.join(&path),
                        message:
                            "is a git submodule; a settings image cannot hold another repository"
                                .into(),
                        hint: Some(
                            "copy the files into the settings folder instead of a submodule".into(),
                        ),
                    });
                }
            }
        }
        Ok(())
    }

    /// Compares what the disk holds with what a commit holds, entry by
    /// entry, content by blob id. Returns the first difference, described.
    pub fn first_difference(&self, disk: &Source, commit: &Source) -> Result<Option<String>> {
        let kind = self.repo.to_thread_local().object_hash();
        let mut a = disk.entries.iter().peekable();
        let mut b = commit.entries.iter().peekable();
        loop {
            match (a.peek(), b.peek()) {
                (None, None) => return Ok(None),
                (Some(x), None) => return Ok(Some(format!("{} is not in the commit", x.path))),
                (None, Some(y)) => return Ok(Some(format!("{} is missing on disk", y.path))),
                (Some(x), Some(y)) => {
                    match x.path.as_bytes().cmp(y.path.as_bytes()) {
                        std::cmp::Ordering::Less => {
                            return Ok(Some(format!("{} is not in the commit", x.path)));
                        }
                        std::cmp::Ordering::Greater => {
                            return Ok(Some(format!("{} is missing on disk", y.path)));
                        }
                        std::cmp::Ordering::Equal => {}
                    }
                    let same = match (x.kind, y.kind) {
                        (EntryKind::Dir, EntryKind::Dir) => true,
                        (EntryKind::Symlink { target: t1 }, EntryKind::Symlink { target: t2 }) => {
                            t1 == t2
                        }
                        (
                            EntryKind::File {
                                size: s1,
                                executable: e1,
                                content: c1,
                            },
                            EntryKind::File {
                                size: s2,
                                executable: e2,
                                content: Content::Object(id2),
                            },
                        ) => {
                            s1 == s2 && e1 == e2 && {
                                let mut r = disk
                                    .open(x.path, c1, s1)
                                    .map_err(|e| Error::io(format!("reading {}", x.path), e))?;
                                let id = gix::objs::compute_stream_hash(
                                    kind,
                                    gix::objs::Kind::Blob,
                                    &mut r,
                                    s1,
                                    &mut gix::progress::Discard,
                                    &std::sync::atomic::AtomicBool::new(false),
                                )
                                .map_err(|e| self.err(&format!("hashing {}", x.path), e))?;
                                ObjectId::from_hex(id2.as_bytes()).is_ok_and(|want| want == id)
                            }
                        }
                        _ => false,
                    };
                    if !same {
                        return Ok(Some(format!("{} differs", x.path)));
                    }
                    a.next();
                    b.next();
                }
            }
        }
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

/// Git blobs as an [`ObjectStore`]: each `open` streams one blob from the
/// object database (see [`super::blobs`]), so memory stays flat however
/// large a file is; a small deltified blob is read whole through `gix`.
pub struct GitObjects {
    repo: gix::ThreadSafeRepository,
    blobs: Option<super::blobs::Blobs>,
}

impl std::fmt::Debug for GitObjects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitObjects")
            .field("git_dir", &self.repo.git_dir())
            .finish()
    }
}

impl GitObjects {
    fn new(repo: gix::ThreadSafeRepository) -> GitObjects {
        let blobs = super::blobs::Blobs::of(&repo.to_thread_local());
        GitObjects { repo, blobs }
    }
}

impl ObjectStore for GitObjects {
    fn open(&self, id: &str, size: u64) -> std::io::Result<Box<dyn Read + '_>> {
        let oid = ObjectId::from_hex(id.as_bytes())
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        // A small file is read whole, as fast as `gix` reads it; a large
        // one streamed.
        if size >= super::blobs::STREAM_FROM
            && let Some(blobs) = &self.blobs
            && let Some(stream) = blobs
                .open(&oid)
                .map_err(|e| std::io::Error::new(e.kind(), format!("reading git blob {id}: {e}")))?
        {
            return Ok(stream);
        }
        let repo = self.repo.to_thread_local();
        let blob = repo
            .find_blob(oid)
            .map_err(|e| std::io::Error::other(format!("reading git blob {id}: {e}")))?;
        Ok(Box::new(Cursor::new(blob.detach().data)))
    }
}
