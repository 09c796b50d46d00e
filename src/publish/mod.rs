//! Where a built image goes: an OCI image layout on disk, or a registry.
//! Each publisher takes the same [`crate::image::Image`] and owns its own
//! idempotence: content already present is not written again, and a
//! timestamp tag never moves.
//!
//! - [`layout`]: the OCI image layout writer;
//! - [`registry`]: the push ordering over [`crate::registry::Client`];
//! - [`guards`]: what a registry push reads around it (the anomaly check,
//!   the guarded branch tag), deciding with [`crate::release::ordering`].

pub mod guards;
pub mod layout;
pub mod registry;
pub mod seen;
