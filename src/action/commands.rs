//! GitHub Actions workflow commands and file commands: the only place that
//! knows the runner's escaping rules and the `$GITHUB_OUTPUT` heredoc form.

use std::collections::hash_map::RandomState;
use std::fs::OpenOptions;
use std::hash::{BuildHasher, Hasher};
use std::io::Write;
use std::path::Path;

use super::fields::Inputs;
use super::inputs::{Env, input_key};
use crate::error::{Error, Result};

/// The step summary limit the runner enforces (1 MiB).
pub const SUMMARY_LIMIT: usize = 1024 * 1024;

/// Escapes a command's message: `%`, CR and LF.
pub fn escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Makes free text safe to print on stdout, where the runner reads every
/// line as a possible workflow command: each line is escaped with
/// [`escape_data`] (so no value can break a line, `%` shows as `%25`), and
/// a line that would still read as a command (`::` or `##[` after leading
/// whitespace) has its first character escaped too. Every value printed
/// outside a command goes through this function.
pub fn escape_text(text: &str) -> String {
    text.split('\n')
        .map(|line| {
            let line = escape_data(line);
            let body = line.trim_start();
            let indent = &line[..line.len() - body.len()];
            if let Some(rest) = body.strip_prefix("::") {
                format!("{indent}%3A:{rest}")
            } else if let Some(rest) = body.strip_prefix("##[") {
                format!("{indent}%23#[{rest}")
            } else {
                line
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `::group::title`: the lines up to [`endgroup`] fold under it.
pub fn group(title: &str) -> String {
    format!("::group::{}", escape_data(title))
}

/// `::endgroup::`
pub fn endgroup() -> String {
    "::endgroup::".to_string()
}

/// Escapes a command property: as [`escape_data`] plus `:` and `,`.
pub fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// `::error title=...::message`
pub fn error(title: &str, message: &str) -> String {
    format!(
        "::error title={}::{}",
        escape_property(title),
        escape_data(message)
    )
}

/// `::warning title=...::message`
pub fn warning(title: &str, message: &str) -> String {
    format!(
        "::warning title={}::{}",
        escape_property(title),
        escape_data(message)
    )
}

/// `::notice title=...::message`
pub fn notice(title: &str, message: &str) -> String {
    format!(
        "::notice title={}::{}",
        escape_property(title),
        escape_data(message)
    )
}

/// `::debug::message`: shown only when the run has debug logging on.
pub fn debug(message: &str) -> String {
    format!("::debug::{}", escape_data(message))
}

/// `::add-mask::value`: the runner replaces the value with `***` in logs.
pub fn add_mask(secret: &str) -> String {
    format!("::add-mask::{}", escape_data(secret))
}

fn random_hex() -> String {
    let mut h = RandomState::new().build_hasher();
    h.write_u64(std::process::id() as u64);
    let a = h.finish();
    let mut h = RandomState::new().build_hasher();
    h.write_u64(a);
    format!("{a:016x}{:016x}", h.finish())
}

/// Formats one output in the runner's heredoc form with a random delimiter
/// that does not occur in the value.
pub fn output_entry(name: &str, value: &str) -> String {
    loop {
        let delim = format!("ghadelimiter_{}", random_hex());
        if !value.contains(&delim) && !name.contains(&delim) {
            return format!("{name}<<{delim}\n{value}\n{delim}\n");
        }
    }
}

/// Appends `text` to a file command file (`$GITHUB_OUTPUT`, `$GITHUB_STEP_SUMMARY`).
pub fn append(path: &Path, text: &str) -> Result<()> {
    let mut f = OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
    f.write_all(text.as_bytes())
        .map_err(|e| Error::io(format!("writing {}", path.display()), e))
}

/// Prints one line to stdout at once (workflow commands are read line by line).
pub fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// The `::add-mask::` lines for the secret inputs `names`: each value
/// whole, and each of its lines when it has several (the runner masks
/// line by line), and with the `username` input, the Basic credentials
/// `base64(username:value)` in the forms a registry may echo them
/// (standard, unpadded, URL-safe). Printed before anything else.
pub fn mask_lines(env: &Env, names: &[&str]) -> Vec<String> {
    use base64::Engine as _;
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    let username = env
        .get(&input_key("username"))
        .map(|u| u.trim().to_string())
        .filter(|u| !u.is_empty());
    let mut lines = Vec::new();
    for name in names {
        let Some(raw) = env.get(&input_key(name)) else {
            continue;
        };
        let mut values = vec![raw.trim().to_string()];
        values.extend(raw.lines().map(|l| l.trim().to_string()));
        if let Some(user) = username.as_deref().filter(|_| !raw.trim().is_empty()) {
            let basic = format!("{user}:{}", raw.trim());
            for engine in [STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD] {
                values.push(engine.encode(&basic));
            }
        }
        for v in values {
            let line = add_mask(&v);
            if !v.is_empty() && !lines.contains(&line) {
                lines.push(line);
            }
        }
    }
    // Credentials written into a repository input (`user:password@host/...`)
    // are refused unread, and masked for the steps that follow.
    for name in ["repository", "target-repository"] {
        let Some(raw) = env.get(&input_key(name)) else {
            continue;
        };
        let raw = raw.trim();
        let authority = raw
            .split_once("://")
            .map_or(raw, |(_, rest)| rest)
            .split('/')
            .next()
            .unwrap_or("");
        if let Some((userinfo, _)) = authority.rsplit_once('@') {
            // The password; without one, the user part may be a token.
            let secret = userinfo.split_once(':').map_or(userinfo, |(_, p)| p);
            let line = add_mask(secret);
            if !secret.is_empty() && !lines.contains(&line) {
                lines.push(line);
            }
        }
    }
    lines
}

/// What kind of failure an error is, for an annotation's title.
fn error_kind(err: &Error) -> &'static str {
    match err {
        Error::Input { .. } => "invalid input",
        Error::Source { .. } => "the settings folder cannot be packaged",
        Error::Io { .. } => "I/O error",
        Error::Json { .. } => "JSON error",
        Error::Layout { .. } => "OCI layout error",
        Error::History { .. } => "git history",
        Error::GitHub { .. } => "GitHub API",
        Error::Git { .. } => "git server",
        Error::TagExists { .. } => "a timestamp tag already names other content",
        Error::ChannelMismatch { .. } => "a channel tag holds other content than its candidate",
        Error::TagRaced { .. } => "a racing run's content won the timestamp tag",
        Error::Registry { .. } => "registry error",
        Error::Auth { .. } => "registry authentication failed",
        Error::PrefixShared { .. } => "another ref publishes under this tag prefix",
        Error::Rewind { .. } => "the branch tag would move backwards",
        Error::Mismatch { .. } => "the image is not what its commit holds",
        Error::LeaseLost { .. } => "lost the leader election Lease",
        Error::OutputClosed => "standard output closed",
        Error::AfterPublish { .. } => "published, then failed",
    }
}

/// The `::error` line for `err` under `who`, message and hint in the
/// action's words: each field the error names is the input of `inputs`
/// that sets it.
pub fn error_line(who: &str, err: &Error, inputs: Inputs) -> String {
    let text = match err.hint_in(&inputs) {
        Some(hint) => format!("{}\nhint: {hint}", err.render(&inputs)),
        None => err.render(&inputs),
    };
    error(&format!("{who}: {}", error_kind(err)), &text)
}

/// Cuts a summary to the runner's limit on a character boundary, with a note.
pub fn cap_summary(mut s: String) -> String {
    const NOTE: &str = "\n\n_(summary cut at the runner's 1 MiB limit)_\n";
    if s.len() <= SUMMARY_LIMIT {
        return s;
    }
    let mut cut = SUMMARY_LIMIT - NOTE.len();
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    s.truncate(cut);
    s.push_str(NOTE);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_follows_the_runner() {
        assert_eq!(escape_data("50% a\r\nb"), "50%25 a%0D%0Ab");
        assert_eq!(escape_property("a:b,c%"), "a%3Ab%2Cc%25");
        assert_eq!(
            error("push: failed, 401", "line1\nline2"),
            "::error title=push%3A failed%2C 401::line1%0Aline2"
        );
    }

    #[test]
    fn free_text_cannot_start_a_command() {
        assert_eq!(escape_text("pushed a/b:1"), "pushed a/b:1");
        assert_eq!(
            escape_text("x\n::stop-commands::t\r::add-mask::y"),
            "x\n%3A:stop-commands::t%0D::add-mask::y"
        );
        assert_eq!(
            escape_text("  ##[set-env name=A]1"),
            "  %23#[set-env name=A]1"
        );
        assert_eq!(escape_text("50%"), "50%25");
        assert_eq!(
            group("package a\n::add-mask::x"),
            "::group::package a%0A::add-mask::x"
        );
    }

    #[test]
    fn heredoc_delimiter_is_random_and_absent_from_value() {
        let a = output_entry("digest", "sha256:abc");
        let b = output_entry("digest", "sha256:abc");
        assert_ne!(a, b);
        let (head, rest) = a.split_once('\n').unwrap();
        let delim = head.strip_prefix("digest<<").unwrap();
        assert_eq!(rest, format!("sha256:abc\n{delim}\n"));
        let multi = output_entry("tags", "a\nghadelimiter_x\nb");
        assert!(multi.starts_with("tags<<ghadelimiter_"));
        assert!(multi.contains("\na\nghadelimiter_x\nb\n"));
    }

    #[test]
    fn summary_is_capped_on_a_char_boundary() {
        let big = "é".repeat(SUMMARY_LIMIT);
        let capped = cap_summary(big);
        assert!(capped.len() <= SUMMARY_LIMIT);
        assert!(capped.ends_with("limit)_\n"));
        assert_eq!(cap_summary("small".into()), "small");
    }
}
