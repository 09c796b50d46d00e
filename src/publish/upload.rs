//! The image's part of a registry push, over one registry session: ask
//! what the tags name, upload the blobs the registry lacks, put the
//! manifest under each tag, a timestamp tag claimed and read back. Steps
//! 4 to 6 of the order [`super::registry::RegistryPush`] describes; the
//! guards around it are [`super::guards`]'.

use std::time::{Duration, Instant};

use futures_util::future::{join, try_join, try_join_all};

use crate::error::{Error, Result};
use crate::image::artifact::Artifact;
use crate::image::{Descriptor, Image, MANIFEST_MEDIA_TYPE};
use crate::registry::Session;
use crate::registry::blobs::Blob;
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

/// What a tag named before the push, as far as this run knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KnownTag {
    /// This run read it: it names this digest.
    Names(String),
    /// This run's tag list does not hold it.
    Absent,
    /// Not known: ask.
    Unknown,
}

/// What the push learnt and did for the provenance referrer put beside
/// it. A failure of the referrer's part is kept here, not raised: it is
/// the provenance's, reported after the push as such.
#[derive(Debug, Default)]
pub(crate) struct ReferrerProgress {
    /// The image manifest was not in the repository before this push (its
    /// layer or config blob was not): nothing can refer to it yet.
    pub(crate) fresh: bool,
    /// The referrer's blobs went up with the image's (or failed to).
    pub(crate) blobs: Option<Result<()>>,
    /// The referrer's manifest was put (a fresh image): its descriptor, and
    /// whether the registry indexed it itself (`OCI-Subject`).
    pub(crate) put: Option<Result<(Descriptor, bool)>>,
}

/// What step 4 found: the tags to put, and whether the content is there.
struct ToPut {
    /// The tags that do not name the image yet.
    tags: Vec<String>,
    /// A tag (or, untagged, the digest) already names the image, so the
    /// registry holds its blobs.
    content_present: bool,
    /// The push has no tag: the manifest goes up by digest.
    untagged: bool,
}

/// Pushes `image` under `tags` through `s`, `known` saying what the run
/// already knows each tag names (in the order of `tags`), with the
/// provenance `referrer`'s blobs beside the image's and, for an image
/// this push creates, its manifest while the timestamp tag settles.
pub(crate) async fn ordered_push(
    s: &Session,
    image: &Image,
    tags: &[String],
    known: &[KnownTag],
    referrer: Option<&Artifact>,
) -> Result<(Pushed, ReferrerProgress)> {
    let to_put = ask_tags(s, image, tags, known).await?;
    let mut progress = ReferrerProgress::default();
    let (mut uploaded_blobs, mut uploaded_bytes) = (0, 0);
    // Blobs, unless a manifest naming them is already there (a registry
    // only accepts a manifest whose blobs it holds).
    if !to_put.content_present && (to_put.untagged || !to_put.tags.is_empty()) {
        (uploaded_blobs, uploaded_bytes) = upload_blobs(s, image, referrer, &mut progress).await?;
    }
    let manifests_put = put_manifests(s, image, &to_put, referrer, &mut progress).await?;
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
    Ok((pushed, progress))
}

/// What does every tag name now? Refuses before uploading anything. What
/// this run already read (or its tag list proves) is not asked again; a
/// tag that names another digest is put over, so it needs no question
/// either, unless it is a timestamp tag (refused at once).
async fn ask_tags(
    s: &Session,
    image: &Image,
    tags: &[String],
    known: &[KnownTag],
) -> Result<ToPut> {
    let current = try_join_all(tags.iter().zip(known).map(|(t, k)| async move {
        match k {
            KnownTag::Names(d) => Ok(Some(d.clone())),
            KnownTag::Absent => Ok(None),
            KnownTag::Unknown => s.manifest_digest(t).await,
        }
    }))
    .await?;
    let mut to_put = ToPut {
        tags: Vec::new(),
        content_present: false,
        untagged: tags.is_empty(),
    };
    for (tag, digest) in tags.iter().zip(current) {
        match digest {
            Some(d) if d == image.digest => to_put.content_present = true,
            Some(d) if is_timestamp_tag(tag) => {
                return Err(Error::TagExists {
                    tag: format!("{}:{tag}", s.t.repo),
                    existing: d,
                    new: image.digest.clone(),
                });
            }
            _ => to_put.tags.push(tag.clone()),
        }
    }
    if to_put.untagged {
        to_put.content_present = s.manifest_digest(&image.digest).await?.is_some();
    }
    Ok(to_put)
}

/// Uploads the layer, the config and the referrer's blobs side by side,
/// each only when the registry lacks it. Returns the image's blobs and
/// bytes uploaded.
async fn upload_blobs(
    s: &Session,
    image: &Image,
    referrer: Option<&Artifact>,
    progress: &mut ReferrerProgress,
) -> Result<(usize, u64)> {
    let layer = s.ensure_blob(&image.layer_descriptor, Blob::File(image.layer.file.path()));
    let config = s.ensure_blob(&image.config_descriptor, Blob::Memory(&image.config));
    let referrer_blobs = async {
        Ok(match referrer {
            Some(r) => Some(s.referrer_blobs(r).await),
            None => None,
        })
    };
    let ((layer, config), referrer_blobs) =
        try_join(try_join(layer, config), referrer_blobs).await?;
    let (mut blobs, mut bytes) = (0, 0);
    for (up, d) in [
        (layer, &image.layer_descriptor),
        (config, &image.config_descriptor),
    ] {
        if up {
            blobs += 1;
            bytes += d.size;
        }
    }
    // A manifest naming a blob the registry did not have cannot have
    // been there.
    progress.fresh = layer || config;
    progress.blobs = referrer_blobs;
    Ok((blobs, bytes))
}

/// The manifest, under each tag that does not name it yet; a timestamp
/// tag is read just before its put and, once a racing put has had time to
/// land (the referrer of a fresh image goes up meanwhile), read back.
/// Returns how many manifests were put.
async fn put_manifests(
    s: &Session,
    image: &Image,
    to_put: &ToPut,
    referrer: Option<&Artifact>,
    progress: &mut ReferrerProgress,
) -> Result<usize> {
    // The referrer of a fresh image: nothing can list it yet, so it is put
    // without asking, as soon as its subject is there.
    let put_it = progress.fresh && matches!(progress.blobs, Some(Ok(())));
    let put_referrer = || async {
        match referrer {
            Some(r) if put_it => {
                let subject = image.manifest_descriptor();
                Some(s.put_referrer(&subject, r).await)
            }
            _ => None,
        }
    };
    if to_put.untagged {
        if to_put.content_present {
            return Ok(0);
        }
        put_manifest(s, image, &image.digest).await?;
        progress.put = put_referrer().await;
        return Ok(1);
    }
    let claims = try_join_all(to_put.tags.iter().map(|t| async move {
        if is_timestamp_tag(t) {
            claim_timestamp_tag(s, image, t).await
        } else {
            put_manifest(s, image, t).await.map(|()| None)
        }
    }))
    .await?;
    let wait = claims.iter().flatten().max().copied();
    let (_, put) = join(tokio::time::sleep(wait.unwrap_or_default()), put_referrer()).await;
    progress.put = put;
    try_join_all(
        to_put
            .tags
            .iter()
            .zip(&claims)
            .filter(|(_, c)| c.is_some())
            .map(|(t, _)| confirm_timestamp_tag(s, image, t)),
    )
    .await?;
    Ok(to_put.tags.len())
}

async fn put_manifest(s: &Session, image: &Image, reference: &str) -> Result<()> {
    let put = s
        .put_manifest_bytes(reference, &image.manifest, MANIFEST_MEDIA_TYPE)
        .await?;
    if put.digest != image.digest {
        return Err(s.t.registry_err(
            format!(
                "putting manifest {}",
                crate::registry::manifests::named(&s.t.repo, reference)
            ),
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
/// blobs went up). Returns how long to let a racing put land before
/// [`confirm_timestamp_tag`] reads it back (`None`: the tag named our
/// digest).
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

/// Reads a timestamp tag back after [`claim_timestamp_tag`] put it: a run
/// that lost a race fails ([`Error::TagRaced`]).
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
