//! Five-field cron expressions (`minute hour day-of-month month day-of-week`)
//! as Vixie cron reads them, matched against civil (wall-clock) times.

use std::fmt;

/// A parsed cron expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cron {
    minutes: u64,
    hours: u64,
    days: u64,
    months: u64,
    weekdays: u64,
    /// Day-of-month was restricted (not `*`).
    days_restricted: bool,
    /// Day-of-week was restricted (not `*`).
    weekdays_restricted: bool,
    source: String,
}

impl fmt::Display for Cron {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const WEEKDAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

struct Field {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'static [&'static str],
    names_start: u32,
}

fn value(field: &Field, s: &str) -> Result<u32, String> {
    let lower = s.to_ascii_lowercase();
    if let Some(i) = field.names.iter().position(|n| *n == lower) {
        return Ok(i as u32 + field.names_start);
    }
    let v: u32 = s
        .parse()
        .map_err(|_| format!("{} field: {s:?} is not a number", field.name))?;
    if v < field.min || v > field.max {
        return Err(format!(
            "{} field: {v} is outside {}-{}",
            field.name, field.min, field.max
        ));
    }
    Ok(v)
}

fn parse_field(field: &Field, text: &str) -> Result<u64, String> {
    let mut bits = 0u64;
    for part in text.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => {
                let step: u32 = s
                    .parse()
                    .map_err(|_| format!("{} field: step {s:?} is not a number", field.name))?;
                if step == 0 {
                    return Err(format!("{} field: step 0", field.name));
                }
                (r, step)
            }
            None => (part, 1),
        };
        let (lo, hi) = if range == "*" {
            (field.min, field.max)
        } else if let Some((a, b)) = range.split_once('-') {
            let (a, b) = (value(field, a)?, value(field, b)?);
            if a > b {
                return Err(format!(
                    "{} field: range {range:?} runs backwards",
                    field.name
                ));
            }
            (a, b)
        } else {
            let v = value(field, range)?;
            // `5/15` means 5-max/15, as in Vixie cron.
            (v, if part.contains('/') { field.max } else { v })
        };
        if range.is_empty() {
            return Err(format!("{} field: empty item", field.name));
        }
        let mut v = lo;
        while v <= hi {
            bits |= 1 << v;
            v += step;
        }
    }
    Ok(bits)
}

impl Cron {
    /// Parses a five-field expression. Names (`mon`, `jan`) are accepted;
    /// day-of-week 7 is Sunday, like 0.
    pub fn parse(text: &str) -> Result<Cron, String> {
        let fields: Vec<&str> = text.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(format!(
                "{text:?} has {} fields; a schedule has 5: minute hour day-of-month month day-of-week",
                fields.len()
            ));
        }
        let f = |name, min, max| Field {
            name,
            min,
            max,
            names: &[],
            names_start: 0,
        };
        let minutes = parse_field(&f("minute", 0, 59), fields[0])?;
        let hours = parse_field(&f("hour", 0, 23), fields[1])?;
        let days = parse_field(&f("day-of-month", 1, 31), fields[2])?;
        let months = parse_field(
            &Field {
                name: "month",
                min: 1,
                max: 12,
                names: &MONTHS,
                names_start: 1,
            },
            fields[3],
        )?;
        let mut weekdays = parse_field(
            &Field {
                name: "day-of-week",
                min: 0,
                max: 7,
                names: &WEEKDAYS,
                names_start: 0,
            },
            fields[4],
        )?;
        if weekdays & (1 << 7) != 0 {
            weekdays |= 1;
        }
        Ok(Cron {
            minutes,
            hours,
            days,
            months,
            weekdays,
            days_restricted: !fields[2].starts_with('*'),
            weekdays_restricted: !fields[4].starts_with('*'),
            source: text.to_string(),
        })
    }

    /// Whether the date matches (month, and day-of-month / day-of-week with
    /// Vixie's rule: when both are restricted, either may match).
    pub fn matches_date(&self, month: u32, day: u32, weekday_from_sunday: u32) -> bool {
        if self.months & (1 << month) == 0 {
            return false;
        }
        let dom = self.days & (1 << day) != 0;
        let dow = self.weekdays & (1 << weekday_from_sunday) != 0;
        match (self.days_restricted, self.weekdays_restricted) {
            (true, true) => dom || dow,
            _ => dom && dow,
        }
    }

    /// The latest (hour, minute) of a matching day at or before `until`
    /// (the whole day when `None`), found from the bits, not by walking
    /// the day's times.
    pub fn last_time_until(&self, until: Option<(u32, u32)>) -> Option<(u32, u32)> {
        let (h, m) = until.unwrap_or((23, 59));
        let highest = |bits: u64| (bits != 0).then(|| 63 - bits.leading_zeros());
        if self.hours & (1 << h) != 0
            && let Some(m) = highest(self.minutes & ((2u64 << m) - 1))
        {
            return Some((h, m));
        }
        let hour = highest(self.hours & ((1u64 << h) - 1))?;
        Some((hour, highest(self.minutes)?))
    }

    /// The earliest (hour, minute) of a matching day at or after `from`
    /// (the whole day when `None`), found from the bits.
    pub fn first_time_from(&self, from: Option<(u32, u32)>) -> Option<(u32, u32)> {
        let (h, m) = from.unwrap_or((0, 0));
        let lowest = |bits: u64| (bits != 0).then(|| bits.trailing_zeros());
        if self.hours & (1 << h) != 0
            && let Some(m) = lowest(self.minutes & !((1u64 << m) - 1))
        {
            return Some((h, m));
        }
        let hour = lowest(self.hours & !((2u64 << h) - 1))?;
        Some((hour, lowest(self.minutes)?))
    }

    /// The (hour, minute) pairs of a matching day, in order.
    #[cfg(test)]
    pub fn times(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        (0..24u32)
            .filter(|h| self.hours & (1 << h) != 0)
            .flat_map(move |h| {
                (0..60u32)
                    .filter(|m| self.minutes & (1 << m) != 0)
                    .map(move |m| (h, m))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_usual_forms() {
        let c = Cron::parse("0 9 * * 1-5").unwrap();
        assert_eq!(c.times().collect::<Vec<_>>(), [(9, 0)]);
        assert!(c.matches_date(3, 2, 1));
        assert!(!c.matches_date(3, 1, 0));
        let c = Cron::parse("*/20 22-23 * dec SUN,sat").unwrap();
        assert_eq!(c.times().count(), 6);
        assert!(c.matches_date(12, 5, 6) && c.matches_date(12, 6, 0) && !c.matches_date(11, 6, 0));
        let c = Cron::parse("5/15 0 * * 7").unwrap();
        assert_eq!(c.times().map(|t| t.1).collect::<Vec<_>>(), [5, 20, 35, 50]);
        assert!(c.matches_date(1, 4, 0));
    }

    #[test]
    fn vixie_day_rule() {
        // Both restricted: the 1st of the month OR any Monday.
        let c = Cron::parse("0 0 1 * 1").unwrap();
        assert!(c.matches_date(6, 1, 3));
        assert!(c.matches_date(6, 8, 1));
        assert!(!c.matches_date(6, 9, 2));
        // Only day-of-month restricted: weekday ignored.
        let c = Cron::parse("0 0 1 * *").unwrap();
        assert!(c.matches_date(6, 1, 3) && !c.matches_date(6, 8, 1));
    }

    #[test]
    fn rejects_bad_expressions() {
        let fields = |text: &str, n: usize| {
            format!(
                "{text:?} has {n} fields; a schedule has 5: minute hour day-of-month month day-of-week"
            )
        };
        for (bad, reason) in [
            ("", fields("", 0)),
            ("* * * *", fields("* * * *", 4)),
            ("* * * * * *", fields("* * * * * *", 6)),
            ("@daily", fields("@daily", 1)),
            ("60 * * * *", "minute field: 60 is outside 0-59".into()),
            ("* 24 * * *", "hour field: 24 is outside 0-23".into()),
            ("* * 0 * *", "day-of-month field: 0 is outside 1-31".into()),
            ("* * * 13 *", "month field: 13 is outside 1-12".into()),
            ("* * * * 8", "day-of-week field: 8 is outside 0-7".into()),
            ("*/0 * * * *", "minute field: step 0".into()),
            (
                "*/x * * * *",
                "minute field: step \"x\" is not a number".into(),
            ),
            (
                "5-1 * * * *",
                "minute field: range \"5-1\" runs backwards".into(),
            ),
            ("a * * * *", "minute field: \"a\" is not a number".into()),
            ("* * * foo *", "month field: \"foo\" is not a number".into()),
            ("1,,2 * * * *", "minute field: \"\" is not a number".into()),
        ] {
            assert_eq!(Cron::parse(bad), Err(reason), "{bad:?}");
        }
    }
}
