//! Tag rules: what an OCI tag may look like, and which tags are timestamp
//! tags (`<prefix>-<unix seconds>-<sha7>`) that must never move.

use crate::error::{Error, Result};

/// The longest tag the OCI distribution spec allows.
pub const MAX_TAG_LEN: usize = 128;

/// Checks a tag against the distribution spec's grammar
/// `[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}`.
pub fn validate(tag: &str) -> Result<()> {
    let bytes = tag.as_bytes();
    let ok_first = bytes
        .first()
        .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_');
    let ok_rest = bytes
        .iter()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if ok_first && ok_rest && bytes.len() <= MAX_TAG_LEN {
        Ok(())
    } else {
        Err(Error::input(
            format!("invalid tag {tag:?}"),
            Some(
                "a tag is 1 to 128 characters of [A-Za-z0-9_.-] and does not start with '.' or '-'"
                    .to_string(),
            ),
        ))
    }
}

/// True for a tag shaped `<prefix>-<digits>-<7 lowercase hex>`: such a tag
/// names one commit's content and is never moved by any publisher.
pub fn is_timestamp_tag(tag: &str) -> bool {
    let Some((rest, sha)) = tag.rsplit_once('-') else {
        return false;
    };
    let Some((prefix, ts)) = rest.rsplit_once('-') else {
        return false;
    };
    !prefix.is_empty()
        && sha.len() == 7
        && sha.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        && !ts.is_empty()
        && ts.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grammar() {
        for good in [
            "main",
            "v1.2.3",
            "_x",
            "main-1700000000-abcdef0",
            &"a".repeat(128),
        ] {
            assert!(validate(good).is_ok(), "{good}");
        }
        for bad in ["", ".x", "-x", "a/b", "a:b", "ä", &"a".repeat(129)] {
            assert!(validate(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn timestamp_shape() {
        assert!(is_timestamp_tag("main-1700000000-abcdef0"));
        assert!(is_timestamp_tag("feature-x-1-0123456"));
        assert!(!is_timestamp_tag("main"));
        assert!(!is_timestamp_tag("main-1700000000-ABCDEF0"));
        assert!(!is_timestamp_tag("main-1700000000-abcdef01"));
        assert!(!is_timestamp_tag("-1700000000-abcdef0"));
        assert!(!is_timestamp_tag("main--abcdef0"));
        assert!(!is_timestamp_tag("main-17x-abcdef0"));
    }
}
