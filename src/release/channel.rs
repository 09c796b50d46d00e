//! Timestamp tags as Flux orders them, and the promotion decision.
//!
//! Flux's numerical policy filters tags with `^PREFIX-(?P<ts>[0-9]+)-[0-9a-f]{7}$`,
//! parses `ts` as a 64-bit float and takes the highest: a tag whose number
//! does not fit 64 bits is a tag like any other to it, so here too
//! ([`crate::tag::TagNumber`]). On equal numbers it
//! serves the alphabetically smallest tag: image-reflector-controller
//! (v1.0.0 and later) stores a repository's tags sorted descending as text,
//! and its regex filter keeps, for an equal extracted value, the tag that
//! comes later in that order. [`flux_cmp`] is that order and [`highest`]
//! the pick, so what we promote is what Flux serves.

use std::cmp::Ordering;

use super::policy::Gate;

pub use crate::tag::Stamped;

/// Parses `tag` if it is `PREFIX-<digits>-<7 lowercase hex>` for exactly
/// this prefix, however many digits (the grammar is
/// [`crate::tag::parse_timestamp_tag`]'s): every tag Flux's filter matches.
pub fn parse(prefix: &str, tag: &str) -> Option<Stamped> {
    crate::tag::parse_timestamp_tag(prefix, tag)
}

/// Flux's order of two timestamp tags: `Greater` when Flux serves `a`
/// over `b`. The higher time wins (as Flux's float compares them); on
/// equal times the alphabetically
/// smaller `<sha7>` (for one prefix, the smaller tag) wins. Tags of two
/// prefixes with the same time and commit compare equal (a channel tag and
/// its candidate).
pub fn flux_cmp(a: &Stamped, b: &Stamped) -> Ordering {
    a.ts.cmp(&b.ts).then_with(|| b.sha7.cmp(&a.sha7))
}

/// The tag Flux's numerical policy serves among `tags` for `prefix`: the
/// highest timestamp, and on equal timestamps the alphabetically smallest
/// tag ([`flux_cmp`]).
pub fn highest<'a>(prefix: &str, tags: impl IntoIterator<Item = &'a String>) -> Option<Stamped> {
    tags.into_iter()
        .filter_map(|t| parse(prefix, t))
        .max_by(flux_cmp)
}

/// The tags of `prefix` with the same timestamp as `pick` (Flux's pick),
/// smallest first, when there is more than one: the tie Flux broke.
pub fn tied<'a>(
    prefix: &str,
    pick: &Stamped,
    tags: impl IntoIterator<Item = &'a String>,
) -> Vec<String> {
    let mut same: Vec<String> = tags
        .into_iter()
        .filter_map(|t| parse(prefix, t))
        .filter(|s| s.ts == pick.ts)
        .map(|s| s.tag)
        .collect();
    same.sort();
    same.dedup();
    if same.len() > 1 { same } else { Vec::new() }
}

/// The kind of a [`Decision`], as `--json` and the action's `decision`
/// output spell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DecisionKind {
    /// No tag of the source prefix exists.
    NoCandidate,
    /// The channel already holds the candidate or something newer.
    UpToDate,
    /// Promote (or promoted, or would promote).
    Promote,
    /// Newer content waits for the gate.
    Wait,
}

impl DecisionKind {
    /// The kebab-case name: `no-candidate`, `up-to-date`, `promote`, `wait`.
    pub fn as_str(self) -> &'static str {
        match self {
            DecisionKind::NoCandidate => "no-candidate",
            DecisionKind::UpToDate => "up-to-date",
            DecisionKind::Promote => "promote",
            DecisionKind::Wait => "wait",
        }
    }
}

/// What a promotion run decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// No tag of the source prefix exists.
    NoCandidate,
    /// The channel already holds the candidate or something newer.
    UpToDate {
        /// The newest source tag.
        candidate: Stamped,
        /// The newest channel tag.
        current: Stamped,
    },
    /// Promote now.
    Promote {
        /// The source tag.
        candidate: Stamped,
        /// The channel tag to write (`CHANNEL-<ts>-<sha7>`).
        channel_tag: String,
        /// Why it may happen now (the window, or the break-glass reason).
        because: String,
        /// Whether break-glass bypassed a closed gate.
        forced: bool,
    },
    /// Newer content waits for the gate to open.
    Wait {
        /// The source tag that waits.
        candidate: Stamped,
        /// Why the gate is shut.
        reason: String,
    },
}

impl Decision {
    /// Its kind.
    pub fn kind(&self) -> DecisionKind {
        match self {
            Decision::NoCandidate => DecisionKind::NoCandidate,
            Decision::UpToDate { .. } => DecisionKind::UpToDate,
            Decision::Promote { .. } => DecisionKind::Promote,
            Decision::Wait { .. } => DecisionKind::Wait,
        }
    }
}

/// The tags of `from` that Flux, following channel `to`, would move to:
/// those it orders after the channel's highest tag (all of them when the
/// channel is empty), newest first in Flux's order, without repeats.
pub fn newer(from: &str, to: &str, tags: &[String]) -> Vec<Stamped> {
    let current = highest(to, tags);
    let mut out: Vec<Stamped> = tags
        .iter()
        .filter_map(|t| parse(from, t))
        .filter(|c| {
            current
                .as_ref()
                .is_none_or(|cur| flux_cmp(cur, c) == Ordering::Less)
        })
        .collect();
    out.sort_by(|a, b| flux_cmp(b, a).then_with(|| a.tag.cmp(&b.tag)));
    out.dedup_by(|a, b| a.tag == b.tag);
    out
}

/// What the release policy's requirements left to promote, when it has
/// any: the newest candidate newer than the channel that meets them all,
/// or why none does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Required {
    /// This candidate meets every requirement.
    Eligible(Stamped),
    /// None does; why, in words.
    NoneEligible(String),
}

/// Decides a promotion from `from` tags into channel `to`. `force` is the
/// break-glass reason; it opens a shut gate and bypasses the requirements
/// (promoting the newest candidate) but never promotes an older candidate.
/// `required` is `None` when the policy requires nothing: the newest
/// candidate goes.
pub fn decide(
    from: &str,
    to: &str,
    tags: &[String],
    gate: &Gate,
    force: Option<&str>,
    required: Option<&Required>,
) -> Decision {
    let Some(newest) = highest(from, tags) else {
        return Decision::NoCandidate;
    };
    let candidate = match required {
        Some(Required::Eligible(c)) => c.clone(),
        _ => newest.clone(),
    };
    // Up to date when Flux, following the channel, already serves the
    // candidate or a tag it orders after it (a same-second tag that sorts
    // first counts: Flux would not move from it to the candidate).
    if let Some(current) = highest(to, tags)
        && flux_cmp(&current, &newest) != Ordering::Less
    {
        return Decision::UpToDate {
            candidate: newest,
            current,
        };
    }
    if let Some(Required::NoneEligible(why)) = required {
        let channel_tag = format!("{to}-{}-{}", newest.ts, newest.sha7);
        return match force {
            Some(reason) => Decision::Promote {
                candidate: newest,
                channel_tag,
                because: format!(
                    "break-glass: {reason} (no candidate met the requirements: {why}; gate: {})",
                    gate.reason
                ),
                forced: true,
            },
            None => Decision::Wait {
                candidate: newest,
                reason: why.clone(),
            },
        };
    }
    let channel_tag = format!("{to}-{}-{}", candidate.ts, candidate.sha7);
    if gate.open {
        return Decision::Promote {
            candidate,
            channel_tag,
            because: gate.reason.clone(),
            forced: false,
        };
    }
    match force {
        // Break-glass promotes the newest candidate, met or not.
        Some(reason) => Decision::Promote {
            channel_tag: format!("{to}-{}-{}", newest.ts, newest.sha7),
            candidate: newest,
            because: format!("break-glass: {reason} (gate was shut: {})", gate.reason),
            forced: true,
        },
        None => Decision::Wait {
            candidate,
            reason: gate.reason.clone(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn gate(open: bool) -> Gate {
        Gate {
            open,
            reason: if open {
                "open"
            } else {
                "deny window active: freeze"
            }
            .into(),
            active: vec![],
        }
    }

    #[test]
    fn parsing_follows_the_flux_filter() {
        assert_eq!(
            parse("main", "main-17-abcdef0").and_then(|s| s.ts.as_u64()),
            Some(17)
        );
        assert!(parse("main", "main-17-abcdef").is_none());
        assert!(parse("main", "main-17-ABCDEF0").is_none());
        assert!(parse("main", "mainx-17-abcdef0").is_none());
        assert!(parse("main", "feature-main-17-abcdef0").is_none());
        assert!(parse("main", "main--abcdef0").is_none());
        // Equal times: the alphabetically smallest tag, in any listing order.
        for order in [
            ["main-7-ccccccc", "main-7-bbbbbbb", "main-7-ddddddd"],
            ["main-7-ddddddd", "main-7-bbbbbbb", "main-7-ccccccc"],
        ] {
            let h = highest("main", &tags(&order)).unwrap();
            assert_eq!(h.tag, "main-7-bbbbbbb");
            assert_eq!(
                tied("main", &h, &tags(&order)),
                ["main-7-bbbbbbb", "main-7-ccccccc", "main-7-ddddddd"]
            );
        }
        assert!(
            tied(
                "main",
                &highest("main", &tags(&["main-1-aaaaaaa"])).unwrap(),
                &tags(&["main-1-aaaaaaa"])
            )
            .is_empty()
        );
        // Numbers, not strings: 9 < 10.
        let h = highest(
            "main",
            &tags(&["main-9-aaaaaaa", "main-10-bbbbbbb", "prod-99-ccccccc"]),
        )
        .unwrap();
        assert_eq!(h.tag, "main-10-bbbbbbb");
    }

    #[test]
    fn decisions() {
        let t = tags(&["main-10-aaaaaaa", "main-20-bbbbbbb", "prod-10-aaaaaaa"]);
        match decide("main", "prod", &t, &gate(true), None, None) {
            Decision::Promote {
                channel_tag,
                forced,
                ..
            } => {
                assert_eq!(channel_tag, "prod-20-bbbbbbb");
                assert!(!forced);
            }
            d => panic!("{d:?}"),
        }
        assert_eq!(
            decide("main", "prod", &t, &gate(false), None, None).kind(),
            DecisionKind::Wait
        );
        match decide("main", "prod", &t, &gate(false), Some("incident 42"), None) {
            Decision::Promote {
                forced, because, ..
            } => assert!(forced && because.contains("incident 42")),
            d => panic!("{d:?}"),
        }
        // Up to date, and an older candidate is never promoted, not even by force.
        let t = tags(&["main-10-aaaaaaa", "prod-20-bbbbbbb"]);
        assert_eq!(
            decide("main", "prod", &t, &gate(true), Some("x"), None).kind(),
            DecisionKind::UpToDate
        );
        // A same-second candidate that sorts first is what Flux serves on
        // the prefix: promoted, and then the channel serves it too.
        let t = tags(&["main-20-ccccccc", "main-20-bbbbbbb", "prod-20-ccccccc"]);
        match decide("main", "prod", &t, &gate(true), None, None) {
            Decision::Promote { channel_tag, .. } => assert_eq!(channel_tag, "prod-20-bbbbbbb"),
            d => panic!("{d:?}"),
        }
        let t = tags(&[
            "main-20-ccccccc",
            "main-20-bbbbbbb",
            "prod-20-bbbbbbb",
            "prod-20-ccccccc",
        ]);
        assert_eq!(
            decide("main", "prod", &t, &gate(true), None, None).kind(),
            DecisionKind::UpToDate
        );
        assert_eq!(
            decide(
                "main",
                "prod",
                &tags(&["prod-1-aaaaaaa"]),
                &gate(true),
                None,
                None
            ),
            Decision::NoCandidate
        );
    }

    /// With requirements: the newest eligible candidate goes, however many
    /// newer ones failed; none eligible waits; break-glass takes the
    /// newest; an older candidate than the channel never goes.
    #[test]
    fn requirements_pick_the_newest_eligible_candidate() {
        let t = tags(&[
            "main-10-aaaaaaa",
            "main-20-bbbbbbb",
            "main-30-ccccccc",
            "main-40-ddddddd",
            "prod-10-aaaaaaa",
        ]);
        let listed: Vec<String> = newer("main", "prod", &t)
            .into_iter()
            .map(|s| s.tag)
            .collect();
        assert_eq!(
            listed,
            ["main-40-ddddddd", "main-30-ccccccc", "main-20-bbbbbbb"]
        );
        let b = parse("main", "main-20-bbbbbbb").unwrap();
        match decide(
            "main",
            "prod",
            &t,
            &gate(true),
            None,
            Some(&Required::Eligible(b.clone())),
        ) {
            Decision::Promote {
                candidate,
                channel_tag,
                forced,
                ..
            } => {
                assert_eq!(
                    (candidate, channel_tag.as_str(), forced),
                    (b.clone(), "prod-20-bbbbbbb", false)
                );
            }
            d => panic!("{d:?}"),
        }
        // The gate still applies to an eligible candidate.
        match decide(
            "main",
            "prod",
            &t,
            &gate(false),
            None,
            Some(&Required::Eligible(b.clone())),
        ) {
            Decision::Wait { candidate, reason } => {
                assert_eq!(
                    (candidate, reason.as_str()),
                    (b.clone(), "deny window active: freeze")
                )
            }
            d => panic!("{d:?}"),
        }
        let none = Required::NoneEligible("none soaked".into());
        match decide("main", "prod", &t, &gate(true), None, Some(&none)) {
            Decision::Wait { candidate, reason } => {
                assert_eq!(
                    (candidate.tag.as_str(), reason.as_str()),
                    ("main-40-ddddddd", "none soaked")
                )
            }
            d => panic!("{d:?}"),
        }
        match decide(
            "main",
            "prod",
            &t,
            &gate(true),
            Some("incident 7"),
            Some(&none),
        ) {
            Decision::Promote {
                channel_tag,
                forced,
                because,
                ..
            } => {
                assert_eq!(channel_tag, "prod-40-ddddddd");
                assert!(forced);
                assert!(
                    because.contains("incident 7") && because.contains("none soaked"),
                    "{because}"
                );
            }
            d => panic!("{d:?}"),
        }
        let up = tags(&["main-10-aaaaaaa", "prod-20-bbbbbbb"]);
        assert!(newer("main", "prod", &up).is_empty());
        assert_eq!(
            decide("main", "prod", &up, &gate(true), Some("x"), Some(&none)).kind(),
            DecisionKind::UpToDate
        );
    }
}
