//! The job summary: what was published (one image, or a row per folder),
//! where it came from, and the Flux objects that follow it, ready to
//! paste; or the plan.

use std::fmt::Write as _;

use crate::many::Matrix;
use crate::show::ImageLine;

/// The facts the summary shows.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// `HOST/NAME` the image was pushed to.
    pub repository: String,
    /// `HOST/NAME:TAG@sha256:...`.
    pub reference: String,
    /// The manifest digest.
    pub digest: String,
    /// The timestamp tag, when one was made.
    pub timestamp_tag: Option<String>,
    /// The timestamp tag's prefix, when one was made.
    pub prefix: Option<String>,
    /// All tags written.
    pub tags: Vec<String>,
    /// The commit the content comes from.
    pub commit: Option<String>,
    /// `$GITHUB_SERVER_URL/$GITHUB_REPOSITORY`, when known.
    pub repository_url: Option<String>,
    /// Number of files in the image.
    pub files: usize,
    /// Total bytes of the files.
    pub size: u64,
    /// Whether anything was new in the registry.
    pub pushed: bool,
    /// Blobs uploaded.
    pub uploaded_blobs: usize,
    /// Notes (anomalies, warnings) to show.
    pub notes: Vec<String>,
    /// What changed since the image before it under the same prefix.
    pub changes: Option<crate::diff::review::Review>,
}

/// The Flux objects for this repository and prefix, from the same
/// generator as `settings-image flux`, and the marked reference line.
pub fn flux_yaml(repository: &str, prefix: &str, reference: &str) -> String {
    let opts = crate::cluster::flux::Options::new(repository, prefix);
    match crate::cluster::flux::generate(&opts) {
        Ok(docs) => {
            let name = &opts.images[0].name;
            format!(
                "{}---\n# In the workload, on the image volume:\n#   volumes:\n#     - name: settings\n#       image:\n#         reference: {reference} {}\n",
                crate::cluster::flux::to_stream(&docs),
                crate::cluster::flux::marker(&opts.namespace, name),
            )
        }
        Err(e) => format!("# settings-image flux could not generate the objects: {e}\n"),
    }
}

/// Renders the Markdown summary.
pub fn render(f: &Facts) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "### settings-image: `{}`\n", f.repository);
    let _ = writeln!(s, "| | |\n|---|---|");
    let _ = writeln!(s, "| reference | `{}` |", f.reference);
    if let Some(t) = &f.timestamp_tag {
        let _ = writeln!(s, "| tag | `{t}` |");
    }
    let _ = writeln!(s, "| digest | `{}` |", f.digest);
    if let Some(c) = &f.commit {
        match &f.repository_url {
            Some(url) => {
                let _ = writeln!(
                    s,
                    "| commit | [`{}`]({url}/commit/{c}) |",
                    &c[..c.len().min(12)]
                );
            }
            None => {
                let _ = writeln!(s, "| commit | `{c}` |");
            }
        }
    }
    let _ = writeln!(s, "| files | {} ({} bytes) |", f.files, f.size);
    let _ = writeln!(
        s,
        "| pushed | {} |",
        if f.pushed {
            format!("yes ({} new blobs)", f.uploaded_blobs)
        } else {
            "no: the registry already had this exact image".to_string()
        }
    );
    if f.tags.len() > 1 {
        let tags: Vec<String> = f.tags.iter().map(|t| format!("`{t}`")).collect();
        let _ = writeln!(s, "| tags | {} |", tags.join(", "));
    }
    for n in &f.notes {
        let _ = writeln!(s, "\n> [!WARNING]\n> {}", n.replace('\n', "\n> "));
    }
    if let Some(changes) = &f.changes {
        let _ = write!(
            s,
            "\n#### What changed since the image before it\n\n{}",
            crate::show::diff::review_markdown(changes)
        );
    }
    if let Some(prefix) = &f.prefix {
        let _ = writeln!(
            s,
            "\n<details><summary>Flux objects for this image</summary>\n\n```yaml\n{}```\n</details>",
            flux_yaml(&f.repository, prefix, &f.reference)
        );
    }
    s
}

/// The Markdown summary of a push that failed after it published: what
/// is in the registry, then the error.
pub fn render_failed_after_publish(
    repository: &str,
    published: &crate::error::PublishedSoFar,
    error: &str,
) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "### settings-image: `{repository}`: published, then failed\n"
    );
    let _ = writeln!(s, "| | |\n|---|---|");
    let _ = writeln!(s, "| reference | `{}` |", published.reference);
    let _ = writeln!(s, "| digest | `{}` |", published.digest);
    let mut tags: Vec<String> = published.tags.iter().map(|t| format!("`{t}`")).collect();
    if let Some(b) = &published.branch_tag {
        tags.push(format!("`{b}` (branch tag)"));
    }
    let _ = writeln!(s, "| tags | {} |", tags.join(", "));
    if let Some(p) = &published.provenance {
        let _ = writeln!(s, "| provenance | `{p}` |");
    }
    let _ = writeln!(
        s,
        "| pushed | {} |",
        if published.pushed {
            "yes, by this run"
        } else {
            "no: the registry already had it"
        }
    );
    for w in &published.warnings {
        let w = crate::show::notice(w).render(&crate::action::fields::Inputs::Publish);
        let _ = writeln!(s, "\n> [!WARNING]\n> {}", w.replace('\n', "\n> "));
    }
    let _ = writeln!(
        s,
        "\n> [!CAUTION]\n> The image and its tags above are in the registry; then the run failed: {}",
        error.replace('\n', "\n> ")
    );
    s
}

/// `|` and newlines would break a table row.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// Several folders: one table row per folder, then the Flux objects for
/// every image.
pub fn render_folders(images: &[ImageLine], prefix: Option<&str>) -> String {
    let mut s = String::new();
    let failed = images.iter().filter(|i| i.error.is_some()).count();
    let _ = writeln!(
        s,
        "### settings-image: {} folders{}\n",
        images.len(),
        if failed > 0 {
            format!(", {failed} failed")
        } else {
            String::new()
        }
    );
    let _ = writeln!(s, "| folder | image | pushed | note |\n|---|---|---|---|");
    for i in images {
        let (image, pushed) = match (&i.error, &i.reference) {
            (Some(_), _) => (format!("`{}`", i.repository), "failed".to_string()),
            (None, Some(r)) => (
                format!("`{r}`"),
                if i.pushed == Some(true) {
                    "yes"
                } else {
                    "no: unchanged"
                }
                .to_string(),
            ),
            (None, None) => (format!("`{}`", i.repository), String::new()),
        };
        let note = match (&i.error, &i.anomaly) {
            (Some(e), _) => e.clone(),
            (None, Some(a)) => format!("{}: {}", a.kind.as_str(), a.message),
            _ => String::new(),
        };
        let _ = writeln!(
            s,
            "| `{}` | {} | {} | {} |",
            cell(&i.path),
            cell(&image),
            pushed,
            cell(&note)
        );
    }
    if let Some(prefix) = prefix {
        let yaml: Vec<String> = images
            .iter()
            .filter(|i| i.error.is_none())
            .map(|i| {
                flux_yaml(
                    &i.repository,
                    prefix,
                    i.reference.as_deref().unwrap_or_default(),
                )
            })
            .collect();
        if !yaml.is_empty() {
            let _ = writeln!(
                s,
                "\n<details><summary>Flux objects for these images</summary>\n\n```yaml\n{}```\n</details>",
                yaml.join("---\n")
            );
        }
    }
    s
}

/// One table row per folder of the plan: to build, or up to date.
pub fn render_plan(plan: &Matrix) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "### settings-image plan: {} of {} folders need an image\n",
        plan.include.len(),
        plan.include.len() + plan.up_to_date.len()
    );
    let _ = writeln!(s, "| folder | image | |\n|---|---|---|");
    for (e, what) in plan
        .include
        .iter()
        .map(|e| (e, "to build"))
        .chain(plan.up_to_date.iter().map(|e| (e, "up to date")))
    {
        let _ = writeln!(
            s,
            "| `{}` | `{}:{}` | {what} |",
            cell(&e.path),
            cell(&e.repository),
            e.tag
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::many::PlanEntry;

    #[test]
    fn flux_pattern_escapes_the_prefix_and_matches_our_tags() {
        let y = flux_yaml("ghcr.io/acme/settings-shop", "release-1.2", "r:t@sha256:x");
        assert!(
            y.contains(r"pattern: ^release-1\.2-(?P<ts>[0-9]+)-[0-9a-f]{7}$"),
            "{y}"
        );
        assert!(y.contains("name: settings-shop"));
        assert!(y.contains("digestReflectionPolicy: IfNotPresent"));
        assert!(y.contains(
            r#"reference: r:t@sha256:x # {"$imagepolicy": "flux-system:settings-shop"}"#
        ));
        assert!(y.contains("kind: ImageUpdateAutomation"), "{y}");
    }

    #[test]
    fn summary_links_the_commit_and_says_whether_anything_was_new() {
        let f = Facts {
            repository: "ghcr.io/acme/settings-shop".into(),
            reference: "ghcr.io/acme/settings-shop:main-1-abcdef0@sha256:00".into(),
            digest: "sha256:00".into(),
            timestamp_tag: Some("main-1-abcdef0".into()),
            prefix: Some("main".into()),
            tags: vec!["main-1-abcdef0".into()],
            commit: Some("abcdef0123456789".into()),
            repository_url: Some("https://github.com/acme/settings".into()),
            files: 3,
            size: 42,
            pushed: false,
            ..Facts::default()
        };
        let s = render(&f);
        assert!(
            s.contains("(https://github.com/acme/settings/commit/abcdef0123456789)"),
            "{s}"
        );
        assert!(s.contains("| pushed | no"), "{s}");
        assert!(s.contains("3 (42 bytes)"));
        assert!(s.contains("kind: ImagePolicy"));
    }

    #[test]
    fn the_summary_has_one_row_per_folder_and_flux_objects_for_each_image() {
        let ok = ImageLine {
            path: "configs/shop".into(),
            repository: "ghcr.io/acme/shop".into(),
            tag: Some("main-1-abcdef0".into()),
            digest: Some("sha256:00".into()),
            reference: Some("ghcr.io/acme/shop:main-1-abcdef0@sha256:00".into()),
            pushed: Some(false),
            anomaly: None,
            error: None,
        };
        let bad = ImageLine {
            path: "configs/b|x".into(),
            repository: "ghcr.io/acme/bx".into(),
            tag: None,
            digest: None,
            reference: None,
            pushed: None,
            anomaly: None,
            error: Some("is not in the HEAD commit\nat all".into()),
        };
        let s = render_folders(&[ok, bad], Some("main"));
        assert!(s.contains("2 folders, 1 failed"), "{s}");
        assert!(
            s.contains("| `configs/shop` | `ghcr.io/acme/shop:main-1-abcdef0@sha256:00` | no: unchanged |  |"),
            "{s}"
        );
        assert!(
            s.contains("| `configs/b\\|x` | `ghcr.io/acme/bx` | failed | is not in the HEAD commit at all |"),
            "{s}"
        );
        assert_eq!(
            s.matches("kind: ImagePolicy").count(),
            1,
            "only for images made"
        );
        let p = render_plan(&Matrix {
            include: vec![PlanEntry {
                path: "configs/a".into(),
                repository: "r/a".into(),
                tag: "main-2-abcdef0".into(),
            }],
            up_to_date: vec![],
        });
        assert!(p.contains("1 of 1 folders need an image"), "{p}");
        assert!(
            p.contains("| `configs/a` | `r/a:main-2-abcdef0` | to build |"),
            "{p}"
        );
    }
}
