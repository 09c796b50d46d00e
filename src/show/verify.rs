//! A verified image in words: what `verify` prints.

use crate::cluster::verify::Verified;

/// `verify`'s lines: the reference, what it is, and the notes.
pub(crate) fn verified(v: &Verified) -> String {
    let mut s = format!(
        "verified {}\n  digest {} is {} at commit {} ({}, {} blobs identical)\n",
        v.reference,
        v.digest,
        v.path,
        v.commit,
        super::files(v.files),
        v.blobs
    );
    for n in &v.notes {
        s.push_str(&format!("  note: {n}\n"));
    }
    s
}
