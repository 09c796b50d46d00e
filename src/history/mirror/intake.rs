//! The pack a fetch receives, taken in as a stream, within bounds, and
//! stored without holding any object whole in memory.
//!
//! `gix` writes a received pack with an index by keeping each entry's
//! compressed bytes in memory while it reads them, then inflating every
//! object whole to hash it: a server that sends one object without end
//! (or a commit with a 2 GiB file) took the process's memory with it. Here
//! the stream goes to a file first, read once:
//!
//! - **Bounds** ([`Limits`]), each refused with an error that names it:
//!   the pack's bytes (counted as they arrive: a stream that never
//!   ends stops there), its objects (the count in its header, before any
//!   object is read), one object's size (the size each entry's header
//!   declares, before its data is read, and the size of the object a delta
//!   builds). An object whose data inflates past the size it declares is a
//!   broken pack, stopped at that point.
//! - **Large objects** stored whole (a blob of at least [`BIG`] bytes) are
//!   hashed as they inflate, and copied as they are, compressed, into a
//!   pack of their own with its index (written here: `gitformat-pack(5)`,
//!   index version 2). Git itself stores a large file so (`git add` of a
//!   file above `core.bigFileThreshold`).
//! - **Everything else** (commits, trees, settings files, deltas) goes
//!   through `gix` as before, from the file (rewritten without the large
//!   objects when there are any: a delta against one of them then names it
//!   by id). `gix` holds one of those at a time in memory (a delta is
//!   resolved whole, within the object-size bound).

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::FileExt as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use gix::ObjectId;
use gix::odb::pack;
use gix::odb::pack::data::entry::Header;

use super::Limits;
use crate::field::FetchBound;
use crate::history::blobs::Zlib;

/// Objects stored whole at least this large go into a pack of their own;
/// `gix` indexes the rest, one object in memory at a time.
pub(super) const BIG: u64 = 16 << 20;

/// What was taken in.
#[derive(Debug, Clone, Default)]
pub(super) struct Taken {
    /// Bytes of pack received.
    pub bytes: u64,
    /// Objects in it.
    pub objects: u64,
    /// The `.keep` files of the packs written: removed once the refs point
    /// into them.
    pub keep: Vec<std::path::PathBuf>,
}

/// Why the intake stopped.
#[derive(Debug)]
pub(super) enum Stop {
    /// A bound was passed: which, and what was sent past it.
    Bound(FetchBound, String),
    /// The pack is not a valid pack.
    Broken(String),
    /// The caller interrupted the fetch.
    Interrupted,
    /// Writing the pack failed locally.
    Local(String),
}

/// The marker a [`Tap`] error carries, to tell its refusals from the
/// stream's own errors once an entry's reader passed them on.
#[derive(Debug)]
enum Refusal {
    Bytes(u64),
    Interrupted,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Bytes(limit) => write!(f, "the pack is larger than {limit} bytes"),
            Refusal::Interrupted => f.write_str("interrupted"),
        }
    }
}

impl std::error::Error for Refusal {}

/// `bytes` as the flags' defaults are written: `1 GiB`, `100 MiB`.
pub(super) fn human(bytes: u64) -> String {
    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    if bytes >= GIB && bytes.is_multiple_of(GIB) {
        format!("{} GiB", bytes / GIB)
    } else if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{bytes} bytes")
    }
}

/// The input, copied to a file and counted as it is consumed, within a
/// byte bound; the pack's checksum and each entry's CRC-32 taken on the way.
struct Tap<'a> {
    input: &'a mut dyn BufRead,
    out: io::BufWriter<File>,
    /// Bytes consumed so far (the pack's offset).
    taken: u64,
    limit: u64,
    /// Over everything consumed while it is `Some` (all but the trailer).
    sha: Option<gix::hash::Hasher>,
    crc: crc32fast::Hasher,
    interrupt: &'a AtomicBool,
    /// A failed write to the file, reported at the next fill.
    failed: Option<io::Error>,
}

impl Read for Tap<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = {
            let have = self.fill_buf()?;
            let n = have.len().min(buf.len());
            buf[..n].copy_from_slice(&have[..n]);
            n
        };
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for Tap<'_> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        if self.interrupt.load(Ordering::Relaxed) {
            return Err(io::Error::other(Refusal::Interrupted));
        }
        let room = self.limit.saturating_sub(self.taken);
        let have = self.input.fill_buf()?;
        if room == 0 && !have.is_empty() {
            return Err(io::Error::other(Refusal::Bytes(self.limit)));
        }
        let n = have.len().min(usize::try_from(room).unwrap_or(usize::MAX));
        Ok(&have[..n])
    }

    fn consume(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        // The bytes just handed out by fill_buf, still in the input's buffer.
        if let Ok(have) = self.input.fill_buf() {
            let taken = &have[..n.min(have.len())];
            if let Some(sha) = &mut self.sha {
                sha.update(taken);
            }
            self.crc.update(taken);
            if let Err(e) = self.out.write_all(taken)
                && self.failed.is_none()
            {
                self.failed = Some(e);
            }
        }
        self.input.consume(n);
        self.taken += n as u64;
    }
}

/// A large object stored whole in the received pack.
struct Big {
    offset: u64,
    id: ObjectId,
    crc: u32,
}

/// Where the entries of the received pack start, and which are large.
struct Entries {
    /// Every entry's offset, in order; the last one ends at `end`.
    offsets: Vec<u64>,
    /// Where the checksum starts.
    end: u64,
    bigs: Vec<Big>,
}

impl Entries {
    /// The length of entry `i`: up to the next one, or to the checksum.
    fn len(&self, i: usize) -> u64 {
        self.offsets.get(i + 1).copied().unwrap_or(self.end) - self.offsets[i]
    }
}

fn stop_of(e: io::Error, at: &str) -> Stop {
    if let Some(r) = e.get_ref().and_then(|r| r.downcast_ref::<Refusal>()) {
        return match r {
            Refusal::Bytes(limit) => Stop::Bound(
                FetchBound::Bytes,
                format!(
                    "the server sent a pack larger than {}, and more was coming",
                    human(*limit)
                ),
            ),
            Refusal::Interrupted => Stop::Interrupted,
        };
    }
    match e.kind() {
        io::ErrorKind::UnexpectedEof => Stop::Broken(format!("the pack ends {at}")),
        io::ErrorKind::InvalidData | io::ErrorKind::InvalidInput | io::ErrorKind::Other => {
            Stop::Broken(format!("{at}: {e}"))
        }
        // The network: the connection broke off or timed out.
        _ => Stop::Broken(format!("{at}: {e}")),
    }
}

/// Reads the pack in `input` (a fetch response's pack section) into the
/// repository `repo`, within `bounds`. See the module docs.
pub(super) fn take(
    input: &mut dyn BufRead,
    repo: &gix::Repository,
    limits: &Limits,
    interrupt: &AtomicBool,
) -> Result<Taken, Stop> {
    let hash = repo.object_hash();
    let pack_dir = repo.objects.store_ref().path().join("pack");
    let local = |what: &str, e: io::Error| local_stop(&pack_dir, what, e);
    let received = tempfile::Builder::new()
        .prefix(".tmp-intake-")
        .tempfile_in(&pack_dir)
        .map_err(|e| local("creating a file for the pack", e))?;
    let file = received
        .as_file()
        .try_clone()
        .map_err(|e| local("opening the pack file", e))?;
    let mut tap = Tap {
        input,
        out: io::BufWriter::with_capacity(64 * 1024, file),
        taken: 0,
        limit: limits.max_fetch_bytes,
        sha: Some(gix::hash::hasher(hash)),
        crc: crc32fast::Hasher::new(),
        interrupt,
        failed: None,
    };
    let mut head = [0u8; pack::data::header::SIZE];
    tap.read_exact(&mut head)
        .map_err(|e| stop_of(e, "before its header"))?;
    let (_, count) = pack::data::header::decode(&head)
        .map_err(|e| Stop::Broken(format!("the server sent no pack ({e})")))?;
    let count = u64::from(count);
    if count > limits.max_objects {
        return Err(Stop::Bound(
            FetchBound::Objects,
            format!(
                "the server's pack holds {count} objects, more than the {} a fetch may hold",
                limits.max_objects
            ),
        ));
    }
    let mut entries = Entries {
        offsets: Vec::with_capacity(usize::try_from(count.min(1 << 16)).unwrap_or(0)),
        end: 0,
        bigs: Vec::new(),
    };
    let mut buf = vec![0u8; 64 * 1024];
    for _ in 0..count {
        let offset = tap.taken;
        if let Some(big) = read_entry(&mut tap, hash, limits, &mut buf)? {
            entries.bigs.push(big);
        }
        entries.offsets.push(offset);
    }
    entries.end = tap.taken;
    check_trailer(&mut tap, hash)?;
    let bytes = tap.taken;
    tap.out.flush().map_err(|e| local("writing the pack", e))?;
    drop(tap);
    let keep = index_received(&received, &entries, &pack_dir, repo, limits, interrupt)?;
    Ok(Taken {
        bytes,
        objects: count,
        keep,
    })
}

/// Reads the pack entry at the tap's offset, within `limits`: the large
/// object it stores whole, if it is one.
fn read_entry(
    tap: &mut Tap<'_>,
    hash: gix::hash::Kind,
    limits: &Limits,
    buf: &mut [u8],
) -> Result<Option<Big>, Stop> {
    let offset = tap.taken;
    tap.crc = crc32fast::Hasher::new();
    let at = || format!("in the object at offset {offset}");
    let entry = pack::data::Entry::from_read(&mut *tap, offset, hash.len_in_bytes())
        .map_err(|e| stop_of(e, &at()))?;
    let size = entry.decompressed_size;
    if size > limits.max_object_bytes {
        return Err(Stop::Bound(
            FetchBound::ObjectBytes,
            format!(
                "the server sent an object of {size} bytes (at offset {offset} of the pack), more than the {} one object may have",
                human(limits.max_object_bytes)
            ),
        ));
    }
    let big = matches!(entry.header, Header::Blob) && size >= BIG;
    let mut id = big.then(|| {
        let mut h = gix::hash::hasher(hash);
        h.update(format!("blob {size}\0").as_bytes());
        h
    });
    let delta = entry.header.is_delta();
    let mut delta_head = Vec::new();
    let mut z = Zlib::new(&mut *tap);
    let mut out = 0u64;
    loop {
        let n = z.read(buf).map_err(|e| stop_of(e, &at()))?;
        if n == 0 {
            break;
        }
        out += n as u64;
        if out > size {
            return Err(Stop::Broken(format!(
                "the object at offset {offset} inflates past the {size} bytes its header declares"
            )));
        }
        if let Some(h) = &mut id {
            h.update(&buf[..n]);
        }
        if delta && delta_head.len() < 20 {
            let more = (20 - delta_head.len()).min(n);
            delta_head.extend_from_slice(&buf[..more]);
        }
    }
    drop(z);
    if out != size {
        return Err(Stop::Broken(format!(
            "the object at offset {offset} inflates to {out} bytes, its header declares {size}"
        )));
    }
    if delta {
        // The delta's header: its base's size, then the object's.
        let mut sizes = &delta_head[..];
        let built = crate::history::blobs::delta_sizes(&mut sizes)
            .map(|(_, built)| built)
            .map_err(|e| Stop::Broken(format!("the delta at offset {offset}: {e}")))?;
        if built > limits.max_object_bytes {
            return Err(Stop::Bound(
                FetchBound::ObjectBytes,
                format!(
                    "the server sent a delta that builds an object of {built} bytes (at offset {offset} of the pack), more than the {} one object may have",
                    human(limits.max_object_bytes)
                ),
            ));
        }
    }
    id.map(|h| {
        let id = h
            .try_finalize()
            .map_err(|e| Stop::Broken(format!("hashing the object at offset {offset}: {e}")))?;
        Ok(Big {
            offset,
            id,
            crc: tap.crc.clone().finalize(),
        })
    })
    .transpose()
}

/// Checks the pack's trailer (the checksum of everything before it), then
/// drains what follows it.
fn check_trailer(tap: &mut Tap<'_>, hash: gix::hash::Kind) -> Result<(), Stop> {
    // The trailer: the checksum of everything before it.
    let want = tap
        .sha
        .take()
        .map(|h| h.try_finalize())
        .transpose()
        .map_err(|e| Stop::Broken(format!("hashing the pack: {e}")))?;
    let mut trailer = vec![0u8; hash.len_in_bytes()];
    tap.read_exact(&mut trailer)
        .map_err(|e| stop_of(e, "before its checksum"))?;
    if want.is_some_and(|w| w.as_slice() != trailer.as_slice()) {
        return Err(Stop::Broken(
            "the pack's checksum is not that of its content".into(),
        ));
    }
    // Whatever the server sends after the pack counts too (a stream that
    // never ends stops at the bound).
    io::copy(tap, &mut io::sink()).map_err(|e| stop_of(e, "after the pack"))?;
    Ok(())
}

/// Indexes the received pack into the repository: as it came, or, when it
/// holds large objects, as a pack of those and a pack of the rest. The
/// `.keep` files of the packs written.
fn index_received(
    received: &tempfile::NamedTempFile,
    entries: &Entries,
    pack_dir: &Path,
    repo: &gix::Repository,
    limits: &Limits,
    interrupt: &AtomicBool,
) -> Result<Vec<std::path::PathBuf>, Stop> {
    let hash = repo.object_hash();
    let mut keep = Vec::new();
    if entries.bigs.is_empty() {
        keep.extend(index_with_gix(received.path(), repo, limits, interrupt)?);
    } else {
        let file = received.as_file();
        keep.extend(
            write_big_pack(file, entries, pack_dir, hash)
                .map_err(|e| local_stop(pack_dir, "writing the pack of large objects", e))?,
        );
        if entries.offsets.len() > entries.bigs.len() {
            let rest = tempfile::Builder::new()
                .prefix(".tmp-intake-")
                .tempfile_in(pack_dir)
                .map_err(|e| local_stop(pack_dir, "creating a file for the pack", e))?;
            write_rest(file, entries, rest.as_file(), hash)
                .map_err(|e| local_stop(pack_dir, "rewriting the pack", e))?;
            keep.extend(index_with_gix(rest.path(), repo, limits, interrupt)?);
        }
    }
    Ok(keep)
}

/// A failure of the local disk, `what` in `pack_dir`.
fn local_stop(pack_dir: &Path, what: &str, e: io::Error) -> Stop {
    Stop::Local(format!("{what} in {}: {e}", pack_dir.display()))
}

/// Indexes the pack at `path` with `gix` into the repository (a thin
/// pack's missing bases added from it), within the object-size bound.
fn index_with_gix(
    path: &Path,
    repo: &gix::Repository,
    limits: &Limits,
    interrupt: &AtomicBool,
) -> Result<Option<std::path::PathBuf>, Stop> {
    let pack_dir = repo.objects.store_ref().path().join("pack");
    let file = File::open(path)
        .map_err(|e| Stop::Local(format!("reading the received pack {}: {e}", path.display())))?;
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let options = pack::bundle::write::Options {
        thread_limit: None,
        iteration_mode: pack::data::input::Mode::Verify,
        index_version: pack::index::Version::default(),
        alloc_limit_bytes: Some(usize::try_from(limits.max_object_bytes).unwrap_or(usize::MAX)),
        compression: gix::zlib::Compression::default(),
    };
    let outcome = pack::Bundle::write_to_directory(
        &mut reader,
        Some(&pack_dir),
        &mut gix::progress::Discard,
        interrupt,
        Some(repo.objects.clone()),
        repo.object_hash(),
        options,
    )
    .map_err(|e| {
        if interrupt.load(Ordering::Relaxed) {
            Stop::Interrupted
        } else {
            Stop::Broken(format!(
                "indexing the pack: {}",
                crate::error::error_chain(&e)
            ))
        }
    })?;
    Ok(outcome.keep_path)
}

/// Copies `len` bytes at `from` of `file` to `out`.
fn copy_range(file: &File, from: u64, len: u64, out: &mut impl Write) -> io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut done = 0u64;
    while done < len {
        let n = usize::try_from(len - done)
            .unwrap_or(usize::MAX)
            .min(buf.len());
        file.read_exact_at(&mut buf[..n], from + done)?;
        out.write_all(&buf[..n])?;
        done += n as u64;
    }
    Ok(())
}

/// A writer that hashes what goes through it and counts it.
struct Hashed<W> {
    inner: W,
    sha: gix::hash::Hasher,
    len: u64,
}

impl<W: Write> Write for Hashed<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.sha.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl<W: Write> Hashed<W> {
    fn new(inner: W, hash: gix::hash::Kind) -> Hashed<W> {
        Hashed {
            inner,
            sha: gix::hash::hasher(hash),
            len: 0,
        }
    }

    /// Writes the checksum of everything so far and returns it.
    fn finish(mut self) -> io::Result<(ObjectId, W)> {
        let id = self.sha.try_finalize().map_err(io::Error::other)?;
        self.inner.write_all(id.as_slice())?;
        self.inner.flush()?;
        Ok((id, self.inner))
    }
}

/// The large objects of the received pack (`file`), copied as they are
/// into a pack of their own with its index, moved into `pack_dir` (with a
/// `.keep` file, as `gix` leaves its packs until the refs point into
/// them). Returns the `.keep` file.
fn write_big_pack(
    file: &File,
    entries: &Entries,
    pack_dir: &Path,
    hash: gix::hash::Kind,
) -> io::Result<Option<std::path::PathBuf>> {
    let count = u32::try_from(entries.bigs.len()).map_err(io::Error::other)?;
    let data = tempfile::Builder::new()
        .prefix(".tmp-intake-")
        .tempfile_in(pack_dir)?;
    let mut out = Hashed::new(
        io::BufWriter::with_capacity(64 * 1024, data.as_file().try_clone()?),
        hash,
    );
    out.write_all(&pack::data::header::encode(pack::data::Version::V2, count))?;
    let mut placed = Vec::with_capacity(entries.bigs.len());
    for big in &entries.bigs {
        let i = entries
            .offsets
            .binary_search(&big.offset)
            .map_err(|_| io::Error::other("a large object's entry went missing"))?;
        let at = out.len;
        copy_range(file, big.offset, entries.len(i), &mut out)?;
        placed.push((big.id, big.crc, at));
    }
    let (pack_id, _) = out.finish()?;
    placed.sort_by_key(|a| a.0);
    let index = tempfile::Builder::new()
        .prefix(".tmp-intake-")
        .tempfile_in(pack_dir)?;
    let mut idx = Hashed::new(
        io::BufWriter::with_capacity(64 * 1024, index.as_file().try_clone()?),
        hash,
    );
    write_index_v2(&mut idx, &placed, &pack_id)?;
    idx.finish()?;
    let name = format!("pack-{}", pack_id.to_hex());
    let keep = pack_dir.join(format!("{name}.keep"));
    std::fs::write(&keep, "receiving large objects\n")?;
    data.persist(pack_dir.join(format!("{name}.pack")))
        .map_err(|e| e.error)?;
    index
        .persist(pack_dir.join(format!("{name}.idx")))
        .map_err(|e| e.error)?;
    Ok(Some(keep))
}

/// A pack index, version 2 (`gitformat-pack(5)`), of `placed` (object
/// id, CRC-32 and offset of each entry, sorted by id) for the pack whose
/// checksum is `pack_id`; the index's own checksum is the caller's.
fn write_index_v2(
    out: &mut impl Write,
    placed: &[(ObjectId, u32, u64)],
    pack_id: &ObjectId,
) -> io::Result<()> {
    out.write_all(&[0xff, b't', b'O', b'c', 0, 0, 0, 2])?;
    let mut fanout = [0u32; 256];
    for (id, _, _) in placed {
        fanout[usize::from(id.as_slice()[0])] += 1;
    }
    let mut total = 0u32;
    for n in fanout {
        total += n;
        out.write_all(&total.to_be_bytes())?;
    }
    for (id, _, _) in placed {
        out.write_all(id.as_slice())?;
    }
    for (_, crc, _) in placed {
        out.write_all(&crc.to_be_bytes())?;
    }
    let mut large = Vec::new();
    for (_, _, offset) in placed {
        let word = match u32::try_from(*offset) {
            Ok(o) if o < 0x8000_0000 => o,
            _ => {
                let at = u32::try_from(large.len()).map_err(io::Error::other)?;
                large.push(*offset);
                0x8000_0000 | at
            }
        };
        out.write_all(&word.to_be_bytes())?;
    }
    for offset in large {
        out.write_all(&offset.to_be_bytes())?;
    }
    out.write_all(pack_id.as_slice())
}

/// The received pack (`file`) without its large objects, into `out`: the
/// entries in their order, each copied as it is, except that a delta whose
/// base is a large object names it by id, and a delta that names its base
/// by offset gets that base's new offset.
fn write_rest(file: &File, entries: &Entries, out: &File, hash: gix::hash::Kind) -> io::Result<()> {
    let broken = |m: String| io::Error::new(io::ErrorKind::InvalidData, m);
    let kept = entries.offsets.len() - entries.bigs.len();
    let count = u32::try_from(kept).map_err(io::Error::other)?;
    let mut w = Hashed::new(io::BufWriter::with_capacity(64 * 1024, out), hash);
    w.write_all(&pack::data::header::encode(pack::data::Version::V2, count))?;
    let big_at: HashMap<u64, ObjectId> = entries.bigs.iter().map(|b| (b.offset, b.id)).collect();
    let mut moved: HashMap<u64, u64> = HashMap::new();
    // An entry's header: at most 10 size bytes and a 10-byte distance or
    // a 64-byte id after the type byte.
    let mut head = [0u8; 96];
    for (i, &offset) in entries.offsets.iter().enumerate() {
        if big_at.contains_key(&offset) {
            continue;
        }
        let len = entries.len(i);
        let at = w.len;
        moved.insert(offset, at);
        let n = usize::try_from(len).unwrap_or(usize::MAX).min(head.len());
        file.read_exact_at(&mut head[..n], offset)?;
        let entry = pack::data::Entry::from_bytes(&head[..n], offset, hash)
            .map_err(|e| broken(format!("the entry at {offset}: {e}")))?;
        let Header::OfsDelta { base_distance } = entry.header else {
            copy_range(file, offset, len, &mut w)?;
            continue;
        };
        let base = offset
            .checked_sub(base_distance)
            .ok_or_else(|| broken(format!("a delta at {offset} points before the pack")))?;
        let header = match (big_at.get(&base), moved.get(&base)) {
            (Some(id), _) => Header::RefDelta { base_id: *id },
            (None, Some(new_base)) => Header::OfsDelta {
                base_distance: at - new_base,
            },
            (None, None) => {
                return Err(broken(format!(
                    "a delta at {offset} has no entry at its base"
                )));
            }
        };
        header.write_to(entry.decompressed_size, &mut w)?;
        let header_len = entry.header_size() as u64;
        copy_range(file, offset + header_len, len - header_len, &mut w)?;
    }
    w.finish()?;
    Ok(())
}

#[cfg(test)]
#[path = "intake_tests.rs"]
mod tests;
