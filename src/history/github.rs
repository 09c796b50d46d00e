//! The GitHub side of history: the REST API fallback for shallow clones
//! (`GET /repos/{owner}/{repo}/commits?path=..&sha=..&per_page=1` through
//! reqwest), and the repository's https URL for the `source` annotation.
//! The token goes into the Authorization header and nowhere else: errors
//! are built from status codes and GitHub's messages, and any text that
//! could echo the token is scrubbed.

use std::time::Duration;

use super::{CommitInfo, Token};
use crate::error::{Error, Result};

/// The REST API base of github.com (GitHub Enterprise has its own).
pub const DEFAULT_API_URL: &str = "https://api.github.com";

/// What is needed to ask GitHub about a repository's history.
#[derive(Debug, Clone)]
pub struct Api {
    /// The REST API base URL (`GITHUB_API_URL`, else [`DEFAULT_API_URL`]).
    pub base_url: String,
    /// The repository owner.
    pub owner: String,
    /// The repository name.
    pub repo: String,
    token: Token,
}

impl Api {
    /// API access to `repository` (`owner/name`, as `GITHUB_REPOSITORY`
    /// holds it) at `base_url` with `token`; `None` when `repository` is
    /// not `owner/name`.
    pub fn for_repository(base_url: &str, repository: &str, token: Token) -> Option<Api> {
        let (owner, repo) = repository.trim().split_once('/')?;
        if owner.is_empty() || repo.is_empty() || repo.contains('/') {
            return None;
        }
        Some(Api::new(base_url.trim(), owner, repo, token))
    }

    fn scrub(&self, text: &str) -> String {
        text.replace(self.token.expose(), "***")
    }

    fn error(&self, what: &str, message: &str) -> Error {
        Error::GitHub {
            what: what.to_string(),
            message: self.scrub(message),
            hint: Some(format!(
                "check that GITHUB_REPOSITORY ({}/{}) names this repository, that HEAD was pushed to it and that the token may read its contents; \
                 or check out the full history (actions/checkout with `fetch-depth: 0`) so no API call is needed",
                self.owner, self.repo
            )),
        }
    }

    /// API access to `owner/repo` at `base_url` with `token`.
    pub fn new(
        base_url: impl Into<String>,
        owner: impl Into<String>,
        repo: impl Into<String>,
        token: Token,
    ) -> Api {
        Api {
            base_url: base_url.into(),
            owner: owner.into(),
            repo: repo.into(),
            token,
        }
    }

    /// GETs `segments` (joined under `/repos/{owner}/{repo}`) with `query`
    /// on a fresh single-threaded runtime: the JSON body of a 2xx answer,
    /// else GitHub's status and message as an error. A redirect is
    /// followed only within the API's own origin (GitHub answers 301 for a
    /// renamed repository), so the token never goes to another host.
    fn get(
        &self,
        what: &str,
        segments: &[&str],
        query: &[(&str, &str)],
    ) -> Result<serde_json::Value> {
        if self
            .token
            .expose()
            .bytes()
            .any(|b| !(0x21..=0x7e).contains(&b))
        {
            return Err(Error::GitHub {
                what: what.to_string(),
                message: "the token holds characters that cannot go into an HTTP header".into(),
                hint: Some("pass the token exactly as GitHub issued it".into()),
            });
        }
        let mut url = reqwest::Url::parse(self.base_url.trim_end_matches('/'))
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some())
            .ok_or_else(|| {
                self.error(
                    what,
                    &format!("bad GITHUB_API_URL {:?}: not an http(s) URL", self.base_url),
                )
            })?;
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty()
                .extend(["repos", self.owner.as_str(), self.repo.as_str()])
                .extend(segments);
        }
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        let _ = rustls::crypto::ring::default_provider().install_default();
        crate::trust::check()?;
        let client = reqwest::Client::builder()
            .redirect(crate::redirects::within_origin(5))
            .referer(false)
            .connect_timeout(Duration::from_secs(30))
            .read_timeout(Duration::from_secs(60))
            .user_agent(concat!("settings-image/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| self.error(what, &crate::error::error_chain(&e)))?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::io("starting the HTTP runtime", e))?;
        let (status, location, body) = rt
            .block_on(async {
                let resp = client
                    .get(url)
                    .bearer_auth(self.token.expose())
                    .header("Accept", "application/vnd.github+json")
                    .header("X-GitHub-Api-Version", "2022-11-28")
                    .send()
                    .await?;
                let status = resp.status();
                let location = resp
                    .headers()
                    .get(reqwest::header::LOCATION)
                    .and_then(|l| resp.url().join(l.to_str().ok()?).ok());
                Ok::<_, reqwest::Error>((status, location, resp.bytes().await?))
            })
            .map_err(|e| self.error(what, &crate::error::error_chain(&e)))?;
        if status.is_redirection()
            && let Some(to) = location
        {
            let to = to.host_str().unwrap_or_default().to_string();
            return Err(self.error(
                what,
                &format!(
                    "HTTP {status}: a redirect to {to}, not followed, so the token did not go there; GITHUB_API_URL must name the API itself"
                ),
            ));
        }
        if !status.is_success() {
            // GitHub's error body: {"message": ..., "documentation_url": ...}.
            let message = serde_json::from_slice::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v.get("message")?.as_str().map(str::to_string))
                .unwrap_or_else(|| String::from_utf8_lossy(&body).chars().take(300).collect());
            return Err(self.error(what, &format!("HTTP {status}: {}", message.trim())));
        }
        serde_json::from_slice(&body)
            .map_err(|e| self.error(what, &format!("the answer is not JSON: {e}")))
    }

    /// Asks GitHub for the last commit reachable from `sha` that changed
    /// `path` (repository-relative; "" for the whole repository), with its
    /// committer time.
    pub fn last_change(&self, path: &str, sha: &str) -> Result<CommitInfo> {
        let what = format!(
            "list commits of {}/{} for path {:?} from {sha}",
            self.owner, self.repo, path
        );
        let mut query = vec![("sha", sha), ("per_page", "1")];
        if !path.is_empty() {
            query.push(("path", path));
        }
        let page = self.get(&what, &["commits"], &query)?;
        let Some(item) = page.as_array().and_then(|items| items.first()) else {
            return Err(self.error(&what, "no commit changed the folder"));
        };
        let sha = item.get("sha").and_then(|s| s.as_str()).unwrap_or_default();
        let id = sha.to_ascii_lowercase();
        if id.len() != 40 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(self.error(&what, &format!("{sha:?} is not a commit id")));
        }
        let Some(date) = item
            .pointer("/commit/committer/date")
            .and_then(|d| d.as_str())
        else {
            return Err(self.error(
                &what,
                &format!("commit {sha} came without a committer date"),
            ));
        };
        let timestamp = date.parse::<jiff::Timestamp>().map_err(|e| {
            self.error(
                &what,
                &format!("commit {sha} has a committer date GitHub does not write ({date:?}: {e})"),
            )
        })?;
        Ok(CommitInfo {
            id,
            timestamp: timestamp.as_second(),
        })
    }

    /// Compares two commits (`GET /repos/{o}/{r}/compare/{base}...{head}`):
    /// how `head` relates to `base`.
    pub fn compare(&self, base: &str, head: &str) -> Result<Comparison> {
        let what = format!("compare {}/{} {base}...{head}", self.owner, self.repo);
        for id in [base, head] {
            if id.is_empty() || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(Error::input(
                    format!("{id:?} is not a commit id"),
                    Some("give a hex commit id".to_string()),
                ));
            }
        }
        let range = format!("{base}...{head}");
        let v = self.get(&what, &["compare", range.as_str()], &[])?;
        match v.get("status").and_then(|s| s.as_str()) {
            Some("ahead") => Ok(Comparison::Ahead),
            Some("identical") => Ok(Comparison::Identical),
            Some("behind") => Ok(Comparison::Behind),
            Some("diverged") => Ok(Comparison::Diverged),
            other => Err(self.error(&what, &format!("unexpected comparison status {other:?}"))),
        }
    }
}

/// How `head` relates to `base` in a GitHub comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparison {
    /// `base` is a proper ancestor of `head`.
    Ahead,
    /// The same commit.
    Identical,
    /// `head` is a proper ancestor of `base`.
    Behind,
    /// Neither descends from the other.
    Diverged,
}

impl Comparison {
    /// True when `base` is an ancestor of `head` (or the same commit).
    pub fn base_is_ancestor(self) -> bool {
        matches!(self, Comparison::Ahead | Comparison::Identical)
    }
}

/// The repository's https URL from a server URL (`https://github.com`)
/// and `owner/name`, normalized like a remote URL.
pub fn repository_url(server: &str, repository: &str) -> Option<String> {
    normalize_remote_url(&format!(
        "{}/{}",
        server.trim().trim_end_matches('/'),
        repository.trim()
    ))
}

/// Turns a remote URL into the repository's https URL without credentials,
/// port-less for ssh, without `.git` or a trailing slash:
/// `git@github.com:o/r.git`, `ssh://git@github.com/o/r`,
/// `https://x-access-token:TOKEN@github.com/o/r.git` all give
/// `https://github.com/o/r`. Local paths and `file://` URLs give `None`.
pub fn normalize_remote_url(url: &str) -> Option<String> {
    let url = url.trim();
    let (host_and_port, path) = if let Some((scheme, rest)) = url.split_once("://") {
        let scheme = scheme.to_ascii_lowercase();
        if !matches!(
            scheme.as_str(),
            "http" | "https" | "ssh" | "git" | "git+ssh" | "ssh+git"
        ) {
            return None;
        }
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        let host_port = if scheme.contains("ssh") || scheme == "git" {
            // The ssh or git-daemon port says nothing about the web URL.
            strip_port(host_port)
        } else {
            // The scheme's own port is no port: `https://github.com:443/o/r`
            // is `https://github.com/o/r` (and `http://...:80` becomes https).
            let default = if scheme == "https" { ":443" } else { ":80" };
            host_port.strip_suffix(default).unwrap_or(host_port)
        };
        (host_port.to_string(), path.to_string())
    } else {
        // scp-like `user@host:path`; a local path has no `:` before any `/`.
        let (before, path) = url.split_once(':')?;
        if before.contains('/') || before.is_empty() {
            return None;
        }
        let host = before.rsplit_once('@').map_or(before, |(_, h)| h);
        (host.to_string(), path.to_string())
    };
    let host = host_and_port.to_ascii_lowercase();
    if host.is_empty()
        || !host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']'))
    {
        return None;
    }
    let path = path.split(['?', '#']).next().unwrap_or("");
    // Empty segments (`//`) name the same repository on every forge.
    let path = path
        .split('/')
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("/");
    let path = path
        .strip_suffix(".git")
        .unwrap_or(&path)
        .trim_end_matches('/');
    if path.is_empty() {
        return None;
    }
    Some(format!("https://{host}/{path}"))
}

fn strip_port(host_port: &str) -> &str {
    if host_port.starts_with('[') {
        // [v6]:port
        return host_port
            .split_once("]:")
            .map_or(host_port, |(h, _)| &host_port[..h.len() + 1]);
    }
    host_port.split_once(':').map_or(host_port, |(h, _)| h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_urls_normalize_without_credentials() {
        let n = |u: &str| normalize_remote_url(u);
        let want = Some("https://github.com/o/r".to_string());
        assert_eq!(n("https://github.com/o/r.git"), want);
        assert_eq!(n("https://github.com/o/r"), want);
        assert_eq!(n("https://github.com/o/r/"), want);
        assert_eq!(n("http://github.com/o/r.git"), want);
        assert_eq!(
            n("https://x-access-token:ghs_SECRET@github.com/o/r.git"),
            want
        );
        assert_eq!(n("https://user@github.com/o/r"), want);
        assert_eq!(n("git@github.com:o/r.git"), want);
        assert_eq!(n("ssh://git@github.com/o/r.git"), want);
        assert_eq!(n("ssh://git@github.com:22/o/r.git"), want);
        assert_eq!(n("git://github.com/o/r.git"), want);
        assert_eq!(n("https://GitHub.com/o/r.git?x=1#y"), want);
        // The scheme's own port, case, doubled slashes: the same repository.
        assert_eq!(n("https://github.com:443/o/r.git"), want);
        assert_eq!(n("http://github.com:80/o/r"), want);
        assert_eq!(n("HTTPS://GITHUB.COM//o//r.git/"), want);
        assert_eq!(n("ssh://git@GitHub.com:22//o/r.git"), want);
        assert_eq!(
            n("http://github.com:443/o/r"),
            Some("https://github.com:443/o/r".to_string())
        );
        assert_eq!(
            n("https://ghe.example.com:8443/team/r.git"),
            Some("https://ghe.example.com:8443/team/r".to_string())
        );
        for none in [
            "/srv/repos/r.git",
            "file:///srv/r.git",
            "../r",
            "",
            "https://github.com",
            "https://github.com/",
        ] {
            assert_eq!(n(none), None, "{none}");
        }
        for u in [
            "https://x-access-token:ghs_SECRET@github.com/o/r.git",
            "https://ghs_SECRET@github.com/o/r.git",
            "ssh://ghs_SECRET:pw@github.com/o/r.git",
        ] {
            assert!(!n(u).unwrap_or_default().contains("SECRET"), "{u}");
        }
    }
}
