//! Test helpers for registry tests: a real CNCF distribution registry
//! (`docker-registry`) on a free loopback port (no auth, htpasswd, or token
//! auth), a test token server that signs JWTs with a key made by `openssl`,
//! a fault-injecting HTTP proxy, and the independent consumers (skopeo,
//! podman, containerd). A missing tool fails the test loudly.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;

use super::cmd::Run;
use super::require;

/// A free loopback TCP port.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_listening(addr: &str, port: u16, what: &str, child: &mut Child) {
    super::eventually(Duration::from_secs(20), Duration::from_millis(50), || {
        if TcpStream::connect((addr, port)).is_ok() {
            return Ok(());
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{what} exited early with {status}");
        }
        Err(format!("{what} did not listen on {addr}:{port}"))
    });
}

/// How the registry authenticates.
pub enum Auth {
    /// Anyone may push.
    None,
    /// htpasswd (bcrypt) Basic auth with one user.
    Basic { user: String, password: String },
    /// Bearer tokens from the given token server.
    Token(Arc<TokenServer>),
    /// Bearer tokens from the given token server, at the realm URL given
    /// (a host name a test proxy maps to the token server).
    TokenAt(Arc<TokenServer>, String),
}

/// A running `docker-registry`; killed on drop.
pub struct Registry {
    child: Child,
    pub dir: super::TempDir,
    pub port: u16,
    pub log: PathBuf,
    /// The address it listens on (`127.0.0.1` unless served over TLS).
    pub bind: String,
    /// Over TLS: the CA (PEM) that signed its certificate.
    pub ca: Option<PathBuf>,
}

/// This machine's first IPv4 address of global scope (`ip -4 addr`): an
/// address that is neither loopback nor, usually, private, where clients
/// (ours and go-containerregistry's) speak TLS as they do to a public
/// registry.
pub fn routable_ipv4() -> String {
    let out = Command::new(require("ip"))
        .args(["-4", "-o", "addr", "show", "scope", "global"])
        .output()
        .expect("running ip");
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .skip_while(|w| *w != "inet")
        .nth(1)
        .and_then(|a| a.split('/').next())
        .map(str::to_string)
        .unwrap_or_else(|| {
            panic!(
                "this machine has no IPv4 address of global scope (`ip -4 addr` printed {text:?}); \
                 the TLS registry needs one (e.g. `ip addr add 192.0.2.10/32 dev lo` as root)"
            )
        })
}

/// A CA and a certificate it signed for `ip` (and 127.0.0.1), made by
/// `openssl` in `dir`: `(ca.crt, server.crt, server.key)`.
pub fn ca_signed(dir: &Path, ip: &str) -> (PathBuf, PathBuf, PathBuf) {
    require("openssl");
    let sh = format!(
        "set -e; cd '{}'
         openssl ecparam -name prime256v1 -genkey -noout -out ca.key
         openssl req -x509 -new -key ca.key -sha256 -days 2 -subj '/CN=settings-image test CA' -out ca.crt
         openssl ecparam -name prime256v1 -genkey -noout -out server.key
         openssl req -new -key server.key -subj '/CN={ip}' -out server.csr
         printf 'subjectAltName=IP:{ip},IP:127.0.0.1\\nextendedKeyUsage=serverAuth\\nkeyUsage=critical,digitalSignature\\n' > server.ext
         openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -sha256 -extfile server.ext -out server.crt",
        dir.display()
    );
    let out = Command::new("bash")
        .args(["-c", &sh])
        .output()
        .expect("bash");
    assert!(
        out.status.success(),
        "making the test CA failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        dir.join("ca.crt"),
        dir.join("server.crt"),
        dir.join("server.key"),
    )
}

impl Registry {
    /// Starts a registry with `auth` on a free loopback port.
    pub fn start(auth: Auth) -> Registry {
        Registry::start_with(auth, None)
    }

    /// Starts a registry with `auth` over TLS on this machine's routable
    /// address ([`routable_ipv4`]), its certificate signed by a CA of its
    /// own ([`Registry::ca`]): a registry as Flux meets it in production.
    pub fn start_tls(auth: Auth) -> Registry {
        Registry::start_with(auth, Some(routable_ipv4()))
    }

    fn start_with(auth: Auth, tls_ip: Option<String>) -> Registry {
        let bin = require("docker-registry");
        let dir = super::TempDir::new();
        let port = match &tls_ip {
            Some(ip) => TcpListener::bind((ip.as_str(), 0))
                .unwrap()
                .local_addr()
                .unwrap()
                .port(),
            None => free_port(),
        };
        let (bind, ca, tls_yaml) = match &tls_ip {
            Some(ip) => {
                let (ca, cert, key) = ca_signed(dir.path(), ip);
                let yaml = format!(
                    "  tls:\n    certificate: {}\n    key: {}\n",
                    cert.display(),
                    key.display()
                );
                (ip.clone(), Some(ca), yaml)
            }
            None => ("127.0.0.1".to_string(), None, String::new()),
        };
        let auth_yaml = match &auth {
            Auth::None => String::new(),
            Auth::Basic { user, password } => {
                require("htpasswd");
                let out = Command::new("htpasswd")
                    .args(["-Bbn", user, password])
                    .output()
                    .unwrap();
                assert!(out.status.success(), "htpasswd failed");
                let path = dir.path().join("htpasswd");
                std::fs::write(&path, &out.stdout).unwrap();
                format!(
                    "auth:\n  htpasswd:\n    realm: test-registry\n    path: {}\n",
                    path.display()
                )
            }
            Auth::Token(ts) => ts.auth_yaml(&format!("http://127.0.0.1:{}/token", ts.port)),
            Auth::TokenAt(ts, realm) => ts.auth_yaml(realm),
        };
        let config = format!(
            "version: 0.1\nlog:\n  level: info\n  accesslog:\n    disabled: false\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {bind}:{port}\n{tls_yaml}{auth_yaml}",
            dir.path().join("data").display()
        );
        let cfg = dir.path().join("config.yml");
        std::fs::write(&cfg, config).unwrap();
        let log = dir.path().join("registry.log");
        let mut child = Command::new(bin)
            .arg("serve")
            .arg(&cfg)
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(dir.path().join("registry.err")).unwrap())
            .spawn()
            .unwrap();
        wait_listening(&bind, port, "docker-registry", &mut child);
        Registry {
            child,
            dir,
            port,
            log,
            bind,
            ca,
        }
    }

    /// `ADDRESS:PORT` (`127.0.0.1:PORT` unless over TLS).
    pub fn host(&self) -> String {
        format!("{}:{}", self.bind, self.port)
    }

    /// `http://HOST` or, over TLS, `https://HOST`.
    pub fn base(&self) -> String {
        let scheme = if self.ca.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.host())
    }

    /// PUTs `manifest` (an OCI image manifest's bytes) as
    /// `NAME:REFERENCE` with curl, by hand (no login); fails the test
    /// unless the registry takes it.
    pub fn put_manifest(&self, name: &str, reference: &str, manifest: &[u8]) {
        let tmp = super::TempDir::new();
        let file = tmp.join("manifest.json");
        std::fs::write(&file, manifest).expect("writing manifest.json");
        super::run_ok(self.curl().args([
            "-fsS",
            "-X",
            "PUT",
            "-H",
            "Content-Type: application/vnd.oci.image.manifest.v1+json",
            "--data-binary",
            &format!("@{}", file.display()),
            &format!("{}/v2/{name}/manifests/{reference}", self.base()),
        ]));
    }

    /// `curl` trusting this registry's CA (when it has one).
    pub fn curl(&self) -> Command {
        let mut c = Command::new(require("curl"));
        if let Some(ca) = &self.ca {
            // HTTP/1.1 as over plain HTTP: the same status lines.
            c.arg("--http1.1").arg("--cacert").arg(ca);
        }
        c
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `cmd` under GNU time and returns its result and its peak resident
/// set in KiB, as GNU time reports it (`%M`: the kernel's accounting of
/// that process alone, not the code under test's). What a memory bound in
/// a test is checked against.
pub fn peak_rss(cmd: Command) -> (Run, u64) {
    let tmp = super::TempDir::new();
    let report = tmp.join("time");
    let mut timed = Command::new(require("time"));
    timed
        .args(["-f", "%M", "-o"])
        .arg(&report)
        .arg(cmd.get_program())
        .args(cmd.get_args())
        .stdin(Stdio::null());
    if let Some(dir) = cmd.get_current_dir() {
        timed.current_dir(dir);
    }
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => timed.env(k, v),
            None => timed.env_remove(k),
        };
    }
    let out = timed.output().expect("running GNU time");
    let text = std::fs::read_to_string(&report).expect("GNU time's report");
    // The last line: GNU time first writes "Command exited with non-zero
    // status N" when the command failed.
    let kib = text
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("GNU time wrote {text:?}"));
    (Run::of(&out), kib)
}

/// A settings folder with `n` small YAML files named `fNN.yaml`.
pub fn settings(n: usize, salt: &str) -> super::TempDir {
    let dir = super::TempDir::new();
    for i in 0..n {
        std::fs::write(
            dir.path().join(format!("f{i:02}.yaml")),
            format!("key{i}: value-{salt}-{i}\n"),
        )
        .unwrap();
    }
    dir
}

/// Writes `size` random (incompressible) bytes to `path`.
pub fn random_file(path: &Path, size: usize) {
    let mut buf = vec![0u8; size];
    std::fs::File::open("/dev/urandom")
        .unwrap()
        .read_exact(&mut buf)
        .unwrap();
    std::fs::write(path, buf).unwrap();
}

/// `skopeo inspect` of `reference` (`HOST/NAME:TAG`): its JSON, or `None`
/// when the tag does not exist.
pub fn skopeo_inspect(reference: &str, creds: Option<&str>) -> Option<serde_json::Value> {
    require("skopeo");
    let mut cmd = Command::new("skopeo");
    cmd.args(["inspect", "--tls-verify=false"]);
    match creds {
        Some(c) => cmd.args(["--creds", c]),
        None => cmd.arg("--no-creds"),
    };
    let out = cmd.arg(format!("docker://{reference}")).output().unwrap();
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("manifest unknown") || err.contains("not found"),
            "skopeo inspect {reference} failed unexpectedly: {err}"
        );
        return None;
    }
    Some(serde_json::from_slice(&out.stdout).unwrap())
}

// ---------------------------------------------------------------- token server

/// A test token server: answers `GET /token` with an RS256 JWT (signed by
/// `openssl dgst`) granting pull and push, for the right Basic credentials.
pub struct TokenServer {
    pub port: u16,
    pub cert: PathBuf,
    key: PathBuf,
    cert_der_b64: String,
    user: String,
    password: String,
    /// Every token handed out.
    pub issued: Mutex<Vec<String>>,
    /// Token requests seen (query strings).
    pub requests: Mutex<Vec<String>>,
    _dir: super::TempDir,
}

fn b64url(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

impl TokenServer {
    pub const SERVICE: &'static str = "test-registry";
    pub const ISSUER: &'static str = "test-issuer";

    /// Generates a key and certificate and starts serving.
    pub fn start(user: &str, password: &str) -> Arc<TokenServer> {
        require("openssl");
        let dir = super::TempDir::new();
        let key = dir.path().join("key.pem");
        let cert = dir.path().join("cert.pem");
        let st = Command::new("openssl")
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            ])
            .args(["-subj", "/CN=test-token-issuer", "-keyout"])
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success(), "openssl req failed");
        let der = Command::new("openssl")
            .args(["x509", "-outform", "DER", "-in"])
            .arg(&cert)
            .output()
            .unwrap();
        assert!(der.status.success());
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let ts = Arc::new(TokenServer {
            port,
            cert,
            key,
            cert_der_b64: base64::engine::general_purpose::STANDARD.encode(&der.stdout),
            user: user.into(),
            password: password.into(),
            issued: Mutex::new(Vec::new()),
            requests: Mutex::new(Vec::new()),
            _dir: dir,
        });
        let server = ts.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let server = server.clone();
                std::thread::spawn(move || server.serve(stream));
            }
        });
        ts
    }

    /// The registry's `auth: token` section, with `realm`.
    fn auth_yaml(&self, realm: &str) -> String {
        format!(
            "auth:\n  token:\n    realm: {realm}\n    service: {}\n    issuer: {}\n    rootcertbundle: {}\n",
            Self::SERVICE,
            Self::ISSUER,
            self.cert.display()
        )
    }

    fn sign(&self, input: &str) -> Vec<u8> {
        let out = super::output_with_stdin(
            Command::new("openssl")
                .args(["dgst", "-sha256", "-sign"])
                .arg(&self.key),
            input.as_bytes(),
        );
        assert!(out.status.success());
        out.stdout
    }

    fn token(&self, scope: &str, account: &str) -> String {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let mut access = Vec::new();
        for s in scope.split(' ').filter(|s| !s.is_empty()) {
            let parts: Vec<&str> = s.split(':').collect();
            if parts.len() == 3 {
                access.push(serde_json::json!({
                    "type": parts[0], "name": parts[1],
                    "actions": parts[2].split(',').collect::<Vec<_>>()
                }));
            }
        }
        let header = serde_json::json!({"alg": "RS256", "typ": "JWT", "x5c": [self.cert_der_b64]});
        let claims = serde_json::json!({
            "iss": Self::ISSUER, "sub": account, "aud": Self::SERVICE,
            "exp": now + 600, "nbf": now - 60, "iat": now,
            "jti": format!("{}", fastrand::u64(..)), "access": access,
        });
        let input = format!(
            "{}.{}",
            b64url(header.to_string().as_bytes()),
            b64url(claims.to_string().as_bytes())
        );
        let sig = self.sign(&input);
        format!("{input}.{}", b64url(&sig))
    }

    fn serve(&self, stream: TcpStream) {
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut out = stream;
        while let Some(head) = read_head(&mut reader) {
            let query = head.path.split_once('?').map(|x| x.1).unwrap_or("");
            self.requests.lock().unwrap().push(query.to_string());
            let params: HashMap<String, String> = query
                .split('&')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), url_decode(v)))
                .collect();
            let expected = format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD
                    .encode(format!("{}:{}", self.user, self.password))
            );
            let authorized = head.header("authorization") == Some(expected.as_str());
            let resp = if authorized {
                let tok = self.token(
                    params.get("scope").map(String::as_str).unwrap_or(""),
                    &self.user,
                );
                self.issued.lock().unwrap().push(tok.clone());
                let body =
                    serde_json::json!({"token": tok, "access_token": tok, "expires_in": 600})
                        .to_string();
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                )
            } else {
                let body = r#"{"errors":[{"code":"UNAUTHORIZED","message":"bad credentials"}]}"#;
                format!(
                    "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                )
            };
            if out.write_all(resp.as_bytes()).is_err() {
                return;
            }
        }
    }
}

fn url_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                let h = std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("00");
                out.push(u8::from_str_radix(h, 16).unwrap_or(b'?'));
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into()
}

// ---------------------------------------------------------------- HTTP parsing

/// A parsed request or response head.
pub struct Head {
    pub method: String,
    pub path: String,
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub raw: Vec<u8>,
}

impl Head {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    fn content_length(&self) -> Option<usize> {
        self.header("content-length")
            .and_then(|v| v.trim().parse().ok())
    }
    fn chunked(&self) -> bool {
        self.header("transfer-encoding")
            .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"))
    }
}

fn read_head(r: &mut impl BufRead) -> Option<Head> {
    let mut raw = Vec::new();
    let mut lines = Vec::new();
    loop {
        let mut line = String::new();
        let n = r.read_line(&mut line).ok()?;
        if n == 0 {
            return None;
        }
        raw.extend_from_slice(line.as_bytes());
        let l = line.trim_end_matches(['\r', '\n']).to_string();
        if l.is_empty() {
            if lines.is_empty() {
                continue;
            }
            break;
        }
        lines.push(l);
    }
    let first = lines.remove(0);
    let mut parts = first.split(' ');
    let a = parts.next().unwrap_or("").to_string();
    let b = parts.next().unwrap_or("").to_string();
    let headers = lines
        .iter()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let status = b.parse().unwrap_or(0);
    Some(Head {
        method: a,
        path: b,
        status,
        headers,
        raw,
    })
}

/// Reads a body as framed by `head`; returns the raw bytes (as sent) and the
/// payload length.
fn read_body(
    r: &mut impl BufRead,
    head: &Head,
    no_body: bool,
) -> std::io::Result<(Vec<u8>, usize)> {
    if no_body {
        return Ok((Vec::new(), 0));
    }
    if head.chunked() {
        let mut raw = Vec::new();
        let mut len = 0;
        loop {
            let mut line = String::new();
            r.read_line(&mut line)?;
            raw.extend_from_slice(line.as_bytes());
            let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or("0"), 16)
                .unwrap_or(0);
            let mut chunk = vec![0u8; size + 2];
            r.read_exact(&mut chunk)?;
            raw.extend_from_slice(&chunk);
            len += size;
            if size == 0 {
                return Ok((raw, len));
            }
        }
    }
    if let Some(n) = head.content_length() {
        let mut body = vec![0u8; n];
        r.read_exact(&mut body)?;
        return Ok((body, n));
    }
    Ok((Vec::new(), 0))
}

// ---------------------------------------------------------------- fault proxy

/// One request the proxy saw.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    /// Payload bytes of the request body.
    pub body_len: usize,
    /// The status sent back (0 for a reset connection).
    pub status: u16,
    /// When the request arrived.
    pub at: Instant,
    /// Whether the client's connection was still open when the answer
    /// was sent back (a client that died or gave up has closed it).
    pub client_open: bool,
}

/// Whether the peer of `stream` still has its end open: nothing read, a
/// closed one reads as end of file (or a reset) at once.
fn peer_open(stream: &TcpStream) -> bool {
    if stream.set_nonblocking(true).is_err() {
        return false;
    }
    let mut byte = [0u8; 1];
    let open = match stream.peek(&mut byte) {
        Ok(n) => n > 0,
        Err(e) => e.kind() == std::io::ErrorKind::WouldBlock,
    };
    stream.set_nonblocking(false).is_ok() && open
}

/// What the proxy does with a request.
pub enum Action {
    /// Pass it to the registry.
    Forward,
    /// Answer it with this status and headers, without the registry.
    Respond(u16, Vec<(String, String)>),
    /// Answer it with this status and this JSON error body, without the
    /// registry.
    RespondBody(u16, String),
    /// Answer it with this status, these headers and this body, without
    /// the registry.
    RespondWith(u16, Vec<(String, String)>, String),
    /// Read part of the body, then drop the connection (a reset).
    Reset,
}

type Rule = Box<dyn FnMut(&str, &str) -> Action + Send>;

/// An HTTP/1.1 proxy on loopback in front of a registry that records every
/// request and injects faults chosen by a rule on (method, path).
pub struct Proxy {
    pub port: u16,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    rule: Arc<Mutex<Rule>>,
}

impl Proxy {
    /// Starts a proxy to `127.0.0.1:upstream` that forwards everything.
    pub fn start(upstream: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let rule: Arc<Mutex<Rule>> =
            Arc::new(Mutex::new(Box::new(|_: &str, _: &str| Action::Forward)));
        let (s, r) = (seen.clone(), rule.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (s, r) = (s.clone(), r.clone());
                std::thread::spawn(move || {
                    let _ = proxy_conn(stream, upstream, s, r);
                });
            }
        });
        Proxy { port, seen, rule }
    }

    /// Replaces the fault rule.
    pub fn set_rule(&self, rule: impl FnMut(&str, &str) -> Action + Send + 'static) {
        *self.rule.lock().unwrap() = Box::new(rule);
    }

    /// Holds the first request of one of `methods` whose path contains
    /// `part`: the first receiver hears when it arrives; the request waits
    /// until the second sender sends (or is dropped), then goes on to the
    /// registry, or with `reset` is dropped (a client long gone). Every
    /// other request is forwarded.
    pub fn hold_first(
        &self,
        methods: &'static [&'static str],
        part: &'static str,
        reset: bool,
    ) -> (std::sync::mpsc::Receiver<()>, std::sync::mpsc::Sender<()>) {
        let (started_tx, started_rx) = std::sync::mpsc::channel::<()>();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let started_tx = Mutex::new(Some(started_tx));
        let release_rx = Mutex::new(release_rx);
        self.set_rule(move |method, path| {
            if methods.contains(&method)
                && path.contains(part)
                && let Some(tx) = started_tx.lock().unwrap().take()
            {
                let _ = tx.send(());
                let _ = release_rx.lock().unwrap().recv();
                if reset {
                    return Action::Reset;
                }
            }
            Action::Forward
        });
        (started_rx, release_tx)
    }

    /// `127.0.0.1:PORT`.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Takes the requests seen so far.
    pub fn take(&self) -> Vec<Seen> {
        std::mem::take(&mut *self.seen.lock().unwrap())
    }
}

fn proxy_conn(
    client: TcpStream,
    upstream_port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
    rule: Arc<Mutex<Rule>>,
) -> std::io::Result<()> {
    let mut creader = BufReader::new(client.try_clone()?);
    let mut cwriter = client;
    let mut upstream: Option<(BufReader<TcpStream>, TcpStream)> = None;
    while let Some(head) = read_head(&mut creader) {
        let at = Instant::now();
        let action = (rule.lock().unwrap())(&head.method, &head.path);
        let record = |len: usize, status: u16, client_open: bool| {
            seen.lock().unwrap().push(Seen {
                method: head.method.clone(),
                path: head.path.clone(),
                body_len: len,
                status,
                at,
                client_open,
            })
        };
        match action {
            Action::Reset => {
                let half = head.content_length().unwrap_or(0) / 2;
                let mut part = vec![0u8; half];
                let _ = creader.read_exact(&mut part);
                record(head.content_length().unwrap_or(0), 0, false);
                let _ = cwriter.shutdown(std::net::Shutdown::Both);
                return Ok(());
            }
            Action::Respond(..) | Action::RespondBody(..) | Action::RespondWith(..) => {
                let (status, headers, body) = match action {
                    Action::RespondBody(status, body) => (status, Vec::new(), body),
                    Action::RespondWith(status, headers, body) => (status, headers, body),
                    Action::Respond(status, headers) => (
                        status,
                        headers,
                        format!(
                            "{{\"errors\":[{{\"code\":\"INJECTED\",\"message\":\"injected {status} by the test proxy\"}}]}}"
                        ),
                    ),
                    _ => unreachable!(),
                };
                let (_, len) = read_body(&mut creader, &head, false)?;
                record(len, status, peer_open(&cwriter));
                let mut resp = format!(
                    "HTTP/1.1 {status} Injected\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
                    body.len()
                );
                for (k, v) in headers {
                    resp.push_str(&format!("{k}: {v}\r\n"));
                }
                resp.push_str("\r\n");
                resp.push_str(&body);
                cwriter.write_all(resp.as_bytes())?;
            }
            Action::Forward => {
                let (body, len) = read_body(&mut creader, &head, false)?;
                if upstream.is_none() {
                    let s = TcpStream::connect(("127.0.0.1", upstream_port))?;
                    upstream = Some((BufReader::new(s.try_clone()?), s));
                }
                let Some((ureader, uwriter)) = upstream.as_mut() else {
                    unreachable!()
                };
                uwriter.write_all(&head.raw)?;
                uwriter.write_all(&body)?;
                let resp =
                    read_head(ureader).ok_or_else(|| std::io::Error::other("upstream closed"))?;
                let no_body = head.method == "HEAD"
                    || resp.status == 204
                    || resp.status == 304
                    || resp.status < 200;
                let (rbody, _) = read_body(ureader, &resp, no_body)?;
                record(len, resp.status, peer_open(&cwriter));
                cwriter.write_all(&resp.raw)?;
                cwriter.write_all(&rbody)?;
                if resp
                    .header("connection")
                    .is_some_and(|v| v.eq_ignore_ascii_case("close"))
                {
                    return Ok(());
                }
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------- consumers

/// Pulls `reference` with podman (vfs storage, private root, runc) and runs
/// busybox with the image mounted at /settings: returns `cat` of `file`
/// and an `ls` of the mount.
pub fn podman_read(registry_host: &str, reference: &str, file: &str) -> (String, String) {
    require("podman");
    require("runc");
    let busybox = require("busybox");
    let dir = super::TempDir::new();
    let d = dir.path();
    std::fs::write(
        d.join("containers.conf"),
        "[containers]\ndefault_ulimits = []\n[engine]\nruntime = \"runc\"\ncgroup_manager = \"cgroupfs\"\nevents_logger = \"file\"\n",
    )
    .unwrap();
    std::fs::write(
        d.join("registries.conf"),
        format!("[[registry]]\nlocation = \"{registry_host}\"\ninsecure = true\n"),
    )
    .unwrap();
    let rootfs = d.join("rootfs");
    std::fs::create_dir_all(rootfs.join("bin")).unwrap();
    std::fs::copy(&busybox, rootfs.join("bin/busybox")).unwrap();
    let podman = |args: &[&str]| {
        let out = Command::new("podman")
            .env("CONTAINERS_CONF", d.join("containers.conf"))
            .env("CONTAINERS_REGISTRIES_CONF", d.join("registries.conf"))
            .arg("--root")
            .arg(d.join("root"))
            .arg("--runroot")
            .arg(d.join("runroot"))
            .args(["--storage-driver", "vfs"])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "podman {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    podman(&["pull", "-q", reference]);
    let mount = format!("type=image,source={reference},destination=/settings");
    let rootfs_s = rootfs.display().to_string();
    let cat = podman(&[
        "run",
        "--rm",
        "--mount",
        &mount,
        "--rootfs",
        &rootfs_s,
        "/bin/busybox",
        "cat",
        &format!("/settings/{file}"),
    ]);
    let ls = podman(&[
        "run",
        "--rm",
        "--mount",
        &mount,
        "--rootfs",
        &rootfs_s,
        "/bin/busybox",
        "ls",
        "/settings",
    ]);
    // podman leaves vfs layers owned by root; the tempdir removes them.
    let _ = Command::new("podman")
        .env("CONTAINERS_CONF", d.join("containers.conf"))
        .arg("--root")
        .arg(d.join("root"))
        .arg("--runroot")
        .arg(d.join("runroot"))
        .args(["--storage-driver", "vfs", "system", "reset", "-f"])
        .output();
    (cat, ls)
}

// ---------------------------------------------------------------- connection counter

/// A TCP relay on a free loopback port in front of `127.0.0.1:target` that
/// counts the connections it accepts: "not retried" is one connection, not
/// a time limit.
pub struct ConnCounter {
    pub port: u16,
    count: Arc<std::sync::atomic::AtomicUsize>,
}

impl ConnCounter {
    /// Starts relaying to `127.0.0.1:target`; runs until the test ends.
    pub fn start(target: u16) -> ConnCounter {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = count.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else {
                    continue;
                };
                let (mut c2, mut s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                let (mut c, mut s) = (client, server);
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut c, &mut s);
                    let _ = s.shutdown(std::net::Shutdown::Write);
                });
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut s2, &mut c2);
                    let _ = c2.shutdown(std::net::Shutdown::Write);
                });
            }
        });
        ConnCounter { port, count }
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.count.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Every tag of `repository` (`HOST/NAME`) as `skopeo list-tags` reads
/// it, sorted; empty when the registry does not know the repository.
pub fn skopeo_tags(repository: &str, creds: Option<&str>) -> Vec<String> {
    require("skopeo");
    let mut cmd = Command::new("skopeo");
    cmd.args(["list-tags", "--tls-verify=false"]);
    match creds {
        Some(c) => cmd.args(["--creds", c]),
        None => cmd.arg("--no-creds"),
    };
    let out = cmd.arg(format!("docker://{repository}")).output().unwrap();
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("name unknown") || err.contains("404 (Not Found)"),
            "skopeo list-tags {repository} failed unexpectedly: {err}"
        );
        return Vec::new();
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut tags: Vec<String> = v["Tags"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    tags.sort();
    tags
}

// ---------------------------------------------------------------- hostile stub

/// A request the stub saw: method, path and headers.
pub type Request = (String, String, Vec<(String, String)>);

/// A loopback HTTP/1.1 server whose every answer a test writes by hand:
/// for each request (head parsed, body read and dropped) `answer` writes
/// what it likes to the connection, and returns false to close it. For
/// what cannot run here: a registry that echoes headers, sends endless
/// bodies or one byte at a time.
pub struct Stub {
    pub port: u16,
    /// Every request seen.
    pub seen: Arc<Mutex<Vec<Request>>>,
    ip: &'static str,
}

type Answer = dyn Fn(&Head, &mut TcpStream) -> bool + Send + Sync;

impl Stub {
    /// Starts serving with `answer`.
    pub fn start(answer: impl Fn(&Head, &mut TcpStream) -> bool + Send + Sync + 'static) -> Stub {
        Self::start_on("127.0.0.1", answer)
    }

    /// Starts serving with `answer` on `ip` (`127.0.0.2` is another host
    /// than `127.0.0.1` to a client).
    pub fn start_on(
        ip: &'static str,
        answer: impl Fn(&Head, &mut TcpStream) -> bool + Send + Sync + 'static,
    ) -> Stub {
        let listener = TcpListener::bind((ip, 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let answer: Arc<Answer> = Arc::new(answer);
        let s = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (s, answer) = (s.clone(), answer.clone());
                std::thread::spawn(move || {
                    let Ok(read_half) = stream.try_clone() else {
                        return;
                    };
                    let mut reader = BufReader::new(read_half);
                    let mut out = stream;
                    while let Some(head) = read_head(&mut reader) {
                        s.lock().unwrap().push((
                            head.method.clone(),
                            head.path.clone(),
                            head.headers.clone(),
                        ));
                        if read_body(&mut reader, &head, head.method == "HEAD").is_err()
                            || !answer(&head, &mut out)
                        {
                            return;
                        }
                    }
                });
            }
        });
        Stub { port, seen, ip }
    }

    /// `IP:PORT`.
    pub fn host(&self) -> String {
        format!("{}:{}", self.ip, self.port)
    }
}

/// Writes a complete response with a JSON body; false when the client left.
pub fn respond(out: &mut TcpStream, status: &str, headers: &[(&str, &str)], body: &str) -> bool {
    let mut r = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\n", body.len());
    if !body.is_empty() {
        r.push_str("Content-Type: application/json\r\n");
    }
    for (k, v) in headers {
        r.push_str(&format!("{k}: {v}\r\n"));
    }
    r.push_str("\r\n");
    r.push_str(body);
    out.write_all(r.as_bytes()).is_ok()
}

/// A registry API stub: `/v2/` and the existence checks answer as an empty
/// registry would (with a Basic challenge when `basic` is set), and the
/// first upload request (`POST blobs/uploads/`) gets `upload`.
pub fn api_stub(
    basic: bool,
    upload: impl Fn(&Head, &mut TcpStream) -> bool + Send + Sync + 'static,
) -> Stub {
    Stub::start(move |head, out| {
        let authorized = head.header("authorization").is_some();
        match (head.method.as_str(), head.path.as_str()) {
            ("GET", "/v2/") if basic && !authorized => respond(
                out,
                "401 Unauthorized",
                &[("WWW-Authenticate", "Basic realm=\"stub\"")],
                r#"{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}"#,
            ),
            ("GET", "/v2/") => respond(out, "200 OK", &[], "{}"),
            ("HEAD", _) => respond(out, "404 Not Found", &[], ""),
            ("POST", p) if p.contains("/blobs/uploads/") => upload(head, out),
            _ => respond(
                out,
                "500 Internal Server Error",
                &[],
                r#"{"errors":[{"code":"UNEXPECTED","message":"the stub did not expect this"}]}"#,
            ),
        }
    })
}

/// A registry stub with a Basic challenge whose upload answer echoes the
/// request's `Authorization` header in a 400 error, as a careless proxy or
/// registry does.
pub fn echoing_registry() -> Stub {
    api_stub(true, |head, out| {
        let echoed = head.header("authorization").unwrap_or("").to_string();
        let body = serde_json::json!({"errors": [{"code": "DENIED",
            "message": format!("refused; you sent Authorization: {echoed}")}]});
        respond(out, "400 Bad Request", &[], &body.to_string())
    })
}

/// GET over plain HTTP with curl: status and body.
pub fn curl(url: &str, accept: Option<&str>) -> (u16, String) {
    curl_with(Command::new(require("curl")), url, accept)
}

/// [`curl`] with a command prepared elsewhere ([`Registry::curl`]).
fn curl_with(mut c: Command, url: &str, accept: Option<&str>) -> (u16, String) {
    c.args(["-s", "-w", "\n%{http_code}"]);
    if let Some(a) = accept {
        c.args(["-H", &format!("Accept: {a}")]);
    }
    let out = c.arg(url).output().expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let (body, code) = text.rsplit_once('\n').expect("status line");
    (code.trim().parse().expect("status"), body.to_string())
}

/// The tags of repository `name`, read with curl (none when the
/// repository does not exist yet: the registry's 404).
pub fn tags_of(reg: &Registry, name: &str) -> std::collections::BTreeSet<String> {
    let (code, body) = curl_with(
        reg.curl(),
        &format!("{}/v2/{name}/tags/list", reg.base()),
        None,
    );
    if code == 404 {
        return Default::default();
    }
    assert_eq!(code, 200, "listing the tags of {name}: {body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("tags JSON");
    v["tags"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|t| t.as_str().expect("tag").to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// The revision annotation of the image `name:tag`, read with curl.
pub fn revision_of(reg: &Registry, name: &str, tag: &str) -> String {
    let (code, body) = curl_with(
        reg.curl(),
        &format!("{}/v2/{name}/manifests/{tag}", reg.base()),
        Some("application/vnd.oci.image.manifest.v1+json"),
    );
    assert_eq!(code, 200, "{tag}: {body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("manifest JSON");
    v["annotations"]["org.opencontainers.image.revision"]
        .as_str()
        .expect("revision annotation")
        .to_string()
}

/// The digest `tag` of repository `name` names (`Docker-Content-Digest` of
/// a `HEAD` with curl), `None` when the registry has no such tag.
pub fn digest_of(reg: &Registry, name: &str, tag: &str) -> Option<String> {
    let out = reg
        .curl()
        .args([
            "-sI",
            "-H",
            "Accept: application/vnd.oci.image.manifest.v1+json",
            &format!("{}/v2/{name}/manifests/{tag}", reg.base()),
        ])
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    if !text.starts_with("HTTP/1.1 200") {
        return None;
    }
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case("docker-content-digest")
            .then(|| v.trim().to_string())
    })
}
