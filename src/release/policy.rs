//! Release windows: when a promotion into a channel may happen.
//!
//! Semantics, as in Argo CD sync windows and Kargo: no windows means always
//! open; when allow windows exist, promotion happens only while one of them
//! is active; an active deny window always wins. Each window is evaluated
//! in its own IANA time zone. The whole file is validated before anything
//! is decided: a bad window is an error naming it, never a gate silently
//! left open or shut.

use std::cell::Cell;

use jiff::civil::DateTime;
use jiff::tz::{AmbiguousOffset, Offset, TimeZone};
use jiff::{SignedDuration, Timestamp};
use serde::Deserialize;

use super::cron::Cron;
use crate::error::{Error, Result};

/// Whether a window opens or shuts the gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Promotion may happen while this window is active.
    Allow,
    /// Promotion may not happen while this window is active.
    Deny,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    #[serde(default)]
    windows: Vec<WindowFile>,
    #[serde(default)]
    requires: Vec<super::evidence::RequirementFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct WindowFile {
    kind: Kind,
    #[serde(default)]
    description: String,
    schedule: Option<String>,
    duration: Option<String>,
    start: Option<String>,
    end: Option<String>,
    time_zone: Option<String>,
}

/// When a window is active.
#[derive(Debug, Clone)]
pub enum Timing {
    /// Opens at every cron match (wall-clock time in the zone) for `duration`.
    Recurring {
        /// The start times.
        cron: Cron,
        /// How long each opening lasts (elapsed time).
        duration: SignedDuration,
    },
    /// Active from `start` (inclusive) to `end` (exclusive).
    OneShot {
        /// Start instant.
        start: Timestamp,
        /// End instant.
        end: Timestamp,
    },
}

/// One validated window.
#[derive(Debug, Clone)]
pub struct Window {
    /// Allow or deny.
    pub kind: Kind,
    /// What the window is for (shown in decisions and summaries).
    pub description: String,
    /// When it is active.
    pub timing: Timing,
    /// The zone its wall-clock times are read in.
    pub zone: TimeZone,
}

/// A validated policy.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// The windows, in file order.
    pub windows: Vec<Window>,
    /// What a candidate must have shown before it is promoted (rollout
    /// records), in file order; none: every candidate may go.
    pub requires: Vec<super::evidence::Requirement>,
}

/// The longest a recurring window's opening may last (a year, leap day
/// included): a gate decision looks back this far at most.
pub const MAX_DURATION_DAYS: i64 = 366;

/// Parses a duration such as `8h`, `90m`, `1h30m`, `2d`, `45s`, at most
/// [`MAX_DURATION_DAYS`].
pub fn parse_duration(text: &str) -> Result<SignedDuration, String> {
    let mut total: i64 = 0;
    let mut digits = String::new();
    let mut any = false;
    for c in text.trim().chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit = match c {
            'd' => 86_400,
            'h' => 3_600,
            'm' => 60,
            's' => 1,
            _ => {
                return Err(format!(
                    "duration {text:?}: unknown unit {c:?} (use d, h, m, s)"
                ));
            }
        };
        let n: i64 = digits
            .parse()
            .map_err(|_| format!("duration {text:?}: a number must come before {c:?}"))?;
        total = n
            .checked_mul(unit)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(|| format!("duration {text:?} is too long"))?;
        digits.clear();
        any = true;
    }
    if !digits.is_empty() || !any {
        return Err(format!(
            "duration {text:?}: write it as e.g. 8h, 90m or 1h30m"
        ));
    }
    if total <= 0 {
        return Err(format!("duration {text:?} must be longer than zero"));
    }
    if total > MAX_DURATION_DAYS * 86_400 {
        return Err(format!(
            "duration {text:?} is longer than {MAX_DURATION_DAYS} days, the longest a recurring window \
             may last; for a longer stretch write a one-shot window (start and end)"
        ));
    }
    Ok(SignedDuration::from_secs(total))
}

/// A one-shot window's instant: RFC 3339, or a wall-clock time in `zone`.
/// A wall-clock time the clocks skip (a spring-forward gap) is an error
/// naming the gap: it never happens there, and moving it silently would
/// move the window.
fn parse_instant(text: &str, zone: &TimeZone, zone_name: &str) -> Result<Timestamp, String> {
    if let Ok(ts) = text.parse::<Timestamp>() {
        return Ok(ts);
    }
    let dt: DateTime = text.parse().map_err(|_| {
        format!("{text:?} is not a date-time; write 2026-12-20T00:00:00 (in the window's zone) or RFC 3339")
    })?;
    let ambiguous = zone.to_ambiguous_timestamp(dt);
    if let AmbiguousOffset::Gap { before, after } = ambiguous.offset() {
        // The clocks jump at the first transition after `dt` read with the
        // offset after the gap.
        let gap = after
            .to_timestamp(dt)
            .ok()
            .and_then(|t| zone.following(t).next())
            .map(|t| {
                (
                    before.to_datetime(t.timestamp()),
                    after.to_datetime(t.timestamp()),
                )
            });
        return Err(match gap {
            Some((from, to)) => format!(
                "{text:?} does not exist in {zone_name}: on {} the clocks jump from {} to {} \
                 (a spring-forward gap); write a time before {} or from {} on",
                from.date(),
                from.time(),
                to.time(),
                from.time(),
                to.time()
            ),
            None => format!("{text:?} does not exist in {zone_name} (the clocks skip it)"),
        });
    }
    ambiguous.compatible().map_err(|e| format!("{text:?}: {e}"))
}

impl Policy {
    /// Parses and validates a policy file. Every window is checked; the
    /// first problem is returned with the window's number and description.
    pub fn from_yaml(text: &str) -> Result<Policy> {
        let file: PolicyFile = serde_yaml_ng::from_str(text).map_err(|e| {
            Error::input(
                format!("the release policy is not valid: {e}"),
                Some("see docs/release-management.md for the policy format".to_string()),
            )
        })?;
        let mut windows = Vec::new();
        for (i, w) in file.windows.into_iter().enumerate() {
            let name = if w.description.is_empty() {
                format!("window {}", i + 1)
            } else {
                format!("window {} ({:?})", i + 1, w.description)
            };
            let bad = |m: String| {
                Error::input(
                    format!("release policy, {name}: {m}"),
                    Some(
                        "fix the window; nothing is promoted while the policy is invalid"
                            .to_string(),
                    ),
                )
            };
            let zone_name = w.time_zone.clone().unwrap_or_else(|| "UTC".to_string());
            let zone = TimeZone::get(&zone_name).map_err(|_| {
                bad(format!(
                    "unknown time zone {zone_name:?} (use an IANA name such as Europe/Amsterdam)"
                ))
            })?;
            let timing = match (w.schedule, w.duration, w.start, w.end) {
                (Some(s), Some(d), None, None) => Timing::Recurring {
                    cron: Cron::parse(&s).map_err(|m| bad(format!("schedule: {m}")))?,
                    duration: parse_duration(&d).map_err(bad)?,
                },
                (Some(_), None, None, None) => {
                    return Err(bad("a schedule needs a duration".into()));
                }
                (None, Some(_), None, None) => {
                    return Err(bad("a duration needs a schedule".into()));
                }
                (None, None, Some(s), Some(e)) => {
                    let start = parse_instant(&s, &zone, &zone_name)
                        .map_err(|m| bad(format!("start: {m}")))?;
                    let end = parse_instant(&e, &zone, &zone_name)
                        .map_err(|m| bad(format!("end: {m}")))?;
                    if end <= start {
                        return Err(bad("end must be after start".into()));
                    }
                    Timing::OneShot { start, end }
                }
                (None, None, Some(_), None) | (None, None, None, Some(_)) => {
                    return Err(bad("a one-shot window needs both start and end".into()));
                }
                (None, None, None, None) => {
                    return Err(bad("give either schedule + duration or start + end".into()));
                }
                _ => {
                    return Err(bad(
                        "give either schedule + duration or start + end, not both".into(),
                    ));
                }
            };
            windows.push(Window {
                kind: w.kind,
                description: w.description,
                timing,
                zone,
            });
        }
        let mut requires = Vec::new();
        for (i, r) in file.requires.into_iter().enumerate() {
            requires.push(r.validate(parse_duration).map_err(|m| {
                Error::input(
                    format!("release policy, requirement {}: {m}", i + 1),
                    Some(
                        "fix the requirement; nothing is promoted while the policy is invalid"
                            .to_string(),
                    ),
                )
            })?);
        }
        Ok(Policy { windows, requires })
    }
}

/// How many dates and start times this thread's window evaluations have
/// looked at: a count of the work a gate decision costs, not a clock, for
/// tests to hold it flat whatever the schedule.
#[cfg(test)]
pub fn evaluations() -> u64 {
    EVALUATIONS.with(Cell::get)
}

thread_local! {
    static EVALUATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count() {
    EVALUATIONS.with(|c| c.set(c.get() + 1));
}

const NANO: SignedDuration = SignedDuration::from_nanos(1);
const MINUTE: SignedDuration = SignedDuration::from_mins(1);

/// `dt` rounded up to a whole minute.
fn ceil_minute(dt: DateTime) -> Option<DateTime> {
    let floor = dt.date().at(dt.hour(), dt.minute(), 0, 0);
    if floor == dt {
        Some(floor)
    } else {
        floor.checked_add(MINUTE).ok()
    }
}

/// The latest minute in `[lo, hi]` (civil times) that `cron` matches,
/// walking back one date at a time from `hi`.
fn last_match(cron: &Cron, lo: DateTime, hi: DateTime) -> Option<DateTime> {
    let mut date = hi.date();
    let mut until = Some((hi.hour() as u32, hi.minute() as u32));
    while date >= lo.date() {
        count();
        let weekday = date.weekday().to_sunday_zero_offset() as u32;
        if cron.matches_date(date.month() as u32, date.day() as u32, weekday)
            && let Some((h, m)) = cron.last_time_until(until)
        {
            let dt = date.at(h as i8, m as i8, 0, 0);
            return (dt >= lo).then_some(dt);
        }
        date = date.yesterday().ok()?;
        until = None;
    }
    None
}

/// The earliest minute in `[lo, hi]` (civil times, `lo` a whole minute)
/// that `cron` matches, walking forward one date at a time from `lo`.
fn first_match(cron: &Cron, lo: DateTime, hi: DateTime) -> Option<DateTime> {
    let mut date = lo.date();
    let mut from = Some((lo.hour() as u32, lo.minute() as u32));
    while date <= hi.date() {
        count();
        let weekday = date.weekday().to_sunday_zero_offset() as u32;
        if cron.matches_date(date.month() as u32, date.day() as u32, weekday)
            && let Some((h, m)) = cron.first_time_from(from)
        {
            let dt = date.at(h as i8, m as i8, 0, 0);
            return (dt <= hi).then_some(dt);
        }
        date = date.tomorrow().ok()?;
        from = None;
    }
    None
}

/// A stretch of time with one UTC offset: the instants `[start, end)`,
/// the offset in it and the offset before `start`.
struct Segment {
    start: Option<Timestamp>,
    end: Option<Timestamp>,
    offset: Offset,
    before: Offset,
}

impl Window {
    /// The stretch of one offset that holds `at`.
    fn segment(&self, at: Timestamp) -> Segment {
        let offset = self.zone.to_offset(at);
        // The latest transition at or before `at`, the first after it.
        let start = at
            .checked_add(SignedDuration::from_secs(1))
            .ok()
            .and_then(|t| self.zone.preceding(t).find(|t| t.timestamp() <= at))
            .map(|t| t.timestamp());
        let before = start
            .and_then(|s| s.checked_sub(NANO).ok())
            .map_or(offset, |s| self.zone.to_offset(s));
        let end = self
            .zone
            .following(at)
            .find(|t| t.timestamp() > at)
            .map(|t| t.timestamp());
        Segment {
            start,
            end,
            offset,
            before,
        }
    }

    /// The latest start in `[lo, hi]` of a recurring window. A schedule's
    /// wall-clock minute `c` starts at `c - offset`; in a fold it starts
    /// at its first instance, in a spring-forward gap at `c - offset
    /// before the gap` (as late as the gap is long). Walks back one stretch
    /// of one offset at a time and, inside it, one date at a time: the cost
    /// is bounded by the days in `[lo, hi]`, whatever the schedule.
    fn latest_start(&self, cron: &Cron, lo: Timestamp, hi: Timestamp) -> Option<Timestamp> {
        let mut hi = hi;
        while lo <= hi {
            let seg = self.segment(hi);
            let from = seg.start.map_or(lo, |s| s.max(lo));
            let mut best = None;
            // The stretch's own minutes; in a fold the repeated ones belong
            // to the stretch before.
            let mut civil_lo = ceil_minute(seg.offset.to_datetime(from))?;
            if let Some(s) = seg.start
                && seg.before > seg.offset
            {
                civil_lo = civil_lo.max(ceil_minute(seg.before.to_datetime(s))?);
            }
            if let Some(c) = last_match(cron, civil_lo, seg.offset.to_datetime(hi)) {
                count();
                best = seg.offset.to_timestamp(c).ok();
            }
            // The minutes skipped by a spring-forward gap at the stretch's start.
            if let Some(s) = seg.start
                && seg.before < seg.offset
                && let Some(gap_end) = seg.offset.to_datetime(s).checked_sub(NANO).ok()
            {
                let g_lo = ceil_minute(seg.before.to_datetime(from))?;
                let g_hi = gap_end.min(seg.before.to_datetime(hi));
                if let Some(c) = last_match(cron, g_lo, g_hi) {
                    count();
                    best = best.max(seg.before.to_timestamp(c).ok());
                }
            }
            if best.is_some() {
                return best;
            }
            hi = seg.start?.checked_sub(NANO).ok()?;
        }
        None
    }

    /// The earliest start in `[lo, hi]` of a recurring window (see
    /// [`Window::latest_start`]), walking forward.
    fn earliest_start(&self, cron: &Cron, lo: Timestamp, hi: Timestamp) -> Option<Timestamp> {
        let mut lo = lo;
        while lo <= hi {
            let seg = self.segment(lo);
            let to = match seg.end.and_then(|e| e.checked_sub(NANO).ok()) {
                Some(e) => e.min(hi),
                None => hi,
            };
            let mut best: Option<Timestamp> = None;
            let mut civil_lo = ceil_minute(seg.offset.to_datetime(lo))?;
            if let Some(s) = seg.start
                && seg.before > seg.offset
            {
                civil_lo = civil_lo.max(ceil_minute(seg.before.to_datetime(s))?);
            }
            if let Some(c) = first_match(cron, civil_lo, seg.offset.to_datetime(to)) {
                count();
                best = seg.offset.to_timestamp(c).ok();
            }
            if let Some(s) = seg.start
                && seg.before < seg.offset
                && let Some(gap_end) = seg.offset.to_datetime(s).checked_sub(NANO).ok()
            {
                let g_lo = ceil_minute(seg.before.to_datetime(lo))?;
                let g_hi = gap_end.min(seg.before.to_datetime(to));
                if let Some(c) = first_match(cron, g_lo, g_hi) {
                    count();
                    let t = seg.before.to_timestamp(c).ok();
                    best = match (best, t) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                }
            }
            if best.is_some() {
                return best;
            }
            lo = seg.end?;
        }
        None
    }

    /// The start of the opening that holds `now`, if the window is active:
    /// for a recurring window the latest start at or before `now`, which
    /// covers `now` if any start does (every opening lasts as long).
    fn covering(&self, now: Timestamp) -> Option<(Timestamp, Timestamp)> {
        match &self.timing {
            Timing::OneShot { start, end } => {
                (*start <= now && now < *end).then_some((*start, *end))
            }
            Timing::Recurring { cron, duration } => {
                let lo = now
                    .checked_sub(*duration)
                    .and_then(|t| t.checked_add(NANO))
                    .unwrap_or(Timestamp::MIN);
                let s = self.latest_start(cron, lo, now)?;
                Some((s, s.checked_add(*duration).unwrap_or(Timestamp::MAX)))
            }
        }
    }

    /// The active intervals `[start, end)` that overlap `[from, to)`, one
    /// per opening (a recurring window's openings may overlap).
    pub fn intervals(&self, from: Timestamp, to: Timestamp) -> Vec<(Timestamp, Timestamp)> {
        match &self.timing {
            Timing::OneShot { start, end } => {
                if *start < to && *end > from {
                    vec![(*start, *end)]
                } else {
                    vec![]
                }
            }
            Timing::Recurring { cron, duration } => {
                let mut out = Vec::new();
                let (Ok(mut lo), Ok(hi)) = (
                    from.checked_sub(*duration)
                        .and_then(|t| t.checked_add(NANO)),
                    to.checked_sub(NANO),
                ) else {
                    return out;
                };
                while let Some(s) = self.earliest_start(cron, lo, hi) {
                    out.push((s, s.checked_add(*duration).unwrap_or(Timestamp::MAX)));
                    let Ok(next) = s.checked_add(NANO) else { break };
                    lo = next;
                }
                out
            }
        }
    }

    /// The stretches `[start, end)` when the window is active, overlapping
    /// openings merged, over `[from, to)`. The cost grows with the number of
    /// stretches, not with the openings inside one: within a stretch only
    /// the latest opening that starts before its current end matters.
    pub fn active(&self, from: Timestamp, to: Timestamp) -> Vec<(Timestamp, Timestamp)> {
        let Timing::Recurring { cron, duration } = &self.timing else {
            return self.intervals(from, to);
        };
        let mut out = Vec::new();
        let Ok(last) = to.checked_sub(NANO) else {
            return out;
        };
        let mut next = self
            .covering(from)
            .map(|(s, _)| s)
            .or_else(|| self.earliest_start(cron, from, last));
        while let Some(start) = next {
            if start >= to {
                break;
            }
            let mut end = start.checked_add(*duration).unwrap_or(Timestamp::MAX);
            while end < to {
                match self.covering(end) {
                    Some((_, e)) if e > end => end = e,
                    _ => break,
                }
            }
            out.push((start, end));
            if end >= to {
                break;
            }
            next = self.earliest_start(cron, end, last);
        }
        out
    }

    /// Whether the window is active at `now`.
    pub fn is_active(&self, now: Timestamp) -> bool {
        self.covering(now).is_some()
    }
}

/// The gate at one instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gate {
    /// Whether promotion may happen.
    pub open: bool,
    /// Why, in words.
    pub reason: String,
    /// Descriptions of the windows active now.
    pub active: Vec<String>,
}

/// A stretch of time with one gate state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Period {
    /// Start (inclusive).
    pub start: Timestamp,
    /// End (exclusive).
    pub end: Timestamp,
    /// Whether the gate is open during it.
    pub open: bool,
}

fn label(w: &Window, i: usize) -> String {
    if w.description.is_empty() {
        format!("window {}", i + 1)
    } else {
        w.description.clone()
    }
}

impl Policy {
    /// The gate at `now`.
    pub fn gate(&self, now: Timestamp) -> Gate {
        let active: Vec<(usize, &Window)> = self
            .windows
            .iter()
            .enumerate()
            .filter(|(_, w)| w.is_active(now))
            .collect();
        let names = |k: Kind| -> Vec<String> {
            active
                .iter()
                .filter(|(_, w)| w.kind == k)
                .map(|(i, w)| label(w, *i))
                .collect()
        };
        let all: Vec<String> = active.iter().map(|(i, w)| label(w, *i)).collect();
        let deny = names(Kind::Deny);
        let allow = names(Kind::Allow);
        let has_allow = self.windows.iter().any(|w| w.kind == Kind::Allow);
        let (open, reason) = if !deny.is_empty() {
            (false, format!("deny window active: {}", deny.join(", ")))
        } else if !allow.is_empty() {
            (true, format!("allow window active: {}", allow.join(", ")))
        } else if has_allow {
            (false, "no allow window is active".to_string())
        } else if self.windows.is_empty() {
            (true, "no windows: always open".to_string())
        } else {
            (true, "no deny window is active".to_string())
        };
        Gate {
            open,
            reason,
            active: all,
        }
    }

    /// The gate's periods over `[from, from + horizon)`, merged where the
    /// state does not change: each window's active stretches
    /// ([`Window::active`]) cut the horizon, and each piece's state is the
    /// gate's rule over the windows active in it.
    pub fn calendar(&self, from: Timestamp, horizon: SignedDuration) -> Vec<Period> {
        let Ok(to) = from.checked_add(horizon) else {
            return vec![];
        };
        let active: Vec<Vec<(Timestamp, Timestamp)>> =
            self.windows.iter().map(|w| w.active(from, to)).collect();
        let mut cuts = vec![from, to];
        for (s, e) in active.iter().flatten() {
            for t in [*s, *e] {
                if t > from && t < to {
                    cuts.push(t);
                }
            }
        }
        cuts.sort();
        cuts.dedup();
        let has_allow = self.windows.iter().any(|w| w.kind == Kind::Allow);
        let mut periods: Vec<Period> = Vec::new();
        for pair in cuts.windows(2) {
            let at = pair[0];
            let on = |k: Kind| {
                self.windows.iter().zip(&active).any(|(w, stretches)| {
                    w.kind == k && {
                        // The stretches are sorted and disjoint: the last one
                        // starting at or before `at` is the only candidate.
                        let i = stretches.partition_point(|(s, _)| *s <= at);
                        i > 0 && at < stretches[i - 1].1
                    }
                })
            };
            let open = if on(Kind::Deny) {
                false
            } else {
                on(Kind::Allow) || !has_allow
            };
            match periods.last_mut() {
                Some(p) if p.open == open => p.end = pair[1],
                _ => periods.push(Period {
                    start: pair[0],
                    end: pair[1],
                    open,
                }),
            }
        }
        periods
    }

    /// The next instant after `now` (within `horizon`) when the gate opens,
    /// and when it closes.
    pub fn next_changes(
        &self,
        now: Timestamp,
        horizon: SignedDuration,
    ) -> (Option<Timestamp>, Option<Timestamp>) {
        let cal = self.calendar(now, horizon);
        let next_open = cal.iter().skip(1).find(|p| p.open).map(|p| p.start);
        let next_close = cal.iter().skip(1).find(|p| !p.open).map(|p| p.start);
        (next_open, next_close)
    }
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;

// Release-window evaluation with a fixed clock (once tests/windows.rs).
#[cfg(test)]
#[path = "windows_tests.rs"]
mod windows_tests;
