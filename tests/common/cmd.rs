//! One builder for running the binary under test, in the spirit of
//! ripgrep's `tests/util.rs`: [`TestCommand`] sets up a hermetic run (an
//! empty docker config, no registry credentials or GitHub variables from
//! the test process, no stdin), takes arguments, environment, a working
//! directory and stdin, and its runners assert what a test expects:
//! [`TestCommand::ok`] (exit 0, stdout), [`TestCommand::json`] (exit 0,
//! the `--json` report), [`TestCommand::fails_with`] (that exit code), or
//! [`TestCommand::run`] for a test that looks at the result itself;
//! [`Run::stderr_is`] states the whole of stderr.
//! A failed assertion prints the command, its exit code and both streams.

use std::ffi::OsStr;
use std::fmt;
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::rc::Rc;

use serde_json::Value;

use super::{TempDir, bin};

/// Variables of the test process that would change what the binary does
/// (registry credentials, a CI runner's GitHub facts); every run starts
/// without them, and a test sets the ones it means.
pub const CLEARED: [&str; 16] = [
    "SETTINGS_IMAGE_USERNAME",
    "SETTINGS_IMAGE_PASSWORD",
    "GITHUB_ACTIONS",
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "GITHUB_API_URL",
    "GITHUB_SERVER_URL",
    "GITHUB_REPOSITORY",
    "GITHUB_REF",
    "GITHUB_RUN_ID",
    "GITHUB_RUN_ATTEMPT",
    "GITHUB_WORKFLOW_REF",
    "GITHUB_ACTION_REPOSITORY",
    "GITHUB_ACTION_REF",
    "GITHUB_ACTOR",
    "GITHUB_TRIGGERING_ACTOR",
];

/// The result of running the binary.
pub struct Run {
    /// The exit code (-1 when a signal ended the process).
    pub code: i32,
    /// Standard output, as text.
    pub stdout: String,
    /// Standard error, as text.
    pub stderr: String,
}

impl Run {
    /// The result of a finished process.
    pub fn of(out: &Output) -> Run {
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into(),
            stderr: String::from_utf8_lossy(&out.stderr).into(),
        }
    }

    /// The `--json` output; the run must have exited 0.
    pub fn json(&self) -> Value {
        assert_eq!(
            self.code, 0,
            "settings-image failed:\nstdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        serde_json::from_str(self.stdout.trim()).unwrap_or_else(|e| {
            panic!("not JSON ({e}): {}", self.stdout);
        })
    }

    /// The `--json` report whatever the exit code (a run of several
    /// folders reports the ones that failed too).
    pub fn report(&self) -> Value {
        serde_json::from_str(self.stdout.trim()).unwrap_or_else(|e| {
            panic!("not JSON ({e}): {self:?}");
        })
    }

    /// Asserts that the run exited with `code`.
    pub fn exited(&self, code: i32) -> &Run {
        assert_eq!(self.code, code, "wanted exit code {code}: {self:?}");
        self
    }

    /// Asserts that stderr is exactly `expected` (just's tests state the
    /// whole of it: a changed word, an added line or a lost hint fails).
    pub fn stderr_is(&self, expected: &str) -> &Run {
        if self.stderr != expected {
            let line = self
                .stderr
                .lines()
                .zip(expected.lines())
                .position(|(a, b)| a != b)
                .unwrap_or_else(|| self.stderr.lines().count().min(expected.lines().count()));
            panic!(
                "stderr differs at line {}:\n   got: {:?}\nwanted: {:?}\n{self:?}\nwanted stderr:\n{expected}",
                line + 1,
                self.stderr.lines().nth(line).unwrap_or("(end)"),
                expected.lines().nth(line).unwrap_or("(end)"),
            );
        }
        self
    }

    /// Asserts that stderr contains `text`.
    pub fn says(&self, text: &str) -> &Run {
        assert!(
            self.stderr.contains(text),
            "wanted {text:?} in stderr:\n{}\nstdout:\n{}",
            self.stderr,
            self.stdout
        );
        self
    }
}

impl fmt::Debug for Run {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "exit code {}\nstdout:\n{}\nstderr:\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// A run of `settings-image` being set up; see the module docs.
pub struct TestCommand {
    cmd: Command,
    stdin: Option<Vec<u8>>,
    /// Stdin was set to a file ([`TestCommand::stdin_from`]).
    stdin_set: bool,
    /// Standard output is a pipe whose reader is already closed.
    closed_stdout: bool,
    /// The empty docker config directory, kept while the command or a run
    /// of it lives.
    docker: Rc<TempDir>,
}

impl Default for TestCommand {
    fn default() -> TestCommand {
        TestCommand::new()
    }
}

impl TestCommand {
    /// `settings-image` with an empty docker config, [`CLEARED`] removed
    /// and no stdin.
    pub fn new() -> TestCommand {
        let docker = TempDir::new();
        let mut cmd = Command::new(bin());
        cmd.env("DOCKER_CONFIG", docker.path());
        for k in CLEARED {
            cmd.env_remove(k);
        }
        TestCommand {
            cmd,
            stdin: None,
            stdin_set: false,
            closed_stdout: false,
            docker: Rc::new(docker),
        }
    }

    /// Adds `promote --repository REPOSITORY --from main --to prod`: the
    /// channel move the promotion tests make.
    pub fn promote_main_to_prod(&mut self, repository: &str) -> &mut TestCommand {
        self.args([
            "promote",
            "--repository",
            repository,
            "--from",
            "main",
            "--to",
            "prod",
        ])
    }

    /// `settings-image push --path PATH --repository REPOSITORY`.
    pub fn push(path: impl AsRef<OsStr>, repository: &str) -> TestCommand {
        let mut c = TestCommand::new();
        c.arg("push")
            .arg("--path")
            .arg(path)
            .args(["--repository", repository]);
        c
    }

    /// `settings-image push --path PATH --repository REPOSITORY --json`:
    /// the push whose report [`TestCommand::json`] reads.
    pub fn push_json(path: impl AsRef<OsStr>, repository: &str) -> TestCommand {
        let mut c = TestCommand::push(path, repository);
        c.arg("--json");
        c
    }

    /// Adds an argument.
    pub fn arg(&mut self, arg: impl AsRef<OsStr>) -> &mut TestCommand {
        self.cmd.arg(arg);
        self
    }

    /// Adds arguments.
    pub fn args<I, S>(&mut self, args: I) -> &mut TestCommand
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.cmd.args(args);
        self
    }

    /// Adds `--tag T` for each of `tags`.
    pub fn tags(&mut self, tags: &[&str]) -> &mut TestCommand {
        for t in tags {
            self.cmd.args(["--tag", t]);
        }
        self
    }

    /// Sets an environment variable.
    pub fn env(&mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> &mut TestCommand {
        self.cmd.env(key, value);
        self
    }

    /// Sets environment variables.
    pub fn envs<I, K, V>(&mut self, vars: I) -> &mut TestCommand
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        self.cmd.envs(vars);
        self
    }

    /// Removes an environment variable.
    pub fn env_remove(&mut self, key: impl AsRef<OsStr>) -> &mut TestCommand {
        self.cmd.env_remove(key);
        self
    }

    /// Clears the whole environment, the defaults of [`TestCommand::new`]
    /// included (`DOCKER_CONFIG` too).
    pub fn env_clear(&mut self) -> &mut TestCommand {
        self.cmd.env_clear();
        self
    }

    /// Sets the working directory.
    pub fn current_dir(&mut self, dir: impl AsRef<Path>) -> &mut TestCommand {
        self.cmd.current_dir(dir);
        self
    }

    /// Caps the run's address space at `bytes` (`RLIMIT_AS`): a run that
    /// would read without bound fails its allocation there (an abort)
    /// instead of taking the machine's memory.
    pub fn memory_limit(&mut self, bytes: u64) -> &mut TestCommand {
        use std::os::unix::process::CommandExt;
        // SAFETY: setrlimit is async-signal-safe; nothing else runs
        // between fork and exec.
        unsafe {
            self.cmd.pre_exec(move || {
                let limit = libc::rlimit {
                    rlim_cur: bytes,
                    rlim_max: bytes,
                };
                if libc::setrlimit(libc::RLIMIT_AS, &limit) == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            });
        }
        self
    }

    /// Makes standard output a pipe whose reading end is closed before
    /// the run starts (`... | true` where `true` is always first): every
    /// write to it fails with `EPIPE`. The run's stdout reads empty.
    pub fn closed_stdout(&mut self) -> &mut TestCommand {
        self.closed_stdout = true;
        self
    }

    /// Gives `text` on stdin (none by default).
    pub fn stdin(&mut self, text: impl AsRef<[u8]>) -> &mut TestCommand {
        self.stdin = Some(text.as_ref().to_vec());
        self
    }

    /// Gives the file at `path` as stdin, opened for reading (a device
    /// such as `/dev/zero` never ends). Overrides [`TestCommand::stdin`].
    pub fn stdin_from(&mut self, path: &Path) -> &mut TestCommand {
        let file =
            std::fs::File::open(path).unwrap_or_else(|e| panic!("opening {}: {e}", path.display()));
        self.stdin = None;
        self.cmd.stdin(file);
        self.stdin_set = true;
        self
    }

    /// Starts the run without waiting for it.
    pub fn spawn(&mut self) -> Running {
        if self.stdin.is_some() {
            self.cmd.stdin(Stdio::piped());
        } else if !self.stdin_set {
            self.cmd.stdin(Stdio::null());
        }
        self.cmd.stderr(Stdio::piped());
        if self.closed_stdout {
            let (reader, writer) = std::io::pipe().expect("a pipe");
            drop(reader);
            self.cmd.stdout(writer);
        } else {
            self.cmd.stdout(Stdio::piped());
        }
        let mut child = self
            .cmd
            .spawn()
            .unwrap_or_else(|e| panic!("starting {:?}: {e}", self.cmd));
        if let Some(text) = &self.stdin {
            child
                .stdin
                .take()
                .expect("stdin is piped")
                .write_all(text)
                .expect("writing stdin");
        }
        Running {
            child,
            _docker: Rc::clone(&self.docker),
        }
    }

    /// Runs and returns the result, whatever it is.
    pub fn run(&mut self) -> Run {
        Run::of(&self.output())
    }

    /// Runs and returns the process's raw output, whatever it is.
    pub fn output(&mut self) -> Output {
        self.spawn()
            .child
            .wait_with_output()
            .expect("waiting for settings-image")
    }

    /// Runs, asserts exit 0 and returns stdout.
    pub fn ok(&mut self) -> String {
        let run = self.run();
        assert_eq!(run.code, 0, "{:?} failed: {run:?}", self.cmd);
        run.stdout
    }

    /// Runs, asserts exit 0 and returns stdout parsed as JSON (the
    /// `--json` report).
    pub fn json(&mut self) -> Value {
        self.run().json()
    }

    /// Runs, asserts the exit code `code` and returns the result, for
    /// [`Run::says`].
    pub fn fails_with(&mut self, code: i32) -> Run {
        let run = self.run();
        assert_eq!(
            run.code, code,
            "{:?}: wanted exit code {code}: {run:?}",
            self.cmd
        );
        run
    }

    /// Runs under GNU time: the result and the peak resident set in KiB
    /// (see [`super::registry::peak_rss`]).
    pub fn peak_rss(&self) -> (Run, u64) {
        let mut cmd = Command::new(self.cmd.get_program());
        cmd.args(self.cmd.get_args());
        if let Some(dir) = self.cmd.get_current_dir() {
            cmd.current_dir(dir);
        }
        for (k, v) in self.cmd.get_envs() {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        super::registry::peak_rss(cmd)
    }
}

/// A run started by [`TestCommand::spawn`].
pub struct Running {
    /// The process (to signal or wait for it).
    pub child: Child,
    _docker: Rc<TempDir>,
}

impl Running {
    /// Waits for the run to end.
    pub fn wait(self) -> Run {
        Run::of(
            &self
                .child
                .wait_with_output()
                .expect("waiting for settings-image"),
        )
    }
}
