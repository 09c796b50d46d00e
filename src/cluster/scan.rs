//! `settings-image verify --scan INPUT`: every image-volume reference to
//! one repository in what the cluster applies, each verified, and every
//! other way the cluster may come to mount an image of it, each an error.
//!
//! The scan verifies what Flux applies, not what it can parse, so it reads
//! only what is applied as written:
//! - a rendered stream: a file, or `-` for standard input (`kubectl
//!   kustomize DIR | settings-image verify --scan - ...`, `flux build
//!   kustomization`, `helm template`), every document of it;
//! - a folder of plain manifests, read as Flux's kustomize-controller
//!   reads a path that holds no kustomization: every file whose name ends
//!   in `.yaml` or `.yml` (exactly: kustomize-controller's generator takes
//!   those and no other, `.YAML` and `.json` included), in every folder
//!   below, `.git` aside. Symlinks inside the folder are followed (Flux's
//!   walk does not enter a linked folder: reading it too only adds rows);
//!   one out of the folder is an error, as Flux's confined file system
//!   refuses it.
//!
//! What the scan cannot render is refused, an `error` row naming the
//! command that renders it: a folder holding a kustomization
//! (`kustomization.yaml`, `kustomization.yml` or `Kustomization`: Flux
//! builds it with kustomize, which loads files of any name and rewrites
//! references through patches, replacements and transformers), a Helm
//! chart (`Chart.yaml`), and the documents the cluster renders again
//! ([`super::mentions`]). Rendering is kustomize's, Flux's and Helm's own
//! job: emulating their transformers would verify an imitation.
//!
//! Documents are read one at a time ([`super::stream`]), each at most
//! [`MAX_DOCUMENT_BYTES`] and nested at most [`MAX_DEPTH`] levels; only
//! the findings are kept, so memory stays flat in the number and size of
//! manifests. A document the YAML reader refuses is an `error` row, never
//! skipped: a gate that cannot read a manifest cannot vouch for it.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use serde_yaml_ng::Value;

use super::mentions::Walk;
use super::spelling::Canonical;
use super::stream::Documents;
use crate::error::{Error, Result};
use crate::field::Field;

pub use super::finding::{Found, Unverified};

/// The deepest nesting the scan's YAML reader reads (serde_yaml_ng's
/// bound); a deeper document is an `error` row.
pub const MAX_DEPTH: usize = 128;

/// The `error` rows one file may add (a file of endless broken documents
/// must not fill memory); past them one row says how many more there were.
pub const MAX_ERRORS_PER_FILE: usize = 1000;

/// The names kustomize reads as a folder's kustomization
/// (`konfig.RecognizedKustomizationFileNames`).
pub const KUSTOMIZATION_FILES: [&str; 3] =
    ["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// Everything the scan found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Findings {
    /// The references, in file order.
    pub found: Vec<Found>,
    /// What cannot be verified or read: each becomes an `error` row.
    pub unverified: Vec<Unverified>,
}

/// What one scan looks for, and where it writes what it finds.
struct Scan<'a> {
    repository: &'a str,
    canonical: Canonical,
    spellings: Vec<String>,
    out: Findings,
}

impl Scan<'_> {
    /// An `error` row about a whole file or folder.
    fn refuse(&mut self, file: &str, line: Option<usize>, reason: String) {
        self.out.unverified.push(Unverified {
            found: Found {
                file: file.to_string(),
                line,
                object: String::new(),
                volume: String::new(),
                reference: String::new(),
                verify_as: String::new(),
            },
            reason,
        });
    }

    /// Reads one stream (a file, standard input), document by document.
    fn stream(&mut self, file: &str, reader: impl BufRead) {
        let errors_before = self.out.unverified.len();
        let mut dropped = 0usize;
        for piece in Documents::new(reader) {
            let mut found = Vec::new();
            let mut unverified = Vec::new();
            match piece {
                Ok(piece) => self.piece(file, &piece, &mut found, &mut unverified),
                Err(u) => unverified.push(Unverified {
                    found: Found {
                        file: file.to_string(),
                        line: Some(u.line),
                        object: String::new(),
                        volume: String::new(),
                        reference: String::new(),
                        verify_as: String::new(),
                    },
                    reason: u.reason,
                }),
            }
            self.out.found.extend(found);
            let room =
                MAX_ERRORS_PER_FILE.saturating_sub(self.out.unverified.len() - errors_before);
            dropped += unverified.len().saturating_sub(room);
            self.out
                .unverified
                .extend(unverified.into_iter().take(room));
        }
        if dropped > 0 {
            self.refuse(
                file,
                None,
                format!(
                    "{dropped} more error rows in this file are not shown (the scan shows at most \
                     {MAX_ERRORS_PER_FILE} a file)"
                ),
            );
        }
    }

    /// One piece of a stream: its documents parsed, walked, and their rows
    /// given lines.
    fn piece(
        &self,
        file: &str,
        piece: &super::stream::Piece,
        found: &mut Vec<Found>,
        unverified: &mut Vec<Unverified>,
    ) {
        let mut walk = Walk {
            repository: self.repository,
            canonical: &self.canonical,
            spellings: &self.spellings,
            file,
            found,
            unverified,
        };
        for de in serde_yaml_ng::Deserializer::from_str(&piece.text) {
            let doc = <Value as serde::Deserialize>::deserialize(de).and_then(|mut v| {
                v.apply_merge()?;
                Ok(v)
            });
            match doc {
                Ok(Value::Null) => {}
                Ok(doc) => walk.document(&doc),
                Err(e) => {
                    let line = e.location().map(|l| l.line()).unwrap_or(1);
                    walk.unverified.push(Unverified {
                        found: Found {
                            file: file.to_string(),
                            line: Some(piece.line + line - 1),
                            object: String::new(),
                            volume: String::new(),
                            reference: String::new(),
                            verify_as: String::new(),
                        },
                        reason: unreadable(&e),
                    });
                    break;
                }
            }
        }
        // Lines: the n-th occurrence of a text is on the n-th line holding it.
        let mut seen: std::collections::BTreeMap<String, usize> = Default::default();
        for f in found
            .iter_mut()
            .chain(unverified.iter_mut().map(|u| &mut u.found))
            .filter(|f| f.line.is_none())
        {
            let text = if f.reference.is_empty() {
                f.object.rsplit('/').next().unwrap_or_default().to_string()
            } else {
                f.reference.clone()
            };
            let n = seen.entry(text.clone()).or_default();
            f.line = line_of(&piece.text, &text, *n).map(|l| piece.line + l - 1);
            *n += 1;
        }
    }

    /// Reads a folder as Flux reads a path without a kustomization.
    fn folder(&mut self, dir: &Path) -> Result<()> {
        let root = std::fs::canonicalize(dir)
            .map_err(|e| Error::io(format!("reading {}", dir.display()), e))?;
        let mut todo = vec![Folder {
            path: dir.to_path_buf(),
            rel: String::new(),
            ancestors: vec![root.clone()],
        }];
        while let Some(here) = todo.pop() {
            let mut entries: Vec<std::fs::DirEntry> = std::fs::read_dir(&here.path)
                .and_then(|rd| rd.collect())
                .map_err(|e| Error::io(format!("reading {}", here.path.display()), e))?;
            entries.sort_by_key(|e| e.file_name());
            if self.refused(dir, &here, &entries) {
                continue;
            }
            let mut below = Vec::new();
            for entry in entries {
                if let Some(folder) = self.entry(&root, &here, &entry)? {
                    below.push(folder);
                }
            }
            // Read in name order: the last pushed is read first.
            todo.extend(below.into_iter().rev());
        }
        Ok(())
    }

    /// Whether the folder is one the scan cannot render (a kustomization,
    /// a Helm chart): then it is an `error` row, and nothing in it is read.
    fn refused(&mut self, dir: &Path, here: &Folder, entries: &[std::fs::DirEntry]) -> bool {
        let named = |wanted: &[&str]| {
            entries
                .iter()
                .find(|e| wanted.iter().any(|w| e.file_name() == *w) && e.path().is_file())
                .map(|e| here.join(&e.file_name().to_string_lossy()))
        };
        let shown = if here.rel.is_empty() {
            dir.to_path_buf()
        } else {
            dir.join(&here.rel)
        };
        let shown = shown.display();
        if let Some(file) = named(&KUSTOMIZATION_FILES) {
            self.refuse(
                &file,
                Some(1),
                format!(
                    "a kustomization: Flux builds {shown} with kustomize, which loads files the scan \
                     does not read (resources of any name) and rewrites references (patches, \
                     replacements, transformers), and the scan does not render kustomize; render it \
                     (`kubectl kustomize {shown} > rendered.yaml`, or `flux build kustomization NAME \
                     --path {shown}`) and scan the rendered file"
                ),
            );
            return true;
        }
        if let Some(file) = named(&["Chart.yaml"]) {
            self.refuse(
                &file,
                Some(1),
                format!(
                    "a Helm chart: Helm renders its templates (helm-controller, in the cluster) and \
                     the scan does not render Helm charts; render it (`helm template NAME {shown} \
                     --values VALUES > rendered.yaml`) and scan the rendered file"
                ),
            );
            return true;
        }
        false
    }

    /// One entry of a folder: a manifest is read, a folder returned to be
    /// read, a symlink out of `root` (or broken) is an `error` row.
    fn entry(
        &mut self,
        root: &Path,
        here: &Folder,
        entry: &std::fs::DirEntry,
    ) -> Result<Option<Folder>> {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == ".git" {
            return Ok(None);
        }
        let path = entry.path();
        let rel = here.join(&name);
        let ft = entry
            .file_type()
            .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
        let manifest = is_manifest(&name);
        let target = if ft.is_symlink() {
            match std::fs::canonicalize(&path) {
                Err(e) => {
                    if manifest {
                        self.refuse(&rel, None, format!("is a broken symlink: {e}"));
                    }
                    return Ok(None);
                }
                Ok(t) if !t.starts_with(root) => {
                    if manifest || t.is_dir() {
                        self.refuse(
                            &rel,
                            None,
                            format!(
                                "is a symlink to {}, outside the scanned folder: not followed (Flux \
                                 refuses it too)",
                                t.display()
                            ),
                        );
                    }
                    return Ok(None);
                }
                Ok(t) => t,
            }
        } else {
            path.clone()
        };
        if target.is_dir() {
            let real = std::fs::canonicalize(&target)
                .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
            if here.ancestors.contains(&real) {
                return Ok(None);
            }
            let mut ancestors = here.ancestors.clone();
            ancestors.push(real);
            return Ok(Some(Folder {
                path,
                rel,
                ancestors,
            }));
        }
        if manifest && target.is_file() {
            match std::fs::File::open(&path) {
                Ok(f) => self.stream(&rel, std::io::BufReader::new(f)),
                Err(e) => self.refuse(&rel, None, format!("cannot be read: {e}")),
            }
        }
        Ok(None)
    }
}

/// A folder to read.
struct Folder {
    path: PathBuf,
    /// Its name relative to the scanned folder (empty for that one).
    rel: String,
    /// The canonical folders above it and itself, against symlink loops.
    ancestors: Vec<PathBuf>,
}

impl Folder {
    /// The relative name of an entry of it.
    fn join(&self, name: &str) -> String {
        if self.rel.is_empty() {
            name.to_string()
        } else {
            format!("{}/{name}", self.rel)
        }
    }
}

/// Why a document cannot be read, naming the bound it passed.
fn unreadable(e: &serde_yaml_ng::Error) -> String {
    let text = e.to_string();
    if text.contains("recursion limit exceeded") {
        format!(
            "holds a YAML document nested deeper than {MAX_DEPTH} levels, the most the scan reads: \
             kubectl, kustomize and Flux read deeper, so the cluster could apply what the scan \
             cannot see"
        )
    } else if text.contains("repetition limit exceeded") {
        "holds a YAML document whose aliases expand past what the scan reads (a YAML bomb)"
            .to_string()
    } else {
        format!(
            "holds a YAML document the scan cannot read ({text}): the cluster's tools may still \
             read it, so the scan cannot vouch for it"
        )
    }
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

/// Whether Flux reads a file of this name in a path without a
/// kustomization: its extension is exactly `.yaml` or `.yml`.
fn is_manifest(name: &str) -> bool {
    Path::new(name)
        .extension()
        .is_some_and(|e| e == "yaml" || e == "yml")
}

/// Finds every image-volume reference to `repository` in `input`: a
/// folder of plain manifests, a rendered file, or `-` (standard input).
pub fn find(input: &Path, repository: &str) -> Result<Findings> {
    let canonical = Canonical::of(repository)
        .ok_or_else(|| Error::input(format!("invalid repository {repository:?}"), None))?;
    let mut scan = Scan {
        repository,
        spellings: canonical.spellings(),
        canonical,
        out: Findings::default(),
    };
    if input == Path::new("-") {
        scan.stream("-", std::io::stdin().lock());
        return Ok(scan.out);
    }
    let missing = |message: &str| Error::Source {
        path: input.to_path_buf(),
        message: message.to_string().into(),
        hint: Some(crate::text![
            "give ",
            Field::Scan,
            " the cluster repository's folder of plain manifests, or a file kustomize, Flux or \
             Helm rendered"
        ]),
    };
    match std::fs::metadata(input) {
        Err(_) => return Err(missing("does not exist")),
        Ok(m) if m.is_dir() => scan.folder(input)?,
        Ok(m) if m.is_file() => {
            let file = std::fs::File::open(input)
                .map_err(|e| Error::io(format!("reading {}", input.display()), e))?;
            let name = input.file_name().map_or_else(
                || input.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            );
            scan.stream(&name, std::io::BufReader::new(file));
        }
        Ok(_) => return Err(missing("is not a folder or a regular file")),
    }
    Ok(scan.out)
}
