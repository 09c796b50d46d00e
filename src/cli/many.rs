//! The several-folder faces of the CLI (`crate::many`): `build`, `push` and
//! `tag` with more than one `--path`, and `plan`; one history walk, one entry
//! per folder.

use std::path::PathBuf;

use super::{
    BuildArgs, PlanArgs, PushArgs, TagArgs, credentials, history_request, push_options,
    push_request,
};
use crate::error::{Error, Result};
use crate::front;
use crate::history;
use crate::output;
use crate::pipeline::{self, RunReport, Spec};
use crate::registry;
use crate::request::Target;

pub(super) fn as_strings(paths: &[PathBuf]) -> Vec<String> {
    paths
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect()
}

pub(super) fn is_many(paths: &[PathBuf]) -> bool {
    crate::many::is_many(&as_strings(paths))
}

fn print_many(outcome: RunReport, json: bool) -> Result<()> {
    for (report, image) in outcome.reports.iter().zip(&outcome.images) {
        for w in report.iter().flat_map(|r| &r.warnings) {
            output::eprintln(&format!("warning: {}: {w}", image.path));
        }
    }
    if json {
        let s = serde_json::to_string(&outcome.images)
            .map_err(|e| Error::io("printing the report", std::io::Error::other(e)))?;
        output::println(&s)?;
    } else {
        output::print(&outcome.human())?;
    }
    for (path, e) in &outcome.errors {
        output::eprintln(&format!("error: {path}: {e}"));
    }
    outcome.into_result()
}

pub(super) fn run_push_many(env: &front::Env, args: PushArgs) -> Result<()> {
    let folders = crate::many::select(&as_strings(&args.path), "--path")?;
    let (repositories, notices) =
        crate::many::repositories(&args.repository, &folders, "--repository")?;
    let mut options = push_options(env, &args)?;
    options.repository = String::new();
    for n in &notices {
        output::eprintln(&format!("notice: {n}"));
    }
    let targets = crate::many::registry_targets(&options, repositories);
    let (jobs, json) = (args.jobs, args.json);
    let base = push_request(env, args, options)?;
    let outcome = pipeline::run(&Spec::each(base, &folders, targets, jobs))?;
    print_many(outcome, json)
}

pub(super) fn run_build_many(env: &front::Env, args: BuildArgs) -> Result<()> {
    let folders = crate::many::select(&as_strings(&args.path), "--path")?;
    let outputs = crate::many::targets(&args.output.to_string_lossy(), &folders, "--output")?;
    let targets = outputs
        .into_iter()
        .map(|o| Target::Layout(PathBuf::from(o)))
        .collect();
    let base = history_request(env, args.history, args.tags, Target::Layout(args.output))?;
    let outcome = pipeline::run(&Spec::each(base, &folders, targets, args.jobs))?;
    print_many(outcome, args.json)
}

pub(super) fn run_tag_many(env: &front::Env, args: &TagArgs) -> Result<()> {
    crate::tag::sanitize_prefix(&args.prefix)?;
    if let Some(note) = crate::tag::shared_prefix_note(&args.prefix) {
        output::eprintln(&format!("{}: {}", note.label(), note.text));
    }
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
            format!("{n} of {} folders failed; the first: {e}", folders.len()),
            e.hint(),
        )),
    }
}

pub(super) fn run_plan(env: &front::Env, args: &PlanArgs) -> Result<()> {
    let folders = crate::many::select(&as_strings(&args.path), "--path")?;
    let (repositories, notices) =
        crate::many::repositories(&args.repository, &folders, "--repository")?;
    for n in &notices {
        output::eprintln(&format!("notice: {n}"));
    }
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
