//! The publish action with several folders: `path` holds one folder or
//! glob per line (`configs/*`), `repository` a template (`{name}`,
//! `{path}`); every folder becomes its own image through
//! [`crate::pipeline::run`], one history walk for all. Outputs: `images` (a
//! JSON array, one entry per folder: path, repository, tag, digest,
//! reference, pushed, anomaly, error) and `pushed` (any folder pushed);
//! the job summary has one row per folder. With `plan: true` nothing is
//! built: the `matrix` output lists the folders with no image for their
//! last commit yet, for a later job's `strategy.matrix`.
//!
//! One folder on one line without a glob stays the single-folder action
//! (src/action/publish.rs), outputs unchanged.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::commands::{self, say};
use super::inputs::{self, Env, EventPlan};
use super::publish::{With, ensure_temp_dir, read_inputs};
use crate::error::{Error, Result};
use crate::front;
use crate::many::{self, Folder, Matrix};
use crate::pipeline::{self, ImageLine, Spec};
use crate::registry;
use crate::request::{Request, Target};

/// The folders and globs of the `path` input, one per line.
fn path_lines(with: &With) -> Vec<String> {
    with.path
        .as_deref()
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// Whether this run is the several-folder action: `plan: true`, or a
/// `path` with several lines or a glob.
pub fn wanted(env: &Env) -> Result<bool> {
    let with: With = inputs::from_env(env)?;
    Ok(with.plan.unwrap_or(false) || many::is_many(&path_lines(&with)))
}

/// Selects the folders (relative to the workspace, which becomes the
/// current directory so that globs and the reported paths are relative to
/// it) and reads the shared inputs.
fn select(env: &Env, with: &With) -> Result<(Vec<Folder>, super::publish::PublishInputs)> {
    let lines = path_lines(with);
    if lines.is_empty() {
        inputs::require(None, "path")?;
    }
    let ws = inputs::workspace(env)?;
    for l in &lines {
        // Refuses a folder or glob that leaves the workspace.
        inputs::workspace_path(&ws, "path", l)?;
    }
    std::env::set_current_dir(&ws)
        .map_err(|e| Error::io(format!("entering the workspace {}", ws.display()), e))?;
    let folders = many::select(&lines, "the input `path`")?;
    for f in &folders {
        super::publish::check_no_symlink_escape(&ws, &ws.join(&f.path))?;
    }
    // The other inputs, checked as the single-folder action checks them.
    let mut shared = env.clone();
    if let Some(first) = folders.first() {
        shared.insert(inputs::input_key("path"), first.path.display().to_string());
    }
    let inputs = read_inputs(&shared)?;
    Ok((folders, inputs))
}

/// Runs the several-folder action (or the plan).
pub fn publish(env: &Env) -> Result<()> {
    let with: With = inputs::from_env(env)?;
    let (folders, mut inputs) = select(env, &with)?;
    if !inputs.push && with.plan != Some(true) {
        return Err(Error::input(
            "`push: false` (a dry run) is for one folder; several folders always push",
            Some("drop `push: false`, or use `plan: true` to see what would be pushed".to_string()),
        ));
    }
    let (repositories, notices) =
        many::repositories(&inputs.repository, &folders, "the input `repository`")?;
    say_lower_cased(&inputs, &notices);
    if with.plan != Some(true) {
        super::login::exchange_first(&mut inputs.credentials, inputs.login.as_ref())?;
    }
    let options = registry::Options {
        repository: String::new(),
        ..super::publish::registry_options(env, &inputs)
    };
    let revision = match inputs::event_plan(env)? {
        EventPlan::Skip(why) => {
            say(&commands::notice(
                "settings-image: nothing to package",
                &why,
            ));
            write_outputs(env, &[("pushed", "false".into()), ("images", "[]".into())])?;
            return Ok(());
        }
        EventPlan::Build { revision } => revision,
    };
    if with.plan == Some(true) {
        return write_plan(
            env,
            &inputs,
            &folders,
            &repositories,
            revision.as_deref(),
            &options,
        );
    }
    ensure_temp_dir()?;
    let jobs = jobs(&with)?;
    let base = Request {
        tags: inputs.tags.clone(),
        source: inputs.source,
        timestamp_tag: inputs.timestamp_tag.clone(),
        github: front::github_api(env, inputs.github_token.clone()),
        source_url: inputs.source_url.clone(),
        ci: front::ci(env),
        forward: inputs.forward.clone(),
        provenance: inputs.provenance,
        revision: revision.clone(),
        extra: inputs.extra.clone(),
        ..Request::new(PathBuf::new(), Target::Registry(options.clone()))
    };
    let targets = many::registry_targets(&options, repositories);
    say(&commands::group(&format!(
        "settings-image: package {} folders, {jobs} at a time",
        folders.len()
    )));
    let outcome = pipeline::run(&Spec::each(base, &folders, targets, jobs))?;
    say(&commands::escape_text(outcome.human().trim_end()));
    say(&commands::endgroup());
    report_outcome(env, &inputs, &outcome)?;
    outcome.into_result()
}

/// Says that the repository was lower-cased: the input's, then each
/// folder's.
fn say_lower_cased(inputs: &super::publish::PublishInputs, notices: &[String]) {
    if let Some(given) = &inputs.repository_given {
        say(&commands::notice(
            "settings-image: repository lower-cased",
            &format!(
                "the input `repository` is {given}; registries take lower-case names only, so the images go to {}",
                inputs.repository
            ),
        ));
    }
    for n in notices {
        say(&commands::notice(
            "settings-image: repository lower-cased",
            n,
        ));
    }
}

/// `plan: true`: writes the `matrix` output (and the summary) of the
/// folders with no image for their last commit yet; builds nothing.
fn write_plan(
    env: &Env,
    inputs: &super::publish::PublishInputs,
    folders: &[Folder],
    repositories: &[String],
    revision: Option<&str>,
    options: &registry::Options,
) -> Result<()> {
    let Some(prefix) = inputs.timestamp_tag.as_deref() else {
        return Err(Error::input(
            "`plan: true` needs `timestamp-tag`: the plan looks for each folder's timestamp tag",
            Some("set `timestamp-tag: ${{ github.ref_name }}`".to_string()),
        ));
    };
    if let Some(note) = crate::tag::shared_prefix_note(prefix) {
        let title = "settings-image: shared tag prefix";
        say(&if note.changed {
            commands::warning(title, &note.text)
        } else {
            commands::notice(title, &note.text)
        });
    }
    let plan = many::plan(
        folders,
        repositories,
        prefix,
        revision,
        front::github_api(env, inputs.github_token.clone()),
        options,
    )?;
    let matrix = serde_json::to_string(&plan)
        .map_err(|e| Error::io("writing the matrix", std::io::Error::other(e)))?;
    say(&commands::escape_text(&format!(
        "{} of {} folders need an image: {matrix}",
        plan.include.len(),
        folders.len()
    )));
    write_outputs(env, &[("matrix", matrix)])?;
    if inputs.summary {
        write_summary(env, &plan_summary(&plan))?;
    }
    Ok(())
}

/// The input `jobs`: how many folders build and push at once (4 if unset).
fn jobs(with: &With) -> Result<usize> {
    Ok(
        match with
            .jobs
            .as_deref()
            .map(str::trim)
            .filter(|v| !v.is_empty())
        {
            None => 4,
            Some(v) => v.parse::<usize>().ok().filter(|&n| n > 0).ok_or_else(|| {
                Error::input(
                    format!("the input `jobs` is {v:?}, not a positive number"),
                    Some("set how many folders build and push at once, e.g. 4".to_string()),
                )
            })?,
        },
    )
}

/// Annotates each folder's warnings, anomaly and error, then writes the
/// `images` and `pushed` outputs and the summary.
fn report_outcome(
    env: &Env,
    inputs: &super::publish::PublishInputs,
    outcome: &pipeline::RunReport,
) -> Result<()> {
    for (report, image) in outcome.reports.iter().zip(&outcome.images) {
        for w in report.iter().flat_map(|r| &r.warnings) {
            say(&commands::warning(
                "settings-image",
                &format!("{}: {w}", image.path),
            ));
        }
        if let Some(a) = &image.anomaly {
            say(&commands::warning(
                &format!("settings-image: {}: {}", image.path, a.kind.as_str()),
                &a.message,
            ));
        }
    }
    for (path, e) in &outcome.errors {
        let mut line = format!("{path}: {e}");
        if let Some(h) = e.hint() {
            line.push_str(&format!("\nhint: {h}"));
        }
        say(&commands::error("settings-image: a folder failed", &line));
    }
    let images = serde_json::to_string(&outcome.images)
        .map_err(|e| Error::io("writing the images output", std::io::Error::other(e)))?;
    let pushed = outcome.images.iter().any(|i| i.pushed == Some(true));
    write_outputs(env, &[("images", images), ("pushed", pushed.to_string())])?;
    if inputs.summary {
        let prefix = inputs
            .timestamp_tag
            .as_deref()
            .and_then(|p| crate::tag::sanitize_prefix(p).ok());
        write_summary(env, &summary(&outcome.images, prefix.as_deref()))?;
    }
    Ok(())
}

fn write_outputs(env: &Env, entries: &[(&str, String)]) -> Result<()> {
    match env.get("GITHUB_OUTPUT").filter(|p| !p.is_empty()) {
        Some(out) => {
            let text: String = entries
                .iter()
                .map(|(k, v)| commands::output_entry(k, v))
                .collect();
            commands::append(Path::new(out), &text)
        }
        None => {
            say(&commands::warning(
                "settings-image: no outputs",
                "GITHUB_OUTPUT is not set, so the step outputs were not written",
            ));
            Ok(())
        }
    }
}

fn write_summary(env: &Env, text: &str) -> Result<()> {
    match env.get("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty()) {
        Some(file) => commands::append(Path::new(file), &commands::cap_summary(text.to_string())),
        None => Ok(()),
    }
}

/// `|` and newlines would break a table row.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// One table row per folder, then the Flux objects for every image.
pub fn summary(images: &[ImageLine], prefix: Option<&str>) -> String {
    let mut s = String::new();
    let failed = images.iter().filter(|i| i.error.is_some()).count();
    let _ = writeln!(
        s,
        "### settings-image: {} folders{}\n",
        images.len(),
        if failed > 0 {
            format!(", {failed} failed")
        } else {
            String::new()
        }
    );
    let _ = writeln!(s, "| folder | image | pushed | note |\n|---|---|---|---|");
    for i in images {
        let (image, pushed) = match (&i.error, &i.reference) {
            (Some(_), _) => (format!("`{}`", i.repository), "failed".to_string()),
            (None, Some(r)) => (
                format!("`{r}`"),
                if i.pushed == Some(true) {
                    "yes"
                } else {
                    "no: unchanged"
                }
                .to_string(),
            ),
            (None, None) => (format!("`{}`", i.repository), String::new()),
        };
        let note = match (&i.error, &i.anomaly) {
            (Some(e), _) => e.clone(),
            (None, Some(a)) => format!("{}: {}", a.kind.as_str(), a.message),
            _ => String::new(),
        };
        let _ = writeln!(
            s,
            "| `{}` | {} | {} | {} |",
            cell(&i.path),
            cell(&image),
            pushed,
            cell(&note)
        );
    }
    if let Some(prefix) = prefix {
        let yaml: Vec<String> = images
            .iter()
            .filter(|i| i.error.is_none())
            .map(|i| {
                super::summary::flux_yaml(
                    &i.repository,
                    prefix,
                    i.reference.as_deref().unwrap_or_default(),
                )
            })
            .collect();
        if !yaml.is_empty() {
            let _ = writeln!(
                s,
                "\n<details><summary>Flux objects for these images</summary>\n\n```yaml\n{}```\n</details>",
                yaml.join("---\n")
            );
        }
    }
    s
}

fn plan_summary(plan: &Matrix) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "### settings-image plan: {} of {} folders need an image\n",
        plan.include.len(),
        plan.include.len() + plan.up_to_date.len()
    );
    let _ = writeln!(s, "| folder | image | |\n|---|---|---|");
    for (e, what) in plan
        .include
        .iter()
        .map(|e| (e, "to build"))
        .chain(plan.up_to_date.iter().map(|e| (e, "up to date")))
    {
        let _ = writeln!(
            s,
            "| `{}` | `{}:{}` | {what} |",
            cell(&e.path),
            cell(&e.repository),
            e.tag
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::many::PlanEntry;

    use super::inputs::env_of as env;

    #[test]
    fn several_lines_or_a_glob_or_plan_select_this_face() {
        assert!(!wanted(&env(&[("INPUT_PATH", "configs/shop\n")])).unwrap());
        assert!(wanted(&env(&[("INPUT_PATH", "configs/shop\nconfigs/billing")])).unwrap());
        assert!(wanted(&env(&[("INPUT_PATH", "configs/*")])).unwrap());
        assert!(
            wanted(&env(&[
                ("INPUT_PATH", "configs/shop"),
                ("INPUT_PLAN", "true")
            ]))
            .unwrap()
        );
        assert!(wanted(&env(&[("INPUT_PLAN", "yes")])).is_err());
    }

    #[test]
    fn the_summary_has_one_row_per_folder_and_flux_objects_for_each_image() {
        let ok = ImageLine {
            path: "configs/shop".into(),
            repository: "ghcr.io/acme/shop".into(),
            tag: Some("main-1-abcdef0".into()),
            digest: Some("sha256:00".into()),
            reference: Some("ghcr.io/acme/shop:main-1-abcdef0@sha256:00".into()),
            pushed: Some(false),
            anomaly: None,
            error: None,
        };
        let bad = ImageLine {
            path: "configs/b|x".into(),
            repository: "ghcr.io/acme/bx".into(),
            tag: None,
            digest: None,
            reference: None,
            pushed: None,
            anomaly: None,
            error: Some("is not in the HEAD commit\nat all".into()),
        };
        let s = summary(&[ok, bad], Some("main"));
        assert!(s.contains("2 folders, 1 failed"), "{s}");
        assert!(
            s.contains("| `configs/shop` | `ghcr.io/acme/shop:main-1-abcdef0@sha256:00` | no: unchanged |  |"),
            "{s}"
        );
        assert!(
            s.contains("| `configs/b\\|x` | `ghcr.io/acme/bx` | failed | is not in the HEAD commit at all |"),
            "{s}"
        );
        assert_eq!(
            s.matches("kind: ImagePolicy").count(),
            1,
            "only for images made"
        );
        let p = plan_summary(&Matrix {
            include: vec![PlanEntry {
                path: "configs/a".into(),
                repository: "r/a".into(),
                tag: "main-2-abcdef0".into(),
            }],
            up_to_date: vec![],
        });
        assert!(p.contains("1 of 1 folders need an image"), "{p}");
        assert!(
            p.contains("| `configs/a` | `r/a:main-2-abcdef0` | to build |"),
            "{p}"
        );
    }
}
