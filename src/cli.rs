//! The command-line front end: clap arguments turned into a [`Request`].

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::error::{Error, Result};
use crate::front::{self, Login};
use crate::history::{self, SourceMode, Token};
use crate::promote::BreakGlass;
use crate::registry::{self, Credentials};
use crate::release::ordering::BranchMove;
use crate::request::{self, Request, Target};
use std::io::Read;

pub mod cluster;
pub mod metadata;

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
    /// List, in one history walk and one tag listing per repository, the
    /// folders with no image for their last commit yet, as a JSON
    /// `strategy.matrix` (`{"include":[{path,repository,tag}]}`).
    Plan(PlanArgs),
    /// Show an image's digest, annotations and provenance (which commit,
    /// ref, builder and run) from its referrers.
    Inspect(InspectArgs),
    /// Promote the newest PREFIX tag into a forward-only channel, as the
    /// release policy's windows allow (same digest; no blob uploaded within
    /// one repository, blobs mounted or copied into another).
    Promote(PromoteArgs),
    /// Print the Flux objects (ImageRepository, ImagePolicy,
    /// ImageUpdateAutomation) that follow the timestamp tags of a prefix.
    Flux(cluster::FluxArgs),
    /// Prove that an image is exactly its commit's folder: rebuild it from
    /// the checkout and compare every byte (exit 7 when it is not); with
    /// --scan, every reference in a cluster repository.
    Verify(cluster::VerifyArgs),
    /// The GitHub action's entry point: reads `INPUT_*` and the event,
    /// writes `$GITHUB_OUTPUT` and `$GITHUB_STEP_SUMMARY`.
    Action(ActionArgs),
}

/// Arguments of `action`.
#[derive(Debug, Args)]
pub struct ActionArgs {
    /// What the action does.
    #[arg(value_enum, default_value_t = crate::action::Mode::Publish)]
    pub mode: crate::action::Mode,
}

/// Arguments of `promote`.
#[derive(Debug, Args)]
pub struct PromoteArgs {
    /// The repository holding the candidate tags, HOST/NAME.
    #[arg(long, value_name = "HOST/NAME")]
    pub repository: String,
    /// The prefix of the candidate tags (`main` for `main-<ts>-<sha7>`).
    #[arg(long, value_name = "PREFIX")]
    pub from: String,
    /// The channel; channel tags are `CHANNEL-<ts>-<sha7>`.
    #[arg(long, value_name = "CHANNEL")]
    pub to: String,
    /// Write the channel tags into another repository (same registry: blobs
    /// are mounted, else copied).
    #[arg(long, value_name = "HOST/NAME")]
    pub target_repository: Option<String>,
    /// The release policy file (YAML); none means always open.
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// Decide as if it were this time (RFC 3339, e.g. 2026-12-21T10:00:00Z).
    #[arg(long, value_name = "TIME")]
    pub at: Option<String>,
    /// Change nothing; print the decision, the tags, the active windows and
    /// the next open and close over 14 days.
    #[arg(long)]
    pub explain: bool,
    /// Break-glass: promote although the gate is shut (never an older
    /// candidate). Needs --reason; recorded and printed loudly.
    #[arg(long)]
    pub force: bool,
    /// Why break-glass is needed.
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,
    /// Use plain HTTP for a non-loopback registry (loopback hosts always use it).
    #[arg(long)]
    pub insecure: bool,
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
    /// OIDC login (no stored secret): --login, --id-token-file, provider facts.
    #[command(flatten)]
    pub login: crate::login::flags::LoginArgs,
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
    /// Walk history from this commit (full id) or reference instead of
    /// HEAD, e.g. a pull request's head; with `--source commit` the content
    /// comes from it too.
    #[arg(long, value_name = "REV")]
    pub revision: Option<String>,
    /// GitHub token for the API fallback on shallow clones.
    #[command(flatten)]
    pub github: GitHubArgs,
}

/// The GitHub token, from a flag or `GITHUB_TOKEN`; never printed.
#[derive(Debug, Args)]
pub struct GitHubArgs {
    /// Token for the GitHub API (with GITHUB_REPOSITORY), used only when the
    /// local history cannot answer: which commit last changed the folder (a
    /// shallow clone), and whether one commit descends from another (the
    /// compare API, for --branch-tag and the anomaly check).
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
    /// The settings folder; repeat it or use a glob (`configs/*`) for
    /// several (one line, or one JSON array entry, per folder).
    #[arg(long, value_name = "DIR", required = true)]
    pub path: Vec<PathBuf>,
    /// The tag prefix, usually the branch name (sanitized into a tag).
    #[arg(long, value_name = "PREFIX")]
    pub prefix: String,
    /// Print one JSON object (tag, commit, timestamp, committed_at, path).
    #[arg(long)]
    pub json: bool,
    /// Walk history from this commit (full id) or reference instead of HEAD.
    #[arg(long, value_name = "REV")]
    pub revision: Option<String>,
    /// GitHub token for the API fallback on shallow clones.
    #[command(flatten)]
    pub github: GitHubArgs,
}

/// Arguments of `push`.
#[derive(Debug, Args)]
pub struct PushArgs {
    /// The settings folder to package; repeat it or use a glob
    /// (`configs/*`) for several, each its own image.
    #[arg(long, value_name = "DIR", required = true)]
    pub path: Vec<PathBuf>,
    /// The repository to push to, HOST/NAME (e.g. ghcr.io/OWNER/settings);
    /// with several folders a template: `{name}` is the folder's last
    /// component, `{path}` its path as a slug (ghcr.io/OWNER/{name}).
    #[arg(long, value_name = "HOST/NAME")]
    pub repository: String,
    /// With several folders, how many build and push at once.
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub jobs: usize,
    /// A tag to write; may be repeated. `reference` names the timestamp tag
    /// when there is one, else the first of these.
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
    /// Also move this tag (e.g. `main`) to the image, but only forward: when
    /// the new commit descends from the commit the tag's image records now.
    /// Needs --timestamp-tag.
    #[arg(long, value_name = "NAME")]
    pub branch_tag: Option<String>,
    /// Move --branch-tag even when the new commit does not descend from its
    /// current one (history was rewritten on purpose, e.g. a force-push).
    #[arg(long)]
    pub allow_rewind: bool,
    /// This push follows a force-push of the branch; COMMIT is the branch's
    /// head before it (GitHub's push event `before` when `forced` is true).
    /// Tells a rewind to an older commit from a re-run of an older job.
    #[arg(long, value_name = "COMMIT")]
    pub force_pushed_from: Option<String>,
    /// Print one JSON object instead of a human summary.
    #[arg(long)]
    pub json: bool,
    /// OIDC login (no stored secret): --login, --id-token-file, provider facts.
    #[command(flatten)]
    pub login: crate::login::flags::LoginArgs,
    /// Do not attach SLSA provenance (an in-toto referrer) to the pushed image.
    #[arg(long)]
    pub no_provenance: bool,
    /// Annotations and labels to add.
    #[command(flatten)]
    pub metadata: metadata::MetadataArgs,
    /// Git history: timestamp tag, source mode, GitHub token.
    #[command(flatten)]
    pub history: HistoryArgs,
}

/// The registry login of `push` and `promote`: `--username` (or
/// `SETTINGS_IMAGE_USERNAME`) with the password from standard input or
/// `SETTINGS_IMAGE_PASSWORD`. A password from the environment without a
/// username is ignored; any other half is an error.
fn credentials(
    env: &front::Env,
    username: Option<&String>,
    password_stdin: bool,
) -> Result<Option<Credentials>> {
    let password = if password_stdin {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| Error::io("reading the password from standard input", e))?;
        Some(s.trim_end_matches(['\n', '\r']).to_string())
    } else {
        env.get("SETTINGS_IMAGE_PASSWORD").cloned()
    };
    // One without the other is an error, never a silently anonymous push.
    match front::login(username.cloned(), password) {
        Login::Both(c) => Ok(Some(c)),
        Login::Neither => Ok(None),
        Login::UsernameOnly | Login::PasswordOnly => Err(Error::input(
            "a registry username needs a password and a password needs a username",
            Some(
                "give --username USER with --password-stdin (or set SETTINGS_IMAGE_USERNAME and SETTINGS_IMAGE_PASSWORD)"
                    .to_string(),
            ),
        )),
    }
}

/// Whether a password is given (stdin or `SETTINGS_IMAGE_PASSWORD`).
fn password_given(env: &front::Env, stdin: bool) -> bool {
    stdin || front::var(env, "SETTINGS_IMAGE_PASSWORD").is_some()
}

/// Arguments of `build`.
#[derive(Debug, Args)]
pub struct BuildArgs {
    /// The settings folder to package; repeat it or use a glob
    /// (`configs/*`) for several, each its own image.
    #[arg(long, value_name = "DIR", required = true)]
    pub path: Vec<PathBuf>,
    /// The OCI image layout directory to write (created when missing); with
    /// several folders a template with `{name}` or `{path}`.
    #[arg(long, value_name = "LAYOUT_DIR")]
    pub output: PathBuf,
    /// With several folders, how many build at once.
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub jobs: usize,
    /// A tag to write; may be repeated.
    #[arg(long = "tag", value_name = "TAG")]
    pub tags: Vec<String>,
    /// Print one JSON object instead of a human summary.
    #[arg(long)]
    pub json: bool,
    /// Annotations and labels to add.
    #[command(flatten)]
    pub metadata: metadata::MetadataArgs,
    /// Git history options.
    #[command(flatten)]
    pub history: HistoryArgs,
}

/// Prints the report; `forced`: the push followed a force-push (words the
/// branch-tag notice).
fn print_report(report: &crate::report::Report, json: bool, forced: bool) -> Result<()> {
    if let Some(a) = &report.anomaly {
        eprintln!("warning: {}: {}", a.kind.as_str(), a.message);
    }
    if let (Some(b), Some(commit)) = (&report.branch_tag, &report.commit) {
        let name = &b.name;
        match &b.plan {
            BranchMove::KeepNewer { current } if forced => eprintln!(
                "notice: branch tag {name} stays on commit {current}, which descends from {commit}; if the force-push \
                 dropped it, --allow-rewind moves the tag back"
            ),
            BranchMove::KeepNewer { current } => eprintln!(
                "notice: branch tag {name} stays on commit {current}, which descends from {commit}: a re-run of an older commit"
            ),
            BranchMove::Rewound { current } => eprintln!(
                "warning: --allow-rewind: moving branch tag {name} back from commit {current}, which a force-push \
                 dropped, to its ancestor {commit}"
            ),
            BranchMove::Diverged { current } => eprintln!(
                "warning: --allow-rewind: moving branch tag {name} from commit {} to {commit}, which does not descend from it",
                current.as_deref().unwrap_or("(none recorded)"),
            ),
            _ => {}
        }
    }
    for w in &report.warnings {
        eprintln!("warning: {w}");
    }
    if json {
        let s = serde_json::to_string(report).map_err(|e| Error::json("printing the report", e))?;
        println!("{s}");
    } else {
        print!("{}", report.human());
    }
    Ok(())
}

/// The registry deadlines from `SETTINGS_IMAGE_REQUEST_TIMEOUT` and
/// `SETTINGS_IMAGE_PUSH_TIMEOUT` (whole seconds), else the defaults; read
/// here for both faces (the action runs through [`run`] too).
fn deadlines_from_env(env: &front::Env) -> Result<crate::registry::deadline::Deadlines> {
    let mut d = crate::registry::deadline::Deadlines::default();
    for (name, slot) in [
        ("SETTINGS_IMAGE_REQUEST_TIMEOUT", &mut d.request),
        ("SETTINGS_IMAGE_PUSH_TIMEOUT", &mut d.operation),
    ] {
        let Some(v) = env.get(name).filter(|v| !v.trim().is_empty()) else {
            continue;
        };
        match v.trim().parse::<u64>() {
            Ok(secs) if secs > 0 => *slot = std::time::Duration::from_secs(secs),
            _ => {
                return Err(Error::input(
                    format!("{name} is {v:?}, not a number of seconds"),
                    Some(format!(
                        "set {name} to a whole number of seconds above 0, or unset it"
                    )),
                ));
            }
        }
    }
    Ok(d)
}

/// Runs the parsed command line.
pub fn run(cli: Cli) -> Result<()> {
    let env = front::process_env();
    crate::registry::deadline::set(deadlines_from_env(&env)?);
    match cli.command {
        Command::Build(args) if is_many(&args.path) => run_build_many(&env, args),
        Command::Push(args) if is_many(&args.path) => run_push_many(&env, args),
        Command::Plan(args) => run_plan(&env, &args),
        Command::Build(args) => {
            let req = Request {
                path: single(args.path),
                tags: args.tags,
                target: Target::Layout(args.output),
                source: args.history.source,
                timestamp_tag: args.history.timestamp_tag,
                github: front::github_api(&env, args.history.github.token()),
                source_url: front::source_url(&env),
                ci: front::ci(&env),
                forward: request::Forward::default(),
                provenance: false,
                revision: args.history.revision,
                extra: args.metadata.metadata(),
            };
            let report = request::run(&req)?;
            print_report(&report, args.json, false)
        }
        Command::Tag(args) if is_many(&args.path) => run_tag_many(&env, &args),
        Command::Tag(args) => run_tag(&env, &args),
        Command::Push(args) => {
            let (credentials, login) = args.login.resolve(
                &env,
                &args.repository,
                args.insecure,
                args.username.as_deref(),
                password_given(&env, args.password_stdin),
                || credentials(&env, args.username.as_ref(), args.password_stdin),
            )?;
            let req = Request {
                path: single(args.path),
                tags: args.tags,
                target: Target::Registry(registry::Options {
                    repository: args.repository,
                    insecure: args.insecure,
                    monolithic: args.monolithic,
                    credentials,
                    docker_config: front::docker_config(&env),
                    login: login.map(Box::new),
                }),
                source: args.history.source,
                timestamp_tag: args.history.timestamp_tag,
                github: front::github_api(&env, args.history.github.token()),
                source_url: front::source_url(&env),
                ci: front::ci(&env),
                forward: request::Forward {
                    branch_tag: args.branch_tag,
                    allow_rewind: args.allow_rewind,
                    forced_before: args.force_pushed_from,
                },
                provenance: !args.no_provenance,
                revision: args.history.revision,
                extra: args.metadata.metadata(),
            };
            let report = request::run(&req)?;
            print_report(&report, args.json, req.forward.forced_before.is_some())
        }
        Command::Inspect(args) => run_inspect(&env, &args),
        Command::Promote(args) => run_promote(&env, &args),
        Command::Flux(args) => cluster::run_flux(&args),
        Command::Verify(args) => match cluster::run_verify(&args)? {
            0 => Ok(()),
            // The table or JSON has said which references failed.
            code => std::process::exit(code),
        },
        Command::Action(args) => match crate::action::run(args.mode) {
            0 => Ok(()),
            // The action has reported the error as a workflow command.
            code => std::process::exit(code),
        },
    }
}

/// Turns `promote`'s arguments into a [`crate::promote::Request`]; shared
/// with nothing else, the action face builds its own from inputs.
fn promote_request(env: &front::Env, args: &PromoteArgs) -> Result<crate::promote::Request> {
    let force = crate::promote::break_glass(args.force, args.reason.as_deref())
        .map_err(break_glass_error)?;
    let policy = front::policy(args.policy.as_deref())?;
    let at = args
        .at
        .as_deref()
        .map(crate::promote::parse_at)
        .transpose()?;
    let (credentials, login) = args.login.resolve(
        env,
        &args.repository,
        args.insecure,
        args.username.as_deref(),
        password_given(env, args.password_stdin),
        || credentials(env, args.username.as_ref(), args.password_stdin),
    )?;
    Ok(crate::promote::Request {
        repository: args.repository.clone(),
        from: args.from.clone(),
        to: args.to.clone(),
        target_repository: args.target_repository.clone(),
        policy,
        at,
        force,
        explain: args.explain,
        insecure: args.insecure,
        credentials,
        login,
        docker_config: front::docker_config(env),
        actor: front::actor(env),
        run_url: front::run_url(env),
    })
}

/// A refused break-glass in the CLI's words.
fn break_glass_error(e: BreakGlass) -> Error {
    match e {
        BreakGlass::NoReason => Error::input(
            "break-glass (--force) needs a reason",
            Some(
                "add --reason \"...\" saying why the release cannot wait for a window; it is recorded with the promotion"
                    .to_string(),
            ),
        ),
        BreakGlass::ReasonWithoutForce => Error::input(
            "--reason is only used with --force",
            Some("add --force for break-glass, or drop --reason".to_string()),
        ),
    }
}

fn run_promote(env: &front::Env, args: &PromoteArgs) -> Result<()> {
    let req = promote_request(env, args)?;
    if let Some(reason) = &req.force {
        eprintln!("BREAK-GLASS requested by {}: {reason}", req.actor);
    }
    if let (Some(at), false) = (&req.at, req.explain) {
        eprintln!(
            "warning: --at judges the release windows at {at}, not now; a promotion records both times"
        );
    }
    let out = crate::promote::run(&req)?;
    if out.forced && out.promoted {
        eprintln!(
            "BREAK-GLASS: {} promoted outside the release windows: {}",
            out.tag.as_deref().unwrap_or("?"),
            out.because
        );
    }
    if args.json {
        let s = serde_json::to_string(&out).map_err(|e| Error::json("printing the outcome", e))?;
        println!("{s}");
    } else {
        print!("{}", out.human());
    }
    Ok(())
}

fn run_inspect(env: &front::Env, args: &InspectArgs) -> Result<()> {
    // Reading needs no login, but a half-given one is an error (exit 2),
    // never silently anonymous.
    let credentials = match front::login(
        env.get("SETTINGS_IMAGE_USERNAME").cloned(),
        env.get("SETTINGS_IMAGE_PASSWORD").cloned(),
    ) {
        Login::Both(c) => Some(c),
        Login::Neither => None,
        Login::UsernameOnly | Login::PasswordOnly => {
            return Err(Error::input(
                "a registry username needs a password and a password needs a username",
                Some(
                    "set both SETTINGS_IMAGE_USERNAME and SETTINGS_IMAGE_PASSWORD, or neither to read anonymously"
                        .to_string(),
                ),
            ));
        }
    };
    let found = crate::inspect::inspect(
        &args.reference,
        args.insecure,
        credentials,
        front::docker_config(env),
    )?;
    if args.json {
        let s =
            serde_json::to_string(&found).map_err(|e| Error::json("printing the inspection", e))?;
        println!("{s}");
    } else {
        print!("{}", found.human());
    }
    Ok(())
}

fn run_tag(env: &front::Env, args: &TagArgs) -> Result<()> {
    crate::tag::sanitize_prefix(&args.prefix)?;
    let api = front::github_api(env, args.github.token());
    let path = args.path.first().cloned().unwrap_or_default();
    let lc = history::last_change(&path, args.revision.as_deref(), api)?;
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

// ---- several folders (crate::many): one walk, one entry per folder ----

/// The single folder of a one-folder run (clap requires at least one).
fn single(paths: Vec<PathBuf>) -> PathBuf {
    paths.into_iter().next().unwrap_or_default()
}

fn as_strings(paths: &[PathBuf]) -> Vec<String> {
    paths
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect()
}

fn is_many(paths: &[PathBuf]) -> bool {
    crate::many::is_many(&as_strings(paths))
}

/// Arguments of `plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The settings folders; repeat it or use globs (`configs/*`).
    #[arg(long, value_name = "DIR", required = true)]
    pub path: Vec<PathBuf>,
    /// The repository template, HOST/NAME with `{name}` or `{path}`.
    #[arg(long, value_name = "HOST/NAME")]
    pub repository: String,
    /// The timestamp tag prefix the pushes use (usually the branch).
    #[arg(long, value_name = "PREFIX")]
    pub timestamp_tag: String,
    /// Walk history from this commit (full id) or reference instead of HEAD.
    #[arg(long, value_name = "REV")]
    pub revision: Option<String>,
    /// Use plain HTTP for a non-loopback registry (loopback hosts always use it).
    #[arg(long)]
    pub insecure: bool,
    /// Registry username (or SETTINGS_IMAGE_USERNAME); the password comes from
    /// --password-stdin or SETTINGS_IMAGE_PASSWORD.
    #[arg(long, value_name = "USER", env = "SETTINGS_IMAGE_USERNAME")]
    pub username: Option<String>,
    /// Read the password or token from standard input.
    #[arg(long)]
    pub password_stdin: bool,
    /// Print the matrix as JSON (what `strategy.matrix` takes).
    #[arg(long)]
    pub json: bool,
    /// GitHub token for the API fallback on shallow clones.
    #[command(flatten)]
    pub github: GitHubArgs,
}

fn print_many(outcome: crate::many::Outcome, json: bool) -> Result<()> {
    for (report, image) in outcome.reports.iter().zip(&outcome.images) {
        for w in report.iter().flat_map(|r| &r.warnings) {
            eprintln!("warning: {}: {w}", image.path);
        }
    }
    if json {
        let s = serde_json::to_string(&outcome.images)
            .map_err(|e| Error::io("printing the report", std::io::Error::other(e)))?;
        println!("{s}");
    } else {
        print!("{}", outcome.human());
    }
    for (path, e) in &outcome.errors {
        eprintln!("error: {path}: {e}");
    }
    outcome.into_result()
}

fn run_push_many(env: &front::Env, args: PushArgs) -> Result<()> {
    let folders = crate::many::select(&as_strings(&args.path), "--path")?;
    let repositories = crate::many::targets(&args.repository, &folders, "--repository")?;
    let (credentials, login) = args.login.resolve(
        env,
        &args.repository,
        args.insecure,
        args.username.as_deref(),
        password_given(env, args.password_stdin),
        || credentials(env, args.username.as_ref(), args.password_stdin),
    )?;
    let options = registry::Options {
        repository: String::new(),
        insecure: args.insecure,
        monolithic: args.monolithic,
        credentials,
        docker_config: front::docker_config(env),
        login: login.map(Box::new),
    };
    let targets = repositories
        .into_iter()
        .map(|repository| {
            Target::Registry(registry::Options {
                repository,
                ..options.clone()
            })
        })
        .collect();
    let base = Request {
        path: PathBuf::new(),
        tags: args.tags,
        target: Target::Registry(options),
        source: args.history.source,
        timestamp_tag: args.history.timestamp_tag,
        github: front::github_api(env, args.history.github.token()),
        source_url: front::source_url(env),
        ci: front::ci(env),
        forward: request::Forward {
            branch_tag: args.branch_tag,
            allow_rewind: args.allow_rewind,
            forced_before: args.force_pushed_from,
        },
        provenance: !args.no_provenance,
        revision: args.history.revision,
        extra: Default::default(),
    };
    let outcome = crate::many::run(&base, &folders, targets, args.jobs)?;
    print_many(outcome, args.json)
}

fn run_build_many(env: &front::Env, args: BuildArgs) -> Result<()> {
    let folders = crate::many::select(&as_strings(&args.path), "--path")?;
    let outputs = crate::many::targets(&args.output.to_string_lossy(), &folders, "--output")?;
    let targets = outputs
        .into_iter()
        .map(|o| Target::Layout(PathBuf::from(o)))
        .collect();
    let base = Request {
        path: PathBuf::new(),
        tags: args.tags,
        target: Target::Layout(args.output),
        source: args.history.source,
        timestamp_tag: args.history.timestamp_tag,
        github: front::github_api(env, args.history.github.token()),
        source_url: front::source_url(env),
        ci: front::ci(env),
        forward: request::Forward::default(),
        provenance: false,
        revision: args.history.revision,
        extra: Default::default(),
    };
    let outcome = crate::many::run(&base, &folders, targets, args.jobs)?;
    print_many(outcome, args.json)
}

fn run_tag_many(env: &front::Env, args: &TagArgs) -> Result<()> {
    crate::tag::sanitize_prefix(&args.prefix)?;
    let folders = crate::many::select(&as_strings(&args.path), "--path")?;
    let paths: Vec<PathBuf> = folders.iter().map(|f| f.path.clone()).collect();
    let api = front::github_api(env, args.github.token());
    let answers = history::last_changes(&paths, args.revision.as_deref(), api);
    let mut rows = Vec::new();
    let mut errors = Vec::new();
    for (f, lc) in folders.iter().zip(answers) {
        let path = f.path.display().to_string();
        let row = lc.and_then(|lc| {
            let tag = crate::tag::timestamp_tag(&args.prefix, lc.commit.timestamp, &lc.commit.id)?;
            Ok(serde_json::json!({
                "path": path,
                "tag": tag,
                "commit": lc.commit.id,
                "timestamp": lc.commit.timestamp,
                "committed_at": lc.commit.committed_at(),
            }))
        });
        match row {
            Ok(v) => rows.push(v),
            Err(e) => {
                rows.push(serde_json::json!({ "path": path, "error": e.to_string() }));
                errors.push((path, e));
            }
        }
    }
    if args.json {
        println!("{}", serde_json::Value::Array(rows));
    } else {
        for r in &rows {
            if let Some(tag) = r["tag"].as_str() {
                println!("{} {tag}", r["path"].as_str().unwrap_or_default());
            }
        }
    }
    for (path, e) in &errors {
        eprintln!("error: {path}: {e}");
    }
    let n = errors.len();
    match errors.into_iter().next() {
        None => Ok(()),
        Some((_, e)) if n == 1 => Err(e),
        Some((path, e)) => Err(Error::history(
            path,
            format!("{n} of {} folders failed; the first: {e}", folders.len()),
            e.hint(),
        )),
    }
}

fn run_plan(env: &front::Env, args: &PlanArgs) -> Result<()> {
    let folders = crate::many::select(&as_strings(&args.path), "--path")?;
    let repositories = crate::many::targets(&args.repository, &folders, "--repository")?;
    let options = registry::Options {
        repository: String::new(),
        insecure: args.insecure,
        monolithic: false,
        credentials: credentials(env, args.username.as_ref(), args.password_stdin)?,
        docker_config: front::docker_config(env),
        login: None,
    };
    let api = front::github_api(env, args.github.token());
    let plan = crate::many::plan(
        &folders,
        &repositories,
        &args.timestamp_tag,
        args.revision.as_deref(),
        api,
        &options,
    )?;
    if args.json {
        let s = serde_json::to_string(&plan)
            .map_err(|e| Error::io("printing the plan", std::io::Error::other(e)))?;
        println!("{s}");
    } else {
        for e in &plan.include {
            println!("{}: needs {}:{}", e.path, e.repository, e.tag);
        }
        for e in &plan.up_to_date {
            println!("{}: up to date ({}:{})", e.path, e.repository, e.tag);
        }
    }
    Ok(())
}
