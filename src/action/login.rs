//! The action's login inputs (shared by the publish and promote faces):
//! `login`, `github-token` (the deprecated `token` still works), `username`,
//! `password` and one input per provider fact, read into the credentials a
//! push uses or an OIDC [`Login`].
//!
//! The job token is only ever sent to GitHub's container registry
//! (`crate::login::is_github_registry`); any other registry gets an explicit
//! `password` or an exchange. Every secret an exchange meets is printed as
//! `::add-mask::` the moment it is known, before any line that could hold it.

use std::sync::Arc;

use super::commands::{self, say};
use super::inputs::Env;
use crate::error::Result;
use crate::login::{
    self, Choice, Decision, Endpoints, Fact, Facts, IdTokenSource, Login, LoginOptions,
};
use crate::registry::{self, Credentials};

/// The secret inputs of both faces, masked before anything is printed.
pub const SECRET_INPUTS: [&str; 3] = ["github-token", "token", "password"];

/// What the login inputs resolve to.
#[derive(Debug, Default)]
pub struct Resolved {
    /// Static credentials (explicit password, or the job token for GitHub).
    pub credentials: Option<Credentials>,
    /// An OIDC login.
    pub login: Option<Login>,
    /// The job token, for the GitHub API (history of shallow clones).
    pub github_token: Option<String>,
    /// Notices to print (the deprecated `token` input).
    pub notices: Vec<String>,
}

fn var(env: &Env, k: &str) -> Option<String> {
    env.get(k)
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

fn input_name(n: &str) -> String {
    format!("`{n}`")
}

/// The login inputs, the same on both faces: each face's `With` flattens
/// this struct in.
#[derive(Debug, Default, serde::Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(rename_all = "kebab-case", default)]
pub struct LoginWith {
    /// `auto`, `github`, `password`, `none` or a provider.
    pub login: Option<String>,
    /// The job token (default `github.token`).
    pub github_token: Option<String>,
    /// The deprecated name of `github-token`.
    pub token: Option<String>,
    /// Registry user (default `github.actor`); the Quay robot, the Docker Hub organization.
    pub username: Option<String>,
    /// Registry password for any registry.
    pub password: Option<String>,
}

/// The provider facts from the inputs of their names ([`Fact::ALL`]), the
/// username, and the run as the session's name.
fn facts(env: &Env, with: &LoginWith) -> Facts {
    let mut facts = Facts {
        username: with.username.clone(),
        // Shows in CloudTrail: which run assumed the role.
        session_name: var(env, "GITHUB_RUN_ID").map(|id| format!("settings-image-{id}")),
        ..Facts::default()
    };
    for f in Fact::ALL {
        f.set(&mut facts, super::inputs::input(env, f.name()));
    }
    facts
}

/// Reads the login inputs for pushing to (or reading from) `repository`.
pub fn resolve(env: &Env, with: &LoginWith, repository: &str, insecure: bool) -> Result<Resolved> {
    let mut notices = Vec::new();
    let deprecated = with.token.clone();
    if deprecated.is_some() {
        notices.push(
            "the input `token` is deprecated: rename it to `github-token` (it is only sent to ghcr.io and the GitHub API)"
                .to_string(),
        );
    }
    let github_token = deprecated.or_else(|| with.github_token.clone());
    let choice = Choice::parse(
        with.login.as_deref().unwrap_or_default(),
        "the input `login`",
    )?;
    // Only the host matters here (a several-folder `repository` is a
    // template such as ghcr.io/acme/settings-{name}); a bad repository is
    // reported by the request's own validation, by name.
    let Some(host) = repository
        .split_once('/')
        .map(|(h, _)| h.to_string())
        .filter(|h| !h.is_empty())
    else {
        return Ok(Resolved {
            github_token,
            notices,
            ..Resolved::default()
        });
    };
    let plan = LoginOptions {
        choice,
        host: host.clone(),
        username: with.username.clone(),
        password: with.password.clone(),
        github_token: github_token.clone(),
        github_server_url: var(env, "GITHUB_SERVER_URL"),
        facts: facts(env, with),
    };
    let mut out = Resolved {
        github_token,
        notices,
        ..Resolved::default()
    };
    match login::plan(&plan, &input_name)? {
        Decision::Static(c) => out.credentials = Some(c),
        Decision::None => {}
        Decision::Exchange(provider) => {
            let plain = insecure || registry::is_loopback(&host);
            let sink: login::SecretSink = Arc::new(|secret: &str| {
                for line in mask_lines_of(secret) {
                    say(&line);
                }
            });
            out.login = Some(Login {
                provider,
                facts: plan.facts,
                id_token: IdTokenSource::from_actions_env(|k| var(env, k)),
                endpoints: Endpoints::from_env(|k| var(env, k)),
                host,
                scheme: if plain { "http" } else { "https" },
                timeout: login::timeout_from(|k| var(env, k))?,
                on_secret: Some(sink),
            });
        }
    }
    Ok(out)
}

/// Runs the exchange before the step prints anything about the push, so
/// its tokens are masked first; the login stays, for one renewal mid-push.
pub fn exchange_first(credentials: &mut Option<Credentials>, login: Option<&Login>) -> Result<()> {
    if credentials.is_none()
        && let Some(l) = login
    {
        let c = l.credentials_blocking()?;
        // The host is an input and the user may come from the provider's
        // answer (JFrog): escaped, so neither can write a workflow command.
        say(&commands::escape_text(&format!(
            "settings-image: logged in to {} with the {} OIDC exchange, as {} (no stored secret)",
            l.host,
            l.provider.name(),
            c.username
        )));
        *credentials = Some(c);
    }
    Ok(())
}

/// `::add-mask::` for a secret, whole and line by line.
fn mask_lines_of(secret: &str) -> Vec<String> {
    let mut lines = vec![commands::add_mask(secret)];
    for l in secret.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let line = commands::add_mask(l);
        if !lines.contains(&line) {
            lines.push(line);
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::inputs::{self, env_of as env};

    /// `resolve` with the login inputs read from `e` as the faces read them.
    fn resolve(e: &Env, repository: &str, insecure: bool) -> Result<Resolved> {
        let with: LoginWith = inputs::from_env(e)?;
        super::resolve(e, &with, repository, insecure)
    }
    use std::time::Duration;

    #[test]
    fn each_fact_input_sets_its_fact_and_only_it() {
        for (name, want) in crate::login::each_fact_set_to_v() {
            // As the runner sets it: upper-cased, the value untrimmed.
            let e = env(&[(inputs::input_key(name).as_str(), " v \n")]);
            let with: LoginWith = inputs::from_env(&e).unwrap();
            assert_eq!(facts(&e, &with), want, "{name}");
        }
        // An empty input is no fact.
        let e = env(&[("INPUT_AWS-ROLE-ARN", " ")]);
        assert_eq!(facts(&e, &LoginWith::default()), Facts::default());
    }

    #[test]
    fn the_job_token_goes_to_github_only() {
        let base = [
            ("INPUT_GITHUB-TOKEN", "ghs_job"),
            ("INPUT_USERNAME", "octocat"),
        ];
        let r = resolve(&env(&base), "ghcr.io/acme/settings", false).unwrap();
        assert_eq!(r.credentials.unwrap().password, "ghs_job");
        assert!(r.notices.is_empty());
        let r = resolve(&env(&base), "registry.example.com/acme/settings", false).unwrap();
        assert!(r.credentials.is_none() && r.login.is_none());
        assert_eq!(r.github_token.as_deref(), Some("ghs_job"));
        // The deprecated name still works, with a notice.
        let r = resolve(
            &env(&[("INPUT_TOKEN", "ghs_old"), ("INPUT_USERNAME", "octocat")]),
            "ghcr.io/acme/settings",
            false,
        )
        .unwrap();
        assert_eq!(r.credentials.unwrap().password, "ghs_old");
        assert!(r.notices[0].contains("`github-token`"), "{:?}", r.notices);
        // An explicit password goes to the registry it names.
        let mut e = env(&base);
        e.insert("INPUT_PASSWORD".into(), "pw".into());
        let r = resolve(&e, "registry.example.com/acme/settings", false).unwrap();
        assert_eq!(r.credentials.unwrap().password, "pw");
    }

    #[test]
    fn an_exchange_reads_its_facts_and_endpoints() {
        let e = env(&[
            ("INPUT_LOGIN", "ecr"),
            ("INPUT_AWS-ROLE-ARN", "arn:aws:iam::1:role/r"),
            ("INPUT_AWS-REGION", "eu-west-1"),
            ("AWS_ENDPOINT_URL_STS", "http://127.0.0.1:9/sts"),
            (
                "ACTIONS_ID_TOKEN_REQUEST_URL",
                "http://127.0.0.1:9/idtoken?x=1",
            ),
            ("ACTIONS_ID_TOKEN_REQUEST_TOKEN", "req"),
            ("SETTINGS_IMAGE_LOGIN_TIMEOUT", "3"),
        ]);
        let ecr = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/shop";
        let r = resolve(&e, ecr, true).unwrap();
        let l = r.login.unwrap();
        assert_eq!(l.provider, login::Provider::Ecr);
        assert_eq!(l.scheme, "http");
        assert_eq!(l.timeout, Duration::from_secs(3));
        assert_eq!(
            l.endpoints.aws_sts.as_deref(),
            Some("http://127.0.0.1:9/sts")
        );
        assert!(matches!(l.id_token, IdTokenSource::GitHub { .. }));
        let e = env(&[("INPUT_LOGIN", "ecr")]);
        let l = resolve(&e, ecr, false).unwrap().login.unwrap();
        assert_eq!(l.id_token, IdTokenSource::Missing { in_action: true });
        assert_eq!(l.scheme, "https");
        // Not ECR's host: refused, naming the input.
        let err = resolve(&e, "127.0.0.1:5000/shop", false).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("`login` ecr logs in only to Amazon ECR"),
            "{err}"
        );
        assert!(resolve(&env(&[("INPUT_LOGIN", "vault")]), "ghcr.io/a/b", false).is_err());
    }

    #[test]
    fn multi_line_secrets_are_masked_per_line() {
        assert_eq!(
            mask_lines_of("a\nb"),
            ["::add-mask::a%0Ab", "::add-mask::a", "::add-mask::b"]
        );
    }
}
