//! A gzip writer with every byte pinned: miniz_oxide's deflate with fixed
//! parameters (the exact crate version is pinned in Cargo.toml), header mtime 0,
//! no file name, XFL 0 and OS byte 255 ("unknown"). It does not go through
//! flate2, whose backend can be switched by any other crate in the build.

use std::io::{self, Write};

use miniz_oxide::deflate::core::{CompressorOxide, TDEFLFlush, TDEFLStatus, compress};

/// The most candidate matches deflate examines at each position. Every layer
/// is compressed with miniz_oxide's lazy matching and this many probes,
/// between its level 5 (32) and level 6 (128). Format version 2 (see
/// docs/format.md, rule 5): at 128 probes miniz_oxide was slower than
/// `gzip -6`, for a layer only 1.7% smaller.
pub const PROBES: u32 = 64;

/// miniz_oxide's compressor flags: the probe count in the low bits, no
/// greedy parsing, no zlib header (the gzip framing is written here).
const FLAGS: u32 = PROBES;

const HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255];

/// Streams gzip output into `W`.
pub struct GzipWriter<W: Write> {
    inner: W,
    compressor: Box<CompressorOxide>,
    crc: crc32fast::Hasher,
    len: u32,
    buf: Vec<u8>,
}

impl<W: Write> GzipWriter<W> {
    /// Writes the fixed gzip header and prepares the compressor.
    pub fn new(mut inner: W) -> io::Result<Self> {
        inner.write_all(&HEADER)?;
        Ok(GzipWriter {
            inner,
            compressor: Box::new(CompressorOxide::new(FLAGS)),
            crc: crc32fast::Hasher::new(),
            len: 0,
            buf: vec![0; 256 * 1024],
        })
    }

    fn run(&mut self, mut input: &[u8], flush: TDEFLFlush) -> io::Result<()> {
        loop {
            let (status, read, written) =
                compress(&mut self.compressor, input, &mut self.buf, flush);
            self.inner.write_all(&self.buf[..written])?;
            input = &input[read..];
            match status {
                TDEFLStatus::Done => return Ok(()),
                TDEFLStatus::Okay => {
                    // With no flush, the compressor is done once it consumed all input and
                    // had room to spare; with Finish it keeps going until Done.
                    if input.is_empty()
                        && written < self.buf.len()
                        && !matches!(flush, TDEFLFlush::Finish)
                    {
                        return Ok(());
                    }
                }
                TDEFLStatus::BadParam | TDEFLStatus::PutBufFailed => {
                    return Err(io::Error::other(format!("deflate failed: {status:?}")));
                }
            }
        }
    }

    /// Compresses all of `data`.
    pub fn write_all(&mut self, data: &[u8]) -> io::Result<()> {
        self.crc.update(data);
        self.len = self.len.wrapping_add(data.len() as u32);
        self.run(data, TDEFLFlush::None)
    }

    /// Ends the deflate stream, writes the trailer and returns the writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.run(&[], TDEFLFlush::Finish)?;
        let crc = self.crc.clone().finalize();
        self.inner.write_all(&crc.to_le_bytes())?;
        self.inner.write_all(&self.len.to_le_bytes())?;
        Ok(self.inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// Decodes `gz` with the system gzip: an independent implementation.
    fn system_gunzip(gz: Vec<u8>) -> Vec<u8> {
        use std::io::Write as _;
        let mut child = std::process::Command::new("gzip")
            .args(["-d", "-c"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("gzip must be installed (scripts/deps.sh installs it)");
        let mut stdin = child.stdin.take().unwrap();
        let writer = std::thread::spawn(move || stdin.write_all(&gz));
        let mut back = Vec::new();
        child.stdout.take().unwrap().read_to_end(&mut back).unwrap();
        writer.join().unwrap().unwrap();
        assert!(
            child.wait().unwrap().success(),
            "gzip -d refused the stream"
        );
        back
    }

    #[test]
    fn round_trips_through_an_independent_decoder() {
        let data: Vec<u8> = (0..3_000_000u32)
            .map(|i| (i % 251) as u8 ^ (i >> 13) as u8)
            .collect();
        let mut gz = GzipWriter::new(Vec::new()).unwrap();
        for chunk in data.chunks(70_001) {
            gz.write_all(chunk).unwrap();
        }
        let out = gz.finish().unwrap();
        assert_eq!(&out[..10], &HEADER);
        let mut back = Vec::new();
        // Decode with the system gzip: an independent implementation.
        let mut child = std::process::Command::new("gzip")
            .args(["-d", "-c"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let writer = std::thread::spawn(move || stdin.write_all(&out));
        child.stdout.take().unwrap().read_to_end(&mut back).unwrap();
        writer.join().unwrap().unwrap();
        assert!(child.wait().unwrap().success());
        assert_eq!(back, data);
    }

    #[test]
    fn empty_input_is_valid_gzip() {
        let out = GzipWriter::new(Vec::new()).unwrap().finish().unwrap();
        assert_eq!(&out[..10], &HEADER);
        assert_eq!(&out[out.len() - 4..], &[0, 0, 0, 0]);
        assert!(system_gunzip(out).is_empty());
    }
}
