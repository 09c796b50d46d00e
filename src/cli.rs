//! The command-line front end: clap arguments turned into a [`Request`].

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::error::{Error, Result};
use crate::history::{self, SourceMode, Token};
use crate::publish::registry::{self, Credentials};
use crate::request::{self, Request, Target};
use std::io::Read;

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
    /// Print the timestamp tag `PREFIX-<ts>-<sha7>` of the commit that last
    /// changed the folder (what `git log -1 -- DIR` names).
    Tag(TagArgs),
    /// Build the image and push it to a registry (idempotent; timestamp tags never move).
    Push(PushArgs),
    /// Show an image's digest, annotations and provenance (which commit,
    /// ref, builder and run) from its referrers.
    Inspect(InspectArgs),
}

/// Arguments of `inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The image, HOST/NAME:TAG or HOST/NAME@sha256:HEX.
    #[arg(value_name = "REFERENCE")]
    pub reference: String,
    /// Use plain HTTP for a non-loopback registry (loopback hosts always use it).
    #[arg(long)]
    pub insecure: bool,
    /// Print one JSON object instead of a human summary.
    #[arg(long)]
    pub json: bool,
}

/// Git history options shared by the commands that build.
#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// Also tag the image `PREFIX-<committer time>-<sha7>` from the commit
    /// that last changed the folder; PREFIX is usually the branch name
    /// (`feature/x` becomes `feature-x`).
    #[arg(long, value_name = "PREFIX")]
    pub timestamp_tag: Option<String>,
    /// Inside git, package the folder as the commit holds it (tracked files
    /// only) or as it is on disk.
    #[arg(long, value_enum, default_value_t = SourceMode::Commit)]
    pub source: SourceMode,
    /// GitHub token for the API fallback on shallow clones.
    #[command(flatten)]
    pub github: GitHubArgs,
}

/// The GitHub token, from a flag or `GITHUB_TOKEN`; never printed.
#[derive(Debug, Args)]
pub struct GitHubArgs {
    /// Token for the GitHub API, used only when a shallow clone cannot tell
    /// which commit last changed the folder (with GITHUB_REPOSITORY).
    #[arg(
        long = "github-token",
        value_name = "TOKEN",
        env = "GITHUB_TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
}

impl GitHubArgs {
    fn token(&self) -> Option<Token> {
        self.token.clone().and_then(Token::new)
    }
}

/// Arguments of `tag`.
#[derive(Debug, Args)]
pub struct TagArgs {
    /// The settings folder.
    #[arg(long, value_name = "DIR")]
    pub path: PathBuf,
    /// The tag prefix, usually the branch name (sanitized into a tag).
    #[arg(long, value_name = "PREFIX")]
    pub prefix: String,
    /// Print one JSON object (tag, commit, timestamp, committed_at, path).
    #[arg(long)]
    pub json: bool,
    /// GitHub token for the API fallback on shallow clones.
    #[command(flatten)]
    pub github: GitHubArgs,
}

/// Arguments of `push`.
#[derive(Debug, Args)]
pub struct PushArgs {
    /// The settings folder to package.
    #[arg(long, value_name = "DIR")]
    pub path: PathBuf,
    /// The repository to push to, HOST/NAME (e.g. ghcr.io/OWNER/settings).
    #[arg(long, value_name = "HOST/NAME")]
    pub repository: String,
    /// A tag to write; may be repeated. The first one is used in `reference`.
    #[arg(long = "tag", value_name = "TAG")]
    pub tags: Vec<String>,
    /// Use plain HTTP for a non-loopback registry (loopback hosts always use it).
    #[arg(long)]
    pub insecure: bool,
    /// Upload each blob in one PUT (Google Artifact Registry) instead of 4 MiB chunks.
    #[arg(long)]
    pub monolithic: bool,
    /// Registry username (or SETTINGS_IMAGE_USERNAME); the password comes from
    /// --password-stdin or SETTINGS_IMAGE_PASSWORD.
    #[arg(long, value_name = "USER", env = "SETTINGS_IMAGE_USERNAME")]
    pub username: Option<String>,
    /// Read the password or token from standard input.
    #[arg(long)]
    pub password_stdin: bool,
    /// Print one JSON object instead of a human summary.
    #[arg(long)]
    pub json: bool,
    /// Do not attach SLSA provenance (an in-toto referrer) to the pushed image.
    #[arg(long)]
    pub no_provenance: bool,
    /// Git history: timestamp tag, source mode, GitHub token.
    #[command(flatten)]
    pub history: HistoryArgs,
}

fn push_credentials(args: &PushArgs) -> Result<Option<Credentials>> {
    let password = if args.password_stdin {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| Error::io("reading the password from standard input", e))?;
        Some(s.trim_end_matches(['\n', '\r']).to_string())
    } else {
        std::env::var("SETTINGS_IMAGE_PASSWORD").ok()
    };
    match (&args.username, password) {
        (Some(u), Some(p)) if !u.is_empty() && !p.is_empty() => Ok(Some(Credentials {
            username: u.clone(),
            password: p,
        })),
        (None, None) => Ok(None),
        (Some(u), None) if u.is_empty() => Ok(None),
        (None, Some(_)) if !args.password_stdin => Ok(None),
        _ => Err(Error::input(
            "a registry username needs a password and a password needs a username",
            Some(
                "give --username USER with --password-stdin (or set SETTINGS_IMAGE_USERNAME and SETTINGS_IMAGE_PASSWORD)"
                    .to_string(),
            ),
        )),
    }
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
    /// Git history options.
    #[command(flatten)]
    pub history: HistoryArgs,
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
                source: args.history.source,
                timestamp_tag: args.history.timestamp_tag,
                github_token: args.history.github.token(),
                provenance: false,
            };
            let report = request::run(&req)?;
            print_report(&report, args.json)
        }
        Command::Tag(args) => run_tag(&args),
        Command::Push(args) => {
            let credentials = push_credentials(&args)?;
            let req = Request {
                path: args.path,
                tags: args.tags,
                target: Target::Registry(registry::Options {
                    repository: args.repository,
                    insecure: args.insecure,
                    monolithic: args.monolithic,
                    credentials,
                }),
                source: args.history.source,
                timestamp_tag: args.history.timestamp_tag,
                github_token: args.history.github.token(),
                provenance: !args.no_provenance,
            };
            let report = request::run(&req)?;
            print_report(&report, args.json)
        }
        Command::Inspect(args) => run_inspect(&args),
    }
}

fn run_inspect(args: &InspectArgs) -> Result<()> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let credentials = match (
        env("SETTINGS_IMAGE_USERNAME"),
        env("SETTINGS_IMAGE_PASSWORD"),
    ) {
        (Some(username), Some(password)) => Some(Credentials { username, password }),
        _ => None,
    };
    let found = crate::inspect::inspect(&args.reference, args.insecure, credentials)?;
    if args.json {
        let s = serde_json::to_string(&found)
            .map_err(|e| Error::io("printing the inspection", std::io::Error::other(e)))?;
        println!("{s}");
    } else {
        print!("{}", found.human());
    }
    Ok(())
}

fn run_tag(args: &TagArgs) -> Result<()> {
    crate::tag::sanitize_prefix(&args.prefix)?;
    let token = args.github.token();
    let lc = history::last_change(&args.path, token.as_ref())?;
    if lc.from_github {
        eprintln!(
            "note: shallow clone; the GitHub API named commit {} as the last change of {}",
            lc.commit.id, lc.repo_path
        );
    }
    let tag = crate::tag::timestamp_tag(&args.prefix, lc.commit.timestamp, &lc.commit.id)?;
    if args.json {
        let v = serde_json::json!({
            "tag": tag,
            "commit": lc.commit.id,
            "timestamp": lc.commit.timestamp,
            "committed_at": lc.commit.committed_at(),
            "path": lc.repo_path,
        });
        println!("{v}");
    } else {
        println!("{tag}");
    }
    Ok(())
}

/// Prints an error with its hint to stderr and returns the exit code.
pub fn report_error(err: &Error) -> i32 {
    eprintln!("error: {err}");
    if let Some(hint) = err.hint() {
        eprintln!("hint: {hint}");
    }
    err.exit_code()
}
