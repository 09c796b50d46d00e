//! The scan's verdicts: each image-volume reference [`super::scan`] found
//! verified against its commit (each distinct one once), each thing it
//! could not verify an `error` row, and the exit code and table of them.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use super::finding::Found;
use super::scan::{Findings, find};
use crate::error::{Error, Result};
use crate::field::{Field, Text};
use crate::text;

/// One verified row of the scan.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Where it was found.
    #[serde(flatten)]
    pub found: Found,
    /// `verified`, `mismatch` or `error`.
    pub status: &'static str,
    /// The commit it holds (verified) or why not, with the fields it
    /// names as values (serialized in the CLI's words).
    pub detail: Text,
    /// The first differing file, for a mismatch in the layer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file_differs: Option<String>,
}

/// The scan's result.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The repository scanned for.
    pub repository: String,
    /// Every reference, verified, and every error.
    pub rows: Vec<Row>,
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
                r.detail.to_string(),
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
    detail: Text,
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
            .entry(found.verify_as.clone())
            .or_insert_with(|| match verify(&found.verify_as) {
                Ok(v) => Verdict {
                    status: "verified",
                    detail: text![format!("{} at {}", v.path, v.commit)],
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
                    detail: match e.hint_text() {
                        Some(h) => e.text().then(" (hint: ").then(h).then(")"),
                        None => e.text(),
                    },
                    file: None,
                    code: Some(e.exit_code()),
                },
            })
            .clone();
        if let Some(c) = code {
            errors.push(c);
        }
        // Another spelling of the repository is verified in the one named.
        let detail = if found.verify_as == found.reference {
            detail
        } else {
            detail.then(format!(" (verified as {})", found.verify_as))
        };
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
            detail: Text::from(u.reason),
            file_differs: None,
        });
    }
    (
        Report {
            repository: repository.to_string(),
            rows,
        },
        errors,
    )
}

/// Finds and verifies every reference to `repository` in `dir` (a
/// folder, a rendered file or `-`: [`find`]), each
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
    if findings.found.is_empty() && findings.unverified.is_empty() && !allow_empty {
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
                " for a typo (HOST/NAME, in any spelling the manifests use); ",
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
