//! The CLI face of the login: `--login PROVIDER`, `--id-token-file FILE`
//! and one flag per provider fact, each made from its one declaration
//! ([`Fact::ALL`]: the same names as the action's inputs). Other CI systems
//! (GitLab `id_tokens`, Buildkite, CircleCI) write their token to a file
//! and pass it here.

use std::collections::HashMap;
use std::path::PathBuf;

use clap::{Arg, ArgMatches, Command};

use crate::error::{Error, Result};
use crate::login::{
    Choice, Decision, Endpoints, Fact, Facts, IdTokenSource, Login, LoginOptions, Provider,
};
use crate::registry::{self, Credentials};

/// Login flags shared by `push` and `promote`.
#[derive(Debug, Default, Clone)]
pub struct LoginArgs {
    /// `--login`: auto, password, none, github or a provider.
    pub login: String,
    /// `--id-token-file`: the OIDC ID token, in a file.
    pub id_token_file: Option<PathBuf>,
    /// The provider facts their flags give ([`Fact`]).
    pub facts: Facts,
}

impl clap::Args for LoginArgs {
    fn augment_args(cmd: Command) -> Command {
        let cmd = cmd
            .arg(
                Arg::new("login")
                    .long("login")
                    .value_name("PROVIDER")
                    .default_value("auto")
                    .value_parser(clap::value_parser!(String))
                    .help(
                        "How to log in: auto (from the host and the flags given), password, none, \
                         github, ecr, gcp, azure, dockerhub, quay or jfrog",
                    ),
            )
            .arg(
                Arg::new("id_token_file")
                    .long("id-token-file")
                    .value_name("FILE")
                    .value_parser(clap::value_parser!(PathBuf))
                    .help("The OIDC ID token, in a file (GitLab `id_tokens`, Buildkite, CircleCI)"),
            );
        Fact::ALL.into_iter().fold(cmd, |cmd, f| {
            cmd.arg(
                Arg::new(f.name())
                    .long(f.name())
                    .value_name(f.value_name())
                    .value_parser(clap::value_parser!(String))
                    .help(f.help()),
            )
        })
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl clap::FromArgMatches for LoginArgs {
    fn from_arg_matches(m: &ArgMatches) -> std::result::Result<Self, clap::Error> {
        let mut args = LoginArgs::default();
        args.update_from_arg_matches(m)?;
        Ok(args)
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> std::result::Result<(), clap::Error> {
        if let Some(login) = m.get_one::<String>("login") {
            self.login.clone_from(login);
        }
        if m.contains_id("id_token_file") {
            self.id_token_file = m.get_one::<PathBuf>("id_token_file").cloned();
        }
        for f in Fact::ALL.into_iter().filter(|f| m.contains_id(f.name())) {
            f.set(&mut self.facts, m.get_one::<String>(f.name()).cloned());
        }
        Ok(())
    }
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
                crate::login::hosts::check(p, &host, &format!("--login {}", p.name()))?;
                Some(p)
            }
            Choice::Auto if !password_given => match crate::login::plan(
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
                    None => Err(Error::input(
                        "--login password needs a password",
                        Some("give --username USER with --password-stdin (or SETTINGS_IMAGE_USERNAME and SETTINGS_IMAGE_PASSWORD)".into()),
                    )),
                };
            }
            Choice::Github => {
                return Err(Error::input(
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
            username: username.map(str::to_string),
            ..self.facts.clone()
        }
    }

    /// The OIDC login to `host` with `provider`: the ID token (the file
    /// given, else the runner's), endpoints and timeout from `env`.
    fn login(
        &self,
        env: &HashMap<String, String>,
        provider: Provider,
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
            timeout: crate::login::timeout_from(env)?,
            on_secret: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(login: &str) -> LoginArgs {
        LoginArgs {
            login: login.into(),
            facts: Facts {
                aws_role_arn: Some("arn:aws:iam::1:role/r".into()),
                aws_region: Some("eu-west-1".into()),
                ..Facts::default()
            },
            ..LoginArgs::default()
        }
    }

    /// `push`'s login flags as clap parses them.
    #[derive(clap::Parser)]
    struct Flags {
        #[command(flatten)]
        login: LoginArgs,
    }

    #[test]
    fn each_fact_flag_sets_its_fact_and_only_it() {
        use clap::Parser;
        let none = Flags::try_parse_from(["push"]).unwrap().login;
        assert_eq!(
            (none.login.as_str(), none.facts),
            ("auto", Facts::default())
        );
        let facts = crate::login::each_fact_set_to_v();
        assert_eq!(facts.len(), Fact::ALL.len());
        for (name, want) in facts {
            let flag = format!("--{name}");
            let got = Flags::try_parse_from(["push", flag.as_str(), "v"])
                .unwrap_or_else(|e| panic!("{flag}: {e}"))
                .login;
            assert_eq!(got.facts, want, "{flag}");
        }
        let e = Flags::try_parse_from(["push", "--aws-role-arn"])
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("'--aws-role-arn <ARN>'"), "{e}");
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
