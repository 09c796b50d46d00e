//! The readings that make a [`Step`] from what a reconcile read, each
//! checked without an API server: the API server's answers are built as
//! kube-client returns them.

use super::*;
use crate::controller::crd::{Artifact, GitReference, GitRepositorySpec, GitRepositoryStatus};

const C: &str = "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567";

/// The API server's answer with HTTP `code` (and `reason`, as it sends it).
fn api_error(code: u16, reason: &str, message: &str) -> kube::Error {
    kube::Error::Api(Box::new(kube::core::Status {
        code,
        reason: reason.into(),
        message: message.into(),
        ..Default::default()
    }))
}

fn spec(source_namespace: Option<&str>) -> SettingsImageSpec {
    let mut source_ref = serde_json::json!({"kind": "GitRepository", "name": "settings"});
    if let Some(ns) = source_namespace {
        source_ref["namespace"] = ns.into();
    }
    serde_json::from_value(serde_json::json!({
        "sourceRef": source_ref,
        "path": "app",
        "repository": "reg.example/acme/app",
    }))
    .unwrap()
}

fn repo(branch: Option<&str>, revision: Option<&str>) -> GitRepository {
    let mut r = GitRepository::new(
        "settings",
        GitRepositorySpec {
            url: "https://git.example/acme/settings.git".into(),
            reference: branch.map(|b| GitReference {
                branch: Some(b.into()),
                ..Default::default()
            }),
            secret_ref: None,
        },
    );
    r.status = revision.map(|rev| GitRepositoryStatus {
        artifact: Some(Artifact {
            revision: rev.into(),
        }),
    });
    r
}

/// `(reason, message, stalls)` of a step that is not a success.
fn said(step: &Step) -> (&'static str, &str, bool) {
    match step {
        Step::Stalled { reason, message } => (reason, message, true),
        Step::Failed { reason, message } | Step::Waiting { reason, message } => {
            (reason, message, false)
        }
        other => panic!("not a failure: {other:?}"),
    }
}

#[test]
fn a_source_in_another_namespace_is_refused_unless_allowed() {
    let own = Followed::of(&spec(None), "b", false).unwrap();
    assert_eq!(
        (own.namespace.as_str(), own.what.as_str()),
        ("b", "GitRepository b/settings")
    );
    let step = Followed::of(&spec(Some("a")), "b", false).unwrap_err();
    assert_eq!(
        said(&step),
        (
            "AccessDenied",
            "spec.sourceRef.namespace: GitRepository a/settings is in another namespace than this \
             SettingsImage (b); cross-namespace references are refused (the controller runs \
             without --allow-cross-namespace-refs)",
            true
        )
    );
    let other = Followed::of(&spec(Some("a")), "b", true).unwrap();
    assert_eq!(other.namespace, "a");
}

/// A missing or forbidden GitRepository stalls naming `spec.sourceRef`;
/// a missing CRD or a failing API server is retried.
#[test]
fn the_api_servers_answers_for_the_source() {
    let f = Followed::of(&spec(None), "ns", false).unwrap();
    assert!(f.found(Ok(Some(repo(Some("main"), None)))).is_ok());
    let step = f.found(Ok(None)).unwrap_err();
    assert_eq!(
        said(&step),
        (
            "SourceNotFound",
            "spec.sourceRef: GitRepository ns/settings does not exist",
            true
        )
    );
    let step = f
        .found(Err(api_error(403, "Forbidden", "no access")))
        .unwrap_err();
    assert_eq!(said(&step).0, "SourceForbidden");
    assert!(said(&step).2);
    assert!(said(&step).1.contains("(no access)"), "{step:?}");
    // The type not served: the plain-text 404 kube-client cannot parse.
    let step = f
        .found(Err(api_error(
            404,
            "Failed to parse error data",
            "404 page not found",
        )))
        .unwrap_err();
    assert_eq!(
        said(&step),
        (
            "SourceUnavailable",
            "spec.sourceRef: the GitRepository CRD (source.toolkit.fluxcd.io/v1) is not \
             installed: install Flux's source-controller (flux install) or its CRDs",
            false
        )
    );
    let step = f
        .found(Err(api_error(500, "InternalError", "etcd is down")))
        .unwrap_err();
    assert_eq!(said(&step).0, "SourceUnavailable");
    assert!(!said(&step).2);
}

/// kstatus "in progress": no artifact yet, or one not understood; a source
/// that follows no branch stalls.
#[test]
fn the_revision_a_gitrepository_announces() {
    let what = "GitRepository ns/settings";
    let step = fetched(&repo(Some("main"), None), what).unwrap_err();
    assert_eq!(
        said(&step),
        (
            "ArtifactNotReady",
            "waiting for source-controller to fetch GitRepository ns/settings (no \
             status.artifact.revision yet)",
            false
        )
    );
    assert!(matches!(step, Step::Waiting { .. }));
    let step = fetched(&repo(Some("main"), Some("main@md5:x")), what).unwrap_err();
    assert!(matches!(
        step,
        Step::Waiting {
            reason: "InvalidRevision",
            ..
        }
    ));
    let revision = format!("main@sha1:{C}");
    let f = fetched(&repo(Some("main"), Some(&revision)), what).unwrap();
    assert_eq!(
        f,
        Fetched {
            revision: revision.clone(),
            commit: C.into(),
            branch: "main".into()
        }
    );
    // No spec.ref.branch: the branch the revision names, when it names one.
    let named = format!("refs/heads/release@sha1:{C}");
    assert_eq!(
        fetched(&repo(None, Some(&named)), what).unwrap().branch,
        "release"
    );
    let step = fetched(&repo(None, Some(&revision)), what).unwrap_err();
    assert_eq!(said(&step).0, "UnsupportedSource");
    assert!(said(&step).2);
}

#[test]
fn a_secret_missing_or_forbidden_stalls_and_an_api_failure_retries() {
    let step = secret_found(Ok(None), "ns", "reg")
        .unwrap_err()
        .within("spec.secretRef");
    assert_eq!(
        said(&step),
        (
            "SecretNotFound",
            "spec.secretRef: Secret ns/reg does not exist",
            true
        )
    );
    let step = secret_found(Err(api_error(403, "Forbidden", "denied")), "ns", "reg")
        .unwrap_err()
        .within("spec.secretRef");
    assert_eq!(
        said(&step),
        (
            "SecretForbidden",
            "spec.secretRef: the controller may not read Secret ns/reg (denied)",
            true
        )
    );
    let step = secret_found(Err(api_error(500, "InternalError", "down")), "ns", "reg")
        .unwrap_err()
        .within("spec.secretRef");
    assert_eq!(said(&step).0, "SecretUnavailable");
    assert!(!said(&step).2);
}

#[test]
fn spec_and_history_errors_stall_and_network_errors_retry() {
    assert_eq!(classify(&Error::input("x", None)), ("InvalidSpec", true));
    let reg = Error::Registry {
        reference: "r".into(),
        what: "w".into(),
        message: "m".into(),
        hint: None,
    };
    assert_eq!(classify(&reg), ("RegistryOperationFailed", false));
    let git = |kind| Error::Git {
        url: "https://git.example/x".into(),
        message: "m".into(),
        hint: None,
        kind,
    };
    assert_eq!(
        classify(&git(GitFailure::Auth)),
        ("GitAuthenticationFailed", false)
    );
    assert_eq!(
        classify(&git(GitFailure::NotFound)),
        ("GitRevisionNotFound", false)
    );
    // A fetch past --fetch-max-*: retried, as docs/controller.md says.
    assert_eq!(
        classify(&git(GitFailure::TooLarge(crate::field::FetchBound::Bytes))),
        ("GitOperationFailed", false)
    );
}

/// A refused push stalls with the revision and the hint; a failing
/// registry is retried.
#[test]
fn a_publish_error_is_a_step_naming_the_revision() {
    let step = published(
        "main@sha1:c".into(),
        Err(Error::Rewind {
            tag: "reg/x:main".into(),
            current: "c0".into(),
            new: "c1".into(),
        }),
    );
    let (reason, message, stalls) = said(&step);
    assert_eq!((reason, stalls), ("HistoryRewritten", true));
    assert!(message.starts_with("revision main@sha1:c: "), "{message}");
    let step = published(
        "main@sha1:c".into(),
        Err(Error::Registry {
            reference: "reg/x".into(),
            what: "PUT".into(),
            message: "503".into(),
            hint: Some("try later".into()),
        }),
    );
    let (reason, message, stalls) = said(&step);
    assert_eq!((reason, stalls), ("RegistryOperationFailed", false));
    assert_eq!(
        message,
        "revision main@sha1:c: registry reg/x: PUT failed: 503 (try later)"
    );
}

#[test]
fn an_interval_below_the_floor_is_raised_with_a_notice() {
    let m = Duration::from_secs(60);
    assert_eq!(
        interval_floor(Duration::from_secs(600), m, Some("10m")),
        (Duration::from_secs(600), None)
    );
    assert_eq!(
        interval_floor(Duration::from_millis(1), m, Some("1ms")),
        (
            m,
            Some(
                "spec.interval 1ms is below the controller's --min-interval: checked every 1m"
                    .into()
            )
        )
    );
}

#[test]
fn a_step_carries_no_held_credential() {
    let held = Held::new();
    held.add_token("tok-0123456789abcdef");
    let step = failed("GitOperationFailed", "server said tok-0123456789abcdef").scrubbed(&held);
    assert_eq!(
        said(&step).1,
        "server said <redacted>",
        "the token is taken out"
    );
}

#[test]
fn provider_namespaces_default_to_the_controllers_own() {
    use super::super::ProviderNamespaces;
    let own = ProviderNamespaces::parse(None, "settings-image-system");
    assert!(own.allows("settings-image-system") && !own.allows("tenant"));
    assert_eq!(own.shown(), "settings-image-system");
    let every = ProviderNamespaces::parse(Some("*"), "x");
    assert!(every.allows("tenant") && every.allows("x"));
    let none = ProviderNamespaces::parse(Some(""), "x");
    assert!(!none.allows("x") && !none.allows(""));
    assert_eq!(none.shown(), "empty (no namespace)");
    let two = ProviderNamespaces::parse(Some(" a, b ,"), "x");
    assert!(two.allows("a") && two.allows("b") && !two.allows("x"));
}
