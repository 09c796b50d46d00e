//! Many settings folders in one run: selecting them (folders and globs),
//! naming each one's repository or layout from a template (`{name}`,
//! `{path}`), and the `plan` that lists which folders have no image for
//! their last commit yet (a GitHub `strategy.matrix`).
//!
//! Every face (the CLI, the action, the controller) uses it the same way,
//! for one folder as for several: a [`Selection`] ([`Selection::of`] on
//! disk, [`Selection::in_mirror`] in a mirror's commit), its targets
//! ([`Selection::layouts`], [`Selection::repositories`]; all input errors,
//! before anything is pushed), then the one pipeline
//! ([`crate::pipeline::run`] of a [`crate::pipeline::Spec::new`]) or
//! [`plan`]. Re-run safety holds per folder because each folder's push is
//! the single-folder push: an unchanged folder rebuilds byte-identically
//! and pushes nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

use serde::Serialize;

use crate::error::{Error, Result};
use crate::field::{Field, Mention, Text};
use crate::history::mirror::Mirror;
use crate::history::{self, github};
use crate::registry;
use crate::request::Target;
use crate::text;

/// One selected settings folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Folder {
    /// The folder as selected, relative to the current directory when the
    /// selection was (e.g. `configs/shop`).
    pub path: PathBuf,
    /// `{name}`: the folder's last component.
    pub name: String,
    /// `{path}`: the path as a lowercase slug (`configs/shop` ->
    /// `configs-shop`).
    pub slug: String,
}

/// The folders a face selected, and whether the selection means several
/// (a list or a glob, even of one folder: the several-folder outputs, each
/// folder's repository from a template, errors naming each folder).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// The folders, in the order selected.
    pub folders: Vec<Folder>,
    /// A selection of several folders (see [`is_many`]; a mirror's always).
    pub several: bool,
}

/// A repository name the folder's name had to be lower-cased for: said by
/// each face (the CLI's `notice:`, the action's annotation, the
/// controller's Event).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LowerCased {
    /// The folder, as selected.
    pub folder: PathBuf,
    /// The repository its image goes to.
    pub repository: String,
}

impl LowerCased {
    /// What happened, in words every face says alike.
    pub fn text(&self) -> Text {
        text![format!(
            "the folder {} has capitals in its name; registries take lower-case names only, so its image \
             goes to {}",
            self.folder.display(),
            self.repository
        )]
    }
}

impl Selection {
    /// The folders `patterns` name on disk (see [`select`]); `field` names
    /// the input in errors.
    pub fn of<S: AsRef<str>>(patterns: &[S], field: Field) -> Result<Selection> {
        Ok(Selection {
            folders: select(patterns, field)?,
            several: is_many(patterns),
        })
    }

    /// The folders `patterns` name in `commit` of `mirror` (see
    /// [`select_in`]): always a selection of several, whose errors name
    /// each folder.
    pub fn in_mirror<S: AsRef<str>>(
        mirror: &Mirror,
        commit: &str,
        patterns: &[S],
        field: Field,
    ) -> Result<Selection> {
        Ok(Selection {
            folders: select_in(mirror, commit, patterns, field)?,
            several: true,
        })
    }

    /// Each folder's layout directory: for several, `template` filled
    /// ([`targets`]); for one, `template` as it is.
    pub fn layouts(&self, template: &Path, field: Field) -> Result<Vec<Target>> {
        if !self.several {
            return Ok(vec![Target::Layout(template.to_path_buf())]);
        }
        Ok(targets(&template.to_string_lossy(), &self.folders, field)?
            .into_iter()
            .map(|o| Target::Layout(PathBuf::from(o)))
            .collect())
    }

    /// Each folder's repository, with the lower-casing notices: for
    /// several, `template` filled ([`repositories`]); for one, `template`
    /// as it is (the request checks it, by name). [`registry_targets`]
    /// makes them targets.
    pub fn repositories(
        &self,
        template: &str,
        field: Field,
    ) -> Result<(Vec<String>, Vec<LowerCased>)> {
        if !self.several {
            return Ok((vec![template.to_string()], Vec::new()));
        }
        repositories(template, &self.folders, field)
    }

    /// The folders' paths.
    pub fn paths(&self) -> Vec<PathBuf> {
        self.folders.iter().map(|f| f.path.clone()).collect()
    }
}

/// Whether a selection means several folders (and so the several-folder
/// outputs): more than one entry, or any glob (a glob matching one folder
/// today may match more tomorrow; the output shape does not depend on it).
pub fn is_many<S: AsRef<str>>(patterns: &[S]) -> bool {
    patterns.len() > 1 || patterns.iter().any(|p| has_glob(p.as_ref()))
}

fn has_glob(p: &str) -> bool {
    p.contains(['*', '?'])
}

/// Expands folders and globs (`*` and `?` within one path component;
/// names starting with `.` only match a pattern starting with `.`) into
/// folders, in the order given, each glob's matches sorted. `field` names
/// the input in errors. A glob matching no folder, a folder selected twice
/// and an empty entry are input errors.
pub fn select<S: AsRef<str>>(patterns: &[S], field: Field) -> Result<Vec<Folder>> {
    let cwd = std::env::current_dir().map_err(|e| Error::io("reading the current directory", e))?;
    select_with(
        patterns,
        field,
        |pattern| Ok(expand(pattern)),
        |path| lexical(&cwd.join(path)),
        "check the pattern against the checkout (`*` and `?` match within one path component, folders only)",
    )
}

/// [`select`] against the tree of `commit` in a mirror (see
/// [`crate::history::mirror`]) instead of the disk: folders and globs
/// relative to the repository root, as `--path` takes them in the root of
/// a clone with `commit` checked out. The root folder's `{name}` is the
/// directory `git clone URL` makes (the URL's last component without
/// `.git`).
pub fn select_in<S: AsRef<str>>(
    mirror: &Mirror,
    commit: &str,
    patterns: &[S],
    field: Field,
) -> Result<Vec<Folder>> {
    let repo = mirror.repo();
    let clone_dir = mirror
        .url()
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .map(|n| n.trim_end_matches(".git").to_string())
        .unwrap_or_default();
    let mut folders = select_with(
        patterns,
        field,
        |pattern| expand_in(repo, commit, pattern),
        |path| {
            let rel = path.to_string_lossy();
            let rel = history::mirror::folder_path(&rel).unwrap_or_else(|_| rel.into_owned());
            Path::new("/").join(&clone_dir).join(rel)
        },
        "check the pattern against the commit's tree (`*` and `?` match within one path component, folders only)",
    )?;
    for f in &mut folders {
        let rel = f.path.to_string_lossy().into_owned();
        f.path = PathBuf::from(history::mirror::folder_path(&rel)?);
        if f.path.as_os_str().is_empty() {
            f.path = PathBuf::from(".");
        }
    }
    Ok(folders)
}

/// Selection with the glob expansion `expand` and the identity `key` of a
/// path (two patterns naming one key select one folder twice).
fn select_with<S: AsRef<str>>(
    patterns: &[S],
    field: Field,
    expand: impl Fn(&str) -> Result<Vec<PathBuf>>,
    key: impl Fn(&Path) -> PathBuf,
    no_match_hint: &str,
) -> Result<Vec<Folder>> {
    let mut out: Vec<Folder> = Vec::new();
    let mut seen: BTreeMap<PathBuf, String> = BTreeMap::new();
    for pattern in patterns {
        let pattern = pattern.as_ref().trim();
        if pattern.is_empty() {
            return Err(Error::input(
                text![field, " has an empty entry"],
                Some("name each settings folder, one per entry".to_string()),
            ));
        }
        let matches = if has_glob(pattern) {
            let m = expand(pattern)?;
            if m.is_empty() {
                return Err(Error::input(
                    text![field, format!(" {pattern:?} matches no folder")],
                    Some(no_match_hint.to_string()),
                ));
            }
            m
        } else {
            vec![PathBuf::from(pattern)]
        };
        for path in matches {
            let key = key(&path);
            if let Some(first) = seen.get(&key) {
                return Err(Error::input(
                    text![
                        field,
                        format!(
                            " selects the folder {} twice (by {first:?} and by {pattern:?})",
                            path.display()
                        )
                    ],
                    Some("select each folder once".to_string()),
                ));
            }
            seen.insert(key.clone(), pattern.to_string());
            out.push(folder(path, &key));
        }
    }
    Ok(out)
}

fn folder(path: PathBuf, abs: &Path) -> Folder {
    let name = abs
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let parts: Vec<String> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
            Component::ParentDir => Some("..".to_string()),
            _ => None,
        })
        .collect();
    let slug = slug(&parts.join("/"));
    Folder { path, name, slug }
}

/// Lower case, every character outside `[a-z0-9._]` written `-` (one `-`
/// for a run), no `-`, `.` or `_` at either end: `{path}`'s form, and
/// `{name}`'s in a repository.
fn slug(s: &str) -> String {
    let mut slug = String::new();
    for ch in s.chars() {
        let c = ch.to_ascii_lowercase();
        let c = if c.is_ascii_alphanumeric() || c == '.' || c == '_' {
            c
        } else {
            '-'
        };
        if c == '-' && (slug.is_empty() || slug.ends_with('-')) {
            continue;
        }
        slug.push(c);
    }
    slug.trim_matches(['-', '.', '_']).to_string()
}

/// `path` with `.` and `..` resolved by name.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The folders a glob matches on disk.
fn expand(pattern: &str) -> Vec<PathBuf> {
    let mut current: Vec<PathBuf> = vec![if pattern.starts_with('/') {
        PathBuf::from("/")
    } else {
        PathBuf::new()
    }];
    for comp in pattern.split('/').filter(|c| !c.is_empty()) {
        let mut next = Vec::new();
        for base in &current {
            if !has_glob(comp) {
                next.push(base.join(comp));
                continue;
            }
            let dir = if base.as_os_str().is_empty() {
                Path::new(".")
            } else {
                base.as_path()
            };
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            let mut names: Vec<String> = entries
                .filter_map(|e| e.ok())
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .filter_map(|e| e.file_name().to_str().map(str::to_string))
                .filter(|n| n != ".git" && (!n.starts_with('.') || comp.starts_with('.')))
                .filter(|n| matches(comp.as_bytes(), n.as_bytes()))
                .collect();
            names.sort();
            next.extend(names.into_iter().map(|n| base.join(n)));
        }
        current = next;
    }
    current.retain(|p| p.is_dir());
    current
}

/// The folders a glob matches in the tree of `commit` (the rules of
/// [`expand`]: hidden names only for a hidden pattern, folders only).
fn expand_in(repo: &history::git::Repo, commit: &str, pattern: &str) -> Result<Vec<PathBuf>> {
    let pattern = history::mirror::folder_path(pattern)?;
    let mut current: Vec<String> = vec![String::new()];
    for comp in pattern.split('/').filter(|c| !c.is_empty()) {
        let mut next = Vec::new();
        for base in &current {
            let join = |name: &str| {
                if base.is_empty() {
                    name.to_string()
                } else {
                    format!("{base}/{name}")
                }
            };
            if !has_glob(comp) {
                next.push(join(comp));
                continue;
            }
            let Some(names) = repo.subfolders(commit, base)? else {
                continue;
            };
            next.extend(
                names
                    .iter()
                    .filter(|n| !n.starts_with('.') || comp.starts_with('.'))
                    .filter(|n| matches(comp.as_bytes(), n.as_bytes()))
                    .map(|n| join(n)),
            );
        }
        current = next;
    }
    let mut found = Vec::new();
    for path in current {
        if repo.subfolders(commit, &path)?.is_some() {
            found.push(PathBuf::from(path));
        }
    }
    Ok(found)
}

/// Whether `name` matches `pat` (`*` any run, `?` one character).
fn matches(pat: &[u8], name: &[u8]) -> bool {
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        if p < pat.len() && (pat[p] == b'?' || pat[p] == name[n]) {
            p += 1;
            n += 1;
        } else if p < pat.len() && pat[p] == b'*' {
            star = Some((p, n));
            p += 1;
        } else if let Some((sp, sn)) = star {
            p = sp + 1;
            n = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    pat[p..].iter().all(|&c| c == b'*')
}

/// Fills a template's `{name}` and `{path}` for `folder`.
pub fn fill(template: &str, folder: &Folder) -> String {
    template
        .replace("{name}", &folder.name)
        .replace("{path}", &folder.slug)
}

/// Each folder's layout directory from `template` (`build --output`), the
/// template filled as it is; two folders mapping to one is an input error
/// naming both. `field` names the input. Repositories are named by
/// [`repositories`] instead, which lower-cases them as registries need.
pub fn targets(template: &str, folders: &[Folder], field: Field) -> Result<Vec<String>> {
    let mut seen: BTreeMap<String, &Path> = BTreeMap::new();
    let mut out = Vec::new();
    for f in folders {
        let t = fill(template, f);
        if let Some(other) = seen.get(&t) {
            return Err(same_target(field, template, other, &f.path, &t));
        }
        seen.insert(t.clone(), &f.path);
        out.push(t);
    }
    Ok(out)
}

/// Two folders mapped by `template` (given as `field`) to one target.
fn same_target(field: Field, template: &str, one: &Path, other: &Path, target: &str) -> Error {
    let field = Mention::Subject(field);
    Error::input_hinted(
        text![
            field.clone(),
            format!(
                " {template:?} maps the folders {} and {} to the same {target}",
                one.display(),
                other.display()
            )
        ],
        text![
            "put {name} (the folder's last component) or {path} (its path as a slug) into ",
            field
        ],
    )
}

/// A folder's repository from `template`: the one mapping `push`, `plan`,
/// the action and `flux` all use, so Flux watches the repository the image
/// goes to. `{name}` is the folder's last component and `{path}` its path,
/// each lower-cased with every character a repository name cannot hold
/// written `-` (`configs/shop_eu` gives `shop_eu` and `configs-shop_eu`).
/// Returns the repository and, when the folder's name has capitals, the
/// notice that says where the image goes instead. A result that is not a
/// repository name is an input error naming the folder.
pub fn repository_for(template: &str, folder: &Folder) -> Result<(String, Option<LowerCased>)> {
    let name = slug(&folder.name);
    let repository = template
        .replace("{name}", &name)
        .replace("{path}", &folder.slug);
    if let Err(e) = registry::parse_repository(&repository) {
        return Err(Error::Input {
            message: crate::text![format!("the folder {}: ", folder.path.display())].then(e.text()),
            hint: e.hint_text(),
        });
    }
    let notice = (template.contains("{name}") && folder.name.chars().any(|c| c.is_uppercase()))
        .then(|| LowerCased {
            folder: folder.path.clone(),
            repository: repository.clone(),
        });
    Ok((repository, notice))
}

/// Each folder's repository from `template` ([`repository_for`]), with
/// the lower-casing notices; two folders mapping to one is an input error
/// naming both. `field` names the input.
pub fn repositories(
    template: &str,
    folders: &[Folder],
    field: Field,
) -> Result<(Vec<String>, Vec<LowerCased>)> {
    let mut seen: BTreeMap<String, &Path> = BTreeMap::new();
    let (mut out, mut notices) = (Vec::new(), Vec::new());
    for f in folders {
        let (r, notice) = repository_for(template, f)?;
        if let Some(other) = seen.get(&r) {
            return Err(same_target(field, template, other, &f.path, &r));
        }
        seen.insert(r.clone(), &f.path);
        out.push(r);
        notices.extend(notice);
    }
    Ok((out, notices))
}

/// One registry target per repository, each with `options`' login and
/// transport settings.
pub fn registry_targets(options: &registry::Options, repositories: Vec<String>) -> Vec<Target> {
    repositories
        .into_iter()
        .map(|repository| {
            Target::Registry(registry::Options {
                repository,
                ..options.clone()
            })
        })
        .collect()
}

/// One folder that needs a job: the `strategy.matrix` entry.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct PlanEntry {
    /// The folder, for the job's `path`.
    pub path: String,
    /// Its repository, for the job's `repository`.
    pub repository: String,
    /// The timestamp tag its last commit gives, not in the registry yet.
    pub tag: String,
}

/// The plan, as the matrix `strategy.matrix` takes: `{"include": [...]}` (an empty
/// `include` means every folder is up to date).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Matrix {
    /// The folders whose timestamp tag is missing from their repository.
    pub include: Vec<PlanEntry>,
    /// The folders already pushed for their last commit.
    #[serde(skip)]
    pub up_to_date: Vec<PlanEntry>,
}

/// Answers, in one history walk and one tag listing per repository, which
/// folders have no image for their last commit yet. Every folder whose
/// history cannot be read is reported (all of them, in one error).
pub fn plan(
    folders: &[Folder],
    repositories: &[String],
    prefix: &str,
    revision: Option<&str>,
    api: Option<github::Api>,
    registry: &registry::Options,
) -> Result<Matrix> {
    crate::tag::sanitize_prefix(prefix)?;
    for r in repositories {
        registry::parse_repository(r)?;
    }
    let paths: Vec<PathBuf> = folders.iter().map(|f| f.path.clone()).collect();
    let changes = history::last_changes(&paths, revision, api, true);
    let mut failed = Vec::new();
    let mut wanted = Vec::new();
    for ((f, repo), lc) in folders.iter().zip(repositories).zip(changes) {
        match lc
            .and_then(|lc| crate::tag::timestamp_tag(prefix, lc.commit.timestamp, &lc.commit.id))
        {
            Ok(tag) => wanted.push(PlanEntry {
                path: f.path.display().to_string(),
                repository: repo.clone(),
                tag,
            }),
            Err(e) => failed.push(format!("{}: {e}", f.path.display())),
        }
    }
    if !failed.is_empty() {
        return Err(Error::history(
            ".",
            format!(
                "cannot plan {} of {} folders:\n{}",
                failed.len(),
                folders.len(),
                failed.join("\n")
            ),
            Some(
                "fix the folders named (committed, full history or a GitHub token on a shallow clone)"
                    .to_string(),
            ),
        ));
    }
    let mut tags: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut plan = Matrix {
        include: Vec::new(),
        up_to_date: Vec::new(),
    };
    for e in wanted {
        if !tags.contains_key(&e.repository) {
            let client = registry::Client::open_read_only(&registry::Options {
                repository: e.repository.clone(),
                ..registry.clone()
            })?;
            tags.insert(
                e.repository.clone(),
                client.list_tags()?.into_iter().collect(),
            );
        }
        if tags.get(&e.repository).is_some_and(|t| t.contains(&e.tag)) {
            plan.up_to_date.push(e);
        } else {
            plan.include.push(e);
        }
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_matching() {
        assert!(matches(b"*", b"shop"));
        assert!(matches(b"s*p", b"shop"));
        assert!(matches(b"s?op", b"shop"));
        assert!(!matches(b"s?p", b"shop"));
        assert!(matches(b"*-eu", b"shop-eu"));
        assert!(!matches(b"*-eu", b"shop-us"));
        assert!(matches(b"a*b*c", b"axxbyyc"));
        assert!(!matches(b"a*b*c", b"axxbyy"));
    }

    #[test]
    fn slugs_and_names() {
        let f = folder(
            PathBuf::from("./Configs/Shop EU/"),
            Path::new("/w/Configs/Shop EU"),
        );
        assert_eq!(f.name, "Shop EU");
        assert_eq!(f.slug, "configs-shop-eu");
        let f = folder(PathBuf::from("configs/shop"), Path::new("/w/configs/shop"));
        assert_eq!(fill("ghcr.io/acme/{name}", &f), "ghcr.io/acme/shop");
        assert_eq!(fill("ghcr.io/acme/{path}", &f), "ghcr.io/acme/configs-shop");
    }

    #[test]
    fn two_folders_one_repository_is_an_input_error() {
        let a = folder(PathBuf::from("eu/shop"), Path::new("/w/eu/shop"));
        let b = folder(PathBuf::from("us/shop"), Path::new("/w/us/shop"));
        let e = targets("r/{name}", &[a.clone(), b.clone()], Field::Repository).unwrap_err();
        assert!(e.to_string().contains("eu/shop") && e.to_string().contains("us/shop"));
        assert_eq!(e.exit_code(), 2);
        assert_eq!(
            targets("r/{path}", &[a, b], Field::Repository).unwrap(),
            vec!["r/eu-shop", "r/us-shop"]
        );
    }

    #[test]
    fn one_mapping_from_folders_to_repositories() {
        let f = |p: &str| folder(PathBuf::from(p), &Path::new("/w").join(p));
        let map = |t: &str, p: &str| repository_for(t, &f(p)).unwrap();
        assert_eq!(
            map("ghcr.io/acme/settings-{name}", "configs/shop_eu"),
            ("ghcr.io/acme/settings-shop_eu".to_string(), None)
        );
        assert_eq!(
            map("ghcr.io/acme/{path}", "configs/shop_eu").0,
            "ghcr.io/acme/configs-shop_eu"
        );
        assert_eq!(
            map("ghcr.io/acme/{name}", "configs/shop.eu").0,
            "ghcr.io/acme/shop.eu"
        );
        let (r, notice) = map("ghcr.io/acme/settings-{name}", "configs/Shop EU");
        assert_eq!(r, "ghcr.io/acme/settings-shop-eu");
        assert!(notice.unwrap().text().to_string().contains("lower-case"));
        // {path} is documented as lower case: no notice.
        assert_eq!(
            map("ghcr.io/acme/{path}", "Configs/Shop"),
            ("ghcr.io/acme/configs-shop".into(), None)
        );
        let e = repository_for("ghcr.io/acme/{name}", &f("configs/a..b")).unwrap_err();
        assert!(e.to_string().contains("configs/a..b"), "{e}");
        assert_eq!(e.exit_code(), 2);
    }

    #[test]
    fn many_means_several_entries_or_a_glob() {
        assert!(!is_many(&["configs/shop"]));
        assert!(is_many(&["configs/*"]));
        assert!(is_many(&["a", "b"]));
    }
}
