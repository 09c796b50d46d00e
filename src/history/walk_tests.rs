//! The one-walk-for-many-folders engine, differential against the git CLI:
//! random histories are generated with `git fast-import` (three branches,
//! one of them with its own root, merges and octopus merges resolved any
//! way, renames between folders, deletions, mode changes, a folder turned
//! into a file and back, empty commits, committer dates going backwards),
//! and for every folder at many revisions the answer of one walk must be
//! what `git log -1 --format='%H %ct' REV -- DIR` prints. The same
//! histories are walked without a commit-graph, with a complete one, and
//! with a stale one (commits newer than the graph), and shallow clones of
//! them must end on the boundary exactly where git's answer is a shallow
//! commit, and agree with git everywhere else.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::io::Write;
use std::path::Path;
use std::process::Stdio;

use crate::history::git::{Repo as GitRepo, Walk};

use crate::testkit as common;

use common::rng::Rng;

use common::git::ScratchRepo;

/// The folders every check asks about, in one walk. `""` is the root
/// (`git log -- .`).
const FOLDERS: [&str; 12] = [
    "",
    "configs",
    "configs/a",
    "configs/b",
    "configs/b/sub",
    "configs/c",
    "configs/deep",
    "configs/deep/x",
    "other",
    "configs/a2",
    "never/there",
    "configs/\u{fc}n\u{ef}",
];

/// The files a history may hold. `configs/deep` as a file and as a folder
/// exclude each other.
const FILES: [&str; 12] = [
    "configs/a/app.yaml",
    "configs/a/extra.yaml",
    "configs/a2/app.yaml",
    "configs/b/app.yaml",
    "configs/b/sub/deep.yaml",
    "configs/c/app.yaml",
    "configs/deep",
    "configs/deep/x/f.yaml",
    "configs/readme",
    "other/file",
    "top",
    "configs/\u{fc}n\u{ef}/app.yaml",
];

/// The id of the empty tree.
const EMPTY_TREE: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

/// A branch's tree: path -> (mode, blob mark).
type Tree = BTreeMap<String, (&'static str, u32)>;

/// Adds `path` to `tree`, first removing whatever would clash with it (a
/// file where a folder must be, or files under it).
fn put(tree: &mut Tree, path: &str, entry: (&'static str, u32)) {
    let under = format!("{path}/");
    tree.retain(|p, _| !p.starts_with(&under) && !path.starts_with(&format!("{p}/")));
    tree.insert(path.to_string(), entry);
}

/// Blob marks: 1..=5 are file contents, 6 and 7 symlink targets.
const BLOBS: u32 = 7;

/// A random history as a fast-import stream; every commit gets a mark
/// (from 100 up). Returns the stream and the marks in commit order.
fn history(seed: u64, steps: usize) -> (String, Vec<u32>) {
    let mut rng = Rng(seed);
    let mut s = String::new();
    for b in 1..=BLOBS {
        let data = match b {
            6 => "app.yaml".to_string(),
            7 => "../b/app.yaml".to_string(),
            _ => format!("v{b}\n"),
        };
        s += &format!("blob\nmark :{b}\ndata {}\n{data}\n", data.len());
    }
    let branches = ["main", "side", "third"];
    let mut tips: [Option<u32>; 3] = [None; 3];
    let mut trees: [Tree; 3] = [Tree::new(), Tree::new(), Tree::new()];
    let mut marks = Vec::new();
    let mut t: i64 = 1_600_000_000;
    for (mark, step) in (100u32..).zip(0..steps) {
        // main starts; side branches off main's first commit; third starts
        // with its own root after a few steps.
        let b = if step == 0 {
            0
        } else {
            let b = rng.below(3) as usize;
            if b == 2 && step < 6 { 0 } else { b }
        };
        if b == 1 && tips[1].is_none() {
            tips[1] = tips[0];
            trees[1] = trees[0].clone();
        }
        t += rng.below(2000) as i64 - 600;
        let mut parents = Vec::new();
        if let Some(tip) = tips[b] {
            parents.push(tip);
        }
        let mut tree = trees[b].clone();
        let mut msg = format!("step {step} on {}", branches[b]);
        let others: Vec<usize> = (0..3)
            .filter(|&o| o != b && tips[o].is_some() && tips[o] != tips[b])
            .collect();
        if !parents.is_empty() && !others.is_empty() && rng.below(3) == 0 {
            // A merge (sometimes octopus), each path from a random side,
            // sometimes a new value (an evil merge).
            let mut sides = vec![others[rng.below(others.len() as u64) as usize]];
            if others.len() == 2 && rng.below(4) == 0 {
                sides = others.clone();
            }
            let mut paths: BTreeSet<String> = tree.keys().cloned().collect();
            for &o in &sides {
                parents.push(tips[o].unwrap_or_default());
                paths.extend(trees[o].keys().cloned());
            }
            let mut merged = Tree::new();
            for p in paths {
                let pick = rng.below(sides.len() as u64 + 2) as usize;
                let entry = match pick {
                    0 => tree.get(&p).copied(),
                    k if k <= sides.len() => trees[sides[k - 1]].get(&p).copied(),
                    _ => Some(("100644", 1 + rng.below(5) as u32)),
                };
                if let Some(e) = entry {
                    put(&mut merged, &p, e);
                }
            }
            tree = merged;
            msg = format!("merge {sides:?} into {}", branches[b]);
        } else {
            for _ in 0..=rng.below(3) {
                let f = FILES[rng.below(FILES.len() as u64) as usize];
                match rng.below(10) {
                    // Empty commit.
                    0 => {}
                    1 => {
                        tree.remove(f);
                    }
                    2 => {
                        // Rename a present file to another path.
                        if let Some(from) = tree.keys().nth(rng.below(8) as usize).cloned()
                            && let Some(e) = tree.remove(&from)
                        {
                            put(&mut tree, f, e);
                        }
                    }
                    3 => {
                        let e = tree.get(f).map_or(1, |e| e.1);
                        put(&mut tree, f, ("100755", e));
                    }
                    4 => put(&mut tree, f, ("120000", 6 + rng.below(2) as u32)),
                    5 => {
                        // Delete a whole folder.
                        let dir = ["configs/a", "configs/b", "configs/deep"][rng.below(3) as usize];
                        let under = format!("{dir}/");
                        tree.retain(|p, _| !p.starts_with(&under));
                    }
                    _ => put(&mut tree, f, ("100644", 1 + rng.below(5) as u32)),
                }
            }
        }
        s += &format!(
            "commit refs/heads/{}\nmark :{mark}\ncommitter C O Mitter <c@example.com> {t} +0000\ndata {}\n{msg}\n",
            branches[b],
            msg.len() + 1
        );
        for (i, p) in parents.iter().enumerate() {
            s += &format!("{} :{p}\n", if i == 0 { "from" } else { "merge" });
        }
        s += "deleteall\n";
        for (p, (mode, blob)) in &tree {
            s += &format!("M {mode} :{blob} {p}\n");
        }
        s += "\n";
        tips[b] = Some(mark);
        trees[b] = tree;
        marks.push(mark);
    }
    (s, marks)
}

/// Feeds a fast-import stream into the repository; returns mark -> id.
fn import(r: &ScratchRepo, stream: &str) -> BTreeMap<u32, String> {
    let marks = r.dir.join(".git/marks");
    let mut child = r
        .cmd(&r.dir)
        .args(["fast-import", "--quiet", "--force"])
        .arg(format!("--import-marks-if-exists={}", marks.display()))
        .arg(format!("--export-marks={}", marks.display()))
        .stdin(Stdio::piped())
        .spawn()
        .expect("git fast-import");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stream.as_bytes())
        .expect("feeding fast-import");
    assert!(child.wait().expect("fast-import").success(), "fast-import");
    std::fs::read_to_string(&marks)
        .expect("marks")
        .lines()
        .filter_map(|l| {
            let (m, id) = l.split_once(' ')?;
            Some((m.trim_start_matches(':').parse().ok()?, id.to_string()))
        })
        .collect()
}

/// What `git log -1 REV -- DIR` says, in the engine's terms: `None` when
/// the folder is not in REV.
fn oracle(r: &ScratchRepo, dir: &Path, rev: &str, folder: &str) -> Option<(String, i64)> {
    let spec = format!("{rev}:{folder}");
    let out = r
        .cmd(dir)
        .args(["rev-parse", "-q", "--verify", &spec])
        .output()
        .expect("git rev-parse");
    // An empty tree (an empty root) holds no path: git's pathspec matches
    // nothing there either.
    if !out.status.success() || String::from_utf8_lossy(&out.stdout).trim() == EMPTY_TREE {
        return None;
    }
    let pathspec = if folder.is_empty() { "." } else { folder };
    let line = r.git_in(dir, &["log", "-1", "--format=%H %ct", rev, "--", pathspec]);
    let (h, t) = line
        .split_once(" ")
        .unwrap_or_else(|| panic!("git log -1 {rev} -- {pathspec} printed {line:?}"));
    Some((h.to_string(), t.parse().expect("timestamp")))
}

/// One walk for all folders at `rev` against git, folder by folder.
fn check(r: &ScratchRepo, dir: &Path, rev: &str, what: &str) {
    let repo = GitRepo::discover(dir).expect("open").expect("a repository");
    let walks = repo.last_changes(&FOLDERS, Some(rev)).expect("walk");
    assert_eq!(walks.len(), FOLDERS.len());
    for (folder, walk) in FOLDERS.iter().zip(walks) {
        let want = oracle(r, dir, rev, folder);
        // Together with the others, and alone (a walk of one folder takes
        // other paths through the filters).
        let alone = repo
            .last_changes(&[folder], Some(rev))
            .expect("walk")
            .remove(0);
        for (how, walk) in [("together", walk), ("alone", alone)] {
            let got = match walk {
                Walk::Found(c) => Some((c.id, c.timestamp)),
                Walk::NotInHead => None,
                other => panic!("{what}: {rev} {folder:?}: unexpected {other:?}"),
            };
            assert_eq!(
                got,
                want,
                "{what}: rev {rev} folder {folder:?} {how}\n{}",
                r.git_in(dir, &["log", "--graph", "--format=%h %ct %s", "--all"])
            );
        }
    }
}

/// The commit-graphs every history is walked with: the changed-path
/// filter version expected in the file (None: no filters), and git's
/// arguments to write it.
const GRAPHS: [(Option<u32>, &[&str]); 3] = [
    (
        None,
        &["commit-graph", "write", "--reachable", "--no-changed-paths"],
    ),
    (
        Some(1),
        &[
            "-c",
            "commitGraph.changedPathsVersion=1",
            "commit-graph",
            "write",
            "--reachable",
            "--changed-paths",
        ],
    ),
    (
        Some(2),
        &[
            "-c",
            "commitGraph.changedPathsVersion=2",
            "commit-graph",
            "write",
            "--reachable",
            "--changed-paths",
        ],
    ),
];

/// The byte range of chunk `id` in a commit-graph file.
fn chunk(graph: &[u8], id: &[u8; 4]) -> Option<std::ops::Range<usize>> {
    assert_eq!(&graph[..4], b"CGPH", "a commit-graph file");
    let be64 =
        |at: usize| u64::from_be_bytes(graph[at..at + 8].try_into().expect("8 bytes")) as usize;
    (0..usize::from(graph[6]))
        .map(|i| 8 + 12 * i)
        .find(|&at| &graph[at..at + 4] == id)
        .map(|at| be64(at + 4)..be64(at + 16))
}

/// The hash version in a commit-graph file's BDAT header (None: no filters).
fn filter_version(graph: &[u8]) -> Option<u32> {
    let data = chunk(graph, b"BDAT")?;
    Some(u32::from_be_bytes(
        graph[data.start..data.start + 4]
            .try_into()
            .expect("4 bytes"),
    ))
}

/// Writes a fresh commit-graph in `dir` with git `args`, and checks that it
/// holds the filter version expected.
fn write_graph(r: &ScratchRepo, dir: &Path, args: &[&str], version: Option<u32>) {
    let file = dir.join(".git/objects/info/commit-graph");
    let _ = std::fs::remove_file(&file);
    r.git_in(dir, args);
    let bytes = std::fs::read(&file).expect("git wrote a commit-graph");
    assert_eq!(filter_version(&bytes), version, "git {args:?}");
}

fn check_history(r: &ScratchRepo, ids: &BTreeMap<u32, String>, marks: &[u32], what: &str) {
    for rev in ["main", "side", "third"] {
        check(r, &r.dir, rev, what);
    }
    for m in marks.iter().step_by(4) {
        check(r, &r.dir, &ids[m], what);
    }
}

#[test]
fn one_walk_agrees_with_git_for_every_folder() {
    for seed in [0x9e37_79b9_7f4a_7c15_u64, 42, 7_777_777, 31_337] {
        let (stream, marks) = history(seed, 90);
        let r = ScratchRepo::new();
        let ids = import(&r, &stream);
        r.git(&["symbolic-ref", "HEAD", "refs/heads/main"]);
        assert!(
            !r.dir.join(".git/objects/info/commit-graph").exists(),
            "fast-import writes no commit-graph"
        );
        check_history(
            &r,
            &ids,
            &marks,
            &format!("seed {seed} without a commit-graph"),
        );
        for (version, args) in GRAPHS {
            write_graph(&r, &r.dir, args, version);
            check_history(
                &r,
                &ids,
                &marks,
                &format!("seed {seed} with a commit-graph, filters {version:?}"),
            );
        }
    }
}

#[test]
fn a_stale_commit_graph_and_newer_commits_agree_with_git() {
    let (stream, marks) = history(5, 120);
    // Import the first commits, write the graph, then the rest: the newest
    // commits are only in the object database.
    let cut = stream
        .match_indices("commit refs/heads/")
        .nth(70)
        .map(|(i, _)| i)
        .expect("enough commits");
    for (version, args) in GRAPHS {
        let r = ScratchRepo::new();
        import(&r, &stream[..cut]);
        write_graph(&r, &r.dir, args, version);
        let ids = import(&r, &stream[cut..]);
        r.git(&["symbolic-ref", "HEAD", "refs/heads/main"]);
        let in_graph = r.git(&["rev-list", "--count", "--all"]);
        assert!(in_graph.parse::<u32>().expect("count") > 70);
        check_history(
            &r,
            &ids,
            &marks,
            &format!("stale commit-graph, filters {version:?}"),
        );
    }
}

#[test]
fn a_split_commit_graph_chain_with_filters_agrees_with_git() {
    let (stream, marks) = history(77, 120);
    let cut = stream
        .match_indices("commit refs/heads/")
        .nth(60)
        .map(|(i, _)| i)
        .expect("enough commits");
    let r = ScratchRepo::new();
    import(&r, &stream[..cut]);
    let split = [
        "commit-graph",
        "write",
        "--reachable",
        "--changed-paths",
        "--split=no-merge",
    ];
    r.git(&split);
    let ids = import(&r, &stream[cut..]);
    r.git(&split);
    r.git(&["symbolic-ref", "HEAD", "refs/heads/main"]);
    let dir = r.dir.join(".git/objects/info/commit-graphs");
    let chain = std::fs::read_to_string(dir.join("commit-graph-chain")).expect("a chain");
    assert_eq!(chain.lines().count(), 2, "two layers");
    assert!(!r.dir.join(".git/objects/info/commit-graph").exists());
    for layer in chain.lines() {
        let bytes = std::fs::read(dir.join(format!("graph-{layer}.graph"))).expect("layer");
        assert_eq!(filter_version(&bytes), Some(1), "layer {layer}");
    }
    check_history(&r, &ids, &marks, "split commit-graph with filters");
    // A layer without filters on top of those with them.
    let mut more = String::from("reset refs/heads/main\nfrom refs/heads/main^0\n\n");
    for (i, path) in ["configs/a/app.yaml", "other/file", "configs/b/app.yaml"]
        .iter()
        .enumerate()
    {
        more += &format!(
            "commit refs/heads/main\ncommitter C O Mitter <c@example.com> {} +0000\ndata 5\nmore\nM 100644 inline {path}\ndata 3\nm{i}\n\n",
            1_700_000_000 + i
        );
    }
    import(&r, &more);
    r.git(&[
        "commit-graph",
        "write",
        "--reachable",
        "--split=no-merge",
        "--no-changed-paths",
    ]);
    let chain = std::fs::read_to_string(dir.join("commit-graph-chain")).expect("a chain");
    let top = chain.lines().last().expect("a layer");
    assert_eq!(chain.lines().count(), 3, "three layers");
    let bytes = std::fs::read(dir.join(format!("graph-{top}.graph"))).expect("layer");
    assert_eq!(filter_version(&bytes), None, "top layer without filters");
    check_history(
        &r,
        &ids,
        &marks,
        "split commit-graph, top layer without filters",
    );
}

#[test]
fn shallow_clones_end_on_the_boundary_where_git_would_guess() {
    let (stream, _) = history(99, 80);
    let origin = ScratchRepo::new();
    import(&origin, &stream);
    origin.git(&["symbolic-ref", "HEAD", "refs/heads/main"]);
    origin.git(&["commit-graph", "write", "--reachable", "--changed-paths"]);
    let parent = origin.dir.parent().expect("parent").to_path_buf();
    let mut boundaries = 0;
    let mut found = 0;
    for depth in [1u32, 2, 4, 9] {
        let clone = parent.join(format!("clone{depth}"));
        let url = format!("file://{}", origin.dir.display());
        origin.git_in(
            &parent,
            &[
                "clone",
                "-q",
                "--no-checkout",
                "--depth",
                &depth.to_string(),
                &url,
                clone.to_str().expect("utf-8"),
            ],
        );
        let shallow: HashSet<String> = std::fs::read_to_string(clone.join(".git/shallow"))
            .expect("the clone is shallow")
            .lines()
            .map(str::to_string)
            .collect();
        // A commit-graph with filters in the clone changes nothing: git
        // ignores it in a shallow clone, and so does the walk.
        if depth == 4 {
            origin.git_in(
                &clone,
                &["commit-graph", "write", "--reachable", "--changed-paths"],
            );
        }
        let repo = GitRepo::discover(&clone)
            .expect("open")
            .expect("a repository");
        let walks = repo.last_changes(&FOLDERS, None).expect("walk");
        for (folder, walk) in FOLDERS.iter().zip(walks) {
            let what = format!("depth {depth} folder {folder:?}");
            let in_clone = oracle(&origin, &clone, "HEAD", folder);
            match (in_clone, walk) {
                (None, Walk::NotInHead) => {}
                (
                    Some((id, _)),
                    Walk::Boundary {
                        shallow: true,
                        boundary,
                        passed,
                        ..
                    },
                ) => {
                    assert!(shallow.contains(&id), "{what}: boundary but git named {id}");
                    assert_eq!(boundary, id, "{what}");
                    // Every commit passed holds the folder as HEAD does.
                    let head_tree =
                        origin.git_in(&clone, &["rev-parse", &format!("HEAD:{folder}")]);
                    for p in &passed {
                        assert_ne!(p, &boundary);
                        let t = origin.git_in(&clone, &["rev-parse", &format!("{p}:{folder}")]);
                        assert_eq!(t, head_tree, "{what}: passed {p} changes the folder");
                    }
                    boundaries += 1;
                }
                (Some((id, ts)), Walk::Found(c)) => {
                    assert!(!shallow.contains(&id), "{what}: trusted the boundary {id}");
                    assert_eq!((c.id.as_str(), c.timestamp), (id.as_str(), ts), "{what}");
                    // And the full history agrees.
                    let full = oracle(&origin, &origin.dir, "main", folder);
                    assert_eq!(full, Some((id, ts)), "{what}: full history");
                    found += 1;
                }
                (want, got) => panic!("{what}: git says {want:?}, the walk {got:?}"),
            }
        }
    }
    assert!(boundaries > 0 && found > 0, "both outcomes exercised");
}

#[test]
fn many_folders_in_one_walk_equal_one_walk_each() {
    let (stream, _) = history(2024, 150);
    let r = ScratchRepo::new();
    import(&r, &stream);
    r.git(&["symbolic-ref", "HEAD", "refs/heads/main"]);
    let repo = GitRepo::discover(&r.dir)
        .expect("open")
        .expect("a repository");
    let answer = |w: Walk| match w {
        Walk::Found(c) => Some((c.id, c.timestamp)),
        Walk::NotInHead => None,
        other => panic!("unexpected {other:?}"),
    };
    let git = |folder| oracle(&r, &r.dir, "HEAD", folder);
    // Every folder in one walk and each alone (no revision: HEAD), each
    // against `git log -1 -- FOLDER`.
    let all = repo.last_changes(&FOLDERS, None).expect("walk");
    assert_eq!(all.len(), FOLDERS.len());
    for (folder, together) in FOLDERS.iter().zip(all) {
        let alone = repo.last_changes(&[folder], None).expect("walk").remove(0);
        assert_eq!(
            answer(together),
            git(folder),
            "folder {folder:?} in one walk"
        );
        assert_eq!(answer(alone), git(folder), "folder {folder:?} alone");
    }
    // Asking twice for a folder answers twice, in order, as git does.
    let twice: Vec<_> = repo
        .last_changes(&["configs/a", "other", "configs/a"], None)
        .expect("walk")
        .into_iter()
        .map(answer)
        .collect();
    assert_eq!(twice, [git("configs/a"), git("other"), git("configs/a")]);
    assert!(twice[0].is_some(), "configs/a is in the history");
}

/// A straight history of 201 commits: the first creates `configs/a` and
/// `other`, commit 50 changes `configs/a`, every other one `other`.
fn straight_history() -> ScratchRepo {
    let mut s = String::new();
    for i in 0..=200u32 {
        let path = if i == 0 || i == 50 {
            "configs/a/app.yaml"
        } else {
            "other/file"
        };
        s += &format!(
            "commit refs/heads/main\ncommitter C O Mitter <c@example.com> {} +0000\ndata 2\nc\n",
            1_600_000_000 + i
        );
        if i == 0 {
            s += "M 100644 inline other/file\ndata 2\no\n";
        }
        s += &format!(
            "M 100644 inline {path}\ndata {}\n{i}\n\n",
            i.to_string().len()
        );
    }
    let r = ScratchRepo::new();
    import(&r, &s);
    r.git(&["symbolic-ref", "HEAD", "refs/heads/main"]);
    r
}

/// Where walks read trees and commits from, summed over the walks' debug
/// records (see [`walk_log`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct ObjectReads {
    /// Trees built straight from a pack.
    packed_trees: usize,
    /// Trees read through the object database.
    odb_trees: usize,
    /// Commits whose first lines were read straight from a pack.
    packed_commits: usize,
    /// Commits read whole through the object database.
    odb_commits: usize,
}

/// The walk says what it read in one debug record per walk ("history: the
/// walk over N folder(s) read T trees (P from the packs, O through the
/// object database) and C commit objects (P from the packs, O through the
/// object database)", the line `RUNNER_DEBUG=1` shows): this test binary's
/// logger keeps each thread's records, and [`walk_log::reads`] adds them up.
mod walk_log {
    use std::cell::RefCell;
    use std::sync::Once;

    use super::ObjectReads;

    thread_local! {
        static RECORDS: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
    }

    struct Keep;

    impl log::Log for Keep {
        fn enabled(&self, m: &log::Metadata<'_>) -> bool {
            m.target().starts_with("settings_image::history")
        }

        fn log(&self, r: &log::Record<'_>) {
            if self.enabled(r.metadata()) {
                RECORDS.with(|v| v.borrow_mut().push(r.args().to_string()));
            }
        }

        fn flush(&self) {}
    }

    static KEEP: Keep = Keep;
    static INSTALL: Once = Once::new();

    /// Runs `f` and returns what the walks it ran on this thread read,
    /// from their debug records (there must be at least one).
    pub fn reads<T>(f: impl FnOnce() -> T) -> (T, ObjectReads) {
        INSTALL.call_once(|| {
            log::set_logger(&KEEP).expect("the only logger");
            log::set_max_level(log::LevelFilter::Debug);
        });
        RECORDS.with(|v| v.borrow_mut().clear());
        let out = f();
        let records = RECORDS.with(|v| std::mem::take(&mut *v.borrow_mut()));
        let mut sum = ObjectReads::default();
        let mut walks = 0;
        for r in records
            .iter()
            .filter(|r| r.starts_with("history: the walk over "))
        {
            let n: Vec<usize> = r
                .split(|c: char| !c.is_ascii_digit())
                .filter(|w| !w.is_empty())
                .map(|w| w.parse().expect("a count"))
                .collect();
            let [
                _folders,
                trees,
                packed_trees,
                odb_trees,
                commits,
                packed_commits,
                odb_commits,
            ] = n[..]
            else {
                panic!("not the walk's record: {r}");
            };
            assert_eq!(trees, packed_trees + odb_trees, "{r}");
            assert_eq!(commits, packed_commits + odb_commits, "{r}");
            sum.packed_trees += packed_trees;
            sum.odb_trees += odb_trees;
            sum.packed_commits += packed_commits;
            sum.odb_commits += odb_commits;
            walks += 1;
        }
        assert!(walks > 0, "no walk said what it read: {records:#?}");
        (out, sum)
    }
}

/// The walk's answer for one folder, and the trees it read.
fn walk_one(dir: &Path, folder: &str) -> (Walk, usize) {
    let repo = GitRepo::discover(dir).expect("open").expect("a repository");
    let (walk, reads) =
        walk_log::reads(|| repo.last_changes(&[folder], None).expect("walk").remove(0));
    (walk, reads.packed_trees + reads.odb_trees)
}

#[test]
fn changed_path_filters_spare_the_tree_reads() {
    let r = straight_history();
    let want = oracle(&r, &r.dir, "main", "configs/a").expect("in main");
    let no_filters = GRAPHS[0];
    write_graph(&r, &r.dir, no_filters.1, no_filters.0);
    let (walk, trees_without) = walk_one(&r.dir, "configs/a");
    assert_eq!(
        walk,
        Walk::Found(crate::history::CommitInfo {
            id: want.0.clone(),
            timestamp: want.1
        })
    );
    assert!(
        trees_without >= 150,
        "{trees_without} trees read without filters"
    );
    for (version, args) in &GRAPHS[1..] {
        write_graph(&r, &r.dir, args, *version);
        let (walk, trees) = walk_one(&r.dir, "configs/a");
        assert_eq!(
            walk,
            Walk::Found(crate::history::CommitInfo {
                id: want.0.clone(),
                timestamp: want.1
            })
        );
        assert!(
            trees <= 6,
            "filters {version:?}: {trees} trees read (without: {trees_without})"
        );
    }
}

#[test]
fn the_walk_trusts_the_filters_as_git_does() {
    // The filter of the commit that changed the folder, zeroed in place,
    // claims it changed nothing: git then passes it and answers the root
    // commit, and so must the walk (a walk that ignored the filters would
    // find the true commit 50).
    let r = straight_history();
    let truth = oracle(&r, &r.dir, "main", "configs/a").expect("in main");
    let root = r.git(&["rev-list", "--max-parents=0", "main"]);
    assert_ne!(truth.0, root);
    write_graph(&r, &r.dir, GRAPHS[2].1, GRAPHS[2].0);
    let file = r.dir.join(".git/objects/info/commit-graph");
    let mut bytes = std::fs::read(&file).expect("graph");
    let ids = chunk(&bytes, b"OIDL").expect("ids");
    let want = hex::decode(&truth.0).expect("hex");
    let lex = bytes[ids]
        .chunks(20)
        .position(|id| id == want.as_slice())
        .expect("commit 50 in the graph");
    let index = chunk(&bytes, b"BIDX").expect("index");
    let end_at = |i: usize| {
        let at = index.start + 4 * i;
        u32::from_be_bytes(bytes[at..at + 4].try_into().expect("4 bytes")) as usize
    };
    let (start, end) = (if lex == 0 { 0 } else { end_at(lex - 1) }, end_at(lex));
    assert!(end > start, "commit 50 has a filter");
    let data = chunk(&bytes, b"BDAT").expect("filters");
    bytes[data.start + 12 + start..data.start + 12 + end].fill(0);
    std::fs::write(&file, &bytes).expect("rewrite the graph");
    let git = oracle(&r, &r.dir, "main", "configs/a").expect("in main");
    assert_eq!(git.0, root, "git follows the zeroed filters");
    let (walk, _) = walk_one(&r.dir, "configs/a");
    assert_eq!(
        walk,
        Walk::Found(crate::history::CommitInfo {
            id: git.0,
            timestamp: git.1
        })
    );
    // Reading filters is git's choice to make: with
    // commitGraph.readChangedPaths=false both read the trees again.
    r.git(&["config", "commitGraph.readChangedPaths", "false"]);
    assert_eq!(oracle(&r, &r.dir, "main", "configs/a"), Some(truth.clone()));
    let (walk, _) = walk_one(&r.dir, "configs/a");
    assert_eq!(
        walk,
        Walk::Found(crate::history::CommitInfo {
            id: truth.0,
            timestamp: truth.1
        })
    );
}

/// Gives every sixth commit of a fast-import stream an author line before
/// its committer line, alternately 300 and 700 bytes long: the walk reads a
/// commit's headers from the first bytes of the object, and a committer
/// line that ends beyond them must be read from the whole object.
fn long_authors(stream: &str) -> String {
    let mut out = String::new();
    let mut n = 0;
    for line in stream.split_inclusive('\n') {
        if let Some(rest) = line.strip_prefix("committer C O Mitter <c@example.com> ") {
            n += 1;
            if n % 6 == 0 {
                let name = "A".repeat(if n % 12 == 0 { 700 } else { 300 });
                out += &format!("author {name} <a@example.com> {rest}");
            }
        }
        out += line;
    }
    out
}

/// Walks every folder at every branch and at every fourth commit against
/// git in `dir`; returns where the walks read their objects from.
fn check_reads(
    r: &ScratchRepo,
    dir: &Path,
    ids: &BTreeMap<u32, String>,
    marks: &[u32],
    what: &str,
) -> ObjectReads {
    let ((), reads) = walk_log::reads(|| {
        for rev in ["main", "side", "third"] {
            check(r, dir, rev, what);
        }
        for m in marks.iter().step_by(4) {
            check(r, dir, &ids[m], what);
        }
    });
    reads
}

#[test]
fn a_clone_as_a_server_sends_it_agrees_with_git() {
    // The server: the history repacked as a server's gc does (trees
    // deltified against other versions and other paths, offset deltas),
    // then cloned through upload-pack, as actions/checkout fetches it.
    let (stream, marks) = history(4242, 160);
    let server = ScratchRepo::new();
    let ids = import(&server, &long_authors(&stream));
    server.git(&["symbolic-ref", "HEAD", "refs/heads/main"]);
    server.git(&["repack", "-adfq"]);
    let clone = server.dir.parent().expect("parent").join("clone");
    server.git_in(
        &server.dir,
        &[
            "clone",
            "-q",
            "--no-local",
            "--no-checkout",
            ".",
            clone.to_str().expect("utf-8"),
        ],
    );
    for b in ["side", "third"] {
        server.git_in(
            &clone,
            &["branch", "-q", b, &format!("refs/remotes/origin/{b}")],
        );
    }
    let packs = |dir: &Path| {
        std::fs::read_dir(dir.join(".git/objects/pack"))
            .expect("pack dir")
            .filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "pack"))
            })
            .count()
    };
    assert_eq!(packs(&clone), 1, "the clone holds one pack");
    let reads = check_reads(&server, &clone, &ids, &marks, "clone, offset deltas");
    assert!(
        reads.packed_trees > 0 && reads.packed_commits > 0,
        "{reads:?}"
    );
    assert_eq!(
        reads.odb_trees, 0,
        "every tree built from the pack: {reads:?}"
    );
    assert!(
        reads.odb_commits > 0,
        "long committer lines read whole: {reads:?}"
    );

    // The same objects with reference deltas (what old clients asked for).
    server.git_in(
        &clone,
        &["-c", "repack.useDeltaBaseOffset=false", "repack", "-adfq"],
    );
    assert_eq!(packs(&clone), 1);
    let reads = check_reads(&server, &clone, &ids, &marks, "clone, reference deltas");
    assert!(
        reads.packed_trees > 0 && reads.packed_commits > 0,
        "{reads:?}"
    );
    assert_eq!(
        reads.odb_trees, 0,
        "every tree built from the pack: {reads:?}"
    );

    // A commit made on top: its commit and trees are loose, the rest packed.
    let index = clone.join(".git/next-index");
    let mut add = server.cmd(&clone);
    add.env("GIT_INDEX_FILE", &index);
    let status = add
        .args(["read-tree", "main"])
        .status()
        .expect("git read-tree");
    assert!(status.success());
    let new_blob = {
        let mut c = server.cmd(&clone);
        let mut child = c
            .args(["hash-object", "-w", "--stdin"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("git hash-object");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(b"new: 1\n")
            .expect("blob");
        let out = child.wait_with_output().expect("hash-object");
        String::from_utf8(out.stdout)
            .expect("utf-8")
            .trim()
            .to_string()
    };
    let status = server
        .cmd(&clone)
        .env("GIT_INDEX_FILE", &index)
        .args([
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("100644,{new_blob},configs/b/sub/new.yaml"),
        ])
        .status()
        .expect("git update-index");
    assert!(status.success());
    let out = server
        .cmd(&clone)
        .env("GIT_INDEX_FILE", &index)
        .args(["write-tree"])
        .output()
        .expect("git write-tree");
    let tree = String::from_utf8(out.stdout)
        .expect("utf-8")
        .trim()
        .to_string();
    let commit = server.git_in(
        &clone,
        &["commit-tree", &tree, "-p", "main", "-m", "on top, loose"],
    );
    server.git_in(&clone, &["update-ref", "refs/heads/main", &commit]);
    let reads = check_reads(&server, &clone, &ids, &marks, "loose commit on top");
    assert!(reads.odb_trees > 0 && reads.odb_commits > 0, "{reads:?}");
    assert!(
        reads.packed_trees > 0 && reads.packed_commits > 0,
        "{reads:?}"
    );
}

#[test]
fn names_sharing_a_prefix_are_found_in_tree_order() {
    // In git's tree order a folder sorts as if its name ended in `/`:
    // `a-x` and `a.d` come before the folder `a`, after the file `a`; the
    // walk stops scanning a tree past a name's place, so it must know both.
    let steps: [&[&str]; 9] = [
        &[
            "M 100644 inline configs/a/x.yaml",
            "M 100644 inline configs/a-x",
            "M 100644 inline configs/a.d/f",
            "M 100644 inline configs/a0",
            "M 100644 inline configs/b/y",
        ],
        &["M 100644 inline configs/a-x"],
        &["M 100644 inline configs/a/x.yaml"],
        &["M 100644 inline configs/a.d/f"],
        &["D configs/a", "M 100644 inline configs/a"],
        &["M 100644 inline configs/a0"],
        &["D configs/a", "M 100644 inline configs/a/x.yaml"],
        &["M 100644 inline configs/b/y"],
        &["M 100644 inline configs/a.d/f"],
    ];
    let mut s = String::new();
    for (i, ops) in steps.iter().enumerate() {
        s += &format!(
            "commit refs/heads/main\nmark :{}\ncommitter C O Mitter <c@example.com> {} +0000\ndata 2\nc\n",
            i + 1,
            1_600_000_000 + i
        );
        for op in *ops {
            s += &format!("{op}\n");
            if op.starts_with('M') {
                s += &format!("data 3\n{i}{i}\n");
            }
        }
        s += "\n";
    }
    let r = ScratchRepo::new();
    let ids = import(&r, &s);
    r.git(&["symbolic-ref", "HEAD", "refs/heads/main"]);
    r.git(&["repack", "-adfq"]);
    let folders = [
        "configs/a",
        "configs/a-x",
        "configs/a.d",
        "configs/a0",
        "configs/b",
        "configs",
    ];
    let repo = GitRepo::discover(&r.dir)
        .expect("open")
        .expect("a repository");
    for id in ids.values() {
        let together = repo.last_changes(&folders, Some(id)).expect("walk");
        for (folder, walk) in folders.iter().zip(together) {
            let alone = repo
                .last_changes(&[folder], Some(id))
                .expect("walk")
                .remove(0);
            let want = oracle(&r, &r.dir, id, folder);
            for (how, walk) in [("together", walk), ("alone", alone)] {
                let got = match walk {
                    Walk::Found(c) => Some((c.id, c.timestamp)),
                    Walk::NotInHead => None,
                    other => panic!("{id} {folder}: unexpected {other:?}"),
                };
                assert_eq!(got, want, "{id} {folder} {how}");
            }
        }
    }
}
