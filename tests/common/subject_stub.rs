//! A loopback registry stub for what no registry that runs here shows: it
//! answers `OCI-Subject` (used by the provenance tests and the registry
//! client's unit tests).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::sha256_digest as sha256;

const INDEX: &str = "application/vnd.oci.image.index.v1+json";

/// What [`SubjectStub`] holds.
#[derive(Default)]
pub struct Store {
    blobs: HashMap<String, Vec<u8>>,
    /// Each manifest by digest: media type and bytes.
    pub manifests: HashMap<String, (String, Vec<u8>)>,
    /// Each tag and the digest it names.
    pub tags: HashMap<String, String>,
    uploads: HashMap<String, Vec<u8>>,
    next: u64,
    /// `METHOD path` of every request.
    log: Vec<String>,
}

/// A loopback registry that implements the OCI distribution spec v1.1
/// referrers API (and just enough else for a push): `GET referrers/DIGEST`
/// answers an index of the manifests whose `subject` is DIGEST, and a
/// manifest PUT with a subject answers `OCI-Subject`.
///
/// Kept only for what no registry that runs here shows (the referrers API
/// itself is met on go-containerregistry's registry, [`super::oci::ReferrersRegistry`]):
/// the `OCI-Subject` answer (so no referrers tag), the `artifactType`
/// filter applied by the registry (`OCI-Filters-Applied`), a listing whose
/// `artifactType` is the manifest's own, and a tag list paged by `Link`.
/// ECR, ACR, Harbor and zot answer `OCI-Subject`; none of them runs here.
pub struct SubjectStub {
    port: u16,
    /// What it holds and the requests it saw.
    pub store: Arc<Mutex<Store>>,
}

impl SubjectStub {
    /// Starts it on a free loopback port.
    pub fn start() -> SubjectStub {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let store = Arc::new(Mutex::new(Store::default()));
        let st = store.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let st = st.clone();
                std::thread::spawn(move || serve(conn, &st));
            }
        });
        SubjectStub { port, store }
    }

    /// `127.0.0.1:PORT`.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `METHOD path` of every request so far.
    pub fn log(&self) -> Vec<String> {
        self.store.lock().unwrap().log.clone()
    }
}

fn serve(conn: TcpStream, store: &Mutex<Store>) {
    let mut w = conn.try_clone().unwrap();
    let mut r = BufReader::new(conn);
    while let Some((first, headers)) = read_head(&mut r) {
        let mut parts = first.split(' ');
        let method = parts.next().unwrap_or("").to_string();
        let target = parts.next().unwrap_or("").to_string();
        let h = |n: &str| {
            headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(n))
                .map(|(_, v)| v.clone())
        };
        let mut body = Vec::new();
        if h("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
            loop {
                let mut line = String::new();
                r.read_line(&mut line).unwrap();
                let n = usize::from_str_radix(line.trim(), 16).unwrap_or(0);
                let mut chunk = vec![0; n + 2];
                r.read_exact(&mut chunk).unwrap();
                if n == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..n]);
            }
        } else if let Some(n) = h("content-length").and_then(|v| v.parse::<usize>().ok()) {
            body = vec![0; n];
            r.read_exact(&mut body).unwrap();
        }
        let (status, mut out_headers, out_body) =
            handle(store, &method, &target, h("content-type"), body);
        let len = out_body.len();
        out_headers.push(("Content-Length".into(), len.to_string()));
        let mut resp = format!("HTTP/1.1 {status} X\r\n");
        for (k, v) in out_headers {
            resp.push_str(&format!("{k}: {v}\r\n"));
        }
        resp.push_str("\r\n");
        let mut bytes = resp.into_bytes();
        if method != "HEAD" {
            bytes.extend_from_slice(&out_body);
        }
        if w.write_all(&bytes).is_err() {
            return;
        }
    }
}

type Answer = (u16, Vec<(String, String)>, Vec<u8>);

fn handle(
    store: &Mutex<Store>,
    method: &str,
    target: &str,
    content_type: Option<String>,
    body: Vec<u8>,
) -> Answer {
    let mut s = store.lock().unwrap();
    s.log.push(format!("{method} {target}"));
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let q = |k: &str| {
        query.split('&').find_map(|kv| {
            let (a, b) = kv.split_once('=')?;
            (a == k).then(|| {
                b.replace("%3A", ":")
                    .replace("%2F", "/")
                    .replace("%2B", "+")
            })
        })
    };
    let not_found = (
        404,
        vec![],
        br#"{"errors":[{"code":"NOT_FOUND"}]}"#.to_vec(),
    );
    if path == "/v2/" {
        return (200, vec![], b"{}".to_vec());
    }
    let Some(rest) = path.strip_prefix("/v2/") else {
        return not_found;
    };
    let find = |marker: &str| {
        rest.find(marker)
            .map(|i| (&rest[..i], &rest[i + marker.len()..]))
    };
    if let Some((name, id)) = find("/blobs/uploads/") {
        if let (Some(digest), Some(_)) = (q("mount"), q("from"))
            && method == "POST"
            && s.blobs.contains_key(&digest)
        {
            return (
                201,
                vec![
                    ("Location".into(), format!("/v2/{name}/blobs/{digest}")),
                    ("Docker-Content-Digest".into(), digest),
                ],
                vec![],
            );
        }
        return match method {
            "POST" => {
                s.next += 1;
                let id = s.next.to_string();
                s.uploads.insert(id.clone(), Vec::new());
                (
                    202,
                    vec![("Location".into(), format!("/v2/{name}/blobs/uploads/{id}"))],
                    vec![],
                )
            }
            "PATCH" => {
                s.uploads.entry(id.to_string()).or_default().extend(body);
                (
                    202,
                    vec![("Location".into(), format!("/v2/{name}/blobs/uploads/{id}"))],
                    vec![],
                )
            }
            "PUT" => {
                let mut data = s.uploads.remove(id).unwrap_or_default();
                data.extend(body);
                let digest = q("digest").unwrap_or_default();
                if sha256(&data) != digest {
                    return (
                        400,
                        vec![],
                        br#"{"errors":[{"code":"DIGEST_INVALID"}]}"#.to_vec(),
                    );
                }
                s.blobs.insert(digest.clone(), data);
                (201, vec![("Docker-Content-Digest".into(), digest)], vec![])
            }
            _ => (405, vec![], vec![]),
        };
    }
    if let Some((_, digest)) = find("/blobs/") {
        return match s.blobs.get(digest) {
            Some(b) => (
                200,
                vec![("Docker-Content-Digest".into(), digest.to_string())],
                b.clone(),
            ),
            None => not_found,
        };
    }
    if let Some((name, reference)) = find("/manifests/") {
        match method {
            "PUT" => {
                let digest = sha256(&body);
                let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let mt = content_type.unwrap_or_default();
                s.manifests.insert(digest.clone(), (mt, body));
                if !reference.starts_with("sha256:") {
                    s.tags.insert(reference.to_string(), digest.clone());
                }
                let mut h = vec![
                    ("Docker-Content-Digest".into(), digest.clone()),
                    ("Location".into(), format!("/v2/{name}/manifests/{digest}")),
                ];
                if let Some(sub) = v["subject"]["digest"].as_str() {
                    h.push(("OCI-Subject".into(), sub.to_string()));
                }
                return (201, h, vec![]);
            }
            "GET" | "HEAD" => {
                let digest = if reference.starts_with("sha256:") {
                    reference.to_string()
                } else {
                    match s.tags.get(reference) {
                        Some(d) => d.clone(),
                        None => return not_found,
                    }
                };
                return match s.manifests.get(&digest) {
                    Some((mt, b)) => (
                        200,
                        vec![
                            ("Content-Type".into(), mt.clone()),
                            ("Docker-Content-Digest".into(), digest),
                        ],
                        b.clone(),
                    ),
                    None => not_found,
                };
            }
            _ => return (405, vec![], vec![]),
        }
    }
    if let Some((_, subject)) = find("/referrers/") {
        let filter = q("artifactType");
        let mut list = Vec::new();
        for (digest, (mt, b)) in &s.manifests {
            let v: Value = serde_json::from_slice(b).unwrap_or(Value::Null);
            if v["subject"]["digest"] != subject {
                continue;
            }
            let at = v["artifactType"].clone();
            if filter.as_deref().is_some_and(|f| at != f) {
                continue;
            }
            list.push(serde_json::json!({
                "mediaType": mt, "digest": digest, "size": b.len(),
                "artifactType": at, "annotations": v["annotations"],
            }));
        }
        let mut h = vec![("Content-Type".into(), INDEX.to_string())];
        if filter.is_some() {
            h.push(("OCI-Filters-Applied".into(), "artifactType".into()));
        }
        let index = serde_json::json!({"schemaVersion": 2, "mediaType": INDEX, "manifests": list});
        return (200, h, serde_json::to_vec(&index).unwrap());
    }
    if let Some(name) = rest.strip_suffix("/tags/list") {
        // Pages of two, whatever `n` asks, linked as the spec describes.
        let mut tags: Vec<String> = s.tags.keys().cloned().collect();
        tags.sort();
        let last = q("last");
        let page: Vec<String> = tags
            .into_iter()
            .filter(|t| last.as_ref().is_none_or(|l| t > l))
            .take(2)
            .collect();
        let mut h = vec![];
        if page.len() == 2 {
            h.push((
                "Link".into(),
                format!("</v2/{name}/tags/list?n=2&last={}>; rel=\"next\"", page[1]),
            ));
        }
        let v = serde_json::json!({"name": name, "tags": page});
        return (200, h, serde_json::to_vec(&v).unwrap());
    }
    not_found
}

/// An HTTP/1.1 head from `r`: the first line and the headers (none at
/// the end of the stream).
pub fn read_head(r: &mut impl BufRead) -> Option<(String, Vec<(String, String)>)> {
    let mut first = String::new();
    if r.read_line(&mut first).ok()? == 0 {
        return None;
    }
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        r.read_line(&mut line).ok()?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    Some((first.trim_end().to_string(), headers))
}
