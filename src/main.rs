use clap::Parser;

fn main() {
    // First, before any thread: a signal removes our temporary files.
    settings_image::scratch::handle_signals();
    let cli = settings_image::cli::Cli::parse();
    if let Err(err) = settings_image::cli::run(cli) {
        std::process::exit(settings_image::cli::report_error(&err));
    }
}
