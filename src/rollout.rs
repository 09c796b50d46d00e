//! Rollout records: the evidence that a settings image ran somewhere. The
//! controller (`--cluster-name`, a `SettingsRollout`) attaches one to an
//! image's digest as an OCI referrer when a workload has fully rolled it
//! out (state `ready`), and one more when that run ends (state `ended`:
//! `superseded`, `unavailable`, `deleted`). A production `promote` reads
//! them next to the image ([`crate::release::evidence`]); `inspect` lists
//! them.
//!
//! Every field is derived from what the cluster shows (the pods' Ready
//! transition times, creation times), never from the clock of the
//! reconcile that writes it: the same state written twice (a restart, a
//! new leader) is the same bytes, so the same referrer digest.
//!
//! A record is evidence, not access control: anyone who can push to the
//! repository can attach one. [`Record::check`] only refuses what is not a
//! record of this shape about this image.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::image::ANNOTATION_CREATED;
use crate::image::artifact::Artifact;

/// The `artifactType` (and layer media type) of a rollout record.
pub const ARTIFACT_TYPE: &str = "application/vnd.settings-image.rollout.v1+json";
/// The record's file name on its layer (`oras pull` saves it so).
pub const FILE_NAME: &str = "rollout.json";
/// The annotation naming the record's cluster (listed with the referrer).
pub const ANNOTATION_CLUSTER: &str = "dev.settings-image.rollout.cluster";
/// The annotation naming the workload (`Deployment/shop`).
pub const ANNOTATION_WORKLOAD: &str = "dev.settings-image.rollout.workload";
/// The annotation naming the state (`ready`, or `ended: REASON`).
pub const ANNOTATION_STATE: &str = "dev.settings-image.rollout.state";

/// The kinds of workload a record is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum WorkloadKind {
    /// apps/v1 Deployment.
    Deployment,
    /// apps/v1 StatefulSet.
    StatefulSet,
    /// apps/v1 DaemonSet.
    DaemonSet,
}

impl WorkloadKind {
    /// The kind's name, as Kubernetes spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkloadKind::Deployment => "Deployment",
            WorkloadKind::StatefulSet => "StatefulSet",
            WorkloadKind::DaemonSet => "DaemonSet",
        }
    }
}

impl std::fmt::Display for WorkloadKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether a record opens a run or ends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Every replica runs the digest, updated, available and Ready.
    Ready,
    /// The run ended (see [`EndReason`]).
    Ended,
}

/// Why a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EndReason {
    /// The workload moved to another digest (or image).
    Superseded,
    /// The workload was not fully available for longer than the grace
    /// period (or never became so).
    Unavailable,
    /// The workload is gone.
    Deleted,
}

impl EndReason {
    /// The lowercase name (`superseded`).
    pub fn as_str(self) -> &'static str {
        match self {
            EndReason::Superseded => "superseded",
            EndReason::Unavailable => "unavailable",
            EndReason::Deleted => "deleted",
        }
    }
}

/// One rollout record, the one layer of the referrer (`rollout.json`).
/// Field order is the serialized order, so equal records are equal bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Record {
    /// The cluster (`--cluster-name` of the controller that wrote it).
    pub cluster: String,
    /// The workload's namespace.
    pub namespace: String,
    /// The workload's kind.
    pub kind: WorkloadKind,
    /// The workload's name.
    pub name: String,
    /// The image repository (`HOST/NAME`) the workload references.
    pub repository: String,
    /// The image's manifest digest (the referrer's subject).
    pub digest: String,
    /// `ready` or `ended`.
    pub state: State,
    /// When the last replica became Ready (RFC 3339); absent on an ended
    /// record of a run that never became ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_since: Option<String>,
    /// The replicas the workload wants (a DaemonSet: the nodes it is
    /// scheduled on).
    pub replicas: u32,
    /// When the run ended (RFC 3339); absent on `ready`, and on `deleted`
    /// when the cluster showed no time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    /// Why it ended; only on `ended`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<EndReason>,
    /// The digest the workload moved to, on `superseded` (absent when it
    /// moved to an image of another repository, or none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<String>,
}

/// A DNS-1123 label (a cluster or namespace name): lowercase letters,
/// digits and `-`, at most 63, starting and ending with a letter or digit.
pub fn is_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// A DNS-1123 subdomain (a workload's name).
fn is_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_label)
}

fn is_digest(s: &str) -> bool {
    s.strip_prefix("sha256:").is_some_and(|h| {
        h.len() == 64
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

fn time(field: &str, v: &Option<String>) -> std::result::Result<Option<Timestamp>, String> {
    v.as_deref()
        .map(|t| {
            t.parse::<Timestamp>()
                .map_err(|e| format!("{field} {t:?} is not an RFC 3339 time: {e}"))
        })
        .transpose()
}

impl Record {
    /// The workload as `Kind/name`.
    pub fn workload(&self) -> String {
        format!("{}/{}", self.kind, self.name)
    }

    /// When it became ready, parsed (checked by [`Record::check`]).
    pub fn ready_since_at(&self) -> Option<Timestamp> {
        self.ready_since.as_deref().and_then(|t| t.parse().ok())
    }

    /// When it ended, parsed (checked by [`Record::check`]).
    pub fn ended_at_at(&self) -> Option<Timestamp> {
        self.ended_at.as_deref().and_then(|t| t.parse().ok())
    }

    /// Whether the record is of the documented shape and about the image
    /// `subject`; `Err` says what is wrong (what `inspect` and
    /// `promote --explain` name; the gate ignores such a record).
    pub fn check(&self, subject: &str) -> std::result::Result<(), String> {
        if !is_label(&self.cluster) {
            return Err(format!(
                "cluster {:?} is not a cluster name (lowercase letters, digits and '-', at most 63)",
                self.cluster
            ));
        }
        if !is_label(&self.namespace) {
            return Err(format!("namespace {:?} is not a namespace", self.namespace));
        }
        if !is_subdomain(&self.name) {
            return Err(format!("name {:?} is not a workload name", self.name));
        }
        if !is_digest(&self.digest) {
            return Err(format!("digest {:?} is not a sha256 digest", self.digest));
        }
        if self.digest != subject {
            return Err(format!(
                "the record is about {}, not this image {subject}",
                self.digest
            ));
        }
        let ready = time("readySince", &self.ready_since)?;
        let ended = time("endedAt", &self.ended_at)?;
        match self.state {
            State::Ready => {
                if ready.is_none() {
                    return Err("a ready record has no readySince".into());
                }
                if ended.is_some() || self.reason.is_some() || self.superseded_by.is_some() {
                    return Err("a ready record has endedAt, reason or supersededBy".into());
                }
                if self.replicas == 0 {
                    return Err("a ready record of 0 replicas".into());
                }
            }
            State::Ended => {
                let Some(reason) = self.reason else {
                    return Err("an ended record has no reason".into());
                };
                if ended.is_none() && reason != EndReason::Deleted {
                    return Err(format!(
                        "an ended record ({}) has no endedAt",
                        reason.as_str()
                    ));
                }
                if let (Some(r), Some(e)) = (ready, ended)
                    && e < r
                {
                    return Err("endedAt is before readySince".into());
                }
                if let Some(d) = &self.superseded_by
                    && !is_digest(d)
                {
                    return Err(format!("supersededBy {d:?} is not a sha256 digest"));
                }
            }
        }
        Ok(())
    }
}

/// The referrer artifact for `record`: its bytes and annotations are a
/// function of the record alone.
pub fn artifact(record: &Record) -> Result<Artifact> {
    let bytes =
        serde_json::to_vec(record).map_err(|e| Error::json("serializing the rollout record", e))?;
    let mut annotations = BTreeMap::from([
        (ANNOTATION_CLUSTER.to_string(), record.cluster.clone()),
        (
            ANNOTATION_WORKLOAD.to_string(),
            format!("{}/{}", record.namespace, record.workload()),
        ),
        (
            ANNOTATION_STATE.to_string(),
            match record.reason {
                Some(r) => format!("ended: {}", r.as_str()),
                None => "ready".to_string(),
            },
        ),
    ]);
    if let Some(t) = record.ended_at.as_ref().or(record.ready_since.as_ref()) {
        annotations.insert(ANNOTATION_CREATED.to_string(), t.clone());
    }
    Ok(Artifact {
        artifact_type: ARTIFACT_TYPE.to_string(),
        layers: vec![(ARTIFACT_TYPE.to_string(), bytes)],
        annotations,
        title: Some(FILE_NAME.to_string()),
    })
}

/// Reads a record's layer (not yet checked: see [`Record::check`]).
pub fn read_record(bytes: &[u8]) -> std::result::Result<Record, String> {
    serde_json::from_slice(bytes).map_err(|e| format!("not a rollout record: {e}"))
}

/// One listed rollout referrer of an image, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// The referrer manifest's digest.
    pub digest: String,
    /// The record, or why it is not one (unreadable, wrong shape, about
    /// another image).
    pub record: std::result::Result<Record, String>,
}

/// Reads every rollout record attached to `subject` in `client`'s
/// repository: one listing, then the manifest and layer of each.
pub fn records_of(client: &crate::registry::Client, subject: &str) -> Result<Vec<Listed>> {
    let mut out = Vec::new();
    for d in client.referrers(subject, Some(ARTIFACT_TYPE))? {
        let record = match client.referrer_layer(&d, ARTIFACT_TYPE) {
            Err(e) => Err(e.to_string()),
            Ok(layer) if layer.size > 64 * 1024 => {
                Err(format!("its layer is {} bytes, not a record", layer.size))
            }
            Ok(layer) => match client.get_blob(&layer.digest) {
                Err(e) => Err(e.to_string()),
                Ok(bytes) => read_record(&bytes).and_then(|r| r.check(subject).map(|()| r)),
            },
        };
        out.push(Listed {
            digest: d.digest,
            record,
        });
    }
    out.sort_by(|a, b| a.digest.cmp(&b.digest));
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn digest(c: char) -> String {
        format!("sha256:{}", c.to_string().repeat(64))
    }

    pub(crate) fn ready(cluster: &str, since: &str) -> Record {
        Record {
            cluster: cluster.into(),
            namespace: "shop".into(),
            kind: WorkloadKind::Deployment,
            name: "shop".into(),
            repository: "ghcr.io/acme/settings-shop".into(),
            digest: digest('a'),
            state: State::Ready,
            ready_since: Some(since.into()),
            replicas: 2,
            ended_at: None,
            reason: None,
            superseded_by: None,
        }
    }

    #[test]
    fn the_bytes_are_the_documented_json_in_a_fixed_order() {
        let r = ready("staging", "2026-12-01T10:00:00Z");
        let text = String::from_utf8(serde_json::to_vec(&r).unwrap()).unwrap();
        assert_eq!(
            text,
            format!(
                r#"{{"cluster":"staging","namespace":"shop","kind":"Deployment","name":"shop","repository":"ghcr.io/acme/settings-shop","digest":"{}","state":"ready","readySince":"2026-12-01T10:00:00Z","replicas":2}}"#,
                digest('a')
            )
        );
        // The same record is the same artifact, whatever the clock says.
        let a = artifact(&r).unwrap();
        let b = artifact(&r.clone()).unwrap();
        assert_eq!(a.layers, b.layers);
        assert_eq!(a.annotations, b.annotations);
        assert_eq!(a.annotations[ANNOTATION_CREATED], "2026-12-01T10:00:00Z");
        assert_eq!(a.annotations[ANNOTATION_WORKLOAD], "shop/Deployment/shop");
        assert_eq!(a.annotations[ANNOTATION_STATE], "ready");
    }

    #[test]
    fn a_record_of_another_shape_is_named() {
        let subject = digest('a');
        assert_eq!(
            ready("staging", "2026-12-01T10:00:00Z").check(&subject),
            Ok(())
        );
        let e = ready("Staging!", "2026-12-01T10:00:00Z")
            .check(&subject)
            .unwrap_err();
        assert!(
            e.starts_with("cluster \"Staging!\" is not a cluster name"),
            "{e}"
        );
        let e = ready("staging", "yesterday").check(&subject).unwrap_err();
        assert!(e.starts_with("readySince \"yesterday\""), "{e}");
        let e = ready("staging", "2026-12-01T10:00:00Z")
            .check(&digest('b'))
            .unwrap_err();
        assert!(e.contains("not this image"), "{e}");
        let mut ended = ready("staging", "2026-12-01T10:00:00Z");
        ended.state = State::Ended;
        assert_eq!(
            ended.check(&subject).unwrap_err(),
            "an ended record has no reason"
        );
        ended.reason = Some(EndReason::Unavailable);
        assert_eq!(
            ended.check(&subject).unwrap_err(),
            "an ended record (unavailable) has no endedAt"
        );
        ended.ended_at = Some("2026-12-01T09:00:00Z".into());
        assert_eq!(
            ended.check(&subject).unwrap_err(),
            "endedAt is before readySince"
        );
        ended.ended_at = Some("2026-12-01T12:00:00Z".into());
        assert_eq!(ended.check(&subject), Ok(()));
        assert_eq!(
            crate::show::rollout::record(&ended),
            "ran in staging: Deployment shop/shop (2 replicas), ready from 2026-12-01T10:00:00Z to \
             2026-12-01T12:00:00Z, unavailable"
        );
        // Unknown fields are another shape, not this one.
        let mut v = serde_json::to_value(ready("staging", "2026-12-01T10:00:00Z")).unwrap();
        assert!(read_record(v.to_string().as_bytes()).is_ok());
        v["verified"] = true.into();
        let e = read_record(v.to_string().as_bytes()).unwrap_err();
        assert!(e.starts_with("not a rollout record"), "{e}");
    }
}
