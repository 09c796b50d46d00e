//! Files a user names (a flag, an action input, a variable), read the one
//! way every such file is read: only a regular file (a symlink to one is
//! fine), at most a bound of bytes, UTF-8. A FIFO is refused without
//! waiting for a writer, and `/dev/zero` (or a symlink to it in a
//! checkout: the action's `policy` input is a path in the repository) is
//! refused before a byte is read, where reading it whole ran out of
//! memory. Each refusal names the file, the flag and the bound.
//!
//! The files: `promote --policy` and the action's `policy`, `flux
//! --settings-image`, `push --id-token-file` (and the token files of the
//! controller's workload identity), `controller --kubeconfig`, the docker
//! config, `GOOGLE_APPLICATION_CREDENTIALS`, the runner's event payload;
//! and standard input where `--password-stdin` reads a password from it.

use std::fs::OpenOptions;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use crate::error::{Error, Result};
use crate::field::Text;

/// The most bytes a file named by a flag or input may hold: 1 MiB. The
/// largest such file is a policy or a manifest of a few kilobytes; a
/// Kubernetes object is at most 1.5 MiB in all, a JWT a few kilobytes.
pub const MAX_BYTES: u64 = 1 << 20;

/// The most bytes of the runner's event payload (`GITHUB_EVENT_PATH`):
/// GitHub caps a webhook payload at 25 MB.
pub const MAX_EVENT_BYTES: u64 = 25 << 20;

/// `n` bytes as a person reads a bound (`1 MiB`).
fn human(n: u64) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 10 && n.is_multiple_of(1 << 10) {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} bytes")
    }
}

/// Reads the file at `path` that `what` names (e.g. `--policy`), at most
/// [`MAX_BYTES`].
pub fn read(path: &Path, what: impl Into<Text>) -> Result<String> {
    read_bounded(path, what, MAX_BYTES)
}

/// Reads the file at `path` that `what` names, or `None` when there is no
/// such file (an optional file, such as the docker config).
pub fn read_if_present(path: &Path, what: impl Into<Text>) -> Result<Option<String>> {
    match path.try_exists() {
        Ok(false) => Ok(None),
        _ => read(path, what).map(Some),
    }
}

/// Reads the file at `path` that `what` names, at most `max` bytes.
pub fn read_bounded(path: &Path, what: impl Into<Text>, max: u64) -> Result<String> {
    let what: Text = what.into();
    let named = |words: String| what.clone().then(format!(" {}: {words}", path.display()));
    // Non-blocking: opening a FIFO without a writer returns at once (and
    // is refused below) instead of waiting for ever. A regular file reads
    // as ever.
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| Error::Input {
            message: named(format!("cannot be read: {e}")),
            hint: Some("give the path of a readable file".into()),
        })?;
    let meta = file
        .metadata()
        .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    let kind = meta.file_type();
    if !kind.is_file() {
        let is = if kind.is_dir() {
            "a directory"
        } else if kind.is_fifo() {
            "a FIFO (named pipe)"
        } else if kind.is_char_device() || kind.is_block_device() {
            "a device"
        } else if kind.is_socket() {
            "a socket"
        } else {
            "not a regular file"
        };
        return Err(Error::Input {
            message: named(format!(
                "is {is}, not a regular file; a file named by a flag or input is read only when it is a regular file"
            )),
            hint: Some("give the path of a regular file (a symlink to one is fine)".into()),
        });
    }
    let too_large = || Error::Input {
        message: named(format!(
            "is larger than {}, the most a file named by a flag or input may hold",
            human(max)
        )),
        hint: Some(format!("give a file of at most {}", human(max)).into()),
    };
    if meta.len() > max {
        return Err(too_large());
    }
    // The size said may be wrong (a file still growing, /proc): the bound
    // holds whatever the file turns out to hold.
    let bytes = take(file, max).map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    let Some(bytes) = bytes else {
        return Err(too_large());
    };
    String::from_utf8(bytes).map_err(|_| Error::Input {
        message: named("is not UTF-8 text".into()),
        hint: None,
    })
}

/// Reads standard input whole, at most [`MAX_BYTES`] (`what` says what it
/// holds, e.g. `--password-stdin`).
pub fn read_stdin(what: impl Into<Text>) -> Result<String> {
    let what: Text = what.into();
    let bytes = take(std::io::stdin().lock(), MAX_BYTES)
        .map_err(|e| Error::io("reading standard input", e))?;
    let Some(bytes) = bytes else {
        return Err(Error::Input {
            message: what.then(format!(
                ": standard input holds more than {}, the most it is read for",
                human(MAX_BYTES)
            )),
            hint: Some("give the value itself on standard input".into()),
        });
    };
    String::from_utf8(bytes).map_err(|_| Error::Input {
        message: what.then(": standard input is not UTF-8 text"),
        hint: None,
    })
}

/// At most `max` bytes of `r`; `None` when it holds more.
fn take(r: impl Read, max: u64) -> std::io::Result<Option<Vec<u8>>> {
    let mut bytes = Vec::new();
    r.take(max + 1).read_to_end(&mut bytes)?;
    Ok((bytes.len() as u64 <= max).then_some(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::Field;

    /// A reader larger than the bound is read to one byte past it, then
    /// refused; one at the bound is taken whole.
    #[test]
    fn a_larger_reader_is_read_to_its_bound_only() {
        /// Counts the bytes read from 1 MiB of `x`.
        struct Counted(u64, std::io::Take<std::io::Repeat>);
        impl Read for Counted {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let n = self.1.read(buf)?;
                self.0 += n as u64;
                Ok(n)
            }
        }
        let mut large = Counted(0, std::io::repeat(b'x').take(1 << 20));
        assert_eq!(take(&mut large, 16).unwrap(), None);
        assert_eq!(large.0, 17, "read past the bound");
        let exact = std::io::repeat(b'x').take(16);
        assert_eq!(take(exact, 16).unwrap(), Some(vec![b'x'; 16]));
    }

    #[test]
    fn a_regular_file_reads_and_a_larger_one_names_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("policy.yaml");
        std::fs::write(&p, "channels: {}\n").unwrap();
        assert_eq!(read(&p, Field::Policy).unwrap(), "channels: {}\n");
        std::fs::write(&p, vec![b'#'; 11]).unwrap();
        let err = read_bounded(&p, Field::Policy, 10).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert_eq!(
            err.to_string(),
            format!(
                "--policy {}: is larger than 10 bytes, the most a file named by a flag or input may hold",
                p.display()
            )
        );
        std::fs::write(&p, vec![b'#'; 10]).unwrap();
        assert_eq!(read_bounded(&p, Field::Policy, 10).unwrap().len(), 10);
        assert_eq!(human(MAX_BYTES), "1 MiB");
        assert_eq!(human(MAX_EVENT_BYTES), "25 MiB");
    }

    #[test]
    fn devices_fifos_and_directories_are_refused_without_reading() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let link = dir.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        for (p, is) in [
            (fifo.as_path(), "is a FIFO (named pipe)"),
            (link.as_path(), "is a device"),
            (Path::new("/dev/zero"), "is a device"),
            (dir.path(), "is a directory"),
        ] {
            let err = read(p, "--settings-image").unwrap_err();
            assert_eq!(err.exit_code(), 2, "{err}");
            assert!(err.to_string().contains(is), "{err}");
            assert!(err.to_string().starts_with("--settings-image "), "{err}");
        }
        let missing = dir.path().join("missing");
        assert_eq!(read_if_present(&missing, "x").unwrap(), None);
        assert!(
            read(&missing, "x")
                .unwrap_err()
                .to_string()
                .contains("cannot be read")
        );
    }
}
