//! Which repository an image reference names, read by the reference
//! grammar as the kubelet, containerd and skopeo read it, not as a string:
//! for `verify --scan`, any spelling that pulls from the verified
//! repository is the verified repository.
//!
//! The rules (distribution/reference's, and the registry clients'):
//! - the first component of a name is a host when it holds `.` or `:`, is
//!   `localhost`, or holds an upper-case letter; otherwise the host is
//!   Docker Hub's and the whole name is the path;
//! - host names are case-insensitive (DNS), and a port that is the
//!   default of the scheme a client may use (443 for HTTPS, 80 for plain
//!   HTTP) is the same as none;
//! - `docker.io`, `index.docker.io` and `registry-1.docker.io` are one
//!   registry, and a one-component path on it is under `library/`
//!   (`nginx` is `docker.io/library/nginx`).
//!
//! Paths are compared as written: the grammar allows only lower case
//! there, so `ghcr.io/ACME/shop` pulls nothing, and the scan counts it as a
//! mention ([`mentions`] compares without case), not as a reference.

/// A repository in canonical form: host lower-cased without a default
/// port, Docker Hub's as `docker.io` with its `library/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Canonical {
    host: String,
    path: String,
}

impl std::fmt::Display for Canonical {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.host, self.path)
    }
}

/// Docker Hub's names.
const DOCKER_HUB: [&str; 3] = ["docker.io", "index.docker.io", "registry-1.docker.io"];

/// The ports a client may reach a registry on when none is written.
const DEFAULT_PORTS: [&str; 2] = [":443", ":80"];

/// Whether `host` (lower case) ends in an explicit port.
fn has_port(host: &str) -> bool {
    host.rfind(':')
        .is_some_and(|c| host.rfind(']').is_none_or(|b| c > b))
}

/// The canonical repository of a name (`HOST[:PORT]/PATH` or a Docker Hub
/// short name), without tag or digest; `None` when it is not a name.
pub fn canonical(name: &str) -> Option<Canonical> {
    let (host, path) = match name.split_once('/') {
        Some((first, rest))
            if first.contains(['.', ':'])
                || first == "localhost"
                || first.bytes().any(|b| b.is_ascii_uppercase()) =>
        {
            (first, rest)
        }
        _ => ("docker.io", name),
    };
    if host.is_empty() || path.is_empty() || path.split('/').any(str::is_empty) {
        return None;
    }
    let mut host = host.to_ascii_lowercase();
    if let Some(bare) = DEFAULT_PORTS.iter().find_map(|p| host.strip_suffix(p)) {
        host = bare.to_string();
    }
    if DOCKER_HUB.contains(&host.as_str()) {
        host = "docker.io".into();
    }
    let path = if host == "docker.io" && !path.contains('/') {
        format!("library/{path}")
    } else {
        path.to_string()
    };
    Some(Canonical { host, path })
}

/// `NAME[:TAG][@DIGEST]` split into the name and the rest (empty, or from
/// its `:` or `@`). A `:` before the last `/` is a port, not a tag.
pub fn split(reference: &str) -> (&str, &str) {
    let at = reference.find('@').unwrap_or(reference.len());
    let slash = reference[..at].rfind('/').map_or(0, |i| i + 1);
    let end = reference[slash..at].find(':').map_or(at, |i| slash + i);
    reference.split_at(end)
}

impl Canonical {
    /// The canonical form of a repository the user named (`--repository`).
    pub fn of(repository: &str) -> Option<Canonical> {
        canonical(repository)
    }

    /// Whether the image reference `reference` (`NAME:TAG`, `NAME@DIGEST`,
    /// `NAME:TAG@DIGEST`) pulls from this repository; its tag and digest
    /// (from the `:` or `@`) when it does.
    pub fn tail_of<'r>(&self, reference: &'r str) -> Option<&'r str> {
        let (name, rest) = split(reference);
        (!rest.is_empty() && canonical(name).as_ref() == Some(self)).then_some(rest)
    }

    /// Every spelling of this repository (lower case): each Docker Hub
    /// name or none, each default port or none, `library/` or not.
    pub fn spellings(&self) -> Vec<String> {
        let mut hosts = vec![self.host.clone()];
        if self.host == "docker.io" {
            hosts = DOCKER_HUB.iter().map(|h| h.to_string()).collect();
        }
        if !has_port(&self.host) {
            let ported: Vec<String> = hosts
                .iter()
                .flat_map(|h| DEFAULT_PORTS.iter().map(move |p| format!("{h}{p}")))
                .collect();
            hosts.extend(ported);
        }
        let mut paths = vec![self.path.clone()];
        if let Some(short) = self.path.strip_prefix("library/") {
            paths.push(short.to_string());
        }
        let mut out = Vec::new();
        for path in &paths {
            // Docker Hub's short names carry no host at all.
            for name in hosts
                .iter()
                .map(|h| format!("{h}/{path}"))
                .chain(std::iter::once(path.clone()))
            {
                if canonical(&name).as_ref() == Some(self) && !out.contains(&name) {
                    out.push(name);
                }
            }
        }
        out
    }

    /// The last component of the path: every spelling ends with it.
    fn last(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or(&self.path)
    }
}

/// Whether `text` names the repository, in any spelling and any case: a
/// whole name (`R`, `R:tag`, `R@sha256:...`, `oci://R`), not part of a
/// longer one (`R-old`, `R/x`, `xR`).
pub fn mentions(text: &str, repository: &Canonical) -> bool {
    let last = repository.last().as_bytes();
    let bytes = text.as_bytes();
    if bytes.len() < last.len()
        || !bytes
            .windows(last.len())
            .any(|w| w.eq_ignore_ascii_case(last))
    {
        return false;
    }
    let name_char = |c: char| {
        c.is_ascii_alphanumeric()
            || matches!(c, '.' | '_' | '-' | '/' | ':' | '@' | '[' | ']' | '+')
    };
    text.split(|c: char| !name_char(c)).any(|token| {
        let token = token.rsplit_once("://").map_or(token, |(_, r)| r);
        let token = token.trim_start_matches('/');
        [token.to_string(), token.to_ascii_lowercase()]
            .iter()
            .any(|t| canonical(split(t).0).as_ref() == Some(repository))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(s: &str) -> Canonical {
        canonical(s).unwrap()
    }

    /// The normalisations distribution/reference documents
    /// (`ParseNormalizedNamed`: `ubuntu` is `docker.io/library/ubuntu`,
    /// `index.docker.io` is `docker.io`) and the registry clients' endpoint
    /// rules (host names without case, default ports).
    #[test]
    fn spellings_of_one_repository_are_one_repository() {
        let same = [
            ("ghcr.io/acme/shop", "GHCR.IO/acme/shop"),
            ("ghcr.io/acme/shop", "ghcr.io:443/acme/shop"),
            ("ghcr.io/acme/shop", "Ghcr.Io:80/acme/shop"),
            ("localhost:5000/team/s", "LOCALHOST:5000/team/s"),
            ("localhost/team/s", "LocalHost/team/s"),
            ("docker.io/acme/shop", "acme/shop"),
            ("docker.io/acme/shop", "index.docker.io/acme/shop"),
            ("docker.io/acme/shop", "registry-1.docker.io:443/acme/shop"),
            ("docker.io/library/nginx", "nginx"),
            ("docker.io/library/nginx", "library/nginx"),
            ("docker.io/library/nginx", "DOCKER.IO/nginx"),
            ("[::1]:5000/x", "[::1]:5000/x"),
        ];
        for (a, b) in same {
            assert_eq!(c(a), c(b), "{a} vs {b}");
        }
        let other = [
            ("ghcr.io/acme/shop", "ghcr.io:5000/acme/shop"),
            ("ghcr.io/acme/shop", "ghcr.io/acme/shop-old"),
            ("ghcr.io/acme/shop", "ghcr.io/ACME/shop"),
            ("ghcr.io/acme/shop", "acme/shop"),
            ("localhost:5000/team/s", "127.0.0.1:5000/team/s"),
            ("docker.io/acme/shop", "quay.io/acme/shop"),
            ("docker.io/library/nginx", "nginx/nginx"),
            ("example.com:8080/x", "example.com:80/x"),
        ];
        for (a, b) in other {
            assert_ne!(c(a), c(b), "{a} vs {b}");
        }
        assert_eq!(canonical("ghcr.io/"), None);
        assert_eq!(canonical("ghcr.io//x"), None);
    }

    #[test]
    fn references_split_at_the_tag_or_digest() {
        assert_eq!(
            split("h:5000/a/b:t@sha256:00"),
            ("h:5000/a/b", ":t@sha256:00")
        );
        assert_eq!(split("h:5000/a/b@sha256:00"), ("h:5000/a/b", "@sha256:00"));
        assert_eq!(split("h:5000/a/b"), ("h:5000/a/b", ""));
        assert_eq!(split("nginx:1"), ("nginx", ":1"));
        let r = c("ghcr.io/acme/shop");
        assert_eq!(
            r.tail_of("GHCR.IO:443/acme/shop:t@sha256:0"),
            Some(":t@sha256:0")
        );
        assert_eq!(r.tail_of("ghcr.io/acme/shop"), None);
        assert_eq!(r.tail_of("ghcr.io/acme/shop/x:t"), None);
    }

    #[test]
    fn every_spelling_is_listed_and_names_the_repository() {
        let r = c("docker.io/library/nginx");
        let all = r.spellings();
        for s in [
            "nginx",
            "library/nginx",
            "index.docker.io:443/nginx",
            "docker.io/library/nginx",
        ] {
            assert!(all.contains(&s.to_string()), "{s} in {all:?}");
        }
        assert!(
            all.iter().all(|s| canonical(s).as_ref() == Some(&r)),
            "{all:?}"
        );
        let r = c("127.0.0.1:5000/team/s");
        assert_eq!(r.spellings(), ["127.0.0.1:5000/team/s"]);
    }

    #[test]
    fn mentions_are_whole_names_in_any_spelling() {
        let r = c("r.io/team/s");
        for yes in [
            "r.io/team/s",
            "R.IO/team/s:t",
            "r.io:443/team/s@sha256:0",
            "oci://r.io/team/s",
            "x r.io/team/s y",
            "\"r.io/team/s\"",
            "r.io/TEAM/S:t",
        ] {
            assert!(mentions(yes, &r), "{yes}");
        }
        for no in [
            "r.io/team/settings",
            "r.io/team/s/x:t",
            "r.io/team/s-old:t",
            "xr.io/team/s:t",
            "r.io/team/",
            "r.io:5000/team/s",
        ] {
            assert!(!mentions(no, &r), "{no}");
        }
        let hub = c("docker.io/acme/shop");
        assert!(mentions("image: acme/shop:1", &hub));
        assert!(mentions("index.docker.io/acme/shop", &hub));
        assert!(!mentions("acme/shopping", &hub));
    }
}
