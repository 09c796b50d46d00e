//! The command-line front end: clap arguments turned into a [`Request`].

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::error::{Error, Result};
use crate::request::{self, Request, Target};

/// Package a settings folder into an OCI image for Kubernetes image volumes.
#[derive(Debug, Parser)]
#[command(name = "settings-image", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Build the image into an OCI image layout directory (no registry needed).
    Build(BuildArgs),
}

/// Arguments of `build`.
#[derive(Debug, Args)]
pub struct BuildArgs {
    /// The settings folder to package.
    #[arg(long, value_name = "DIR")]
    pub path: PathBuf,
    /// The OCI image layout directory to write (created when missing).
    #[arg(long, value_name = "LAYOUT_DIR")]
    pub output: PathBuf,
    /// A tag to write; may be repeated.
    #[arg(long = "tag", value_name = "TAG")]
    pub tags: Vec<String>,
    /// Print one JSON object instead of a human summary.
    #[arg(long)]
    pub json: bool,
}

fn print_report(report: &crate::report::Report, json: bool) -> Result<()> {
    if json {
        let s = serde_json::to_string(report)
            .map_err(|e| Error::io("printing the report", std::io::Error::other(e)))?;
        println!("{s}");
    } else {
        print!("{}", report.human());
    }
    Ok(())
}

/// Runs the parsed command line.
pub fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Build(args) => {
            let req = Request {
                path: args.path,
                tags: args.tags,
                target: Target::Layout(args.output),
            };
            let report = request::run(&req)?;
            print_report(&report, args.json)
        }
    }
}

/// Prints an error with its hint to stderr and returns the exit code.
pub fn report_error(err: &Error) -> i32 {
    eprintln!("error: {err}");
    if let Some(hint) = err.hint() {
        eprintln!("hint: {hint}");
    }
    err.exit_code()
}
