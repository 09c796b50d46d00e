//! Google Artifact Registry and gcr.io: Security Token Service token
//! exchange (`POST https://sts.googleapis.com/v1/token`, JSON, grant type
//! `urn:ietf:params:oauth:grant-type:token-exchange`, subject token type
//! `urn:ietf:params:oauth:token-type:jwt`, audience the workload identity
//! provider's full resource name), optionally followed by IAM Credentials
//! `generateAccessToken` for a service account. The registry takes user
//! `oauth2accesstoken` and the access token as password.
//!
//! Checked against Google's STS v1 `token` method reference
//! (ExchangeTokenRequest fields) and the IAM Credentials
//! `projects.serviceAccounts.generateAccessToken` reference. Endpoints are
//! overridden with gcloud's own variables,
//! `CLOUDSDK_API_ENDPOINT_OVERRIDES_STS` and
//! `CLOUDSDK_API_ENDPOINT_OVERRIDES_IAMCREDENTIALS`.

use super::http::{self, Ctx};
use super::{Fact, Login, Provider, need};
use crate::error::Result;
use crate::registry::Credentials;

const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

fn hint(provider: &str) -> String {
    format!(
        "check the workload identity provider {provider}: its issuer (https://token.actions.githubusercontent.com), \
         its attribute condition (e.g. assertion.repository == 'OWNER/REPO') and allowed audiences; and that the principal \
         (or the service account in gcp-service-account, with roles/iam.workloadIdentityUser) has roles/artifactregistry.writer; see docs/registries.md"
    )
}

/// The GCP login: user `oauth2accesstoken`.
pub(crate) async fn login(login: &Login, ctx: &Ctx, jwt: &str) -> Result<Credentials> {
    let provider = need(
        &login.facts.gcp_workload_identity_provider,
        Fact::GcpWorkloadIdentityProvider.name(),
        Provider::Gcp,
        "projects/123456789/locations/global/workloadIdentityPools/github/providers/github",
    )?
    .trim_start_matches('/')
    .to_string();
    let base = login
        .endpoints
        .gcp_sts
        .clone()
        .unwrap_or_else(|| "https://sts.googleapis.com/".into());
    let url = http::join(&base, "/v1/token");
    let body = serde_json::json!({
        "grantType": "urn:ietf:params:oauth:grant-type:token-exchange",
        "audience": format!("//iam.googleapis.com/{provider}"),
        "scope": SCOPE,
        "requestedTokenType": "urn:ietf:params:oauth:token-type:access_token",
        "subjectToken": jwt,
        "subjectTokenType": "urn:ietf:params:oauth:token-type:jwt",
    });
    let what = "Google STS token exchange";
    let v = ctx
        .send_json(
            what,
            &url,
            ctx.http().post(&url).json(&body),
            hint(&provider),
        )
        .await?;
    let federated = http::field(ctx, &v, "access_token", what, &url, true)?;
    let token = match login
        .facts
        .gcp_service_account
        .as_deref()
        .filter(|s| !s.is_empty())
    {
        None => federated,
        Some(sa) => {
            let base = login
                .endpoints
                .gcp_iamcredentials
                .clone()
                .unwrap_or_else(|| "https://iamcredentials.googleapis.com/".into());
            let url = http::join(
                &base,
                &format!("/v1/projects/-/serviceAccounts/{sa}:generateAccessToken"),
            );
            let what = format!("Google IAM generateAccessToken for {sa}");
            let rb = ctx
                .http()
                .post(&url)
                .bearer_auth(&federated)
                .json(&serde_json::json!({"scope": [SCOPE]}));
            let v = ctx.send_json(&what, &url, rb, hint(&provider)).await?;
            http::field(ctx, &v, "accessToken", &what, &url, true)?
        }
    };
    Ok(Credentials::new("oauth2accesstoken", token))
}
