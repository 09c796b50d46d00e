//! One walk over history that answers "which commit last changed each
//! folder" for many folders at once, with the rules of [`super`] (what
//! `git log -1 -- DIR` answers per folder, default merge simplification)
//! and the shallow-boundary guard of [`super::git`].
//!
//! Each folder follows its own chain from the start commit: at a commit,
//! the first parent whose entry for the folder equals the folder's entry at
//! the start (the folder is TREESAME to it) is followed; a commit TREESAME
//! to no parent (or a root commit) is the answer. The entry stays the same
//! along a chain, so only the parents' trees are ever read. Chains that meet
//! share a commit: commits are visited newest first (by commit-graph
//! generation, else committer time), so every folder that reaches a commit
//! is handled in one visit, reading the commit and its parents' trees once.
//! The walk stops as soon as every folder is answered.
//!
//! Why not `gix`'s revision walk with a pathspec: it simplifies by one
//! pathspec at a time, so fifty folders would be fifty walks, each
//! re-reading every commit and root tree.
//!
//! Speed comes from four things: the commit-graph's changed-path Bloom
//! filters ([`super::bloom`]), when the graph has them, prove most commits
//! TREESAME to their first parent without reading a tree (git does the same
//! for one pathspec; here one filter lookup serves every folder); without
//! them every commit's tree is read once (git diffs each commit against its
//! parent, reading each tree twice); subtrees are cached by id along the
//! walk (the folders' common parents such as `configs/` change rarely, so
//! most lookups end at the root tree); and the commit-graph, when the clone
//! has one, replaces reading commit objects, parents followed by position
//! (git uses it too).
//!
//! Without a commit-graph (a fresh clone), the cost is reading objects:
//! every commit, and the trees on the folders' paths that changed. Both
//! come straight from the packs ([`super::pack`]): a tree built from its
//! delta is kept and lent to the next one without a copy, a commit is
//! inflated only as far as its committer line; and a tree is scanned only
//! up to the place of the names looked up, the mode decoded only for them.

use std::collections::{BTreeMap, BinaryHeap, HashSet};

use gix::ObjectId;
use gix::bstr::BString;
use gix::hashtable::HashMap;
use gix::objs::Find as _;
use gix::objs::tree::{EntryKind, EntryMode};

use super::CommitInfo;
use super::bloom::{Filters, Key};
use super::pack::Packs;

mod cache;
mod objects;

use cache::Cache;
use objects::{commit_fields, find_entries};

/// Where the walk for the last change ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Walk {
    /// The commit that last changed the folder.
    Found(CommitInfo),
    /// The start commit (HEAD or the revision) does not hold the folder.
    NotInHead,
    /// The walk reached a commit whose parents are missing (a shallow-clone
    /// boundary) while the folder still looked unchanged: the local history
    /// cannot prove the answer.
    Boundary {
        /// Whether the commit is listed in `.git/shallow` (else the
        /// repository is incomplete some other way).
        shallow: bool,
        /// The start commit's id (HEAD or the revision).
        head: String,
        /// The boundary commit (never an answer).
        boundary: String,
        /// The commits walked before it, proven not to change the folder.
        passed: Vec<String>,
    },
}

/// Where a walk read trees and commits from: straight from a pack
/// ([`super::pack`]) or through the object database (loose objects, or
/// anything the packs could not answer directly). Commits the commit-graph
/// answers are not read at all. Logged (debug) after each walk: many trees,
/// or many objects through the object database, make a slow walk.
#[derive(Debug, Clone, Copy, Default)]
struct Reads {
    packed_trees: usize,
    odb_trees: usize,
    packed_commits: usize,
    odb_commits: usize,
}

impl Reads {
    fn add(&mut self, other: Reads) {
        self.packed_trees += other.packed_trees;
        self.odb_trees += other.odb_trees;
        self.packed_commits += other.packed_commits;
        self.odb_commits += other.odb_commits;
    }

    /// The debug record of a walk over `folders` folders.
    fn log(&self, folders: usize) {
        log::debug!(
            "history: the walk over {folders} folder(s) read {} trees ({} from the packs, {} \
             through the object database) and {} commit objects ({} from the packs, {} through \
             the object database)",
            self.packed_trees + self.odb_trees,
            self.packed_trees,
            self.odb_trees,
            self.packed_commits + self.odb_commits,
            self.packed_commits,
            self.odb_commits,
        );
    }
}

/// A folder's entry in its parent tree: mode and object id.
type Entry = (EntryMode, ObjectId);

/// Why the walk could not read history: what it was doing, and the error.
#[derive(Debug)]
pub(crate) struct Failure {
    /// What was being read, e.g. `cannot read commit 0123...`.
    pub what: String,
    /// The underlying error.
    pub message: String,
}

fn fail(what: impl Into<String>, e: impl std::fmt::Display) -> Failure {
    Failure {
        what: what.into(),
        message: e.to_string(),
    }
}

/// Answers, for each folder (relative to the repository root,
/// `/`-separated, `""` for the root), where the walk from `start` ends, in
/// the order given. `shallow` lists the commits whose parents are cut off
/// (`.git/shallow`); they are never an answer. The commit-graph is used
/// when the clone has one and is not shallow (git ignores it there too).
pub(crate) fn last_changes(
    repo: &gix::Repository,
    shallow: &HashSet<ObjectId>,
    start: ObjectId,
    folders: &[&str],
) -> Result<Vec<Walk>, Failure> {
    // The commits passed before a boundary only matter on a boundary, which
    // a complete clone rarely has: record them up front only when shallow,
    // else walk again for the folders that ended on one.
    let record = !shallow.is_empty();
    // On a terminal: the commits visited so far (a long history takes
    // seconds; the walk says nothing else until it ends).
    let progress = crate::progress::Task::start(
        || match folders {
            [one] => format!("history of {}", if one.is_empty() { "/" } else { one }),
            many => format!("history of {} folders", many.len()),
        },
        None,
        crate::progress::Unit::Items("commits"),
    );
    let mut walker = Walker::new(repo, shallow, folders, record)?;
    walker.progress = &progress;
    let mut walks = walker.run(start)?;
    let mut reads = walker.reads;
    if !record {
        let cut: Vec<usize> = (0..walks.len())
            .filter(|&i| matches!(walks[i], Walk::Boundary { .. }))
            .collect();
        if !cut.is_empty() {
            let again: Vec<&str> = cut.iter().map(|&i| folders[i]).collect();
            let mut walker = Walker::new(repo, shallow, &again, true)?;
            walker.progress = &progress;
            let redo = walker.run(start)?;
            reads.add(walker.reads);
            for (i, w) in cut.into_iter().zip(redo) {
                walks[i] = w;
            }
        }
    }
    reads.log(folders.len());
    Ok(walks)
}

/// A commit as the walk needs it.
struct CommitData {
    tree: ObjectId,
    parents: Vec<ObjectId>,
    /// Visiting order, largest first: (generation, committer time). A
    /// commit outside the commit-graph has infinite generation (no graph
    /// commit descends from it).
    key: (u32, i64),
    /// The commit's position in the commit-graph, if it is there.
    pos: Option<u32>,
    /// The parents' positions in the commit-graph (empty when the commit
    /// is not in it): reading a parent by position skips a search by id.
    parent_pos: Vec<u32>,
}

/// A node of the folders' path trie: the child names (sorted) and their
/// nodes.
struct TrieNode {
    names: Vec<BString>,
    kids: Vec<u32>,
}

/// A walk's progress until [`last_changes`] gives it its own.
static NO_PROGRESS: crate::progress::Task = crate::progress::Task::none();

struct Walker<'a> {
    repo: &'a gix::Repository,
    graph: Option<gix::commitgraph::Graph>,
    /// The graph's changed-path Bloom filters, if it has usable ones.
    bloom: Option<Filters>,
    /// Per folder, its keys in `bloom` (None: the filters cannot answer).
    keys: Vec<Option<Key>>,
    shallow: &'a HashSet<ObjectId>,
    nodes: Vec<TrieNode>,
    /// Per folder, the (node, child slot) of each path component; empty
    /// for the root folder.
    paths: Vec<Vec<(u32, u32)>>,
    /// Per trie node: tree id -> the entries of the node's children.
    trees: Vec<Cache<Box<[Option<Entry>]>>>,
    /// Commits read and not yet visited.
    commits: HashMap<ObjectId, CommitData>,
    record: bool,
    buf: Vec<u8>,
    /// Trees and commits' first lines straight from the packs.
    packs: Packs,
    /// Where this walk read its objects from.
    reads: Reads,
    /// Counts the commits visited (shown on a terminal).
    progress: &'a crate::progress::Task,
}

impl<'a> Walker<'a> {
    fn new(
        repo: &'a gix::Repository,
        shallow: &'a HashSet<ObjectId>,
        folders: &[&str],
        record: bool,
    ) -> Result<Walker<'a>, Failure> {
        // The trie of the folders' paths, built with maps, then frozen into
        // sorted vectors for binary search.
        let mut build: Vec<BTreeMap<BString, u32>> = vec![BTreeMap::new()];
        for f in folders {
            let mut node = 0usize;
            for comp in f.split('/').filter(|c| !c.is_empty()) {
                let next = build.len() as u32;
                let kid = *build[node].entry(BString::from(comp)).or_insert(next);
                if kid == next {
                    build.push(BTreeMap::new());
                }
                node = kid as usize;
            }
        }
        let nodes: Vec<TrieNode> = build
            .into_iter()
            .map(|m| {
                let (names, kids) = m.into_iter().unzip();
                TrieNode { names, kids }
            })
            .collect();
        let paths = folders
            .iter()
            .map(|f| {
                let mut node = 0u32;
                let mut path = Vec::new();
                for comp in f.split('/').filter(|c| !c.is_empty()) {
                    let n = &nodes[node as usize];
                    // Every component was inserted above.
                    let slot = n
                        .names
                        .binary_search_by(|name| name.as_slice().cmp(comp.as_bytes()))
                        .unwrap_or(0);
                    path.push((node, slot as u32));
                    node = n.kids[slot];
                }
                path
            })
            .collect();
        // git ignores the commit-graph in a shallow clone: the graph would
        // claim parents the clone does not have.
        let graph = if shallow.is_empty() {
            repo.commit_graph_if_enabled()
                .map_err(|e| fail("cannot read the commit-graph", e))?
        } else {
            None
        };
        let bloom = graph.as_ref().and_then(|g| Filters::open(repo, g));
        let keys = folders
            .iter()
            .map(|f| bloom.as_ref().and_then(|b| b.key(f)))
            .collect();
        let trees = nodes.iter().map(|_| Cache::new()).collect();
        Ok(Walker {
            repo,
            graph,
            bloom,
            keys,
            shallow,
            nodes,
            paths,
            trees,
            commits: HashMap::default(),
            record,
            buf: Vec::new(),
            packs: Packs::open(repo),
            reads: Reads::default(),
            progress: &NO_PROGRESS,
        })
    }

    /// Reads commit `id` into the cache unless it is there; false when the
    /// repository does not have it.
    fn load(&mut self, id: ObjectId) -> Result<bool, Failure> {
        self.load_at(id, None)
    }

    /// [`Walker::load`], with the commit's graph position when known.
    fn load_at(&mut self, id: ObjectId, at: Option<u32>) -> Result<bool, Failure> {
        if self.commits.contains_key(&id) {
            return Ok(true);
        }
        if let Some(graph) = &self.graph
            && let Some(pos) = at
                .map(gix::commitgraph::Position)
                .or_else(|| graph.lookup(id))
        {
            let c = graph.commit_at(pos);
            let mut parents = Vec::with_capacity(1);
            let mut parent_pos = Vec::with_capacity(1);
            for p in c.iter_parents() {
                let p = p.map_err(|e| fail(format!("cannot read the parents of {id}"), e))?;
                parents.push(graph.id_at(p).to_owned());
                parent_pos.push(p.0);
            }
            let key = (
                c.generation(),
                i64::try_from(c.committer_timestamp()).unwrap_or(i64::MAX),
            );
            let tree = c.root_tree_id().to_owned();
            self.commits.insert(
                id,
                CommitData {
                    tree,
                    parents,
                    key,
                    pos: Some(pos.0),
                    parent_pos,
                },
            );
            return Ok(true);
        }
        // The commit's first lines straight from a pack, else the whole
        // object from the object database (which reports any error).
        let hash = self.repo.object_hash();
        let head = self
            .packs
            .commit_head(&id)
            .and_then(|head| commit_fields(head, hash).ok());
        let (tree, parents, time) = match head {
            Some(fields) => {
                self.reads.packed_commits += 1;
                fields
            }
            None => {
                self.reads.odb_commits += 1;
                let Some(data) = self
                    .repo
                    .objects
                    .try_find(&id, &mut self.buf)
                    .map_err(|e| fail(format!("cannot read commit {id}"), e))?
                else {
                    return Ok(false);
                };
                if data.kind != gix::objs::Kind::Commit {
                    return Err(fail(
                        format!("cannot read commit {id}"),
                        format!("the object is a {}", data.kind),
                    ));
                }
                commit_fields(data.data, hash)
                    .map_err(|e| fail(format!("cannot decode commit {id}"), e))?
            }
        };
        self.commits.insert(
            id,
            CommitData {
                tree,
                parents,
                key: (u32::MAX, time),
                pos: None,
                parent_pos: Vec::new(),
            },
        );
        Ok(true)
    }

    /// From commit `id`, the first-parent chain while the changed-path
    /// filters prove every one of `folders` unchanged: the same steps as
    /// the visit below, minus its bookkeeping, by graph position. Returns
    /// the first commit they cannot pass (None: not even `id`). Only when
    /// nothing else is left to visit, so the visiting order is kept.
    fn skip(&self, id: ObjectId, folders: &[usize]) -> Option<(ObjectId, u32)> {
        let (graph, bloom) = (self.graph.as_ref()?, self.bloom.as_ref()?);
        if self.record {
            return None;
        }
        let keys = folders
            .iter()
            .map(|&f| self.keys[f].as_ref())
            .collect::<Option<Vec<&Key>>>()?;
        let start = self.commits.get(&id)?.pos?;
        let mut pos = start;
        while let Some(filter) = bloom.filter_at(pos) {
            if keys.iter().any(|k| Filters::maybe_changed(filter, k)) {
                break;
            }
            match bloom.first_parent(pos) {
                Some(p) => pos = p,
                None => break,
            }
        }
        (pos != start).then(|| (graph.id_at(gix::commitgraph::Position(pos)).to_owned(), pos))
    }

    /// The entry of child `slot` of trie node `node` in tree `tree`.
    fn child(&mut self, node: u32, tree: ObjectId, slot: u32) -> Result<Option<Entry>, Failure> {
        let n = node as usize;
        if let Some(found) = self.trees[n].get(&tree) {
            return Ok(found[slot as usize]);
        }
        let names = &self.nodes[n].names;
        let mut found: Box<[Option<Entry>]> = vec![None; names.len()].into_boxed_slice();
        if tree != ObjectId::empty_tree(tree.kind()) {
            // Built from the packs, else read through the object database.
            let packed = self.packs.tree(&tree);
            let data = match &packed {
                Some(data) => {
                    self.reads.packed_trees += 1;
                    data.as_slice()
                }
                None => {
                    self.reads.odb_trees += 1;
                    let Some(data) = self
                        .repo
                        .objects
                        .try_find(&tree, &mut self.buf)
                        .map_err(|e| fail(format!("cannot read tree {tree}"), e))?
                    else {
                        return Err(fail(
                            format!("cannot read tree {tree}"),
                            "the object is missing",
                        ));
                    };
                    if data.kind != gix::objs::Kind::Tree {
                        return Err(fail(
                            format!("cannot read tree {tree}"),
                            format!("the object is a {}", data.kind),
                        ));
                    }
                    data.data
                }
            };
            find_entries(data, tree.kind(), names, &mut found)
                .map_err(|e| fail(format!("cannot decode tree {tree}"), e))?;
        }
        let answer = found[slot as usize];
        self.trees[n].insert(tree, found);
        Ok(answer)
    }

    /// Folder `f`'s entry in the root tree `root`.
    fn entry(&mut self, f: usize, root: ObjectId) -> Result<Option<Entry>, Failure> {
        let depth = self.paths[f].len();
        if depth == 0 {
            return Ok(Some((EntryKind::Tree.into(), root)));
        }
        let mut tree = root;
        for i in 0..depth {
            let (node, slot) = self.paths[f][i];
            let e = self.child(node, tree, slot)?;
            if i + 1 == depth {
                return Ok(e);
            }
            match e {
                Some((mode, id)) if mode.is_tree() => tree = id,
                _ => return Ok(None),
            }
        }
        Ok(None)
    }

    /// The committer time of `id` exactly as the commit object holds it
    /// (`%ct`; the commit-graph keeps only 34 bits).
    fn commit_info(&mut self, id: ObjectId) -> Result<CommitInfo, Failure> {
        let hash = self.repo.object_hash();
        // The committer line straight from the pack when it reads, else
        // the whole commit through the object database.
        let packed = self.packs.commit_head(&id).and_then(|head| {
            let committer = gix::objs::CommitRefIter::from_bytes(head, hash)
                .committer()
                .ok()?;
            committer.time().ok()
        });
        let time = match packed {
            Some(time) => time,
            None => {
                let data = self
                    .repo
                    .objects
                    .try_find(&id, &mut self.buf)
                    .map_err(|e| fail(format!("cannot read commit {id}"), e))?
                    .ok_or_else(|| {
                        fail(format!("cannot read commit {id}"), "the object is missing")
                    })?;
                let committer = gix::objs::CommitRefIter::from_bytes(data.data, data.object_hash)
                    .committer()
                    .map_err(|e| fail(format!("cannot read the committer of {id}"), e))?;
                committer
                    .time()
                    .map_err(|e| fail(format!("cannot read the committer of {id}"), e))?
            }
        };
        Ok(CommitInfo {
            id: id.to_string(),
            timestamp: time.seconds,
        })
    }

    /// Each folder's entry in the start commit: the same along its whole
    /// chain. A folder not there gets its answer, [`Walk::NotInHead`].
    fn start_targets(
        &mut self,
        start: ObjectId,
        out: &mut [Option<Walk>],
    ) -> Result<Vec<Option<Entry>>, Failure> {
        let start_tree = self.commits[&start].tree;
        let mut targets: Vec<Option<Entry>> = Vec::with_capacity(out.len());
        for (f, answer) in out.iter_mut().enumerate() {
            // An empty tree (only the root can be one) holds no path, so
            // git's pathspec matches nothing in it: not in the start commit.
            let e = self
                .entry(f, start_tree)?
                .filter(|(mode, id)| !(mode.is_tree() && id.is_empty_tree()));
            if e.is_none() {
                *answer = Some(Walk::NotInHead);
            }
            targets.push(e);
        }
        Ok(targets)
    }

    /// Per folder: whether the commit's changed-path filter (its diff
    /// against the first parent) proves the folder unchanged, i.e.
    /// TREESAME to the first parent, the parent git checks first.
    fn proved_unchanged(&self, id: ObjectId, commit: &CommitData, folders: &[usize]) -> Vec<bool> {
        match (&self.bloom, commit.pos, commit.parents.first()) {
            (Some(b), Some(pos), Some(_)) => match b.filter(pos, &id) {
                Some(filter) => folders
                    .iter()
                    .map(|&f| {
                        self.keys[f]
                            .as_ref()
                            .is_some_and(|key| !Filters::maybe_changed(filter, key))
                    })
                    .collect(),
                None => vec![false; folders.len()],
            },
            _ => vec![false; folders.len()],
        }
    }

    /// The parent of `commit` that folder `f` follows: the first parent
    /// when the filter `proved` it TREESAME, else the first parent whose
    /// entry for `f` is `target`; `None` when no parent holds it.
    fn treesame_parent(
        &mut self,
        f: usize,
        commit: &CommitData,
        proved: bool,
        target: &Option<Entry>,
    ) -> Result<Option<ObjectId>, Failure> {
        let mut next = None;
        if proved {
            next = commit.parents.first().copied();
        }
        for p in commit.parents.iter().filter(|_| next.is_none()) {
            let tree = self.commits[p].tree;
            if self.entry(f, tree)? == *target {
                next = Some(*p);
                break;
            }
        }
        Ok(next)
    }

    /// Folder `f` goes on at commit `p`: queued when `p` is new to the walk.
    fn follow(
        &self,
        pending: &mut HashMap<ObjectId, Vec<usize>>,
        queue: &mut BinaryHeap<(u32, i64, ObjectId)>,
        p: ObjectId,
        f: usize,
    ) {
        match pending.get_mut(&p) {
            Some(list) => list.push(f),
            None => {
                pending.insert(p, vec![f]);
                let key = self.commits[&p].key;
                queue.push((key.0, key.1, p));
            }
        }
    }

    fn run(&mut self, start: ObjectId) -> Result<Vec<Walk>, Failure> {
        let n = self.paths.len();
        let head = start.to_string();
        let mut out: Vec<Option<Walk>> = (0..n).map(|_| None).collect();
        if !self.load(start)? {
            return Err(fail(
                format!("cannot read the start commit {start}"),
                "the object is missing",
            ));
        }
        let targets = self.start_targets(start, &mut out)?;
        let mut passed: Vec<Vec<ObjectId>> = vec![Vec::new(); n];
        let mut pending: HashMap<ObjectId, Vec<usize>> = HashMap::default();
        let mut queue: BinaryHeap<(u32, i64, ObjectId)> = BinaryHeap::new();
        let start_key = self.commits[&start].key;
        let waiting: Vec<usize> = (0..n).filter(|&f| targets[f].is_some()).collect();
        if !waiting.is_empty() {
            pending.insert(start, waiting);
            queue.push((start_key.0, start_key.1, start));
        }
        while let Some((_, _, mut id)) = queue.pop() {
            let Some(folders) = pending.remove(&id) else {
                continue;
            };
            self.progress.inc(1);
            // Read again if dropped since (a commit met in a wrong order).
            if !self.load(id)? {
                return Err(fail(
                    format!("cannot read commit {id}"),
                    "the object is missing",
                ));
            }
            // The only commit left to visit: pass the stretch of first
            // parents the filters prove TREESAME for all its folders.
            if queue.is_empty()
                && let Some((next, pos)) = self.skip(id, &folders)
            {
                self.commits.remove(&id);
                id = next;
                if !self.load_at(id, Some(pos))? {
                    return Err(fail(
                        format!("cannot read commit {id}"),
                        "the object is missing",
                    ));
                }
            }
            let Some(commit) = self.commits.remove(&id) else {
                continue;
            };
            // A shallow boundary: parents cut off. Nothing proves the
            // folders were different before, so this commit is never an
            // answer.
            let mut cut = self.shallow.contains(&id);
            for (i, p) in commit.parents.iter().enumerate() {
                if !self.load_at(*p, commit.parent_pos.get(i).copied())? {
                    cut = true;
                }
            }
            if cut {
                for f in folders {
                    out[f] = Some(Walk::Boundary {
                        shallow: self.shallow.contains(&id),
                        head: head.clone(),
                        boundary: id.to_string(),
                        passed: std::mem::take(&mut passed[f])
                            .iter()
                            .map(ObjectId::to_string)
                            .collect(),
                    });
                }
                continue;
            }
            let proved = self.proved_unchanged(id, &commit, &folders);
            for (f, proved) in folders.into_iter().zip(proved) {
                match self.treesame_parent(f, &commit, proved, &targets[f])? {
                    // TREESAME: the parent holds the same folder; follow it.
                    Some(p) => {
                        if self.record {
                            passed[f].push(id);
                        }
                        self.follow(&mut pending, &mut queue, p, f);
                    }
                    // A root commit holding the folder, a commit whose
                    // folder differs from its parent's, or a merge TREESAME
                    // to no parent: the answer.
                    None => out[f] = Some(Walk::Found(self.commit_info(id)?)),
                }
            }
            // Parents no folder follows are not needed any more.
            for p in &commit.parents {
                if !pending.contains_key(p) {
                    self.commits.remove(p);
                }
            }
        }
        out.into_iter()
            .map(|w| w.ok_or_else(|| fail("walking history", "a folder got no answer")))
            .collect()
    }
}

// The walk against `git log` on generated histories (once
// tests/history_walk.rs).
#[cfg(test)]
#[path = "walk_tests.rs"]
mod walk_tests;
