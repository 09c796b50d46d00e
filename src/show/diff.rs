//! A diff in words: plain text for the terminal, Markdown for a job
//! summary. Every path, target and line from an image goes through
//! [`text::shown`] or [`text::clean_lines`]: a name cannot move the cursor
//! or end a code block.

use crate::diff::review::Review;
use crate::diff::text::{self, shown, size};
use crate::diff::{Content, Diff, Facts, FileChange, KeyChange, Side, Status};

/// `0755` (any execute bit) as a word.
fn executable(f: &Facts) -> bool {
    u32::from_str_radix(&f.mode, 8).is_ok_and(|m| m & 0o111 != 0)
}

/// An entry in a few words: `file, 12 bytes`, `symlink to app.yaml`.
fn facts(f: &Facts) -> String {
    match (f.kind, &f.target) {
        ("symlink" | "hard link", Some(t)) => format!("{} to {}", f.kind, shown(t)),
        ("file", _) => format!(
            "file, {}{}",
            size(f.size.unwrap_or(0)),
            if executable(f) { ", executable" } else { "" }
        ),
        (kind, _) => kind.to_string(),
    }
}

/// A digest cut to its first 12 hex digits, for a line of text.
fn short(d: &str) -> &str {
    d.get(..19).unwrap_or(d)
}

/// A value as a key change shows it: JSON, or `(absent)`.
fn value(v: Option<&serde_json::Value>) -> String {
    v.map_or_else(|| "(absent)".to_string(), |v| shown(&v.to_string()))
}

/// A key change's path: `[document 2] spec.replicas`, `(the document)`.
fn key(c: &KeyChange) -> String {
    let path = if c.path.is_empty() {
        "(the document)".to_string()
    } else {
        shown(&c.path)
    };
    match c.document {
        Some(d) => format!("[document {d}] {path}"),
        None => path,
    }
}

/// The words after a change's path on its first line.
fn headline(c: &FileChange) -> String {
    let (old, new) = (c.old.as_ref(), c.new.as_ref());
    let mut parts = Vec::new();
    match c.status {
        Status::Added => return format!(" ({})", new.map(facts).unwrap_or_default()),
        Status::Removed => return format!(" ({})", old.map(facts).unwrap_or_default()),
        Status::Renamed => {
            let from = c.from.as_deref().map(shown).unwrap_or_default();
            return format!(" (from {from}, same content)");
        }
        Status::TypeChanged => {
            return format!(
                ": {} -> {}",
                old.map(facts).unwrap_or_default(),
                new.map(facts).unwrap_or_default()
            );
        }
        Status::Modified => {}
    }
    if let (Some(o), Some(n)) = (old, new) {
        if o.target != n.target {
            parts.push(format!(
                "{} target {} -> {}",
                o.kind,
                shown(o.target.as_deref().unwrap_or("")),
                shown(n.target.as_deref().unwrap_or(""))
            ));
        }
        if o.mode != n.mode && o.kind != "symlink" {
            parts.push(format!("mode {} -> {}", o.mode, n.mode));
        }
        let sizes = format!(
            "{} -> {}",
            size(o.size.unwrap_or(0)),
            size(n.size.unwrap_or(0))
        );
        match &c.content {
            Some(Content::Keys {
                format,
                changes,
                not_shown,
            }) => parts.push(format!(
                "{}, {} changed {}",
                format.as_str(),
                changes.len() + not_shown,
                if changes.len() + not_shown == 1 {
                    "key"
                } else {
                    "keys"
                }
            )),
            Some(Content::Binary) => parts.push(format!(
                "binary, {sizes}, {} -> {}",
                short(o.digest.as_deref().unwrap_or("")),
                short(n.digest.as_deref().unwrap_or(""))
            )),
            Some(Content::TooLarge { limit }) => parts.push(format!(
                "file too large to diff: {} (the diff compares files up to {})",
                size(o.size.unwrap_or(0).max(n.size.unwrap_or(0))),
                size(*limit)
            )),
            Some(Content::NotShown { reason }) => {
                parts.push(format!("{sizes}, content not compared: {reason}"))
            }
            Some(Content::Text { .. }) => parts.push(format!("text, {sizes}")),
            None => {}
        }
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(": {}", parts.join(", "))
    }
}

/// The lines under a change's first line (without indent).
fn body(c: &FileChange) -> Vec<String> {
    match &c.content {
        Some(Content::Keys {
            changes, not_shown, ..
        }) => {
            let mut out: Vec<String> = changes
                .iter()
                .map(|k| {
                    format!(
                        "{}: {} -> {}",
                        key(k),
                        value(k.old.as_ref()),
                        value(k.new.as_ref())
                    )
                })
                .collect();
            if *not_shown > 0 {
                out.push(format!("... {not_shown} more changed keys not shown"));
            }
            out
        }
        Some(Content::Text {
            diff,
            not_shown,
            note,
        }) => {
            let mut out: Vec<String> = note.iter().map(|n| format!("({})", shown(n))).collect();
            out.extend(text::clean_lines(diff).lines().map(str::to_string));
            if *not_shown > 0 {
                out.push(format!("... {not_shown} more diff lines not shown"));
            }
            out
        }
        _ => Vec::new(),
    }
}

/// `NAME (sha256:..., commit ..., N files)`.
fn side(s: &Side) -> String {
    let mut facts = Vec::new();
    if let Some(d) = &s.digest {
        facts.push(d.clone());
    }
    if let Some(r) = &s.revision {
        facts.push(format!("commit {}", shown(r)));
    }
    facts.push(super::files(s.files));
    format!("{} ({})", shown(&s.name), facts.join(", "))
}

/// The counts line: `6 changes: 1 added, ...; 3 unchanged`.
fn counts_line(d: &Diff) -> String {
    let c = &d.counts;
    if c.changed() == 0 {
        return format!("no changes ({} unchanged)", c.unchanged);
    }
    let parts: Vec<String> = [
        (c.added, "added"),
        (c.removed, "removed"),
        (c.modified, "modified"),
        (c.renamed, "renamed"),
        (c.type_changed, "type changed"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, w)| format!("{n} {w}"))
    .collect();
    format!(
        "{} {}: {}; {} unchanged",
        c.changed(),
        if c.changed() == 1 {
            "change"
        } else {
            "changes"
        },
        parts.join(", "),
        c.unchanged
    )
}

/// The text `diff` prints: both sides, the counts, then each change (its
/// details indented), and what was left out.
pub(crate) fn human(d: &Diff) -> String {
    let mut s = format!(
        "old: {}\nnew: {}\n{}\n",
        side(&d.old),
        side(&d.new),
        counts_line(d)
    );
    if !d.changes.is_empty() {
        s.push('\n');
    }
    for c in &d.changes {
        s.push_str(&format!(
            "{:<9} {}{}\n",
            c.status.as_str(),
            shown(&c.path),
            headline(c)
        ));
        for line in body(c) {
            s.push_str(&format!("    {line}\n"));
        }
    }
    if d.changes_not_shown > 0 {
        s.push_str(&format!(
            "... {} more changed files not shown\n",
            d.changes_not_shown
        ));
    }
    for r in &d.refused {
        s.push_str(&format!(
            "set aside ({} image): {}: {}\n",
            r.side,
            shown(&r.path),
            r.why
        ));
    }
    s
}

/// The diff as Markdown for a job summary: the counts, a table of the
/// changes, and each change's details in a collapsed block.
pub(crate) fn markdown(d: &Diff) -> String {
    let mut s = format!(
        "from {} to {}: {}\n",
        code(&d.old.name),
        code(&d.new.name),
        counts_line(d)
    );
    if !d.changes.is_empty() {
        s.push_str("\n| change | path | |\n|---|---|---|\n");
    }
    for c in &d.changes {
        s.push_str(&format!(
            "| {} | {} | {} |\n",
            c.status.as_str(),
            code(&c.path),
            html(headline(c).trim_start_matches([':', ' ']))
        ));
    }
    if d.changes_not_shown > 0 {
        s.push_str(&format!(
            "\n{} more changed files not shown\n",
            d.changes_not_shown
        ));
    }
    for c in d.changes.iter().filter(|c| c.content.is_some()) {
        let lines = body(c);
        if lines.is_empty() {
            continue;
        }
        let block = lines.join("\n");
        let fence = fence(&block);
        let lang = match &c.content {
            Some(Content::Text { .. }) => "diff",
            _ => "",
        };
        s.push_str(&format!(
            "\n<details><summary>{}</summary>\n\n{fence}{lang}\n{block}\n{fence}\n</details>\n",
            code(&c.path)
        ));
    }
    for r in &d.refused {
        s.push_str(&format!(
            "\n> [!WARNING]\n> set aside ({} image): {}: {}\n",
            r.side,
            code(&r.path),
            html(&r.why)
        ));
    }
    s
}

/// A code fence longer than any run of backticks in `block`.
fn fence(block: &str) -> String {
    let longest = block.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    "`".repeat(longest.max(2) + 1)
}

/// `s` for HTML text in a Markdown table cell: `&`, `<`, `>` and `|`
/// escaped, control characters shown.
fn html(s: &str) -> String {
    shown(s)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('|', "&#124;")
}

/// `s` as `<code>` (a backtick in it cannot end a code span).
fn code(s: &str) -> String {
    format!("<code>{}</code>", html(s))
}

/// A reviewer's diff in words: the diff's text, the note, or why there is
/// no diff.
pub(crate) fn review(r: &Review) -> String {
    match r {
        Review::Diff(d) => human(d),
        Review::Nothing { note } => format!("{note}\n"),
        Review::Failed { error } => format!("no diff: {error}\n"),
    }
}

/// A reviewer's diff as Markdown for a job summary.
pub(crate) fn review_markdown(r: &Review) -> String {
    match r {
        Review::Diff(d) => markdown(d),
        Review::Nothing { note } => format!("{note}\n"),
        Review::Failed { error } => format!(
            "> [!NOTE]\n> no diff: {}\n",
            shown(error).replace('\n', " ")
        ),
    }
}
