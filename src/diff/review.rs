//! The diffs the faces show a reviewer beside what they did: a
//! promotion's (the channel's newest release against the candidate it
//! promotes or waits on) and a publish's (the image before it under the
//! same prefix against the one it pushed).
//!
//! A diff that cannot be made (the registry fails, an image too large)
//! never fails the promotion or the publish: it says why instead.
//!
//! Requests: a promotion's diff opens its own read-only client per
//! repository (one authentication each) and reads two manifests and two
//! layers: 4 requests. A publish's lists the tags and reads the earlier
//! image's manifest and both layers (the new image's layer descriptor is
//! the report's): 4 requests; 1 when the prefix has no earlier image.

use serde::Serialize;

use super::{Diff, Image, Limits, compare};
use crate::registry::{self, Client};
use crate::release::channel;

/// A reviewer's diff, or why there is none.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Review {
    /// What changes.
    Diff(Box<Diff>),
    /// Nothing to compare with, and why (`note`).
    Nothing {
        /// Why there is nothing to compare.
        note: String,
    },
    /// The diff could not be made; the run went on (`error`).
    Failed {
        /// What went wrong.
        error: String,
    },
}

impl Review {
    fn of(result: crate::error::Result<Review>) -> Review {
        result.unwrap_or_else(|e| Review::Failed {
            error: crate::error::error_chain(&e),
        })
    }
}

/// The diff of a promotion: the channel's newest release (`current`,
/// `(HOST/NAME, TAG)` through `target`; `None`: the channel `channel` is
/// empty) against the candidate (`(HOST/NAME, TAG)` through `source`),
/// each through a read-only client (one, when both are in one
/// repository).
pub fn promotion(
    source: &registry::Options,
    candidate: (&str, &str),
    target: &registry::Options,
    current: Option<(&str, &str)>,
    channel: &str,
    limits: &Limits,
) -> Review {
    Review::of((|| {
        let source_client = Client::open_read_only(source)?;
        let (repository, tag) = candidate;
        let new = Image::from_registry(&source_client, tag, format!("{repository}:{tag}"), limits)?;
        let old = match current {
            None => Image::empty(format!("channel {channel} (no release yet)")),
            Some((repository, tag)) => {
                let other = if target.repository == source.repository {
                    None
                } else {
                    Some(Client::open_read_only(target)?)
                };
                Image::from_registry(
                    other.as_ref().unwrap_or(&source_client),
                    tag,
                    format!("{repository}:{tag}"),
                    limits,
                )?
            }
        };
        Ok(Review::Diff(Box::new(compare(&old, &new, limits)?)))
    })())
}

/// The image a publish pushed, as its report says it.
#[derive(Debug, Clone)]
pub struct Pushed<'a> {
    /// `HOST/NAME`.
    pub repository: &'a str,
    /// Its timestamp tag.
    pub tag: &'a str,
    /// The prefix of the tag.
    pub prefix: &'a str,
    /// The manifest digest.
    pub digest: &'a str,
    /// The commit it was built from.
    pub commit: Option<&'a str>,
    /// Its layer's digest and size.
    pub layer: (&'a str, u64),
}

/// The tag before `ours` among `tags` of `prefix`, as Flux orders them:
/// the one it served before `ours` was pushed.
pub fn previous(prefix: &str, ours: &str, tags: &[String]) -> Option<String> {
    let ours = channel::parse(prefix, ours)?;
    tags.iter()
        .filter_map(|t| channel::parse(prefix, t))
        .filter(|t| channel::flux_cmp(t, &ours).is_lt())
        .max_by(channel::flux_cmp)
        .map(|t| t.tag)
}

/// The diff of a publish: the highest timestamp tag of the prefix below
/// the pushed one against the pushed image, through a read-only client of
/// `options`.
pub fn since_previous(options: &registry::Options, pushed: &Pushed<'_>, limits: &Limits) -> Review {
    Review::of((|| {
        let client = Client::open_read_only(options)?;
        let tags = client.list_tags()?;
        let Some(before) = previous(pushed.prefix, pushed.tag, &tags) else {
            return Ok(Review::Nothing {
                note: format!(
                    "the first image under the prefix {}: nothing to compare with",
                    pushed.prefix
                ),
            });
        };
        let old = Image::from_registry(
            &client,
            &before,
            format!("{}:{before}", pushed.repository),
            limits,
        )?;
        let new = Image::from_registry_layer(
            &client,
            pushed.layer,
            super::Side {
                name: format!("{}:{}", pushed.repository, pushed.tag),
                digest: Some(pushed.digest.to_string()),
                revision: pushed.commit.map(str::to_string),
                ..super::Side::default()
            },
            limits,
        )?;
        Ok(Review::Diff(Box::new(compare(&old, &new, limits)?)))
    })())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_previous_tag_is_the_one_flux_served_before() {
        let tags: Vec<String> = [
            "main-100-aaaaaaa",
            "main-200-bbbbbbb",
            "main-300-ccccccc",
            "main-300-0000000",
            "main-50-fffffff",
            "other-250-ddddddd",
            "latest",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            previous("main", "main-300-ccccccc", &tags).as_deref(),
            Some("main-200-bbbbbbb")
        );
        // On equal times Flux serves the smaller tag: ccccccc is below it.
        assert_eq!(
            previous("main", "main-300-0000000", &tags).as_deref(),
            Some("main-300-ccccccc")
        );
        assert_eq!(previous("main", "main-50-fffffff", &tags), None);
        assert_eq!(previous("main", "latest", &tags), None);
    }
}
