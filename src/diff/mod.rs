//! `settings-image diff`: what changes between two settings images, or an
//! image and a folder built as `build` builds it, for the reviewer of a
//! promotion or a publish.
//!
//! The files added, removed, modified, renamed (the same bytes under
//! another path) and changed in type (file, symlink, directory; the
//! execute bit is a mode change), in the byte order of their paths (a
//! rename under its new path). For a YAML or JSON file the keys that
//! changed ([`keys`]: a key path, the old and the new value, in a fixed
//! order); for other text a unified diff; for a binary file its sizes and
//! digests. Everything is bounded ([`Limits`]), and what is left out is
//! said: `12 more changed keys not shown`, `file too large to diff: 40 MiB`.
//!
//! Paths come only from the two layers ([`layer`]): no file of this
//! machine is ever read for an image, an entry outside the image root is
//! named and set aside, and a symlink's target is shown, never followed.
//!
//! Why compare tar entries and not unpack: unpacking writes files named by
//! whoever pushed the image; reading the tar stream writes nothing.

mod compare;
pub mod keys;
pub mod layer;
pub mod read;
pub mod review;
pub mod text;

use serde::Serialize;

pub use compare::compare;
pub use keys::{Format, KeyChange};
pub use read::Image;

/// The exit code of `diff --exit-code` when the two sides differ. Not
/// git's 1: here 1 is a failure (I/O, history), and a script must tell
/// "different" from "could not compare".
pub const DIFFERENT: u8 = 9;

/// How much a diff reads and shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest compressed layer downloaded.
    pub layer_bytes: u64,
    /// The most bytes a layer may inflate to.
    pub inflated: u64,
    /// The most entries a layer may hold.
    pub entries: usize,
    /// The largest file whose content is compared.
    pub file: u64,
    /// The most bytes of file contents read per side for the comparison.
    pub contents: u64,
    /// The most file changes listed.
    pub files: usize,
    /// The most key changes shown per file.
    pub keys: usize,
    /// The most unified-diff lines shown per file.
    pub lines: usize,
    /// The most key-change and diff lines shown in all.
    pub total_lines: usize,
    /// The most characters of a value shown.
    pub value: usize,
}

impl Limits {
    /// The CLI's: what a terminal shows.
    pub const DEFAULT: Limits = Limits {
        layer_bytes: 2 << 30,
        inflated: 4 << 30,
        entries: 200_000,
        file: 1 << 20,
        contents: 32 << 20,
        files: 1_000,
        keys: 50,
        lines: 200,
        total_lines: 2_000,
        value: 200,
    };

    /// A job summary's: a page a reviewer reads (GitHub shows at most
    /// 1 MiB of a step's summary).
    pub const SUMMARY: Limits = Limits {
        files: 200,
        keys: 20,
        lines: 60,
        total_lines: 400,
        value: 120,
        ..Limits::DEFAULT
    };
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

/// One side of a diff, as shown.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Side {
    /// What was compared: `HOST/NAME:TAG`, `HOST/NAME@sha256:...`, or
    /// `folder PATH` (at commit ...), or `(nothing)` for an empty side.
    pub name: String,
    /// The manifest digest (of the image the folder builds, for a folder).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// The commit the image records (`org.opencontainers.image.revision`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// Its time (`org.opencontainers.image.created`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
    /// Regular files it holds.
    pub files: usize,
}

/// How many entries changed, by status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// New paths.
    pub added: usize,
    /// Paths gone.
    pub removed: usize,
    /// Same path and type, other content, target or mode.
    pub modified: usize,
    /// The same bytes under another path.
    pub renamed: usize,
    /// Same path, another type.
    pub type_changed: usize,
    /// Files, symlinks and other non-directories the same on both sides.
    pub unchanged: usize,
}

impl Counts {
    /// Entries that changed in any way.
    pub fn changed(&self) -> usize {
        self.added + self.removed + self.modified + self.renamed + self.type_changed
    }
}

/// What happened to a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Only the new side has it.
    Added,
    /// Only the old side has it.
    Removed,
    /// Both have it, of one type; its content, target or mode differs.
    Modified,
    /// The old side has the same bytes under `from`.
    Renamed,
    /// Both have it, of two types.
    TypeChanged,
}

impl Status {
    /// The word the text output shows in its first column.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Added => "added",
            Status::Removed => "removed",
            Status::Modified => "modified",
            Status::Renamed => "renamed",
            Status::TypeChanged => "type",
        }
    }
}

/// An entry as the diff shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Facts {
    /// `file`, `directory`, `symlink`, `hard link` or `special file`.
    pub kind: &'static str,
    /// Permission bits, octal (`0644`).
    pub mode: String,
    /// A file's size in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// A file's `sha256:` digest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// A link's target, as the layer holds it (never followed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

/// What a modified file's contents show.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Content {
    /// Key-level changes of a YAML or JSON file.
    Keys {
        /// `yaml` or `json`.
        format: Format,
        /// The changes shown, in [`keys`]' order.
        changes: Vec<KeyChange>,
        /// Changes after those, not shown.
        not_shown: usize,
    },
    /// A unified diff of other text (or of YAML or JSON that does not
    /// parse on one side: `note` says why).
    Text {
        /// The diff's lines, `a/PATH` and `b/PATH` headers first.
        diff: String,
        /// Lines after those, not shown.
        not_shown: usize,
        /// Why a YAML or JSON file is shown as text.
        #[serde(skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
    /// A binary file: the sizes and digests are the entry facts.
    Binary,
    /// A file larger than [`Limits::file`] on either side.
    TooLarge {
        /// The largest file compared.
        limit: u64,
    },
    /// Not compared or not shown: why (a budget spent).
    NotShown {
        /// Which budget.
        reason: String,
    },
}

/// One changed path.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileChange {
    /// The path in the image (the new path of a rename).
    pub path: String,
    /// What happened to it.
    pub status: Status,
    /// A rename's old path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// The entry on the old side.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old: Option<Facts>,
    /// The entry on the new side.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new: Option<Facts>,
    /// What the contents show, for a modified file whose bytes differ.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<Content>,
}

/// An entry of a layer that is not compared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refused {
    /// `old` or `new`.
    pub side: &'static str,
    /// Its path as the layer names it.
    pub path: String,
    /// Why.
    pub why: String,
}

/// What `settings-image diff` prints.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diff {
    /// The old side.
    pub old: Side,
    /// The new side.
    pub new: Side,
    /// Whether anything differs (a listed change or a refused entry).
    pub different: bool,
    /// How many paths changed, by status (all of them, listed or not).
    pub counts: Counts,
    /// The changed paths, in the byte order of their path, at most
    /// [`Limits::files`].
    pub changes: Vec<FileChange>,
    /// Changed paths after those, not listed.
    pub changes_not_shown: usize,
    /// Entries of either layer set aside: outside the image root, below
    /// a symlink of the layer, or not UTF-8.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<Refused>,
}
