//! The tests of `plan` and `provider_of_host`.

use super::*;

fn names(n: &str) -> String {
    format!("`{n}`")
}

fn plan_of(host: &str, f: impl FnOnce(&mut LoginOptions)) -> Result<Decision> {
    let mut p = LoginOptions {
        host: host.into(),
        username: Some("octocat".into()),
        github_token: Some("ghs_job".into()),
        ..LoginOptions::default()
    };
    f(&mut p);
    plan(&p, &names)
}

#[test]
fn the_job_token_only_goes_to_github() {
    assert!(matches!(
        plan_of("ghcr.io", |_| {}).unwrap(),
        Decision::Static(c) if c.password == "ghs_job"
    ));
    // Another host never gets the job token by default.
    assert!(matches!(
        plan_of("registry.example.com", |_| {}).unwrap(),
        Decision::None
    ));
    assert!(matches!(
        plan_of("quay.io", |_| {}).unwrap(),
        Decision::None
    ));
    let err = plan_of("registry.example.com", |p| p.choice = Choice::Github).unwrap_err();
    assert!(err.to_string().contains("only sent to ghcr.io"), "{err}");
    // GitHub Enterprise Server: containers.HOST.
    let ghes = |p: &mut LoginOptions| p.github_server_url = Some("https://github.acme.com".into());
    assert!(matches!(
        plan_of("containers.github.acme.com", ghes).unwrap(),
        Decision::Static(_)
    ));
    assert!(matches!(
        plan_of("github.acme.com", ghes).unwrap(),
        Decision::None
    ));
    assert!(!is_github_registry(
        "containers.github.com",
        Some("https://github.com")
    ));
    // An explicit password goes wherever it is asked to, and to the
    // token realm the registry names (docker's rule).
    assert!(matches!(
        plan_of("registry.example.com", |p| p.password = Some("pw".into())).unwrap(),
        Decision::Static(c) if c.password == "pw" && c.realms == Realms::Any
    ));
    // The job token's token realm is on GitHub's own hosts only.
    assert!(matches!(
        plan_of("ghcr.io", |_| {}).unwrap(),
        Decision::Static(c) if c.realms == Realms::Only(vec!["ghcr.io".into()])
    ));
    assert!(matches!(
        plan_of("containers.github.acme.com", |p| {
            p.choice = Choice::Github;
            ghes(p)
        })
        .unwrap(),
        Decision::Static(c) if c.realms == Realms::Only(vec![
            "containers.github.acme.com".into(),
            "github.acme.com".into(),
        ])
    ));
}

#[test]
fn auto_picks_the_provider_from_host_and_facts() {
    let ecr = "123456789012.dkr.ecr.eu-west-1.amazonaws.com";
    assert_eq!(provider_of_host(ecr), Some(Provider::Ecr));
    assert!(matches!(plan_of(ecr, |_| {}).unwrap(), Decision::None));
    assert!(matches!(
        plan_of(ecr, |p| p.facts.aws_role_arn =
            Some("arn:aws:iam::1:role/r".into()))
        .unwrap(),
        Decision::Exchange(Provider::Ecr)
    ));
    assert!(matches!(
        plan_of("europe-docker.pkg.dev", |p| p
            .facts
            .gcp_workload_identity_provider =
            Some(
                "projects/1/locations/global/workloadIdentityPools/p/providers/g".into()
            ))
        .unwrap(),
        Decision::Exchange(Provider::Gcp)
    ));
    // Stray provider inputs do not turn a ghcr.io push into an exchange.
    assert!(matches!(
        plan_of("ghcr.io", |p| p.facts.aws_role_arn = Some("arn:aws:iam::1:role/r".into())).unwrap(),
        Decision::Static(c) if c.password == "ghs_job"
    ));
    // On another host, the one provider whose inputs are set.
    assert!(matches!(
        plan_of("registry.example.com", |p| p.facts.jfrog_provider_name =
            Some("gh".into()))
        .unwrap(),
        Decision::Exchange(Provider::Jfrog)
    ));
    let two = plan_of("registry.example.com", |p| {
        p.facts.jfrog_provider_name = Some("gh".into());
        p.facts.azure_client_id = Some("c".into());
    });
    assert!(two.unwrap_err().to_string().contains("several logins"));
    assert!(matches!(
        plan_of("quay.io", |p| p.username = Some("org+robot".into())).unwrap(),
        Decision::Exchange(Provider::Quay)
    ));
}

#[test]
fn a_cloud_login_is_refused_for_a_host_its_provider_does_not_own() {
    // Asked for by name.
    let e = plan_of("registry.example.com", |p| {
        p.choice = Choice::Exchange(Provider::Ecr)
    })
    .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("`login` ecr logs in only to Amazon ECR's registry hosts"),
        "{e}"
    );
    assert!(
        e.to_string().contains("registry.example.com is not one"),
        "{e}"
    );
    // Chosen by `auto` from the one provider's facts given.
    let e = plan_of("registry.example.com", |p| {
        p.facts.azure_client_id = Some("c".into())
    })
    .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("`azure-client-id` (the azure login) logs in only to Azure"),
        "{e}"
    );
    // The provider's own hosts, and the self-hosted exchanges anywhere.
    assert!(matches!(
        plan_of("acme.azurecr.io", |p| p.choice =
            Choice::Exchange(Provider::Azure))
        .unwrap(),
        Decision::Exchange(Provider::Azure)
    ));
    assert!(matches!(
        plan_of("registry.example.com", |p| p.choice =
            Choice::Exchange(Provider::Quay))
        .unwrap(),
        Decision::Exchange(Provider::Quay)
    ));
}
