//! Release windows: when a promotion into a channel may happen.
//!
//! Semantics, as in Argo CD sync windows and Kargo: no windows means always
//! open; when allow windows exist, promotion happens only while one of them
//! is active; an active deny window always wins. Each window is evaluated
//! in its own IANA time zone. The whole file is validated before anything
//! is decided: a bad window is an error naming it, never a gate silently
//! left open or shut.

use jiff::civil::DateTime;
use jiff::tz::TimeZone;
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
    /// The zone's name as written (default `UTC`).
    pub zone_name: String,
}

/// A validated policy.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// The windows, in file order.
    pub windows: Vec<Window>,
}

/// Parses a duration such as `8h`, `90m`, `1h30m`, `2d`, `45s`.
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
    Ok(SignedDuration::from_secs(total))
}

fn parse_instant(text: &str, zone: &TimeZone) -> Result<Timestamp, String> {
    if let Ok(ts) = text.parse::<Timestamp>() {
        return Ok(ts);
    }
    let dt: DateTime = text.parse().map_err(|_| {
        format!("{text:?} is not a date-time; write 2026-12-20T00:00:00 (in the window's zone) or RFC 3339")
    })?;
    zone.to_ambiguous_timestamp(dt)
        .compatible()
        .map_err(|e| format!("{text:?}: {e}"))
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
                    let start = parse_instant(&s, &zone).map_err(|m| bad(format!("start: {m}")))?;
                    let end = parse_instant(&e, &zone).map_err(|m| bad(format!("end: {m}")))?;
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
                zone_name,
            });
        }
        Ok(Policy { windows })
    }
}

impl Window {
    /// The active intervals `[start, end)` that overlap `[from, to)`.
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
                let mut out: Vec<(Timestamp, Timestamp)> = Vec::new();
                let Ok(earliest) = from.checked_sub(*duration) else {
                    return out;
                };
                // Walk the local dates that can hold a start in [from - duration, to).
                let mut date = self.zone.to_datetime(earliest).date();
                let Ok(last) = self.zone.to_datetime(to).date().tomorrow() else {
                    return out;
                };
                while date <= last {
                    let weekday = date.weekday().to_sunday_zero_offset() as u32;
                    if cron.matches_date(date.month() as u32, date.day() as u32, weekday) {
                        for (h, m) in cron.times() {
                            let dt = date.at(h as i8, m as i8, 0, 0);
                            // A time in a spring-forward gap starts when the clocks jump
                            // ahead by the gap; a repeated time starts at its first instance.
                            let Ok(start) = self.zone.to_ambiguous_timestamp(dt).compatible()
                            else {
                                continue;
                            };
                            let Ok(end) = start.checked_add(*duration) else {
                                continue;
                            };
                            if start < to && end > from && !out.contains(&(start, end)) {
                                out.push((start, end));
                            }
                        }
                    }
                    let Ok(next) = date.tomorrow() else { break };
                    date = next;
                }
                out.sort();
                out
            }
        }
    }

    /// Whether the window is active at `now`.
    pub fn is_active(&self, now: Timestamp) -> bool {
        let Ok(next) = now.checked_add(SignedDuration::from_secs(1)) else {
            return false;
        };
        self.intervals(now, next)
            .iter()
            .any(|(s, e)| *s <= now && now < *e)
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
    /// state does not change.
    pub fn calendar(&self, from: Timestamp, horizon: SignedDuration) -> Vec<Period> {
        let Ok(to) = from.checked_add(horizon) else {
            return vec![];
        };
        let mut cuts = vec![from, to];
        for w in &self.windows {
            for (s, e) in w.intervals(from, to) {
                for t in [s, e] {
                    if t > from && t < to {
                        cuts.push(t);
                    }
                }
            }
        }
        cuts.sort();
        cuts.dedup();
        let mut periods: Vec<Period> = Vec::new();
        for pair in cuts.windows(2) {
            let open = self.gate(pair[0]).open;
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
