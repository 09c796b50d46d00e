//! A layer's entries as verify compares them: read from a gzip-compressed
//! tar as a bounded stream, and the first path where two layers differ.

use std::collections::BTreeMap;
use std::io::Read as _;

use crate::image::gunzip::Gunzip;

/// One tar entry as compared: type, mode, link target and content digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Entry {
    pub(super) kind: u8,
    pub(super) mode: u32,
    pub(super) link: Option<String>,
    pub(super) content: String,
}

/// How many bytes a pushed layer may inflate to while its files are
/// compared: the rebuilt layer's tar plus [`INFLATE_SLACK`]. A settings
/// image is kilobytes to megabytes; a small layer that inflates to
/// gigabytes (a gzip bomb) is a mismatch, stopped there, and it is streamed,
/// never held: memory stays flat whatever the limit.
pub fn inflate_limit(rebuilt_tar: u64) -> u64 {
    rebuilt_tar.saturating_add(INFLATE_SLACK)
}

/// See [`inflate_limit`]: 64 MiB.
pub const INFLATE_SLACK: u64 = 64 * 1024 * 1024;

/// The entries of a gzip-compressed tar, by path, in archive order, read
/// as a stream of at most `limit` uncompressed bytes; the error says why it
/// is not such a tar.
pub(super) fn tar_entries(
    gz: &[u8],
    limit: u64,
) -> std::result::Result<Vec<(String, Entry)>, String> {
    let mut archive = tar::Archive::new(Gunzip::new(gz, limit)?);
    let read = read_entries(&mut archive);
    let mut gunzip = archive.into_inner();
    // What follows the tar's end inflates too, as a runtime that hashes
    // the whole stream (containerd's diff_id) reads it: every member's
    // trailer is checked.
    let rest = match read {
        Ok(_) => std::io::copy(&mut gunzip, &mut std::io::sink()).map(|_| ()),
        Err(_) => Ok(()),
    };
    match (read, rest) {
        _ if gunzip.over_limit() => Err(format!(
            "it inflates to more than {limit} bytes (the rebuilt layer's tar plus {} MiB), where reading stopped",
            INFLATE_SLACK >> 20
        )),
        // The gzip's own fault, which the tar reader's error does not carry.
        (Err(_), _) | (_, Err(_)) if gunzip.fault.is_some() => {
            Err(gunzip.fault.take().unwrap_or_default())
        }
        (Err(e), _) => Err(e),
        (Ok(_), Err(e)) => Err(format!("reading past the tar: {e}")),
        (Ok(entries), Ok(())) => Ok(entries),
    }
}

fn read_entries(
    archive: &mut tar::Archive<Gunzip<'_>>,
) -> std::result::Result<Vec<(String, Entry)>, String> {
    let mut out = Vec::new();
    let entries = archive
        .entries()
        .map_err(|e| format!("not a tar archive: {e}"))?;
    let mut buf = vec![0u8; 64 * 1024];
    for e in entries {
        let mut e = e.map_err(|e| format!("a broken tar entry: {e}"))?;
        let path = e
            .path()
            .map_err(|e| format!("a tar entry without a path: {e}"))?
            .to_string_lossy()
            .into_owned();
        let header = e.header();
        let kind = header.entry_type().as_byte();
        let mode = header.mode().unwrap_or(0);
        let link = e
            .link_name()
            .ok()
            .flatten()
            .map(|l| l.to_string_lossy().into_owned());
        let mut hash = sha2::Sha256::default();
        loop {
            let n = e
                .read(&mut buf)
                .map_err(|e| format!("reading {path}: {e}"))?;
            if n == 0 {
                break;
            }
            sha2::Digest::update(&mut hash, &buf[..n]);
        }
        out.push((
            path,
            Entry {
                kind,
                mode,
                link,
                content: format!("sha256:{}", hex::encode(sha2::Digest::finalize(hash))),
            },
        ));
    }
    Ok(out)
}

/// What a tar entry of type `kind` is, in words.
fn kind_name(kind: u8) -> &'static str {
    match kind {
        b'0' | 0 | b'7' => "file",
        b'5' => "directory",
        b'2' => "symlink",
        b'1' => "hard link",
        _ => "entry",
    }
}

/// The first path (in sorted order) where the pushed and rebuilt entries
/// differ, and how, in a phrase that names the path: `extra file X: in
/// the image, not in the commit`, `X: different content`.
pub(super) fn first_difference(
    theirs: &[(String, Entry)],
    ours: &[(String, Entry)],
) -> Option<(String, String)> {
    let a: BTreeMap<&str, &Entry> = theirs.iter().map(|(p, e)| (p.as_str(), e)).collect();
    let b: BTreeMap<&str, &Entry> = ours.iter().map(|(p, e)| (p.as_str(), e)).collect();
    let mut paths: Vec<&str> = a.keys().chain(b.keys()).copied().collect();
    paths.sort_unstable();
    paths.dedup();
    for p in paths {
        let shown = p.trim_end_matches('/');
        let what = match (a.get(p), b.get(p)) {
            (Some(x), None) => {
                let kind = kind_name(x.kind);
                return Some((
                    shown.to_string(),
                    format!("extra {kind} {shown}: in the image, not in the commit"),
                ));
            }
            (None, Some(y)) => {
                let kind = kind_name(y.kind);
                return Some((
                    shown.to_string(),
                    format!("missing {kind} {shown}: in the commit, not in the image"),
                ));
            }
            (Some(x), Some(y)) if x.kind != y.kind => "a different file type".to_string(),
            (Some(x), Some(y)) if x.link != y.link => format!(
                "a symlink to {:?} in the image, to {:?} in the commit",
                x.link.as_deref().unwrap_or(""),
                y.link.as_deref().unwrap_or("")
            ),
            (Some(x), Some(y)) if x.content != y.content => "different content".to_string(),
            (Some(x), Some(y)) if x.mode != y.mode => {
                format!("mode {:o} in the image, {:o} in the commit", x.mode, y.mode)
            }
            _ => continue,
        };
        return Some((shown.to_string(), format!("{shown}: {what}")));
    }
    // Same entries by path; the order is the only difference left.
    let order_a: Vec<&str> = theirs.iter().map(|(p, _)| p.as_str()).collect();
    let order_b: Vec<&str> = ours.iter().map(|(p, _)| p.as_str()).collect();
    order_a
        .iter()
        .zip(&order_b)
        .find(|(x, y)| x != y)
        .map(|(x, _)| (x.to_string(), format!("{x}: out of order in the layer")))
}
