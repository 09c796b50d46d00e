//! A loopback stand-in for GitHub's REST compare API, which cannot run
//! here: `GET /repos/{owner}/{repo}/compare/{base}...{head}` answered with
//! the real comparison example (`tests/fixtures/github/rest/commit-comparison.json`)
//! whose `status` the test decides. Every (base, head) asked is recorded.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::Value;

/// The (base, head) pairs the stub was asked about, in order.
pub type Asked = Arc<Mutex<Vec<(String, String)>>>;

/// Starts the stub for `repository` (`owner/repo`); `answer(base, head)`
/// gives the comparison's `status` (`identical`, `ahead`, `behind`,
/// `diverged`). Returns the API base URL (`GITHUB_API_URL`) and the pairs
/// asked. Any other path is a 404 with GitHub's body.
pub fn compare_api(
    repository: &str,
    answer: impl Fn(&str, &str) -> &'static str + Send + 'static,
) -> (String, Asked) {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/github/rest/commit-comparison.json");
    let text = std::fs::read_to_string(&fixture).expect("the comparison fixture");
    let template: Value = serde_json::from_str(&text).expect("fixture JSON");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let asked: Asked = Arc::default();
    let seen = asked.clone();
    let prefix = format!("/repos/{repository}/compare/");
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
                    break;
                }
            }
            let target = line.split_whitespace().nth(1).unwrap_or("").to_string();
            let (status, body) = match target
                .strip_prefix(&prefix)
                .and_then(|r| r.split_once("..."))
            {
                Some((base, head)) => {
                    seen.lock()
                        .expect("lock")
                        .push((base.to_string(), head.to_string()));
                    let mut v = template.clone();
                    v["status"] = answer(base, head).into();
                    ("200 OK", v.to_string())
                }
                None => ("404 Not Found", r#"{"message":"Not Found"}"#.to_string()),
            };
            let resp = format!(
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(resp.as_bytes());
            let _ = stream.flush();
            let mut rest = Vec::new();
            let _ = reader.read_to_end(&mut rest);
        }
    });
    (format!("http://{addr}"), asked)
}
