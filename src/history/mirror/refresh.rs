//! The steps of [`Mirrors::fetch`]: receiving the branch into the
//! mirror (cloning it afresh when it is crowded or damaged), and asking
//! for the announced commit by id when the branch no longer leads to it.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use super::{Fetched, Mirrors, Remote, fetch, git, store};
use crate::error::{Error, GitFailure, Result};

/// A local disk failure, `what` of the mirror at `dir`.
pub(super) fn io_error(dir: &Path, what: &str, e: std::io::Error) -> Error {
    Error::io(format!("{what} of the mirror {}", dir.display()), e)
}

impl Mirrors {
    /// Receives `spec` (the branch's refspec) into the mirror at `dir`:
    /// a clone when there is none, a fresh clone when it holds too many
    /// packs or is damaged and nobody reads it (`using` taken
    /// exclusively for that time), a fetch otherwise. Notes in `fetched`
    /// how it was received.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn receive(
        &self,
        dir: &Path,
        remote: &Remote,
        branch: &str,
        spec: &str,
        using: &store::Lock,
        fetched: &mut Fetched,
        interrupt: &AtomicBool,
    ) -> Result<fetch::Received> {
        let io = |what: &str, e: std::io::Error| io_error(dir, what, e);
        let spec = spec.to_string();
        let crowded = dir.exists() && store::pack_count(dir) > self.limits.max_packs;
        let received = if !dir.exists() {
            fetched.cloned = true;
            self.clone_into(dir, remote, branch, &spec, interrupt)?
        } else if crowded
            && using
                .try_exclusive()
                .map_err(|e| io("locking the use", e))?
        {
            // Nobody reads it: replace it with a fresh clone.
            fetched.cloned = true;
            fetched.consolidated = true;
            let result = self.clone_into(dir, remote, branch, &spec, interrupt);
            using.to_shared().map_err(|e| io("locking the use", e))?;
            result?
        } else {
            if crowded {
                log::info!(
                    "mirror: {} holds more than {} packs but is in use; it is consolidated on a later fetch",
                    remote.url(),
                    self.limits.max_packs
                );
            }
            // Under the fetch lock nobody else writes: lock files and
            // temporary packs here are a killed fetch's.
            store::clear_stale(dir);
            match fetch::fetch(
                dir,
                remote,
                std::slice::from_ref(&spec),
                &self.limits,
                interrupt,
            ) {
                Ok(r) => r,
                // Not the server's doing: a damaged mirror. Clone it afresh
                // when nobody reads it.
                Err(Error::Git {
                    kind: GitFailure::Other,
                    message,
                    ..
                }) if using
                    .try_exclusive()
                    .map_err(|e| io("locking the use", e))? =>
                {
                    log::warn!(
                        "mirror: fetching {} into {} failed ({message}); cloning it afresh",
                        remote.url(),
                        dir.display()
                    );
                    fetched.cloned = true;
                    fetched.repaired = true;
                    let result = self.clone_into(dir, remote, branch, &spec, interrupt);
                    using.to_shared().map_err(|e| io("locking the use", e))?;
                    result?
                }
                Err(e) => return Err(e),
            }
        };
        Ok(received)
    }

    /// Fetches commit `c` by id into the mirror at `dir` (`repo`), the
    /// branch no longer leading to it: an error when the server does not
    /// send it. Adds what was received to `fetched`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn fetch_by_id(
        &self,
        dir: &Path,
        repo: &git::Repo,
        remote: &Remote,
        branch: &str,
        head: &str,
        c: &str,
        fetched: &mut Fetched,
        interrupt: &AtomicBool,
    ) -> Result<()> {
        fetched.by_id = true;
        let by_id = fetch::fetch(
            dir,
            remote,
            std::slice::from_ref(&c.to_string()),
            &self.limits,
            interrupt,
        );
        match by_id {
            Ok(r) => {
                fetched.pack_bytes += r.pack_bytes;
                fetched.objects += r.objects;
            }
            Err(
                e @ Error::Git {
                    kind:
                        GitFailure::Auth
                        | GitFailure::Unreachable
                        | GitFailure::Interrupted
                        | GitFailure::TooLarge(_),
                    ..
                },
            ) => {
                return Err(e);
            }
            Err(_) => {}
        }
        if !repo.has_commit(c) {
            return Err(Error::Git {
                url: remote.url().to_string(),
                message: format!(
                    "commit {c} is not on the branch {branch} (now at {head}), and the server does not send it by id"
                ),
                hint: Some(
                    "the branch was rewritten after source-controller fetched it; the next revision it announces is published"
                        .to_string(),
                ),
                kind: GitFailure::NotFound,
            });
        }
        Ok(())
    }
}
