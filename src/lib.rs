//! settings-image packages a folder of settings into a byte-reproducible OCI
//! image that Kubernetes mounts as an image volume, tags it from git history
//! and publishes it to an OCI layout or a registry.
//!
//! The pipeline: [`request`] (what to do) -> [`source`] (files) -> [`image`]
//! (blobs and manifest) -> [`publish`] (layout or registry) -> [`report`].
//! [`registry`] is the OCI distribution client every registry user shares.

pub mod action;
pub mod branch_tag;
pub mod cli;
pub mod cluster;
pub mod controller;
pub mod diff;
pub mod error;
pub mod field;
pub mod front;
pub mod history;
pub mod image;
pub mod inspect;
pub mod login;
pub mod many;
pub mod named_file;
pub mod notice;
pub mod output;
pub mod pipeline;
pub mod progress;
pub mod promote;
pub mod provenance;
pub mod publish;
pub mod redirects;
pub mod registry;
pub mod release;
pub mod report;
pub mod request;
pub mod rollout;
pub mod scratch;
mod show;
pub mod source;
pub mod tag;
pub mod trust;

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
