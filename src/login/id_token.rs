//! The OpenID Connect ID token an exchange starts from.
//!
//! In GitHub Actions, a job with `permissions: id-token: write` gets
//! `ACTIONS_ID_TOKEN_REQUEST_URL` and `ACTIONS_ID_TOKEN_REQUEST_TOKEN`:
//! `GET $URL&audience=AUD` with `Authorization: bearer $TOKEN` answers
//! `{"value": "<JWT>"}`. Other CI systems (GitLab `id_tokens`, Buildkite,
//! CircleCI) hand the job a token in a file or variable: `--id-token-file`.
//!
//! The token's signature is the provider's business (it checks it against
//! the issuer's keys); here it is only read to say clearly when it has
//! expired or names another audience than the provider expects, before a
//! provider answers with something vaguer.

use std::path::PathBuf;

use base64::Engine as _;

use super::http::{self, Ctx};
use crate::error::{Error, Result};
use crate::field::{Field, Mention};

/// Where the ID token comes from.
#[derive(Clone, PartialEq, Eq)]
pub enum IdTokenSource {
    /// The GitHub Actions runner's token endpoint.
    GitHub {
        /// `ACTIONS_ID_TOKEN_REQUEST_URL`.
        url: String,
        /// `ACTIONS_ID_TOKEN_REQUEST_TOKEN`.
        token: String,
    },
    /// A file holding the JWT (`--id-token-file`).
    File(PathBuf),
    /// Not available: the job lacks `id-token: write` (or the CLI was given no file).
    Missing {
        /// True in the GitHub action (the fix is a permission), false in the CLI.
        in_action: bool,
    },
}

impl std::fmt::Debug for IdTokenSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IdTokenSource::GitHub { url, .. } => f
                .debug_struct("GitHub")
                .field("url", &http::host_of(url))
                .finish_non_exhaustive(),
            IdTokenSource::File(p) => f.debug_tuple("File").field(p).finish(),
            IdTokenSource::Missing { in_action } => f
                .debug_struct("Missing")
                .field("in_action", in_action)
                .finish(),
        }
    }
}

impl IdTokenSource {
    /// From the runner's variables (`get` reads the environment), else missing.
    pub fn from_actions_env(get: impl Fn(&str) -> Option<String>) -> IdTokenSource {
        let get = |k: &str| get(k).filter(|v| !v.trim().is_empty());
        match (
            get("ACTIONS_ID_TOKEN_REQUEST_URL"),
            get("ACTIONS_ID_TOKEN_REQUEST_TOKEN"),
        ) {
            (Some(url), Some(token)) => IdTokenSource::GitHub { url, token },
            _ => IdTokenSource::Missing { in_action: true },
        }
    }

    /// Gets the token, for `audience` when the source can choose it.
    pub(crate) async fn fetch(&self, ctx: &Ctx, audience: Option<&str>) -> Result<String> {
        let jwt = match self {
            IdTokenSource::Missing { in_action: true } => {
                return Err(Error::input(
                    "an OIDC login needs the job's ID token, but ACTIONS_ID_TOKEN_REQUEST_URL and ACTIONS_ID_TOKEN_REQUEST_TOKEN are not set",
                    Some(
                        "add `permissions: id-token: write` to the job (keep `contents: read`, and `packages: write` for ghcr.io); a pull request from a fork never gets an ID token"
                            .into(),
                    ),
                ));
            }
            IdTokenSource::Missing { in_action: false } => {
                return Err(Error::input(
                    crate::text![
                        "an OIDC login needs an ID token: give ",
                        Mention::Set(Field::IdTokenFile, "FILE".into())
                    ],
                    Some(
                        "in GitLab CI use `id_tokens:` and write the variable to a file; in GitHub Actions the action fetches it itself with `permissions: id-token: write`"
                            .into(),
                    ),
                ));
            }
            IdTokenSource::File(path) => {
                let text = crate::named_file::read(path, "the ID token file")?;
                let jwt = text.trim().to_string();
                ctx.secret(&jwt);
                jwt
            }
            IdTokenSource::GitHub { url, token } => {
                ctx.secret(token);
                let mut full = url.clone();
                if let Some(aud) = audience {
                    full.push(if url.contains('?') { '&' } else { '?' });
                    full.push_str("audience=");
                    full.push_str(&http::encode(aud));
                }
                let what = "requesting the job's ID token";
                let rb = ctx
                    .http()
                    .get(&full)
                    .header("Authorization", format!("bearer {token}"))
                    .header("Accept", "application/json");
                let v = ctx.send_json(
                    what,
                    &full,
                    rb,
                    "the runner's token endpoint refused: the job needs `permissions: id-token: write`; re-run the job if the request token expired".into(),
                ).await?;
                http::field(ctx, &v, "value", what, &full, true)?
            }
        };
        check(&jwt, audience)?;
        Ok(jwt)
    }
}

/// The claims of a JWT, unverified.
pub(crate) fn claims(jwt: &str) -> Option<serde_json::Value> {
    let mut parts = jwt.split('.');
    let (_, payload, _) = (parts.next()?, parts.next()?, parts.next()?);
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    serde_json::from_slice(&raw).ok()
}

/// Refuses a token that is not a JWT, has expired, or names another audience.
fn check(jwt: &str, audience: Option<&str>) -> Result<()> {
    let Some(c) = claims(jwt) else {
        return Err(Error::input(
            "the ID token is not a JWT (three base64url parts with JSON claims)",
            Some("give the token itself, as the CI system issued it".into()),
        ));
    };
    let now = jiff::Timestamp::now().as_second();
    if let Some(exp) = c.get("exp").and_then(|e| e.as_i64())
        && exp <= now
    {
        let at = jiff::Timestamp::from_second(exp)
            .map(|t| t.to_string())
            .unwrap_or_else(|_| exp.to_string());
        return Err(Error::input(
            format!("the ID token expired at {at} ({}s ago)", now - exp),
            Some(
                "ID tokens live minutes: request a fresh one right before the push (in GitHub Actions the action does this itself)"
                    .into(),
            ),
        ));
    }
    if let Some(want) = audience {
        let auds: Vec<&str> = match c.get("aud") {
            Some(serde_json::Value::String(s)) => vec![s.as_str()],
            Some(serde_json::Value::Array(a)) => a.iter().filter_map(|x| x.as_str()).collect(),
            _ => Vec::new(),
        };
        if !auds.is_empty() && !auds.contains(&want) {
            return Err(Error::input(
                format!(
                    "the ID token's audience is {}, but this login expects {want}",
                    auds.join(", ")
                ),
                Some(format!(
                    "issue the token for the audience {want} (GitLab: `id_tokens: X: aud: {want}`), or set oidc-audience to what the provider's trust names"
                )),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jwt(claims: serde_json::Value) -> String {
        let e = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
        format!(
            "{}.{}.{}",
            e(br#"{"alg":"RS256"}"#),
            e(claims.to_string().as_bytes()),
            e(b"sig")
        )
    }

    #[test]
    fn expired_and_foreign_audience_tokens_are_refused() {
        let now = jiff::Timestamp::now().as_second();
        let ok = jwt(serde_json::json!({"aud": "sts.amazonaws.com", "exp": now + 300}));
        check(&ok, Some("sts.amazonaws.com")).unwrap();
        check(&ok, None).unwrap();
        let old = jwt(serde_json::json!({"aud": "sts.amazonaws.com", "exp": now - 60}));
        let e = check(&old, None).unwrap_err();
        assert!(e.to_string().contains("expired"), "{e}");
        let e = check(&ok, Some("api://AzureADTokenExchange")).unwrap_err();
        assert!(
            e.to_string().contains("audience is sts.amazonaws.com"),
            "{e}"
        );
        let list = jwt(serde_json::json!({"aud": ["a", "b"], "exp": now + 300}));
        check(&list, Some("b")).unwrap();
        assert!(check("not-a-jwt", None).is_err());
    }

    #[test]
    fn query_values_are_encoded() {
        assert_eq!(
            http::encode("https://iam.googleapis.com/projects/1"),
            "https%3A%2F%2Fiam.googleapis.com%2Fprojects%2F1"
        );
    }
}
