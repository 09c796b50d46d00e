//! The credentials one reconcile holds, and every text that leaves the
//! controller with them taken out.
//!
//! A git server or a registry may echo what it was sent (the
//! `Authorization` header in an error line, a token in a JSON error), and
//! those words go into the status, Events and the log, which anyone who
//! may read SettingsImages or Events can read. So each reconcile collects
//! what it reads from Secrets (the GitRepository's `password` or
//! `bearerToken`, the registry's `.dockerconfigjson` password) and what a
//! workload identity login hands out, in each form a server would echo them
//! (`user:password` base64-encoded, as `Authorization: Basic` carries it),
//! and [`Held::scrub`] replaces them with `<redacted>` in every message the
//! reconcile writes. The log writer ([`super::logs`]) scrubs every line
//! with what all reconciles hold, so the library's own records (a mirror's
//! failed fetch, logged before the reconcile sees the error) are covered.
//!
//! The CLI does the same in its own layers (`registry::transport`'s
//! `scrub`, `login::http`); the controller adds the git credentials, which
//! `history::mirror` hands to gix and never sees again.

use std::sync::{Arc, Mutex};

/// What replaces a credential.
pub const REDACTED: &str = "<redacted>";

/// The credentials of one reconcile; clones share them.
#[derive(Debug, Clone, Default)]
pub struct Held {
    secrets: Arc<Mutex<Vec<String>>>,
}

impl Held {
    /// Holds nothing yet.
    pub fn new() -> Held {
        Held::default()
    }

    /// Holds `secret` (and its trimmed form); empty strings are ignored.
    pub fn add(&self, secret: &str) {
        let Ok(mut v) = self.secrets.lock() else {
            return;
        };
        for s in [secret, secret.trim()] {
            if !s.is_empty() && !v.iter().any(|x| x == s) {
                v.push(s.to_string());
            }
        }
        // Longest first: a secret inside another is replaced after it, so
        // no part of the longer one is left.
        v.sort_by_key(|s| std::cmp::Reverse(s.len()));
    }

    /// Holds the password of `user:password` credentials, in every form an
    /// echoing server shows them: the password, and `user:password` plain
    /// and base64-encoded (standard and URL-safe, padded or not), as an
    /// `Authorization: Basic` header carries it.
    pub fn add_basic(&self, user: &str, password: &str) {
        use base64::Engine as _;
        use base64::engine::general_purpose::{
            STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD,
        };
        if password.is_empty() {
            return;
        }
        self.add(password);
        let basic = format!("{user}:{password}");
        self.add(&basic);
        for engine in [STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD] {
            self.add(&engine.encode(&basic));
        }
    }

    /// Holds a bearer token (sent as `Authorization: Bearer TOKEN`).
    pub fn add_token(&self, token: &str) {
        self.add(token);
    }

    /// `text` with every held credential replaced by `<redacted>`.
    pub fn scrub(&self, text: &str) -> String {
        let Ok(v) = self.secrets.lock() else {
            return text.to_string();
        };
        let mut out = text.to_string();
        for s in v.iter() {
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), REDACTED);
            }
        }
        out
    }

    /// A sink for the secrets a workload identity login hands out.
    pub fn sink(&self) -> crate::login::SecretSink {
        let held = self.clone();
        Arc::new(move |s: &str| held.add(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_of_basic_credentials_is_taken_out() {
        let held = Held::new();
        held.add_basic("reader", "s3cret-pw");
        // What `Authorization: Basic` carries, computed by coreutils'
        // base64 for "reader:s3cret-pw".
        let header = "cmVhZGVyOnMzY3JldC1wdw==";
        let text = format!(
            "denied: you sent Authorization: Basic {header} (unpadded {}), user reader, password s3cret-pw, userinfo reader:s3cret-pw",
            header.trim_end_matches('=')
        );
        let out = held.scrub(&text);
        assert!(!out.contains("s3cret-pw"), "{out}");
        assert!(!out.contains("cmVhZGVyOnMzY3JldC1wdw"), "{out}");
        assert!(out.contains("Basic <redacted>"), "{out}");
        assert!(
            out.contains("user reader,"),
            "the user name is not a secret: {out}"
        );
    }

    #[test]
    fn a_token_inside_a_longer_secret_leaves_nothing_behind() {
        let held = Held::new();
        held.add_token("abc");
        held.add_token("abcdef-longer");
        assert_eq!(
            held.scrub("x abcdef-longer y abc"),
            "x <redacted> y <redacted>"
        );
        // Clones share what is held; a login's sink adds to it.
        let clone = held.clone();
        (held.sink())("tok-from-login\n");
        assert_eq!(clone.scrub("t=tok-from-login"), "t=<redacted>");
    }
}
