//! A folder as a commit holds it: read into a [`Source`] (tracked files,
//! git's modes, symlinks checked as the worktree reader checks them,
//! blobs streamed from the object database), and compared with the folder
//! on disk.

use std::io::{Cursor, Read};
use std::path::Path;
use std::sync::Arc;

use gix::ObjectId;
use gix::objs::tree::EntryKind as GitKind;

use super::Repo;
use crate::error::{Error, Result};
use crate::source::{
    Content, Entries, EntryKind, ObjectStore, Source, check_symlink_chains, check_symlink_target,
};

/// The longest symlink target Linux stores (`PATH_MAX` less the NUL).
const MAX_LINK_TARGET: u64 = 4095;

impl Repo {
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
        self.walk_tree(&repo, tree_id, &id, shown, &mut entries)?;
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

    /// Reads the target of the symlink `path` (blob `oid`), checked: at
    /// most [`MAX_LINK_TARGET`] bytes, UTF-8, and inside the folder.
    fn read_link(
        &self,
        repo: &gix::Repository,
        oid: ObjectId,
        path: &str,
        shown: &Path,
    ) -> Result<String> {
        // A link target is at most 4095 bytes (PATH_MAX): a
        // larger "link" is not read at all.
        let size = repo
            .find_header(oid)
            .map_err(|err| self.err(&format!("cannot read link {oid} ({path})"), err))?
            .size();
        if size > MAX_LINK_TARGET {
            return Err(Error::Source {
                path: shown.join(path),
                message: format!(
                    "is a symlink whose target is {size} bytes long; a target holds at most {MAX_LINK_TARGET}"
                ).into(),
                hint: Some("replace the link with a copy of the file".into()),
            });
        }
        let blob = repo
            .find_blob(oid)
            .map_err(|err| self.err(&format!("cannot read link {oid} ({path})"), err))?;
        let Ok(target) = std::str::from_utf8(&blob.data).map(str::to_string) else {
            return Err(Error::source(
                shown.join(path),
                "the symlink target is not valid UTF-8",
            ));
        };
        check_symlink_target(path, &target).map_err(|m| Error::Source {
            path: shown.join(path),
            message: m.into(),
            hint: Some(
                format!(
                    "replace the link with a copy of the file, or point it inside {}",
                    shown.display()
                )
                .into(),
            ),
        })?;
        Ok(target)
    }

    /// The entries of tree `tree_id`, owned (name bytes, kind, id), in
    /// the tree's order.
    fn tree_entries(
        &self,
        repo: &gix::Repository,
        tree_id: ObjectId,
    ) -> Result<std::vec::IntoIter<(Vec<u8>, GitKind, ObjectId)>> {
        let tree = repo
            .find_tree(tree_id)
            .map_err(|e| self.err(&format!("cannot read tree {tree_id}"), e))?;
        let decoded = tree
            .decode()
            .map_err(|e| self.err(&format!("cannot decode tree {tree_id}"), e))?;
        Ok(decoded
            .entries
            .iter()
            .map(|e| (e.filename.to_vec(), e.mode.kind(), e.oid.to_owned()))
            .collect::<Vec<_>>()
            .into_iter())
    }

    /// Lists the folder's tree `tree_id` into `out`, depth first in the
    /// trees' order (the first bad entry is always the same one). A stack
    /// of the trees being read, not recursion: a commit can nest trees far
    /// deeper than a thread's stack holds frames, so the depth is bounded
    /// by [`crate::source::MAX_DEPTH`] with an error naming it instead.
    fn walk_tree(
        &self,
        repo: &gix::Repository,
        tree_id: ObjectId,
        commit: &ObjectId,
        shown: &Path,
        out: &mut Entries,
    ) -> Result<()> {
        // Each level: its path (relative to the folder) and the entries left.
        let mut stack = vec![(String::new(), self.tree_entries(repo, tree_id)?)];
        while let Some((rel, pending)) = stack.last_mut() {
            let Some((name, kind, oid)) = pending.next() else {
                stack.pop();
                continue;
            };
            let Ok(name) = std::str::from_utf8(&name) else {
                return Err(Error::Source {
                    path: shown
                        .join(rel.as_str())
                        .join(String::from_utf8_lossy(&name).as_ref()),
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
            // The entry's depth: one component per open tree.
            crate::source::check_depth(shown, &path, stack.len(), Some(commit))?;
            match kind {
                GitKind::Tree => {
                    out.push_dir(&path)?;
                    let entries = self.tree_entries(repo, oid)?;
                    stack.push((path, entries));
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
                    let target = self.read_link(repo, oid, &path, shown)?;
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
}

/// Git blobs as an [`ObjectStore`]: each `open` streams one blob from the
/// object database (see [`crate::history::blobs`]), so memory stays flat however
/// large a file is; a small deltified blob is read whole through `gix`.
pub struct GitObjects {
    repo: gix::ThreadSafeRepository,
    blobs: Option<crate::history::blobs::Blobs>,
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
        let blobs = crate::history::blobs::Blobs::of(&repo.to_thread_local());
        GitObjects { repo, blobs }
    }
}

impl ObjectStore for GitObjects {
    fn open(&self, id: &str, size: u64) -> std::io::Result<Box<dyn Read + '_>> {
        let oid = ObjectId::from_hex(id.as_bytes())
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        // A small file is read whole, as fast as `gix` reads it; a large
        // one streamed.
        if size >= crate::history::blobs::STREAM_FROM
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
