//! Our temporary files (the layer a build stages before it is written or
//! uploaded), so that none outlives the run that made it:
//!
//! - each is named `settings-image-layer-*` in the temporary directory and
//!   holds an exclusive `flock` for as long as the run uses it;
//! - SIGTERM, SIGINT and SIGHUP remove the live ones before the process
//!   exits with `128 + signal` ([`handle_signals`], called first in `main`);
//! - a run killed with SIGKILL cannot clean up, so every new one sweeps:
//!   a file of ours whose lock can be taken has no live owner and goes
//!   ([`sweep`]).
//!
//! Why a lock and not the process id in the name: two containers sharing
//! `/tmp` see different process ids, and a live run's file must never be
//! swept. Why a signal thread (`sigwait`) and not a handler: removing files
//! is not async-signal-safe; a thread may do anything.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use tempfile::NamedTempFile;

use crate::error::{Error, Result};

/// The name prefix of our temporary layer files.
pub const LAYER_PREFIX: &str = "settings-image-layer-";

/// Younger files are never swept: between its creation and its lock, a
/// live run's file holds no lock yet ([`sweep`]'s `fresh`).
const FRESH: std::time::Duration = std::time::Duration::from_secs(10);

/// The live temporary files, removed when a signal stops the run.
static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// What the first signal does instead of exiting, when a long-running
/// front end (the controller) finishes its work first ([`on_signal`]).
type Hook = Box<dyn Fn(&'static str) + Send>;
static HOOK: Mutex<Option<Hook>> = Mutex::new(None);

/// Lets a long-running front end shut down by itself: the first SIGTERM,
/// SIGINT or SIGHUP calls `hook` with the signal's name and nothing else
/// (the front end finishes or abandons its work, removes the live files
/// with [`remove_live`] if it abandons, and exits); a second signal stops
/// the process as before, removing the live files.
pub fn on_signal(hook: impl Fn(&'static str) + Send + 'static) {
    if let Ok(mut h) = HOOK.lock() {
        *h = Some(Box::new(hook));
    }
}

/// Keeps a temporary file registered for removal on a signal; unregisters
/// it when dropped (the [`NamedTempFile`] itself removes the file).
#[derive(Debug)]
pub struct Registered {
    path: PathBuf,
}

impl Drop for Registered {
    fn drop(&mut self) {
        if let Ok(mut live) = LIVE.lock() {
            live.retain(|p| p != &self.path);
        }
    }
}

/// Creates a locked temporary layer file in the temporary directory,
/// registered for removal on SIGTERM/SIGINT/SIGHUP, after sweeping the
/// stale ones earlier runs left behind.
pub fn layer_file() -> Result<(NamedTempFile, Registered)> {
    let dir = std::env::temp_dir();
    sweep(&dir, FRESH);
    let file = tempfile::Builder::new()
        .prefix(LAYER_PREFIX)
        .tempfile_in(&dir)
        .map_err(|e| Error::io("creating a temporary layer file", e))?;
    // Held until the file is closed: tells a sweeping run that we live.
    file.as_file()
        .try_lock()
        .map_err(|e| Error::io("locking the temporary layer file", e.into()))?;
    let path = file.path().to_path_buf();
    if let Ok(mut live) = LIVE.lock() {
        live.push(path.clone());
    }
    Ok((file, Registered { path }))
}

/// Removes the `settings-image-layer-*` files in `dir` whose lock nobody
/// holds and that were last modified at least `fresh` ago (a younger one
/// may belong to a run that has not taken its lock yet): their run was
/// killed. Best effort; returns how many went.
pub fn sweep(dir: &Path, fresh: std::time::Duration) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let is_ours = name.to_str().is_some_and(|n| n.starts_with(LAYER_PREFIX));
        let is_file = entry.file_type().is_ok_and(|t| t.is_file());
        if !is_ours || !is_file {
            continue;
        }
        // A file made this instant may not hold its lock yet.
        let young = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| t.elapsed().is_ok_and(|age| age < fresh));
        if young {
            continue;
        }
        let path = entry.path();
        let Ok(f) = File::open(&path) else { continue };
        if f.try_lock().is_ok() && std::fs::remove_file(&path).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Removes every live temporary file (on the way out after a signal, or
/// when a front end abandons work it cannot finish in time).
pub fn remove_live() {
    if let Ok(live) = LIVE.lock() {
        for p in live.iter() {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Blocks SIGTERM, SIGINT and SIGHUP in this thread and every thread it
/// starts later, and starts the thread that waits for them: it removes the
/// live temporary files, says so on stderr and exits with `128 + signal`.
/// Call it first in `main`, before any other thread exists. Child processes
/// start with an empty signal mask (the standard library resets it).
pub fn handle_signals() {
    // SAFETY: plain libc calls on a zeroed, locally owned sigset_t.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::sigaddset(&mut set, s);
        }
        if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            return;
        }
        set
    };
    let spawned = std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            loop {
                let mut sig: libc::c_int = 0;
                // SAFETY: `set` is a valid signal set; `sig` is written by sigwait.
                if unsafe { libc::sigwait(&set, &mut sig) } != 0 {
                    return;
                }
                let name = match sig {
                    libc::SIGTERM => "SIGTERM",
                    libc::SIGINT => "SIGINT",
                    _ => "SIGHUP",
                };
                // The first signal goes to the front end's hook, once.
                let hook = HOOK.lock().ok().and_then(|mut h| h.take());
                if let Some(hook) = hook {
                    hook(name);
                    continue;
                }
                remove_live();
                crate::output::eprintln(&format!(
                    "settings-image: stopped by {name}; its temporary files are removed"
                ));
                std::process::exit(128 + sig);
            }
        });
    if spawned.is_err() {
        // No watcher: let the signals act as before rather than be lost.
        // SAFETY: as above.
        unsafe {
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweep_takes_only_unlocked_files_of_ours() {
        const DAY: std::time::Duration = std::time::Duration::from_secs(86_400);
        let dir = tempfile::tempdir().unwrap();
        let stale = dir.path().join(format!("{LAYER_PREFIX}stale"));
        std::fs::write(&stale, b"left by a killed run").unwrap();
        let live = dir.path().join(format!("{LAYER_PREFIX}live"));
        std::fs::write(&live, b"in use").unwrap();
        let held = File::open(&live).unwrap();
        held.try_lock().unwrap();
        let other = dir.path().join("someone-elses.tmp");
        std::fs::write(&other, b"not ours").unwrap();
        let fresh = dir.path().join(format!("{LAYER_PREFIX}fresh"));
        std::fs::write(&fresh, b"younger than the threshold, lock not yet taken").unwrap();
        // Ages a day apart around a two-day threshold: the outcome does not
        // depend on how long the test takes.
        let now = std::time::SystemTime::now();
        for (p, age) in [
            (&stale, 3 * DAY),
            (&live, 3 * DAY),
            (&other, 3 * DAY),
            (&fresh, DAY),
        ] {
            File::options()
                .write(true)
                .open(p)
                .unwrap()
                .set_modified(now - age)
                .unwrap();
        }
        assert_eq!(sweep(dir.path(), 2 * DAY), 1);
        assert!(!stale.exists());
        assert!(live.exists(), "a locked file belongs to a live run");
        assert!(other.exists());
        assert!(
            fresh.exists(),
            "a file younger than the threshold may not hold its lock yet"
        );
        // Under a threshold below its age, the unlocked one goes too.
        assert_eq!(sweep(dir.path(), DAY / 2), 1);
        assert!(!fresh.exists());
        assert!(live.exists(), "a locked file belongs to a live run");
        drop(held);
        assert_eq!(sweep(dir.path(), 2 * DAY), 1);
        assert!(!live.exists());
        assert!(other.exists());
    }
}
