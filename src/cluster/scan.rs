//! `settings-image verify --scan DIR`: every image-volume reference to one
//! repository in a cluster repository's YAML, each verified.
//!
//! The pod spec is found where each workload kind keeps it (Pod, the
//! template of Deployment, StatefulSet, DaemonSet, ReplicaSet and Job, the
//! job template of CronJob), in multi-document files and `kind: List`, which
//! is also what `kustomize build` and Flux's rendered output look like.
//! YAML is read as the cluster's tools read it: anchors, aliases and merge
//! keys (`<<:`) resolved; `.json` manifests too; a symlink is followed
//! inside the scanned folder and refused outside it. A file that cannot be
//! read (not UTF-8, larger than [`MAX_FILE_BYTES`], a link out of the
//! folder, not YAML yet naming the repository) is a row with status
//! `error`, never skipped silently: a gate that cannot read a manifest
//! cannot vouch for it.
//! Why parse YAML and not grep for the repository: a reference in a comment,
//! an annotation or a container image is not an image volume, and the row
//! should name the object that mounts it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_yaml_ng::Value;

use crate::error::{Error, Result};

/// One image-volume reference found in the cluster repository.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Found {
    /// The file, relative to the scanned folder.
    pub file: String,
    /// The 1-based line of the reference, when it can be told.
    pub line: Option<usize>,
    /// `Kind/name` (with `namespace/` when the object names one).
    pub object: String,
    /// The volume's name.
    pub volume: String,
    /// The reference as written.
    pub reference: String,
}

/// A file that is not YAML (e.g. a Helm template) and does not mention the
/// repository: skipped, and said so.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    /// The file, relative to the scanned folder.
    pub file: String,
    /// Why it was not read.
    pub reason: String,
}

/// Everything the walk found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Findings {
    /// The references, in file order.
    pub found: Vec<Found>,
    /// Files that are not YAML and do not mention the repository.
    pub skipped: Vec<Skipped>,
    /// Manifests that could not be read: each becomes an `error` row.
    pub unreadable: Vec<Skipped>,
}

/// The largest manifest file the scan reads (16 MiB; the API server stores
/// an object of at most about 1.5 MiB): a larger one is an `error` row.
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// Where each workload kind keeps its pod spec.
const POD_SPECS: &[(&str, &[&str])] = &[
    ("Pod", &["spec"]),
    ("Deployment", &["spec", "template", "spec"]),
    ("StatefulSet", &["spec", "template", "spec"]),
    ("DaemonSet", &["spec", "template", "spec"]),
    ("ReplicaSet", &["spec", "template", "spec"]),
    ("Job", &["spec", "template", "spec"]),
    ("ReplicationController", &["spec", "template", "spec"]),
    ("PodTemplate", &["template", "spec"]),
    (
        "CronJob",
        &["spec", "jobTemplate", "spec", "template", "spec"],
    ),
];

/// True when `reference` names an image in `repository` (`R:tag`, `R@sha256:...`).
pub fn in_repository(reference: &str, repository: &str) -> bool {
    reference
        .strip_prefix(repository)
        .is_some_and(|rest| rest.starts_with(':') || rest.starts_with('@'))
}

/// Finds every image-volume reference to `repository` in the YAML and
/// JSON files under `dir` (or in `dir` itself when it is a file).
pub fn find(dir: &Path, repository: &str) -> Result<Findings> {
    if std::fs::metadata(dir).is_err() {
        return Err(Error::Source {
            path: dir.to_path_buf(),
            message: "does not exist".into(),
            hint: Some(
                "give --scan the cluster repository's folder (or one manifest) to scan".into(),
            ),
        });
    }
    let mut files = Vec::new();
    let dir = if dir.is_file() {
        files.push((dir.to_path_buf(), None));
        dir.parent().unwrap_or(Path::new(""))
    } else {
        let root = std::fs::canonicalize(dir)
            .map_err(|e| Error::io(format!("reading {}", dir.display()), e))?;
        collect(dir, &root, &mut vec![root.clone()], &mut files)?;
        dir
    };
    files.sort();
    let mut out = Findings::default();
    for (path, problem) in files {
        let rel = path
            .strip_prefix(dir)
            .unwrap_or(&path)
            .to_string_lossy()
            .into_owned();
        let text = match problem.map_or_else(|| read_text(&path), Err) {
            Ok(t) => t,
            Err(reason) => {
                out.unreadable.push(Skipped { file: rel, reason });
                continue;
            }
        };
        let docs = match parse(&path, &text) {
            Ok(d) => d,
            Err(reason) if text.contains(repository) => {
                out.unreadable.push(Skipped {
                    file: rel,
                    reason: format!(
                        "mentions {repository} but is not YAML that can be read: {reason}"
                    ),
                });
                continue;
            }
            Err(reason) => {
                out.skipped.push(Skipped { file: rel, reason });
                continue;
            }
        };
        let mut here = Vec::new();
        for doc in &docs {
            objects(doc, &mut |obj| {
                pod_volumes(obj, repository, &rel, &mut here)
            });
        }
        // Lines: the n-th occurrence of a reference is on the n-th line holding it.
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        for f in &mut here {
            let n = seen.entry(f.reference.clone()).or_default();
            f.line = text
                .lines()
                .enumerate()
                .filter(|(_, l)| l.contains(&f.reference))
                .nth(*n)
                .map(|(i, _)| i + 1);
            *n += 1;
        }
        out.found.extend(here);
    }
    Ok(out)
}

/// A manifest's text, or why it cannot be read.
fn read_text(path: &Path) -> std::result::Result<String, String> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| format!("cannot be read: {e}"))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(format!(
            "is larger than {} MiB, more than any manifest: not read",
            MAX_FILE_BYTES >> 20
        ));
    }
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "is not UTF-8 text (byte {}), which kubectl and kustomize refuse too",
            e.utf8_error().valid_up_to()
        )
    })
}

/// The documents of a YAML file (anchors, aliases and merge keys resolved)
/// or of a `.json` file.
fn parse(path: &Path, text: &str) -> std::result::Result<Vec<Value>, String> {
    if path.extension().is_some_and(|e| e == "json") {
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        return serde_yaml_ng::to_value(v)
            .map(|v| vec![v])
            .map_err(|e| e.to_string());
    }
    let mut docs = Vec::new();
    for de in serde_yaml_ng::Deserializer::from_str(text) {
        let mut v: Value = serde::Deserialize::deserialize(de).map_err(|e| e.to_string())?;
        v.apply_merge().map_err(|e| e.to_string())?;
        docs.push(v);
    }
    Ok(docs)
}

/// Whether the cluster's tools read `path` as a manifest.
fn is_manifest(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
}

/// The manifests under `dir`, each with the reason it cannot be read (a
/// symlink out of `root`, a broken one); symlinks inside `root` are
/// followed, except to a folder being walked (`ancestors`, canonical): a loop.
fn collect(
    dir: &Path,
    root: &Path,
    ancestors: &mut Vec<PathBuf>,
    out: &mut Vec<(PathBuf, Option<String>)>,
) -> Result<()> {
    let rd =
        std::fs::read_dir(dir).map_err(|e| Error::io(format!("reading {}", dir.display()), e))?;
    for entry in rd {
        let entry = entry.map_err(|e| Error::io(format!("reading {}", dir.display()), e))?;
        let path = entry.path();
        if entry.file_name() == ".git" {
            continue;
        }
        let ft = entry
            .file_type()
            .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
        if ft.is_symlink() {
            match std::fs::canonicalize(&path) {
                Err(e) if is_manifest(&path) => {
                    out.push((path, Some(format!("is a broken symlink: {e}"))));
                }
                Err(_) => {}
                Ok(target) if !target.starts_with(root) => {
                    if is_manifest(&path) || target.is_dir() {
                        out.push((
                            path,
                            Some(format!(
                                "is a symlink to {}, outside the scanned folder: not followed",
                                target.display()
                            )),
                        ));
                    }
                }
                Ok(target) if target.is_dir() => {
                    if !ancestors.contains(&target) {
                        ancestors.push(target);
                        collect(&path, root, ancestors, out)?;
                        ancestors.pop();
                    }
                }
                Ok(target) if target.is_file() && is_manifest(&path) => out.push((path, None)),
                Ok(_) => {}
            }
        } else if ft.is_dir() {
            let real = std::fs::canonicalize(&path)
                .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
            ancestors.push(real);
            collect(&path, root, ancestors, out)?;
            ancestors.pop();
        } else if ft.is_file() && is_manifest(&path) {
            out.push((path, None));
        }
    }
    Ok(())
}

/// Calls `f` on every object in `doc`, looking inside `kind: List`.
fn objects(doc: &Value, f: &mut dyn FnMut(&Value)) {
    if doc.get("kind").and_then(Value::as_str) == Some("List") {
        if let Some(items) = doc.get("items").and_then(Value::as_sequence) {
            for item in items {
                objects(item, f);
            }
        }
    } else if doc.is_mapping() {
        f(doc);
    }
}

fn pod_volumes(obj: &Value, repository: &str, file: &str, out: &mut Vec<Found>) {
    let Some(kind) = obj.get("kind").and_then(Value::as_str) else {
        return;
    };
    let Some((_, path)) = POD_SPECS.iter().find(|(k, _)| *k == kind) else {
        return;
    };
    let mut spec = obj;
    for key in *path {
        match spec.get(key) {
            Some(v) => spec = v,
            None => return,
        }
    }
    let meta = obj.get("metadata");
    let name = meta
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("?");
    let object = match meta
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str)
    {
        Some(ns) => format!("{kind}/{ns}/{name}"),
        None => format!("{kind}/{name}"),
    };
    let Some(volumes) = spec.get("volumes").and_then(Value::as_sequence) else {
        return;
    };
    for v in volumes {
        let Some(reference) = v
            .get("image")
            .and_then(|i| i.get("reference"))
            .and_then(Value::as_str)
        else {
            continue;
        };
        if in_repository(reference, repository) {
            out.push(Found {
                file: file.to_string(),
                line: None,
                object: object.clone(),
                volume: v
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("?")
                    .to_string(),
                reference: reference.to_string(),
            });
        }
    }
}

/// One verified row of the scan.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Where it was found.
    #[serde(flatten)]
    pub found: Found,
    /// `verified`, `mismatch` or `error`.
    pub status: &'static str,
    /// The commit it holds (verified) or why not.
    pub detail: String,
    /// The first differing file, for a mismatch in the layer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file_differs: Option<String>,
}

/// The scan's result.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The repository scanned for.
    pub repository: String,
    /// Every reference, verified.
    pub rows: Vec<Row>,
    /// Files skipped as not YAML.
    pub skipped: Vec<Skipped>,
}

impl Report {
    /// The exit code: 7 when any reference does not match its commit, else
    /// the first error's, else 0.
    pub fn exit_code(&self, errors: &[i32]) -> i32 {
        if self.rows.iter().any(|r| r.status == "mismatch") {
            7
        } else {
            errors.first().copied().unwrap_or(0)
        }
    }

    /// A table for people.
    pub fn table(&self) -> String {
        let mut rows = vec![[
            "STATUS".to_string(),
            "WHERE".to_string(),
            "OBJECT".to_string(),
            "REFERENCE".to_string(),
            "DETAIL".to_string(),
        ]];
        for r in &self.rows {
            rows.push([
                r.status.to_string(),
                match r.found.line {
                    Some(l) => format!("{}:{l}", r.found.file),
                    None => r.found.file.clone(),
                },
                r.found.object.clone(),
                r.found.reference.clone(),
                r.detail.clone(),
            ]);
        }
        let widths: Vec<usize> = (0..4)
            .map(|i| rows.iter().map(|r| r[i].len()).max().unwrap_or(0))
            .collect();
        let mut s = String::new();
        for r in &rows {
            for (i, w) in widths.iter().enumerate() {
                s.push_str(&format!("{:<w$}  ", r[i]));
            }
            s.push_str(&r[4]);
            s.push('\n');
        }
        if self.rows.is_empty() {
            s.push_str(&format!(
                "no image-volume reference to {}\n",
                self.repository
            ));
        }
        s
    }
}

/// One reference's verdict, shared by every row that names it.
#[derive(Clone)]
struct Outcome {
    status: &'static str,
    detail: String,
    file: Option<String>,
    code: Option<i32>,
}

/// Verifies every finding with `verify` (each distinct reference once);
/// returns the report and the exit codes of errors that were not mismatches.
pub fn verify_all(
    repository: &str,
    findings: Findings,
    verify: &mut dyn FnMut(&str) -> Result<super::verify::Verified>,
) -> (Report, Vec<i32>) {
    let mut cache: BTreeMap<String, Outcome> = BTreeMap::new();
    let mut rows = Vec::new();
    let mut errors = Vec::new();
    for found in findings.found {
        let Outcome {
            status,
            detail,
            file,
            code,
        } = cache
            .entry(found.reference.clone())
            .or_insert_with(|| match verify(&found.reference) {
                Ok(v) => Outcome {
                    status: "verified",
                    detail: format!("{} at {}", v.path, v.commit),
                    file: None,
                    code: None,
                },
                Err(Error::Mismatch { reason, file, .. }) => Outcome {
                    status: "mismatch",
                    detail: reason,
                    file,
                    code: None,
                },
                Err(e) => Outcome {
                    status: "error",
                    detail: match e.hint() {
                        Some(h) => format!("{e} (hint: {h})"),
                        None => e.to_string(),
                    },
                    file: None,
                    code: Some(e.exit_code()),
                },
            })
            .clone();
        if let Some(c) = code {
            errors.push(c);
        }
        rows.push(Row {
            found,
            status,
            detail,
            file_differs: file,
        });
    }
    for u in findings.unreadable {
        errors.push(2);
        rows.push(Row {
            found: Found {
                file: u.file,
                line: None,
                object: String::new(),
                volume: String::new(),
                reference: String::new(),
            },
            status: "error",
            detail: u.reason,
            file_differs: None,
        });
    }
    (
        Report {
            repository: repository.to_string(),
            rows,
            skipped: findings.skipped,
        },
        errors,
    )
}

/// Finds and verifies every reference to `repository` under `dir`, each
/// against the settings checkout of `base` (its `reference` is ignored);
/// both front ends call this. Finding no reference at all is bad input
/// (a typo in the repository must not pass a gate) unless `allow_empty`.
pub fn scan_and_verify(
    dir: &Path,
    repository: &str,
    base: &super::verify::Request,
    allow_empty: bool,
) -> Result<(Report, Vec<i32>)> {
    crate::registry::parse_repository(repository)?;
    super::verify::check_path(&base.path)?;
    let findings = find(dir, repository)?;
    if findings.found.is_empty() && findings.unreadable.is_empty() && !allow_empty {
        return Err(Error::input(
            format!(
                "no image-volume reference to {repository} under {}: nothing was verified",
                dir.display()
            ),
            Some(
                "check --repository and --scan for a typo (HOST/NAME exactly as the manifests write it, before `:` or `@`); \
                 --allow-empty passes a folder that has none"
                    .to_string(),
            ),
        ));
    }
    Ok(verify_all(repository, findings, &mut |reference| {
        super::verify::verify(&super::verify::Request {
            reference: reference.to_string(),
            ..base.clone()
        })
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_belong_to_a_repository_by_prefix_and_separator() {
        assert!(in_repository("r.io/a/s:t", "r.io/a/s"));
        assert!(in_repository("r.io/a/s@sha256:00", "r.io/a/s"));
        assert!(!in_repository("r.io/a/settings:t", "r.io/a/s"));
        assert!(!in_repository("r.io/a/s/x:t", "r.io/a/s"));
    }
}
