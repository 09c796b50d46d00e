//! JFrog Artifactory: `POST <registry>/access/api/v1/oidc/token` (JSON:
//! grant type `urn:ietf:params:oauth:grant-type:token-exchange`, subject
//! token type `urn:ietf:params:oauth:token-type:id_token`, the ID token,
//! `provider_name`) answers an access token (and the user it maps to, when
//! the identity mapping names one).
//!
//! Checked against JFrog's "OIDC token exchange" flow as documented for
//! GitHub Actions (the platform's Access API and setup-jfrog-cli). The
//! exchange lives on the registry host and uses its scheme.

use super::http::{self, Ctx};
use super::{Fact, Login, Provider, need};
use crate::error::Result;
use crate::registry::Credentials;

/// The JFrog login.
pub(crate) async fn login(login: &Login, ctx: &Ctx, jwt: &str) -> Result<Credentials> {
    let name = need(
        &login.facts.jfrog_provider_name,
        Fact::JfrogProviderName.name(),
        Provider::Jfrog,
        "the OIDC integration's name in the JFrog platform",
    )?;
    let url = http::join(&login.registry_base(), "/access/api/v1/oidc/token");
    let body = serde_json::json!({
        "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
        "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
        "subject_token": jwt,
        "provider_name": name,
    });
    let what = format!("JFrog OIDC token exchange ({name})");
    let v = ctx
        .send_json(
            &what,
            &url,
            ctx.http().post(&url).json(&body),
            format!(
                "check the OIDC integration {name}: provider URL https://token.actions.githubusercontent.com, its audience, and an identity mapping whose claims match this job (repository, ref) and grant deploy on the repository"
            ),
        )
        .await?;
    let token = http::field(ctx, &v, "access_token", &what, &url, true)?;
    let username = v
        .get("username")
        .and_then(|u| u.as_str())
        .filter(|u| !u.is_empty())
        .map(str::to_string)
        .or_else(|| login.facts.username.clone())
        .ok_or_else(|| ctx.malformed(&what, &url, "\"username\" (set `username`)"))?;
    Ok(Credentials::new(username, token))
}
