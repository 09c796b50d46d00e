//! Key-level changes between two YAML or JSON files: each key path whose
//! value differs, with the old and the new value.
//!
//! The order is fixed, whatever order the files hold their keys in:
//! documents by index (a YAML stream's `---`), then depth-first through
//! each document, a mapping's keys in the byte order of their text, a
//! sequence's items by index. A key present on one side only is one change
//! (its whole value), not one per key below it. Reordering a mapping's
//! keys is no change; a sequence compares item by item.

use serde::Serialize;
use serde_json::Value;

/// The format of a file with key-level changes, from its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// `.yaml`, `.yml`.
    Yaml,
    /// `.json`.
    Json,
}

impl Format {
    /// The format a file named `path` is read as, if any.
    pub fn of(path: &str) -> Option<Format> {
        let name = path.rsplit('/').next().unwrap_or(path);
        let ext = name.rsplit_once('.')?.1.to_ascii_lowercase();
        match ext.as_str() {
            "yaml" | "yml" => Some(Format::Yaml),
            "json" => Some(Format::Json),
            _ => None,
        }
    }

    /// `YAML`, `JSON`.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Yaml => "YAML",
            Format::Json => "JSON",
        }
    }
}

/// One key whose value differs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KeyChange {
    /// The document (1 for the first) of a YAML stream with more than one
    /// document on either side; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub document: Option<usize>,
    /// The key path: `spec.replicas`, `items[2].name`, `labels["app.kubernetes.io/name"]`;
    /// empty for the document itself.
    pub path: String,
    /// The old value; absent when the key is new.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old: Option<Value>,
    /// The new value; absent when the key is gone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new: Option<Value>,
    /// A value was too long to show whole: it is a string of its first
    /// characters as JSON, ending in `...`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

impl KeyChange {
    /// Cuts a value whose JSON text is longer than `max` characters down
    /// to a string of its first `max` characters and `...`.
    pub fn cut(mut self, max: usize) -> KeyChange {
        for v in [&mut self.old, &mut self.new].into_iter().flatten() {
            let text = v.to_string();
            if let Some((i, _)) = text.char_indices().nth(max) {
                *v = Value::String(format!("{}...", &text[..i]));
                self.truncated = true;
            }
        }
        self
    }
}

/// The documents of `text` in `format`, each as JSON values; the parser's
/// error otherwise.
pub fn parse(format: Format, text: &str) -> Result<Vec<Value>, String> {
    match format {
        Format::Json => serde_json::from_str::<Value>(text)
            .map(|v| vec![v])
            .map_err(|e| e.to_string()),
        Format::Yaml => {
            let mut docs = Vec::new();
            for de in serde_yaml_ng::Deserializer::from_str(text) {
                let v = <serde_yaml_ng::Value as serde::Deserialize>::deserialize(de)
                    .map_err(|e| e.to_string())?;
                docs.push(from_yaml(v));
            }
            Ok(docs)
        }
    }
}

/// A YAML value as JSON: a key that is not a string is its YAML text, a
/// tagged value `{"!tag": value}`, a float JSON cannot hold its YAML text.
fn from_yaml(v: serde_yaml_ng::Value) -> Value {
    use serde_yaml_ng::Value as Y;
    match v {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::from(i)
            } else if let Some(u) = n.as_u64() {
                Value::from(u)
            } else {
                n.as_f64()
                    .and_then(serde_json::Number::from_f64)
                    .map_or_else(|| Value::String(n.to_string()), Value::Number)
            }
        }
        Y::String(s) => Value::String(s),
        Y::Sequence(items) => Value::Array(items.into_iter().map(from_yaml).collect()),
        Y::Mapping(map) => {
            let mut out = serde_json::Map::new();
            for (k, v) in map {
                let key = match k {
                    Y::String(s) => s,
                    other => serde_yaml_ng::to_string(&other)
                        .map(|s| s.trim_end().to_string())
                        .unwrap_or_default(),
                };
                out.insert(key, from_yaml(v));
            }
            Value::Object(out)
        }
        Y::Tagged(t) => {
            let mut out = serde_json::Map::new();
            out.insert(t.tag.to_string(), from_yaml(t.value));
            Value::Object(out)
        }
    }
}

/// `key` as a path segment after `at`: `.key` for a plain name, else
/// `["key"]` (JSON-quoted).
fn key_path(at: &str, key: &str) -> String {
    let plain = key
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if plain {
        if at.is_empty() {
            key.to_string()
        } else {
            format!("{at}.{key}")
        }
    } else {
        format!("{at}[{}]", Value::String(key.to_string()))
    }
}

/// Every change between `old` and `new` (see the module docs for the
/// order), `document` set on each.
fn walk(document: Option<usize>, at: &str, old: &Value, new: &Value, out: &mut Vec<KeyChange>) {
    let change = |path: String, old: Option<&Value>, new: Option<&Value>| KeyChange {
        document,
        path,
        old: old.cloned(),
        new: new.cloned(),
        truncated: false,
    };
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort_unstable_by(|x, y| x.as_bytes().cmp(y.as_bytes()));
            keys.dedup();
            for k in keys {
                let p = key_path(at, k);
                match (a.get(k), b.get(k)) {
                    (Some(x), Some(y)) => walk(document, &p, x, y, out),
                    (x, y) => out.push(change(p, x, y)),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            for i in 0..a.len().max(b.len()) {
                let p = format!("{at}[{i}]");
                match (a.get(i), b.get(i)) {
                    (Some(x), Some(y)) => walk(document, &p, x, y, out),
                    (x, y) => out.push(change(p, x, y)),
                }
            }
        }
        (x, y) if x != y => out.push(change(at.to_string(), Some(x), Some(y))),
        _ => {}
    }
}

/// The key-level changes between the documents `old` and `new`, in the
/// module docs' order.
pub fn changes(old: &[Value], new: &[Value]) -> Vec<KeyChange> {
    let many = old.len() > 1 || new.len() > 1;
    let mut out = Vec::new();
    for i in 0..old.len().max(new.len()) {
        let document = many.then_some(i + 1);
        match (old.get(i), new.get(i)) {
            (Some(a), Some(b)) => walk(document, "", a, b, &mut out),
            (a, b) => out.push(KeyChange {
                document,
                path: String::new(),
                old: a.cloned(),
                new: b.cloned(),
                truncated: false,
            }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn yaml(text: &str) -> Vec<Value> {
        parse(Format::Yaml, text).unwrap()
    }

    #[test]
    fn changes_come_in_key_order_whatever_the_files_order() {
        let old = yaml("b: 1\na: {y: 1, x: [1, 2]}\nz: gone\n");
        let new = yaml("a: {x: [1, 3, 4], y: 1}\nb: 2\nnew.key: true\n");
        let got: Vec<(String, Option<Value>, Option<Value>)> = changes(&old, &new)
            .into_iter()
            .map(|c| (c.path, c.old, c.new))
            .collect();
        assert_eq!(
            got,
            [
                ("a.x[1]".into(), Some(json!(2)), Some(json!(3))),
                ("a.x[2]".into(), None, Some(json!(4))),
                ("b".into(), Some(json!(1)), Some(json!(2))),
                ("[\"new.key\"]".into(), None, Some(json!(true))),
                ("z".into(), Some(json!("gone")), None),
            ]
        );
        // Key order alone is no change.
        assert_eq!(changes(&yaml("a: 1\nb: 2\n"), &yaml("b: 2\na: 1\n")), []);
    }

    #[test]
    fn documents_are_numbered_only_in_a_stream() {
        let c = changes(&yaml("a: 1\n---\nb: 1\n"), &yaml("a: 1\n---\nb: 2\n"));
        assert_eq!(c.len(), 1);
        assert_eq!((c[0].document, c[0].path.as_str()), (Some(2), "b"));
        let c = changes(&yaml("a: 1\n"), &yaml("a: 2\n"));
        assert_eq!(c[0].document, None);
    }

    #[test]
    fn yaml_types_stay_apart() {
        let c = changes(&yaml("port: 8080\n"), &yaml("port: \"8080\"\n"));
        assert_eq!(c[0].old, Some(json!(8080)));
        assert_eq!(c[0].new, Some(json!("8080")));
        assert!(parse(Format::Yaml, "a: [1,\n").is_err());
        let long = changes(&yaml("a: x\n"), &yaml("a: yyyyyyyy\n"))
            .remove(0)
            .cut(4);
        assert_eq!(long.old, Some(json!("x")));
        assert_eq!(long.new, Some(json!("\"yyy...")));
        assert!(long.truncated);
        assert_eq!(Format::of("dir/x.YML"), Some(Format::Yaml));
        assert_eq!(Format::of("x.json"), Some(Format::Json));
        assert_eq!(Format::of("yaml"), None);
    }
}
