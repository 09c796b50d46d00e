//! The action's words for the request's fields: each input as its
//! action.yml names it (`` `branch-tag` ``), a switch with the value that
//! turns it on (`` `allow-rewind: true` ``), and what a field the action
//! has no input for comes from (`the push event's `before``), or that the
//! action does not offer it. No message of the action names a CLI flag.

use crate::field::{Face, Field, Joint, Mention};

/// Which action.yml's inputs name the fields: the publish action's
/// (action.yml, also `mode: verify`) or the promote action's
/// (promote/action.yml). A field this action has no input for is the
/// other action's input, or what the action has instead, or said to be
/// one the action does not offer.
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

    /// The other action, and how this one names its inputs.
    fn other(self) -> (Inputs, &'static str) {
        match self {
            Inputs::Publish => (Inputs::Promote, "the promote action's"),
            Inputs::Promote => (Inputs::Publish, "the publish action's"),
        }
    }

    /// Whether `field` is an input by name (`` `tags` ``) of this action
    /// or the other, not what the action has instead.
    fn named_input(self, field: Field) -> bool {
        let named = |i: Inputs| i.input(field).is_some_and(|n| n.starts_with('`'));
        named(self) || (self.input(field).is_none() && named(self.other().0))
    }

    /// `field` in this action's words: its input, the other action's
    /// input, what the action has instead, or that it offers none.
    fn words(self, field: Field) -> String {
        if let Some(name) = self.input(field) {
            return name.to_string();
        }
        let (other, its) = self.other();
        match other.input(field) {
            // An input by name belongs to the other action; what the other
            // action has instead (the event's commit) is this one's too.
            Some(name) if name.starts_with('`') => return format!("{its} {name}"),
            Some(instead) => return instead.to_string(),
            None => {}
        }
        let flux = "(the action writes no Flux objects: `settings-image flux` does)";
        match field {
            Field::Monolithic => {
                "monolithic uploads, which the action does not offer (it uploads in chunks)".into()
            }
            Field::IdTokenFile => {
                "the job's ID token (the action fetches it itself with `permissions: id-token: write`)"
                    .into()
            }
            Field::Interval => "an interval, which the action does not have: it runs when its workflow does".into(),
            Field::Prefix => format!("the timestamp tag prefix Flux follows {flux}"),
            Field::SecretRef => format!("the Flux ImageRepository's registry secret {flux}"),
            Field::CertSecretRef => format!("the Flux ImageRepository's CA secret {flux}"),
            Field::GitBranch => format!("the branch the Flux automation checks out {flux}"),
            Field::GitPushBranch => format!("the branch the Flux automation pushes to {flux}"),
            Field::GitPath => format!("the cluster repository's folder the Flux automation updates {flux}"),
            // An input of one action or the other: said above.
            Field::Path
            | Field::Repository
            | Field::Tag
            | Field::TimestampTag
            | Field::BranchTag
            | Field::AllowRewind
            | Field::ForcePushedFrom
            | Field::Source
            | Field::Output
            | Field::Revision
            | Field::NoProvenance
            | Field::Insecure
            | Field::Username
            | Field::Password
            | Field::AllowEmpty
            | Field::Scan
            | Field::From
            | Field::To
            | Field::TargetRepository
            | Field::Policy
            | Field::Force
            | Field::Reason
            | Field::Explain
            | Field::At
            | Field::SourceUrl => "a setting the action does not offer".into(),
        }
    }
}

impl Face for Inputs {
    fn mention(&self, m: &Mention) -> String {
        match m {
            Mention::Field(f) => self.words(*f),
            // An input by its name alone (`` `repository` ``, not
            // `` `insecure: true` `` nor the push event's `before`).
            Mention::Subject(f) => match self.input(*f) {
                Some(name) if name.starts_with('`') && !name.contains(' ') => {
                    format!("the input {name}")
                }
                _ => self.mention(&Mention::Field(*f)),
            },
            Mention::Set(Field::Source, value) => match self {
                Inputs::Publish => format!("`source: {value}`"),
                Inputs::Promote => format!("the publish action's `source: {value}`"),
            },
            // An input set as a workflow writes it (`` `tags: v1` ``);
            // an input with its value already (`` `insecure: true` ``) or
            // what the action has instead, as it is.
            Mention::Set(f, value) => {
                let w = self.words(*f);
                let input = self.named_input(*f);
                match w.strip_suffix('`') {
                    Some(name) if input && !name.contains(':') => format!("{name}: {value}`"),
                    // What the action has instead, with the value.
                    Some(_) if !input => format!("{w} {value}"),
                    _ => w,
                }
            }
            Mention::BreakGlass => match self {
                Inputs::Publish => {
                    "the promote action with `force: true` and a `reason`".to_string()
                }
                Inputs::Promote => "`force: true` with a `reason`".to_string(),
            },
            Mention::Credentials(Joint::With | Joint::And) => {
                "`username` and `password`, or an OIDC `login` (docs/registries.md)".to_string()
            }
            Mention::Login { host, push } => format!(
                "`username` and `password`, or an OIDC `login` (docs/registries.md){}",
                if *push {
                    crate::field::ghcr_push(host, "the workflow needs")
                } else {
                    String::new()
                }
            ),
            Mention::CompareApi => {
                "give `github-token` (the job's token by default) so the GitHub \
                 compare API can answer"
                    .to_string()
            }
            Mention::PathRoot => "the workspace".to_string(),
            Mention::Looked(_) => crate::field::Cli.mention(m),
            // Only the controller fetches into mirrors.
            Mention::Bound(b) => format!("the controller's bound on {}", b.what()),
            Mention::About(_) => String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::controller::spec::Spec;
    use crate::error::{Error, GitFailure};
    use crate::field::{FetchBound, Text};
    use crate::request::{Forward, Request, Target};
    use crate::text;

    /// `t` in the publish action's, the promote action's and a
    /// SettingsImage's words.
    fn faces(t: &Text) -> [String; 3] {
        [
            t.render(&Inputs::Publish),
            t.render(&Inputs::Promote),
            t.render(&Spec),
        ]
    }

    /// Every field and every kind of mention, in either action's words:
    /// none names a flag of the CLI.
    #[test]
    fn no_mention_names_a_cli_flag() {
        for face in [Inputs::Publish, Inputs::Promote] {
            for m in crate::field::every_mention() {
                let said = face.mention(&m);
                assert_eq!(
                    crate::field::names_a_flag(&said),
                    None,
                    "{face:?} {m:?}: {said}"
                );
                assert!(!said.contains("CLI"), "{face:?} {m:?}: {said}");
            }
        }
    }

    #[test]
    fn a_timestamp_branch_tag_in_each_face() {
        let e = Request {
            timestamp_tag: Some("main".into()),
            forward: Forward {
                branch_tag: Some("main-1700000000-0a1b2c3".into()),
                ..Forward::default()
            },
            ..Request::new(
                PathBuf::from("x"),
                Target::Registry(crate::registry::Options::new("ghcr.io/a/b")),
            )
        }
        .validate()
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "--branch-tag \"main-1700000000-0a1b2c3\" is a timestamp tag"
        );
        let Error::Input {
            message,
            hint: Some(hint),
        } = &e
        else {
            panic!("{e:?}");
        };
        assert_eq!(
            faces(message),
            [
                "`branch-tag` \"main-1700000000-0a1b2c3\" is a timestamp tag",
                "the publish action's `branch-tag` \"main-1700000000-0a1b2c3\" is a timestamp tag",
                "spec.branchTag \"main-1700000000-0a1b2c3\" is a timestamp tag",
            ]
        );
        assert_eq!(
            faces(hint),
            [
                "name the moving tag after the branch, e.g. `branch-tag: main`",
                "name the moving tag after the branch, e.g. the publish action's `branch-tag: main`",
                "name the moving tag after the branch, e.g. spec.branchTag: main",
            ]
        );
    }

    #[test]
    fn a_tag_in_the_repository_in_each_face() {
        let e = crate::registry::parse_repository("ghcr.io/a/b:v1").unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid repository \"ghcr.io/a/b:v1\": give the tag with --tag, not in --repository"
        );
        assert_eq!(
            faces(&e.text()),
            [
                "invalid repository \"ghcr.io/a/b:v1\": give the tag with `tags`, not in `repository`",
                "invalid repository \"ghcr.io/a/b:v1\": give the tag with the publish action's `tags`, not in \
                 `repository`",
                "invalid repository \"ghcr.io/a/b:v1\": give the tag with spec.timestampTag or spec.branchTag, \
                 not in spec.repository",
            ]
        );
    }

    #[test]
    fn fields_an_action_has_no_input_for() {
        // The registry's refusal of chunked uploads.
        let hint = text![
            "if this registry does not support chunked uploads, try ",
            Field::Monolithic
        ];
        assert_eq!(
            hint.to_string(),
            "if this registry does not support chunked uploads, try --monolithic"
        );
        assert_eq!(
            faces(&hint),
            [
                "if this registry does not support chunked uploads, try monolithic uploads, which the action \
                 does not offer (it uploads in chunks)",
                "if this registry does not support chunked uploads, try monolithic uploads, which the action \
                 does not offer (it uploads in chunks)",
                "if this registry does not support chunked uploads, try monolithic uploads, which the \
                 controller does not make (it uploads in chunks)",
            ]
        );
        // An image pushed without provenance, as `mode: verify` says it.
        let reason = text!["pushed with ", Field::NoProvenance, " or by another tool"];
        assert_eq!(
            faces(&reason),
            [
                "pushed with `provenance: false` or by another tool",
                "pushed with the publish action's `provenance: false` or by another tool",
                "pushed with spec.provenance: false or by another tool",
            ]
        );
        // Break-glass in the publish action is the promote action's.
        assert_eq!(
            Inputs::Publish.mention(&Mention::Field(Field::Force)),
            "the promote action's `force: true`"
        );
        // What the action has instead of a flag.
        assert_eq!(
            Inputs::Promote.mention(&Mention::Field(Field::Revision)),
            "the event's commit"
        );
        assert_eq!(
            Inputs::Publish.mention(&Mention::Set(Field::IdTokenFile, "FILE".into())),
            "the job's ID token (the action fetches it itself with `permissions: id-token: write`)"
        );
    }

    #[test]
    fn a_fetch_bound_is_the_controllers() {
        let e = Error::Git {
            url: "https://git.example/a.git".into(),
            message: "the server's pack holds 9 objects, more than the 2 a fetch may hold".into(),
            hint: Some("if the repository is meant to be this large".into()),
            kind: GitFailure::TooLarge(FetchBound::Objects),
        };
        assert_eq!(
            e.hint().as_deref(),
            Some(
                "if the repository is meant to be this large: raise the controller's --fetch-max-objects \
                 (docs/controller.md, \"Fetch bounds\")"
            )
        );
        assert_eq!(
            e.hint_in(&Inputs::Publish).as_deref(),
            Some(
                "if the repository is meant to be this large: raise the controller's bound on the objects one \
                 fetch may receive (docs/controller.md, \"Fetch bounds\")"
            )
        );
        assert_eq!(
            e.hint_in(&Spec).as_deref(),
            Some(
                "if the repository is meant to be this large: raise the controller's bound on the objects one \
                 fetch may receive: its container argument --fetch-max-objects (in its Deployment) \
                 (docs/controller.md, \"Fetch bounds\")"
            )
        );
    }
}
