//! `settings-image inspect`: an image's digest and annotations, and what
//! its referrers (provenance, and any other kind in [`KINDS`]) say.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::image::artifact::ManifestView;
use crate::image::{ANNOTATION_CREATED, Descriptor};
use crate::promote;
use crate::provenance;
use crate::registry::{self, Client, Options};
use crate::rollout;

/// One kind of referrer inspect knows how to read.
pub struct Kind {
    /// The referrer's `artifactType`.
    pub artifact_type: &'static str,
    /// The short name shown (`provenance`).
    pub name: &'static str,
    /// Reads the referrer's content into what inspect shows about it.
    pub read: fn(&Client, &Descriptor, &str) -> Result<serde_json::Value>,
}

/// The referrer kinds inspect reads; others are listed with their
/// descriptor only. A new kind (e.g. promotion records) is one more entry.
pub const KINDS: &[Kind] = &[
    Kind {
        artifact_type: provenance::ARTIFACT_TYPE,
        name: "provenance",
        read: read_provenance,
    },
    Kind {
        artifact_type: promote::ARTIFACT_TYPE,
        name: "promotion",
        read: read_promotion,
    },
    Kind {
        artifact_type: rollout::ARTIFACT_TYPE,
        name: "rollout",
        read: read_rollout,
    },
];

/// Reads a rollout record referrer: where the image ran, from when to
/// when, and how it ended; a record of another shape (or about another
/// image) is an error naming what is wrong, as the gate ignores it.
fn read_rollout(
    client: &Client,
    desc: &Descriptor,
    image_digest: &str,
) -> Result<serde_json::Value> {
    let layer = client.referrer_layer(desc, rollout::ARTIFACT_TYPE)?;
    let bytes = client.get_blob(&layer.digest)?;
    let bad = |message: String| Error::Registry {
        reference: client.repository().to_string(),
        what: format!("reading rollout record {}", desc.digest),
        message: format!("{message}; promote's requirements ignore it"),
        hint: None,
    };
    let record = rollout::read_record(&bytes).map_err(bad)?;
    record.check(image_digest).map_err(bad)?;
    serde_json::to_value(&record).map_err(|e| Error::json("showing the rollout", e))
}

/// Reads a promotion record referrer: who promoted the image into which
/// channel tag, when, from which tag, and why it was allowed.
fn read_promotion(
    client: &Client,
    desc: &Descriptor,
    image_digest: &str,
) -> Result<serde_json::Value> {
    let layer = client.referrer_layer(desc, promote::ARTIFACT_TYPE)?;
    let bytes = client.get_blob(&layer.digest)?;
    let record = promote::read_record(&bytes)?;
    if record.digest != image_digest {
        return Err(Error::Registry {
            reference: client.repository().to_string(),
            what: format!("reading promotion record {}", desc.digest),
            message: format!(
                "the record is about {}, not this image {image_digest}",
                record.digest
            ),
            hint: None,
        });
    }
    serde_json::to_value(record).map_err(|e| Error::json("showing the promotion", e))
}

/// Reads a provenance referrer: its manifest, then its statement layer.
fn read_provenance(
    client: &Client,
    desc: &Descriptor,
    image_digest: &str,
) -> Result<serde_json::Value> {
    let layer = client.referrer_layer(desc, provenance::ARTIFACT_TYPE)?;
    let bytes = client.get_blob(&layer.digest)?;
    let summary = provenance::read_statement(&bytes, image_digest)?;
    serde_json::to_value(summary).map_err(|e| Error::json("showing the provenance", e))
}

/// One referrer as inspect shows it.
#[derive(Debug, Clone, Serialize)]
pub struct Referrer {
    /// The referrer manifest's digest.
    pub digest: String,
    /// Its `artifactType`.
    pub artifact_type: Option<String>,
    /// The kind's name from [`KINDS`], `None` for unknown types.
    pub kind: Option<String>,
    /// The referrer's annotations (revision, created).
    pub annotations: BTreeMap<String, String>,
    /// What the kind's reader found in it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<serde_json::Value>,
    /// Why the content could not be read, when it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What `inspect` prints.
#[derive(Debug, Clone, Serialize)]
pub struct Inspection {
    /// `HOST/NAME`.
    pub repository: String,
    /// The tag or digest asked for.
    pub reference: String,
    /// The manifest digest.
    pub digest: String,
    /// The manifest media type.
    pub media_type: String,
    /// The manifest annotations (revision, created, source).
    pub annotations: BTreeMap<String, String>,
    /// Every referrer, oldest `created` first.
    pub referrers: Vec<Referrer>,
    /// The newest provenance's details, when there is one.
    pub provenance: Option<serde_json::Value>,
    /// Every git ref whose run published this digest (one provenance
    /// statement each), in referrer order, without repeats.
    pub refs: Vec<String>,
    /// Every promotion record's details, oldest first.
    pub promotions: Vec<serde_json::Value>,
    /// Every rollout record's details (where the image ran), oldest first;
    /// a record of another shape is among `referrers` with its `error`.
    pub rollouts: Vec<serde_json::Value>,
}

/// Splits `HOST/NAME:TAG`, `HOST/NAME@sha256:...` (or both) into the
/// repository and the reference to ask for (the digest when given).
pub fn parse_reference(s: &str) -> Result<(String, String)> {
    // Before splitting at '@': `user:password@host/name` is refused unread.
    registry::check_repository_text(s)?;
    let hint = || {
        Some(
            "give HOST/NAME:TAG or HOST/NAME@sha256:<64 hex>, e.g. ghcr.io/acme/settings:latest"
                .to_string(),
        )
    };
    let (rest, digest) = match s.split_once('@') {
        Some((r, d)) => (r, Some(d)),
        None => (s, None),
    };
    let (repo, tag) = match rest.rfind(':') {
        Some(i) if !rest[i..].contains('/') => (&rest[..i], Some(&rest[i + 1..])),
        _ => (rest, None),
    };
    registry::parse_repository(repo)?;
    if let Some(d) = digest {
        let ok = d.strip_prefix("sha256:").is_some_and(|h| {
            h.len() == 64
                && h.bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        });
        if !ok {
            return Err(Error::input(
                format!("invalid digest {d:?} in {s:?}"),
                hint(),
            ));
        }
        return Ok((repo.to_string(), d.to_string()));
    }
    match tag {
        Some(t) => {
            crate::tag::validate(t)?;
            Ok((repo.to_string(), t.to_string()))
        }
        None => Err(Error::input(
            format!("{s:?} names no tag or digest"),
            hint(),
        )),
    }
}

/// Inspects `reference` (see [`parse_reference`]) with pull access.
pub fn inspect(
    reference: &str,
    insecure: bool,
    credentials: Option<registry::Credentials>,
    docker_config: Option<std::path::PathBuf>,
) -> Result<Inspection> {
    let (repository, what) = parse_reference(reference)?;
    let client = Client::open_read_only(&Options {
        insecure,
        credentials,
        docker_config,
        ..Options::new(repository.clone())
    })?;
    let m = client.get_manifest(&what)?.ok_or_else(|| Error::Registry {
        reference: repository.clone(),
        what: format!("reading {what}"),
        message: "no such tag or digest".into(),
        hint: Some(
            format!(
                "check the tag with `skopeo list-tags {}docker://{repository}`",
                // skopeo, like this tool, speaks plain HTTP only when told.
                if insecure || registry::is_loopback(&client.repository().host) {
                    "--tls-verify=false "
                } else {
                    ""
                }
            )
            .into(),
        ),
    })?;
    let view = ManifestView::parse(&m.bytes)?;
    let mut referrers: Vec<Referrer> = client
        .referrers(&m.digest, None)?
        .into_iter()
        .map(|d| {
            let kind = KINDS
                .iter()
                .find(|k| d.artifact_type.as_deref() == Some(k.artifact_type));
            let (details, error) = match kind.map(|k| (k.read)(&client, &d, &m.digest)) {
                Some(Ok(v)) => (Some(v), None),
                Some(Err(e)) => (None, Some(e.to_string())),
                None => (None, None),
            };
            Referrer {
                digest: d.digest,
                artifact_type: d.artifact_type,
                kind: kind.map(|k| k.name.to_string()),
                annotations: d.annotations,
                details,
                error,
            }
        })
        .collect();
    referrers.sort_by(|a, b| {
        let key = |r: &Referrer| {
            (
                r.annotations.get(ANNOTATION_CREATED).cloned(),
                r.digest.clone(),
            )
        };
        key(a).cmp(&key(b))
    });
    let provenance = referrers
        .iter()
        .rev()
        .find(|r| r.kind.as_deref() == Some("provenance"))
        .and_then(|r| r.details.clone());
    let mut refs: Vec<String> = Vec::new();
    for r in referrers
        .iter()
        .filter(|r| r.kind.as_deref() == Some("provenance"))
        .filter_map(|r| r.details.as_ref()?.get("ref")?.as_str())
    {
        if !refs.iter().any(|x| x == r) {
            refs.push(r.to_string());
        }
    }
    let promotions = referrers
        .iter()
        .filter(|r| r.kind.as_deref() == Some("promotion"))
        .filter_map(|r| r.details.clone())
        .collect();
    let rollouts = referrers
        .iter()
        .filter(|r| r.kind.as_deref() == Some("rollout"))
        .filter_map(|r| r.details.clone())
        .collect();
    Ok(Inspection {
        promotions,
        rollouts,
        repository,
        reference: what,
        digest: m.digest,
        media_type: m.media_type,
        annotations: view.annotations,
        referrers,
        provenance,
        refs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references() {
        let d = format!("sha256:{}", "a".repeat(64));
        assert_eq!(
            parse_reference("localhost:5000/a/b:v1").unwrap(),
            ("localhost:5000/a/b".into(), "v1".into())
        );
        assert_eq!(
            parse_reference(&format!("ghcr.io/a/b:v1@{d}")).unwrap(),
            ("ghcr.io/a/b".into(), d.clone())
        );
        assert_eq!(
            parse_reference(&format!("ghcr.io/a/b@{d}")).unwrap(),
            ("ghcr.io/a/b".into(), d)
        );
        for (bad, reason) in [
            ("ghcr.io/a/b", "\"ghcr.io/a/b\" names no tag or digest"),
            (
                "localhost:5000/a",
                "\"localhost:5000/a\" names no tag or digest",
            ),
            (
                "ghcr.io/a/b@sha256:12",
                "invalid digest \"sha256:12\" in \"ghcr.io/a/b@sha256:12\"",
            ),
            (
                "b:v1",
                "invalid repository \"b\": no registry host (expected HOST/NAME)",
            ),
            ("ghcr.io/a/b:-x", "invalid tag \"-x\""),
        ] {
            let err = parse_reference(bad).unwrap_err();
            assert_eq!(err.to_string(), reason, "{bad}");
            assert_eq!(err.exit_code(), 2, "{bad}");
        }
        let err = parse_reference("alice:S3cretPW@ghcr.io/a/b:v1").unwrap_err();
        assert!(err.to_string().contains("credentials"), "{err}");
        assert!(!err.to_string().contains("S3cretPW"), "{err}");
    }
}
