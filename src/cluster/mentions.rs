//! Every place a manifest names the repository's image, or can change an
//! image-volume reference before the cluster applies it, for
//! `verify --scan`.
//!
//! The scan reads files as written; the cluster applies what Flux's
//! kustomize-controller renders (kustomize's patches, image entries and
//! field specs) and then substitutes (`postBuild`). Rendering needs
//! kustomize, which this tool does not carry, so the scan fails closed:
//! an image-volume reference in any object (a Pod's, a Deployment's, an
//! Argo Rollout's or any other custom resource's pod template, a
//! strategic-merge or JSON 6902 patch's) is verified when it names the
//! repository, and anything else that names the repository, or could make
//! a reference name it or stop naming it, is an [`Unverified`] row that
//! fails the scan.

use serde_yaml_ng::Value;

use super::finding::{Found, Unverified, in_repository};

/// Characters of a repository name (`HOST[:PORT]/PATH`): a mention must not
/// run on into more of them.
fn name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/')
}

/// Whether `text` names `repository` (not as part of a longer name: `R`
/// in `R:tag`, `R@sha256:...`, `oci://R`, `"R"`, not in `R-old` or `R/x`).
pub fn mentions(text: &str, repository: &str) -> bool {
    text.match_indices(repository).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + repository.len()..].chars().next();
        before.is_none_or(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
            && after.is_none_or(|c| !name_char(c))
    })
}

/// A piece of a reference: literal text, or a substitution (`${VAR}`,
/// `$VAR`, kustomize's `$(VAR)`) that may become any text.
#[derive(Debug, PartialEq)]
enum Piece {
    Char(char),
    Any,
}

/// `text` split into literal characters and substitutions; `None` when it
/// holds none.
fn substitutions(text: &str) -> Option<Vec<Piece>> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut any = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let close = match chars.get(i + 1) {
            Some('{') if c == '$' => Some('}'),
            Some('(') if c == '$' => Some(')'),
            _ => None,
        };
        if let Some(close) = close {
            let end = chars[i..].iter().position(|x| *x == close);
            out.push(Piece::Any);
            any = true;
            i = end.map_or(chars.len(), |e| i + e + 1);
        } else if c == '$'
            && chars
                .get(i + 1)
                .is_some_and(|n| n.is_ascii_alphabetic() || *n == '_')
        {
            out.push(Piece::Any);
            any = true;
            i += 1;
            while chars
                .get(i)
                .is_some_and(|n| n.is_ascii_alphanumeric() || *n == '_')
            {
                i += 1;
            }
        } else {
            out.push(Piece::Char(c));
            i += 1;
        }
    }
    any.then_some(out)
}

/// Whether a reference with substitutions can become one of `repository`:
/// the repository alone, or followed by `:` or `@` and a tag or digest
/// (which hold no `/`). A small automaton over the pieces: states `0..=n`
/// have produced that much of the repository, state `n + 1` is in the tag.
fn can_become(pieces: &[Piece], repository: &str) -> bool {
    let repo: Vec<char> = repository.chars().collect();
    let n = repo.len();
    let tail = n + 1;
    let mut reach = vec![false; n + 2];
    reach[0] = true;
    for piece in pieces {
        let mut next = vec![false; n + 2];
        match piece {
            Piece::Any => {
                // Any text: further into the repository, or on into a tag.
                if let Some(first) = reach.iter().position(|r| *r) {
                    for r in next.iter_mut().skip(first) {
                        *r = true;
                    }
                }
            }
            Piece::Char(c) => {
                for j in 0..n {
                    if reach[j] && repo[j] == *c {
                        next[j + 1] = true;
                    }
                }
                let in_tag =
                    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':' | '@' | '+');
                if (reach[n] && matches!(c, ':' | '@')) || (reach[tail] && in_tag) {
                    next[tail] = true;
                }
            }
        }
        reach = next;
        if !reach.iter().any(|r| *r) {
            return false;
        }
    }
    reach[n] || reach[tail]
}

/// Whether a kustomize image entry's `name` may select a reference of
/// `repository`: kustomize compiles it into the regular expression
/// `^NAME(:tag)?(@sha256:digest)?$` unescaped, so `.` is any character and
/// other metacharacters are a pattern. `None`: a pattern this cannot tell.
fn image_name_selects(name: &str, repository: &str) -> Option<bool> {
    if name.chars().any(|c| "\\^$*+?()[]{}|".contains(c)) {
        return None;
    }
    let fits = |n: &str, r: &str| {
        n.len() == r.len() && n.chars().zip(r.chars()).all(|(a, b)| a == '.' || a == b)
    };
    if fits(name, repository) {
        return Some(true);
    }
    // A name with a tag or digest of the repository.
    Some(
        name.len() > repository.len()
            && name.is_char_boundary(repository.len())
            && fits(&name[..repository.len()], repository)
            && name[repository.len()..].starts_with([':', '@']),
    )
}

/// Whether `text` looks like a field path into image volumes
/// (`spec/template/spec/volumes/image/reference`,
/// `spec.template.spec.volumes.[name=settings].image.reference`): a
/// kustomize field spec, replacement target or transformer configuration
/// pointed there can rewrite a reference.
fn reaches_image_volumes(text: &str) -> bool {
    !text.contains(char::is_whitespace)
        && text.match_indices("volumes").any(|(i, _)| {
            let rest = &text[i + "volumes".len()..];
            rest.starts_with(['.', '/', '['])
                && (rest.contains("image") || rest.contains("reference"))
        })
}

/// One document's walk.
pub struct Walk<'a> {
    /// The repository scanned for.
    pub repository: &'a str,
    /// The file, relative to the scanned folder.
    pub file: &'a str,
    /// References to verify.
    pub found: &'a mut Vec<Found>,
    /// What cannot be verified.
    pub unverified: &'a mut Vec<Unverified>,
}

/// `Kind/name` (with `namespace/`) of an object.
pub fn label(obj: &Value) -> String {
    let meta = obj.get("metadata");
    let Some(kind) = obj.get("kind").and_then(Value::as_str) else {
        return String::new(); // a kustomization.yaml, a patch file's list
    };
    let name = meta
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("?");
    match meta
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str)
    {
        Some(ns) => format!("{kind}/{ns}/{name}"),
        None => format!("{kind}/{name}"),
    }
}

/// Where a value sits in its document, for the rows.
fn at(path: &[String]) -> String {
    if path.is_empty() {
        "the document".to_string()
    } else {
        path.join(".")
    }
}

/// A sequence of JSON 6902 operations (`op` and `path` in every item).
fn is_json6902(items: &[Value]) -> bool {
    !items.is_empty()
        && items.iter().all(|i| {
            i.get("op").and_then(Value::as_str).is_some()
                && i.get("path").and_then(Value::as_str).is_some()
        })
}

impl Walk<'_> {
    /// Walks one document: a file's object (or `kind: List`), or a patch
    /// (`is_patch`: named by a kustomization, or inline in one).
    pub fn document(&mut self, doc: &Value, is_patch: bool) {
        match doc {
            Value::Sequence(items) if is_json6902(items) => {
                self.operations(items, "JSON 6902 patch");
            }
            Value::Mapping(_) if doc.get("kind").and_then(Value::as_str) == Some("List") => {
                match doc.get("items").and_then(Value::as_sequence) {
                    Some(items) => {
                        for item in items {
                            self.document(item, is_patch);
                        }
                    }
                    None => self.value(doc, &mut Vec::new(), &label(doc), is_patch),
                }
            }
            _ => self.value(doc, &mut Vec::new(), &label(doc), is_patch),
        }
    }

    fn unverified(&mut self, object: &str, text: &str, reason: String) {
        // A row shows one line of a text that spans several (an inline patch).
        let mut shown: String = text
            .trim()
            .lines()
            .next()
            .unwrap_or_default()
            .chars()
            .take(200)
            .collect();
        if shown.len() < text.trim().len() {
            shown.push_str(" ...");
        }
        let text = shown.as_str();
        self.unverified.push(Unverified {
            found: Found {
                file: self.file.to_string(),
                line: None,
                object: object.to_string(),
                volume: String::new(),
                reference: text.to_string(),
            },
            reason,
        });
    }

    /// An image volume's reference.
    fn reference(
        &mut self,
        object: &str,
        volume: &str,
        reference: &str,
        path: &[String],
        is_patch: bool,
    ) {
        let repository = self.repository;
        if in_repository(reference, repository) {
            self.found.push(Found {
                file: self.file.to_string(),
                line: None,
                object: object.to_string(),
                volume: volume.to_string(),
                reference: reference.to_string(),
            });
        } else if let Some(pieces) = substitutions(reference)
            && can_become(&pieces, repository)
        {
            self.unverified(
                object,
                reference,
                format!(
                    "image volume {volume:?} ({}) holds a substitution variable: Flux's postBuild (or \
                     kustomize's vars) replaces it before the cluster applies it, so what is mounted \
                     may be an image of {repository} that the scan cannot name or verify; write the \
                     reference to {repository} literally",
                    at(path)
                ),
            );
        } else if is_patch {
            self.unverified(
                object,
                reference,
                format!(
                    "a kustomize patch sets image volume {volume:?} ({}) to {reference}: it may replace a \
                     verified reference to {repository} in the object it targets, and the scan does not \
                     render kustomize; set the reference in the resource itself, or patch it to a \
                     reference of {repository} (which is verified)",
                    at(path)
                ),
            );
        } else if mentions(reference, repository) {
            self.mention(object, reference, path);
        }
    }

    fn mention(&mut self, object: &str, text: &str, path: &[String]) {
        let repository = self.repository;
        self.unverified(
            object,
            text,
            format!(
                "mentions {repository} at {}, which is not an image-volume reference the scan \
                 verifies: the cluster may apply an image of {repository} from here unverified \
                 (a kustomize image entry, a patch, a container image, chart values); remove it, or \
                 write the image as an image-volume reference",
                at(path)
            ),
        );
    }

    /// A string that is not an image-volume reference.
    fn text(&mut self, object: &str, text: &str, path: &[String]) {
        if mentions(text, self.repository) {
            // Flux's ImageRepository names the repository it scans; it
            // mounts nothing.
            let scanned_by_flux = object.starts_with("ImageRepository/")
                && path.len() == 2
                && path[0] == "spec"
                && path[1] == "image"
                && text == self.repository;
            if !scanned_by_flux {
                self.mention(object, text, path);
            }
        } else if reaches_image_volumes(text) {
            self.unverified(
                object,
                text,
                format!(
                    "{} names image-volume fields ({text}): a kustomize field spec, replacement or \
                     transformer pointed there can rewrite a reference to {} before the cluster \
                     applies it, and the scan does not render kustomize",
                    at(path),
                    self.repository
                ),
            );
        }
    }

    fn value(&mut self, v: &Value, path: &mut Vec<String>, object: &str, is_patch: bool) {
        match v {
            Value::Mapping(m) => {
                for (k, val) in m {
                    let key = match k {
                        Value::String(s) => s.clone(),
                        other => serde_yaml_ng::to_string(other)
                            .unwrap_or_default()
                            .trim()
                            .to_string(),
                    };
                    self.text(object, &key, path);
                    path.push(key.clone());
                    match (key.as_str(), val) {
                        ("volumes", Value::Sequence(items)) => {
                            for (i, item) in items.iter().enumerate() {
                                path.push(i.to_string());
                                self.volume(item, path, object, is_patch);
                                path.pop();
                            }
                        }
                        ("images", Value::Sequence(items))
                            if items.iter().all(|i| i.get("name").is_some()) =>
                        {
                            for (i, item) in items.iter().enumerate() {
                                path.push(i.to_string());
                                self.image_entry(item, path, object);
                                path.pop();
                            }
                        }
                        ("imageTag", Value::Mapping(_)) if item_is_image_entry(val) => {
                            self.image_entry(val, path, object);
                        }
                        ("patch", Value::String(text)) => self.inline_patch(text, path, object),
                        ("patchesStrategicMerge", Value::Sequence(items)) => {
                            for (i, item) in items.iter().enumerate() {
                                path.push(i.to_string());
                                match item {
                                    Value::String(text) if text.contains('\n') => {
                                        self.inline_patch(text, path, object)
                                    }
                                    other => self.value(other, path, object, is_patch),
                                }
                                path.pop();
                            }
                        }
                        _ => self.value(val, path, object, is_patch),
                    }
                    path.pop();
                }
            }
            Value::Sequence(items) if is_json6902(items) => {
                self.operations(items, &format!("JSON 6902 patch at {}", at(path)));
            }
            Value::Sequence(items) => {
                for (i, item) in items.iter().enumerate() {
                    path.push(i.to_string());
                    self.value(item, path, object, is_patch);
                    path.pop();
                }
            }
            Value::String(s) => self.text(object, s, path),
            Value::Tagged(t) => self.value(&t.value, path, object, is_patch),
            _ => {}
        }
    }

    /// One item of a `volumes` list.
    fn volume(&mut self, item: &Value, path: &mut Vec<String>, object: &str, is_patch: bool) {
        let reference = item
            .get("image")
            .and_then(|i| i.get("reference"))
            .and_then(Value::as_str);
        let Some(reference) = reference else {
            return self.value(item, path, object, is_patch);
        };
        let name = item.get("name").and_then(Value::as_str).unwrap_or("?");
        let mut here = path.clone();
        here.extend(["image".to_string(), "reference".to_string()]);
        self.reference(object, name, reference, &here, is_patch);
        // The rest of the volume (its name, pull policy) as any text.
        if let Value::Mapping(m) = item {
            for (k, val) in m {
                let key = k.as_str().unwrap_or_default().to_string();
                self.text(object, &key, path);
                path.push(key.clone());
                if key == "image" {
                    if let Value::Mapping(im) = val {
                        for (ik, iv) in im {
                            let ik = ik.as_str().unwrap_or_default().to_string();
                            self.text(object, &ik, path);
                            if ik != "reference" {
                                path.push(ik);
                                self.value(iv, path, object, is_patch);
                                path.pop();
                            }
                        }
                    }
                } else {
                    self.value(val, path, object, is_patch);
                }
                path.pop();
            }
        }
    }

    /// A kustomize image entry (`images:` of a kustomization or a Flux
    /// Kustomization, an ImageTagTransformer's `imageTag`).
    fn image_entry(&mut self, item: &Value, path: &mut Vec<String>, object: &str) {
        let repository = self.repository;
        let Some(name) = item.get("name").and_then(Value::as_str) else {
            return self.value(item, path, object, false);
        };
        match image_name_selects(name, repository) {
            Some(false) => {}
            Some(true) => self.unverified(
                object,
                name,
                format!(
                    "a kustomize image entry ({}) selects {repository}'s references by name: kustomize \
                     rewrites them (newName, newTag, digest) before the cluster applies them, when its \
                     image fields reach image volumes, and the scan does not render kustomize; set the \
                     reference in the manifest instead",
                    at(path)
                ),
            ),
            None => self.unverified(
                object,
                name,
                format!(
                    "a kustomize image entry ({}) has the name {name:?}, which kustomize reads as a \
                     regular expression: it may select {repository}'s references and rewrite them \
                     before the cluster applies them; name one image literally",
                    at(path)
                ),
            ),
        }
        if let Value::Mapping(m) = item {
            for (k, val) in m {
                let key = k.as_str().unwrap_or_default().to_string();
                if key != "name" {
                    path.push(key);
                    self.value(val, path, object, false);
                    path.pop();
                }
            }
        }
    }

    /// A patch written inline in a kustomization (or a Flux Kustomization).
    fn inline_patch(&mut self, text: &str, path: &[String], object: &str) {
        let mut docs = Vec::new();
        for de in serde_yaml_ng::Deserializer::from_str(text) {
            match <Value as serde::Deserialize>::deserialize(de).map(|mut v| {
                let _ = v.apply_merge();
                v
            }) {
                Ok(v) => docs.push(v),
                Err(_) => return self.text(object, text, path),
            }
        }
        for doc in &docs {
            match doc {
                Value::Sequence(items) if is_json6902(items) => {
                    self.operations(
                        items,
                        &format!("inline JSON 6902 patch of {object} at {}", at(path)),
                    );
                }
                _ => {
                    let inner = format!("{} (a patch in {object})", label(doc));
                    self.value(doc, &mut Vec::new(), &inner, true);
                }
            }
        }
    }

    /// JSON 6902 operations: what they write into image volumes.
    fn operations(&mut self, ops: &[Value], object: &str) {
        let repository = self.repository;
        for (i, op) in ops.iter().enumerate() {
            let kind = op.get("op").and_then(Value::as_str).unwrap_or_default();
            let target = op.get("path").and_then(Value::as_str).unwrap_or_default();
            let from = op.get("from").and_then(Value::as_str).unwrap_or_default();
            let mut path = vec![i.to_string(), "value".to_string()];
            let touches = |p: &str| {
                p.contains("/volumes") || p.ends_with("/image") || p.ends_with("/reference")
            };
            match (kind, op.get("value")) {
                ("copy" | "move", _) if touches(target) || touches(from) => self.unverified(
                    object,
                    target,
                    format!(
                        "operation {i} {kind}s {from} to {target}: it changes an image volume with a value \
                         the scan cannot see, and the scan does not render kustomize; set the reference \
                         of {repository} in the resource itself"
                    ),
                ),
                ("add" | "replace", Some(Value::String(value))) if target.ends_with("/reference") => {
                    let volume = format!("JSON 6902 {target}");
                    self.reference(object, &volume, value, &path, true);
                }
                ("add" | "replace", Some(value @ Value::Mapping(_)))
                    if (target.ends_with("/image") && value.get("reference").is_some())
                        || (touches(target) && value.get("image").is_some()) =>
                {
                    // One volume, or one volume's `image`.
                    let item = if target.ends_with("/image") {
                        let mut m = serde_yaml_ng::Mapping::new();
                        m.insert("image".into(), value.clone());
                        Value::Mapping(m)
                    } else {
                        value.clone()
                    };
                    self.volume(&item, &mut path, object, true);
                }
                (_, Some(value)) => {
                    if let Value::Sequence(items) = value
                        && target.ends_with("/volumes")
                    {
                        for (j, item) in items.iter().enumerate() {
                            path.push(j.to_string());
                            self.volume(item, &mut path, object, true);
                            path.pop();
                        }
                    } else {
                        self.value(value, &mut path, object, true);
                    }
                }
                _ => {}
            }
            if mentions(target, repository) || mentions(from, repository) {
                self.mention(object, target, &[i.to_string(), "path".to_string()]);
            }
        }
    }
}

/// An `imageTag` mapping with a name (an ImageTagTransformer's).
fn item_is_image_entry(v: &Value) -> bool {
    v.get("name").and_then(Value::as_str).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mentions_are_whole_names() {
        let r = "r.io/team/s";
        for yes in [
            "r.io/team/s",
            "r.io/team/s:t",
            "r.io/team/s@sha256:0",
            "oci://r.io/team/s",
            "x r.io/team/s y",
            "\"r.io/team/s\"",
        ] {
            assert!(mentions(yes, r), "{yes}");
        }
        for no in [
            "r.io/team/settings",
            "r.io/team/s/x:t",
            "r.io/team/s-old:t",
            "xr.io/team/s:t",
            "r.io/team/",
        ] {
            assert!(!mentions(no, r), "{no}");
        }
    }

    #[test]
    fn substitutions_that_can_become_the_repository() {
        let r = "r.io/team/s";
        let can = |t: &str| can_become(&substitutions(t).unwrap(), r);
        for yes in [
            "${REGISTRY}/team/s:main-1-abcdef0",
            "${REF}",
            "r.io/${TEAM}/s:x",
            "$REGISTRY/team/s@sha256:0",
            "$(SETTINGS)",
            "r.io/team/s:${TAG}",
            "${A}${B}",
        ] {
            assert!(can(yes), "{yes}");
        }
        for no in [
            "${REGISTRY}/team/other:x",
            "other.io/team/s:${TAG}",
            "r.io/team/s-${X}:t",
            "${X}/team/sx:t",
        ] {
            assert!(!can(no), "{no}");
        }
        assert!(substitutions("r.io/team/s:main").is_none());
    }

    #[test]
    fn kustomize_image_names_are_patterns() {
        let r = "r.io/team/s";
        assert_eq!(image_name_selects("r.io/team/s", r), Some(true));
        // `.` is any character: this name is not the repository's, yet
        // kustomize's pattern selects it.
        assert_eq!(image_name_selects("r.io.team/s", r), Some(true));
        assert_eq!(image_name_selects("r.io/team/x", r), Some(false));
        assert_eq!(image_name_selects("rxio/team/s", r), Some(false));
        assert_eq!(image_name_selects("r.io/team/.", r), Some(true));
        assert_eq!(image_name_selects("r.io/team/s:main", r), Some(true));
        assert_eq!(image_name_selects("nginx", r), Some(false));
        assert_eq!(image_name_selects(".*", r), None);
        assert_eq!(image_name_selects("r.io/team/(s|t)", r), None);
    }

    #[test]
    fn field_paths_into_image_volumes() {
        assert!(reaches_image_volumes(
            "spec/template/spec/volumes/image/reference"
        ));
        assert!(reaches_image_volumes(
            "spec.template.spec.volumes.[name=settings].image.reference"
        ));
        assert!(reaches_image_volumes("spec.template.spec.volumes.0.image"));
        assert!(!reaches_image_volumes("spec/template/spec/volumes"));
        assert!(!reaches_image_volumes(
            "mounts the settings volumes as an image reference"
        ));
    }
}
