//! The mirrors on disk: one bare repository per URL under the cache root,
//! the two locks beside each, the bytes they use, and the eviction that
//! keeps the root inside its budget.
//!
//! ```text
//! ROOT/KEY/             the bare repository (HEAD, config, objects/, refs/)
//! ROOT/KEY.fetch.lock   exclusive: the one fetch (or re-clone) of this URL
//! ROOT/KEY.use.lock     shared: every fetch and every open `Mirror`;
//!                       exclusive: replacing (re-clone) or deleting KEY/
//! ROOT/KEY.new-*        a clone in progress, renamed to KEY/ when complete
//! ```
//!
//! KEY is a hash of the URL. Locks are `flock`s: released by the kernel
//! when their holder dies, so a killed process leaves no stale lock.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use sha2::{Digest, Sha256};

/// The directory name of the mirror of `url`: a hash, so any URL is a safe
/// name and two URLs never share a directory.
pub(super) fn key(url: &str) -> String {
    let digest = Sha256::digest(url.as_bytes());
    hex::encode(&digest[..16])
}

/// A held `flock`, released when dropped.
#[derive(Debug)]
pub(super) struct Lock {
    file: File,
    path: PathBuf,
}

/// How to take a lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    Shared,
    Exclusive,
}

fn flock(file: &File, mode: Mode, wait: bool) -> io::Result<bool> {
    let mut op = match mode {
        Mode::Shared => libc::LOCK_SH,
        Mode::Exclusive => libc::LOCK_EX,
    };
    if !wait {
        op |= libc::LOCK_NB;
    }
    loop {
        // SAFETY: flock on a file descriptor we own; no memory is involved.
        let rc = unsafe { libc::flock(file.as_raw_fd(), op) };
        if rc == 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::Interrupted => continue,
            io::ErrorKind::WouldBlock => return Ok(false),
            _ => return Err(e),
        }
    }
}

impl Lock {
    /// Takes the lock file at `path` in `mode`, waiting for it when `wait`
    /// (else `None` when someone holds it). An eviction may delete the
    /// file while we wait on it: the lock is then taken again on the file
    /// that is there now, so two holders never hold different files.
    pub(super) fn take(path: &Path, mode: Mode, wait: bool) -> io::Result<Option<Lock>> {
        loop {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(path)?;
            if !flock(&file, mode, wait)? {
                return Ok(None);
            }
            let held = file.metadata()?;
            match fs::metadata(path) {
                Ok(now) if now.ino() == held.ino() && now.dev() == held.dev() => {
                    return Ok(Some(Lock {
                        file,
                        path: path.to_path_buf(),
                    }));
                }
                Ok(_) => continue,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Turns this shared lock into an exclusive one when nobody else holds
    /// it; `false` (still shared) otherwise. `flock` converts by dropping
    /// the held lock first, so a failed attempt holds nothing: the shared
    /// lock is taken again before returning. Only under the fetch lock,
    /// which keeps anyone from taking the exclusive lock meanwhile.
    pub(super) fn try_exclusive(&self) -> io::Result<bool> {
        if flock(&self.file, Mode::Exclusive, false)? {
            return Ok(true);
        }
        flock(&self.file, Mode::Shared, true)?;
        Ok(false)
    }

    /// Turns this exclusive lock back into a shared one.
    pub(super) fn to_shared(&self) -> io::Result<()> {
        flock(&self.file, Mode::Shared, true).map(|_| ())
    }

    /// Deletes the lock file while holding it (the eviction of its mirror).
    fn unlink(&self) {
        let _ = fs::remove_file(&self.path);
    }
}

/// Bytes a directory tree takes on disk (allocated blocks, not lengths);
/// 0 when it does not exist.
pub(super) fn disk_usage(path: &Path) -> u64 {
    let Ok(meta) = fs::symlink_metadata(path) else {
        return 0;
    };
    let mut total = meta.blocks() * 512;
    if meta.is_dir()
        && let Ok(entries) = fs::read_dir(path)
    {
        for e in entries.flatten() {
            total += disk_usage(&e.path());
        }
    }
    total
}

/// How many packs the repository at `git_dir` holds.
pub(super) fn pack_count(git_dir: &Path) -> usize {
    fs::read_dir(git_dir.join("objects/pack"))
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().ends_with(".pack"))
                .count()
        })
        .unwrap_or(0)
}

/// Marks the mirror at `dir` as used now: its modification time is what
/// the least-recently-used eviction orders by.
pub(super) fn touch(dir: &Path) -> io::Result<()> {
    File::open(dir)?.set_modified(SystemTime::now())
}

/// Creates an empty bare repository at `dir` whose `origin` is `url`, by
/// hand: the few files git needs (no hooks or samples), HEAD naming
/// `branch`. `url` has been checked to hold no quote, backslash or
/// control character, so it needs no escaping.
pub(super) fn init_bare(dir: &Path, url: &str, branch: &str) -> io::Result<()> {
    for sub in ["objects/pack", "objects/info", "refs/heads", "refs/tags"] {
        fs::create_dir_all(dir.join(sub))?;
    }
    fs::write(dir.join("HEAD"), format!("ref: refs/heads/{branch}\n"))?;
    fs::write(
        dir.join("config"),
        format!(
            "[core]\n\trepositoryformatversion = 0\n\tbare = true\n[remote \"origin\"]\n\turl = {url}\n"
        ),
    )
}

/// A fresh name beside `dir` for a clone in progress (`KEY.new-RANDOM`) or
/// a replaced mirror on its way out (`KEY.old-RANDOM`).
pub(super) fn sibling(dir: &Path, what: &str) -> PathBuf {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    dir.with_file_name(format!("{name}.{what}-{:016x}", fastrand::u64(..)))
}

/// Removes what an interrupted clone or replacement of the mirror at
/// `dir` left beside it (`KEY.new-*`, `KEY.old-*`). Only under the
/// mirror's fetch lock: nobody else makes those.
pub(super) fn sweep_leftovers(dir: &Path) {
    let (Some(root), Some(name)) = (dir.parent(), dir.file_name()) else {
        return;
    };
    let name = name.to_string_lossy();
    let Ok(entries) = fs::read_dir(root) else {
        return;
    };
    for e in entries.flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        if n.starts_with(&format!("{name}.new-")) || n.starts_with(&format!("{name}.old-")) {
            let _ = fs::remove_dir_all(e.path());
        }
    }
}

/// Removes what a fetch killed midway leaves in the mirror at `git_dir`:
/// reference lock files (which would fail every later update of the
/// reference) and temporary pack files. Only under the fetch lock.
pub(super) fn clear_stale(git_dir: &Path) {
    fn locks(dir: &Path) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let path = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                locks(&path);
            } else if e.file_name().to_string_lossy().ends_with(".lock") {
                let _ = fs::remove_file(&path);
            }
        }
    }
    locks(&git_dir.join("refs"));
    for name in [
        "packed-refs.lock",
        "HEAD.lock",
        "config.lock",
        "shallow.lock",
    ] {
        let _ = fs::remove_file(git_dir.join(name));
    }
    if let Ok(entries) = fs::read_dir(git_dir.join("objects/pack")) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with(".tmp") || name.starts_with("tmp_") {
                let _ = fs::remove_file(e.path());
            }
        }
    }
}

/// One mirror found under the root.
struct Found {
    key: String,
    used: SystemTime,
    bytes: u64,
}

/// Deletes least-recently-used mirrors other than `keep` until the root
/// holds at most `budget` bytes. A mirror in use (a fetch or an open
/// `Mirror` holds a lock) is skipped. Returns the evicted keys and the
/// bytes the root holds afterwards.
pub(super) fn evict(root: &Path, keep: &str, budget: u64) -> (Vec<String>, u64) {
    let mut total = disk_usage(root);
    let mut evicted = Vec::new();
    if total <= budget {
        return (evicted, total);
    }
    let mut by_key: HashMap<String, Found> = HashMap::new();
    if let Ok(entries) = fs::read_dir(root) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let key = name.split('.').next().unwrap_or_default().to_string();
            let ours = key.len() == 32 && key.bytes().all(|b| b.is_ascii_hexdigit());
            if !ours || key == keep {
                continue;
            }
            let path = e.path();
            let found = by_key.entry(key.clone()).or_insert(Found {
                key,
                used: SystemTime::UNIX_EPOCH,
                bytes: 0,
            });
            found.bytes += disk_usage(&path);
            if !name.contains('.')
                && let Ok(m) = fs::metadata(&path).and_then(|m| m.modified())
            {
                found.used = m;
            }
        }
    }
    let mut candidates: Vec<Found> = by_key.into_values().collect();
    candidates.sort_by_key(|f| f.used);
    for f in candidates {
        if total <= budget {
            break;
        }
        let Ok(Some(fetching)) = Lock::take(
            &root.join(format!("{}.fetch.lock", f.key)),
            Mode::Exclusive,
            false,
        ) else {
            continue;
        };
        let Ok(Some(using)) = Lock::take(
            &root.join(format!("{}.use.lock", f.key)),
            Mode::Exclusive,
            false,
        ) else {
            continue;
        };
        let dir = root.join(&f.key);
        sweep_leftovers(&dir);
        if dir.exists() && fs::remove_dir_all(&dir).is_err() {
            continue;
        }
        using.unlink();
        fetching.unlink();
        log::info!(
            "mirror: evicted {} ({} bytes) to stay within the cache budget",
            f.key,
            f.bytes
        );
        total = total.saturating_sub(f.bytes);
        evicted.push(f.key);
    }
    (evicted, total)
}
