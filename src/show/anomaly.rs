//! An [`Anomaly`] in words: what it means and what to do about it. The
//! CLI prints it on stderr and in `--json` (`message`), the action
//! annotates it, the controller emits it as an Event.

use serde::Serialize;

use crate::field::{Face, Mention, Text};
use crate::release::ordering::{Anomaly, AnomalyKind, Case};
use crate::tag::Stamped;

/// An anomaly as `--json` and the action's `images` output show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AnomalyLine {
    /// What kind.
    pub kind: AnomalyKind,
    /// What it means and what to do about it ([`message`]).
    pub message: String,
    /// The tag Flux serves after this push.
    pub served: String,
}

impl AnomalyLine {
    /// The line of `a` in `face`'s words.
    pub fn of(a: &Anomaly, face: &dyn Face) -> AnomalyLine {
        AnomalyLine {
            kind: a.kind,
            message: message(a, face),
            served: a.served.clone(),
        }
    }
}

/// Flux's tie rule, as the messages state it.
const TIE_RULE: &str = "On equal timestamps Flux serves the alphabetically smallest tag";
const TIE_RULE_LOWER: &str = "on equal timestamps Flux serves the alphabetically smallest tag";
/// What mends a commit stamped lower than one Flux serves.
const CLOCK_FIX: &str = "Fix: commit one more change to the folder with a correct clock (an empty commit does \
                         not count; edit a comment in a settings file), or merge through GitHub, which stamps \
                         the time itself";
/// What settles a same-second pick.
const SETTLE: &str = "It settles with the next commit that changes the folder in a later second (an empty \
                      commit does not count; edit a comment in a settings file)";

/// What `a` means and what to do about it, in `face`'s words. Every
/// message names the tag Flux serves after the push ([`Anomaly::served`]).
pub fn message(a: &Anomaly, face: &dyn Face) -> String {
    match &a.case {
        Case::Rewound {
            commit,
            ts,
            new_tag,
            newest,
            rev,
            before,
            moves_to_new,
        } => rewound(commit, *ts, new_tag, newest, rev, before, *moves_to_new).render(face),
        Case::Rerun {
            commit,
            ts,
            new_tag,
            newest,
            rev,
            moves_to_new: true,
        } => format!(
            "commit {} is an ancestor of {rev}, already published as {} in the same second ({ts}): this is the \
             first run (or a re-run) of an older job after its descendant was published. {TIE_RULE}, and \
             {new_tag} sorts before {}, so after this push Flux serves {new_tag}: Flux moves to the older \
             commit's content and stops serving {}'s newer one (`promote` picks it too). {SETTLE}",
            short(commit),
            newest.tag,
            newest.tag,
            newest.tag
        ),
        Case::Rerun {
            commit,
            ts,
            new_tag,
            newest,
            rev,
            moves_to_new: false,
        } => format!(
            "commit {} is an ancestor of {rev}, already published as {}: this is a re-run of an older job \
             (or its first run after a newer commit was published); {new_tag} names this older commit's \
             content and Flux keeps serving {} ({})",
            short(commit),
            newest.tag,
            newest.tag,
            why_kept(newest, *ts, new_tag)
        ),
        Case::BelowAncestor {
            commit,
            ts,
            new_tag,
            ancestor,
        } => format!(
            "the committer time of {} ({ts}) is lower than that of its ancestor {} ({}): \
             Flux's numerical policy keeps serving {} and ignores {new_tag} until a later commit. The \
             committer clock was behind, or history was rewritten (a rebase with \
             --committer-date-is-author-date). {CLOCK_FIX}",
            short(commit),
            ancestor.tag,
            ancestor.ts,
            a.served,
        ),
        Case::BelowOffHistory {
            commit,
            ts,
            new_tag,
            newest,
            revision,
            forced_before,
        } => below_off_history(
            commit,
            *ts,
            new_tag,
            newest,
            revision.as_deref(),
            forced_before.as_deref(),
        ),
        Case::SameSecondServesNew {
            ts,
            new_tag,
            names,
            older,
        } => same_second_new(*ts, new_tag, names, older.as_deref()),
        Case::SameSecondServesOther {
            ts,
            new_tag,
            sha7,
            served,
            newer,
        } => same_second_other(*ts, new_tag, sha7, served, newer.as_deref()),
    }
}

/// The message of a commit stamped lower than the newest tag's, whose
/// commit (`revision`) this one's history does not hold: history was
/// rewritten, by a force-push from `forced_before` when the run knows it.
fn below_off_history(
    commit: &str,
    ts: u64,
    new_tag: &str,
    newest: &Stamped,
    revision: Option<&str>,
    forced_before: Option<&str>,
) -> String {
    let what = match forced_before {
        Some(before) => format!(
            "a force-push rewrote the branch (it named {} before)",
            short(before)
        ),
        None => "history was rewritten (a force-push or reset)".to_string(),
    };
    format!(
        "the committer time of {} ({ts}) is lower than that of {} ({}), whose commit {} is not in this \
         commit's history: {what}. Flux's numerical policy keeps serving {}, content the branch no longer \
         has, and ignores {new_tag} until a commit with a later time. {CLOCK_FIX}",
        short(commit),
        newest.tag,
        newest.ts,
        revision.map_or("(none recorded)", short),
        newest.tag
    )
}

/// The message of a new tag that shares its second with the tags `names`
/// of other commits and sorts first, so Flux serves it; `older`: the tag
/// that descends from this commit, when one does.
fn same_second_new(ts: u64, new_tag: &str, names: &[String], older: Option<&str>) -> String {
    let older = older
        .map(|t| format!(" This commit is the older one ({t} descends from it): Flux moves to the older content."))
        .unwrap_or_default();
    format!(
        "{} {} the same timestamp ({ts}) as {new_tag} but another commit: {TIE_RULE_LOWER}, so Flux serves \
         {new_tag}, this commit, whatever order the registry lists them in.{older} {SETTLE}",
        names.join(", "),
        if names.len() == 1 { "has" } else { "have" },
    )
}

/// The message of a new tag that shares its second with `served`, another
/// commit's tag that sorts first, so Flux keeps serving that; `newer`: the
/// commit this one descends from, when it does.
fn same_second_other(
    ts: u64,
    new_tag: &str,
    sha7: &str,
    served: &Stamped,
    newer: Option<&str>,
) -> String {
    let newer = newer
        .map(|rev| {
            format!(
                " This commit is the newer one (it descends from {}): Flux keeps serving the older content.",
                short(rev)
            )
        })
        .unwrap_or_default();
    format!(
        "{} has the same timestamp ({ts}) as {new_tag} but another commit: {TIE_RULE_LOWER}, so Flux serves {}, not \
         this commit, whose {sha7} sorts after {}.{newer} {SETTLE}",
        served.tag, served.tag, served.sha7,
    )
}

/// The message of a rewind: a force-push from `before` dropped `rev`, the
/// newest tagged commit (`newest`), going back to its ancestor `commit`.
fn rewound(
    commit: &str,
    ts: u64,
    new_tag: &str,
    newest: &Stamped,
    rev: &str,
    before: &str,
    moves_to_new: bool,
) -> Text {
    let rewound = format!(
        "a force-push rewound the branch from {} to {}, an ancestor of {rev}, which the branch no longer \
         has",
        short(before),
        short(commit),
    );
    if moves_to_new {
        format!(
            "{rewound}. {new_tag} has the same timestamp ({ts}) as {}, the dropped commit's tag, and sorts \
             before it ({TIE_RULE_LOWER}), so after this push Flux serves {new_tag}, this commit: Flux moves \
             back to the older commit, the content the rewound branch has, and `promote` picks it too. \
             Nothing more is needed for Flux: the dropped commit's tag sorts after this one, and the next \
             commit in a later second is served as usual",
            newest.tag
        )
        .into()
    } else {
        crate::text![
            format!(
                "{rewound}: Flux keeps serving {} (the dropped commit's content), because {}. To serve this \
                 commit's content, a new commit must carry it with a current timestamp: push the dropped \
                 commits back and then a commit that reverts them, or commit one more change to the folder \
                 on the rewound branch (an empty commit does not count; edit a comment in a settings file). \
                 Into a gated channel, ",
                newest.tag,
                why_kept(newest, ts, new_tag),
            ),
            Mention::BreakGlass,
            format!(
                " then releases it at once; promoting before that would copy {} into the channel",
                newest.tag
            )
        ]
    }
}

/// Why Flux keeps serving `kept` over a new tag `new_tag` at `ts` (kept
/// is Flux's pick over both).
fn why_kept(kept: &Stamped, ts: u64, new_tag: &str) -> String {
    if kept.ts > ts {
        format!("its timestamp is higher than {new_tag}'s")
    } else {
        format!("it has the same timestamp ({ts}) and sorts before {new_tag}: {TIE_RULE_LOWER}")
    }
}

fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::release::channel::parse;

    const COMMIT: &str = "1234567890abcdef1234567890abcdef12345678";
    const REV: &str = "fedcba0987654321fedcba0987654321fedcba09";
    const BEFORE: &str = "aaaaaaaaaaaabbbbbbbbbbbbccccccccccccdddd";

    fn stamped(tag: &str) -> Stamped {
        parse("main", tag).unwrap()
    }

    fn of(kind: AnomalyKind, served: &str, case: Case) -> Anomaly {
        Anomaly {
            kind,
            case,
            served: served.into(),
            other_tag: String::new(),
        }
    }

    /// Each case with the words `main` printed for it (written out by hand
    /// from its format strings).
    pub(crate) fn every() -> Vec<(Anomaly, &'static str)> {
        let rerun = |ts, new_tag: &str, moves_to_new| Case::Rerun {
            commit: COMMIT.into(),
            ts,
            new_tag: new_tag.into(),
            newest: stamped("main-200-fedcba0"),
            rev: REV.into(),
            moves_to_new,
        };
        vec![
            (
                of(
                    AnomalyKind::RerunOfOlder,
                    "main-200-fedcba0",
                    rerun(100, "main-100-1234567", false),
                ),
                "commit 1234567890ab is an ancestor of fedcba0987654321fedcba0987654321fedcba09, already \
                 published as main-200-fedcba0: this is a re-run of an older job (or its first run after a \
                 newer commit was published); main-100-1234567 names this older commit's content and Flux keeps \
                 serving main-200-fedcba0 (its timestamp is higher than main-100-1234567's)",
            ),
            (
                of(
                    AnomalyKind::RerunOfOlder,
                    "main-200-1234567",
                    rerun(200, "main-200-1234567", true),
                ),
                "commit 1234567890ab is an ancestor of fedcba0987654321fedcba0987654321fedcba09, already \
                 published as main-200-fedcba0 in the same second (200): this is the first run (or a re-run) of \
                 an older job after its descendant was published. On equal timestamps Flux serves the \
                 alphabetically smallest tag, and main-200-1234567 sorts before main-200-fedcba0, so after this \
                 push Flux serves main-200-1234567: Flux moves to the older commit's content and stops serving \
                 main-200-fedcba0's newer one (`promote` picks it too). It settles with the next commit that \
                 changes the folder in a later second (an empty commit does not count; edit a comment in a \
                 settings file)",
            ),
            (
                of(
                    AnomalyKind::RewoundHistory,
                    "main-200-fedcba0",
                    Case::Rewound {
                        commit: COMMIT.into(),
                        ts: 100,
                        new_tag: "main-100-1234567".into(),
                        newest: stamped("main-200-fedcba0"),
                        rev: REV.into(),
                        before: BEFORE.into(),
                        moves_to_new: false,
                    },
                ),
                "a force-push rewound the branch from aaaaaaaaaaaa to 1234567890ab, an ancestor of \
                 fedcba0987654321fedcba0987654321fedcba09, which the branch no longer has: Flux keeps serving \
                 main-200-fedcba0 (the dropped commit's content), because its timestamp is higher than \
                 main-100-1234567's. To serve this commit's content, a new commit must carry it with a current \
                 timestamp: push the dropped commits back and then a commit that reverts them, or commit one \
                 more change to the folder on the rewound branch (an empty commit does not count; edit a comment \
                 in a settings file). Into a gated channel, `promote --force --reason ...` then releases it at \
                 once; promoting before that would copy main-200-fedcba0 into the channel",
            ),
            (
                of(
                    AnomalyKind::RewoundHistory,
                    "main-200-1234567",
                    Case::Rewound {
                        commit: COMMIT.into(),
                        ts: 200,
                        new_tag: "main-200-1234567".into(),
                        newest: stamped("main-200-fedcba0"),
                        rev: REV.into(),
                        before: BEFORE.into(),
                        moves_to_new: true,
                    },
                ),
                "a force-push rewound the branch from aaaaaaaaaaaa to 1234567890ab, an ancestor of \
                 fedcba0987654321fedcba0987654321fedcba09, which the branch no longer has. main-200-1234567 has \
                 the same timestamp (200) as main-200-fedcba0, the dropped commit's tag, and sorts before it (on \
                 equal timestamps Flux serves the alphabetically smallest tag), so after this push Flux serves \
                 main-200-1234567, this commit: Flux moves back to the older commit, the content the rewound \
                 branch has, and `promote` picks it too. Nothing more is needed for Flux: the dropped commit's \
                 tag sorts after this one, and the next commit in a later second is served as usual",
            ),
            (
                of(
                    AnomalyKind::BackwardsTimestamp,
                    "main-400-0000001",
                    Case::BelowAncestor {
                        commit: COMMIT.into(),
                        ts: 100,
                        new_tag: "main-100-1234567".into(),
                        ancestor: stamped("main-300-abcdef0"),
                    },
                ),
                "the committer time of 1234567890ab (100) is lower than that of its ancestor main-300-abcdef0 \
                 (300): Flux's numerical policy keeps serving main-400-0000001 and ignores main-100-1234567 until \
                 a later commit. The committer clock was behind, or history was rewritten (a rebase with \
                 --committer-date-is-author-date). Fix: commit one more change to the folder with a correct \
                 clock (an empty commit does not count; edit a comment in a settings file), or merge through \
                 GitHub, which stamps the time itself",
            ),
            (
                of(
                    AnomalyKind::BackwardsTimestamp,
                    "main-200-fedcba0",
                    Case::BelowOffHistory {
                        commit: COMMIT.into(),
                        ts: 100,
                        new_tag: "main-100-1234567".into(),
                        newest: stamped("main-200-fedcba0"),
                        revision: Some(REV.into()),
                        forced_before: Some(BEFORE.into()),
                    },
                ),
                "the committer time of 1234567890ab (100) is lower than that of main-200-fedcba0 (200), whose \
                 commit fedcba098765 is not in this commit's history: a force-push rewrote the branch (it named \
                 aaaaaaaaaaaa before). Flux's numerical policy keeps serving main-200-fedcba0, content the branch \
                 no longer has, and ignores main-100-1234567 until a commit with a later time. Fix: commit one \
                 more change to the folder with a correct clock (an empty commit does not count; edit a comment \
                 in a settings file), or merge through GitHub, which stamps the time itself",
            ),
            (
                of(
                    AnomalyKind::BackwardsTimestamp,
                    "main-200-fedcba0",
                    Case::BelowOffHistory {
                        commit: COMMIT.into(),
                        ts: 100,
                        new_tag: "main-100-1234567".into(),
                        newest: stamped("main-200-fedcba0"),
                        revision: None,
                        forced_before: None,
                    },
                ),
                "the committer time of 1234567890ab (100) is lower than that of main-200-fedcba0 (200), whose \
                 commit (none recorded) is not in this commit's history: history was rewritten (a force-push or \
                 reset). Flux's numerical policy keeps serving main-200-fedcba0, content the branch no longer \
                 has, and ignores main-100-1234567 until a commit with a later time. Fix: commit one more change \
                 to the folder with a correct clock (an empty commit does not count; edit a comment in a \
                 settings file), or merge through GitHub, which stamps the time itself",
            ),
            (
                of(
                    AnomalyKind::SameTimestamp,
                    "main-100-1234567",
                    Case::SameSecondServesNew {
                        ts: 100,
                        new_tag: "main-100-1234567".into(),
                        names: vec!["main-100-bbbbbbb".into()],
                        older: Some("main-100-bbbbbbb".into()),
                    },
                ),
                "main-100-bbbbbbb has the same timestamp (100) as main-100-1234567 but another commit: on equal \
                 timestamps Flux serves the alphabetically smallest tag, so Flux serves main-100-1234567, this \
                 commit, whatever order the registry lists them in. This commit is the older one \
                 (main-100-bbbbbbb descends from it): Flux moves to the older content. It settles with the next \
                 commit that changes the folder in a later second (an empty commit does not count; edit a \
                 comment in a settings file)",
            ),
            (
                of(
                    AnomalyKind::SameTimestamp,
                    "main-100-1234567",
                    Case::SameSecondServesNew {
                        ts: 100,
                        new_tag: "main-100-1234567".into(),
                        names: vec!["main-100-bbbbbbb".into(), "main-100-ccccccc".into()],
                        older: None,
                    },
                ),
                "main-100-bbbbbbb, main-100-ccccccc have the same timestamp (100) as main-100-1234567 but \
                 another commit: on equal timestamps Flux serves the alphabetically smallest tag, so Flux serves \
                 main-100-1234567, this commit, whatever order the registry lists them in. It settles with the \
                 next commit that changes the folder in a later second (an empty commit does not count; edit a \
                 comment in a settings file)",
            ),
            (
                of(
                    AnomalyKind::SameTimestamp,
                    "main-100-0000000",
                    Case::SameSecondServesOther {
                        ts: 100,
                        new_tag: "main-100-1234567".into(),
                        sha7: "1234567".into(),
                        served: stamped("main-100-0000000"),
                        newer: Some(REV.into()),
                    },
                ),
                "main-100-0000000 has the same timestamp (100) as main-100-1234567 but another commit: on equal \
                 timestamps Flux serves the alphabetically smallest tag, so Flux serves main-100-0000000, not \
                 this commit, whose 1234567 sorts after 0000000. This commit is the newer one (it descends from \
                 fedcba098765): Flux keeps serving the older content. It settles with the next commit that \
                 changes the folder in a later second (an empty commit does not count; edit a comment in a \
                 settings file)",
            ),
            (
                of(
                    AnomalyKind::SameTimestamp,
                    "main-100-0000000",
                    Case::SameSecondServesOther {
                        ts: 100,
                        new_tag: "main-100-1234567".into(),
                        sha7: "1234567".into(),
                        served: stamped("main-100-0000000"),
                        newer: None,
                    },
                ),
                "main-100-0000000 has the same timestamp (100) as main-100-1234567 but another commit: on equal \
                 timestamps Flux serves the alphabetically smallest tag, so Flux serves main-100-0000000, not \
                 this commit, whose 1234567 sorts after 0000000. It settles with the next commit that changes \
                 the folder in a later second (an empty commit does not count; edit a comment in a settings \
                 file)",
            ),
        ]
    }

    #[test]
    fn each_case_is_worded_as_before() {
        for (a, words) in every() {
            assert_eq!(message(&a, &crate::field::Cli), words, "{:?}", a.case);
        }
    }

    /// The rewind that Flux does not follow names break-glass in each
    /// face's words: the CLI's command, the action's inputs, and for a
    /// SettingsImage (which does not promote) the command and the action
    /// that do; neither the action nor the controller names a CLI flag
    /// alone.
    #[test]
    fn break_glass_is_named_in_each_faces_words() {
        use crate::action::fields::Inputs;
        use crate::controller::spec::Spec;
        let (a, _) = every()
            .into_iter()
            .find(|(a, _)| {
                matches!(
                    a.case,
                    Case::Rewound {
                        moves_to_new: false,
                        ..
                    }
                )
            })
            .unwrap();
        let cli = message(&a, &crate::field::Cli);
        assert!(
            cli.contains("Into a gated channel, `promote --force --reason ...` then releases it"),
            "{cli}"
        );
        let publish = message(&a, &Inputs::Publish);
        assert!(
            publish.contains(
                "Into a gated channel, the promote action with `force: true` and a `reason` then"
            ),
            "{publish}"
        );
        let promote = message(&a, &Inputs::Promote);
        assert!(
            promote.contains("Into a gated channel, `force: true` with a `reason` then"),
            "{promote}"
        );
        let spec = message(&a, &Spec);
        assert!(
            spec.contains("`settings-image promote --force --reason ...` (or the promote action's `force: true`"),
            "{spec}"
        );
        for words in [publish, promote] {
            assert!(!words.contains("--"), "{words}");
        }
    }

    /// `--json` and the action's `images` keep the keys and their order.
    #[test]
    fn the_json_line_keeps_kind_message_served() {
        let (a, words) = every().swap_remove(0);
        let json = serde_json::to_string(&AnomalyLine::of(&a, &crate::field::Cli)).unwrap();
        assert_eq!(
            json,
            format!(
                "{{\"kind\":\"rerun-of-older\",\"message\":{},\"served\":\"main-200-fedcba0\"}}",
                serde_json::to_string(words).unwrap()
            )
        );
    }
}
