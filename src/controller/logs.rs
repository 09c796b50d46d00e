//! The controller's logs: one JSON object per line on stderr
//! (`{"ts","level","msg",...}`), what log collectors in a cluster parse
//! without a pattern. The library's own `log` records (history, registry
//! debug lines) go through the same writer at `--log-level debug`.

use std::io::Write;
use std::sync::atomic::{AtomicU8, Ordering};

use serde_json::{Map, Value};

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

/// A record's level, with kube-runtime's per-object info lines (which
/// repeat what our own lines say) moved down to debug.
fn effective(m: &log::Metadata) -> Level {
    let level = level_of(m.level());
    if m.target().starts_with("kube") && level == Level::Info {
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
pub fn write(level: Level, msg: &str, mut fields: Map<String, Value>) {
    if level.rank() > LEVEL.load(Ordering::Relaxed) {
        return;
    }
    let ts = k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string();
    let mut line = Map::new();
    line.insert("ts".into(), Value::from(ts));
    line.insert("level".into(), Value::from(level.name()));
    line.insert("msg".into(), Value::from(msg));
    line.append(&mut fields);
    let mut text = Value::Object(line).to_string();
    text.push('\n');
    // One write per line, so lines of two threads never interleave.
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
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
