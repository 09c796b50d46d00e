//! `settings-image action` (mode `publish`): the runner's inputs turned into
//! the same [`Request`] the CLI builds, run through the same
//! [`request::run`], and the report turned into step outputs and a job
//! summary.
//!
//! Order matters: the secrets are registered with `::add-mask::` before
//! anything else is printed, so the runner hides them from every later line.

use std::path::{Path, PathBuf};

use super::commands::{self, say};
use super::inputs::{self, Env, EventPlan};
use super::summary::{self, Facts};
use crate::error::{Error, Result};
use crate::history::{SourceMode, Token};
use crate::publish::forward::BranchReport;
use crate::publish::registry::{self, Credentials};
use crate::release::forward::AnomalyKind;
use crate::report::Report;
use crate::request::{self, Request, Target};

/// The publish inputs, read and checked.
#[derive(Debug)]
struct PublishInputs {
    path: PathBuf,
    repository: String,
    timestamp_tag: Option<String>,
    tags: Vec<String>,
    credentials: Option<Credentials>,
    login: Option<crate::login::Login>,
    notices: Vec<String>,
    github_token: Option<Token>,
    source: SourceMode,
    insecure: bool,
    summary: bool,
    provenance: bool,
    forward: request::Forward,
}

/// The secret inputs, masked before anything is printed.
const SECRET_INPUTS: [&str; 3] = super::login::SECRET_INPUTS;

/// The annotation title's subject.
const WHO: &str = "settings-image";

fn read_inputs(env: &Env) -> Result<PublishInputs> {
    let path = inputs::required(env, "path")?;
    let repository = inputs::required(env, "repository")?;
    let workspace = match env.get("GITHUB_WORKSPACE").filter(|w| !w.trim().is_empty()) {
        Some(w) => PathBuf::from(w),
        None => std::env::current_dir().map_err(|e| {
            Error::io(
                "reading the current directory (GITHUB_WORKSPACE is not set)",
                e,
            )
        })?,
    };
    let path = inputs::workspace_path(&workspace, &path)?;
    check_no_symlink_escape(&workspace, &path)?;
    let timestamp_tag = inputs::input(env, "timestamp-tag");
    let tags = inputs::list(env, "tags");
    if timestamp_tag.is_none() && tags.is_empty() {
        return Err(Error::input(
            "neither `timestamp-tag` nor `tags` is set, so the image would have no tag",
            Some(
                "set `timestamp-tag: ${{ github.ref_name }}` (the tag Flux orders by), and/or `tags`"
                    .to_string(),
            ),
        ));
    }
    let source = match inputs::input(env, "source").as_deref() {
        None | Some("commit") => SourceMode::Commit,
        Some("worktree") => SourceMode::Worktree,
        Some(other) => {
            return Err(Error::input(
                format!("the input `source` is {other:?}"),
                Some(
                    "use `commit` (the folder as the commit holds it) or `worktree` (as it is on disk)"
                        .to_string(),
                ),
            ));
        }
    };
    let insecure = inputs::boolean(env, "insecure", false)?;
    let login = super::login::resolve(env, &repository, insecure)?;
    Ok(PublishInputs {
        path,
        repository,
        timestamp_tag,
        tags,
        credentials: login.credentials,
        login: login.login,
        notices: login.notices,
        github_token: login.github_token.and_then(Token::new),
        source,
        insecure,
        summary: inputs::boolean(env, "summary", true)?,
        provenance: inputs::boolean(env, "provenance", true)?,
        forward: request::Forward {
            branch_tag: inputs::input(env, "branch-tag"),
            allow_rewind: inputs::boolean(env, "allow-rewind", false)?,
        },
    })
}

/// `workspace_path` resolves names lexically; a symlink in the workspace
/// could still point outside it. When both exist, the real folder must be
/// inside the real workspace.
fn check_no_symlink_escape(workspace: &Path, path: &Path) -> Result<()> {
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
fn ensure_temp_dir() -> Result<()> {
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

/// Runs the publish mode with the runner's environment; returns the exit code.
pub fn run(env: &Env) -> i32 {
    for line in commands::mask_lines(env, &SECRET_INPUTS) {
        say(&line);
    }
    match publish(env) {
        Ok(()) => 0,
        Err(err) => {
            say(&commands::error_line(WHO, &err));
            err.exit_code()
        }
    }
}

fn publish(env: &Env) -> Result<()> {
    let mut inputs = read_inputs(env)?;
    for n in &inputs.notices {
        say(&commands::warning("settings-image: deprecated input", n));
    }
    let revision = match inputs::event_plan(env)? {
        EventPlan::Skip(why) => {
            say(&commands::notice(
                "settings-image: nothing to package",
                &why,
            ));
            if let Some(out) = env.get("GITHUB_OUTPUT").filter(|p| !p.is_empty()) {
                commands::append(Path::new(out), &commands::output_entry("pushed", "false"))?;
            }
            return Ok(());
        }
        EventPlan::Build { revision } => revision,
    };
    super::login::exchange_first(&mut inputs.credentials, inputs.login.as_ref())?;
    ensure_temp_dir()?;
    let req = Request {
        path: inputs.path.clone(),
        tags: inputs.tags.clone(),
        target: Target::Registry(registry::Options {
            repository: inputs.repository.clone(),
            insecure: inputs.insecure,
            monolithic: false,
            credentials: inputs.credentials.clone(),
            login: inputs.login.clone().map(Box::new),
        }),
        source: inputs.source,
        timestamp_tag: inputs.timestamp_tag.clone(),
        github_token: inputs.github_token.clone(),
        revision: revision.clone(),
        // As `push` does by default: the commit, ref and run as a referrer.
        provenance: inputs.provenance,
        forward: inputs.forward.clone(),
    };
    say(&format!(
        "::group::settings-image: package {} and push to {}",
        inputs.path.display(),
        inputs.repository
    ));
    let event = env.get("GITHUB_EVENT_NAME").map_or("", String::as_str);
    say(&format!(
        "event {event}, history from {}, source {:?}, run attempt {}",
        revision.as_deref().unwrap_or("HEAD"),
        inputs.source,
        env.get("GITHUB_RUN_ATTEMPT").map_or("1", String::as_str)
    ));
    let result = request::run(&req);
    if let Ok(report) = &result {
        say(report.human().trim_end());
    }
    say("::endgroup::");
    let report = result?;
    let Some(push) = &report.push else {
        return Err(Error::io(
            "reading the push report",
            std::io::Error::other("a registry push returned no push report"),
        ));
    };
    say(&format!(
        "{} {}",
        if push.pushed {
            "pushed"
        } else {
            "already in the registry, nothing pushed:"
        },
        push.reference
    ));
    for w in &report.warnings {
        say(&commands::warning("settings-image", w));
    }
    if let Some(a) = &report.anomaly {
        let title = format!("settings-image: {}", a.kind.as_str());
        // A re-run of an older job is expected and harmless: a notice. The
        // other two are ordering problems Flux will act on: warnings.
        say(&match a.kind {
            AnomalyKind::RerunOfOlder => commands::notice(&title, &a.message),
            _ => commands::warning(&title, &a.message),
        });
    }
    if let Some(b) = &report.branch_tag {
        let text = branch_text(b);
        say(&match b.outcome.as_str() {
            "rewound" => commands::warning("settings-image: branch tag rewound", &text),
            _ => commands::notice("settings-image: branch tag", &text),
        });
    }
    if let Some(out) = env.get("GITHUB_OUTPUT").filter(|p| !p.is_empty()) {
        commands::append(Path::new(out), &outputs(&report))?;
    } else {
        say(&commands::warning(
            "settings-image: no outputs",
            "GITHUB_OUTPUT is not set, so the step outputs were not written",
        ));
    }
    let summary_file = env.get("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty());
    if let (true, Some(file)) = (inputs.summary, summary_file) {
        let facts = facts(env, &inputs, &report);
        commands::append(
            Path::new(file),
            &commands::cap_summary(summary::render(&facts)),
        )?;
    }
    Ok(())
}

/// The step outputs in the runner's heredoc form.
fn outputs(report: &Report) -> String {
    let (reference, pushed) = report
        .push
        .as_ref()
        .map_or((String::new(), false), |p| (p.reference.clone(), p.pushed));
    [
        ("digest", report.digest.clone()),
        ("tag", report.timestamp_tag.clone().unwrap_or_default()),
        ("tags", report.tags.join("\n")),
        ("reference", reference),
        ("commit", report.commit.clone().unwrap_or_default()),
        (
            "timestamp",
            report.timestamp.map(|t| t.to_string()).unwrap_or_default(),
        ),
        ("pushed", pushed.to_string()),
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
                .map(|a| a.message.clone())
                .unwrap_or_default(),
        ),
        (
            "branch-tag",
            report
                .branch_tag
                .as_ref()
                .map(|b| b.outcome.clone())
                .unwrap_or_default(),
        ),
    ]
    .iter()
    .map(|(name, value)| commands::output_entry(name, value))
    .collect()
}

/// One line on what happened to the branch tag.
fn branch_text(b: &BranchReport) -> String {
    let at = b
        .commit
        .as_deref()
        .map(|c| format!(" (its image records commit {c})"))
        .unwrap_or_default();
    let repaired = b
        .repaired_to
        .as_deref()
        .map(|t| format!("; moved on to {t} after a racing run"))
        .unwrap_or_default();
    let what = match b.outcome.as_str() {
        "created" => "created",
        "moved" => "moved forward to this image",
        "unchanged" => "already pointed at this image",
        "kept-newer" => {
            "left where it is: it already names a newer commit (a re-run of an older job)"
        }
        "rewound" => "moved BACKWARDS to this image (allow-rewind)",
        other => other,
    };
    format!("{} {what}{at}{repaired}", b.name)
}

fn facts(env: &Env, inputs: &PublishInputs, report: &Report) -> Facts {
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
        reference: push.map(|p| p.reference.clone()).unwrap_or_default(),
        digest: report.digest.clone(),
        timestamp_tag: report.timestamp_tag.clone(),
        prefix: report.timestamp_tag.as_ref().and(prefix),
        tags: report.tags.clone(),
        commit: report.commit.clone(),
        repository_url,
        files: report.files,
        size: report.size,
        pushed: push.is_some_and(|p| p.pushed),
        uploaded_blobs: push.map_or(0, |p| p.uploaded_blobs),
        notes: report
            .anomaly
            .iter()
            .map(|a| format!("{}: {}", a.kind.as_str(), a.message))
            .chain(
                report
                    .branch_tag
                    .iter()
                    .map(|b| format!("branch tag: {}", branch_text(b))),
            )
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::inputs::env_of as env;

    #[test]
    fn masks_cover_both_secrets_and_their_lines() {
        let e = env(&[
            ("INPUT_TOKEN", " ghs_abc \n"),
            ("INPUT_PASSWORD", "line1\nline2"),
            ("INPUT_USERNAME", "octocat"),
        ]);
        let m = commands::mask_lines(&e, &SECRET_INPUTS);
        assert!(m.contains(&"::add-mask::ghs_abc".to_string()), "{m:?}");
        assert!(
            m.contains(&"::add-mask::line1%0Aline2".to_string()),
            "{m:?}"
        );
        assert!(m.contains(&"::add-mask::line1".to_string()), "{m:?}");
        assert!(m.contains(&"::add-mask::line2".to_string()), "{m:?}");
        assert!(!m.iter().any(|l| l.contains("octocat")));
        assert!(commands::mask_lines(&env(&[("INPUT_TOKEN", "  ")]), &SECRET_INPUTS).is_empty());
    }

    #[test]
    fn password_wins_over_token_and_needs_a_username() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().to_str().unwrap();
        let base = [
            ("GITHUB_WORKSPACE", ws),
            ("INPUT_PATH", "cfg"),
            ("INPUT_REPOSITORY", "ghcr.io/a/b"),
            ("INPUT_TIMESTAMP-TAG", "main"),
            ("INPUT_TOKEN", "tok"),
        ];
        let mut e = env(&base);
        e.insert("INPUT_USERNAME".into(), "u".into());
        e.insert("INPUT_PASSWORD".into(), "pw".into());
        let i = read_inputs(&e).unwrap();
        assert_eq!(i.credentials.unwrap().password, "pw");
        assert_eq!(i.github_token, Token::new("tok"));
        assert_eq!(i.path, dir.path().join("cfg"));
        let e = env(&base);
        assert!(
            read_inputs(&e)
                .unwrap_err()
                .to_string()
                .contains("username")
        );
        let mut e = env(&base);
        e.insert("INPUT_TOKEN".into(), String::new());
        assert!(read_inputs(&e).unwrap().credentials.is_none());
        e.insert("INPUT_SOURCE".into(), "disk".into());
        assert!(
            read_inputs(&e)
                .unwrap_err()
                .to_string()
                .contains("`source`")
        );
        e.insert("INPUT_SOURCE".into(), "worktree".into());
        e.remove("INPUT_TIMESTAMP-TAG");
        assert!(read_inputs(&e).unwrap_err().to_string().contains("no tag"));
    }

    #[test]
    fn a_symlink_out_of_the_workspace_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("cfg")).unwrap();
        let err = check_no_symlink_escape(dir.path(), &dir.path().join("cfg")).unwrap_err();
        assert!(err.to_string().contains("outside the workspace"), "{err}");
        std::fs::create_dir(dir.path().join("real")).unwrap();
        check_no_symlink_escape(dir.path(), &dir.path().join("real")).unwrap();
    }

    #[test]
    fn an_error_line_carries_the_hint_escaped() {
        let line = commands::error_line(WHO, &Error::input("bad: x", Some("do y".to_string())));
        assert_eq!(
            line,
            "::error title=settings-image%3A invalid input::bad: x%0Ahint: do y"
        );
    }
}
