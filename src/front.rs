//! What the front ends (`cli.rs` and both action faces in `action/`) read
//! from the process environment, one function per concern, so the CLI and
//! the action agree on each rule. The library below takes the values these
//! return and reads no environment itself.
//!
//! Each function takes the environment as a map ([`Env`]): the front end
//! collects the process environment once, and tests pass their own.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::history::{Token, github};
use crate::provenance::Ci;
use crate::registry::Credentials;
use crate::release::policy::Policy;

/// The environment, as a plain map.
pub type Env = HashMap<String, String>;

/// The process environment (read once per run by the front end).
pub fn process_env() -> Env {
    std::env::vars().collect()
}

/// `name`'s value, trimmed; `None` when unset or blank.
pub fn var(env: &Env, name: &str) -> Option<String> {
    env.get(name)
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// Docker's `config.json`: `$DOCKER_CONFIG/config.json`, else
/// `$HOME/.docker/config.json` (what `docker login` writes).
pub fn docker_config(env: &Env) -> Option<PathBuf> {
    if let Some(dir) = env.get("DOCKER_CONFIG").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir).join("config.json"));
    }
    env.get("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".docker").join("config.json"))
}

/// A registry username and password as the front end found them, paired.
/// Each face decides what an unpaired half means (the CLI refuses a
/// `--username` without a password; the action's `username` defaults to
/// the actor, so alone it means anonymous) and says so in its own words.
#[derive(Debug, PartialEq, Eq)]
pub enum Login {
    /// Both given.
    Both(Credentials),
    /// Neither given.
    Neither,
    /// A username, no password.
    UsernameOnly,
    /// A password or token, no username.
    PasswordOnly,
}

/// Pairs a username and a password; empty strings count as not given.
pub fn login(username: Option<String>, password: Option<String>) -> Login {
    let username = username.filter(|u| !u.is_empty());
    let password = password.filter(|p| !p.is_empty());
    match (username, password) {
        (Some(username), Some(password)) => Login::Both(Credentials::new(username, password)),
        (None, None) => Login::Neither,
        (Some(_), None) => Login::UsernameOnly,
        (None, Some(_)) => Login::PasswordOnly,
    }
}

/// Who runs this (the "who" of a promotion): `GITHUB_TRIGGERING_ACTOR`,
/// else `GITHUB_ACTOR`, else the local user (`USER`, `LOGNAME`, else the
/// user database's name for this process's user, as `id -un` prints it),
/// else `unknown`.
pub fn actor(env: &Env) -> String {
    ["GITHUB_TRIGGERING_ACTOR", "GITHUB_ACTOR", "USER", "LOGNAME"]
        .iter()
        .find_map(|k| var(env, k))
        .or_else(user_name)
        .unwrap_or_else(|| "unknown".to_string())
}

/// The name of the effective user in the user database (`id -un`), when
/// it has one: cron jobs, containers and `env -i` run without `USER`.
fn user_name() -> Option<String> {
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: getpwuid_r writes only into `pwd` and `buf` (whose length is
    // passed), and sets `result` to `&pwd` or null; `pw_name` then points
    // into `buf`, which outlives the read below.
    unsafe {
        let mut pwd: libc::passwd = std::mem::zeroed();
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        let rc = libc::getpwuid_r(
            libc::geteuid(),
            &mut pwd,
            buf.as_mut_ptr(),
            buf.len(),
            &mut result,
        );
        if rc != 0 || result.is_null() || pwd.pw_name.is_null() {
            return None;
        }
        std::ffi::CStr::from_ptr(pwd.pw_name)
            .to_str()
            .ok()
            .map(str::to_string)
            .filter(|n| !n.is_empty())
    }
}

/// The GitHub Actions run URL from `GITHUB_SERVER_URL`,
/// `GITHUB_REPOSITORY`, `GITHUB_RUN_ID` (and `GITHUB_RUN_ATTEMPT`, added
/// as `/attempts/N` when set); `None` outside a run.
pub fn run_url(env: &Env) -> Option<String> {
    let server = var(env, "GITHUB_SERVER_URL")?;
    let repo = var(env, "GITHUB_REPOSITORY")?;
    let id = var(env, "GITHUB_RUN_ID")?;
    let mut url = format!("{}/{repo}/actions/runs/{id}", server.trim_end_matches('/'));
    if let Some(a) = var(env, "GITHUB_RUN_ATTEMPT") {
        url.push_str(&format!("/attempts/{a}"));
    }
    Some(url)
}

/// The GitHub API that answers what a shallow clone cannot:
/// `GITHUB_REPOSITORY` (`owner/name`) at `GITHUB_API_URL` (default
/// [`github::DEFAULT_API_URL`]) with `token` (a flag or input), else
/// `GITHUB_TOKEN`. `None` when the repository or the token is missing, or
/// the repository is not `owner/name`.
pub fn github_api(env: &Env, token: Option<Token>) -> Option<github::Api> {
    let token = token.or_else(|| var(env, "GITHUB_TOKEN").and_then(Token::new))?;
    let base = var(env, "GITHUB_API_URL").unwrap_or_else(|| github::DEFAULT_API_URL.to_string());
    github::Api::for_repository(&base, &var(env, "GITHUB_REPOSITORY")?, token)
}

/// The repository's URL as GitHub Actions names it
/// (`GITHUB_SERVER_URL`/`GITHUB_REPOSITORY`), normalized; `None` outside
/// a run (the library then asks the `origin` remote).
pub fn source_url(env: &Env) -> Option<String> {
    github::repository_url(
        &var(env, "GITHUB_SERVER_URL")?,
        &var(env, "GITHUB_REPOSITORY")?,
    )
}

/// What the GitHub Actions run says about a build, for its provenance:
/// `GITHUB_REF`; the builder from `GITHUB_ACTION_REPOSITORY` (and
/// `GITHUB_ACTION_REF`); the run URL with its attempt (1 when not set);
/// `GITHUB_WORKFLOW_REF`. Empty outside a run.
pub fn ci(env: &Env) -> Ci {
    let server = var(env, "GITHUB_SERVER_URL").unwrap_or_else(|| "https://github.com".to_string());
    let server = server.trim_end_matches('/');
    let builder_id = match (
        var(env, "GITHUB_ACTION_REPOSITORY"),
        var(env, "GITHUB_ACTION_REF"),
    ) {
        (Some(r), Some(rf)) => Some(format!("{server}/{r}@{rf}")),
        (Some(r), None) => Some(format!("{server}/{r}")),
        _ => None,
    };
    let invocation_id = match (var(env, "GITHUB_REPOSITORY"), var(env, "GITHUB_RUN_ID")) {
        (Some(r), Some(id)) => Some(format!(
            "{server}/{r}/actions/runs/{id}/attempts/{}",
            var(env, "GITHUB_RUN_ATTEMPT").unwrap_or_else(|| "1".to_string())
        )),
        _ => None,
    };
    Ci {
        git_ref: var(env, "GITHUB_REF"),
        builder_id,
        invocation_id,
        workflow_ref: var(env, "GITHUB_WORKFLOW_REF"),
    }
}

/// The folder relative paths are resolved against: `GITHUB_WORKSPACE` in
/// a run, else the current directory.
pub fn workspace(env: &Env) -> Result<PathBuf> {
    match var(env, "GITHUB_WORKSPACE") {
        Some(w) => Ok(PathBuf::from(w)),
        None => std::env::current_dir().map_err(|e| {
            Error::io(
                "reading the current directory (GITHUB_WORKSPACE is not set)",
                e,
            )
        }),
    }
}

/// The release policy in the YAML file at `path`; none means always open.
pub fn policy(path: Option<&Path>) -> Result<Policy> {
    match path {
        Some(path) => {
            let text = crate::named_file::read(path, crate::field::Field::Policy)?;
            Policy::from_yaml(&text)
        }
        None => Ok(Policy::default()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Env {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn run_urls_and_provenance_runs() {
        let e = env(&[
            ("GITHUB_SERVER_URL", "https://github.com/"),
            ("GITHUB_REPOSITORY", "o/r"),
            ("GITHUB_RUN_ID", "7"),
        ]);
        assert_eq!(
            run_url(&e).as_deref(),
            Some("https://github.com/o/r/actions/runs/7")
        );
        // The provenance's invocation always names the attempt.
        assert_eq!(
            ci(&e).invocation_id.as_deref(),
            Some("https://github.com/o/r/actions/runs/7/attempts/1")
        );
        assert_eq!(run_url(&env(&[("GITHUB_RUN_ID", "7")])), None);
        assert_eq!(ci(&Env::new()), Ci::default());
    }

    #[test]
    fn actor_order() {
        let e = env(&[("GITHUB_ACTOR", "a"), ("USER", "u")]);
        assert_eq!(actor(&e), "a");
        assert_eq!(actor(&env(&[("LOGNAME", "l"), ("USER", " ")])), "l");
        // Without any: the user database's name, as `id -un` prints it.
        let id = std::process::Command::new("id")
            .arg("-un")
            .output()
            .unwrap();
        let name = String::from_utf8(id.stdout).unwrap();
        assert_eq!(actor(&Env::new()), name.trim());
    }

    #[test]
    fn github_api_needs_a_repository_and_a_token() {
        let e = env(&[("GITHUB_REPOSITORY", "o/r"), ("GITHUB_TOKEN", "t")]);
        let api = github_api(&e, None).expect("api");
        assert_eq!((api.owner.as_str(), api.repo.as_str()), ("o", "r"));
        assert_eq!(api.base_url, github::DEFAULT_API_URL);
        assert!(github_api(&env(&[("GITHUB_REPOSITORY", "o/r")]), None).is_none());
        assert!(github_api(&env(&[("GITHUB_REPOSITORY", "o/r/x")]), Token::new("t")).is_none());
        assert!(github_api(&env(&[("GITHUB_TOKEN", "t")]), None).is_none());
    }

    #[test]
    fn logins_pair() {
        let s = |v: &str| Some(v.to_string());
        assert!(matches!(login(s("u"), s("p")), Login::Both(c) if c.username == "u"));
        assert_eq!(login(s(""), None), Login::Neither);
        assert_eq!(login(s("u"), s("")), Login::UsernameOnly);
        assert_eq!(login(None, s("p")), Login::PasswordOnly);
    }

    #[test]
    fn docker_config_place() {
        let e = env(&[("DOCKER_CONFIG", "/d"), ("HOME", "/h")]);
        assert_eq!(docker_config(&e), Some(PathBuf::from("/d/config.json")));
        assert_eq!(
            docker_config(&env(&[("HOME", "/h")])),
            Some(PathBuf::from("/h/.docker/config.json"))
        );
        assert_eq!(docker_config(&Env::new()), None);
    }
}
