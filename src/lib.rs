//! settings-image packages a folder of settings into a byte-reproducible OCI
//! image that Kubernetes mounts as an image volume, tags it from git history
//! and publishes it to an OCI layout or a registry.
//!
//! The pipeline: [`request`] (what to do) -> `source` (files) -> `image`
//! (blobs and manifest) -> `publish` (layout or registry) -> `report`, run
//! by [`pipeline::run`]. [`registry`] is the OCI distribution client every
//! registry user shares.
//!
//! The library is the binary's: what is public is what the binary
//! (`main.rs`: [`cli`], [`scratch`]), the reference pages (`tests/reference.rs`:
//! clap's [`cli::Cli`]), `examples/mirror_fetch.rs` ([`pipeline`], [`request`],
//! [`history`]) and the registry client's API (docs/design.md) use. The faces
//! (`action`, `controller`) and the rest of the core are the crate's own, so
//! the compiler reports whatever nothing calls.

pub(crate) mod action;
pub(crate) mod branch_tag;
pub mod cli;
pub(crate) mod cluster;
pub(crate) mod controller;
pub(crate) mod diff;
pub mod error;
pub(crate) mod field;
pub(crate) mod front;
pub mod history;
pub(crate) mod image;
pub(crate) mod inspect;
pub(crate) mod login;
pub(crate) mod many;
pub(crate) mod named_file;
pub(crate) mod notice;
pub(crate) mod output;
pub mod pipeline;
pub(crate) mod progress;
pub(crate) mod promote;
pub(crate) mod provenance;
pub(crate) mod publish;
pub(crate) mod redirects;
pub mod registry;
pub(crate) mod release;
pub(crate) mod report;
pub mod request;
pub(crate) mod rollout;
pub mod scratch;
mod show;
pub(crate) mod source;
pub(crate) mod tag;
pub(crate) mod trust;

pub use error::{Error, Result};

#[cfg(test)]
mod messages_tests;

/// The test kit of the integration suite (`tests/common/`), for the unit
/// tests that need what it starts (git, a git server, a registry, the
/// GitHub API stub): one kit for both. The unit tests use a part of it;
/// the suite (one binary) checks that every part is used.
#[cfg(test)]
#[path = "../tests/common/mod.rs"]
#[allow(dead_code)]
pub(crate) mod testkit;
