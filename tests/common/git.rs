//! Scratch git repositories driven by the git CLI (the oracle for history
//! questions), isolated from any global or system configuration.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `git` run in `cwd` with `home` as its home and a fixed identity; no
/// system or global configuration, no inherited `GIT_DIR`.
pub fn git_cmd(home: &Path, cwd: &Path) -> Command {
    let mut c = Command::new("git");
    c.current_dir(cwd)
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", home.join("gitconfig"))
        .env("GIT_AUTHOR_NAME", "A U Thor")
        .env("GIT_AUTHOR_EMAIL", "author@example.com")
        .env("GIT_COMMITTER_NAME", "C O Mitter")
        .env("GIT_COMMITTER_EMAIL", "committer@example.com")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE");
    c
}

/// Runs `cmd` (a [`git_cmd`], perhaps with more environment) with `args`,
/// and author and committer time at the unix second `time` when given;
/// panics with git's output on failure; returns stdout, trimmed.
pub fn run(cmd: &mut Command, args: &[&str], time: Option<i64>) -> String {
    if let Some(t) = time {
        let d = format!("@{t} +0000");
        cmd.env("GIT_AUTHOR_DATE", &d).env("GIT_COMMITTER_DATE", &d);
    }
    let out = cmd
        .args(args)
        .output()
        .expect("git must be installed (scripts/deps.sh installs it)");
    assert!(
        out.status.success(),
        "git {args:?} failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Runs `git` in `dir` with both author and committer time at the unix
/// second `time`, a home beside `dir`, and the fixed identity of
/// [`git_cmd`]; panics with git's output on failure.
pub fn git_at(dir: &Path, args: &[&str], time: i64) {
    run(&mut git_cmd(&home_beside(dir), dir), args, Some(time));
}

/// `DIR/../home`, created: the home of [`git_at`] for a repository in `dir`.
pub fn home_beside(dir: &Path) -> PathBuf {
    let home = dir.join("../home");
    std::fs::create_dir_all(&home).expect("git home");
    home
}

/// A new repository (branch `main`) in a temporary directory, with its own
/// home. Test files add their own methods (commits, merges, oracles).
pub struct ScratchRepo {
    _tmp: super::TempDir,
    /// The home git runs with.
    pub home: PathBuf,
    /// The work tree.
    pub dir: PathBuf,
}

impl ScratchRepo {
    /// `git init -b main` in a fresh temporary directory.
    pub fn new() -> ScratchRepo {
        let tmp = super::TempDir::new();
        let home = tmp.path().join("home");
        let dir = tmp.path().join("repo");
        std::fs::create_dir_all(&home).expect("home");
        std::fs::create_dir_all(&dir).expect("repo dir");
        let r = ScratchRepo {
            _tmp: tmp,
            home,
            dir,
        };
        r.git(&["init", "-q", "-b", "main"]);
        r
    }

    /// `git` in `cwd` with this repository's home.
    pub fn cmd(&self, cwd: &Path) -> Command {
        git_cmd(&self.home, cwd)
    }

    /// Runs git in `cwd`; panics with its output on failure; returns stdout, trimmed.
    pub fn git_in(&self, cwd: &Path, args: &[&str]) -> String {
        run(&mut self.cmd(cwd), args, None)
    }

    /// Runs git in the work tree.
    pub fn git(&self, args: &[&str]) -> String {
        self.git_in(&self.dir, args)
    }

    /// Runs git in the work tree with author and committer time `t`.
    pub fn git_at(&self, args: &[&str], t: i64) -> String {
        run(&mut self.cmd(&self.dir), args, Some(t))
    }

    /// Writes `content` to `rel` in the work tree (parents created).
    pub fn write(&self, rel: &str, content: impl AsRef<[u8]>) {
        let p = self.dir.join(rel);
        std::fs::create_dir_all(p.parent().expect("a parent")).expect("mkdir");
        std::fs::write(p, content).expect("writing a file");
    }

    /// `git add -A`, then a commit `msg` (empty or not) with author and
    /// committer time `t`; the new HEAD.
    pub fn commit_all(&self, msg: &str, t: i64) -> String {
        self.commit_at(msg, t, t)
    }

    /// [`ScratchRepo::write`] of each of `files` (path, content), then
    /// [`ScratchRepo::commit_all`].
    pub fn commit_files(&self, files: &[(&str, &str)], msg: &str, t: i64) -> String {
        for (rel, content) in files {
            self.write(rel, content);
        }
        self.commit_all(msg, t)
    }

    /// [`ScratchRepo::commit_all`] with committer time `ct` and author time
    /// `at`, in zones of their own (committer -0500, author +0200: a reader
    /// that took the author's time or a local time would be seen).
    pub fn commit_at(&self, msg: &str, ct: i64, at: i64) -> String {
        self.git(&["add", "-A"]);
        self.commit_staged(msg, ct, at)
    }

    /// [`ScratchRepo::commit_at`] of the index as it is (no `git add`).
    pub fn commit_staged(&self, msg: &str, ct: i64, at: i64) -> String {
        run(
            self.cmd(&self.dir)
                .env("GIT_AUTHOR_DATE", format!("@{at} +0200"))
                .env("GIT_COMMITTER_DATE", format!("@{ct} -0500")),
            &["commit", "-q", "--allow-empty", "-m", msg],
            None,
        );
        self.head()
    }

    /// Merges `branch` into the current branch without committing, lets
    /// `resolve` shape the tree (a conflict is fine), then commits at `t`.
    pub fn merge(&self, branch: &str, t: i64, resolve: impl FnOnce(&ScratchRepo)) -> String {
        let out = self
            .cmd(&self.dir)
            .args(["merge", "--no-ff", "--no-commit", "-q", branch])
            .output()
            .expect("git merge");
        // A conflict (exit 1) is fine, `resolve` settles it; anything else
        // is a broken scenario. Either way the merge must be in progress.
        assert!(
            out.status.success() || out.status.code() == Some(1),
            "git merge {branch} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.git(&["rev-parse", "-q", "--verify", "MERGE_HEAD"]);
        resolve(self);
        self.commit_all(&format!("merge {branch}"), t)
    }

    /// The work tree's HEAD commit.
    pub fn head(&self) -> String {
        self.git(&["rev-parse", "HEAD"])
    }

    /// git's answer to what the tool works out: the last commit that
    /// changed `path` as of `rev` (`git log -1 --format='%H %ct' REV --
    /// PATH`, run in `cwd`, where a relative `path` is taken): its id and
    /// committer time.
    pub fn last_change_in(&self, cwd: &Path, rev: &str, path: &str) -> (String, i64) {
        let line = self.git_in(cwd, &["log", "-1", "--format=%H %ct", rev, "--", path]);
        let (id, ct) = line.split_once(' ').expect("git log printed a commit");
        (id.to_string(), ct.parse().expect("a committer time"))
    }

    /// [`ScratchRepo::last_change_in`] the work tree.
    pub fn last_change(&self, rev: &str, path: &str) -> (String, i64) {
        self.last_change_in(&self.dir, rev, path)
    }

    /// The timestamp tag git's history gives `path` at `rev`:
    /// `PREFIX-<committer time>-<sha7>` of [`ScratchRepo::last_change`].
    pub fn tag_at(&self, prefix: &str, rev: &str, path: &str) -> String {
        let (id, ct) = self.last_change(rev, path);
        format!("{prefix}-{ct}-{}", &id[..7])
    }
}

/// Commits on `main` of the repository at `dir` (after its current head,
/// if any), with `git fast-import`, `FOLDER/app.yaml` and a file
/// `FOLDER/a/a/.../a/deep.yaml` under `levels` nested folders `a`, at
/// committer time `time`: a commit no checkout can write (git refuses trees
/// deeper than its `core.maxTreeDepth`), a few kilobytes of pack however
/// deep. Returns the commit's id. The index and work tree are left as they
/// were.
pub fn commit_nested(home: &Path, dir: &Path, folder: &str, levels: usize, time: i64) -> String {
    let parent = git_cmd(home, dir)
        .args(["rev-parse", "--verify", "-q", "refs/heads/main"])
        .output()
        .expect("git rev-parse");
    let from = if parent.status.success() {
        format!("from {}\n", String::from_utf8_lossy(&parent.stdout).trim())
    } else {
        String::new()
    };
    let deep = format!("{folder}/{}deep.yaml", "a/".repeat(levels));
    let stream = format!(
        "commit refs/heads/main\ncommitter C O Mitter <committer@example.com> {time} +0000\n\
         data 6\nnested\n{from}\
         M 100644 inline {folder}/app.yaml\ndata 12\nreplicas: 2\n\n\
         M 100644 inline {deep}\ndata 8\ndeep: 1\n\n"
    );
    let out = super::output_with_stdin(
        git_cmd(home, dir).args(["fast-import", "--quiet"]),
        stream.as_bytes(),
    );
    assert!(out.status.success());
    run(
        &mut git_cmd(home, dir),
        &["rev-parse", "refs/heads/main"],
        None,
    )
}
