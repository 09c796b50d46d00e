//! The HTTP side every exchange shares: one client with an overall deadline
//! per request, bounded answers, the secrets seen so far (scrubbed from
//! every message) and the provider's refusal turned into an error with its
//! own words and a hint.
//!
//! A redirect to another origin is never followed: an exchange's request
//! carries the ID token, an Entra token or an `X-Amz-Security-Token` in
//! its body or headers, and a 307 would send them on to the new host (reqwest
//! only drops `Authorization` and cookies on the way). It is an error that
//! names both hosts.

use std::sync::Mutex;
use std::time::Duration;

use reqwest::{RequestBuilder, StatusCode};

use super::{Login, Provider, SecretSink};
use crate::error::{Error, Result};

/// The most read from any exchange answer (they are a few KiB at most).
const MAX_ANSWER: usize = 256 * 1024;
/// The most of a refusal's body quoted in an error.
const MAX_QUOTED: usize = 600;

/// One login's HTTP client and secrets.
pub struct Ctx {
    http: reqwest::Client,
    timeout: Duration,
    provider: Provider,
    secrets: Mutex<Vec<String>>,
    sink: Option<SecretSink>,
}

/// An answer: status and (bounded) body.
pub struct Answer {
    /// The HTTP status.
    pub status: StatusCode,
    /// The body, at most [`MAX_ANSWER`] bytes.
    pub body: Vec<u8>,
}

impl Ctx {
    /// A client for `login` (deadline [`Login::timeout`] per request).
    pub fn new(login: &Login) -> Result<Ctx> {
        // The client loads the CA store the user may have named.
        crate::trust::check()?;
        // To another origin, the 3xx answer comes back to `send`, which
        // refuses it.
        let http = reqwest::Client::builder()
            .redirect(crate::redirects::within_origin(10))
            .referer(false)
            .connect_timeout(login.timeout.min(Duration::from_secs(15)))
            .timeout(login.timeout)
            .user_agent(concat!("settings-image/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| Error::Auth {
                host: login.host.clone(),
                message: format!("setting up the HTTPS client for the login: {e}"),
                hint: "the system has no usable CA certificates: install them or point SSL_CERT_FILE at a bundle".into(),
            })?;
        Ok(Ctx {
            http,
            timeout: login.timeout,
            provider: login.provider,
            secrets: Mutex::new(Vec::new()),
            sink: login.on_secret.clone(),
        })
    }

    /// The client.
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// Records a secret: scrubbed from now on, and handed to the sink.
    pub fn secret(&self, s: &str) {
        let s = s.trim();
        if s.is_empty() {
            return;
        }
        if let Ok(mut v) = self.secrets.lock() {
            if v.iter().any(|x| x == s) {
                return;
            }
            v.push(s.to_string());
        }
        if let Some(sink) = &self.sink {
            sink(s);
        }
    }

    /// Records the Basic credentials `user:password` as secrets, in each
    /// form a service echoing the `Authorization` header would show them
    /// (`base64`, standard, unpadded and URL-safe), and returns `rb` with them.
    pub fn basic_auth(&self, rb: RequestBuilder, user: &str, password: &str) -> RequestBuilder {
        use base64::Engine as _;
        use base64::engine::general_purpose::{
            STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD,
        };
        let basic = format!("{user}:{password}");
        for engine in [STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD] {
            self.secret(&engine.encode(&basic));
        }
        rb.basic_auth(user, Some(password))
    }

    /// `s` with every secret seen so far replaced.
    pub fn scrub(&self, s: &str) -> String {
        let mut out = s.to_string();
        if let Ok(v) = self.secrets.lock() {
            for secret in v.iter() {
                out = out.replace(secret.as_str(), "<redacted>");
            }
        }
        out
    }

    /// Sends `rb` (`what` says what for, in errors) and reads the answer.
    pub async fn send(&self, what: &str, url: &str, rb: RequestBuilder) -> Result<Answer> {
        let host = host_of(url);
        let resp = rb.send().await.map_err(|e| {
            let message = if e.is_timeout() {
                format!(
                    "{what}: no answer from {host} within {}s",
                    self.timeout.as_secs()
                )
            } else {
                format!("{what}: {}", chain(&e))
            };
            Error::Auth {
                host: host.clone(),
                message: self.scrub(&message),
                hint: format!(
                    "check that {host} is reachable from the runner (a private endpoint is set with the variable docs/registries.md names for the {} login); the deadline is SETTINGS_IMAGE_LOGIN_TIMEOUT seconds ({} now)",
                    self.provider.name(),
                    self.timeout.as_secs()
                ).into(),
            }
        })?;
        let status = resp.status();
        if status.is_redirection()
            && let Some(to) = resp
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .and_then(|l| resp.url().join(l).ok())
        {
            let from = host_of(resp.url().as_str());
            let to = host_of(to.as_str());
            return Err(Error::Auth {
                host: from.clone(),
                message: format!(
                    "{what}: {from} answered HTTP {status}, a redirect to {to}; it was not followed, \
                     so no token of this login reached {to}"
                ),
                hint: format!(
                    "a login's tokens only go to the host named (the registry, or the endpoint the \
                     {} login's variable in docs/registries.md names): name the service itself, not \
                     an address that redirects elsewhere",
                    self.provider.name()
                ).into(),
            });
        }
        let mut body = Vec::new();
        let mut resp = resp;
        loop {
            match resp.chunk().await {
                Ok(Some(c)) => {
                    body.extend_from_slice(&c);
                    if body.len() >= MAX_ANSWER {
                        body.truncate(MAX_ANSWER);
                        break;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    return Err(Error::Auth {
                        host: host.clone(),
                        message: self.scrub(&format!(
                            "{what}: reading the answer from {host}: {}",
                            if e.is_timeout() {
                                format!("no complete answer within {}s", self.timeout.as_secs())
                            } else {
                                chain(&e)
                            }
                        )),
                        hint: "try again; if it persists, the endpoint is unwell".into(),
                    });
                }
            }
        }
        Ok(Answer { status, body })
    }

    /// The provider refused: its own words (scrubbed, cut) and `hint`.
    pub fn refused(&self, what: &str, url: &str, answer: &Answer, hint: String) -> Error {
        let text = String::from_utf8_lossy(&answer.body);
        let mut said = self.scrub(text.trim());
        if said.len() > MAX_QUOTED {
            let mut cut = MAX_QUOTED;
            while !said.is_char_boundary(cut) {
                cut -= 1;
            }
            said.truncate(cut);
            said.push_str(" [cut]");
        }
        let said = said.split_whitespace().collect::<Vec<_>>().join(" ");
        Error::Auth {
            host: host_of(url),
            message: format!(
                "{what} was refused: HTTP {}{}",
                answer.status,
                if said.is_empty() {
                    String::new()
                } else {
                    format!(": {said}")
                }
            ),
            hint: hint.into(),
        }
    }

    /// An answer that is not what the provider documents.
    pub fn malformed(&self, what: &str, url: &str, missing: &str) -> Error {
        Error::Auth {
            host: host_of(url),
            message: format!("{what}: the answer has no {missing}"),
            hint: "the endpoint does not answer as the provider documents; check the endpoint override variables".into(),
        }
    }
}

impl Ctx {
    /// Sends `rb`: a 2xx answer's JSON body, else [`Ctx::refused`] with
    /// `hint`, or [`Ctx::malformed`] when the body is not JSON.
    pub async fn send_json(
        &self,
        what: &str,
        url: &str,
        rb: RequestBuilder,
        hint: String,
    ) -> Result<serde_json::Value> {
        let answer = self.send(what, url, rb).await?;
        if !answer.status.is_success() {
            return Err(self.refused(what, url, &answer, hint));
        }
        json(self, what, url, &answer)
    }

    /// POSTs `pairs` as an `application/x-www-form-urlencoded` body and
    /// answers as [`Ctx::send_json`] (the OAuth token endpoints' shape).
    pub async fn post_form(
        &self,
        what: &str,
        url: &str,
        pairs: &[(&str, &str)],
        hint: String,
    ) -> Result<serde_json::Value> {
        let rb = self
            .http()
            .post(url)
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(form(pairs));
        self.send_json(what, url, rb, hint).await
    }
}

/// Percent-encodes a query value.
pub(crate) fn encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A form body: `k=v` pairs joined by `&`, each value percent-encoded.
pub fn form(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={}", encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// A JSON answer, or [`Ctx::malformed`].
pub fn json(ctx: &Ctx, what: &str, url: &str, answer: &Answer) -> Result<serde_json::Value> {
    serde_json::from_slice(&answer.body).map_err(|_| ctx.malformed(what, url, "JSON body"))
}

/// A string field of a JSON answer, recorded as a secret when `secret`.
pub fn field(
    ctx: &Ctx,
    v: &serde_json::Value,
    key: &str,
    what: &str,
    url: &str,
    secret: bool,
) -> Result<String> {
    let s = v
        .get(key)
        .and_then(|x| x.as_str())
        .filter(|s| !s.is_empty())
        .ok_or_else(|| ctx.malformed(what, url, &format!("\"{key}\"")))?;
    if secret {
        ctx.secret(s);
    }
    Ok(s.to_string())
}

/// `https://host:port/path` -> `host:port`.
pub fn host_of(url: &str) -> String {
    reqwest::Url::parse(url)
        .ok()
        .and_then(|u| {
            u.host_str().map(|h| match u.port() {
                Some(p) => format!("{h}:{p}"),
                None => h.to_string(),
            })
        })
        .unwrap_or_else(|| url.to_string())
}

/// `base` without a trailing slash, joined with `path`.
pub fn join(base: &str, path: &str) -> String {
    format!("{}{path}", base.trim_end_matches('/'))
}

fn chain(e: &dyn std::error::Error) -> String {
    let mut msg = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        let t = s.to_string();
        if !msg.contains(&t) {
            msg = format!("{msg}: {t}");
        }
        src = s.source();
    }
    msg
}
