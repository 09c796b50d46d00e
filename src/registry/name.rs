//! Registry names: a parsed `HOST/NAME` ([`Repository`]), checked against
//! the distribution grammar before any network use, and the host rules
//! (loopback means plain HTTP; `docker.io` is served by `index.docker.io`).
//!
//! Why not `oci-client`'s `Reference` parser: it agrees on the grammar, but
//! it compiles a large regex, about 100 ms per process, more than a whole
//! push.

use std::fmt;
use std::net::IpAddr;

use crate::error::{Error, Result};
use crate::field::{Field, Joint, Mention, Text};
use crate::text;

/// A parsed `HOST/NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repository {
    /// The registry host, with port when given.
    pub host: String,
    /// The repository name inside the registry.
    pub name: String,
}

impl fmt::Display for Repository {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.host, self.name)
    }
}

pub(crate) fn repo_hint() -> Option<Text> {
    Some(text![
        Field::Repository,
        " is HOST/NAME with a registry host, e.g. ghcr.io/OWNER/settings or \
         localhost:5000/settings; NAME is lower-case [a-z0-9] words joined by '.', '_', '__' or '-', \
         separated by '/'"
    ])
}

fn name_component_ok(c: &str) -> bool {
    // [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*
    let b = c.as_bytes();
    if b.is_empty() || !b[0].is_ascii_alphanumeric() || !b[b.len() - 1].is_ascii_alphanumeric() {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        let ch = b[i];
        if ch.is_ascii_lowercase() || ch.is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && matches!(b[i], b'.' | b'_' | b'-') {
            i += 1;
        }
        let sep = &c[start..i];
        let ok = sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|x| x == b'-');
        if !ok || sep.is_empty() {
            return false;
        }
    }
    true
}

/// The checks of a repository (or image reference) that come before its
/// grammar, because the grammar's own message would mislead or leak:
/// credentials in front of the host (`user:password@host/name`, refused
/// without echoing any of it), a URL scheme, whitespace and control
/// characters (a leading space otherwise reads as a bad domain name), and
/// `%` (`sh%0Aop` otherwise reads as upper-case letters).
pub fn check_repository_text(s: &str) -> Result<()> {
    let without_scheme = s.split_once("://").map_or(s, |(_, rest)| rest);
    let authority = without_scheme.split('/').next().unwrap_or("");
    if let Some((_, host)) = authority.rsplit_once('@') {
        // Echo nothing before the '@': it is a username and password.
        return Err(Error::input_hinted(
            format!(
                "invalid repository: it carries credentials (USER:PASSWORD@) in front of the host {host:?}; \
                 a repository never holds credentials, so it was not used (and is not repeated here)"
            ),
            text![
                "give the repository as HOST/NAME and the credentials apart: ",
                Mention::Credentials(Joint::With),
                " (or SETTINGS_IMAGE_USERNAME and SETTINGS_IMAGE_PASSWORD), or the \
                 action's `username` and `password` inputs; change that password, it was written \
                 where logs keep it"
            ],
        ));
    }
    if s.contains("://") {
        return Err(Error::input_hinted(
            format!("invalid repository {s:?}: a repository has no URL scheme"),
            text![
                format!(
                    "drop the scheme: {without_scheme} (plain HTTP is used for loopback hosts, or with "
                ),
                Field::Insecure,
                ")"
            ],
        ));
    }
    let what = if s.starts_with(char::is_whitespace) {
        Some("it starts with whitespace")
    } else if s.ends_with(char::is_whitespace) {
        Some("it ends with whitespace")
    } else if s.chars().any(char::is_whitespace) {
        Some("it contains whitespace")
    } else if s.chars().any(char::is_control) {
        Some("it contains a control character")
    } else if s.contains('%') {
        Some(
            "it contains '%': percent-encoding (such as %0A, a line break) is not decoded in a repository",
        )
    } else {
        None
    };
    match what {
        Some(what) => Err(Error::Input {
            message: format!("invalid repository {s:?}: {what}").into(),
            hint: repo_hint(),
        }),
        None => Ok(()),
    }
}

/// Parses and checks `HOST/NAME` before any network use: a host is required,
/// the name must follow the distribution grammar (lower case only; ghcr.io
/// gets its own explanation), and neither tag nor digest may be attached.
pub fn parse_repository(s: &str) -> Result<Repository> {
    check_repository_text(s)?;
    let bad = |message: Text| Error::Input {
        message,
        hint: repo_hint(),
    };
    let Some((host, name)) = s.split_once('/') else {
        return Err(bad(text![format!(
            "invalid repository {s:?}: no registry host (expected HOST/NAME)"
        )]));
    };
    let looks_like_host = host.contains('.') || host.contains(':') || host == "localhost";
    if !looks_like_host || host.is_empty() {
        return Err(bad(text![format!(
            "invalid repository {s:?}: {host:?} is not a registry host (expected HOST/NAME, e.g. ghcr.io/OWNER/NAME)"
        )]));
    }
    if name.contains('@') || name.rsplit('/').next().is_some_and(|l| l.contains(':')) {
        return Err(bad(text![
            format!("invalid repository {s:?}: give the tag with "),
            Field::Tag,
            ", not in ",
            Field::Repository
        ]));
    }
    if name.bytes().any(|b| b.is_ascii_uppercase()) {
        let lower = format!("{host}/{name}").to_ascii_lowercase();
        let hint = if host == "ghcr.io" {
            text![
                "ghcr.io only accepts lower-case package names, and GitHub owners are often written with capitals: \
                 use ",
                Mention::Set(Field::Repository, lower)
            ]
        } else {
            text![
                "repository names are lower case: use ",
                Mention::Set(Field::Repository, lower)
            ]
        };
        return Err(Error::input_hinted(
            format!("invalid repository {s:?}: upper-case letters in the name"),
            hint,
        ));
    }
    if name.is_empty() || !name.split('/').all(name_component_ok) || s.len() > 255 {
        return Err(bad(text![format!(
            "invalid repository {s:?}: bad name {name:?}"
        )]));
    }
    Ok(Repository {
        host: host.to_string(),
        name: name.to_string(),
    })
}

/// True when `host` (with or without port) is a loopback address.
pub fn is_loopback(host: &str) -> bool {
    let h = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or(rest)
    } else if host.matches(':').count() == 1 {
        host.split(':').next().unwrap_or(host)
    } else {
        host
    };
    h.eq_ignore_ascii_case("localhost") || h.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The host that serves the registry API: Docker Hub's `docker.io` is
/// served by `index.docker.io` (as docker and go-containerregistry resolve it).
pub(crate) fn api_host(host: &str) -> &str {
    if host == "docker.io" {
        "index.docker.io"
    } else {
        host
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repositories() {
        let r = parse_repository("ghcr.io/acme/settings").unwrap();
        assert_eq!(r.host, "ghcr.io");
        assert_eq!(r.name, "acme/settings");
        assert!(parse_repository("localhost:5000/a/b-c__d.e").is_ok());
        for (bad, reason) in [
            ("settings", "no registry host (expected HOST/NAME)"),
            (
                "acme/settings",
                "\"acme\" is not a registry host (expected HOST/NAME, e.g. ghcr.io/OWNER/NAME)",
            ),
            ("ghcr.io/", "bad name \"\""),
            ("ghcr.io/a//b", "bad name \"a//b\""),
            (
                "ghcr.io/a/b:tag",
                "give the tag with --tag, not in --repository",
            ),
            (
                "ghcr.io/a/b@sha256:00",
                "give the tag with --tag, not in --repository",
            ),
            ("ghcr.io/-a", "bad name \"-a\""),
            ("ghcr.io/a_-b", "bad name \"a_-b\""),
        ] {
            let err = parse_repository(bad).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("invalid repository {bad:?}: {reason}")
            );
            assert_eq!(err.exit_code(), 2, "{bad}");
            assert_eq!(err.hint_text(), repo_hint(), "{bad}");
        }
        for (bad, says) in [
            (" ghcr.io/a/b", "starts with whitespace"),
            ("ghcr.io/a/b ", "ends with whitespace"),
            ("ghcr.io/a b", "contains whitespace"),
            ("ghcr.io/a\nb", "contains whitespace"),
            ("ghcr.io/a\u{7}b", "control character"),
            ("ghcr.io/sh%0Aop", "percent-encoding"),
            ("https://ghcr.io/a/b", "no URL scheme"),
        ] {
            let err = parse_repository(bad).unwrap_err();
            assert!(err.to_string().contains(says), "{bad:?}: {err}");
            assert_eq!(err.exit_code(), 2);
        }
        for with_userinfo in [
            "alice:S3cretPW@ghcr.io/a/b",
            "alice@ghcr.io/a/b",
            "https://alice:S3cretPW@ghcr.io/a/b",
            "alice:S3c@et@localhost:5000/a",
        ] {
            let err = parse_repository(with_userinfo).unwrap_err();
            let text = format!("{err} {}", err.hint().unwrap_or_default());
            assert!(text.contains("credentials"), "{text}");
            assert!(!text.contains("alice") && !text.contains("S3c"), "{text}");
            assert_eq!(err.exit_code(), 2);
        }
        let err = parse_repository("ghcr.io/Acme/settings").unwrap_err();
        assert!(err.hint().unwrap().contains("ghcr.io/acme/settings"));
        assert_eq!(err.exit_code(), 2);
    }

    #[test]
    fn loopback() {
        for h in [
            "localhost",
            "localhost:5000",
            "127.0.0.1:1",
            "127.9.9.9",
            "[::1]:5000",
            "::1",
        ] {
            assert!(is_loopback(h), "{h}");
        }
        for h in [
            "ghcr.io",
            "10.0.0.1:5000",
            "localhost.example.com",
            "[::2]:1",
        ] {
            assert!(!is_loopback(h), "{h}");
        }
    }
}
