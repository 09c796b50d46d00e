//! Release-window evaluation with a fixed clock: allow/deny semantics,
//! one-shot and recurring windows, midnight and DST edges, validation.

use super::{Policy, parse_duration};
use jiff::{SignedDuration, Timestamp};

fn t(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn policy(yaml: &str) -> Policy {
    Policy::from_yaml(yaml).unwrap()
}

const DAYS14: SignedDuration = SignedDuration::from_hours(24 * 14);

const OFFICE: &str = r#"
windows:
  - kind: allow
    description: office hours
    schedule: "0 9 * * 1-5"
    duration: 8h
    timeZone: Europe/Amsterdam
"#;

const FREEZE: &str = r#"
windows:
  - kind: deny
    description: year-end freeze
    start: "2026-12-20T00:00:00"
    end: "2027-01-04T00:00:00"
    timeZone: Europe/Amsterdam
"#;

#[test]
fn no_windows_is_always_open() {
    for p in [policy(""), policy("windows: []")] {
        let g = p.gate(t("2026-11-30T03:00:00Z"));
        assert!(g.open, "{g:?}");
        assert_eq!(
            p.next_changes(t("2026-11-30T03:00:00Z"), DAYS14),
            (None, None)
        );
        assert_eq!(p.calendar(t("2026-11-30T03:00:00Z"), DAYS14).len(), 1);
    }
}

#[test]
fn allow_only_opens_inside_the_window() {
    let p = policy(OFFICE);
    // Monday 2026-11-30, Amsterdam is UTC+1.
    assert!(!p.gate(t("2026-11-30T07:59:59Z")).open);
    let g = p.gate(t("2026-11-30T08:00:00Z"));
    assert!(g.open && g.active == ["office hours"], "{g:?}");
    assert!(p.gate(t("2026-11-30T15:59:59Z")).open);
    assert!(!p.gate(t("2026-11-30T16:00:00Z")).open);
    // Saturday.
    let g = p.gate(t("2026-12-05T10:00:00Z"));
    assert!(!g.open && g.reason.contains("no allow window"), "{g:?}");
    // Friday evening: opens Monday 09:00, closes Monday 17:00.
    let (open, close) = p.next_changes(t("2026-12-04T18:00:00Z"), DAYS14);
    assert_eq!(open, Some(t("2026-12-07T08:00:00Z")));
    assert_eq!(close, Some(t("2026-12-07T16:00:00Z")));
    // Inside a window, the next close comes first.
    let (open, close) = p.next_changes(t("2026-11-30T12:00:00Z"), DAYS14);
    assert_eq!(close, Some(t("2026-11-30T16:00:00Z")));
    assert_eq!(open, Some(t("2026-12-01T08:00:00Z")));
}

#[test]
fn deny_only_one_shot_freeze_across_the_year_end() {
    let p = policy(FREEZE);
    assert!(p.gate(t("2026-12-19T22:59:59Z")).open);
    assert!(!p.gate(t("2026-12-19T23:00:00Z")).open);
    let g = p.gate(t("2026-12-31T23:30:00Z"));
    assert!(!g.open && g.reason.contains("year-end freeze"), "{g:?}");
    assert!(!p.gate(t("2027-01-03T22:59:59Z")).open);
    assert!(p.gate(t("2027-01-03T23:00:00Z")).open);
    let (open, close) = p.next_changes(t("2026-12-10T00:00:00Z"), DAYS14);
    assert_eq!(close, Some(t("2026-12-19T23:00:00Z")));
    assert_eq!(open, None, "the freeze outlasts the 14-day horizon");
    let (open, _) = p.next_changes(t("2026-12-25T00:00:00Z"), DAYS14);
    assert_eq!(open, Some(t("2027-01-03T23:00:00Z")));
}

#[test]
fn deny_wins_over_an_overlapping_allow() {
    let both = format!("{OFFICE}{}", FREEZE.replace("windows:\n", ""));
    let p = policy(&both);
    // A Monday inside the freeze, during office hours.
    let g = p.gate(t("2026-12-21T10:00:00Z"));
    assert!(!g.open, "{g:?}");
    assert!(g.reason.contains("deny") && g.active.len() == 2, "{g:?}");
    // After the freeze, office hours apply again (Monday 2027-01-04 09:00 CET).
    let (open, _) = p.next_changes(t("2026-12-28T00:00:00Z"), DAYS14);
    assert_eq!(open, Some(t("2027-01-04T08:00:00Z")));
}

#[test]
fn recurring_window_crossing_midnight() {
    let p = policy(
        "windows:\n  - kind: allow\n    description: night\n    schedule: \"0 22 * * *\"\n    duration: 4h\n",
    );
    assert!(p.gate(t("2026-11-30T22:00:00Z")).open);
    assert!(
        p.gate(t("2026-12-01T01:30:00Z")).open,
        "carried over from the previous day"
    );
    assert!(!p.gate(t("2026-12-01T02:00:00Z")).open);
    assert!(!p.gate(t("2026-12-01T21:59:59Z")).open);
    let cal = p.calendar(t("2026-12-01T00:00:00Z"), SignedDuration::from_hours(48));
    let opens: Vec<_> = cal
        .iter()
        .filter(|x| x.open)
        .map(|x| (x.start, x.end))
        .collect();
    assert_eq!(
        opens,
        [
            (t("2026-12-01T00:00:00Z"), t("2026-12-01T02:00:00Z")),
            (t("2026-12-01T22:00:00Z"), t("2026-12-02T02:00:00Z")),
            (t("2026-12-02T22:00:00Z"), t("2026-12-03T00:00:00Z")),
        ]
    );
}

fn starts(p: &Policy, from: &str, to: &str) -> Vec<Timestamp> {
    p.windows[0]
        .intervals(t(from), t(to))
        .into_iter()
        .map(|(s, _)| s)
        .collect()
}

fn daily(time: &str, zone: &str) -> Policy {
    let (h, m) = time.split_once(':').unwrap();
    policy(&format!(
        "windows:\n  - kind: allow\n    schedule: \"{} {} * * *\"\n    duration: 1h\n    timeZone: {zone}\n",
        m.trim_start_matches('0').parse::<u32>().unwrap_or(0),
        h.trim_start_matches('0').parse::<u32>().unwrap_or(0)
    ))
}

#[test]
fn dst_europe_amsterdam() {
    // Spring forward 2026-03-29: 02:00 CET -> 03:00 CEST; 02:30 does not exist and opens at 03:30 CEST.
    let p = daily("02:30", "Europe/Amsterdam");
    assert_eq!(
        starts(&p, "2026-03-28T00:00:00Z", "2026-03-31T00:00:00Z"),
        [
            t("2026-03-28T01:30:00Z"),
            t("2026-03-29T01:30:00Z"),
            t("2026-03-30T00:30:00Z")
        ]
    );
    // Fall back 2026-10-25: 03:00 CEST -> 02:00 CET; 02:30 happens twice and opens once, at the first.
    assert_eq!(
        starts(&p, "2026-10-24T00:00:00Z", "2026-10-27T00:00:00Z"),
        [
            t("2026-10-24T00:30:00Z"),
            t("2026-10-25T00:30:00Z"),
            t("2026-10-26T01:30:00Z")
        ]
    );
    // Office hours keep their wall-clock time across the change.
    let p = daily("09:00", "Europe/Amsterdam");
    assert!(p.gate(t("2026-03-27T08:30:00Z")).open);
    assert!(!p.gate(t("2026-03-30T08:30:00Z")).open);
    assert!(p.gate(t("2026-03-30T07:30:00Z")).open);
}

#[test]
fn dst_america_new_york() {
    // Spring forward 2026-03-08: 02:00 EST -> 03:00 EDT.
    let p = daily("02:30", "America/New_York");
    assert_eq!(
        starts(&p, "2026-03-07T00:00:00Z", "2026-03-10T00:00:00Z"),
        [
            t("2026-03-07T07:30:00Z"),
            t("2026-03-08T07:30:00Z"),
            t("2026-03-09T06:30:00Z")
        ]
    );
    // Fall back 2026-11-01: 02:00 EDT -> 01:00 EST; 01:30 happens twice.
    let p = daily("01:30", "America/New_York");
    assert_eq!(
        starts(&p, "2026-10-31T00:00:00Z", "2026-11-03T00:00:00Z"),
        [
            t("2026-10-31T05:30:00Z"),
            t("2026-11-01T05:30:00Z"),
            t("2026-11-02T06:30:00Z")
        ]
    );
    // The window lasts one elapsed hour even when the clocks change inside it.
    let w = &p.windows[0];
    let iv = w.intervals(t("2026-11-01T00:00:00Z"), t("2026-11-02T00:00:00Z"));
    assert_eq!(iv, [(t("2026-11-01T05:30:00Z"), t("2026-11-01T06:30:00Z"))]);
}

#[test]
fn invalid_windows_are_rejected_by_name() {
    // (window, its name as the error cites it, the reason the error must give)
    let cases = [
        (
            "kind: allow\n    description: bad cron\n    schedule: \"0 25 * * *\"\n    duration: 1h",
            "bad cron",
            "hour field: 25 is outside 0-23",
        ),
        (
            "kind: allow\n    description: bad duration\n    schedule: \"0 1 * * *\"\n    duration: 1 hour",
            "bad duration",
            "duration \"1 hour\": unknown unit",
        ),
        (
            "kind: allow\n    description: zero\n    schedule: \"0 1 * * *\"\n    duration: 0m",
            "zero",
            "must be longer than zero",
        ),
        (
            "kind: deny\n    description: bad zone\n    start: \"2026-01-01T00:00:00\"\n    end: \"2026-01-02T00:00:00\"\n    timeZone: Europe/Amsterdm",
            "bad zone",
            "unknown time zone \"Europe/Amsterdm\"",
        ),
        (
            "kind: deny\n    description: backwards\n    start: \"2026-01-02T00:00:00\"\n    end: \"2026-01-01T00:00:00\"",
            "backwards",
            "end must be after start",
        ),
        (
            "kind: deny\n    description: both\n    schedule: \"0 1 * * *\"\n    duration: 1h\n    start: \"2026-01-01T00:00:00\"\n    end: \"2026-01-02T00:00:00\"",
            "both",
            "schedule + duration or start + end, not both",
        ),
        (
            "kind: deny\n    description: half\n    start: \"2026-01-01T00:00:00\"",
            "half",
            "needs both start and end",
        ),
        (
            "kind: deny\n    description: no duration\n    schedule: \"0 1 * * *\"",
            "no duration",
            "a schedule needs a duration",
        ),
        (
            "kind: maybe\n    description: kind\n    schedule: \"0 1 * * *\"\n    duration: 1h",
            "windows[1].kind",
            "unknown variant `maybe`",
        ),
        (
            "kind: allow\n    description: typo\n    schedule: \"0 1 * * *\"\n    duration: 1h\n    timezone: UTC",
            "windows[1]",
            "unknown field `timezone`",
        ),
        (
            "description: no kind\n    schedule: \"0 1 * * *\"\n    duration: 1h",
            "windows[1]",
            "missing field `kind`",
        ),
        (
            "kind: deny\n    description: date\n    start: \"tomorrow\"\n    end: \"2026-01-02T00:00:00\"",
            "date",
            "\"tomorrow\" is not a date-time",
        ),
    ];
    for (window, name, reason) in cases {
        // A valid window first: the bad one must still be found, by its number.
        let yaml = format!(
            "windows:\n  - kind: allow\n    schedule: \"0 9 * * *\"\n    duration: 1h\n  - {window}\n"
        );
        let err = Policy::from_yaml(&yaml).expect_err(window).to_string();
        assert!(err.contains(name), "{window:?}: {err}");
        assert!(err.contains(reason), "{window:?}: {err}");
        if !name.starts_with("windows[") {
            assert!(
                err.contains(&format!("window 2 ({name:?})")),
                "{window:?}: {err}"
            );
        }
    }
}

#[test]
fn durations() {
    assert_eq!(
        parse_duration("1h30m").unwrap(),
        SignedDuration::from_mins(90)
    );
    assert_eq!(
        parse_duration("2d").unwrap(),
        SignedDuration::from_hours(48)
    );
    assert_eq!(
        parse_duration("45s").unwrap(),
        SignedDuration::from_secs(45)
    );
    for (bad, reason) in [
        ("", "duration \"\": write it as e.g. 8h, 90m or 1h30m"),
        ("h", "duration \"h\": a number must come before 'h'"),
        ("10", "duration \"10\": write it as e.g. 8h, 90m or 1h30m"),
        (
            "1h30",
            "duration \"1h30\": write it as e.g. 8h, 90m or 1h30m",
        ),
        ("1x", "duration \"1x\": unknown unit 'x' (use d, h, m, s)"),
        ("-1h", "duration \"-1h\": unknown unit '-' (use d, h, m, s)"),
        ("0s", "duration \"0s\" must be longer than zero"),
        (
            "200000000000000d",
            "duration \"200000000000000d\" is too long",
        ),
    ] {
        assert_eq!(parse_duration(bad), Err(reason.to_string()), "{bad:?}");
    }
}
