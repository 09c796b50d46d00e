//! Unit tests of the ordering decisions (`release/ordering.rs`), kept apart so
//! the module itself stays under 700 lines.

use super::*;

/// The anomaly in words, as every face shows it.
fn message(a: &Anomaly) -> String {
    crate::show::anomaly::message(a, &crate::field::Cli)
}

/// A linear history c0 -> c1 -> ... as full-looking ids.
fn id(n: u32) -> String {
    format!("{n:x}{}", "0".repeat(39))
}

fn linear(a: &str, d: &str) -> Result<bool> {
    Ok(u32::from_str_radix(&a[..1], 16).unwrap() <= u32::from_str_radix(&d[..1], 16).unwrap())
}

fn tagged(ts: u64, n: u32) -> Tagged {
    let rev = id(n);
    Tagged {
        stamped: Stamped {
            tag: format!("main-{ts}-{}", &rev[..7]),
            ts: ts.into(),
            sha7: rev[..7].to_string(),
        },
        revision: Some(rev),
    }
}

#[test]
fn normal_push_has_no_anomaly() {
    let existing = [tagged(100, 1), tagged(200, 2)];
    let a = check(&id(3), 300, "main-300-3000000", &existing, None, linear).unwrap();
    assert_eq!(a, None);
    // Re-pushing the newest tag itself is normal too.
    let a = check(&id(2), 200, "main-200-2000000", &existing, None, linear).unwrap();
    assert_eq!(a, None);
}

#[test]
fn anomalies() {
    let existing = [tagged(100, 1), tagged(200, 2)];
    let a = checked(
        &id(1),
        100,
        "main-100-1000000",
        &existing,
        None,
        linear,
        "main-200-2000000",
    );
    assert_eq!(a.kind, AnomalyKind::RerunOfOlder);
    assert_eq!(a.other_tag, "main-200-2000000");
    let a = checked(
        &id(3),
        150,
        "main-150-3000000",
        &existing,
        None,
        linear,
        "main-200-2000000",
    );
    assert_eq!(a.kind, AnomalyKind::BackwardsTimestamp);
    assert!(message(&a).contains("--committer-date-is-author-date"));
    // Same second, 3 descends from 2, and "3000000" sorts after
    // "2000000": Flux keeps serving 2's tag, and the text says so.
    let a = checked(
        &id(3),
        200,
        "main-200-3000000",
        &existing,
        None,
        linear,
        "main-200-2000000",
    );
    assert_eq!(a.kind, AnomalyKind::SameTimestamp);
    assert_eq!(a.other_tag, "main-200-2000000");
    assert!(
        message(&a).contains("Flux serves main-200-2000000, not this commit"),
        "{}",
        message(&a)
    );
    assert!(message(&a).contains("the newer one"), "{}", message(&a));
    assert!(!message(&a).contains("either"), "{}", message(&a));
    // The other way round (commits on two lines): this commit's tag
    // sorts first, Flux serves it.
    let existing = [tagged(200, 3)];
    let a = checked(
        &id(2),
        200,
        "main-200-2000000",
        &existing,
        None,
        |_, _| Ok(false),
        "main-200-2000000",
    );
    assert_eq!(a.kind, AnomalyKind::SameTimestamp);
    assert!(
        message(&a).contains("Flux serves main-200-2000000, this commit"),
        "{}",
        message(&a)
    );
}

/// [`check`]'s anomaly, checked: `served` is what Flux serves after
/// the push (worked out by hand in each test from Flux's rule: the
/// highest timestamp, and on equal timestamps the alphabetically
/// smallest tag), and every tag the message says Flux serves is that one.
fn checked(
    commit: &str,
    ts: u64,
    new_tag: &str,
    existing: &[Tagged],
    forced: Option<&ForcedPush>,
    is_ancestor: impl FnMut(&str, &str) -> Result<bool>,
    flux_serves: &str,
) -> Anomaly {
    let a = check(commit, ts, new_tag, existing, forced, is_ancestor)
        .unwrap()
        .unwrap();
    assert_eq!(a.served, flux_serves, "{}", message(&a));
    let said =
        regex::Regex::new(r"(?:Flux serves|keeps serving) (main-[0-9]+-[0-9a-f]{7})").unwrap();
    let words = message(&a);
    let named: Vec<&str> = said
        .captures_iter(&words)
        .map(|c| c.get(1).unwrap().as_str())
        .collect();
    assert!(!named.is_empty(), "{}", message(&a));
    assert!(named.iter().all(|t| *t == a.served), "{}", message(&a));
    a
}

#[test]
fn an_older_commit_after_its_same_second_descendant_is_served() {
    // 3 descends from 2, both at t=200; 3 was tagged first. 2's tag
    // sorts first: Flux moves to it, the older content.
    let existing = [tagged(100, 1), tagged(200, 3)];
    let new_tag = "main-200-2000000";
    let a = checked(&id(2), 200, new_tag, &existing, None, linear, new_tag);
    assert_eq!(a.kind, AnomalyKind::RerunOfOlder);
    assert!(
        message(&a).contains(&format!("Flux serves {new_tag}")),
        "{}",
        message(&a)
    );
    assert!(!message(&a).contains("keeps serving"), "{}", message(&a));
    assert!(
        message(&a).contains("moves to the older commit"),
        "{}",
        message(&a)
    );
    assert!(message(&a).contains("later second"), "{}", message(&a));
    // The other order (the older 5 sorts after its child 4, both at
    // t=200): Flux keeps serving 4's tag.
    let five_four = |a: &str, d: &str| Ok(a == d || (a.starts_with('5') && d.starts_with('4')));
    let existing = [tagged(200, 4)];
    let a = checked(
        &id(5),
        200,
        "main-200-5000000",
        &existing,
        None,
        five_four,
        "main-200-4000000",
    );
    assert_eq!(a.kind, AnomalyKind::RerunOfOlder);
    assert!(
        message(&a).contains("Flux keeps serving main-200-4000000"),
        "{}",
        message(&a)
    );
    assert!(message(&a).contains("sorts before"), "{}", message(&a));
    // A force-push back to 2 after 3 (same second) was tagged: Flux
    // moves to 2's tag, which is what the rewind means.
    let existing = [tagged(200, 3)];
    let forced = ForcedPush { before: id(3) };
    let a = checked(
        &id(2),
        200,
        new_tag,
        &existing,
        Some(&forced),
        forked,
        new_tag,
    );
    assert_eq!(a.kind, AnomalyKind::RewoundHistory);
    assert!(
        message(&a).contains(&format!("Flux serves {new_tag}")),
        "{}",
        message(&a)
    );
    assert!(!message(&a).contains("keeps serving"), "{}", message(&a));
    // Same second, 3's tag sorting first: Flux keeps it, because it
    // sorts first, not because its time is higher.
    let existing = [tagged(300, 3)];
    let forced = ForcedPush { before: id(3) };
    let a = checked(
        &id(4),
        300,
        "main-300-4000000",
        &existing,
        Some(&forced),
        |a, d| Ok(a == d || (a.starts_with('4') && d.starts_with('3'))),
        "main-300-3000000",
    );
    assert_eq!(a.kind, AnomalyKind::RewoundHistory);
    assert!(
        message(&a).contains("Flux keeps serving main-300-3000000"),
        "{}",
        message(&a)
    );
    assert!(!message(&a).contains("higher"), "{}", message(&a));
    // The plain same-second case with a same-second descendant tagged
    // that does not sort first: this commit's tag sorts first and is
    // served, and the text says it is the older content.
    let existing = [tagged(200, 6), tagged(200, 8)];
    let a = checked(
        &id(2),
        200,
        "main-200-2000000",
        &existing,
        None,
        |a, d| Ok(a == d || (a.starts_with('2') && d.starts_with('8'))),
        "main-200-2000000",
    );
    assert_eq!(a.kind, AnomalyKind::SameTimestamp);
    assert!(
        message(&a).contains("Flux serves main-200-2000000"),
        "{}",
        message(&a)
    );
    assert!(message(&a).contains("the older one"), "{}", message(&a));
}

/// History 1 -> 2 -> 3 (dropped by a force-push back to 2 or to the
/// side line 2 -> 5), and 2 -> 4 (pushed after the rewind).
fn forked(a: &str, d: &str) -> Result<bool> {
    let (a, d) = (&a[..1], &d[..1]);
    let line: &[&str] = match d {
        "1" => &["1"],
        "2" => &["1", "2"],
        "3" => &["1", "2", "3"],
        "4" => &["1", "2", "4"],
        "5" => &["1", "2", "5"],
        _ => &[],
    };
    Ok(line.contains(&a))
}

#[test]
fn a_force_push_back_to_an_ancestor_is_a_rewind_not_a_rerun() {
    let existing = [tagged(200, 2), tagged(300, 3)];
    let forced = ForcedPush { before: id(3) };
    // Commit 2 (t=200) pushed again, after the tags in `existing`.
    let again = |existing: &[Tagged], forced: Option<&ForcedPush>, served: &str| {
        checked(
            &id(2),
            200,
            "main-200-2000000",
            existing,
            forced,
            forked,
            served,
        )
    };
    let a = again(&existing, Some(&forced), "main-300-3000000");
    assert_eq!(a.kind, AnomalyKind::RewoundHistory);
    assert_eq!(a.other_tag, "main-300-3000000");
    assert!(
        message(&a).contains("Flux keeps serving main-300-3000000"),
        "{}",
        message(&a)
    );
    assert!(message(&a).contains("reverts"), "{}", message(&a));
    // Without the payload's word it is a re-run.
    let a = again(&existing, None, "main-300-3000000");
    assert_eq!(a.kind, AnomalyKind::RerunOfOlder);
    // A re-run of the forced push's job after the branch moved on to 4:
    // 4 was not dropped, so a re-run.
    let existing = [tagged(200, 2), tagged(300, 3), tagged(400, 4)];
    let a = again(&existing, Some(&forced), "main-400-4000000");
    assert_eq!(a.kind, AnomalyKind::RerunOfOlder);
    assert_eq!(a.other_tag, "main-400-4000000");
    // `before` cannot be ordered (gone from the clone, no API): the
    // payload's word wins.
    let unknown_before = |a: &str, d: &str| {
        if d == id(3) {
            Err(crate::error::Error::input("cannot tell", None))
        } else {
            forked(a, d)
        }
    };
    let existing = [tagged(100, 1), tagged(200, 2)];
    let a = checked(
        &id(1),
        100,
        "main-100-1000000",
        &existing,
        Some(&forced),
        unknown_before,
        "main-200-2000000",
    );
    assert_eq!(a.kind, AnomalyKind::RewoundHistory);
}

#[test]
fn a_lower_timestamp_than_an_orphaned_tag_is_backwards() {
    // 3 (t=300) was force-pushed away; 5 on the new line has t=250.
    let existing = [tagged(200, 2), tagged(300, 3)];
    let forced = ForcedPush { before: id(3) };
    for f in [Some(&forced), None] {
        let a = checked(
            &id(5),
            250,
            "main-250-5000000",
            &existing,
            f,
            forked,
            "main-300-3000000",
        );
        assert_eq!(a.kind, AnomalyKind::BackwardsTimestamp);
        assert_eq!(a.other_tag, "main-300-3000000");
        assert!(
            message(&a).contains("keeps serving main-300-3000000"),
            "{}",
            message(&a)
        );
    }
    // Higher than the orphan: Flux moves to it, nothing to say.
    assert_eq!(
        check(
            &id(5),
            350,
            "main-350-5000000",
            &existing,
            Some(&forced),
            forked
        )
        .unwrap(),
        None
    );
}

#[test]
fn a_rewound_branch_tag_moves_back_only_when_dropped() {
    let forced = ForcedPush { before: id(3) };
    assert_eq!(
        branch_move(&id(2), Some(Some(&id(3))), Some(&forced), forked).unwrap(),
        BranchMove::Rewound {
            current: id(3),
            proven: true
        }
    );
    // `before` cannot be ordered against the tagged 3 (gone from the
    // clone, no API): taken as dropped, but not proven, so it takes
    // --allow-rewind.
    let other = ForcedPush { before: id(6) };
    let unknown = |a: &str, d: &str| {
        if d == id(6) {
            Err(crate::error::Error::input("cannot tell", None))
        } else {
            forked(a, d)
        }
    };
    assert_eq!(
        branch_move(&id(2), Some(Some(&id(3))), Some(&other), unknown).unwrap(),
        BranchMove::Rewound {
            current: id(3),
            proven: false
        }
    );
    // A new line (4) after a force-push that dropped 3: it follows.
    assert_eq!(
        branch_move(&id(4), Some(Some(&id(3))), Some(&forced), forked).unwrap(),
        BranchMove::Rewound {
            current: id(3),
            proven: true
        }
    );
    assert_eq!(
        branch_move(&id(4), Some(Some(&id(3))), None, forked).unwrap(),
        BranchMove::Diverged {
            current: Some(id(3))
        }
    );
    // The tag names 4, pushed after the rewind: a re-run keeps it.
    assert_eq!(
        branch_move(&id(2), Some(Some(&id(4))), Some(&forced), forked).unwrap(),
        BranchMove::KeepNewer { current: id(4) }
    );
}

#[test]
fn relevant_keeps_newest_and_not_lower() {
    let tags: Vec<String> = [
        "main-5-aaaaaaa",
        "main-9-bbbbbbb",
        "dev-20-ccccccc",
        "main-7-ddddddd",
    ]
    .map(String::from)
    .to_vec();
    let r: Vec<String> = relevant("main", 7, &tags)
        .into_iter()
        .map(|s| s.tag)
        .collect();
    assert_eq!(r, ["main-9-bbbbbbb", "main-7-ddddddd"]);
    let r: Vec<String> = relevant("main", 10, &tags)
        .into_iter()
        .map(|s| s.tag)
        .collect();
    assert_eq!(r, ["main-9-bbbbbbb"]);
}

#[test]
fn branch_moves() {
    assert_eq!(
        branch_move(&id(2), None, None, linear).unwrap(),
        BranchMove::Create
    );
    assert_eq!(
        branch_move(&id(2), Some(Some(&id(1))), None, linear).unwrap(),
        BranchMove::Forward
    );
    assert_eq!(
        branch_move(&id(2), Some(Some(&id(2))), None, linear).unwrap(),
        BranchMove::Same
    );
    assert_eq!(
        branch_move(&id(1), Some(Some(&id(2))), None, linear).unwrap(),
        BranchMove::KeepNewer { current: id(2) }
    );
    let never = |_: &str, _: &str| Ok(false);
    assert_eq!(
        branch_move(&id(1), Some(Some(&id(2))), None, never).unwrap(),
        BranchMove::Diverged {
            current: Some(id(2))
        }
    );
    assert_eq!(
        branch_move(&id(1), Some(None), None, linear).unwrap(),
        BranchMove::Diverged { current: None }
    );
}

#[test]
fn repair_finds_the_tip() {
    let tags = [tagged(100, 1), tagged(300, 3), tagged(200, 2)];
    let t = repair_target(&id(1), &tags, linear).unwrap().unwrap();
    assert_eq!(t.revision.as_deref(), Some(id(3).as_str()));
    assert!(repair_target(&id(3), &tags, linear).unwrap().is_none());
}
