//! AWS ECR: the ID token (audience `sts.amazonaws.com`) goes to STS
//! `AssumeRoleWithWebIdentity` (an unsigned Query API call answering XML),
//! whose temporary keys sign (SigV4, with `aws-sigv4`, the SDK's own signer)
//! ECR's `GetAuthorizationToken` (JSON 1.1 protocol). Its
//! `authorizationToken` is base64 of `AWS:<password>`.
//!
//! Checked against the STS API reference (AssumeRoleWithWebIdentity:
//! request parameters and the `Credentials` result) and the ECR API
//! reference (GetAuthorizationToken, AuthorizationData). The region comes
//! from the `ACCOUNT.dkr.ecr.REGION.amazonaws.com` host, else `aws-region`;
//! `AWS_ENDPOINT_URL_STS` / `AWS_ENDPOINT_URL_ECR` point elsewhere.
//!
//! *Why not aws-sdk-sts / aws-sdk-ecr?* Two calls do not earn the SDK's
//! runtime, its HTTP stack and a few hundred crates; the signer alone is
//! a small, well-kept crate.

use std::time::SystemTime;

use base64::Engine as _;

use super::http::{self, Ctx};
use super::{Fact, Login, Provider, need};
use crate::error::{Error, Result};
use crate::registry::Credentials;

/// The region in an ECR host name, if it is one.
pub fn region_of_host(host: &str) -> Option<String> {
    let h = host.split(':').next()?;
    let rest = h.split_once(".dkr.ecr.")?.1;
    let region = rest.split('.').next()?;
    (!region.is_empty()).then(|| region.to_string())
}

/// The partition's domain: `amazonaws.com.cn` for the China regions.
fn domain(region: &str) -> &'static str {
    if region.starts_with("cn-") {
        "amazonaws.com.cn"
    } else {
        "amazonaws.com"
    }
}

/// The text of the first `<tag>` element of an XML answer.
fn xml_text<'a>(xml: &'a str, tag: &str) -> Option<&'a str> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let start = xml.find(&open)? + open.len();
    let end = xml[start..].find(&close)? + start;
    Some(&xml[start..end])
}

/// Undoes XML's five predefined entities.
fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

fn trust_hint(role: &str) -> String {
    format!(
        "check the trust policy of {role}: Principal Federated arn:aws:iam::ACCOUNT:oidc-provider/token.actions.githubusercontent.com, \
         \"token.actions.githubusercontent.com:aud\": \"sts.amazonaws.com\" (or your oidc-audience) and a \
         \"token.actions.githubusercontent.com:sub\" that matches this job (repo:OWNER/REPO:ref:refs/heads/BRANCH, or :environment:NAME); see docs/registries.md"
    )
}

/// Temporary AWS keys.
struct Keys {
    access_key: String,
    secret_key: String,
    session_token: String,
}

async fn assume_role(login: &Login, ctx: &Ctx, jwt: &str, region: &str) -> Result<Keys> {
    let role = need(
        &login.facts.aws_role_arn,
        Fact::AwsRoleArn.name(),
        Provider::Ecr,
        "arn:aws:iam::123456789012:role/settings-push",
    )?;
    let url = match &login.endpoints.aws_sts {
        Some(u) => u.clone(),
        None => format!("https://sts.{region}.{}/", domain(region)),
    };
    let session = login
        .facts
        .session_name
        .clone()
        .unwrap_or_else(|| "settings-image".into());
    let form = [
        ("Action", "AssumeRoleWithWebIdentity"),
        ("Version", "2011-06-15"),
        ("RoleArn", role),
        ("RoleSessionName", &session),
        ("WebIdentityToken", jwt),
    ];
    let body = http::form(&form);
    let what = format!("AWS STS AssumeRoleWithWebIdentity for {role}");
    let rb = ctx
        .http()
        .post(&url)
        .header(
            "Content-Type",
            "application/x-www-form-urlencoded; charset=utf-8",
        )
        .body(body);
    let answer = ctx.send(&what, &url, rb).await?;
    let text = String::from_utf8_lossy(&answer.body).to_string();
    if !answer.status.is_success() {
        let code = xml_text(&text, "Code").unwrap_or("");
        let mut hint = trust_hint(role);
        if code == "ExpiredTokenException" {
            hint = "the ID token expired before STS saw it: re-run the job".into();
        } else if code == "IDPRejectedClaim" || code == "InvalidIdentityToken" {
            hint = format!("STS rejected the token's claims: {}", trust_hint(role));
        }
        let message = match (xml_text(&text, "Code"), xml_text(&text, "Message")) {
            (Some(c), Some(m)) => format!("{c}: {}", unescape(m)),
            _ => text.clone(),
        };
        let shown = http::Answer {
            status: answer.status,
            body: message.into_bytes(),
        };
        return Err(ctx.refused(&what, &url, &shown, hint));
    }
    let get = |tag: &str| {
        xml_text(&text, tag)
            .map(unescape)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| ctx.malformed(&what, &url, &format!("<{tag}>")))
    };
    let keys = Keys {
        access_key: get("AccessKeyId")?,
        secret_key: get("SecretAccessKey")?,
        session_token: get("SessionToken")?,
    };
    ctx.secret(&keys.secret_key);
    ctx.secret(&keys.session_token);
    Ok(keys)
}

/// The SigV4 headers for a request (`aws-sigv4`).
fn sign(
    keys: &Keys,
    region: &str,
    service: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<Vec<(String, String)>> {
    use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
    use aws_sigv4::sign::v4;
    let bad = |e: String| Error::Auth {
        host: http::host_of(url),
        message: format!("signing the ECR request: {e}"),
        hint: "check aws-region and AWS_ENDPOINT_URL_ECR".into(),
    };
    let identity = aws_credential_types::Credentials::new(
        &keys.access_key,
        &keys.secret_key,
        Some(keys.session_token.clone()),
        None,
        "settings-image",
    )
    .into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(service)
        .time(SystemTime::now())
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| bad(e.to_string()))?
        .into();
    let request = SignableRequest::new(
        "POST",
        url,
        headers.iter().copied(),
        SignableBody::Bytes(body),
    )
    .map_err(|e| bad(e.to_string()))?;
    let (instructions, _) = sign(request, &params)
        .map_err(|e| bad(e.to_string()))?
        .into_parts();
    Ok(instructions
        .headers()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect())
}

/// The ECR login: user `AWS` and a 12-hour password.
pub(crate) async fn login(login: &Login, ctx: &Ctx, jwt: &str) -> Result<Credentials> {
    let region = match login
        .facts
        .aws_region
        .clone()
        .or_else(|| region_of_host(&login.host))
    {
        Some(r) => r,
        None => {
            return Err(Error::input(
                format!(
                    "the ecr login needs a region, and {} is not an ACCOUNT.dkr.ecr.REGION.amazonaws.com host",
                    login.host
                ),
                Some(format!(
                    "set `{0}` (flag --{0}), e.g. eu-west-1",
                    Fact::AwsRegion.name()
                )),
            ));
        }
    };
    let keys = assume_role(login, ctx, jwt, &region).await?;
    let url = match &login.endpoints.aws_ecr {
        Some(u) => u.clone(),
        None => format!("https://api.ecr.{region}.{}/", domain(&region)),
    };
    let body = b"{}";
    let target = "AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken";
    let base = [
        ("content-type", "application/x-amz-json-1.1"),
        ("x-amz-target", target),
    ];
    let signed = sign(&keys, &region, "ecr", &url, &base, body)?;
    let mut rb = ctx.http().post(&url).body(body.to_vec());
    for (k, v) in base {
        rb = rb.header(k, v);
    }
    for (k, v) in &signed {
        rb = rb.header(k.as_str(), v.as_str());
    }
    let what = "AWS ECR GetAuthorizationToken";
    let v = ctx.send_json(
            what,
            &url,
            rb,
            "the assumed role needs ecr:GetAuthorizationToken (and ecr:*Layer*, ecr:PutImage... on the repository); see docs/registries.md".into(),
        ).await?;
    let token = v
        .pointer("/authorizationData/0/authorizationToken")
        .and_then(|t| t.as_str())
        .ok_or_else(|| ctx.malformed(what, &url, "authorizationData[0].authorizationToken"))?;
    ctx.secret(token);
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(token.trim())
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(|| ctx.malformed(what, &url, "base64 authorizationToken"))?;
    let (user, password) = decoded
        .split_once(':')
        .ok_or_else(|| ctx.malformed(what, &url, "USER:PASSWORD in authorizationToken"))?;
    ctx.secret(password);
    Ok(Credentials::new(user, password))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_and_xml() {
        assert_eq!(
            region_of_host("123456789012.dkr.ecr.eu-west-1.amazonaws.com").as_deref(),
            Some("eu-west-1")
        );
        assert_eq!(region_of_host("ghcr.io"), None);
        assert_eq!(
            region_of_host("123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn").as_deref(),
            Some("cn-north-1")
        );
        assert_eq!(domain("cn-north-1"), "amazonaws.com.cn");
        assert_eq!(domain("us-east-1"), "amazonaws.com");
        let xml = "<R><Credentials><AccessKeyId>AK</AccessKeyId><SecretAccessKey>a&amp;b</SecretAccessKey></Credentials></R>";
        assert_eq!(xml_text(xml, "AccessKeyId"), Some("AK"));
        assert_eq!(unescape(xml_text(xml, "SecretAccessKey").unwrap()), "a&b");
        assert_eq!(xml_text(xml, "SessionToken"), None);
    }
}
