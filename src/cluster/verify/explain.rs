//! Why a rebuilt image differs from the pushed one, in words a reviewer
//! can act on: the first differing file of the layer, the config fields
//! and labels, or the manifest's annotations.

use std::collections::BTreeMap;
use std::io::Read as _;

use super::layer::{first_difference, inflate_limit, tar_entries};
use crate::error::{Error, Result};
use crate::image::{self, artifact::ManifestView};
use crate::registry::Client;

/// Why the rebuilt image differs from the pushed one, and the first
/// differing file when the layer differs.
pub(super) fn explain(
    client: &Client,
    pushed: &ManifestView,
    rebuilt: &image::Image,
    revision: &str,
    folder: &str,
) -> Result<(String, Option<String>)> {
    let pushed_layer = pushed.layers.first().map(|l| l.digest.clone());
    if pushed.layers.len() != 1 {
        return Ok((
            format!(
                "the image has {} layers; {folder} at commit {revision} builds one",
                pushed.layers.len()
            ),
            None,
        ));
    }
    if pushed_layer.as_deref() != Some(rebuilt.layer.digest.as_str()) {
        let digest = pushed_layer.unwrap_or_default();
        let blob = client.get_blob(&digest)?;
        let limit = inflate_limit(rebuilt.layer.uncompressed_size);
        let theirs = match tar_entries(&blob, limit) {
            Ok(t) => t,
            // Not what the commit builds, however it fails: a mismatch.
            Err(why) => {
                return Ok((
                    format!(
                        "the layer {digest} is not the gzip-compressed tar {folder} at commit {revision} builds: {why}"
                    ),
                    None,
                ));
            }
        };
        let mut ours_gz = Vec::new();
        std::fs::File::open(rebuilt.layer.file.path())
            .and_then(|mut f| f.read_to_end(&mut ours_gz))
            .map_err(|e| Error::io("reading the rebuilt layer", e))?;
        let ours = tar_entries(&ours_gz, u64::MAX).map_err(|m| Error::Registry {
            reference: rebuilt.layer.digest.clone(),
            what: "reading the rebuilt layer".into(),
            message: m,
            hint: None,
        })?;
        return Ok(match first_difference(&theirs, &ours) {
            Some((file, what)) => (
                format!("the layer differs from {folder} at commit {revision}: {what}"),
                Some(file),
            ),
            None => (
                format!(
                    "the layer holds the same files as {folder} at commit {revision}, but not the same bytes (another tar or gzip encoding)"
                ),
                None,
            ),
        });
    }
    if let Some(config) = pushed
        .config
        .as_ref()
        .filter(|c| c.digest != rebuilt.config_descriptor.digest)
    {
        let theirs = client.get_blob(&config.digest)?;
        let mut diffs = differences("label", &labels(&theirs), &labels(&rebuilt.config));
        match (
            serde_json::from_slice::<serde_json::Value>(&theirs),
            serde_json::from_slice::<serde_json::Value>(&rebuilt.config),
        ) {
            (Ok(t), Ok(o)) => config_fields("", &t, &o, &mut diffs),
            _ => diffs.push("the pushed config is not JSON".into()),
        }
        let what = if diffs.is_empty() {
            "(the same fields in other bytes: key order or whitespace)".to_string()
        } else {
            format!("({})", diffs.join("; "))
        };
        return Ok((
            format!("the layer is the commit's, but the image config differs {what}"),
            None,
        ));
    }
    let ours: ManifestView = ManifestView::parse(&rebuilt.manifest)?;
    let mut diffs = differences("annotation", &pushed.annotations, &ours.annotations);
    if diffs.is_empty() {
        diffs.push("the manifest's bytes differ (field order, whitespace or other fields)".into());
    }
    Ok((
        format!(
            "the files and config are {folder} at commit {revision}, but the manifest differs: {}",
            diffs.join("; ")
        ),
        None,
    ))
}

/// How the pushed `theirs` differs from the rebuilt `ours`, key by key.
/// What the rebuild adds is the commit's and the provenance's only.
fn differences(
    what: &str,
    theirs: &BTreeMap<String, String>,
    ours: &BTreeMap<String, String>,
) -> Vec<String> {
    let mut diffs = Vec::new();
    for (k, v) in theirs {
        match ours.get(k) {
            None => diffs.push(format!(
                "extra {what} {k}={v:?}, which neither the commit nor the provenance gives"
            )),
            Some(o) if o != v => diffs.push(format!(
                "{what} {k} is {v:?}, the commit and provenance give {o:?}"
            )),
            _ => {}
        }
    }
    for k in ours.keys() {
        if !theirs.contains_key(k) {
            diffs.push(format!("{what} {k} is missing"));
        }
    }
    diffs
}

/// The fields (as dotted paths, `config.Env`, `history`, `rootfs.diff_ids`)
/// where the pushed config `theirs` differs from the rebuilt `ours`; the
/// labels are compared apart, key by key.
fn config_fields(
    at: &str,
    theirs: &serde_json::Value,
    ours: &serde_json::Value,
    out: &mut Vec<String>,
) {
    use serde_json::Value;
    let short = |v: &Value| {
        let s = v.to_string();
        match s.char_indices().nth(80) {
            Some((i, _)) => format!("{}...", &s[..i]),
            None => s,
        }
    };
    let path = |k: &str| {
        if at.is_empty() {
            k.to_string()
        } else {
            format!("{at}.{k}")
        }
    };
    match (theirs, ours) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in a {
                let p = path(k);
                match b.get(k) {
                    _ if p == "config.Labels" => {}
                    // An object the commit's config lacks: name each field in it.
                    None if v.is_object() => {
                        config_fields(&p, v, &Value::Object(Default::default()), out)
                    }
                    None => out.push(format!(
                        "extra field {p} = {}, which the commit does not give",
                        short(v)
                    )),
                    Some(o) => config_fields(&p, v, o, out),
                }
            }
            for k in b.keys().filter(|k| !a.contains_key(*k)) {
                if path(k) != "config.Labels" {
                    out.push(format!("field {} is missing", path(k)));
                }
            }
        }
        (a, b) if a != b => out.push(format!(
            "field {at} is {}, the commit gives {}",
            short(a),
            short(b)
        )),
        _ => {}
    }
}

/// An image config's `config.Labels` (none when it is not such JSON: the
/// digest comparison has already failed, this only words it).
fn labels(config: &[u8]) -> BTreeMap<String, String> {
    serde_json::from_slice::<serde_json::Value>(config)
        .ok()
        .and_then(|v| serde_json::from_value(v.pointer("/config/Labels")?.clone()).ok())
        .unwrap_or_default()
}
