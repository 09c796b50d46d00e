//! Text contents: binary or text, a unified diff of text cut at a number
//! of lines, and sizes in words.

/// Whether `data` is binary: a NUL byte, or not UTF-8 (as git decides,
/// plus the UTF-8 check: the diff prints text).
pub fn is_binary(data: &[u8]) -> bool {
    data.contains(&0) || std::str::from_utf8(data).is_err()
}

/// The unified diff (3 lines of context, `a/PATH` and `b/PATH` headers) of
/// `old` and `new`, at most `max` lines of it, and how many lines were cut.
/// similar's Myers bounds its own work on inputs that differ everywhere,
/// so the same inputs always give the same diff.
///
/// Why not similar's `TextDiff`: it picks its algorithm at run time, so
/// all six are linked in (0.7 MB of the static binary); calling Myers and
/// grouping the hunks here, as `TextDiff::unified_diff` does, links one.
pub fn unified(path: &str, old: &str, new: &str, max: usize) -> (String, usize) {
    use similar::algorithms::{Capture, Compact, Replace, myers};
    let a: Vec<&str> = old.split_inclusive('\n').collect();
    let b: Vec<&str> = new.split_inclusive('\n').collect();
    let mut hook = Compact::new(Replace::new(Capture::new()), &a, &b);
    if let Err(never) = myers::diff(&mut hook, &a, 0..a.len(), &b, 0..b.len()) {
        match never {}
    }
    let ops = hook.into_inner().into_inner().into_ops();
    let mut lines = vec![format!("--- a/{path}"), format!("+++ b/{path}")];
    for group in similar::group_diff_ops(ops, 3) {
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            continue;
        };
        lines.push(format!(
            "@@ -{} +{} @@",
            hunk_range(first.old_range().start, last.old_range().end),
            hunk_range(first.new_range().start, last.new_range().end)
        ));
        for op in &group {
            for change in op.iter_changes(&a, &b) {
                let sign = match change.tag() {
                    similar::ChangeTag::Equal => ' ',
                    similar::ChangeTag::Delete => '-',
                    similar::ChangeTag::Insert => '+',
                };
                let value = change.value();
                lines.push(format!(
                    "{sign}{}",
                    value.strip_suffix('\n').unwrap_or(value)
                ));
                if !value.ends_with('\n') {
                    lines.push("\\ No newline at end of file".to_string());
                }
            }
        }
    }
    let cut = lines.len().saturating_sub(max);
    let kept: String = lines
        .iter()
        .take(max)
        .flat_map(|l| [l.as_str(), "\n"])
        .collect();
    (kept, cut)
}

/// A hunk header's range of lines `start..end` (0-based), as diff writes
/// it: `START,LEN` (1-based), `START` alone for one line, and for none the
/// line before it.
fn hunk_range(start: usize, end: usize) -> String {
    match end.saturating_sub(start) {
        1 => format!("{}", start + 1),
        0 => format!("{start},0"),
        len => format!("{},{len}", start + 1),
    }
}

/// `n` bytes in words: `512 bytes`, `1.5 KiB`, `40 MiB`, `2.1 GiB`.
pub fn size(n: u64) -> String {
    const UNITS: [&str; 3] = ["KiB", "MiB", "GiB"];
    if n < 1024 {
        return format!("{n} bytes");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    let s = format!("{v:.1}");
    let s = s.strip_suffix(".0").unwrap_or(&s);
    format!("{s} {}", UNITS[unit])
}

/// `s` safe to print on one line of a terminal: control characters (a
/// newline, an escape sequence) as Rust escapes.
pub fn shown(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            c if c.is_control() => out.extend(c.escape_default()),
            c => out.push(c),
        }
    }
    out
}

/// Each line of a text diff safe to print: control characters but the
/// tab as Rust escapes (an escape sequence in a file cannot reach the
/// terminal).
pub fn clean_lines(diff: &str) -> String {
    let mut out = String::with_capacity(diff.len());
    for line in diff.lines() {
        for c in line.chars() {
            match c {
                '\t' => out.push('\t'),
                c if c.is_control() => out.extend(c.escape_default()),
                c => out.push(c),
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_unified_diff_is_cut_and_says_how_much() {
        let old: String = (0..50).map(|i| format!("line {i}\n")).collect();
        let new = old.replace("line 10\n", "line ten\n");
        let (d, cut) = unified("a.txt", &old, &new, 100);
        assert_eq!(cut, 0);
        assert_eq!(
            d,
            "--- a/a.txt\n+++ b/a.txt\n@@ -8,7 +8,7 @@\n line 7\n line 8\n line 9\n-line 10\n+line ten\n line 11\n line 12\n line 13\n"
        );
        let (d, cut) = unified("a.txt", &old, &new, 4);
        assert_eq!(cut, 7);
        assert_eq!(d.lines().count(), 4);
    }

    #[test]
    fn hunks_are_written_as_diff_writes_them() {
        // As GNU diff -u prints these (checked with diff 3.8).
        let (d, _) = unified("x", "a\nb\n", "a\nb\nc", 100);
        assert_eq!(
            d,
            "--- a/x\n+++ b/x\n@@ -1,2 +1,3 @@\n a\n b\n+c\n\\ No newline at end of file\n"
        );
        let (d, _) = unified("x", "", "new\n", 100);
        assert_eq!(d, "--- a/x\n+++ b/x\n@@ -0,0 +1 @@\n+new\n");
        let old: String = (0..20).map(|i| format!("{i}\n")).collect();
        // seq 0 19 | sed 's/^2$/two/; /^17$/d'
        let new: String = (0..20)
            .filter(|&i| i != 17)
            .map(|i| {
                if i == 2 {
                    "two\n".to_string()
                } else {
                    format!("{i}\n")
                }
            })
            .collect();
        let (d, _) = unified("x", &old, &new, 100);
        assert_eq!(
            d,
            "--- a/x\n+++ b/x\n@@ -1,6 +1,6 @@\n 0\n 1\n-2\n+two\n 3\n 4\n 5\n@@ -15,6 +15,5 @@\n 14\n 15\n 16\n-17\n 18\n 19\n"
        );
    }

    #[test]
    fn sizes_and_shown_names() {
        assert_eq!(size(512), "512 bytes");
        assert_eq!(size(1536), "1.5 KiB");
        assert_eq!(size(40 * 1024 * 1024), "40 MiB");
        assert_eq!(shown("a\nb\u{1b}[31m`"), "a\\nb\\u{1b}[31m`");
        assert!(is_binary(b"a\0b"));
        assert!(is_binary(&[0xff, 0xfe]));
        assert!(!is_binary("ünïcode".as_bytes()));
    }
}
