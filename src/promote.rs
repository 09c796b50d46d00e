//! `settings-image promote`: copies the newest `FROM-<ts>-<sha7>` image into
//! the forward-only channel `TO` as `TO-<ts>-<sha7>` (the exact manifest
//! bytes, so the same digest; no blob uploaded within one repository, the
//! blobs mounted or copied into a `--target-repository`), when the release
//! policy's windows allow it or by recorded break-glass, and attaches a
//! promotion record to the image as an OCI referrer.
//!
//! The decision is [`channel::decide`]'s and the gate [`Policy::gate`]'s;
//! this module reads the tags, copies the manifest and writes the record.
//! Two promotes racing each write the channel tag of the candidate they
//! saw; channel tags never move, so the channel's highest tag (what Flux
//! picks) is the newest candidate either saw.

use std::collections::BTreeMap;
use std::path::PathBuf;

use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::field::{Field, Mention};
use crate::image::artifact::{Artifact, ManifestView};
use crate::image::{ANNOTATION_CREATED, Descriptor};
use crate::registry::{self, Client, Credentials, Options};
use crate::release::channel::{self, Decision, DecisionKind, Required};
use crate::release::evidence::Cited;
use crate::release::policy::{Period, Policy};

/// The `artifactType` (and layer media type) of a promotion record.
pub const ARTIFACT_TYPE: &str = "application/vnd.settings-image.promotion.v1+json";
/// The record's file name on its layer (`oras pull` saves it so).
pub const FILE_NAME: &str = "promotion.json";
/// The annotation on the record naming the channel tag it wrote.
pub const ANNOTATION_CHANNEL_TAG: &str = "dev.settings-image.promotion.tag";
/// How far ahead `--explain` looks for the next open and close.
pub const EXPLAIN_HORIZON_DAYS: i64 = 14;

/// Everything a promotion needs.
#[derive(Debug, Clone)]
pub struct Promotion {
    /// `HOST/NAME` holding the candidate tags.
    pub repository: String,
    /// The prefix of the candidate tags (e.g. `main`).
    pub from: String,
    /// The channel (e.g. `prod`).
    pub to: String,
    /// Where the channel tags go, when not `repository` (same registry:
    /// blobs are mounted across repositories, else copied).
    pub target_repository: Option<String>,
    /// The release policy (empty: always open).
    pub policy: Policy,
    /// "Now" for the decision; the wall clock when `None`.
    pub at: Option<Timestamp>,
    /// Break-glass: `Some(reason)` opens a shut gate (never for an older
    /// candidate). The reason is not empty.
    pub force: Option<String>,
    /// Decide and show, change nothing.
    pub explain: bool,
    /// Plain HTTP for non-loopback registries.
    pub insecure: bool,
    /// Registry credentials (else docker's config, else anonymous).
    pub credentials: Option<Credentials>,
    /// Docker's `config.json`, asked when `credentials` is `None`.
    /// An OIDC login making the credentials (when `credentials` is `None`).
    pub login: Option<crate::login::Login>,
    pub docker_config: Option<PathBuf>,
    /// Who promotes (the CI's actor, else the local user).
    pub actor: String,
    /// The CI run, when there is one.
    pub run_url: Option<String>,
}

/// The gate as reported.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct GateReport {
    /// Whether promotion may happen now.
    pub open: bool,
    /// Why.
    pub reason: String,
    /// The windows active now.
    pub active: Vec<String>,
}

/// One stretch of the calendar as reported.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct PeriodReport {
    /// Start, RFC 3339.
    pub start: String,
    /// End (exclusive), RFC 3339.
    pub end: String,
    /// Open or shut.
    pub open: bool,
}

impl From<&Period> for PeriodReport {
    fn from(p: &Period) -> Self {
        PeriodReport {
            start: p.start.to_string(),
            end: p.end.to_string(),
            open: p.open,
        }
    }
}

/// What a promotion decided and did.
#[derive(Debug, Clone, Serialize)]
pub struct PromotionReport {
    /// What was decided.
    pub decision: DecisionKind,
    /// True when a channel tag was written by this run.
    pub promoted: bool,
    /// Nothing was changed (`--explain`).
    pub explain: bool,
    /// The newest candidate tag: Flux's pick among the source prefix's
    /// tags (the highest timestamp; on equal timestamps the alphabetically
    /// smallest tag).
    pub candidate: Option<String>,
    /// The source tags with the candidate's timestamp, smallest first, when
    /// more than one: the tie broken as Flux breaks it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tied: Vec<String>,
    /// The newest channel tag before this run.
    pub current: Option<String>,
    /// The channel tag written (or that would be written).
    pub tag: Option<String>,
    /// The promoted manifest digest.
    pub digest: Option<String>,
    /// `HOST/NAME:TAG@sha256:...` of the channel tag.
    pub reference: Option<String>,
    /// Why the promotion may happen, or why it waits.
    pub because: String,
    /// Break-glass was used.
    pub forced: bool,
    /// "Now" as decided.
    pub at: String,
    /// The gate now.
    pub gate: GateReport,
    /// When the gate next opens (within the horizon), when it is shut now.
    pub next_open: Option<String>,
    /// When the gate next closes (within the horizon).
    pub next_close: Option<String>,
    /// The gate's periods over the horizon (14 days).
    pub calendar: Vec<PeriodReport>,
    /// Blobs uploaded to copy the image (0 within one repository).
    pub uploaded_blobs: usize,
    /// Blobs mounted from the source repository.
    pub mounted_blobs: usize,
    /// The promotion record's manifest digest.
    pub record: Option<String>,
    /// When the policy requires evidence: each candidate newer than the
    /// channel, newest first, and how it fares (a promote that is not
    /// `--explain` stops at the first eligible one).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub candidates: Vec<CandidateReport>,
    /// The rollout records the promoted candidate's requirements rest on.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<Cited>,
    /// True when it waits because no candidate newer than the channel meets
    /// the requirements (not for the gate).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub unmet: bool,
    /// What changes: the channel's newest release against the candidate
    /// (promoted or waiting), filled in by the face ([`review`]); absent
    /// when up to date.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<crate::diff::review::Review>,
}

/// The promotion record, the one layer of the referrer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Record {
    /// The channel tag written.
    pub tag: String,
    /// The candidate tag it came from.
    pub from_tag: String,
    /// The repository of the candidate (`HOST/NAME`).
    pub from_repository: String,
    /// The manifest digest.
    pub digest: String,
    /// Who promoted.
    pub actor: String,
    /// When the promotion happened: the clock, RFC 3339.
    pub at: String,
    /// The time the gate was judged at, when `--at` fixed one other than
    /// the clock (a dry run that was not dry); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate_at: Option<String>,
    /// The window that allowed it, or the gate's state for break-glass.
    pub because: String,
    /// Break-glass was used.
    pub forced: bool,
    /// The break-glass reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The CI run URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_url: Option<String>,
    /// The rollout records the release policy's requirements rested on
    /// (none without requirements, or by break-glass).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<Cited>,
}

/// Parses `--at`: RFC 3339 with an offset (`2026-12-21T10:00:00Z`).
pub fn parse_at(text: &str) -> Result<Timestamp> {
    text.trim().parse::<Timestamp>().map_err(|e| {
        Error::input(
            crate::text![Field::At, format!(" {text:?} is not a time: {e}")],
            Some("give RFC 3339 with an offset, e.g. 2026-12-21T10:00:00Z".to_string()),
        )
    })
}

/// Checks the break-glass pair: forcing needs a non-empty reason, and a
/// reason without forcing is a mistake (an input error naming
/// [`Field::Force`] and [`Field::Reason`], which each face words its own
/// way). Returns the reason when forced.
pub fn break_glass(force: bool, reason: Option<&str>) -> Result<Option<String>> {
    let reason = reason.map(str::trim).filter(|r| !r.is_empty());
    match (force, reason) {
        (true, Some(r)) => Ok(Some(r.to_string())),
        (true, None) => Err(no_reason()),
        (false, Some(_)) => Err(Error::input_hinted(
            crate::text![Field::Reason, " is only used with ", Field::Force],
            crate::text![
                "add ",
                Field::Force,
                " for break-glass, or drop ",
                Field::Reason
            ],
        )),
        (false, None) => Ok(None),
    }
}

/// Break-glass without a reason.
fn no_reason() -> Error {
    Error::input_hinted(
        crate::text!["break-glass (", Field::Force, ") needs a reason"],
        crate::text![
            "add ",
            Mention::Set(Field::Reason, "\"...\"".to_string()),
            " saying why the release cannot wait for a window; it is recorded with the promotion"
        ],
    )
}

fn check_prefixes(req: &Promotion) -> Result<()> {
    for (field, p) in [(Field::From, &req.from), (Field::To, &req.to)] {
        let clean = crate::tag::sanitize_prefix(p)?;
        if &clean != p {
            return Err(Error::input(
                crate::text![field, format!(" {p:?} is not a tag prefix")],
                Some(format!("use {clean:?}")),
            ));
        }
    }
    if req.from == req.to {
        return Err(Error::input(
            crate::text![
                Field::From,
                " and ",
                Field::To,
                format!(" are both {:?}", req.from)
            ],
            Some(
                "promote from the candidate prefix (e.g. main) into another channel (e.g. prod)"
                    .into(),
            ),
        ));
    }
    if let Some(r) = &req.force
        && r.trim().is_empty()
    {
        return Err(no_reason());
    }
    Ok(())
}

fn options(req: &Promotion, repository: &str) -> Options {
    Options {
        insecure: req.insecure,
        credentials: req.credentials.clone(),
        docker_config: req.docker_config.clone(),
        login: req.login.clone().map(Into::into),
        ..Options::new(repository)
    }
}

/// Decides and, unless explaining, promotes (see the module docs).
pub fn run(req: &Promotion) -> Result<PromotionReport> {
    check_prefixes(req)?;
    let source_repo = registry::parse_repository(&req.repository)?;
    let target_name = req.target_repository.as_deref().unwrap_or(&req.repository);
    let target_repo = registry::parse_repository(target_name)?;
    let now = req.at.unwrap_or_else(Timestamp::now);
    let gate = req.policy.gate(now);
    let horizon = SignedDuration::from_hours(24 * EXPLAIN_HORIZON_DAYS);
    let (next_open, next_close) = req.policy.next_changes(now, horizon);
    let calendar = req.policy.calendar(now, horizon);

    // Write access only where something is written: the channel's
    // repository, and never for --explain.
    let open = |name: &str, write: bool| {
        if write && !req.explain {
            Client::open(&options(req, name))
        } else {
            Client::open_read_only(&options(req, name))
        }
    };
    let separate = target_repo != source_repo;
    let source = open(&req.repository, !separate)?;
    let target = if separate {
        Some(open(target_name, true)?)
    } else {
        None
    };
    let target_client = target.as_ref().unwrap_or(&source);
    // One listing when the channel is in the candidates' repository.
    let listed = source.list_tags()?;
    let channel_tags = match &target {
        Some(t) => t.list_tags()?,
        None => listed.clone(),
    };
    let mut tags: Vec<String> = listed
        .into_iter()
        .filter(|t| channel::parse(&req.from, t).is_some())
        .collect();
    tags.extend(
        channel_tags
            .into_iter()
            .filter(|t| channel::parse(&req.to, t).is_some()),
    );
    let current = channel::highest(&req.to, &tags).map(|s| s.tag);
    let judged = judge_candidates(req, &source, &tags, now)?;
    let (candidates, required) = (judged.reports, judged.required);
    let decision = channel::decide(
        &req.from,
        &req.to,
        &tags,
        &gate,
        req.force.as_deref(),
        required.as_ref(),
    );
    // "Up to date" rests on the channel's highest tag: it must hold the
    // candidate of the same name, or the channel claims a release it does
    // not serve (a tag pushed by hand with other content).
    if let Decision::UpToDate { current, .. } = &decision {
        check_channel_tag(&source, target_client, &req.from, current)?;
    }
    let pick = channel::highest(&req.from, &tags);
    let mut out = PromotionReport {
        decision: decision.kind(),
        promoted: false,
        explain: req.explain,
        tied: pick
            .as_ref()
            .map(|p| channel::tied(&req.from, p, &tags))
            .unwrap_or_default(),
        candidate: match &decision {
            Decision::Promote { candidate, .. } | Decision::Wait { candidate, .. } => {
                Some(candidate.tag.clone())
            }
            _ => pick.map(|s| s.tag),
        },
        current,
        tag: None,
        digest: None,
        reference: None,
        because: gate.reason.clone(),
        forced: false,
        at: now.to_string(),
        gate: GateReport {
            open: gate.open,
            reason: gate.reason.clone(),
            active: gate.active.clone(),
        },
        next_open: if gate.open {
            None
        } else {
            next_open.map(|t| t.to_string())
        },
        next_close: next_close.map(|t| t.to_string()),
        calendar: calendar.iter().map(PeriodReport::from).collect(),
        uploaded_blobs: 0,
        mounted_blobs: 0,
        record: None,
        unmet: matches!(required, Some(Required::NoneEligible(_)))
            && decision.kind() == DecisionKind::Wait,
        candidates,
        evidence: Vec::new(),
        diff: None,
    };
    let Decision::Promote {
        candidate,
        channel_tag,
        because,
        forced,
    } = decision
    else {
        if let Decision::Wait { reason, .. } = &decision {
            out.because = reason.clone();
        }
        return Ok(out);
    };
    out.tag = Some(channel_tag.clone());
    out.because = because.clone();
    out.forced = forced;
    if !forced {
        out.evidence = out
            .candidates
            .iter()
            .find(|c| c.tag == candidate.tag)
            .map(|c| c.evidence.clone())
            .unwrap_or_default();
    }
    // The manifest the requirements were judged on, when they were (a
    // break-glass promotion of another candidate reads its own).
    let m = match judged.manifest {
        Some((tag, m)) if tag == candidate.tag => Some(m),
        _ => source.get_manifest(&candidate.tag)?,
    }
    .ok_or_else(|| Error::Registry {
        reference: format!("{source_repo}:{}", candidate.tag),
        what: "reading the candidate".into(),
        message: "the tag was listed but is gone".into(),
        hint: Some("run promote again".into()),
    })?;
    out.digest = Some(m.digest.clone());
    out.reference = Some(format!("{target_repo}:{channel_tag}@{}", m.digest));
    if req.explain {
        return Ok(out);
    }
    // Channel tags never move, like timestamp tags.
    if let Some(d) = target_client.head_manifest(&channel_tag)? {
        if d.digest != m.digest {
            return Err(Error::TagExists {
                tag: format!("{target_repo}:{channel_tag}"),
                existing: d.digest,
                new: m.digest,
            });
        }
    } else {
        if let Some(t) = &target {
            let (mounted, uploaded) = copy_blobs(&source, t, &source_repo, &m.bytes)?;
            out.mounted_blobs = mounted;
            out.uploaded_blobs = uploaded;
        }
        let put = target_client.put_manifest(&channel_tag, &m.bytes, &m.media_type)?;
        if put.digest != m.digest {
            return Err(Error::Registry {
                reference: format!("{target_repo}:{channel_tag}"),
                what: "copying the manifest".into(),
                message: format!("stored as {}, not {}", put.digest, m.digest),
                hint: None,
            });
        }
        out.promoted = true;
    }
    if out.promoted {
        let record = Record {
            tag: channel_tag.clone(),
            from_tag: candidate.tag.clone(),
            from_repository: source_repo.to_string(),
            digest: m.digest.clone(),
            actor: req.actor.clone(),
            at: Timestamp::now().to_string(),
            gate_at: req.at.map(|t| t.to_string()),
            because,
            forced,
            reason: if forced { req.force.clone() } else { None },
            run_url: req.run_url.clone(),
            evidence: out.evidence.clone(),
        };
        let subject = Descriptor {
            media_type: m.media_type.clone(),
            digest: m.digest.clone(),
            size: m.bytes.len() as u64,
            artifact_type: None,
            annotations: BTreeMap::new(),
        };
        let attached = target_client
            .attach_referrer(&subject, &artifact(&record)?)
            .map_err(|e| after_promote_error(e, &channel_tag))?;
        out.record = Some(attached.descriptor.digest);
    }
    Ok(out)
}

/// What changes with the promotion `out` decided: the channel's newest
/// release against the candidate it promotes or waits on; `None` when the
/// channel is up to date or there is no candidate. Never fails: a diff
/// that cannot be made says why ([`crate::diff::review`]).
pub fn review(
    req: &Promotion,
    out: &PromotionReport,
    limits: &crate::diff::Limits,
) -> Option<crate::diff::review::Review> {
    if !matches!(out.decision, DecisionKind::Promote | DecisionKind::Wait) {
        return None;
    }
    let candidate = out.candidate.as_deref()?;
    let target = req.target_repository.as_deref().unwrap_or(&req.repository);
    Some(crate::diff::review::promotion(
        &options(req, &req.repository),
        (&req.repository, candidate),
        &options(req, target),
        out.current.as_deref().map(|c| (target, c)),
        &req.to,
        limits,
    ))
}

/// Checks that channel tag `current` (`TO-<ts>-<sha7>` in `target`) holds
/// the same digest as the candidate tag of the same name
/// (`FROM-<ts>-<sha7>` in `source`); refuses with both digests otherwise.
fn check_channel_tag(
    source: &Client,
    target: &Client,
    from: &str,
    current: &channel::Stamped,
) -> Result<()> {
    let candidate_tag = format!("{from}-{}-{}", current.ts, current.sha7);
    let Some(held) = target.head_manifest(&current.tag)? else {
        return Ok(()); // deleted since it was listed: nothing to compare
    };
    let candidate = source.head_manifest(&candidate_tag)?.map(|d| d.digest);
    if candidate.as_deref() == Some(held.digest.as_str()) {
        return Ok(());
    }
    Err(Error::ChannelMismatch {
        tag: format!("{}:{}", target.repository(), current.tag),
        digest: held.digest,
        candidate_tag: format!("{}:{candidate_tag}", source.repository()),
        candidate: match candidate {
            Some(d) => format!("holds {d}"),
            None => "does not exist".to_string(),
        },
    })
}

/// The referrer artifact for `record`.
pub fn artifact(record: &Record) -> Result<Artifact> {
    let bytes = serde_json::to_vec(record)
        .map_err(|e| Error::json("serializing the promotion record", e))?;
    Ok(Artifact {
        artifact_type: ARTIFACT_TYPE.to_string(),
        layers: vec![(ARTIFACT_TYPE.to_string(), bytes)],
        annotations: BTreeMap::from([
            (ANNOTATION_CREATED.to_string(), record.at.clone()),
            (ANNOTATION_CHANNEL_TAG.to_string(), record.tag.clone()),
        ]),
        title: Some(FILE_NAME.to_string()),
    })
}

/// Reads a promotion record's layer.
pub fn read_record(bytes: &[u8]) -> Result<Record> {
    serde_json::from_slice(bytes).map_err(|e| Error::json("reading a promotion record", e))
}

fn after_promote_error(err: Error, tag: &str) -> Error {
    let extra = format!(
        "the channel tag {tag} was written, but its promotion record was not; the promotion is \
         in effect (Flux will pick it up); attach the record by hand or note it in the change log"
    );
    match err {
        Error::Registry {
            reference,
            what,
            message,
            hint,
        } => Error::Registry {
            reference,
            what,
            message,
            hint: Some(match hint {
                Some(h) => h.then(format!("; {extra}")),
                None => extra.into(),
            }),
        },
        other => other,
    }
}

/// Makes every blob of `manifest` available in `target`: a cross-repository
/// mount from `source_repo` (same registry), else a download and upload.
/// Returns (mounted, uploaded).
fn copy_blobs(
    source: &Client,
    target: &Client,
    source_repo: &registry::Repository,
    manifest: &[u8],
) -> Result<(usize, usize)> {
    let view = ManifestView::parse(manifest)?;
    let mut blobs: Vec<Descriptor> = view.config.into_iter().collect();
    blobs.extend(view.layers);
    let same_host = target.repository().host == source_repo.host;
    let (mut mounted, mut uploaded) = (0, 0);
    for b in blobs {
        if same_host && target.mount_blob(&b.digest, &source_repo.name)? {
            mounted += 1;
            continue;
        }
        let bytes = source.get_blob(&b.digest)?;
        target.put_blob(&b.media_type, &bytes)?;
        uploaded += 1;
    }
    Ok((mounted, uploaded))
}

#[path = "promote_evidence.rs"]
mod evidence_of;
pub use evidence_of::CandidateReport;
#[cfg(test)]
pub(crate) use evidence_of::IgnoredRecord;
use evidence_of::judge_candidates;

#[cfg(test)]
#[path = "promote_tests.rs"]
mod tests;
