//! Unit tests of the publish face (`action/publish.rs`), kept apart so the
//! face itself stays under 700 lines.

use super::*;

use super::super::fields::Inputs;
use super::super::login::SECRET_INPUTS;

use super::inputs::env_of as env;

/// Serializes any field as `null` (only its name matters to the test).
pub(super) fn as_unit<T, S: serde::Serializer>(
    _: &T,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_unit()
}

#[test]
fn the_struct_reads_exactly_the_inputs_action_yml_declares() {
    let (declared, read) = inputs::declared_and_read::<With>("action.yml");
    // action.yml has two faces: `mode` picks one (action/mod.rs), and
    // the verify face reads its own struct (`scan` is only its).
    let (_, verify) = inputs::declared_and_read::<super::super::verify::With>("action.yml");
    assert!(verify.is_subset(&declared), "{verify:?}");
    let mut all = read.clone();
    all.extend(verify);
    all.insert("mode".to_string());
    assert_eq!(all, declared);
    assert!(!read.contains("scan") && !read.contains("mode"));
}

#[test]
fn metadata_action_lines_become_annotations_and_labels() {
    let lines = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let a = key_values(
        "annotations",
        &lines(&[
            "manifest:org.opencontainers.image.title=shop",
            "index:org.opencontainers.image.title=skipped",
            "index,manifest:org.opencontainers.image.version=main",
            "org.opencontainers.image.description=a=b, c",
        ]),
        true,
    )
    .unwrap();
    assert_eq!(
        a,
        BTreeMap::from([
            (
                "org.opencontainers.image.description".to_string(),
                "a=b, c".to_string()
            ),
            (
                "org.opencontainers.image.title".to_string(),
                "shop".to_string()
            ),
            (
                "org.opencontainers.image.version".to_string(),
                "main".to_string()
            ),
        ])
    );
    let err = key_values("labels", &lines(&["no equals sign"]), false).unwrap_err();
    assert!(err.to_string().contains("the input `labels`"), "{err}");
}

#[test]
fn hints_name_inputs_not_flags() {
    // Each error, and the inputs (in the action's words) its line must name.
    for (err, inputs) in [
        (
            Error::Rewind {
                tag: "r:main".into(),
                current: "a".into(),
                new: "b".into(),
            },
            &["`allow-rewind: true`", "the push event's `before` a"][..],
        ),
        (
            Error::TagExists {
                tag: "t".into(),
                existing: "sha256:a".into(),
                new: "sha256:b".into(),
            },
            &["`source: commit`"][..],
        ),
        (
            Error::PrefixShared {
                prefix: "feat-x".into(),
                tag: "ghcr.io/a/b:feat-x-1-abcdef0".into(),
                theirs: "refs/heads/feat-x".into(),
                ours: "refs/heads/feat+x".into(),
                suggestion: "feat_2bx".into(),
            },
            &["`timestamp-tag: feat_2bx`"][..],
        ),
        (
            Error::Source {
                path: "configs/shop".into(),
                message: crate::text!["does not exist (", crate::field::Mention::Looked(None), ")"],
                hint: Some(crate::text![
                    crate::field::Field::Path,
                    " names the settings folder"
                ]),
            },
            &[
                "configs/shop: does not exist (not on disk, not in the HEAD commit)",
                "hint: `path` names the settings folder",
            ][..],
        ),
        (
            crate::registry::parse_repository("ghcr.io/Acme/Shop").unwrap_err(),
            &["`repository: ghcr.io/acme/shop`"][..],
        ),
        (
            crate::registry::parse_repository("ghcr.io/acme/shop:v1").unwrap_err(),
            &[
                "with `tags`, not in `repository`",
                "`repository` is HOST/NAME",
            ][..],
        ),
        (
            request::Request {
                path: "x".into(),
                tags: vec![],
                target: Target::Registry(registry::Options::new("ghcr.io/a/b")),
                source: SourceMode::Commit,
                timestamp_tag: None,
                github: None,
                source_url: crate::history::SourceUrl::Origin,
                ci: Default::default(),
                forward: request::Forward {
                    branch_tag: Some("main".into()),
                    allow_rewind: true,
                    ..request::Forward::default()
                },
                provenance: true,
                revision: None,
                extra: Metadata::default(),
            }
            .validate()
            .unwrap_err(),
            &[
                "`branch-tag` \"main\" needs `timestamp-tag`",
                "add `timestamp-tag: BRANCH`",
            ][..],
        ),
    ] {
        let line = commands::error_line(WHO, &err, Inputs::Publish);
        assert!(
            !line.contains("--"),
            "a CLI flag in the action's error: {line}"
        );
        for input in inputs {
            assert!(line.contains(input), "{input} is not named: {line}");
        }
    }
}

#[test]
fn masks_cover_both_secrets_and_their_lines() {
    let e = env(&[
        ("INPUT_TOKEN", " ghs_abc \n"),
        ("INPUT_PASSWORD", "line1\nline2"),
        ("INPUT_USERNAME", "octocat"),
    ]);
    let m = commands::mask_lines(&e, &SECRET_INPUTS);
    assert!(m.contains(&"::add-mask::ghs_abc".to_string()), "{m:?}");
    assert!(
        m.contains(&"::add-mask::line1%0Aline2".to_string()),
        "{m:?}"
    );
    assert!(m.contains(&"::add-mask::line1".to_string()), "{m:?}");
    assert!(m.contains(&"::add-mask::line2".to_string()), "{m:?}");
    assert!(!m.iter().any(|l| l.contains("octocat")));
    // What a registry echoing the Authorization header would print.
    assert!(
        m.contains(&"::add-mask::b2N0b2NhdDpnaHNfYWJj".to_string()),
        "base64(octocat:ghs_abc) is masked: {m:?}"
    );
    // Credentials written into the repository input, for later steps.
    let with_userinfo = env(&[("INPUT_REPOSITORY", "alice:S3cret@ghcr.io/a/b")]);
    assert_eq!(
        commands::mask_lines(&with_userinfo, &SECRET_INPUTS),
        ["::add-mask::S3cret"]
    );
    assert!(commands::mask_lines(&env(&[("INPUT_TOKEN", "  ")]), &SECRET_INPUTS).is_empty());
}

#[test]
fn runner_facts_are_checked_before_they_are_printed() {
    let ok = env(&[
        ("GITHUB_EVENT_NAME", "pull_request"),
        ("GITHUB_RUN_ATTEMPT", "2"),
    ]);
    assert_eq!(run_facts(&ok).unwrap(), ("pull_request".into(), "2".into()));
    assert_eq!(run_facts(&env(&[])).unwrap(), (String::new(), "1".into()));
    for (k, v) in [
        ("GITHUB_EVENT_NAME", "push\n::add-mask::x"),
        ("GITHUB_EVENT_NAME", "Push"),
        ("GITHUB_RUN_ATTEMPT", "1\n::stop-commands::t"),
        ("GITHUB_RUN_ATTEMPT", ""),
    ] {
        let err = run_facts(&env(&[(k, v)])).unwrap_err();
        assert!(err.to_string().starts_with(k), "{err}");
        assert_eq!(err.exit_code(), 2);
    }
}

#[test]
fn password_wins_over_token_and_needs_a_username() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    let base = [
        ("GITHUB_WORKSPACE", ws),
        ("INPUT_PATH", "cfg"),
        ("INPUT_REPOSITORY", "ghcr.io/a/b"),
        ("INPUT_TIMESTAMP-TAG", "main"),
        ("INPUT_TOKEN", "tok"),
    ];
    let mut e = env(&base);
    e.insert("INPUT_USERNAME".into(), "u".into());
    e.insert("INPUT_PASSWORD".into(), "pw".into());
    let i = read_inputs(&e).unwrap();
    assert_eq!(i.credentials.unwrap().password, "pw");
    assert_eq!(i.github_token, Token::new("tok"));
    assert_eq!(i.selection.paths(), [PathBuf::from("cfg")]);
    let e = env(&base);
    assert!(
        read_inputs(&e)
            .unwrap_err()
            .to_string()
            .contains("username")
    );
    let mut e = env(&base);
    e.insert("INPUT_TOKEN".into(), String::new());
    assert!(read_inputs(&e).unwrap().credentials.is_none());
    e.insert("INPUT_SOURCE".into(), "disk".into());
    assert!(
        read_inputs(&e)
            .unwrap_err()
            .to_string()
            .contains("`source`")
    );
    e.insert("INPUT_SOURCE".into(), "worktree".into());
    e.remove("INPUT_TIMESTAMP-TAG");
    assert!(read_inputs(&e).unwrap_err().to_string().contains("no tag"));
}

#[test]
fn a_symlink_out_of_the_workspace_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("cfg")).unwrap();
    let err = check_no_symlink_escape(dir.path(), &dir.path().join("cfg")).unwrap_err();
    assert!(err.to_string().contains("outside the workspace"), "{err}");
    std::fs::create_dir(dir.path().join("real")).unwrap();
    check_no_symlink_escape(dir.path(), &dir.path().join("real")).unwrap();
}

#[test]
fn an_error_line_carries_the_hint_escaped() {
    let line = commands::error_line(
        WHO,
        &Error::input("bad: x", Some("do y".to_string())),
        Inputs::Publish,
    );
    assert_eq!(
        line,
        "::error title=settings-image%3A invalid input::bad: x%0Ahint: do y"
    );
}

#[test]
fn a_rerun_is_a_notice_unless_flux_moves_to_the_older_commit() {
    let anomaly = |served: &str| Anomaly {
        kind: AnomalyKind::RerunOfOlder,
        case: crate::release::ordering::Case::Rerun {
            commit: "2222222".into(),
            ts: 200,
            new_tag: "main-200-2000000".into(),
            newest: crate::release::channel::parse("main", "main-200-3000000").unwrap(),
            rev: "3000000".into(),
            moves_to_new: false,
        },
        served: served.into(),
        other_tag: "main-200-3000000".into(),
    };
    let tag = Some("main-200-2000000");
    let kept = anomaly_annotation(&anomaly("main-200-3000000"), tag);
    assert!(kept.starts_with("::notice "), "{kept}");
    let moved = anomaly_annotation(&anomaly("main-200-2000000"), tag);
    assert!(moved.starts_with("::warning "), "{moved}");
}

/// One folder on one line is the one-element case; several lines, a glob
/// or `plan: true` are several (the `images` outputs), whatever they match.
#[test]
fn several_lines_a_glob_or_the_plan_are_several() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    for (path, plan, several) in [
        ("configs/shop\n", "", false),
        ("configs/shop\nconfigs/billing", "", true),
        ("configs/*", "", true),
        ("configs/shop", "true", true),
    ] {
        let e = env(&[
            ("GITHUB_WORKSPACE", ws),
            ("INPUT_PATH", path),
            ("INPUT_PLAN", plan),
            ("INPUT_REPOSITORY", "ghcr.io/a/{name}"),
            ("INPUT_TAGS", "v1"),
        ]);
        let read = read_inputs(&e);
        // A glob needs folders to match: none here, an input error.
        if path.contains('*') {
            let err = read.unwrap_err();
            assert_eq!(
                err.render(&Inputs::Publish),
                "`path` \"configs/*\" matches no folder"
            );
            continue;
        }
        assert_eq!(
            read.unwrap().selection.several,
            several,
            "{path:?} {plan:?}"
        );
    }
    let e = env(&[("GITHUB_WORKSPACE", ws), ("INPUT_PLAN", "yes")]);
    assert!(read_inputs(&e).is_err());
}

#[test]
fn two_folders_to_one_repository_name_the_input_as_the_notice_does() {
    let folder = |p: &str| crate::many::Folder {
        path: p.into(),
        name: "shop".into(),
        slug: p.replace('/', "-"),
    };
    let err = crate::many::repositories(
        "ghcr.io/acme/settings",
        &[folder("eu/shop"), folder("us/shop")],
        Field::Repository,
    )
    .unwrap_err();
    // The action's other messages about an input's value (the
    // lower-casing notice, `jobs`, `labels`) say "the input `NAME`".
    assert_eq!(
        err.render(&Inputs::Publish),
        "the input `repository` \"ghcr.io/acme/settings\" maps the folders eu/shop and \
         us/shop to the same ghcr.io/acme/settings"
    );
    assert_eq!(
        err.hint_in(&Inputs::Publish).as_deref(),
        Some(
            "put {name} (the folder's last component) or {path} (its path as a slug) into \
             the input `repository`"
        )
    );
    // The CLI names its flag, as before.
    assert!(
        err.to_string()
            .starts_with("--repository \"ghcr.io/acme/settings\" maps the folders"),
        "{err}"
    );
}
