//! Release channels: promotion of a timestamp tag into a forward-only
//! channel, gated by time windows.

pub mod channel;
pub mod cron;
pub mod forward;
pub mod policy;
