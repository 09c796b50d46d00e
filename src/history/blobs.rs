//! Blobs streamed from the object database into the layer: a file of any
//! size is read in pieces, never whole in memory (`gix` reads an object
//! into one buffer: a 2 GiB file took 2 GiB, in `push --source commit` and
//! in the controller).
//!
//! - A **loose object** (`objects/xx/...`): its zlib stream is inflated as
//!   it is read, past the `blob SIZE\0` header.
//! - An object **stored whole in a pack** (how git stores a file the first
//!   time, and any file above `core.bigFileThreshold`; how the mirrors
//!   store large files, see `mirror::intake`): the entry's zlib stream,
//!   read from the pack file with plain reads, not through a memory map
//!   (the pages of a map count in the process's resident memory).
//! - A **large object stored as a delta** (a file changed in place, then
//!   repacked): the chain is resolved through temporary files, the object
//!   at its base copied out, then each delta applied as it inflates,
//!   copying ranges of the object below it from that object's file.
//! - Anything else (a small delta: most settings files once repacked; an
//!   object in an alternate object directory; a repository that replaces
//!   objects): `None`, and the caller reads the blob whole through `gix`,
//!   as it reads every blob under [`STREAM_FROM`].

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use gix::odb::pack;
use gix::odb::pack::data::entry::Header;

/// Blobs at least this large are streamed; smaller ones are read whole, by
/// the caller (one read through `gix`, no file opened per blob).
pub(crate) const STREAM_FROM: u64 = 1 << 20;

/// Deltas at least this large (the object they build) are resolved through
/// temporary files; smaller ones in memory, by the caller.
pub(crate) const STREAM_DELTAS_FROM: u64 = 8 << 20;

/// Deltas followed down one chain before giving up (git writes chains of
/// at most 50 by default, 4095 at most).
const MAX_CHAIN: usize = 10_000;

/// The size of each read from a pack or a temporary file.
const CHUNK: usize = 64 * 1024;

/// One pack: its index (memory-mapped: lookups touch a few pages) and the
/// path of its data.
struct Pack {
    index: pack::index::File,
    data: PathBuf,
}

/// Where an object is stored.
enum Place {
    Loose(PathBuf),
    Packed { pack: usize, offset: u64 },
}

/// The objects of one repository, for streaming reads of its blobs.
pub(crate) struct Blobs {
    objects: PathBuf,
    hash: gix::hash::Kind,
    /// Opened on first use; a pack added later is left to `gix`.
    packs: Mutex<Option<Arc<Vec<Pack>>>>,
}

impl std::fmt::Debug for Blobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Blobs")
            .field("objects", &self.objects)
            .finish_non_exhaustive()
    }
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

impl Blobs {
    /// The objects of `repo`. `None` when the repository replaces objects
    /// (`refs/replace`), which only `gix` applies.
    pub(crate) fn of(repo: &gix::Repository) -> Option<Blobs> {
        let store = repo.objects.store_ref();
        if store.replacements().next().is_some() {
            return None;
        }
        Some(Blobs {
            objects: store.path().to_path_buf(),
            hash: repo.object_hash(),
            packs: Mutex::new(None),
        })
    }

    fn packs(&self) -> Arc<Vec<Pack>> {
        let mut held = match self.packs.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        held.get_or_insert_with(|| Arc::new(open_packs(&self.objects, self.hash)))
            .clone()
    }

    fn locate(&self, packs: &[Pack], id: &gix::hash::oid) -> Option<Place> {
        let hex = id.to_hex().to_string();
        let loose = self.objects.join(&hex[..2]).join(&hex[2..]);
        if loose.is_file() {
            return Some(Place::Loose(loose));
        }
        packs.iter().enumerate().find_map(|(i, p)| {
            let at = p.index.lookup(id)?;
            Some(Place::Packed {
                pack: i,
                offset: p.index.pack_offset_at_index(at),
            })
        })
    }

    /// The bytes of blob `id` as a stream, or `None` when they are better
    /// read whole (see the module docs).
    pub(crate) fn open(&self, id: &gix::hash::oid) -> io::Result<Option<Box<dyn Read>>> {
        let packs = self.packs();
        let Some(place) = self.locate(&packs, id) else {
            return Ok(None);
        };
        let (pack, offset) = match place {
            Place::Loose(path) => return open_loose(&path).map(Some),
            Place::Packed { pack, offset } => (pack, offset),
        };
        let (entry, data) = open_entry(&packs[pack], offset, self.hash)?;
        match entry.header {
            Header::Blob => Ok(Some(Box::new(data))),
            Header::OfsDelta { .. } | Header::RefDelta { .. } => {
                let (_, size) = delta_sizes(&mut BufReader::new(data))?;
                if size < STREAM_DELTAS_FROM {
                    return Ok(None);
                }
                self.resolve(&packs, pack, offset).map(Some)
            }
            other => Err(invalid(format!(
                "object {id} is a {:?}, not a blob",
                other.as_kind()
            ))),
        }
    }

    /// The delta at `offset` of pack `pack` applied down to the object at
    /// the base of its chain, through temporary files: returns the last.
    fn resolve(&self, packs: &[Pack], pack: usize, offset: u64) -> io::Result<Box<dyn Read>> {
        let mut chain = Vec::new();
        let mut at = Place::Packed { pack, offset };
        let base: Box<dyn Read> = loop {
            if chain.len() > MAX_CHAIN {
                return Err(invalid(format!(
                    "a delta chain longer than {MAX_CHAIN} in {}",
                    packs[pack].data.display()
                )));
            }
            let (pack, offset) = match at {
                Place::Loose(path) => break open_loose(&path)?,
                Place::Packed { pack, offset } => (pack, offset),
            };
            let (entry, data) = open_entry(&packs[pack], offset, self.hash)?;
            at = match entry.header {
                Header::Blob => break Box::new(data),
                Header::OfsDelta { base_distance } => Place::Packed {
                    pack,
                    offset: entry
                        .checked_base_pack_offset(base_distance)
                        .ok_or_else(|| {
                            invalid(format!(
                                "a delta at {offset} points before its pack's start"
                            ))
                        })?,
                },
                Header::RefDelta { base_id } => self.locate(packs, &base_id).ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::NotFound,
                        format!("the base {base_id} of a delta is in no pack and not loose"),
                    )
                })?,
                other => {
                    return Err(invalid(format!(
                        "a delta's base is a {:?}, not a blob",
                        other.as_kind()
                    )));
                }
            };
            chain.push((pack, offset));
        };
        let mut below = spill(base)?;
        for (pack, offset) in chain.iter().rev() {
            let (_, delta) = open_entry(&packs[*pack], *offset, self.hash)?;
            let mut next = tempfile::tempfile()?;
            apply_delta(
                &below,
                &mut BufReader::with_capacity(CHUNK, delta),
                &mut io::BufWriter::with_capacity(CHUNK, &mut next),
            )?;
            below = next;
        }
        below.seek(SeekFrom::Start(0))?;
        Ok(Box::new(BufReader::with_capacity(CHUNK, below)))
    }
}

fn open_packs(objects: &Path, hash: gix::hash::Kind) -> Vec<Pack> {
    let mut packs = Vec::new();
    let Ok(dir) = std::fs::read_dir(objects.join("pack")) else {
        return packs;
    };
    for entry in dir.flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "idx")
            && let Ok(index) = pack::index::File::at(&path, hash)
        {
            let data = path.with_extension("pack");
            if data.is_file() {
                packs.push(Pack { index, data });
            }
        }
    }
    packs
}

/// A zlib stream inflated as it is read from `input`, which is left right
/// after the stream's end; a stream cut short is an `UnexpectedEof` error.
pub(crate) struct Zlib<R> {
    input: R,
    state: Box<gix::zlib::Decompress>,
    end: bool,
}

impl<R: BufRead> Zlib<R> {
    /// Inflates the zlib stream at the start of `input`.
    pub(crate) fn new(input: R) -> Zlib<R> {
        Zlib {
            input,
            state: Box::new(gix::zlib::Decompress::new()),
            end: false,
        }
    }
}

impl<R: BufRead> Read for Zlib<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        use gix::zlib::{FlushDecompress, Status};
        if self.end || buf.is_empty() {
            return Ok(0);
        }
        loop {
            let input = self.input.fill_buf()?;
            let eof = input.is_empty();
            let (in_before, out_before) = (self.state.total_in(), self.state.total_out());
            let flush = if eof {
                FlushDecompress::Finish
            } else {
                FlushDecompress::None
            };
            let status = self
                .state
                .decompress(input, buf, flush)
                .map_err(|e| invalid(format!("corrupt zlib data: {e}")))?;
            let consumed = usize::try_from(self.state.total_in() - in_before).unwrap_or(0);
            let written = usize::try_from(self.state.total_out() - out_before).unwrap_or(0);
            self.input.consume(consumed);
            self.end = status == Status::StreamEnd;
            if written > 0 || self.end {
                return Ok(written);
            }
            if eof {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the zlib data is cut short",
                ));
            }
            if consumed == 0 {
                return Err(invalid("the zlib data makes no progress".into()));
            }
        }
    }
}

/// A loose blob's content: its zlib stream past the `blob SIZE\0` header.
fn open_loose(path: &Path) -> io::Result<Box<dyn Read>> {
    let file = File::open(path)?;
    let mut z = Zlib::new(BufReader::with_capacity(CHUNK, file));
    let mut header = Vec::with_capacity(32);
    let mut byte = [0u8; 1];
    loop {
        z.read_exact(&mut byte)?;
        if byte[0] == 0 {
            break;
        }
        header.push(byte[0]);
        if header.len() > 32 {
            return Err(invalid(format!("{}: no object header", path.display())));
        }
    }
    if !header.starts_with(b"blob ") {
        return Err(invalid(format!(
            "{} is a {}, not a blob",
            path.display(),
            String::from_utf8_lossy(header.split(|b| *b == b' ').next().unwrap_or_default())
        )));
    }
    Ok(Box::new(z))
}

/// The entry at `offset` of `pack`: its header, and its data as a stream.
fn open_entry(
    pack: &Pack,
    offset: u64,
    hash: gix::hash::Kind,
) -> io::Result<(pack::data::Entry, Zlib<BufReader<File>>)> {
    let mut file = File::open(&pack.data)?;
    file.seek(SeekFrom::Start(offset))?;
    let mut input = BufReader::with_capacity(CHUNK, file);
    let entry = pack::data::Entry::from_read(&mut input, offset, hash.len_in_bytes())?;
    Ok((entry, Zlib::new(input)))
}

/// A size at the start of a delta: 7 bits a byte, least significant first.
fn delta_size(delta: &mut impl Read) -> io::Result<u64> {
    let mut size = 0u64;
    let mut shift = 0;
    let mut byte = [0u8; 1];
    loop {
        delta.read_exact(&mut byte)?;
        if shift > 63 {
            return Err(invalid("a delta's size does not fit 64 bits".into()));
        }
        size |= u64::from(byte[0] & 0x7f) << shift;
        shift += 7;
        if byte[0] & 0x80 == 0 {
            return Ok(size);
        }
    }
}

/// The sizes a delta starts with: its base's and the object it builds.
pub(crate) fn delta_sizes(delta: &mut impl Read) -> io::Result<(u64, u64)> {
    Ok((delta_size(delta)?, delta_size(delta)?))
}

/// Copies an object out of `from` into an anonymous temporary file.
fn spill(mut from: Box<dyn Read>) -> io::Result<File> {
    let mut file = tempfile::tempfile()?;
    {
        let mut out = io::BufWriter::with_capacity(CHUNK, &mut file);
        io::copy(&mut from, &mut out)?;
        out.flush()?;
    }
    Ok(file)
}

/// Writes the object git's delta `delta` builds from the object in `base`
/// (`gitformat-pack(5)`, "Deltified representation") to `out`, as the
/// delta is read: each instruction copies a range of the base (read from
/// its file) or inserts the bytes that follow it. Fails on anything out of
/// bounds and on a result of another size than the delta announces.
fn apply_delta(base: &File, delta: &mut impl BufRead, out: &mut impl Write) -> io::Result<()> {
    let base_len = base.metadata()?.len();
    let (want_base, size) = delta_sizes(delta)?;
    if want_base != base_len {
        return Err(invalid(format!(
            "a delta for a base of {want_base} bytes, applied to {base_len}"
        )));
    }
    let mut buf = vec![0u8; CHUNK];
    let mut written = 0u64;
    let mut byte = [0u8; 1];
    loop {
        if delta.read(&mut byte)? == 0 {
            break;
        }
        let cmd = byte[0];
        let len = if cmd & 0x80 != 0 {
            // Copy: offset and size bytes present as the low 7 bits say.
            let mut field = |bits: u8, count: u32| -> io::Result<u64> {
                let mut v = 0u64;
                for k in 0..count {
                    if bits & (1 << k) != 0 {
                        delta.read_exact(&mut byte)?;
                        v |= u64::from(byte[0]) << (8 * k);
                    }
                }
                Ok(v)
            };
            let from = field(cmd & 0x0f, 4)?;
            let mut len = field((cmd >> 4) & 0x07, 3)?;
            if len == 0 {
                len = 0x10000;
            }
            if from.checked_add(len).is_none_or(|end| end > base_len) {
                return Err(invalid(format!(
                    "a delta copies {len} bytes at {from} from a base of {base_len}"
                )));
            }
            let mut done = 0u64;
            while done < len {
                let n = usize::try_from(len - done).unwrap_or(CHUNK).min(CHUNK);
                base.read_exact_at(&mut buf[..n], from + done)?;
                out.write_all(&buf[..n])?;
                done += n as u64;
            }
            len
        } else if cmd != 0 {
            // Insert the next `cmd` bytes.
            let n = usize::from(cmd);
            delta.read_exact(&mut buf[..n])?;
            out.write_all(&buf[..n])?;
            n as u64
        } else {
            return Err(invalid("a delta holds the reserved instruction 0".into()));
        };
        written += len;
        if written > size {
            return Err(invalid(format!(
                "a delta builds more than the {size} bytes it announces"
            )));
        }
    }
    if written != size {
        return Err(invalid(format!(
            "a delta builds {written} bytes, not the {size} it announces"
        )));
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(base: &[u8], delta: &[u8]) -> io::Result<Vec<u8>> {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(base).unwrap();
        let mut out = Vec::new();
        apply_delta(&f, &mut &delta[..], &mut out)?;
        Ok(out)
    }

    #[test]
    fn a_streamed_delta_copies_and_inserts() {
        let base = b"0123456789";
        // base 10, result 7: copy 3 bytes at offset 2, insert "ab", copy 2 at 8.
        let delta = [10, 7, 0x91, 2, 3, 2, b'a', b'b', 0x91, 8, 2];
        assert_eq!(apply(base, &delta).unwrap(), b"234ab89");
        // A copy of size 0 means 0x10000 bytes (more than one read), then
        // an insert: base 0x18000 (varint 80 80 06), result 0x10003 (83 80 04).
        let big: Vec<u8> = (0..0x18000u32).map(|i| (i % 251) as u8).collect();
        let delta = [
            0x80, 0x80, 0x06, 0x83, 0x80, 0x04, 0x80, 3, b'x', b'y', b'z',
        ];
        let want = [&big[..0x10000], b"xyz"].concat();
        assert_eq!(apply(&big, &delta).unwrap(), want);
    }

    /// How applying `delta` to `base` fails: the error's kind and message.
    fn refused(base: &[u8], delta: &[u8]) -> (io::ErrorKind, String) {
        let e = apply(base, delta).expect_err("the delta must be refused");
        (e.kind(), e.to_string())
    }

    #[test]
    fn a_streamed_delta_out_of_bounds_or_of_another_size_is_refused() {
        let base = b"0123456789";
        let bad = |m: &str| (io::ErrorKind::InvalidData, m.to_string());
        // A copy past the base's end (3 bytes at 9), refused before reading.
        assert_eq!(
            refused(base, &[10, 3, 0x91, 9, 3]),
            bad("a delta copies 3 bytes at 9 from a base of 10")
        );
        // The wrong base size.
        assert_eq!(
            refused(base, &[9, 1, 1, b'x']),
            bad("a delta for a base of 9 bytes, applied to 10")
        );
        // A result longer or shorter than announced.
        assert_eq!(
            refused(base, &[10, 1, 2, b'x', b'y']),
            bad("a delta builds more than the 1 bytes it announces")
        );
        assert_eq!(
            refused(base, &[10, 3, 1, b'x']),
            bad("a delta builds 1 bytes, not the 3 it announces")
        );
        // The reserved instruction.
        assert_eq!(
            refused(base, &[10, 0, 0]),
            bad("a delta holds the reserved instruction 0")
        );
        // An insert cut short, a truncated copy: the delta ends early.
        assert_eq!(
            refused(base, &[10, 3, 3, b'x']).0,
            io::ErrorKind::UnexpectedEof
        );
        assert_eq!(
            refused(base, &[10, 2, 0x91, 1]).0,
            io::ErrorKind::UnexpectedEof
        );
    }
}
