//! The comparison: two layers' entries classified path by path, renames
//! paired, then the contents of the modified files read and shown within
//! the [`Limits`].

use std::collections::{BTreeMap, BTreeSet};

use super::keys::{self, Format};
use super::layer::{Entry, Kind, Tree};
use super::text;
use super::{Content, Counts, Diff, Facts, FileChange, Image, Limits, Refused, Side, Status};
use crate::error::Result;

/// How an entry shows.
fn facts(e: &Entry) -> Facts {
    let file = e.kind == Kind::File;
    Facts {
        kind: e.kind.as_str(),
        mode: format!("{:04o}", e.mode),
        size: file.then_some(e.size),
        digest: file.then(|| e.digest.clone()),
        target: e.link.clone(),
    }
}

/// Whether two entries of one path and one type differ.
fn differs(a: &Entry, b: &Entry) -> bool {
    match a.kind {
        Kind::Directory => a.mode != b.mode,
        Kind::Symlink => a.link != b.link,
        _ => a.digest != b.digest || a.link != b.link || a.mode != b.mode,
    }
}

/// What a rename is matched on: the same type and bytes (a link's target).
fn rename_key(e: &Entry) -> Option<(Kind, &str, Option<&str>)> {
    (e.kind != Kind::Directory).then_some((e.kind, e.digest.as_str(), e.link.as_deref()))
}

/// The changes between `a` and `b`, in path order, with their counts.
fn classify(a: &Tree, b: &Tree) -> (Vec<FileChange>, Counts) {
    let mut counts = Counts::default();
    let mut out = Vec::new();
    let mut removed: Vec<(&String, &Entry)> = Vec::new();
    let mut added: Vec<(&String, &Entry)> = Vec::new();
    let paths: BTreeSet<&String> = a.entries.keys().chain(b.entries.keys()).collect();
    for p in paths {
        match (a.entries.get(p), b.entries.get(p)) {
            (Some(x), None) => removed.push((p, x)),
            (None, Some(y)) => added.push((p, y)),
            (Some(x), Some(y)) if x.kind != y.kind => {
                out.push(change(p, Status::TypeChanged, Some(x), Some(y)))
            }
            (Some(x), Some(y)) if differs(x, y) => {
                out.push(change(p, Status::Modified, Some(x), Some(y)))
            }
            (Some(x), Some(_)) => counts.unchanged += usize::from(x.kind != Kind::Directory),
            (None, None) => {}
        }
    }
    // Renames: each removed entry paired with an added one of the same
    // type and bytes, both in path order.
    let mut by_key: BTreeMap<_, Vec<&String>> = BTreeMap::new();
    for (p, e) in &added {
        if let Some(k) = rename_key(e) {
            by_key.entry(k).or_default().push(*p);
        }
    }
    let mut renamed_to: BTreeSet<&String> = BTreeSet::new();
    let mut gone = Vec::new();
    for (p, e) in &removed {
        let target = rename_key(e)
            .and_then(|k| by_key.get_mut(&k))
            .filter(|v| !v.is_empty())
            .map(|v| v.remove(0));
        match target {
            Some(to) => {
                renamed_to.insert(to);
                let mut c = change(to, Status::Renamed, Some(e), b.entries.get(to));
                c.from = Some((*p).clone());
                out.push(c);
            }
            None => gone.push((*p, *e)),
        }
    }
    let added: Vec<(&String, &Entry)> = added
        .into_iter()
        .filter(|(p, _)| !renamed_to.contains(p))
        .collect();
    // A directory added or removed with what is in it is implied by it.
    let implied = |dir: &str, others: &[&String]| {
        let prefix = format!("{dir}/");
        others.iter().any(|o| o.starts_with(&prefix))
    };
    let added_paths: Vec<&String> = added.iter().map(|(p, _)| *p).chain(renamed_to).collect();
    for (p, e) in &added {
        if e.kind != Kind::Directory || !implied(p, &added_paths) {
            out.push(change(p, Status::Added, None, Some(e)));
        }
    }
    let renamed_from: Vec<String> = out.iter().filter_map(|c| c.from.clone()).collect();
    let from_paths: Vec<&String> = renamed_from
        .iter()
        .chain(gone.iter().map(|(p, _)| *p))
        .collect();
    for (p, e) in &gone {
        if e.kind != Kind::Directory || !implied(p, &from_paths) {
            out.push(change(p, Status::Removed, Some(e), None));
        }
    }
    out.sort_by(|x, y| x.path.cmp(&y.path));
    for c in &out {
        match c.status {
            Status::Added => counts.added += 1,
            Status::Removed => counts.removed += 1,
            Status::Modified => counts.modified += 1,
            Status::Renamed => counts.renamed += 1,
            Status::TypeChanged => counts.type_changed += 1,
        }
    }
    (out, counts)
}

fn change(path: &str, status: Status, old: Option<&Entry>, new: Option<&Entry>) -> FileChange {
    FileChange {
        path: path.to_string(),
        status,
        from: None,
        old: old.map(facts),
        new: new.map(facts),
        content: None,
    }
}

/// Whether `c` is a modified file whose bytes differ: its contents are
/// shown.
fn bytes_differ(c: &FileChange) -> bool {
    match (&c.old, &c.new) {
        (Some(o), Some(n)) => {
            c.status == Status::Modified && o.kind == "file" && o.digest != n.digest
        }
        _ => false,
    }
}

/// Compares `old` with `new` (see the module docs of [`super`]).
pub fn compare(old: &Image, new: &Image, limits: &Limits) -> Result<Diff> {
    let a = old.tree(limits)?;
    let b = new.tree(limits)?;
    let (mut changes, counts) = classify(&a, &b);
    // The contents to read: each modified file's, up to the per-file
    // limit, while the per-side budget lasts.
    let mut wanted = BTreeMap::new();
    let mut spent = 0u64;
    for c in changes.iter_mut().filter(|c| bytes_differ(c)) {
        let sizes = [&c.old, &c.new].map(|f| f.as_ref().and_then(|f| f.size).unwrap_or(0));
        if sizes.iter().any(|&s| s > limits.file) {
            c.content = Some(Content::TooLarge { limit: limits.file });
        } else if spent + sizes[0].max(sizes[1]) > limits.contents {
            c.content = Some(Content::NotShown {
                reason: format!(
                    "the diff reads at most {} of file contents per image",
                    text::size(limits.contents)
                ),
            });
        } else {
            spent += sizes[0].max(sizes[1]);
            wanted.insert(c.path.clone(), limits.file);
        }
    }
    let old_bytes = old.contents(limits, &wanted)?;
    let new_bytes = new.contents(limits, &wanted)?;
    let mut budget = limits.total_lines;
    for c in changes.iter_mut().filter(|c| wanted.contains_key(&c.path)) {
        let (Some(x), Some(y)) = (old_bytes.get(&c.path), new_bytes.get(&c.path)) else {
            c.content = Some(Content::NotShown {
                reason: "the content changed while it was read".into(),
            });
            continue;
        };
        c.content = Some(show(&c.path, x, y, limits, &mut budget));
    }
    let changes_not_shown = changes.len().saturating_sub(limits.files);
    changes.truncate(limits.files);
    let refused: Vec<Refused> = [("old", &a), ("new", &b)]
        .into_iter()
        .flat_map(|(side, t)| {
            t.refused.iter().map(move |r| Refused {
                side,
                path: r.path.clone(),
                why: r.why.clone(),
            })
        })
        .collect();
    let refused_differ = a.refused != b.refused;
    let files = |t: &Tree| t.entries.values().filter(|e| e.kind == Kind::File).count();
    Ok(Diff {
        old: Side {
            files: files(&a),
            ..old.side.clone()
        },
        new: Side {
            files: files(&b),
            ..new.side.clone()
        },
        different: counts.changed() > 0 || refused_differ,
        counts,
        changes,
        changes_not_shown,
        refused,
    })
}

/// What the contents `old` and `new` of `path` show, taking the lines it
/// shows from `budget`.
fn show(path: &str, old: &[u8], new: &[u8], limits: &Limits, budget: &mut usize) -> Content {
    if text::is_binary(old) || text::is_binary(new) {
        return Content::Binary;
    }
    if *budget == 0 {
        return Content::NotShown {
            reason: format!(
                "the diff shows at most {} lines of changes in all",
                limits.total_lines
            ),
        };
    }
    // Both are UTF-8: is_binary said so.
    let (old, new) = (
        String::from_utf8_lossy(old).into_owned(),
        String::from_utf8_lossy(new).into_owned(),
    );
    let mut note = None;
    if let Some(format) = Format::of(path) {
        match (keys::parse(format, &old), keys::parse(format, &new)) {
            (Ok(a), Ok(b)) => {
                let all = keys::changes(&a, &b);
                if all.is_empty() {
                    note = Some("the same keys and values: only comments or layout differ".into());
                } else {
                    let room = limits.keys.min(*budget);
                    let not_shown = all.len().saturating_sub(room);
                    let changes: Vec<_> = all
                        .into_iter()
                        .take(room)
                        .map(|c| c.cut(limits.value))
                        .collect();
                    *budget -= changes.len();
                    return Content::Keys {
                        format,
                        changes,
                        not_shown,
                    };
                }
            }
            (Err(e), _) => {
                note = Some(format!(
                    "not valid {} on the old side: {e}",
                    format.as_str()
                ))
            }
            (_, Err(e)) => {
                note = Some(format!(
                    "not valid {} on the new side: {e}",
                    format.as_str()
                ))
            }
        }
    }
    let (diff, not_shown) = text::unified(path, &old, &new, limits.lines.min(*budget));
    *budget -= diff.lines().count();
    Content::Text {
        diff,
        not_shown,
        note,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diff::layer::tests::layer;

    fn image(name: &str, entries: &[(&str, u8, &str)]) -> Image {
        Image::from_layer(
            Side {
                name: name.into(),
                ..Side::default()
            },
            layer(entries),
        )
    }

    fn keys(n: usize, v: usize) -> String {
        (0..n).map(|i| format!("k{i}: {v}\n")).collect()
    }

    #[test]
    fn the_line_and_file_budgets_say_what_they_left_out() {
        let (a1, a2) = (keys(5, 1), keys(5, 2));
        let old = image(
            "old",
            &[
                ("a.yaml", b'0', &a1),
                ("b.yaml", b'0', &a1),
                ("c.txt", b'0', "x\n"),
                ("d.txt", b'0', "y\n"),
            ],
        );
        let new = image(
            "new",
            &[
                ("a.yaml", b'0', &a2),
                ("b.yaml", b'0', &a2),
                ("c.txt", b'0', "x2\n"),
                ("d.txt", b'0', "y2\n"),
            ],
        );
        let limits = Limits {
            files: 2,
            keys: 10,
            total_lines: 3,
            ..Limits::DEFAULT
        };
        let d = compare(&old, &new, &limits).unwrap();
        assert_eq!(d.counts.modified, 4);
        assert_eq!(d.changes.len(), 2);
        assert_eq!(d.changes_not_shown, 2);
        match &d.changes[0].content {
            Some(Content::Keys {
                changes, not_shown, ..
            }) => assert_eq!((changes.len(), *not_shown), (3, 2)),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            d.changes[1].content,
            Some(Content::NotShown {
                reason: "the diff shows at most 3 lines of changes in all".into()
            })
        );
        // The contents read per image: 30 bytes, one YAML file's worth
        // (5 lines of `kN: V\n`).
        let limits = Limits {
            contents: 30,
            ..Limits::DEFAULT
        };
        let d = compare(&old, &new, &limits).unwrap();
        assert!(matches!(d.changes[0].content, Some(Content::Keys { .. })));
        assert_eq!(
            d.changes[1].content,
            Some(Content::NotShown {
                reason: "the diff reads at most 30 bytes of file contents per image".into()
            })
        );
    }

    #[test]
    fn renames_pair_in_path_order_and_a_new_folders_entry_is_implied() {
        let old = image(
            "old",
            &[
                ("a1", b'0', "same\n"),
                ("a2", b'0', "same\n"),
                ("gone/", b'5', ""),
                ("gone/x", b'0', "1\n"),
            ],
        );
        let new = image(
            "new",
            &[
                ("b1", b'0', "same\n"),
                ("b2", b'0', "same\n"),
                ("d/", b'5', ""),
                ("d/x", b'0', "1\n"),
                ("empty/", b'5', ""),
            ],
        );
        let d = compare(&old, &new, &Limits::DEFAULT).unwrap();
        let got: Vec<(&str, Status, Option<&str>)> = d
            .changes
            .iter()
            .map(|c| (c.path.as_str(), c.status, c.from.as_deref()))
            .collect();
        assert_eq!(
            got,
            [
                ("b1", Status::Renamed, Some("a1")),
                ("b2", Status::Renamed, Some("a2")),
                ("d/x", Status::Renamed, Some("gone/x")),
                ("empty", Status::Added, None),
            ]
        );
        assert!(d.different);
        let same = compare(&old, &old, &Limits::DEFAULT).unwrap();
        assert!(!same.different);
        assert_eq!(same.counts.unchanged, 3);
    }
}
