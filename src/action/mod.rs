//! The GitHub container action front end: `INPUT_*` in, `$GITHUB_OUTPUT`
//! and `$GITHUB_STEP_SUMMARY` out. The only module that knows the runner.

pub mod commands;
pub mod inputs;
pub mod summary;
