//! The checks every option passes before it is written into an object:
//! one-line text, branch names, the automation's folder, object names and
//! intervals, each refused as an input error naming the option: a
//! [`Field`] where a flag sets it, else words (a default no flag sets).

use crate::error::{Error, Result};
use crate::field::{Field, Text};
use crate::text;

/// Refuses a value holding a character that ends a YAML line or comment
/// (control characters, including NEL, and the Unicode line and paragraph
/// separators) or a byte-order mark: every option is at least this.
pub(super) fn check_text(what: impl Into<Text>, value: &str) -> Result<()> {
    let what = what.into();
    let bad = value
        .chars()
        .find(|c| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}'));
    match bad {
        None => Ok(()),
        Some(c) => Err(Error::input_hinted(
            what.clone()
                .then(format!(" {value:?} holds the character {c:?}")),
            text!["give "]
                .then(what)
                .then(" on one line, without control characters"),
        )),
    }
}

/// Checks a branch name as `git check-ref-format --branch` does (the
/// automation's checkout and push branches).
pub(super) fn check_branch(what: Field, name: &str) -> Result<()> {
    check_text(what, name)?;
    let bad_char = name
        .chars()
        .find(|c| matches!(c, ' ' | '~' | '^' | ':' | '?' | '*' | '[' | '\\'));
    let why = if name.is_empty() {
        Some("it is empty".to_string())
    } else if let Some(c) = bad_char {
        Some(format!("a branch name cannot hold {c:?}"))
    } else if name.starts_with('-') || name.starts_with('/') || name.ends_with('/') {
        Some("a branch name does not start with '-' or '/', or end with '/'".to_string())
    } else if name.contains("..") || name.contains("//") || name.contains("@{") || name == "@" {
        Some("a branch name cannot hold '..', '//' or '@{', or be '@'".to_string())
    } else if name.ends_with('.') || name.ends_with(".lock") {
        Some("a branch name does not end with '.' or '.lock'".to_string())
    } else if name.split('/').any(|c| c.starts_with('.')) {
        Some("no part of a branch name starts with '.'".to_string())
    } else {
        None
    };
    match why {
        None => Ok(()),
        Some(why) => Err(Error::input(
            text![what, format!(" {name:?} is not a branch name: {why}")],
            Some("give the cluster repository's branch, e.g. main".to_string()),
        )),
    }
}

/// Checks the automation's folder: relative to the cluster repository's
/// root, without `..`.
pub(super) fn check_git_path(path: &str) -> Result<()> {
    check_text(Field::GitPath, path)?;
    let why = if path.is_empty() {
        Some("it is empty")
    } else if path.starts_with('/') {
        Some("it is absolute")
    } else if path.split('/').any(|c| c == "..") {
        Some("it leaves the repository with '..'")
    } else {
        None
    };
    match why {
        None => Ok(()),
        Some(why) => Err(Error::input(
            text![
                Field::GitPath,
                format!(" {path:?} is not a folder of the cluster repository: {why}")
            ],
            Some("give the folder relative to the repository's root, e.g. ./clusters/prod".into()),
        )),
    }
}

/// Checks a Kubernetes object name (RFC 1123 subdomain, at most 253).
pub(super) fn check_name(what: impl Into<Text>, name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        });
    if ok {
        Ok(())
    } else {
        Err(Error::input(
            what.into()
                .then(format!(" {name:?} is not a Kubernetes object name")),
            Some(
                "use lowercase letters, digits and '-', starting and ending with a letter or digit"
                    .into(),
            ),
        ))
    }
}

/// The shortest interval the generated objects get: below a second Flux
/// lists the registry's tags and runs the automation back to back (`0s`
/// passes the CRDs' pattern).
pub(super) const MIN_INTERVAL_SECONDS: f64 = 1.0;

/// Checks a Go duration as Flux's CRDs accept it (`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`),
/// at least [`MIN_INTERVAL_SECONDS`].
pub(super) fn check_interval(s: &str) -> Result<String> {
    let mut rest = s;
    let mut ok = !s.is_empty();
    let mut seconds = 0f64;
    while ok && !rest.is_empty() {
        let mut len = rest.bytes().take_while(u8::is_ascii_digit).count();
        if len == 0 {
            ok = false;
            break;
        }
        if rest[len..].starts_with('.') {
            let d = rest[len + 1..]
                .bytes()
                .take_while(u8::is_ascii_digit)
                .count();
            ok = d > 0;
            len += 1 + d;
        }
        let (number, after) = rest.split_at(len);
        let unit = [("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0)]
            .into_iter()
            .find(|(u, _)| after.starts_with(u));
        match unit {
            Some((u, scale)) => {
                rest = &after[u.len()..];
                seconds += number.parse::<f64>().unwrap_or(0.0) * scale;
            }
            None => ok = false,
        }
    }
    if !ok {
        return Err(Error::input(
            format!("interval {s:?} is not a duration"),
            Some("give a Go duration such as 1m, 5m or 1h30m".into()),
        ));
    }
    if seconds < MIN_INTERVAL_SECONDS {
        return Err(Error::input(
            format!(
                "interval {s:?} is shorter than 1s: Flux would list the registry's tags and run the automation back to back"
            ),
            Some("give an interval such as 1m or 5m (the default)".into()),
        ));
    }
    Ok(s.to_string())
}
