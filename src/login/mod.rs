//! Registry login with no stored secret: the job's OpenID Connect ID token
//! exchanged, the way each registry's provider documents it, for a
//! short-lived username and password that the registry code then uses like
//! any other [`Credentials`].
//!
//! This module owns *which* login a push uses ([`plan`]) and the exchanges
//! themselves, one file per provider: [`aws`] (ECR), [`google`] (Artifact
//! Registry and gcr.io), [`azure`] (ACR), [`dockerhub`], [`quay`] and
//! [`jfrog`]. [`id_token`] gets the ID token (GitHub's runner endpoint or a
//! file). GHCR has no exchange: it takes the job's `GITHUB_TOKEN`, and only
//! GitHub's own hosts ever see that token ([`is_github_registry`]).
//!
//! Front ends read the environment (inputs, `ACTIONS_ID_TOKEN_REQUEST_*`,
//! the endpoint overrides `AWS_ENDPOINT_URL_STS` and friends) and pass
//! values in: nothing here reads the process environment.
//!
//! *Why not the cloud SDKs?* Each exchange is one or two documented HTTP
//! requests; the SDKs would add hundreds of crates to a static binary. Only
//! AWS's request signing is delicate enough to take a crate for
//! (`aws-sigv4`, the SDK's own signer).
//!
//! Every token this module sees (the ID token, intermediate and final
//! tokens, AWS keys) is handed to [`Login::on_secret`] the moment it is
//! known, so the action can mask it before printing anything else, and is
//! scrubbed from every error message.

pub mod aws;
pub mod azure;
pub mod dockerhub;
pub mod google;
pub mod hosts;
pub mod http;
pub mod id_token;
pub mod jfrog;
pub mod quay;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::registry::{Credentials, Realms};

pub use id_token::IdTokenSource;

/// An exchange provider: who turns the ID token into registry credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// AWS ECR: STS `AssumeRoleWithWebIdentity`, then ECR `GetAuthorizationToken`.
    Ecr,
    /// Google Artifact Registry / gcr.io: STS token exchange (and
    /// optionally `generateAccessToken` for a service account).
    Gcp,
    /// Azure ACR: Entra client credentials with the ID token as assertion,
    /// then the registry's `/oauth2/exchange`.
    Azure,
    /// Docker Hub: identity.docker.com token exchange with a connection id.
    DockerHub,
    /// Quay: robot federation on the registry host.
    Quay,
    /// JFrog Artifactory: `/access/api/v1/oidc/token` on the registry host.
    Jfrog,
}

impl Provider {
    /// The name used by the `login` input and `--login`.
    pub fn name(self) -> &'static str {
        match self {
            Provider::Ecr => "ecr",
            Provider::Gcp => "gcp",
            Provider::Azure => "azure",
            Provider::DockerHub => "dockerhub",
            Provider::Quay => "quay",
            Provider::Jfrog => "jfrog",
        }
    }

    /// The audience the provider expects in the ID token when none is given.
    fn default_audience(self, facts: &Facts) -> Option<String> {
        match self {
            Provider::Ecr => Some("sts.amazonaws.com".into()),
            Provider::Gcp => facts
                .gcp_workload_identity_provider
                .as_deref()
                .map(|p| format!("https://iam.googleapis.com/{}", p.trim_start_matches('/'))),
            Provider::Azure => Some("api://AzureADTokenExchange".into()),
            Provider::DockerHub => Some("https://identity.docker.com".into()),
            // Both check whatever audience their trust configuration names;
            // without `oidc-audience` the token carries GitHub's default.
            Provider::Quay | Provider::Jfrog => None,
        }
    }
}

/// What the `login` input / `--login` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Choice {
    /// From the registry host and which provider facts are given.
    #[default]
    Auto,
    /// The job's GitHub token (ghcr.io, a GitHub Enterprise registry).
    Github,
    /// The explicit `username` and `password`.
    Password,
    /// No credentials from inputs (docker's config.json, else anonymous).
    None,
    /// An OIDC exchange.
    Exchange(Provider),
}

impl Choice {
    /// Parses `auto`, `github`, `password`, `none` or a provider name.
    pub fn parse(s: &str, what: &str) -> Result<Choice> {
        Ok(match s.trim().to_ascii_lowercase().as_str() {
            "" | "auto" => Choice::Auto,
            "github" | "ghcr" => Choice::Github,
            "password" => Choice::Password,
            "none" => Choice::None,
            "ecr" | "aws" => Choice::Exchange(Provider::Ecr),
            "gcp" | "google" | "gar" => Choice::Exchange(Provider::Gcp),
            "azure" | "acr" => Choice::Exchange(Provider::Azure),
            "dockerhub" | "docker-hub" | "docker" => Choice::Exchange(Provider::DockerHub),
            "quay" => Choice::Exchange(Provider::Quay),
            "jfrog" | "artifactory" => Choice::Exchange(Provider::Jfrog),
            other => {
                return Err(Error::input(
                    format!("{what} is {other:?}"),
                    Some(
                        "use auto, github, password, none, ecr, gcp, azure, dockerhub, quay or jfrog"
                            .into(),
                    ),
                ));
            }
        })
    }
}

/// A provider fact, declared once: the CLI's flag (`--aws-role-arn`,
/// `cli/login.rs`) and the action's input (`aws-role-arn`,
/// `action/login.rs`) are both made from [`Fact::ALL`], and errors name it
/// by [`Fact::name`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fact {
    /// ECR: the IAM role to assume.
    AwsRoleArn,
    /// ECR: the region, when the host does not say.
    AwsRegion,
    /// Artifact Registry: the workload identity provider.
    GcpWorkloadIdentityProvider,
    /// Artifact Registry: a service account to impersonate.
    GcpServiceAccount,
    /// ACR: the Entra application (client) id.
    AzureClientId,
    /// ACR: the Entra tenant id.
    AzureTenantId,
    /// Docker Hub: the OIDC connection id.
    DockerhubConnectionId,
    /// JFrog: the OIDC integration (provider) name.
    JfrogProviderName,
    /// The ID token's audience instead of the provider's default.
    OidcAudience,
}

impl Fact {
    /// Every fact, in the order the CLI's help and action.yml list them.
    pub const ALL: [Fact; 9] = [
        Fact::AwsRoleArn,
        Fact::AwsRegion,
        Fact::GcpWorkloadIdentityProvider,
        Fact::GcpServiceAccount,
        Fact::AzureClientId,
        Fact::AzureTenantId,
        Fact::DockerhubConnectionId,
        Fact::JfrogProviderName,
        Fact::OidcAudience,
    ];

    /// The input's name (`aws-role-arn`); the flag is `--` and the name.
    pub fn name(self) -> &'static str {
        self.declared().0
    }

    /// The flag's value name in `--help` (`ARN`).
    pub fn value_name(self) -> &'static str {
        self.declared().1
    }

    /// What the fact is, as `--help` says it.
    pub fn help(self) -> &'static str {
        self.declared().2
    }

    /// (name, value name, help).
    fn declared(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Fact::AwsRoleArn => ("aws-role-arn", "ARN", "ECR: the IAM role to assume"),
            Fact::AwsRegion => (
                "aws-region",
                "REGION",
                "ECR: the region, when the host does not say",
            ),
            Fact::GcpWorkloadIdentityProvider => (
                "gcp-workload-identity-provider",
                "NAME",
                "Artifact Registry: projects/N/locations/global/workloadIdentityPools/P/providers/R",
            ),
            Fact::GcpServiceAccount => (
                "gcp-service-account",
                "EMAIL",
                "Artifact Registry: a service account to impersonate",
            ),
            Fact::AzureClientId => (
                "azure-client-id",
                "GUID",
                "ACR: the Entra application (client) id",
            ),
            Fact::AzureTenantId => ("azure-tenant-id", "GUID", "ACR: the Entra tenant id"),
            Fact::DockerhubConnectionId => (
                "dockerhub-connection-id",
                "UUID",
                "Docker Hub: the OIDC connection id",
            ),
            Fact::JfrogProviderName => (
                "jfrog-provider-name",
                "NAME",
                "JFrog: the OIDC integration (provider) name",
            ),
            Fact::OidcAudience => (
                "oidc-audience",
                "AUD",
                "The audience to put in the ID token (when the source can choose)",
            ),
        }
    }

    /// Sets this fact in `facts`.
    pub fn set(self, facts: &mut Facts, value: Option<String>) {
        *self.slot(facts) = value;
    }

    /// This fact's place in `facts`.
    fn slot(self, facts: &mut Facts) -> &mut Option<String> {
        match self {
            Fact::AwsRoleArn => &mut facts.aws_role_arn,
            Fact::AwsRegion => &mut facts.aws_region,
            Fact::GcpWorkloadIdentityProvider => &mut facts.gcp_workload_identity_provider,
            Fact::GcpServiceAccount => &mut facts.gcp_service_account,
            Fact::AzureClientId => &mut facts.azure_client_id,
            Fact::AzureTenantId => &mut facts.azure_tenant_id,
            Fact::DockerhubConnectionId => &mut facts.dockerhub_connection_id,
            Fact::JfrogProviderName => &mut facts.jfrog_provider_name,
            Fact::OidcAudience => &mut facts.audience,
        }
    }
}

/// The provider facts a login may need ([`Fact`]), the username, and the
/// session's name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Facts {
    /// The IAM role to assume (`arn:aws:iam::ACCOUNT:role/NAME`).
    pub aws_role_arn: Option<String>,
    /// The AWS region, when the registry host does not tell.
    pub aws_region: Option<String>,
    /// `projects/NUMBER/locations/global/workloadIdentityPools/POOL/providers/PROVIDER`.
    pub gcp_workload_identity_provider: Option<String>,
    /// A service account to impersonate (`NAME@PROJECT.iam.gserviceaccount.com`).
    pub gcp_service_account: Option<String>,
    /// The Entra application (client) id with the federated credential.
    pub azure_client_id: Option<String>,
    /// The Entra tenant id.
    pub azure_tenant_id: Option<String>,
    /// The Docker Hub OIDC connection id.
    pub dockerhub_connection_id: Option<String>,
    /// The JFrog OIDC integration (provider) name.
    pub jfrog_provider_name: Option<String>,
    /// The audience to request instead of the provider's default.
    pub audience: Option<String>,
    /// The user: the Quay robot (`org+robot`), the Docker Hub user or
    /// organization, the JFrog user when the answer names none.
    pub username: Option<String>,
    /// A name for the session (AWS `RoleSessionName`); defaults to `settings-image`.
    pub session_name: Option<String>,
}

/// Where the fixed cloud endpoints are, when not the public ones: private
/// endpoints in production, local stubs in tests. The front end fills these
/// from the variables each cloud's own SDKs read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Endpoints {
    /// `AWS_ENDPOINT_URL_STS` (else `AWS_ENDPOINT_URL`).
    pub aws_sts: Option<String>,
    /// `AWS_ENDPOINT_URL_ECR` (else `AWS_ENDPOINT_URL`).
    pub aws_ecr: Option<String>,
    /// `AZURE_AUTHORITY_HOST`, e.g. `https://login.microsoftonline.com/`.
    pub azure_authority: Option<String>,
    /// `CLOUDSDK_API_ENDPOINT_OVERRIDES_STS` (gcloud's override), e.g. `https://sts.googleapis.com/`.
    pub gcp_sts: Option<String>,
    /// `CLOUDSDK_API_ENDPOINT_OVERRIDES_IAMCREDENTIALS`, e.g. `https://iamcredentials.googleapis.com/`.
    pub gcp_iamcredentials: Option<String>,
    /// `DOCKER_IDENTITY_URL`, e.g. `https://identity.docker.com`.
    pub docker_identity: Option<String>,
}

impl Endpoints {
    /// Reads the overrides through `get` (the front end's environment).
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Endpoints {
        let get = |k: &str| {
            get(k)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        Endpoints {
            aws_sts: get("AWS_ENDPOINT_URL_STS").or_else(|| get("AWS_ENDPOINT_URL")),
            aws_ecr: get("AWS_ENDPOINT_URL_ECR").or_else(|| get("AWS_ENDPOINT_URL")),
            azure_authority: get("AZURE_AUTHORITY_HOST"),
            gcp_sts: get("CLOUDSDK_API_ENDPOINT_OVERRIDES_STS"),
            gcp_iamcredentials: get("CLOUDSDK_API_ENDPOINT_OVERRIDES_IAMCREDENTIALS"),
            docker_identity: get("DOCKER_IDENTITY_URL"),
        }
    }
}

/// Called with every secret the moment it is known (the action masks it).
pub type SecretSink = Arc<dyn Fn(&str) + Send + Sync>;

/// One OIDC login, ready to run (and to run again when its credentials
/// expire during a long push).
#[derive(Clone)]
pub struct Login {
    /// Who exchanges the token.
    pub provider: Provider,
    /// The provider facts.
    pub facts: Facts,
    /// Where the ID token comes from.
    pub id_token: IdTokenSource,
    /// Endpoint overrides.
    pub endpoints: Endpoints,
    /// The registry host (`HOST[:PORT]`).
    pub host: String,
    /// `http` or `https`: the registry's scheme, used by the exchanges
    /// that live on the registry host (Quay, JFrog, ACR's `/oauth2/exchange`).
    pub scheme: &'static str,
    /// The overall deadline of each exchange request.
    pub timeout: Duration,
    /// Receives every secret as soon as it is known.
    pub on_secret: Option<SecretSink>,
}

impl fmt::Debug for Login {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Login")
            .field("provider", &self.provider)
            .field("host", &self.host)
            .finish_non_exhaustive()
    }
}

/// The default deadline of one exchange request.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The deadline of each exchange request: `SETTINGS_IMAGE_LOGIN_TIMEOUT`
/// seconds (read through `get`), else [`DEFAULT_TIMEOUT`].
pub fn timeout_from(get: impl Fn(&str) -> Option<String>) -> Result<Duration> {
    match get("SETTINGS_IMAGE_LOGIN_TIMEOUT").filter(|v| !v.trim().is_empty()) {
        None => Ok(DEFAULT_TIMEOUT),
        Some(v) => crate::registry::deadline::parse_seconds("SETTINGS_IMAGE_LOGIN_TIMEOUT", &v),
    }
}

/// What a front end gives [`plan`].
#[derive(Debug, Clone, Default)]
pub struct LoginOptions {
    /// The `login` choice.
    pub choice: Choice,
    /// The registry host.
    pub host: String,
    /// Explicit username (input or flag).
    pub username: Option<String>,
    /// Explicit password (input or flag).
    pub password: Option<String>,
    /// The job's GitHub token, if the workflow passed one.
    pub github_token: Option<String>,
    /// `GITHUB_SERVER_URL`, for a GitHub Enterprise Server's registry.
    pub github_server_url: Option<String>,
    /// Provider facts.
    pub facts: Facts,
}

/// What [`plan`] decided.
#[derive(Debug, Clone)]
pub enum Decision {
    /// Static credentials (explicit password, or the GitHub token on a GitHub host).
    Static(Credentials),
    /// An OIDC exchange for this provider.
    Exchange(Provider),
    /// Nothing from the inputs: docker's config.json, else anonymous.
    None,
}

/// The container registry of GitHub: `ghcr.io`, or on GitHub Enterprise
/// Server (`GITHUB_SERVER_URL`) its `containers.HOST`. The job token goes
/// to these hosts only.
pub fn is_github_registry(host: &str, server_url: Option<&str>) -> bool {
    let host = host.to_ascii_lowercase();
    if host == "ghcr.io" {
        return true;
    }
    // GHE.com (data residency): `octo.ghe.com` serves `containers.octo.ghe.com`.
    enterprise_host(server_url).is_some_and(|server| host == format!("containers.{server}"))
}

/// A GitHub Enterprise Server's (or GHE.com's) host from
/// `GITHUB_SERVER_URL`; `None` for github.com or none.
fn enterprise_host(server_url: Option<&str>) -> Option<String> {
    let server = server_url?
        .trim()
        .trim_start_matches("https://")
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_ascii_lowercase();
    (!server.is_empty() && server != "github.com").then_some(server)
}

/// The job token's credentials for the GitHub registry `host`: the token
/// realm it may reach is on GitHub's hosts only, the registry itself (and a
/// GitHub Enterprise Server's own host), never one another registry names.
fn job_token(creds: Credentials, host: &str, server_url: Option<&str>) -> Credentials {
    let host = host.to_ascii_lowercase();
    let server = enterprise_host(server_url).filter(|_| host != "ghcr.io");
    let hosts = std::iter::once(host).chain(server).collect();
    Credentials {
        realms: Realms::Only(hosts),
        ..creds
    }
}

/// The provider a registry host belongs to, when its name says so
/// ([`hosts::owns`] for the clouds and Docker Hub).
pub fn provider_of_host(host: &str) -> Option<Provider> {
    let h = host.to_ascii_lowercase();
    let h = h.split(':').next().unwrap_or(&h);
    if let Some(p) = [
        Provider::Ecr,
        Provider::Gcp,
        Provider::Azure,
        Provider::DockerHub,
    ]
    .into_iter()
    .find(|p| hosts::owns(*p, host))
    {
        Some(p)
    } else if h == "quay.io" {
        Some(Provider::Quay)
    } else if h.ends_with(".jfrog.io") {
        Some(Provider::Jfrog)
    } else {
        None
    }
}

/// Whether the facts the provider needs to be chosen automatically are set.
fn facts_given(p: Provider, f: &Facts, username: Option<&str>) -> bool {
    match p {
        Provider::Ecr => f.aws_role_arn.is_some(),
        Provider::Gcp => f.gcp_workload_identity_provider.is_some(),
        Provider::Azure => f.azure_client_id.is_some(),
        Provider::DockerHub => f.dockerhub_connection_id.is_some(),
        Provider::Quay => username.is_some_and(|u| u.contains('+')),
        Provider::Jfrog => f.jfrog_provider_name.is_some(),
    }
}

/// Decides which credentials a push uses. `names` spells the inputs (or
/// flags) of the face in use, e.g. `|n| format!("`{n}`")` or `--{n}`.
///
/// `auto`: an explicit password wins; else the provider the host belongs
/// to, when its facts are given; else the GitHub token on a GitHub
/// registry; else a single provider whose facts are given (a self-hosted
/// Artifactory, a mirror); else nothing. The GitHub token is never
/// sent to another host, whatever is asked.
pub fn plan(p: &LoginOptions, names: &dyn Fn(&str) -> String) -> Result<Decision> {
    let password = p.password.clone().filter(|s| !s.is_empty());
    let github_host = is_github_registry(&p.host, p.github_server_url.as_deref());
    match p.choice {
        Choice::None => Ok(Decision::None),
        Choice::Password => match password {
            Some(pw) => with_user(p, names, pw, "a registry password"),
            None => Err(Error::input(
                format!("login is `password` but {} is empty", names("password")),
                Some(format!(
                    "set {} (from a secret), or choose another login",
                    names("password")
                )),
            )),
        },
        Choice::Github => plan_github(p, names, github_host),
        Choice::Exchange(provider) => {
            let asked = format!("{} {}", names("login"), provider.name());
            hosts::check(provider, &p.host, &asked)?;
            Ok(Decision::Exchange(provider))
        }
        Choice::Auto => plan_auto(p, names, password, github_host),
    }
}

/// `password` as the credentials of the plan's username, or an error when
/// the username is empty (`what` names the password).
fn with_user(
    p: &LoginOptions,
    names: &dyn Fn(&str) -> String,
    password: String,
    what: &str,
) -> Result<Decision> {
    match p.username.clone().filter(|u| !u.is_empty()) {
        Some(username) => Ok(Decision::Static(Credentials::new(username, password))),
        None => Err(Error::input(
            format!("{what} is set but {} is empty", names("username")),
            Some(format!(
                "set {}, or clear {} to push without it",
                names("username"),
                names("password")
            )),
        )),
    }
}

/// The GitHub job token as the credentials of the plan's username, for
/// GitHub's registry only.
fn with_job_token(
    p: &LoginOptions,
    names: &dyn Fn(&str) -> String,
    token: String,
) -> Result<Decision> {
    with_user(p, names, token, "the GitHub token").map(|d| match d {
        Decision::Static(c) => {
            Decision::Static(job_token(c, &p.host, p.github_server_url.as_deref()))
        }
        other => other,
    })
}

/// `login: github`: the job token, on GitHub's container registry only.
fn plan_github(
    p: &LoginOptions,
    names: &dyn Fn(&str) -> String,
    github_host: bool,
) -> Result<Decision> {
    if !github_host {
        return Err(Error::input(
            format!(
                "login is `github` but {} is not GitHub's container registry: the job token is only sent to ghcr.io (or a GitHub Enterprise Server's containers.HOST)",
                p.host
            ),
            Some(format!(
                "for another registry use {} with a secret, or an OIDC login (see docs/registries.md)",
                names("password")
            )),
        ));
    }
    match p.github_token.clone().filter(|t| !t.is_empty()) {
        Some(t) => with_job_token(p, names, t),
        None => Err(Error::input(
            format!("login is `github` but {} is empty", names("github-token")),
            Some(format!(
                "leave {} at its default (${{{{ github.token }}}}) and grant `packages: write`",
                names("github-token")
            )),
        )),
    }
}

/// `login: auto`, in the order [`plan`] describes.
fn plan_auto(
    p: &LoginOptions,
    names: &dyn Fn(&str) -> String,
    password: Option<String>,
    github_host: bool,
) -> Result<Decision> {
    if let Some(pw) = password {
        return with_user(p, names, pw, "a registry password");
    }
    if let Some(provider) = provider_of_host(&p.host)
        && facts_given(provider, &p.facts, p.username.as_deref())
    {
        return Ok(Decision::Exchange(provider));
    }
    // GitHub's registry takes the job token, whatever else is set.
    if github_host && let Some(t) = p.github_token.clone().filter(|t| !t.is_empty()) {
        return with_job_token(p, names, t);
    }
    let given: Vec<Provider> = [
        Provider::Ecr,
        Provider::Gcp,
        Provider::Azure,
        Provider::DockerHub,
        Provider::Jfrog,
    ]
    .into_iter()
    .filter(|pr| facts_given(*pr, &p.facts, None))
    .collect();
    if let [only] = given.as_slice() {
        let asked = format!("{} (the {} login)", names(fact_input(*only)), only.name());
        hosts::check(*only, &p.host, &asked)?;
        return Ok(Decision::Exchange(*only));
    }
    if given.len() > 1 {
        return Err(Error::input(
            format!(
                "facts for several logins are set ({}) and {} does not say which",
                given
                    .iter()
                    .map(|g| g.name())
                    .collect::<Vec<_>>()
                    .join(", "),
                p.host
            ),
            Some(format!("set {} to one of them", names("login"))),
        ));
    }
    Ok(Decision::None)
}

/// The input (or flag) whose value makes `auto` choose `provider`.
fn fact_input(provider: Provider) -> &'static str {
    match provider {
        Provider::Ecr => Fact::AwsRoleArn.name(),
        Provider::Gcp => Fact::GcpWorkloadIdentityProvider.name(),
        Provider::Azure => Fact::AzureClientId.name(),
        Provider::DockerHub => Fact::DockerhubConnectionId.name(),
        Provider::Quay => "username",
        Provider::Jfrog => Fact::JfrogProviderName.name(),
    }
}

/// A provider fact that must be given, or an error naming its input.
pub(crate) fn need<'a>(
    value: &'a Option<String>,
    name: &str,
    provider: Provider,
    example: &str,
) -> Result<&'a str> {
    value.as_deref().filter(|v| !v.is_empty()).ok_or_else(|| {
        Error::input(
            format!("the {} login needs `{name}`", provider.name()),
            Some(format!(
                "set `{name}` (flag --{name}), e.g. {example}; see docs/registries.md"
            )),
        )
    })
}

impl Login {
    /// Runs the exchange: gets an ID token, trades it, returns the registry
    /// credentials. Every secret goes to [`Login::on_secret`] first.
    pub async fn credentials(&self) -> Result<Credentials> {
        // The last word, whatever face built the login: no exchange for a
        // host the provider does not own (the faces refuse earlier, in
        // their own words).
        hosts::check(
            self.provider,
            &self.host,
            &format!("the {} login", self.provider.name()),
        )?;
        let ctx = http::Ctx::new(self)?;
        let audience = self
            .facts
            .audience
            .clone()
            .or_else(|| self.provider.default_audience(&self.facts));
        let jwt = self.id_token.fetch(&ctx, audience.as_deref()).await?;
        let creds = match self.provider {
            Provider::Ecr => aws::login(self, &ctx, &jwt).await?,
            Provider::Gcp => google::login(self, &ctx, &jwt).await?,
            Provider::Azure => azure::login(self, &ctx, &jwt).await?,
            Provider::DockerHub => dockerhub::login(self, &ctx, &jwt).await?,
            Provider::Quay => quay::login(self, &ctx, &jwt).await?,
            Provider::Jfrog => jfrog::login(self, &ctx, &jwt).await?,
        };
        ctx.secret(&creds.password);
        Ok(creds)
    }

    /// [`Login::credentials`] on a runtime of its own (outside async code).
    pub fn credentials_blocking(&self) -> Result<Credentials> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::io("starting the async runtime", e))?
            .block_on(self.credentials())
    }

    /// The base URL of an exchange that lives on the registry host.
    pub(crate) fn registry_base(&self) -> String {
        let host = if self.host == "docker.io" {
            "index.docker.io"
        } else {
            &self.host
        };
        format!("{}://{host}", self.scheme)
    }
}

/// The registry client renews an expired password through this: it runs
/// the exchange again, and never learns which provider it is.
impl crate::registry::CredentialSource for Login {
    fn credentials(&self) -> crate::registry::CredentialsFuture<'_> {
        Box::pin(Login::credentials(self))
    }

    fn clone_box(&self) -> Box<dyn crate::registry::CredentialSource> {
        Box::new(self.clone())
    }
}

/// A login as the registry options hold it: `login.map(Into::into)`.
impl From<Login> for Box<dyn crate::registry::CredentialSource> {
    fn from(login: Login) -> Self {
        Box::new(login)
    }
}

/// Each fact's input name with the [`Facts`] it gives when set to `v`,
/// written out by hand (not from [`Fact`]'s table), for the faces' tests
/// that read the facts by the table.
#[cfg(test)]
pub(crate) fn each_fact_set_to_v() -> Vec<(&'static str, Facts)> {
    let v = || Some("v".to_string());
    let none = Facts::default;
    vec![
        (
            "aws-role-arn",
            Facts {
                aws_role_arn: v(),
                ..none()
            },
        ),
        (
            "aws-region",
            Facts {
                aws_region: v(),
                ..none()
            },
        ),
        (
            "gcp-workload-identity-provider",
            Facts {
                gcp_workload_identity_provider: v(),
                ..none()
            },
        ),
        (
            "gcp-service-account",
            Facts {
                gcp_service_account: v(),
                ..none()
            },
        ),
        (
            "azure-client-id",
            Facts {
                azure_client_id: v(),
                ..none()
            },
        ),
        (
            "azure-tenant-id",
            Facts {
                azure_tenant_id: v(),
                ..none()
            },
        ),
        (
            "dockerhub-connection-id",
            Facts {
                dockerhub_connection_id: v(),
                ..none()
            },
        ),
        (
            "jfrog-provider-name",
            Facts {
                jfrog_provider_name: v(),
                ..none()
            },
        ),
        (
            "oidc-audience",
            Facts {
                audience: v(),
                ..none()
            },
        ),
    ]
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
