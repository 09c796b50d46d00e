//! The HTTP backend of a fetch, with a bound on what a git server sends
//! before the pack: `gix`'s `reqwest` backend, each answer's body counted
//! as `gix` reads it.
//!
//! The pack itself goes to disk through `super::intake`, within
//! the controller's `--fetch-max-bytes`. Everything before it is parsed into memory by
//! `gix`: the ref advertisement (`info/refs` in protocol v1, the `ls-refs`
//! answer in v2: one entry per ref) and the negotiation's acknowledgements.
//! A server that never ends those grew the process by hundreds of MB a
//! second. So until the pack starts ([`Budget::pack_started`]) the bodies
//! share one byte budget (`--fetch-max-ref-bytes`) and the lines naming an
//! object (a ref, `<40 hex> <name>`, or `unborn <name>`) one count
//! (`--fetch-max-refs`); past either, the read fails, `gix` drops the
//! connection, and [`Budget::tripped`] says which bound, for the error.

use std::io::{self, BufRead, Read};
use std::sync::{Arc, Mutex};

use gix::protocol::transport::client::blocking_io::http::{
    self, GetResponse, Http, PostBodyDataKind, PostResponse,
};

use crate::field::FetchBound;

/// What a fetch allows before its pack, and what has come so far.
#[derive(Debug)]
pub(super) struct Budget {
    max_bytes: u64,
    max_refs: u64,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    bytes: u64,
    refs: u64,
    /// The ref map is read: what follows is the negotiation.
    refs_read: bool,
    /// The pack started: the intake bounds the rest.
    pack: bool,
    /// The bound passed, and what passed it in words, once it was.
    tripped: Option<(FetchBound, String)>,
}

impl Budget {
    /// A budget of `max_bytes` and `max_refs`.
    pub(super) fn new(max_bytes: u64, max_refs: u64) -> Arc<Budget> {
        Arc::new(Budget {
            max_bytes,
            max_refs,
            state: Mutex::new(State::default()),
        })
    }

    /// The refs are read; the negotiation's answers count on.
    pub(super) fn refs_read(&self) {
        if let Ok(mut s) = self.state.lock() {
            s.refs_read = true;
        }
    }

    /// The pack started: from here the intake counts.
    pub(super) fn pack_started(&self) {
        if let Ok(mut s) = self.state.lock() {
            s.pack = true;
        }
    }

    /// The bound the server passed, and what passed it in words.
    pub(super) fn tripped(&self) -> Option<(FetchBound, String)> {
        self.state.lock().ok().and_then(|s| s.tripped.clone())
    }

    /// Counts `bytes` more, holding `refs` more refs; the error once a
    /// bound is passed.
    fn count(&self, bytes: u64, refs: u64) -> io::Result<()> {
        let Ok(mut s) = self.state.lock() else {
            return Ok(());
        };
        if s.pack {
            return Ok(());
        }
        if let Some((_, t)) = &s.tripped {
            return Err(io::Error::other(t.clone()));
        }
        s.bytes += bytes;
        s.refs += refs;
        let what = if s.refs_read {
            "answers before the pack (the negotiation)"
        } else {
            "ref advertisement"
        };
        let passed = if s.refs > self.max_refs {
            Some((
                FetchBound::Refs,
                format!(
                    "the server's ref advertisement lists more than {} refs, and more were coming",
                    self.max_refs
                ),
            ))
        } else if s.bytes > self.max_bytes {
            Some((
                FetchBound::RefBytes,
                format!(
                    "the server's {what} is larger than {}, and more was coming",
                    super::intake::human(self.max_bytes)
                ),
            ))
        } else {
            None
        };
        match passed {
            Some((bound, t)) => {
                s.tripped = Some((bound, t.clone()));
                Err(io::Error::other(t))
            }
            None => Ok(()),
        }
    }
}

/// `gix`'s `reqwest` backend with every answer's body counted against a
/// [`Budget`].
pub(super) struct Bounded {
    inner: http::reqwest::Remote,
    budget: Arc<Budget>,
}

impl Bounded {
    /// The backend, counting against `budget`.
    pub(super) fn new(budget: Arc<Budget>) -> Bounded {
        Bounded {
            inner: http::reqwest::Remote::default(),
            budget,
        }
    }
}

type Inner = http::reqwest::Remote;

impl Http for Bounded {
    type Headers = <Inner as Http>::Headers;
    type ResponseBody = Counted<<Inner as Http>::ResponseBody>;
    type PostBody = <Inner as Http>::PostBody;

    fn get(
        &mut self,
        url: &str,
        base_url: &str,
        headers: impl IntoIterator<Item = impl AsRef<str>>,
    ) -> gix::Result<GetResponse<Self::Headers, Self::ResponseBody>> {
        let r = self.inner.get(url, base_url, headers)?;
        Ok(GetResponse {
            headers: r.headers,
            body: Counted::new(r.body, self.budget.clone()),
        })
    }

    fn post(
        &mut self,
        url: &str,
        base_url: &str,
        headers: impl IntoIterator<Item = impl AsRef<str>>,
        body: PostBodyDataKind,
    ) -> gix::Result<PostResponse<Self::Headers, Self::ResponseBody, Self::PostBody>> {
        let r = self.inner.post(url, base_url, headers, body)?;
        Ok(PostResponse {
            post_body: r.post_body,
            headers: r.headers,
            body: Counted::new(r.body, self.budget.clone()),
        })
    }

    fn configure(&mut self, config: &dyn std::any::Any) -> gix::Result<()> {
        self.inner.configure(config)
    }

    fn redirected_base_url(&self) -> Option<String> {
        self.inner.redirected_base_url()
    }
}

/// A response body whose bytes, and the packet lines in them that name an
/// object, are counted as they are first seen.
pub(super) struct Counted<B> {
    inner: B,
    budget: Arc<Budget>,
    /// Bytes at the front of the inner buffer already counted.
    seen: usize,
    lines: Lines,
}

impl<B> Counted<B> {
    fn new(inner: B, budget: Arc<Budget>) -> Counted<B> {
        Counted {
            inner,
            budget,
            seen: 0,
            lines: Lines::default(),
        }
    }
}

impl<B: BufRead> BufRead for Counted<B> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        let buf = self.inner.fill_buf()?;
        if buf.len() > self.seen {
            let new = &buf[self.seen..];
            let refs = self.lines.scan(new);
            self.budget.count(new.len() as u64, refs)?;
            self.seen = buf.len();
        }
        Ok(buf)
    }

    fn consume(&mut self, amt: usize) {
        self.inner.consume(amt);
        self.seen = self.seen.saturating_sub(amt);
    }
}

impl<B: BufRead> Read for Counted<B> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let n = {
            let buf = self.fill_buf()?;
            let n = buf.len().min(out.len());
            out[..n].copy_from_slice(&buf[..n]);
            n
        };
        self.consume(n);
        Ok(n)
    }
}

/// Where a packet-line stream is: reading a line's 4-digit length, or its
/// payload (the first bytes kept, to tell whether it names an object).
#[derive(Debug, Default)]
struct Lines {
    header: Vec<u8>,
    /// Payload bytes left of the current line.
    left: usize,
    /// The current line's first bytes (at most [`HEAD`]).
    head: Vec<u8>,
    /// The current line was classified.
    classified: bool,
}

/// How many bytes of a line tell whether it names an object:
/// `<40 hex> ` (or `unborn `).
const HEAD: usize = 41;

impl Lines {
    /// Scans `bytes`; returns how many lines that name an object were
    /// completed or classified in them. Not packet lines (a broken
    /// server): nothing is counted but the bytes.
    fn scan(&mut self, mut bytes: &[u8]) -> u64 {
        let mut refs = 0;
        while !bytes.is_empty() {
            if self.left == 0 {
                let take = (4 - self.header.len()).min(bytes.len());
                self.header.extend_from_slice(&bytes[..take]);
                bytes = &bytes[take..];
                if self.header.len() < 4 {
                    break;
                }
                let len = std::str::from_utf8(&self.header)
                    .ok()
                    .and_then(|h| usize::from_str_radix(h, 16).ok())
                    .unwrap_or(0);
                self.header.clear();
                // 0000 flush, 0001 delimiter, 0002 response end: no payload.
                self.left = len.saturating_sub(4);
                self.head.clear();
                self.classified = false;
                continue;
            }
            let take = self.left.min(bytes.len());
            if !self.classified {
                let want = (HEAD - self.head.len()).min(take);
                self.head.extend_from_slice(&bytes[..want]);
                if self.head.len() == HEAD || self.left == take {
                    self.classified = true;
                    if names_object(&self.head) {
                        refs += 1;
                    }
                }
            }
            self.left -= take;
            bytes = &bytes[take..];
        }
        refs
    }
}

/// `<40 hex> ...` (a ref, or a peeled tag's line) or `unborn ...`.
fn names_object(head: &[u8]) -> bool {
    head.starts_with(b"unborn ")
        || (head.len() == HEAD && head[..40].iter().all(u8::is_ascii_hexdigit) && head[40] == b' ')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(s: &str) -> Vec<u8> {
        let mut v = format!("{:04x}", s.len() + 4).into_bytes();
        v.extend_from_slice(s.as_bytes());
        v
    }

    #[test]
    fn lines_naming_objects_are_counted_across_any_split() {
        let oid = "1".repeat(40);
        let mut stream = pkt("version 2\n");
        stream.extend(pkt("agent=git/2\n"));
        stream.extend(b"0000");
        stream.extend(pkt(&format!("{oid} refs/heads/main\n")));
        stream.extend(pkt(&format!("{oid} refs/tags/v1 peeled:{oid}\n")));
        stream.extend(pkt("unborn HEAD symref-target:refs/heads/x\n"));
        stream.extend(b"0000");
        for chunk in [1, 2, 3, 7, 40, 41, 4096] {
            let mut lines = Lines::default();
            let n: u64 = stream.chunks(chunk).map(|c| lines.scan(c)).sum();
            assert_eq!(n, 3, "chunks of {chunk}");
        }
    }

    #[test]
    fn the_budget_names_the_bound_passed_and_stays_tripped() {
        let b = Budget::new(100, 2);
        assert!(b.count(60, 2).is_ok());
        let e = b.count(60, 0).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the server's ref advertisement is larger than 100 bytes, and more was coming"
        );
        assert!(b.count(1, 0).is_err());
        assert_eq!(b.tripped(), Some((FetchBound::RefBytes, e.to_string())));
        let b = Budget::new(1 << 20, 2);
        let e = b.count(10, 3).unwrap_err();
        assert_eq!(
            b.tripped(),
            Some((
                FetchBound::Refs,
                "the server's ref advertisement lists more than 2 refs, and more were coming"
                    .into()
            ))
        );
        assert_eq!(
            e.to_string(),
            "the server's ref advertisement lists more than 2 refs, and more were coming"
        );
        // The pack is the intake's to bound.
        let b = Budget::new(10, 1);
        b.pack_started();
        assert!(b.count(1 << 30, 1 << 20).is_ok());
    }
}
