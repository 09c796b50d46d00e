//! A service the tests share (a cluster of `scripts/kube.sh`, Flux's
//! controllers of `scripts/flux.sh`): started by a script's `up DIR`, once
//! per test run, and stopped by its `down DIR` when the run is over.
//!
//! Under cargo-nextest (scripts/test.sh), which runs each test in a process
//! of its own, the processes of one run share one service: the first that
//! asks starts it under a file lock, the others find what `up` printed in
//! the folder named by the run's `NEXTEST_RUN_ID`. Without nextest the
//! service is this process's. The harness has no hook after the last test:
//! a watchdog outside the process group runs `down` once the owner (nextest,
//! or this process) is gone.

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

use super::repo;

/// A running service: what its script's `up` printed.
pub struct Service {
    /// `up`'s `NAME=VALUE` lines.
    pub vars: Vec<(String, String)>,
    /// `up`'s output as it was printed (for messages).
    pub printed: String,
}

impl Service {
    /// A variable `up` printed; panics naming the script's output when it
    /// printed none.
    pub fn var(&self, name: &str) -> &str {
        self.vars
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("up printed no {name}:\n{}", self.printed))
    }
}

/// The service `name` of this test run: `bash SCRIPT up DIR ARGS...`
/// (SCRIPT relative to the repository) by the first process that asks.
/// Without nextest, this process's own ([`private`]).
pub fn shared(name: &str, script: &str, args: &[&str]) -> Service {
    let run = match std::env::var("NEXTEST_RUN_ID") {
        Ok(run) if !run.is_empty() => run,
        _ => return private(name, script, args),
    };
    // Short: the kubelet's sockets live under the state folder.
    let dir = std::env::temp_dir().join(format!(
        "si-{name}-{}",
        run.chars()
            .filter(char::is_ascii_hexdigit)
            .take(12)
            .collect::<String>()
    ));
    fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    let lock = fs::File::create(dir.join("lock")).expect("creating the lock file");
    lock.lock().expect("locking the shared service");
    let saved = dir.join("up.env");
    let state = dir.join("state");
    let printed = match fs::read_to_string(&saved) {
        Ok(text) => text,
        Err(_) => {
            // nextest spawns every test process itself: the service lives
            // as long as it does.
            let text = up(script, &state, args, std::os::unix::process::parent_id());
            fs::write(&saved, &text).expect("writing up.env");
            text
        }
    };
    parse(printed)
}

/// A service of this test process alone (one a test stops and restarts),
/// stopped once the process exits.
pub fn private(name: &str, script: &str, args: &[&str]) -> Service {
    static N: AtomicU32 = AtomicU32::new(0);
    // The clock too: a folder of an earlier process with the same PID is
    // never taken for this one's.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let dir = std::env::temp_dir().join(format!(
        "si-{name}-p{}-{}-{nanos:x}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let state = dir.join("state");
    let printed = up(script, &state, args, std::process::id());
    parse(printed)
}

fn parse(printed: String) -> Service {
    let vars = printed
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Service { vars, printed }
}

/// `bash SCRIPT up STATE ARGS...`, then a watchdog that runs `bash SCRIPT
/// down STATE` once process `owner` is gone; what `up` printed.
fn up(script: &str, state: &Path, args: &[&str], owner: u32) -> String {
    let script = repo().join(script);
    let out = Command::new("bash")
        .arg(&script)
        .arg("up")
        .arg(state)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", script.display()));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{} up {} failed ({}):\n{text}\n{}",
        script.display(),
        state.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let watchdog = format!(
        "while kill -0 {owner} 2>/dev/null; do sleep 1; done; bash '{}' down '{}' >/dev/null 2>&1",
        script.display(),
        state.display()
    );
    // `setsid -f` forks the watchdog off and returns at once.
    let started = Command::new("setsid")
        .args(["-f", "bash", "-c", &watchdog])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("starting the service's watchdog");
    assert!(started.success(), "setsid -f failed: {started}");
    text
}
