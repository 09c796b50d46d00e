//! What the command line shows while it works, on stderr: progress bars
//! for the library's tasks ([`crate::progress`]) when stderr is a terminal,
//! and with `-v` each debug record (each registry request, each history
//! step: what the action's `RUNNER_DEBUG=1` log shows) as a `debug:` line.
//!
//! Progress is drawn only for a person: never when stderr is a pipe or a
//! file (a CI log), never under `CI` (set by GitHub Actions, GitLab,
//! Buildkite, ...), never with `--json`. indicatif draws it: it redraws
//! at most 20 times a second, and a `debug:` line goes above the bars.

use std::io::IsTerminal;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::front;
use crate::progress::{Bar, Sink, Unit};

/// Whether progress is drawn: stderr is a terminal, not CI, not `--json`.
pub fn wanted(env: &front::Env, json: bool) -> bool {
    !json && front::var(env, "CI").is_none() && std::io::stderr().is_terminal()
}

/// The bars on stderr, once installed.
static BARS: OnceLock<MultiProgress> = OnceLock::new();

/// Installs the terminal's progress sink.
pub fn install() {
    let bars = BARS.get_or_init(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr()));
    crate::progress::install(Box::new(Terminal(bars.clone())));
}

/// Prints `line` on stderr, above any bars being drawn.
fn eprint_line(line: &str) {
    match BARS.get() {
        Some(bars) => bars.suspend(|| crate::output::eprintln(line)),
        None => crate::output::eprintln(line),
    }
}

struct Terminal(MultiProgress);

impl Sink for Terminal {
    fn start(&self, what: String, total: Option<u64>, unit: Unit) -> Arc<dyn Bar> {
        let template = match (unit, total) {
            (Unit::Bytes, Some(_)) => {
                "{spinner} {msg} {wide_bar} {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec}"
            }
            (Unit::Bytes, None) => "{spinner} {msg} {binary_bytes}",
            (Unit::Items(_), Some(_)) => "{spinner} {msg} {wide_bar} {pos}/{len} {prefix}",
            (Unit::Items(_), None) => "{spinner} {msg}: {pos} {prefix}",
            (Unit::Wait, _) => "{spinner} {msg} ({elapsed})",
        };
        // Set up hidden, then drawn as one of the bars: drawn on its own
        // first, or before its words, a first frame would stay behind.
        let bar = ProgressBar::with_draw_target(total, ProgressDrawTarget::hidden());
        // A template is a constant above: it always parses.
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        if let Unit::Items(name) = unit {
            bar.set_prefix(name);
        }
        bar.set_message(what);
        let bar = self.0.add(bar);
        bar.enable_steady_tick(Duration::from_millis(100));
        Arc::new(Shown(bar))
    }
}

/// A bar on the terminal, cleared when its task ends.
struct Shown(ProgressBar);

impl Bar for Shown {
    fn inc(&self, n: u64) {
        self.0.inc(n);
    }

    fn set(&self, done: u64) {
        self.0.set_position(done);
    }
}

impl Drop for Shown {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}

/// `-v`: this crate's debug records on stderr as `debug: [SECONDS] ...`
/// lines (seconds since the start: where a slow run spends its time).
/// Other crates' records (reqwest, rustls, gix) are left out, as the
/// action's `::debug::` lines leave them out.
struct Verbose {
    started: Instant,
}

impl log::Log for Verbose {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.target().starts_with("settings_image")
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            let secs = self.started.elapsed().as_secs_f64();
            eprint_line(&format!("debug: [{secs:7.3}s] {}", record.args()));
        }
    }

    fn flush(&self) {}
}

static VERBOSE: OnceLock<Verbose> = OnceLock::new();

/// Installs the `-v` logger.
pub fn verbose() {
    let logger = VERBOSE.get_or_init(|| Verbose {
        started: Instant::now(),
    });
    if log::set_logger(logger).is_ok() {
        log::set_max_level(log::LevelFilter::Debug);
    }
}
