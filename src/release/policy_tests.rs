//! Unit tests of the promotion policy (`release/policy.rs`), kept apart so the
//! module itself stays under 700 lines.

use super::*;

fn t(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn recurring(schedule: &str, duration: &str, zone: &str) -> Policy {
    Policy::from_yaml(&format!(
        "windows:\n  - kind: allow\n    schedule: \"{schedule}\"\n    duration: {duration}\n    timeZone: {zone}\n"
    ))
    .unwrap()
}

/// The oracle: every wall-clock minute of `[from - duration - 2 days,
/// to + 2 days]` that the schedule matches, turned into an instant as
/// jiff's `compatible` does (the first instance in a fold, later by the
/// gap in a gap), one by one.
fn brute_starts(w: &Window, from: Timestamp, to: Timestamp) -> Vec<Timestamp> {
    let Timing::Recurring { cron, duration } = &w.timing else {
        unreachable!()
    };
    let day = SignedDuration::from_hours(48);
    let mut dt = w.zone.to_datetime(from - *duration - day);
    dt = dt.date().at(dt.hour(), dt.minute(), 0, 0);
    let end = w.zone.to_datetime(to + day);
    let times: std::collections::BTreeSet<(u32, u32)> = cron.times().collect();
    let mut out = Vec::new();
    while dt <= end {
        let d = dt.date();
        let weekday = d.weekday().to_sunday_zero_offset() as u32;
        if cron.matches_date(d.month() as u32, d.day() as u32, weekday)
            && times.contains(&(dt.hour() as u32, dt.minute() as u32))
        {
            out.push(w.zone.to_ambiguous_timestamp(dt).compatible().unwrap());
        }
        dt = dt.checked_add(MINUTE).unwrap();
    }
    out.sort();
    out.dedup();
    out
}

/// Whether some start lies in `(at - duration, at]` (sorted starts).
fn brute_active(starts: &[Timestamp], duration: SignedDuration, at: Timestamp) -> bool {
    let after = starts.partition_point(|s| *s <= at - duration);
    let until = starts.partition_point(|s| *s <= at);
    after < until
}

#[test]
fn the_gate_and_calendar_agree_with_every_start_counted_one_by_one() {
    // Schedules dense and sparse, durations shorter and longer than the
    // gaps between starts, zones with spring-forward gaps and folds of
    // an hour and of half an hour, around their changes.
    let schedules = [
        "* * * * *",
        "*/7 * * * *",
        "30 2 * * *",
        "0,30 1-3 * * *",
        "15 2 * * 0",
        "0 9 * * 1-5",
        "59 23 28-31 * *",
    ];
    let durations = ["1m", "5m", "45m", "1h", "90m", "1d", "3d"];
    let places = [
        ("Europe/Amsterdam", "2026-03-29T01:00:00Z"),
        ("Europe/Amsterdam", "2026-10-25T01:00:00Z"),
        ("America/New_York", "2026-03-08T07:00:00Z"),
        ("America/New_York", "2026-11-01T06:00:00Z"),
        ("Australia/Lord_Howe", "2026-04-04T15:00:00Z"),
        ("Australia/Lord_Howe", "2026-10-03T15:30:00Z"),
        ("UTC", "2026-02-28T23:00:00Z"),
    ];
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    for schedule in schedules {
        for duration in durations {
            for (zone, change) in places {
                let p = recurring(schedule, duration, zone);
                let w = &p.windows[0];
                let d = parse_duration(duration).unwrap();
                let from = t(change) - SignedDuration::from_hours(30);
                let to = t(change) + SignedDuration::from_hours(30);
                let starts = brute_starts(w, from, to);
                // The gate at instants on and off the minute.
                for _ in 0..100 {
                    let at = from + SignedDuration::from_secs(next(60 * 3600) as i64);
                    for at in [
                        at,
                        at.checked_sub(SignedDuration::from_secs(at.as_second() % 60))
                            .unwrap(),
                    ] {
                        assert_eq!(
                            p.gate(at).open,
                            brute_active(&starts, d, at),
                            "{schedule:?} for {duration} in {zone} at {at}"
                        );
                    }
                }
                // Every opening overlapping the range, one per start.
                let want: Vec<(Timestamp, Timestamp)> = starts
                    .iter()
                    .filter(|s| **s < to && **s + d > from)
                    .map(|s| (*s, *s + d))
                    .collect();
                assert_eq!(
                    w.intervals(from, to),
                    want,
                    "{schedule:?} {duration} {zone}"
                );
                // The calendar: open exactly where some opening holds.
                let cal = p.calendar(from, to.duration_since(from));
                assert_eq!(cal.first().map(|p| p.start), Some(from));
                assert_eq!(cal.last().map(|p| p.end), Some(to));
                for pair in cal.windows(2) {
                    assert_eq!(pair[0].end, pair[1].start);
                    assert_ne!(pair[0].open, pair[1].open, "merged: {cal:?}");
                }
                for period in &cal {
                    for at in [period.start, period.end - NANO] {
                        assert_eq!(
                            period.open,
                            brute_active(&starts, d, at),
                            "{schedule:?} for {duration} in {zone}: {period:?} at {at}"
                        );
                    }
                    // No opening starts or ends strictly inside a period
                    // in a way that changes the state.
                    for s in &starts {
                        for edge in [*s, *s + d] {
                            if period.start < edge && edge < period.end {
                                assert_eq!(
                                    brute_active(&starts, d, edge),
                                    period.open,
                                    "{schedule:?} {duration} {zone}: {period:?} changes at {edge}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn a_gate_decision_costs_the_same_whatever_the_schedule() {
    // The schedule that made a decision quadratic (a start every
    // minute, openings of days), the longest duration allowed, one
    // that never matches (every date looked at) and office hours. The
    // count is of dates and start times looked at, not of time.
    let now = t("2026-12-01T10:00:30Z");
    let horizon = SignedDuration::from_hours(24 * 14);
    for (schedule, duration) in [
        ("* * * * *", "30d"),
        ("* * * * *", "366d"),
        ("0 0 30 2 *", "366d"),
        ("0 9 * * 1-5", "8h"),
    ] {
        for zone in ["UTC", "Europe/Amsterdam"] {
            let p = recurring(schedule, duration, zone);
            let before = evaluations();
            let gate = p.gate(now);
            let gate_cost = evaluations() - before;
            assert!(
                gate_cost <= 2 * (MAX_DURATION_DAYS as u64 + 2),
                "{schedule:?} for {duration} in {zone}: the gate looked at {gate_cost}"
            );
            // Tuesday 10:00 UTC: inside office hours in both zones.
            assert_eq!(gate.open, schedule != "0 0 30 2 *");
            let before = evaluations();
            p.calendar(now, horizon);
            let calendar_cost = evaluations() - before;
            assert!(
                calendar_cost <= 4 * (MAX_DURATION_DAYS as u64 + 16),
                "{schedule:?} for {duration} in {zone}: the calendar looked at {calendar_cost}"
            );
        }
    }
}

#[test]
fn durations_longer_than_a_year_are_refused_by_name() {
    assert_eq!(
        parse_duration("366d").unwrap(),
        SignedDuration::from_hours(366 * 24)
    );
    for long in ["367d", "99999999999999d", "8785h"] {
        let err = parse_duration(long).unwrap_err();
        assert!(
            err.contains(&format!("duration {long:?} is longer than 366 days")),
            "{err}"
        );
        assert!(err.contains("one-shot window"), "{err}");
    }
    let err = Policy::from_yaml(
        "windows:\n  - kind: allow\n    description: forever\n    schedule: \"0 9 * * *\"\n    duration: 99999999999999d\n",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("window 1 (\"forever\")"), "{err}");
    assert!(err.contains("longer than 366 days"), "{err}");
}

#[test]
fn a_one_shot_time_in_a_spring_forward_gap_names_the_gap() {
    for (zone, start, end, says) in [
        (
            "Europe/Amsterdam",
            "2026-03-29T02:30:00",
            "2026-03-29T03:00:00",
            "\"2026-03-29T02:30:00\" does not exist in Europe/Amsterdam: on 2026-03-29 the clocks jump from 02:00:00 to 03:00:00 (a spring-forward gap)",
        ),
        (
            "America/New_York",
            "2026-03-08T01:00:00",
            "2026-03-08T02:15:00",
            "end: \"2026-03-08T02:15:00\" does not exist in America/New_York: on 2026-03-08 the clocks jump from 02:00:00 to 03:00:00",
        ),
    ] {
        let err = Policy::from_yaml(&format!(
            "windows:\n  - kind: deny\n    start: \"{start}\"\n    end: \"{end}\"\n    timeZone: {zone}\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(err.contains(says), "{err}");
        assert!(!err.contains("end must be after start"), "{err}");
    }
    // A repeated time (a fold) exists: its first instance.
    let p = Policy::from_yaml(
        "windows:\n  - kind: deny\n    start: \"2026-10-25T02:30:00\"\n    end: \"2026-10-25T04:00:00\"\n    timeZone: Europe/Amsterdam\n",
    )
    .unwrap();
    assert!(p.windows[0].is_active(t("2026-10-25T00:30:00Z")));
    assert!(!p.windows[0].is_active(t("2026-10-25T00:29:59Z")));
}
