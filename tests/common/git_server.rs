//! A real smart-HTTP git server for the tests: `git http-backend` behind
//! `tests/support_git/serve.py` (one process per server, on a free port of
//! a loopback address), with optional basic auth, bearer token, redirect
//! and TLS, and an access log the tests count requests and bytes from.
//! Upstream repositories are bare repositories under the server's root,
//! written with the git CLI (the oracle).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use super::git::git_cmd;
use super::{TempDir, repo, require, run_ok};

/// How a server authenticates, where it sends clients, how it speaks.
#[derive(Default, Clone)]
pub struct Options {
    /// The loopback address to bind (`127.0.0.1` when `None`).
    pub bind: Option<String>,
    /// Basic auth: every request needs this user and password.
    pub basic: Option<(String, String)>,
    /// Every request needs `Authorization: Bearer TOKEN`.
    pub bearer: Option<String>,
    /// Answer everything `302` to this base URL + the request's path.
    pub redirect_to: Option<String>,
    /// Serve HTTPS with this certificate and key (PEM files).
    pub tls: Option<(PathBuf, PathBuf)>,
}

/// One logged request.
#[derive(Debug, Clone)]
pub struct Hit {
    /// `GET` or `POST`.
    #[allow(dead_code)] // read by history::mirror's unit tests
    pub method: String,
    /// The path without the query.
    #[allow(dead_code)] // read by history::mirror's unit tests
    pub path: String,
    /// The `Authorization` header as received.
    pub authorization: Option<String>,
    /// The status answered.
    pub status: u16,
    /// The response body's length.
    #[allow(dead_code)] // read by history::mirror's unit tests
    pub bytes: u64,
}

/// A running server; killed on drop.
pub struct GitServer {
    child: Child,
    /// The address it listens on.
    pub host: String,
    /// Its port.
    pub port: u16,
    /// `http` or `https`.
    pub scheme: &'static str,
    log: PathBuf,
    _tmp: TempDir,
}

impl GitServer {
    /// Serves the repositories under `root` with `opts`.
    pub fn start(root: &Path, opts: Options) -> GitServer {
        require("git");
        require("python3");
        let tmp = TempDir::new();
        let log = tmp.join("access.log");
        let host = opts.bind.clone().unwrap_or_else(|| "127.0.0.1".into());
        let mut cmd = Command::new("python3");
        cmd.arg(repo().join("tests/support_git/serve.py"))
            .arg("--root")
            .arg(root)
            .args(["--bind", &host])
            .arg("--log")
            .arg(&log)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if let Some((u, p)) = &opts.basic {
            cmd.args(["--user", u, "--password", p]);
        }
        if let Some(t) = &opts.bearer {
            cmd.args(["--bearer", t]);
        }
        if let Some(r) = &opts.redirect_to {
            cmd.args(["--redirect-to", r]);
        }
        if let Some((cert, key)) = &opts.tls {
            cmd.arg("--cert").arg(cert).arg("--key").arg(key);
        }
        let mut child = cmd.spawn().expect("starting tests/support_git/serve.py");
        let mut line = String::new();
        let stdout = child.stdout.take().expect("piped stdout");
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("reading the server's port");
        let port: u16 = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("serve.py printed {line:?}, not its port"));
        GitServer {
            child,
            host,
            port,
            scheme: if opts.tls.is_some() { "https" } else { "http" },
            log,
            _tmp: tmp,
        }
    }

    /// `SCHEME://HOST:PORT`.
    pub fn base(&self) -> String {
        format!("{}://{}:{}", self.scheme, self.host, self.port)
    }

    /// The URL of the repository `name` (e.g. `settings.git`).
    pub fn url(&self, name: &str) -> String {
        format!("{}/{name}", self.base())
    }

    /// Every request so far, in order.
    pub fn hits(&self) -> Vec<Hit> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).expect("a JSON log line");
                Hit {
                    method: v["method"].as_str().unwrap_or_default().to_string(),
                    path: v["path"].as_str().unwrap_or_default().to_string(),
                    authorization: v["authorization"].as_str().map(str::to_string),
                    status: v["status"].as_u64().unwrap_or_default() as u16,
                    bytes: v["bytes"].as_u64().unwrap_or_default(),
                }
            })
            .collect()
    }

    /// Forgets the requests so far.
    #[allow(dead_code)] // used by history::mirror's unit tests
    pub fn clear(&self) {
        std::fs::write(&self.log, "").expect("clearing the access log");
    }
}

impl Drop for GitServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A working repository and the bare repository a server serves from it.
#[allow(dead_code)] // used by history::mirror's unit tests
pub struct Upstream {
    _tmp: TempDir,
    /// The served root (holds `settings.git`).
    pub root: PathBuf,
    /// The bare repository.
    pub bare: PathBuf,
    /// The working repository that commits and pushes to `bare`.
    pub work: PathBuf,
    home: PathBuf,
    clock: std::cell::Cell<i64>,
}

#[allow(dead_code)] // used by history::mirror's unit tests
impl Upstream {
    /// An empty repository `settings.git` (branch `main`) and its work tree.
    pub fn new() -> Upstream {
        let tmp = TempDir::new();
        let root = tmp.join("served");
        let bare = root.join("settings.git");
        let work = tmp.join("work");
        let home = tmp.join("home");
        for d in [&root, &work, &home] {
            std::fs::create_dir_all(d).expect("creating the upstream's folders");
        }
        let u = Upstream {
            _tmp: tmp,
            root,
            bare,
            work,
            home,
            clock: std::cell::Cell::new(1_700_000_000),
        };
        u.git(&["init", "-q", "-b", "main"]);
        run_ok(git_cmd(&u.home, &u.root).args([
            "init",
            "-q",
            "--bare",
            "-b",
            "main",
            "settings.git",
        ]));
        u.git(&["remote", "add", "origin", &u.bare.to_string_lossy()]);
        u
    }

    /// Runs git in the work tree at the next second of a fixed clock;
    /// returns stdout, trimmed.
    pub fn git(&self, args: &[&str]) -> String {
        let t = self.clock.get() + 1;
        self.clock.set(t);
        let d = format!("@{t} +0000");
        let out = run_ok(
            git_cmd(&self.home, &self.work)
                .args(args)
                .env("GIT_AUTHOR_DATE", &d)
                .env("GIT_COMMITTER_DATE", &d),
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Writes `files` (path, content) into the work tree, commits them with
    /// `message` and pushes `main`; returns the new commit's id.
    pub fn commit(&self, files: &[(&str, &str)], message: &str) -> String {
        self.commit_unpushed(files, message);
        self.push();
        self.head()
    }

    /// [`Upstream::commit`] without the push (many commits, one push).
    pub fn commit_unpushed(&self, files: &[(&str, &str)], message: &str) {
        for (path, content) in files {
            let p = self.work.join(path);
            std::fs::create_dir_all(p.parent().expect("a parent")).expect("mkdir");
            std::fs::write(&p, content).expect("writing a file");
        }
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "--allow-empty", "-m", message]);
    }

    /// `n` commits on `main` in one `git fast-import` (far faster than a
    /// commit at a time), commit `i` writing the files `files(i)` (path,
    /// content), one second apart; then the work tree follows and `main`
    /// is pushed.
    pub fn history(&self, n: usize, files: impl Fn(usize) -> Vec<(String, String)>) {
        use std::io::Write as _;
        let has_head = git_cmd(&self.home, &self.work)
            .args(["rev-parse", "-q", "--verify", "HEAD"])
            .output()
            .is_ok_and(|o| o.status.success());
        let mut stream = Vec::new();
        for i in 0..n {
            let t = self.clock.get() + 1;
            self.clock.set(t);
            let msg = format!("history {i}\n");
            write!(
                stream,
                "commit refs/heads/main\ncommitter C O Mitter <committer@example.com> {t} +0000\ndata {}\n{msg}",
                msg.len()
            )
            .expect("writing to a Vec");
            if i == 0 && has_head {
                stream.extend_from_slice(b"from refs/heads/main^0\n");
            }
            for (path, content) in files(i) {
                write!(
                    stream,
                    "M 100644 inline {path}\ndata {}\n{content}\n",
                    content.len()
                )
                .expect("writing to a Vec");
            }
            stream.push(b'\n');
        }
        let out = super::output_with_stdin(
            git_cmd(&self.home, &self.work).args(["fast-import", "--quiet"]),
            &stream,
        );
        assert!(out.status.success(), "git fast-import failed");
        self.git(&["reset", "-q", "--hard", "HEAD"]);
        self.push();
    }

    /// Pushes `main` to the served repository (forced: tests rewrite it).
    pub fn push(&self) {
        self.git(&["push", "-q", "-f", "origin", "main"]);
    }

    /// The work tree's HEAD commit.
    pub fn head(&self) -> String {
        self.git(&["rev-parse", "HEAD"])
    }

    /// The home git runs with here (for clones made beside it).
    pub fn home(&self) -> &Path {
        &self.home
    }
}

/// A CA and a server certificate for `127.0.0.1` and `127.0.0.2`, made
/// by `openssl` in `dir`: `(ca.crt, server.crt, server.key)`.
#[allow(dead_code)] // used by history::mirror's unit tests
pub fn tls_files(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    require("openssl");
    let ca_key = dir.join("ca.key");
    let ca = dir.join("ca.crt");
    let key = dir.join("server.key");
    let csr = dir.join("server.csr");
    let cert = dir.join("server.crt");
    let ext = dir.join("san.ext");
    std::fs::write(&ext, "subjectAltName=IP:127.0.0.1,IP:127.0.0.2\n").expect("san.ext");
    run_ok(
        Command::new("openssl")
            .args([
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "2",
                "-subj",
                "/CN=test git CA",
            ])
            .arg("-keyout")
            .arg(&ca_key)
            .arg("-out")
            .arg(&ca),
    );
    run_ok(
        Command::new("openssl")
            .args([
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-subj",
                "/CN=127.0.0.1",
            ])
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&csr),
    );
    run_ok(
        Command::new("openssl")
            .args(["x509", "-req", "-days", "2", "-CAcreateserial"])
            .arg("-in")
            .arg(&csr)
            .arg("-CA")
            .arg(&ca)
            .arg("-CAkey")
            .arg(&ca_key)
            .arg("-out")
            .arg(&cert)
            .arg("-extfile")
            .arg(&ext),
    );
    (ca, cert, key)
}
