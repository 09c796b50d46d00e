//! What a run warns of without stopping, as values. The core makes a
//! [`Notice`]; each face words it (`crate::show::notice`), naming the
//! fields it mentions its own way.

use std::path::PathBuf;

use crate::field::Text;

/// One thing the user should know that did not stop the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// Packaged from the disk (`--source worktree`), the folder differs
    /// from its last commit `commit` at `difference` (a path, or what
    /// differs): the image holds the disk.
    WorktreeDiffers {
        /// The folder.
        path: PathBuf,
        /// The full id of the folder's last commit.
        commit: String,
        /// The first difference found.
        difference: String,
    },
    /// Packaged from the disk, no commit holding the folder was found
    /// (`cause`): the image has no commit annotations.
    NoCommit {
        /// Why (the history error's message).
        cause: Text,
    },
    /// The existing tags could not be read, so no anomaly was looked for.
    AnomaliesUnchecked {
        /// Why (the registry error's message).
        cause: Text,
    },
    /// The ref that published the newest tag `tag` could not be read from
    /// its provenance, so whether two refs share the prefix is unknown.
    PrefixOwnerUnknown {
        /// The newest timestamp tag.
        tag: String,
        /// Why (the error's message).
        cause: Text,
    },
    /// Provenance was asked for but not attached.
    NoProvenance(Unattested),
    /// The branch tag's read-back could not order `count` tagged commits
    /// of racing runs against this one (`first`: why the first could not).
    BranchUnordered {
        /// The branch tag.
        tag: String,
        /// How many commits.
        count: usize,
        /// Why the first could not be ordered.
        first: String,
    },
    /// A tag given by hand is shaped like a timestamp tag, but the folder
    /// is not in a git commit: nothing attests the commit it names.
    StampedOutsideGit {
        /// The tag.
        tag: String,
    },
    /// A caller's annotation or label `key=value` was left out: the
    /// history sets `kept`.
    MetadataKept {
        /// Annotation or label.
        kind: MetadataKind,
        /// The key.
        key: String,
        /// The caller's value.
        value: String,
        /// The history's value.
        kept: String,
    },
    /// A caller's `created` annotation was left out: a build time would
    /// make every rebuild of the commit a new image.
    CreatedIgnored {
        /// Annotation or label.
        kind: MetadataKind,
        /// The key.
        key: String,
        /// The caller's value.
        value: String,
    },
}

/// Why provenance was not attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unattested {
    /// The folder is not in a git commit.
    NoCommit,
    /// The disk was packaged (`--source worktree`), which no commit
    /// attests.
    Worktree,
}

/// Where caller metadata goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetadataKind {
    /// A manifest annotation.
    Annotation,
    /// A config label.
    Label,
}
