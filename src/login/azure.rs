//! Azure Container Registry: Microsoft Entra client-credentials grant with
//! the ID token (audience `api://AzureADTokenExchange`) as
//! `client_assertion` (`POST {authority}/{tenant}/oauth2/v2.0/token`,
//! scope `https://management.azure.com/.default`, as `az acr login` uses),
//! then the registry's own `POST /oauth2/exchange`
//! (`grant_type=access_token`, `service`, `tenant`, `access_token`) for an
//! ACR refresh token, used as password with user
//! `00000000-0000-0000-0000-000000000000`.
//!
//! Checked against the Microsoft identity platform's client-credentials
//! flow ("access token request with a federated credential") and ACR's
//! "Azure Container Registry integration with Azure Active Directory"
//! (AAD-OAuth) document. `AZURE_AUTHORITY_HOST` points at another authority
//! (sovereign clouds, tests).

use super::http::{self, Ctx};
use super::{Fact, Login, Provider, need};
use crate::error::Result;
use crate::registry::Credentials;

/// The user name ACR expects with a refresh token.
pub const ACR_USER: &str = "00000000-0000-0000-0000-000000000000";

/// The ACR login.
pub(crate) async fn login(login: &Login, ctx: &Ctx, jwt: &str) -> Result<Credentials> {
    let client = need(
        &login.facts.azure_client_id,
        Fact::AzureClientId.name(),
        Provider::Azure,
        "the application (client) id, a GUID",
    )?;
    let tenant = need(
        &login.facts.azure_tenant_id,
        Fact::AzureTenantId.name(),
        Provider::Azure,
        "the directory (tenant) id, a GUID",
    )?;
    let authority = login
        .endpoints
        .azure_authority
        .clone()
        .unwrap_or_else(|| "https://login.microsoftonline.com/".into());
    let url = http::join(&authority, &format!("/{tenant}/oauth2/v2.0/token"));
    let pairs = [
        ("grant_type", "client_credentials"),
        ("client_id", client),
        ("scope", "https://management.azure.com/.default"),
        (
            "client_assertion_type",
            "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
        ),
        ("client_assertion", jwt),
    ];
    let what = "Microsoft Entra client-credentials token";
    let v = ctx
        .post_form(
            what,
            &url,
            &pairs,
            format!(
                "check the federated credential on application {client}: issuer https://token.actions.githubusercontent.com, \
                 subject repo:OWNER/REPO:ref:refs/heads/BRANCH (or :environment:NAME, :pull_request), audience api://AzureADTokenExchange; see docs/registries.md"
            ),
        )
        .await?;
    let aad = http::field(ctx, &v, "access_token", what, &url, true)?;
    let url = http::join(&login.registry_base(), "/oauth2/exchange");
    let service = login.host.clone();
    let pairs = [
        ("grant_type", "access_token"),
        ("service", &service),
        ("tenant", tenant),
        ("access_token", &aad),
    ];
    let what = "ACR /oauth2/exchange";
    let v = ctx
        .post_form(
            what,
            &url,
            &pairs,
            format!("give the application {client} the AcrPush role on the registry {service}"),
        )
        .await?;
    let refresh = http::field(ctx, &v, "refresh_token", what, &url, true)?;
    Ok(Credentials::new(ACR_USER, refresh))
}
