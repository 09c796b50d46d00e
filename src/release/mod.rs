//! Release channels: promotion of a timestamp tag into a forward-only
//! channel, gated by time windows ([`channel`], [`policy`], [`cron`]) and by
//! rollout records ([`evidence`]), and
//! the pure decisions about the order Flux sees ([`ordering`]: anomalies,
//! branch-tag moves).

pub mod channel;
pub mod cron;
pub mod evidence;
pub mod ordering;
pub mod policy;
