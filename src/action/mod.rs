//! The GitHub container action front end: `INPUT_*` in, `$GITHUB_OUTPUT`
//! and `$GITHUB_STEP_SUMMARY` out. The only module that knows the runner.

pub mod commands;
pub mod inputs;
pub mod promote;
pub mod summary;

/// What `settings-image action` does (its positional argument).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Promote the newest candidate into a channel (promote/action.yml).
    Promote,
}

/// Runs the action in `mode` with the process environment; returns the exit
/// code. Errors are reported as `::error` workflow commands, not returned.
pub fn run(mode: Mode) -> i32 {
    let env: inputs::Env = std::env::vars().collect();
    match mode {
        Mode::Promote => promote::run(&env),
    }
}
