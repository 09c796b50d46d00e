//! The CLI face of the login: `--login PROVIDER`, `--id-token-file FILE`
//! and one flag per provider fact, the same names as the action's inputs.
//! Other CI systems (GitLab `id_tokens`, Buildkite, CircleCI) write their
//! token to a file and pass it here.

use std::collections::HashMap;
use std::path::PathBuf;

use clap::Args;

use super::{Choice, Decision, Endpoints, Facts, IdTokenSource, Login, LoginOptions};
use crate::error::Result;
use crate::registry::{self, Credentials};

/// Login flags shared by `push` and `promote`.
#[derive(Debug, Args, Default, Clone)]
pub struct LoginArgs {
    /// How to log in: auto (from the host and the flags given), password,
    /// none, github, ecr, gcp, azure, dockerhub, quay or jfrog.
    #[arg(long = "login", value_name = "PROVIDER", default_value = "auto")]
    pub login: String,
    /// The OIDC ID token, in a file (GitLab `id_tokens`, Buildkite, CircleCI).
    #[arg(long, value_name = "FILE")]
    pub id_token_file: Option<PathBuf>,
    /// ECR: the IAM role to assume.
    #[arg(long, value_name = "ARN")]
    pub aws_role_arn: Option<String>,
    /// ECR: the region, when the host does not say.
    #[arg(long, value_name = "REGION")]
    pub aws_region: Option<String>,
    /// Artifact Registry: projects/N/locations/global/workloadIdentityPools/P/providers/R.
    #[arg(long, value_name = "NAME")]
    pub gcp_workload_identity_provider: Option<String>,
    /// Artifact Registry: a service account to impersonate.
    #[arg(long, value_name = "EMAIL")]
    pub gcp_service_account: Option<String>,
    /// ACR: the Entra application (client) id.
    #[arg(long, value_name = "GUID")]
    pub azure_client_id: Option<String>,
    /// ACR: the Entra tenant id.
    #[arg(long, value_name = "GUID")]
    pub azure_tenant_id: Option<String>,
    /// Docker Hub: the OIDC connection id.
    #[arg(long, value_name = "UUID")]
    pub dockerhub_connection_id: Option<String>,
    /// JFrog: the OIDC integration (provider) name.
    #[arg(long, value_name = "NAME")]
    pub jfrog_provider_name: Option<String>,
    /// The audience to put in the ID token (when the source can choose).
    #[arg(long, value_name = "AUD")]
    pub oidc_audience: Option<String>,
}

impl LoginArgs {
    /// The credentials or login for `repository`. `env` is the front end's
    /// environment (endpoint overrides, the runner's ID token variables,
    /// `SETTINGS_IMAGE_LOGIN_TIMEOUT`). `password_given` says
    /// whether a password was passed (stdin or `SETTINGS_IMAGE_PASSWORD`);
    /// `credentials` reads it (and checks it has a user) only when needed.
    pub fn resolve(
        &self,
        env: &HashMap<String, String>,
        repository: &str,
        insecure: bool,
        username: Option<&str>,
        password_given: bool,
        credentials: impl FnOnce() -> Result<Option<Credentials>>,
    ) -> Result<(Option<Credentials>, Option<Login>)> {
        let choice = Choice::parse(&self.login, "--login")?;
        // Only the host matters (several folders give a template such as
        // ghcr.io/acme/settings-{name}); a bad repository is reported by the
        // request's validation, by name.
        let Some(host) = repository
            .split_once('/')
            .map(|(h, _)| h.to_string())
            .filter(|h| !h.is_empty())
        else {
            return Ok((credentials()?, None));
        };
        let facts = self.facts(username);
        let exchange = match choice {
            Choice::Exchange(p) => {
                super::hosts::check(p, &host, &format!("--login {}", p.name()))?;
                Some(p)
            }
            Choice::Auto if !password_given => match super::plan(
                &LoginOptions {
                    choice,
                    host: host.clone(),
                    username: username.map(str::to_string),
                    facts: facts.clone(),
                    ..LoginOptions::default()
                },
                &|n| format!("--{n}"),
            )? {
                Decision::Exchange(p) => Some(p),
                _ => None,
            },
            Choice::None => return Ok((None, None)),
            Choice::Password => {
                return match credentials()? {
                    Some(c) => Ok((Some(c), None)),
                    None => Err(crate::error::Error::input(
                        "--login password needs a password",
                        Some("give --username USER with --password-stdin (or SETTINGS_IMAGE_USERNAME and SETTINGS_IMAGE_PASSWORD)".into()),
                    )),
                };
            }
            Choice::Github => {
                return Err(crate::error::Error::input(
                    "--login github is the action's login (the job token)",
                    Some(
                        "from the CLI, give the token with --username USER --password-stdin".into(),
                    ),
                ));
            }
            Choice::Auto => None,
        };
        let Some(provider) = exchange else {
            return Ok((credentials()?, None));
        };
        Ok((
            None,
            Some(self.login(env, provider, facts, host, insecure)?),
        ))
    }

    /// The provider facts given by the flags, and the username.
    fn facts(&self, username: Option<&str>) -> Facts {
        Facts {
            aws_role_arn: self.aws_role_arn.clone(),
            aws_region: self.aws_region.clone(),
            gcp_workload_identity_provider: self.gcp_workload_identity_provider.clone(),
            gcp_service_account: self.gcp_service_account.clone(),
            azure_client_id: self.azure_client_id.clone(),
            azure_tenant_id: self.azure_tenant_id.clone(),
            dockerhub_connection_id: self.dockerhub_connection_id.clone(),
            jfrog_provider_name: self.jfrog_provider_name.clone(),
            audience: self.oidc_audience.clone(),
            username: username.map(str::to_string),
            session_name: None,
        }
    }

    /// The OIDC login to `host` with `provider`: the ID token (the file
    /// given, else the runner's), endpoints and timeout from `env`.
    fn login(
        &self,
        env: &HashMap<String, String>,
        provider: super::Provider,
        facts: Facts,
        host: String,
        insecure: bool,
    ) -> Result<Login> {
        // A variable's value, trimmed; unset when blank (the front end's rule).
        let env = |k: &str| {
            env.get(k)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        Ok(Login {
            provider,
            facts,
            id_token: match &self.id_token_file {
                Some(f) => IdTokenSource::File(f.clone()),
                None => match IdTokenSource::from_actions_env(env) {
                    // Inside a GitHub Actions `run:` step the runner's endpoint works too.
                    IdTokenSource::Missing { .. } => IdTokenSource::Missing { in_action: false },
                    s => s,
                },
            },
            endpoints: Endpoints::from_env(env),
            host: host.clone(),
            scheme: if insecure || registry::is_loopback(&host) {
                "http"
            } else {
                "https"
            },
            timeout: super::timeout_from(env)?,
            on_secret: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::login::Provider;

    fn args(login: &str) -> LoginArgs {
        LoginArgs {
            login: login.into(),
            aws_role_arn: Some("arn:aws:iam::1:role/r".into()),
            aws_region: Some("eu-west-1".into()),
            ..LoginArgs::default()
        }
    }

    #[test]
    fn auto_exchanges_unless_a_password_is_given() {
        let pw = || Ok(Some(Credentials::new("u", "p")));
        let ecr = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/shop";
        let (c, l) = args("auto")
            .resolve(&Default::default(), ecr, true, None, false, || {
                panic!("no password is read for an exchange")
            })
            .unwrap();
        assert!(c.is_none());
        let l = l.unwrap();
        assert_eq!((l.provider, l.scheme), (Provider::Ecr, "http"));
        assert_eq!(l.id_token, IdTokenSource::Missing { in_action: false });
        // Another host: refused by name, before any password is read.
        for (login, starts) in [
            (
                "ecr",
                "--login ecr logs in only to Amazon ECR's registry hosts",
            ),
            ("auto", "--aws-role-arn (the ecr login) logs in only to"),
        ] {
            let e = args(login)
                .resolve(
                    &Default::default(),
                    "127.0.0.1:5000/shop",
                    false,
                    None,
                    false,
                    || panic!("no password is read"),
                )
                .unwrap_err();
            assert!(e.to_string().starts_with(starts), "{e}");
        }
        let (c, l) = args("auto")
            .resolve(
                &Default::default(),
                "127.0.0.1:5000/shop",
                false,
                Some("u"),
                true,
                pw,
            )
            .unwrap();
        assert_eq!(c.unwrap().password, "p");
        assert!(l.is_none());
        let (c, l) = args("none")
            .resolve(
                &Default::default(),
                "127.0.0.1:5000/shop",
                false,
                None,
                true,
                pw,
            )
            .unwrap();
        assert!(c.is_none() && l.is_none());
        let e = args("password")
            .resolve(
                &Default::default(),
                "127.0.0.1:5000/shop",
                false,
                None,
                false,
                || Ok(None),
            )
            .unwrap_err();
        assert!(e.to_string().contains("needs a password"), "{e}");
        let l = LoginArgs {
            login: "quay".into(),
            id_token_file: Some("/tmp/t".into()),
            ..LoginArgs::default()
        }
        .resolve(
            &Default::default(),
            "quay.example.com/a/b",
            false,
            Some("a+b"),
            false,
            || Ok(None),
        )
        .unwrap()
        .1
        .unwrap();
        assert_eq!(l.scheme, "https");
        assert_eq!(l.id_token, IdTokenSource::File("/tmp/t".into()));
    }
}
