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
pub fn unified(path: &str, old: &str, new: &str, max: usize) -> (String, usize) {
    let diff = similar::TextDiff::from_lines(old, new);
    let text = diff
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string();
    let total = text.lines().count();
    if total <= max {
        return (text, 0);
    }
    let kept: String = text.lines().take(max).flat_map(|l| [l, "\n"]).collect();
    (kept, total - max)
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
