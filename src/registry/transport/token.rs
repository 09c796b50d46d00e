//! The token flow of the distribution spec: `GET /v2/`, then, for a
//! `Bearer` challenge, the token realm asked with the credentials when
//! [`Auth::realm_allows`] lets them go there; and renewal after a 401, with
//! fresh credentials from the
//! [`CredentialSource`](super::super::CredentialSource) when there is one.
//!
//! [`Auth::realm_allows`]: super::auth::Auth::realm_allows

use reqwest::{Response, StatusCode};

use super::auth::{self, host_port, shown_url};
use super::{
    MAX_ATTEMPTS, Transport, backoff, deadline, describe, error_body, is_transient_error,
    is_transient_status,
};
use crate::error::{Error, Result};

/// Why one round of the token flow gave no token.
enum Round {
    /// A transient failure: worth another round; the error if none is left.
    Retry(Error),
    /// A failure that another round cannot mend.
    Failed(Error),
}

impl Transport {
    /// Runs the token flow ([`Transport::token_round`]), retrying
    /// transient failures; Basic challenges keep using the credentials
    /// directly.
    pub(super) async fn authenticate(&self) -> Result<()> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            log::debug!(
                "registry: authenticating to {} for {}",
                self.repo.host,
                self.auth.describe()
            );
            match self.token_round().await {
                Ok(Some(token)) => {
                    self.secrets.borrow_mut().push(token.clone());
                    self.auth.use_token(token);
                    return Ok(());
                }
                Ok(None) => {
                    self.auth.use_credentials();
                    return Ok(());
                }
                Err(Round::Retry(e)) if attempt < MAX_ATTEMPTS => {
                    let wait = backoff(attempt);
                    log::debug!(
                        "{e}; attempt {} of {MAX_ATTEMPTS} in {} ms",
                        attempt + 1,
                        wait.as_millis()
                    );
                    let _shown = self.retrying("contacting the registry", attempt, &e.to_string());
                    tokio::time::sleep(wait).await;
                }
                Err(Round::Retry(e) | Round::Failed(e)) => return Err(e),
            }
        }
    }

    /// One round of the token flow of the distribution spec's token
    /// authentication: `GET /v2/` without credentials; for a `Bearer`
    /// challenge, `GET REALM?scope=...&service=...` with the credentials as
    /// Basic when [`Auth::realm_allows`] lets them go to that realm (else
    /// nothing is sent there). `Ok(None)`: no token needed (anonymous or
    /// Basic).
    async fn token_round(&self) -> std::result::Result<Option<String>, Round> {
        let what = "contacting the registry";
        let sent = |r: reqwest::Result<Response>| {
            r.map_err(|e| {
                let err = self.http_err(what, &e);
                if is_transient_error(&e) {
                    Round::Retry(err)
                } else {
                    Round::Failed(err)
                }
            })
        };
        let ping = self.url("/v2/").map_err(Round::Failed)?;
        let timeout = deadline::get().request;
        let resp = sent(self.http.get(ping).timeout(timeout).send().await)?;
        let challenge = auth::bearer_challenge(resp.headers()).map_err(|m| {
            Round::Failed(self.registry_err(what, format!("the registry's challenge: {m}")))
        })?;
        drop(resp);
        let Some(challenge) = challenge else {
            return Ok(None);
        };
        let realm = challenge.realm;
        let creds = self
            .auth
            .realm_allows(&realm, &self.base)
            .map_err(|hosts| {
                Round::Failed(Error::Auth {
                host: self.repo.host.clone(),
                message: format!(
                    "the registry names the token realm {}, on {}; these credentials only go to a \
                     token service on {hosts}, so nothing was sent there",
                    shown_url(&realm),
                    host_port(&realm)
                ),
                hint: format!(
                    "{} should name its own token service: check that {} is the registry meant and \
                     that no proxy rewrites its answers",
                    self.repo.host, self.repo.host
                )
                .into(),
            })
            })?;
        let mut url = realm.clone();
        url.query_pairs_mut()
            .append_pair("scope", &self.auth.scope(&self.repo));
        if let Some(service) = &challenge.service {
            url.query_pairs_mut().append_pair("service", service);
        }
        let mut rb = self.http.get(url).timeout(timeout);
        if let Some(c) = &creds {
            rb = rb.basic_auth(&c.username, Some(&c.password));
        }
        let resp = sent(rb.send().await)?;
        let status = resp.status();
        if status != StatusCode::OK {
            let transient = is_transient_status(status);
            let (body, cut) = error_body(resp).await;
            let mut reason = describe(status, &body);
            if let Some(cut) = cut {
                reason = format!("{reason} ({cut})");
            }
            let err = Error::Auth {
                host: self.repo.host.clone(),
                message: self.scrub(self.auth.refusal(&self.repo, &realm, &reason)),
                hint: auth::auth_hint(&self.repo.host, self.auth.access()),
            };
            return Err(if transient {
                Round::Retry(err)
            } else {
                Round::Failed(err)
            });
        }
        let body = self
            .small_body(what, resp, "token answer")
            .await
            .map_err(Round::Failed)?;
        auth::token_of(&body).map(Some).ok_or_else(|| {
            Round::Failed(self.registry_err(
                what,
                format!(
                    "the token service at {} answered without a token",
                    host_port(&realm)
                ),
            ))
        })
    }

    /// After a 401 with a Bearer token (expired during a long push): gets a
    /// new token, at most twice per session. True when the request is worth
    /// sending again.
    pub(super) async fn renew(&self, status: StatusCode) -> Result<bool> {
        if status != StatusCode::UNAUTHORIZED {
            return Ok(false);
        }
        // Credentials from an OIDC login expire (an ECR password lives 12
        // hours, others minutes): the first 401 runs the exchange again, once.
        let login = self.login.borrow_mut().take();
        if let Some(login) = login {
            let fresh = login.credentials().await?;
            self.auth.replace_credentials(fresh);
            // The new password and its Basic encodings.
            let fresh_secrets = self.auth.secrets();
            self.secrets.borrow_mut().extend(fresh_secrets);
            self.authenticate().await?;
            return Ok(true);
        }
        if !self.auth.may_renew() {
            return Ok(false);
        }
        self.authenticate().await?;
        Ok(true)
    }
}
