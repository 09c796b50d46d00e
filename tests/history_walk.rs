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

use settings_image::history::git::{Repo as GitRepo, Walk};

mod common;

use common::git::ScratchRepo;

/// The folders every check asks about, in one walk. `""` is the root
/// (`git log -- .`).
const FOLDERS: [&str; 11] = [
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
];

/// The files a history may hold. `configs/deep` as a file and as a folder
/// exclude each other.
const FILES: [&str; 11] = [
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
];

/// The id of the empty tree.
const EMPTY_TREE: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

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
        let got = match walk {
            Walk::Found(c) => Some((c.id, c.timestamp)),
            Walk::NotInHead => None,
            other => panic!("{what}: {rev} {folder:?}: unexpected {other:?}"),
        };
        assert_eq!(
            got,
            want,
            "{what}: rev {rev} folder {folder:?}\n{}",
            r.git_in(dir, &["log", "--graph", "--format=%h %ct %s", "--all"])
        );
    }
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
        r.git(&["commit-graph", "write", "--reachable"]);
        assert!(r.dir.join(".git/objects/info/commit-graph").is_file());
        check_history(
            &r,
            &ids,
            &marks,
            &format!("seed {seed} with a commit-graph"),
        );
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
    let r = ScratchRepo::new();
    import(&r, &stream[..cut]);
    r.git(&["commit-graph", "write", "--reachable"]);
    let ids = import(&r, &stream[cut..]);
    r.git(&["symbolic-ref", "HEAD", "refs/heads/main"]);
    let in_graph = r.git(&["rev-list", "--count", "--all"]);
    assert!(in_graph.parse::<u32>().expect("count") > 70);
    check_history(&r, &ids, &marks, "stale commit-graph");
}

#[test]
fn shallow_clones_end_on_the_boundary_where_git_would_guess() {
    let (stream, _) = history(99, 80);
    let origin = ScratchRepo::new();
    import(&origin, &stream);
    origin.git(&["symbolic-ref", "HEAD", "refs/heads/main"]);
    origin.git(&["commit-graph", "write", "--reachable"]);
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
    let all = repo.last_changes(&FOLDERS, None).expect("walk");
    for (folder, together) in FOLDERS.iter().zip(all) {
        let alone = repo.last_changes(&[folder], None).expect("walk");
        assert_eq!(alone, vec![together], "folder {folder:?}");
    }
    // Asking twice for a folder answers twice, in order.
    let twice = repo
        .last_changes(&["configs/a", "other", "configs/a"], None)
        .expect("walk");
    assert_eq!(twice[0], twice[2]);
}
