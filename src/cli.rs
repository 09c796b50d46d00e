//! The command-line face: clap arguments (`cli/args.rs`) read in one step
//! into the core's values, the core called once, its outcome printed in
//! plain lines (`show.rs`, which the action's log shares). `build`,
//! `push`, `tag` and `plan` (one folder or several, one path) live in
//! `cli/publish.rs`.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::branch_tag::{BranchTag, Change};
use crate::error::{Error, Result};
use crate::front::{self, Login};
use crate::history;
use crate::output;
use crate::registry::{self, Credentials};
use crate::request::{self, Request, Target};
use crate::show;

pub(crate) mod args;
pub mod cluster;
mod login;
pub mod metadata;
mod progress;
mod publish;

pub use args::{
    AccessArgs, ActionArgs, BuildArgs, Cli, Command, CompletionsArgs, DiffArgs, GitHubArgs,
    HistoryArgs, InspectArgs, ManArgs, PlanArgs, PromoteArgs, PushArgs, TagArgs, VERSION,
};

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
        let s = crate::named_file::read_stdin(crate::field::Field::Password)?;
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

/// The credentials or OIDC login of `push` and `promote` for `repository`
/// (see [`login::LoginArgs::resolve`]).
fn resolve_login(
    env: &front::Env,
    login: &login::LoginArgs,
    repository: &str,
    insecure: bool,
    username: Option<&String>,
    password_stdin: bool,
) -> Result<(Option<Credentials>, Option<crate::login::Login>)> {
    login.resolve(
        env,
        repository,
        insecure,
        username.map(String::as_str),
        password_given(env, password_stdin),
        || credentials(env, username, password_stdin),
    )
}

/// Whether a password is given (stdin or `SETTINGS_IMAGE_PASSWORD`).
fn password_given(env: &front::Env, stdin: bool) -> bool {
    stdin || front::var(env, "SETTINGS_IMAGE_PASSWORD").is_some()
}

/// Prints the report.
fn print_report(report: &crate::report::Report, json: bool) -> Result<()> {
    if let Some(a) = &report.anomaly {
        output::eprintln(&anomaly_line(a));
    }
    if let Some(line) = report.branch_tag.as_ref().and_then(branch_line) {
        output::eprintln(&line);
    }
    for w in &report.warnings {
        output::eprintln(&warning_line(w));
    }
    if json {
        let s = serde_json::to_string(&show::ReportJson::of(report, &crate::field::Cli))
            .map_err(|e| Error::json("printing the report", e))?;
        output::println(&s)?;
    } else {
        output::print(&show::report(report))?;
    }
    Ok(())
}

/// The line the CLI prints about the branch tag, when there is one worth
/// a line (held, or moved back or sideways).
fn branch_line(b: &BranchTag) -> Option<String> {
    let (name, commit) = (&b.name, b.commit.as_deref()?);
    Some(match &b.change {
        Change::Held {
            current,
            force_push: true,
            ..
        } => format!(
            "notice: branch tag {name} stays on commit {current}, which descends from {commit}; if the force-push \
             dropped it, --allow-rewind moves the tag back"
        ),
        Change::Held { current, .. } => format!(
            "notice: branch tag {name} stays on commit {current}, which descends from {commit}: a re-run of an older commit"
        ),
        Change::Followed { current } => format!(
            "warning: branch tag {name} follows the force-push: moved from commit {current}, which the \
             force-push dropped, to {commit}"
        ),
        Change::Rewound { current } => format!(
            "warning: --allow-rewind: moving branch tag {name} back from commit {current}, which a force-push \
             dropped, to its ancestor {commit}"
        ),
        Change::Diverged { current } => format!(
            "warning: --allow-rewind: moving branch tag {name} from commit {} to {commit}, which does not descend from it",
            current.as_deref().unwrap_or("(none recorded)"),
        ),
        Change::Created | Change::Forward | Change::Unchanged => return None,
    })
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
        *slot = crate::registry::deadline::parse_seconds(name, v)?;
    }
    Ok(d)
}

/// Runs the parsed command line; returns the exit code, or the error for
/// the caller to print ([`report_error`]). A run that said what went wrong
/// itself (a `verify` table, an action's `::error` line) returns its code.
pub fn run(cli: Cli) -> Result<ExitCode> {
    let env = front::process_env();
    crate::registry::deadline::set(deadlines_from_env(&env)?);
    if let Some(v) = env
        .get("SETTINGS_IMAGE_MAX_TAGS")
        .filter(|v| !v.trim().is_empty())
    {
        crate::registry::tags::set_max_tags(crate::registry::tags::parse_max_tags(v)?);
    }
    let done = |r: Result<()>| r.map(|()| ExitCode::SUCCESS);
    let mut command = cli.command;
    match &mut command {
        // The controller logs JSON lines of its own; -v is its debug level.
        Command::Controller(args) if cli.verbose => {
            args.log_level = crate::controller::logs::Level::Debug;
        }
        Command::Controller(_) | Command::Action(_) => {}
        other => {
            if cli.verbose {
                progress::verbose();
            }
            if progress::wanted(&env, other.json()) {
                progress::install();
            }
        }
    }
    match command {
        Command::Completions(args) => done(print_completions(args.shell)),
        Command::Man(args) => done(write_man(&args.dir)),
        Command::Build(args) => done(publish::run(publish::build(&env, args)?)),
        Command::Push(args) => done(publish::run(publish::push(&env, args)?)),
        Command::Tag(args) => done(publish::tag(&env, &args)),
        Command::Plan(args) => done(publish::plan(&env, &args)),
        Command::Inspect(args) => done(run_inspect(&env, &args)),
        Command::Diff(args) => run_diff(&env, &args),
        Command::Promote(args) => done(run_promote(&env, &args)),
        Command::Flux(args) => done(cluster::run_flux(&args)),
        // The table or JSON has said which references failed.
        Command::Verify(args) => Ok(exit_code(cluster::run_verify(&args)?)),
        Command::Controller(args) => done(crate::controller::run(args)),
        // The action has reported any error as a workflow command.
        Command::Action(args) => Ok(exit_code(crate::action::run(args.mode))),
    }
}

/// Prints `shell`'s completion script for every command and flag.
///
/// clap_complete's bash script (4.6.12) spells a subcommand's state two
/// ways for a binary whose name has a hyphen (`settings__image__subcmd__push`
/// where it dispatches, `settings__subcmd__image__subcmd__push` where it
/// lists the flags), so no subcommand's flags ever complete
/// (clap-rs/clap#6421, open): the second spelling is rewritten to the first.
/// tests/terminal.rs completes `push --mono` in bash.
fn print_completions(shell: clap_complete::Shell) -> Result<()> {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, "settings-image", &mut script);
    let mut script = String::from_utf8_lossy(&script).into_owned();
    if shell == clap_complete::Shell::Bash {
        script = script.replace("settings__subcmd__image", "settings__image");
    }
    output::print(&script)
}

/// Writes the man pages, one per command, into `dir`.
fn write_man(dir: &std::path::Path) -> Result<()> {
    use clap::CommandFactory;
    let what = || format!("writing the man pages into {}", dir.display());
    std::fs::create_dir_all(dir).map_err(|e| Error::io(what(), e))?;
    clap_mangen::generate_to(Cli::command(), dir).map_err(|e| Error::io(what(), e))
}

/// `code` (0 to 255) as the process's exit code.
fn exit_code(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// A request from the history options, with no folder, forward checks,
/// provenance or extra metadata yet: what `build` and `push` (one folder or
/// several) fill in.
fn history_request(
    env: &front::Env,
    history: HistoryArgs,
    tags: Vec<String>,
    target: Target,
) -> Result<Request> {
    let source_url = match &history.source_url {
        Some(given) => history::SourceUrl::parse(given)?,
        None => history::SourceUrl::from_ci(front::source_url(env)),
    };
    Ok(Request {
        tags,
        source: history.source,
        timestamp_tag: history.timestamp_tag,
        github: front::github_api(env, history.github.token()),
        source_url,
        ci: front::ci(env),
        revision: history.revision,
        ..Request::new(PathBuf::new(), target)
    })
}

/// The registry options of `push` (one folder or several): the login
/// resolved for `--repository`.
fn push_options(env: &front::Env, args: &PushArgs) -> Result<registry::Options> {
    let (credentials, login) = resolve_login(
        env,
        &args.login,
        &args.repository,
        args.insecure,
        args.username.as_ref(),
        args.password_stdin,
    )?;
    Ok(registry::Options {
        insecure: args.insecure,
        monolithic: args.monolithic,
        credentials,
        docker_config: front::docker_config(env),
        login: login.map(Into::into),
        ..registry::Options::new(args.repository.clone())
    })
}

/// `push`'s request to `options`, with no folder or extra metadata yet.
fn push_request(env: &front::Env, args: PushArgs, options: registry::Options) -> Result<Request> {
    Ok(Request {
        forward: request::Forward {
            branch_tag: args.branch_tag,
            allow_rewind: args.allow_rewind,
            forced_before: args.force_pushed_from,
        },
        provenance: !args.no_provenance,
        ..history_request(env, args.history, args.tags, Target::Registry(options))?
    })
}

/// Turns `promote`'s arguments into a [`crate::promote::Promotion`]; shared
/// with nothing else, the action face builds its own from inputs.
fn promote_request(env: &front::Env, args: &PromoteArgs) -> Result<crate::promote::Promotion> {
    let force = crate::promote::break_glass(args.force, args.reason.as_deref())?;
    let policy = front::policy(args.policy.as_deref())?;
    let at = args
        .at
        .as_deref()
        .map(crate::promote::parse_at)
        .transpose()?;
    let access = &args.access;
    let (credentials, login) = resolve_login(
        env,
        &args.login,
        &args.repository,
        access.insecure,
        access.username.as_ref(),
        access.password_stdin,
    )?;
    Ok(crate::promote::Promotion {
        repository: args.repository.clone(),
        from: args.from.clone(),
        to: args.to.clone(),
        target_repository: args.target_repository.clone(),
        policy,
        at,
        force,
        explain: args.explain,
        insecure: access.insecure,
        credentials,
        login,
        docker_config: front::docker_config(env),
        actor: front::actor(env),
        run_url: front::run_url(env),
    })
}

fn run_promote(env: &front::Env, args: &PromoteArgs) -> Result<()> {
    let req = promote_request(env, args)?;
    if let Some(reason) = &req.force {
        output::eprintln(&format!("BREAK-GLASS requested by {}: {reason}", req.actor));
    }
    if let (Some(at), false) = (&req.at, req.explain) {
        output::eprintln(&format!(
            "warning: --at judges the release windows at {at}, not now; a promotion records both times"
        ));
    }
    let mut out = crate::promote::run(&req)?;
    out.diff = crate::promote::review(&req, &out, &crate::diff::Limits::DEFAULT);
    if out.forced && out.promoted {
        output::eprintln(&format!(
            "BREAK-GLASS: {} promoted outside the release windows: {}",
            out.tag.as_deref().unwrap_or("?"),
            out.because
        ));
    }
    if args.json {
        let s = serde_json::to_string(&out).map_err(|e| Error::json("printing the outcome", e))?;
        output::println(&s)?;
    } else {
        output::print(&show::promote::promotion(&out))?;
        if let Some(review) = &out.diff {
            output::print(&format!("\nwhat changes:\n{}", show::diff::review(review)))?;
        }
    }
    Ok(())
}

/// The pull credentials of the reading commands (`inspect`, `diff`) from
/// the environment. Reading needs no login, but a half-given one is an
/// error (exit 2), never silently anonymous.
fn read_credentials(env: &front::Env) -> Result<Option<Credentials>> {
    match front::login(
        env.get("SETTINGS_IMAGE_USERNAME").cloned(),
        env.get("SETTINGS_IMAGE_PASSWORD").cloned(),
    ) {
        Login::Both(c) => Ok(Some(c)),
        Login::Neither => Ok(None),
        Login::UsernameOnly | Login::PasswordOnly => Err(Error::input(
            "a registry username needs a password and a password needs a username",
            Some(
                "set both SETTINGS_IMAGE_USERNAME and SETTINGS_IMAGE_PASSWORD, or neither to read anonymously"
                    .to_string(),
            ),
        )),
    }
}

/// `diff`: exit 0, or with `--exit-code` 9 when the two differ.
fn run_diff(env: &front::Env, args: &DiffArgs) -> Result<ExitCode> {
    use crate::diff::{Image, Limits};
    let limits = Limits::DEFAULT;
    let credentials = read_credentials(env)?;
    let (old_repo, old_ref) = crate::inspect::parse_reference(&args.old)?;
    let new_ref = args
        .new
        .as_deref()
        .map(crate::inspect::parse_reference)
        .transpose()?;
    if let Some(path) = &args.path {
        crate::cluster::verify::check_path(path)?;
    }
    let open = |repository: &str| {
        registry::Client::open_read_only(&registry::Options {
            insecure: args.insecure,
            credentials: credentials.clone(),
            docker_config: front::docker_config(env),
            ..registry::Options::new(repository)
        })
    };
    let old_client = open(&old_repo)?;
    let old = Image::from_registry(&old_client, &old_ref, args.old.clone(), &limits)?;
    let new = match (&new_ref, &args.path) {
        (Some((repo, what)), _) if *repo == old_repo => Image::from_registry(
            &old_client,
            what,
            args.new.clone().unwrap_or_default(),
            &limits,
        )?,
        (Some((repo, what)), _) => Image::from_registry(
            &open(repo)?,
            what,
            args.new.clone().unwrap_or_default(),
            &limits,
        )?,
        (None, Some(path)) => Image::from_folder(
            path,
            args.revision.as_deref(),
            args.source,
            front::github_api(env, args.github.token()),
        )?,
        (None, None) => {
            return Err(Error::input(
                "diff needs a new side: NEW or --path",
                Some("give a second reference, or --path DIR for a folder".to_string()),
            ));
        }
    };
    for w in &new.warnings {
        output::eprintln(&warning_line(w));
    }
    let diff = crate::diff::compare(&old, &new, &limits)?;
    if args.json {
        let s = serde_json::to_string(&diff).map_err(|e| Error::json("printing the diff", e))?;
        output::println(&s)?;
    } else {
        output::print(&show::diff::human(&diff))?;
    }
    Ok(if args.exit_code && diff.different {
        ExitCode::from(crate::diff::DIFFERENT)
    } else {
        ExitCode::SUCCESS
    })
}

fn run_inspect(env: &front::Env, args: &InspectArgs) -> Result<()> {
    let credentials = read_credentials(env)?;
    let mut found = crate::inspect::inspect(
        &args.reference,
        args.insecure,
        credentials,
        front::docker_config(env),
    )?;
    show::inspect::add_summaries(&mut found);
    if args.json {
        let s =
            serde_json::to_string(&found).map_err(|e| Error::json("printing the inspection", e))?;
        output::println(&s)?;
    } else {
        output::print(&show::inspect::inspection(&found))?;
    }
    Ok(())
}

/// Prints an error with its hint to stderr, in the CLI's words, and
/// returns the exit code. A push that failed after it published prints
/// its warnings first (they were not printed: the push did not finish).
pub fn report_error(err: &Error) -> ExitCode {
    // The reader went away: nothing more to say (see `crate::output`).
    for line in error_lines(err) {
        output::eprintln(&line);
    }
    exit_code(err.exit_code())
}

/// What the CLI prints on stderr for `err`, line by line: a push that
/// failed after it published its warnings first, then `error: ` and
/// `hint: `; nothing when standard output was closed.
pub(crate) fn error_lines(err: &Error) -> Vec<String> {
    let mut lines = Vec::new();
    // The reader went away: nothing more to say (see `crate::output`).
    if matches!(err, Error::OutputClosed) {
        return lines;
    }
    if let Error::AfterPublish { published, .. } = err {
        lines.extend(published.warnings.iter().map(warning_line));
    }
    lines.push(format!("error: {err}"));
    if let Some(hint) = err.hint() {
        lines.push(format!("hint: {hint}"));
    }
    lines
}

/// The CLI's stderr line for a warning.
pub(crate) fn warning_line(w: &crate::notice::Notice) -> String {
    format!("warning: {}", show::notice(w))
}

/// The CLI's stderr line for an anomaly of a push.
pub(crate) fn anomaly_line(a: &crate::release::ordering::Anomaly) -> String {
    format!(
        "warning: {}: {}",
        a.kind.as_str(),
        show::anomaly::message(a, &crate::field::Cli)
    )
}
