//! The evidence part of `promote` (`super`): each candidate newer than the
//! channel judged against the release policy's requirements, from the
//! rollout records attached to its digest.

use jiff::Timestamp;
use serde::Serialize;

use super::Promotion;
use crate::error::Result;
use crate::registry::{Client, Manifest};
use crate::release::channel::{self, Required};
use crate::release::evidence::{self, Cited};

/// One candidate newer than the channel, judged against the policy's
/// requirements.
#[derive(Debug, Clone, Serialize)]
pub struct CandidateReport {
    /// The candidate tag.
    pub tag: String,
    /// Its manifest digest.
    pub digest: String,
    /// Whether it meets every requirement.
    pub eligible: bool,
    /// One line per requirement: `met: ...` or `not met: ...`.
    pub because: Vec<String>,
    /// The records the met requirements rest on.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<Cited>,
    /// Rollout referrers ignored: not records of the documented shape, or
    /// about another image.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ignored: Vec<IgnoredRecord>,
}

/// A rollout referrer the gate ignored, and why.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct IgnoredRecord {
    /// The referrer's digest.
    pub record: String,
    /// Why it is ignored.
    pub why: String,
}

/// The candidates judged against the policy's requirements.
pub(super) struct Judged {
    /// Each candidate judged, newest first.
    pub reports: Vec<CandidateReport>,
    /// `None` when the policy requires nothing.
    pub required: Option<Required>,
    /// The eligible candidate's tag and manifest, as read to judge it: the
    /// promotion copies these bytes, so the digest promoted is the digest
    /// the evidence is about, and the manifest is not read twice.
    pub manifest: Option<(String, Manifest)>,
}

/// Judges each candidate newer than the channel against the policy's
/// requirements at `now`, newest first: its manifest (one `GET`: its
/// digest, and the bytes a promotion copies), its rollout records (a
/// referrers listing, then each record's manifest and layer). A promote
/// stops at the first eligible candidate; `--explain` judges them all.
/// Nothing judged when the policy requires nothing: no request is sent.
pub(super) fn judge_candidates(
    req: &Promotion,
    source: &Client,
    tags: &[String],
    now: Timestamp,
) -> Result<Judged> {
    if req.policy.requires.is_empty() {
        return Ok(Judged {
            reports: Vec::new(),
            required: None,
            manifest: None,
        });
    }
    let mut reports = Vec::new();
    let mut eligible = None;
    let mut manifest = None;
    for c in channel::newer(&req.from, &req.to, tags) {
        let Some(m) = source.get_manifest(&c.tag)? else {
            continue; // deleted since it was listed
        };
        let records = crate::rollout::records_of(source, &m.digest)?;
        let j = evidence::judge(&req.policy.requires, &records, now);
        reports.push(CandidateReport {
            tag: c.tag.clone(),
            digest: m.digest.clone(),
            eligible: j.eligible,
            because: j.lines,
            evidence: j.evidence,
            ignored: j
                .ignored
                .into_iter()
                .map(|(record, why)| IgnoredRecord { record, why })
                .collect(),
        });
        if j.eligible && eligible.is_none() {
            manifest = Some((c.tag.clone(), m));
            eligible = Some(c);
            if !req.explain {
                break;
            }
        }
    }
    let required = match eligible {
        Some(c) => Required::Eligible(c),
        None if reports.is_empty() => {
            Required::NoneEligible("no candidate is newer than the channel".into())
        }
        None => Required::NoneEligible(format!(
            "none of the {} candidates newer than the channel meets the release policy's \
             requirements (newest {}: {})",
            reports.len(),
            reports[0].tag,
            reports[0]
                .because
                .iter()
                .filter(|l| l.starts_with("not met"))
                .cloned()
                .collect::<Vec<_>>()
                .join("; ")
        )),
    };
    Ok(Judged {
        reports,
        required: Some(required),
        manifest,
    })
}
