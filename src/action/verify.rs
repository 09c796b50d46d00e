//! `settings-image action` with the input `mode: verify`: in a pull request
//! of the cluster repository, every image-volume reference to `repository`
//! in `scan` (a folder of plain manifests, or a file a step before
//! rendered with `kubectl kustomize`, `flux build` or `helm template`) is
//! rebuilt from its commit in the settings checkout at `path` (the same
//! scan as `settings-image verify --scan`). A reference
//! that is not what its commit holds is an `::error` on its file and line
//! and fails the step (exit 7); the job summary holds the table.

use std::path::PathBuf;

use super::commands::{self, say};
use super::inputs::{self, Env};
use crate::cluster::report::Report;
use crate::cluster::verify;
use crate::error::{Error, Result};
use crate::front;
use crate::history::Token;

/// The annotation title's subject.
const WHO: &str = "settings-image verify";

/// The secret inputs, masked before anything is printed.
const SECRET_INPUTS: [&str; 3] = super::login::SECRET_INPUTS;

/// Runs the verify face; returns the exit code.
pub fn run(env: &Env) -> i32 {
    for line in commands::mask_lines(env, &SECRET_INPUTS) {
        say(&line);
    }
    match scan(env) {
        Ok(code) => code,
        Err(err) => {
            say(&commands::error_line(
                WHO,
                &err,
                super::fields::Inputs::Publish,
            ));
            err.exit_code()
        }
    }
}

/// The verify face's inputs (action.yml with `mode: verify`), as the
/// runner passes them; the publish inputs the runner also sets are ignored.
#[derive(Debug, Default, serde::Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(rename_all = "kebab-case", default)]
pub struct With {
    /// The settings folder in the settings checkout (required).
    pub path: Option<String>,
    /// The image repository whose references are verified (required).
    pub repository: Option<String>,
    /// The cluster repository's folder of plain manifests, or a rendered
    /// file, to scan (default `.`).
    pub scan: Option<String>,
    /// The login inputs (`login`, `github-token`, the deprecated `token`,
    /// `username`, `password`, the provider facts), as publish reads them.
    #[serde(flatten)]
    pub login: super::login::LoginWith,
    /// Plain HTTP to a non-loopback registry.
    #[serde(deserialize_with = "inputs::flag")]
    pub insecure: Option<bool>,
    /// Pass when `scan` holds no reference to `repository`.
    #[serde(deserialize_with = "inputs::flag")]
    pub allow_empty: Option<bool>,
}

fn scan(env: &Env) -> Result<i32> {
    let with: With = inputs::from_env(env)?;
    let ws = inputs::workspace(env)?;
    let path = inputs::workspace_path(&ws, "path", &inputs::require(with.path, "path")?)?;
    // Lower-cased as the publish face writes it (registries require it).
    let repository = inputs::require(with.repository, "repository")?.to_ascii_lowercase();
    let scan = with.scan.unwrap_or_else(|| ".".into());
    let dir = inputs::workspace_path(&ws, "scan", &scan)?;
    let insecure = with.insecure.unwrap_or(false);
    // The job token only reaches GitHub's registry and API, as in publish.
    let login = super::login::resolve(env, &with.login, &repository, insecure)?;
    for n in &login.notices {
        say(&commands::warning(
            "settings-image verify: deprecated input",
            n,
        ));
    }
    let mut credentials = login.credentials;
    super::login::exchange_first(&mut credentials, login.login.as_ref())?;
    super::publish::ensure_temp_dir()?;
    let base = verify::Verification {
        reference: String::new(),
        path,
        insecure,
        credentials,
        docker_config: front::docker_config(env),
        github: front::github_api(env, login.github_token.and_then(Token::new)),
    };
    let (report, errors) = crate::cluster::report::scan_and_verify(
        &dir,
        &repository,
        &base,
        with.allow_empty.unwrap_or(false),
    )?;
    // Rows name files relative to the scanned folder (or to a scanned file's folder).
    let base = if dir.is_file() {
        dir.parent().map(PathBuf::from).unwrap_or_default()
    } else {
        dir.clone()
    };
    for row in &report.rows {
        let file = base.join(&row.found.file);
        let file = file
            .strip_prefix(&ws)
            .unwrap_or(&file)
            .display()
            .to_string();
        let line = row.found.line.unwrap_or(1);
        let detail = row.detail.render(&super::fields::Inputs::Publish);
        let message = if row.found.reference.is_empty() {
            detail
        } else {
            format!("{}: {detail}", row.found.reference)
        };
        match row.status {
            "mismatch" | "error" => say(&format!(
                "::error file={},line={line},title={}::{}",
                commands::escape_property(&file),
                commands::escape_property(&format!("{WHO}: {}", row.status)),
                commands::escape_data(&message)
            )),
            _ => say(&commands::escape_text(&format!("verified {message}"))),
        }
    }
    if let Some(out) = env.get("GITHUB_OUTPUT").filter(|p| !p.is_empty()) {
        let json = serde_json::to_string(&report)
            .map_err(|e| Error::json("writing the verify output", e))?;
        let ok = report.rows.iter().all(|r| r.status == "verified");
        let text = format!(
            "{}{}",
            commands::output_entry("verified", if ok { "true" } else { "false" }),
            commands::output_entry("verify-report", &json)
        );
        commands::append(std::path::Path::new(out), &text)?;
    }
    if let Some(path) = env.get("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty()) {
        commands::append(
            std::path::Path::new(path),
            &commands::cap_summary(summary(&report)),
        )?;
    }
    Ok(report.exit_code(&errors))
}

/// The Markdown table of the scan.
pub fn summary(report: &Report) -> String {
    let mut s = format!(
        "### settings-image verify: `{}`\n\n| | where | object | reference | detail |\n|---|---|---|---|---|\n",
        report.repository
    );
    let cell = |t: &str| t.replace('|', "\\|").replace('\n', " ");
    for r in &report.rows {
        let mark = match r.status {
            "verified" => "✅",
            "mismatch" => "❌",
            _ => "⚠️",
        };
        s.push_str(&format!(
            "| {mark} | `{}:{}` | {} | `{}` | {} |\n",
            cell(&r.found.file),
            r.found.line.unwrap_or(0),
            cell(&r.found.object),
            cell(&r.found.reference),
            cell(&r.detail.render(&super::fields::Inputs::Publish))
        ));
    }
    if report.rows.is_empty() {
        s.push_str(&format!(
            "\nNo image-volume reference to `{}` was found.\n",
            report.repository
        ));
    }
    s
}
