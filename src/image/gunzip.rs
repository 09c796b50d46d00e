//! A streaming gzip reader that checks every member's trailer and stops
//! at a limit, for layers pushed by anyone: `verify` compares them (a
//! gzip bomb is a mismatch) and `diff` reads them back (a bomb is an
//! error, stopped at the limit).

/// The decompressed bytes of a gzip stream (RFC 1952), every member of it
/// in turn, as containerd, Go's `gzip.Reader` and GNU gzip read it: a
/// member's header, its raw deflate data, then its trailer (CRC-32 and
/// size modulo 2^32 of what it inflated to), checked; then the next member,
/// if more bytes follow. A stream that fails once more than `limit` bytes
/// came out.
pub struct Gunzip<'a> {
    /// What is left after the current position.
    body: &'a [u8],
    state: Box<miniz_oxide::inflate::stream::InflateState>,
    /// The current member: its number (1 for the first), its CRC-32 and
    /// size so far.
    member: usize,
    crc: crc32fast::Hasher,
    member_out: u64,
    out: u64,
    limit: u64,
    done: bool,
    /// Why reading failed, for the caller (a tar reader drops it).
    pub fault: Option<String>,
}

/// The deflate data after the gzip member header at the start of `gz`.
fn member_body(gz: &[u8]) -> std::result::Result<&[u8], String> {
    if gz.len() < 18 || gz[0] != 0x1f || gz[1] != 0x8b || gz[2] != 8 {
        return Err("not gzip".into());
    }
    let flags = gz[3];
    let mut i = 10;
    let short = || "a truncated gzip header".to_string();
    if flags & 0x04 != 0 {
        let n = usize::from(*gz.get(i).ok_or_else(short)?)
            | usize::from(*gz.get(i + 1).ok_or_else(short)?) << 8;
        i += 2 + n;
    }
    for bit in [0x08, 0x10] {
        if flags & bit != 0 {
            let end = gz.get(i..).ok_or_else(short)?.iter().position(|&b| b == 0);
            i += end.ok_or_else(short)? + 1;
        }
    }
    if flags & 0x02 != 0 {
        i += 2;
    }
    gz.get(i..).ok_or_else(short)
}

impl<'a> Gunzip<'a> {
    /// A reader of the gzip stream `gz` that fails once more than `limit`
    /// bytes came out; an error when `gz` does not start as gzip.
    pub fn new(gz: &'a [u8], limit: u64) -> std::result::Result<Gunzip<'a>, String> {
        Ok(Gunzip {
            body: member_body(gz)?,
            state: miniz_oxide::inflate::stream::InflateState::new_boxed(
                miniz_oxide::DataFormat::Raw,
            ),
            member: 1,
            crc: crc32fast::Hasher::new(),
            member_out: 0,
            out: 0,
            limit,
            done: false,
            fault: None,
        })
    }

    /// Whether reading stopped at the limit.
    pub fn over_limit(&self) -> bool {
        self.out > self.limit
    }

    /// At the end of a member's deflate data: checks its trailer, then
    /// starts the next member or ends the stream.
    fn next_member(&mut self) -> std::result::Result<(), String> {
        let n = self.member;
        let trailer = self
            .body
            .get(..8)
            .ok_or_else(|| format!("gzip member {n} has no CRC-32 and size trailer"))?;
        let word = |i: usize| {
            u32::from_le_bytes([trailer[i], trailer[i + 1], trailer[i + 2], trailer[i + 3]])
        };
        let (crc, size) = (word(0), word(4));
        let crc_now = std::mem::take(&mut self.crc).finalize();
        if crc != crc_now {
            return Err(format!(
                "gzip member {n}'s CRC-32 is {crc:08x}, its data's is {crc_now:08x}"
            ));
        }
        // ISIZE is the size modulo 2^32.
        if u64::from(size) != self.member_out & 0xffff_ffff {
            return Err(format!(
                "gzip member {n} says it holds {size} bytes (modulo 2^32), it inflated to {}",
                self.member_out
            ));
        }
        self.body = &self.body[8..];
        if self.body.is_empty() {
            self.done = true;
            return Ok(());
        }
        // More bytes: another member (whatever follows must be one, as
        // Go's reader and so containerd require).
        self.body =
            member_body(self.body).map_err(|why| format!("after gzip member {n}: {why}"))?;
        self.member += 1;
        self.member_out = 0;
        self.state.reset_as(miniz_oxide::inflate::stream::ZeroReset);
        Ok(())
    }
}

impl std::io::Read for Gunzip<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let r = self.inflate_into(buf);
        if let Err(e) = &r
            && self.fault.is_none()
        {
            self.fault = Some(e.to_string());
        }
        r
    }
}

impl Gunzip<'_> {
    fn inflate_into(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use miniz_oxide::{MZFlush, MZStatus};
        let broken = |m: String| std::io::Error::new(std::io::ErrorKind::InvalidData, m);
        if self.done || buf.is_empty() {
            return Ok(0);
        }
        if self.over_limit() {
            return Err(broken(format!("more than {} bytes", self.limit)));
        }
        loop {
            let r = miniz_oxide::inflate::stream::inflate(
                &mut self.state,
                self.body,
                buf,
                MZFlush::None,
            );
            self.body = self.body.get(r.bytes_consumed..).unwrap_or_default();
            self.out += r.bytes_written as u64;
            self.member_out += r.bytes_written as u64;
            self.crc.update(&buf[..r.bytes_written]);
            let member_end = match r.status {
                Ok(MZStatus::StreamEnd) => true,
                Ok(_) | Err(miniz_oxide::MZError::Buf) => false,
                Err(e) => return Err(broken(format!("broken deflate data: {e:?}"))),
            };
            if self.over_limit() {
                return Err(broken(format!("more than {} bytes", self.limit)));
            }
            if member_end {
                self.next_member().map_err(broken)?;
            }
            if r.bytes_written > 0 || self.done {
                return Ok(r.bytes_written);
            }
            if r.bytes_consumed == 0 && !member_end {
                return Err(broken("truncated deflate data".into()));
            }
        }
    }
}
