//! How an attempt ended ([`Step`]), and the pure readings that make one
//! from what the reconcile read: the GitRepository (or the API server's
//! answer instead), its fetched revision, a Secret, the publish's outcome
//! or error. `super::observe` does the reading; `super::decide` turns the
//! step into what is written.

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;

use crate::controller::crd::{GitRepository, Provider, SettingsImageSpec};
use crate::controller::publish::PublishReport;
use crate::controller::redact::Held;
use crate::controller::{source, spec, watch};
use crate::error::{Error, GitFailure};
use crate::many::LowerCased;
use crate::pipeline::FolderImage;

/// How an attempt ended.
#[derive(Debug)]
pub enum Step {
    /// `spec.suspend`: nothing was read or published.
    Suspended,
    /// The commit was published (or the registry already held it).
    Published {
        /// `status.artifact.revision` as source-controller wrote it.
        revision: String,
        /// Each folder's result.
        images: Vec<FolderImage>,
        /// The folders whose repository name was lower-cased.
        notices: Vec<LowerCased>,
    },
    /// The same revision and spec, published and checked within the
    /// interval: nobody was asked.
    Unchanged {
        /// What is left of the interval.
        wait: Duration,
    },
    /// Waiting for the source (no artifact yet, or one not understood).
    Waiting {
        /// The Ready reason.
        reason: &'static str,
        /// What it waits for.
        message: String,
    },
    /// An error a retry will not fix: the spec, a Secret or the source
    /// must change.
    Stalled {
        /// The Ready reason.
        reason: &'static str,
        /// What is wrong, starting with the field.
        message: String,
    },
    /// An error a retry may fix (the network, a server).
    Failed {
        /// The Ready reason.
        reason: &'static str,
        /// What failed.
        message: String,
    },
}

/// A [`Step::Stalled`].
pub fn stalled(reason: &'static str, message: impl Into<String>) -> Step {
    Step::Stalled {
        reason,
        message: message.into(),
    }
}

/// A [`Step::Failed`].
pub fn failed(reason: &'static str, message: impl Into<String>) -> Step {
    Step::Failed {
        reason,
        message: message.into(),
    }
}

impl Step {
    /// The step with every credential `held` holds taken out of its words.
    pub fn scrubbed(self, held: &Held) -> Step {
        let s = |m: String| held.scrub(&m);
        match self {
            Step::Waiting { reason, message } => Step::Waiting {
                reason,
                message: s(message),
            },
            Step::Stalled { reason, message } => Step::Stalled {
                reason,
                message: s(message),
            },
            Step::Failed { reason, message } => Step::Failed {
                reason,
                message: s(message),
            },
            // The notes are scrubbed where they are made (from reports).
            other => other,
        }
    }
}

/// The Ready reason, and whether it stalls, for an error of the pipeline.
///
/// A fetch past `--fetch-max-*` ([`GitFailure::TooLarge`]) is
/// `GitOperationFailed` and retried with backoff, as docs/controller.md
/// says: the server may send less once the commit that brought the large
/// object is gone.
pub fn classify(e: &Error) -> (&'static str, bool) {
    match e {
        // What failed after the image was published decides.
        Error::AfterPublish { error, .. } => classify(error),
        Error::Git { kind, .. } => match kind {
            GitFailure::Auth => ("GitAuthenticationFailed", false),
            GitFailure::NotFound => ("GitRevisionNotFound", false),
            _ => ("GitOperationFailed", false),
        },
        Error::Registry { .. } => ("RegistryOperationFailed", false),
        Error::Auth { .. } => ("RegistryAuthenticationFailed", false),
        Error::TagExists { .. } | Error::TagRaced { .. } | Error::ChannelMismatch { .. } => {
            ("TagConflict", true)
        }
        Error::Rewind { .. } => ("HistoryRewritten", true),
        // Another ref publishes under spec.timestampTag: a new prefix fixes it.
        Error::PrefixShared { .. } => ("PrefixShared", true),
        Error::Input { .. } => ("InvalidSpec", true),
        Error::Source { .. } | Error::History { .. } => ("BuildFailed", true),
        Error::Io { .. }
        | Error::Json { .. }
        | Error::Layout { .. }
        | Error::GitHub { .. }
        | Error::Mismatch { .. }
        | Error::OutputClosed
        // Never the error of a publish (the process exits on it).
        | Error::LeaseLost { .. } => ("PublishFailed", false),
    }
}

/// An error and its hint as one message.
pub fn message_of(e: &Error) -> String {
    spec::said(e)
}

/// The step a publish of `revision` ended on.
pub fn published(revision: String, outcome: crate::error::Result<PublishReport>) -> Step {
    match outcome {
        Ok(outcome) => Step::Published {
            revision,
            images: outcome.images,
            notices: outcome.notices,
        },
        Err(e) => {
            let (reason, stalls) = classify(&e);
            let message = format!("revision {revision}: {}", message_of(&e));
            if stalls {
                stalled(reason, message)
            } else {
                failed(reason, message)
            }
        }
    }
}

/// `spec.interval` raised to the operator's floor, and the notice that
/// says so when it was.
pub fn interval_floor(
    interval: Duration,
    min_interval: Duration,
    spec_interval: Option<&str>,
) -> (Duration, Option<String>) {
    if interval >= min_interval {
        return (interval, None);
    }
    let notice = format!(
        "spec.interval {} is below the controller's --min-interval: checked every {}",
        spec_interval.unwrap_or_default(),
        spec::format_duration(min_interval),
    );
    (min_interval, Some(notice))
}

/// The GitRepository a SettingsImage follows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Followed {
    /// Its namespace (the SettingsImage's unless `spec.sourceRef` names one).
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// `GitRepository NS/NAME`, for messages.
    pub what: String,
}

impl Followed {
    /// The source `spec` names for a SettingsImage in `ns`; a stalled step
    /// when it is in another namespace and `cross_namespace_refs` is off.
    pub fn of(
        spec: &SettingsImageSpec,
        ns: &str,
        cross_namespace_refs: bool,
    ) -> Result<Self, Step> {
        let namespace = spec
            .source_ref
            .namespace
            .as_deref()
            .filter(|n| !n.is_empty())
            .unwrap_or(ns);
        let name = &spec.source_ref.name;
        let what = format!("GitRepository {namespace}/{name}");
        // One tenant may not read another's repository (with its Secret)
        // by naming it: Flux's rule for cross-namespace references.
        if namespace != ns && !cross_namespace_refs {
            return Err(stalled(
                "AccessDenied",
                format!(
                    "spec.sourceRef.namespace: {what} is in another namespace than this SettingsImage ({ns}); cross-namespace references are refused (the controller runs without --allow-cross-namespace-refs)"
                ),
            ));
        }
        Ok(Followed {
            namespace: namespace.to_string(),
            name: name.clone(),
            what,
        })
    }

    /// The GitRepository from the API server's answer to reading it.
    pub fn found(
        &self,
        read: Result<Option<GitRepository>, kube::Error>,
    ) -> Result<GitRepository, Step> {
        let what = &self.what;
        match read {
            Ok(Some(r)) => Ok(r),
            Ok(None) => Err(stalled(
                "SourceNotFound",
                format!("spec.sourceRef: {what} does not exist"),
            )),
            Err(kube::Error::Api(e)) if e.code == 403 => Err(stalled(
                "SourceForbidden",
                format!(
                    "spec.sourceRef: the controller may not read {what} ({}); a source in another namespace needs the controller to watch it",
                    e.message
                ),
            )),
            // The type itself is not served: the API server's plain 404.
            Err(e) if watch::type_not_served(&e) => {
                let w = watch::GIT_REPOSITORIES;
                Err(failed(
                    "SourceUnavailable",
                    format!(
                        "spec.sourceRef: the {} CRD ({}) is not installed: {}",
                        w.kind, w.api, w.install
                    ),
                ))
            }
            Err(e) => Err(failed("SourceUnavailable", format!("reading {what}: {e}"))),
        }
    }
}

/// Whether `spec.provider` may log in to `host` for a SettingsImage in
/// `ns`: the operator's `--provider-namespaces` allows the namespace (the
/// identity is the controller's, not the tenant's), and the provider owns
/// the host (its credential goes to no other: `crate::login::hosts`).
/// Checked before the pod's identity is read or any token requested.
pub fn provider_allowed(
    provider: Provider,
    ns: &str,
    allowed: &super::ProviderNamespaces,
    host: &str,
) -> Result<(), Step> {
    let name = crate::controller::login::name(provider);
    if !allowed.allows(ns) {
        return Err(stalled(
            "AccessDenied",
            format!(
                "spec.provider: {name} logs in with the controller's own cloud identity, which SettingsImages in \
                 namespace {ns} may not use (the controller's --provider-namespaces is {}); give spec.secretRef \
                 with this registry's credentials instead, or ask the cluster operator to add {ns} to \
                 --provider-namespaces",
                allowed.shown()
            ),
        ));
    }
    if let Some(exchange) = crate::controller::login::exchange_of(provider) {
        let asked = format!("spec.provider: {name}");
        crate::login::hosts::check(exchange, host, &asked).map_err(|e| {
            stalled(
                "InvalidProvider",
                format!(
                    "{e}; set spec.repository to the provider's registry, or use spec.secretRef (and \
                     spec.provider: generic) for {host}"
                ),
            )
        })?;
    }
    Ok(())
}

/// What source-controller fetched, and the branch the mirror follows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// `status.artifact.revision`, as written.
    pub revision: String,
    /// Its commit.
    pub commit: String,
    /// The GitRepository's branch, else the one the revision names.
    pub branch: String,
}

/// The revision `repo` announces; waiting while it has none (or one not
/// understood), stalled when it follows no branch.
pub fn fetched(repo: &GitRepository, what: &str) -> Result<Fetched, Step> {
    let Some(revision) = repo
        .status
        .as_ref()
        .and_then(|s| s.artifact.as_ref())
        .map(|a| a.revision.clone())
        .filter(|r| !r.is_empty())
    else {
        return Err(Step::Waiting {
            reason: "ArtifactNotReady",
            message: format!(
                "waiting for source-controller to fetch {what} (no status.artifact.revision yet)"
            ),
        });
    };
    let Some(parsed) = source::parse_revision(&revision) else {
        return Err(Step::Waiting {
            reason: "InvalidRevision",
            message: format!(
                "{what} status.artifact.revision {revision:?} is not <ref>@sha1:<commit>"
            ),
        });
    };
    // The mirror follows a branch: the GitRepository's, else the one the
    // revision names.
    let branch = repo
        .spec
        .reference
        .as_ref()
        .and_then(|r| r.branch.clone())
        .filter(|b| !b.is_empty())
        .or_else(|| {
            parsed
                .reference
                .as_deref()
                .and_then(|r| r.strip_prefix("refs/heads/"))
                .map(str::to_string)
        });
    let Some(branch) = branch else {
        return Err(stalled(
            "UnsupportedSource",
            format!(
                "spec.sourceRef: {what} does not follow a branch (spec.ref.branch); the controller publishes from a branch's history"
            ),
        ));
    };
    Ok(Fetched {
        revision,
        commit: parsed.commit,
        branch,
    })
}

/// A Secret read failed: which step to take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretError {
    /// It does not exist.
    Missing(String),
    /// The controller may not read it.
    Forbidden(String),
    /// The API server failed.
    Api(String),
}

impl SecretError {
    /// The step, its message starting with `field`.
    pub fn within(self, field: &str) -> Step {
        match self {
            SecretError::Missing(m) => stalled("SecretNotFound", format!("{field}: {m}")),
            SecretError::Forbidden(m) => stalled("SecretForbidden", format!("{field}: {m}")),
            SecretError::Api(m) => failed("SecretUnavailable", format!("{field}: {m}")),
        }
    }
}

/// The Secret `ns/name` from the API server's answer to reading it.
pub fn secret_found(
    read: Result<Option<Secret>, kube::Error>,
    ns: &str,
    name: &str,
) -> Result<Secret, SecretError> {
    match read {
        Ok(Some(s)) => Ok(s),
        Ok(None) => Err(SecretError::Missing(format!(
            "Secret {ns}/{name} does not exist"
        ))),
        Err(kube::Error::Api(e)) if e.code == 403 => Err(SecretError::Forbidden(format!(
            "the controller may not read Secret {ns}/{name} ({})",
            e.message
        ))),
        Err(e) => Err(SecretError::Api(format!("reading Secret {ns}/{name}: {e}"))),
    }
}

#[cfg(test)]
#[path = "step_tests.rs"]
mod tests;
