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

/// The digest algorithms whose referrers tags (`<alg>-<64 hex>`, the OCI
/// distribution spec's referrers tag schema) are reserved.
const REFERRERS_TAG_ALGORITHMS: [&str; 3] = ["sha256", "sha512", "blake3"];

/// True for a tag of the referrers tag schema, `sha256-<64 lowercase hex>`
/// (or sha512/blake3, truncated to 64): a registry without the referrers
/// API keeps the index of an image's referrers (our provenance) under it.
pub fn is_referrers_tag(tag: &str) -> bool {
    tag.split_once('-').is_some_and(|(alg, hex)| {
        REFERRERS_TAG_ALGORITHMS.contains(&alg)
            && hex.len() == 64
            && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

/// Checks a tag the user asks us to write: [`validate`], and not a tag of
/// the referrers tag schema, which the next provenance attach to that
/// digest would overwrite with a referrers index.
pub fn validate_writable(tag: &str) -> Result<()> {
    validate(tag)?;
    if is_referrers_tag(tag) {
        return Err(Error::input(
            format!(
                "the tag {tag:?} is reserved: `<algorithm>-<digest hex>` is the referrers tag schema, \
                 where a registry keeps the list of an image's referrers (such as its provenance)"
            ),
            Some(
                "choose another tag; to name an image by digest, use HOST/NAME@sha256:<hex> \
                 (the `reference` the push reports)"
                    .to_string(),
            ),
        ));
    }
    Ok(())
}

/// A parsed timestamp tag `<prefix>-<ts>-<sha7>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamped {
    /// The whole tag.
    pub tag: String,
    /// The committer time, however many digits it has.
    pub ts: TagNumber,
    /// The 7 hex characters of the commit.
    pub sha7: String,
}

/// The number of a timestamp tag, kept as written and ordered as Flux's
/// numerical policy orders it: image-reflector-controller parses it with
/// `strconv.ParseFloat(v, 64)`, so a number of any size is a number to Flux
/// (`main-99999999999999999999-abcdef0` is above every committer time), and
/// two numbers that round to the same float (above 2^53) are equal to it.
/// Of those, this order puts the larger exact number first (Flux's pick
/// among them is Go's map order, which is random), then the text.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TagNumber(String);

impl TagNumber {
    /// The value Flux compares: the digits as a 64-bit float, rounded to
    /// nearest as Go's `ParseFloat` does (an OCI tag holds at most 128
    /// characters, far from the float's limit).
    pub fn flux_value(&self) -> f64 {
        self.0.parse().unwrap_or(f64::INFINITY)
    }

    /// The number when it fits a `u64` (every committer time does).
    pub fn as_u64(&self) -> Option<u64> {
        self.0.parse().ok()
    }

    /// The digits without leading zeros (`0` for zero).
    fn significant(&self) -> &str {
        let s = self.0.trim_start_matches('0');
        if s.is_empty() { "0" } else { s }
    }

    /// Flux's order, then the exact number's.
    fn numeric_cmp(&self, other: &TagNumber) -> std::cmp::Ordering {
        let (a, b) = (self.significant(), other.significant());
        self.flux_value()
            .total_cmp(&other.flux_value())
            .then_with(|| a.len().cmp(&b.len()))
            .then_with(|| a.cmp(b))
    }
}

impl From<u64> for TagNumber {
    fn from(n: u64) -> TagNumber {
        TagNumber(n.to_string())
    }
}

impl std::fmt::Display for TagNumber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Ord for TagNumber {
    fn cmp(&self, other: &TagNumber) -> std::cmp::Ordering {
        self.numeric_cmp(other).then_with(|| self.0.cmp(&other.0))
    }
}

impl PartialOrd for TagNumber {
    fn partial_cmp(&self, other: &TagNumber) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq<u64> for TagNumber {
    fn eq(&self, other: &u64) -> bool {
        self.numeric_cmp(&TagNumber::from(*other)).is_eq()
    }
}

impl PartialOrd<u64> for TagNumber {
    fn partial_cmp(&self, other: &u64) -> Option<std::cmp::Ordering> {
        Some(self.numeric_cmp(&TagNumber::from(*other)))
    }
}

/// The one grammar of timestamp tags, as Flux's filter
/// `^<prefix>-(?P<ts>[0-9]+)-[0-9a-f]{7}$` reads them: splits `tag` into
/// (prefix, ts, sha7) when it is `<non-empty prefix>-<digits>-<7 lowercase
/// hex>`. The prefix is everything before the last two `-`.
fn split(tag: &str) -> Option<(&str, &str, &str)> {
    let (rest, sha7) = tag.rsplit_once('-')?;
    let (prefix, ts) = rest.rsplit_once('-')?;
    let ok = !prefix.is_empty()
        && sha7.len() == 7
        && sha7.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        && !ts.is_empty()
        && ts.bytes().all(|b| b.is_ascii_digit());
    ok.then_some((prefix, ts, sha7))
}

/// True for a tag shaped `<prefix>-<digits>-<7 lowercase hex>`: such a tag
/// names one commit's content and is never moved by any publisher (however
/// many digits: immutability does not depend on the number fitting).
pub fn is_timestamp_tag(tag: &str) -> bool {
    split(tag).is_some()
}

/// The prefix of a timestamp tag, `None` for any other tag.
pub fn timestamp_prefix(tag: &str) -> Option<&str> {
    split(tag).map(|(prefix, _, _)| prefix)
}

/// Whether a tag shaped like a timestamp tag names `commit` (its full id)
/// committed at `timestamp`, whatever its prefix: `None` for any other tag.
/// `verify` checks the same two facts of a timestamp tag.
pub fn names_commit(tag: &str, timestamp: i64, commit: &str) -> Option<bool> {
    let (_, ts, sha7) = split(tag)?;
    Some(ts.parse::<i64>().ok() == Some(timestamp) && commit.starts_with(sha7))
}

/// Parses `tag` when it is a timestamp tag of exactly `prefix`, whatever
/// the size of its number: every tag Flux's filter matches.
pub fn parse_timestamp_tag(prefix: &str, tag: &str) -> Option<Stamped> {
    let (p, ts, sha7) = split(tag)?;
    if p != prefix {
        return None;
    }
    Some(Stamped {
        tag: tag.to_string(),
        ts: TagNumber(ts.to_string()),
        sha7: sha7.to_string(),
    })
}

/// Turns a branch name (or any prefix the user gives) into a tag
/// component: every character outside `[A-Za-z0-9_.-]` becomes `-` (one per
/// character, so `feature/x` becomes `feature-x`), and leading `.` and `-`
/// are removed, because a tag may not start with them. An empty result is an
/// error.
pub fn sanitize_prefix(prefix: &str) -> Result<String> {
    let mapped: String = prefix
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let trimmed = mapped.trim_start_matches(['.', '-']);
    if trimmed.is_empty() {
        return Err(Error::input(
            format!("the tag prefix {prefix:?} has no usable characters"),
            Some(
                "give a prefix (usually the branch name) with at least one of [A-Za-z0-9_]"
                    .to_string(),
            ),
        ));
    }
    Ok(trimmed.to_string())
}

/// The longest prefix a timestamp tag keeps whole while committer times
/// have 10 digits (until 2286): [`MAX_TAG_LEN`] less `-<10 digits>-<sha7>`.
/// [`timestamp_tag`] cuts a longer one, so names that agree in their first
/// `MAX_PREFIX_LEN` characters share a prefix.
pub const MAX_PREFIX_LEN: usize = MAX_TAG_LEN - "-1700000000-abcdef0".len();

/// A tag prefix that only `name` gives (usually a branch name): letters,
/// digits, and `.` or `-` after the first character stay; `_` becomes
/// `__`; every other byte (and a leading `.` or `-`) becomes `_` and two
/// hex digits (`feat/x` -> `feat_2fx`, `feat+x` -> `feat_2bx`). No two
/// names give the same prefix, unlike [`sanitize_prefix`], which maps
/// `feat/x`, `feat+x` and `feat-x` all to `feat-x`. A prefix longer than
/// [`MAX_PREFIX_LEN`] is cut and ends in `-` and 10 hex digits of the
/// name's SHA-256 instead. `None` for an empty name.
pub fn unique_prefix(name: &str) -> Option<String> {
    use std::fmt::Write as _;
    if name.is_empty() {
        return None;
    }
    let mut out = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() || (matches!(c, '.' | '-') && !out.is_empty()) {
            out.push(c);
        } else if c == '_' {
            out.push_str("__");
        } else {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                let _ = write!(out, "_{b:02x}");
            }
        }
    }
    if out.len() > MAX_PREFIX_LEN {
        use sha2::Digest as _;
        let hash = hex::encode(sha2::Sha256::digest(name.as_bytes()));
        out.truncate(MAX_PREFIX_LEN - 11);
        out.push('-');
        out.push_str(&hash[..10]);
    }
    Some(out)
}

/// What `tag` and `plan` say about a prefix other names can share
/// ([`shared_prefix_note`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrefixNote {
    /// Sanitising changed or cut the name itself (a warning, with a prefix
    /// to use instead); `false`: the name is written as it is, and the
    /// note only says which other names are written the same.
    pub changed: bool,
    /// The text.
    pub text: String,
}

impl PrefixNote {
    /// `warning` or `note`, as the CLI labels the line.
    pub fn label(&self) -> &'static str {
        if self.changed { "warning" } else { "note" }
    }
}

/// What `tag` and `plan` print about `given` as a tag prefix (`push` does
/// not print it: its owner check refuses a second ref instead, see
/// `publish::guards`). Names share a prefix when [`timestamp_tag`] writes
/// them the same: [`sanitize_prefix`] makes every character a tag cannot
/// hold `-` and drops leading `.` and `-` (`feat/x`, `feat+x` and `feat-x`
/// are all `feat-x`; `.hidden` and `hidden`), and only the first
/// [`MAX_PREFIX_LEN`] characters are kept. Then one ImagePolicy follows
/// every branch publishing under the prefix.
///
/// - When sanitising changes or cuts `given`: a warning
///   ([`PrefixNote::changed`]) with a prefix only this name gives
///   ([`unique_prefix`]).
/// - When `given` is written as it is but other names are written the
///   same because it has a `-` (`feat-x` is also `feat/x`'s and
///   `feat+x`'s prefix) or is exactly [`MAX_PREFIX_LEN`] long (longer
///   names starting with it are cut to it): a note naming them.
/// - `None` otherwise. Every name is also what the same name behind a
///   character that is dropped gives (`+main` and `.main` are written
///   `main`); those are not noted, or every prefix would be.
pub fn shared_prefix_note(given: &str) -> Option<PrefixNote> {
    let prefix = sanitize_prefix(given).ok()?;
    let changed = prefix != given;
    let cut = prefix.len() > MAX_PREFIX_LEN;
    if !changed && !cut {
        let dash = given.contains('-');
        let at_limit = given.len() == MAX_PREFIX_LEN;
        if !dash && !at_limit {
            return None;
        }
        let mut how = Vec::new();
        if dash {
            how.push(format!(
                "names with another character where it has '-' ({:?}, {:?}: every character a tag cannot hold \
                 becomes '-')",
                given.replace('-', "/"),
                given.replace('-', "+")
            ));
        }
        if at_limit {
            how.push(format!(
                "longer names that start with these {MAX_PREFIX_LEN} characters (only the first \
                 {MAX_PREFIX_LEN} are kept)"
            ));
        }
        return Some(PrefixNote {
            changed: false,
            text: format!(
                "the prefix {given:?} is written as it is, but {} are written {given:?} too: one ImagePolicy \
                 would follow every branch publishing under it. push refuses a ref whose prefix's newest tag \
                 another ref published, naming a prefix of its own",
                how.join(" and ")
            ),
        });
    }
    let written = &prefix[..prefix.len().min(MAX_PREFIX_LEN)];
    let why = match (changed, cut) {
        (true, true) => format!(
            "characters a tag cannot hold become '-', leading '.' and '-' are dropped, and only the first {MAX_PREFIX_LEN} characters are kept"
        ),
        (true, false) => {
            "characters a tag cannot hold become '-' and leading '.' and '-' are dropped"
                .to_string()
        }
        _ => format!("only the first {MAX_PREFIX_LEN} characters are kept"),
    };
    Some(PrefixNote {
        changed: true,
        text: format!(
            "the prefix {given:?} is written {written:?} in tags ({why}), so other names can share it: one \
             ImagePolicy would follow every branch publishing under it, and push refuses once the prefix's newest \
             tag comes from another ref. A prefix only this name gives: {}",
            unique_prefix(given).unwrap_or_default()
        ),
    })
}

/// The timestamp tag `<prefix>-<timestamp>-<sha7>` for a commit: the prefix
/// is sanitized with [`sanitize_prefix`] and cut so the whole tag fits in
/// [`MAX_TAG_LEN`] characters; `sha7` is the first 7 characters of the
/// commit id. Every result matches Flux's filter
/// `^<prefix>-(?P<ts>[0-9]+)-[0-9a-f]{7}$` and [`is_timestamp_tag`].
pub fn timestamp_tag(prefix: &str, timestamp: i64, commit: &str) -> Result<String> {
    let sha7 = commit
        .get(..7)
        .filter(|s| s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')));
    let Some(sha7) = sha7 else {
        return Err(Error::input(
            format!("{commit:?} is not a commit id"),
            Some("a timestamp tag needs a lowercase hex commit id".to_string()),
        ));
    };
    if timestamp < 0 {
        return Err(Error::input(
            format!("commit {commit} has a committer time before 1970 ({timestamp})"),
            Some("a timestamp tag needs a non-negative unix time".to_string()),
        ));
    }
    let suffix = format!("-{timestamp}-{sha7}");
    let mut prefix = sanitize_prefix(prefix)?;
    // The prefix is ASCII after sanitizing, so a byte cut is a char cut.
    prefix.truncate(MAX_TAG_LEN.saturating_sub(suffix.len()));
    let tag = format!("{prefix}{suffix}");
    validate(&tag)?;
    Ok(tag)
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
            let e = validate(bad).unwrap_err();
            assert_eq!(e.to_string(), format!("invalid tag {bad:?}"));
            assert_eq!(e.exit_code(), 2, "{bad}");
            assert_eq!(
                e.hint().as_deref(),
                Some(
                    "a tag is 1 to 128 characters of [A-Za-z0-9_.-] and does not start with '.' or '-'"
                )
            );
        }
    }

    #[test]
    fn a_timestamp_shaped_tag_names_one_commit() {
        let id = "abcdef0123456789abcdef0123456789abcdef01";
        assert_eq!(
            names_commit("main-1700000000-abcdef0", 1_700_000_000, id),
            Some(true)
        );
        assert_eq!(
            names_commit("prod-x-1700000000-abcdef0", 1_700_000_000, id),
            Some(true)
        );
        assert_eq!(
            names_commit("main-1700000001-abcdef0", 1_700_000_000, id),
            Some(false)
        );
        assert_eq!(
            names_commit("main-1700000000-abcdef1", 1_700_000_000, id),
            Some(false)
        );
        assert_eq!(
            names_commit("main-99999999999999999999-abcdef0", 1_700_000_000, id),
            Some(false)
        );
        assert_eq!(names_commit("latest", 1_700_000_000, id), None);
    }

    #[test]
    fn referrers_tags_are_reserved() {
        let hex = "0123456789abcdef".repeat(4);
        for reserved in [format!("sha256-{hex}"), format!("sha512-{hex}")] {
            assert!(is_referrers_tag(&reserved));
            let err = validate_writable(&reserved).unwrap_err();
            assert!(err.to_string().contains("reserved"), "{err}");
            assert_eq!(err.exit_code(), 2);
            // Still a valid tag to read (inspect, the referrers lookup).
            assert!(validate(&reserved).is_ok());
        }
        for free in [
            format!("sha256-{}", &hex[..63]),
            format!("sha256-{}", hex.to_uppercase()),
            format!("main-{hex}"),
            "sha256".to_string(),
            "sha256-latest".to_string(),
        ] {
            assert!(validate_writable(&free).is_ok(), "{free}");
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
        assert_eq!(timestamp_prefix("feature-x-1-0123456"), Some("feature-x"));
        assert_eq!(timestamp_prefix("main"), None);
        let s = parse_timestamp_tag("feature-x", "feature-x-17-0123456").unwrap();
        assert_eq!((s.ts.as_u64(), s.sha7.as_str()), (Some(17), "0123456"));
        assert!(parse_timestamp_tag("x", "feature-x-17-0123456").is_none());
        // Too large for a u64: still a number to Flux, above every
        // committer time, and never moved.
        let huge = format!("main-{}-abcdef0", "9".repeat(30));
        assert!(is_timestamp_tag(&huge));
        let h = parse_timestamp_tag("main", &huge).unwrap();
        assert!(h.ts > u64::MAX && h.ts.as_u64().is_none());
        assert_eq!(h.ts.to_string(), "9".repeat(30));
        assert!(
            h.ts > parse_timestamp_tag("main", "main-1700000000-abcdef0")
                .unwrap()
                .ts
        );
        // Flux's float: 2^53 + 1 rounds to 2^53, equal to Flux; the exact
        // number orders them here. Leading zeros keep the number's value.
        let n = |s: &str| {
            parse_timestamp_tag("m", &format!("m-{s}-abcdef0"))
                .unwrap()
                .ts
        };
        assert_eq!(
            n("9007199254740993").flux_value(),
            n("9007199254740992").flux_value()
        );
        assert!(n("9007199254740993") > n("9007199254740992"));
        assert!(n("017") == 17 && n("017") != n("17"));
        assert!(n("18446744073709551616") > u64::MAX);
    }

    #[test]
    fn prefixes_from_branch_names() {
        let ok =
            |input: &str, want: &str| assert_eq!(sanitize_prefix(input).unwrap(), want, "{input}");
        ok("main", "main");
        ok("feature/x", "feature-x");
        ok("Release_1.2", "Release_1.2");
        ok("a b:c@d", "a-b-c-d");
        ok("dependabot/npm/x@1.0", "dependabot-npm-x-1.0");
        ok("-x", "x");
        ok(".hidden", "hidden");
        ok("./-.x", "x");
        ok("ünï", "n-");
        ok("x//y", "x--y");
        // Nothing usable left: bad input (exit 2) naming the prefix.
        for bad in ["", "-", ".", "/", "./-", "ü"] {
            let e = sanitize_prefix(bad).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad:?}: {e}");
            assert_eq!(
                e.to_string(),
                format!("the tag prefix {bad:?} has no usable characters")
            );
        }
    }

    #[test]
    fn unique_prefixes_never_collide() {
        let names = [
            "feat/x",
            "feat+x",
            "feat-x",
            "feat_x",
            "feat__x",
            "feat_2fx",
            "release/1.x",
            "release-1.x",
            ".hidden",
            "hidden",
            "-x",
            "x",
            "Main",
            "main",
            "a|b",
            "a$b",
            "a^b",
            "a?b",
            "a*b",
            "ä",
        ];
        let mut seen = std::collections::BTreeMap::new();
        for n in names {
            let u = unique_prefix(n).unwrap();
            assert_eq!(sanitize_prefix(&u).unwrap(), u, "{n}: {u} is used as it is");
            assert!(u.len() <= MAX_PREFIX_LEN);
            assert!(
                shared_prefix_note(&u).is_none_or(|n| !n.changed),
                "{n}: {u} is written as it is"
            );
            if let Some(other) = seen.insert(u.clone(), n) {
                panic!("{n} and {other} both give {u}");
            }
        }
        assert_eq!(unique_prefix("feat/x").unwrap(), "feat_2fx");
        assert_eq!(unique_prefix(".hidden").unwrap(), "_2ehidden");
        assert_eq!(unique_prefix(""), None);
        // Long names differ after the cut: the hash tells them apart.
        let a = format!("{}a", "n".repeat(119));
        let b = format!("{}b", "n".repeat(119));
        let (ua, ub) = (unique_prefix(&a).unwrap(), unique_prefix(&b).unwrap());
        assert_ne!(ua, ub);
        assert_eq!(ua.len(), MAX_PREFIX_LEN);
        let id = "0123456789abcdef0123456789abcdef01234567";
        let t = timestamp_tag(&ua, 1_700_000_000, id).unwrap();
        assert!(t.starts_with(&format!("{ua}-")));
    }

    #[test]
    fn shared_prefixes_are_noted() {
        assert!(shared_prefix_note("main").is_none());
        assert!(shared_prefix_note("Release_1.2").is_none());
        let n = shared_prefix_note("feat+x").unwrap();
        assert!(n.changed && n.label() == "warning");
        assert!(
            n.text.contains("\"feat-x\"") && n.text.contains("feat_2bx"),
            "{}",
            n.text
        );
        assert!(shared_prefix_note(".hidden").unwrap().changed);
        let long = "l".repeat(120);
        let n = shared_prefix_note(&long).unwrap();
        assert!(
            n.changed && n.text.contains("first 109 characters"),
            "{}",
            n.text
        );
        // Written as it is, but other names are written the same: a note
        // that names them (and each of them sanitises to it).
        for (given, others) in [
            ("feat-x", vec!["feat/x", "feat+x"]),
            ("release-1.2", vec!["release/1.2", "release+1.2"]),
        ] {
            let n = shared_prefix_note(given).unwrap();
            assert!(!n.changed && n.label() == "note", "{given}");
            assert!(n.text.contains("is written as it is"), "{}", n.text);
            for o in others {
                assert!(n.text.contains(&format!("{o:?}")), "{o}: {}", n.text);
                assert_eq!(sanitize_prefix(o).unwrap(), given);
            }
        }
        let at_limit = "l".repeat(109);
        let n = shared_prefix_note(&at_limit).unwrap();
        assert!(!n.changed && n.text.contains("longer names"), "{}", n.text);
        let id = "0123456789abcdef0123456789abcdef01234567";
        assert_eq!(
            timestamp_tag(&"l".repeat(115), 1_700_000_000, id).unwrap(),
            timestamp_tag(&at_limit, 1_700_000_000, id).unwrap()
        );
    }

    /// Flux's ImagePolicy filter for timestamp tags, as its documentation
    /// writes it (`tests/common/flux.rs` runs the same pattern through
    /// Flux's own pick): the tag's time is the `ts` group.
    fn flux_ts(prefix: &str, tag: &str) -> Option<String> {
        let re = regex::Regex::new(&format!(
            "^{}-(?P<ts>[0-9]+)-[0-9a-f]{{7}}$",
            regex::escape(prefix)
        ))
        .unwrap();
        re.captures(tag).map(|c| c["ts"].to_string())
    }

    #[test]
    fn timestamp_tags_fit_and_match_flux() {
        let id = "0123456789abcdef0123456789abcdef01234567";
        let t = timestamp_tag("feature/x", 1700000000, id).unwrap();
        assert_eq!(t, "feature-x-1700000000-0123456");
        assert_eq!(flux_ts("feature-x", &t).as_deref(), Some("1700000000"));
        let long = "b".repeat(300);
        let t = timestamp_tag(&long, 1700000000, id).unwrap();
        assert_eq!(t.len(), MAX_TAG_LEN);
        // The prefix cut to what fits: 128 - len("-1700000000-0123456") = 109.
        assert_eq!(t, format!("{}-1700000000-0123456", "b".repeat(109)));
        assert_eq!(flux_ts(&"b".repeat(109), &t).as_deref(), Some("1700000000"));
        assert!(validate(&t).is_ok());
        let t = timestamp_tag("main", 0, id).unwrap();
        assert_eq!(t, "main-0-0123456");
        assert_eq!(flux_ts("main", &t).as_deref(), Some("0"));
        for (prefix, time, commit, says) in [
            ("main", 1, "ABCDEF0123", "\"ABCDEF0123\" is not a commit id"),
            ("main", 1, "abc", "\"abc\" is not a commit id"),
            (
                "main",
                -1,
                id,
                "commit 0123456789abcdef0123456789abcdef01234567 has a committer time before 1970 (-1)",
            ),
        ] {
            let e = timestamp_tag(prefix, time, commit).unwrap_err();
            assert_eq!(e.to_string(), says);
            assert_eq!(e.exit_code(), 2);
        }
        let e = timestamp_tag("/", 1, id).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert_eq!(
            e.to_string(),
            "the tag prefix \"/\" has no usable characters"
        );
    }
}
