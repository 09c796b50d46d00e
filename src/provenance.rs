//! Provenance: an in-toto Statement v1 with a SLSA provenance v1 predicate
//! that says which commit, ref and folder an image was built from, by which
//! builder and run. It is attached to the pushed image as an OCI referrer
//! (`artifactType` `application/vnd.in-toto+json`). Building the statement
//! is pure; [`attach`] does the registry part through
//! [`Client`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::history::{Checkout, CommitInfo};
use crate::image::artifact::Artifact;
use crate::image::{ANNOTATION_CREATED, ANNOTATION_REVISION, Descriptor, Metadata};
use crate::registry::Client;

/// The referrer's `artifactType` and its layer's media type.
pub const ARTIFACT_TYPE: &str = "application/vnd.in-toto+json";
/// The statement's file name on its layer (`oras pull` saves it so).
pub const FILE_NAME: &str = "provenance.intoto.json";
/// in-toto Statement v1 `_type`.
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
/// SLSA provenance v1 `predicateType`.
pub const PREDICATE_TYPE: &str = "https://slsa.dev/provenance/v1";
/// The annotation on a provenance referrer naming the git ref its run
/// built (`refs/heads/main`), so runs are told apart without reading the
/// statement.
pub const ANNOTATION_REF: &str = "dev.settings-image.provenance.ref";
/// The `buildType` of a settings-image push.
pub const BUILD_TYPE: &str = "https://github.com/ConfigButler/settings-image/push/v1";

/// What the provenance states about one build.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Facts {
    /// The source repository URL (`https://github.com/OWNER/REPO`), when known.
    pub repository: Option<String>,
    /// The git ref built (`GITHUB_REF`, else the checked-out branch).
    pub git_ref: Option<String>,
    /// The folder relative to the repository root (`.` for the root).
    pub path: String,
    /// The commit the content comes from.
    pub commit: String,
    /// Its committer time, RFC 3339 (the annotations' `created`).
    pub committed_at: String,
    /// `builder.id`: the action's repository and ref, or `settings-image/<version>`.
    pub builder_id: String,
    /// The workflow run URL with run id and attempt, in GitHub Actions.
    pub invocation_id: Option<String>,
    /// `GITHUB_WORKFLOW_REF`, in GitHub Actions.
    pub workflow_ref: Option<String>,
    /// The manifest annotations the caller added beyond the history's
    /// (`externalParameters.annotations`): what `verify` rebuilds with.
    pub annotations: BTreeMap<String, String>,
    /// The config labels the caller added beyond the history's
    /// (`externalParameters.labels`).
    pub labels: BTreeMap<String, String>,
}

/// What the CI run says about a build, assembled by the front end (in
/// GitHub Actions, from the runner's environment); empty outside CI.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ci {
    /// The git ref built (`refs/heads/main`), when the CI names it.
    pub git_ref: Option<String>,
    /// `builder.id`: the action's repository and ref.
    pub builder_id: Option<String>,
    /// The run URL with run id and attempt.
    pub invocation_id: Option<String>,
    /// The workflow's ref (`owner/repo/.github/workflows/x.yml@ref`).
    pub workflow_ref: Option<String>,
}

impl Facts {
    /// The facts for the folder of `checkout` built from `commit`: what the
    /// CI says first, then the checkout (its branch, the folder's place).
    /// `repository` is the source URL the image's annotations name;
    /// `added` the caller's annotations and labels the image carries.
    pub fn collect(
        checkout: &Checkout,
        commit: &CommitInfo,
        repository: Option<String>,
        ci: &Ci,
        added: &Metadata,
    ) -> Facts {
        Facts {
            repository,
            git_ref: ci.git_ref.clone().or_else(|| checkout.repo().head_ref()),
            path: checkout.repo().display_path(),
            commit: commit.id.clone(),
            committed_at: commit.committed_at(),
            builder_id: ci
                .builder_id
                .clone()
                .unwrap_or_else(|| format!("settings-image/{}", env!("CARGO_PKG_VERSION"))),
            invocation_id: ci.invocation_id.clone(),
            workflow_ref: ci.workflow_ref.clone(),
            annotations: added.annotations.clone(),
            labels: added.labels.clone(),
        }
    }
}

#[derive(Serialize, Deserialize)]
struct Statement {
    #[serde(rename = "_type")]
    kind: String,
    subject: Vec<Subject>,
    #[serde(rename = "predicateType")]
    predicate_type: String,
    predicate: serde_json::Value,
}

#[derive(Serialize, Deserialize)]
struct Subject {
    name: String,
    digest: BTreeMap<String, String>,
}

/// The in-toto statement's bytes for the image `subject_name` (`HOST/NAME`)
/// with manifest digest `subject_digest` (`sha256:<hex>`).
pub fn statement(subject_name: &str, subject_digest: &str, facts: &Facts) -> Result<Vec<u8>> {
    let (alg, hex) = subject_digest
        .split_once(':')
        .ok_or_else(|| Error::input(format!("not a digest: {subject_digest}"), None))?;
    let mut external = serde_json::Map::new();
    if let Some(r) = &facts.repository {
        external.insert("repository".into(), r.clone().into());
    }
    if let Some(r) = &facts.git_ref {
        external.insert("ref".into(), r.clone().into());
    }
    external.insert("path".into(), facts.path.clone().into());
    if let Some(w) = &facts.workflow_ref {
        external.insert("workflow".into(), serde_json::json!({ "ref": w }));
    }
    // Only when there are some: statements without them stay as they were.
    if !facts.annotations.is_empty() {
        external.insert("annotations".into(), serde_json::json!(facts.annotations));
    }
    if !facts.labels.is_empty() {
        external.insert("labels".into(), serde_json::json!(facts.labels));
    }
    let uri = match (&facts.repository, &facts.git_ref) {
        (Some(r), Some(rf)) => format!("git+{r}@{rf}"),
        (Some(r), None) => format!("git+{r}"),
        (None, _) => "git+unknown".to_string(),
    };
    let mut metadata = serde_json::Map::new();
    if let Some(id) = &facts.invocation_id {
        metadata.insert("invocationId".into(), id.clone().into());
    }
    let predicate = serde_json::json!({
        "buildDefinition": {
            "buildType": BUILD_TYPE,
            "externalParameters": external,
            "internalParameters": {},
            "resolvedDependencies": [{
                "uri": uri,
                "digest": { "gitCommit": facts.commit },
            }],
        },
        "runDetails": {
            "builder": { "id": facts.builder_id },
            "metadata": metadata,
        },
    });
    let st = Statement {
        kind: STATEMENT_TYPE.to_string(),
        subject: vec![Subject {
            name: subject_name.to_string(),
            digest: BTreeMap::from([(alg.to_string(), hex.to_string())]),
        }],
        predicate_type: PREDICATE_TYPE.to_string(),
        predicate,
    };
    serde_json::to_vec(&st).map_err(|e| Error::json("serializing the provenance", e))
}

/// The referrer artifact for `facts`: the statement as its one layer,
/// revision, created (the commit time, never the clock) and the ref as
/// annotations.
pub fn artifact(subject_name: &str, subject_digest: &str, facts: &Facts) -> Result<Artifact> {
    let mut annotations = BTreeMap::from([
        (ANNOTATION_REVISION.to_string(), facts.commit.clone()),
        (ANNOTATION_CREATED.to_string(), facts.committed_at.clone()),
    ]);
    if let Some(r) = &facts.git_ref {
        annotations.insert(ANNOTATION_REF.to_string(), r.clone());
    }
    Ok(Artifact {
        artifact_type: ARTIFACT_TYPE.to_string(),
        layers: vec![(
            ARTIFACT_TYPE.to_string(),
            statement(subject_name, subject_digest, facts)?,
        )],
        annotations,
        title: Some(FILE_NAME.to_string()),
    })
}

/// What a provenance statement says, read back (for `inspect`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// The commit (`resolvedDependencies[0].digest.gitCommit`).
    pub commit: Option<String>,
    /// `externalParameters.ref`.
    #[serde(rename = "ref")]
    pub git_ref: Option<String>,
    /// `externalParameters.repository`.
    pub repository: Option<String>,
    /// `externalParameters.path`.
    pub path: Option<String>,
    /// `runDetails.builder.id`.
    pub builder: Option<String>,
    /// `runDetails.metadata.invocationId`.
    pub run: Option<String>,
    /// `externalParameters.workflow.ref`.
    pub workflow: Option<String>,
    /// `externalParameters.annotations`: the caller's manifest annotations.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// `externalParameters.labels`: the caller's config labels.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// True when the statement's subject digest is the image's digest.
    pub subject_matches: bool,
}

/// Reads a statement's bytes; `image_digest` is checked against its subject.
pub fn read_statement(bytes: &[u8], image_digest: &str) -> Result<Summary> {
    let st: Statement = serde_json::from_slice(bytes)
        .map_err(|e| Error::json("reading a provenance statement", e))?;
    let p = &st.predicate;
    let s = |ptr: &str| p.pointer(ptr).and_then(|v| v.as_str()).map(String::from);
    let subject_matches = st.subject.iter().any(|sub| {
        sub.digest
            .iter()
            .any(|(alg, hex)| format!("{alg}:{hex}") == image_digest)
    });
    Ok(Summary {
        commit: s("/buildDefinition/resolvedDependencies/0/digest/gitCommit"),
        git_ref: s("/buildDefinition/externalParameters/ref"),
        repository: s("/buildDefinition/externalParameters/repository"),
        path: s("/buildDefinition/externalParameters/path"),
        builder: s("/runDetails/builder/id"),
        run: s("/runDetails/metadata/invocationId"),
        workflow: s("/buildDefinition/externalParameters/workflow/ref"),
        annotations: strings(p, "/buildDefinition/externalParameters/annotations"),
        labels: strings(p, "/buildDefinition/externalParameters/labels"),
        subject_matches,
    })
}

/// The string values of the object at `ptr` (others are not ours: left out).
fn strings(v: &serde_json::Value, ptr: &str) -> BTreeMap<String, String> {
    v.pointer(ptr)
        .and_then(|o| o.as_object())
        .map(|o| {
            o.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// The provenance referrer of the image `subject_digest` already attached
/// for the same (commit, ref) as `facts`, if any: one statement per run
/// that published the digest, so a later run from another branch or a tag
/// push records its own, and a re-run of the same adds none. Not
/// first-writer-wins per digest: the image is byte-identical for every ref
/// that builds the same commit, so the digest alone would hide every ref
/// but the first from `inspect`.
/// `tag_listed` is what the caller's tag list says of the referrers tag
/// `sha256-<hex>` (`None`: not listed). The referrers API is asked first,
/// as the distribution spec has clients do, and the tag when the registry
/// has no API; a tag the list holds is read first instead (`read`: the
/// descriptors of its index, when the caller read it already), and a tag
/// it does not hold is not read.
pub fn attached(
    client: &Client,
    subject_digest: &str,
    facts: &Facts,
    tag_listed: Option<bool>,
    read: Option<&[Descriptor]>,
) -> Result<Option<String>> {
    let found = |list: &[Descriptor]| -> Result<Option<String>> {
        for d in same_revision(list, &facts.commit) {
            if ref_of(client, d, subject_digest)? == facts.git_ref
                && attests_added(client, d, subject_digest, facts)?
            {
                return Ok(Some(d.digest.clone()));
            }
        }
        Ok(None)
    };
    if tag_listed == Some(true) {
        let listed = match read {
            Some(list) => list
                .iter()
                .filter(|d| d.artifact_type.as_deref() == Some(ARTIFACT_TYPE))
                .cloned()
                .collect(),
            None => client.referrers_tag_list(subject_digest, Some(ARTIFACT_TYPE))?,
        };
        if let Some(d) = found(&listed)? {
            return Ok(Some(d));
        }
        // Not in the tag's index: a registry with the referrers API lists
        // what was pushed since.
        return match client.referrers_api(subject_digest, Some(ARTIFACT_TYPE))? {
            Some(list) => found(&list),
            None => Ok(None),
        };
    }
    match client.referrers_api(subject_digest, Some(ARTIFACT_TYPE))? {
        Some(list) => found(&list),
        None if tag_listed == Some(false) => Ok(None),
        None => found(&client.referrers_tag_list(subject_digest, Some(ARTIFACT_TYPE))?),
    }
}

fn same_revision<'a>(list: &'a [Descriptor], commit: &str) -> impl Iterator<Item = &'a Descriptor> {
    list.iter().filter(move |d| {
        d.artifact_type.as_deref() == Some(ARTIFACT_TYPE)
            && d.annotations.get(ANNOTATION_REVISION).map(String::as_str) == Some(commit)
    })
}

/// The refs that published the image `digest`, from its provenance
/// referrers. `tag_listed` is what the caller's tag list says of the
/// referrers tag `sha256-<hex>`: listed, only that index is read (one
/// request); not listed, only the referrers API is asked (a registry
/// without it has no referrers for the image then); `None`, both as
/// [`Client::referrers`] does. A referrer without the ref annotation
/// (written before it existed) costs a manifest and a blob read. Empty when
/// the image has no provenance or none records a ref.
pub fn refs_of(client: &Client, digest: &str, tag_listed: Option<bool>) -> Result<Vec<String>> {
    let referrers = match tag_listed {
        Some(true) => client.referrers_tag_list(digest, Some(ARTIFACT_TYPE))?,
        Some(false) => client
            .referrers_api(digest, Some(ARTIFACT_TYPE))?
            .unwrap_or_default(),
        None => client.referrers(digest, Some(ARTIFACT_TYPE))?,
    };
    let mut out = Vec::new();
    for d in referrers {
        if let Some(r) = ref_of(client, &d, digest)?
            && !out.contains(&r)
        {
            out.push(r);
        }
    }
    Ok(out)
}

/// The ref a provenance referrer records: its annotation, else (a referrer
/// written before the annotation existed) its statement's.
fn ref_of(client: &Client, desc: &Descriptor, image_digest: &str) -> Result<Option<String>> {
    if let Some(r) = desc.annotations.get(ANNOTATION_REF) {
        return Ok(Some(r.clone()));
    }
    let layer = client.referrer_layer(desc, ARTIFACT_TYPE)?;
    let bytes = client.get_blob(&layer.digest)?;
    Ok(read_statement(&bytes, image_digest)?.git_ref)
}

/// Whether the referrer's statement records the caller's annotations and
/// labels of `facts`. Read only when there are some: a statement written
/// before they were recorded does not attest them, so a re-run attaches one
/// that does (`verify` needs it). Without any, the digest says there are none.
fn attests_added(
    client: &Client,
    desc: &Descriptor,
    image_digest: &str,
    facts: &Facts,
) -> Result<bool> {
    if facts.annotations.is_empty() && facts.labels.is_empty() {
        return Ok(true);
    }
    let layer = client.referrer_layer(desc, ARTIFACT_TYPE)?;
    let s = read_statement(&client.get_blob(&layer.digest)?, image_digest)?;
    Ok(s.annotations == facts.annotations && s.labels == facts.labels)
}

/// Adds what to do to an error of attaching provenance after a push that
/// worked.
pub fn after_push_error(err: Error, reference: &str) -> Error {
    let extra = crate::text![
        format!(
            "the image itself was pushed as {reference}; run the same push again to attach the \
             provenance, or add "
        ),
        crate::field::Field::NoProvenance
    ];
    match err {
        Error::Registry {
            reference: r,
            what,
            message,
            hint,
        } => Error::Registry {
            reference: r,
            what: format!("attaching provenance: {what}"),
            message,
            hint: Some(match hint {
                Some(h) => h.then("; ").then(extra),
                None => extra,
            }),
        },
        Error::Auth {
            host,
            message,
            hint,
        } => Error::Auth {
            host,
            message: format!("attaching provenance: {message}"),
            hint: hint.then("; ").then(extra),
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> Facts {
        Facts {
            repository: Some("https://github.com/acme/settings".into()),
            git_ref: Some("refs/heads/main".into()),
            path: "configs/shop".into(),
            commit: "0123456789abcdef0123456789abcdef01234567".into(),
            committed_at: "2023-11-14T22:13:20Z".into(),
            builder_id: "https://github.com/acme/settings-image@v1".into(),
            invocation_id: Some(
                "https://github.com/acme/settings/actions/runs/42/attempts/2".into(),
            ),
            workflow_ref: Some("acme/settings/.github/workflows/push.yml@refs/heads/main".into()),
            annotations: BTreeMap::new(),
            labels: BTreeMap::new(),
        }
    }

    /// The statement is the in-toto Statement v1 / SLSA provenance v1
    /// document written out here by hand, and a document in that shape
    /// reads back as its fields.
    #[test]
    fn statement_is_the_slsa_document() {
        let hex = "ab".repeat(32);
        let digest = format!("sha256:{hex}");
        let bytes = statement("ghcr.io/acme/settings", &digest, &facts()).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "_type": "https://in-toto.io/Statement/v1",
                "subject": [{"name": "ghcr.io/acme/settings", "digest": {"sha256": hex}}],
                "predicateType": "https://slsa.dev/provenance/v1",
                "predicate": {
                    "buildDefinition": {
                        "buildType": "https://github.com/ConfigButler/settings-image/push/v1",
                        "externalParameters": {
                            "repository": "https://github.com/acme/settings",
                            "ref": "refs/heads/main",
                            "path": "configs/shop",
                            "workflow": {"ref": "acme/settings/.github/workflows/push.yml@refs/heads/main"},
                        },
                        "internalParameters": {},
                        "resolvedDependencies": [{
                            "uri": "git+https://github.com/acme/settings@refs/heads/main",
                            "digest": {"gitCommit": "0123456789abcdef0123456789abcdef01234567"},
                        }],
                    },
                    "runDetails": {
                        "builder": {"id": "https://github.com/acme/settings-image@v1"},
                        "metadata": {
                            "invocationId": "https://github.com/acme/settings/actions/runs/42/attempts/2",
                        },
                    },
                },
            })
        );
        // Without a ref, a repository or a run: those keys are left out.
        let bare = Facts {
            repository: None,
            git_ref: None,
            invocation_id: None,
            workflow_ref: None,
            ..facts()
        };
        let v: serde_json::Value =
            serde_json::from_slice(&statement("h/r", &digest, &bare).unwrap()).unwrap();
        assert_eq!(
            v["predicate"]["buildDefinition"]["externalParameters"],
            serde_json::json!({"path": "configs/shop"})
        );
        assert_eq!(
            v["predicate"]["buildDefinition"]["resolvedDependencies"][0]["uri"],
            "git+unknown"
        );
        assert_eq!(
            v["predicate"]["runDetails"]["metadata"],
            serde_json::json!({})
        );

        let doc = br#"{"_type":"https://in-toto.io/Statement/v1",
            "subject":[{"name":"h/r","digest":{"sha256":"cdcd"}}],
            "predicateType":"https://slsa.dev/provenance/v1",
            "predicate":{"buildDefinition":{"buildType":"x",
                "externalParameters":{"repository":"https://git.example/r","ref":"refs/tags/v1",
                    "path":"app","workflow":{"ref":"o/r/.github/workflows/w.yml@refs/tags/v1"},
                    "annotations":{"a":"1","n":2},"labels":{"team":"x"}},
                "resolvedDependencies":[{"uri":"git+https://git.example/r@refs/tags/v1",
                    "digest":{"gitCommit":"fedcba9876543210fedcba9876543210fedcba98"}}]},
            "runDetails":{"builder":{"id":"settings-image/9"},
                "metadata":{"invocationId":"https://ci.example/runs/7"}}}}"#;
        assert_eq!(
            read_statement(doc, "sha256:cdcd").unwrap(),
            Summary {
                commit: Some("fedcba9876543210fedcba9876543210fedcba98".into()),
                git_ref: Some("refs/tags/v1".into()),
                repository: Some("https://git.example/r".into()),
                path: Some("app".into()),
                builder: Some("settings-image/9".into()),
                run: Some("https://ci.example/runs/7".into()),
                workflow: Some("o/r/.github/workflows/w.yml@refs/tags/v1".into()),
                annotations: BTreeMap::from([("a".into(), "1".into())]),
                labels: BTreeMap::from([("team".into(), "x".into())]),
                subject_matches: true,
            }
        );
        assert!(!read_statement(doc, "sha256:00").unwrap().subject_matches);

        let art = artifact("ghcr.io/acme/settings", &digest, &facts()).unwrap();
        assert_eq!(art.artifact_type, "application/vnd.in-toto+json");
        assert_eq!(
            art.layers,
            [("application/vnd.in-toto+json".to_string(), bytes)]
        );
        assert_eq!(
            art.annotations,
            BTreeMap::from([
                (
                    "org.opencontainers.image.revision".to_string(),
                    "0123456789abcdef0123456789abcdef01234567".to_string()
                ),
                (
                    "org.opencontainers.image.created".to_string(),
                    "2023-11-14T22:13:20Z".to_string()
                ),
                (
                    "dev.settings-image.provenance.ref".to_string(),
                    "refs/heads/main".to_string()
                ),
            ])
        );
        let detached = Facts {
            git_ref: None,
            ..facts()
        };
        let art = artifact("ghcr.io/acme/settings", &digest, &detached).unwrap();
        assert!(
            !art.annotations
                .contains_key("dev.settings-image.provenance.ref")
        );
    }

    #[test]
    fn the_callers_annotations_and_labels_are_external_parameters() {
        let digest = format!("sha256:{}", "ab".repeat(32));
        let plain = statement("ghcr.io/acme/settings", &digest, &facts()).unwrap();
        let plain: serde_json::Value = serde_json::from_slice(&plain).unwrap();
        let added = Facts {
            annotations: BTreeMap::from([("org.opencontainers.image.title".into(), "shop".into())]),
            labels: BTreeMap::from([("team".into(), "a=b".into())]),
            ..facts()
        };
        let bytes = statement("ghcr.io/acme/settings", &digest, &added).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        // The plain statement with exactly these two objects added.
        let mut want = plain.clone();
        let external = want["predicate"]["buildDefinition"]["externalParameters"]
            .as_object_mut()
            .unwrap();
        assert!(!external.contains_key("annotations") && !external.contains_key("labels"));
        external.insert(
            "annotations".into(),
            serde_json::json!({"org.opencontainers.image.title": "shop"}),
        );
        external.insert("labels".into(), serde_json::json!({"team": "a=b"}));
        assert_eq!(v, want);
    }
}
