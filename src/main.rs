use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // First, before any thread: a signal removes our temporary files.
    settings_image::scratch::handle_signals();
    let cli = settings_image::cli::Cli::parse();
    match settings_image::cli::run(cli) {
        Ok(code) => code,
        Err(err) => settings_image::cli::report_error(&err),
    }
}
