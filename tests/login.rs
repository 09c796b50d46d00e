//! Registry login with no stored secret, end to end: the action (and the
//! CLI) get an ID token from the runner's endpoint (or a file), exchange it
//! at a loopback stub of each provider that checks the request as the
//! provider documents it and verifies the token against the issuer's JWKS
//! (ECR: recomputes the SigV4 signature), and the credential that comes
//! back authenticates a push to a real distribution registry (htpasswd),
//! which skopeo then reads. Every token is masked and leaks nowhere.

mod common;
mod support_login;

use common::registry::{Auth, Registry, skopeo_inspect};
use support_login::*;

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
    // `with` first: the runner takes the first value given for an input.
    let mut all = with.to_vec();
    all.extend([
        ("path", "cfg"),
        ("repository", repository.as_str()),
        ("tags", "v1"),
    ]);
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
    run.assert_masks_first();
    assert!(
        run.stdout.lines().any(|l| l.starts_with(&format!(
            "settings-image: logged in to {} with the ",
            stub.host()
        )) && l
            .ends_with(&format!("as {} (no stored secret)", creds.0))),
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
    let run = common::registry::run(
        &[
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
        ],
        &[],
        None,
    );
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
    let repository = format!("{}/acme/shop", stub.host());
    let run = run_action(
        ws.path(),
        &[
            ("path", "cfg"),
            ("repository", &repository),
            ("tags", "v1"),
            ("login", "ecr"),
            (
                "aws-role-arn",
                "arn:aws:iam::123456789012:role/settings-push",
            ),
            ("aws-region", "eu-west-1"),
        ],
        &[("AWS_ENDPOINT_URL_STS", stub.url("/sts/"))],
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
fn ecr_run(stub: &Stub, with: &[(&str, &str)], env: &[(&str, String)]) -> ActionRun {
    let ws = workspace();
    let repository = format!("{}/acme/shop", stub.host());
    let mut all = vec![
        ("path", "cfg"),
        ("repository", repository.as_str()),
        ("tags", "v1"),
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
    assert!(run.outputs.is_empty(), "{}", run.outputs);
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
    let repository = format!("{}/acme/shop", stub.host());
    let sts = stub.url("/sts/");
    let run = common::registry::run(
        &[
            "push",
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
        ],
        &[("AWS_ENDPOINT_URL_STS", &sts)],
        None,
    );
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
    // The deadline ended it, not the stub (which holds the request 90s).
    assert!(run.seconds < 90.0, "took {}s", run.seconds);
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
    use settings_image::history::{self, SourceMode};
    use settings_image::login::{Endpoints, Facts, IdTokenSource, Login, Provider};
    use settings_image::publish::registry::push_with;
    use settings_image::registry::{Client, Options};

    let reg = registry();
    let p = providers();
    let first = p["aws"]["passwords"][0].as_str().unwrap().to_string();
    let renewed = p["aws"]["passwords"][1].as_str().unwrap().to_string();
    only_allow(&reg, "AWS", &first);
    let stub = Stub::start(&reg, p, json!({}));
    let login = Login {
        provider: Provider::Ecr,
        facts: Facts {
            aws_role_arn: Some("arn:aws:iam::123456789012:role/settings-push".into()),
            aws_region: Some("eu-west-1".into()),
            ..Facts::default()
        },
        id_token: IdTokenSource::GitHub {
            url: stub.url("/idtoken?api-version=2.0"),
            token: REQUEST_TOKEN.into(),
        },
        endpoints: Endpoints {
            aws_sts: Some(stub.url("/sts/")),
            aws_ecr: Some(stub.url("/ecr/")),
            ..Endpoints::default()
        },
        host: stub.host(),
        scheme: "http",
        timeout: std::time::Duration::from_secs(20),
        on_secret: None,
    };
    let client = Client::open(&Options {
        repository: format!("{}/acme/shop", stub.host()),
        insecure: false,
        monolithic: false,
        credentials: None,
        docker_config: None,
        login: Some(Box::new(login)),
    })
    .unwrap();
    let exchanges = || {
        stub.route("/ecr/")
            .iter()
            .filter(|e| e["ok"] == true)
            .count()
    };
    assert_eq!(exchanges(), 1);

    // A long push outlives the first password: the registry now takes
    // only a fresh one (distribution re-reads its htpasswd).
    only_allow(&reg, "AWS", &renewed);
    let ws = workspace();
    let prepared = history::prepare(
        None,
        &ws.path().join("cfg"),
        SourceMode::Worktree,
        false,
        None,
        None,
    )
    .unwrap();
    let img = settings_image::image::build(&prepared.source, &prepared.metadata()).unwrap();
    let pushed = push_with(&client, &img, &["v1".to_string()]).unwrap();
    assert!(pushed.pushed);
    assert_eq!(exchanges(), 2, "the login ran again after the 401");
    let found = read_back(&reg, "acme/shop", "v1", &format!("AWS:{renewed}"));
    assert_eq!(found["Digest"], img.digest);

    // Once: a second expiry is an authentication error, not a third exchange.
    only_allow(&reg, "AWS", "a-password-nobody-has");
    let err = push_with(&client, &img, &["v2".to_string()]).unwrap_err();
    assert_eq!(err.exit_code(), 5, "{err}");
    assert!(!err.to_string().contains(&renewed), "{err}");
    assert_eq!(exchanges(), 2);
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
        "acme/shop",
        &[&login[..], &[("tags", "v1, main-1764547200-abcdef1")]].concat(),
        &env,
        ("acme", &token),
        &[&token],
    );
    let ws = workspace();
    let repository = format!("{}/acme/shop", stub.host());
    let mut e = env.to_vec();
    e.extend(id_token_env(&stub));
    let run = run_face(
        ws.path(),
        "promote/action.yml",
        &["promote"],
        &[
            &login[..],
            &[
                ("repository", repository.as_str()),
                ("from", "main"),
                ("to", "prod"),
            ],
        ]
        .concat(),
        &e,
    );
    run.assert_ok();
    assert_eq!(run.out("promoted"), "true", "{}", run.stdout);
    let tag = run.out("tag");
    assert!(tag.starts_with("prod-1764547200-abcdef1"), "{tag}");
    read_back(&reg, "acme/shop", &tag, &format!("acme:{token}"));
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
    run.assert_ok();
    read_back(&reg, "acme/shop", "v1", "robot:fr0m-a-docker-config");
    run.assert_absent("fr0m-a-docker-config");
}
