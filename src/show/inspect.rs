//! An inspection in words: what `inspect` prints.

use crate::image::ANNOTATION_REVISION;
use crate::inspect::Inspection;
use crate::rollout::Record;

/// Adds to each rollout record referrer its line in words (`summary`,
/// [`super::rollout::record`]), which `--json` shows too.
pub(crate) fn add_summaries(found: &mut Inspection) {
    for r in &mut found.referrers {
        if r.kind.as_deref() != Some("rollout") {
            continue;
        }
        let Some(serde_json::Value::Object(map)) = &mut r.details else {
            continue;
        };
        let Ok(record) = serde_json::from_value::<Record>(serde_json::Value::Object(map.clone()))
        else {
            continue;
        };
        map.insert("summary".into(), super::rollout::record(&record).into());
    }
}

/// A short human summary.
pub(crate) fn inspection(found: &Inspection) -> String {
    let mut s = format!("{}@{}\n", found.repository, found.digest);
    for (k, v) in &found.annotations {
        let k = k.strip_prefix("org.opencontainers.image.").unwrap_or(k);
        s.push_str(&format!("  {k}: {v}\n"));
    }
    if found.referrers.is_empty() {
        s.push_str("no referrers (no provenance)\n");
    }
    if !found.refs.is_empty() {
        s.push_str(&format!("published by: {}\n", found.refs.join(", ")));
    }
    for r in &found.referrers {
        let kind = r
            .kind
            .clone()
            .or_else(|| r.artifact_type.clone())
            .unwrap_or_else(|| "referrer".into());
        s.push_str(&format!("{kind} {}\n", r.digest));
        if let Some(rev) = r.annotations.get(ANNOTATION_REVISION) {
            s.push_str(&format!("  revision: {rev}\n"));
        }
        let summary = r
            .details
            .as_ref()
            .and_then(|d| d.get("summary"))
            .and_then(|v| v.as_str());
        if let (Some("rollout"), Some(line)) = (r.kind.as_deref(), summary) {
            s.push_str(&format!("  {line}\n"));
        } else if let Some(serde_json::Value::Object(map)) = &r.details {
            for (k, v) in map {
                match v {
                    serde_json::Value::Null => {}
                    serde_json::Value::Bool(true) if k == "subject_matches" => {}
                    serde_json::Value::Bool(false) if k == "subject_matches" => s.push_str(
                        "  WARNING: the statement is about another image, not this digest\n",
                    ),
                    serde_json::Value::String(t) => s.push_str(&format!("  {k}: {t}\n")),
                    other => s.push_str(&format!("  {k}: {other}\n")),
                }
            }
        }
        if let Some(e) = &r.error {
            s.push_str(&format!("  unreadable: {e}\n"));
        }
    }
    s
}
