//! One document of `verify --scan`: each image-volume reference to the
//! repository in it (to verify), and each way it may make the cluster run
//! an image of the repository that the scan cannot verify (an error row).
//!
//! The scan reads what the cluster applies as it is applied: plain
//! manifests, or a stream kustomize, Flux or Helm already rendered
//! ([`super::scan`]). A document that is itself rendered again in the
//! cluster is refused, with the command that renders it:
//! - a HelmRelease: helm-controller renders its chart with its values;
//! - a Flux Kustomization that changes what it applies (`postBuild`
//!   substitutions, `patches`, `images`, `components`);
//! - a kustomization (`kustomize.config.k8s.io`).
//!
//! In every other document an image-volume reference is a `volumes` item's
//! `image.reference` in any object (a Pod's, a Deployment's, an Argo
//! Rollout's, any custom resource's pod template). It is the repository's
//! by the reference grammar ([`super::spelling`]), in any spelling.
//! Anything else that names the repository, and a reference with a
//! substitution (`${VAR}`, `$(VAR)`) or a template (`{{ .Values.x }}`)
//! that may become one of it, is an [`Unverified`] row.

use serde_yaml_ng::Value;

use super::finding::{Found, Unverified};
use super::spelling::Canonical;

/// A piece of a reference: literal text, or a substitution or template
/// that may become any text.
#[derive(Debug, PartialEq)]
enum Piece {
    Char(char),
    Any,
}

/// `text` split into literal characters and substitutions (`${VAR}`,
/// `$VAR`, kustomize's `$(VAR)`, Helm's and Go's `{{ ... }}`); `None`
/// when it holds none.
fn substitutions(text: &str) -> Option<Vec<Piece>> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut any = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let close: Option<&[char]> = match chars.get(i + 1) {
            Some('{') if c == '$' => Some(&['}']),
            Some('(') if c == '$' => Some(&[')']),
            Some('{') if c == '{' => Some(&['}', '}']),
            _ => None,
        };
        if let Some(close) = close {
            let end = (i + 2..=chars.len().saturating_sub(close.len()))
                .find(|&e| chars[e..].starts_with(close));
            out.push(Piece::Any);
            any = true;
            i = end.map_or(chars.len(), |e| e + close.len());
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
            out.push(Piece::Char(c.to_ascii_lowercase()));
            i += 1;
        }
    }
    any.then_some(out)
}

/// Whether a reference with substitutions can become `spelling` (lower
/// case) alone, or followed by `:` or `@` and a tag or digest (which hold
/// no `/`). A small automaton over the pieces: states `0..=n` have produced
/// that much of the spelling, state `n + 1` is in the tag.
fn can_become(pieces: &[Piece], spelling: &str) -> bool {
    let repo: Vec<char> = spelling.chars().collect();
    let n = repo.len();
    let tail = n + 1;
    let mut reach = vec![false; n + 2];
    reach[0] = true;
    for piece in pieces {
        let mut next = vec![false; n + 2];
        match piece {
            Piece::Any => {
                // Any text: further into the spelling, or on into a tag.
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

/// One document's walk.
pub struct Walk<'a> {
    /// The repository as the user named it (verified in this spelling).
    pub repository: &'a str,
    /// Its canonical form.
    pub canonical: &'a Canonical,
    /// Every spelling of it ([`Canonical::spellings`]).
    pub spellings: &'a [String],
    /// The file, relative to the scanned folder (`-` for standard input).
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
        return String::new();
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

/// The fields of a Flux Kustomization that change what it applies.
const FLUX_RENDERS: [&str; 6] = [
    "postBuild",
    "patches",
    "patchesStrategicMerge",
    "patchesJson6902",
    "images",
    "components",
];

/// Why the cluster renders `doc` again before it applies what it names,
/// with the command that renders it; `None` for an object applied as it is.
fn rendered_in_cluster(doc: &Value) -> Option<String> {
    let kind = doc.get("kind").and_then(Value::as_str)?;
    let api = doc
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let name = doc
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("NAME");
    let spec = doc.get("spec");
    match kind {
        "HelmRelease" => Some(format!(
            "a HelmRelease: helm-controller renders its chart with these values in the cluster, and \
             the scan does not render Helm charts; render it (`helm template {name} CHART --values \
             VALUES`, the values of spec.values) and scan the output, or keep the reference out of \
             charts"
        )),
        "Kustomization" | "Component" if api.starts_with("kustomize.config.k8s.io/") => Some(
            "a kustomization: kustomize loads and rewrites what it names (resources of any file \
             name, patches, replacements, transformers), and the scan does not render kustomize; \
             render its folder (`kubectl kustomize DIR > rendered.yaml`) and scan the output"
                .to_string(),
        ),
        "Kustomization" if api.starts_with("kustomize.toolkit.fluxcd.io/") => {
            let fields: Vec<&str> = FLUX_RENDERS
                .into_iter()
                .filter(|f| {
                    spec.and_then(|s| s.get(*f)).is_some_and(|v| match v {
                        Value::Null => false,
                        Value::Sequence(items) => !items.is_empty(),
                        Value::Mapping(m) => !m.is_empty(),
                        _ => true,
                    })
                })
                .collect();
            let path = spec
                .and_then(|s| s.get("path"))
                .and_then(Value::as_str)
                .unwrap_or("PATH");
            (!fields.is_empty()).then(|| {
                format!(
                    "a Flux Kustomization whose {} change what it applies from {path}, and the scan \
                     does not render them; render it (`flux build kustomization {name} --path {path} \
                     --kustomization-file FILE --dry-run > rendered.yaml`) and scan the output",
                    fields.join(", ")
                )
            })
        }
        _ => None,
    }
}

impl Walk<'_> {
    /// Walks one document: an object, a list of them (`kind: List`,
    /// `DeploymentList`, ...), or any other YAML (which the cluster does
    /// not apply, but whose mentions of the repository still fail).
    pub fn document(&mut self, doc: &Value) {
        if let Some(reason) = rendered_in_cluster(doc) {
            let object = label(doc);
            let shown = doc
                .get("kind")
                .and_then(Value::as_str)
                .map(|k| format!("kind: {k}"))
                .unwrap_or_default();
            return self.unverified(&object, &shown, reason);
        }
        let is_list = doc
            .get("kind")
            .and_then(Value::as_str)
            .is_some_and(|k| k.ends_with("List"));
        match doc.get("items").and_then(Value::as_sequence) {
            Some(items) if is_list => {
                for item in items {
                    self.document(item);
                }
            }
            _ => self.value(doc, &mut Vec::new(), &label(doc)),
        }
    }

    fn unverified(&mut self, object: &str, text: &str, reason: String) {
        // A row shows one line of a text that spans several.
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
        self.unverified.push(Unverified {
            found: Found {
                file: self.file.to_string(),
                line: None,
                object: object.to_string(),
                volume: String::new(),
                reference: shown,
                verify_as: String::new(),
            },
            reason,
        });
    }

    /// An image volume's reference.
    fn reference(&mut self, object: &str, volume: &str, reference: &str, path: &[String]) {
        let repository = self.repository;
        if let Some(tail) = self.canonical.tail_of(reference) {
            self.found.push(Found {
                file: self.file.to_string(),
                line: None,
                object: object.to_string(),
                volume: volume.to_string(),
                reference: reference.to_string(),
                verify_as: format!("{repository}{tail}"),
            });
        } else if let Some(pieces) = substitutions(reference)
            && self.spellings.iter().any(|s| can_become(&pieces, s))
        {
            self.unverified(
                object,
                reference,
                format!(
                    "image volume {volume:?} ({}) holds a substitution or template: Flux's postBuild, \
                     kustomize's vars or a Helm chart replace it before the cluster applies it, so \
                     what is mounted may be an image of {repository} that the scan cannot name or \
                     verify; write the reference to {repository} literally, or scan the rendered \
                     output",
                    at(path)
                ),
            );
        } else if super::spelling::mentions(reference, self.canonical) {
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
                 (a container image, chart values, a reference that is not a valid one); remove \
                 it, or write the image as an image-volume reference",
                at(path)
            ),
        );
    }

    /// A string that is not an image-volume reference.
    fn text(&mut self, object: &str, text: &str, path: &[String]) {
        if super::spelling::mentions(text, self.canonical) {
            // Flux's ImageRepository names the repository it scans; it
            // mounts nothing.
            let scanned_by_flux = object.starts_with("ImageRepository/")
                && path.len() == 2
                && path[0] == "spec"
                && path[1] == "image"
                && super::spelling::canonical(text).as_ref() == Some(self.canonical);
            if !scanned_by_flux {
                self.mention(object, text, path);
            }
        }
    }

    fn value(&mut self, v: &Value, path: &mut Vec<String>, object: &str) {
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
                                self.volume(item, path, object);
                                path.pop();
                            }
                        }
                        _ => self.value(val, path, object),
                    }
                    path.pop();
                }
            }
            Value::Sequence(items) => {
                for (i, item) in items.iter().enumerate() {
                    path.push(i.to_string());
                    self.value(item, path, object);
                    path.pop();
                }
            }
            Value::String(s) => self.text(object, s, path),
            Value::Tagged(t) => self.value(&t.value, path, object),
            _ => {}
        }
    }

    /// One item of a `volumes` list.
    fn volume(&mut self, item: &Value, path: &mut Vec<String>, object: &str) {
        let reference = item
            .get("image")
            .and_then(|i| i.get("reference"))
            .and_then(Value::as_str);
        let Some(reference) = reference else {
            return self.value(item, path, object);
        };
        let name = item.get("name").and_then(Value::as_str).unwrap_or("?");
        let mut here = path.clone();
        here.extend(["image".to_string(), "reference".to_string()]);
        self.reference(object, name, reference, &here);
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
                                self.value(iv, path, object);
                                path.pop();
                            }
                        }
                    }
                } else {
                    self.value(val, path, object);
                }
                path.pop();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn substitutions_and_templates_that_can_become_the_repository() {
        let r = Canonical::of("r.io/team/s").unwrap();
        let spellings = r.spellings();
        let can = |t: &str| {
            let pieces = substitutions(t).unwrap();
            spellings.iter().any(|s| can_become(&pieces, s))
        };
        for yes in [
            "${REGISTRY}/team/s:main-1-abcdef0",
            "${REF}",
            "r.io/${TEAM}/s:x",
            "$REGISTRY/team/s@sha256:0",
            "$(SETTINGS)",
            "r.io/team/s:${TAG}",
            "${A}${B}",
            "{{ .Values.registry }}/team/s@{{ .Values.digest }}",
            "R.IO:443/team/{{ .Values.name }}:1",
        ] {
            assert!(can(yes), "{yes}");
        }
        for no in [
            "${REGISTRY}/team/other:x",
            "other.io/team/s:${TAG}",
            "r.io/team/s-${X}:t",
            "${X}/team/sx:t",
            "{{ .Values.registry }}/team/other:1",
        ] {
            assert!(!can(no), "{no}");
        }
        assert!(substitutions("r.io/team/s:main").is_none());
        // Docker Hub's short names: `shop` is docker.io/library/shop.
        let hub = Canonical::of("docker.io/library/shop").unwrap();
        let pieces = substitutions("shop:${TAG}").unwrap();
        assert!(hub.spellings().iter().any(|s| can_become(&pieces, s)));
    }
}
