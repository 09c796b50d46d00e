//! Docker Hub: an OAuth 2.0 token exchange at
//! `POST https://identity.docker.com/oauth/token` (form: grant type
//! `urn:ietf:params:oauth:grant-type:token-exchange`, subject token type
//! `urn:ietf:params:oauth:token-type:id_token`, the ID token with audience
//! `https://identity.docker.com`, `connection_id`, `expires_in`), answering
//! `{"access_token": ...}`; the user is the Docker Hub organization or user
//! (`username`).
//!
//! Checked against docker/login-action's Docker Hub OIDC login (the
//! documented `DOCKERHUB_OIDC_CONNECTIONID` flow) and the GitHub docs'
//! "OIDC in Docker Hub" guide. `DOCKER_IDENTITY_URL` points elsewhere.

use super::http::{self, Ctx};
use super::{Fact, Login, Provider, need};
use crate::error::Result;
use crate::registry::Credentials;

/// The token lifetime asked for (seconds; Docker allows 300 to 3600).
const EXPIRES_IN: &str = "3600";

/// The Docker Hub login.
pub(crate) async fn login(login: &Login, ctx: &Ctx, jwt: &str) -> Result<Credentials> {
    let connection = need(
        &login.facts.dockerhub_connection_id,
        Fact::DockerhubConnectionId.name(),
        Provider::DockerHub,
        "the OIDC connection's UUID from the organization's settings",
    )?;
    let user = need(
        &login.facts.username,
        "username",
        Provider::DockerHub,
        "the Docker Hub organization name",
    )?
    .to_string();
    let base = login
        .endpoints
        .docker_identity
        .clone()
        .unwrap_or_else(|| "https://identity.docker.com".into());
    let url = http::join(&base, "/oauth/token");
    let pairs = [
        (
            "grant_type",
            "urn:ietf:params:oauth:grant-type:token-exchange",
        ),
        (
            "subject_token_type",
            "urn:ietf:params:oauth:token-type:id_token",
        ),
        ("subject_token", jwt),
        ("connection_id", connection),
        ("expires_in", EXPIRES_IN),
    ];
    let what = "Docker Hub OIDC token exchange";
    let v = ctx
        .post_form(
            what,
            &url,
            &pairs,
            format!(
                "check the OIDC connection {connection} in the Docker Hub organization {user}: its rules must match this workflow's subject (repo:OWNER/REPO:ref:...) and it must grant push to the repository"
            ),
        )
        .await?;
    let token = http::field(ctx, &v, "access_token", what, &url, true)?;
    Ok(Credentials::new(user, token))
}
