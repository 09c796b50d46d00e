//! The objects as YAML that kubectl and Flux read as written: serialized by
//! serde, then the plain scalars YAML 1.1 would not read as strings quoted.

use serde::Serialize;

use crate::error::{Error, Result};

pub(super) fn to_yaml<T: Serialize>(value: &T) -> Result<String> {
    serde_yaml_ng::to_string(value)
        .map(|y| quote_yaml11(&y))
        .map_err(|e| Error::io("writing the Flux objects", std::io::Error::other(e)))
}

/// Quotes the plain scalars that YAML 1.2 (serde_yaml_ng) reads as
/// strings but YAML 1.1 does not: kubectl and Flux read manifests with
/// go-yaml's YAML 1.1 rules, where `namespace: yes` is a boolean and the
/// object fails to decode. Only `key: value` and `- value` lines hold
/// scalars here (every value is one line: [`super::checks::check_text`]).
pub(super) fn quote_yaml11(yaml: &str) -> String {
    let mut out = String::with_capacity(yaml.len());
    for line in yaml.split_inclusive('\n') {
        let (body, end) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        let indent = body.len() - body.trim_start_matches([' ', '-']).len();
        let (head, rest) = body.split_at(indent);
        let (key, value) = match rest.split_once(": ") {
            Some((k, v)) if !k.starts_with(['\'', '"']) => (&rest[..k.len() + 2], v),
            _ if head.ends_with("- ") => ("", rest),
            _ => ("", ""),
        };
        if !value.is_empty() && yaml11_is_not_a_string(value) {
            out.push_str(head);
            out.push_str(key);
            out.push('\'');
            out.push_str(value);
            out.push('\'');
        } else {
            out.push_str(body);
        }
        out.push_str(end);
    }
    out
}

/// Whether go-yaml (YAML 1.1, as kubectl reads manifests) resolves the
/// plain scalar `v` to something other than a string: a boolean
/// (`yes`, `on`, `n`, ...), null, or a number (`0x1f`, `0755`, `1_000`,
/// `.inf`).
pub(super) fn yaml11_is_not_a_string(v: &str) -> bool {
    const WORDS: &[&str] = &[
        "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "true", "True", "TRUE", "false",
        "False", "FALSE", "on", "On", "ON", "off", "Off", "OFF", "~", "null", "Null", "NULL",
        ".inf", ".Inf", ".INF", "-.inf", "-.Inf", "-.INF", "+.inf", "+.Inf", "+.INF", ".nan",
        ".NaN", ".NAN",
    ];
    if WORDS.contains(&v) {
        return true;
    }
    let digits: String = v.chars().filter(|c| *c != '_').collect();
    let unsigned = digits.strip_prefix(['-', '+']).unwrap_or(&digits);
    let all = |s: &str, f: fn(char) -> bool| !s.is_empty() && s.chars().all(f);
    let int = all(unsigned, |c| c.is_ascii_digit())
        || unsigned
            .strip_prefix("0x")
            .is_some_and(|h| all(h, |c| c.is_ascii_hexdigit()))
        || unsigned
            .strip_prefix("0b")
            .is_some_and(|b| all(b, |c| c == '0' || c == '1'))
        || unsigned
            .strip_prefix("0o")
            .is_some_and(|o| all(o, |c| ('0'..='7').contains(&c)));
    // [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?
    let float = {
        let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
            Some(at) => (&unsigned[..at], Some(&unsigned[at + 1..])),
            None => (unsigned, None),
        };
        let mantissa_ok = match mantissa.split_once('.') {
            Some((a, b)) => {
                (a.is_empty() && all(b, |c| c.is_ascii_digit()))
                    || (all(a, |c| c.is_ascii_digit()) && b.chars().all(|c| c.is_ascii_digit()))
            }
            None => all(mantissa, |c| c.is_ascii_digit()),
        };
        let exponent_ok = exponent.is_none_or(|e| {
            all(e.strip_prefix(['-', '+']).unwrap_or(e), |c| {
                c.is_ascii_digit()
            })
        });
        mantissa_ok && exponent_ok
    };
    int || float
}
