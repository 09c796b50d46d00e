//! The settings folder as a sorted list of entries, read either from the
//! working tree on disk or (in the history module) from a git commit.

pub mod lfs;
pub mod worktree;

use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;

use crate::error::{Error, Result};

/// One entry of the folder, relative to the folder's root, as
/// [`Entries`] hands it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry<'a> {
    /// Path relative to the folder, `/`-separated, no leading `./`, no
    /// trailing slash. Valid UTF-8 by construction.
    pub path: &'a str,
    /// What the entry is.
    pub kind: EntryKind<'a>,
}

/// The kinds of entries a settings image can hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind<'a> {
    /// A directory (written with mode 0755).
    Dir,
    /// A regular file (mode 0755 when executable, else 0644).
    File {
        /// Exact content length in bytes.
        size: u64,
        /// Whether any execute bit is set.
        executable: bool,
        /// Where the bytes come from.
        content: Content<'a>,
    },
    /// A relative symlink whose target stays inside the folder.
    Symlink {
        /// The link target, exactly as stored.
        target: &'a str,
    },
}

/// The deepest a folder may nest: a path holds at most this many
/// components below the settings folder. Linux opens no path longer than
/// `PATH_MAX` (4096 bytes with its NUL), and a path of 2049 components
/// (one character each, `/` between) is already 4097 bytes: nothing in a
/// pod could open a file deeper than this by its path, and a commit of a
/// few kilobytes nesting 20,000 trees would otherwise be listed (paths of
/// every level, about depth² bytes) before that was noticed. Both
/// readers (the disk and a commit) walk without recursion and stop here.
pub const MAX_DEPTH: usize = 2048;

/// The error for `path` (relative to `root`, `depth` components) when it
/// goes deeper than [`MAX_DEPTH`]; `commit` is the commit read, if any,
/// for the message. The path is shown cut: it is thousands of bytes long.
pub fn check_depth(
    root: &std::path::Path,
    path: &str,
    depth: usize,
    commit: Option<&dyn std::fmt::Display>,
) -> Result<()> {
    if depth <= MAX_DEPTH {
        return Ok(());
    }
    let shown: String = path.chars().take(60).collect();
    let in_commit = commit
        .map(|c| format!(" in commit {c}"))
        .unwrap_or_default();
    Err(Error::Source {
        path: root.to_path_buf(),
        message: format!(
            "holds a folder nested more than {MAX_DEPTH} levels deep{in_commit} ({shown}...): \
             {MAX_DEPTH} levels is the most a settings image holds, as no deeper path fits Linux's \
             PATH_MAX of 4096 bytes"
        )
        .into(),
        hint: Some("flatten the folder: keep the settings files at most a few levels deep".into()),
    })
}

/// Where a file's bytes are read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Content<'a> {
    /// The file on disk at the entry's path under [`Source::root`].
    Disk,
    /// An object in a store (a git blob), named by its hex id.
    Object(&'a str),
}

/// Opens objects named by [`Content::Object`]; implemented by the history
/// module for git blobs.
pub trait ObjectStore: Send + Sync + std::fmt::Debug {
    /// Opens the object with the given hex id for reading; `size` is its
    /// size as listed (how to read it: a large one as a stream).
    fn open(&self, id: &str, size: u64) -> std::io::Result<Box<dyn Read + '_>>;
}

/// One entry as stored, in 16 bytes: its bytes in [`Entries::text`] are
/// the path, then the symlink target or the object id (`extra` bytes).
#[derive(Debug, Clone, Copy)]
struct Record {
    /// Start of the path in the text.
    start: u32,
    /// The low 32 bits of a file's size.
    size_low: u32,
    /// The path's length (a path is at most 4096 bytes on Linux).
    path: u16,
    /// The symlink target's (at most 4095 bytes) or object id's length.
    extra: u16,
    /// Bits 32 to 47 of a file's size: files up to 256 TiB.
    size_high: u16,
    kind: RecordKind,
}

impl Record {
    fn size(&self) -> u64 {
        u64::from(self.size_high) << 32 | u64::from(self.size_low)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RecordKind {
    Dir,
    File,
    Executable,
    Symlink,
}

/// The entries of a folder, stored compactly so that memory per file stays
/// small (a folder of 100,000 files is listed in about 6 MB): one text
/// holding every path (and symlink target or object id), one 16-byte record
/// per entry, no allocation per entry. [`Entries::sort`] puts them in path
/// byte order.
#[derive(Debug, Clone, Default)]
pub struct Entries {
    text: String,
    records: Vec<Record>,
}

impl Entries {
    /// No entries.
    pub fn new() -> Entries {
        Entries::default()
    }

    fn push(&mut self, path: &str, extra: &str, kind: RecordKind, size: u64) -> Result<()> {
        let too_many = || {
            Error::input(
                "the folder's paths add up to more than 4 GiB",
                Some("package a smaller folder".to_string()),
            )
        };
        let start = u32::try_from(self.text.len()).map_err(|_| too_many())?;
        let long = |what: &str, len: usize| {
            Error::input(
                format!("{what} is {len} bytes long, more than 65535: {path:?}"),
                Some("package a folder with shorter paths".to_string()),
            )
        };
        let path_len = u16::try_from(path.len()).map_err(|_| long("a path", path.len()))?;
        let extra_len =
            u16::try_from(extra.len()).map_err(|_| long("a symlink target", extra.len()))?;
        u32::try_from(self.text.len() + path.len() + extra.len()).map_err(|_| too_many())?;
        let size_high = u16::try_from(size >> 32).map_err(|_| {
            Error::input(
                format!("{path} is {size} bytes, more than 256 TiB"),
                Some("a settings image holds small files".to_string()),
            )
        })?;
        self.text.push_str(path);
        self.text.push_str(extra);
        self.records.push(Record {
            start,
            // The low half; the high half is size_high.
            size_low: (size & 0xffff_ffff) as u32,
            path: path_len,
            extra: extra_len,
            size_high,
            kind,
        });
        Ok(())
    }

    /// Adds a directory.
    pub fn push_dir(&mut self, path: &str) -> Result<()> {
        self.push(path, "", RecordKind::Dir, 0)
    }

    /// Adds a regular file of `size` bytes whose content is `content`.
    pub fn push_file(
        &mut self,
        path: &str,
        size: u64,
        executable: bool,
        content: Content<'_>,
    ) -> Result<()> {
        let kind = if executable {
            RecordKind::Executable
        } else {
            RecordKind::File
        };
        let id = match content {
            Content::Disk => "",
            Content::Object(id) => id,
        };
        self.push(path, id, kind, size)
    }

    /// Adds a symlink.
    pub fn push_symlink(&mut self, path: &str, target: &str) -> Result<()> {
        self.push(path, target, RecordKind::Symlink, 0)
    }

    fn path_of(&self, r: &Record) -> &str {
        let start = r.start as usize;
        &self.text[start..start + r.path as usize]
    }

    fn entry(&self, r: &Record) -> Entry<'_> {
        let path = self.path_of(r);
        let at = r.start as usize + r.path as usize;
        let extra = &self.text[at..at + r.extra as usize];
        let kind = match r.kind {
            RecordKind::Dir => EntryKind::Dir,
            RecordKind::File | RecordKind::Executable => EntryKind::File {
                size: r.size(),
                executable: r.kind == RecordKind::Executable,
                content: if extra.is_empty() {
                    Content::Disk
                } else {
                    Content::Object(extra)
                },
            },
            RecordKind::Symlink => EntryKind::Symlink { target: extra },
        };
        Entry { path, kind }
    }

    /// Sorts the entries by path bytes, which puts every directory before
    /// its children (a prefix sorts first). Paths are unique, so the order
    /// is fully determined (and the sort needs no extra memory).
    pub fn sort(&mut self) {
        let mut records = std::mem::take(&mut self.records);
        records.sort_unstable_by(|a, b| {
            let (a, b) = (self.path_of(a), self.path_of(b));
            a.as_bytes().cmp(b.as_bytes())
        });
        self.records = records;
    }

    /// The entries in the order they were added (or sorted).
    pub fn iter(&self) -> impl Iterator<Item = Entry<'_>> + '_ {
        self.records.iter().map(|r| self.entry(r))
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
}

/// The folder to package: its entries in path-byte order, and where file
/// contents come from.
#[derive(Debug, Clone)]
pub struct Source {
    /// The folder as the user named it (for messages, and where
    /// [`Content::Disk`] files are read).
    pub root: PathBuf,
    /// Entries sorted by path bytes; parents come before their children.
    pub entries: Entries,
    /// The store that [`Content::Object`] ids refer to, if any.
    pub objects: Option<Arc<dyn ObjectStore>>,
}

impl Source {
    /// Opens file entry `path`'s content (of `size` bytes, as listed) for
    /// reading.
    pub fn open(
        &self,
        path: &str,
        content: Content<'_>,
        size: u64,
    ) -> std::io::Result<Box<dyn Read + '_>> {
        match content {
            Content::Disk => Ok(Box::new(std::fs::File::open(self.root.join(path))?)),
            Content::Object(id) => match &self.objects {
                Some(store) => store.open(id, size),
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
pub fn check_symlink_chains(entries: &Entries) -> Result<(), (String, String)> {
    let links: std::collections::HashMap<&str, &str> = entries
        .iter()
        .filter_map(|e| match e.kind {
            EntryKind::Symlink { target } => Some((e.path, target)),
            _ => None,
        })
        .collect();
    // In entry order, so the link named in the error is always the same one.
    for e in entries.iter() {
        if let EntryKind::Symlink { target } = e.kind {
            resolve_link(&links, e.path, target).map_err(|m| (e.path.to_string(), m))?;
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
    fn a_record_is_16_bytes_and_keeps_sizes_up_to_256_tib() {
        assert_eq!(std::mem::size_of::<Record>(), 16);
        let mut e = Entries::new();
        let sizes = [
            0,
            1,
            u64::from(u32::MAX),
            1 << 32,
            5 << 32 | 7,
            (1 << 48) - 1,
        ];
        for (i, size) in sizes.iter().enumerate() {
            e.push_file(&format!("f{i}"), *size, i % 2 == 0, Content::Object("ab"))
                .unwrap();
        }
        let got: Vec<u64> = e
            .iter()
            .map(|x| match x.kind {
                EntryKind::File { size, .. } => size,
                _ => panic!("{x:?}"),
            })
            .collect();
        assert_eq!(got, sizes);
        assert!(e.push_file("big", 1 << 48, false, Content::Disk).is_err());
        assert!(e.push_dir(&"d".repeat(65_536)).is_err());
        e.push_dir(&"d".repeat(65_535)).unwrap();
        assert!(e.push_symlink("l", &"x".repeat(65_536)).is_err());
        assert_eq!(e.len(), sizes.len() + 1);
    }

    #[test]
    fn symlink_targets() {
        assert!(check_symlink_target("a.yaml", "b.yaml").is_ok());
        assert!(check_symlink_target("dir/a.yaml", "../b.yaml").is_ok());
        assert!(check_symlink_target("dir/a", "..").is_ok());
        let leaves = |t: &str| {
            Err(format!(
                "symlink target {t:?} leaves the folder; only links inside the folder are kept"
            ))
        };
        assert_eq!(
            check_symlink_target("a.yaml", "../b.yaml"),
            leaves("../b.yaml")
        );
        assert_eq!(check_symlink_target("dir/a", "../../x"), leaves("../../x"));
        assert_eq!(
            check_symlink_target("dir/a", "x/../../../y"),
            leaves("x/../../../y")
        );
        assert_eq!(
            check_symlink_target("a", "/etc/passwd"),
            Err(
                "symlink points to the absolute path \"/etc/passwd\"; only relative links inside \
                 the folder are kept"
                    .to_string()
            )
        );
        assert_eq!(
            check_symlink_target("a", ""),
            Err("symlink has an empty target".to_string())
        );
    }

    fn links(pairs: &[(&str, &str)]) -> Entries {
        let mut e = Entries::new();
        for (path, target) in pairs {
            e.push_symlink(path, target).unwrap();
        }
        e
    }

    #[test]
    fn symlink_chains() {
        let ok = links(&[
            ("sub/up", ".."),
            ("a", "sub/up/sub/up/x"),
            ("b", "sub/up/sub/../x"),
            ("c", "missing/../x"),
        ]);
        assert!(check_symlink_chains(&ok).is_ok());
        let escape = links(&[("sub/up", ".."), ("esc", "sub/up/../x")]);
        assert_eq!(check_symlink_chains(&escape).unwrap_err().0, "esc");
        let deep = links(&[("d/e/two", "../.."), ("x", "d/e/two/d/e/two/..")]);
        assert_eq!(check_symlink_chains(&deep).unwrap_err().0, "x");
        let looped = links(&[("a", "b"), ("b", "a")]);
        assert!(
            check_symlink_chains(&looped)
                .unwrap_err()
                .1
                .contains("loop")
        );
    }

    #[test]
    fn sorting_is_by_bytes_and_parents_first() {
        let mut v = Entries::new();
        for p in ["a/x", "a-b", "B", "a"] {
            v.push_dir(p).unwrap();
        }
        v.sort();
        let order: Vec<_> = v.iter().map(|e| e.path).collect();
        assert_eq!(order, ["B", "a", "a-b", "a/x"]);
    }

    #[test]
    fn entries_keep_what_was_pushed() {
        let mut v = Entries::new();
        v.push_file("z.yaml", 7, false, Content::Disk).unwrap();
        v.push_symlink("link", "z.yaml").unwrap();
        v.push_file("run.sh", 0, true, Content::Object("0123abcd"))
            .unwrap();
        v.push_dir("d").unwrap();
        v.sort();
        let got: Vec<Entry> = v.iter().collect();
        assert_eq!(
            got,
            [
                Entry {
                    path: "d",
                    kind: EntryKind::Dir
                },
                Entry {
                    path: "link",
                    kind: EntryKind::Symlink { target: "z.yaml" }
                },
                Entry {
                    path: "run.sh",
                    kind: EntryKind::File {
                        size: 0,
                        executable: true,
                        content: Content::Object("0123abcd")
                    }
                },
                Entry {
                    path: "z.yaml",
                    kind: EntryKind::File {
                        size: 7,
                        executable: false,
                        content: Content::Disk
                    }
                },
            ]
        );
        assert_eq!(v.len(), 4);
    }
}
