//! A push to a registry repository: [`RegistryPush`], one value holding
//! what the push and its guards share, whose doc comment tells the order
//! of a push and how it meets a racing run. `crate::registry` talks HTTP;
//! this module and its siblings decide the order.

use crate::error::{Error, PublishedSoFar, Result};
use crate::image::Descriptor;
use crate::image::artifact::{self, Artifact};
use crate::notice::Notice;
use crate::provenance;
use crate::publish::cache::{RepoCache, TagImage};
use crate::publish::upload::{self, KnownTag, Pushed, ReferrerProgress};
use crate::publish::{Provenance, Publication, Published, Publisher, PushReport};
use crate::registry::{self, Client};

/// A registry repository as a [`Publisher`]: each publication is one
/// [`RegistryPush`].
#[derive(Debug, Clone, Copy)]
pub struct RegistryRepo<'a> {
    /// How to reach the repository.
    pub options: &'a registry::Options,
}

impl Publisher for RegistryRepo<'_> {
    fn name(&self) -> String {
        self.options.repository.clone()
    }

    /// A registry is never inside a folder.
    fn check_outside(&self, _folder: &std::path::Path) -> Result<()> {
        Ok(())
    }

    fn publish(&self, publication: &Publication<'_>) -> Result<Published> {
        RegistryPush::open(self.options, publication)?.run()
    }
}

/// One push of an image to a registry repository, and the state its
/// guards share: the client (authenticated once), what the run has read
/// from the repository ([`RepoCache`]: one tag listing, each tag's image
/// at most once), and the [`Publication`] (the image and its tags, the
/// timestamp tag with the commit it names and the checkout that orders
/// commits, the branch tag and the forward rules, the provenance). The
/// guards are its methods ([`super::guards`]).
///
/// # The order
///
/// The order of operations is what makes a push safe and idempotent:
///
/// 1. **Authenticate** when opened: anonymous, Basic, or the Bearer-token
///    challenge flow of ghcr.io and distribution's `auth: token`.
/// 2. **Before tagging**, with a timestamp tag: list the tags once, read
///    side by side the images the guards then read one by one
///    ([`RegistryPush::read_ahead`]); refuse a prefix whose newest tag
///    another ref published ([`RegistryPush::check_prefix_owner`],
///    [`crate::error::Error::PrefixShared`]); run the anomaly check (what
///    Flux's numerical policy will make of the new tag,
///    [`RegistryPush::check_anomaly`]). A list or an image that cannot be
///    read is a warning, not a failure.
/// 3. **Decide the branch tag's move** ([`RegistryPush::plan_branch`]): a
///    sideways move is refused ([`crate::error::Error::Rewind`]) before
///    anything is pushed.
/// 4. **Ask what every tag names** (`HEAD`, unless this run already read
///    it or its tag list proves it absent): a timestamp tag that names
///    another digest stops the push before anything is uploaded
///    ([`crate::error::Error::TagExists`]); when every tag already names
///    our digest there is nothing to upload.
/// 5. **Upload every blob the registry lacks**, all side by side (layer,
///    config and the provenance referrer's blobs): one `POST` that mounts
///    the blob from this repository asks whether it is there and opens its
///    upload session at once; then one `PUT` when it fits in
///    [`registry::CHUNK_SIZE`], else `PATCH` chunks read from disk, or one
///    streamed `PUT` with `monolithic`.
/// 6. **Put the manifest**, our exact bytes, under each tag that does not
///    already name it: only now, so a tag never names missing content. The
///    provenance referrer of an image this push created goes up while the
///    timestamp tag settles (see below).
/// 7. **Move the branch tag** ([`RegistryPush::put_branch`]); meanwhile
///    attach the provenance (unless one for the same commit and ref is
///    there); then read the branch tag back and repair a racing run's
///    backwards move ([`RegistryPush::finish_branch`]).
///
/// # Racing runs
///
/// The distribution API has no conditional put: two runs may put the same
/// tag at once, and the last put wins. A push narrows that race by reading
/// back what it wrote, once a racing put still in the registry's hands has
/// had time to land (twice our own put's time, 100 ms to 5 s):
///
/// - a **timestamp tag** is read just before its put (a racing run may have
///   taken it while the blobs went up) and read back after it; a run whose
///   read-back names another digest fails with both
///   ([`crate::error::Error::TagRaced`], exit 3) instead of reporting a
///   digest its tag does not name. Two runs that built different content
///   for one commit never both succeed.
/// - the **branch tag** is put, then the tags are listed again: when the
///   list holds a timestamp tag of another commit that a repair could
///   follow, the branch tag is read, and a racing run that moved it
///   backwards (an older job finishing last) is repaired by moving it on
///   to the newest tagged descendant. A run that put nothing repairs
///   nothing (a racing run reads back its own put).
///
/// A racing put slower than the wait can still go unseen: the window is
/// narrowed, not closed.
pub struct RegistryPush<'a> {
    /// The repository's client, authenticated once for the whole push.
    pub(super) client: Client,
    /// What this push has read from the repository.
    pub(super) cache: RepoCache,
    /// What is published, and the rules around it.
    pub(super) publication: &'a Publication<'a>,
}

impl<'a> RegistryPush<'a> {
    /// Opens (and authenticates) the client for the repository in `options`.
    pub fn open(
        options: &registry::Options,
        publication: &'a Publication<'a>,
    ) -> Result<RegistryPush<'a>> {
        Ok(RegistryPush {
            client: Client::open(options)?,
            cache: RepoCache::default(),
            publication,
        })
    }

    /// Publishes in the order of the type's doc comment. A failure after
    /// the image is under its tags ([`Error::AfterPublish`]) says what is
    /// in the registry.
    pub fn run(mut self) -> Result<Published> {
        let mut warnings = Vec::new();
        let anomaly = self.check_before_tagging(&mut warnings)?;
        let branch_move = self.plan_branch()?;
        let subject = self.publication.image.manifest_descriptor();
        let referrer = match &self.publication.provenance {
            Provenance::Attach(facts) => Some(provenance::artifact(
                &self.client.repository().to_string(),
                &subject.digest,
                facts,
            )?),
            _ => None,
        };
        let (pushed, progress) = self.upload(referrer.as_ref())?;
        let mut so_far = PublishedSoFar {
            reference: pushed.reference.clone(),
            digest: subject.digest.clone(),
            tags: self.publication.tags.to_vec(),
            pushed: pushed.pushed,
            branch_tag: None,
            provenance: None,
            warnings: warnings.clone(),
        };
        let after = Upload {
            pushed,
            progress,
            branch_move,
            referrer,
            subject,
        };
        self.after_upload(after, anomaly, warnings, &mut so_far)
            .map_err(|error| Error::AfterPublish {
                published: Box::new(so_far),
                error: Box::new(error),
            })
    }

    /// Step 7, once the image is under its tags: the branch tag, the
    /// provenance, the branch tag's read-back. Records in `so_far` what
    /// each step put.
    fn after_upload(
        &mut self,
        after: Upload,
        anomaly: Option<crate::release::ordering::Anomaly>,
        mut warnings: Vec<Notice>,
        so_far: &mut PublishedSoFar,
    ) -> Result<Published> {
        let Upload {
            pushed,
            progress,
            branch_move,
            referrer,
            subject,
        } = after;
        // The branch tag goes up; while a racing put lands, the provenance.
        let moving = self.put_branch(branch_move)?;
        if let Some(m) = moving.as_ref().filter(|m| m.wrote()) {
            so_far.branch_tag = Some(m.name().to_string());
            so_far.pushed = true;
        }
        let provenance = match (&self.publication.provenance, &referrer) {
            (Provenance::Attach(facts), Some(art)) => Some(
                self.attach_provenance(&subject, facts, art, progress)
                    .map_err(|e| provenance::after_push_error(e, &pushed.reference)),
            ),
            (Provenance::Unattested(why), _) => {
                warnings.push(Notice::NoProvenance(*why));
                None
            }
            _ => None,
        };
        if let Some(Ok(d)) = &provenance {
            so_far.provenance = Some(d.clone());
        }
        so_far.warnings.clone_from(&warnings);
        let mut branch = self.finish_branch(moving)?;
        if let Some(b) = &mut branch {
            // Held while the timestamp tags went back: the force-push
            // dropped the commit the tag keeps.
            if let crate::branch_tag::Change::Held { rewound, .. } = &mut b.change {
                *rewound = anomaly.as_ref().is_some_and(|a| {
                    a.kind == crate::release::ordering::AnomalyKind::RewoundHistory
                });
            }
            if let Some(u) = &b.unordered {
                warnings.push(Notice::BranchUnordered {
                    tag: b.name.clone(),
                    count: u.count,
                    first: u.first.clone(),
                });
            }
        }
        let provenance = provenance.transpose()?;
        // A branch tag made or moved is a change to the registry too.
        let branch_changed = branch.as_ref().is_some_and(|b| b.changed());
        Ok(Published {
            output: None,
            new_blobs: pushed.uploaded_blobs,
            push: Some(PushReport {
                reference: pushed.reference,
                uploaded_blobs: pushed.uploaded_blobs,
                uploaded_bytes: pushed.uploaded_bytes,
                pushed: pushed.pushed || branch_changed,
                provenance,
            }),
            anomaly,
            branch,
            warnings,
        })
    }

    /// Steps 4 to 6: the image under its tags, telling the upload what this
    /// run already knows each tag names; then remembers that they name it.
    fn upload(&mut self, referrer: Option<&Artifact>) -> Result<(Pushed, ReferrerProgress)> {
        let Publication { image, tags, .. } = *self.publication;
        let known: Vec<KnownTag> = tags
            .iter()
            .map(|t| match self.cache.known(t) {
                Some(Some(n)) => KnownTag::Names(n.digest.clone()),
                Some(None) => KnownTag::Absent,
                None => KnownTag::Unknown,
            })
            .collect();
        let done = self
            .client
            .run(|s| upload::ordered_push(s, image, tags, &known, referrer))?;
        let ours = TagImage::of(&image.manifest);
        for t in tags {
            self.cache.remember(t, Some(ours.clone()));
        }
        Ok(done)
    }

    /// Attaches the provenance referrer `art` of the image `subject` after
    /// the push, unless one for the same (commit, ref) is there (see
    /// [`provenance::attach`]): a fresh image has none, and its referrer
    /// was put beside the push. Returns the referrer's digest.
    fn attach_provenance(
        &self,
        subject: &Descriptor,
        facts: &provenance::Facts,
        art: &Artifact,
        progress: ReferrerProgress,
    ) -> Result<String> {
        let client = &self.client;
        if let Some(put) = progress.put {
            let (descriptor, indexed) = put?;
            if !indexed {
                client.run(|s| s.index_referrer(subject, &descriptor))?;
            }
            return Ok(descriptor.digest);
        }
        let blobs_there = match progress.blobs {
            Some(up) => {
                up?;
                true
            }
            None => false,
        };
        if !progress.fresh {
            let tag = artifact::referrers_tag(&subject.digest);
            let (listed, read) = (self.cache.lists(&tag), self.cache.referrers_index(&tag));
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
}

/// What the upload left for step 7.
struct Upload {
    pushed: Pushed,
    progress: ReferrerProgress,
    branch_move: Option<crate::release::ordering::BranchMove>,
    referrer: Option<Artifact>,
    subject: Descriptor,
}
