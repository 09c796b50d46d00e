//! Flux's pick: the one test oracle for which tag an ImagePolicy serves,
//! written from image-reflector-controller's own code (v1.0.0 and later),
//! not from this crate:
//!
//! 1. the ImageRepository drops the tags matching its exclusion list
//!    (`^.*\.sig$` by default; `filterOutTags`) and stores the rest sorted
//!    descending as text (`sortTagsAndGetLatestTags`, a stable sort with
//!    `-strings.Compare`);
//! 2. the ImagePolicy's `RegexFilter.Apply` walks that list and maps each
//!    matching tag's extracted value (`extract` expanded from the match) to
//!    the tag, a later tag replacing an earlier one with the same value
//!    (`filtered[tag] = item`), so of equal values the one that sorts
//!    smallest as text stays;
//! 3. the numerical policy (`Numerical.Latest`) parses every value with
//!    `strconv.ParseFloat(v, 64)` (one unparsable value fails the whole
//!    policy) and takes the highest (`asc`) or lowest (`desc`); it walks
//!    the values in Go map order, which is random, so two *different*
//!    values that parse to the same number (`017` and `17`) leave the pick
//!    undetermined.
//!
//! `tests/flux.rs` checks this module against rows of upstream's test
//! tables (numerical_test.go, filter_test.go, imagerepository_controller_test.go).

use std::collections::BTreeMap;

use regex::Regex;

/// The ImageRepository's default exclusion list.
pub const DEFAULT_EXCLUSION: &str = r"^.*\.sig$";

/// `latestTagsCount` of the ImageRepository's status.
pub const LATEST_TAGS_COUNT: usize = 10;

/// `filterOutTags`: the tags matching none of `patterns`, in order; an
/// invalid pattern is an error.
pub fn filter_out(tags: &[String], patterns: &[&str]) -> Result<Vec<String>, String> {
    let compiled = patterns
        .iter()
        .map(|p| Regex::new(p).map_err(|e| format!("failed to compile regex {p}: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(tags
        .iter()
        .filter(|t| !compiled.iter().any(|r| r.is_match(t)))
        .cloned()
        .collect())
}

/// The order the ImageRepository stores its tags in: descending as text
/// (bytes), stable.
pub fn stored_order(tags: &[String]) -> Vec<String> {
    let mut v = tags.to_vec();
    v.sort_by(|a, b| b.as_bytes().cmp(a.as_bytes()));
    v
}

/// `sortTagsAndGetLatestTags`: the first [`LATEST_TAGS_COUNT`] of the
/// stored order.
pub fn latest_tags(tags: &[String]) -> Vec<String> {
    stored_order(tags)
        .into_iter()
        .take(LATEST_TAGS_COUNT)
        .collect()
}

/// `RegexFilter.Apply` over `list` (in that order): extracted value ->
/// original tag, a later tag replacing an earlier one of the same value.
/// An empty `extract` keeps the tag itself.
pub fn regex_filter(
    pattern: &str,
    extract: &str,
    list: &[String],
) -> Result<BTreeMap<String, String>, String> {
    let re = Regex::new(pattern)
        .map_err(|e| format!("invalid regular expression pattern '{pattern}': {e}"))?;
    let mut filtered = BTreeMap::new();
    for item in list {
        let Some(caps) = re.captures(item) else {
            continue;
        };
        let value = if extract.is_empty() {
            item.clone()
        } else {
            let mut v = String::new();
            caps.expand(extract, &mut v);
            v
        };
        filtered.insert(value, item.clone());
    }
    Ok(filtered)
}

/// Go's `strconv.ParseFloat(s, 64)` for decimal input: an optional sign,
/// digits with an optional fraction and exponent, or `inf`/`infinity`
/// (signed or not) and `nan`; out of range (±Inf from finite digits) is an
/// error, as Go's `ErrRange`. Go's hexadecimal floats and `_` separators
/// are not modelled: such input panics rather than answer wrongly.
pub fn parse_float(s: &str) -> Result<f64, String> {
    let err = || format!("failed to parse invalid numeric value '{s}'");
    let (sign, body) = match s.as_bytes().first() {
        Some(b'+') => (1.0, &s[1..]),
        Some(b'-') => (-1.0, &s[1..]),
        _ => (1.0, s),
    };
    let lower = body.to_ascii_lowercase();
    if lower == "inf" || lower == "infinity" {
        return Ok(sign * f64::INFINITY);
    }
    if lower == "nan" && body.len() == s.len() {
        return Ok(f64::NAN);
    }
    assert!(
        !(lower.starts_with("0x") || s.contains('_')),
        "the oracle does not model Go's hexadecimal floats or '_' separators: {s:?}"
    );
    let decimal = Regex::new(r"^([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$").expect("regex");
    if !decimal.is_match(body) {
        return Err(err());
    }
    let v: f64 = body.parse().map_err(|_| err())?;
    if v.is_infinite() {
        return Err(format!("{}: value out of range", err()));
    }
    Ok(sign * v)
}

/// The numerical policy's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// `asc` (the default): the highest number.
    Asc,
    /// `desc`: the lowest number.
    Desc,
}

/// `Numerical.Latest` over `versions` in the order given: the first value,
/// then every later value not below (`asc`; not above for `desc`) the one
/// kept replaces it. An empty list or an unparsable value is an error.
pub fn numerical_latest(versions: &[String], order: Order) -> Result<String, String> {
    if versions.is_empty() {
        return Err("version list argument cannot be empty".into());
    }
    let mut latest = String::new();
    let mut pv = 0.0;
    for (i, v) in versions.iter().enumerate() {
        let cv = parse_float(v)?;
        let skip = i > 0
            && match order {
                Order::Asc => cv < pv,
                Order::Desc => cv > pv,
            };
        if skip {
            continue;
        }
        latest = v.clone();
        pv = cv;
    }
    Ok(latest)
}

/// What an ImagePolicy with `filterTags` and the numerical policy makes of
/// an ImageRepository's tags.
#[derive(Debug, Clone, PartialEq)]
pub enum Pick {
    /// The tag it serves.
    Tag(String),
    /// No tag matches the filter.
    NoMatch,
    /// The policy fails (an unparsable value, a bad pattern).
    Failed(String),
    /// Different values with the same number: Go's map order decides, at
    /// random. The candidates, sorted.
    Undetermined(Vec<String>),
}

/// The tag served by an ImagePolicy `filterTags: {pattern, extract}` with
/// `numerical: {order}` over the tags the registry lists (any order).
pub fn pick_ordered(pattern: &str, extract: &str, order: Order, registry_tags: &[String]) -> Pick {
    let kept = match filter_out(registry_tags, &[DEFAULT_EXCLUSION]) {
        Ok(k) => k,
        Err(e) => return Pick::Failed(e),
    };
    let filtered = match regex_filter(pattern, extract, &stored_order(&kept)) {
        Ok(f) => f,
        Err(e) => return Pick::Failed(e),
    };
    if filtered.is_empty() {
        return Pick::NoMatch;
    }
    let mut values = Vec::new();
    for (value, tag) in &filtered {
        match parse_float(value) {
            Ok(n) => values.push((n, tag)),
            Err(e) => return Pick::Failed(e),
        }
    }
    let best = values
        .iter()
        .map(|(n, _)| *n)
        .reduce(|a, b| match order {
            Order::Asc => a.max(b),
            Order::Desc => a.min(b),
        })
        .expect("values");
    let mut top: Vec<String> = values
        .iter()
        .filter(|(n, _)| *n == best)
        .map(|(_, t)| (*t).clone())
        .collect();
    if top.len() == 1 {
        Pick::Tag(top.remove(0))
    } else {
        top.sort();
        Pick::Undetermined(top)
    }
}

/// [`pick_ordered`] with `order: asc`, the generated policy's.
pub fn pick(pattern: &str, extract: &str, registry_tags: &[String]) -> Pick {
    pick_ordered(pattern, extract, Order::Asc, registry_tags)
}

/// The ImagePolicy pattern for timestamp tags of `prefix`, as Flux's
/// documentation writes a numerical timestamp filter:
/// `^PREFIX-(?P<ts>[0-9]+)-[0-9a-f]{7}$` with `extract: $ts`.
pub fn timestamp_pattern(prefix: &str) -> String {
    format!("^{}-(?P<ts>[0-9]+)-[0-9a-f]{{7}}$", regex::escape(prefix))
}

/// The tag Flux serves for the timestamp tags of `prefix` among `tags`,
/// `None` when none matches; panics when the policy would fail or leave
/// the pick undetermined (never the case for tags settings-image writes).
pub fn served<'a>(prefix: &str, tags: impl IntoIterator<Item = &'a String>) -> Option<String> {
    let tags: Vec<String> = tags.into_iter().cloned().collect();
    match pick(&timestamp_pattern(prefix), "$ts", &tags) {
        Pick::Tag(t) => Some(t),
        Pick::NoMatch => None,
        other => panic!("Flux's pick for {prefix} over {tags:?} is {other:?}"),
    }
}
