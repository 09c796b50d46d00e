//! The settings folder as a sorted list of entries, read either from the
//! working tree on disk or (in the history module) from a git commit.

pub mod worktree;

use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;

/// One entry of the folder, relative to the folder's root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Path relative to the folder, `/`-separated, no leading `./`, no
    /// trailing slash. Valid UTF-8 by construction.
    pub path: String,
    /// What the entry is.
    pub kind: EntryKind,
}

/// The kinds of entries a settings image can hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryKind {
    /// A directory (written with mode 0755).
    Dir,
    /// A regular file (mode 0755 when executable, else 0644).
    File {
        /// Exact content length in bytes.
        size: u64,
        /// Whether any execute bit is set.
        executable: bool,
        /// Where the bytes come from.
        content: Content,
    },
    /// A relative symlink whose target stays inside the folder.
    Symlink {
        /// The link target, exactly as stored.
        target: String,
    },
}

/// Where a file's bytes are read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    /// A file on disk.
    Path(PathBuf),
    /// An object in a store (a git blob), named by its hex id.
    Object(String),
}

/// Opens objects named by [`Content::Object`]; implemented by the history
/// module for git blobs.
pub trait ObjectStore: Send + Sync + std::fmt::Debug {
    /// Opens the object with the given hex id for reading.
    fn open(&self, id: &str) -> std::io::Result<Box<dyn Read + '_>>;
}

/// The folder to package: its entries in path-byte order, and where file
/// contents come from.
#[derive(Debug, Clone)]
pub struct Source {
    /// The folder as the user named it (for messages).
    pub root: PathBuf,
    /// Entries sorted by path bytes; parents come before their children.
    pub entries: Vec<Entry>,
    /// The store that [`Content::Object`] ids refer to, if any.
    pub objects: Option<Arc<dyn ObjectStore>>,
}

impl Source {
    /// Opens a file entry's content for reading.
    pub fn open(&self, content: &Content) -> std::io::Result<Box<dyn Read + '_>> {
        match content {
            Content::Path(p) => Ok(Box::new(std::fs::File::open(p)?)),
            Content::Object(id) => match &self.objects {
                Some(store) => store.open(id),
                None => Err(std::io::Error::other(format!(
                    "object {id} named but no object store is attached"
                ))),
            },
        }
    }

    /// Number of regular files.
    pub fn file_count(&self) -> usize {
        self.entries
            .iter()
            .filter(|e| matches!(e.kind, EntryKind::File { .. }))
            .count()
    }

    /// Sum of the regular files' sizes in bytes.
    pub fn content_size(&self) -> u64 {
        self.entries
            .iter()
            .map(|e| match e.kind {
                EntryKind::File { size, .. } => size,
                _ => 0,
            })
            .sum()
    }
}

/// Sorts entries by path bytes, which puts every directory before its
/// children (a prefix sorts first).
pub fn sort_entries(entries: &mut [Entry]) {
    entries.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
}

/// Checks that a symlink at `link_path` (relative to the folder) with the
/// given target stays inside the folder, judged lexically. Returns a reason
/// when it does not.
pub fn check_symlink_target(link_path: &str, target: &str) -> Result<(), String> {
    if target.is_empty() {
        return Err("symlink has an empty target".into());
    }
    if target.starts_with('/') {
        return Err(format!(
            "symlink points to the absolute path {target:?}; only relative links inside the folder are kept"
        ));
    }
    // Start from the link's parent directory.
    let mut depth: i64 = link_path.split('/').count() as i64 - 1;
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                depth -= 1;
                if depth < 0 {
                    return Err(format!(
                        "symlink target {target:?} leaves the folder; only links inside the folder are kept"
                    ));
                }
            }
            _ => depth += 1,
        }
    }
    Ok(())
}

/// The most links one path may go through, as Linux's `MAXSYMLINKS`.
const MAX_LINK_HOPS: usize = 40;

/// Resolves every symlink among `entries` the way a reader's kernel will,
/// following the folder's own links, and returns the first link (path and
/// reason) that leaves the folder or never resolves (a loop).
///
/// [`check_symlink_target`] judges one link by its own path; this catches
/// chains such as `sub/up -> ..` plus `esc -> sub/up/../x`, where each link
/// looks inside but `esc` ends up outside. Targets that name nothing in the
/// folder stay as they are (a dangling link inside is allowed).
pub fn check_symlink_chains(entries: &[Entry]) -> Result<(), (String, String)> {
    let links: std::collections::HashMap<&str, &str> = entries
        .iter()
        .filter_map(|e| match &e.kind {
            EntryKind::Symlink { target } => Some((e.path.as_str(), target.as_str())),
            _ => None,
        })
        .collect();
    // In entry order, so the link named in the error is always the same one.
    for e in entries {
        if let EntryKind::Symlink { target } = &e.kind {
            resolve_link(&links, &e.path, target).map_err(|m| (e.path.clone(), m))?;
        }
    }
    Ok(())
}

fn resolve_link(
    links: &std::collections::HashMap<&str, &str>,
    path: &str,
    target: &str,
) -> Result<(), String> {
    // Where we are (components below the folder) and what is left to walk.
    let mut at: Vec<&str> = path.split('/').collect();
    at.pop();
    let mut pending: std::collections::VecDeque<&str> = target.split('/').collect();
    let mut hops = 0;
    while let Some(part) = pending.pop_front() {
        match part {
            "" | "." => {}
            ".." => {
                if at.pop().is_none() {
                    return Err(format!(
                        "symlink target {target:?} leaves the folder once the folder's own links \
                         are followed; only links inside the folder are kept"
                    ));
                }
            }
            name => {
                at.push(name);
                if let Some(next) = links.get(at.join("/").as_str()) {
                    hops += 1;
                    if hops > MAX_LINK_HOPS {
                        return Err(format!(
                            "symlink target {target:?} is part of a symlink loop and resolves to nothing"
                        ));
                    }
                    // The link is replaced by its target, read from the link's folder.
                    at.pop();
                    if next.starts_with('/') {
                        return Err(format!(
                            "symlink target {target:?} goes through the absolute link {next:?}"
                        ));
                    }
                    for p in next.split('/').rev() {
                        pending.push_front(p);
                    }
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symlink_targets() {
        assert!(check_symlink_target("a.yaml", "b.yaml").is_ok());
        assert!(check_symlink_target("dir/a.yaml", "../b.yaml").is_ok());
        assert!(check_symlink_target("dir/a", "..").is_ok());
        assert!(check_symlink_target("a.yaml", "../b.yaml").is_err());
        assert!(check_symlink_target("dir/a", "../../x").is_err());
        assert!(check_symlink_target("dir/a", "x/../../../y").is_err());
        assert!(check_symlink_target("a", "/etc/passwd").is_err());
        assert!(check_symlink_target("a", "").is_err());
    }

    fn link(path: &str, target: &str) -> Entry {
        Entry {
            path: path.into(),
            kind: EntryKind::Symlink {
                target: target.into(),
            },
        }
    }

    #[test]
    fn symlink_chains() {
        let ok = [
            link("sub/up", ".."),
            link("a", "sub/up/sub/up/x"),
            link("b", "sub/up/sub/../x"),
            link("c", "missing/../x"),
        ];
        assert!(check_symlink_chains(&ok).is_ok());
        let escape = [link("sub/up", ".."), link("esc", "sub/up/../x")];
        assert_eq!(check_symlink_chains(&escape).unwrap_err().0, "esc");
        let deep = [link("d/e/two", "../.."), link("x", "d/e/two/d/e/two/..")];
        assert_eq!(check_symlink_chains(&deep).unwrap_err().0, "x");
        let looped = [link("a", "b"), link("b", "a")];
        assert!(
            check_symlink_chains(&looped)
                .unwrap_err()
                .1
                .contains("loop")
        );
    }

    #[test]
    fn sorting_is_by_bytes_and_parents_first() {
        let mk = |p: &str| Entry {
            path: p.into(),
            kind: EntryKind::Dir,
        };
        let mut v = vec![mk("a/x"), mk("a-b"), mk("B"), mk("a")];
        sort_entries(&mut v);
        let order: Vec<_> = v.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(order, ["B", "a", "a-b", "a/x"]);
    }
}
