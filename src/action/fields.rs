//! The action's words for the request's fields: each input as its
//! action.yml names it (`` `branch-tag` ``), a switch with the value that
//! turns it on (`` `allow-rewind: true` ``), and what a field the action
//! has no input for comes from (`the push event's `before``).

use crate::field::{Face, Field, Joint, Mention};

/// Which action.yml's inputs name the fields: the publish action's
/// (action.yml, also `mode: verify`) or the promote action's
/// (promote/action.yml). A field the action has no input for keeps the
/// CLI's flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inputs {
    /// action.yml: `path`, `repository`, `tags`, `branch-tag`, ...
    Publish,
    /// promote/action.yml: `from`, `to`, `target-repository`, `reason`, ...
    Promote,
}

impl Inputs {
    /// The input that sets `field` in this action, when there is one.
    fn input(self, field: Field) -> Option<&'static str> {
        let shared = match field {
            Field::Repository => Some("`repository`"),
            Field::Username => Some("`username`"),
            Field::Password => Some("`password`"),
            Field::Insecure => Some("`insecure: true`"),
            _ => None,
        };
        shared.or(match (self, field) {
            (Inputs::Publish, Field::Path) => Some("`path`"),
            (Inputs::Publish, Field::Tag) => Some("`tags`"),
            (Inputs::Publish, Field::TimestampTag) => Some("`timestamp-tag`"),
            (Inputs::Publish, Field::BranchTag) => Some("`branch-tag`"),
            (Inputs::Publish, Field::AllowRewind) => Some("`allow-rewind: true`"),
            (Inputs::Publish, Field::ForcePushedFrom) => Some("the push event's `before`"),
            (Inputs::Publish, Field::Source) => Some("`source`"),
            (Inputs::Publish, Field::Output) => Some("the output directory"),
            (Inputs::Publish, Field::Revision) => Some("the event's commit"),
            (Inputs::Publish, Field::NoProvenance) => Some("`provenance: false`"),
            (Inputs::Publish, Field::Monolithic) => {
                Some("settings-image push --monolithic (the CLI; the action uploads in chunks)")
            }
            (Inputs::Publish, Field::AllowEmpty) => Some("`allow-empty: true`"),
            (Inputs::Publish, Field::Scan) => Some("`scan`"),
            (Inputs::Publish, Field::SourceUrl) => Some("`source-url`"),
            (Inputs::Promote, Field::From) => Some("`from`"),
            (Inputs::Promote, Field::To) => Some("`to`"),
            (Inputs::Promote, Field::TargetRepository) => Some("`target-repository`"),
            (Inputs::Promote, Field::Policy) => Some("`policy`"),
            (Inputs::Promote, Field::Force) => Some("`force: true`"),
            (Inputs::Promote, Field::Reason) => Some("`reason`"),
            (Inputs::Promote, Field::Explain) => Some("`explain: true`"),
            (Inputs::Promote, Field::At) => Some("`at`"),
            _ => None,
        })
    }
}

impl Face for Inputs {
    fn mention(&self, m: &Mention) -> String {
        match m {
            Mention::Field(f) => self.input(*f).unwrap_or(f.flag()).to_string(),
            // An input by its name alone (`` `repository` ``, not
            // `` `insecure: true` `` nor the push event's `before`).
            Mention::Subject(f) => match self.input(*f) {
                Some(name) if name.starts_with('`') && !name.contains(' ') => {
                    format!("the input {name}")
                }
                _ => self.mention(&Mention::Field(*f)),
            },
            Mention::Set(Field::Source, value) if *self == Inputs::Publish => {
                format!("`source: {value}`")
            }
            Mention::Set(f, value) => format!("{} {value}", self.mention(&Mention::Field(*f))),
            Mention::Credentials(Joint::With | Joint::And) => {
                "`username` and `password`, or an OIDC `login` (docs/registries.md)".to_string()
            }
            Mention::PathRoot => "the workspace".to_string(),
            Mention::Looked(_) => crate::field::Cli.mention(m),
        }
    }
}
