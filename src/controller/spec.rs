//! Checks a SettingsImage's spec before anything is fetched or pushed, and
//! says which field is wrong in the resource's own words
//! (`spec.repository`, not `--repository`): [`Spec`] is the controller's
//! face, which every error the controller reports is rendered in. The
//! checks are the request's own ([`Request::validate`], as the CLI and the
//! action make them) and what only a SettingsImage has (a path relative to
//! the repository root, `spec.interval`). A spec that fails here stalls
//! the resource: nothing is pushed until the spec changes.

use std::path::PathBuf;
use std::time::Duration;

use super::crd::SettingsImageSpec;
use crate::branch_tag::Change;
use crate::error::{Error, Result};
use crate::field::{Face, Field, Mention};
use crate::report::Report;
use crate::request::{Forward, Request, Target};
use crate::text;

/// The default `spec.interval`.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(600);

/// What the checks found out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    /// The folder or glob, relative to the repository root, `/`-separated,
    /// without `./`.
    pub path: String,
    /// `spec.interval`, or the default.
    pub interval: Duration,
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
            // `flux --settings-image` follows spec.timestampTag.
            Field::TimestampTag | Field::Prefix => Some("spec.timestampTag"),
            Field::BranchTag => Some("spec.branchTag"),
            Field::NoProvenance => Some("spec.provenance: false"),
            Field::Insecure => Some("spec.insecure: true"),
            Field::Username | Field::Password | Field::SecretRef => Some("spec.secretRef"),
            // A SettingsImage's tags are the timestamp tag and the branch tag.
            Field::Tag => Some("spec.timestampTag or spec.branchTag"),
            Field::Interval => Some("spec.interval"),
            _ => None,
        }
    }

    /// `field` in a SettingsImage's words: its spec path, or what sets it
    /// in the cluster, or that a SettingsImage does not do it.
    fn words(field: Field) -> String {
        if let Some(p) = Spec::path(field) {
            return p.to_string();
        }
        let promote =
            "which a SettingsImage does not do (`settings-image promote` and its action promote)";
        let flux = "(the objects `settings-image flux` writes)";
        match field {
            Field::AllowRewind => "moving the branch tag sideways, which a SettingsImage never does: delete \
                 the branch tag in the registry, and the next publish puts it on the new commit"
                .into(),
            Field::ForcePushedFrom => "the head before a force-push, which a SettingsImage is not told: \
                 delete the branch tag in the registry, and the next publish puts it on the new commit"
                .into(),
            Field::Source => "the fetched commit's folder (a SettingsImage publishes nothing else)".into(),
            Field::Output => {
                "an OCI layout, which a SettingsImage does not write (it pushes to spec.repository)".into()
            }
            Field::Revision => "the revision of spec.sourceRef's artifact".into(),
            Field::Monolithic => {
                "monolithic uploads, which the controller does not make (it uploads in chunks)".into()
            }
            Field::AllowEmpty | Field::Scan => {
                "a cluster scan, which a SettingsImage does not do (`settings-image verify` scans)".into()
            }
            Field::From => format!("the tags a promotion starts from, {promote}"),
            Field::To => format!("a channel, {promote}"),
            Field::TargetRepository => format!("a promotion's target repository, {promote}"),
            Field::Policy => format!("a release policy, {promote}"),
            Field::Force => format!("break-glass, {promote}"),
            Field::Reason => format!("the reason for break-glass, {promote}"),
            Field::Explain => format!("a promotion that only explains, {promote}"),
            Field::At => format!("a promotion's time, {promote}"),
            Field::SourceUrl => "the source URL, which a SettingsImage takes from spec.sourceRef's \
                 GitRepository (its spec.url)"
                .into(),
            Field::IdTokenFile => {
                "an ID token file, which the controller does not read: spec.provider logs in with the \
                 cluster's identity"
                    .into()
            }
            Field::CertSecretRef => format!("the Flux ImageRepository's spec.certSecretRef {flux}"),
            Field::GitBranch => {
                format!("the Flux ImageUpdateAutomation's spec.git.checkout.ref.branch {flux}")
            }
            Field::GitPushBranch => {
                format!("the Flux ImageUpdateAutomation's spec.git.push.branch {flux}")
            }
            Field::GitPath => format!("the Flux ImageUpdateAutomation's spec.update.path {flux}"),
            // A spec path: said above.
            Field::Path
            | Field::Repository
            | Field::TimestampTag
            | Field::Prefix
            | Field::BranchTag
            | Field::NoProvenance
            | Field::Insecure
            | Field::Username
            | Field::Password
            | Field::SecretRef
            | Field::Tag
            | Field::Interval => "a field a SettingsImage has".into(),
        }
    }
}

impl Face for Spec {
    fn mention(&self, m: &Mention) -> String {
        match m {
            Mention::Field(f) | Mention::Subject(f) => Spec::words(*f),
            Mention::Set(Field::Source, value) if value == "commit" => {
                "the fetched commit's folder".to_string()
            }
            Mention::Set(Field::Source, _) => {
                "a worktree (a SettingsImage publishes only the fetched commit)".to_string()
            }
            Mention::Set(f, value) => match Spec::path(*f) {
                Some(p) => format!("{p}: {value}"),
                None => Spec::words(*f),
            },
            Mention::Credentials(_) => "spec.secretRef".to_string(),
            Mention::Login { host, .. } => format!(
                "spec.secretRef (a kubernetes.io/dockerconfigjson Secret with a login for {host}), or \
                 spec.provider (the cloud identity of the controller)"
            ),
            Mention::Looked(Some(rev)) => format!("not in the commit {rev}"),
            Mention::Looked(None) => "not in the fetched commit".to_string(),
            Mention::PathRoot => "the repository root".to_string(),
            Mention::CompareApi => "a SettingsImage orders commits only by the history it fetched \
                 (spec.sourceRef's branch), which does not hold them"
                .to_string(),
            // A SettingsImage does not promote: the command that does.
            Mention::BreakGlass => {
                "`settings-image promote --force --reason ...` (or the promote action's `force: true` \
                 with a `reason`)"
                    .to_string()
            }
            Mention::About(f) => match Spec::path(*f) {
                Some(p) => format!("{p}: "),
                None => String::new(),
            },
            // The controller's own process arguments: set in its Deployment.
            Mention::Bound(b) => format!(
                "the controller's bound on {}: its container argument {} (in its Deployment)",
                b.what(),
                b.argument()
            ),
        }
    }
}

/// The error text of `e`, its causes and its hint, in one line, in a
/// SettingsImage's words.
pub fn said(e: &Error) -> String {
    let text = crate::error::error_chain_in(e, &Spec);
    match hint(e) {
        Some(h) => format!("{text} ({h})"),
        None => text,
    }
}

/// The hint of `e` in a SettingsImage's words. A branch tag that would
/// move sideways has its own: the CLI's way (a re-run that allows it) is
/// not the controller's.
fn hint(e: &Error) -> Option<String> {
    match e {
        Error::Rewind { .. } => Some(
            "the branch's history was rewritten (force-push, reset); a SettingsImage never moves its branch \
             tag sideways: to move it to this commit, delete the branch tag in the registry, and the next \
             publish puts it there"
                .to_string(),
        ),
        _ => e.hint_in(&Spec),
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

/// Checks `spec`: what only a SettingsImage has (a repository-relative
/// path, `spec.interval`), then the request the controller publishes
/// with ([`Request::validate`], as every face checks it), the folder's
/// name and the branch a stand-in until the commit is fetched.
pub fn check(spec: &SettingsImageSpec) -> Result<Checked> {
    let path = repo_path(&spec.path)?;
    let interval = match &spec.interval {
        None => DEFAULT_INTERVAL,
        Some(s) => parse_duration(s).filter(|d| !d.is_zero()).ok_or_else(|| {
            Error::input(
                text![
                    Field::Interval,
                    format!(" {s:?} is not a duration above zero")
                ],
                Some("give a Go duration, e.g. 10m or 1h30m".to_string()),
            )
        })?,
    };
    // A template is checked with a stand-in folder name, a missing
    // spec.timestampTag with a stand-in branch (the fetched branch is
    // checked when the controller publishes).
    let sample = spec
        .repository
        .replace("{name}", "folder")
        .replace("{path}", "folder");
    let request = Request {
        timestamp_tag: Some(spec.timestamp_tag.clone().unwrap_or_else(|| "main".into())),
        forward: Forward {
            branch_tag: spec.branch_tag.clone(),
            ..Forward::default()
        },
        ..Request::new(
            PathBuf::from(&path),
            Target::Registry(crate::registry::Options::new(sample)),
        )
    };
    request.validate()?;
    Ok(Checked { path, interval })
}

/// `spec.path` as a repository-relative path: no absolute path, no `..`,
/// `./` and doubled slashes dropped; `.` for the root.
fn repo_path(raw: &str) -> Result<String> {
    let t = raw.trim();
    if t.starts_with('/') {
        return Err(Error::input_hinted(
            text![Field::Path, format!(" {raw:?} is absolute")],
            text![
                "give the folder relative to ",
                Mention::PathRoot,
                ", e.g. configs/shop"
            ],
        ));
    }
    let mut parts = Vec::new();
    for c in t.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                return Err(Error::input_hinted(
                    text![
                        Field::Path,
                        format!(" {raw:?} leaves the repository (`..`)")
                    ],
                    text![
                        "give a folder under ",
                        Mention::PathRoot,
                        ", e.g. configs/shop"
                    ],
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

    /// `check`'s error for `spec`, in a SettingsImage's words.
    fn refused(spec: &SettingsImageSpec) -> String {
        said(&check(spec).unwrap_err())
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
            refused(&spec("../x", "ghcr.io/a/b")),
            "spec.path \"../x\" leaves the repository (`..`) (give a folder under the repository root, \
             e.g. configs/shop)"
        );
        assert_eq!(
            refused(&spec("/x", "ghcr.io/a/b")),
            "spec.path \"/x\" is absolute (give the folder relative to the repository root, e.g. configs/shop)"
        );
        // The request's own checks, in the spec's words, each message
        // leading with the field as a SettingsImage's messages do.
        assert_eq!(
            refused(&spec("x", "no-host")),
            "spec.repository: invalid repository \"no-host\": no registry host (expected HOST/NAME) \
             (spec.repository is HOST/NAME with a registry host, e.g. ghcr.io/OWNER/settings or \
             localhost:5000/settings; NAME is lower-case [a-z0-9] words joined by '.', '_', '__' or '-', \
             separated by '/')"
        );
        assert_eq!(
            refused(&spec("x", "ghcr.io/Acme/b")),
            "spec.repository: invalid repository \"ghcr.io/Acme/b\": upper-case letters in the name \
             (ghcr.io only accepts lower-case package names, and GitHub owners are often written with \
             capitals: use spec.repository: ghcr.io/acme/b)"
        );
        assert_eq!(
            refused(&spec("x", "https://ghcr.io/a")),
            "spec.repository: invalid repository \"https://ghcr.io/a\": a repository has no URL scheme \
             (drop the scheme: ghcr.io/a (plain HTTP is used for loopback hosts, or with spec.insecure: true))"
        );
        let mut s = spec("x", "ghcr.io/a/b");
        s.branch_tag = Some("main-1700000000-0a1b2c3".into());
        assert_eq!(
            refused(&s),
            "spec.branchTag \"main-1700000000-0a1b2c3\" is a timestamp tag (name the moving tag after the \
             branch, e.g. spec.branchTag: main)"
        );
        let mut s = spec("x", "ghcr.io/a/b");
        s.branch_tag = Some("-x".into());
        assert!(
            refused(&s).starts_with("spec.branchTag: "),
            "{}",
            refused(&s)
        );
        let mut s = spec("x", "ghcr.io/a/b");
        s.timestamp_tag = Some("///".into());
        assert!(
            refused(&s).starts_with("spec.timestampTag: "),
            "{}",
            refused(&s)
        );
        let mut s = spec("x", "ghcr.io/a/b");
        s.interval = Some("10 minutes".into());
        assert_eq!(
            refused(&s),
            "spec.interval \"10 minutes\" is not a duration above zero (give a Go duration, e.g. 10m or 1h30m)"
        );
        s.interval = Some("0s".into());
        assert!(refused(&s).starts_with("spec.interval \"0s\" "));
        // The CLI says the same errors without the leading field.
        let e = check(&spec("x", "no-host")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid repository \"no-host\": no registry host (expected HOST/NAME)"
        );
        assert_eq!(e.exit_code(), 2);
    }

    #[test]
    fn messages_name_spec_paths_not_flags() {
        // A tag in the repository: the CLI says `--tag`/`--repository`,
        // the action `tags`/`repository`, a SettingsImage its spec paths.
        let text = refused(&spec("x", "ghcr.io/acme/shop:v1"));
        assert!(
            text.starts_with(
                "spec.repository: invalid repository \"ghcr.io/acme/shop:v1\": give the tag with \
                 spec.timestampTag or spec.branchTag, not in spec.repository (spec.repository is HOST/NAME"
            ),
            "{text}"
        );
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
        // A branch tag that would move sideways: what to do in the
        // cluster, not the CLI's re-run.
        let rewind = Error::Rewind {
            tag: "ghcr.io/a/b:main".into(),
            current: "a".into(),
            new: "b".into(),
        };
        assert_eq!(
            said(&rewind),
            "branch tag ghcr.io/a/b:main records commit a, and b does not descend from it: refusing to move it \
             sideways (the branch's history was rewritten (force-push, reset); a SettingsImage never moves its \
             branch tag sideways: to move it to this commit, delete the branch tag in the registry, and the \
             next publish puts it there)"
        );
        // A fetch past a bound: the controller's own container argument.
        let git = Error::Git {
            url: "https://git.example/a.git".into(),
            message: "the server sent a pack larger than 8 MiB, and more was coming".into(),
            hint: Some("if the repository is meant to be this large".into()),
            kind: crate::error::GitFailure::TooLarge(crate::field::FetchBound::Bytes),
        };
        assert_eq!(
            said(&git),
            "git https://git.example/a.git: the server sent a pack larger than 8 MiB, and more was coming \
             (if the repository is meant to be this large: raise the controller's bound on the bytes of pack \
             one fetch may receive: its container argument --fetch-max-bytes (in its Deployment) \
             (docs/controller.md, \"Fetch bounds\"))"
        );
    }

    /// Every field and every kind of mention, in a SettingsImage's
    /// words: none names a flag of the CLI; only a fetch bound names the
    /// controller's own container argument, and break-glass the command
    /// that promotes (a SettingsImage does not).
    #[test]
    fn no_mention_names_a_cli_flag() {
        for m in crate::field::every_mention() {
            let said = Spec.mention(&m);
            let flag = crate::field::names_a_flag(&said);
            match &m {
                Mention::Bound(b) => assert_eq!(flag, Some(b.argument()), "{m:?}: {said}"),
                Mention::BreakGlass => {
                    assert!(
                        said.starts_with("`settings-image promote --force"),
                        "{said}"
                    )
                }
                _ => assert_eq!(flag, None, "{m:?}: {said}"),
            }
            assert!(!said.contains("CLI"), "{m:?}: {said}");
        }
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
