//! Which registry hosts each provider's credentials may go to.
//!
//! A cloud exchange ends in a credential of the cloud's own registry: an
//! ECR password (`AWS:...`), an ACR refresh token made from an Entra
//! access token, a Google access token, a Docker Hub token. Sent to
//! another host, it is handed to whoever runs that host. So, as Flux does
//! (`fluxcd/pkg`, `auth/{aws,azure,gcp}/provider.go`,
//! `ParseArtifactRepository`: a provider logs in only to a registry its
//! pattern matches, else "invalid AWS registry"), an exchange runs only for
//! a host the provider owns:
//!
//! - ECR, Flux's (from amazon-ecr-credential-helper)
//!   `([0-9+]*).dkr.ecr(?:-fips)?\.([^/.]*)\.(amazonaws\.com[.cn]*|sc2s\.sgov\.gov|c2s\.ic\.gov|cloud\.adc-e\.uk|csp\.hci\.ic\.gov)`,
//!   here anchored at both ends, its dots literal, the account twelve
//!   digits and the region a region's shape (`eu-west-1`): Flux's pattern
//!   is unanchored, so `1.dkr.ecr.x.amazonaws.com.evil.example` matched
//!   it, and `1.dkr.ecr.s3.amazonaws.com` is an S3 bucket anyone can name.
//!   Not `public.ecr.aws`: this login speaks ECR's private API only.
//! - ACR, Flux's `^.+\.(azurecr\.io|azurecr\.cn|azurecr\.de|azurecr\.us)$`.
//! - Artifact Registry and Container Registry, Flux's
//!   `^(((.+\.)?gcr\.io)|(.+-docker\.pkg\.dev))$`.
//! - Docker Hub (no Flux provider): `docker.io`, `index.docker.io`,
//!   `registry-1.docker.io`.
//!
//! The host is compared lower-cased, without a port; `:443`, the same
//! origin over HTTPS, is the only port allowed. Quay and JFrog exchange
//! the ID token at the registry host itself (a self-hosted Quay or
//! Artifactory is its own provider): any host.

use super::Provider;
use crate::error::{Error, Result};

/// The hosts `provider` logs in to, for messages.
pub fn described(provider: Provider) -> &'static str {
    match provider {
        Provider::Ecr => "Amazon ECR's registry hosts (ACCOUNT.dkr.ecr.REGION.amazonaws.com)",
        Provider::Azure => {
            "Azure Container Registry's hosts (NAME.azurecr.io, .azurecr.cn, .azurecr.de, .azurecr.us)"
        }
        Provider::Gcp => {
            "Google's registry hosts (REGION-docker.pkg.dev, gcr.io and its subdomains such as eu.gcr.io)"
        }
        Provider::DockerHub => "Docker Hub (docker.io, index.docker.io, registry-1.docker.io)",
        Provider::Quay | Provider::Jfrog => "the registry host itself",
    }
}

/// Whether `host` (`HOST[:PORT]`) is one of `provider`'s registry hosts
/// (see the module docs).
pub fn owns(provider: Provider, host: &str) -> bool {
    let h = host.to_ascii_lowercase();
    let h = match h.rsplit_once(':') {
        Some((name, "443")) => name.to_string(),
        Some(_) => return matches!(provider, Provider::Quay | Provider::Jfrog),
        None => h,
    };
    match provider {
        Provider::Ecr => is_ecr(&h),
        Provider::Azure => [".azurecr.io", ".azurecr.cn", ".azurecr.de", ".azurecr.us"]
            .iter()
            .any(|s| h.len() > s.len() && h.ends_with(s)),
        Provider::Gcp => {
            h == "gcr.io"
                || (h.len() > ".gcr.io".len() && h.ends_with(".gcr.io"))
                || (h.len() > "-docker.pkg.dev".len() && h.ends_with("-docker.pkg.dev"))
        }
        Provider::DockerHub => matches!(
            h.as_str(),
            "docker.io" | "index.docker.io" | "registry-1.docker.io"
        ),
        Provider::Quay | Provider::Jfrog => true,
    }
}

/// `ACCOUNT.dkr.ecr[-fips].REGION.PARTITION-DOMAIN`, exactly.
fn is_ecr(h: &str) -> bool {
    const DOMAINS: [&str; 6] = [
        "amazonaws.com",
        "amazonaws.com.cn",
        "sc2s.sgov.gov",
        "c2s.ic.gov",
        "cloud.adc-e.uk",
        "csp.hci.ic.gov",
    ];
    let Some(rest) = DOMAINS
        .iter()
        .find_map(|d| h.strip_suffix(d).and_then(|r| r.strip_suffix('.')))
    else {
        return false;
    };
    let labels: Vec<&str> = rest.split('.').collect();
    let [account, "dkr", ecr, region] = labels.as_slice() else {
        return false;
    };
    account.len() == 12
        && account.bytes().all(|b| b.is_ascii_digit())
        && matches!(*ecr, "ecr" | "ecr-fips")
        && is_region(region)
}

/// An AWS region's shape: letters, then `-word`s, then `-N`
/// (`eu-west-1`, `us-gov-west-1`, `cn-north-1`, `eusc-de-east-1`).
fn is_region(r: &str) -> bool {
    let parts: Vec<&str> = r.split('-').collect();
    let Some((last, words)) = parts.split_last() else {
        return false;
    };
    words.len() >= 2
        && words
            .iter()
            .all(|w| !w.is_empty() && w.bytes().all(|b| b.is_ascii_lowercase()))
        && !last.is_empty()
        && last.bytes().all(|b| b.is_ascii_digit())
}

/// Refuses, before anything is requested, an exchange of `provider` for a
/// `host` it does not own; `asked` says who asked for it, in the face's
/// words (`login is \`ecr\``, `--login ecr`, `spec.provider: aws`).
pub fn check(provider: Provider, host: &str, asked: &str) -> Result<()> {
    if owns(provider, host) {
        return Ok(());
    }
    Err(Error::input(
        format!(
            "{asked} logs in only to {}, and {host} is not one: its credentials are never sent \
             to another host, so nothing was requested or sent",
            described(provider),
        ),
        Some(format!(
            "push to the provider's own registry, or log in to {host} with its own credentials \
             (a username and password, or docker's config)"
        )),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_provider_owns_its_hosts_only() {
        let yes = [
            (
                Provider::Ecr,
                "123456789012.dkr.ecr.eu-west-1.amazonaws.com",
            ),
            (
                Provider::Ecr,
                "123456789012.DKR.ECR.EU-WEST-1.AMAZONAWS.COM:443",
            ),
            (
                Provider::Ecr,
                "123456789012.dkr.ecr-fips.us-gov-west-1.amazonaws.com",
            ),
            (
                Provider::Ecr,
                "123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn",
            ),
            (
                Provider::Ecr,
                "123456789012.dkr.ecr.us-isob-east-1.sc2s.sgov.gov",
            ),
            (Provider::Azure, "acme.azurecr.io"),
            (Provider::Azure, "acme.azurecr.cn"),
            (Provider::Gcp, "europe-docker.pkg.dev"),
            (Provider::Gcp, "gcr.io"),
            (Provider::Gcp, "eu.gcr.io"),
            (Provider::DockerHub, "docker.io"),
            (Provider::DockerHub, "registry-1.docker.io"),
            (Provider::Quay, "quay.example.com"),
            (Provider::Jfrog, "127.0.0.1:8081"),
        ];
        for (p, h) in yes {
            assert!(owns(p, h), "{p:?} {h}");
        }
        let no = [
            (Provider::Ecr, "registry.example.com"),
            (Provider::Ecr, "127.0.0.1:5000"),
            // Flux's unanchored pattern matched these.
            (
                Provider::Ecr,
                "123456789012.dkr.ecr.eu-west-1.amazonaws.com.evil.example",
            ),
            (
                Provider::Ecr,
                "x123456789012.dkr.ecr.eu-west-1.amazonaws.comx",
            ),
            // An S3 bucket named `123456789012.dkr.ecr` on S3's global endpoint.
            (Provider::Ecr, "123456789012.dkr.ecr.s3.amazonaws.com"),
            (
                Provider::Ecr,
                "123456789012.dkr.ecr.eu-west-1.amazonaws.com:5000",
            ),
            (Provider::Ecr, "1.dkr.ecr.eu-west-1.amazonaws.com"),
            (
                Provider::Ecr,
                "evil.123456789012.dkr.ecr.eu-west-1.amazonaws.com",
            ),
            (Provider::Ecr, "public.ecr.aws"),
            (Provider::Azure, "azurecr.io"),
            (Provider::Azure, "acme.azurecr.io.evil.example"),
            (Provider::Azure, "acme-azurecr.io"),
            (Provider::Gcp, "docker.pkg.dev"),
            (Provider::Gcp, "evilgcr.io"),
            (Provider::Gcp, "europe-docker.pkg.dev.evil.example"),
            (Provider::DockerHub, "hub.docker.com.evil.example"),
            (Provider::DockerHub, "ghcr.io"),
        ];
        for (p, h) in no {
            assert!(!owns(p, h), "{p:?} {h}");
        }
    }

    #[test]
    fn the_refusal_names_who_asked_the_hosts_and_that_nothing_was_sent() {
        let e = check(Provider::Azure, "evil.example", "spec.provider: azure").unwrap_err();
        let text = e.to_string();
        assert!(
            text.starts_with(
                "spec.provider: azure logs in only to Azure Container Registry's hosts"
            ),
            "{text}"
        );
        assert!(text.contains("evil.example is not one:"), "{text}");
        assert!(text.contains("nothing was requested or sent"), "{text}");
        assert_eq!(e.exit_code(), 2);
    }
}
