//! Helpers shared by the integration tests: running the binary, temporary
//! directories, the real tools we check our images with (umoci, skopeo,
//! podman, containerd) and small file-tree utilities.
//!
//! Every tool is required, never optional: a missing tool panics with the
//! package that provides it (`bash scripts/deps.sh` installs them all).

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

pub mod cmd;
pub mod controller;
pub mod flux;
pub mod flux_cluster;
pub mod forge;
pub mod git;
pub mod git_server;
pub mod github;
pub mod kube;
pub mod node;
pub mod oci;
pub mod registry;
pub mod rng;
pub mod runner;
pub mod service;
pub mod subject_stub;

/// The binary under test (cargo builds it for the integration suite; the
/// library's unit tests, which include this kit, never run it).
pub fn bin() -> &'static str {
    match option_env!("CARGO_BIN_EXE_settings-image") {
        Some(bin) => bin,
        None => panic!("only the integration suite runs the binary (tests/tests.rs)"),
    }
}

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The variable that makes [`golden`] write its files instead of
/// comparing them.
pub const WRITE_GOLDEN: &str = "SETTINGS_IMAGE_WRITE_REFERENCE";

/// Compares `generated` with the committed file `rel` (a generated page
/// of docs/, a golden table) and fails naming the first line that
/// differs, with `regenerate` (the command that runs this test) in the
/// message; writes the file instead when [`WRITE_GOLDEN`] is set.
pub fn golden(rel: &str, generated: &str, regenerate: &str) {
    let path = repo().join(rel);
    if std::env::var_os(WRITE_GOLDEN).is_some() {
        std::fs::write(&path, generated).unwrap_or_else(|e| panic!("writing {rel}: {e}"));
        return;
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    if on_disk == generated {
        return;
    }
    let line = on_disk
        .lines()
        .zip(generated.lines())
        .position(|(a, b)| a != b)
        .unwrap_or_else(|| on_disk.lines().count().min(generated.lines().count()));
    panic!(
        "{rel} is out of date: line {} is\n  {:?}\nbut the code generates\n  {:?}\n\
         regenerate it with `{WRITE_GOLDEN}=1 {regenerate}`, review the diff and commit it",
        line + 1,
        on_disk.lines().nth(line).unwrap_or("(end of file)"),
        generated.lines().nth(line).unwrap_or("(end of file)"),
    );
}

/// Polls `check` every `every` until it gives `Ok`, and returns that.
/// `check`'s `Err` is the failure's message, what it saw last (a check may
/// also panic on what can never come right, a process that exited). The
/// deadline `within` only keeps a broken run from hanging: a working run
/// never meets it, and no result depends on how long a poll took.
pub fn eventually<T>(
    within: Duration,
    every: Duration,
    mut check: impl FnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + within;
    loop {
        match check() {
            Ok(v) => return v,
            Err(seen) => assert!(
                Instant::now() < deadline,
                "not so after {} s: {seen}",
                within.as_secs()
            ),
        }
        std::thread::sleep(every);
    }
}

/// Every document of a YAML stream, as JSON values (comments and empty
/// documents dropped).
pub fn yaml_documents(yaml: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(yaml)
        .map(|de| serde::Deserialize::deserialize(de).expect("the YAML parses"))
        .filter(|v: &Value| !v.is_null())
        .collect()
}

/// `secs` since the epoch as RFC 3339 (UTC), by GNU date: the times the
/// tests write or expect in statuses, records and policies.
pub fn rfc3339(secs: i64) -> String {
    stdout_of(Command::new("date").args(["-u", "-d", &format!("@{secs}"), "+%Y-%m-%dT%H:%M:%SZ"]))
        .trim()
        .to_string()
}

/// RFC 3339 (or `now`) as seconds since the epoch, by GNU date.
pub fn epoch_secs(rfc: &str) -> i64 {
    let out = stdout_of(Command::new("date").args(["-u", "-d", rfc, "+%s"]));
    out.trim()
        .parse()
        .unwrap_or_else(|e| panic!("date printed {out:?} for {rfc:?}: {e}"))
}

/// Sleeps until the clock (GNU date's) reads `at` seconds since the epoch,
/// looking every `every`: for a test that needs a span of real time to
/// pass (a soak, a grace period) between the times a cluster wrote.
pub fn sleep_until(at: i64, every: Duration) {
    while epoch_secs("now") < at {
        std::thread::sleep(every);
    }
}

/// A temporary directory removed on drop. Its path is all lowercase (podman
/// derives an image name from an `oci:` path and refuses upper case).
pub struct TempDir {
    path: PathBuf,
}

static NEXT_TMP: AtomicUsize = AtomicUsize::new(0);

impl TempDir {
    /// Creates a fresh, empty directory under the system temp dir.
    pub fn new() -> TempDir {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let n = NEXT_TMP.fetch_add(1, Ordering::SeqCst);
        let path = std::env::temp_dir().join(format!("si-{}-{n}-{nanos:x}", std::process::id()));
        fs::create_dir(&path).unwrap_or_else(|e| panic!("creating {}: {e}", path.display()));
        TempDir { path }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A path inside the directory.
    pub fn join(&self, rel: &str) -> PathBuf {
        self.path.join(rel)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}

/// Looks `tool` up on PATH (and the sbin directories, where runc lives).
pub fn find_tool(tool: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|d| d.join(tool))
        .find(|p| {
            fs::metadata(p)
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}

/// Returns the path of `tool`, or panics loudly: tests never skip silently.
pub fn require(tool: &str) -> PathBuf {
    find_tool(tool).unwrap_or_else(|| {
        panic!(
            "required tool `{tool}` is not installed: run `bash scripts/deps.sh` as root \
             (it installs every tool the tests use)"
        )
    })
}

/// A command for `tool`, which must be installed.
pub fn tool(tool: &str) -> Command {
    Command::new(require(tool))
}

/// Runs `cmd` and panics with its output unless it succeeds.
pub fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("starting {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs `cmd` with `input` on its stdin, its stdout and stderr captured,
/// whatever the result.
pub fn output_with_stdin(cmd: &mut Command, input: &[u8]) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {cmd:?}: {e}"));
    child
        .stdin
        .take()
        .expect("a piped stdin")
        .write_all(input)
        .unwrap_or_else(|e| panic!("writing to {cmd:?}: {e}"));
    child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("waiting for {cmd:?}: {e}"))
}

/// Runs `cmd`, requires success and returns its stdout as text.
pub fn stdout_of(cmd: &mut Command) -> String {
    String::from_utf8_lossy(&run_ok(cmd).stdout).into_owned()
}

/// `settings-image build --path SRC --output OUT --json`, to add flags to.
pub fn build_cmd(src: &Path, out: &Path) -> cmd::TestCommand {
    let mut cmd = cmd::TestCommand::new();
    cmd.arg("build")
        .arg("--path")
        .arg(src)
        .arg("--output")
        .arg(out)
        .arg("--json");
    cmd
}

/// `settings-image build --path SRC --output OUT --tag T... --json`, without
/// checking the result.
pub fn build_raw(src: &Path, out: &Path, tags: &[&str]) -> cmd::Run {
    build_cmd(src, out).tags(tags).run()
}

/// Builds and returns the `--json` report; panics when the build fails.
pub fn build(src: &Path, out: &Path, tags: &[&str]) -> Value {
    build_cmd(src, out).tags(tags).json()
}

/// A string field of a JSON value, by a `/`-separated pointer.
pub fn field(v: &Value, pointer: &str) -> String {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("{pointer} missing in {v}"))
        .to_string()
}

/// `n` bytes of text lines (compressible, deltas between versions of it
/// small), `salt` changing the line at `changed_line`.
pub fn large_text(n: usize, changed_line: usize, salt: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(n + 64);
    let mut i = 0;
    while out.len() < n {
        if i == changed_line {
            out.extend_from_slice(format!("line {i:08}: {salt}\n").as_bytes());
        } else {
            out.extend_from_slice(
                format!("line {i:08}: settings value {}\n", i * 7919 % 1000).as_bytes(),
            );
        }
        i += 1;
    }
    out.truncate(n);
    out
}

/// `sha256sum` of what `sh -c script` prints.
pub fn sha256_of(script: &str) -> String {
    let out = run_ok(Command::new(require("sh")).args(["-c", &format!("{script} | sha256sum")]));
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// `sha256:<hex>` of `b` by coreutils' sha256sum, not by the hash library
/// the tool itself uses.
pub fn sha256_digest(b: &[u8]) -> String {
    let mut child = Command::new(require("sha256sum"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("sha256sum");
    let mut stdin = child.stdin.take().expect("stdin");
    let bytes = b.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&bytes));
    let out = child.wait_with_output().expect("sha256sum");
    writer.join().expect("writer").expect("write");
    assert!(out.status.success(), "sha256sum failed");
    let text = String::from_utf8_lossy(&out.stdout);
    format!(
        "sha256:{}",
        text.split_whitespace().next().unwrap_or_default()
    )
}

/// Writes `content` to `root/rel` (creating parents) with `mode`.
pub fn write_file(root: &Path, rel: &str, content: &[u8], mode: u32) {
    let p = root.join(rel);
    if let Some(parent) = p.parent() {
        fs::create_dir_all(parent).expect("creating parent directories");
    }
    let mut f = fs::File::create(&p).expect("creating a file");
    f.write_all(content).expect("writing a file");
    fs::set_permissions(&p, fs::Permissions::from_mode(mode)).expect("chmod");
}

/// Copies a directory tree (files, dirs, symlinks) with fresh metadata.
pub fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("creating the copy");
    let mut items: Vec<_> = fs::read_dir(from)
        .expect("reading a directory")
        .map(|e| e.expect("reading a directory entry"))
        .collect();
    items.sort_by_key(|e| e.file_name());
    for item in items {
        let ft = item.file_type().expect("file type");
        let dst = to.join(item.file_name());
        if ft.is_dir() {
            copy_tree(&item.path(), &dst);
        } else if ft.is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(item.path()).expect("readlink"), &dst)
                .expect("symlink");
        } else {
            fs::copy(item.path(), &dst).expect("copying a file");
        }
    }
}

/// One entry of a file tree as a reader left it on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    /// A directory and its permission bits.
    Dir(u32),
    /// A regular file: permission bits and content.
    File(u32, Vec<u8>),
    /// A symlink and its target.
    Link(String),
}

/// The tree under `root` as relative path -> node (root itself excluded).
pub fn snapshot(root: &Path) -> BTreeMap<String, Node> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Node>) {
        for item in fs::read_dir(dir).expect("reading a directory") {
            let item = item.expect("reading a directory entry");
            let p = item.path();
            let rel = p
                .strip_prefix(root)
                .expect("inside root")
                .to_string_lossy()
                .into_owned();
            let meta = fs::symlink_metadata(&p).expect("stat");
            let mode = meta.mode() & 0o7777;
            if meta.file_type().is_symlink() {
                let target = fs::read_link(&p).expect("readlink");
                out.insert(rel, Node::Link(target.to_string_lossy().into_owned()));
            } else if meta.is_dir() {
                out.insert(rel, Node::Dir(mode));
                walk(root, &p, out);
            } else {
                out.insert(rel, Node::File(mode, fs::read(&p).expect("reading a file")));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// `umoci unpack --rootless --image LAYOUT:TAG` into `bundle`; returns the
/// unpacked root filesystem.
pub fn umoci_unpack(layout: &Path, tag: &str, bundle: &Path) -> PathBuf {
    run_ok(
        tool("umoci")
            .args(["unpack", "--rootless", "--image"])
            .arg(format!("{}:{tag}", layout.display()))
            .arg(bundle),
    );
    bundle.join("rootfs")
}

/// A tree as an image of it must show it: the same names, contents and
/// symlinks, files 0644 (0755 when any execute bit was set), directories
/// 0755 (the format's normalization, docs/format.md).
pub fn normalized(tree: BTreeMap<String, Node>) -> BTreeMap<String, Node> {
    tree.into_iter()
        .map(|(path, node)| {
            let node = match node {
                Node::Dir(_) => Node::Dir(0o755),
                Node::File(mode, content) => {
                    Node::File(if mode & 0o111 != 0 { 0o755 } else { 0o644 }, content)
                }
                link => link,
            };
            (path, node)
        })
        .collect()
}

/// What the tar `archive` (the output of `git archive COMMIT PATH`) holds
/// under `path`, extracted by GNU tar and normalized as an image of the
/// folder shows it ([`normalized`]): the oracle for an image built from
/// git, apart from the tool's own tree reading.
pub fn archived_files(archive: &Path, path: &str) -> BTreeMap<String, Node> {
    let dir = TempDir::new();
    run_ok(
        tool("tar")
            .arg("-xf")
            .arg(archive)
            .arg("-C")
            .arg(dir.path()),
    );
    let folder = dir.path().join(path);
    assert!(folder.is_dir(), "the archive holds no folder {path}");
    normalized(snapshot(&folder))
}

/// The files of the image `reference` (`HOST/NAME:TAG` on a plain-HTTP
/// registry; `creds` as `USER:PASSWORD`) as skopeo copies it into an OCI
/// layout and umoci unpacks it: what a reader of the pushed image sees.
pub fn pulled_files(reference: &str, creds: Option<&str>) -> BTreeMap<String, Node> {
    let dir = TempDir::new();
    let layout = dir.join("layout");
    let mut copy = tool("skopeo");
    copy.args(["copy", "--quiet", "--src-tls-verify=false"]);
    match creds {
        Some(c) => copy.args(["--src-creds", c]),
        None => copy.arg("--src-no-creds"),
    };
    run_ok(
        copy.arg(format!("docker://{reference}"))
            .arg(format!("oci:{}:pulled", layout.display())),
    );
    snapshot(&umoci_unpack(&layout, "pulled", &dir.join("bundle")))
}

/// A private podman: its own storage (vfs), run root, containers.conf and
/// registries.conf inside a temporary directory, runc as the runtime, no
/// network. [`Podman::cmd`] returns a command with all of that applied.
pub struct Podman {
    dir: PathBuf,
}

impl Podman {
    /// Sets up podman's configuration and storage under `tmp`.
    pub fn new(tmp: &Path) -> Podman {
        require("podman");
        require("runc");
        let dir = tmp.join("pm"); // short: podman refuses a runroot over 50 bytes
        fs::create_dir_all(&dir).expect("creating the podman dir");
        fs::write(
            dir.join("containers.conf"),
            "[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = \"runc\"\ncgroup_manager = \"cgroupfs\"\nevents_logger = \"file\"\n",
        )
        .expect("writing containers.conf");
        fs::write(
            dir.join("registries.conf"),
            "unqualified-search-registries = []\n",
        )
        .expect("writing registries.conf");
        Podman { dir }
    }

    /// Marks `host` (`127.0.0.1:PORT`) as a plain-HTTP registry podman may
    /// pull from.
    pub fn insecure_registry(&self, host: &str) {
        fs::write(
            self.dir.join("registries.conf"),
            format!(
                "unqualified-search-registries = []\n\n[[registry]]\nlocation = \"{host}\"\ninsecure = true\n"
            ),
        )
        .expect("writing registries.conf");
    }

    /// `podman` with the private configuration and storage.
    pub fn cmd(&self) -> Command {
        let mut cmd = tool("podman");
        cmd.env("CONTAINERS_CONF", self.dir.join("containers.conf"))
            .env(
                "CONTAINERS_REGISTRIES_CONF",
                self.dir.join("registries.conf"),
            )
            .env_remove("CONTAINER_HOST")
            .arg("--root")
            .arg(self.dir.join("root"))
            .arg("--runroot")
            .arg(self.dir.join("run"))
            .args(["--storage-driver", "vfs", "--cgroup-manager", "cgroupfs"]);
        cmd
    }

    /// `buildah` with the same configuration and storage (what it builds,
    /// `podman` runs and pushes).
    pub fn buildah(&self) -> Command {
        let mut cmd = tool("buildah");
        cmd.env("CONTAINERS_CONF", self.dir.join("containers.conf"))
            .env(
                "CONTAINERS_REGISTRIES_CONF",
                self.dir.join("registries.conf"),
            )
            .arg("--root")
            .arg(self.dir.join("root"))
            .arg("--runroot")
            .arg(self.dir.join("run"))
            .args(["--storage-driver", "vfs"]);
        cmd
    }

    /// Imports a one-binary image holding the static busybox as
    /// `/bin/busybox`, named `name`.
    pub fn import_busybox(&self, name: &str) {
        let busybox = require("busybox");
        let rootfs = self.dir.join("busybox-rootfs");
        fs::create_dir_all(rootfs.join("bin")).expect("creating the busybox rootfs");
        fs::copy(&busybox, rootfs.join("bin/busybox")).expect("copying busybox");
        let tar = self.dir.join("busybox.tar");
        run_ok(
            tool("tar")
                .arg("-C")
                .arg(&rootfs)
                .arg("-cf")
                .arg(&tar)
                .arg("."),
        );
        run_ok(self.cmd().arg("import").arg(&tar).arg(name));
    }
}

impl Drop for Podman {
    fn drop(&mut self) {
        // Stop anything a failed test left running; storage goes with the temp dir.
        let _ = self
            .cmd()
            .args(["rm", "--all", "--force"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// A containerd started as a child process with its own root, state and
/// socket in a temporary directory; stopped on drop.
pub struct Containerd {
    child: Child,
    dir: PathBuf,
    /// The gRPC socket (`ctr -a`).
    pub socket: PathBuf,
}

impl Containerd {
    /// Starts containerd under `tmp` and waits until it answers.
    pub fn start(tmp: &Path) -> Containerd {
        let bin = require("containerd");
        require("ctr");
        let dir = tmp.join("containerd");
        fs::create_dir_all(&dir).expect("creating the containerd dir");
        let socket = dir.join("containerd.sock");
        let config = format!(
            "version = 2\nroot = \"{root}\"\nstate = \"{state}\"\n\
             disabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n\
             [grpc]\n  address = \"{sock}\"\n[ttrpc]\n  address = \"{sock}.ttrpc\"\n\
             [debug]\n  address = \"{dbg}\"\n[metrics]\n  address = \"\"\n",
            root = dir.join("root").display(),
            state = dir.join("state").display(),
            sock = socket.display(),
            dbg = dir.join("debug.sock").display(),
        );
        fs::write(dir.join("config.toml"), config).expect("writing config.toml");
        let log = fs::File::create(dir.join("containerd.log")).expect("creating the log");
        let child = Command::new(bin)
            .arg("--config")
            .arg(dir.join("config.toml"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("starting containerd");
        let mut ctd = Containerd { child, dir, socket };
        eventually(Duration::from_secs(30), Duration::from_millis(100), || {
            let up = ctd
                .ctr()
                .arg("version")
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false);
            if up {
                return Ok(());
            }
            if let Ok(Some(status)) = ctd.child.try_wait() {
                panic!("containerd exited ({status}):\n{}", ctd.log());
            }
            Err(format!("containerd did not answer:\n{}", ctd.log()))
        });
        ctd
    }

    /// `ctr -a SOCKET -n test`.
    pub fn ctr(&self) -> Command {
        let mut cmd = tool("ctr");
        cmd.arg("-a").arg(&self.socket).args(["-n", "test"]);
        cmd
    }

    /// containerd's log so far.
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.join("containerd.log")).unwrap_or_default()
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        // SIGTERM first so containerd closes its database cleanly, then SIGKILL.
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Unmounts `path` on drop (for `ctr images mount`), so a failing assertion
/// leaves no mount behind.
pub struct MountGuard(pub PathBuf);

impl Drop for MountGuard {
    fn drop(&mut self) {
        if is_mounted(&self.0) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
}

/// Whether `path` is a mount point right now.
pub fn is_mounted(path: &Path) -> bool {
    fs::read_to_string("/proc/self/mounts")
        .expect("reading /proc/self/mounts")
        .lines()
        .any(|l| l.split(' ').nth(1) == Some(&path.display().to_string()))
}
