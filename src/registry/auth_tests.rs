//! Unit tests of credentials, docker's config and where credentials go.

use super::*;
use serde_json::json;

#[test]
fn credentials_debug_redacts() {
    let c = Credentials::new("u", "hunter2");
    assert!(!format!("{c:?}").contains("hunter2"));
}

#[test]
fn a_credential_helper_that_cannot_answer_is_an_auth_failure() {
    let err = run_helper(
        "settings-image-test-no-such-helper",
        "h.example",
        "h.example",
    )
    .expect_err("no such helper");
    assert_eq!(err.exit_code(), 5, "{err}");
    assert!(
        err.to_string()
            .contains("docker-credential-settings-image-test-no-such-helper"),
        "{err}"
    );
}

#[test]
fn ghcr_auth_hint_names_the_workflow_fixes() {
    let h = auth_hint("ghcr.io", Access::Push).to_string();
    assert!(h.contains("permissions: packages: write"), "{h}");
    assert!(h.contains("Manage Actions access"), "{h}");
    assert!(
        !auth_hint("quay.io", Access::Push)
            .to_string()
            .contains("Manage Actions")
    );
    // Reading needs pull rights only: the hint does not ask for more.
    let pull = auth_hint("ghcr.io", Access::Pull).to_string();
    assert!(pull.contains("may pull from ghcr.io"), "{pull}");
    assert!(!pull.contains("push"), "{pull}");
}

fn url(s: &str) -> Url {
    Url::parse(s).unwrap()
}

fn auth_with(realms: Realms) -> Auth {
    let c = Credentials {
        realms,
        ..Credentials::new("u", "p")
    };
    Auth::new(Some(c), Access::Push)
}

#[test]
fn challenges_are_parsed_as_the_header_grammar_says() {
    let mut h = HeaderMap::new();
    h.append(WWW_AUTHENTICATE, "Basic realm=\"x\"".parse().unwrap());
    assert!(bearer_challenge(&h).unwrap().is_none());
    h.append(
        WWW_AUTHENTICATE,
        r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:a/b:pull,push""#
            .parse()
            .unwrap(),
    );
    let c = bearer_challenge(&h).unwrap().unwrap();
    assert_eq!(c.realm.as_str(), "https://auth.docker.io/token");
    assert_eq!(c.service.as_deref(), Some("registry.docker.io"));
    let mut bad = HeaderMap::new();
    bad.insert(WWW_AUTHENTICATE, "Bearer service=\"s\"".parse().unwrap());
    assert!(bearer_challenge(&bad).is_err());
    bad.insert(
        WWW_AUTHENTICATE,
        "Bearer realm=\"file:///etc/passwd\"".parse().unwrap(),
    );
    assert!(bearer_challenge(&bad).is_err());
    assert_eq!(
        token_of(br#"{"token":"t","access_token":"a"}"#).as_deref(),
        Some("t")
    );
    assert_eq!(token_of(br#"{"access_token":"a"}"#).as_deref(), Some("a"));
    assert_eq!(token_of(br#"{"token":""}"#), None);
}

#[test]
fn credentials_go_to_the_realms_their_rule_allows() {
    let registry = url("https://registry.example.com/v2/a/b/");
    let hub = url("https://auth.docker.io/token");
    // Docker's rule: the realm the registry names, wherever it is.
    assert!(
        auth_with(Realms::Any)
            .realm_allows(&hub, &registry)
            .unwrap()
            .is_some()
    );
    // The job token: its own hosts only, over HTTPS.
    let ghes = url("https://containers.github.acme.com/v2/a/b/");
    let job = auth_with(Realms::Only(vec![
        "containers.github.acme.com".into(),
        "github.acme.com".into(),
    ]));
    let own = url("https://containers.github.acme.com/token");
    assert!(job.realm_allows(&own, &ghes).unwrap().is_some());
    assert!(
        job.realm_allows(&url("https://github.acme.com/t"), &ghes)
            .unwrap()
            .is_some()
    );
    assert!(job.realm_allows(&hub, &ghes).is_err());
    assert!(
        job.realm_allows(&url("http://github.acme.com/t"), &ghes)
            .is_err()
    );
    // On ghcr.io, whatever the credentials: ghcr.io's own token service.
    let ghcr = url("https://ghcr.io/v2/a/b/");
    let any = auth_with(Realms::Any);
    assert!(
        any.realm_allows(&url("https://ghcr.io/token"), &ghcr)
            .unwrap()
            .is_some()
    );
    assert_eq!(
        any.realm_allows(&url("https://auth.example.com/token"), &ghcr)
            .unwrap_err(),
        "ghcr.io"
    );
    // Anonymous: nothing to send, any realm.
    assert!(
        Auth::new(None, Access::Pull)
            .realm_allows(&hub, &ghcr)
            .unwrap()
            .is_none()
    );
}

#[test]
fn urls_are_shown_without_query_and_registries_by_origin() {
    let presigned =
        url("https://bucket.s3.amazonaws.com/u/1?X-Amz-Signature=abc&X-Amz-Security-Token=t");
    assert_eq!(shown_url(&presigned), "https://bucket.s3.amazonaws.com/u/1");
    assert_eq!(host_port(&url("http://127.0.0.2:5000/x")), "127.0.0.2:5000");
    assert_eq!(host_port(&url("https://ghcr.io:443/x")), "ghcr.io");
    let reg = url("http://127.0.0.1:5000/v2/a/");
    assert!(same_registry(
        &url("http://127.0.0.1:5000/v2/a/blobs/uploads/x?_state=s"),
        &reg
    ));
    assert!(!same_registry(&url("http://127.0.0.2:5000/v2/a/"), &reg));
    assert!(!same_registry(&url("http://127.0.0.1:5001/v2/a/"), &reg));
    assert!(!same_registry(&url("https://127.0.0.1:5000/v2/a/"), &reg));
    assert!(same_registry(
        &url("https://registry-1.docker.io/v2/a/"),
        &url("https://index.docker.io/v2/a/")
    ));
}

#[test]
fn keys() {
    assert!(hosts_match("https://index.docker.io/v1/", "docker.io"));
    assert!(hosts_match("ghcr.io", "ghcr.io"));
    assert!(hosts_match("http://localhost:5000", "localhost:5000"));
    assert!(!hosts_match("ghcr.io", "quay.io"));
}

#[test]
fn entries() {
    let c = from_entry(&json!({"auth": "dTpwOnc="})).unwrap().unwrap();
    assert_eq!((c.username.as_str(), c.password.as_str()), ("u", "p:w"));
    let c = from_entry(&json!({"username": "a", "password": "b"}))
        .unwrap()
        .unwrap();
    assert_eq!(c.password, "b");
    let c = from_entry(&json!({"auth": "", "identitytoken": "tok"}))
        .unwrap()
        .unwrap();
    assert_eq!(
        (c.username.as_str(), c.password.as_str()),
        ("<token>", "tok")
    );
    assert!(from_entry(&json!({})).unwrap().is_none());
    assert!(from_entry(&json!({"auth": "!!"})).is_err());
}
