//! The one loopback stand-in for GitHub's REST API (which cannot run here),
//! shared by the history, ancestry and ordering tests: a tiny HTTP/1.1
//! server on 127.0.0.1 that answers each request as the test says and
//! records what it saw. Bodies come from the real REST examples in
//! `tests/fixtures/github/rest`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// One request the stub saw.
#[derive(Debug, Clone)]
pub struct Seen {
    /// `GET /repos/... HTTP/1.1`.
    pub request_line: String,
    /// The headers, as sent.
    pub headers: Vec<(String, String)>,
}

impl Seen {
    /// A header's value (names compare case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The request target (`/repos/o/r/compare/a...b`).
    pub fn target(&self) -> &str {
        self.request_line.split_whitespace().nth(1).unwrap_or("")
    }
}

/// What the stub saw, in order.
pub type Log = Arc<Mutex<Vec<Seen>>>;

/// Starts the stub; `answer` gives each request's status and JSON body.
/// Returns the base URL (`http://127.0.0.1:PORT`) and the request log.
pub fn stub(answer: impl Fn(&Seen) -> (u16, String) + Send + 'static) -> (String, Log) {
    stub_on("127.0.0.1", move |seen| {
        let (status, body) = answer(seen);
        (status, Vec::new(), body)
    })
}

/// [`stub`] on `ip`, with extra headers in each answer (`Location`).
pub fn stub_on(
    ip: &str,
    answer: impl Fn(&Seen) -> (u16, Vec<(String, String)>, String) + Send + 'static,
) -> (String, Log) {
    let listener = TcpListener::bind((ip, 0)).expect("bind the stub");
    let addr = listener.local_addr().expect("addr");
    let seen: Log = Arc::default();
    let log = Arc::clone(&seen);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(10)));
            let mut reader = BufReader::new(stream.try_clone().expect("clone stream"));
            let mut request_line = String::new();
            if reader.read_line(&mut request_line).is_err() {
                continue;
            }
            let mut headers = Vec::new();
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                let line = line.trim_end();
                if line.is_empty() {
                    break;
                }
                if let Some((k, v)) = line.split_once(':') {
                    headers.push((k.trim().to_string(), v.trim().to_string()));
                }
            }
            let request = Seen {
                request_line: request_line.trim_end().to_string(),
                headers,
            };
            let (status, extra, body) = answer(&request);
            log.lock().expect("lock").push(request);
            let reason = match status {
                200 => "OK",
                301 => "Moved Permanently",
                307 => "Temporary Redirect",
                404 => "Not Found",
                _ => "Error",
            };
            let extra: String = extra.iter().map(|(k, v)| format!("{k}: {v}\r\n")).collect();
            let resp = format!(
                "HTTP/1.1 {status} {reason}\r\n{extra}Content-Type: application/json; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(resp.as_bytes());
            let _ = stream.flush();
            let mut rest = Vec::new();
            let _ = reader.read_to_end(&mut rest);
        }
    });
    (format!("http://{addr}"), seen)
}

/// GitHub's commit-comparison example with its `status` set to `status`
/// (`ahead`, `behind`, `identical`, `diverged`).
pub fn comparison(status: &str) -> String {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/github/rest/commit-comparison.json");
    let text = std::fs::read_to_string(&fixture).expect("comparison fixture");
    let mut v: serde_json::Value = serde_json::from_str(&text).expect("fixture JSON");
    v["status"] = status.into();
    v.to_string()
}

/// The (base, head) of a compare request for `owner/repo`
/// (`/repos/OWNER/REPO/compare/BASE...HEAD`), if it is one.
pub fn compared(seen: &Seen, owner_repo: &str) -> Option<(String, String)> {
    let (base, head) = seen
        .target()
        .strip_prefix(&format!("/repos/{owner_repo}/compare/"))?
        .split_once("...")?;
    Some((base.to_string(), head.to_string()))
}

/// The (base, head) pairs a compare stub was asked about, in order.
pub type Asked = Arc<Mutex<Vec<(String, String)>>>;

/// The stub as GitHub's compare API for `repository` (`owner/repo`):
/// `answer(base, head)` gives the comparison's `status` (`identical`,
/// `ahead`, `behind`, `diverged`); any other path is a 404 with GitHub's
/// body. Returns the API base URL (`GITHUB_API_URL`) and the pairs asked.
pub fn compare_api(
    repository: &str,
    answer: impl Fn(&str, &str) -> &'static str + Send + 'static,
) -> (String, Asked) {
    let asked: Asked = Arc::default();
    let record = Arc::clone(&asked);
    let repository = repository.to_string();
    let (url, _log) = stub(move |seen| match compared(seen, &repository) {
        Some((base, head)) => {
            let status = answer(&base, &head);
            record.lock().expect("lock").push((base, head));
            (200, comparison(status))
        }
        None => (404, r#"{"message":"Not Found"}"#.to_string()),
    });
    (url, asked)
}
