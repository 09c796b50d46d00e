//! The integration suite: one test binary, as ripgrep's `tests/tests.rs`
//! and just's `tests/lib.rs` are. Each file of `tests/` is a module of it
//! (its tests are `FILE::NAME`: `cargo nextest run -E 'test(/^history::/)'`
//! runs those of `tests/history.rs`), and they share one kit, `common/`,
//! compiled and linked once. cargo-nextest still runs every test in a
//! process of its own (.config/nextest.toml).

mod common;
mod support_login;

mod action;
mod checkout;
mod controller;
mod diff;
mod dist;
mod errors;
mod evidence_node;
mod exit_codes;
mod flux;
mod flux_observed;
mod flux_rules;
mod force_push;
mod history;
mod hostile;
mod large_files;
mod layout;
mod login;
mod manifests;
mod many;
mod newcomer;
mod node;
mod oci_peers;
mod ordering;
mod promote;
mod provenance;
mod readers;
mod reference;
mod registry;
mod requests;
mod scan;
mod schema;
mod terminal;
mod verify;
