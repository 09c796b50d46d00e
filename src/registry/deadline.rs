//! Deadlines, so that no registry can hold a run forever: a read timeout
//! alone restarts on every byte, and an upload has none at all.
//!
//! - **Per request** ([`Deadlines::request`]): from connecting until the
//!   answer's body is read, [`DEFAULT_REQUEST`] plus one second per
//!   [`FLOOR_RATE`] bytes the request uploads. A registry answers a manifest
//!   or existence check in well under a second; two minutes is a hundred
//!   times that, room for a slow proxy or a cold registry, and still short
//!   enough that six tries end inside the whole-operation deadline. The
//!   allowance per byte keeps a 4 MiB chunk on a slow link (at least
//!   256 KiB/s, 2 Mbit/s) inside it.
//! - **Per operation** ([`Deadlines::operation`]): one push, promote or
//!   inspect through a `Client`, authentication included:
//!   [`DEFAULT_OPERATION`]. A settings image is kilobytes to a few
//!   megabytes and a push takes seconds; fifteen minutes is room for every
//!   retry and backoff of a flaky registry, while a job that is stuck ends
//!   long before GitHub's six-hour job limit.
//!
//! Both can be changed by the front ends (`SETTINGS_IMAGE_REQUEST_TIMEOUT`,
//! `SETTINGS_IMAGE_PUSH_TIMEOUT`, in seconds) with [`set`]; the library
//! reads no environment.

use std::sync::OnceLock;
use std::time::Duration;

/// The per-request deadline for a request without a large body.
pub const DEFAULT_REQUEST: Duration = Duration::from_secs(120);
/// The deadline of one whole operation (a push with its checks, tags and
/// provenance; a promotion; an inspection).
pub const DEFAULT_OPERATION: Duration = Duration::from_secs(15 * 60);
/// The slowest upload rate allowed for in a request's deadline, bytes/s.
pub const FLOOR_RATE: u64 = 256 * 1024;
/// The longest deadline a front end accepts, in seconds (a week): longer
/// than any CI job runs, and far from the clock's limits (a deadline is
/// `now + seconds`, which overflows for values near `u64::MAX`).
pub const MAX_SECONDS: u64 = 7 * 24 * 60 * 60;

/// Parses a deadline variable's value: whole seconds, 1 to [`MAX_SECONDS`];
/// the error says which variable and what it should be (exit 2).
pub fn parse_seconds(name: &str, value: &str) -> crate::error::Result<Duration> {
    match value.trim().parse::<u64>() {
        Ok(secs) if (1..=MAX_SECONDS).contains(&secs) => Ok(Duration::from_secs(secs)),
        _ => Err(crate::error::Error::input(
            format!(
                "{name} is {value:?}, not a number of seconds from 1 to {MAX_SECONDS} (a week)"
            ),
            Some(format!(
                "set {name} to a whole number of seconds from 1 to {MAX_SECONDS}, or unset it"
            )),
        )),
    }
}

/// The deadlines in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadlines {
    /// One request, upload allowance aside.
    pub request: Duration,
    /// One operation through a `Client`.
    pub operation: Duration,
}

impl Default for Deadlines {
    fn default() -> Self {
        Deadlines {
            request: DEFAULT_REQUEST,
            operation: DEFAULT_OPERATION,
        }
    }
}

impl Deadlines {
    /// The deadline of a request that uploads `body` bytes.
    pub fn for_request(&self, body: u64) -> Duration {
        self.request
            .saturating_add(Duration::from_secs(body.div_ceil(FLOOR_RATE)))
    }
}

static IN_FORCE: OnceLock<Deadlines> = OnceLock::new();

/// Sets the deadlines for this process (once, before the first client;
/// later calls are ignored).
pub fn set(d: Deadlines) {
    let _ = IN_FORCE.set(d);
}

/// The deadlines in force: those [`set`], else the defaults.
pub fn get() -> Deadlines {
    IN_FORCE.get().copied().unwrap_or_default()
}

/// Whole seconds, for messages.
pub(crate) fn secs(d: Duration) -> u64 {
    d.as_secs().max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uploads_get_time_for_their_bytes() {
        let d = Deadlines::default();
        assert_eq!(d.for_request(0), DEFAULT_REQUEST);
        // A 4 MiB chunk: 16 s more at 256 KiB/s.
        assert_eq!(
            d.for_request(4 * 1024 * 1024),
            DEFAULT_REQUEST + Duration::from_secs(16)
        );
        assert_eq!(d.for_request(1), DEFAULT_REQUEST + Duration::from_secs(1));
        assert!(d.for_request(u64::MAX) > DEFAULT_OPERATION);
    }

    #[test]
    fn deadlines_are_whole_seconds_up_to_a_week() {
        assert_eq!(parse_seconds("X", " 30 ").unwrap(), Duration::from_secs(30));
        assert_eq!(
            parse_seconds("X", "604800").unwrap(),
            Duration::from_secs(MAX_SECONDS)
        );
        for bad in [
            "0",
            "604801",
            "18446744073709551615",
            "99999999999999999999",
            "15m",
            "-1",
        ] {
            let e = parse_seconds("X", bad).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad}");
            assert!(e.to_string().starts_with(&format!("X is {bad:?}")), "{e}");
        }
    }
}
