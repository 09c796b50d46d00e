//! The golden table of messages: every error variant, every notice and
//! every anomaly case, as each face says it, through the function that
//! face prints it with: the CLI's stderr lines ([`crate::cli::error_lines`]),
//! the action's workflow commands ([`crate::action::commands::error_line`])
//! and a SettingsImage's status and Events ([`crate::controller::spec::said`]).
//! docs/messages.md is the table; a change of any word fails here, naming
//! the first line that differs.
//!
//! Regenerate it with
//! `SETTINGS_IMAGE_WRITE_REFERENCE=1 cargo nextest run --lib messages_tests`
//! (then review the diff and commit it).
//!
//! Besides the exact words, the test holds what no golden file can be
//! trusted to keep: every variant of [`Error`], [`Notice`] and [`Case`]
//! (read from their source files) has a row, and neither the action nor
//! the controller names a CLI flag, except the controller's own container
//! arguments and a command it tells the user to run.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::PathBuf;

use crate::action::commands;
use crate::action::fields::Inputs;
use crate::controller::spec;
use crate::error::{Error, GitFailure, PublishedSoFar};
use crate::field::{FetchBound, Field, Mention};
use crate::notice::{MetadataKind, Notice, Unattested};
use crate::request::{Forward, Request, Target};
use crate::text;

const PAGE: &str = "docs/messages.md";

/// One error as the faces meet it: the variant it shows, what case it is,
/// and which action's inputs name its fields.
struct ErrorRow {
    variant: &'static str,
    case: &'static str,
    inputs: Inputs,
    meets: Meets,
    error: Error,
}

/// Which faces meet a message: the CLI, the action, a SettingsImage.
type Meets = [bool; 3];
const ALL: Meets = [true, true, true];
/// Not a SettingsImage: it publishes fetched commits only, never a
/// worktree, an OCI layout or a promotion, and needs no GitHub API.
const NOT_CONTROLLER: Meets = [true, true, false];
/// Only the CLI's process (`controller` is one of its commands).
const CLI_ONLY: Meets = [true, false, false];
const FACES: [&str; 3] = ["CLI", "action", "controller"];

fn row(variant: &'static str, case: &'static str, error: Error) -> ErrorRow {
    ErrorRow {
        variant,
        case,
        inputs: Inputs::Publish,
        meets: ALL,
        error,
    }
}

/// `r` met only by `meets`.
fn only(meets: Meets, r: ErrorRow) -> ErrorRow {
    ErrorRow { meets, ..r }
}

const DIGEST_A: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
const DIGEST_B: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";
const COMMIT: &str = "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567";
const BEFORE: &str = "fedcba9876543210fedcba9876543210fedcba98";

fn request() -> Request {
    Request::new(
        PathBuf::from("configs/shop"),
        Target::Registry(crate::registry::Options::new("ghcr.io/acme/settings-shop")),
    )
}

/// Every error variant at least once; the input errors from the core's
/// own checks, the others built as the core builds them.
fn errors() -> Vec<ErrorRow> {
    let timestamp_branch_tag = Request {
        timestamp_tag: Some("main".into()),
        forward: Forward {
            branch_tag: Some("main-1700000000-0a1b2c3".into()),
            ..Forward::default()
        },
        ..request()
    }
    .validate()
    .unwrap_err();
    let upper_case = crate::registry::name::parse_repository("ghcr.io/Acme/Shop")
        .unwrap_err()
        .about(Field::Repository);
    let json = serde_json::from_str::<serde_json::Value>("{").unwrap_err();
    let registry = Error::Registry {
        reference: "ghcr.io/acme/settings-shop".into(),
        what: format!("uploading blob {DIGEST_A}"),
        message: "HTTP 500 Internal Server Error".into(),
        hint: None,
    };
    let mut rows = vec![
        row(
            "Input",
            "a branch tag shaped like a timestamp tag",
            timestamp_branch_tag,
        ),
        row("Input", "a repository with capitals", upper_case),
        ErrorRow {
            inputs: Inputs::Promote,
            meets: NOT_CONTROLLER,
            ..row(
                "Input",
                "break-glass without a reason",
                crate::promote::break_glass(true, None).unwrap_err(),
            )
        },
        ErrorRow {
            inputs: Inputs::Promote,
            meets: NOT_CONTROLLER,
            ..row(
                "Input",
                "a reason without break-glass",
                crate::promote::break_glass(false, Some("hotfix")).unwrap_err(),
            )
        },
        row(
            "Source",
            "a folder not in the commit",
            Error::Source {
                path: "configs/shop".into(),
                message: "is not in the HEAD commit (untracked, ignored or deleted)".into(),
                hint: Some(text![
                    "commit the folder first, or use ",
                    Mention::Set(Field::Source, "worktree".into()),
                    " to package it from disk without a timestamp tag"
                ]),
            },
        ),
        row(
            "Io",
            "a file that cannot be read",
            Error::io(
                "reading configs/shop/app.yaml",
                std::io::Error::from_raw_os_error(13),
            ),
        ),
        row(
            "Json",
            "JSON that does not parse",
            Error::json("reading the event payload", json),
        ),
        only(
            NOT_CONTROLLER,
            row(
                "Layout",
                "an output directory that is not a layout",
                Error::Layout {
                    path: "out".into(),
                    message: "index.json is missing and the directory is not empty".into(),
                },
            ),
        ),
        row(
            "History",
            "a shallow clone",
            Error::History {
                path: "configs/shop".into(),
                message: text![
                    "this is a shallow clone and its history ends before the folder's last change"
                ],
                hint: Some(text![
                    "fetch the whole history (actions/checkout with fetch-depth: 0), or use ",
                    Mention::Set(Field::Source, "worktree".into())
                ]),
            },
        ),
        only(
            NOT_CONTROLLER,
            row(
                "GitHub",
                "the API refused",
                Error::GitHub {
                    what: "list commits for configs/shop".into(),
                    message: "HTTP 403 Forbidden: Resource not accessible by integration".into(),
                    hint: Some("give the job `permissions: contents: read`".into()),
                },
            ),
        ),
        row(
            "TagExists",
            "a timestamp tag with other content",
            Error::TagExists {
                tag: "ghcr.io/acme/settings-shop:main-1700000000-0a1b2c3".into(),
                existing: DIGEST_A.into(),
                new: DIGEST_B.into(),
            },
        ),
        ErrorRow {
            inputs: Inputs::Promote,
            meets: NOT_CONTROLLER,
            ..row(
                "ChannelMismatch",
                "a channel tag written by hand",
                Error::ChannelMismatch {
                    tag: "ghcr.io/acme/settings-shop:prod-1700000000-0a1b2c3".into(),
                    digest: DIGEST_A.into(),
                    candidate_tag: "ghcr.io/acme/settings-shop:main-1700000000-0a1b2c3".into(),
                    candidate: format!("holds {DIGEST_B}"),
                },
            )
        },
        row(
            "TagRaced",
            "a racing run won the tag",
            Error::TagRaced {
                tag: "ghcr.io/acme/settings-shop:main-1700000000-0a1b2c3".into(),
                theirs: DIGEST_A.into(),
                ours: DIGEST_B.into(),
            },
        ),
        row(
            "PrefixShared",
            "two refs under one prefix",
            Error::PrefixShared {
                prefix: "feat-x".into(),
                tag: "ghcr.io/acme/settings-shop:feat-x-1700000000-0a1b2c3".into(),
                theirs: "refs/heads/feat/x".into(),
                ours: "refs/heads/feat+x".into(),
                suggestion: "feat-x-2".into(),
            },
        ),
        row(
            "Rewind",
            "a branch tag that would move sideways",
            Error::Rewind {
                tag: "ghcr.io/acme/settings-shop:main".into(),
                current: BEFORE.into(),
                new: COMMIT.into(),
            },
        ),
        row("Registry", "a registry failure", registry),
        row(
            "Auth",
            "no credentials that may push",
            Error::Auth {
                host: "ghcr.io".into(),
                message: "HTTP 401 Unauthorized".into(),
                hint: crate::registry::auth::auth_hint(
                    "ghcr.io",
                    crate::registry::auth::Access::Push,
                ),
            },
        ),
        row(
            "Git",
            "no such repository",
            Error::Git {
                url: "https://git.example/acme/settings".into(),
                message: "HTTP 404 Not Found".into(),
                hint: Some("check the repository URL".into()),
                kind: GitFailure::NotFound,
            },
        ),
        row(
            "Git",
            "a fetch past a bound",
            Error::Git {
                url: "https://git.example/acme/settings".into(),
                message: "the pack is larger than 1073741824 bytes".into(),
                hint: Some("the repository is larger than the controller fetches".into()),
                kind: GitFailure::TooLarge(FetchBound::Bytes),
            },
        ),
        only(
            CLI_ONLY,
            row(
                "LeaseLost",
                "the leader lost its Lease",
                Error::LeaseLost {
                    lease: "settings-image-controller".into(),
                },
            ),
        ),
        only(
            CLI_ONLY,
            row(
                "OutputClosed",
                "standard output closed",
                Error::OutputClosed,
            ),
        ),
        row(
            "AfterPublish",
            "the branch tag failed after the image was pushed",
            Error::AfterPublish {
                published: Box::new(PublishedSoFar {
                    reference: format!(
                        "ghcr.io/acme/settings-shop:main-1700000000-0a1b2c3@{DIGEST_A}"
                    ),
                    digest: DIGEST_A.into(),
                    tags: vec!["main-1700000000-0a1b2c3".into()],
                    pushed: true,
                    branch_tag: None,
                    provenance: None,
                    warnings: vec![Notice::NoProvenance(Unattested::Worktree)],
                }),
                error: Box::new(Error::Registry {
                    reference: "ghcr.io/acme/settings-shop:main".into(),
                    what: "putting the branch tag".into(),
                    message: "HTTP 503 Service Unavailable".into(),
                    hint: None,
                }),
            },
        ),
        only(
            NOT_CONTROLLER,
            row(
                "Mismatch",
                "an image without provenance",
                Error::Mismatch {
                    reference: format!("ghcr.io/acme/settings-shop@{DIGEST_A}"),
                    reason: text![
                        "the image has no provenance referrer: nothing attests which folder of which commit it \
                     was built from (pushed with ",
                        Field::NoProvenance,
                        " or by another tool)"
                    ],
                    file: None,
                },
            ),
        ),
    ];
    rows.sort_by_key(|r| r.variant);
    rows
}

/// Every notice, and the faces that meet it.
fn notices() -> Vec<(&'static str, Meets, Notice)> {
    vec![
        (
            "WorktreeDiffers",
            NOT_CONTROLLER,
            Notice::WorktreeDiffers {
                path: "configs/shop".into(),
                commit: COMMIT.into(),
                difference: "app.yaml".into(),
            },
        ),
        (
            "NoCommit",
            NOT_CONTROLLER,
            Notice::NoCommit {
                cause: text!["configs/shop: is not in the HEAD commit"],
            },
        ),
        (
            "AnomaliesUnchecked",
            ALL,
            Notice::AnomaliesUnchecked {
                cause: text!["registry ghcr.io/acme/settings-shop: listing tags failed: HTTP 500"],
            },
        ),
        (
            "PrefixOwnerUnknown",
            ALL,
            Notice::PrefixOwnerUnknown {
                tag: "main-1700000000-0a1b2c3".into(),
                cause: text!["no provenance referrer"],
            },
        ),
        (
            "NoProvenance (no commit)",
            NOT_CONTROLLER,
            Notice::NoProvenance(Unattested::NoCommit),
        ),
        (
            "NoProvenance (worktree)",
            NOT_CONTROLLER,
            Notice::NoProvenance(Unattested::Worktree),
        ),
        (
            "BranchUnordered",
            ALL,
            Notice::BranchUnordered {
                tag: "main".into(),
                count: 2,
                first: "commit 0a1b2c3 is not in this clone".into(),
            },
        ),
        (
            "StampedOutsideGit",
            NOT_CONTROLLER,
            Notice::StampedOutsideGit {
                tag: "main-1700000000-0a1b2c3".into(),
            },
        ),
        (
            "MetadataKept",
            ALL,
            Notice::MetadataKept {
                kind: MetadataKind::Annotation,
                key: "org.opencontainers.image.revision".into(),
                value: "abc".into(),
                kept: COMMIT.into(),
            },
        ),
        (
            "CreatedIgnored",
            ALL,
            Notice::CreatedIgnored {
                kind: MetadataKind::Label,
                key: "org.opencontainers.image.created".into(),
                value: "2026-01-01T00:00:00Z".into(),
            },
        ),
    ]
}

/// The variants of `enum name` in the source file `rel`: the lines at
/// the enum's first indentation that start with a capital.
fn variants(rel: &str, name: &str) -> BTreeSet<String> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(rel);
    let src = std::fs::read_to_string(&path).unwrap();
    let start = src.find(&format!("pub enum {name} {{")).unwrap();
    let body = &src[start..];
    let end = body.find("\n}").unwrap();
    body[..end]
        .lines()
        .skip(1)
        .filter(|l| l.starts_with("    ") && !l.starts_with("     "))
        .map(str::trim)
        .filter(|l| l.starts_with(|c: char| c.is_ascii_uppercase()))
        .map(|l| {
            l.split(|c: char| !c.is_ascii_alphanumeric())
                .next()
                .unwrap()
                .to_string()
        })
        .collect()
}

/// A `--flag` the action or the controller may name: the controller's
/// own container argument, or a flag of a command it tells the user to
/// run (`` `settings-image promote --force ...` ``).
fn flag_allowed(s: &str, at: usize) -> bool {
    let before = &s[..at];
    let in_command = before
        .rfind("`settings-image ")
        .is_some_and(|open| !before[open + 1..].contains('`'));
    before.ends_with("the controller's ") || before.ends_with("container argument ") || in_command
}

/// Every long flag of the CLI and its subcommands, as clap declares them.
fn cli_flags() -> BTreeSet<String> {
    use clap::CommandFactory;
    fn walk(c: &clap::Command, out: &mut BTreeSet<String>) {
        out.extend(
            c.get_arguments()
                .filter_map(|a| a.get_long())
                .map(|l| format!("--{l}")),
        );
        for sub in c.get_subcommands() {
            walk(sub, out);
        }
    }
    let mut out = BTreeSet::new();
    walk(&crate::cli::args::Cli::command(), &mut out);
    out
}

/// The CLI flags `s` names outside what [`flag_allowed`] allows (another
/// program's flag, such as git's, is not the CLI's).
fn flags(s: &str) -> Vec<String> {
    let ours = cli_flags();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(flag) = crate::field::names_a_flag(&s[from..]) {
        let at = from + s[from..].find(flag).unwrap();
        if ours.contains(flag) && !flag_allowed(s, at) {
            out.push(flag.to_string());
        }
        from = at + flag.len();
    }
    out
}

fn block(page: &mut String, face: &str, text: &str) {
    writeln!(page, "{face}:\n\n```text\n{text}\n```\n").unwrap();
}

/// The faces of `meets` that do not meet a row, as the page says it.
fn not_met(page: &mut String, meets: Meets) {
    let not: Vec<&str> = FACES
        .iter()
        .zip(meets)
        .filter(|(_, m)| !m)
        .map(|(f, _)| *f)
        .collect();
    if !not.is_empty() {
        writeln!(
            page,
            "Not met by: {} (no such case there).\n",
            not.join(", ")
        )
        .unwrap();
    }
}

/// docs/messages.md, and every action and controller text it holds.
fn page() -> (String, Vec<(String, String)>) {
    let mut page = String::from(
        "# Messages\n\n\
         <!-- Generated by src/messages_tests.rs: SETTINGS_IMAGE_WRITE_REFERENCE=1 cargo nextest run --lib messages_tests -->\n\n\
         Every error, warning and anomaly settings-image reports, one row for each kind, in the words \
         of each face: the CLI's standard error, the action's workflow commands (the log shows the text \
         after `::`, and the run's annotations its title), and a SettingsImage's status condition or \
         Event. The values (paths, tags, digests) are examples; the words are the tool's. A face names \
         the fields as its user sets them: the CLI its flags, the action its inputs, the controller \
         the SettingsImage's spec.\n\n\
         Exit codes: [exit-codes.md](exit-codes.md). What to do about the common ones: \
         [troubleshooting.md](troubleshooting.md).\n\n## Errors\n\n",
    );
    let mut said = Vec::new();
    for r in errors() {
        writeln!(page, "### {}: {}\n", r.variant, r.case).unwrap();
        let cli = crate::cli::error_lines(&r.error).join("\n");
        let who = match r.inputs {
            Inputs::Publish => "settings-image",
            Inputs::Promote => "settings-image promote",
        };
        let action = commands::error_line(who, &r.error, r.inputs);
        let controller = spec::said(&r.error);
        let [for_cli, for_action, for_controller] = r.meets;
        not_met(&mut page, r.meets);
        if for_cli {
            let cli = if cli.is_empty() {
                "(nothing: exit 141)"
            } else {
                &cli
            };
            block(&mut page, "CLI", cli);
        }
        if for_action {
            block(&mut page, "action", action.trim_end());
            said.push((format!("{} action", r.case), action));
        }
        if for_controller {
            block(&mut page, "controller", &controller);
            said.push((format!("{} controller", r.case), controller));
        }
    }
    page.push_str("## Warnings\n\n");
    for (name, meets, n) in notices() {
        writeln!(page, "### {name}\n").unwrap();
        not_met(&mut page, meets);
        let action = crate::action::publish::warning_annotation(&n);
        let event =
            crate::controller::reconcile::decide::warning_note("ghcr.io/acme/settings-shop", &n);
        block(&mut page, "CLI", &crate::cli::warning_line(&n));
        block(&mut page, "action", action.trim_end());
        said.push((format!("{name} action"), action));
        if meets[2] {
            let controller = format!("controller (Event {})", event.reason);
            block(&mut page, &controller, &event.message);
            said.push((format!("{name} controller"), event.message));
        }
    }
    page.push_str(
        "## Anomalies\n\nWhat Flux's numerical policy does with a push that is out of order.\n\n",
    );
    for (a, _) in crate::show::anomaly::tests::every() {
        writeln!(page, "### {}: {}\n", a.kind.as_str(), case_name(&a.case)).unwrap();
        let action = crate::action::publish::anomaly_annotation(&a, Some(new_tag(&a.case)));
        let event =
            crate::controller::reconcile::decide::anomaly_note("ghcr.io/acme/settings-shop", &a);
        block(&mut page, "CLI", &crate::cli::anomaly_line(&a));
        block(&mut page, "action", action.trim_end());
        block(
            &mut page,
            &format!("controller (Event {})", event.reason),
            &event.message,
        );
        said.push((format!("{} action", case_name(&a.case)), action));
        said.push((format!("{} controller", case_name(&a.case)), event.message));
    }
    (page, said)
}

/// The tag the push of case `c` made.
fn new_tag(c: &crate::release::ordering::Case) -> &str {
    use crate::release::ordering::Case;
    match c {
        Case::Rewound { new_tag, .. }
        | Case::Rerun { new_tag, .. }
        | Case::BelowAncestor { new_tag, .. }
        | Case::BelowOffHistory { new_tag, .. }
        | Case::SameSecondServesNew { new_tag, .. }
        | Case::SameSecondServesOther { new_tag, .. } => new_tag,
    }
}

/// The variant of `c` and what tells its rows apart.
fn case_name(c: &crate::release::ordering::Case) -> String {
    use crate::release::ordering::Case;
    match c {
        Case::Rewound { moves_to_new, .. } => format!("Rewound (Flux moves: {moves_to_new})"),
        Case::Rerun { moves_to_new, .. } => format!("Rerun (Flux moves: {moves_to_new})"),
        Case::BelowAncestor { .. } => "BelowAncestor".into(),
        Case::BelowOffHistory { forced_before, .. } => {
            format!(
                "BelowOffHistory (force-push known: {})",
                forced_before.is_some()
            )
        }
        Case::SameSecondServesNew { older, .. } => {
            format!(
                "SameSecondServesNew (this commit is the older: {})",
                older.is_some()
            )
        }
        Case::SameSecondServesOther { newer, .. } => {
            format!(
                "SameSecondServesOther (this commit is the newer: {})",
                newer.is_some()
            )
        }
    }
}

#[test]
fn every_message_in_every_face_is_the_golden_table() {
    let (generated, _) = page();
    crate::testkit::golden(PAGE, &generated, "cargo nextest run --lib messages_tests");
}

#[test]
fn every_variant_has_a_row() {
    let shown: BTreeSet<String> = errors().iter().map(|r| r.variant.to_string()).collect();
    assert_eq!(shown, variants("src/error.rs", "Error"));
    let shown: BTreeSet<String> = notices()
        .iter()
        .map(|(name, _, _)| name.split(' ').next().unwrap().to_string())
        .collect();
    assert_eq!(shown, variants("src/notice.rs", "Notice"));
    let shown: BTreeSet<String> = crate::show::anomaly::tests::every()
        .iter()
        .map(|(a, _)| case_name(&a.case).split(' ').next().unwrap().to_string())
        .collect();
    assert_eq!(shown, variants("src/release/ordering.rs", "Case"));
    // Both reasons a notice has no provenance.
    assert_eq!(
        notices().len(),
        variants("src/notice.rs", "Notice").len() + 1
    );
    // Each row once: every way a case with a choice goes.
    let cases: BTreeSet<String> = crate::show::anomaly::tests::every()
        .iter()
        .map(|(a, _)| case_name(&a.case))
        .collect();
    assert_eq!(cases.len(), crate::show::anomaly::tests::every().len());
    assert_eq!(cases.len(), 11, "{cases:#?}");
}

#[test]
fn neither_the_action_nor_the_controller_names_a_cli_flag() {
    let (_, said) = page();
    let named: Vec<(String, Vec<String>)> = said
        .into_iter()
        .map(|(row, s)| (row, flags(&s)))
        .filter(|(_, f)| !f.is_empty())
        .collect();
    assert!(named.is_empty(), "{named:#?}");
    // The check finds a flag where there is one, and allows the two ways
    // a face may name one.
    assert_eq!(flags("use --source worktree"), ["--source"]);
    assert!(flags("`settings-image promote --force --reason ...`").is_empty());
    assert!(flags("below the controller's --min-interval").is_empty());
    assert_eq!(flags("`settings-image x` then --force"), ["--force"]);
    assert!(flags("a rebase with --committer-date-is-author-date").is_empty());
}
