//! A YAML stream read one document at a time, for `verify --scan`: memory
//! holds one document, never a whole file or a whole rendered stream, and
//! a document is at most [`MAX_DOCUMENT_BYTES`].
//!
//! Documents are split where YAML itself splits them: at a line that
//! starts with the marker `---` (followed by nothing, a space or a tab) or
//! that ends one with `...`. The YAML specification forbids such a line
//! inside any content (a block or quoted scalar included), so the split
//! never cuts a document; the parser then reads each piece whole (a piece
//! may still hold more than one document after a `...`). A UTF-8 byte
//! order mark opening the stream is dropped, as kubectl and kustomize
//! drop it.

use std::io::BufRead;

/// The largest document the scan reads (3 MiB): the Kubernetes API server
/// refuses a request body larger than that, so no larger object can be
/// applied, and memory stays bounded by what a document can be.
pub const MAX_DOCUMENT_BYTES: usize = 3 * 1024 * 1024;

/// One document's text and where it starts.
#[derive(Debug, PartialEq, Eq)]
pub struct Piece {
    /// The 1-based line of its first line in the stream.
    pub line: usize,
    /// Its text (UTF-8, the markers included).
    pub text: String,
}

/// A piece that cannot be read: its first line and why.
#[derive(Debug, PartialEq, Eq)]
pub struct Unreadable {
    /// The 1-based line where it starts.
    pub line: usize,
    /// Why.
    pub reason: String,
}

/// The documents of a stream, in order.
pub struct Documents<R> {
    reader: R,
    /// Lines read so far.
    lines: usize,
    /// The marker line that opens the next piece, when one was read.
    pending: Option<Vec<u8>>,
    started: bool,
    done: bool,
}

/// Whether a line holds YAML content: not blank, not only a comment, not
/// a bare marker.
fn has_content(line: &[u8]) -> bool {
    let body = match marker(line) {
        Some(_) => &line[3..],
        None => line,
    };
    let body = body.trim_ascii_start();
    !body.is_empty() && body[0] != b'#'
}

/// What a line is to the splitter.
fn marker(line: &[u8]) -> Option<bool> {
    let body = line.strip_suffix(b"\n").unwrap_or(line);
    let body = body.strip_suffix(b"\r").unwrap_or(body);
    let after = |m: &[u8]| {
        body.strip_prefix(m)
            .is_some_and(|rest| rest.first().is_none_or(|c| matches!(c, b' ' | b'\t')))
    };
    if after(b"---") {
        Some(true) // opens the next document
    } else if after(b"...") {
        Some(false) // closes this one
    } else {
        None
    }
}

impl<R: BufRead> Documents<R> {
    /// Reads `reader` as a YAML stream.
    pub fn new(reader: R) -> Self {
        Documents {
            reader,
            lines: 0,
            pending: None,
            started: false,
            done: false,
        }
    }

    /// Reads one line into `buf`, at most `room` bytes of it; `Ok(None)` at
    /// the end, `Ok(Some(false))` when the line was longer than `room`
    /// (the rest of it is read and dropped).
    fn line(&mut self, buf: &mut Vec<u8>, room: usize) -> std::io::Result<Option<bool>> {
        let start = buf.len();
        let n = std::io::Read::take(&mut self.reader, room as u64 + 1).read_until(b'\n', buf)?;
        if n == 0 {
            return Ok(None);
        }
        self.lines += 1;
        if n <= room {
            return Ok(Some(true));
        }
        buf.truncate(start);
        // Drop the rest of the line without holding it.
        if buf.last() != Some(&b'\n') {
            loop {
                let chunk = self.reader.fill_buf()?;
                if chunk.is_empty() {
                    break;
                }
                match chunk.iter().position(|b| *b == b'\n') {
                    Some(i) => {
                        self.reader.consume(i + 1);
                        break;
                    }
                    None => {
                        let len = chunk.len();
                        self.reader.consume(len);
                    }
                }
            }
        }
        Ok(Some(false))
    }

    /// Reads and drops the rest of a document that is too large.
    fn skip_document(&mut self) -> std::io::Result<()> {
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match self.line(&mut buf, 64)? {
                None => {
                    self.done = true;
                    return Ok(());
                }
                Some(_) => match marker(&buf) {
                    Some(true) => {
                        self.pending = Some(std::mem::take(&mut buf));
                        return Ok(());
                    }
                    Some(false) => return Ok(()),
                    None => {}
                },
            }
        }
    }

    fn next_piece(&mut self) -> Option<Result<Piece, Unreadable>> {
        let mut buf = self.pending.take().unwrap_or_default();
        let mut line = self.lines + 1 - usize::from(!buf.is_empty());
        let mut content = has_content(&buf);
        loop {
            if self.done {
                break;
            }
            let room = MAX_DOCUMENT_BYTES.saturating_sub(buf.len());
            let mut next = Vec::new();
            let read = self.line(&mut next, room);
            let fits = match read {
                Err(e) => {
                    self.done = true;
                    return Some(Err(Unreadable {
                        line,
                        reason: format!("cannot be read: {e}"),
                    }));
                }
                Ok(None) => {
                    self.done = true;
                    break;
                }
                Ok(Some(fits)) => fits,
            };
            if !self.started {
                self.started = true;
                if let Some(rest) = next.strip_prefix("\u{feff}".as_bytes()) {
                    next = rest.to_vec();
                }
            }
            if !fits {
                let skipped = self.skip_document();
                return Some(Err(Unreadable {
                    line,
                    reason: match skipped {
                        Err(e) => format!("cannot be read: {e}"),
                        Ok(()) => format!(
                            "holds a YAML document larger than {} MiB, the most the scan reads in \
                             one document (the Kubernetes API server refuses a larger object; split \
                             a larger `kind: List` into one document per object)",
                            MAX_DOCUMENT_BYTES >> 20
                        ),
                    },
                }));
            }
            match marker(&next) {
                Some(true) if content => {
                    self.pending = Some(next);
                    break;
                }
                Some(true) => {
                    // Only blank lines, comments or a bare marker before:
                    // this marker opens the document.
                    buf = next;
                    line = self.lines;
                    content = has_content(&buf);
                }
                Some(false) => {
                    buf.extend_from_slice(&next);
                    break;
                }
                None => {
                    content |= has_content(&next);
                    buf.extend_from_slice(&next);
                }
            }
        }
        if !content {
            return None;
        }
        Some(match String::from_utf8(buf) {
            Ok(text) => Ok(Piece { line, text }),
            Err(e) => {
                let bytes = e.as_bytes();
                let at = e.utf8_error().valid_up_to();
                Err(Unreadable {
                    line: line + bytes[..at].iter().filter(|b| **b == b'\n').count(),
                    reason: format!(
                        "is not UTF-8 text (byte {at} of the document), which kubectl and kustomize \
                         refuse too"
                    ),
                })
            }
        })
    }
}

impl<R: BufRead> Iterator for Documents<R> {
    type Item = Result<Piece, Unreadable>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.done && self.pending.is_none() {
                return None;
            }
            if let Some(piece) = self.next_piece() {
                return Some(piece);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(text: &[u8]) -> Vec<Result<(usize, String), usize>> {
        Documents::new(text)
            .map(|p| p.map(|p| (p.line, p.text)).map_err(|u| u.line))
            .collect()
    }

    #[test]
    fn documents_split_at_their_markers_only() {
        let got = pieces(
            b"\xef\xbb\xbfa: 1\n---\nb: |\n  ---not a marker\n  x\n--- # c\nc: 2\n...\nd: 3\n---\n",
        );
        assert_eq!(
            got,
            [
                Ok((1, "a: 1\n".to_string())),
                Ok((2, "---\nb: |\n  ---not a marker\n  x\n".to_string())),
                Ok((6, "--- # c\nc: 2\n...\n".to_string())),
                Ok((9, "d: 3\n".to_string())),
            ]
        );
        // An empty stream, and markers alone, hold no document.
        assert!(pieces(b"").is_empty());
        assert!(pieces(b"---\n---\n").is_empty());
        // `----` and `---x` are content.
        assert_eq!(pieces(b"---x: 1\n").len(), 1);
    }

    #[test]
    fn a_document_over_the_bound_is_unreadable_and_the_next_is_read() {
        let mut text = b"a: 1\n---\nbig: ".to_vec();
        text.extend(std::iter::repeat_n(b'x', MAX_DOCUMENT_BYTES));
        text.extend(b"\nmore: 1\n---\nc: 2\n");
        let got = pieces(&text);
        assert_eq!(
            got,
            [
                Ok((1, "a: 1\n".to_string())),
                Err(2),
                Ok((5, "---\nc: 2\n".to_string()))
            ]
        );
        // Many lines that add up to more than the bound.
        let mut lines = b"---\n".to_vec();
        for _ in 0..(MAX_DOCUMENT_BYTES / 7 + 1) {
            lines.extend(b"- item\n");
        }
        let got = pieces(&lines);
        assert_eq!(got, [Err(1)]);
        // Not UTF-8: unreadable, on its line.
        assert_eq!(pieces(b"a: 1\nb: caf\xe9\n"), [Err(2)]);
    }
}
