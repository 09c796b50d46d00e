//! The controller's logs: one JSON object per line on stderr
//! (`{"ts","level","msg",...}`), what log collectors in a cluster parse
//! without a pattern. The library's own `log` records (history, registry
//! debug lines) go through the same writer at `--log-level debug`.
//!
//! Every line is scrubbed of the credentials the running reconciles hold
//! ([`hold`], `super::redact`): a library record that quotes a server's
//! words (a mirror's failed fetch) carries no secret either.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, Ordering};

use serde_json::{Map, Value};

use super::redact::Held;

/// The credentials of the reconciles running now, by object.
static HELD: Mutex<BTreeMap<String, Held>> = Mutex::new(BTreeMap::new());

/// Scrubs every log line of what `held` holds until the guard is dropped
/// (the reconcile of `key` ends).
pub fn hold(key: &str, held: &Held) -> Holding {
    if let Ok(mut m) = HELD.lock() {
        m.insert(key.to_string(), held.clone());
    }
    Holding(key.to_string())
}

/// Ends a [`hold`] when dropped.
pub struct Holding(String);

impl Drop for Holding {
    fn drop(&mut self) {
        if let Ok(mut m) = HELD.lock() {
            m.remove(&self.0);
        }
    }
}

/// `text` with every credential a running reconcile holds taken out.
fn scrub(text: &str) -> String {
    let Ok(m) = HELD.lock() else {
        return text.to_string();
    };
    m.values().fold(text.to_string(), |t, h| h.scrub(&t))
}

fn scrub_value(v: &mut Value) {
    match v {
        Value::String(s) => *s = scrub(s),
        Value::Array(a) => a.iter_mut().for_each(scrub_value),
        Value::Object(o) => o.values_mut().for_each(scrub_value),
        _ => {}
    }
}

/// The least severe level written.
static LEVEL: AtomicU8 = AtomicU8::new(2);

/// Log levels, least to most verbose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Level {
    /// Errors only.
    Error,
    /// Errors and warnings.
    Warn,
    /// What the controller did (the default).
    Info,
    /// Also the library's request-level details.
    Debug,
}

impl Level {
    fn rank(self) -> u8 {
        match self {
            Level::Error => 0,
            Level::Warn => 1,
            Level::Info => 2,
            Level::Debug => 3,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warn => "warn",
            Level::Info => "info",
            Level::Debug => "debug",
        }
    }
}

struct Logger;

impl log::Log for Logger {
    fn enabled(&self, m: &log::Metadata) -> bool {
        effective(m).rank() <= LEVEL.load(Ordering::Relaxed)
    }

    fn log(&self, r: &log::Record) {
        if self.enabled(r.metadata()) {
            let mut fields = Map::new();
            fields.insert("logger".into(), Value::from(r.target()));
            write(effective(r.metadata()), &r.args().to_string(), fields);
        }
    }

    fn flush(&self) {}
}

/// A record's level, with kube's own lines moved down to debug: its
/// per-object info lines repeat what our own lines say, and its warnings
/// and errors about failed requests come once per retry, raw ("Unsuccessful
/// data error parse: 404 page not found" for a watch whose CRD is missing,
/// "failed with error client error (Connect)" while the API server
/// restarts), where `watch::resilient` and the reconciler say what failed,
/// once per change, in words.
fn effective(m: &log::Metadata) -> Level {
    let level = level_of(m.level());
    if m.target().starts_with("kube") && level != Level::Debug {
        Level::Debug
    } else {
        level
    }
}

fn level_of(l: log::Level) -> Level {
    match l {
        log::Level::Error => Level::Error,
        log::Level::Warn => Level::Warn,
        log::Level::Info => Level::Info,
        log::Level::Debug | log::Level::Trace => Level::Debug,
    }
}

/// Sets the level and routes the `log` crate's records here.
pub fn init(level: Level) {
    LEVEL.store(level.rank(), Ordering::Relaxed);
    static LOGGER: Logger = Logger;
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(match level {
            Level::Error => log::LevelFilter::Error,
            Level::Warn => log::LevelFilter::Warn,
            Level::Info => log::LevelFilter::Info,
            Level::Debug => log::LevelFilter::Debug,
        });
    }
}

/// Writes one line at `level` with `msg` and `fields`.
pub fn write(level: Level, msg: &str, fields: Map<String, Value>) {
    if level.rank() > LEVEL.load(Ordering::Relaxed) {
        return;
    }
    let text = render(level, msg, fields);
    // One write per line, so lines of two threads never interleave.
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// One line of JSON, scrubbed, with its newline.
fn render(level: Level, msg: &str, mut fields: Map<String, Value>) -> String {
    let ts = k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string();
    let mut line = Map::new();
    line.insert("ts".into(), Value::from(ts));
    line.insert("level".into(), Value::from(level.name()));
    line.insert("msg".into(), Value::from(scrub(msg)));
    fields.values_mut().for_each(scrub_value);
    line.append(&mut fields);
    let mut text = Value::Object(line).to_string();
    text.push('\n');
    text
}

/// An info line.
pub fn info(msg: &str) {
    write(Level::Info, msg, Map::new());
}

/// A warning line.
pub fn warn(msg: &str) {
    write(Level::Warn, msg, Map::new());
}

/// An error line.
pub fn error(msg: &str) {
    write(Level::Error, msg, Map::new());
}

/// A line about one SettingsImage (`namespace`, `name`, and more `fields`).
pub fn object(level: Level, namespace: &str, name: &str, msg: &str, fields: &[(&str, Value)]) {
    let mut map = Map::new();
    map.insert("namespace".into(), Value::from(namespace));
    map.insert("settingsimage".into(), Value::from(name));
    for (k, v) in fields {
        map.insert((*k).to_string(), v.clone());
    }
    write(level, msg, map);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A library record (the mirror's warning quotes a failed fetch) goes
    /// through the same writer: what a running reconcile holds is taken
    /// out of it, and only while the reconcile runs.
    #[test]
    fn a_line_carries_no_credential_a_reconcile_holds() {
        let held = Held::new();
        held.add_basic("reader", "pw-of-ns-a");
        let mut fields = Map::new();
        fields.insert(
            "logger".into(),
            Value::from("settings_image::history::mirror"),
        );
        fields.insert("nested".into(), serde_json::json!({"said": ["pw-of-ns-a"]}));
        let msg = "mirror: fetching failed (you sent Authorization: Basic cmVhZGVyOnB3LW9mLW5zLWE=); cloning it afresh";
        let holding = hold("ns-a/app", &held);
        let line = render(Level::Warn, msg, fields.clone());
        assert!(!line.contains("pw-of-ns-a"), "{line}");
        assert!(!line.contains("cmVhZGVyOnB3LW9mLW5zLWE"), "{line}");
        assert!(line.contains("Basic <redacted>"), "{line}");
        drop(holding);
        assert!(render(Level::Warn, msg, fields).contains("cmVhZGVyOnB3LW9mLW5zLWE"));
    }
}
