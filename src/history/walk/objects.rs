//! Reading the two kinds of object the walk meets, from their raw bytes:
//! a commit's tree, parents and committer time from its first lines, and
//! a few named entries of a tree, scanned only as far as their place.

use std::cmp::Ordering;

use gix::ObjectId;
use gix::bstr::{BString, ByteSlice as _};
use gix::objs::tree::EntryMode;

use super::Entry;

/// The tree, parents and committer time of a commit object, of which
/// `data` may be only the start up to the end of the committer line.
pub(super) fn commit_fields(
    data: &[u8],
    hash: gix::hash::Kind,
) -> Result<(ObjectId, Vec<ObjectId>, i64), String> {
    use gix::objs::commit::ref_iter::Token;
    let mut tree = None;
    let mut parents = Vec::with_capacity(1);
    for token in gix::objs::CommitRefIter::from_bytes(data, hash) {
        match token.map_err(|e| e.to_string())? {
            Token::Tree { id } => tree = Some(id),
            Token::Parent { id } => parents.push(id),
            Token::Author { .. } => {}
            Token::Committer { signature } => {
                let tree = tree.ok_or("it names no tree")?;
                return Ok((tree, parents, signature.seconds()));
            }
            _ => break,
        }
    }
    // No committer line (git reads its time as 0).
    Ok((tree.ok_or("it names no tree")?, parents, 0))
}

/// Fills `found[i]` with the entry named `names[i]` (sorted bytewise) in
/// the tree object `data`, the first one if a name repeats. Entries come in
/// git's tree order (a tree sorts as if its name ended in `/`), so the scan
/// stops after the place of the last name, as git's own tree walk with a
/// pathspec does, and only a found entry's mode is decoded: the walk reads
/// wide trees (hundreds of entries) for one name at every commit.
pub(super) fn find_entries(
    data: &[u8],
    hash: gix::hash::Kind,
    names: &[BString],
    found: &mut [Option<Entry>],
) -> Result<(), &'static str> {
    let Some(last) = names.last() else {
        return Ok(());
    };
    let id_len = hash.len_in_bytes();
    let is_tree = |mode: &[u8]| EntryMode::from_bytes(mode).is_some_and(|m| m.is_tree());
    let mut rest = data;
    while !rest.is_empty() {
        // A mode is a few octal digits: no need for memchr.
        let space = rest
            .iter()
            .position(|&b| b == b' ')
            .ok_or("an entry has no mode")?;
        let (mode, tail) = (&rest[..space], &rest[space + 1..]);
        let nul = tail.find_byte(0).ok_or("an entry's name has no end")?;
        let name = &tail[..nul];
        let id = tail
            .get(nul + 1..nul + 1 + id_len)
            .ok_or("an entry's id is cut short")?;
        rest = &tail[nul + 1 + id_len..];
        // Past the last name's place (one compared as if it ended in `/`
        // when a prefix of the other)?
        let order = name.cmp(last.as_slice());
        let past = match order {
            Ordering::Equal => false,
            Ordering::Greater => {
                !name.starts_with(last)
                    || gix::objs::tree::name_order(name, is_tree(mode), last, true)
                        == Ordering::Greater
            }
            Ordering::Less => {
                last.starts_with(name)
                    && gix::objs::tree::name_order(name, is_tree(mode), last, true)
                        == Ordering::Greater
            }
        };
        if past {
            break;
        }
        let slot = match order {
            Ordering::Equal => Some(names.len() - 1),
            _ if names.len() > 1 => names[..names.len() - 1]
                .binary_search_by(|n| n.as_slice().cmp(name))
                .ok(),
            _ => None,
        };
        if let Some(i) = slot
            && found[i].is_none()
        {
            let mode = EntryMode::from_bytes(mode).ok_or("an entry's mode is not octal")?;
            // `id` is exactly one hash long: the conversion cannot fail.
            found[i] = Some((mode, ObjectId::from_bytes_or_panic(id)));
        }
    }
    Ok(())
}
