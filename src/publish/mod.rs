//! Where a built image goes: an OCI image layout on disk, or a registry.
//! Each publisher takes the same [`crate::image::Image`] and owns its own
//! idempotence: content already present is not written again, and a
//! timestamp tag never moves.

pub mod forward;
pub mod layout;
pub mod registry;
