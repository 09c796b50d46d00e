//! Unit tests of `promote` (`promote.rs`), kept apart so the module itself
//! stays under 700 lines.

use super::*;

/// The message and hint of a break-glass refusal in `face`'s words.
fn refusal(force: bool, reason: Option<&str>, face: &dyn crate::field::Face) -> (String, String) {
    let e = break_glass(force, reason).unwrap_err();
    assert_eq!(e.exit_code(), 2, "an input error: {e}");
    (e.render(face), e.hint_in(face).unwrap_or_default())
}

#[test]
fn break_glass_needs_a_reason() {
    // The CLI's words, as the hand-written wording printed them.
    let cli = crate::field::Cli;
    let no_reason = (
        "break-glass (--force) needs a reason".to_string(),
        "add --reason \"...\" saying why the release cannot wait for a window; it is recorded with the promotion"
            .to_string(),
    );
    assert_eq!(refusal(true, None, &cli), no_reason);
    // A blank reason is no reason.
    assert_eq!(refusal(true, Some("  "), &cli), no_reason);
    assert_eq!(
        break_glass(true, Some("incident 7")).unwrap().as_deref(),
        Some("incident 7")
    );
    assert_eq!(
        refusal(false, Some("why"), &cli),
        (
            "--reason is only used with --force".to_string(),
            "add --force for break-glass, or drop --reason".to_string()
        )
    );
    assert_eq!(break_glass(false, None).unwrap(), None);
    // The action names its inputs, never a flag.
    let action = crate::action::fields::Inputs::Promote;
    assert_eq!(
        refusal(true, None, &action),
        (
            "break-glass (`force: true`) needs a reason".to_string(),
            "add `reason: \"...\"` saying why the release cannot wait for a window; it is recorded with the promotion"
                .to_string()
        )
    );
    assert_eq!(
        refusal(false, Some("why"), &action),
        (
            "`reason` is only used with `force: true`".to_string(),
            "add `force: true` for break-glass, or drop `reason`".to_string()
        )
    );
}

#[test]
fn at_is_rfc3339() {
    assert_eq!(
        parse_at("2026-12-21T10:00:00Z").unwrap().as_second(),
        1_797_847_200
    );
    // Bad input (exit 2) naming the field (the CLI words it) and the
    // text, with the fix.
    let e = parse_at("2026-12-21 10:00").unwrap_err();
    assert_eq!(e.exit_code(), 2, "{e}");
    assert!(
        e.to_string()
            .starts_with("--at \"2026-12-21 10:00\" is not a time: "),
        "{e}"
    );
    assert_eq!(
        e.hint().as_deref(),
        Some("give RFC 3339 with an offset, e.g. 2026-12-21T10:00:00Z")
    );
}

/// The record as docs/release-management.md describes it: the JSON
/// document written (optional fields left out when absent), the
/// artifact around it, and a document with every field read back.
#[test]
fn record_is_the_documented_json() {
    let r = Record {
        tag: "prod-1-abcdef0".into(),
        from_tag: "main-1-abcdef0".into(),
        from_repository: "h/r".into(),
        digest: "sha256:00".into(),
        actor: "octocat".into(),
        at: "2026-01-01T00:00:00Z".into(),
        gate_at: None,
        because: "allow window active: office hours".into(),
        forced: false,
        reason: None,
        run_url: None,
        evidence: vec![],
    };
    let a = artifact(&r).unwrap();
    let media = "application/vnd.settings-image.promotion.v1+json";
    assert_eq!(a.artifact_type, media);
    assert_eq!(a.layers.len(), 1);
    assert_eq!(a.layers[0].0, media);
    let written: serde_json::Value = serde_json::from_slice(&a.layers[0].1).unwrap();
    assert_eq!(
        written,
        serde_json::json!({
            "tag": "prod-1-abcdef0",
            "from_tag": "main-1-abcdef0",
            "from_repository": "h/r",
            "digest": "sha256:00",
            "actor": "octocat",
            "at": "2026-01-01T00:00:00Z",
            "because": "allow window active: office hours",
            "forced": false,
        })
    );
    assert_eq!(
        a.annotations,
        BTreeMap::from([
            (
                "org.opencontainers.image.created".to_string(),
                "2026-01-01T00:00:00Z".to_string()
            ),
            (
                "dev.settings-image.promotion.tag".to_string(),
                "prod-1-abcdef0".to_string()
            ),
        ])
    );
    let full = br#"{"tag":"prod-2-0123456","from_tag":"main-2-0123456","from_repository":"ghcr.io/acme/shop",
            "digest":"sha256:11","actor":"hubot","at":"2026-02-01T10:00:00Z","gate_at":"2026-02-02T09:00:00Z",
            "because":"gate shut: freeze","forced":true,"reason":"incident 7",
            "run_url":"https://github.com/acme/shop/actions/runs/9/attempts/1"}"#;
    assert_eq!(
        read_record(full).unwrap(),
        Record {
            tag: "prod-2-0123456".into(),
            from_tag: "main-2-0123456".into(),
            from_repository: "ghcr.io/acme/shop".into(),
            digest: "sha256:11".into(),
            actor: "hubot".into(),
            at: "2026-02-01T10:00:00Z".into(),
            gate_at: Some("2026-02-02T09:00:00Z".into()),
            because: "gate shut: freeze".into(),
            forced: true,
            reason: Some("incident 7".into()),
            run_url: Some("https://github.com/acme/shop/actions/runs/9/attempts/1".into()),
            evidence: vec![],
        }
    );
}
