//! Reads the action's inputs exactly as the runner passes them:
//! `INPUT_` + the name upper-cased, spaces turned into `_`, hyphens kept
//! (`INPUT_TIMESTAMP-TAG`). The runner does not enforce `required`, so this
//! module does.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

use serde_json::Value;

use crate::error::{Error, Result};

/// The environment the action runs in, as a plain map (tests build one).
pub type Env = HashMap<String, String>;

/// The environment variable the runner uses for input `name`.
pub fn input_key(name: &str) -> String {
    format!("INPUT_{}", name.replace(' ', "_").to_uppercase())
}

/// An input's value, trimmed as the runner's toolkit does; `None` when unset or empty.
pub fn input(env: &Env, name: &str) -> Option<String> {
    env.get(&input_key(name))
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// A required input, or an error that names it.
pub fn required(env: &Env, name: &str) -> Result<String> {
    input(env, name).ok_or_else(|| {
        Error::input(
            format!("the input `{name}` is required"),
            Some(format!(
                "set `with: {name}: ...` on the step that uses settings-image"
            )),
        )
    })
}

/// A boolean input in the YAML 1.2 core schema (`true`/`True`/`TRUE`, `false`/...).
pub fn boolean(env: &Env, name: &str, default: bool) -> Result<bool> {
    match input(env, name).as_deref() {
        None => Ok(default),
        Some("true" | "True" | "TRUE") => Ok(true),
        Some("false" | "False" | "FALSE") => Ok(false),
        Some(other) => Err(Error::input(
            format!("the input `{name}` is {other:?}, not a boolean"),
            Some("use true or false".to_string()),
        )),
    }
}

/// A list input: items separated by newlines or commas, trimmed, empties dropped.
pub fn list(env: &Env, name: &str) -> Vec<String> {
    input(env, name)
        .map(|v| {
            v.split(['\n', ','])
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Resolves the `path` input against the workspace; it may not leave it.
pub fn workspace_path(workspace: &Path, path: &str) -> Result<PathBuf> {
    let escape = || {
        Error::input(
            format!(
                "the input `path` ({path}) leaves the workspace {}",
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
    let payload: Option<Value> = match env.get("GITHUB_EVENT_PATH").filter(|p| !p.is_empty()) {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| Error::io(format!("reading the event payload {p}"), e))?;
            Some(serde_json::from_str(&text).map_err(|e| {
                Error::input(format!("the event payload {p} is not JSON: {e}"), None)
            })?)
        }
        None => None,
    };
    let payload = payload.unwrap_or(Value::Null);
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

/// The branch's previous head when the triggering event is a `push` that
/// rewrote the branch (`forced: true`): the payload's `before`. `None` for
/// every other event, a normal push, or a `before` of zeros (a new branch).
pub fn forced_push(env: &Env) -> Result<Option<String>> {
    if env.get("GITHUB_EVENT_NAME").map(String::as_str) != Some("push") {
        return Ok(None);
    }
    let Some(path) = env.get("GITHUB_EVENT_PATH").filter(|p| !p.is_empty()) else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::io(format!("reading the event payload {path}"), e))?;
    let payload: Value = serde_json::from_str(&text)
        .map_err(|e| Error::input(format!("the event payload {path} is not JSON: {e}"), None))?;
    if payload.get("forced").and_then(Value::as_bool) != Some(true) {
        return Ok(None);
    }
    let before = payload.get("before").and_then(Value::as_str).unwrap_or("");
    let full = matches!(before.len(), 40 | 64) && before.bytes().all(|b| b.is_ascii_hexdigit());
    if !full {
        return Err(Error::input(
            format!("the forced push payload {path} has no commit id in `before` ({before:?})"),
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

#[cfg(test)]
mod tests {
    use super::*;

    use super::env_of as env;

    #[test]
    fn names_keep_hyphens() {
        assert_eq!(input_key("timestamp-tag"), "INPUT_TIMESTAMP-TAG");
        assert_eq!(input_key("my input"), "INPUT_MY_INPUT");
        let e = env(&[
            ("INPUT_TIMESTAMP-TAG", " main \n"),
            ("INPUT_TIMESTAMP_TAG", "wrong"),
        ]);
        assert_eq!(input(&e, "timestamp-tag").as_deref(), Some("main"));
    }

    #[test]
    fn required_booleans_and_lists() {
        let e = env(&[
            ("INPUT_PATH", "  "),
            ("INPUT_INSECURE", "TRUE"),
            ("INPUT_SUMMARY", "yes"),
            ("INPUT_TAGS", "a, b\n\nc,"),
        ]);
        assert!(
            required(&e, "path")
                .unwrap_err()
                .to_string()
                .contains("`path`")
        );
        assert!(boolean(&e, "insecure", false).unwrap());
        assert!(boolean(&e, "missing", true).unwrap());
        assert!(boolean(&e, "summary", true).is_err());
        assert_eq!(list(&e, "tags"), ["a", "b", "c"]);
    }

    #[test]
    fn path_stays_in_the_workspace() {
        let ws = Path::new("/github/workspace");
        assert_eq!(
            workspace_path(ws, "configs/shop/").unwrap(),
            Path::new("/github/workspace/configs/shop")
        );
        assert_eq!(
            workspace_path(ws, "./a/../b").unwrap(),
            Path::new("/github/workspace/b")
        );
        assert_eq!(
            workspace_path(ws, "/github/workspace/c").unwrap(),
            Path::new("/github/workspace/c")
        );
        assert!(workspace_path(ws, "../x").is_err());
        assert!(workspace_path(ws, "a/../../x").is_err());
        assert!(workspace_path(ws, "/etc").is_err());
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
