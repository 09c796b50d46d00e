//! Registry login with no stored secret, end to end: the action (and the
//! CLI) get an ID token from the runner's endpoint (or a file), exchange it
//! at a loopback stub of each provider that checks the request as the
//! provider documents it and verifies the token against the issuer's JWKS
//! (ECR: recomputes the SigV4 signature), and the credential that comes
//! back authenticates a push to a real distribution registry (htpasswd),
//! which skopeo then reads. Every token is masked and leaks nowhere.

use crate::common;
use crate::support_login;

use common::cmd::TestCommand;
use common::registry::{Auth, Registry, skopeo_inspect};
use common::runner::Step;
use support_login::*;

use std::time::Duration;

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

/// Pushes `host/name` (a provider's registry host the stub plays, as the
/// HTTP proxy, or the stub itself) through the action with `with` and
/// `env`, asserts success, the digest skopeo reads back with `creds`, and
/// that every ID token and `secrets` is masked and leaks nowhere.
#[allow(clippy::too_many_arguments)]
fn push_and_read_back(
    reg: &Registry,
    stub: &Stub,
    host: &str,
    name: &str,
    with: &[(&str, &str)],
    env: &[(&str, String)],
    creds: (&str, &str),
    secrets: &[&str],
) -> Step {
    let ws = workspace();
    let repository = format!("{host}/{name}");
    // `with` first: the runner takes the first value given for an input.
    let mut all = with.to_vec();
    all.extend([
        ("path", "cfg"),
        ("repository", repository.as_str()),
        ("tags", "v1"),
        ("insecure", "true"),
    ]);
    let mut env = env.to_vec();
    env.extend(id_token_env(stub));
    env.extend(stub.proxy_env());
    let run = run_action(ws.path(), &all, &env);
    run.ok();
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
    run.assert_masks_first();
    assert!(
        run.stdout.lines().any(|l| l
            .starts_with(&format!("settings-image: logged in to {host} with the "))
            && l.ends_with(&format!("as {} (no stored secret)", creds.0))),
        "{}",
        run.stdout
    );
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
    // `login: auto` picks the ECR exchange on an ECR host, with its facts.
    push_and_read_back(
        &reg,
        &stub,
        ECR_HOST,
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
        GCP_HOST,
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
        ACR_HOST,
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
        HUB_HOST,
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
        &stub.host(),
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

#[test]
fn jfrog_from_the_cli_with_an_id_token_file_from_another_ci() {
    let reg = registry();
    let p = providers();
    let token = p["jfrog"]["token"].as_str().unwrap().to_string();
    allow(&reg, "deployer", &token);
    let stub = Stub::start(&reg, p.clone(), json!({}));
    let dir = tempfile::tempdir().unwrap();
    // GitLab's `id_tokens: SETTINGS_ID: aud: ...` written to a file.
    let jwt = stub.mint("https://gitlab.example.com", 300);
    let file = dir.path().join("id_token");
    std::fs::write(&file, format!("{jwt}\n")).unwrap();
    std::fs::create_dir(dir.path().join("cfg")).unwrap();
    std::fs::write(dir.path().join("cfg/app.yaml"), "a: 1\n").unwrap();
    let repository = format!("{}/acme/shop", stub.host());
    let run = TestCommand::new()
        .args([
            "push",
            "--path",
            dir.path().join("cfg").to_str().unwrap(),
            "--repository",
            &repository,
            "--tag",
            "v1",
            "--login",
            "jfrog",
            "--jfrog-provider-name",
            "github-oidc",
            "--id-token-file",
            file.to_str().unwrap(),
            "--json",
        ])
        .run();
    let report = run.json();
    let found = read_back(&reg, "acme/shop", "v1", &format!("deployer:{token}"));
    assert_eq!(found["Digest"], report["digest"]);
    for secret in [&jwt, &token] {
        assert!(!run.stdout.contains(secret.as_str()), "{}", run.stdout);
        assert!(!run.stderr.contains(secret.as_str()), "{}", run.stderr);
    }
    // No audience asked for: the provider checks whatever its integration names.
    assert_eq!(
        checks(&stub, "/access/api/v1/oidc/token"),
        ["grant", "jwks", "aud=None", "sub"]
    );
}

#[test]
fn without_id_token_permission_the_error_names_it_and_nothing_is_pushed() {
    let reg = registry();
    let stub = Stub::start(&reg, providers(), json!({}));
    let ws = workspace();
    let repository = format!("{ECR_HOST}/acme/shop");
    let run = run_action(
        ws.path(),
        &[
            ("path", "cfg"),
            ("repository", &repository),
            ("tags", "v1"),
            ("insecure", "true"),
            ("login", "ecr"),
            (
                "aws-role-arn",
                "arn:aws:iam::123456789012:role/settings-push",
            ),
            ("aws-region", "eu-west-1"),
        ],
        &[
            &[("AWS_ENDPOINT_URL_STS", stub.url("/sts/"))][..],
            &stub.proxy_env(),
        ]
        .concat(),
    );
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    let error = run.error();
    assert!(error.contains("ACTIONS_ID_TOKEN_REQUEST_URL"), "{error}");
    assert!(error.contains("id-token: write"), "{error}");
    assert!(stub.route("/sts/").is_empty(), "STS was asked anyway");
    assert!(
        skopeo_inspect(
            &format!("{}/acme/shop:v1", reg.host()),
            Some("nobody:nothing-to-see-here")
        )
        .is_none()
    );
}

/// Runs the ECR login through the action with extra inputs and env.
fn ecr_run(stub: &Stub, with: &[(&str, &str)], env: &[(&str, String)]) -> Step {
    let ws = workspace();
    let repository = format!("{ECR_HOST}/acme/shop");
    let mut all = vec![
        ("path", "cfg"),
        ("repository", repository.as_str()),
        ("tags", "v1"),
        ("insecure", "true"),
        ("login", "ecr"),
        (
            "aws-role-arn",
            "arn:aws:iam::123456789012:role/settings-push",
        ),
        ("aws-region", "eu-west-1"),
    ];
    all.extend_from_slice(with);
    let mut e = vec![
        ("AWS_ENDPOINT_URL_STS", stub.url("/sts/")),
        ("AWS_ENDPOINT_URL_ECR", stub.url("/ecr/")),
    ];
    e.extend(id_token_env(stub));
    e.extend(stub.proxy_env());
    e.extend_from_slice(env);
    run_action(ws.path(), &all, &e)
}

#[test]
fn a_wrong_audience_is_the_providers_refusal_with_a_hint() {
    let reg = registry();
    let stub = Stub::start(&reg, providers(), json!({}));
    let run = ecr_run(&stub, &[("oidc-audience", "https://github.com/acme")], &[]);
    assert_eq!(run.code, 5, "{}\n{}", run.stdout, run.stderr);
    let error = run.error();
    assert!(
        error.contains("InvalidIdentityToken: Incorrect token audience: https://github.com/acme"),
        "{error}"
    );
    assert!(
        error.contains("token.actions.githubusercontent.com:aud"),
        "{error}"
    );
    for jwt in stub.minted() {
        run.assert_masked(&jwt);
    }
    assert!(stub.route("/ecr/").is_empty());
    assert!(run.output_file.is_empty(), "{}", run.output_file);
}

#[test]
fn a_provider_403_is_shown_scrubbed_with_a_trust_policy_hint() {
    let reg = registry();
    let mut p = providers();
    p["aws"]["deny"] = json!(true);
    let stub = Stub::start(&reg, p, json!({}));
    let run = ecr_run(&stub, &[], &[]);
    assert_eq!(run.code, 5, "{}\n{}", run.stdout, run.stderr);
    let error = run.error();
    assert!(error.contains("HTTP 403 Forbidden: AccessDenied: Not authorized to perform sts:AssumeRoleWithWebIdentity with token <redacted>"), "{error}");
    assert!(
        error.contains("trust policy of arn:aws:iam::123456789012:role/settings-push"),
        "{error}"
    );
    // The service echoed the ID token: it is scrubbed, and masked besides.
    let minted = stub.minted();
    assert_eq!(minted.len(), 1);
    run.assert_masked(&minted[0]);
}

#[test]
fn an_expired_id_token_is_refused_before_it_is_sent() {
    let reg = registry();
    let stub = Stub::start(&reg, providers(), json!({}));
    let dir = tempfile::tempdir().unwrap();
    let jwt = stub.mint("sts.amazonaws.com", -120);
    let file = dir.path().join("id_token");
    std::fs::write(&file, &jwt).unwrap();
    std::fs::create_dir(dir.path().join("cfg")).unwrap();
    std::fs::write(dir.path().join("cfg/app.yaml"), "a: 1\n").unwrap();
    let repository = format!("{ECR_HOST}/acme/shop");
    let sts = stub.url("/sts/");
    let run = TestCommand::new()
        .args([
            "push",
            "--insecure",
            "--path",
            dir.path().join("cfg").to_str().unwrap(),
            "--repository",
            &repository,
            "--tag",
            "v1",
            "--aws-role-arn",
            "arn:aws:iam::123456789012:role/settings-push",
            "--aws-region",
            "eu-west-1",
            "--id-token-file",
            file.to_str().unwrap(),
        ])
        .env("AWS_ENDPOINT_URL_STS", &sts)
        .envs(stub.proxy_env())
        .run();
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("error: the ID token expired at "),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("hint: ID tokens live minutes"),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains(&jwt));
    assert!(stub.route("/sts/").is_empty(), "an expired token was sent");
}

#[test]
fn a_hanging_token_service_fails_within_the_deadline() {
    let reg = registry();
    let stub = Stub::start(&reg, providers(), json!({"hang_seconds": 90}));
    let run = ecr_run(
        &stub,
        &[],
        &[
            ("AWS_ENDPOINT_URL_STS", stub.url("/hang/sts/")),
            ("SETTINGS_IMAGE_LOGIN_TIMEOUT", "2".to_string()),
        ],
    );
    assert_eq!(run.code, 5, "{}\n{}", run.stdout, run.stderr);
    let error = run.error();
    assert!(
        error.contains(&format!(
            "AWS STS AssumeRoleWithWebIdentity for arn:aws:iam::123456789012:role/settings-push: no answer from {} within 2s",
            stub.host()
        )),
        "{error}"
    );
    assert!(error.contains("SETTINGS_IMAGE_LOGIN_TIMEOUT"), "{error}");
    // The deadline ended it, not the stub: the stub saw the client hang up
    // while it still held the request (it lets go after 90 s).
    let held = common::eventually(
        Duration::from_secs(30),
        Duration::from_millis(50),
        || match stub.route("hang").as_slice() {
            [] => Err(format!(
                "the stub never let go of the request:\n{:?}",
                stub.log()
            )),
            ends => Ok(ends.to_vec()),
        },
    );
    assert_eq!(held, [json!({"route": "hang", "client_hung_up": true})]);
}

#[test]
fn the_job_token_is_never_sent_to_another_registry() {
    use base64::Engine as _;
    let reg = registry();
    let stub = Stub::start(&reg, providers(), json!({}));
    let ws = workspace();
    let repository = format!("{}/acme/shop", stub.host());
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("{ACTOR}:{JOB_TOKEN}"));
    for (i, with) in [
        // The default: github-token is ${{ github.token }}.
        vec![],
        // The deprecated name, given explicitly: still only for GitHub, and a warning.
        vec![("token", JOB_TOKEN)],
    ]
    .into_iter()
    .enumerate()
    {
        let mut all = vec![
            ("path", "cfg"),
            ("repository", repository.as_str()),
            ("tags", "v1"),
        ];
        all.extend(with);
        let run = run_action(ws.path(), &all, &[]);
        // The registry wants credentials and gets none: refused, exit 5.
        assert_eq!(run.code, 5, "{}\n{}", run.stdout, run.stderr);
        run.assert_masked(JOB_TOKEN);
        let proxied = stub.route("proxy");
        assert!(!proxied.is_empty());
        for p in &proxied {
            let auth = p["authorization"].as_str().unwrap();
            assert!(
                !auth.contains(&basic) && !auth.contains(JOB_TOKEN),
                "the job token reached the registry: {auth}"
            );
        }
        let deprecated = run.stdout.lines().any(|l| {
            l.starts_with("::warning title=settings-image%3A deprecated input::")
                && l.contains("`github-token`")
        });
        assert_eq!(deprecated, i == 1, "{}", run.stdout);
    }
}

#[test]
fn credentials_that_expire_during_a_push_are_renewed_once() {
    let reg = registry();
    let p = providers();
    let first = p["aws"]["passwords"][0].as_str().unwrap().to_string();
    let renewed = p["aws"]["passwords"][1].as_str().unwrap().to_string();
    // The registry already takes only the password the second exchange
    // hands out: the first one has expired by the time the push uses it.
    only_allow(&reg, "AWS", &renewed);
    let exchanges = |stub: &Stub| {
        stub.route("/ecr/")
            .iter()
            .filter(|e| e["ok"] == true)
            .count()
    };
    let stub = Stub::start(&reg, p.clone(), json!({}));
    let run = ecr_run(&stub, &[], &[]);
    run.ok();
    assert_eq!(exchanges(&stub), 2, "the login ran again after the 401");
    let found = read_back(&reg, "acme/shop", "v1", &format!("AWS:{renewed}"));
    assert_eq!(found["Digest"], run.out("digest"));
    run.assert_masked(&first);
    run.assert_hidden(&renewed);

    // Once: a second refusal is an authentication error (exit 5), not a
    // third exchange.
    only_allow(&reg, "AWS", "a-password-nobody-has");
    let stub = Stub::start(&reg, p, json!({}));
    let run = ecr_run(&stub, &[("tags", "v2")], &[]);
    run.exited(5);
    assert_eq!(exchanges(&stub), 2);
    run.assert_hidden(&first);
    run.assert_hidden(&renewed);
}

#[test]
fn the_promote_action_logs_in_the_same_way() {
    let reg = registry();
    let p = providers();
    let token = p["dockerhub"]["token"].as_str().unwrap().to_string();
    allow(&reg, "acme", &token);
    let stub = Stub::start(&reg, p.clone(), json!({}));
    let connection = p["dockerhub"]["connection"].as_str().unwrap();
    let login = [
        ("login", "dockerhub"),
        ("username", "acme"),
        ("dockerhub-connection-id", connection),
    ];
    let env = [("DOCKER_IDENTITY_URL", stub.url("/docker"))];
    push_and_read_back(
        &reg,
        &stub,
        HUB_HOST,
        "acme/shop",
        &[&login[..], &[("tags", "v1, main-1764547200-abcdef1")]].concat(),
        &env,
        ("acme", &token),
        &[&token],
    );
    let ws = workspace();
    let repository = format!("{HUB_HOST}/acme/shop");
    let mut e = env.to_vec();
    e.extend(id_token_env(&stub));
    e.extend(stub.proxy_env());
    let run = run_face(
        ws.path(),
        "promote/action.yml",
        &["promote"],
        &[
            &login[..],
            &[
                ("repository", repository.as_str()),
                ("insecure", "true"),
                ("from", "main"),
                ("to", "prod"),
            ],
        ]
        .concat(),
        &e,
    );
    run.ok();
    assert_eq!(run.out("promoted"), "true", "{}", run.stdout);
    let tag = run.out("tag");
    assert!(tag.starts_with("prod-1764547200-abcdef1"), "{tag}");
    read_back(&reg, "acme/shop", tag, &format!("acme:{token}"));
    run.assert_masked(&token);
    for jwt in stub.minted() {
        assert!(
            !run.stdout
                .lines()
                .any(|l| l.contains(&jwt) && !l.starts_with("::add-mask::"))
        );
    }
}

#[test]
fn the_action_reads_a_docker_config_under_its_home() {
    use base64::Engine as _;
    // What a workflow step leaves in $RUNNER_TEMP/_github_home/.docker,
    // which the runner mounts as the container's HOME (/github/home).
    let reg = Registry::start(Auth::Basic {
        user: "robot".into(),
        password: "fr0m-a-docker-config".into(),
    });
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir(home.path().join(".docker")).unwrap();
    let auth = base64::engine::general_purpose::STANDARD.encode("robot:fr0m-a-docker-config");
    std::fs::write(
        home.path().join(".docker/config.json"),
        json!({"auths": {reg.host(): {"auth": auth}}}).to_string(),
    )
    .unwrap();
    let ws = workspace();
    let repository = format!("{}/acme/shop", reg.host());
    let run = run_action(
        ws.path(),
        &[("path", "cfg"), ("repository", &repository), ("tags", "v1")],
        &[("HOME", home.path().display().to_string())],
    );
    run.ok();
    read_back(&reg, "acme/shop", "v1", "robot:fr0m-a-docker-config");
    run.assert_absent("fr0m-a-docker-config");
}

// ------------------------------------- tokens stay on their host, nothing leaks

/// One exchange whose request a test turns away: the provider's inputs,
/// the endpoint variables, and the stub route that redirects.
struct Case {
    name: &'static str,
    /// The registry host: the provider's own, or the stub's for the
    /// self-hosted kinds.
    host: String,
    with: Vec<(&'static str, String)>,
    env: Vec<(&'static str, String)>,
    route: &'static str,
}

fn cases(stub: &Stub, p: &Value) -> Vec<Case> {
    let s = |v: &Value| v.as_str().unwrap().to_string();
    let ecr = || {
        vec![
            ("login", "ecr".to_string()),
            ("aws-role-arn", s(&p["aws"]["role_arn"])),
            ("aws-region", "eu-west-1".to_string()),
        ]
    };
    let ecr_env = || {
        vec![
            ("AWS_ENDPOINT_URL_STS", stub.url("/sts/")),
            ("AWS_ENDPOINT_URL_ECR", stub.url("/ecr/")),
        ]
    };
    let gcp = || {
        vec![
            ("login", "gcp".to_string()),
            ("gcp-workload-identity-provider", s(&p["gcp"]["provider"])),
            ("gcp-service-account", s(&p["gcp"]["service_account"])),
        ]
    };
    let gcp_env = || {
        vec![
            ("CLOUDSDK_API_ENDPOINT_OVERRIDES_STS", stub.url("/gcp-sts/")),
            (
                "CLOUDSDK_API_ENDPOINT_OVERRIDES_IAMCREDENTIALS",
                stub.url("/gcp-iam/"),
            ),
        ]
    };
    let azure = || {
        vec![
            ("login", "azure".to_string()),
            ("azure-client-id", s(&p["azure"]["client"])),
            ("azure-tenant-id", s(&p["azure"]["tenant"])),
        ]
    };
    let azure_env = || vec![("AZURE_AUTHORITY_HOST", stub.url("/azure/"))];
    let case = |name, host: &str, with, env, route| Case {
        name,
        host: host.to_string(),
        with,
        env,
        route,
    };
    let own = stub.host();
    vec![
        case(
            "the runner's ID token endpoint",
            ECR_HOST,
            ecr(),
            ecr_env(),
            "/idtoken",
        ),
        case("AWS STS", ECR_HOST, ecr(), ecr_env(), "/sts/"),
        case("AWS ECR", ECR_HOST, ecr(), ecr_env(), "/ecr/"),
        case(
            "Google STS",
            GCP_HOST,
            gcp(),
            gcp_env(),
            "/gcp-sts/v1/token",
        ),
        case(
            "Google IAM Credentials",
            GCP_HOST,
            gcp(),
            gcp_env(),
            "/gcp-iam/v1/projects/-/serviceAccounts/",
        ),
        case("Microsoft Entra", ACR_HOST, azure(), azure_env(), "/azure/"),
        case(
            "ACR /oauth2/exchange",
            ACR_HOST,
            azure(),
            azure_env(),
            "/oauth2/exchange",
        ),
        case(
            "Docker Hub",
            HUB_HOST,
            vec![
                ("login", "dockerhub".to_string()),
                ("username", "acme".to_string()),
                ("dockerhub-connection-id", s(&p["dockerhub"]["connection"])),
            ],
            vec![("DOCKER_IDENTITY_URL", stub.url("/docker"))],
            "/docker/oauth/token",
        ),
        case(
            "Quay",
            &own,
            vec![
                ("login", "quay".to_string()),
                ("username", s(&p["quay"]["robot"])),
            ],
            vec![],
            "/oauth2/federation/robot/token",
        ),
        case(
            "JFrog",
            &own,
            vec![
                ("login", "jfrog".to_string()),
                ("jfrog-provider-name", s(&p["jfrog"]["provider"])),
            ],
            vec![],
            "/access/api/v1/oidc/token",
        ),
    ]
}

#[test]
fn no_exchange_follows_a_redirect_to_another_host() {
    let reg = registry();
    let p = providers();
    let away = tempfile::tempdir().unwrap();
    let away_file = away.path().join("away.json");
    let stub = Stub::start(&reg, p.clone(), json!({ "away_file": away_file }));
    let mut turned_away = 0;
    for case in cases(&stub, &p) {
        std::fs::write(&away_file, json!([case.route]).to_string()).unwrap();
        let ws = workspace();
        let repository = format!("{}/acme/shop", case.host);
        let mut with: Vec<(&str, &str)> = case.with.iter().map(|(k, v)| (*k, v.as_str())).collect();
        with.extend([
            ("path", "cfg"),
            ("repository", repository.as_str()),
            ("tags", "v1"),
            ("insecure", "true"),
        ]);
        let mut env = case.env.clone();
        env.extend(id_token_env(&stub));
        env.extend(stub.proxy_env());
        let run = run_action(ws.path(), &with, &env);
        let name = case.name;
        // The stub did turn the request away...
        let away_now = stub.route("away").len();
        assert_eq!(
            away_now,
            turned_away + 1,
            "{name}: the route was never asked"
        );
        turned_away = away_now;
        // ...and nothing reached the other host: no ID token, no Entra
        // token, no X-Amz-Security-Token, no Basic robot:ID token.
        let elsewhere = stub.route("elsewhere");
        assert!(
            elsewhere.is_empty(),
            "{name}: the other host got {elsewhere:?}"
        );
        assert_eq!(run.code, 5, "{name}:\n{}\n{}", run.stdout, run.stderr);
        let error = run.error();
        assert!(
            error.contains("a redirect to 127.0.0.2:") && error.contains("it was not followed"),
            "{name}: {error}"
        );
        assert!(run.output_file.is_empty(), "{name}: {}", run.output_file);
        for jwt in stub.minted() {
            assert!(!error.contains(&jwt), "{name}: {error}");
        }
    }
}

#[test]
fn a_quay_refusal_echoing_its_basic_header_is_scrubbed_and_masked() {
    use base64::Engine as _;
    let reg = registry();
    let mut p = providers();
    p["quay"]["echo"] = json!(true);
    let robot = p["quay"]["robot"].as_str().unwrap().to_string();
    let stub = Stub::start(&reg, p, json!({}));
    let ws = workspace();
    let repository = format!("{}/acme/shop", stub.host());
    let run = run_action(
        ws.path(),
        &[
            ("login", "quay"),
            ("username", &robot),
            ("path", "cfg"),
            ("repository", &repository),
            ("tags", "v1"),
        ],
        &id_token_env(&stub),
    );
    assert_eq!(run.code, 5, "{}\n{}", run.stdout, run.stderr);
    let error = run.error();
    assert!(
        error.contains("Robot federation refused for Authorization: Basic <redacted>"),
        "{error}"
    );
    let minted = stub.minted();
    assert_eq!(minted.len(), 1);
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("{robot}:{}", minted[0]));
    run.assert_masked(&basic);
    run.assert_masked(&minted[0]);
    run.assert_masks_first();
}

#[test]
fn a_user_name_from_a_provider_or_an_input_cannot_write_a_workflow_command() {
    let reg = registry();
    let mut p = providers();
    // JFrog's answer names the user; this one carries a command.
    p["jfrog"]["username"] = json!("deployer\n::warning title=forged::by the token service");
    let stub = Stub::start(&reg, p.clone(), json!({}));
    let ws = workspace();
    let repository = format!("{}/acme/shop", stub.host());
    let jfrog = run_action(
        ws.path(),
        &[
            ("login", "jfrog"),
            (
                "jfrog-provider-name",
                p["jfrog"]["provider"].as_str().unwrap(),
            ),
            ("path", "cfg"),
            ("repository", &repository),
            ("tags", "v1"),
        ],
        &id_token_env(&stub),
    );
    let hub_repository = format!("{HUB_HOST}/acme/shop");
    let hub = run_action(
        ws.path(),
        &[
            ("login", "dockerhub"),
            ("username", "acme\r::error title=forged::by an input"),
            (
                "dockerhub-connection-id",
                p["dockerhub"]["connection"].as_str().unwrap(),
            ),
            ("path", "cfg"),
            ("repository", &hub_repository),
            ("tags", "v1"),
            ("insecure", "true"),
        ],
        &[
            &id_token_env(&stub)[..],
            &[("DOCKER_IDENTITY_URL", stub.url("/docker"))],
            &stub.proxy_env(),
        ]
        .concat(),
    );
    for (run, forged, shown) in [
        (&jfrog, "::warning title=forged", "%3A:warning title=forged"),
        (&hub, "::error title=forged", "acme%0D::error title=forged"),
    ] {
        // The registry refuses the user: the login line came before.
        assert_eq!(run.code, 5, "{}\n{}", run.stdout, run.stderr);
        assert!(
            run.stdout.contains(shown),
            "the login line is missing:\n{}",
            run.stdout
        );
        for line in run.stdout.lines().chain(run.stderr.lines()) {
            for part in line.split('\r') {
                assert!(
                    !part.trim_start().starts_with(forged),
                    "a forged command: {line:?}"
                );
            }
        }
    }
}

/// A registry that plays ghcr.io and a GitHub Enterprise Server's
/// `containers.github.acme.test` (reached through the stub as an HTTP
/// proxy, `insecure`), with token auth whose realm is `realm`: the
/// registry hosts' `/token` and `auth.elsewhere.test` all lead to the token
/// server, which issues tokens for the job token.
fn github_registry(
    realm: &str,
) -> (
    Registry,
    Stub,
    std::sync::Arc<common::registry::TokenServer>,
) {
    let ts = common::registry::TokenServer::start(ACTOR, JOB_TOKEN);
    let reg = Registry::start(Auth::TokenAt(ts.clone(), realm.to_string()));
    let token_server = format!("127.0.0.1:{}", ts.port);
    let stub = Stub::start(
        &reg,
        providers(),
        json!({"hosts": {
            "ghcr.io": reg.host(),
            "ghcr.io/token": token_server,
            GHES_REGISTRY: reg.host(),
            format!("{GHES_REGISTRY}/token"): token_server,
            "auth.elsewhere.test": token_server,
        }}),
    );
    (reg, stub, ts)
}

/// The container registry of the GitHub Enterprise Server
/// `https://github.acme.test`.
const GHES_REGISTRY: &str = "containers.github.acme.test";

/// Pushes `HOST/acme/shop` with the action's defaults (the job token)
/// through the stub as the HTTP proxy; `HOST` is ghcr.io or, with
/// `GITHUB_SERVER_URL` naming its server, [`GHES_REGISTRY`].
fn push_to_github(stub: &Stub, host: &str) -> Step {
    let ws = workspace();
    let repository = format!("{host}/acme/shop");
    run_action(
        ws.path(),
        &[
            ("path", "cfg"),
            ("repository", &repository),
            ("tags", "v1"),
            ("insecure", "true"),
        ],
        &[
            ("http_proxy", stub.url("")),
            ("GITHUB_SERVER_URL", "https://github.acme.test".to_string()),
        ],
    )
}

#[test]
fn the_job_token_goes_to_github_registries_and_their_own_token_service_only() {
    use base64::Engine as _;
    let basic = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{ACTOR}:{JOB_TOKEN}"))
    );
    for host in ["ghcr.io", GHES_REGISTRY] {
        let (reg, stub, ts) = github_registry(&format!("http://{host}/token"));
        let run = push_to_github(&stub, host);
        run.ok();
        run.assert_masked(JOB_TOKEN);
        let issued = ts.issued.lock().unwrap().clone();
        assert!(!issued.is_empty());
        let seen = stub.route("host");
        for s in &seen {
            let (path, auth) = (&s["path"], s["authorization"].as_str().unwrap());
            assert_eq!(s["host"], host, "{s}");
            if path == "/token" {
                assert_eq!(auth, basic, "{s}");
            } else if path != "/v2/" {
                assert!(issued.iter().any(|t| auth == format!("Bearer {t}")), "{s}");
            }
        }
        assert!(seen.iter().any(|s| s["path"] == "/token"), "{seen:?}");
        // The registry's own record of the tag: its storage.
        let link = reg
            .dir
            .path()
            .join("data/docker/registry/v2/repositories/acme/shop/_manifests/tags/v1/current/link");
        assert_eq!(std::fs::read_to_string(link).unwrap(), run.out("digest"));
    }
}

#[test]
fn the_job_token_never_goes_to_a_token_realm_on_another_host() {
    // ghcr.io, and a GitHub Enterprise Server's registry (where only the
    // job token's own rule, not ghcr.io's, keeps it home).
    for host in ["ghcr.io", GHES_REGISTRY] {
        let (reg, stub, ts) = github_registry("http://auth.elsewhere.test/token");
        let run = push_to_github(&stub, host);
        assert_eq!(run.code, 5, "{host}:\n{}\n{}", run.stdout, run.stderr);
        run.assert_masked(JOB_TOKEN);
        let error = run.error();
        assert!(
            error.contains("the registry names the token realm http://auth.elsewhere.test/token"),
            "{error}"
        );
        assert!(error.contains("nothing was sent there"), "{error}");
        let seen = stub.route("host");
        assert!(!seen.is_empty(), "{host}: the proxy was not used");
        assert!(
            seen.iter().all(|s| s["host"] == host),
            "another host was asked: {seen:?}"
        );
        assert!(
            ts.requests.lock().unwrap().is_empty(),
            "{host}: the token server was asked"
        );
        let repositories = reg.dir.path().join("data/docker/registry/v2/repositories");
        assert!(
            !repositories.join("acme").exists(),
            "{host}: something was pushed"
        );
    }
}

/// A cloud login asked for a registry host its provider does not own (a
/// host of the pusher's own, here the stub itself or a name it plays
/// through the proxy): refused before anything is requested, from the
/// action (by name, and `auto` from the facts given) and the CLI. No ID
/// token is minted, no exchange runs, nothing reaches the host.
#[test]
fn a_cloud_login_sends_nothing_to_a_host_its_provider_does_not_own() {
    let reg = registry();
    let p = providers();
    let stub = Stub::start(
        &reg,
        p.clone(),
        json!({"hosts": {"registry.evil.example": "self"}}),
    );
    let s = |v: &Value| v.as_str().unwrap().to_string();
    // (what, the login inputs, what the refusal says)
    type Inputs = Vec<(&'static str, String)>;
    let logins: Vec<(&str, Inputs, &str)> = vec![
        (
            "ecr",
            vec![
                ("login", "ecr".into()),
                ("aws-role-arn", s(&p["aws"]["role_arn"])),
            ],
            "`login` ecr logs in only to Amazon ECR's registry hosts (ACCOUNT.dkr.ecr.REGION.amazonaws.com)",
        ),
        (
            "ecr, chosen by auto from its facts",
            vec![("aws-role-arn", s(&p["aws"]["role_arn"]))],
            "`aws-role-arn` (the ecr login) logs in only to Amazon ECR's registry hosts",
        ),
        (
            "gcp",
            vec![
                ("login", "gcp".into()),
                ("gcp-workload-identity-provider", s(&p["gcp"]["provider"])),
            ],
            "`login` gcp logs in only to Google's registry hosts",
        ),
        (
            "azure",
            vec![
                ("login", "azure".into()),
                ("azure-client-id", s(&p["azure"]["client"])),
                ("azure-tenant-id", s(&p["azure"]["tenant"])),
            ],
            "`login` azure logs in only to Azure Container Registry's hosts",
        ),
        (
            "dockerhub",
            vec![
                ("login", "dockerhub".into()),
                ("username", "acme".into()),
                ("dockerhub-connection-id", s(&p["dockerhub"]["connection"])),
            ],
            "`login` dockerhub logs in only to Docker Hub",
        ),
    ];
    let mut env = id_token_env(&stub);
    env.extend(stub.proxy_env());
    env.extend([
        ("AWS_ENDPOINT_URL_STS", stub.url("/sts/")),
        ("AWS_ENDPOINT_URL_ECR", stub.url("/ecr/")),
        ("AZURE_AUTHORITY_HOST", stub.url("/azure/")),
        ("CLOUDSDK_API_ENDPOINT_OVERRIDES_STS", stub.url("/gcp-sts/")),
        ("DOCKER_IDENTITY_URL", stub.url("/docker")),
    ]);
    for host in [stub.host(), "registry.evil.example".to_string()] {
        let repository = format!("{host}/acme/shop");
        for (name, login, says) in &logins {
            let ws = workspace();
            let mut with: Vec<(&str, &str)> = login.iter().map(|(k, v)| (*k, v.as_str())).collect();
            with.extend([
                ("path", "cfg"),
                ("repository", repository.as_str()),
                ("tags", "v1"),
                ("insecure", "true"),
            ]);
            let run = run_action(ws.path(), &with, &env);
            assert_eq!(
                run.code, 2,
                "{name} {host}:\n{}\n{}",
                run.stdout, run.stderr
            );
            let error = run.error();
            assert!(error.contains(says), "{name} {host}: {error}");
            assert!(
                error.contains(&format!(
                    "{host} is not one: its credentials are never sent to another host, so nothing was requested or sent"
                )),
                "{name} {host}: {error}"
            );
            assert!(run.outputs.is_empty(), "{name}: {:?}", run.outputs);
        }
        // The CLI's --login: the same rule.
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("cfg")).unwrap();
        std::fs::write(dir.path().join("cfg/app.yaml"), "a: 1\n").unwrap();
        let token = dir.path().join("id_token");
        std::fs::write(&token, stub.mint("sts.amazonaws.com", 300)).unwrap();
        let run = TestCommand::new()
            .args(["push", "--insecure", "--path"])
            .arg(dir.path().join("cfg"))
            .args(["--repository", &repository, "--tag", "v1"])
            .args(["--login", "ecr", "--aws-role-arn", "arn:aws:iam::1:role/r"])
            .arg("--id-token-file")
            .arg(&token)
            .envs(env.clone())
            .run();
        assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
        assert!(
            run.stderr.contains(&format!(
                "error: --login ecr logs in only to Amazon ECR's registry hosts (ACCOUNT.dkr.ecr.REGION.amazonaws.com), and {host} is not one"
            )),
            "{}",
            run.stderr
        );
    }
    // Nothing was asked of anyone: no ID token, no exchange, no request
    // to the host (the stub logs each of them).
    let log = stub.log();
    assert!(log.is_empty(), "the stub saw {log:?}");
}
