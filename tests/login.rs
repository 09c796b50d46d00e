//! Registry login with no stored secret, end to end: the action (and the
//! CLI) get an ID token from the runner's endpoint (or a file), exchange it
//! at a loopback stub of each provider that checks the request as the
//! provider documents it and verifies the token against the issuer's JWKS
//! (ECR: recomputes the SigV4 signature), and the credential that comes
//! back authenticates a push to a real distribution registry (htpasswd),
//! which skopeo then reads. Every token is masked and leaks nowhere.

mod support_login;
mod support_registry;

use support_login::*;
use support_registry::{Auth, Registry, skopeo_inspect};

use serde_json::{Value, json};

/// A registry with htpasswd auth whose only user is a placeholder: each
/// test allows the credential its provider stub hands out.
fn registry() -> Registry {
    Registry::start(Auth::Basic {
        user: "nobody".into(),
        password: "nothing-to-see-here".into(),
    })
}

/// The checks a provider route ran, from the stub's log.
fn checks(stub: &Stub, route: &str) -> Vec<String> {
    let entries = stub.route(route);
    assert!(!entries.is_empty(), "the stub saw no {route} request");
    let last = entries.last().unwrap();
    assert_eq!(last["ok"], true, "{route} refused: {last}");
    last["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_string())
        .collect()
}

fn read_back(reg: &Registry, name: &str, tag: &str, creds: &str) -> Value {
    skopeo_inspect(&format!("{}/{name}:{tag}", reg.host()), Some(creds))
        .unwrap_or_else(|| panic!("skopeo finds no {name}:{tag}"))
}

/// Pushes through the action with `with` and `env`, asserts success, the
/// digest skopeo reads back with `creds`, and that every ID token and
/// `secrets` is masked and leaks nowhere.
fn push_and_read_back(
    reg: &Registry,
    stub: &Stub,
    name: &str,
    with: &[(&str, &str)],
    env: &[(&str, String)],
    creds: (&str, &str),
    secrets: &[&str],
) -> ActionRun {
    let ws = workspace();
    let repository = format!("{}/{name}", stub.host());
    let mut all = vec![
        ("path", "cfg"),
        ("repository", repository.as_str()),
        ("tags", "v1"),
    ];
    all.extend_from_slice(with);
    let mut env = env.to_vec();
    env.extend(id_token_env(stub));
    let run = run_action(ws.path(), &all, &env);
    run.assert_ok();
    let found = read_back(reg, name, "v1", &format!("{}:{}", creds.0, creds.1));
    assert_eq!(found["Digest"], run.out("digest"));
    let minted = stub.minted();
    assert!(!minted.is_empty(), "no ID token was requested");
    for jwt in &minted {
        run.assert_masked(jwt);
    }
    for s in secrets {
        run.assert_masked(s);
    }
    run.assert_masked(REQUEST_TOKEN);
    run
}

#[test]
fn ecr_assume_role_then_a_sigv4_signed_get_authorization_token() {
    let reg = registry();
    let p = providers();
    let password = p["aws"]["passwords"][0].as_str().unwrap().to_string();
    allow(&reg, "AWS", &password);
    let stub = Stub::start(&reg, p.clone(), json!({}));
    let env = [
        ("AWS_ENDPOINT_URL_STS", stub.url("/sts/")),
        ("AWS_ENDPOINT_URL_ECR", stub.url("/ecr/")),
    ];
    // `login: auto` with only the ECR facts set picks the ECR exchange.
    push_and_read_back(
        &reg,
        &stub,
        "acme/shop",
        &[
            ("aws-role-arn", p["aws"]["role_arn"].as_str().unwrap()),
            ("aws-region", "eu-west-1"),
        ],
        &env,
        ("AWS", &password),
        &[
            &password,
            p["aws"]["secret_key"].as_str().unwrap(),
            p["aws"]["session_token"].as_str().unwrap(),
        ],
    );
    let sts = checks(&stub, "/sts/");
    assert_eq!(sts, ["action", "jwks", "aud=sts.amazonaws.com", "sub"]);
    assert_eq!(checks(&stub, "/ecr/"), ["target", "sigv4"]);
}

#[test]
fn gcp_sts_exchange_then_service_account_impersonation() {
    let reg = registry();
    let p = providers();
    let token = p["gcp"]["token"].as_str().unwrap();
    allow(&reg, "oauth2accesstoken", token);
    let stub = Stub::start(&reg, p.clone(), json!({}));
    let env = [
        ("CLOUDSDK_API_ENDPOINT_OVERRIDES_STS", stub.url("/gcp-sts/")),
        (
            "CLOUDSDK_API_ENDPOINT_OVERRIDES_IAMCREDENTIALS",
            stub.url("/gcp-iam/"),
        ),
    ];
    let provider = p["gcp"]["provider"].as_str().unwrap();
    push_and_read_back(
        &reg,
        &stub,
        "acme/shop",
        &[
            ("login", "gcp"),
            ("gcp-workload-identity-provider", provider),
            (
                "gcp-service-account",
                p["gcp"]["service_account"].as_str().unwrap(),
            ),
        ],
        &env,
        ("oauth2accesstoken", token),
        &[token, p["gcp"]["federated"].as_str().unwrap()],
    );
    assert_eq!(
        checks(&stub, "/gcp-sts/v1/token"),
        [
            "grant".to_string(),
            "jwks".into(),
            format!("aud=https://iam.googleapis.com/{provider}"),
            "sub".into()
        ]
    );
    assert_eq!(
        checks(&stub, "/gcp-iam/v1/projects/-/serviceAccounts/"),
        ["impersonation"]
    );
}

#[test]
fn azure_entra_client_assertion_then_the_registry_exchange() {
    let reg = registry();
    let p = providers();
    let refresh = p["azure"]["refresh_token"].as_str().unwrap();
    allow(&reg, "00000000-0000-0000-0000-000000000000", refresh);
    let stub = Stub::start(&reg, p.clone(), json!({}));
    let env = [("AZURE_AUTHORITY_HOST", stub.url("/azure/"))];
    push_and_read_back(
        &reg,
        &stub,
        "acme/shop",
        &[
            ("login", "azure"),
            ("azure-client-id", p["azure"]["client"].as_str().unwrap()),
            ("azure-tenant-id", p["azure"]["tenant"].as_str().unwrap()),
        ],
        &env,
        ("00000000-0000-0000-0000-000000000000", refresh),
        &[refresh, p["azure"]["aad_token"].as_str().unwrap()],
    );
    assert_eq!(
        checks(&stub, "/azure/"),
        ["grant", "jwks", "aud=api://AzureADTokenExchange", "sub"]
    );
    assert_eq!(checks(&stub, "/oauth2/exchange"), ["exchange"]);
}

#[test]
fn docker_hub_token_exchange_with_the_connection_id() {
    let reg = registry();
    let p = providers();
    let token = p["dockerhub"]["token"].as_str().unwrap();
    allow(&reg, "acme", token);
    let stub = Stub::start(&reg, p.clone(), json!({}));
    let env = [("DOCKER_IDENTITY_URL", stub.url("/docker"))];
    push_and_read_back(
        &reg,
        &stub,
        "acme/shop",
        &[
            ("login", "dockerhub"),
            ("username", "acme"),
            (
                "dockerhub-connection-id",
                p["dockerhub"]["connection"].as_str().unwrap(),
            ),
        ],
        &env,
        ("acme", token),
        &[token],
    );
    assert_eq!(
        checks(&stub, "/docker/oauth/token"),
        ["grant", "jwks", "aud=https://identity.docker.com", "sub"]
    );
}

#[test]
fn quay_robot_federation_on_the_registry_host() {
    let reg = registry();
    let mut p = providers();
    p["quay"]["audience"] = json!("quay.example.com");
    let token = p["quay"]["token"].as_str().unwrap().to_string();
    let robot = p["quay"]["robot"].as_str().unwrap().to_string();
    allow(&reg, &robot, &token);
    let stub = Stub::start(&reg, p, json!({}));
    // A self-hosted Quay on a host that does not say so: explicit login.
    push_and_read_back(
        &reg,
        &stub,
        "acme/shop",
        &[
            ("login", "quay"),
            ("username", &robot),
            ("oidc-audience", "quay.example.com"),
        ],
        &[],
        (&robot, &token),
        &[&token],
    );
    assert_eq!(
        checks(&stub, "/oauth2/federation/robot/token"),
        ["robot", "jwks", "aud=quay.example.com", "sub"]
    );
}
