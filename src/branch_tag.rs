//! What a run did to the branch tag, as one value that each face renders
//! once: the CLI (`src/cli.rs`), the action (`src/action/publish.rs`) and
//! the controller (`src/controller/spec.rs`). A refused move is not an
//! outcome but an error ([`crate::Error::Rewind`]).

use crate::publish::guards::BranchReport;
use crate::release::ordering::{AnomalyKind, BranchMove};
use crate::report::Report;

/// What a run did to the branch tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchTagOutcome {
    /// The branch tag.
    pub name: String,
    /// The commit this run built, when it built one.
    pub commit: Option<String>,
    /// The commit the tag's image records after this run (as far as the
    /// run read).
    pub recorded: Option<String>,
    /// The timestamp tag whose image the tag was moved on to after a
    /// racing run, if any.
    pub repaired_to: Option<String>,
    /// How the tag changed.
    pub change: Change,
}

/// How the branch tag changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// It did not exist and was made.
    Created,
    /// Moved forward to a descendant.
    Forward,
    /// Already named this commit.
    Unchanged,
    /// Held on a newer commit, which descends from this one.
    Held {
        /// The commit the tag records.
        current: String,
        /// The run follows a force-push (the push event said so).
        force_push: bool,
        /// The timestamp tags went back: the force-push dropped `current`.
        rewound: bool,
    },
    /// Moved back, following a force-push the event proves dropped the
    /// commit it named.
    Followed {
        /// The commit it named, which the force-push dropped.
        current: String,
    },
    /// Moved back to an ancestor (allowed rewind).
    Rewound {
        /// The commit it named, which a force-push dropped.
        current: String,
    },
    /// Moved sideways to a commit that does not descend from the one it
    /// named (allowed rewind).
    Diverged {
        /// The commit it named, when its image records one.
        current: Option<String>,
    },
}

impl BranchTagOutcome {
    /// The branch tag's outcome in `report`, when the run had one;
    /// `force_push`: the run follows a force-push.
    pub fn of(report: &Report, force_push: bool) -> Option<Self> {
        let rewound = report
            .anomaly
            .as_ref()
            .is_some_and(|a| a.kind == AnomalyKind::RewoundHistory);
        report
            .branch_tag
            .as_ref()
            .map(|b| Self::from_report(b, report.commit.clone(), force_push, rewound))
    }

    fn from_report(
        b: &BranchReport,
        commit: Option<String>,
        force_push: bool,
        rewound: bool,
    ) -> Self {
        let change = match &b.plan {
            BranchMove::Create => Change::Created,
            BranchMove::Forward => Change::Forward,
            BranchMove::Same => Change::Unchanged,
            BranchMove::KeepNewer { current } => Change::Held {
                current: current.clone(),
                force_push,
                rewound,
            },
            BranchMove::Rewound {
                current,
                proven: true,
            } => Change::Followed {
                current: current.clone(),
            },
            BranchMove::Rewound { current, .. } => Change::Rewound {
                current: current.clone(),
            },
            BranchMove::Diverged { current } => Change::Diverged {
                current: current.clone(),
            },
        };
        BranchTagOutcome {
            name: b.name.clone(),
            commit,
            recorded: b.commit.clone(),
            repaired_to: b.repaired_to.clone(),
            change,
        }
    }

    /// Whether the tag was moved back or sideways (a warning in every face).
    pub fn rewound(&self) -> bool {
        matches!(
            self.change,
            Change::Followed { .. } | Change::Rewound { .. } | Change::Diverged { .. }
        )
    }
}
