//! The registry publisher: pushes an [`Image`] through a
//! [`registry::Client`] (`crate::registry` talks HTTP; this module decides
//! the order). The order of operations is what makes a push safe and
//! idempotent:
//!
//! 1. authenticate (anonymous, Basic, or the Bearer-token challenge flow of
//!    ghcr.io and distribution's `auth: token`, when the client is opened);
//! 2. `HEAD` every tag: a timestamp tag that names another digest stops the
//!    push before anything is uploaded ([`Error::TagExists`]); when every tag
//!    already names our digest there is nothing to do;
//! 3. every blob the registry does not have is uploaded (`HEAD` first; layer
//!    and config side by side): in one PUT when it fits in
//!    [`registry::CHUNK_SIZE`], else in PATCH chunks read from disk, or in
//!    one streamed PUT with `monolithic`;
//! 4. only then the manifest is put, with our exact bytes, under each tag
//!    that does not already name it; a timestamp tag is read just before
//!    its put and read back after it ([`put_timestamp_tag`]), so a run that
//!    lost a race with a run of other content fails (exit 3) instead of
//!    reporting a digest its tag does not name.
//!
//! [`publish`] wraps a push in what a registry target adds around it: the
//! prefix's owner and the anomaly check before tagging, the guarded branch
//! tag ([`super::guards`]), and the provenance referrer.

use crate::error::{Error, Result};
use crate::history::{Checkout, CommitInfo};
use crate::image::{Image, MANIFEST_MEDIA_TYPE};
use crate::provenance;
use crate::publish::guards;
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
    client.run(|s| ordered_push(s, image, tags))
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
const SETTLE_MIN: std::time::Duration = std::time::Duration::from_millis(100);
/// See [`SETTLE_MIN`].
const SETTLE_MAX: std::time::Duration = std::time::Duration::from_secs(5);

/// How long to wait after a put that took `put` before reading the tag
/// back (see [`SETTLE_MIN`]).
pub(crate) fn settle(put: std::time::Duration) -> std::time::Duration {
    (put * 2).clamp(SETTLE_MIN, SETTLE_MAX)
}

/// Puts `image` under the timestamp tag `tag`, which was free when the push
/// began: read just before the put (a racing run may have taken it while
/// blobs went up) and read back after it has settled. The distribution API
/// has no conditional put, so the read-back is what tells a run that lost
/// a race: it fails (exit 3, [`Error::TagRaced`]) instead of reporting a
/// digest its tag does not name. A racing put slower than the settling
/// time can still go unseen: the window is narrowed, not closed.
async fn put_timestamp_tag(s: &Session, image: &Image, tag: &str) -> Result<()> {
    let raced = |theirs: String| Error::TagRaced {
        tag: format!("{}:{tag}", s.t.repo),
        theirs,
        ours: image.digest.clone(),
    };
    match s.manifest_digest(tag).await? {
        Some(d) if d == image.digest => return Ok(()),
        Some(d) => {
            return Err(Error::TagExists {
                tag: format!("{}:{tag}", s.t.repo),
                existing: d,
                new: image.digest.clone(),
            });
        }
        None => {}
    }
    let started = std::time::Instant::now();
    put_manifest(s, image, tag).await?;
    tokio::time::sleep(settle(started.elapsed())).await;
    match s.manifest_digest(tag).await? {
        Some(d) if d == image.digest => Ok(()),
        Some(d) => Err(raced(d)),
        None => Err(s.t.registry_err(
            format!("reading back {}:{tag}", s.t.repo),
            "the tag is missing right after the registry accepted it",
        )),
    }
}

async fn ordered_push(s: &Session, image: &Image, tags: &[String]) -> Result<Pushed> {
    use futures_util::future::{try_join, try_join_all};
    // 1. What does every tag name now? Refuse before uploading anything.
    // A tag this session just read as naming this very digest (a re-push)
    // needs no second request.
    let current = try_join_all(tags.iter().map(|t| async move {
        match s.known_digest(t) {
            Some(d) if d == image.digest => Ok(Some(d)),
            _ => s.manifest_digest(t).await,
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
    // registry only accepts a manifest whose blobs it holds). Layer and
    // config go side by side.
    if !content_present && (untagged || !to_tag.is_empty()) {
        let layer = async {
            if !s.blob_exists(&image.layer_descriptor.digest).await? {
                s.upload_blob(&image.layer_descriptor, Blob::File(image.layer.file.path()))
                    .await?;
            }
            Ok::<_, Error>(())
        };
        let config = async {
            if !s.blob_exists(&image.config_descriptor.digest).await? {
                s.upload_blob(&image.config_descriptor, Blob::Memory(&image.config))
                    .await?;
            }
            Ok::<_, Error>(())
        };
        try_join(layer, config).await?;
    }
    // 3. The manifest, under each tag that does not name it yet.
    let mut manifests_put = 0;
    if untagged {
        if !content_present {
            put_manifest(s, image, &image.digest).await?;
            manifests_put += 1;
        }
    } else {
        try_join_all(to_tag.iter().map(|t| async move {
            if is_timestamp_tag(t) {
                put_timestamp_tag(s, image, t).await
            } else {
                put_manifest(s, image, t).await
            }
        }))
        .await?;
        manifests_put += to_tag.len();
    }
    let reference = match tags.first() {
        Some(t) => format!("{}:{t}@{}", s.t.repo, image.digest),
        None => format!("{}@{}", s.t.repo, image.digest),
    };
    let (uploaded_blobs, uploaded_bytes) = s.uploaded();
    Ok(Pushed {
        reference,
        uploaded_blobs,
        uploaded_bytes,
        pushed: manifests_put > 0 || uploaded_blobs > 0,
        requests: s.t.requests(),
    })
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
/// the push, the branch tag, then provenance.
pub fn publish(opts: &registry::Options, plan: Plan<'_>) -> Result<Published> {
    let client = Client::open(opts)?;
    let mut warnings = Vec::new();
    let mut anomaly = None;
    // Before tagging: who else publishes under the prefix, and what Flux's
    // numerical policy will make of the new tag. One read serves both.
    if let Some((t, c, checkout)) = plan.stamp {
        let ts = u64::try_from(c.timestamp).unwrap_or(0);
        match guards::read_prefix(&client, t, ts) {
            Ok(read) => {
                if let Some(w) =
                    guards::check_prefix_owner(&client, &read, &c.id, t, plan.git_ref.as_deref())?
                {
                    warnings.push(w);
                }
                match guards::check_anomaly(&read, checkout, &c.id, ts, t, plan.forced.as_ref()) {
                    Ok(a) => anomaly = a,
                    Err(e) => warnings.push(format!(
                        "could not check the existing tags for anomalies: {e}"
                    )),
                }
            }
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
                checkout,
                name,
                &c.id,
                plan.allow_rewind,
                plan.forced.as_ref(),
            )?,
        )),
        _ => None,
    };
    let p = push_with(&client, plan.image, plan.tags)?;
    let mut branch = None;
    if let (Some((name, how)), Some((t, c, checkout))) = (&branch_plan, plan.stamp) {
        let report =
            guards::move_branch(&client, checkout, name, how, &plan.image.manifest, &c.id, t)?;
        warnings.extend(report.warnings.iter().cloned());
        branch = Some(report);
    }
    let provenance = match &plan.provenance {
        Provenance::Attach(facts) => Some(
            provenance::attach(&client, plan.image, facts)
                .map_err(|e| provenance::after_push_error(e, &p.reference))?,
        ),
        Provenance::Unattested(why) => {
            warnings.push(format!("no provenance attached: {why}"));
            None
        }
        Provenance::Off => None,
    };
    Ok(Published {
        push: PushReport {
            reference: p.reference,
            uploaded_blobs: p.uploaded_blobs,
            uploaded_bytes: p.uploaded_bytes,
            pushed: p.pushed,
            provenance,
        },
        anomaly,
        branch,
        warnings,
    })
}
