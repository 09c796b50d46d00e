//! A [`Notice`] in words. The fields a notice mentions are
//! [`Mention`]s: each face names them its own way when it renders the
//! [`Text`] (the CLI `--source worktree`, the action `` `source: worktree` ``).

use crate::field::{Field, Mention, Text};
use crate::notice::{MetadataKind, Notice, Unattested};
use crate::text;

/// What `n` says, its fields as mentions.
pub fn notice(n: &Notice) -> Text {
    match n {
        Notice::WorktreeDiffers {
            path,
            commit,
            difference,
        } => text![format!(
            "{}: the folder on disk differs from commit {commit} ({difference}); the image holds the disk, not the commit",
            path.display()
        )],
        Notice::NoCommit { cause } => cause
            .clone()
            .then("; building without commit annotations (revision, created)"),
        Notice::AnomaliesUnchecked { cause } => {
            text!["could not check the existing tags for anomalies: "].then(cause.clone())
        }
        Notice::PrefixOwnerUnknown { tag, cause } => text![format!(
            "could not read which ref published {tag} (its provenance): "
        )]
        .then(cause.clone())
        .then("; one ImagePolicy follows every ref that publishes under one prefix"),
        Notice::NoProvenance(Unattested::NoCommit) => {
            text!["no provenance attached: the folder is not in a git commit"]
        }
        Notice::NoProvenance(Unattested::Worktree) => text![
            "no provenance attached: ",
            Mention::Set(Field::Source, "worktree".to_string()),
            " packages the disk, which no commit attests"
        ],
        Notice::BranchUnordered { tag, count, first } => text![
            format!(
                "branch tag {tag}: {count} tagged commit(s) could not be ordered against this one, so a racing \
                 run's newer image may not have been followed ({first}); "
            ),
            Mention::CompareApi
        ],
        Notice::StampedOutsideGit { tag } => text![format!(
            "tag {tag} is shaped like a timestamp tag, but the folder is not in a git commit: nothing attests the commit it names"
        )],
        Notice::MetadataKept {
            kind,
            key,
            value,
            kept,
        } => text![format!(
            "{} {key}={value} ignored: the history sets {kept}",
            metadata_kind(*kind)
        )],
        Notice::CreatedIgnored { kind, key, value } => text![format!(
            "{} {key}={value} ignored: a build time would make every rebuild of the commit a new image",
            metadata_kind(*kind)
        )],
    }
}

fn metadata_kind(kind: MetadataKind) -> &'static str {
    match kind {
        MetadataKind::Annotation => "annotation",
        MetadataKind::Label => "label",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::fields::Inputs;
    use crate::field::Cli;

    /// Every kind of notice, each with what the CLI printed for it before
    /// notices were values (the words of `main`, written out by hand).
    fn every() -> Vec<(Notice, &'static str)> {
        vec![
            (
                Notice::WorktreeDiffers {
                    path: "configs/shop".into(),
                    commit: "0123456789abcdef0123456789abcdef01234567".into(),
                    difference: "app.yaml differs".into(),
                },
                "configs/shop: the folder on disk differs from commit 0123456789abcdef0123456789abcdef01234567 \
                 (app.yaml differs); the image holds the disk, not the commit",
            ),
            (
                Notice::NoCommit {
                    cause: text![
                        "configs/new: no commit holds the folder (",
                        Field::Revision,
                        ")"
                    ],
                },
                "configs/new: no commit holds the folder (--revision); building without commit annotations \
                 (revision, created)",
            ),
            (
                Notice::AnomaliesUnchecked {
                    cause: text!["HTTP 401 listing the tags"],
                },
                "could not check the existing tags for anomalies: HTTP 401 listing the tags",
            ),
            (
                Notice::PrefixOwnerUnknown {
                    tag: "main-1700000000-abcdef0".into(),
                    cause: text!["HTTP 500"],
                },
                "could not read which ref published main-1700000000-abcdef0 (its provenance): HTTP 500; one \
                 ImagePolicy follows every ref that publishes under one prefix",
            ),
            (
                Notice::NoProvenance(Unattested::NoCommit),
                "no provenance attached: the folder is not in a git commit",
            ),
            (
                Notice::NoProvenance(Unattested::Worktree),
                "no provenance attached: --source worktree packages the disk, which no commit attests",
            ),
            (
                Notice::BranchUnordered {
                    tag: "latest".into(),
                    count: 2,
                    first: "commit 1111111 is not in this clone".into(),
                },
                "branch tag latest: 2 tagged commit(s) could not be ordered against this one, so a racing run's \
                 newer image may not have been followed (commit 1111111 is not in this clone); set \
                 GITHUB_REPOSITORY and GITHUB_TOKEN so the GitHub compare API can answer",
            ),
            (
                Notice::StampedOutsideGit {
                    tag: "main-1700000000-abcdef0".into(),
                },
                "tag main-1700000000-abcdef0 is shaped like a timestamp tag, but the folder is not in a git \
                 commit: nothing attests the commit it names",
            ),
            (
                Notice::MetadataKept {
                    kind: MetadataKind::Label,
                    key: "org.opencontainers.image.source".into(),
                    value: "https://x".into(),
                    kept: "https://y".into(),
                },
                "label org.opencontainers.image.source=https://x ignored: the history sets https://y",
            ),
            (
                Notice::CreatedIgnored {
                    kind: MetadataKind::Annotation,
                    key: "org.opencontainers.image.created".into(),
                    value: "2020-01-01T00:00:00Z".into(),
                },
                "annotation org.opencontainers.image.created=2020-01-01T00:00:00Z ignored: a build time would \
                 make every rebuild of the commit a new image",
            ),
        ]
    }

    #[test]
    fn the_cli_words_each_notice_as_before() {
        for (n, cli) in every() {
            assert_eq!(notice(&n).render(&Cli), cli, "{n:?}");
            assert_eq!(notice(&n).to_string(), cli, "{n:?}");
        }
    }

    /// The action names its inputs: no flag in any notice (the nested
    /// cause's field too), `source: worktree` for the disk.
    #[test]
    fn the_action_names_no_flag() {
        for (n, _) in every() {
            let said = notice(&n).render(&Inputs::Publish);
            assert!(!said.contains("--"), "{said}");
        }
        assert_eq!(
            notice(&Notice::NoProvenance(Unattested::Worktree)).render(&Inputs::Publish),
            "no provenance attached: `source: worktree` packages the disk, which no commit attests"
        );
        assert_eq!(
            notice(&every()[1].0).render(&Inputs::Publish),
            "configs/new: no commit holds the folder (the event's commit); building without commit \
             annotations (revision, created)"
        );
    }
}
