//! Progress of long work (the history walk, the layer build, each blob's
//! upload, a registry's retries), for a face that shows it.
//!
//! A facade like `log`: the library reports tasks and their counts, a face
//! installs one [`Sink`] for the process (the CLI's, on a terminal only:
//! `cli/progress.rs`), and with none installed (the action, the controller,
//! the CLI in a pipe, CI or `--json`) a task is a `None` and costs one
//! branch. The library never knows whether a terminal exists.

use std::sync::{Arc, OnceLock};

/// What a task counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Bytes (shown as KiB, MiB, ...).
    Bytes,
    /// Things of the given plural name ("commits", "files").
    Items(&'static str),
    /// Nothing counted: a wait, shown by its words.
    Wait,
}

/// One task being shown; it ends when dropped.
pub trait Bar: Send + Sync {
    /// Adds `n` to what is done.
    fn inc(&self, n: u64);
    /// Sets what is done (an upload starting over from `done`).
    fn set(&self, done: u64);
}

/// Where tasks are shown: installed once by a face.
pub trait Sink: Send + Sync {
    /// Starts showing a task: `what` it is, its `total` when known.
    fn start(&self, what: String, total: Option<u64>, unit: Unit) -> Arc<dyn Bar>;
}

static SINK: OnceLock<Box<dyn Sink>> = OnceLock::new();

/// Installs the process's sink; false when one is installed already.
pub fn install(sink: Box<dyn Sink>) -> bool {
    SINK.set(sink).is_ok()
}

/// A task: shown while it lives when a sink is installed, else nothing.
/// Clones count into the same task (a request body's stream holds one);
/// dropping the last ends it (the sink clears it).
#[derive(Clone)]
pub struct Task(Option<Arc<dyn Bar>>);

impl Task {
    /// Starts a task; `what` is only called when a sink shows it.
    pub fn start(what: impl FnOnce() -> String, total: Option<u64>, unit: Unit) -> Task {
        Task(SINK.get().map(|s| s.start(what(), total, unit)))
    }

    /// A task that shows nothing.
    pub const fn none() -> Task {
        Task(None)
    }

    /// Whether a sink shows this task.
    pub fn shown(&self) -> bool {
        self.0.is_some()
    }

    /// Adds `n` to what is done.
    pub fn inc(&self, n: u64) {
        if let Some(b) = &self.0 {
            b.inc(n);
        }
    }

    /// Sets what is done.
    pub fn set(&self, done: u64) {
        if let Some(b) = &self.0 {
            b.set(done);
        }
    }
}
