//! The command line's clap arguments, one struct per subcommand; the
//! handlers that turn them into requests live in `cli.rs` and `cli/many.rs`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use super::{cluster, metadata};
use crate::history::{SourceMode, Token};

/// `--version`: the package's version, the commit it was built from, and
/// whether the files that make the binary differed from that commit
/// (`build.rs`).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("SETTINGS_IMAGE_BUILT_FROM"),
    ")"
);

/// Package a settings folder into an OCI image for Kubernetes image volumes.
#[derive(Debug, Parser)]
#[command(
    name = "settings-image",
    version = VERSION,
    about,
    after_long_help = crate::error::exit_codes_help()
)]
pub struct Cli {
    /// Show each registry request and each history step on stderr, as the
    /// action's debug log does (RUNNER_DEBUG=1); for `controller`, the
    /// same as --log-level debug.
    #[arg(short, long, global = true)]
    pub verbose: bool,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Build the image into an OCI image layout directory (no registry needed).
    Build(BuildArgs),
    /// Print the timestamp tag `PREFIX-<ts>-<sha7>` of the commit that last
    /// changed the folder (what `git log -1 -- DIR` names).
    Tag(TagArgs),
    /// Build the image and push it to a registry (idempotent; timestamp tags never move).
    Push(PushArgs),
    /// List, in one history walk and one tag listing per repository, the
    /// folders with no image for their last commit yet, as a JSON
    /// `strategy.matrix` (`{"include":[{path,repository,tag}]}`).
    Plan(PlanArgs),
    /// Show an image's digest, annotations and provenance (which commit,
    /// ref, builder and run) from its referrers.
    #[command(after_help = READ_CREDENTIALS)]
    Inspect(InspectArgs),
    /// Show what changes between two settings images, or an image and a
    /// folder built as `build` builds it: files added, removed, modified,
    /// renamed or changed in type; YAML and JSON key by key, other text as
    /// a unified diff.
    #[command(after_help = DIFF_HELP)]
    Diff(DiffArgs),
    /// Promote the newest PREFIX tag into a forward-only channel, as the
    /// release policy's windows allow (same digest; no blob uploaded within
    /// one repository, blobs mounted or copied into another).
    Promote(PromoteArgs),
    /// Print the Flux objects (ImageRepository, ImagePolicy,
    /// ImageUpdateAutomation) that follow the timestamp tags of a prefix.
    Flux(cluster::FluxArgs),
    /// Prove that an image is exactly its commit's folder: rebuild it from
    /// the checkout and compare every byte (exit 7 when it is not); with
    /// --scan, every reference in a cluster repository.
    #[command(after_help = READ_CREDENTIALS)]
    Verify(cluster::VerifyArgs),
    /// Run the Kubernetes controller: publish a SettingsImage's folder each
    /// time Flux fetches a new revision of its GitRepository.
    Controller(crate::controller::Args),
    /// The GitHub action's entry point: reads `INPUT_*` and the event,
    /// writes `$GITHUB_OUTPUT` and `$GITHUB_STEP_SUMMARY`.
    Action(ActionArgs),
    /// Print a shell completion script, e.g. `settings-image completions
    /// bash > ~/.local/share/bash-completion/completions/settings-image`.
    Completions(CompletionsArgs),
    /// Write the man pages (roff), one per command (settings-image.1,
    /// settings-image-push.1, ...), into DIR: the release archive's man/.
    #[command(hide = true)]
    Man(ManArgs),
}

/// Arguments of the hidden `man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Where the pages go (created if missing).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

/// Arguments of `completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum, value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

impl Command {
    /// Whether the command prints JSON (`--json`): then nothing but the
    /// JSON and the messages go to the terminal.
    pub fn json(&self) -> bool {
        match self {
            Command::Build(a) => a.json,
            Command::Tag(a) => a.json,
            Command::Push(a) => a.json,
            Command::Plan(a) => a.json,
            Command::Inspect(a) => a.json,
            Command::Promote(a) => a.json,
            Command::Verify(a) => a.json,
            Command::Diff(a) => a.json,
            Command::Flux(_)
            | Command::Controller(_)
            | Command::Action(_)
            | Command::Completions(_)
            | Command::Man(_) => false,
        }
    }
}

/// How the reading commands (`inspect`, `verify`) log in, for their help.
const READ_CREDENTIALS: &str = "\
Registry credentials (a public image needs none), the first found:
  SETTINGS_IMAGE_USERNAME and SETTINGS_IMAGE_PASSWORD  both set, in the environment
  docker's config.json  $DOCKER_CONFIG/config.json, else ~/.docker/config.json
                        (auths, credHelpers, credsStore: `docker login` writes it)
  else anonymous. docs/registries.md has each registry's.";

/// `diff`'s help after the options: its order, bounds and exit codes.
const DIFF_HELP: &str = "\
Files come in the byte order of their paths; a YAML or JSON file's keys
depth-first, a mapping's keys in byte order, a sequence's items by index.
A diff is bounded (1 MiB per file compared, 50 keys and 200 diff lines per
file, 2,000 lines and 1,000 files in all) and says what it left out.
Exit codes: 0 (with --exit-code: no differences), 9 differences found (with
--exit-code only), 2 bad input, 4 the registry failed, 5 authentication.

Registry credentials (a public image needs none), the first found:
  SETTINGS_IMAGE_USERNAME and SETTINGS_IMAGE_PASSWORD  both set, in the environment
  docker's config.json  $DOCKER_CONFIG/config.json, else ~/.docker/config.json
  else anonymous.";

/// Arguments of `diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The old image, HOST/NAME:TAG or HOST/NAME@sha256:HEX.
    #[arg(value_name = "OLD")]
    pub old: String,
    /// The new image, HOST/NAME:TAG or HOST/NAME@sha256:HEX (or --path).
    #[arg(
        value_name = "NEW",
        required_unless_present = "path",
        conflicts_with = "path"
    )]
    pub new: Option<String>,
    /// Compare OLD with this settings folder instead, built as `build`
    /// builds it (nothing is written or pushed).
    #[arg(long, value_name = "DIR")]
    pub path: Option<PathBuf>,
    /// With --path: the folder as this commit (full id) or reference holds
    /// it, instead of HEAD.
    #[arg(long, value_name = "REV", requires = "path")]
    pub revision: Option<String>,
    /// With --path inside git: the folder as the commit holds it (tracked
    /// files only) or as it is on disk.
    #[arg(long, value_enum, default_value_t = SourceMode::Commit)]
    pub source: SourceMode,
    /// Use plain HTTP for a non-loopback registry (loopback hosts always use it).
    #[arg(long)]
    pub insecure: bool,
    /// Exit 9 when there are differences, 0 when there are none (without
    /// it, 0 either way).
    #[arg(long)]
    pub exit_code: bool,
    /// Print one JSON object instead of text (docs/format.md, "The diff").
    #[arg(long)]
    pub json: bool,
    /// GitHub token for the API fallback on shallow clones (with --path).
    #[command(flatten)]
    pub github: GitHubArgs,
}

/// Arguments of `action`.
#[derive(Debug, Args)]
pub struct ActionArgs {
    /// What the action does.
    #[arg(value_enum, default_value_t = crate::action::Mode::Publish)]
    pub mode: crate::action::Mode,
}

/// Arguments of `promote`.
#[derive(Debug, Args)]
pub struct PromoteArgs {
    /// The repository holding the candidate tags, HOST/NAME.
    #[arg(long, value_name = "HOST/NAME")]
    pub repository: String,
    /// The prefix of the candidate tags (`main` for `main-<ts>-<sha7>`).
    #[arg(long, value_name = "PREFIX")]
    pub from: String,
    /// The channel; channel tags are `CHANNEL-<ts>-<sha7>`.
    #[arg(long, value_name = "CHANNEL")]
    pub to: String,
    /// Write the channel tags into another repository (same registry: blobs
    /// are mounted, else copied).
    #[arg(long, value_name = "HOST/NAME")]
    pub target_repository: Option<String>,
    /// The release policy file (YAML); none means always open.
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// Decide as if it were this time (RFC 3339, e.g. 2026-12-21T10:00:00Z).
    #[arg(long, value_name = "TIME")]
    pub at: Option<String>,
    /// Change nothing; print the decision, the tags, the active windows and
    /// the next open and close over 14 days.
    #[arg(long)]
    pub explain: bool,
    /// Break-glass: promote although the gate is shut (never an older
    /// candidate). Needs --reason; recorded and printed loudly.
    #[arg(long)]
    pub force: bool,
    /// Why break-glass is needed.
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,
    /// Plain HTTP, registry username, password from standard input.
    #[command(flatten)]
    pub access: AccessArgs,
    /// Print one JSON object instead of a human summary.
    #[arg(long)]
    pub json: bool,
    /// OIDC login (no stored secret): --login, --id-token-file, provider facts.
    #[command(flatten)]
    pub login: super::login::LoginArgs,
}

/// The registry access flags of `promote` and `plan` (`push` spells the
/// same three around `--monolithic`, so its help keeps that order).
#[derive(Debug, Args)]
pub struct AccessArgs {
    /// Use plain HTTP for a non-loopback registry (loopback hosts always use it).
    #[arg(long)]
    pub insecure: bool,
    /// Registry username (or SETTINGS_IMAGE_USERNAME); the password comes from
    /// --password-stdin or SETTINGS_IMAGE_PASSWORD.
    #[arg(
        long,
        value_name = "USER",
        env = "SETTINGS_IMAGE_USERNAME",
        hide_env_values = true
    )]
    pub username: Option<String>,
    /// Read the password or token from standard input.
    #[arg(long)]
    pub password_stdin: bool,
}

/// Arguments of `inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The image, HOST/NAME:TAG or HOST/NAME@sha256:HEX.
    #[arg(value_name = "REFERENCE")]
    pub reference: String,
    /// Use plain HTTP for a non-loopback registry (loopback hosts always use it).
    #[arg(long)]
    pub insecure: bool,
    /// Print one JSON object instead of a human summary.
    #[arg(long)]
    pub json: bool,
}

/// Git history options shared by the commands that build.
#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// Also tag the image `PREFIX-<committer time>-<sha7>` from the commit
    /// that last changed the folder; PREFIX is usually the branch name
    /// (`feature/x` becomes `feature-x`).
    #[arg(long, value_name = "PREFIX")]
    pub timestamp_tag: Option<String>,
    /// Inside git, package the folder as the commit holds it (tracked files
    /// only) or as it is on disk.
    #[arg(long, value_enum, default_value_t = SourceMode::Commit)]
    pub source: SourceMode,
    /// Walk history from this commit (full id) or reference instead of
    /// HEAD, e.g. a pull request's head; with `--source commit` the content
    /// comes from it too.
    #[arg(long, value_name = "REV")]
    pub revision: Option<String>,
    /// The repository URL the image records (`org.opencontainers.image.source`,
    /// and the provenance's), normalized; `none` records none. Default:
    /// GITHUB_SERVER_URL/GITHUB_REPOSITORY in GitHub Actions, else the
    /// `origin` remote. It is part of the digest.
    #[arg(long, value_name = "URL|none")]
    pub source_url: Option<String>,
    /// GitHub token for the API fallback on shallow clones.
    #[command(flatten)]
    pub github: GitHubArgs,
}

/// The GitHub token, from a flag or `GITHUB_TOKEN`; never printed.
#[derive(Debug, Args)]
pub struct GitHubArgs {
    /// Token for the GitHub API (with GITHUB_REPOSITORY), used only when the
    /// local history cannot answer: which commit last changed the folder (a
    /// shallow clone), and whether one commit descends from another (the
    /// compare API, for --branch-tag and the anomaly check).
    #[arg(
        long = "github-token",
        value_name = "TOKEN",
        env = "GITHUB_TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
}

impl GitHubArgs {
    pub(crate) fn token(&self) -> Option<Token> {
        self.token.clone().and_then(Token::new)
    }
}

/// Arguments of `tag`.
#[derive(Debug, Args)]
pub struct TagArgs {
    /// The settings folder; repeat it or use a glob (`configs/*`) for
    /// several (one line, or one JSON array entry, per folder).
    #[arg(long, value_name = "DIR", required = true)]
    pub path: Vec<PathBuf>,
    /// The tag prefix, usually the branch name (sanitized into a tag).
    #[arg(long, value_name = "PREFIX")]
    pub prefix: String,
    /// Print one JSON object (tag, commit, timestamp, committed_at, path).
    #[arg(long)]
    pub json: bool,
    /// Walk history from this commit (full id) or reference instead of HEAD.
    #[arg(long, value_name = "REV")]
    pub revision: Option<String>,
    /// GitHub token for the API fallback on shallow clones.
    #[command(flatten)]
    pub github: GitHubArgs,
}

/// Arguments of `push`.
#[derive(Debug, Args)]
pub struct PushArgs {
    /// The settings folder to package; repeat it or use a glob
    /// (`configs/*`) for several, each its own image.
    #[arg(long, value_name = "DIR", required = true)]
    pub path: Vec<PathBuf>,
    /// The repository to push to, HOST/NAME (e.g. ghcr.io/OWNER/settings);
    /// with several folders a template: `{name}` is the folder's last
    /// component, `{path}` its path as a slug (ghcr.io/OWNER/{name}).
    #[arg(long, value_name = "HOST/NAME")]
    pub repository: String,
    /// With several folders, how many build and push at once.
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub jobs: usize,
    /// A tag to write; may be repeated. `reference` names the timestamp tag
    /// when there is one, else the first of these.
    #[arg(long = "tag", value_name = "TAG")]
    pub tags: Vec<String>,
    /// Use plain HTTP for a non-loopback registry (loopback hosts always use it).
    #[arg(long)]
    pub insecure: bool,
    /// Upload each blob in one PUT (Google Artifact Registry) instead of 4 MiB chunks.
    #[arg(long)]
    pub monolithic: bool,
    /// Registry username (or SETTINGS_IMAGE_USERNAME); the password comes from
    /// --password-stdin or SETTINGS_IMAGE_PASSWORD.
    #[arg(
        long,
        value_name = "USER",
        env = "SETTINGS_IMAGE_USERNAME",
        hide_env_values = true
    )]
    pub username: Option<String>,
    /// Read the password or token from standard input.
    #[arg(long)]
    pub password_stdin: bool,
    /// Also move this tag (e.g. `main`) to the image, but only forward: when
    /// the new commit descends from the commit the tag's image records now.
    /// Needs --timestamp-tag.
    #[arg(long, value_name = "NAME")]
    pub branch_tag: Option<String>,
    /// Move --branch-tag even when the new commit does not descend from its
    /// current one (history was rewritten on purpose, e.g. a force-push).
    #[arg(long)]
    pub allow_rewind: bool,
    /// This push follows a force-push of the branch; COMMIT is the branch's
    /// head before it (GitHub's push event `before` when `forced` is true).
    /// Tells a rewind to an older commit from a re-run of an older job.
    #[arg(long, value_name = "COMMIT")]
    pub force_pushed_from: Option<String>,
    /// Print one JSON object instead of a human summary.
    #[arg(long)]
    pub json: bool,
    /// OIDC login (no stored secret): --login, --id-token-file, provider facts.
    #[command(flatten)]
    pub login: super::login::LoginArgs,
    /// Do not attach SLSA provenance (an in-toto referrer) to the pushed image.
    #[arg(long)]
    pub no_provenance: bool,
    /// Annotations and labels to add.
    #[command(flatten)]
    pub metadata: metadata::MetadataArgs,
    /// Git history: timestamp tag, source mode, GitHub token.
    #[command(flatten)]
    pub history: HistoryArgs,
}

/// Arguments of `build`.
#[derive(Debug, Args)]
pub struct BuildArgs {
    /// The settings folder to package; repeat it or use a glob
    /// (`configs/*`) for several, each its own image.
    #[arg(long, value_name = "DIR", required = true)]
    pub path: Vec<PathBuf>,
    /// The OCI image layout directory to write (created when missing); with
    /// several folders a template with `{name}` or `{path}`.
    #[arg(long, value_name = "LAYOUT_DIR")]
    pub output: PathBuf,
    /// With several folders, how many build at once.
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub jobs: usize,
    /// A tag to write; may be repeated.
    #[arg(long = "tag", value_name = "TAG")]
    pub tags: Vec<String>,
    /// Print one JSON object instead of a human summary.
    #[arg(long)]
    pub json: bool,
    /// Annotations and labels to add.
    #[command(flatten)]
    pub metadata: metadata::MetadataArgs,
    /// Git history options.
    #[command(flatten)]
    pub history: HistoryArgs,
}

/// Arguments of `plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The settings folders; repeat it or use globs (`configs/*`).
    #[arg(long, value_name = "DIR", required = true)]
    pub path: Vec<PathBuf>,
    /// The repository template, HOST/NAME with `{name}` or `{path}`.
    #[arg(long, value_name = "HOST/NAME")]
    pub repository: String,
    /// The timestamp tag prefix the pushes use (usually the branch).
    #[arg(long, value_name = "PREFIX")]
    pub timestamp_tag: String,
    /// Walk history from this commit (full id) or reference instead of HEAD.
    #[arg(long, value_name = "REV")]
    pub revision: Option<String>,
    /// Plain HTTP, registry username, password from standard input.
    #[command(flatten)]
    pub access: AccessArgs,
    /// Print the matrix as JSON (what `strategy.matrix` takes).
    #[arg(long)]
    pub json: bool,
    /// GitHub token for the API fallback on shallow clones.
    #[command(flatten)]
    pub github: GitHubArgs,
}
