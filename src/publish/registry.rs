//! The registry publisher: pushes an [`Image`] through a
//! [`registry::Client`] (`crate::registry` talks HTTP; this module decides
//! the order). The order of operations is what makes a push safe and
//! idempotent:
//!
//! 1. authenticate (anonymous, Basic, or the Bearer-token challenge flow of
//!    ghcr.io and distribution's `auth: token`, when the client is opened);
//! 2. ask what every tag names (`HEAD`, unless this run already read it or
//!    its tag list proves it absent): a timestamp tag that names another
//!    digest stops the push before anything is uploaded
//!    ([`Error::TagExists`]); when every tag already names our digest there
//!    is nothing to do;
//! 3. every blob the registry does not have is uploaded, all side by side
//!    (layer, config and a provenance referrer's blobs): one `POST` that
//!    mounts the blob from this repository asks whether it is there and
//!    opens its upload session at once; then one `PUT` when it fits in
//!    [`registry::CHUNK_SIZE`], else `PATCH` chunks read from disk, or one
//!    streamed `PUT` with `monolithic`;
//! 4. only then the manifest is put, with our exact bytes, under each tag
//!    that does not already name it; a timestamp tag is read just before
//!    its put and read back after it ([`claim_timestamp_tag`],
//!    [`confirm_timestamp_tag`]), so a run that
//!    lost a race with a run of other content fails (exit 3) instead of
//!    reporting a digest its tag does not name. A provenance referrer of
//!    an image this push created goes up while the tag settles.
//!
//! [`publish`] wraps a push in what a registry target adds around it: the
//! prefix's owner and the anomaly check before tagging, the guarded branch
//! tag ([`super::guards`]), and the provenance referrer, reading each thing
//! once per run ([`Seen`]).

use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::history::{Checkout, CommitInfo};
use crate::image::artifact::{self, Artifact};
use crate::image::{Descriptor, Image, MANIFEST_MEDIA_TYPE};
use crate::provenance;
use crate::publish::guards;
use crate::publish::seen::{Named, Seen};
use crate::registry::blobs::Blob;
use crate::registry::{self, Client, Session};
use crate::release::ordering::{Anomaly, ForcedPush};
use crate::report::PushReport;
use crate::tag::is_timestamp_tag;

/// What a push did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    /// `HOST/NAME:FIRST_TAG@sha256:...` (or `HOST/NAME@sha256:...` untagged).
    pub reference: String,
    /// Blobs uploaded (the registry did not have them).
    pub uploaded_blobs: usize,
    /// Bytes of the uploaded blobs.
    pub uploaded_bytes: u64,
    /// False when the registry already held everything under every tag.
    pub pushed: bool,
    /// HTTP requests sent to the registry after authentication.
    pub requests: u64,
}

/// Pushes `image` under `tags` to the repository in `opts`.
pub fn push(image: &Image, tags: &[String], opts: &registry::Options) -> Result<Pushed> {
    push_with(&Client::open(opts)?, image, tags)
}

/// Pushes `image` under `tags` through `client` (see the module docs).
pub fn push_with(client: &Client, image: &Image, tags: &[String]) -> Result<Pushed> {
    let before = vec![Before::Unknown; tags.len()];
    let (pushed, _) = client.run(|s| ordered_push(s, image, tags, &before, None))?;
    Ok(pushed)
}

async fn put_manifest(s: &Session, image: &Image, reference: &str) -> Result<()> {
    let put = s
        .put_manifest_bytes(reference, &image.manifest, MANIFEST_MEDIA_TYPE)
        .await?;
    if put.digest != image.digest {
        return Err(s.t.registry_err(
            format!("putting manifest {}:{reference}", s.t.repo),
            format!("the manifest digest {} is not {}", put.digest, image.digest),
        ));
    }
    Ok(())
}

/// How long after our put of a timestamp tag it is read back: a racing
/// run's put that the registry was still processing when ours finished
/// lands within about one put's time, so twice ours (at least
/// [`SETTLE_MIN`], at most [`SETTLE_MAX`]).
const SETTLE_MIN: Duration = Duration::from_millis(100);
/// See [`SETTLE_MIN`].
const SETTLE_MAX: Duration = Duration::from_secs(5);

/// How long to wait after a put that took `put` before reading the tag
/// back (see [`SETTLE_MIN`]).
pub(crate) fn settle(put: Duration) -> Duration {
    (put * 2).clamp(SETTLE_MIN, SETTLE_MAX)
}

/// Puts `image` under the timestamp tag `tag`, which was free when the push
/// began: read just before the put (a racing run may have taken it while
/// blobs went up), and read back by [`confirm_timestamp_tag`] after it has
/// settled. The distribution API has no conditional put, so the read-back
/// is what tells a run that lost a race: it fails (exit 3,
/// [`Error::TagRaced`]) instead of reporting a digest its tag does not
/// name. A racing put slower than the settling time can still go unseen:
/// the window is narrowed, not closed. Returns how long to let a racing
/// put land before the read-back (`None`: the tag named our digest).
async fn claim_timestamp_tag(s: &Session, image: &Image, tag: &str) -> Result<Option<Duration>> {
    match s.manifest_digest(tag).await? {
        Some(d) if d == image.digest => return Ok(None),
        Some(d) => {
            return Err(Error::TagExists {
                tag: format!("{}:{tag}", s.t.repo),
                existing: d,
                new: image.digest.clone(),
            });
        }
        None => {}
    }
    let started = Instant::now();
    put_manifest(s, image, tag).await?;
    Ok(Some(settle(started.elapsed())))
}

/// Reads a timestamp tag back after [`claim_timestamp_tag`] put it.
async fn confirm_timestamp_tag(s: &Session, image: &Image, tag: &str) -> Result<()> {
    match s.manifest_digest(tag).await? {
        Some(d) if d == image.digest => Ok(()),
        Some(d) => Err(Error::TagRaced {
            tag: format!("{}:{tag}", s.t.repo),
            theirs: d,
            ours: image.digest.clone(),
        }),
        None => Err(s.t.registry_err(
            format!("reading back {}:{tag}", s.t.repo),
            "the tag is missing right after the registry accepted it",
        )),
    }
}

/// What a tag named before the push, as far as this run knows.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Before {
    /// This run read it: it names this digest.
    Names(String),
    /// This run's tag list does not hold it.
    Absent,
    /// Not known: ask.
    Unknown,
}

/// A provenance referrer to put beside the push.
struct Referrer<'a> {
    artifact: &'a Artifact,
}

/// What the push learnt and did for the provenance beside it. A failure
/// of the referrer's part is kept here, not raised: it is the
/// provenance's, reported after the push as such.
#[derive(Debug, Default)]
struct Beside {
    /// The image manifest was not in the repository before this push (its
    /// layer or config blob was not): nothing can refer to it yet.
    fresh: bool,
    /// The referrer's blobs went up with the image's (or failed to).
    referrer_blobs: Option<Result<()>>,
    /// The referrer's manifest was put (a fresh image): its descriptor, and
    /// whether the registry indexed it itself (`OCI-Subject`).
    referrer_put: Option<Result<(Descriptor, bool)>>,
}

async fn ordered_push(
    s: &Session,
    image: &Image,
    tags: &[String],
    before: &[Before],
    referrer: Option<Referrer<'_>>,
) -> Result<(Pushed, Beside)> {
    use futures_util::future::{join, try_join, try_join_all};
    let mut beside = Beside::default();
    // 1. What does every tag name now? Refuse before uploading anything.
    // What this run already read (or its tag list proves) is not asked
    // again; a tag that names another digest is put over, so it needs no
    // question either, unless it is a timestamp tag (refused at once).
    let current = try_join_all(tags.iter().zip(before).map(|(t, b)| async move {
        match b {
            Before::Names(d) => Ok(Some(d.clone())),
            Before::Absent => Ok(None),
            Before::Unknown => s.manifest_digest(t).await,
        }
    }))
    .await?;
    let mut to_tag = Vec::new();
    let mut content_present = false;
    for (tag, digest) in tags.iter().zip(current) {
        match digest {
            Some(d) if d == image.digest => content_present = true,
            Some(d) if is_timestamp_tag(tag) => {
                return Err(Error::TagExists {
                    tag: format!("{}:{tag}", s.t.repo),
                    existing: d,
                    new: image.digest.clone(),
                });
            }
            _ => to_tag.push(tag.clone()),
        }
    }
    let untagged = tags.is_empty();
    if untagged {
        content_present = s.manifest_digest(&image.digest).await?.is_some();
    }
    // 2. Blobs, unless a manifest naming them is already there (a
    // registry only accepts a manifest whose blobs it holds). Layer,
    // config and the referrer's blobs go side by side.
    let (mut uploaded_blobs, mut uploaded_bytes) = (0, 0);
    if !content_present && (untagged || !to_tag.is_empty()) {
        let layer = s.ensure_blob(&image.layer_descriptor, Blob::File(image.layer.file.path()));
        let config = s.ensure_blob(&image.config_descriptor, Blob::Memory(&image.config));
        let referrer_blobs = async {
            Ok(match &referrer {
                Some(r) => Some(s.referrer_blobs(r.artifact).await),
                None => None,
            })
        };
        let ((layer, config), referrer_blobs) =
            try_join(try_join(layer, config), referrer_blobs).await?;
        for (up, d) in [
            (layer, &image.layer_descriptor),
            (config, &image.config_descriptor),
        ] {
            if up {
                uploaded_blobs += 1;
                uploaded_bytes += d.size;
            }
        }
        // A manifest naming a blob the registry did not have cannot have
        // been there.
        beside.fresh = layer || config;
        beside.referrer_blobs = referrer_blobs;
    }
    // The referrer of a fresh image: nothing can list it yet, so it is put
    // without asking, as soon as its subject is there.
    let put_it = beside.fresh && matches!(beside.referrer_blobs, Some(Ok(())));
    let put_referrer = || async {
        match &referrer {
            Some(r) if put_it => {
                let subject = image.manifest_descriptor();
                Some(s.put_referrer(&subject, r.artifact).await)
            }
            _ => None,
        }
    };
    // 3. The manifest, under each tag that does not name it yet; a
    // timestamp tag is read just before its put and, once a racing put has
    // had time to land (the referrer goes up meanwhile), read back.
    let mut manifests_put = 0;
    if untagged {
        if !content_present {
            put_manifest(s, image, &image.digest).await?;
            manifests_put += 1;
            beside.referrer_put = put_referrer().await;
        }
    } else {
        let claims = try_join_all(to_tag.iter().map(|t| async move {
            if is_timestamp_tag(t) {
                claim_timestamp_tag(s, image, t).await
            } else {
                put_manifest(s, image, t).await.map(|()| None)
            }
        }))
        .await?;
        manifests_put += to_tag.len();
        let wait = claims.iter().flatten().max().copied();
        let (_, put) = join(tokio::time::sleep(wait.unwrap_or_default()), put_referrer()).await;
        beside.referrer_put = put;
        try_join_all(
            to_tag
                .iter()
                .zip(&claims)
                .filter(|(_, c)| c.is_some())
                .map(|(t, _)| confirm_timestamp_tag(s, image, t)),
        )
        .await?;
    }
    let reference = match tags.first() {
        Some(t) => format!("{}:{t}@{}", s.t.repo, image.digest),
        None => format!("{}@{}", s.t.repo, image.digest),
    };
    let pushed = Pushed {
        reference,
        uploaded_blobs,
        uploaded_bytes,
        pushed: manifests_put > 0 || uploaded_blobs > 0,
        requests: s.t.requests(),
    };
    Ok((pushed, beside))
}

/// Whether to attach provenance after the push.
#[derive(Debug)]
pub enum Provenance {
    /// Attach a statement of these facts.
    Attach(Box<provenance::Facts>),
    /// None was asked for.
    Off,
    /// It was asked for but cannot be given; the reason becomes a warning.
    Unattested(&'static str),
}

/// What a registry publish does around the push.
#[derive(Debug)]
pub struct Plan<'a> {
    /// The image.
    pub image: &'a Image,
    /// Its tags, the timestamp tag first when there is one.
    pub tags: &'a [String],
    /// The timestamp tag and the commit it names, with the checkout that
    /// orders commits: turns on the anomaly check and the branch tag.
    pub stamp: Option<(&'a str, &'a CommitInfo, &'a Checkout)>,
    /// The guarded branch tag to move, if any.
    pub branch_tag: Option<&'a str>,
    /// Move the branch tag even when history diverged.
    pub allow_rewind: bool,
    /// This run follows a force-push of the branch (tells a rewind from a
    /// re-run of an older job).
    pub forced: Option<ForcedPush>,
    /// The git ref this run builds (`refs/heads/main`), when known: a
    /// prefix whose newest tag another ref published is refused.
    pub git_ref: Option<String>,
    /// Provenance after the push.
    pub provenance: Provenance,
}

/// What publishing to a registry did.
#[derive(Debug)]
pub struct Published {
    /// The push.
    pub push: PushReport,
    /// What the anomaly check found before tagging.
    pub anomaly: Option<Anomaly>,
    /// What happened to the branch tag.
    pub branch: Option<guards::BranchReport>,
    /// What the user should know that did not stop the publish.
    pub warnings: Vec<String>,
}

/// Publishes as `plan` says to the registry in `opts`: before tagging, a
/// prefix another ref publishes under is refused and the anomaly check
/// runs; a refused sideways branch-tag move before anything is pushed;
/// the push, the branch tag, then provenance. Each thing is read once per
/// run ([`Seen`]); the provenance referrer's blobs go up with the image's,
/// and its index while the branch tag settles.
pub fn publish(opts: &registry::Options, plan: Plan<'_>) -> Result<Published> {
    let client = Client::open(opts)?;
    let mut seen = Seen::default();
    let mut warnings = Vec::new();
    let mut anomaly = None;
    // Before tagging: who else publishes under the prefix, and what Flux's
    // numerical policy will make of the new tag. One read serves both.
    if let Some((t, c, checkout)) = plan.stamp {
        let ts = u64::try_from(c.timestamp).unwrap_or(0);
        let owner_and_anomaly = match seen.tags(&client) {
            Ok(_) => {
                let ours = matches!(plan.provenance, Provenance::Attach(_))
                    .then_some(plan.image.digest.as_str());
                guards::read_ahead(&client, &mut seen, t, ts, plan.branch_tag, ours);
                if let Some(w) = guards::check_prefix_owner(
                    &client,
                    &mut seen,
                    &c.id,
                    ts,
                    t,
                    plan.git_ref.as_deref(),
                )? {
                    warnings.push(w);
                }
                guards::check_anomaly(
                    &client,
                    &mut seen,
                    checkout,
                    &c.id,
                    ts,
                    t,
                    plan.forced.as_ref(),
                )
            }
            Err(e) => Err(e),
        };
        match owner_and_anomaly {
            Ok(a) => anomaly = a,
            Err(e) => warnings.push(format!(
                "could not check the existing tags for anomalies: {e}"
            )),
        }
    }
    // Refuse a sideways branch-tag move before pushing anything.
    let branch_plan = match (plan.branch_tag, plan.stamp) {
        (Some(name), Some((_, c, checkout))) => Some((
            name,
            guards::plan_branch(
                &client,
                &mut seen,
                checkout,
                name,
                &c.id,
                plan.allow_rewind,
                plan.forced.as_ref(),
            )?,
        )),
        _ => None,
    };
    let subject = plan.image.manifest_descriptor();
    let referrer = match &plan.provenance {
        Provenance::Attach(facts) => Some(provenance::artifact(
            &client.repository().to_string(),
            &subject.digest,
            facts,
        )?),
        _ => None,
    };
    let before: Vec<Before> = plan
        .tags
        .iter()
        .map(|t| match seen.known(t) {
            Some(Some(n)) => Before::Names(n.digest.clone()),
            Some(None) => Before::Absent,
            None => Before::Unknown,
        })
        .collect();
    let (p, beside) = client.run(|s| {
        ordered_push(
            s,
            plan.image,
            plan.tags,
            &before,
            referrer.as_ref().map(|artifact| Referrer { artifact }),
        )
    })?;
    let ours = Named::of(&plan.image.manifest);
    for t in plan.tags {
        seen.remember(t, Some(ours.clone()));
    }
    // The branch tag goes up; while a racing put lands, the provenance.
    let moving = match (&branch_plan, plan.stamp) {
        (Some((name, how)), Some((t, c, _))) => Some(guards::put_branch(
            &client,
            &mut seen,
            name,
            how,
            &plan.image.manifest,
            &c.id,
            t,
        )?),
        _ => None,
    };
    let provenance = match (&plan.provenance, &referrer) {
        (Provenance::Attach(facts), Some(art)) => Some(
            attach_provenance(&client, &seen, &subject, facts, art, beside)
                .map_err(|e| provenance::after_push_error(e, &p.reference)),
        ),
        (Provenance::Unattested(why), _) => {
            warnings.push(format!("no provenance attached: {why}"));
            None
        }
        _ => None,
    };
    let mut branch = None;
    if let (Some(moving), Some((_, _, checkout))) = (moving, plan.stamp) {
        let report = guards::finish_branch(&client, &mut seen, checkout, moving)?;
        warnings.extend(report.warnings.iter().cloned());
        branch = Some(report);
    }
    let provenance = provenance.transpose()?;
    // A branch tag made or moved is a change to the registry too.
    let branch_changed = branch.as_ref().is_some_and(guards::BranchReport::changed);
    Ok(Published {
        push: PushReport {
            reference: p.reference,
            uploaded_blobs: p.uploaded_blobs,
            uploaded_bytes: p.uploaded_bytes,
            pushed: p.pushed || branch_changed,
            provenance,
        },
        anomaly,
        branch,
        warnings,
    })
}

/// Attaches the provenance referrer `art` of the image `subject` after the
/// push, unless one for the same (commit, ref) is there (see
/// [`provenance::attach`]): a fresh image has none, and its referrer was
/// put beside the push. Returns the referrer's digest.
fn attach_provenance(
    client: &Client,
    seen: &Seen,
    subject: &Descriptor,
    facts: &provenance::Facts,
    art: &Artifact,
    beside: Beside,
) -> Result<String> {
    if let Some(put) = beside.referrer_put {
        let (descriptor, indexed) = put?;
        if !indexed {
            client.run(|s| s.index_referrer(subject, &descriptor))?;
        }
        return Ok(descriptor.digest);
    }
    let blobs_there = match beside.referrer_blobs {
        Some(up) => {
            up?;
            true
        }
        None => false,
    };
    if !beside.fresh {
        let tag = artifact::referrers_tag(&subject.digest);
        let (listed, read) = (seen.lists(&tag), seen.referrers_index(&tag));
        if let Some(d) = provenance::attached(client, &subject.digest, facts, listed, read)? {
            return Ok(d);
        }
    }
    client.run(|s| async move {
        if !blobs_there {
            s.referrer_blobs(art).await?;
        }
        let (descriptor, indexed) = s.put_referrer(subject, art).await?;
        if !indexed {
            s.index_referrer(subject, &descriptor).await?;
        }
        Ok(descriptor.digest)
    })
}
