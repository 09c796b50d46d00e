//! Writes the one layer: a deterministic tar stream, gzip-compressed, hashed
//! on both sides, streamed to a temporary file. The tar side and the
//! compress side run on two threads joined by a small bounded channel, so
//! memory stays flat however large the folder is.

use std::io::{self, Read, Write};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use sha2::{Digest as _, Sha256};
use tempfile::NamedTempFile;

use super::gzip::GzipWriter;
use crate::error::{Error, Result};
use crate::source::{EntryKind, Source, lfs};

/// The mtime of every entry: fixed, so the layer depends only on paths,
/// modes and contents.
pub const MTIME: u64 = 0;

const CHUNK: usize = 64 * 1024;

/// The layer as written: the compressed bytes live in `file`.
#[derive(Debug)]
pub struct LayerBlob {
    /// The compressed layer on disk.
    pub file: NamedTempFile,
    /// Removes `file` if a signal stops the run (see [`crate::scratch`]).
    pub scratch: crate::scratch::Registered,
    /// `sha256:` of the compressed bytes (the blob digest).
    pub digest: String,
    /// Compressed size in bytes.
    pub size: u64,
    /// `sha256:` of the uncompressed tar (the config's diff_id).
    pub diff_id: String,
    /// Uncompressed tar size in bytes.
    pub uncompressed_size: u64,
}

/// Hashes and counts everything written through it.
struct Hashing<W> {
    inner: W,
    hash: Sha256,
    len: u64,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hash.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Collects the tar stream into chunks and hands them to the compressor.
struct ChunkSender {
    tx: SyncSender<Vec<u8>>,
    buf: Vec<u8>,
}

impl ChunkSender {
    fn send(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let full = std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK));
        self.tx
            .send(full)
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "compressor stopped"))
    }
}

impl Write for ChunkSender {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let room = CHUNK - self.buf.len();
        let n = room.min(data.len());
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() == CHUNK {
            self.send()?;
        }
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Reads exactly `remaining` bytes and fails if the file is shorter or
/// longer than when the folder was listed.
struct Exact<'p, R> {
    inner: R,
    remaining: u64,
    /// Counts the bytes read (shown on a terminal).
    progress: &'p crate::progress::Task,
}

impl<R: Read> Read for Exact<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.remaining == 0 {
            let mut probe = [0u8; 1];
            return match self.inner.read(&mut probe)? {
                0 => Ok(0),
                _ => Err(io::Error::other(
                    "the file grew while it was being packaged",
                )),
            };
        }
        let want = buf
            .len()
            .min(self.remaining.min(usize::MAX as u64) as usize);
        let n = self.inner.read(&mut buf[..want])?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the file shrank while it was being packaged",
            ));
        }
        self.remaining -= n as u64;
        self.progress.inc(n as u64);
        Ok(n)
    }
}

fn header(kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(kind);
    h.set_mode(mode);
    h.set_size(size);
    h.set_mtime(MTIME);
    h.set_uid(0);
    h.set_gid(0);
    h
}

/// The refusal of a git LFS pointer at `path`: the image would mount the
/// pointer's text, never the file (the commit holds only the pointer).
fn lfs_pointer(source: &Source, path: &str, p: &lfs::Pointer) -> Error {
    Error::Source {
        path: source.root.join(path),
        message: format!(
            "is a git LFS pointer (oid {}, size {}): the commit holds only this pointer, so the image \
             would mount its text, not the file",
            p.oid, p.size
        )
        .into(),
        hint: Some(crate::text![
            "settings files are small: stop tracking the file with LFS (`git lfs untrack PATTERN`, \
             `git add --renormalize .`, commit), or check the LFS files out (`git lfs pull`; \
             actions/checkout `lfs: true`) and package the disk (",
            crate::field::Mention::Set(crate::field::Field::Source, "worktree".into()),
            ")"
        ]),
    }
}

/// Writes the tar stream of `source` to `out`. Returns the uncompressed digest and size.
fn write_tar<W: Write>(
    source: &Source,
    out: W,
    progress: &crate::progress::Task,
) -> Result<(String, u64)> {
    let hashing = Hashing {
        inner: out,
        hash: Sha256::new(),
        len: 0,
    };
    let mut tar = tar::Builder::new(hashing);
    for entry in source.entries.iter() {
        let fail = |e: io::Error| {
            let display = source.root.join(entry.path);
            Error::io(format!("packaging {}", display.display()), e)
        };
        match entry.kind {
            EntryKind::Dir => {
                let mut h = header(tar::EntryType::Directory, 0o755, 0);
                tar.append_data(&mut h, format!("{}/", entry.path), io::empty())
                    .map_err(fail)?;
            }
            EntryKind::File {
                size,
                executable,
                content,
            } => {
                let mode = if executable { 0o755 } else { 0o644 };
                let mut h = header(tar::EntryType::Regular, mode, size);
                let reader = source.open(entry.path, content, size).map_err(fail)?;
                let mut exact = Exact {
                    inner: reader,
                    remaining: size,
                    progress,
                };
                if size < lfs::MAX_POINTER_BYTES {
                    // Small enough to be a git LFS pointer: read whole, checked.
                    let mut bytes = Vec::new();
                    exact.read_to_end(&mut bytes).map_err(fail)?;
                    if let Some(p) = lfs::pointer(&bytes) {
                        return Err(lfs_pointer(source, entry.path, &p));
                    }
                    tar.append_data(&mut h, entry.path, bytes.as_slice())
                        .map_err(fail)?;
                } else {
                    tar.append_data(&mut h, entry.path, exact).map_err(fail)?;
                }
            }
            EntryKind::Symlink { target } => {
                let mut h = header(tar::EntryType::Symlink, 0o777, 0);
                tar.append_link(&mut h, entry.path, target).map_err(fail)?;
            }
        }
    }
    let hashing = tar
        .into_inner()
        .map_err(|e| Error::io("finishing the layer", e))?;
    Ok((
        format!("sha256:{}", hex::encode(hashing.hash.finalize())),
        hashing.len,
    ))
}

fn compress(rx: Receiver<Vec<u8>>, file: &std::fs::File) -> io::Result<(String, u64)> {
    let out = Hashing {
        inner: io::BufWriter::with_capacity(CHUNK, file),
        hash: Sha256::new(),
        len: 0,
    };
    let mut gz = GzipWriter::new(out)?;
    for chunk in rx {
        gz.write_all(&chunk)?;
    }
    let mut out = gz.finish()?;
    out.flush()?;
    Ok((
        format!("sha256:{}", hex::encode(out.hash.finalize())),
        out.len,
    ))
}

/// Packages `source` into a gzip-compressed tar layer in a temporary file.
pub fn write(source: &Source) -> Result<LayerBlob> {
    let (file, scratch) = crate::scratch::layer_file()?;
    // On a terminal: the bytes of the folder's files packaged so far.
    let progress = crate::progress::Task::start(
        || format!("packaging {}", source.root.display()),
        Some(
            source
                .entries
                .iter()
                .map(|e| match e.kind {
                    EntryKind::File { size, .. } => size,
                    _ => 0,
                })
                .sum(),
        ),
        crate::progress::Unit::Bytes,
    );
    let (tx, rx) = sync_channel::<Vec<u8>>(4);
    let (tar_result, gz_result) = std::thread::scope(|s| {
        let handle = s.spawn(|| compress(rx, file.as_file()));
        let mut sender = ChunkSender {
            tx,
            buf: Vec::with_capacity(CHUNK),
        };
        let tar_result = write_tar(source, &mut sender, &progress).and_then(|r| {
            sender
                .send()
                .map_err(|e| Error::io("packaging the layer", e))?;
            Ok(r)
        });
        drop(sender);
        let gz_result = handle.join();
        (tar_result, gz_result)
    });
    let gz_result = gz_result.map_err(|_| {
        Error::io(
            "compressing the layer",
            io::Error::other("compressor thread panicked"),
        )
    })?;
    // A compressor failure (disk full) explains a tar-side broken pipe: report it first.
    let (digest, size) = gz_result.map_err(|e| Error::io("writing the compressed layer", e))?;
    let (diff_id, uncompressed_size) = tar_result?;
    Ok(LayerBlob {
        file,
        scratch,
        digest,
        size,
        diff_id,
        uncompressed_size,
    })
}
