//! The Flux objects as serde shapes (`ImageRepository`, `ImagePolicy`,
//! `ImageUpdateAutomation`), and how each is filled from the options.

use serde::Serialize;

use super::{Automation, Image, MANAGED_BY, Options, Provider};

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Object<S> {
    api_version: &'static str,
    kind: &'static str,
    metadata: Metadata,
    spec: S,
}

#[derive(Serialize)]
struct Metadata {
    name: String,
    namespace: String,
    labels: std::collections::BTreeMap<String, String>,
}

#[derive(Serialize)]
struct NameRef {
    name: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RepositorySpec {
    image: String,
    interval: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    provider: Option<Provider>,
    #[serde(skip_serializing_if = "Option::is_none")]
    secret_ref: Option<NameRef>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cert_secret_ref: Option<NameRef>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PolicySpec {
    image_repository_ref: NameRef,
    digest_reflection_policy: &'static str,
    filter_tags: FilterTags,
    policy: Policy,
}

#[derive(Serialize)]
struct FilterTags {
    pattern: String,
    extract: &'static str,
}

#[derive(Serialize)]
struct Policy {
    numerical: Numerical,
}

#[derive(Serialize)]
struct Numerical {
    order: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct AutomationSpec {
    interval: String,
    source_ref: SourceRef,
    git: Git,
    update: Update,
    policy_selector: Selector,
}

#[derive(Serialize)]
struct SourceRef {
    kind: &'static str,
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
}

#[derive(Serialize)]
struct Git {
    checkout: Checkout,
    commit: Commit,
    #[serde(skip_serializing_if = "Option::is_none")]
    push: Option<Push>,
}

#[derive(Serialize)]
struct Checkout {
    #[serde(rename = "ref")]
    reference: Branch,
}

#[derive(Serialize)]
struct Branch {
    branch: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Commit {
    author: Author,
    message_template: String,
}

#[derive(Serialize)]
struct Author {
    name: String,
    email: String,
}

#[derive(Serialize)]
struct Push {
    branch: String,
}

#[derive(Serialize)]
struct Update {
    path: String,
    strategy: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Selector {
    match_labels: std::collections::BTreeMap<String, String>,
}

/// An object's name and namespace, with the [`MANAGED_BY`] label.
fn metadata(name: &str, namespace: &str) -> Metadata {
    Metadata {
        name: name.to_string(),
        namespace: namespace.to_string(),
        labels: [(MANAGED_BY.0.to_string(), MANAGED_BY.1.to_string())].into(),
    }
}

/// The `ImageRepository` of one image: where Flux lists its tags, every
/// `interval`, logging in with the options' secret or `provider`.
pub(super) fn image_repository(
    image: &Image,
    opts: &Options,
    interval: &str,
    provider: Option<Provider>,
) -> Object<RepositorySpec> {
    Object {
        api_version: "image.toolkit.fluxcd.io/v1",
        kind: "ImageRepository",
        metadata: metadata(&image.name, &opts.namespace),
        spec: RepositorySpec {
            image: image.repository.clone(),
            interval: interval.to_string(),
            provider,
            secret_ref: opts.secret.as_ref().map(|s| NameRef { name: s.clone() }),
            cert_secret_ref: opts
                .cert_secret
                .as_ref()
                .map(|s| NameRef { name: s.clone() }),
        },
    }
}

/// The `ImagePolicy` of one image: the newest tag `pattern` matches, by the
/// committer time it extracts (`ts`), its digest read once.
pub(super) fn image_policy(image: &Image, namespace: &str, pattern: &str) -> Object<PolicySpec> {
    Object {
        api_version: "image.toolkit.fluxcd.io/v1",
        kind: "ImagePolicy",
        metadata: metadata(&image.name, namespace),
        spec: PolicySpec {
            image_repository_ref: NameRef {
                name: image.name.clone(),
            },
            digest_reflection_policy: "IfNotPresent",
            filter_tags: FilterTags {
                pattern: pattern.to_string(),
                extract: "$ts",
            },
            policy: Policy {
                numerical: Numerical { order: "asc" },
            },
        },
    }
}

/// The one `ImageUpdateAutomation`: rewrites the marked lines under the
/// automation's folder, for the policies carrying [`MANAGED_BY`] only.
pub(super) fn image_update_automation(
    a: &Automation,
    namespace: &str,
    interval: &str,
) -> Object<AutomationSpec> {
    Object {
        api_version: "image.toolkit.fluxcd.io/v1",
        kind: "ImageUpdateAutomation",
        metadata: metadata(&a.name, namespace),
        spec: AutomationSpec {
            interval: interval.to_string(),
            source_ref: SourceRef {
                kind: "GitRepository",
                name: a.source.clone(),
                namespace: a
                    .source_namespace
                    .clone()
                    .filter(|ns| ns.as_str() != namespace),
            },
            git: Git {
                checkout: Checkout {
                    reference: Branch {
                        branch: a.branch.clone(),
                    },
                },
                commit: Commit {
                    author: Author {
                        name: a.author_name.clone(),
                        email: a.author_email.clone(),
                    },
                    message_template: "{{range .Changed.Changes}}{{print .OldValue}} -> {{println .NewValue}}{{end}}".into(),
                },
                push: a.push_branch.as_ref().map(|b| Push { branch: b.clone() }),
            },
            update: Update {
                path: a.path.clone(),
                strategy: "Setters",
            },
            policy_selector: Selector {
                match_labels: [(MANAGED_BY.0.to_string(), MANAGED_BY.1.to_string())].into(),
            },
        },
    }
}
