//! One error type for the whole tool: each variant names its subject and
//! carries a hint that says what to do about it. Messages and hints name
//! the request's fields as values ([`Field`](crate::field::Field)); each
//! face renders them in its own words ([`Error::render`]), and `Display`
//! gives the CLI's.

use std::path::PathBuf;

use crate::field::{Face, FetchBound, Field, Mention, Text};
use crate::text;

/// Everything that can go wrong, with the subject it went wrong on.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request itself is wrong (flags, inputs, tag syntax).
    #[error("{message}")]
    Input {
        /// What is wrong.
        message: Text,
        /// What to do about it.
        hint: Option<Text>,
    },
    /// The settings folder cannot be packaged as it is.
    #[error("{}: {message}", path.display())]
    Source {
        /// The file or folder at fault.
        path: PathBuf,
        /// What is wrong with it.
        message: Text,
        /// What to do about it.
        hint: Option<Text>,
    },
    /// Reading or writing a local file failed.
    #[error("{context}: {source}")]
    Io {
        /// What we were doing.
        context: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// JSON we wrote or read could not be (de)serialized.
    #[error("{context}: {source}")]
    Json {
        /// What we were doing.
        context: String,
        /// serde's error.
        #[source]
        source: serde_json::Error,
    },
    /// An OCI image layout on disk is not usable.
    #[error("OCI layout {}: {message}", path.display())]
    Layout {
        /// The layout directory.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// Git history cannot answer what was asked (no repository, no commit
    /// holding the folder, a shallow clone without proof).
    #[error("{}: {message}", path.display())]
    History {
        /// The settings folder the question was about.
        path: PathBuf,
        /// What went wrong.
        message: Text,
        /// What to do about it.
        hint: Option<Text>,
    },
    /// The GitHub REST API did not give the answer the shallow-clone
    /// fallback needed. Never carries the token.
    #[error("GitHub API {what}: {message}")]
    GitHub {
        /// The request, without credentials (e.g. `list commits for settings`).
        what: String,
        /// What went wrong.
        message: String,
        /// What to do about it.
        hint: Option<String>,
    },
    /// A timestamp tag already names another image; such tags never move.
    #[error("tag {tag} already points to {existing}, not to {new}: timestamp tags never move")]
    TagExists {
        /// The immutable tag.
        tag: String,
        /// The digest it holds now.
        existing: String,
        /// The digest we built.
        new: String,
    },
    /// A channel tag does not hold the candidate tag of the same name
    /// (`prod-<ts>-<sha7>` against `main-<ts>-<sha7>`): it was written by
    /// hand or by another tool, and the channel claims content it does not
    /// have.
    #[error(
        "channel tag {tag} holds {digest}, but the candidate {candidate_tag} {candidate}: the channel does not hold the release it names"
    )]
    ChannelMismatch {
        /// `HOST/NAME:TAG` of the channel tag.
        tag: String,
        /// The digest the channel tag holds.
        digest: String,
        /// `HOST/NAME:TAG` of the candidate tag of the same name.
        candidate_tag: String,
        /// `holds sha256:...`, or `does not exist`.
        candidate: String,
    },
    /// A racing run put other content under the same timestamp tag at the
    /// same time, and the registry kept theirs: read back after our put.
    #[error(
        "tag {tag} names {theirs}, not {ours}, when read back after this run put it: a racing push \
         of other content for the same commit won, and timestamp tags never move"
    )]
    TagRaced {
        /// `HOST/NAME:TAG`.
        tag: String,
        /// The digest the tag names now (the other run's).
        theirs: String,
        /// The digest this run built and put.
        ours: String,
    },
    /// Another ref already publishes under this tag prefix: the prefix's
    /// newest tag (the one Flux serves) was published from another ref, so
    /// one ImagePolicy would follow both. Different refs share a prefix
    /// when they differ only in characters a tag cannot hold (`feat/x`,
    /// `feat+x`, `feat-x`) or after the first 109 characters.
    #[error(
        "the tag prefix {prefix} is taken: its newest tag {tag} was published from {theirs}, and this run builds \
         {ours}; one ImagePolicy for {prefix} would follow both and serve whichever pushed the later time"
    )]
    PrefixShared {
        /// The shared prefix (of the timestamp tag in `tag`).
        prefix: String,
        /// `HOST/NAME:TAG` of the prefix's newest tag.
        tag: String,
        /// The ref (or refs) its provenance records.
        theirs: String,
        /// This run's ref.
        ours: String,
        /// A prefix only this ref gives that no tag of the repository uses.
        suggestion: String,
    },
    /// A branch tag would move to a commit that does not descend from the
    /// one its image records (history was rewritten, e.g. a force-push).
    #[error(
        "branch tag {tag} records commit {current}, and {new} does not descend from it: refusing to move it sideways"
    )]
    Rewind {
        /// `HOST/NAME:TAG`.
        tag: String,
        /// The commit the tag's image records now.
        current: String,
        /// The commit we built.
        new: String,
    },
    /// A registry refused or failed a request.
    #[error("registry {reference}: {what} failed: {message}")]
    Registry {
        /// The repository (`HOST/NAME`) or reference the request was about.
        reference: String,
        /// The operation, e.g. "uploading blob sha256:...".
        what: String,
        /// The registry's answer: HTTP status, error code and message.
        message: String,
        /// What to do about it.
        hint: Option<Text>,
    },
    /// A registry rejected our credentials or lack of them (401/403).
    #[error("authentication failed for {host}: {message}")]
    Auth {
        /// The registry host.
        host: String,
        /// What the registry said (never a secret).
        message: String,
        /// What to do about it.
        hint: Text,
    },
    /// A git server refused or failed a fetch into a mirror
    /// ([`crate::history::mirror`]). Never carries a credential.
    #[error("git {url}: {message}")]
    Git {
        /// The repository URL as given (it holds no credentials).
        url: String,
        /// What happened: the HTTP status, the server's answer, the cause.
        message: String,
        /// What to do about it.
        hint: Option<String>,
        /// The kind of failure, for a caller that reacts to it.
        kind: GitFailure,
    },
    /// `controller --leader-elect`: the Lease was not renewed within the
    /// renew deadline; the replica exits so that one replica publishes.
    #[error(
        "lost the leader election Lease {lease} (not renewed within the renew deadline); exiting so that one replica publishes"
    )]
    LeaseLost {
        /// The Lease's name (`--leader-election-id`).
        lease: String,
    },
    /// Standard output was closed before everything was written (a
    /// reader such as `head` stopped early): the run says nothing more
    /// and exits 141, as SIGPIPE would (written by `crate::output`).
    #[error("standard output was closed before everything was written")]
    OutputClosed,

    /// A push failed after it had published: the image and its tags are
    /// in the registry (a re-run finds them there), and `error` is what
    /// failed after.
    #[error("{error}; {published}")]
    AfterPublish {
        /// What was in the registry when the push failed.
        published: Box<PublishedSoFar>,
        /// What failed.
        error: Box<Error>,
    },
    /// `verify`: the image is not what the commit holds (or nothing
    /// proves which commit it holds).
    #[error("{reference} is not what its commit holds: {reason}")]
    Mismatch {
        /// The image reference verified.
        reference: String,
        /// Why, in one sentence.
        reason: Text,
        /// The first differing file, when the layer differs.
        file: Option<String>,
    },
}

/// What a push had published when it failed ([`Error::AfterPublish`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishedSoFar {
    /// `HOST/NAME:TAG@sha256:...`.
    pub reference: String,
    /// The manifest digest.
    pub digest: String,
    /// The tags that name the image now.
    pub tags: Vec<String>,
    /// Whether this run wrote any of it (false: the registry had it all
    /// already).
    pub pushed: bool,
    /// The branch tag, when this run put it.
    pub branch_tag: Option<String>,
    /// The provenance referrer's digest, when it was attached.
    pub provenance: Option<String>,
    /// What the push warned of before it failed.
    pub warnings: Vec<crate::notice::Notice>,
}

impl std::fmt::Display for PublishedSoFar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "already published: {}", self.reference)?;
        let mut tags = self.tags.clone();
        if let Some(b) = &self.branch_tag {
            tags.push(format!("{b} (branch tag)"));
        }
        if !tags.is_empty() {
            write!(f, ", tagged {}", tags.join(", "))?;
        }
        if let Some(p) = &self.provenance {
            write!(f, ", provenance {p}")?;
        }
        Ok(())
    }
}

/// Why a git fetch failed ([`Error::Git`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GitFailure {
    /// The server asked for credentials (HTTP 401) or refused them (403).
    Auth,
    /// No such repository (HTTP 404), branch or commit on the server.
    NotFound,
    /// The server could not be reached or spoke no TLS we trust: DNS,
    /// connection refused, a certificate problem, a timeout.
    Unreachable,
    /// The server failed (HTTP 5xx) or answered something that is not git.
    Server,
    /// The fetch was interrupted by the caller.
    Interrupted,
    /// The server sent more than a fetch may hold: more bytes or objects,
    /// or a larger object, than the fetch's bounds allow; which bound.
    TooLarge(FetchBound),
    /// Anything else (a local disk problem while writing the pack, ...).
    Other,
}

impl Error {
    /// Shorthand for an input error with a hint.
    pub fn input(message: impl Into<Text>, hint: impl Into<Option<String>>) -> Self {
        Error::Input {
            message: message.into(),
            hint: hint.into().map(Text::from),
        }
    }

    /// Shorthand for an input error whose hint names fields.
    pub fn input_hinted(message: impl Into<Text>, hint: impl Into<Text>) -> Self {
        Error::Input {
            message: message.into(),
            hint: Some(hint.into()),
        }
    }

    /// Shorthand for an I/O error with context.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    /// Shorthand for a JSON error with context.
    pub fn json(context: impl Into<String>, source: serde_json::Error) -> Self {
        Error::Json {
            context: context.into(),
            source,
        }
    }

    /// Shorthand for a source error.
    pub fn source(path: impl Into<PathBuf>, message: impl Into<Text>) -> Self {
        Error::Source {
            path: path.into(),
            message: message.into(),
            hint: None,
        }
    }

    /// Shorthand for a history error with a hint.
    pub fn history(
        path: impl Into<PathBuf>,
        message: impl Into<Text>,
        hint: impl Into<Option<String>>,
    ) -> Self {
        Error::History {
            path: path.into(),
            message: message.into(),
            hint: hint.into().map(Text::from),
        }
    }

    /// This error, when it is an input error, as being about `field`: a
    /// face that leads its messages with the field (the controller's
    /// `spec.repository: `) does, the others say what they said.
    pub fn about(self, field: Field) -> Self {
        match self {
            Error::Input { message, hint } => Error::Input {
                message: text![Mention::About(field)].then(message),
                hint,
            },
            other => other,
        }
    }

    /// What the user can do about this error, when we know, in the CLI's
    /// words.
    pub fn hint(&self) -> Option<String> {
        self.hint_text().map(|h| h.to_string())
    }

    /// The message in `face`'s words (`Display` is the CLI's).
    pub fn render(&self, face: &dyn Face) -> String {
        self.text().render(face)
    }

    /// The hint in `face`'s words.
    pub fn hint_in(&self, face: &dyn Face) -> Option<String> {
        self.hint_text().map(|h| h.render(face))
    }

    /// The message, with the fields it names as values: what `Display`
    /// prints, for a face to render or another error to carry.
    pub fn text(&self) -> Text {
        match self {
            Error::Input { message, .. } => message.clone(),
            Error::Source { path, message, .. } | Error::History { path, message, .. } => {
                text![format!("{}: ", path.display())].then(message.clone())
            }
            Error::AfterPublish { published, error } => error.text().then(format!("; {published}")),
            Error::Mismatch {
                reference, reason, ..
            } => text![format!("{reference} is not what its commit holds: ")].then(reason.clone()),
            _ => Text::from(self.to_string()),
        }
    }

    /// The hint, with the fields it names as values.
    pub fn hint_text(&self) -> Option<Text> {
        let set = |field, value: &str| Mention::Set(field, value.to_string());
        match self {
            Error::Input { hint, .. }
            | Error::Source { hint, .. }
            | Error::History { hint, .. }
            | Error::Registry { hint, .. } => hint.clone(),
            // A fetch past a bound: the hint says which to raise.
            Error::Git {
                hint,
                kind: GitFailure::TooLarge(bound),
                ..
            } => Some(text![
                hint.clone().unwrap_or_default(),
                ": raise ",
                Mention::Bound(*bound),
                " (docs/controller.md, \"Fetch bounds\")"
            ]),
            Error::GitHub { hint, .. } | Error::Git { hint, .. } => hint.clone().map(Text::from),
            Error::Auth { hint, .. } => Some(hint.clone()),
            Error::AfterPublish { error, .. } => {
                let after = text![
                    "the image and those tags are in the registry: a re-run of the same push finds them \
                     there (pushed: false) and does only what is left"
                ];
                Some(match error.hint_text() {
                    Some(h) => h.then("; ").then(after),
                    None => after,
                })
            }
            Error::TagExists { .. } => Some(text![
                "a timestamp tag names one commit's content forever; commit the change so a new tag is made, \
                 or build from the commit (",
                set(Field::Source, "commit"),
                ") instead of a modified worktree. The same commit pushed from another clone (a mirror, one \
                 without `origin`) records another source URL: give the one the tag's image records \
                 (org.opencontainers.image.source) with ",
                Field::SourceUrl
            ]),
            Error::ChannelMismatch { tag, digest, .. } => Some(text![format!(
                "{tag} was not written by promote (pushed by hand or by another tool), and Flux following the channel \
                 serves {digest}; channel tags never move, so delete that tag in the registry and run promote again"
            )]),
            Error::TagRaced { .. } => Some(text![
                "two runs built different content for one commit at the same time (",
                set(Field::Source, "worktree"),
                ", or an input that is not reproducible); the tag keeps the other run's image, which \
                 Flux may already have read. Build from the commit (",
                set(Field::Source, "commit"),
                ") so every run makes the same bytes"
            ]),
            Error::PrefixShared {
                ours, suggestion, ..
            } => Some(text![
                format!("publish {ours} under a prefix of its own: "),
                set(Field::TimestampTag, suggestion),
                " (no tag of the repository uses it), followed by an ImagePolicy of its own"
            ]),
            Error::Rewind { current, .. } => Some(text![
                "the branch's history was rewritten (force-push, reset); to move the branch tag to this commit, \
                 re-run with ",
                Field::AllowRewind,
                format!(" (a run that says the force-push dropped {current}, "),
                set(Field::ForcePushedFrom, current),
                ", moves it too)"
            ]),
            Error::Layout { .. } => Some(text![
                "choose an empty directory or a valid OCI image layout for ",
                Field::Output
            ]),
            Error::Io { .. } | Error::Json { .. } => None,
            Error::LeaseLost { .. } => Some(text![
                "the API server was unreachable or slow; the pod restarts and campaigns again"
            ]),
            Error::OutputClosed => None,
            Error::Mismatch { .. } => Some(text![
                "do not deploy this reference; push the folder from its commit again (a faithful push is byte-identical), \
                 or find out who wrote this image"
            ]),
        }
    }

    /// The process exit code for this error: 2 for bad input, 3 for a refused
    /// move of an immutable tag, 4 for a registry failure, 5 for a registry
    /// authentication failure, 6 for a refused sideways move of a branch
    /// tag, 7 when `verify` finds an image that is not what its commit
    /// holds, 8 when the controller loses its leader election Lease, 141
    /// when standard output was closed (as SIGPIPE would), 1 for
    /// everything else (history and GitHub API failures included).
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Input { .. } | Error::Source { .. } => 2,
            Error::TagExists { .. }
            | Error::ChannelMismatch { .. }
            | Error::TagRaced { .. }
            | Error::PrefixShared { .. } => 3,
            Error::Registry { .. } => 4,
            Error::Auth { .. } => 5,
            Error::Rewind { .. } => 6,
            Error::Mismatch { .. } => 7,
            // Not an error of the input, nor of the registry: another
            // replica may lead now, and a restart campaigns again.
            Error::LeaseLost { .. } => 8,
            // As a death by SIGPIPE: 128 + 13.
            Error::OutputClosed => 128 + libc::SIGPIPE,
            Error::AfterPublish { error, .. } => error.exit_code(),
            Error::Io { .. }
            | Error::Json { .. }
            | Error::Layout { .. }
            | Error::History { .. }
            | Error::GitHub { .. }
            | Error::Git { .. } => 1,
        }
    }
}

/// Every exit code and what it means, in order: `settings-image --help`
/// shows it ([`exit_codes_help`]) and docs/reference/exit-codes.md is
/// generated from it (tests/reference.rs); tests/exit_codes.rs causes
/// each code for real.
pub const EXIT_CODES: [(&str, &str); 12] = [
    (
        "0",
        "success: built, pushed or promoted, or already up to date; `verify`: every byte is its commit's",
    ),
    (
        "1",
        "failure: I/O, git history (a shallow clone the history cannot answer), the GitHub API",
    ),
    (
        "2",
        "bad input: a flag, input or spec field, a repository or tag, half-given credentials, or an unusable \
         folder (missing, untracked, or holding what an image cannot); for `verify` also a manifest the scan \
         cannot read, a mention of the repository it cannot verify, or a scan that finds no reference",
    ),
    (
        "3",
        "a tag that never moves would move: a timestamp tag already names other content (or a racing run \
         took it), another ref publishes under the tag prefix, or a channel tag does not hold the candidate \
         of its name (`promote`); nothing was changed",
    ),
    (
        "4",
        "the registry failed or refused a request (after retries)",
    ),
    ("5", "registry authentication failed (401 or 403)"),
    (
        "6",
        "a branch tag would move to a commit that does not descend from its current one \
         (`--allow-rewind` moves it anyway); nothing was pushed",
    ),
    (
        "7",
        "`verify` found an image that is not what its commit holds",
    ),
    (
        "8",
        "`controller --leader-elect` lost its Lease: it exits so that one replica publishes; the pod \
         restarts and campaigns again",
    ),
    (
        "9",
        "`diff --exit-code` found differences (without `--exit-code`, `diff` exits 0 either way)",
    ),
    (
        "141",
        "standard output was closed before everything was written (a reader such as `head` stopped \
         early): nothing more is said, as a death by SIGPIPE would; what was built or pushed is done",
    ),
    (
        "128+N",
        "stopped by signal N (143 for SIGTERM): temporary files are removed first",
    ),
];

/// [`EXIT_CODES`] as the end of `--help`.
pub fn exit_codes_help() -> String {
    let mut out = String::from("Exit codes:\n");
    for (code, meaning) in EXIT_CODES {
        out.push_str(&format!("  {code:<6} {meaning}\n"));
    }
    out.push_str(
        "\nGuides, reference and troubleshooting: docs/README.md in the release archive, or \
         https://github.com/ConfigButler/settings-image/blob/main/docs/README.md",
    );
    out
}

/// An error and its sources as one line, each cause added unless the text
/// so far already holds it (the one place the tool flattens a chain).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    with_causes(e.to_string(), e)
}

/// [`error_chain`] of this crate's error, its message in `face`'s words.
pub fn error_chain_in(e: &Error, face: &dyn Face) -> String {
    with_causes(e.render(face), e)
}

/// `msg` followed by the causes of `e` it does not already hold.
fn with_causes(mut msg: String, e: &dyn std::error::Error) -> String {
    let mut src = e.source();
    while let Some(s) = src {
        let text = s.to_string();
        if !msg.contains(&text) {
            msg.push_str(": ");
            msg.push_str(&text);
        }
        src = s.source();
    }
    msg
}

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
