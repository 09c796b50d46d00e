//! `settings-image verify --scan DIR`: every image-volume reference to one
//! repository in a cluster repository's YAML, each verified, and every
//! other way the cluster may come to mount an image of it, each an error.
//!
//! An image-volume reference is a `volumes` item's `image.reference` in
//! any object: a Pod, the template of a Deployment, StatefulSet, DaemonSet,
//! ReplicaSet, Job or CronJob, and any custom resource with a pod template
//! (an Argo Rollout's, a Knative Service's), in multi-document files and
//! `kind: List`, which is also what `kustomize build` and Flux's rendered
//! output look like, and in kustomize patches (files a kustomization names,
//! inline patches, JSON 6902 operations).
//! YAML is read as the cluster's tools read it: anchors, aliases and merge
//! keys (`<<:`) resolved; `.json` manifests too; a symlink is followed
//! inside the scanned folder and refused outside it. A file that cannot be
//! read (not UTF-8, larger than [`MAX_FILE_BYTES`], a link out of the
//! folder, not YAML yet naming the repository) is a row with status
//! `error`, never skipped silently: a gate that cannot read a manifest
//! cannot vouch for it.
//! The files are read as written, not rendered: the cluster applies what
//! kustomize renders and Flux substitutes, which may differ. So the scan
//! fails closed ([`super::mentions`]): any other mention of the repository,
//! a reference with a substitution variable that may become one of it, a
//! kustomize image entry, patch or field spec that may rewrite one, and a
//! kustomization's remote or outside resource are `error` rows.
//! Why parse YAML and not grep for the repository: the row should name the
//! object that mounts the image, and a comment is not applied.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_yaml_ng::Value;

use crate::error::{Error, Result};
use crate::field::Field;

pub use super::finding::{Found, Unverified, in_repository};

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
    /// Mentions of the repository, and ways to change an image-volume
    /// reference, that the scan cannot verify: each becomes an `error` row.
    pub unverified: Vec<Unverified>,
}

/// The largest manifest file the scan reads (16 MiB; the API server stores
/// an object of at most about 1.5 MiB): a larger one is an `error` row.
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// Finds every image-volume reference to `repository` in the YAML and
/// JSON files under `dir` (or in `dir` itself when it is a file).
pub fn find(dir: &Path, repository: &str) -> Result<Findings> {
    if std::fs::metadata(dir).is_err() {
        return Err(Error::Source {
            path: dir.to_path_buf(),
            message: "does not exist".into(),
            hint: Some(crate::text![
                "give ",
                Field::Scan,
                " the cluster repository's folder (or one manifest) to scan"
            ]),
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
    // First every file read, so that a kustomization's patches are known
    // before the files they name are walked.
    let mut read: Vec<(String, String, Vec<Value>)> = Vec::new();
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
        match parse(&path, &text) {
            Ok(docs) => read.push((rel, text, docs)),
            Err(reason) if text.contains(repository) => {
                out.unreadable.push(Skipped {
                    file: rel,
                    reason: format!(
                        "mentions {repository} but is not YAML that can be read: {reason}"
                    ),
                });
            }
            Err(reason) => out.skipped.push(Skipped { file: rel, reason }),
        }
    }
    let names: std::collections::BTreeSet<&str> =
        read.iter().map(|(rel, _, _)| rel.as_str()).collect();
    let mut patches = std::collections::BTreeSet::new();
    for (rel, text, docs) in &read {
        for doc in docs.iter().filter(|d| is_kustomization(rel, d)) {
            kustomization(
                rel,
                doc,
                repository,
                &names,
                &mut patches,
                &mut |reason, what| {
                    out.unverified.push(Unverified {
                        found: Found {
                            file: rel.clone(),
                            line: line_of(text, what, 0),
                            object: super::mentions::label(doc),
                            volume: String::new(),
                            reference: what.to_string(),
                        },
                        reason,
                    })
                },
            );
        }
    }
    for (rel, text, docs) in &read {
        let mut here = Vec::new();
        let mut unverified = Vec::new();
        let mut walk = super::mentions::Walk {
            repository,
            file: rel,
            found: &mut here,
            unverified: &mut unverified,
        };
        for doc in docs {
            walk.document(doc, patches.contains(rel.as_str()));
        }
        // Lines: the n-th occurrence of a text is on the n-th line holding it.
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        for f in here
            .iter_mut()
            .chain(unverified.iter_mut().map(|u| &mut u.found))
        {
            let n = seen.entry(f.reference.clone()).or_default();
            f.line = line_of(text, &f.reference, *n);
            *n += 1;
        }
        out.found.extend(here);
        out.unverified.extend(unverified);
    }
    Ok(out)
}

/// The 1-based line of the `n`-th line holding `what` (its first line,
/// when it spans several).
fn line_of(text: &str, what: &str, n: usize) -> Option<usize> {
    let first = what
        .lines()
        .find(|l| !l.trim().is_empty())?
        .trim()
        .trim_end_matches(" ...");
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.contains(first))
        .nth(n)
        .or_else(|| text.lines().enumerate().find(|(_, l)| l.contains(first)))
        .map(|(i, _)| i + 1)
}

/// Whether `doc` of file `rel` is a kustomization (or a kustomize
/// Component): kustomize's file names, or its kinds.
fn is_kustomization(rel: &str, doc: &Value) -> bool {
    let named = Path::new(rel).file_name().is_some_and(|n| {
        n == "kustomization.yaml" || n == "kustomization.yml" || n == "Kustomization"
    });
    let api = doc
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    match doc.get("kind").and_then(Value::as_str) {
        Some("Kustomization" | "Component") => api.starts_with("kustomize.config.k8s.io/"),
        Some(_) => false,
        None => named && doc.is_mapping(),
    }
}

/// `base/../x` -> `x`; `None` when it climbs out of the scanned folder.
fn normalize(path: &Path) -> Option<String> {
    let mut parts: Vec<String> = Vec::new();
    for c in path.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                parts.pop()?;
            }
            std::path::Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
            _ => return None,
        }
    }
    Some(parts.join("/"))
}

/// A kustomization's references to other files: the patch files it names
/// (added to `patches`, relative to the scanned folder), and what the scan
/// cannot read (a remote resource, a file or folder outside the scanned
/// folder, a patch that is not there), each reported with the text that
/// names it.
fn kustomization(
    rel: &str,
    doc: &Value,
    repository: &str,
    names: &std::collections::BTreeSet<&str>,
    patches: &mut std::collections::BTreeSet<String>,
    report: &mut dyn FnMut(String, &str),
) {
    let here = Path::new(rel).parent().unwrap_or(Path::new(""));
    let strings = |key: &str| -> Vec<String> {
        doc.get(key)
            .and_then(Value::as_sequence)
            .map(|items| {
                items
                    .iter()
                    .filter_map(|i| match i {
                        Value::String(s) => Some(s.clone()),
                        other => other
                            .get("path")
                            .and_then(Value::as_str)
                            .map(str::to_string),
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    for key in ["resources", "bases", "components"] {
        for entry in strings(key) {
            let remote = entry.contains("://")
                || entry.starts_with("github.com/")
                || entry.starts_with("git@")
                || entry.contains("?ref=");
            if remote {
                report(
                    format!(
                        "{key} names {entry}, which kustomize fetches from elsewhere: what it holds is \
                         applied with this folder and may mount an image of {repository} the scan \
                         cannot read; vendor it into the scanned folder"
                    ),
                    &entry,
                );
            } else if normalize(&here.join(&entry)).is_none() {
                report(
                    format!(
                        "{key} names {entry}, outside the scanned folder: what it holds is applied with \
                         this kustomization and may mount an image of {repository} unverified; scan a \
                         folder that holds it (e.g. the repository's root)"
                    ),
                    &entry,
                );
            }
        }
    }
    let mut named = strings("patchesJson6902");
    named.extend(
        doc.get("patches")
            .and_then(Value::as_sequence)
            .into_iter()
            .flatten()
            .filter_map(|p| p.get("path").and_then(Value::as_str).map(str::to_string)),
    );
    named.extend(
        strings("patchesStrategicMerge")
            .into_iter()
            .filter(|p| !p.contains('\n')),
    );
    for entry in named {
        match normalize(&here.join(&entry)) {
            Some(p) if names.contains(p.as_str()) => {
                patches.insert(p);
            }
            _ => report(
                format!(
                    "the patch {entry} is not a manifest in the scanned folder: it may replace a reference \
                         to {repository} that the scan verified, and the scan cannot read it"
                ),
                &entry,
            ),
        }
    }
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
        || path.file_name().is_some_and(|n| n == "Kustomization")
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
struct Verdict {
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
    let mut cache: BTreeMap<String, Verdict> = BTreeMap::new();
    let mut rows = Vec::new();
    let mut errors = Vec::new();
    for found in findings.found {
        let Verdict {
            status,
            detail,
            file,
            code,
        } = cache
            .entry(found.reference.clone())
            .or_insert_with(|| match verify(&found.reference) {
                Ok(v) => Verdict {
                    status: "verified",
                    detail: format!("{} at {}", v.path, v.commit),
                    file: None,
                    code: None,
                },
                Err(Error::Mismatch { reason, file, .. }) => Verdict {
                    status: "mismatch",
                    detail: reason,
                    file,
                    code: None,
                },
                Err(e) => Verdict {
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
    for u in findings.unverified {
        errors.push(2);
        rows.push(Row {
            found: u.found,
            status: "error",
            detail: u.reason,
            file_differs: None,
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
    base: &super::verify::Verification,
    allow_empty: bool,
) -> Result<(Report, Vec<i32>)> {
    crate::registry::parse_repository(repository)?;
    super::verify::check_path(&base.path)?;
    let findings = find(dir, repository)?;
    if findings.found.is_empty()
        && findings.unreadable.is_empty()
        && findings.unverified.is_empty()
        && !allow_empty
    {
        return Err(Error::input_hinted(
            format!(
                "no image-volume reference to {repository} under {}: nothing was verified",
                dir.display()
            ),
            crate::text![
                "check ",
                Field::Repository,
                " and ",
                Field::Scan,
                " for a typo (HOST/NAME exactly as the manifests write it, before `:` or `@`); ",
                Field::AllowEmpty,
                " passes a folder that has none"
            ],
        ));
    }
    Ok(verify_all(repository, findings, &mut |reference| {
        super::verify::verify(&super::verify::Verification {
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
