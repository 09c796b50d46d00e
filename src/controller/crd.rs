//! The `SettingsImage` custom resource (`settings-image.configbutler.io/v1alpha1`)
//! and the part of Flux's `GitRepository` the controller reads.
//!
//! The CRD in `config/crd/` is generated from these types ([`crd_yaml`],
//! printed by `settings-image controller --print-crd`); `tests/controller.rs`
//! checks the committed file equals it, so the schema the API server
//! enforces is the one serde reads.
//!
//! Why our own `Condition` and not `k8s-openapi`'s: its schema would need
//! `k8s-openapi`'s `schemars` feature for one struct; this one is the same
//! shape (metav1.Condition, as Flux's kstatus conditions are).

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The API group of [`SettingsImage`].
pub const GROUP: &str = "settings-image.configbutler.io";

/// Publishes a folder of a Flux GitRepository as a settings image each time
/// source-controller fetches a new revision: the same image, timestamp tag
/// and digest `settings-image push` makes for that commit.
#[derive(CustomResource, Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "settings-image.configbutler.io",
    version = "v1alpha1",
    kind = "SettingsImage",
    namespaced,
    status = "SettingsImageStatus",
    shortname = "si",
    category = "flux",
    derive = "PartialEq",
    doc = "SettingsImage publishes a folder of a Flux GitRepository as an OCI settings image (an image volume) on every new revision.",
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Status","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].message"}"#,
    printcolumn = r#"{"name":"Revision","type":"string","jsonPath":".status.lastHandledRevision","priority":1}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct SettingsImageSpec {
    /// The Flux GitRepository whose fetched revisions are published.
    pub source_ref: SourceRef,
    /// The settings folder in the repository (`configs/shop`), or a glob
    /// (`configs/*`: one image per folder, as the CLI takes it).
    #[schemars(length(min = 1))]
    pub path: String,
    /// The image repository, `HOST/NAME`; with a glob a template where
    /// `{name}` is a folder's last component and `{path}` its slug.
    #[schemars(length(min = 1))]
    pub repository: String,
    /// The timestamp tag prefix (`PREFIX-<unix committer time>-<sha7>`);
    /// default: the GitRepository's branch (`spec.ref.branch`, or the one
    /// `spec.ref.name: refs/heads/BRANCH` names).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp_tag: Option<String>,
    /// A moving tag that follows the newest commit and never moves back
    /// (e.g. `main`); none when not set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch_tag: Option<String>,
    /// Attach SLSA provenance to each image as a referrer.
    #[serde(default = "yes")]
    pub provenance: bool,
    /// Plain HTTP to the registry (as Flux's ImageRepository has it).
    #[serde(default)]
    pub insecure: bool,
    /// A `kubernetes.io/dockerconfigjson` Secret in this namespace with
    /// the registry's credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalObjectReference>,
    /// The registry login: `generic` (the secretRef, else anonymous), or
    /// the cloud's workload identity (`aws`, `azure`, `gcp`).
    #[serde(default)]
    pub provider: Provider,
    /// Publish nothing while true.
    #[serde(default)]
    pub suspend: bool,
    /// How often to check the registry holds the current revision's image
    /// again (Go duration, e.g. `10m`); default `10m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"))]
    pub interval: Option<String>,
}

fn yes() -> bool {
    true
}

/// A reference to the source of a [`SettingsImage`].
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SourceRef {
    /// The kind of the source: only `GitRepository`.
    pub kind: SourceKind,
    /// Its name.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Its namespace; default: the SettingsImage's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// The kinds of source a SettingsImage can follow.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub enum SourceKind {
    /// Flux's `source.toolkit.fluxcd.io` GitRepository.
    GitRepository,
}

/// A Secret in the same namespace.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub struct LocalObjectReference {
    /// The Secret's name.
    #[schemars(length(min = 1))]
    pub name: String,
}

/// How the controller logs in to the registry (Flux's ImageRepository
/// `provider`).
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    /// `secretRef`, else anonymous.
    #[default]
    Generic,
    /// Amazon ECR through the pod's web identity (IRSA: `AWS_ROLE_ARN`,
    /// `AWS_WEB_IDENTITY_TOKEN_FILE`).
    Aws,
    /// Azure Container Registry through workload identity
    /// (`AZURE_CLIENT_ID`, `AZURE_TENANT_ID`, `AZURE_FEDERATED_TOKEN_FILE`).
    Azure,
    /// Google Artifact Registry through workload identity federation
    /// (`GOOGLE_APPLICATION_CREDENTIALS`, an `external_account` file).
    Gcp,
}

/// What the controller last did.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SettingsImageStatus {
    /// The generation of the spec the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`, `Reconciling` and `Stalled`, in the kstatus convention.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The GitRepository revision (`<branch>@sha1:<commit>`) last published.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_handled_revision: Option<String>,
    /// One entry per published folder, in path order; at most 128 KiB of
    /// them (a large glob under a deep prefix would outgrow what the API
    /// server stores).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<ImageStatus>,
    /// How many published folders `images` leaves out (the last ones in
    /// path order); the Ready message names the first of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images_omitted: Option<u32>,
}

/// One folder's image.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ImageStatus {
    /// The folder in the repository.
    pub path: String,
    /// `HOST/NAME`.
    pub repository: String,
    /// The timestamp tag.
    pub tag: String,
    /// The manifest digest (`sha256:...`).
    pub digest: String,
    /// The commit that last changed the folder (the tag's commit).
    pub commit: String,
    /// False when the registry already held the image under every tag.
    pub pushed: bool,
}

/// A condition, as `metav1.Condition`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// `Ready`, `Reconciling` or `Stalled`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// The generation the condition was set for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// When the status last changed (RFC 3339).
    pub last_transition_time: String,
    /// A CamelCase reason.
    pub reason: String,
    /// What happened, for people.
    pub message: String,
}

/// Records where the digests of an image repository ran: when a
/// Deployment, StatefulSet or DaemonSet of this namespace has fully rolled
/// out an image volume of `spec.repository` (every replica updated,
/// available and Ready), the controller (started with `--cluster-name`)
/// attaches a rollout record to that digest as an OCI referrer, and a
/// closing one when the run ends (`superseded`, `unavailable`, `deleted`).
#[derive(CustomResource, Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "settings-image.configbutler.io",
    version = "v1alpha1",
    kind = "SettingsRollout",
    namespaced,
    status = "SettingsRolloutStatus",
    shortname = "sro",
    category = "flux",
    derive = "PartialEq",
    doc = "SettingsRollout records, as OCI referrers, which digests of an image repository the workloads of its namespace have fully rolled out, and when those runs ended.",
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Workloads","type":"string","jsonPath":".status.workloads[*].name"}"#,
    printcolumn = r#"{"name":"Running","type":"string","jsonPath":".status.workloads[*].digest"}"#,
    printcolumn = r#"{"name":"Since","type":"string","jsonPath":".status.workloads[*].readySince"}"#,
    printcolumn = r#"{"name":"Status","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].message","priority":1}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct SettingsRolloutSpec {
    /// The image repository, `HOST/NAME`, whose digests the workloads
    /// mount (`volumes[].image.reference: HOST/NAME:TAG@sha256:...`); the
    /// records go to that repository.
    #[schemars(length(min = 1))]
    pub repository: String,
    /// Plain HTTP to the registry.
    #[serde(default)]
    pub insecure: bool,
    /// A `kubernetes.io/dockerconfigjson` Secret in this namespace with
    /// the registry's credentials (push access: records are written).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalObjectReference>,
    /// The registry login, as a SettingsImage's `provider`.
    #[serde(default)]
    pub provider: Provider,
    /// Only the workloads of this namespace whose labels match; default:
    /// every Deployment, StatefulSet and DaemonSet of the namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// How long a workload may stay not fully available (or take to become
    /// so) before its run is recorded as ended `unavailable` (Go duration);
    /// default `10m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"))]
    pub grace_period: Option<String>,
}

/// A label selector, as `metav1.LabelSelector`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    /// Labels that must all be present with these values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    /// Requirements that must all hold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

/// One requirement of a [`LabelSelector`].
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub struct LabelSelectorRequirement {
    /// The label.
    pub key: String,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist`.
    pub operator: SelectorOperator,
    /// The values of `In` and `NotIn`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

/// A label selector operator.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub enum SelectorOperator {
    /// The label's value is one of `values`.
    In,
    /// The label is missing or its value is none of `values`.
    NotIn,
    /// The label is present.
    Exists,
    /// The label is missing.
    DoesNotExist,
}

impl LabelSelector {
    /// Whether `labels` match.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|e| {
                let v = labels.get(&e.key);
                match e.operator {
                    SelectorOperator::In => v.is_some_and(|v| e.values.contains(v)),
                    SelectorOperator::NotIn => v.is_none_or(|v| !e.values.contains(v)),
                    SelectorOperator::Exists => v.is_some(),
                    SelectorOperator::DoesNotExist => v.is_none(),
                }
            })
    }
}

/// What the controller last saw and recorded.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SettingsRolloutStatus {
    /// The generation of the spec the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready` (and `Stalled` while true), in the kstatus convention.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// One entry per workload that references a digest of the repository,
    /// by kind and name; what is recorded of its run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workloads: Vec<WorkloadStatus>,
}

/// One workload's run, as recorded.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadStatus {
    /// `Deployment`, `StatefulSet` or `DaemonSet`.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// The digest its pod template references.
    pub digest: String,
    /// `Progressing` (not yet fully rolled out), `Ready` (recorded),
    /// `Unavailable` (ended so, recorded).
    pub state: String,
    /// When the last replica became Ready (RFC 3339), once `Ready`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_since: Option<String>,
    /// Since when it has not been fully available, while it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable_since: Option<String>,
    /// The replicas it wants.
    #[serde(default)]
    pub replicas: u32,
    /// The digest of the last record written about this run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<String>,
}

/// The part of Flux's `GitRepository` (`source.toolkit.fluxcd.io/v1`) the
/// controller reads; unknown fields are ignored, and it is never written.
#[derive(CustomResource, Clone, Debug, Deserialize, Serialize)]
#[kube(
    group = "source.toolkit.fluxcd.io",
    version = "v1",
    kind = "GitRepository",
    namespaced,
    status = "GitRepositoryStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct GitRepositorySpec {
    /// The repository URL (`https://` or `http://`).
    pub url: String,
    /// The reference source-controller follows.
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    pub reference: Option<GitReference>,
    /// A Secret with `username`+`password` or `bearerToken`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalObjectReference>,
}

/// `spec.ref` of a GitRepository.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct GitReference {
    /// The branch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// A tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// A full reference name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
}

/// `status` of a GitRepository.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct GitRepositoryStatus {
    /// The last fetched artifact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact: Option<Artifact>,
}

/// `status.artifact` of a GitRepository.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct Artifact {
    /// `<branch>@sha1:<commit>`.
    #[serde(default)]
    pub revision: String,
}

/// A SettingsImage manifest as a file holds it (what `settings-image flux
/// --settings-image` reads), with the branch of the GitRepository it
/// follows when the file holds that too.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// `metadata.namespace`, when set.
    pub namespace: Option<String>,
    /// The spec.
    pub spec: SettingsImageSpec,
    /// What the file says of the GitRepository `spec.sourceRef` names.
    pub source: Option<Source>,
}

/// The GitRepository a [`Manifest`] follows, as the same file holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// It follows this branch (`spec.ref.branch`).
    Branch(String),
    /// It follows no branch (a tag, a semver range, a commit, or no
    /// `spec.ref`): the controller stalls such a SettingsImage
    /// (`UnsupportedSource`).
    NoBranch,
}

impl Manifest {
    /// Parses a file of one or more YAML documents: exactly one
    /// SettingsImage, and (optionally) the GitRepository it names among
    /// the others; `Err` says what is wrong.
    pub fn parse(text: &str) -> Result<Manifest, String> {
        use serde::Deserialize as _;
        let mut docs = Vec::new();
        for d in serde_yaml_ng::Deserializer::from_str(text) {
            let v = serde_json::Value::deserialize(d).map_err(|e| e.to_string())?;
            if !v.is_null() {
                docs.push(v);
            }
        }
        let kind_of = |v: &serde_json::Value| {
            (
                v.get("kind")
                    .and_then(|k| k.as_str())
                    .unwrap_or_default()
                    .to_string(),
                v.get("apiVersion")
                    .and_then(|k| k.as_str())
                    .unwrap_or_default()
                    .to_string(),
            )
        };
        let mut sis = docs
            .iter()
            .filter(|v| kind_of(v).0 == "SettingsImage" && kind_of(v).1.starts_with(GROUP));
        let Some(v) = sis.next() else {
            let held: Vec<String> = docs
                .iter()
                .map(|v| {
                    let (k, a) = kind_of(v);
                    format!("a {k:?} of {a:?}")
                })
                .collect();
            return Err(format!(
                "holds {}, not a SettingsImage of {GROUP}",
                if held.is_empty() {
                    "nothing".to_string()
                } else {
                    held.join(", ")
                }
            ));
        };
        if sis.next().is_some() {
            return Err("holds several SettingsImages; give one per file".into());
        }
        let spec: SettingsImageSpec =
            serde_json::from_value(v.get("spec").cloned().unwrap_or_default())
                .map_err(|e| format!("spec: {e}"))?;
        let namespace = v
            .pointer("/metadata/namespace")
            .and_then(|n| n.as_str())
            .map(str::to_string);
        // The GitRepository it names: same name, and the sourceRef's
        // namespace (default: the SettingsImage's).
        let want_ns = spec
            .source_ref
            .namespace
            .clone()
            .or_else(|| namespace.clone());
        let source = docs
            .iter()
            .filter(|d| {
                kind_of(d).0 == "GitRepository"
                    && kind_of(d).1.starts_with("source.toolkit.fluxcd.io/")
            })
            .find(|d| {
                d.pointer("/metadata/name").and_then(|n| n.as_str())
                    == Some(spec.source_ref.name.as_str())
                    && d.pointer("/metadata/namespace").and_then(|n| n.as_str())
                        == want_ns.as_deref()
            })
            .map(|d| {
                let text = |p: &str| {
                    d.pointer(p)
                        .and_then(|b| b.as_str())
                        .filter(|b| !b.is_empty())
                };
                // As the controller follows it: `spec.ref.branch`, or
                // `spec.ref.name: refs/heads/B`.
                match text("/spec/ref/branch")
                    .or_else(|| text("/spec/ref/name").and_then(|n| n.strip_prefix("refs/heads/")))
                {
                    Some(b) => Source::Branch(b.to_string()),
                    None => Source::NoBranch,
                }
            });
        Ok(Manifest {
            namespace,
            spec,
            source,
        })
    }
}

/// A CRD as YAML, exactly as committed in `config/crd/`: `settingsimages`
/// (`--print-crd`) or `settingsrollouts` (`--print-crd=settingsrollouts`).
pub fn crd_yaml(plural: &str) -> crate::Result<String> {
    use kube::CustomResourceExt;
    let (crd, flag) = match plural {
        "settingsimages" => (SettingsImage::crd(), "--print-crd"),
        "settingsrollouts" => (SettingsRollout::crd(), "--print-crd=settingsrollouts"),
        other => {
            return Err(crate::Error::input(
                format!("--print-crd={other}: no such CRD"),
                Some("give settingsimages (the default) or settingsrollouts".to_string()),
            ));
        }
    };
    let body = serde_yaml_ng::to_string(&crd).map_err(|e| crate::Error::Input {
        message: format!("serializing the {plural} CRD: {e}").into(),
        hint: None,
    })?;
    Ok(format!(
        "# Generated by `settings-image controller {flag}` from src/controller/crd.rs; do not edit.\n---\n{body}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SI: &str = "apiVersion: settings-image.configbutler.io/v1alpha1\nkind: SettingsImage\nmetadata: {name: shop, namespace: team}\nspec:\n  sourceRef: {kind: GitRepository, name: settings}\n  path: configs/shop\n  repository: ghcr.io/acme/settings-shop\n";

    fn repo(ns: &str, reference: &str) -> String {
        format!(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata: {{name: settings, namespace: {ns}}}\nspec:\n  url: https://git.example.com/acme/settings.git\n  ref: {reference}\n"
        )
    }

    #[test]
    fn the_branch_comes_from_the_git_repository_in_the_same_file() {
        let m = Manifest::parse(SI).unwrap();
        assert_eq!((m.namespace.as_deref(), m.source), (Some("team"), None));
        let both = format!("{}---\n{SI}", repo("team", "{branch: main}"));
        assert_eq!(
            Manifest::parse(&both).unwrap().source,
            Some(Source::Branch("main".into()))
        );
        // Another namespace's GitRepository of the same name is not it.
        let other = format!("{SI}---\n{}", repo("elsewhere", "{branch: main}"));
        assert_eq!(Manifest::parse(&other).unwrap().source, None);
        let named = format!("{SI}---\n{}", repo("team", "{name: refs/heads/prod}"));
        assert_eq!(
            Manifest::parse(&named).unwrap().source,
            Some(Source::Branch("prod".into()))
        );
        let tag = format!("{SI}---\n{}", repo("team", "{tag: v1.0.0}"));
        assert_eq!(
            Manifest::parse(&tag).unwrap().source,
            Some(Source::NoBranch)
        );
        let two = format!("{SI}---\n{SI}");
        assert!(Manifest::parse(&two).unwrap_err().contains("several"));
        let none = Manifest::parse(&repo("team", "{branch: main}")).unwrap_err();
        assert!(none.contains("\"GitRepository\""), "{none}");
    }
}
