//! Trees and the headers of commits read straight from the clone's packs,
//! for the walk of [`super::walk`].
//!
//! Profiled on a clone as CI gets it (one pack written by a server, no
//! commit-graph, a tree of hundreds of entries changed by most commits),
//! reading a tree through the object database cost about three times the
//! work of building it: `gix`'s delta-base cache copies every object it
//! keeps in and every base it lends out, and the decoder zeroes its work
//! buffers for each object. Here a tree is built once from its delta and
//! kept, and a later tree deltified against it borrows it without a copy
//! (git's delta-base cache works the same way). Commits: the walk needs
//! their tree, parents and committer time, all in the first lines, so only
//! the start of the object is inflated, not the message and signature.
//!
//! An accelerator only: anything it cannot answer (a loose object, a pack
//! added since, an alternate, replacement objects, a deltified commit,
//! headers longer than the prefix, a delta chain out of bounds, data that
//! does not inflate or apply) is `None`, and the caller reads the object
//! through the object database, which reports any error.

use std::collections::HashMap;
use std::path::Path;
use std::rc::Rc;

use gix::ObjectId;
use gix::bstr::ByteSlice as _;
use gix::odb::pack;
use gix::odb::pack::data::entry::Header;

/// How much of a commit is inflated: the tree line, a few parent lines, the
/// author and committer lines fit (typically about 250 bytes).
const HEAD_BYTES: usize = 640;

/// Packs opened beyond this many are left to the object database (a clone
/// as CI gets it has one; many packs mean an unmaintained repository).
const MAX_PACKS: usize = 64;

/// Bytes of built trees kept for later deltas, per generation (two are
/// kept; git's `core.deltaBaseCacheLimit` default is 96 MiB).
const CACHE_BYTES: usize = 1 << 20;

/// Deltas followed for one object before giving up (git writes chains of
/// at most 50 by default, 4095 at most).
const MAX_CHAIN: usize = 10_000;

/// Objects larger than this are left to the object database (which has
/// its own allocation checks); trees are far smaller.
const MAX_OBJECT: u64 = 256 << 20;

/// Room left after an object when inflating it: zlib decodes on its fast
/// path only while this much output space is left, so without it a small
/// object (a commit, a tree delta: a few hundred bytes) is decoded symbol by
/// symbol on the slow path, at several times the cost.
const SLACK: usize = 260;

/// Trees built from the packs, by (pack, offset): two generations, the
/// older dropped when the current one holds [`CACHE_BYTES`].
#[derive(Default)]
struct Built {
    cur: HashMap<(usize, u64), Rc<Vec<u8>>>,
    old: HashMap<(usize, u64), Rc<Vec<u8>>>,
    bytes: usize,
}

impl Built {
    fn get(&mut self, key: (usize, u64)) -> Option<Rc<Vec<u8>>> {
        if let Some(v) = self.cur.get(&key) {
            return Some(Rc::clone(v));
        }
        let v = self.old.remove(&key)?;
        self.insert(key, Rc::clone(&v));
        Some(v)
    }

    fn insert(&mut self, key: (usize, u64), v: Rc<Vec<u8>>) {
        if self.bytes >= CACHE_BYTES {
            self.old = std::mem::take(&mut self.cur);
            self.bytes = 0;
        }
        self.bytes += v.len();
        self.cur.insert(key, v);
    }
}

/// The repository's packs, opened once for a walk.
pub(crate) struct Packs {
    bundles: Vec<pack::Bundle>,
    inflate: gix::zlib::Inflate,
    head: Vec<u8>,
    delta: Vec<u8>,
    built: Built,
}

impl Packs {
    /// Opens the packs in `objects/pack` of `repo`. A pack that does not
    /// open is skipped: the object database still reads it, and says what
    /// is wrong with it. None at all when the repository replaces objects
    /// (`refs/replace`), which only the object database applies.
    pub(crate) fn open(repo: &gix::Repository) -> Packs {
        let store = repo.objects.store_ref();
        let mut bundles = Vec::new();
        if store.replacements().next().is_none() {
            bundles = open_bundles(store.path(), repo.object_hash());
        }
        Packs {
            bundles,
            inflate: gix::zlib::Inflate::default(),
            head: vec![0; HEAD_BYTES + SLACK],
            delta: Vec::new(),
            built: Built::default(),
        }
    }

    /// The pack holding `id` and the object's offset in it.
    fn locate(&self, id: &gix::hash::oid) -> Option<(usize, u64)> {
        self.bundles.iter().enumerate().find_map(|(i, b)| {
            let at = b.index.lookup(id)?;
            Some((i, b.index.pack_offset_at_index(at)))
        })
    }

    /// The start of commit `id`'s object up to and including the newline
    /// that ends its committer line, when a pack holds the commit whole
    /// (not as a delta) and the line lies within the first [`HEAD_BYTES`].
    pub(crate) fn commit_head(&mut self, id: &ObjectId) -> Option<&[u8]> {
        let (b, offset) = self.locate(id)?;
        let pack = &self.bundles[b].pack;
        let entry = pack.entry(offset).ok()?;
        if !matches!(entry.header, Header::Commit) {
            return None;
        }
        let input = pack.entry_slice(entry.data_offset..pack.pack_end() as u64)?;
        let want = usize::try_from(entry.decompressed_size)
            .ok()?
            .min(HEAD_BYTES)
            + SLACK;
        self.inflate.reset();
        let (_, _, written) = self.inflate.prefix(input, &mut self.head[..want]).ok()?;
        let head = &self.head[..written];
        // The committer line follows the tree, parent and author lines.
        let at = head.find(b"\ncommitter ")?;
        let nl = head[at + 1..].find_byte(b'\n')?;
        Some(&head[..at + 1 + nl + 1])
    }

    /// Tree `id`'s object data, built from its pack and kept for the trees
    /// deltified against it.
    pub(crate) fn tree(&mut self, id: &ObjectId) -> Option<Rc<Vec<u8>>> {
        let (b, offset) = self.locate(id)?;
        // Down the delta chain to a tree built before or stored whole.
        let mut chain = Vec::new();
        let mut at = offset;
        let mut object = loop {
            if let Some(built) = self.built.get((b, at)) {
                break built;
            }
            let pack = &self.bundles[b].pack;
            let entry = pack.entry(at).ok()?;
            if entry.decompressed_size > MAX_OBJECT || chain.len() == MAX_CHAIN {
                return None;
            }
            let base = match entry.header {
                Header::Tree => {
                    let mut data = Vec::new();
                    inflate(&mut self.inflate, pack, &entry, &mut data)?;
                    let data = Rc::new(data);
                    self.built.insert((b, at), Rc::clone(&data));
                    break data;
                }
                Header::OfsDelta { base_distance } => {
                    entry.checked_base_pack_offset(base_distance)?
                }
                Header::RefDelta { base_id } => {
                    let index = &self.bundles[b].index;
                    index.pack_offset_at_index(index.lookup(base_id)?)
                }
                // A commit, blob or tag is not a tree.
                _ => return None,
            };
            chain.push((at, entry));
            at = base;
        };
        // Up the chain again, each delta applied to the object below it.
        for (at, entry) in chain.iter().rev() {
            let pack = &self.bundles[b].pack;
            inflate(&mut self.inflate, pack, entry, &mut self.delta)?;
            object = Rc::new(apply_delta(&object, &self.delta)?);
            self.built.insert((b, *at), Rc::clone(&object));
        }
        Some(object)
    }
}

/// Inflates pack entry `entry` (its data, a whole object or a delta) into
/// `out`, which then holds exactly the size the entry announces; None when
/// the data does not inflate to that size.
fn inflate(
    inflate: &mut gix::zlib::Inflate,
    pack: &pack::data::File,
    entry: &pack::data::Entry,
    out: &mut Vec<u8>,
) -> Option<()> {
    let size = usize::try_from(entry.decompressed_size).ok()?;
    let input = pack.entry_slice(entry.data_offset..pack.pack_end() as u64)?;
    out.clear();
    out.resize(size + SLACK, 0);
    inflate.reset();
    let (status, _, written) = inflate.prefix(input, out).ok()?;
    if status != gix::zlib::Status::StreamEnd || written != size {
        return None;
    }
    out.truncate(size);
    Some(())
}

fn open_bundles(objects: &Path, hash: gix::hash::Kind) -> Vec<pack::Bundle> {
    let mut bundles = Vec::new();
    let Ok(dir) = std::fs::read_dir(objects.join("pack")) else {
        return bundles;
    };
    for entry in dir.flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "idx") {
            if bundles.len() == MAX_PACKS {
                return Vec::new();
            }
            if let Ok(b) = pack::Bundle::at(&path, hash) {
                bundles.push(b);
            }
        }
    }
    bundles
}

/// A size at the start of a delta: 7 bits a byte, least significant first.
fn delta_size(d: &[u8], i: &mut usize) -> Option<u64> {
    let mut size = 0u64;
    let mut shift = 0;
    loop {
        let byte = *d.get(*i)?;
        *i += 1;
        if shift >= 64 {
            return None;
        }
        size |= u64::from(byte & 0x7f) << shift;
        shift += 7;
        if byte & 0x80 == 0 {
            return Some(size);
        }
    }
}

/// The object that git's delta `delta` builds from `base`
/// (`gitformat-pack(5)`, "Deltified representation"): the base's size,
/// the result's size, then instructions that copy a range of the base or
/// insert the bytes that follow. None for anything out of bounds or a
/// result of another size than announced.
fn apply_delta(base: &[u8], delta: &[u8]) -> Option<Vec<u8>> {
    let mut i = 0;
    if delta_size(delta, &mut i)? != base.len() as u64 {
        return None;
    }
    let size = delta_size(delta, &mut i)?;
    if size > MAX_OBJECT {
        return None;
    }
    let size = usize::try_from(size).ok()?;
    let mut out = Vec::with_capacity(size);
    while let Some(&cmd) = delta.get(i) {
        i += 1;
        let bytes = if cmd & 0x80 != 0 {
            // Copy: offset and size bytes present as the low 7 bits say.
            let mut field = |bits: u8, shifts: &[u32]| -> Option<usize> {
                let mut v = 0usize;
                for (k, shift) in shifts.iter().enumerate() {
                    if bits & (1 << k) != 0 {
                        v |= usize::from(*delta.get(i)?) << shift;
                        i += 1;
                    }
                }
                Some(v)
            };
            let offset = field(cmd & 0x0f, &[0, 8, 16, 24])?;
            let mut len = field((cmd >> 4) & 0x07, &[0, 8, 16])?;
            if len == 0 {
                len = 0x10000;
            }
            base.get(offset..offset.checked_add(len)?)?
        } else if cmd != 0 {
            // Insert the next `cmd` bytes.
            let end = i + usize::from(cmd);
            let bytes = delta.get(i..end)?;
            i = end;
            bytes
        } else {
            // Reserved.
            return None;
        };
        if out.len() + bytes.len() > size {
            return None;
        }
        out.extend_from_slice(bytes);
    }
    (out.len() == size).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::apply_delta;

    #[test]
    fn a_delta_copies_and_inserts() {
        let base = b"0123456789";
        // base 10, result 7: copy 3 bytes at offset 2, insert "ab", copy 2 at 8.
        let delta = [10, 7, 0x91, 2, 3, 2, b'a', b'b', 0x91, 8, 2];
        assert_eq!(apply_delta(base, &delta).as_deref(), Some(&b"234ab89"[..]));
    }

    #[test]
    fn a_delta_out_of_bounds_or_of_another_size_is_refused() {
        let base = b"0123456789";
        // A copy past the base's end.
        assert_eq!(apply_delta(base, &[10, 3, 0x91, 9, 3]), None);
        // The wrong base size.
        assert_eq!(apply_delta(base, &[9, 1, 1, b'x']), None);
        // A result longer or shorter than announced.
        assert_eq!(apply_delta(base, &[10, 1, 2, b'x', b'y']), None);
        assert_eq!(apply_delta(base, &[10, 3, 1, b'x']), None);
        // An insert cut short, the reserved instruction, a truncated copy.
        assert_eq!(apply_delta(base, &[10, 3, 3, b'x']), None);
        assert_eq!(apply_delta(base, &[10, 0, 0]), None);
        assert_eq!(apply_delta(base, &[10, 2, 0x91, 1]), None);
        // A copy of size 0 means 0x10000 bytes.
        let big = vec![7u8; 0x10000];
        let delta = [0x80, 0x80, 4, 0x80, 0x80, 4, 0x80];
        assert_eq!(apply_delta(&big, &delta), Some(big.clone()));
    }
}
