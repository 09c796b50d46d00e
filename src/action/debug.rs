//! `RUNNER_DEBUG=1` (a re-run with debug logging, or the repository
//! variable `ACTIONS_STEP_DEBUG`): the library's `log::debug!` records
//! (each registry request, each history step) become `::debug::` lines,
//! which the runner shows only in debug runs.
//!
//! Why `log` and not a callback in the request: the records come from deep
//! inside the registry client and the history walk; the `log` facade keeps
//! the library free of any knowledge of the runner, and costs nothing when
//! no logger is installed (the CLI installs none).

use super::commands;

/// Prints this crate's debug records as workflow `::debug::` lines;
/// other crates' (reqwest, rustls, ...) are left out.
struct RunnerDebug;

impl log::Log for RunnerDebug {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.target().starts_with("settings_image")
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            commands::say(&commands::debug(&record.args().to_string()));
        }
    }

    fn flush(&self) {}
}

static LOGGER: RunnerDebug = RunnerDebug;

/// Installs the `::debug::` logger when `RUNNER_DEBUG` is `1`; returns
/// whether it is on.
pub fn init(runner_debug: Option<&str>) -> bool {
    if runner_debug.map(str::trim) != Some("1") {
        return false;
    }
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(log::LevelFilter::Debug);
    }
    true
}
