//! git's changed-path Bloom filters, read from the commit-graph (chunks
//! `BIDX` and `BDAT`, `gitformat-commit-graph(5)`), so the walk of
//! [`super::walk`] can pass a commit whose first parent holds the same
//! folder without reading a single tree, as `git log -- DIR` does.
//!
//! A commit's filter holds every path its diff against its FIRST parent
//! touches, and every leading directory of those paths; so "definitely
//! not in the filter" for a folder and each of its leading directories
//! means the folder's entry is the same in the commit and its first
//! parent. That negative answer is the only one used: anything else (no
//! filter, an empty one, a "maybe", a merge's other parents) falls back to
//! the trees. A filter that cannot be trusted is never an error, only
//! slower: an unknown hash version, layers of a split graph with different
//! settings, offsets out of range, a file not laid out as `gix` read it.
//!
//! Why not `gix`: it does not read these chunks (0.90). Why read the graph
//! files again: `gix` does not expose their chunks; they are mapped once
//! more here (the pages are shared) and each lookup is checked against the
//! file's own commit ids, so a different layout only disables the filters.
//!
//! Hash versions: version 2 is murmur3 (x86, 32 bit) as specified; version
//! 1 is what git wrote before 2.45, which hashed bytes >= 0x80 as a signed
//! `char` (the result depends on the writer's platform), so with version 1
//! a path holding such a byte is not looked up at all.

use std::ops::Range;
use std::path::Path;

use gix::ObjectId;

/// git's seeds for the two murmur3 hashes of a key (`bloom.c`).
const SEEDS: [u32; 2] = [0x293a_e76f, 0x7e64_6e2c];

/// One file of the commit-graph (the single file, or a layer of a chain).
struct Layer {
    map: memmap2::Mmap,
    /// Commit ids, sorted (`OIDL`).
    ids: Range<usize>,
    /// Cumulative filter ends per commit (`BIDX`); None without filters.
    index: Option<Range<usize>>,
    /// The filters, after BDAT's 12-byte header.
    data: Range<usize>,
    /// Per commit: root tree, parents, generation and time (`CDAT`).
    cdat: Range<usize>,
    commits: u32,
}

/// The changed-path filters of a repository's commit-graph.
pub(crate) struct Filters {
    layers: Vec<Layer>,
    hash_len: usize,
    version: u32,
    hashes: u32,
}

/// A folder's keys: the hashes of the folder's path and of each leading
/// directory, `hashes` values each.
pub(crate) struct Key(Vec<u32>);

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn be64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// murmur3 x86 32-bit of `data`; `signed` hashes each byte as git's
/// version 1 did on platforms where `char` is signed.
pub(crate) fn murmur3(seed: u32, data: &[u8], signed: bool) -> u32 {
    const C1: u32 = 0xcc9e_2d51;
    const C2: u32 = 0x1b87_3593;
    let byte = |b: u8| {
        if signed {
            b as i8 as i32 as u32
        } else {
            u32::from(b)
        }
    };
    let mix = |k: u32| k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
    let mut h = seed;
    let mut blocks = data.chunks_exact(4);
    for c in &mut blocks {
        let k = byte(c[0]) | byte(c[1]) << 8 | byte(c[2]) << 16 | byte(c[3]) << 24;
        h ^= mix(k);
        h = h.rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        let mut k = 0u32;
        for (i, &b) in tail.iter().enumerate().rev() {
            k ^= byte(b) << (8 * i);
        }
        h ^= mix(k);
    }
    h ^= data.len() as u32;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// Parses one commit-graph file; None when it is not one this code
/// understands.
fn layer(path: &Path, hash_len: usize) -> Option<(Layer, Option<[u32; 2]>)> {
    let file = std::fs::File::open(path).ok()?;
    // SAFETY: git replaces commit-graph files by renaming new ones into
    // place, never by writing into them, so the mapping does not change
    // under the walk (gix and git map them the same way).
    let map = unsafe { memmap2::Mmap::map(&file) }.ok()?;
    let b: &[u8] = &map;
    if b.get(0..4)? != b"CGPH" || b[4] != 1 {
        return None;
    }
    let chunks = usize::from(b[6]);
    let find = |id: &[u8; 4]| -> Option<Option<Range<usize>>> {
        for i in 0..chunks {
            let at = 8 + 12 * i;
            if b.get(at..at + 4)? == id {
                let start = usize::try_from(be64(b, at + 4)?).ok()?;
                let end = usize::try_from(be64(b, at + 16)?).ok()?;
                return (start <= end && end <= b.len()).then_some(Some(start..end));
            }
        }
        Some(None)
    };
    let fanout = find(b"OIDF")??;
    let ids = find(b"OIDL")??;
    let cdat = find(b"CDAT")??;
    let commits = be32(b, fanout.start + 255 * 4)?;
    if ids.len() != commits as usize * hash_len || cdat.len() != commits as usize * (hash_len + 16)
    {
        return None;
    }
    let (index, data, settings) = match (find(b"BIDX")?, find(b"BDAT")?) {
        (Some(index), Some(data)) if index.len() == commits as usize * 4 && data.len() >= 12 => {
            let version = be32(b, data.start)?;
            let hashes = be32(b, data.start + 4)?;
            (
                Some(index),
                data.start + 12..data.end,
                Some([version, hashes]),
            )
        }
        _ => (None, 0..0, None),
    };
    let layer = Layer {
        ids,
        index,
        data,
        cdat,
        commits,
        map,
    };
    Some((layer, settings))
}

/// The config value `commitGraph.changedPathsVersion`'s effect: which
/// filter version may be read (None: any), or no filters at all.
fn readable(repo: &gix::Repository) -> Option<Option<u32>> {
    let config = repo.config_snapshot();
    if config.boolean("commitGraph.readChangedPaths") == Some(false) {
        return None;
    }
    match config.integer("commitGraph.changedPathsVersion") {
        None | Some(-1) => Some(None),
        Some(v @ (1 | 2)) => Some(Some(v as u32)),
        Some(_) => None,
    }
}

impl Filters {
    /// The filters of the commit-graph `gix` reads (the single file, else
    /// the chain), or None when there are none usable.
    pub(crate) fn open(repo: &gix::Repository, graph: &gix::commitgraph::Graph) -> Option<Filters> {
        let wanted = readable(repo)?;
        let info = repo.objects.store_ref().path().join("info");
        let hash_len = repo.object_hash().len_in_bytes();
        let single = info.join("commit-graph");
        let paths = if single.is_file() {
            vec![single]
        } else {
            let dir = info.join("commit-graphs");
            let chain = std::fs::read_to_string(dir.join("commit-graph-chain")).ok()?;
            chain
                .lines()
                .filter(|l| !l.is_empty())
                .map(|l| dir.join(format!("graph-{l}.graph")))
                .collect()
        };
        let mut layers = Vec::with_capacity(paths.len());
        let mut settings: Option<[u32; 2]> = None;
        for p in &paths {
            let (l, s) = layer(p, hash_len)?;
            if let Some(s) = s {
                // git disables filters whose layers disagree; so do we.
                if settings.is_some_and(|have| have != s) {
                    return None;
                }
                settings = Some(s);
            }
            layers.push(l);
        }
        let [version, hashes] = settings?;
        if !matches!(version, 1 | 2) || hashes == 0 || hashes > 64 {
            return None;
        }
        if wanted.is_some_and(|w| w != version) {
            return None;
        }
        let filters = Filters {
            layers,
            hash_len,
            version,
            hashes,
        };
        // The same files as `gix` read, in the same order: the same count,
        // and each layer's first and last commits where `gix` has them.
        if filters
            .layers
            .iter()
            .map(|l| u64::from(l.commits))
            .sum::<u64>()
            != u64::from(graph.num_commits())
        {
            return None;
        }
        let mut base = 0u32;
        for l in &filters.layers {
            for i in [0, l.commits.saturating_sub(1)]
                .into_iter()
                .filter(|_| l.commits > 0)
            {
                let at = l.ids.start + i as usize * hash_len;
                let mine = &l.map[at..at + hash_len];
                if graph.id_at(gix::commitgraph::Position(base + i)).as_bytes() != mine {
                    return None;
                }
            }
            base += l.commits;
        }
        Some(filters)
    }

    /// The keys of `folder` (`/`-separated, relative to the root): None for
    /// the root (every change is in it), and, with version 1 filters, for a
    /// path holding a byte >= 0x80.
    pub(crate) fn key(&self, folder: &str) -> Option<Key> {
        let path = folder.trim_matches('/').as_bytes();
        if path.is_empty() || (self.version == 1 && !path.is_ascii()) {
            return None;
        }
        let ends = path
            .iter()
            .enumerate()
            .filter(|&(_, &c)| c == b'/')
            .map(|(i, _)| i)
            .chain([path.len()]);
        let mut hashes = Vec::new();
        for end in ends {
            let p = &path[..end];
            let [h0, h1] = SEEDS.map(|s| murmur3(s, p, self.version == 1));
            hashes.extend((0..self.hashes).map(|i| h0.wrapping_add(i.wrapping_mul(h1))));
        }
        Some(Key(hashes))
    }

    /// The filter of the commit `id` at graph position `pos` (positions
    /// count the layers base first, as `gix` does); None when it has none
    /// or the file does not hold `id` there.
    pub(crate) fn filter(&self, pos: u32, id: &ObjectId) -> Option<&[u8]> {
        self.find(pos, Some(id))
    }

    /// The filter of the commit at graph position `pos` (the layout was
    /// checked against `gix`'s when opened).
    pub(crate) fn filter_at(&self, pos: u32) -> Option<&[u8]> {
        self.find(pos, None)
    }

    /// The layer holding graph position `pos`, and the position in it.
    fn layer_of(&self, pos: u32) -> Option<(&Layer, usize)> {
        let mut lex = pos;
        for l in &self.layers {
            if lex < l.commits {
                return Some((l, lex as usize));
            }
            lex -= l.commits;
        }
        None
    }

    /// The graph position of the first parent of the commit at `pos`
    /// (None for a root commit), read from `CDAT` as `gix` reads it.
    pub(crate) fn first_parent(&self, pos: u32) -> Option<u32> {
        /// git's "no parent" marker.
        const NONE: u32 = 0x7000_0000;
        let (l, i) = self.layer_of(pos)?;
        let p = be32(
            &l.map,
            l.cdat.start + i * (self.hash_len + 16) + self.hash_len,
        )?;
        let total: u32 = self.layers.iter().map(|l| l.commits).sum();
        (p != NONE && p < total).then_some(p)
    }

    fn find(&self, pos: u32, id: Option<&ObjectId>) -> Option<&[u8]> {
        let (l, i) = self.layer_of(pos)?;
        let b: &[u8] = &l.map;
        let at = l.ids.start + i * self.hash_len;
        if let Some(id) = id
            && b.get(at..at + self.hash_len)? != id.as_slice()
        {
            return None;
        }
        let index = l.index.as_ref()?;
        let end = be32(b, index.start + 4 * i)? as usize;
        let start = if i == 0 {
            0
        } else {
            be32(b, index.start + 4 * (i - 1))? as usize
        };
        if start > end || end > l.data.len() {
            return None;
        }
        Some(&b[l.data.start + start..l.data.start + end])
    }

    /// False only when `filter` proves the key's path unchanged against
    /// the first parent; an empty filter proves nothing.
    pub(crate) fn maybe_changed(filter: &[u8], key: &Key) -> bool {
        let bits = filter.len() as u64 * 8;
        if bits == 0 {
            return true;
        }
        key.0.iter().all(|&h| {
            let bit = u64::from(h) % bits;
            filter[(bit / 8) as usize] & (1 << (bit % 8)) != 0
        })
    }
}

#[cfg(test)]
mod tests {
    use super::murmur3;

    #[test]
    fn murmur3_matches_the_published_vectors() {
        // Reference values of MurmurHash3_x86_32.
        assert_eq!(murmur3(0, b"", false), 0);
        assert_eq!(murmur3(1, b"", false), 0x514e_28b7);
        assert_eq!(murmur3(0xffff_ffff, b"", false), 0x81f1_6f39);
        assert_eq!(
            murmur3(0, b"The quick brown fox jumps over the lazy dog", false),
            0x2e4f_f723
        );
        assert_eq!(murmur3(0x9747_b28c, b"Hello, world!", false), 0x2488_4cba);
        assert_eq!(murmur3(0x9747_b28c, b"aaaa", false), 0x5a97_808a);
        assert_eq!(murmur3(0x9747_b28c, b"abc", false), 0xc84a_62dd);
        assert_eq!(murmur3(0x9747_b28c, b"a", false), 0x7fa0_9ea6);
    }

    #[test]
    fn version_1_differs_only_on_high_bytes() {
        for s in [&b"configs/shop"[..], b"a", b"abcde"] {
            assert_eq!(murmur3(7, s, true), murmur3(7, s, false));
        }
        assert_ne!(
            murmur3(7, "configs/ü".as_bytes(), true),
            murmur3(7, "configs/ü".as_bytes(), false)
        );
    }
}
