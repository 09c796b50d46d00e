//! What a run did to the branch tag, as the one value the registry push
//! makes ([`crate::publish::guards`]), the report carries and each face
//! renders once: the CLI (`src/cli.rs`), the action
//! (`src/action/publish.rs`) and the controller (`src/controller/spec.rs`).
//! A refused move is not an outcome but an error ([`crate::Error::Rewind`]).

use serde::ser::{Serialize, SerializeStruct, Serializer};

use crate::release::ordering::BranchMove;

/// What a run did to the branch tag. In `--json` it is
/// `{"name", "outcome", "commit", "repaired_to"}`: the outcome's
/// kebab-case name ([`BranchTag::outcome`]) and the commit the tag's image
/// records after the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchTag {
    /// The branch tag.
    pub name: String,
    /// The commit this run built.
    pub commit: Option<String>,
    /// The commit the tag's image records after this run (as far as the
    /// run read: what it put, unless its read-back had to ask).
    pub recorded: Option<String>,
    /// The timestamp tag whose image the tag was moved on to after a
    /// racing run, if any.
    pub repaired_to: Option<String>,
    /// How the tag changed.
    pub change: Change,
    /// Racing runs that could not be ordered against this one.
    pub unordered: Option<Unordered>,
}

/// Tagged commits of racing runs the read-back could not order against
/// this run's (a commit not in the checkout, no GitHub API): a racing
/// run's newer image may not have been followed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unordered {
    /// How many.
    pub count: usize,
    /// Why the first could not be ordered.
    pub first: String,
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

impl Change {
    /// The change the push makes as `plan` decided it; `force_push`: the
    /// run follows a force-push.
    pub fn of(plan: &BranchMove, force_push: bool) -> Change {
        match plan {
            BranchMove::Create => Change::Created,
            BranchMove::Forward => Change::Forward,
            BranchMove::Same => Change::Unchanged,
            BranchMove::KeepNewer { current } => Change::Held {
                current: current.clone(),
                force_push,
                rewound: false,
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
        }
    }
}

impl BranchTag {
    /// The outcome's name, as `--json` and the action's `branch-tag`
    /// output spell it: `created`, `moved`, `unchanged`, `kept-newer` or
    /// `rewound` (followed, rewound and diverged alike).
    pub fn outcome(&self) -> &'static str {
        match self.change {
            Change::Created => "created",
            Change::Forward => "moved",
            Change::Unchanged => "unchanged",
            Change::Held { .. } => "kept-newer",
            Change::Followed { .. } | Change::Rewound { .. } | Change::Diverged { .. } => "rewound",
        }
    }

    /// Whether the run changed the branch tag in the registry: created,
    /// moved or rewound it, or moved it on after a racing run.
    pub fn changed(&self) -> bool {
        !matches!(self.change, Change::Unchanged | Change::Held { .. })
            || self.repaired_to.is_some()
    }

    /// Whether the tag was moved back or sideways (a warning in every face).
    pub fn rewound(&self) -> bool {
        matches!(
            self.change,
            Change::Followed { .. } | Change::Rewound { .. } | Change::Diverged { .. }
        )
    }
}

impl Serialize for BranchTag {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let fields =
            2 + usize::from(self.recorded.is_some()) + usize::from(self.repaired_to.is_some());
        let mut st = s.serialize_struct("BranchTag", fields)?;
        st.serialize_field("name", &self.name)?;
        st.serialize_field("outcome", self.outcome())?;
        if let Some(c) = &self.recorded {
            st.serialize_field("commit", c)?;
        }
        if let Some(t) = &self.repaired_to {
            st.serialize_field("repaired_to", t)?;
        }
        st.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(change: Change) -> BranchTag {
        BranchTag {
            name: "main".into(),
            commit: Some("b".into()),
            recorded: Some("a".into()),
            repaired_to: None,
            change,
            unordered: None,
        }
    }

    /// The JSON and output names are the ones `--json` documents, one per
    /// change, and a held or unchanged tag is not a change to the registry.
    #[test]
    fn each_change_has_its_outcome_name() {
        let held = Change::Held {
            current: "a".into(),
            force_push: false,
            rewound: false,
        };
        for (change, name, changed) in [
            (Change::Created, "created", true),
            (Change::Forward, "moved", true),
            (Change::Unchanged, "unchanged", false),
            (held.clone(), "kept-newer", false),
            (
                Change::Followed {
                    current: "a".into(),
                },
                "rewound",
                true,
            ),
            (
                Change::Rewound {
                    current: "a".into(),
                },
                "rewound",
                true,
            ),
            (Change::Diverged { current: None }, "rewound", true),
        ] {
            let t = tag(change);
            assert_eq!((t.outcome(), t.changed()), (name, changed), "{t:?}");
        }
        let mut repaired = tag(held);
        repaired.repaired_to = Some("main-2-bbbbbbb".into());
        assert!(repaired.changed(), "moved on after a racing run");
        assert_eq!(
            serde_json::to_string(&repaired).unwrap(),
            r#"{"name":"main","outcome":"kept-newer","commit":"a","repaired_to":"main-2-bbbbbbb"}"#
        );
        let mut bare = tag(Change::Created);
        bare.recorded = None;
        assert_eq!(
            serde_json::to_string(&bare).unwrap(),
            r#"{"name":"main","outcome":"created"}"#
        );
    }
}
