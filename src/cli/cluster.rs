//! The cluster-side commands' flags: `flux` and `verify` (with `--scan`).
//! Kept apart from the build commands' flags in `cli.rs`.

use std::path::PathBuf;

use clap::Args;

use crate::cluster::{flux, report, verify};
use crate::error::{Error, Result};
use crate::front::{self, Login};
use crate::history::Token;
use crate::output;
use crate::registry::Credentials;

/// The name and namespace of the GitRepository Flux's bootstrap makes for
/// the cluster repository.
const BOOTSTRAP: &str = "flux-system";

/// Arguments of `flux`.
#[derive(Debug, Clone, Args)]
pub struct FluxArgs {
    /// The image repository, HOST/NAME; with several --path a template
    /// where `{name}` is a folder's last component and `{path}` its slug.
    #[arg(
        long,
        value_name = "HOST/NAME",
        required_unless_present = "settings_image",
        default_value = ""
    )]
    pub repository: String,
    /// The timestamp tag prefix to follow (usually the branch: `main`).
    #[arg(
        long,
        value_name = "PREFIX",
        required_unless_present = "settings_image",
        default_value = ""
    )]
    pub prefix: String,
    /// Follow what a SettingsImage manifest (the controller's resource)
    /// publishes: its repository, timestampTag, path, secretRef, provider
    /// and namespace, unless given by the flags above.
    #[arg(long, value_name = "FILE")]
    pub settings_image: Option<PathBuf>,
    /// A settings folder; may be repeated (one image per folder, mapped
    /// through the --repository template).
    #[arg(long = "path", value_name = "DIR")]
    pub paths: Vec<PathBuf>,
    /// The name of the ImageRepository and ImagePolicy (one image only;
    /// default: the repository's last segment).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// The namespace of every object.
    #[arg(long, value_name = "NS", default_value = "flux-system")]
    pub namespace: String,
    /// How often Flux lists the tags and runs the automation.
    #[arg(long, value_name = "DURATION", default_value = "5m")]
    pub interval: String,
    /// A kubernetes.io/dockerconfigjson secret for a private registry.
    #[arg(long, value_name = "SECRET")]
    pub secret_ref: Option<String>,
    /// A secret whose `ca.crt` is the CA of a registry with a private
    /// certificate (the ImageRepository's certSecretRef).
    #[arg(long, value_name = "SECRET")]
    pub cert_secret_ref: Option<String>,
    /// The login provider (default: aws, azure or gcp from the registry
    /// host, else none).
    #[arg(long, value_enum)]
    pub provider: Option<flux::Provider>,
    /// Leave out the ImageUpdateAutomation (one already exists).
    #[arg(long)]
    pub no_automation: bool,
    /// The ImageUpdateAutomation's name.
    #[arg(long, value_name = "NAME", default_value = "settings")]
    pub automation_name: String,
    /// The GitRepository holding the cluster repository.
    #[arg(long, value_name = "NAME", default_value = "flux-system")]
    pub git_source: String,
    /// The namespace of the --git-source GitRepository (default: for
    /// the default `flux-system`, the namespace Flux's bootstrap keeps it
    /// in, `flux-system`; for another name, the objects' --namespace).
    #[arg(long, value_name = "NS")]
    pub git_source_namespace: Option<String>,
    /// The branch the automation checks out and commits to.
    #[arg(long, value_name = "BRANCH", default_value = "main")]
    pub git_branch: String,
    /// Push the automation's commits to this branch instead (for pull requests).
    #[arg(long, value_name = "BRANCH")]
    pub git_push_branch: Option<String>,
    /// The folder of the cluster repository whose marked lines are updated.
    #[arg(long, value_name = "DIR", default_value = "./")]
    pub git_path: String,
    /// Write one file per image (and one for the automation) into this
    /// folder instead of printing YAML.
    #[arg(long, value_name = "DIR")]
    pub output: Option<PathBuf>,
}

/// Runs `flux`.
pub fn run_flux(args: &FluxArgs) -> Result<()> {
    let filled;
    let args = match &args.settings_image {
        Some(file) => {
            filled = from_settings_image(args, file)?;
            &filled
        }
        None => args,
    };
    let (mut images, notices) = flux::images(&args.repository, &args.paths)?;
    if let Some(name) = &args.name {
        if images.len() > 1 {
            return Err(Error::input(
                "--name names one image, but several --path were given",
                Some("drop --name; each image is named after its repository".into()),
            ));
        }
        images[0].name = name.clone();
    }
    let opts = flux::Options {
        images,
        prefix: args.prefix.clone(),
        namespace: args.namespace.clone(),
        interval: args.interval.clone(),
        secret: args.secret_ref.clone(),
        cert_secret: args.cert_secret_ref.clone(),
        provider: args.provider,
        automation: (!args.no_automation).then(|| flux::Automation {
            name: args.automation_name.clone(),
            source: args.git_source.clone(),
            source_namespace: args.git_source_namespace.clone().or_else(|| {
                // Flux's bootstrap: GitRepository flux-system in flux-system.
                (args.git_source == BOOTSTRAP).then(|| BOOTSTRAP.to_string())
            }),
            branch: args.git_branch.clone(),
            push_branch: args.git_push_branch.clone(),
            path: args.git_path.clone(),
            ..flux::Automation::default()
        }),
    };
    let docs = flux::generate(&opts)?;
    for n in &notices {
        output::eprintln(&format!("notice: {}", n.text()));
    }
    match &args.output {
        Some(dir) => {
            for p in flux::write(dir, &docs)? {
                output::println(&p.display().to_string())?;
            }
        }
        None => output::print(&flux::to_stream(&docs))?,
    }
    Ok(())
}

/// `args` with what a SettingsImage manifest says filled in where the
/// flags left it open.
fn from_settings_image(args: &FluxArgs, file: &std::path::Path) -> Result<FluxArgs> {
    let text = crate::named_file::read(file, "--settings-image")?;
    let si = crate::controller::crd::Manifest::parse(&text).map_err(|m| {
        Error::input(
            format!("--settings-image {}: {m}", file.display()),
            Some("give a SettingsImage manifest (settings-image.configbutler.io/v1alpha1)".into()),
        )
    })?;
    let mut out = args.clone();
    if out.repository.is_empty() {
        out.repository = si.spec.repository.clone();
    }
    if out.prefix.is_empty() {
        use crate::controller::crd::Source;
        // The controller's default: the GitRepository's branch, when the
        // same file holds the GitRepository.
        out.prefix = match (si.spec.timestamp_tag.clone(), &si.source) {
            (Some(prefix), _) => prefix,
            (None, Some(Source::Branch(branch))) => branch.clone(),
            (None, Some(Source::NoBranch)) => {
                return Err(Error::input(
                    format!(
                        "--settings-image {}: GitRepository {} follows no branch (spec.ref.branch), so the controller publishes nothing for it (Stalled UnsupportedSource)",
                        file.display(),
                        si.spec.source_ref.name
                    ),
                    Some("point the SettingsImage at a GitRepository that follows a branch".into()),
                ));
            }
            (None, None) => {
                return Err(Error::input(
                    format!(
                        "--settings-image {}: spec.timestampTag is not set, and the file does not hold GitRepository {} (the controller defaults the prefix to its spec.ref.branch)",
                        file.display(),
                        si.spec.source_ref.name
                    ),
                    Some(
                        "add the GitRepository to the file (a --- separated document), set spec.timestampTag, or give --prefix BRANCH"
                            .into(),
                    ),
                ));
            }
        };
    }
    if out.paths.is_empty()
        && (out.repository.contains("{name}") || out.repository.contains("{path}"))
    {
        if si.spec.path.contains(['*', '?']) {
            return Err(Error::input(
                format!(
                    "--settings-image {}: spec.path {:?} is a glob",
                    file.display(),
                    si.spec.path
                ),
                Some("give --path for each folder it matches".into()),
            ));
        }
        out.paths = vec![PathBuf::from(&si.spec.path)];
    }
    if out.secret_ref.is_none() {
        out.secret_ref = si.spec.secret_ref.as_ref().map(|r| r.name.clone());
    }
    if out.provider.is_none() {
        out.provider = match si.spec.provider {
            crate::controller::crd::Provider::Generic => None,
            crate::controller::crd::Provider::Aws => Some(flux::Provider::Aws),
            crate::controller::crd::Provider::Azure => Some(flux::Provider::Azure),
            crate::controller::crd::Provider::Gcp => Some(flux::Provider::Gcp),
        };
    }
    if let Some(ns) = si.namespace
        && out.namespace == "flux-system"
    {
        out.namespace = ns;
    }
    Ok(out)
}

/// Arguments of `verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The image: HOST/NAME:TAG, HOST/NAME:TAG@sha256:... or HOST/NAME@sha256:...
    #[arg(
        value_name = "REFERENCE",
        required_unless_present = "scan",
        conflicts_with = "scan"
    )]
    pub reference: Option<String>,
    /// The settings folder in a checkout of the settings repository (full
    /// history: the image is rebuilt from its commit).
    #[arg(long, value_name = "DIR")]
    pub path: PathBuf,
    /// Verify every image-volume reference to --repository in what the
    /// cluster applies: a folder of plain manifests (its .yaml and .yml
    /// files, as Flux reads a path without a kustomization), a rendered
    /// file, or - for standard input (`kubectl kustomize DIR | ...`). A
    /// kustomization, a Helm chart or a HelmRelease is refused: render it.
    #[arg(long, value_name = "INPUT", requires = "repository")]
    pub scan: Option<PathBuf>,
    /// With --scan: the image repository, HOST/NAME.
    #[arg(long, value_name = "HOST/NAME")]
    pub repository: Option<String>,
    /// With --scan: pass when the folder holds no reference to --repository
    /// (without it, that is an error: a typo must not pass).
    #[arg(long, requires = "scan")]
    pub allow_empty: bool,
    /// Use plain HTTP for a non-loopback registry (loopback hosts always use it).
    #[arg(long)]
    pub insecure: bool,
    /// Print JSON instead of a human summary or table.
    #[arg(long)]
    pub json: bool,
    /// Token for the GitHub API, used only when a shallow clone cannot tell
    /// which commit last changed the folder (with GITHUB_REPOSITORY).
    #[arg(
        long = "github-token",
        value_name = "TOKEN",
        env = "GITHUB_TOKEN",
        hide_env_values = true
    )]
    pub github_token: Option<String>,
}

/// Reading needs no login: a half-given one is simply not used (as `inspect`).
fn env_credentials(env: &front::Env) -> Option<Credentials> {
    match front::login(
        env.get("SETTINGS_IMAGE_USERNAME").cloned(),
        env.get("SETTINGS_IMAGE_PASSWORD").cloned(),
    ) {
        Login::Both(c) => Some(c),
        _ => None,
    }
}

fn json<T: serde::Serialize>(v: &T) -> Result<()> {
    let s = serde_json::to_string(v).map_err(|e| Error::json("printing the result", e))?;
    output::println(&s)?;
    Ok(())
}

/// Runs `verify`; returns the exit code of a scan (a single reference
/// returns its error instead).
pub fn run_verify(args: &VerifyArgs) -> Result<i32> {
    let env = front::process_env();
    let base = verify::Verification {
        reference: String::new(),
        path: args.path.clone(),
        insecure: args.insecure,
        credentials: env_credentials(&env),
        docker_config: front::docker_config(&env),
        github: front::github_api(&env, args.github_token.clone().and_then(Token::new)),
    };
    match (&args.reference, &args.scan, &args.repository) {
        (Some(reference), None, _) => {
            let v = verify::verify(&verify::Verification {
                reference: reference.clone(),
                ..base
            })?;
            if args.json {
                json(&v)?;
            } else {
                output::print(&crate::show::verify::verified(&v))?;
            }
            Ok(0)
        }
        (None, Some(dir), Some(repository)) => {
            let report = report::scan_and_verify(dir, repository, &base, args.allow_empty)?;
            let (report, errors) = report;
            if args.json {
                json(&report)?;
            } else {
                output::print(&report.table())?;
            }
            Ok(report.exit_code(&errors))
        }
        _ => Err(Error::input(
            "give a REFERENCE, or --scan DIR with --repository HOST/NAME",
            None,
        )),
    }
}
