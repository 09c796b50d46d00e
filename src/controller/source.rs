//! What the controller reads from the cluster besides its own resource:
//! the GitRepository's revision (`<branch>@sha1:<commit>`, as
//! source-controller writes `status.artifact.revision`), the data of a
//! Secret (the GitRepository's `secretRef` is read by
//! `history::mirror::Remote::from_flux`, with Flux's keys), and the
//! registry credentials of a
//! `kubernetes.io/dockerconfigjson` Secret (key `.dockerconfigjson`, read
//! with the same `auths` rules as docker's `config.json`; a Secret never
//! runs a credential helper).
//!
//! Every error names the field and the Secret key an operator fixes.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;

use crate::registry::Credentials;

/// A fetched revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revision {
    /// The reference source-controller fetched (`main`,
    /// `refs/heads/main`, a tag), when the revision names one.
    pub reference: Option<String>,
    /// The full lowercase commit id.
    pub commit: String,
}

fn is_commit(s: &str) -> bool {
    matches!(s.len(), 40 | 64) && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Parses `status.artifact.revision`: `<ref>@sha1:<hex>` (Flux v1, and
/// `sha256:` for SHA-256 repositories), `sha1:<hex>` (a commit without a
/// reference) or the older `<ref>/<hex>`.
pub fn parse_revision(revision: &str) -> Option<Revision> {
    let r = revision.trim();
    let (reference, digest) = match r.rsplit_once('@') {
        Some((reference, digest)) => (Some(reference), digest),
        None if r.starts_with("sha1:") || r.starts_with("sha256:") => (None, r),
        None => {
            let (reference, hex) = r.rsplit_once('/')?;
            return is_commit(hex).then(|| Revision {
                reference: Some(reference.to_string()),
                commit: hex.to_string(),
            });
        }
    };
    let hex = digest
        .strip_prefix("sha1:")
        .or_else(|| digest.strip_prefix("sha256:"))?;
    is_commit(hex).then(|| Revision {
        reference: reference.filter(|r| !r.is_empty()).map(str::to_string),
        commit: hex.to_string(),
    })
}

/// The data of a Secret, `stringData` included (the API server folds it
/// into `data`, but a Secret read from a file may still carry it).
pub fn data(secret: &Secret) -> BTreeMap<String, ByteString> {
    let mut d = secret.data.clone().unwrap_or_default();
    for (k, v) in secret.string_data.clone().unwrap_or_default() {
        d.insert(k, ByteString(v.into_bytes()));
    }
    d
}

/// The registry credentials for `host` in a `kubernetes.io/dockerconfigjson`
/// Secret; `Err` says what is missing.
pub fn registry_credentials(
    secret: &Secret,
    what: &str,
    host: &str,
) -> Result<Credentials, String> {
    let d = data(secret);
    let raw = d
        .get(".dockerconfigjson")
        .or_else(|| d.get(".dockercfg"))
        .ok_or_else(|| format!("{what} has no key `.dockerconfigjson`"))?;
    let config: serde_json::Value = serde_json::from_slice(&raw.0)
        .map_err(|e| format!("{what} key `.dockerconfigjson` is not JSON: {e}"))?;
    // `.dockercfg` (the older format) is the `auths` map itself.
    let auths = if config.get("auths").is_some() {
        config
    } else {
        serde_json::json!({ "auths": config })
    };
    match crate::registry::auth::from_auths(&auths, host) {
        Ok(Some(c)) => Ok(c),
        Ok(None) => Err(format!(
            "{what} key `.dockerconfigjson` has no credentials for {host} (an `auths` entry with username and password or auth)"
        )),
        Err(m) => Err(format!("{what} key `.dockerconfigjson`: {m}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const C: &str = "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567";

    #[test]
    fn revisions_as_source_controller_writes_them() {
        let r = parse_revision(&format!("main@sha1:{C}")).unwrap();
        assert_eq!(
            (r.reference.as_deref(), r.commit.as_str()),
            (Some("main"), C)
        );
        let r = parse_revision(&format!("refs/heads/feature/x@sha1:{C}")).unwrap();
        assert_eq!(r.reference.as_deref(), Some("refs/heads/feature/x"));
        assert_eq!(
            parse_revision(&format!("sha1:{C}")).unwrap().reference,
            None
        );
        assert_eq!(
            parse_revision(&format!("main/{C}"))
                .unwrap()
                .reference
                .as_deref(),
            Some("main")
        );
        for bad in [
            "",
            "main",
            "main@sha1:abc",
            &format!("main@md5:{C}"),
            &format!("main@sha1:{}", C.to_uppercase()),
        ] {
            assert_eq!(parse_revision(bad), None, "{bad}");
        }
    }

    fn secret(pairs: &[(&str, &str)]) -> Secret {
        Secret {
            data: Some(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                    .collect(),
            ),
            ..Secret::default()
        }
    }

    #[test]
    fn dockerconfigjson_entries() {
        let cfg = r#"{"auths":{"https://reg.example:5000/v1/":{"auth":"dTpw"}}}"#;
        let c = registry_credentials(
            &secret(&[(".dockerconfigjson", cfg)]),
            "s",
            "reg.example:5000",
        )
        .unwrap();
        assert_eq!((c.username.as_str(), c.password.as_str()), ("u", "p"));
        let e = registry_credentials(
            &secret(&[(".dockerconfigjson", cfg)]),
            "Secret a/b",
            "other:1",
        )
        .unwrap_err();
        assert!(e.contains("no credentials for other:1"), "{e}");
        let e = registry_credentials(&secret(&[("x", "y")]), "Secret a/b", "h").unwrap_err();
        assert!(e.contains("`.dockerconfigjson`"), "{e}");
    }
}
