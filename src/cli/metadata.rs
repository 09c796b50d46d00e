//! `--annotation` and `--label` of `build` and `push`: the CLI's words for
//! the action's `annotations` and `labels` inputs. Both faces fill the same
//! [`Request::extra`](crate::request::Request::extra), so the same merge
//! rules apply (the history's revision, created and source win) and the
//! provenance records what was added.

use clap::Args;

use crate::image::Metadata;

/// Annotations and labels the caller adds to the image.
#[derive(Debug, Args)]
pub struct MetadataArgs {
    /// Add a manifest annotation; may be repeated (the last value of a key
    /// wins). The history's revision, created and source are never replaced.
    #[arg(long = "annotation", value_name = "KEY=VALUE", value_parser = key_value)]
    pub annotations: Vec<(String, String)>,
    /// Add an image config label; may be repeated.
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = key_value)]
    pub labels: Vec<(String, String)>,
}

impl MetadataArgs {
    /// The request's `extra`.
    pub fn metadata(&self) -> Metadata {
        Metadata {
            annotations: self.annotations.iter().cloned().collect(),
            labels: self.labels.iter().cloned().collect(),
        }
    }
}

/// `KEY=VALUE`, split at the first `=` (the value may hold more); the key
/// is trimmed and must not be empty.
fn key_value(s: &str) -> Result<(String, String), String> {
    let Some((key, value)) = s.split_once('=') else {
        return Err(format!("{s:?} is not KEY=VALUE"));
    };
    let key = key.trim();
    if key.is_empty() {
        return Err(format!("{s:?} has an empty key; give KEY=VALUE"));
    }
    Ok((key.to_string(), value.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_values_split_at_the_first_equals_sign() {
        assert_eq!(
            key_value("org.opencontainers.image.title= a=b ").unwrap(),
            ("org.opencontainers.image.title".into(), " a=b ".into())
        );
        assert_eq!(key_value("k=").unwrap(), ("k".into(), String::new()));
        assert_eq!(
            key_value("no-equals"),
            Err("\"no-equals\" is not KEY=VALUE".to_string())
        );
        assert_eq!(
            key_value(" =v"),
            Err("\" =v\" has an empty key; give KEY=VALUE".to_string())
        );
    }
}
