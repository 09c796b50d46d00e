//! Reads the action's inputs exactly as the runner passes them:
//! `INPUT_` + the name upper-cased, spaces turned into `_`, hyphens kept
//! (`INPUT_TIMESTAMP-TAG`). The runner does not enforce `required`, so this
//! module does.
//!
//! Each face declares its inputs once, as a serde struct with kebab-case
//! field names ([`from_env`]): the runner's map becomes a JSON object (names
//! lower-cased without the prefix, values trimmed, empty values absent: the
//! runner sets every declared input, empty when the workflow does not) and
//! is deserialized with the failing input's name kept by
//! `serde_path_to_error`. Why not `envy`: it reads hyphenated names, but it
//! keeps empty values (so an unset `Option<bool>` input fails to parse),
//! parses booleans with Rust's `true`/`false` only (YAML 1.2 also has
//! `True`/`TRUE`), and its errors do not name the field a custom parser
//! refused.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

use serde::Deserialize;
use serde::de::{DeserializeOwned, Deserializer, Error as _};
use serde_json::Value;

use crate::error::{Error, Result};

/// The environment the action runs in, as a plain map (tests build one).
pub type Env = HashMap<String, String>;

/// The environment variable the runner uses for input `name`.
pub fn input_key(name: &str) -> String {
    format!("INPUT_{}", name.replace(' ', "_").to_uppercase())
}

/// The runner's `INPUT_*` variables as one typed struct `T` (kebab-case
/// field names, every field optional or defaulted: the runner does not
/// enforce `required`, [`require`] does). An input that does not parse is
/// an input error that names it.
pub fn from_env<T: DeserializeOwned>(env: &Env) -> Result<T> {
    let map: serde_json::Map<String, Value> = given(env)
        .map(|(name, v)| (name, Value::String(v.to_string())))
        .collect();
    serde_path_to_error::deserialize(Value::Object(map)).map_err(|e| {
        let name = e.path().to_string();
        let inner = e.into_inner().to_string();
        let (message, hint) = match inner.split_once("\nhint: ") {
            Some((m, h)) => (m.to_string(), Some(h.to_string())),
            None => (inner, None),
        };
        Error::input(format!("the input `{name}` {message}"), hint)
    })
}

/// The inputs the runner set, as [`from_env`] reads them: each name
/// lower-cased without the prefix, with its trimmed value, empty ones left
/// out.
fn given(env: &Env) -> impl Iterator<Item = (String, &str)> {
    env.iter().filter_map(|(k, v)| {
        let name = k.strip_prefix("INPUT_")?;
        let v = v.trim();
        (!v.is_empty()).then(|| (name.to_lowercase(), v))
    })
}

/// The input `name`'s value, read as [`from_env`] reads a field (for
/// inputs declared by a table rather than a struct, such as the login's
/// provider facts, [`crate::login::Fact::ALL`]).
pub fn input(env: &Env, name: &str) -> Option<String> {
    given(env)
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.to_string())
}

/// A required input's value, or an error that names it.
pub fn require(value: Option<String>, name: &str) -> Result<String> {
    value.ok_or_else(|| {
        Error::input(
            format!("the input `{name}` is required"),
            Some(format!(
                "set `with: {name}: ...` on the step that uses settings-image"
            )),
        )
    })
}

/// A boolean input in the YAML 1.2 core schema (`true`/`True`/`TRUE`,
/// `false`/...), for `#[serde(deserialize_with = "inputs::flag")]`.
pub fn flag<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<bool>, D::Error> {
    match Option::<String>::deserialize(d)?.as_deref() {
        None => Ok(None),
        Some("true" | "True" | "TRUE") => Ok(Some(true)),
        Some("false" | "False" | "FALSE") => Ok(Some(false)),
        Some(other) => Err(D::Error::custom(format!(
            "is {other:?}, not a boolean\nhint: use true or false"
        ))),
    }
}

/// A list input: items separated by newlines or commas, trimmed, empties
/// dropped, for `#[serde(deserialize_with = "inputs::items")]`.
pub fn items<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Vec<String>, D::Error> {
    Ok(split(
        Option::<String>::deserialize(d)?.as_deref(),
        &['\n', ','],
    ))
}

/// A list input with one item per line (values may hold commas, as
/// metadata-action's `labels` and `annotations` outputs do), for
/// `#[serde(deserialize_with = "inputs::lines")]`.
pub fn lines<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Vec<String>, D::Error> {
    Ok(split(Option::<String>::deserialize(d)?.as_deref(), &['\n']))
}

fn split(v: Option<&str>, by: &[char]) -> Vec<String> {
    v.map(|v| {
        v.split(by)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    })
    .unwrap_or_default()
}

/// The workspace: `GITHUB_WORKSPACE`, or the current directory outside a runner.
pub fn workspace(env: &Env) -> Result<PathBuf> {
    crate::front::workspace(env)
}

/// Resolves the path input `name` against the workspace; it may not leave it.
pub fn workspace_path(workspace: &Path, name: &str, path: &str) -> Result<PathBuf> {
    let escape = || {
        Error::input(
            format!(
                "the input `{name}` ({path}) leaves the workspace {}",
                workspace.display()
            ),
            Some(
                "give a folder inside the repository, relative to its root, e.g. configs/shop"
                    .to_string(),
            ),
        )
    };
    let rel = Path::new(path);
    let rel = if rel.is_absolute() {
        rel.strip_prefix(workspace).map_err(|_| escape())?
    } else {
        rel
    };
    let mut out = workspace.to_path_buf();
    let mut depth = 0usize;
    for c in rel.components() {
        match c {
            Component::Normal(p) => {
                out.push(p);
                depth += 1;
            }
            Component::CurDir => {}
            Component::ParentDir => {
                if depth == 0 {
                    return Err(escape());
                }
                out.pop();
                depth -= 1;
            }
            Component::RootDir | Component::Prefix(_) => return Err(escape()),
        }
    }
    Ok(out)
}

/// What the triggering event asks of us.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventPlan {
    /// Nothing to package (a branch or tag was deleted).
    Skip(String),
    /// Package the folder; `revision` is the commit to start history from
    /// when it is not the checked-out HEAD (the head of a pull request).
    Build {
        /// The commit to package instead of HEAD, if any.
        revision: Option<String>,
    },
}

/// Reads `GITHUB_EVENT_NAME` and the payload at `GITHUB_EVENT_PATH`.
///
/// - a `delete` event, or a `push` with `deleted: true` (`head_commit` null): skip;
/// - `pull_request`/`pull_request_target`: `GITHUB_SHA` is a merge commit that exists only
///   for the run, so the head commit of the pull request is packaged instead;
/// - everything else (`push` of a branch or tag, `workflow_dispatch`, `schedule`):
///   the checked-out commit (`GITHUB_SHA`).
pub fn event_plan(env: &Env) -> Result<EventPlan> {
    let name = env
        .get("GITHUB_EVENT_NAME")
        .map(String::as_str)
        .unwrap_or("");
    let payload = payload(env)?;
    let reference = payload
        .get("ref")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if name == "delete" || payload.get("deleted").and_then(Value::as_bool) == Some(true) {
        return Ok(EventPlan::Skip(format!(
            "{} was deleted; there is nothing to package",
            if reference.is_empty() {
                "the ref"
            } else {
                &reference
            }
        )));
    }
    if matches!(name, "pull_request" | "pull_request_target") {
        let head = payload
            .pointer("/pull_request/head/sha")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                Error::input(
                    "the pull_request payload has no pull_request.head.sha",
                    None,
                )
            })?;
        return Ok(EventPlan::Build {
            revision: Some(head.to_string()),
        });
    }
    Ok(EventPlan::Build { revision: None })
}

/// The event payload at `GITHUB_EVENT_PATH`, `Null` when there is none.
fn payload(env: &Env) -> Result<Value> {
    let Some(p) = env.get("GITHUB_EVENT_PATH").filter(|p| !p.is_empty()) else {
        return Ok(Value::Null);
    };
    let text = crate::named_file::read_bounded(
        Path::new(p),
        "the event payload (GITHUB_EVENT_PATH)",
        crate::named_file::MAX_EVENT_BYTES,
    )?;
    serde_json::from_str(&text)
        .map_err(|e| Error::input(format!("the event payload {p} is not JSON: {e}"), None))
}

/// The branch's previous head when the triggering event is a `push` that
/// rewrote the branch (`forced: true`): the payload's `before`. `None` for
/// every other event, a normal push, or a `before` of zeros (a new branch).
pub fn forced_push(env: &Env) -> Result<Option<String>> {
    if env.get("GITHUB_EVENT_NAME").map(String::as_str) != Some("push") {
        return Ok(None);
    }
    let payload = payload(env)?;
    if payload.get("forced").and_then(Value::as_bool) != Some(true) {
        return Ok(None);
    }
    let before = payload.get("before").and_then(Value::as_str).unwrap_or("");
    let full = matches!(before.len(), 40 | 64) && before.bytes().all(|b| b.is_ascii_hexdigit());
    if !full {
        return Err(Error::input(
            format!("the forced push's payload has no commit id in `before` ({before:?})"),
            None,
        ));
    }
    if before.bytes().all(|b| b == b'0') {
        return Ok(None);
    }
    Ok(Some(before.to_ascii_lowercase()))
}

/// An environment made of `pairs`, for unit tests of the action front end.
#[cfg(test)]
pub(crate) fn env_of(pairs: &[(&str, &str)]) -> Env {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The names of the inputs the manifest at `rel` (from the repository
/// root) declares, and those the struct `T` reads (with the login's
/// provider facts, read by their declaration, [`crate::login::Fact::ALL`],
/// when `T` reads the login), for unit tests that keep both faces' structs
/// and manifests in step.
#[cfg(test)]
pub(crate) fn declared_and_read<T: serde::Serialize + Default>(
    rel: &str,
) -> (
    std::collections::BTreeSet<String>,
    std::collections::BTreeSet<String>,
) {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    let text = std::fs::read_to_string(&p).unwrap();
    let manifest: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).unwrap();
    let declared = manifest["inputs"]
        .as_mapping()
        .unwrap()
        .keys()
        .map(|k| k.as_str().unwrap().to_string())
        .collect();
    let mut read: std::collections::BTreeSet<String> = serde_json::to_value(T::default())
        .unwrap()
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    if read.contains("login") {
        read.extend(crate::login::Fact::ALL.map(|f| f.name().to_string()));
    }
    (declared, read)
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::env_of as env;

    #[derive(Debug, Default, serde::Deserialize)]
    #[serde(rename_all = "kebab-case", default)]
    struct Probe {
        timestamp_tag: Option<String>,
        path: Option<String>,
        #[serde(deserialize_with = "flag")]
        insecure: Option<bool>,
        #[serde(deserialize_with = "flag")]
        summary: Option<bool>,
        #[serde(deserialize_with = "items")]
        tags: Vec<String>,
        #[serde(deserialize_with = "lines")]
        labels: Vec<String>,
    }

    #[test]
    fn names_keep_hyphens_values_are_trimmed_and_empty_is_absent() {
        assert_eq!(input_key("timestamp-tag"), "INPUT_TIMESTAMP-TAG");
        assert_eq!(input_key("my input"), "INPUT_MY_INPUT");
        let e = env(&[
            ("INPUT_TIMESTAMP-TAG", " main \n"),
            ("INPUT_TIMESTAMP_TAG", "wrong"),
            ("INPUT_PATH", "  "),
            ("INPUT_INSECURE", "TRUE"),
            ("INPUT_SUMMARY", ""),
            ("INPUT_TAGS", "a, b\n\nc,"),
            ("INPUT_LABELS", "a=1,2\n b=3 \n"),
            ("TIMESTAMP-TAG", "not an input"),
        ]);
        let p: Probe = from_env(&e).unwrap();
        assert_eq!(p.timestamp_tag.as_deref(), Some("main"));
        assert_eq!(p.path, None);
        assert_eq!(p.insecure, Some(true));
        assert_eq!(p.summary, None);
        assert_eq!(p.tags, ["a", "b", "c"]);
        assert_eq!(p.labels, ["a=1,2", "b=3"]);
        let err = require(p.path, "path").unwrap_err();
        assert_eq!(err.to_string(), "the input `path` is required");
    }

    #[test]
    fn a_bad_boolean_names_its_input() {
        let err = from_env::<Probe>(&env(&[("INPUT_SUMMARY", "yes")])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the input `summary` is \"yes\", not a boolean"
        );
        assert_eq!(err.hint().as_deref(), Some("use true or false"));
        assert_eq!(err.exit_code(), 2);
    }

    #[test]
    fn path_stays_in_the_workspace() {
        let ws = Path::new("/github/workspace");
        assert_eq!(
            workspace_path(ws, "path", "configs/shop/").unwrap(),
            Path::new("/github/workspace/configs/shop")
        );
        assert_eq!(
            workspace_path(ws, "path", "./a/../b").unwrap(),
            Path::new("/github/workspace/b")
        );
        assert_eq!(
            workspace_path(ws, "path", "/github/workspace/c").unwrap(),
            Path::new("/github/workspace/c")
        );
        assert!(workspace_path(ws, "path", "../x").is_err());
        assert!(workspace_path(ws, "path", "a/../../x").is_err());
        assert!(workspace_path(ws, "path", "/etc").is_err());
    }

    fn fixture(rel: &str) -> String {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/github")
            .join(rel);
        assert!(
            p.exists(),
            "fixture {} is missing: tests/fixtures is part of the repository",
            p.display()
        );
        p.display().to_string()
    }

    #[test]
    fn events_from_real_payloads() {
        let push = fixture("push/branch-push-1-commit.octokit-webhooks-js.json");
        let e = env(&[("GITHUB_EVENT_NAME", "push"), ("GITHUB_EVENT_PATH", &push)]);
        assert_eq!(event_plan(&e).unwrap(), EventPlan::Build { revision: None });

        let del = fixture("other/delete.octokit-webhooks.json");
        let e = env(&[("GITHUB_EVENT_NAME", "delete"), ("GITHUB_EVENT_PATH", &del)]);
        assert!(matches!(event_plan(&e).unwrap(), EventPlan::Skip(m) if m.contains("deleted")));

        // A push that deletes a branch: the real payload with GitHub's deletion fields.
        let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&push).unwrap()).unwrap();
        v["deleted"] = Value::Bool(true);
        v["head_commit"] = Value::Null;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("event.json");
        std::fs::write(&p, v.to_string()).unwrap();
        let e = env(&[
            ("GITHUB_EVENT_NAME", "push"),
            ("GITHUB_EVENT_PATH", p.to_str().unwrap()),
        ]);
        assert!(
            matches!(event_plan(&e).unwrap(), EventPlan::Skip(m) if m.contains("refs/heads/changes"))
        );

        // A forced push: `before` is what the branch named until then.
        assert_eq!(forced_push(&e).unwrap(), None, "not forced");
        v["deleted"] = Value::Bool(false);
        v["forced"] = Value::Bool(true);
        v["before"] = "0123456789ABCDEF0123456789abcdef01234567".into();
        std::fs::write(&p, v.to_string()).unwrap();
        assert_eq!(
            forced_push(&e).unwrap().as_deref(),
            Some("0123456789abcdef0123456789abcdef01234567")
        );
        let mut other = e.clone();
        other.insert("GITHUB_EVENT_NAME".into(), "workflow_dispatch".into());
        assert_eq!(forced_push(&other).unwrap(), None);
        v["before"] = "0".repeat(40).into();
        std::fs::write(&p, v.to_string()).unwrap();
        assert_eq!(forced_push(&e).unwrap(), None, "a new branch");
        v["before"] = "HEAD~1".into();
        std::fs::write(&p, v.to_string()).unwrap();
        assert!(forced_push(&e).is_err());

        let wd = fixture("other/workflow_dispatch.octokit-webhooks.json");
        let e = env(&[
            ("GITHUB_EVENT_NAME", "workflow_dispatch"),
            ("GITHUB_EVENT_PATH", &wd),
        ]);
        assert_eq!(event_plan(&e).unwrap(), EventPlan::Build { revision: None });

        let pr = serde_json::json!({"action": "synchronize", "pull_request": {"head": {"sha": "0123456789abcdef0123456789abcdef01234567"}}});
        std::fs::write(&p, pr.to_string()).unwrap();
        let e = env(&[
            ("GITHUB_EVENT_NAME", "pull_request"),
            ("GITHUB_EVENT_PATH", p.to_str().unwrap()),
        ]);
        assert_eq!(
            event_plan(&e).unwrap(),
            EventPlan::Build {
                revision: Some("0123456789abcdef0123456789abcdef01234567".into())
            }
        );
    }
}
