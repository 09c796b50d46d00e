//! `settings-image action promote`: the promote action's inputs
//! (promote/action.yml) turned into a [`crate::promote::Promotion`], and the
//! outcome turned into step outputs, a job summary and annotations.
//!
//! A shut gate and an up-to-date channel are successes (a scheduled job
//! runs every half hour; most runs promote nothing): they are reported as
//! `::warning` (waiting) or `::notice` (up to date). Errors, a refused
//! break-glass without a reason included, are `::error` lines and the
//! error's exit code.

use jiff::{SignedDuration, Timestamp};

use super::commands::{self, say};
use super::fields::Inputs;
use super::inputs::{self, Env};
use crate::error::{Error, Result};
use crate::front;
use crate::promote::{self, PeriodReport, PromotionReport};
use crate::release::channel::DecisionKind;
use crate::release::policy::Policy;

/// The promote action's inputs (promote/action.yml), as the runner passes
/// them: one field per input (kebab-case), empty reads as absent.
#[derive(Debug, Default, serde::Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(rename_all = "kebab-case", default)]
pub struct With {
    /// The repository the candidates are in (required).
    pub repository: Option<String>,
    /// The prefix of the tags to promote from (required).
    pub from: Option<String>,
    /// The channel (required).
    pub to: Option<String>,
    /// The repository the channel lives in, when not `repository`.
    pub target_repository: Option<String>,
    /// The release policy file, relative to the workspace.
    pub policy: Option<String>,
    /// Break-glass.
    #[serde(deserialize_with = "inputs::flag")]
    pub force: Option<bool>,
    /// Why break-glass is used.
    pub reason: Option<String>,
    /// Decide and report, write nothing (a dry run).
    #[serde(deserialize_with = "inputs::flag")]
    pub explain: Option<bool>,
    /// Decide as if it were this time (RFC 3339); for a dry run.
    pub at: Option<String>,
    /// The login inputs (`login`, `github-token`, the deprecated `token`,
    /// `username`, `password`, the provider facts), shared with publish.
    #[serde(flatten)]
    pub login: super::login::LoginWith,
    /// Plain HTTP to a non-loopback registry.
    #[serde(deserialize_with = "inputs::flag")]
    pub insecure: Option<bool>,
}

/// The secret inputs, masked before anything is printed.
const SECRET_INPUTS: [&str; 3] = super::login::SECRET_INPUTS;
/// How far the job summary's window calendar reaches.
const SUMMARY_DAYS: i64 = 7;

/// The annotation title's subject.
const WHO: &str = "settings-image promote";

fn var(env: &Env, name: &str) -> Option<String> {
    env.get(name)
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// `given` lower-cased, as registries require, with a notice when that
/// changed it (`ghcr.io/${{ github.repository_owner }}/...` keeps capitals).
fn lowered(name: &str, given: String) -> String {
    let lower = given.to_ascii_lowercase();
    if lower != given {
        say(&commands::notice(
            "settings-image promote: repository lower-cased",
            &format!(
                "the input `{name}` is {given}; registries take lower-case names only, so {lower} is used"
            ),
        ));
    }
    lower
}

/// Reads the inputs into a promotion request (no I/O but the policy file).
pub fn read_request(env: &Env) -> Result<promote::Promotion> {
    let with: With = inputs::from_env(env)?;
    let repository = lowered(
        "repository",
        inputs::require(with.repository, "repository")?,
    );
    let target_repository = with
        .target_repository
        .map(|r| lowered("target-repository", r));
    let from = inputs::require(with.from, "from")?;
    let to = inputs::require(with.to, "to")?;
    let force = promote::break_glass(with.force.unwrap_or(false), with.reason.as_deref())?;
    let policy = match with.policy {
        Some(p) => {
            let workspace = inputs::workspace(env)?;
            let path = inputs::workspace_path(&workspace, "policy", &p)?;
            let text =
                crate::named_file::read(&path, crate::text!["the input ", crate::field::Field::Policy])
                    .map_err(|e| match e {
                        Error::Input { message, .. } => Error::Input {
                            message,
                            hint: Some(format!(
                                "give the release policy's path relative to the repository root ({}): a regular file, checked out before this step",
                                workspace.display()
                            ).into()),
                        },
                        other => other,
                    })?;
            Policy::from_yaml(&text).map_err(|e| match e {
                Error::Input { message, hint } => Error::Input {
                    message: crate::text![format!("the input `policy` ({p}): ")].then(message),
                    hint,
                },
                other => other,
            })?
        }
        None => Policy::default(),
    };
    let at = with.at.as_deref().map(promote::parse_at).transpose()?;
    let insecure = with.insecure.unwrap_or(false);
    let login = super::login::resolve(env, &with.login, &repository, insecure)?;
    for n in &login.notices {
        say(&commands::warning(
            "settings-image promote: deprecated input",
            n,
        ));
    }
    let actor = front::actor(env);
    let run_url = front::run_url(env);
    Ok(promote::Promotion {
        repository,
        from,
        to,
        target_repository,
        policy,
        at,
        force,
        explain: with.explain.unwrap_or(false),
        insecure,
        credentials: login.credentials,
        login: login.login,
        docker_config: front::docker_config(env),
        actor,
        run_url,
    })
}

/// The step outputs for `out`, in promote/action.yml's names.
pub fn outputs(out: &PromotionReport) -> Vec<(&'static str, String)> {
    vec![
        ("promoted", out.promoted.to_string()),
        ("tag", out.tag.clone().unwrap_or_default()),
        ("digest", out.digest.clone().unwrap_or_default()),
        ("reference", out.reference.clone().unwrap_or_default()),
        ("decision", out.decision.as_str().to_string()),
        ("next-open", out.next_open.clone().unwrap_or_default()),
    ]
}

/// The annotation for `out`, if any: a warning while waiting or for
/// break-glass, a notice when up to date or without a candidate.
pub fn annotation(out: &PromotionReport) -> Option<String> {
    match out.decision {
        DecisionKind::Wait if out.unmet => Some(commands::warning(
            "settings-image: promotion waits for evidence",
            &out.because,
        )),
        DecisionKind::Wait => Some(commands::warning(
            "settings-image: promotion waits for a release window",
            &format!(
                "{} is newer than the channel, but the gate is shut ({}); next open: {}",
                out.candidate.as_deref().unwrap_or("?"),
                out.because,
                out.next_open.as_deref().unwrap_or("not within 14 days")
            ),
        )),
        DecisionKind::Promote if out.forced => Some(commands::warning(
            "settings-image: BREAK-GLASS promotion",
            &format!(
                "{} promoted outside the release windows: {}",
                out.tag.as_deref().unwrap_or("?"),
                out.because
            ),
        )),
        DecisionKind::UpToDate => Some(commands::notice(
            "settings-image: channel up to date",
            &format!(
                "the channel holds {} (newest candidate {})",
                out.current.as_deref().unwrap_or("?"),
                out.candidate.as_deref().unwrap_or("?")
            ),
        )),
        DecisionKind::NoCandidate => Some(commands::warning(
            "settings-image: nothing to promote",
            "no tag of the `from` prefix exists in the repository",
        )),
        DecisionKind::Promote => None,
    }
}

fn short_time(rfc3339: &str) -> String {
    rfc3339
        .parse::<Timestamp>()
        .map(|t| t.strftime("%a %Y-%m-%d %H:%M UTC").to_string())
        .unwrap_or_else(|_| rfc3339.to_string())
}

/// The job summary: the decision, the candidate and the current channel
/// tag, and the gate's calendar over the next 7 days.
pub fn summary(out: &PromotionReport) -> String {
    let mut s = String::from("## settings-image promote\n\n");
    let headline = match out.decision {
        DecisionKind::Promote if out.forced => {
            "**BREAK-GLASS: promoted** outside the release windows"
        }
        DecisionKind::Promote if out.promoted => "**Promoted**",
        DecisionKind::Promote => "**Already promoted** (the channel tag was there)",
        DecisionKind::UpToDate => "**Up to date**: nothing newer to promote",
        DecisionKind::Wait if out.unmet => {
            "**Waiting**: no candidate newer than the channel meets the release policy's requirements"
        }
        DecisionKind::Wait => "**Waiting**: the release gate is shut",
        DecisionKind::NoCandidate => "**No candidate**",
    };
    s.push_str(headline);
    s.push_str("\n\n| | |\n|---|---|\n");
    let row = |k: &str, v: &str| format!("| {k} | `{}` |\n", v.replace('|', "\\|"));
    s.push_str(&row("decision", out.decision.as_str()));
    s.push_str(&row(
        "candidate",
        out.candidate.as_deref().unwrap_or("(none)"),
    ));
    s.push_str(&row(
        "channel now",
        out.current.as_deref().unwrap_or("(none)"),
    ));
    if let Some(t) = &out.tag {
        s.push_str(&row("channel tag", t));
    }
    if let Some(r) = &out.reference {
        s.push_str(&row("reference", r));
    }
    s.push_str(&row("because", &out.because));
    if let Some(n) = &out.next_open {
        s.push_str(&row("next open", n));
    }
    for e in &out.evidence {
        s.push_str(&row(
            "evidence",
            &format!("{} ({} {}, {})", e.record, e.cluster, e.workload, e.state),
        ));
    }
    if !out.candidates.is_empty() {
        s.push_str(
            "\n### Candidates newer than the channel\n\n| candidate | eligible | why |\n|---|---|---|\n",
        );
        for c in &out.candidates {
            let mut why = c.because.join("<br>");
            for i in &c.ignored {
                why.push_str(&format!("<br>ignored record {}: {}", i.record, i.why));
            }
            s.push_str(&format!(
                "| `{}` | {} | {} |\n",
                c.tag,
                if c.eligible { "yes" } else { "no" },
                table_cell(&why)
            ));
        }
    }
    if let Some(review) = &out.diff {
        s.push_str(&format!(
            "\n### What changes\n\n{}",
            crate::show::diff::review_markdown(review)
        ));
    }
    s.push_str(&format!(
        "\n### Release windows, next {SUMMARY_DAYS} days\n\n| from | until | gate |\n|---|---|---|\n"
    ));
    for p in calendar_days(&out.calendar, &out.at, SUMMARY_DAYS) {
        s.push_str(&format!(
            "| {} | {} | {} |\n",
            short_time(&p.start),
            short_time(&p.end),
            if p.open { "open" } else { "shut" }
        ));
    }
    commands::cap_summary(s)
}

/// `text` inside a Markdown table cell: no pipe, angle bracket or line
/// break of a record's text (a hand-pushed record's words) shapes the page;
/// `<br>` is the only markup kept.
fn table_cell(text: &str) -> String {
    text.split("<br>")
        .map(|part| {
            part.replace('&', "&amp;")
                .replace('<', "&lt;")
                .replace('>', "&gt;")
                .replace('|', "\\|")
                .replace(['\n', '\r'], " ")
                .replace('`', "'")
        })
        .collect::<Vec<_>>()
        .join("<br>")
}

/// The periods of `calendar` within `days` of `at`, the last one cut there.
fn calendar_days(calendar: &[PeriodReport], at: &str, days: i64) -> Vec<PeriodReport> {
    let Ok(start) = at.parse::<Timestamp>() else {
        return calendar.to_vec();
    };
    let Ok(end) = start.checked_add(SignedDuration::from_hours(24 * days)) else {
        return calendar.to_vec();
    };
    let end_s = end.to_string();
    calendar
        .iter()
        .filter(|p| p.start.parse::<Timestamp>().is_ok_and(|t| t < end))
        .map(|p| {
            let mut p = p.clone();
            if p.end.parse::<Timestamp>().is_ok_and(|t| t > end) {
                p.end = end_s.clone();
            }
            p
        })
        .collect()
}

fn promote(env: &Env) -> Result<PromotionReport> {
    let mut req = read_request(env)?;
    super::login::exchange_first(&mut req.credentials, req.login.as_ref())?;
    if let Some(reason) = &req.force {
        say(&commands::escape_text(&format!(
            "BREAK-GLASS requested by {}: {reason}",
            req.actor
        )));
    }
    let mut out = promote::run(&req)?;
    out.diff = promote::review(&req, &out, &crate::diff::Limits::SUMMARY);
    if let Some(path) = var(env, "GITHUB_OUTPUT") {
        let text: String = outputs(&out)
            .iter()
            .map(|(k, v)| commands::output_entry(k, v))
            .collect();
        commands::append(std::path::Path::new(&path), &text)?;
    }
    if let Some(path) = var(env, "GITHUB_STEP_SUMMARY") {
        commands::append(std::path::Path::new(&path), &summary(&out))?;
    }
    Ok(out)
}

/// Runs the promote mode with the runner's environment; returns the exit
/// code. Errors are reported as `::error` workflow commands.
pub fn run(env: &Env) -> i32 {
    for line in commands::mask_lines(env, &SECRET_INPUTS) {
        say(&line);
    }
    super::debug::init(env.get("RUNNER_DEBUG").map(String::as_str));
    match promote(env) {
        Ok(out) => {
            say(&commands::escape_text(
                crate::show::promote::promotion(&out).trim_end(),
            ));
            if let Some(review) = &out.diff {
                say(&commands::escape_text(&format!(
                    "what changes:\n{}",
                    crate::show::diff::review(review).trim_end()
                )));
            }
            if let Some(a) = annotation(&out) {
                say(&a);
            }
            0
        }
        Err(err) => {
            say(&commands::error_line(WHO, &err, Inputs::Promote));
            err.exit_code()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::inputs::env_of as env;

    #[test]
    fn the_struct_reads_exactly_the_inputs_promote_action_yml_declares() {
        let (declared, read) = inputs::declared_and_read::<With>("promote/action.yml");
        assert_eq!(read, declared);
    }

    #[test]
    fn a_bad_policy_path_names_policy_and_registry_inputs_are_read() {
        let ws = tempfile::tempdir().unwrap();
        let base = [
            ("GITHUB_WORKSPACE", ws.path().to_str().unwrap()),
            ("INPUT_REPOSITORY", "ghcr.io/Acme/Settings"),
            ("INPUT_FROM", "main"),
            ("INPUT_TO", "prod"),
        ];
        for (policy, want) in [
            ("../x.yaml", "leaves the workspace"),
            ("missing.yaml", "cannot be read"),
        ] {
            let mut e = env(&base);
            e.insert("INPUT_POLICY".into(), policy.into());
            let err = read_request(&e).unwrap_err();
            let line = commands::error_line(WHO, &err, Inputs::Promote);
            assert!(
                line.contains("the input `policy`") && line.contains(want),
                "{line}"
            );
            assert!(!line.contains("`path`"), "{line}");
        }
        let mut e = env(&base);
        for (k, v) in [
            ("INPUT_USERNAME", "robot"),
            ("INPUT_TOKEN", "tok"),
            ("INPUT_PASSWORD", "pw"),
            ("INPUT_INSECURE", "true"),
            ("INPUT_TARGET-REPOSITORY", "ghcr.io/Acme/Prod"),
            ("INPUT_EXPLAIN", "True"),
            ("INPUT_AT", "2026-12-21T10:00:00Z"),
        ] {
            e.insert(k.into(), v.into());
        }
        let r = read_request(&e).unwrap();
        assert_eq!(r.repository, "ghcr.io/acme/settings");
        assert_eq!(r.target_repository.as_deref(), Some("ghcr.io/acme/prod"));
        assert_eq!(r.credentials.unwrap().password, "pw");
        assert!(r.insecure && r.explain);
        assert_eq!(r.at.unwrap().to_string(), "2026-12-21T10:00:00Z");
        e.insert("INPUT_AT".into(), "tomorrow".into());
        let line = commands::error_line(WHO, &read_request(&e).unwrap_err(), Inputs::Promote);
        assert!(line.contains("`at` \"tomorrow\" is not a time"), "{line}");
        assert!(!line.contains("--"), "{line}");
        // Each secret, and base64(robot:secret) as a registry may echo it.
        assert_eq!(
            commands::mask_lines(&e, &SECRET_INPUTS),
            [
                "::add-mask::tok",
                "::add-mask::cm9ib3Q6dG9r",
                "::add-mask::pw",
                "::add-mask::cm9ib3Q6cHc=",
                "::add-mask::cm9ib3Q6cHc"
            ]
        );
    }

    #[test]
    fn break_glass_without_reason_is_an_input_error_in_action_words() {
        let e = env(&[
            ("INPUT_REPOSITORY", "localhost:5000/s"),
            ("INPUT_FROM", "main"),
            ("INPUT_TO", "prod"),
            ("INPUT_FORCE", "true"),
        ]);
        let err = read_request(&e).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        let line = commands::error_line(WHO, &err, Inputs::Promote);
        assert!(line.starts_with("::error title="), "{line}");
        assert!(line.contains("`reason"), "{line}");
    }

    #[test]
    fn inputs_and_actor() {
        let e = env(&[
            ("INPUT_REPOSITORY", "ghcr.io/o/s"),
            ("INPUT_FROM", "main"),
            ("INPUT_TO", "prod"),
            ("INPUT_FORCE", "false"),
            ("INPUT_USERNAME", "octocat"),
            ("INPUT_TOKEN", "ghs_x"),
            ("GITHUB_ACTOR", "a"),
            ("GITHUB_TRIGGERING_ACTOR", "b"),
            ("GITHUB_SERVER_URL", "https://github.com"),
            ("GITHUB_REPOSITORY", "o/r"),
            ("GITHUB_RUN_ID", "7"),
        ]);
        let r = read_request(&e).unwrap();
        assert_eq!(r.actor, "b");
        assert_eq!(r.force, None);
        assert_eq!(
            r.run_url.as_deref(),
            Some("https://github.com/o/r/actions/runs/7")
        );
        assert_eq!(r.credentials.unwrap().username, "octocat");
        // The job token never goes to another registry.
        let mut other = e.clone();
        other.insert("INPUT_REPOSITORY".into(), "localhost:5000/s".into());
        assert!(read_request(&other).unwrap().credentials.is_none());
        // The token, and base64(octocat:ghs_x) as a registry may echo it.
        assert_eq!(
            commands::mask_lines(&e, &SECRET_INPUTS),
            [
                "::add-mask::ghs_x",
                "::add-mask::b2N0b2NhdDpnaHNfeA==",
                "::add-mask::b2N0b2NhdDpnaHNfeA"
            ]
        );
    }

    #[test]
    fn calendar_is_cut_at_seven_days() {
        let cal = vec![
            PeriodReport {
                start: "2026-01-01T00:00:00Z".into(),
                end: "2026-01-05T00:00:00Z".into(),
                open: true,
            },
            PeriodReport {
                start: "2026-01-05T00:00:00Z".into(),
                end: "2026-01-15T00:00:00Z".into(),
                open: false,
            },
        ];
        let c = calendar_days(&cal, "2026-01-01T00:00:00Z", 7);
        assert_eq!(c.len(), 2);
        assert_eq!(c[1].end, "2026-01-08T00:00:00Z");
    }

    /// The job summary lists each candidate newer than the channel and
    /// why; words from a record pushed by hand cannot shape the page.
    #[test]
    fn the_summary_lists_the_candidates_and_escapes_what_records_say() {
        use crate::promote::{CandidateReport, GateReport, IgnoredRecord};
        use crate::release::channel::DecisionKind;
        let out = PromotionReport {
            decision: DecisionKind::Wait,
            promoted: false,
            explain: true,
            candidate: Some("main-2-bbbbbbb".into()),
            tied: vec![],
            current: Some("prod-1-aaaaaaa".into()),
            tag: None,
            digest: None,
            reference: None,
            because: "none of the 1 candidates newer than the channel meets the requirements"
                .into(),
            forced: false,
            at: "2026-06-01T00:00:00Z".into(),
            gate: GateReport {
                open: true,
                reason: "no windows: always open".into(),
                active: vec![],
            },
            next_open: None,
            next_close: None,
            calendar: vec![],
            uploaded_blobs: 0,
            mounted_blobs: 0,
            record: None,
            candidates: vec![CandidateReport {
                tag: "main-2-bbbbbbb".into(),
                digest: "sha256:b".into(),
                eligible: false,
                because: vec!["not met: rollout in staging, Ready for 2h (1h of 2h)".into()],
                evidence: vec![],
                ignored: vec![IgnoredRecord {
                    record: "sha256:f".into(),
                    why: "cluster \"<img src=x>|`\n## pwned\" is not a cluster name".into(),
                }],
            }],
            evidence: vec![],
            unmet: true,
            diff: None,
        };
        let s = summary(&out);
        assert!(
            s.contains("**Waiting**: no candidate newer than the channel meets the release policy's requirements"),
            "{s}"
        );
        assert!(
            s.contains(
                "| `main-2-bbbbbbb` | no | not met: rollout in staging, Ready for 2h (1h of 2h)<br>ignored \
                 record sha256:f: cluster \"&lt;img src=x&gt;\\|' ## pwned\" is not a cluster name |\n"
            ),
            "{s}"
        );
        let a = annotation(&out).unwrap();
        assert!(a.contains("promotion waits for evidence"), "{a}");
    }
}
