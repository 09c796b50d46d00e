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
}
