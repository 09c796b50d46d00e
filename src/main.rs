use clap::Parser;

fn main() {
    let cli = settings_image::cli::Cli::parse();
    if let Err(err) = settings_image::cli::run(cli) {
        std::process::exit(settings_image::cli::report_error(&err));
    }
}
