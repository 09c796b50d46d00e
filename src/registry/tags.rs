//! The tag list: `GET tags/list` and its `Link` pages, bounded.
//!
//! A registry decides how much its tag list holds and how many pages it
//! has; one that pages for ever (700,000 new tags a page, `Link:
//! rel=next`) grew `push` by about 100 MB a second and the controller to
//! gigabytes before the whole-operation deadline. So the list is read
//! within bounds, each named by its error:
//!
//! - **bytes per page**: [`MAX_PAGE_BYTES`] (a page is read into memory);
//! - **tags in all**: [`max_tags`], [`DEFAULT_MAX_TAGS`] unless the front
//!   end set `SETTINGS_IMAGE_MAX_TAGS` ([`set_max_tags`]); counted while a
//!   page is parsed, so one page cannot hold more either;
//! - **pages**: [`MAX_PAGES`];
//! - **loops**: a `Link` to a page already read (the same URL again).
//!
//! An answer that is not a tag list, or passes a bound, is
//! [`TagListError::Unreadable`]: the registry answered, and what it
//! answered cannot be trusted as its tags. A registry that refuses to list
//! (an HTTP error) or cannot be reached is [`TagListError::NotListed`].
//! The push treats them differently (`crate::publish::guards`).

use std::collections::HashSet;
use std::fmt;
use std::sync::OnceLock;

use reqwest::{Method, StatusCode};
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::Session;
use super::transport::{MAX_SMALL, next_link};
use crate::error::Error;

/// The most bytes one page of the tag list may hold.
pub const MAX_PAGE_BYTES: usize = MAX_SMALL;
/// The most tags read from one repository, unless set otherwise: a
/// timestamp tag per commit that changed the folder, for years.
pub const DEFAULT_MAX_TAGS: usize = 100_000;
/// The most pages read.
pub const MAX_PAGES: usize = 10_000;

static MAX_TAGS: OnceLock<usize> = OnceLock::new();

/// Sets the most tags read for this process (`SETTINGS_IMAGE_MAX_TAGS`;
/// once, before the first client; later calls are ignored).
pub fn set_max_tags(n: usize) {
    let _ = MAX_TAGS.set(n);
}

/// The most tags read: what [`set_max_tags`] set, else [`DEFAULT_MAX_TAGS`].
pub fn max_tags() -> usize {
    MAX_TAGS.get().copied().unwrap_or(DEFAULT_MAX_TAGS)
}

/// Parses `SETTINGS_IMAGE_MAX_TAGS`: a whole number from 1; the error names
/// the variable (exit 2).
pub fn parse_max_tags(value: &str) -> crate::error::Result<usize> {
    match value.trim().parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(Error::input(
            format!("SETTINGS_IMAGE_MAX_TAGS is {value:?}, not a number of tags from 1"),
            Some(
                "set SETTINGS_IMAGE_MAX_TAGS to a whole number (default 100000), or unset it"
                    .into(),
            ),
        )),
    }
}

/// Why the tag list could not be had.
#[derive(Debug)]
pub enum TagListError {
    /// The registry refused to list (an HTTP error status) or could not
    /// be reached: nothing is known of its tags.
    NotListed(Error),
    /// The registry answered, and the answer is not a tag list: not JSON,
    /// past a bound, or a `Link` loop.
    Unreadable(Error),
}

impl TagListError {
    /// The error inside.
    pub fn into_error(self) -> Error {
        match self {
            TagListError::NotListed(e) | TagListError::Unreadable(e) => e,
        }
    }
}

impl fmt::Display for TagListError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TagListError::NotListed(e) | TagListError::Unreadable(e) => e.fmt(f),
        }
    }
}

impl Session {
    /// Every tag of the repository, following `Link` pagination within the
    /// bounds of the module docs. Empty when the repository does not exist
    /// yet.
    pub(crate) async fn list_tags(&self) -> Result<Vec<String>, TagListError> {
        let what = format!("listing tags of {}", self.t.repo);
        let max = max_tags();
        let unreadable = |message: String, hint: Option<String>| {
            let mut e = self.t.registry_err(&what, message);
            if let Error::Registry { hint: h, .. } = &mut e {
                *h = hint.map(Into::into);
            }
            TagListError::Unreadable(e)
        };
        let mut url = self.t.url("tags/list").map_err(TagListError::NotListed)?;
        url.query_pairs_mut().append_pair("n", "1000");
        let mut tags = Vec::new();
        let mut seen = HashSet::new();
        for _ in 0..MAX_PAGES {
            seen.insert(url.to_string());
            let resp = self
                .t
                .send(&what, true, |s| Ok(s.request(Method::GET, url.clone())))
                .await
                .map_err(TagListError::NotListed)?;
            match resp.status() {
                StatusCode::OK => {}
                StatusCode::NOT_FOUND if tags.is_empty() => return Ok(tags),
                _ => return Err(TagListError::NotListed(self.t.fail(&what, resp).await)),
            }
            let next = next_link(&resp);
            let body = self
                .t
                .small_body(&what, resp, "page of the tag list")
                .await
                .map_err(TagListError::Unreadable)?;
            let mut over = false;
            let page = Page {
                out: &mut tags,
                max,
                over: &mut over,
            };
            let parsed = page.deserialize(&mut serde_json::Deserializer::from_slice(&body));
            if over {
                return Err(unreadable(
                    format!(
                        "the tag list holds more than {max} tags (SETTINGS_IMAGE_MAX_TAGS), the most read"
                    ),
                    Some(format!(
                        "a repository of settings images holds a tag per change; if this one is meant to hold \
                         more than {max}, delete old tags or raise SETTINGS_IMAGE_MAX_TAGS"
                    )),
                ));
            }
            parsed.map_err(|e| unreadable(format!("unreadable tag list: {e}"), None))?;
            let Some(n) = next else {
                return Ok(tags);
            };
            url = url
                .join(&n)
                .map_err(|e| unreadable(format!("bad Link {n:?}: {e}"), None))?;
            if seen.contains(url.as_str()) {
                return Err(unreadable(
                    format!(
                        "the tag list's Link leads back to a page it already sent ({}): it would never end",
                        super::auth::shown_url(&url)
                    ),
                    Some("the registry's pagination is broken; report it to its operator".into()),
                ));
            }
        }
        Err(unreadable(
            format!("the tag list never ended: more than {MAX_PAGES} pages, the most read"),
            Some("the registry's pagination is broken; report it to its operator".into()),
        ))
    }
}

/// One page, `{"name": ..., "tags": [...]}`: its tags appended to `out`,
/// at most `max` in all (`over` set past that, and the parse stopped).
struct Page<'a> {
    out: &'a mut Vec<String>,
    max: usize,
    over: &'a mut bool,
}

impl<'de> DeserializeSeed<'de> for Page<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Page<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a tag list object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            if key == "tags" {
                map.next_value_seed(Tags {
                    out: &mut *self.out,
                    max: self.max,
                    over: &mut *self.over,
                })?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

/// The `tags` array (or `null`).
struct Tags<'a> {
    out: &'a mut Vec<String>,
    max: usize,
    over: &'a mut bool,
}

impl<'de> DeserializeSeed<'de> for Tags<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for Tags<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of tags")
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(tag) = seq.next_element::<String>()? {
            if self.out.len() >= self.max {
                *self.over = true;
                return Err(de::Error::custom("too many tags"));
            }
            self.out.push(tag);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str, max: usize, out: &mut Vec<String>) -> (bool, bool) {
        let mut over = false;
        let r = Page {
            out,
            max,
            over: &mut over,
        }
        .deserialize(&mut serde_json::Deserializer::from_str(json));
        (r.is_ok(), over)
    }

    #[test]
    fn a_page_is_read_within_the_tag_bound() {
        let mut out = vec!["old".to_string()];
        assert_eq!(
            parse(
                r#"{"name":"a/b","tags":["x","y"],"extra":{"k":[1]}}"#,
                3,
                &mut out
            ),
            (true, false)
        );
        assert_eq!(out, ["old", "x", "y"]);
        // One more than the bound stops the parse there.
        assert_eq!(parse(r#"{"tags":["z","w"]}"#, 3, &mut out), (false, true));
        assert_eq!(out.len(), 3);
        let mut out = Vec::new();
        assert_eq!(
            parse(r#"{"name":"a","tags":null}"#, 3, &mut out),
            (true, false)
        );
        assert_eq!(parse("not json", 3, &mut out), (false, false));
        assert_eq!(parse(r#"{"tags":[1]}"#, 3, &mut out), (false, false));
        assert!(out.is_empty());
    }

    #[test]
    fn the_tag_bound_is_a_whole_number_from_one() {
        assert_eq!(parse_max_tags(" 250000 ").unwrap(), 250_000);
        for bad in ["0", "-1", "many", ""] {
            let e = parse_max_tags(bad).unwrap_err();
            assert_eq!(e.exit_code(), 2);
            assert!(e.to_string().contains("SETTINGS_IMAGE_MAX_TAGS"), "{e}");
        }
    }
}
