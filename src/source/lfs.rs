//! Git LFS pointer files: what a commit holds in place of a file tracked
//! with git LFS (the file itself lives on an LFS server). A settings image
//! holding one would mount the pointer's text, not the settings, so the
//! layer refuses it ([`crate::image::layer`]).
//!
//! The format, as git-lfs's `docs/spec.md` defines it: UTF-8 text of
//! less than 1024 bytes; lines `key value\n`, one space between; keys of
//! `[a-z0-9.-]`; the first key `version` (`https://git-lfs.github.com/spec/v1`,
//! or the pre-release `https://hawser.github.com/spec/v1`), the others in
//! ascending order; `oid sha256:<64 lowercase hex>` and `size <decimal>`
//! required (extension lines `ext-N-name` may stand between).

/// A pointer file is less than this many bytes.
pub const MAX_POINTER_BYTES: u64 = 1024;

/// The `version` values git-lfs recognizes.
const VERSIONS: [&str; 2] = [
    "https://git-lfs.github.com/spec/v1",
    "https://hawser.github.com/spec/v1",
];

/// What a pointer says: the object id (`sha256:...`) and the file's size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pointer {
    /// `sha256:<64 hex>`.
    pub oid: String,
    /// The size of the file it stands for, in bytes.
    pub size: u64,
}

/// The pointer `bytes` are, or `None` when they are not exactly one.
pub fn pointer(bytes: &[u8]) -> Option<Pointer> {
    if bytes.len() as u64 >= MAX_POINTER_BYTES {
        return None;
    }
    let text = std::str::from_utf8(bytes).ok()?;
    let mut lines = text.strip_suffix('\n')?.split('\n');
    let version = lines.next()?.strip_prefix("version ")?;
    if !VERSIONS.contains(&version) {
        return None;
    }
    let (mut oid, mut size, mut last) = (None, None, "");
    for line in lines {
        let (key, value) = line.split_once(' ')?;
        let key_ok = !key.is_empty()
            && key
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-');
        if !key_ok || value.is_empty() || value.contains('\r') || key <= last {
            return None;
        }
        last = key;
        match key {
            "oid" => {
                let hex = value.strip_prefix("sha256:")?;
                let lower_hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
                if hex.len() != 64 || !hex.bytes().all(lower_hex) {
                    return None;
                }
                oid = Some(value.to_string());
            }
            "size" => {
                if !value.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                size = Some(value.parse().ok()?);
            }
            "version" => return None,
            _ => {}
        }
    }
    Some(Pointer {
        oid: oid?,
        size: size?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const OID: &str = "sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393";

    #[test]
    fn the_spec_examples_are_pointers() {
        let p = format!("version https://git-lfs.github.com/spec/v1\noid {OID}\nsize 12345\n");
        assert_eq!(
            pointer(p.as_bytes()),
            Some(Pointer {
                oid: OID.into(),
                size: 12345
            })
        );
        // An extension line sorts before oid.
        let ext = format!(
            "version https://git-lfs.github.com/spec/v1\next-0-foo sha256:{}\noid {OID}\nsize 1\n",
            "0".repeat(64)
        );
        assert!(pointer(ext.as_bytes()).is_some());
        let hawser = format!("version https://hawser.github.com/spec/v1\noid {OID}\nsize 0\n");
        assert!(pointer(hawser.as_bytes()).is_some());
    }

    #[test]
    fn anything_else_is_not() {
        let v = "version https://git-lfs.github.com/spec/v1\n";
        for text in [
            // no trailing newline, size missing, oid missing
            format!("{v}oid {OID}\nsize 1"),
            format!("{v}oid {OID}\n"),
            format!("{v}size 1\n"),
            // out of order, another version, upper-case hex, short hex
            format!("{v}size 1\noid {OID}\n"),
            format!("version https://example.com/v2\noid {OID}\nsize 1\n"),
            format!("{v}oid {}\nsize 1\n", OID.to_uppercase()),
            format!("{v}oid sha256:abc\nsize 1\n"),
            // two spaces, CRLF, a size that is not a number, a settings file
            format!("{v}oid  {OID}\nsize 1\n"),
            format!("{v}oid {OID}\r\nsize 1\r\n"),
            format!("{v}oid {OID}\nsize one\n"),
            "replicas: 2\n".to_string(),
            // a key repeated
            format!("{v}oid {OID}\noid {OID}\nsize 1\n"),
        ] {
            assert_eq!(pointer(text.as_bytes()), None, "{text:?}");
        }
        let long = format!(
            "version https://git-lfs.github.com/spec/v1\next-0-x {}\noid {OID}\nsize 1\n",
            "a".repeat(1000)
        );
        assert_eq!(pointer(long.as_bytes()), None, "1024 bytes or more");
    }
}
