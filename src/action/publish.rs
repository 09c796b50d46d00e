//! `settings-image action` (mode `publish`): the runner's inputs read in
//! one step into the core's values (a [`Selection`] of folders, their
//! targets, the shared [`Request`]), the core called once
//! ([`crate::pipeline::run`]), and its outcome written as step outputs,
//! annotations and the job summary. One folder is the one-element case:
//! the selection decides only the shape of what is written. One folder on
//! one line writes `digest`, `tag`, `reference`, ... (and may be a dry
//! run, `push: false`); several lines or a glob write `images` (a JSON
//! array, one entry per folder) and `pushed`, and a job summary with a row
//! per folder; `plan: true` builds nothing and writes `matrix`, the folders
//! with no image for their last commit yet, for a later job's
//! `strategy.matrix`.
//!
//! Order matters: the secrets are registered with `::add-mask::` before
//! anything else is printed, so the runner hides them from every later line.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::commands::{self, say};
use super::fields::Inputs;
use super::inputs::{self, Env, EventPlan};
use super::summary::{self, Facts};
use crate::branch_tag::{BranchTag, Change};
use crate::error::{Error, Result};
use crate::field::{Face, Field, Mention};
use crate::front;
use crate::history::{SourceMode, Token};
use crate::image::Metadata;
use crate::many::{LowerCased, Selection};
use crate::pipeline::{self, RunReport, Spec};
use crate::registry::{self, Credentials};
use crate::release::ordering::{Anomaly, AnomalyKind};
use crate::report::Report;
use crate::request::{self, Request, Target};
use crate::show::{self, ImageLine};

/// The publish action's inputs (action.yml), as the runner passes them.
/// Each field is one input (kebab-case); the runner sets every declared
/// input, empty when the workflow does not, and empty reads as absent.
#[derive(Debug, Default, serde::Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(rename_all = "kebab-case", default)]
pub struct With {
    /// The settings folder, relative to the workspace (required).
    pub path: Option<String>,
    /// The image repository (required); lower-cased as metadata-action does.
    pub repository: Option<String>,
    /// The prefix of the timestamp tag.
    pub timestamp_tag: Option<String>,
    /// Extra tags, newline or comma separated.
    #[serde(deserialize_with = "inputs::items")]
    pub tags: Vec<String>,
    /// The login inputs (`login`, `github-token`, the deprecated `token`,
    /// `username`, `password`, the provider facts), shared with promote.
    #[serde(flatten)]
    pub login: super::login::LoginWith,
    /// `commit` or `worktree`.
    #[serde(deserialize_with = "source_mode")]
    #[cfg_attr(test, serde(serialize_with = "tests::as_unit"))]
    pub source: Option<SourceMode>,
    /// Plain HTTP to a non-loopback registry.
    #[serde(deserialize_with = "inputs::flag")]
    pub insecure: Option<bool>,
    /// The guarded moving tag.
    pub branch_tag: Option<String>,
    /// Move the branch tag even when history diverged.
    #[serde(deserialize_with = "inputs::flag")]
    pub allow_rewind: Option<bool>,
    /// Attach the provenance referrer (default true).
    #[serde(deserialize_with = "inputs::flag")]
    pub provenance: Option<bool>,
    /// Write a job summary (default true).
    #[serde(deserialize_with = "inputs::flag")]
    pub summary: Option<bool>,
    /// Push (default true); `false` builds and reports without pushing.
    #[serde(deserialize_with = "inputs::flag")]
    pub push: Option<bool>,
    /// Manifest annotations, `KEY=VALUE` per line (metadata-action's
    /// `annotations` output, `manifest:` level prefixes allowed).
    #[serde(deserialize_with = "inputs::lines")]
    pub annotations: Vec<String>,
    /// Config labels, `KEY=VALUE` per line (metadata-action's `labels`).
    #[serde(deserialize_with = "inputs::lines")]
    pub labels: Vec<String>,
    /// The repository URL the image records, or `none` (default: the
    /// run's `GITHUB_SERVER_URL/GITHUB_REPOSITORY`).
    pub source_url: Option<String>,
    /// With several folders, how many build and push at once (default 4).
    pub jobs: Option<String>,
    /// Build nothing; write the `matrix` output.
    #[serde(deserialize_with = "inputs::flag")]
    pub plan: Option<bool>,
}

fn source_mode<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<SourceMode>, D::Error> {
    use serde::Deserialize;
    use serde::de::Error as _;
    match Option::<String>::deserialize(d)?.as_deref() {
        None | Some("commit") => Ok(Some(SourceMode::Commit)),
        Some("worktree") => Ok(Some(SourceMode::Worktree)),
        Some(other) => Err(D::Error::custom(format!(
            "is {other:?}\nhint: use `commit` (the folder as the commit holds it) or `worktree` (as it is on disk)"
        ))),
    }
}

/// The publish inputs, read and checked: the folders and what they share.
#[derive(Debug)]
pub(super) struct PublishInputs {
    /// The folders of `path` (one per line, globs allowed), relative to
    /// the workspace; `plan: true` counts as several.
    pub(super) selection: Selection,
    pub(super) repository: String,
    /// The `repository` input as given, when it had to be lower-cased.
    pub(super) repository_given: Option<String>,
    pub(super) timestamp_tag: Option<String>,
    pub(super) tags: Vec<String>,
    pub(super) credentials: Option<Credentials>,
    pub(super) login: Option<crate::login::Login>,
    pub(super) notices: Vec<String>,
    pub(super) github_token: Option<Token>,
    pub(super) source: SourceMode,
    pub(super) insecure: bool,
    pub(super) summary: bool,
    pub(super) provenance: bool,
    pub(super) push: bool,
    /// `plan: true`: write the `matrix` output, build nothing.
    pub(super) plan: bool,
    /// The `jobs` input as given (read for several folders only).
    pub(super) jobs: Option<String>,
    pub(super) forward: request::Forward,
    pub(super) extra: Metadata,
    pub(super) source_url: crate::history::SourceUrl,
}

/// The annotation title's subject.
pub(super) const WHO: &str = "settings-image";

/// Reads `KEY=VALUE` lines of the `annotations` or `labels` input; a
/// metadata-action level prefix (`manifest:`, `index,manifest:`) is
/// understood, and lines for other levels only (`index:`) are skipped:
/// the image is one manifest, without an index.
fn key_values(name: &str, lines: &[String], levels: bool) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for line in lines {
        let Some((key, value)) = line.split_once('=') else {
            return Err(Error::input(
                format!("the input `{name}` has the line {line:?}, which is not KEY=VALUE"),
                Some(format!(
                    "give one KEY=VALUE per line, e.g. `{name}: ${{{{ steps.meta.outputs.{name} }}}}`"
                )),
            ));
        };
        let mut key = key.trim();
        // `manifest:KEY`, `index,manifest:KEY`: a level list (no dots, no
        // slashes, unlike any annotation key).
        if let Some((level, rest)) = key
            .split_once(':')
            .filter(|(l, _)| levels && !l.contains('.') && !l.contains('/'))
        {
            if !level.split(',').any(|l| l.trim() == "manifest") {
                log::debug!("{name}: {key} is not for the manifest, skipped");
                continue;
            }
            key = rest.trim();
        }
        if key.is_empty() {
            return Err(Error::input(
                format!("the input `{name}` has the line {line:?}, with an empty key"),
                Some("give one KEY=VALUE per line".to_string()),
            ));
        }
        out.insert(key.to_string(), value.to_string());
    }
    Ok(out)
}

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

/// Reads and checks every input, before anything is printed or asked:
/// the one step from `INPUT_*` to the core's values. The folders are
/// selected relative to the workspace, which the action runs in
/// ([`super::run`] enters it).
pub(super) fn read_inputs(env: &Env) -> Result<PublishInputs> {
    let with: With = inputs::from_env(env)?;
    let lines = path_lines(&with);
    if lines.is_empty() {
        inputs::require(None, "path")?;
    }
    let given = inputs::require(with.repository, "repository")?;
    // Checked first, as given: credentials in it are refused unread, and
    // whitespace or `%` get their own words (case is dealt with below).
    registry::check_repository_text(&given)?;
    let workspace = inputs::workspace(env)?;
    for l in &lines {
        // Refuses a folder or glob that leaves the workspace.
        inputs::workspace_path(&workspace, "path", l)?;
    }
    let plan = with.plan.unwrap_or(false);
    let mut selection = Selection::of(&lines, Field::Path)?;
    selection.several |= plan;
    for f in &selection.folders {
        check_no_symlink_escape(&workspace, &workspace.join(&f.path))?;
    }
    let timestamp_tag = with.timestamp_tag;
    let tags = with.tags;
    if timestamp_tag.is_none() && tags.is_empty() {
        return Err(Error::input(
            "neither `timestamp-tag` nor `tags` is set, so the image would have no tag",
            Some(
                "set `timestamp-tag: ${{ github.ref_name }}` (the tag Flux orders by), and/or `tags`"
                    .to_string(),
            ),
        ));
    }
    // As docker/metadata-action does: a workflow cannot lower-case inside
    // `with:`, and `github.repository_owner` keeps the owner's capitals.
    let repository = given.to_ascii_lowercase();
    let insecure = with.insecure.unwrap_or(false);
    let login = super::login::resolve(env, &with.login, &repository, insecure)?;
    Ok(PublishInputs {
        selection,
        repository_given: (repository != given).then_some(given),
        repository,
        timestamp_tag,
        tags,
        credentials: login.credentials,
        login: login.login,
        notices: login.notices,
        github_token: login.github_token.and_then(Token::new),
        source: with.source.unwrap_or(SourceMode::Commit),
        insecure,
        summary: with.summary.unwrap_or(true),
        provenance: with.provenance.unwrap_or(true),
        push: with.push.unwrap_or(true),
        plan,
        jobs: with.jobs,
        forward: request::Forward {
            branch_tag: with.branch_tag,
            allow_rewind: with.allow_rewind.unwrap_or(false),
            forced_before: inputs::forced_push(env)?,
        },
        extra: Metadata {
            annotations: key_values("annotations", &with.annotations, true)?,
            labels: key_values("labels", &with.labels, false)?,
        },
        source_url: match with.source_url.as_deref().filter(|u| !u.trim().is_empty()) {
            Some(given) => crate::history::SourceUrl::parse(given)?,
            None => crate::history::SourceUrl::from_ci(front::source_url(env)),
        },
    })
}

/// `workspace_path` resolves names lexically; a symlink in the workspace
/// could still point outside it. When both exist, the real folder must be
/// inside the real workspace.
pub(super) fn check_no_symlink_escape(workspace: &Path, path: &Path) -> Result<()> {
    let (Ok(ws), Ok(real)) = (workspace.canonicalize(), path.canonicalize()) else {
        return Ok(()); // a missing folder is reported by the build, by name
    };
    if real.starts_with(&ws) {
        return Ok(());
    }
    Err(Error::input(
        format!(
            "the input `path` ({}) is a symlink to {}, outside the workspace {}",
            path.display(),
            real.display(),
            ws.display()
        ),
        Some("name the settings folder itself, inside the repository".to_string()),
    ))
}

/// A `FROM scratch` image has no `/tmp`, and the layer is staged in a
/// temporary file: create the directory (the action runs as root).
pub(super) fn ensure_temp_dir() -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let tmp = std::env::temp_dir();
    if tmp.is_dir() {
        return Ok(());
    }
    let context = || format!("creating the temporary directory {}", tmp.display());
    std::fs::create_dir_all(&tmp).map_err(|e| Error::io(context(), e))?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o1777))
        .map_err(|e| Error::io(context(), e))
}

/// The runner's `GITHUB_EVENT_NAME` and `GITHUB_RUN_ATTEMPT`, checked:
/// an event name is lower-case letters and `_`, an attempt is a number.
fn run_facts(env: &Env) -> Result<(String, String)> {
    let event = env.get("GITHUB_EVENT_NAME").cloned().unwrap_or_default();
    let attempt = env
        .get("GITHUB_RUN_ATTEMPT")
        .cloned()
        .unwrap_or_else(|| "1".to_string());
    let bad = |name: &str, what: &str| {
        Error::input(
            format!("{name} is not {what}"),
            Some(format!(
                "the runner sets {name}; a step's `env:` should not override it"
            )),
        )
    };
    if !event.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') {
        return Err(bad("GITHUB_EVENT_NAME", "an event name ([a-z_])"));
    }
    if attempt.is_empty() || !attempt.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad("GITHUB_RUN_ATTEMPT", "a number"));
    }
    Ok((event, attempt))
}

/// Publishes the folders (or writes the plan); the caller, [`super::run`],
/// reports the error.
pub(super) fn publish(env: &Env) -> Result<()> {
    let mut inputs = read_inputs(env)?;
    let several = inputs.selection.several;
    if several && !inputs.push && !inputs.plan {
        return Err(Error::input(
            "`push: false` (a dry run) is for one folder; several folders always push",
            Some("drop `push: false`, or use `plan: true` to see what would be pushed".to_string()),
        ));
    }
    let (repositories, lower_cased) = inputs
        .selection
        .repositories(&inputs.repository, Field::Repository)?;
    for r in &repositories {
        registry::parse_repository(r)?;
    }
    let (event, attempt) = run_facts(env)?;
    for n in &inputs.notices {
        say(&commands::warning("settings-image: deprecated input", n));
    }
    say_lower_cased(&inputs, &lower_cased);
    let revision = match inputs::event_plan(env)? {
        EventPlan::Skip(why) => {
            say(&commands::notice(
                "settings-image: nothing to package",
                &why,
            ));
            let mut skipped = vec![("pushed", "false".to_string())];
            if several {
                skipped.push(("images", "[]".to_string()));
            }
            return write_outputs(env, &skipped);
        }
        EventPlan::Build { revision } => revision,
    };
    if inputs.plan {
        return write_plan(env, &inputs, &repositories, revision.as_deref());
    }
    if inputs.push {
        super::login::exchange_first(&mut inputs.credentials, inputs.login.as_ref())?;
    }
    ensure_temp_dir()?;
    let jobs = if several {
        jobs(inputs.jobs.as_deref())?
    } else {
        1
    };
    // `push: false` builds into a throwaway OCI layout: the same image,
    // digest and tags, and not one request to the registry.
    let dry_run = if inputs.push {
        None
    } else {
        Some(tempfile::tempdir().map_err(|e| Error::io("creating a temporary directory", e))?)
    };
    let targets = match &dry_run {
        None => crate::many::registry_targets(&registry_options(env, &inputs), repositories),
        Some(dir) => vec![Target::Layout(dir.path().join("layout"))],
    };
    let spec = Spec::new(
        request(env, &inputs, revision.clone()),
        &inputs.selection,
        targets,
        jobs,
    );
    // Everything printed below comes from checked inputs, and still goes
    // through the escaping functions: no value can write a command.
    spec.validate()?;
    if several {
        say(&commands::group(&format!(
            "settings-image: package {} folders, {jobs} at a time",
            inputs.selection.folders.len()
        )));
    } else {
        say(&commands::group(&format!(
            "settings-image: package {} {} {}",
            inputs
                .selection
                .folders
                .first()
                .map(|f| f.path.display().to_string())
                .unwrap_or_default(),
            if inputs.push {
                "and push to"
            } else {
                "without pushing (push: false) for"
            },
            inputs.repository
        )));
        say(&commands::escape_text(&format!(
            "event {event}, history from {}, source {:?}, run attempt {attempt}",
            revision.as_deref().unwrap_or("HEAD"),
            inputs.source,
        )));
    }
    let outcome = pipeline::run(&spec);
    if several {
        let outcome = outcome?;
        say(&commands::escape_text(
            crate::show::folders(&outcome).trim_end(),
        ));
        say(&commands::endgroup());
        report_folders(env, &inputs, &outcome)?;
        return outcome.into_result();
    }
    let result = outcome.and_then(RunReport::into_report);
    if let Ok(report) = &result {
        say(&commands::escape_text(
            crate::show::report(report).trim_end(),
        ));
    }
    say(&commands::endgroup());
    let report = match result {
        Ok(report) => report,
        Err(e) => {
            if let Error::AfterPublish { published, error } = &e {
                published_then_failed(env, &inputs, published, error)?;
            }
            return Err(e);
        }
    };
    let published = Published::of(&inputs, &report)?;
    announce(&inputs, &report, &published);
    write_step_outputs(env, &inputs, &report, &published)
}

/// The request every folder shares: to the registry, or (`push: false`)
/// to an OCI layout, with no branch tag and no referrer.
fn request(env: &Env, inputs: &PublishInputs, revision: Option<String>) -> Request {
    if !inputs.push && inputs.forward.branch_tag.is_some() {
        say(&commands::notice(
            "settings-image: dry run",
            "`push: false`: the branch tag is not looked at or moved",
        ));
    }
    Request {
        tags: inputs.tags.clone(),
        source: inputs.source,
        timestamp_tag: inputs.timestamp_tag.clone(),
        github: front::github_api(env, inputs.github_token.clone()),
        source_url: inputs.source_url.clone(),
        ci: front::ci(env),
        revision,
        // As `push` does by default: the commit, ref and run as a referrer.
        provenance: inputs.provenance && inputs.push,
        forward: if inputs.push {
            inputs.forward.clone()
        } else {
            request::Forward::default()
        },
        extra: inputs.extra.clone(),
        ..Request::new(PathBuf::new(), Target::Layout(PathBuf::new()))
    }
}

/// Says that the repository was lower-cased: the input's, then each
/// folder's.
fn say_lower_cased(inputs: &PublishInputs, folders: &[LowerCased]) {
    let title = "settings-image: repository lower-cased";
    if let Some(given) = &inputs.repository_given {
        let (image, goes) = if inputs.selection.several {
            ("images", "go")
        } else {
            ("image", "goes")
        };
        let input = Inputs::Publish.mention(&Mention::Subject(Field::Repository));
        say(&commands::notice(
            title,
            &format!(
                "{input} is {given}; registries take lower-case names only, so the {image} {goes} to {}",
                inputs.repository
            ),
        ));
    }
    for n in folders {
        say(&commands::notice(title, &n.text().render(&Inputs::Publish)));
    }
}

/// The input `jobs`: how many folders build and push at once (4 if unset).
fn jobs(given: Option<&str>) -> Result<usize> {
    Ok(match given.map(str::trim).filter(|v| !v.is_empty()) {
        None => 4,
        Some(v) => v.parse::<usize>().ok().filter(|&n| n > 0).ok_or_else(|| {
            Error::input(
                format!("the input `jobs` is {v:?}, not a positive number"),
                Some("set how many folders build and push at once, e.g. 4".to_string()),
            )
        })?,
    })
}

/// Appends `entries` to `$GITHUB_OUTPUT`, or warns that it is not set.
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

/// Appends `text` to the job summary (capped), when there is one.
fn write_summary(env: &Env, text: String) -> Result<()> {
    match env.get("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty()) {
        Some(file) => commands::append(Path::new(file), &commands::cap_summary(text)),
        None => Ok(()),
    }
}

/// `plan: true`: writes the `matrix` output (and the summary) of the
/// folders with no image for their last commit yet; builds nothing.
fn write_plan(
    env: &Env,
    inputs: &PublishInputs,
    repositories: &[String],
    revision: Option<&str>,
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
    let folders = &inputs.selection.folders;
    let plan = crate::many::plan(
        folders,
        repositories,
        prefix,
        revision,
        front::github_api(env, inputs.github_token.clone()),
        &registry::Options {
            repository: String::new(),
            ..registry_options(env, inputs)
        },
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
        write_summary(env, summary::render_plan(&plan))?;
    }
    Ok(())
}

/// Several folders: annotates each folder's warnings, anomaly and error,
/// then writes the `images` and `pushed` outputs and the summary.
fn report_folders(env: &Env, inputs: &PublishInputs, outcome: &RunReport) -> Result<()> {
    let face = Inputs::Publish;
    for f in &outcome.folders {
        let Ok(report) = &f.result else { continue };
        for w in &report.warnings {
            say(&commands::warning(
                "settings-image",
                &format!("{}: {}", f.path, show::notice(w).render(&face)),
            ));
        }
        if let Some(a) = &report.anomaly {
            say(&commands::warning(
                &format!("settings-image: {}: {}", f.path, a.kind.as_str()),
                &show::anomaly::message(a, &Inputs::Publish),
            ));
        }
    }
    for (path, e) in outcome.errors() {
        let mut line = format!("{path}: {}", e.render(&face));
        if let Some(h) = e.hint_in(&face) {
            line.push_str(&format!("\nhint: {h}"));
        }
        say(&commands::error("settings-image: a folder failed", &line));
    }
    let images: Vec<ImageLine> = outcome
        .folders
        .iter()
        .map(|f| ImageLine::of(f, &face))
        .collect();
    let pushed = images.iter().any(|i| i.pushed == Some(true));
    let images = serde_json::to_string(&images)
        .map_err(|e| Error::io("writing the images output", std::io::Error::other(e)))?;
    write_outputs(env, &[("images", images), ("pushed", pushed.to_string())])?;
    if inputs.summary {
        let prefix = inputs
            .timestamp_tag
            .as_deref()
            .and_then(|p| crate::tag::sanitize_prefix(p).ok());
        let lines: Vec<ImageLine> = outcome
            .folders
            .iter()
            .map(|f| ImageLine::of(f, &face))
            .collect();
        write_summary(env, summary::render_folders(&lines, prefix.as_deref()))?;
    }
    Ok(())
}

/// Says what the run did (pushed, already there, dry run), then its
/// warnings, anomaly and branch tag.
fn announce(inputs: &PublishInputs, report: &Report, published: &Published) {
    say(&commands::escape_text(&match (&report.push, inputs.push) {
        (_, false) => format!(
            "dry run (push: false), nothing pushed: {}",
            published.reference
        ),
        (Some(_), true) if published.pushed => format!("pushed {}", published.reference),
        _ => format!(
            "already in the registry, nothing pushed: {}",
            published.reference
        ),
    }));
    for w in &report.warnings {
        say(&warning_annotation(w));
    }
    if let Some(a) = &report.anomaly {
        say(&anomaly_annotation(a, report.timestamp_tag.as_deref()));
    }
    if let Some(b) = &report.branch_tag {
        let text = branch_text(b);
        say(&if b.rewound() {
            commands::warning("settings-image: branch tag rewound", &text)
        } else {
            commands::notice("settings-image: branch tag", &text)
        });
    }
}

/// A push that failed after it published: its warnings, the outputs of
/// what is in the registry (`digest`, `tag`, `tags`, `reference`,
/// `image`, `pushed`; the rest empty, and `failed-after-publish: true`),
/// and the summary saying both. The caller then prints the error.
fn published_then_failed(
    env: &Env,
    inputs: &PublishInputs,
    published: &crate::error::PublishedSoFar,
    error: &Error,
) -> Result<()> {
    for w in &published.warnings {
        say(&warning_annotation(w));
    }
    say(&commands::escape_text(&format!(
        "published, then failed: {published}"
    )));
    let timestamp_tag = published
        .tags
        .iter()
        .find(|t| crate::tag::timestamp_prefix(t).is_some())
        .cloned()
        .unwrap_or_default();
    if let Some(out) = env.get("GITHUB_OUTPUT").filter(|p| !p.is_empty()) {
        let entries: String = [
            ("digest", published.digest.clone()),
            ("tag", timestamp_tag),
            ("tags", published.tags.join("\n")),
            ("reference", published.reference.clone()),
            (
                "image",
                format!("{}@{}", inputs.repository, published.digest),
            ),
            ("pushed", published.pushed.to_string()),
            ("failed-after-publish", "true".to_string()),
        ]
        .iter()
        .map(|(name, value)| commands::output_entry(name, value))
        .collect();
        commands::append(Path::new(out), &entries)?;
    }
    let summary_file = env.get("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty());
    if let (true, Some(file)) = (inputs.summary, summary_file) {
        commands::append(
            Path::new(file),
            &commands::cap_summary(summary::render_failed_after_publish(
                &inputs.repository,
                published,
                &error.to_string(),
            )),
        )?;
    }
    Ok(())
}

/// Writes the step outputs (or warns that GITHUB_OUTPUT is not set) and,
/// with `summary`, the job summary.
fn write_step_outputs(
    env: &Env,
    inputs: &PublishInputs,
    report: &Report,
    published: &Published,
) -> Result<()> {
    if let Some(out) = env.get("GITHUB_OUTPUT").filter(|p| !p.is_empty()) {
        commands::append(Path::new(out), &outputs(report, published))?;
    } else {
        say(&commands::warning(
            "settings-image: no outputs",
            "GITHUB_OUTPUT is not set, so the step outputs were not written",
        ));
    }
    let summary_file = env.get("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty());
    if let (true, Some(file)) = (inputs.summary, summary_file) {
        let mut facts = facts(env, inputs, report, published);
        facts.changes = facts
            .prefix
            .as_deref()
            .and_then(|prefix| changes(env, inputs, report, prefix));
        commands::append(
            Path::new(file),
            &commands::cap_summary(summary::render(&facts)),
        )?;
    }
    Ok(())
}

/// What changed since the image before this one under its prefix, for
/// the job summary: only for a pushed image with a timestamp tag (a dry
/// run makes no registry request).
fn changes(
    env: &Env,
    inputs: &PublishInputs,
    report: &Report,
    prefix: &str,
) -> Option<crate::diff::review::Review> {
    use crate::diff::review::{Pushed, since_previous};
    let tag = report.timestamp_tag.as_deref().filter(|_| inputs.push)?;
    let options = registry_options(env, inputs);
    let pushed = Pushed {
        repository: &inputs.repository,
        tag,
        prefix,
        digest: &report.digest,
        commit: report.commit.as_deref(),
        layer: (&report.layer.digest, report.layer.size),
    };
    Some(since_previous(
        &options,
        &pushed,
        &crate::diff::Limits::SUMMARY,
    ))
}

/// How the inputs reach the registry of `repository`.
pub(super) fn registry_options(env: &Env, inputs: &PublishInputs) -> registry::Options {
    registry::Options {
        insecure: inputs.insecure,
        credentials: inputs.credentials.clone(),
        docker_config: front::docker_config(env),
        login: inputs.login.clone().map(Into::into),
        ..registry::Options::new(inputs.repository.clone())
    }
}

/// What a run published, in the outputs' terms.
#[derive(Debug)]
struct Published {
    /// `NAME:TAG@sha256:...` (what it would be, on a dry run).
    reference: String,
    /// `NAME@sha256:...` once in the registry; empty on a dry run.
    image: String,
    /// True when the run changed anything in the registry: a new manifest,
    /// blob or tag, or a branch tag created, moved or rewound.
    pushed: bool,
}

impl Published {
    fn of(inputs: &PublishInputs, report: &Report) -> Result<Published> {
        if !inputs.push {
            let tag = report.tags.first().map(String::as_str).unwrap_or("");
            return Ok(Published {
                reference: format!("{}:{tag}@{}", inputs.repository, report.digest),
                image: String::new(),
                pushed: false,
            });
        }
        let Some(push) = &report.push else {
            return Err(Error::io(
                "reading the push report",
                std::io::Error::other("a registry push returned no push report"),
            ));
        };
        Ok(Published {
            reference: push.reference.clone(),
            image: format!("{}@{}", inputs.repository, report.digest),
            // The push report counts a branch tag made or moved already.
            pushed: push.pushed,
        })
    }
}

/// The step outputs in the runner's heredoc form.
fn outputs(report: &Report, published: &Published) -> String {
    let subject_name = published
        .image
        .split_once('@')
        .map(|(name, _)| name.to_string())
        .unwrap_or_default();
    let subject_digest = if published.image.is_empty() {
        String::new()
    } else {
        report.digest.clone()
    };
    [
        ("digest", report.digest.clone()),
        ("tag", report.timestamp_tag.clone().unwrap_or_default()),
        ("tags", report.tags.join("\n")),
        ("reference", published.reference.clone()),
        ("image", published.image.clone()),
        ("subject-name", subject_name),
        ("subject-digest", subject_digest),
        ("commit", report.commit.clone().unwrap_or_default()),
        (
            "timestamp",
            report.timestamp.map(|t| t.to_string()).unwrap_or_default(),
        ),
        ("pushed", published.pushed.to_string()),
        (
            "anomaly",
            report
                .anomaly
                .as_ref()
                .map(|a| a.kind.as_str().to_string())
                .unwrap_or_default(),
        ),
        (
            "anomaly-message",
            report
                .anomaly
                .as_ref()
                .map(|a| show::anomaly::message(a, &Inputs::Publish))
                .unwrap_or_default(),
        ),
        (
            "branch-tag",
            report
                .branch_tag
                .as_ref()
                .map(|b| b.outcome().to_string())
                .unwrap_or_default(),
        ),
    ]
    .iter()
    .map(|(name, value)| commands::output_entry(name, value))
    .collect()
}

/// Whether the run reported a force-push back to an ancestor.
/// The annotation of an anomaly of the push of `tag`. A re-run of an older
/// job is expected and harmless: a notice, unless its tag shares the newest
/// tag's second and sorts first, so that Flux moves to the older commit.
/// The others (a rewind, a same-second or backwards timestamp) are ordering
/// problems Flux will act on: warnings.
pub(crate) fn anomaly_annotation(a: &Anomaly, tag: Option<&str>) -> String {
    let title = format!("settings-image: {}", a.kind.as_str());
    let moves_back = tag.is_some_and(|t| a.serves(t));
    match a.kind {
        AnomalyKind::RerunOfOlder if !moves_back => {
            commands::notice(&title, &show::anomaly::message(a, &Inputs::Publish))
        }
        _ => commands::warning(&title, &show::anomaly::message(a, &Inputs::Publish)),
    }
}

/// The annotation of a warning.
pub(crate) fn warning_annotation(w: &crate::notice::Notice) -> String {
    commands::warning("settings-image", &show::notice(w).render(&Inputs::Publish))
}

/// One line on what happened to the branch tag, in the action's words.
fn branch_text(b: &BranchTag) -> String {
    let at = b
        .recorded
        .as_deref()
        .map(|c| format!(" (its image records commit {c})"))
        .unwrap_or_default();
    let repaired = b
        .repaired_to
        .as_deref()
        .map(|t| format!("; moved on to {t} after a racing run"))
        .unwrap_or_default();
    let what = match b.change {
        Change::Created => "created",
        Change::Forward => "moved forward to this image",
        Change::Unchanged => "already pointed at this image",
        Change::Held { rewound: true, .. } => {
            "left on the newer commit the force-push dropped; set `allow-rewind: true` to move it back to this image"
        }
        Change::Held { .. } => {
            "left where it is: it already names a newer commit (a re-run of an older job)"
        }
        Change::Followed { .. } => {
            "moved to this image: it follows the force-push, which dropped the commit it named"
        }
        Change::Rewound { .. } | Change::Diverged { .. } => {
            "moved BACKWARDS to this image (allow-rewind)"
        }
    };
    format!("{} {what}{at}{repaired}", b.name)
}

fn facts(env: &Env, inputs: &PublishInputs, report: &Report, published: &Published) -> Facts {
    let non_empty = |k: &str| env.get(k).filter(|v| !v.trim().is_empty());
    let repository_url = match (
        non_empty("GITHUB_SERVER_URL"),
        non_empty("GITHUB_REPOSITORY"),
    ) {
        (Some(server), Some(repo)) => Some(format!("{}/{}", server.trim_end_matches('/'), repo)),
        _ => None,
    };
    let prefix = inputs
        .timestamp_tag
        .as_deref()
        .and_then(|p| crate::tag::sanitize_prefix(p).ok());
    let push = report.push.as_ref();
    Facts {
        repository: inputs.repository.clone(),
        reference: published.reference.clone(),
        digest: report.digest.clone(),
        timestamp_tag: report.timestamp_tag.clone(),
        prefix: report.timestamp_tag.as_ref().and(prefix),
        tags: report.tags.clone(),
        commit: report.commit.clone(),
        repository_url,
        files: report.files,
        size: report.size,
        pushed: published.pushed,
        uploaded_blobs: push.map_or(0, |p| p.uploaded_blobs),
        notes: report
            .anomaly
            .iter()
            .map(|a| {
                format!(
                    "{}: {}",
                    a.kind.as_str(),
                    show::anomaly::message(a, &Inputs::Publish)
                )
            })
            .chain(
                report
                    .branch_tag
                    .iter()
                    .map(|b| format!("branch tag: {}", branch_text(b))),
            )
            .collect(),
        changes: None,
    }
}

#[cfg(test)]
#[path = "publish_tests.rs"]
mod tests;
