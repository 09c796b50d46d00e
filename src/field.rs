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
    /// The OCI layout directory (`--output`).
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

#[cfg(test)]
mod tests {
    use super::*;

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
