//! `spec.provider`: the registry login of the pod's cloud workload
//! identity, through the same OIDC exchanges the action and the CLI use
//! (`crate::login`). The cloud's webhook puts the identity into the pod's
//! environment and a projected token file; this reads them, once per
//! reconcile, from the environment the controller started with:
//!
//! - `aws` (EKS IRSA): `AWS_ROLE_ARN`, `AWS_WEB_IDENTITY_TOKEN_FILE`,
//!   `AWS_REGION` (STS `AssumeRoleWithWebIdentity`, then ECR);
//! - `azure` (AKS workload identity): `AZURE_CLIENT_ID`,
//!   `AZURE_TENANT_ID`, `AZURE_FEDERATED_TOKEN_FILE`, `AZURE_AUTHORITY_HOST`;
//! - `gcp` (workload identity federation): `GOOGLE_APPLICATION_CREDENTIALS`
//!   naming an `external_account` credential configuration whose
//!   `credential_source.file` is the projected token (GKE's metadata
//!   server is not asked).

use crate::front::{Env, var};
use crate::login::{Endpoints, Facts, IdTokenSource, Login, Provider as Exchange};

use super::crd::Provider;

/// The login for `provider` on `host`, or what is missing from the pod.
pub fn workload_identity(
    provider: Provider,
    host: &str,
    scheme: &'static str,
    env: &Env,
) -> Result<Login, String> {
    let get = |k: &str| var(env, k);
    let need = |k: &str, how: &str| {
        get(k).ok_or_else(|| {
            format!(
                "{} needs {k} in the controller's environment ({how})",
                name(provider)
            )
        })
    };
    let (exchange, facts, token) = match provider {
        Provider::Generic => return Err("generic has no workload identity".into()),
        Provider::Aws => {
            let how = "EKS sets it for a ServiceAccount annotated eks.amazonaws.com/role-arn";
            let facts = Facts {
                aws_role_arn: Some(need("AWS_ROLE_ARN", how)?),
                aws_region: get("AWS_REGION").or_else(|| get("AWS_DEFAULT_REGION")),
                session_name: Some("settings-image-controller".into()),
                ..Facts::default()
            };
            (
                Exchange::Ecr,
                facts,
                need("AWS_WEB_IDENTITY_TOKEN_FILE", how)?,
            )
        }
        Provider::Azure => {
            let how = "AKS sets it for a pod labelled azure.workload.identity/use: \"true\"";
            let facts = Facts {
                azure_client_id: Some(need("AZURE_CLIENT_ID", how)?),
                azure_tenant_id: Some(need("AZURE_TENANT_ID", how)?),
                ..Facts::default()
            };
            (
                Exchange::Azure,
                facts,
                need("AZURE_FEDERATED_TOKEN_FILE", how)?,
            )
        }
        Provider::Gcp => {
            let file = need(
                "GOOGLE_APPLICATION_CREDENTIALS",
                "a credential configuration from `gcloud iam workload-identity-pools create-cred-config`",
            )?;
            gcp(&file)?
        }
    };
    Ok(Login {
        provider: exchange,
        facts,
        id_token: IdTokenSource::File(token.into()),
        endpoints: Endpoints::from_env(get),
        host: host.to_string(),
        scheme,
        timeout: crate::login::timeout_from(get).map_err(|e| e.to_string())?,
        on_secret: None,
    })
}

/// The exchange `spec.provider` runs, `None` for `generic`.
pub(crate) fn exchange_of(p: Provider) -> Option<Exchange> {
    match p {
        Provider::Generic => None,
        Provider::Aws => Some(Exchange::Ecr),
        Provider::Azure => Some(Exchange::Azure),
        Provider::Gcp => Some(Exchange::Gcp),
    }
}

/// `spec.provider`'s value as written.
pub(crate) fn name(p: Provider) -> &'static str {
    match p {
        Provider::Generic => "generic",
        Provider::Aws => "aws",
        Provider::Azure => "azure",
        Provider::Gcp => "gcp",
    }
}

/// The facts of a Google `external_account` credential configuration.
fn gcp(file: &str) -> Result<(Exchange, Facts, String), String> {
    let text =
        crate::named_file::read(std::path::Path::new(file), "GOOGLE_APPLICATION_CREDENTIALS")
            .map_err(|e| e.to_string())?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| format!("GOOGLE_APPLICATION_CREDENTIALS {file} is not JSON: {e}"))?;
    if v.get("type").and_then(|t| t.as_str()) != Some("external_account") {
        return Err(format!(
            "GOOGLE_APPLICATION_CREDENTIALS {file} is not an external_account credential configuration"
        ));
    }
    let provider = v
        .get("audience")
        .and_then(|a| a.as_str())
        .and_then(|a| a.strip_prefix("//iam.googleapis.com/"))
        .ok_or_else(|| {
            format!("{file} has no audience //iam.googleapis.com/projects/.../providers/...")
        })?;
    let token = v
        .pointer("/credential_source/file")
        .and_then(|f| f.as_str())
        .ok_or_else(|| format!("{file} has no credential_source.file (the projected token)"))?;
    // `.../serviceAccounts/NAME@PROJECT.iam.gserviceaccount.com:generateAccessToken`
    let service_account = v
        .get("service_account_impersonation_url")
        .and_then(|u| u.as_str())
        .and_then(|u| u.rsplit_once("/serviceAccounts/"))
        .map(|(_, rest)| rest.trim_end_matches(":generateAccessToken").to_string());
    Ok((
        Exchange::Gcp,
        Facts {
            gcp_workload_identity_provider: Some(provider.to_string()),
            gcp_service_account: service_account,
            ..Facts::default()
        },
        token.to_string(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cloud_reads_its_webhook_variables() {
        let env: Env = [
            ("AWS_ROLE_ARN", "arn:aws:iam::1:role/r"),
            (
                "AWS_WEB_IDENTITY_TOKEN_FILE",
                "/var/run/secrets/eks.amazonaws.com/serviceaccount/token",
            ),
            ("AWS_REGION", "eu-west-1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let l = workload_identity(
            Provider::Aws,
            "1.dkr.ecr.eu-west-1.amazonaws.com",
            "https",
            &env,
        )
        .unwrap();
        assert_eq!(l.provider, Exchange::Ecr);
        assert_eq!(
            l.facts.aws_role_arn.as_deref(),
            Some("arn:aws:iam::1:role/r")
        );
        assert!(
            matches!(l.id_token, IdTokenSource::File(ref p) if p.ends_with("serviceaccount/token"))
        );
        let e = workload_identity(Provider::Azure, "a.azurecr.io", "https", &env).unwrap_err();
        assert!(e.contains("AZURE_CLIENT_ID"), "{e}");
    }

    #[test]
    fn gcp_reads_an_external_account_file() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("cred.json");
        std::fs::write(&f, r#"{"type":"external_account","audience":"//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/k","credential_source":{"file":"/var/run/token"},"service_account_impersonation_url":"https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/sa@p.iam.gserviceaccount.com:generateAccessToken"}"#).unwrap();
        let (p, facts, token) = gcp(f.to_str().unwrap()).unwrap();
        assert_eq!(p, Exchange::Gcp);
        assert_eq!(
            facts.gcp_workload_identity_provider.as_deref(),
            Some("projects/1/locations/global/workloadIdentityPools/p/providers/k")
        );
        assert_eq!(
            facts.gcp_service_account.as_deref(),
            Some("sa@p.iam.gserviceaccount.com")
        );
        assert_eq!(token, "/var/run/token");
    }
}
