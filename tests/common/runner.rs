//! The one GitHub runner the tests have: [`Runner`] runs `settings-image
//! action [MODE]` as a GitHub-hosted runner runs a container action's
//! entrypoint. Only the runner's environment reaches it (`GITHUB_*`, `CI`,
//! `HOME`, `PATH`), the inputs of the action's metadata file as the runner
//! sets them ([`runner_inputs`]), empty file command files owned by the
//! runner's user (uid 1001, as actions/checkout leaves the workspace), the
//! workspace as working directory. A run's [`Step`] holds its exit code,
//! both streams, the outputs as the runner parses them ([`parse_outputs`])
//! and the job summary.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::cmd::{Run, TestCommand};
use super::{TempDir, repo, run_ok};

/// The runner's user (uid:gid) that owns the workspace and the file
/// command files.
const RUNNER_USER: &str = "1001:1001";

/// Gives `path` (recursively) to the runner's user, as actions/checkout
/// leaves a workspace.
pub fn chown_runner(path: &Path) {
    run_ok(Command::new("chown").arg("-R").arg(RUNNER_USER).arg(path));
}

/// A simulated runner; its fields are the facts a workflow run gives the
/// step. An empty `event_name`, `sha`, `github_ref` or `api_url` leaves
/// that variable unset.
pub struct Runner {
    tmp: TempDir,
    /// The workspace (`GITHUB_WORKSPACE`, the working directory).
    pub ws: PathBuf,
    /// The action's metadata file whose inputs the runner sets.
    pub action_yml: PathBuf,
    /// `settings-image action`'s arguments (`["promote"]`).
    pub mode: Vec<String>,
    /// `GITHUB_REPOSITORY`.
    pub repository: String,
    /// `GITHUB_ACTOR` (and `${{ github.actor }}` in input defaults).
    pub actor: String,
    /// The job token, `${{ github.token }}` in input defaults.
    pub github_token: String,
    /// `GITHUB_RUN_ID`.
    pub run_id: String,
    /// `GITHUB_API_URL`.
    pub api_url: String,
    /// `GITHUB_EVENT_NAME`.
    pub event_name: String,
    /// `GITHUB_EVENT_PATH` (with `event_name`).
    pub event_path: PathBuf,
    /// `GITHUB_SHA`.
    pub sha: String,
    /// `GITHUB_REF` (and `GITHUB_REF_NAME`).
    pub github_ref: String,
    /// More of the runner's or the workflow's environment (`RUNNER_DEBUG`,
    /// `SSL_CERT_FILE`, the ID-token request variables).
    pub extra_env: Vec<(String, String)>,
}

impl Runner {
    /// A runner for the publish action (`action.yml`) in workspace `ws`,
    /// keeping `tmp` (its file commands and home go there too): repository
    /// `acme/settings`, actor `octocat`, run 4242, an unused job token, no
    /// event.
    pub fn new(tmp: TempDir, ws: PathBuf) -> Runner {
        Runner {
            tmp,
            ws,
            action_yml: repo().join("action.yml"),
            mode: Vec::new(),
            repository: "acme/settings".into(),
            actor: "octocat".into(),
            github_token: "ghs_unused0000000000000000000000000000".into(),
            run_id: "4242".into(),
            api_url: String::new(),
            event_name: String::new(),
            event_path: PathBuf::new(),
            sha: String::new(),
            github_ref: String::new(),
            extra_env: Vec::new(),
        }
    }

    /// [`Runner::new`] for a push to `main` of the checkout `ws`: the real
    /// push payload, `GITHUB_SHA` its HEAD, and an API URL nothing answers
    /// (a checkout with the whole history never needs it).
    pub fn on_push(tmp: TempDir, ws: PathBuf) -> Runner {
        let mut git = super::git::git_cmd(&super::git::home_beside(&ws), &ws);
        git.args(["-c", "safe.directory=*"]);
        let sha = super::git::run(&mut git, &["rev-parse", "HEAD"], None);
        Runner {
            api_url: "http://127.0.0.1:9".into(),
            event_name: "push".into(),
            event_path: repo()
                .join("tests/fixtures/github/push/branch-push-1-commit.octokit-webhooks-js.json"),
            sha,
            github_ref: "refs/heads/main".into(),
            ..Runner::new(tmp, ws)
        }
    }

    /// Runs the promote action (`promote/action.yml`,
    /// `settings-image action promote`) instead.
    pub fn promote(mut self) -> Runner {
        self.action_yml = repo().join("promote/action.yml");
        self.mode = vec!["promote".into()];
        self
    }

    /// The runner's `GITHUB_*` environment (and `CI`) for a step, with the
    /// given file command paths, workspace and event path (as the step
    /// sees them: a container sees its mounts).
    pub fn github_env(
        &self,
        attempt: u32,
        output: &str,
        summary: &str,
        ws: &str,
        event: &str,
    ) -> Vec<(String, String)> {
        let ref_name = self.github_ref.rsplit('/').next().unwrap_or("");
        let attempt = attempt.to_string();
        [
            ("CI", "true"),
            ("GITHUB_ACTIONS", "true"),
            ("GITHUB_ACTOR", &self.actor),
            ("GITHUB_API_URL", &self.api_url),
            ("GITHUB_EVENT_NAME", &self.event_name),
            (
                "GITHUB_EVENT_PATH",
                if self.event_name.is_empty() {
                    ""
                } else {
                    event
                },
            ),
            ("GITHUB_OUTPUT", output),
            ("GITHUB_REF", &self.github_ref),
            ("GITHUB_REF_NAME", ref_name),
            ("GITHUB_REPOSITORY", &self.repository),
            ("GITHUB_RUN_ATTEMPT", &attempt),
            ("GITHUB_RUN_ID", &self.run_id),
            ("GITHUB_SERVER_URL", "https://github.com"),
            ("GITHUB_SHA", &self.sha),
            ("GITHUB_STEP_SUMMARY", summary),
            ("GITHUB_WORKSPACE", ws),
        ]
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    /// The `INPUT_*` variables for `with` ([`runner_inputs`] of this
    /// runner's action, actor and job token).
    pub fn inputs(&self, with: &[(&str, &str)]) -> Vec<(String, String)> {
        runner_inputs(&self.action_yml, with, &self.github_token, &self.actor)
    }

    /// Fresh, empty file command files owned by the runner's user.
    fn file_commands(&self, attempt: u32) -> (PathBuf, PathBuf) {
        let dir = self
            .tmp
            .join(&format!("file_commands-{attempt}-{}", fastrand::u32(..)));
        fs::create_dir_all(&dir).expect("creating the file commands dir");
        let output = dir.join("set_output_7d1b6c1e");
        let summary = dir.join("step_summary_7d1b6c1e");
        fs::write(&output, "").expect("creating GITHUB_OUTPUT");
        fs::write(&summary, "").expect("creating GITHUB_STEP_SUMMARY");
        chown_runner(&dir);
        (output, summary)
    }

    /// The step with inputs `with`, in the run's first attempt.
    pub fn run(&self, with: &[(&str, &str)]) -> Step {
        self.attempt(with, 1)
    }

    /// The step with inputs `with` in attempt `attempt` of the run (a
    /// re-run has the same run id and a higher attempt).
    pub fn attempt(&self, with: &[(&str, &str)], attempt: u32) -> Step {
        self.step(with, attempt, TestCommand::run)
    }

    /// The step with inputs `with`, run by `run` (which may bound it, as
    /// [`TestCommand::memory_limit`] does).
    pub fn run_by(&self, with: &[(&str, &str)], run: impl FnOnce(&mut TestCommand) -> Run) -> Step {
        self.step(with, 1, run)
    }

    fn step(
        &self,
        with: &[(&str, &str)],
        attempt: u32,
        run: impl FnOnce(&mut TestCommand) -> Run,
    ) -> Step {
        let (output, summary) = self.file_commands(attempt);
        let home = self.tmp.join("home");
        fs::create_dir_all(&home).expect("creating HOME");
        let mut cmd = TestCommand::new();
        cmd.arg("action")
            .args(&self.mode)
            .env_clear()
            .env("HOME", &home)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .envs(self.github_env(
                attempt,
                output.to_str().expect("utf-8"),
                summary.to_str().expect("utf-8"),
                self.ws.to_str().expect("utf-8"),
                self.event_path.to_str().expect("utf-8"),
            ))
            .envs(self.inputs(with))
            .envs(self.extra_env.iter().cloned())
            .current_dir(&self.ws);
        let run = run(&mut cmd);
        let output_file = fs::read_to_string(output).expect("reading GITHUB_OUTPUT");
        Step {
            code: run.code,
            stdout: run.stdout,
            stderr: run.stderr,
            outputs: parse_outputs(&output_file),
            output_file,
            summary: fs::read_to_string(summary).expect("reading GITHUB_STEP_SUMMARY"),
        }
    }
}

/// One step run and what it left behind.
pub struct Step {
    /// The exit code.
    pub code: i32,
    /// Standard output (the workflow commands).
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
    /// The `$GITHUB_OUTPUT` file as written.
    pub output_file: String,
    /// The outputs as the runner reads them.
    pub outputs: BTreeMap<String, String>,
    /// The `$GITHUB_STEP_SUMMARY` file as written.
    pub summary: String,
}

impl Step {
    /// The output `name`; panics when the step set none.
    pub fn out(&self, name: &str) -> &str {
        self.outputs.get(name).unwrap_or_else(|| {
            panic!(
                "no output {name} in {:?}\nstdout:\n{}\nstderr:\n{}",
                self.outputs, self.stdout, self.stderr
            )
        })
    }

    /// Asserts exit 0.
    pub fn ok(&self) -> &Step {
        self.exited(0)
    }

    /// Asserts the exit code `code`.
    pub fn exited(&self, code: i32) -> &Step {
        assert_eq!(
            self.code, code,
            "the action exited {} (wanted {code}):\nstdout:\n{}\nstderr:\n{}",
            self.code, self.stdout, self.stderr
        );
        self
    }

    /// The `::error` line.
    pub fn error(&self) -> String {
        self.stdout
            .lines()
            .find(|l| l.starts_with("::error "))
            .unwrap_or_else(|| panic!("no ::error line in:\n{}", self.stdout))
            .to_string()
    }

    /// The annotation of `level` (`warning`, `notice`, `error`) whose title
    /// is `title`, its message unescaped.
    pub fn annotation(&self, level: &str, title: &str) -> Option<String> {
        let head = format!("::{level} title={}::", title.replace(':', "%3A"));
        self.stdout.lines().find_map(|l| {
            l.strip_prefix(&head).map(|m| {
                m.replace("%0A", "\n")
                    .replace("%0D", "\r")
                    .replace("%25", "%")
            })
        })
    }

    /// `secret` is registered with `::add-mask::` before anything else is
    /// printed, and appears nowhere but in that registration: not in other
    /// stdout lines, stderr, the outputs or the summary.
    pub fn assert_masked(&self, secret: &str) {
        assert!(!secret.is_empty());
        let mask = format!("::add-mask::{secret}");
        let lines: Vec<&str> = self.stdout.lines().collect();
        let mask_at = lines
            .iter()
            .position(|l| *l == mask)
            .unwrap_or_else(|| panic!("{secret} is never masked:\n{}", self.stdout));
        assert!(
            lines[..mask_at]
                .iter()
                .all(|l| l.starts_with("::add-mask::")),
            "something was printed before the secret was masked:\n{}",
            self.stdout
        );
        self.assert_hidden(secret);
    }

    /// `secret` shows only in `::add-mask::` lines: not in other stdout
    /// lines, stderr, the outputs or the summary (a secret the step learns
    /// mid-run is masked when it learns it).
    pub fn assert_hidden(&self, secret: &str) {
        let mask = format!("::add-mask::{secret}");
        for l in self.stdout.lines().filter(|l| l.contains(secret)) {
            assert_eq!(l, mask, "{secret} leaks in stdout: {l}");
        }
        assert!(!self.stderr.contains(secret), "{secret} leaks in stderr");
        assert!(
            !self.output_file.contains(secret),
            "{secret} leaks in the outputs"
        );
        assert!(
            !self.summary.contains(secret),
            "{secret} leaks in the summary"
        );
    }

    /// Every `::add-mask::` line comes before any other line: the secrets
    /// are registered before anything else is printed.
    pub fn assert_masks_first(&self) {
        let lines: Vec<&str> = self.stdout.lines().collect();
        let first_other = lines
            .iter()
            .position(|l| !l.starts_with("::add-mask::"))
            .unwrap_or(lines.len());
        assert!(
            lines[first_other..]
                .iter()
                .all(|l| !l.starts_with("::add-mask::")),
            "a mask comes after other output:\n{}",
            self.stdout
        );
    }

    /// `secret` is nowhere at all, not even masked.
    pub fn assert_absent(&self, secret: &str) {
        for (what, text) in [
            ("stdout", &self.stdout),
            ("stderr", &self.stderr),
            ("outputs", &self.output_file),
            ("summary", &self.summary),
        ] {
            assert!(
                !text.contains(secret),
                "{secret} appears in {what}:\n{text}"
            );
        }
    }
}

/// Parses a file command file with the runner's rules: `name=value`, or
/// `name<<DELIMITER`, value lines, `DELIMITER`. Every name must appear once.
pub fn parse_outputs(text: &str) -> BTreeMap<String, String> {
    let lines: Vec<&str> = text.split('\n').collect();
    let mut out = BTreeMap::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        i += 1;
        if line.is_empty() {
            continue;
        }
        let eq = line.find('=');
        let heredoc = line.find("<<");
        let (name, value) = match (eq, heredoc) {
            (Some(e), h) if h.is_none_or(|h| e < h) => (&line[..e], line[e + 1..].to_string()),
            (_, Some(h)) => {
                let (name, delim) = (&line[..h], &line[h + 2..]);
                assert!(!delim.is_empty(), "empty heredoc delimiter: {line}");
                let start = i;
                while i < lines.len() && lines[i] != delim {
                    i += 1;
                }
                assert!(i < lines.len(), "heredoc {delim} is not closed:\n{text}");
                let value = lines[start..i].join("\n");
                i += 1;
                (name, value)
            }
            _ => panic!("the runner rejects the line {line:?} in:\n{text}"),
        };
        assert!(!name.is_empty(), "an output without a name in:\n{text}");
        assert!(
            out.insert(name.to_string(), value).is_none(),
            "output {name} written twice:\n{text}"
        );
    }
    out
}

/// The `INPUT_*` variables the runner sets for a step of the action whose
/// `action.yml` is `action_yml`: every input it declares, from `with` or
/// else its default (`github.token` and `github.actor` filled in with
/// `token` and `actor`), else empty. Names keep their hyphens
/// (`INPUT_TIMESTAMP-TAG`), as the runner writes them. An input in `with`
/// that the action does not declare fails the test.
pub fn runner_inputs(
    action_yml: &Path,
    with: &[(&str, &str)],
    token: &str,
    actor: &str,
) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(action_yml)
        .unwrap_or_else(|e| panic!("reading {}: {e}", action_yml.display()));
    let action: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).expect("action.yml is YAML");
    let declared = action["inputs"]
        .as_mapping()
        .expect("action.yml declares inputs");
    for (name, _) in with {
        assert!(
            declared.contains_key(*name),
            "the test sets input {name}, which {} does not declare",
            action_yml.display()
        );
    }
    declared
        .iter()
        .map(|(name, spec)| {
            let name = name.as_str().expect("input names are strings");
            let value = match with.iter().find(|(n, _)| *n == name) {
                Some((_, v)) => v.to_string(),
                None => match &spec["default"] {
                    serde_yaml_ng::Value::String(d) => d
                        .replace("${{ github.token }}", token)
                        .replace("${{ github.actor }}", actor),
                    serde_yaml_ng::Value::Null => String::new(),
                    other => panic!("default of {name} is not a string: {other:?}"),
                },
            };
            (
                format!("INPUT_{}", name.replace(' ', "_").to_uppercase()),
                value,
            )
        })
        .collect()
}
