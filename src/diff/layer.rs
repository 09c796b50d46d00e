//! A layer read back for a diff: the entries of a gzip-compressed tar, as
//! a stream that stops at a limit of inflated bytes and of entries, and
//! then, in a second pass, the contents of only the files a diff shows.
//!
//! Nothing here touches the file system but the layer itself: a path that
//! leaves the image root (`../x`, `/etc/x`) or lies below one of the
//! layer's own symlinks is set aside by name, never compared, and a
//! symlink's target is a string, never followed.
//!
//! Why raw tar entries: the `tar` crate reads a GNU long name or a PAX
//! header into memory whole, however large its header says it is; read
//! raw, their size is checked against [`MAX_NAME`] first.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read as _;

use crate::image::gunzip::Gunzip;

/// The longest path or link target (a GNU long name, a PAX record set)
/// read: 64 KiB. Linux's own limit is 4 KiB.
pub const MAX_NAME: u64 = 64 * 1024;

/// What one entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// A symbolic link (its target is a string).
    Symlink,
    /// A hard link to another entry of the layer.
    HardLink,
    /// Anything else (a device, a fifo, a sparse file): the tar type byte.
    Other(u8),
}

impl Kind {
    fn of(byte: u8) -> Kind {
        match byte {
            b'0' | 0 | b'7' => Kind::File,
            b'5' => Kind::Directory,
            b'2' => Kind::Symlink,
            b'1' => Kind::HardLink,
            other => Kind::Other(other),
        }
    }

    /// The word the diff shows: `file`, `directory`, `symlink`, `hard link`,
    /// `special file`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::File => "file",
            Kind::Directory => "directory",
            Kind::Symlink => "symlink",
            Kind::HardLink => "hard link",
            Kind::Other(_) => "special file",
        }
    }
}

/// One entry as a diff compares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its type.
    pub kind: Kind,
    /// Its permission bits.
    pub mode: u32,
    /// Its content's size in bytes (0 but for files).
    pub size: u64,
    /// `sha256:` of its content.
    pub digest: String,
    /// A link's target, as the layer holds it.
    pub link: Option<String>,
}

/// An entry set aside: not compared, never shown but by its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The path as the layer names it.
    pub path: String,
    /// Why it is not compared.
    pub why: String,
}

/// A layer's entries by path (no `./`, no trailing `/`).
#[derive(Debug, Clone, Default)]
pub struct Tree {
    /// The entries inside the image root.
    pub entries: BTreeMap<String, Entry>,
    /// The entries set aside, in layer order.
    pub refused: Vec<Refused>,
}

/// How much of a layer is read.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// The most bytes the layer may inflate to.
    pub inflated: u64,
    /// The most entries it may hold.
    pub entries: usize,
}

/// A path and link names gathered from the extension entries before it.
#[derive(Default)]
struct Names {
    path: Option<Vec<u8>>,
    link: Option<Vec<u8>>,
}

/// One entry as the walk hands it over: its path and link target (long
/// names applied) and its header's facts.
struct Raw {
    path: Vec<u8>,
    link: Option<Vec<u8>>,
    kind: Kind,
    mode: u32,
    size: u64,
}

/// Reads an extension entry's data (a long name, PAX records), refusing
/// one larger than [`MAX_NAME`].
fn small_data(e: &mut tar::Entry<'_, Gunzip<'_>>, what: &str) -> Result<Vec<u8>, String> {
    let size = e
        .header()
        .entry_size()
        .map_err(|e| format!("a {what}: {e}"))?;
    if size > MAX_NAME {
        return Err(format!(
            "a {what} of {size} bytes, more than the {MAX_NAME} bytes a name may have"
        ));
    }
    let mut data = Vec::new();
    e.read_to_end(&mut data)
        .map_err(|e| format!("reading a {what}: {e}"))?;
    Ok(data)
}

/// The `path` and `linkpath` of PAX records.
fn pax_names(data: &[u8], names: &mut Names) {
    for field in tar::PaxExtensions::new(data).flatten() {
        match field.key_bytes() {
            b"path" => names.path = Some(field.value_bytes().to_vec()),
            b"linkpath" => names.link = Some(field.value_bytes().to_vec()),
            _ => {}
        }
    }
}

/// A name without the NUL a GNU long name ends with.
fn trim_nul(mut v: Vec<u8>) -> Vec<u8> {
    while v.last() == Some(&0) {
        v.pop();
    }
    v
}

/// Walks the layer `gz`, at most `bounds`, calling `each` with every
/// entry and a reader of its content. What follows the tar's end is read
/// too (every gzip member's trailer is checked, as a runtime does).
fn walk(
    gz: &[u8],
    bounds: Bounds,
    mut each: impl FnMut(Raw, &mut dyn std::io::Read) -> Result<(), String>,
) -> Result<(), String> {
    let mut archive = tar::Archive::new(Gunzip::new(gz, bounds.inflated)?);
    let read = (|| {
        let entries = archive
            .entries()
            .map_err(|e| format!("not a tar archive: {e}"))?
            .raw(true);
        let mut names = Names::default();
        let mut count = 0usize;
        for e in entries {
            let mut e = e.map_err(|e| format!("a broken tar entry: {e}"))?;
            let kind = e.header().entry_type();
            if kind.is_gnu_longname() {
                names.path = Some(trim_nul(small_data(&mut e, "GNU long name")?));
                continue;
            }
            if kind.is_gnu_longlink() {
                names.link = Some(trim_nul(small_data(&mut e, "GNU long link name")?));
                continue;
            }
            if kind.is_pax_local_extensions() {
                pax_names(&small_data(&mut e, "PAX header")?, &mut names);
                continue;
            }
            if kind.is_pax_global_extensions() {
                small_data(&mut e, "PAX global header")?;
                continue;
            }
            count += 1;
            if count > bounds.entries {
                return Err(format!(
                    "it holds more than {} entries, where reading stopped",
                    bounds.entries
                ));
            }
            let header = e.header();
            let taken = std::mem::take(&mut names);
            let raw = Raw {
                path: taken
                    .path
                    .unwrap_or_else(|| header.path_bytes().into_owned()),
                link: taken
                    .link
                    .or_else(|| header.link_name_bytes().map(|l| l.into_owned())),
                kind: Kind::of(kind.as_byte()),
                mode: header.mode().unwrap_or(0) & 0o7777,
                size: header.entry_size().unwrap_or(0),
            };
            each(raw, &mut e)?;
        }
        Ok(())
    })();
    let mut gunzip = archive.into_inner();
    let rest = match read {
        Ok(()) => std::io::copy(&mut gunzip, &mut std::io::sink()).map(|_| ()),
        Err(_) => Ok(()),
    };
    match (read, rest) {
        _ if gunzip.over_limit() => Err(format!(
            "it inflates to more than {} bytes, where reading stopped",
            bounds.inflated
        )),
        (Err(_), _) | (_, Err(_)) if gunzip.fault.is_some() => {
            Err(gunzip.fault.take().unwrap_or_default())
        }
        (Err(e), _) => Err(e),
        (Ok(()), Err(e)) => Err(format!("reading past the tar: {e}")),
        (Ok(()), Ok(())) => Ok(()),
    }
}

/// The path a runtime would unpack `raw` to, relative to the image root
/// without `./` or a trailing `/`; the reason when it is not inside the
/// root.
fn inside_root(raw: &[u8]) -> Result<String, String> {
    let text = String::from_utf8(raw.to_vec())
        .map_err(|_| "its name is not UTF-8 (a settings image holds none)".to_string())?;
    if text.starts_with('/') {
        return Err("an absolute path: it names a file outside the image".into());
    }
    let mut parts = Vec::new();
    for part in text.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err("a path with `..`: it leaves the image root".into()),
            p if p.contains('\0') => return Err("a name with a NUL byte".into()),
            p => parts.push(p),
        }
    }
    if parts.is_empty() {
        return Err("the image root itself".into());
    }
    Ok(parts.join("/"))
}

/// Reads the entries of the layer `gz` (see the module docs).
pub fn read_tree(gz: &[u8], bounds: Bounds) -> Result<Tree, String> {
    let mut tree = Tree::default();
    let mut buf = vec![0u8; 64 * 1024];
    walk(gz, bounds, |raw, content| {
        let mut hash = sha2::Sha256::default();
        let mut size = 0u64;
        loop {
            let n = content
                .read(&mut buf)
                .map_err(|e| format!("reading an entry: {e}"))?;
            if n == 0 {
                break;
            }
            size += n as u64;
            sha2::Digest::update(&mut hash, &buf[..n]);
        }
        let shown = String::from_utf8_lossy(&raw.path).into_owned();
        let path = match inside_root(&raw.path) {
            Ok(p) => p,
            Err(why) => {
                tree.refused.push(Refused { path: shown, why });
                return Ok(());
            }
        };
        let entry = Entry {
            kind: raw.kind,
            mode: raw.mode,
            size: if raw.kind == Kind::File { size } else { 0 },
            digest: format!("sha256:{}", hex::encode(sha2::Digest::finalize(hash))),
            link: raw
                .link
                .filter(|_| matches!(raw.kind, Kind::Symlink | Kind::HardLink))
                .map(|l| String::from_utf8_lossy(&l).into_owned()),
        };
        // As a runtime unpacks it: a later entry of the same path wins.
        tree.entries.insert(path, entry);
        Ok(())
    })?;
    set_aside_below_symlinks(&mut tree);
    Ok(tree)
}

/// Sets aside every entry below one of the layer's own symlinks: a
/// runtime would write it through the link, wherever that points.
fn set_aside_below_symlinks(tree: &mut Tree) {
    let links: BTreeSet<String> = tree
        .entries
        .iter()
        .filter(|(_, e)| e.kind == Kind::Symlink)
        .map(|(p, _)| p.clone())
        .collect();
    if links.is_empty() {
        return;
    }
    let below: Vec<(String, String)> = tree
        .entries
        .keys()
        .filter_map(|p| {
            let mut at = p.as_str();
            while let Some((parent, _)) = at.rsplit_once('/') {
                if links.contains(parent) {
                    return Some((p.clone(), parent.to_string()));
                }
                at = parent;
            }
            None
        })
        .collect();
    for (path, link) in below {
        tree.entries.remove(&path);
        tree.refused.push(Refused {
            path,
            why: format!("below the symlink {link}: it names a file wherever the link points"),
        });
    }
}

/// The contents of the files of `wanted` (path: the most bytes to keep),
/// read in a second pass over the layer `gz`. A file larger than its cap
/// is not kept.
pub fn read_contents(
    gz: &[u8],
    bounds: Bounds,
    wanted: &BTreeMap<String, u64>,
) -> Result<BTreeMap<String, Vec<u8>>, String> {
    let mut out = BTreeMap::new();
    if wanted.is_empty() {
        return Ok(out);
    }
    walk(gz, bounds, |raw, content| {
        let Ok(path) = inside_root(&raw.path) else {
            return Ok(());
        };
        match wanted.get(&path) {
            Some(&cap) if raw.kind == Kind::File && raw.size <= cap => {
                let mut data = Vec::with_capacity(raw.size as usize);
                content
                    .take(cap.saturating_add(1))
                    .read_to_end(&mut data)
                    .map_err(|e| format!("reading {path}: {e}"))?;
                if data.len() as u64 <= cap {
                    out.insert(path, data);
                } else {
                    out.remove(&path);
                }
            }
            // A later entry of the same path that is no such file wins.
            _ => {
                out.remove(&path);
            }
        }
        Ok(())
    })?;
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A gzip-compressed tar of `(path, type, content or link)`.
    pub(crate) fn layer(entries: &[(&str, u8, &str)]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (path, kind, data) in entries {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(tar::EntryType::new(*kind));
            h.set_mode(0o644);
            match *kind {
                b'2' | b'1' => {
                    h.set_size(0);
                    b.append_link(&mut h, path, data).unwrap();
                }
                _ => {
                    h.set_size(data.len() as u64);
                    // Set the name in the header itself: `append_data`
                    // refuses `..`, which a hostile layer holds.
                    let name = path.as_bytes();
                    h.as_gnu_mut().unwrap().name[..name.len()].copy_from_slice(name);
                    h.set_cksum();
                    b.append(&h, data.as_bytes()).unwrap();
                }
            }
        }
        let tar = b.into_inner().unwrap();
        let mut w = crate::image::gzip::GzipWriter::new(Vec::new()).unwrap();
        w.write_all(&tar).unwrap();
        w.finish().unwrap()
    }

    const WIDE: Bounds = Bounds {
        inflated: u64::MAX,
        entries: usize::MAX,
    };

    #[test]
    fn paths_outside_the_root_and_below_a_symlink_are_set_aside() {
        let gz = layer(&[
            ("app.yaml", b'0', "a: 1\n"),
            ("./sub/", b'5', ""),
            ("../escape.yaml", b'0', "stolen\n"),
            ("/etc/passwd", b'0', "root\n"),
            ("link", b'2', "/etc"),
            ("link/shadow", b'0', "x\n"),
        ]);
        let t = read_tree(&gz, WIDE).unwrap();
        let paths: Vec<&str> = t.entries.keys().map(String::as_str).collect();
        assert_eq!(paths, ["app.yaml", "link", "sub"]);
        assert_eq!(t.entries["link"].link.as_deref(), Some("/etc"));
        assert_eq!(t.entries["sub"].kind, Kind::Directory);
        let refused: Vec<&str> = t.refused.iter().map(|r| r.path.as_str()).collect();
        assert_eq!(refused, ["../escape.yaml", "/etc/passwd", "link/shadow"]);
        // The second pass never hands over a refused entry's content.
        let wanted = BTreeMap::from([
            ("escape.yaml".to_string(), 100),
            ("app.yaml".to_string(), 100),
        ]);
        let c = read_contents(&gz, WIDE, &wanted).unwrap();
        assert_eq!(c.keys().collect::<Vec<_>>(), ["app.yaml"]);
    }

    #[test]
    fn the_bounds_stop_reading() {
        let big = "x".repeat(10_000);
        let gz = layer(&[("a", b'0', &big), ("b", b'0', "1"), ("c", b'0', "2")]);
        let e = read_tree(
            &gz,
            Bounds {
                inflated: u64::MAX,
                entries: 2,
            },
        )
        .unwrap_err();
        assert_eq!(e, "it holds more than 2 entries, where reading stopped");
        let e = read_tree(
            &gz,
            Bounds {
                inflated: 5_000,
                entries: 10,
            },
        )
        .unwrap_err();
        assert_eq!(
            e,
            "it inflates to more than 5000 bytes, where reading stopped"
        );
        // A content over its cap is not kept.
        let wanted = BTreeMap::from([("a".to_string(), 9_999), ("b".to_string(), 1)]);
        let c = read_contents(&gz, WIDE, &wanted).unwrap();
        assert_eq!(c.keys().collect::<Vec<_>>(), ["b"]);
    }

    #[test]
    fn a_long_name_larger_than_the_bound_is_refused_unread() {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::GNULongName);
        let name = vec![b'n'; (MAX_NAME + 1) as usize];
        h.set_size(name.len() as u64);
        h.as_gnu_mut().unwrap().name[..13].copy_from_slice(b"././@LongLink");
        h.set_cksum();
        let mut b = tar::Builder::new(Vec::new());
        b.append(&h, name.as_slice()).unwrap();
        let mut w = crate::image::gzip::GzipWriter::new(Vec::new()).unwrap();
        w.write_all(&b.into_inner().unwrap()).unwrap();
        let e = read_tree(&w.finish().unwrap(), WIDE).unwrap_err();
        assert!(e.contains("a GNU long name of 65537 bytes"), "{e}");
    }
}
