//! The fields of a request as values, and text that names them.
//!
//! The core words an error once and names each field it is about by
//! [`Field`]; each face renders the field in its own words through a
//! [`Face`]: the CLI its flag (`--branch-tag`), the action its input
//! (`` `branch-tag` ``), the controller its spec path (`spec.branchTag`).
//! Nothing rewrites a message after it is made.

use std::fmt;

/// A field of a request: what an input error is about. Each face has its
/// own name for it (a flag, an input, a spec path), or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field {
    /// The settings folder (`--path`).
    Path,
    /// The image repository (`--repository`).
    Repository,
    /// The extra tags (`--tag`).
    Tag,
    /// The prefix of the timestamp tag (`--timestamp-tag`).
    TimestampTag,
    /// The guarded moving tag (`--branch-tag`).
    BranchTag,
    /// Move the branch tag even when history diverged (`--allow-rewind`).
    AllowRewind,
    /// The branch's head before a force-push (`--force-pushed-from`).
    ForcePushedFrom,
    /// Package the commit's folder or the disk's (`--source`).
    Source,
    /// The directory written to (`--output`): the OCI layout, or the
    /// folder `flux` writes its objects into.
    Output,
    /// The commit to start history from (`--revision`).
    Revision,
    /// The provenance referrer, named as the switch that turns it off
    /// (`--no-provenance`).
    NoProvenance,
    /// Plain HTTP to a non-loopback registry (`--insecure`).
    Insecure,
    /// Monolithic blob uploads (`--monolithic`).
    Monolithic,
    /// The registry username (`--username`).
    Username,
    /// The registry password (`--password-stdin`).
    Password,
    /// Pass a cluster folder that mentions no image (`--allow-empty`).
    AllowEmpty,
    /// The cluster repository's folder to scan (`--scan`).
    Scan,
    /// The prefix of the tags to promote from (`--from`).
    From,
    /// The channel (`--to`).
    To,
    /// The repository the channel lives in (`--target-repository`).
    TargetRepository,
    /// The release policy file (`--policy`).
    Policy,
    /// Break-glass (`--force`).
    Force,
    /// Why break-glass is used (`--reason`).
    Reason,
    /// Decide and report, write nothing (`--explain`).
    Explain,
    /// Decide as if it were this time (`--at`).
    At,
    /// The repository URL the image records, or `none` (`--source-url`).
    SourceUrl,
    /// The file holding an OIDC ID token (`--id-token-file`).
    IdTokenFile,
    /// How often the request is checked: a SettingsImage's
    /// `spec.interval`, `flux`'s `--interval`.
    Interval,
    /// The timestamp tag prefix the Flux objects follow (`flux --prefix`).
    Prefix,
    /// The Flux ImageRepository's registry secret (`flux --secret-ref`).
    SecretRef,
    /// The Flux ImageRepository's CA secret (`flux --cert-secret-ref`).
    CertSecretRef,
    /// The branch the Flux automation checks out (`flux --git-branch`).
    GitBranch,
    /// The branch the Flux automation pushes to (`flux --git-push-branch`).
    GitPushBranch,
    /// The cluster repository's folder the Flux automation updates
    /// (`flux --git-path`).
    GitPath,
}

impl Field {
    /// Every field, for a face's tests to render each.
    pub const ALL: [Field; 34] = [
        Field::Path,
        Field::Repository,
        Field::Tag,
        Field::TimestampTag,
        Field::BranchTag,
        Field::AllowRewind,
        Field::ForcePushedFrom,
        Field::Source,
        Field::Output,
        Field::Revision,
        Field::NoProvenance,
        Field::Insecure,
        Field::Monolithic,
        Field::Username,
        Field::Password,
        Field::AllowEmpty,
        Field::Scan,
        Field::From,
        Field::To,
        Field::TargetRepository,
        Field::Policy,
        Field::Force,
        Field::Reason,
        Field::Explain,
        Field::At,
        Field::SourceUrl,
        Field::IdTokenFile,
        Field::Interval,
        Field::Prefix,
        Field::SecretRef,
        Field::CertSecretRef,
        Field::GitBranch,
        Field::GitPushBranch,
        Field::GitPath,
    ];
}

/// A bound on what one git fetch into a mirror may receive
/// ([`crate::history::mirror`]): each is a process argument of the
/// controller, the one face that fetches into mirrors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FetchBound {
    /// Bytes of pack (`--fetch-max-bytes`).
    Bytes,
    /// Objects in the pack (`--fetch-max-objects`).
    Objects,
    /// The size of one object, inflated (`--fetch-max-object-bytes`).
    ObjectBytes,
    /// Bytes before the pack: refs and negotiation (`--fetch-max-ref-bytes`).
    RefBytes,
    /// Refs the server advertises (`--fetch-max-refs`).
    Refs,
}

impl FetchBound {
    /// Every bound.
    pub const ALL: [FetchBound; 5] = [
        FetchBound::Bytes,
        FetchBound::Objects,
        FetchBound::ObjectBytes,
        FetchBound::RefBytes,
        FetchBound::Refs,
    ];

    /// The controller's process argument that sets this bound.
    pub fn argument(self) -> &'static str {
        match self {
            FetchBound::Bytes => "--fetch-max-bytes",
            FetchBound::Objects => "--fetch-max-objects",
            FetchBound::ObjectBytes => "--fetch-max-object-bytes",
            FetchBound::RefBytes => "--fetch-max-ref-bytes",
            FetchBound::Refs => "--fetch-max-refs",
        }
    }

    /// What the bound counts, in words every face says alike.
    pub fn what(self) -> &'static str {
        match self {
            FetchBound::Bytes => "the bytes of pack one fetch may receive",
            FetchBound::Objects => "the objects one fetch may receive",
            FetchBound::ObjectBytes => "the size one object may have",
            FetchBound::RefBytes => "the bytes a server may send before its pack",
            FetchBound::Refs => "the refs a server may advertise",
        }
    }
}

/// How a sentence names the registry credentials: a username joined to a
/// password, `with` or `and`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Joint {
    /// `--username with --password-stdin`.
    With,
    /// `--username and --password-stdin`.
    And,
}

/// A field as a sentence names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mention {
    /// The field itself (`--branch-tag`).
    Field(Field),
    /// The field as the subject of a sentence about the value given to it
    /// (`--repository "x" maps ...`): the action says `` the input
    /// `repository` ``, as its other messages about an input's value do.
    Subject(Field),
    /// The field set to a value (`--source worktree`).
    Set(Field, String),
    /// The registry credentials, a username with its password.
    Credentials(Joint),
    /// Where a folder that does not exist was looked for: the disk and
    /// the commit (`None`: HEAD).
    Looked(Option<String>),
    /// What the settings folder's path is relative to.
    PathRoot,
    /// A bound on one git fetch, which only the controller's process
    /// arguments set.
    Bound(FetchBound),
    /// Every way this face gives a registry login for `host`, to push
    /// (`push`) or to pull, and what GitHub's registry needs besides.
    Login {
        /// The registry host.
        host: String,
        /// Whether the login must be allowed to push.
        push: bool,
    },
    /// What lets the GitHub compare API order two commits the clone
    /// cannot (the repository and a token).
    CompareApi,
    /// A break-glass promotion, which releases into a gated channel at
    /// once (`promote --force --reason ...`).
    BreakGlass,
    /// The field a message is about, leading it ([`crate::error::Error::about`]):
    /// the controller's messages start with their spec path
    /// (`spec.repository: `); the CLI's and the action's say nothing here,
    /// their message names the value.
    About(Field),
}

/// One piece of a [`Text`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Words every face says alike.
    Plain(String),
    /// A field, which each face names in its own words.
    Mention(Mention),
}

/// A message or hint whose fields each face names in its own words.
/// `Display` gives the CLI's words ([`Cli`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Text(Vec<Piece>);

/// The words one face gives each [`Mention`].
pub trait Face {
    /// `m` in this face's words.
    fn mention(&self, m: &Mention) -> String;
}

/// The command line's words: flags.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cli;

impl Field {
    /// The CLI's flag for this field.
    pub fn flag(self) -> &'static str {
        match self {
            Field::Path => "--path",
            Field::Repository => "--repository",
            Field::Tag => "--tag",
            Field::TimestampTag => "--timestamp-tag",
            Field::BranchTag => "--branch-tag",
            Field::AllowRewind => "--allow-rewind",
            Field::ForcePushedFrom => "--force-pushed-from",
            Field::Source => "--source",
            Field::Output => "--output",
            Field::Revision => "--revision",
            Field::NoProvenance => "--no-provenance",
            Field::Insecure => "--insecure",
            Field::Monolithic => "--monolithic",
            Field::Username => "--username",
            Field::Password => "--password-stdin",
            Field::AllowEmpty => "--allow-empty",
            Field::Scan => "--scan",
            Field::From => "--from",
            Field::To => "--to",
            Field::TargetRepository => "--target-repository",
            Field::Policy => "--policy",
            Field::Force => "--force",
            Field::Reason => "--reason",
            Field::Explain => "--explain",
            Field::At => "--at",
            Field::SourceUrl => "--source-url",
            Field::IdTokenFile => "--id-token-file",
            Field::Interval => "--interval",
            Field::Prefix => "--prefix",
            Field::SecretRef => "--secret-ref",
            Field::CertSecretRef => "--cert-secret-ref",
            Field::GitBranch => "--git-branch",
            Field::GitPushBranch => "--git-push-branch",
            Field::GitPath => "--git-path",
        }
    }
}

impl Face for Cli {
    fn mention(&self, m: &Mention) -> String {
        match m {
            Mention::Field(f) | Mention::Subject(f) => f.flag().to_string(),
            Mention::Set(f, value) => format!("{} {value}", f.flag()),
            Mention::Credentials(Joint::With) => "--username with --password-stdin".to_string(),
            Mention::Credentials(Joint::And) => "--username and --password-stdin".to_string(),
            Mention::Looked(None) => "not on disk, not in the HEAD commit".to_string(),
            Mention::Looked(Some(rev)) => format!("not on disk, not in the commit {rev}"),
            Mention::PathRoot => "the current directory".to_string(),
            Mention::Bound(b) => format!("the controller's {}", b.argument()),
            Mention::Login { host, push: true } => format!(
                "--username with --password-stdin, SETTINGS_IMAGE_USERNAME and SETTINGS_IMAGE_PASSWORD, or \
                 `docker login {host}`{}",
                ghcr_push(host, "in GitHub Actions the workflow needs")
            ),
            Mention::Login { host, push: false } => {
                format!(
                    "SETTINGS_IMAGE_USERNAME and SETTINGS_IMAGE_PASSWORD, or `docker login {host}`"
                )
            }
            Mention::CompareApi => {
                "set GITHUB_REPOSITORY and GITHUB_TOKEN so the GitHub compare API can answer"
                    .to_string()
            }
            Mention::BreakGlass => "`promote --force --reason ...`".to_string(),
            Mention::About(_) => String::new(),
        }
    }
}

impl Text {
    /// Text of these pieces (see [`crate::text!`]).
    pub fn of(pieces: Vec<Piece>) -> Self {
        Text(pieces)
    }

    /// Adds a piece at the end.
    pub fn push(&mut self, piece: impl Into<Piece>) {
        self.0.push(piece.into());
    }

    /// This text followed by `other`.
    pub fn then(mut self, other: impl Into<Text>) -> Self {
        self.0.extend(other.into().0);
        self
    }

    /// The text in `face`'s words.
    pub fn render(&self, face: &dyn Face) -> String {
        let mut out = String::new();
        for p in &self.0 {
            match p {
                Piece::Plain(s) => out.push_str(s),
                Piece::Mention(m) => out.push_str(&face.mention(m)),
            }
        }
        out
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render(&Cli))
    }
}

/// Serialized as the CLI's words (a report's JSON).
impl serde::Serialize for Text {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl From<&str> for Piece {
    fn from(s: &str) -> Self {
        Piece::Plain(s.to_string())
    }
}

impl From<&String> for Piece {
    fn from(s: &String) -> Self {
        Piece::Plain(s.clone())
    }
}

impl From<String> for Piece {
    fn from(s: String) -> Self {
        Piece::Plain(s)
    }
}

impl From<Field> for Piece {
    fn from(f: Field) -> Self {
        Piece::Mention(Mention::Field(f))
    }
}

impl From<Mention> for Piece {
    fn from(m: Mention) -> Self {
        Piece::Mention(m)
    }
}

macro_rules! text_from {
    ($($t:ty),*) => {$(
        impl From<$t> for Text {
            fn from(p: $t) -> Self {
                Text(vec![p.into()])
            }
        }
    )*};
}
text_from!(&str, &String, String, Field, Mention);

/// A [`Text`] of pieces: words (`&str`, `String`), [`Field`]s and
/// [`Mention`]s, e.g. `text![Field::BranchTag, " applies to push only"]`.
#[macro_export]
macro_rules! text {
    ($($piece:expr),* $(,)?) => {
        $crate::field::Text::of(vec![$($crate::field::Piece::from($piece)),*])
    };
}

/// What pushing to `host` needs from a GitHub workflow besides a login,
/// after `; {needs}`, when `host` is GitHub's registry: the package
/// permission, and a package made by hand the repository's access.
pub fn ghcr_push(host: &str, needs: &str) -> String {
    if host == "ghcr.io" {
        format!(
            "; {needs} `permissions: packages: write`, and a package first created by hand needs this \
             repository added under the package's \"Manage Actions access\" settings"
        )
    } else {
        String::new()
    }
}

/// Every kind of [`Mention`], of every [`Field`] and [`FetchBound`], for
/// a face's tests.
#[cfg(test)]
pub(crate) fn every_mention() -> Vec<Mention> {
    let mut all = vec![
        Mention::Credentials(Joint::With),
        Mention::Credentials(Joint::And),
        Mention::Looked(None),
        Mention::Looked(Some("0a1b2c3".into())),
        Mention::PathRoot,
        Mention::Login {
            host: "ghcr.io".into(),
            push: true,
        },
        Mention::Login {
            host: "registry.example".into(),
            push: false,
        },
        Mention::BreakGlass,
        Mention::CompareApi,
    ];
    all.extend(FetchBound::ALL.map(Mention::Bound));
    for f in Field::ALL {
        all.extend([
            Mention::Field(f),
            Mention::Subject(f),
            Mention::Set(f, "value".into()),
            Mention::About(f),
        ]);
    }
    all
}

/// The first `--` followed by a letter in `s` and the flag it starts
/// (`--fetch-max-bytes`), if any.
#[cfg(test)]
pub(crate) fn names_a_flag(s: &str) -> Option<&str> {
    let at = s
        .match_indices("--")
        .map(|(i, _)| i)
        .find(|i| s[i + 2..].starts_with(|c: char| c.is_ascii_alphabetic()))?;
    let end = s[at..]
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .map_or(s.len(), |e| at + e);
    Some(&s[at..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_is_listed_once_and_has_its_own_flag() {
        let flags: std::collections::BTreeSet<&str> = Field::ALL.iter().map(|f| f.flag()).collect();
        assert_eq!(flags.len(), Field::ALL.len());
        // The CLI names each by its flag.
        for f in Field::ALL {
            assert_eq!(Cli.mention(&Mention::Field(f)), f.flag());
            assert_eq!(
                names_a_flag(&Cli.mention(&Mention::Field(f))),
                Some(f.flag())
            );
        }
        assert_eq!(names_a_flag("a --b-c, d"), Some("--b-c"));
        assert_eq!(names_a_flag("a -- b --1"), None);
    }

    struct Spec;
    impl Face for Spec {
        fn mention(&self, m: &Mention) -> String {
            match m {
                Mention::Field(Field::BranchTag) => "spec.branchTag".into(),
                _ => "?".into(),
            }
        }
    }

    #[test]
    fn each_face_names_the_field() {
        let t = text![Field::BranchTag, " \"x\" needs ", Field::TimestampTag];
        assert_eq!(t.to_string(), "--branch-tag \"x\" needs --timestamp-tag");
        assert_eq!(t.render(&Spec), "spec.branchTag \"x\" needs ?");
        let t = text!["use ", Mention::Set(Field::Source, "worktree".into())];
        assert_eq!(t.to_string(), "use --source worktree");
    }
}
