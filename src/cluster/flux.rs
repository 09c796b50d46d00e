//! `settings-image flux`: the Flux image-automation objects for one or
//! several settings images, generated instead of copied by hand.
//!
//! For each image an `ImageRepository` (with a `secretRef` or a cloud
//! `provider` where the registry login needs one) and an `ImagePolicy` whose
//! `filterTags` pattern is exactly the grammar of [`crate::tag::timestamp_tag`]
//! for the prefix, with the numerical policy on the extracted committer time
//! and `digestReflectionPolicy: IfNotPresent` (a timestamp tag never moves, so
//! its digest is read once). One `ImageUpdateAutomation` for all of them,
//! selecting exactly these policies by label. And the setter marker for the
//! pod's `volumes[].image.reference` line.
//!
//! Why typed structs serialized with serde and not a text template: the
//! prefix, names and paths are user input, and YAML quoting is the
//! serializer's job, not ours. The objects are checked against Flux's own
//! CRD schemas in `tests/flux.rs`.

mod checks;
mod objects;
mod yaml;

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{Error, Result};
use crate::field::{Field, Mention};
use crate::registry;
use crate::text;

use checks::{check_branch, check_git_path, check_interval, check_name, check_text};
use yaml::to_yaml;

/// The label on every generated object; the automation's `policySelector`
/// selects the policies carrying it, so it never touches other policies.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "settings-image");

/// How Flux logs in to the registry to list tags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    /// A `secretRef` or nothing (public packages, ghcr.io).
    Generic,
    /// Amazon ECR (workload identity).
    Aws,
    /// Azure Container Registry (workload identity).
    Azure,
    /// Google Artifact Registry / GCR (workload identity).
    Gcp,
}

impl Provider {
    /// The provider a registry host needs for a login without a stored
    /// secret: ECR, ACR and Google's registries; generic for the rest.
    pub fn for_host(host: &str) -> Provider {
        let host = host.split(':').next().unwrap_or(host);
        if host.ends_with(".amazonaws.com") && host.contains(".dkr.ecr.") {
            Provider::Aws
        } else if host.ends_with(".azurecr.io") {
            Provider::Azure
        } else if host == "gcr.io" || host.ends_with(".gcr.io") || host.ends_with("-docker.pkg.dev")
        {
            Provider::Gcp
        } else {
            Provider::Generic
        }
    }
}

/// One image to follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// `HOST/NAME`.
    pub repository: String,
    /// The object name of its ImageRepository and ImagePolicy.
    pub name: String,
}

/// The ImageUpdateAutomation's options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Automation {
    /// Object name.
    pub name: String,
    /// The `GitRepository` Flux reads the cluster repository from.
    pub source: String,
    /// Its namespace, when it is not the objects' own (Flux's bootstrap
    /// keeps `flux-system` in `flux-system`); written as the
    /// `sourceRef.namespace` only when it differs.
    pub source_namespace: Option<String>,
    /// The branch it checks out and commits to.
    pub branch: String,
    /// Push to this branch instead (a pull-request flow), when given.
    pub push_branch: Option<String>,
    /// The folder the setters are rewritten in (`./clusters/prod`).
    pub path: String,
    /// Commit author name.
    pub author_name: String,
    /// Commit author email.
    pub author_email: String,
}

impl Default for Automation {
    fn default() -> Self {
        Automation {
            name: "settings".into(),
            source: "flux-system".into(),
            source_namespace: None,
            branch: "main".into(),
            push_branch: None,
            path: "./".into(),
            author_name: "fluxcdbot".into(),
            author_email: "fluxcdbot@users.noreply.github.com".into(),
        }
    }
}

/// Everything the generator needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The images to follow.
    pub images: Vec<Image>,
    /// The timestamp tag prefix (sanitized as tags are: `feature/x` -> `feature-x`).
    pub prefix: String,
    /// Namespace of every object.
    pub namespace: String,
    /// How often Flux lists tags (`ImageRepository.spec.interval`).
    pub interval: String,
    /// A `kubernetes.io/dockerconfigjson` secret for the registry.
    pub secret: Option<String>,
    /// A secret whose `ca.crt` is the CA that signed the registry's TLS
    /// certificate (`ImageRepository.spec.certSecretRef`).
    pub cert_secret: Option<String>,
    /// The login provider; `None` infers it from the registry host.
    pub provider: Option<Provider>,
    /// The automation; `None` leaves it out (the job summary of one push).
    pub automation: Option<Automation>,
}

impl Options {
    /// Defaults for one repository and prefix: namespace `flux-system`,
    /// interval `5m`, inferred provider, the default automation.
    pub fn new(repository: &str, prefix: &str) -> Options {
        Options {
            images: vec![Image {
                repository: repository.to_string(),
                name: object_name(repository),
            }],
            prefix: prefix.to_string(),
            namespace: "flux-system".into(),
            interval: "5m".into(),
            secret: None,
            cert_secret: None,
            provider: None,
            automation: Some(Automation::default()),
        }
    }
}

/// Lowercase `[a-z0-9]` runs joined by single `-`.
fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_end_matches('-').to_string()
}

/// The images for the folders `paths` (folders or globs, as `push` selects
/// them) mapped through `template` by [`crate::many::repository_for`], the
/// mapping `push`, `plan` and the action use, so Flux watches the
/// repositories the images go to; one image from the template itself when
/// no path is given. Also returns the lower-casing notices. Two folders
/// mapping to one repository is an error.
pub fn images(
    template: &str,
    paths: &[PathBuf],
) -> Result<(Vec<Image>, Vec<crate::many::LowerCased>)> {
    let has_placeholder = template.contains("{name}") || template.contains("{path}");
    if paths.len() > 1 && !has_placeholder {
        return Err(Error::input_hinted(
            format!("{} folders but one repository {template:?}", paths.len()),
            text![
                "put {name} or {path} in ",
                Field::Repository,
                ", e.g. ghcr.io/acme/settings-{name}"
            ],
        ));
    }
    if paths.is_empty() && has_placeholder {
        return Err(Error::input_hinted(
            text![
                Field::Repository,
                format!(" {template:?} is a template, but no "),
                Field::Path,
                " names a folder"
            ],
            text![
                "add ",
                Mention::Set(Field::Path, "DIR".into()),
                " for each settings folder"
            ],
        ));
    }
    let (repos, notices) = if paths.is_empty() {
        registry::parse_repository(template)?;
        (vec![template.to_string()], Vec::new())
    } else {
        let patterns: Vec<String> = paths
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        let folders = crate::many::select(&patterns, Field::Path)?;
        crate::many::repositories(template, &folders, Field::Repository)?
    };
    let images = repos
        .into_iter()
        .map(|repository| Image {
            name: object_name(&repository),
            repository,
        })
        .collect();
    Ok((images, notices))
}

/// A Kubernetes object name (RFC 1123 label) from the repository's last
/// path segment.
pub fn object_name(repository: &str) -> String {
    let last = repository.rsplit('/').next().unwrap_or(repository);
    let name: String = slug(last).chars().take(63).collect();
    let name = name.trim_end_matches('-');
    if name.is_empty() {
        "settings".into()
    } else {
        name.to_string()
    }
}

/// Escapes a regular expression's special characters (the prefix may hold `.`).
fn regex_escape(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The `filterTags.pattern` for a prefix: exactly the tags
/// [`crate::tag::timestamp_tag`] makes for it, with the time in `ts`.
pub fn filter_pattern(prefix: &str) -> Result<String> {
    let prefix = crate::tag::sanitize_prefix(prefix)?;
    // `timestamp_tag` cuts a prefix that would not fit with a 10-digit
    // time; the cut depends on the time's length, so no fixed pattern
    // follows such a prefix.
    let room = crate::tag::MAX_TAG_LEN - "-1700000000-abcdef0".len();
    if prefix.len() > room {
        return Err(Error::input(
            format!("the prefix {prefix:?} is longer than {room} characters"),
            Some("timestamp tags cut such a prefix; use a shorter one".into()),
        ));
    }
    Ok(format!(
        "^{}-(?P<ts>[0-9]+)-[0-9a-f]{{7}}$",
        regex_escape(&prefix)
    ))
}

/// The setter marker for the pod's `volumes[].image.reference` line.
pub fn marker(namespace: &str, name: &str) -> String {
    format!("# {{\"$imagepolicy\": \"{namespace}:{name}\"}}")
}

/// One generated file: the objects of one image, or the automation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    /// The file name when written into a folder (`<name>.yaml`).
    pub file: String,
    /// Its YAML (one or more documents, with comments).
    pub yaml: String,
}

/// Generates the objects: one document per image, then the automation.
pub fn generate(opts: &Options) -> Result<Vec<Document>> {
    if opts.images.is_empty() {
        return Err(Error::input("no image to follow", None));
    }
    check_name("namespace", &opts.namespace)?;
    check_text(Field::Prefix, &opts.prefix)?;
    if let Some(secret) = &opts.secret {
        check_name(Field::SecretRef, secret)?;
    }
    if let Some(secret) = &opts.cert_secret {
        check_name(Field::CertSecretRef, secret)?;
    }
    let pattern = filter_pattern(&opts.prefix)?;
    let interval = check_interval(&opts.interval)?;
    let mut docs = Vec::new();
    for image in &opts.images {
        check_name("name", &image.name)?;
        let repo = registry::parse_repository(&image.repository)?;
        let provider = match (opts.provider, &opts.secret) {
            (Some(Provider::Generic), _) | (None, Some(_)) => None,
            (Some(p), _) => Some(p),
            (None, None) => {
                Some(Provider::for_host(&repo.host)).filter(|p| *p != Provider::Generic)
            }
        };
        let repository = objects::image_repository(image, opts, &interval, provider);
        let policy = objects::image_policy(image, &opts.namespace, &pattern);
        let yaml = format!(
            "# settings image {repo}: newest {prefix}-<committer time>-<sha7> tag.\n\
             # On the pod's image volume, end the reference line with the marker:\n\
             #   reference: {repo}:TAG@sha256:DIGEST {marker}\n\
             {}---\n{}",
            to_yaml(&repository)?,
            to_yaml(&policy)?,
            repo = image.repository,
            prefix = crate::tag::sanitize_prefix(&opts.prefix)?,
            marker = marker(&opts.namespace, &image.name),
        );
        docs.push(Document {
            file: format!("{}.yaml", image.name),
            yaml,
        });
    }
    if let Some(a) = &opts.automation {
        check_name("automation name", &a.name)?;
        check_name("git source", &a.source)?;
        if let Some(ns) = &a.source_namespace {
            check_name("git source namespace", ns)?;
        }
        check_branch(Field::GitBranch, &a.branch)?;
        if let Some(b) = &a.push_branch {
            check_branch(Field::GitPushBranch, b)?;
        }
        check_git_path(&a.path)?;
        check_text("the commit author's name", &a.author_name)?;
        check_text("the commit author's email", &a.author_email)?;
        let object = objects::image_update_automation(a, &opts.namespace, &interval);
        let file = if docs.iter().any(|d| d.file == format!("{}.yaml", a.name)) {
            format!("{}-automation.yaml", a.name)
        } else {
            format!("{}.yaml", a.name)
        };
        // The path was checked to hold no line break: the comment stays one line.
        docs.push(Document {
            file,
            yaml: format!(
                "# Rewrites the marked reference lines under {} in the cluster repository.\n{}",
                a.path,
                to_yaml(&object)?
            ),
        });
    }
    Ok(docs)
}

/// All documents as one YAML stream (for stdout).
pub fn to_stream(docs: &[Document]) -> String {
    docs.iter()
        .map(|d| d.yaml.as_str())
        .collect::<Vec<_>>()
        .join("---\n")
}

/// Writes each document into `dir` (created when missing); returns the
/// paths. Never through a symlink: a `dir` that is one, or a file name in
/// it that is one, is refused before anything is written, and each file
/// is opened with `O_NOFOLLOW` (a symlink made in between fails the write).
pub fn write(dir: &Path, docs: &[Document]) -> Result<Vec<PathBuf>> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let symlink = |p: &Path| {
        Error::input_hinted(
            text![
                Field::Output,
                format!(
                    ": {} is a symlink; the objects are not written through it",
                    p.display()
                )
            ],
            text![
                "give ",
                Field::Output,
                " a folder of its own (not a symlink, holding no symlinks of these names)"
            ],
        )
    };
    let is_link = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink());
    if is_link(dir) {
        return Err(symlink(dir));
    }
    if let Some(d) = docs.iter().find(|d| is_link(&dir.join(&d.file))) {
        return Err(symlink(&dir.join(&d.file)));
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    let mut out = Vec::new();
    for d in docs {
        let path = dir.join(&d.file);
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path);
        let mut file = match file {
            Ok(f) => f,
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err(symlink(&path)),
            Err(e) => return Err(Error::io(format!("writing {}", path.display()), e)),
        };
        file.write_all(d.yaml.as_bytes())
            .map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
        out.push(path);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::yaml::{quote_yaml11, yaml11_is_not_a_string};
    use super::*;

    #[test]
    fn templates_map_folders_to_repositories() {
        let t = "ghcr.io/acme/settings-{name}";
        let (imgs, notices) = images(t, &["configs/shop".into(), "configs/cart".into()]).unwrap();
        assert_eq!(imgs[1].repository, "ghcr.io/acme/settings-cart");
        assert_eq!(imgs[1].name, "settings-cart");
        assert!(notices.is_empty());
        // The repository push writes to: underscores kept.
        let (imgs, _) = images("ghcr.io/acme/{path}", &["./configs/shop_eu/".into()]).unwrap();
        assert_eq!(imgs[0].repository, "ghcr.io/acme/configs-shop_eu");
        let (imgs, notices) = images(t, &["configs/Shop".into()]).unwrap();
        assert_eq!(imgs[0].repository, "ghcr.io/acme/settings-shop");
        assert_eq!(notices.len(), 1);
        assert!(images(t, &["a/shop".into(), "b/shop".into()]).is_err());
        assert!(images("ghcr.io/acme/x", &["a".into(), "b".into()]).is_err());
        assert!(images(t, &[]).is_err());
    }

    #[test]
    fn options_that_would_break_the_yaml_are_input_errors() {
        let base = Options::new("ghcr.io/acme/settings", "main");
        let with = |f: &dyn Fn(&mut Options)| {
            let mut o = base.clone();
            f(&mut o);
            generate(&o)
        };
        let auto = |f: &dyn Fn(&mut Automation)| {
            with(&|o: &mut Options| f(o.automation.as_mut().unwrap()))
        };
        // Each refusal names the flag and the value, and says why.
        for (bad, says) in [
            (
                auto(&|a| a.path = "./x\nkind: Secret".into()),
                r#"--git-path "./x\nkind: Secret" holds the character '\n'"#,
            ),
            (
                auto(&|a| a.path = "/etc".into()),
                r#"--git-path "/etc" is not a folder of the cluster repository: it is absolute"#,
            ),
            (
                auto(&|a| a.path = "../other".into()),
                "--git-path \"../other\" is not a folder of the cluster repository: it leaves the \
                 repository with '..'",
            ),
            (
                auto(&|a| a.path = "./x\u{2028}y".into()),
                r#"--git-path "./x\u{2028}y" holds the character '\u{2028}'"#,
            ),
            (
                auto(&|a| a.branch = "main\nx: y".into()),
                r#"--git-branch "main\nx: y" holds the character '\n'"#,
            ),
            (
                auto(&|a| a.branch = "a..b".into()),
                r#"--git-branch "a..b" is not a branch name: a branch name cannot hold '..', '//' or '@{', or be '@'"#,
            ),
            (
                auto(&|a| a.push_branch = Some("x y".into())),
                r#"--git-push-branch "x y" is not a branch name: a branch name cannot hold ' '"#,
            ),
            (
                with(&|o| o.secret = Some("a\nb".into())),
                r#"--secret-ref "a\nb" is not a Kubernetes object name"#,
            ),
            (
                with(&|o| o.prefix = "main\n#".into()),
                r#"--prefix "main\n#" holds the character '\n'"#,
            ),
        ] {
            let e = bad.unwrap_err();
            assert_eq!(e.to_string(), says);
            assert_eq!(e.exit_code(), 2, "{says}");
        }
        assert!(auto(&|a| a.path = "./clusters/#prod: x".into()).is_ok());
        assert!(auto(&|a| a.branch = "release/1.x".into()).is_ok());
    }

    #[test]
    fn yaml11_words_and_numbers_are_quoted() {
        let y = "metadata:\n  name: yes\n  namespace: on\n  other: main\n  x: 1_000\n  z: 0x1f\n  f: 1e3\nlist:\n- n\n- shop\n";
        assert_eq!(
            quote_yaml11(y),
            "metadata:\n  name: 'yes'\n  namespace: 'on'\n  other: main\n  x: '1_000'\n  z: '0x1f'\n  f: '1e3'\nlist:\n- 'n'\n- shop\n"
        );
        for s in [
            "main",
            "settings-shop",
            "a1",
            "1.2.3",
            "e3",
            "0x",
            "yes-no",
            "null1",
        ] {
            assert!(!yaml11_is_not_a_string(s), "{s}");
        }
    }

    #[test]
    fn providers_follow_the_registry_host() {
        assert_eq!(
            Provider::for_host("123456789012.dkr.ecr.eu-west-1.amazonaws.com"),
            Provider::Aws
        );
        assert_eq!(Provider::for_host("acme.azurecr.io"), Provider::Azure);
        assert_eq!(Provider::for_host("europe-docker.pkg.dev"), Provider::Gcp);
        assert_eq!(Provider::for_host("ghcr.io"), Provider::Generic);
        let mut o = Options::new("acme.azurecr.io/settings", "main");
        let y = to_stream(&generate(&o).unwrap());
        assert!(y.contains("provider: azure"), "{y}");
        o.secret = Some("acr-read".into());
        let y = to_stream(&generate(&o).unwrap());
        assert!(
            !y.contains("provider:") && y.contains("name: acr-read"),
            "{y}"
        );
    }

    #[test]
    fn bad_names_and_intervals_are_input_errors() {
        let mut o = Options::new("ghcr.io/acme/settings", "main");
        o.interval = "5 minutes".into();
        assert_eq!(generate(&o).unwrap_err().exit_code(), 2);
        o.interval = "1h30m".into();
        assert!(generate(&o).is_ok());
        // Zero (the CRDs' pattern takes it) and anything under a second
        // would have Flux list the tags back to back.
        for zero in ["0s", "0m", "0h0m0s", "999ms", "0.5s"] {
            o.interval = zero.into();
            let err = generate(&o).unwrap_err();
            assert_eq!(err.exit_code(), 2);
            assert_eq!(
                err.to_string(),
                format!(
                    "interval {zero:?} is shorter than 1s: Flux would list the registry's tags and run the automation back to back"
                )
            );
        }
        for fine in ["1s", "1000ms", "0.5m", "1h0m0s"] {
            o.interval = fine.into();
            assert!(generate(&o).is_ok(), "{fine}");
        }
        o.namespace = "Flux_System".into();
        assert_eq!(generate(&o).unwrap_err().exit_code(), 2);
        let o = Options::new("ghcr.io/acme/settings", "/");
        assert!(generate(&o).is_err());
        // The longest prefix whose tags keep it whole, and one more.
        let id = "0123456789abcdef0123456789abcdef01234567";
        let p = "p".repeat(109);
        let t = crate::tag::timestamp_tag(&p, 1_700_000_000, id).unwrap();
        assert!(t.starts_with(&format!("{p}-")));
        assert!(filter_pattern(&p).is_ok());
        assert!(filter_pattern(&"p".repeat(110)).is_err());
    }
}
