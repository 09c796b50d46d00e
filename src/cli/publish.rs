//! `build`, `push`, `tag` and `plan`, for one folder or several: the
//! command line read in one step into the core's values (a
//! [`Selection`] of folders, their targets, the shared [`Request`]), the
//! core called once, and its outcome printed. The selection decides the
//! shape of what is printed, not the path the run takes: one folder
//! prints its report, several (a list or a glob) a line per folder.

use std::path::PathBuf;

use super::{
    BuildArgs, PlanArgs, PushArgs, TagArgs, credentials, history_request, print_report,
    push_options, push_request,
};
use crate::error::{Error, Result};
use crate::field::{Cli, Field};
use crate::front;
use crate::history;
use crate::many::{LowerCased, Selection};
use crate::output;
use crate::pipeline::{self, RunReport, Spec};
use crate::registry;
use crate::request::{Request, Target};
use crate::show::ImageLine;

/// A `build` or `push` read from its flags: what to run and how to print.
pub(super) struct Publish {
    /// The one pipeline run.
    spec: Spec<'static>,
    /// `--json`.
    json: bool,
}

fn as_strings(paths: &[PathBuf]) -> Vec<String> {
    paths
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect()
}

/// `build`'s flags as one run: each folder into its layout directory.
pub(super) fn build(env: &front::Env, args: BuildArgs) -> Result<Publish> {
    let selection = Selection::of(&as_strings(&args.path), Field::Path)?;
    let targets = selection.layouts(&args.output, Field::Output)?;
    let extra = args.metadata.metadata();
    let base = Request {
        extra,
        ..history_request(env, args.history, args.tags, Target::Layout(args.output))?
    };
    Ok(Publish {
        spec: Spec::new(base, &selection, targets, args.jobs),
        json: args.json,
    })
}

/// `push`'s flags as one run: each folder to its repository (the
/// template's for several), with the login resolved for `--repository`.
pub(super) fn push(env: &front::Env, args: PushArgs) -> Result<Publish> {
    let selection = Selection::of(&as_strings(&args.path), Field::Path)?;
    let (repositories, notices) = selection.repositories(&args.repository, Field::Repository)?;
    let options = push_options(env, &args)?;
    say_lower_cased(&notices);
    let targets = crate::many::registry_targets(&options, repositories);
    let extra = args.metadata.metadata();
    let (jobs, json) = (args.jobs, args.json);
    let base = Request {
        extra,
        ..push_request(env, args, options)?
    };
    Ok(Publish {
        spec: Spec::new(base, &selection, targets, jobs),
        json,
    })
}

fn say_lower_cased(notices: &[LowerCased]) {
    for n in notices {
        output::eprintln(&format!("notice: {}", n.text()));
    }
}

/// Runs `publish` and prints its outcome: one folder's report (and, with
/// `--json`, what a push that failed after it published had published),
/// or a line per folder.
pub(super) fn run(publish: Publish) -> Result<()> {
    let Publish { spec, json } = publish;
    let outcome = pipeline::run(&spec)?;
    if spec.several {
        return print_folders(outcome, json);
    }
    let report = outcome
        .into_report()
        .inspect_err(|e| print_published_then_failed(e, json))?;
    print_report(&report, json)
}

/// With `--json`, a push that failed after it published prints what it
/// published on stdout (`{"error", "exit_code", "published"}`), so a
/// script reading the report learns it as a person reading stderr does.
fn print_published_then_failed(err: &Error, json: bool) {
    if let (true, Error::AfterPublish { published, error }) = (json, err) {
        let v = serde_json::json!({
            "error": error.to_string(),
            "exit_code": err.exit_code(),
            "published": crate::show::PublishedJson::of(published, &crate::field::Cli),
        });
        println!("{v}");
    }
}

/// A line per folder (or the `--json` array), each folder's warnings and
/// errors on stderr; the run's error when any folder failed.
fn print_folders(outcome: RunReport, json: bool) -> Result<()> {
    for f in &outcome.folders {
        for w in f.result.iter().flat_map(|r| &r.warnings) {
            output::eprintln(&format!("warning: {}: {}", f.path, crate::show::notice(w)));
        }
    }
    if json {
        let lines: Vec<ImageLine> = outcome
            .folders
            .iter()
            .map(|f| ImageLine::of(f, &Cli))
            .collect();
        let s = serde_json::to_string(&lines)
            .map_err(|e| Error::io("printing the report", std::io::Error::other(e)))?;
        output::println(&s)?;
    } else {
        output::print(&crate::show::folders(&outcome))?;
    }
    for (path, e) in outcome.errors() {
        output::eprintln(&format!("error: {path}: {e}"));
    }
    outcome.into_result()
}

/// `tag`: each folder's timestamp tag from its last change, one history
/// walk for all; one folder prints its tag, several a line per folder.
pub(super) fn tag(env: &front::Env, args: &TagArgs) -> Result<()> {
    crate::tag::sanitize_prefix(&args.prefix)?;
    if let Some(note) = crate::tag::shared_prefix_note(&args.prefix) {
        output::eprintln(&format!("{}: {}", note.label(), note.text));
    }
    let selection = Selection::of(&as_strings(&args.path), Field::Path)?;
    let api = front::github_api(env, args.github.token());
    let answers = history::last_changes(
        &selection.paths(),
        args.revision.as_deref(),
        api,
        selection.several,
    );
    if !selection.several {
        let lc = answers
            .into_iter()
            .next()
            .unwrap_or_else(|| Err(Error::history(".", "no folder was read", None)))?;
        return print_tag(&args.prefix, &lc, args.json);
    }
    let mut rows = Vec::new();
    let mut errors = Vec::new();
    for (f, lc) in selection.folders.iter().zip(answers) {
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
        output::println(&serde_json::Value::Array(rows).to_string())?;
    } else {
        for r in &rows {
            if let Some(tag) = r["tag"].as_str() {
                output::println(&format!("{} {tag}", r["path"].as_str().unwrap_or_default()))?;
            }
        }
    }
    for (path, e) in &errors {
        output::eprintln(&format!("error: {path}: {e}"));
    }
    let n = errors.len();
    match errors.into_iter().next() {
        None => Ok(()),
        Some((_, e)) if n == 1 => Err(e),
        Some((path, e)) => Err(Error::history(
            path,
            format!(
                "{n} of {} folders failed; the first: {e}",
                selection.folders.len()
            ),
            e.hint(),
        )),
    }
}

/// One folder's tag (or `--json` object).
fn print_tag(prefix: &str, lc: &history::LastChange, json: bool) -> Result<()> {
    if lc.from_github {
        output::eprintln(&format!(
            "note: shallow clone; the GitHub API named commit {} as the last change of {}",
            lc.commit.id, lc.repo_path
        ));
    }
    let tag = crate::tag::timestamp_tag(prefix, lc.commit.timestamp, &lc.commit.id)?;
    if json {
        let v = serde_json::json!({
            "tag": tag,
            "commit": lc.commit.id,
            "timestamp": lc.commit.timestamp,
            "committed_at": lc.commit.committed_at(),
            "path": lc.repo_path,
        });
        output::println(&v.to_string())
    } else {
        output::println(&tag)
    }
}

/// `plan`: the folders with no image for their last commit yet.
pub(super) fn plan(env: &front::Env, args: &PlanArgs) -> Result<()> {
    let selection = Selection::of(&as_strings(&args.path), Field::Path)?;
    let (repositories, notices) =
        crate::many::repositories(&args.repository, &selection.folders, Field::Repository)?;
    say_lower_cased(&notices);
    let options = registry::Options {
        insecure: args.access.insecure,
        credentials: credentials(
            env,
            args.access.username.as_ref(),
            args.access.password_stdin,
        )?,
        docker_config: front::docker_config(env),
        ..registry::Options::default()
    };
    if let Some(note) = crate::tag::shared_prefix_note(&args.timestamp_tag) {
        output::eprintln(&format!("{}: {}", note.label(), note.text));
    }
    let api = front::github_api(env, args.github.token());
    let plan = crate::many::plan(
        &selection.folders,
        &repositories,
        &args.timestamp_tag,
        args.revision.as_deref(),
        api,
        &options,
    )?;
    if args.json {
        let s = serde_json::to_string(&plan)
            .map_err(|e| Error::io("printing the plan", std::io::Error::other(e)))?;
        output::println(&s)?;
    } else {
        for e in &plan.include {
            output::println(&format!("{}: needs {}:{}", e.path, e.repository, e.tag))?;
        }
        for e in &plan.up_to_date {
            output::println(&format!(
                "{}: up to date ({}:{})",
                e.path, e.repository, e.tag
            ))?;
        }
    }
    Ok(())
}
