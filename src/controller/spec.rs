//! Checks a SettingsImage's spec before anything is fetched or pushed, and
//! says which field is wrong in the resource's own words
//! (`spec.repository`, not `--repository`): [`Spec`] is the controller's
//! face, which every error the controller reports is rendered in. A spec
//! that fails here stalls the resource: nothing is pushed until the spec
//! changes.

use std::time::Duration;

use super::crd::SettingsImageSpec;
use crate::branch_tag::Change;
use crate::error::Error;
use crate::field::{Face, Field, Mention};
use crate::report::Report;

/// The default `spec.interval`.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(600);

/// A field that is wrong, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// The field, e.g. `spec.repository`.
    pub field: &'static str,
    /// What is wrong with it.
    pub message: String,
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// What the checks found out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    /// The folder or glob, relative to the repository root, `/`-separated,
    /// without `./`.
    pub path: String,
    /// `spec.interval`, or the default.
    pub interval: Duration,
}

fn invalid(field: &'static str, message: impl Into<String>) -> Invalid {
    Invalid {
        field,
        message: message.into(),
    }
}

/// A SettingsImage's words for the request's fields: spec paths.
#[derive(Debug, Clone, Copy, Default)]
pub struct Spec;

impl Spec {
    /// The spec path that sets `field`, when a SettingsImage has one.
    fn path(field: Field) -> Option<&'static str> {
        match field {
            Field::Path => Some("spec.path"),
            Field::Repository => Some("spec.repository"),
            Field::TimestampTag => Some("spec.timestampTag"),
            Field::BranchTag => Some("spec.branchTag"),
            Field::NoProvenance => Some("spec.provenance: false"),
            Field::Insecure => Some("spec.insecure: true"),
            Field::Username | Field::Password => Some("spec.secretRef"),
            // A SettingsImage's tags are the timestamp tag and the branch tag.
            Field::Tag => Some("spec.timestampTag or spec.branchTag"),
            _ => None,
        }
    }
}

impl Face for Spec {
    fn mention(&self, m: &Mention) -> String {
        match m {
            Mention::Field(f) | Mention::Subject(f) => match Spec::path(*f) {
                Some(p) => p.to_string(),
                None => format!(
                    "{} (the CLI's; a SettingsImage has no such field)",
                    f.flag()
                ),
            },
            Mention::Set(f, value) => match Spec::path(*f) {
                Some(p) => format!("{p}: {value}"),
                None => format!(
                    "{} {value} (the CLI's; a SettingsImage has no such field)",
                    f.flag()
                ),
            },
            Mention::Credentials(_) => "spec.secretRef".to_string(),
            Mention::Looked(Some(rev)) => format!("not in the commit {rev}"),
            Mention::Looked(None) => "not in the fetched commit".to_string(),
            Mention::PathRoot => "the repository root".to_string(),
        }
    }
}

/// The error text of `e`, its causes and its hint, in one line, in a
/// SettingsImage's words.
pub fn said(e: &Error) -> String {
    let text = crate::error::error_chain_in(e, &Spec);
    match e.hint_in(&Spec) {
        Some(h) => format!("{text} ({h})"),
        None => text,
    }
}

/// The controller's words for what a publish did to the branch tag of
/// `repository`: a line when the tag was held on a newer commit (an older
/// revision never moves it back), else nothing.
pub fn branch_note(repository: &str, report: &Report) -> Option<String> {
    let b = report.branch_tag.as_ref()?;
    match b.change {
        Change::Held { .. } => Some(format!(
            "{repository}: branch tag {} stays on commit {}, newer than {}: an older revision never moves it back",
            b.name,
            b.recorded.as_deref().unwrap_or("?"),
            b.commit.as_deref().unwrap_or("?")
        )),
        _ => None,
    }
}

/// Checks `spec`.
pub fn check(spec: &SettingsImageSpec) -> Result<Checked, Invalid> {
    let path = repo_path(&spec.path)?;
    // A template is checked with a stand-in folder name.
    let sample = spec
        .repository
        .replace("{name}", "folder")
        .replace("{path}", "folder");
    crate::registry::parse_repository(&sample).map_err(|e| invalid("spec.repository", said(&e)))?;
    if let Some(prefix) = &spec.timestamp_tag {
        crate::tag::sanitize_prefix(prefix).map_err(|e| invalid("spec.timestampTag", said(&e)))?;
    }
    if let Some(b) = &spec.branch_tag {
        crate::tag::validate_writable(b).map_err(|e| invalid("spec.branchTag", said(&e)))?;
        if crate::tag::is_timestamp_tag(b) {
            return Err(invalid(
                "spec.branchTag",
                format!(
                    "{b:?} is a timestamp tag; name the moving tag after the branch, e.g. main"
                ),
            ));
        }
    }
    let interval = match &spec.interval {
        None => DEFAULT_INTERVAL,
        Some(s) => parse_duration(s).filter(|d| !d.is_zero()).ok_or_else(|| {
            invalid(
                "spec.interval",
                format!("{s:?} is not a duration above zero (e.g. 10m, 1h30m)"),
            )
        })?,
    };
    Ok(Checked { path, interval })
}

/// `spec.path` as a repository-relative path: no absolute path, no `..`,
/// `./` and doubled slashes dropped; `.` for the root.
fn repo_path(raw: &str) -> Result<String, Invalid> {
    let t = raw.trim();
    if t.starts_with('/') {
        return Err(invalid(
            "spec.path",
            format!(
                "{raw:?} is absolute; give the folder relative to the repository root, e.g. configs/shop"
            ),
        ));
    }
    let mut parts = Vec::new();
    for c in t.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                return Err(invalid(
                    "spec.path",
                    format!("{raw:?} leaves the repository (`..`)"),
                ));
            }
            c => parts.push(c),
        }
    }
    Ok(if parts.is_empty() {
        ".".to_string()
    } else {
        parts.join("/")
    })
}

/// Parses a Go duration (`300ms`, `1.5h`, `1h30m`, `10s`) as Flux takes
/// `spec.interval`.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let mut rest = s.trim();
    if rest.is_empty() {
        return None;
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let n = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let value: f64 = rest[..n].parse().ok()?;
        rest = &rest[n..];
        let u = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..u] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        rest = &rest[u..];
        total += value * scale;
    }
    Duration::try_from_secs_f64(total).ok()
}

/// `d` as a Go duration a person reads (`1h30m`, `1m`, `250ms`).
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        return format!("{}ns", d.as_nanos());
    }
    let (h, m, s, rest) = (ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000);
    let mut out = String::new();
    for (n, unit) in [(h, "h"), (m, "m"), (s, "s"), (rest, "ms")] {
        if n > 0 {
            out.push_str(&format!("{n}{unit}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::crd::{Provider, SourceKind, SourceRef};

    fn spec(path: &str, repository: &str) -> SettingsImageSpec {
        SettingsImageSpec {
            source_ref: SourceRef {
                kind: SourceKind::GitRepository,
                name: "app".into(),
                namespace: None,
            },
            path: path.into(),
            repository: repository.into(),
            timestamp_tag: None,
            branch_tag: None,
            provenance: true,
            insecure: false,
            secret_ref: None,
            provider: Provider::Generic,
            suspend: false,
            interval: None,
        }
    }

    #[test]
    fn each_bad_field_is_named() {
        assert_eq!(
            check(&spec("./configs//shop", "ghcr.io/a/b")).unwrap().path,
            "configs/shop"
        );
        assert_eq!(
            check(&spec("configs/*", "ghcr.io/a/{name}")).unwrap().path,
            "configs/*"
        );
        assert_eq!(
            check(&spec("../x", "ghcr.io/a/b")).unwrap_err().field,
            "spec.path"
        );
        assert_eq!(
            check(&spec("/x", "ghcr.io/a/b")).unwrap_err().field,
            "spec.path"
        );
        for bad in [
            "ghcr.io/Acme/b",
            "no-host",
            "https://ghcr.io/a",
            "ghcr.io/a/b:tag",
        ] {
            assert_eq!(
                check(&spec("x", bad)).unwrap_err().field,
                "spec.repository",
                "{bad}"
            );
        }
        let mut s = spec("x", "ghcr.io/a/b");
        s.branch_tag = Some("main-1700000000-0a1b2c3".into());
        assert_eq!(check(&s).unwrap_err().field, "spec.branchTag");
        let mut s = spec("x", "ghcr.io/a/b");
        s.interval = Some("10 minutes".into());
        assert_eq!(check(&s).unwrap_err().field, "spec.interval");
    }

    #[test]
    fn messages_name_spec_paths_not_flags() {
        // A tag in the repository: the CLI says `--tag`/`--repository`,
        // the action `tags`/`repository`, a SettingsImage its spec paths.
        let e = check(&spec("x", "ghcr.io/acme/shop:v1")).unwrap_err();
        assert_eq!(e.field, "spec.repository");
        assert!(
            e.message.contains(
                "give the tag with spec.timestampTag or spec.branchTag, not in spec.repository \
                 (spec.repository is HOST/NAME"
            ),
            "{e}"
        );
        assert!(!e.message.contains("--"), "a CLI flag: {e}");
        // A folder the commit does not hold: not "not on disk", not `--path`.
        let missing = Error::Source {
            path: "configs/shop".into(),
            message: crate::text![
                "does not exist (",
                Mention::Looked(Some("0a1b2c3".into())),
                ")"
            ],
            hint: Some(crate::text![
                Field::Path,
                " names the settings folder, relative to ",
                Mention::PathRoot
            ]),
        };
        assert_eq!(
            said(&missing),
            "configs/shop: does not exist (not in the commit 0a1b2c3) (spec.path names the settings folder, \
             relative to the repository root)"
        );
        assert_eq!(
            missing.to_string(),
            "configs/shop: does not exist (not on disk, not in the commit 0a1b2c3)"
        );
        // A field a SettingsImage does not have is said to be the CLI's.
        let rewind = Error::Rewind {
            tag: "ghcr.io/a/b:main".into(),
            current: "a".into(),
            new: "b".into(),
        };
        let text = said(&rewind);
        assert!(
            text.contains(
                "re-run with --allow-rewind (the CLI's; a SettingsImage has no such field)"
            ),
            "{text}"
        );
    }

    #[test]
    fn go_durations() {
        assert_eq!(parse_duration("10m"), Some(Duration::from_secs(600)));
        assert_eq!(parse_duration("1h30m"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration("10"), None);
        assert_eq!(parse_duration("5d"), None);
        assert_eq!(parse_duration(""), None);
        for d in ["1h30m", "1m", "10s", "250ms", "2h1s"] {
            assert_eq!(format_duration(parse_duration(d).unwrap()), d);
        }
    }
}
