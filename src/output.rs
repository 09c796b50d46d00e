//! What the command line writes on its standard output and standard
//! error, in one place, so that a reader that goes away is handled once.
//!
//! The standard library ignores SIGPIPE, so a write to a pipe whose reader
//! closed (`settings-image build --json | true`, `... | head -1`) fails
//! with `EPIPE`, and `println!` panicked on it (exit 101, a code the
//! table does not have). Here a closed standard output is
//! [`Error::OutputClosed`]: the run stops writing, says nothing more, and
//! exits 141, as a process killed by SIGPIPE does (`yes | head` gives the
//! shell 141) and as ripgrep and just end quietly on a broken pipe. The
//! work itself is done by then (an image written or pushed), and the
//! temporary files are removed as on any other exit. A standard error
//! that cannot be written is ignored: there is nowhere left to say so.

use std::io::Write;

use crate::error::{Error, Result};

/// Writes `text` as it is to standard output, and flushes.
pub fn print(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::BrokenPipe => Error::OutputClosed,
            _ => Error::io("writing to standard output", e),
        })
}

/// Writes `line` and a line break to standard output.
pub fn println(line: &str) -> Result<()> {
    print(&format!("{line}\n"))
}

/// Writes `line` and a line break to standard error; a standard error
/// that cannot be written is ignored.
pub fn eprintln(line: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{line}");
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_exit_code_is_a_death_by_sigpipe() {
        assert_eq!(super::Error::OutputClosed.exit_code(), 141);
    }
}
