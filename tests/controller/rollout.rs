//! SettingsRollouts on the API server alone (no kubelet, no
//! controller-manager): the tests write what those would (the pods, their
//! Ready condition, a Deployment's status counts through the status
//! subresource), so every time a record derives from is chosen here.
//!
//! The oracles: `oras discover` and `oras pull` (another OCI client) for
//! the records in the registry, kubectl for the status and Events, the
//! registry's tags (curl) for what `promote` wrote, and the times the test
//! wrote into the pods for `readySince` / `endedAt`.

use super::*;
use common::oci::{attach_rollout_record, oras_discover_tree, rollout_records};
use common::registry::settings;

/// Pushes a fresh folder as `tag`; its digest.
fn candidate(repo: &str, tag: &str) -> String {
    let dir = settings(2, tag);
    let out: Value = TestCommand::new()
        .args(["push", "--path"])
        .arg(dir.path())
        .args([
            "--repository",
            repo,
            "--tag",
            tag,
            "--json",
            "--no-provenance",
        ])
        .json();
    out["digest"].as_str().unwrap().to_string()
}

fn pod_spec(reference: &str) -> String {
    json!({
        "containers": [{"name": "app", "image": "registry.example/app:1",
                        "volumeMounts": [{"name": "settings", "mountPath": "/settings"}]}],
        "volumes": [{"name": "settings", "image": {"reference": reference}}],
    })
    .to_string()
}

/// Creates pod `name` of the `shop` Deployment mounting `reference`, with
/// its Ready condition as the kubelet would write it.
fn pod(k: &Kube, ns: &str, name: &str, reference: &str, ready: bool, since: &str) {
    k.apply(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {ns}\n  labels: {{app: shop}}\nspec: {}",
        pod_spec(reference)
    ));
    let status = json!({"status": {"conditions": [
        {"type": "Ready", "status": if ready { "True" } else { "False" }, "lastTransitionTime": since}
    ]}});
    k.patch_status(ns, "pod", name, &status.to_string());
}

/// The `shop` Deployment mounting `reference`.
fn deployment(k: &Kube, ns: &str, reference: &str) {
    k.apply(&format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: shop\n  namespace: {ns}\n  labels: {{app: shop}}\nspec:\n  replicas: 1\n  \
         selector: {{matchLabels: {{app: shop}}}}\n  template:\n    metadata: {{labels: {{app: shop}}}}\n    spec: {}",
        pod_spec(reference)
    ));
}

/// Writes the Deployment's status counts as the deployment controller would.
fn counts(k: &Kube, ns: &str, total: u32, updated: u32, ready: u32) {
    let d = get(k, ns, "deployment/shop");
    let status = json!({"status": {
        "observedGeneration": d["metadata"]["generation"],
        "replicas": total, "updatedReplicas": updated,
        "readyReplicas": ready, "availableReplicas": ready,
    }});
    k.patch_status(ns, "deployment", "shop", &status.to_string());
}

/// Waits until SettingsRollout `staging` satisfies `pred`.
fn wait_rollout(
    ctl: &Controller,
    k: &Kube,
    ns: &str,
    what: &str,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    k.wait(
        ns,
        "settingsrollout/staging",
        what,
        Duration::from_millis(250),
        pred,
        || format!("controller log:\n{}", ctl.logs()),
    )
}

/// The one workload entry of the status: (digest, state, readySince).
fn entry(v: &Value) -> Option<(String, String, String)> {
    let w = v["status"]["workloads"].as_array()?;
    assert!(w.len() <= 1, "{w:?}");
    let w = w.first()?;
    Some((
        w["digest"].as_str()?.to_string(),
        w["state"].as_str()?.to_string(),
        w["readySince"].as_str().unwrap_or_default().to_string(),
    ))
}

/// The rollout records of `subject` as oras pulls them: (referrer digest,
/// record JSON), in the order oras lists them.
fn records(subject: &str) -> Vec<(String, Value)> {
    rollout_records(subject, &["--plain-http"])
}

/// The Events on SettingsRollouts: (type, reason, note).
fn rollout_events(k: &Kube, ns: &str) -> Vec<(String, String, String)> {
    events_of(k, ns, "SettingsRollout", None)
}

/// `promote --from main --to prod --json --policy POLICY EXTRA`.
fn promote(repo: &str, policy: &Path, extra: &[&str]) -> Value {
    let v: Value = TestCommand::new()
        .promote_main_to_prod(repo)
        .arg("--json")
        .arg("--policy")
        .arg(policy)
        .args(extra)
        .json();
    eprintln!("promote {extra:?}:\n{v:#}");
    v
}

/// `promote --explain --at AT` as a person reads it.
fn explain_text(repo: &str, policy: &Path, at: &str) -> String {
    TestCommand::new()
        .promote_main_to_prod(repo)
        .args(["--explain", "--at", at, "--policy"])
        .arg(policy)
        .ok()
}

fn rfc3339(t: std::time::SystemTime) -> String {
    let secs = t.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    common::rfc3339(secs)
}

/// Healthy, crash-looping, healthy: the records, the status, what promote
/// decides before and after the soak, and the failure paths (a registry
/// that refuses the record, a restart mid-rollout, records pushed by hand,
/// the workload deleted).
#[test]
fn three_candidates_in_staging_leave_records_that_gate_production() {
    let k = cluster();
    let ns = namespace(k, "rollout");
    let reg = Registry::start(Auth::None);
    let proxy = Proxy::start(reg.port);
    let repo = format!("{}/team/shop", proxy.host());
    let t1 = "main-1700000100-aaaaaaa";
    let t2 = "main-1700000200-bbbbbbb";
    let t3 = "main-1700000300-ccccccc";
    let (d1, d2, d3) = (
        candidate(&repo, t1),
        candidate(&repo, t2),
        candidate(&repo, t3),
    );
    let r1 = format!("{repo}:{t1}@{d1}");
    let r2 = format!("{repo}:{t2}@{d2}");
    let r3 = format!("{repo}:{t3}@{d3}");
    k.apply(&format!(
        "apiVersion: settings-image.configbutler.io/v1alpha1\nkind: SettingsRollout\nmetadata:\n  name: staging\n  namespace: {ns}\n\
         spec:\n  repository: {repo}\n  gracePeriod: 20s\n  selector: {{matchLabels: {{app: shop}}}}\n"
    ));
    // A workload the selector leaves out is never recorded.
    k.apply(&format!(
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: other\n  namespace: {ns}\nspec:\n  \
         selector: {{matchLabels: {{app: other}}}}\n  template:\n    metadata: {{labels: {{app: other}}}}\n    spec: {}",
        pod_spec(&r1)
    ));
    let mut ctl = Controller::start(k, &ns, &["--cluster-name", "staging"]);

    // 1. The first candidate, Ready three hours ago; the registry refuses
    //    the record at first.
    let now = std::time::SystemTime::now();
    let ready1 = rfc3339(now - Duration::from_secs(3 * 3600));
    proxy.set_rule(|method, path| {
        if method == "PUT" && path.contains("/manifests/sha256:") {
            Action::RespondBody(
                403,
                r#"{"errors":[{"code":"DENIED","message":"no records today"}]}"#.into(),
            )
        } else {
            Action::Forward
        }
    });
    deployment(k, &ns, &r1);
    pod(k, &ns, "shop-1", &r1, true, &ready1);
    counts(k, &ns, 1, 1, 1);
    let v = wait_rollout(&ctl, k, &ns, "RecordFailed", |v| {
        condition(v, "Ready").is_some_and(|c| c.1 == "RecordFailed")
    });
    let (_, _, msg) = condition(&v, "Ready").unwrap();
    assert!(
        msg.contains("no records today") && msg.contains(&d1),
        "{msg}"
    );
    assert_eq!(
        entry(&v).map(|e| e.1),
        Some("Progressing".to_string()),
        "nothing recorded: the status does not say Ready"
    );
    eventually(Duration::from_secs(60), Duration::from_millis(250), || {
        let events = rollout_events(k, &ns);
        if events
            .iter()
            .any(|e| e.0 == "Warning" && e.1 == "RecordFailed")
        {
            Ok(())
        } else {
            Err(format!("no Warning RecordFailed Event: {events:?}"))
        }
    });
    proxy.set_rule(|_, _| Action::Forward);
    let v = wait_rollout(&ctl, k, &ns, "D1 Ready", |v| {
        entry(v).is_some_and(|e| e.1 == "Ready")
            && condition(v, "Ready").is_some_and(|c| c.0 == "True")
    });
    assert_eq!(
        entry(&v),
        Some((d1.clone(), "Ready".into(), ready1.clone()))
    );
    let kubectl_get = stdout_of(k.kubectl().args(["get", "settingsrollout", "-n", &ns]));
    eprintln!("kubectl get settingsrollout:\n{kubectl_get}");
    assert!(
        kubectl_get.contains(&d1) && kubectl_get.contains(&ready1),
        "{kubectl_get}"
    );
    let recs = records(&format!("{repo}@{d1}"));
    assert_eq!(recs.len(), 1, "{recs:?}");
    assert_eq!(
        recs[0].1,
        json!({"cluster": "staging", "namespace": ns, "kind": "Deployment", "name": "shop",
               "repository": repo, "digest": d1, "state": "ready", "readySince": ready1, "replicas": 1})
    );
    assert_eq!(v["status"]["workloads"][0]["record"], recs[0].0.as_str());

    // 2. The second candidate crash-loops: its pod never becomes Ready,
    //    the first pod keeps serving. The controller restarts mid-rollout.
    deployment(k, &ns, &r2);
    pod(
        k,
        &ns,
        "shop-2",
        &r2,
        false,
        &rfc3339(std::time::SystemTime::now()),
    );
    counts(k, &ns, 2, 1, 1);
    let v = wait_rollout(&ctl, k, &ns, "D2 Progressing", |v| {
        entry(v).is_some_and(|e| e.0 == d2 && e.1 == "Progressing")
    });
    let started2 = get(k, &ns, "pod/shop-2")["metadata"]["creationTimestamp"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        v["status"]["workloads"][0]["unavailableSince"],
        started2.as_str()
    );
    assert_eq!(ctl.terminate(), 0);
    std::thread::sleep(Duration::from_secs(21));
    let ctl2 = Controller::start(k, &ns, &["--cluster-name", "staging"]);
    let v = wait_rollout(&ctl2, k, &ns, "D2 Unavailable", |v| {
        entry(v).is_some_and(|e| e.0 == d2 && e.1 == "Unavailable")
    });
    drop(ctl);
    let recs1 = records(&format!("{repo}@{d1}"));
    assert_eq!(recs1.len(), 2, "{recs1:?}");
    let ended1 = recs1.iter().find(|r| r.1["state"] == "ended").unwrap();
    assert_eq!(
        ended1.1,
        json!({"cluster": "staging", "namespace": ns, "kind": "Deployment", "name": "shop",
               "repository": repo, "digest": d1, "state": "ended", "readySince": ready1, "replicas": 1,
               "endedAt": started2, "reason": "superseded", "supersededBy": d2})
    );
    let recs2 = records(&format!("{repo}@{d2}"));
    assert_eq!(recs2.len(), 1, "{recs2:?}");
    assert_eq!(
        recs2[0].1,
        json!({"cluster": "staging", "namespace": ns, "kind": "Deployment", "name": "shop",
               "repository": repo, "digest": d2, "state": "ended", "replicas": 1,
               "endedAt": started2, "reason": "unavailable"})
    );
    assert_eq!(v["status"]["workloads"][0]["record"], recs2[0].0.as_str());

    // 3. The third candidate rolls out healthy, Ready now.
    deployment(k, &ns, &r3);
    run_ok(k.kubectl().args([
        "delete",
        "pod",
        "shop-1",
        "shop-2",
        "-n",
        &ns,
        "--wait=false",
    ]));
    let ready3 = rfc3339(std::time::SystemTime::now());
    pod(k, &ns, "shop-3", &r3, true, &ready3);
    counts(k, &ns, 1, 1, 1);
    let v = wait_rollout(&ctl2, k, &ns, "D3 Ready", |v| {
        entry(v).is_some_and(|e| e.0 == d3 && e.1 == "Ready")
    });
    assert_eq!(entry(&v).unwrap().2, ready3);
    let recs3 = records(&format!("{repo}@{d3}"));
    assert_eq!(recs3.len(), 1);
    // The same state derived again (the status lost, as after a restart
    // before the status write): the same bytes, so the same referrer.
    k.patch_status(
        &ns,
        "settingsrollout",
        "staging",
        r#"{"status":{"workloads":null}}"#,
    );
    run_ok(
        k.kubectl()
            .args(["annotate", "deployment", "shop", "-n", &ns, "poke=1"]),
    );
    let v = wait_rollout(&ctl2, k, &ns, "D3 Ready again", |v| {
        entry(v).is_some_and(|e| e.0 == d3 && e.1 == "Ready")
    });
    assert_eq!(v["status"]["workloads"][0]["record"], recs3[0].0.as_str());
    assert_eq!(
        records(&format!("{repo}@{d3}")),
        recs3,
        "written again, not the same record"
    );
    eprintln!(
        "oras discover {repo}@{d1}:\n{}",
        oras_discover_tree(&format!("{repo}@{d1}"))
    );
    eprintln!(
        "oras discover {repo}@{d2}:\n{}",
        oras_discover_tree(&format!("{repo}@{d2}"))
    );

    // Records pushed by hand onto D3 claiming a long soak: one with a
    // cluster name no controller takes, one of another shape.
    let dir = TempDir::new();
    for body in [
        json!({"cluster": "Staging!", "namespace": ns, "kind": "Deployment", "name": "shop", "repository": repo,
               "digest": d3, "state": "ready", "readySince": "2020-01-01T00:00:00Z", "replicas": 1}),
        json!({"cluster": "staging", "namespace": ns, "kind": "Deployment", "name": "shop", "repository": repo,
               "digest": d3, "state": "ready", "readySince": "2020-01-01T00:00:00Z", "replicas": 1, "trustMe": true}),
    ] {
        attach_rollout_record(&format!("{repo}@{d3}"), &body, &["--plain-http"]);
    }
    let inspected = TestCommand::new()
        .args(["inspect", &format!("{repo}@{d3}")])
        .ok();
    eprintln!("inspect {repo}@{d3}:\n{inspected}");
    assert!(
        inspected.contains(&format!(
            "ran in staging: Deployment {ns}/shop (1 replicas), ready from {ready3}"
        )),
        "{inspected}"
    );
    assert!(
        inspected.contains(
            "cluster \"Staging!\" is not a cluster name (lowercase letters, digits and '-', at most \
             63); promote's requirements ignore it"
        ),
        "{inspected}"
    );
    assert!(
        inspected.contains("not a rollout record: unknown field `trustMe`"),
        "{inspected}"
    );
    let inspected1 = TestCommand::new()
        .args(["inspect", &format!("{repo}@{d1}")])
        .ok();
    assert!(
        inspected1.contains(&format!(
            "ran in staging: Deployment {ns}/shop (1 replicas), ready from {ready1} to {started2}, superseded by {d2}"
        )),
        "{inspected1}"
    );

    // 4. Production's promote: soak 2h, never ended unavailable.
    let policy = dir.join("release-policy.yaml");
    std::fs::write(
        &policy,
        "requires:\n  - rollout: {cluster: staging, readyFor: 2h, notEnded: unavailable}\n",
    )
    .unwrap();
    let now_s = common::epoch_secs(&ready3);
    // Before the first candidate was Ready: no evidence at all.
    let before = promote(
        &repo,
        &policy,
        &[
            "--explain",
            "--at",
            &common::rfc3339(common::epoch_secs(&ready1) - 60),
        ],
    );
    assert_eq!(
        (before["decision"].as_str(), before["unmet"].as_bool()),
        (Some("wait"), Some(true))
    );
    // Now: the newest has not soaked (the hand-pushed records ignored),
    // the crashed one ended unavailable, the first soaked 3h: it goes.
    let at_now = common::rfc3339(now_s + 60);
    let text = explain_text(&repo, &policy, &at_now);
    eprintln!("promote --explain --at {at_now}:\n{text}");
    let x = promote(&repo, &policy, &["--explain", "--at", &at_now]);
    let cands: Vec<(&str, bool)> = x["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["tag"].as_str().unwrap(), c["eligible"].as_bool().unwrap()))
        .collect();
    assert_eq!(cands, [(t3, false), (t2, false), (t1, true)]);
    assert_eq!(
        x["candidates"][0]["ignored"].as_array().unwrap().len(),
        2,
        "{x}"
    );
    assert!(
        x["candidates"][1]["because"][0]
            .as_str()
            .unwrap()
            .contains("ended unavailable"),
        "{x}"
    );
    assert_eq!(x["decision"], "promote");
    assert_eq!(x["candidate"], t1);
    let p = promote(&repo, &policy, &["--at", &at_now]);
    assert_eq!(
        (p["promoted"].as_bool(), p["tag"].as_str()),
        (Some(true), Some("prod-1700000100-aaaaaaa"))
    );
    let cited: Vec<&str> = p["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["record"].as_str().unwrap())
        .collect();
    let mut want: Vec<&str> = recs1.iter().map(|r| r.0.as_str()).collect();
    want.sort();
    let mut got = cited.clone();
    got.sort();
    assert_eq!(got, want, "the promotion cites D1's two records");
    let shown = TestCommand::new()
        .args([
            "inspect",
            "--json",
            &format!("{repo}:prod-1700000100-aaaaaaa"),
        ])
        .json();
    assert_eq!(
        shown["promotions"][0]["evidence"].as_array().unwrap().len(),
        2,
        "{shown}"
    );
    // Two hours on, the newest has soaked: it goes, the crashed one never.
    let later = common::rfc3339(now_s + 2 * 3600 + 60);
    let x = promote(&repo, &policy, &["--explain", "--at", &later]);
    let cands: Vec<(&str, bool)> = x["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["tag"].as_str().unwrap(), c["eligible"].as_bool().unwrap()))
        .collect();
    assert_eq!(cands, [(t3, true), (t2, false)]);
    let p = promote(&repo, &policy, &["--at", &later]);
    assert_eq!(p["tag"], "prod-1700000300-ccccccc");
    let prod: Vec<String> = tags_of(&reg, "team/shop")
        .into_iter()
        .filter(|t| t.starts_with("prod-"))
        .collect();
    assert_eq!(
        prod,
        ["prod-1700000100-aaaaaaa", "prod-1700000300-ccccccc"],
        "the crashed candidate never reaches the channel"
    );

    // 5. The workload deleted: its run ends, with no time the cluster shows.
    run_ok(
        k.kubectl()
            .args(["delete", "deployment", "shop", "-n", &ns]),
    );
    wait_rollout(&ctl2, k, &ns, "no workload", |v| entry(v).is_none());
    let recs3 = records(&format!("{repo}@{d3}"));
    let gone: Vec<&Value> = recs3
        .iter()
        .map(|r| &r.1)
        .filter(|r| r["reason"] == "deleted")
        .collect();
    assert_eq!(gone.len(), 1, "{recs3:?}");
    assert_eq!(gone[0]["readySince"], ready3.as_str());
    assert!(gone[0].get("endedAt").is_none());
    let ev = rollout_events(k, &ns);
    assert!(
        ev.iter()
            .any(|e| e.1 == "Recorded" && e.2.contains("superseded")),
        "{ev:?}"
    );
    // The DaemonSet the selector leaves out (it mounts D1 too) was never in
    // the status: `entry` checks there is one workload at most, each time.
    assert_eq!(records(&format!("{repo}@{d1}")).len(), 2);
}

/// A StatefulSet and a DaemonSet, each judged by its own status fields: a
/// DaemonSet whose pod is Ready but not yet available (`numberAvailable`
/// 0, as during `minReadySeconds`) is not fully rolled out, and stays
/// unrecorded.
#[test]
fn statefulsets_and_daemonsets_are_recorded_from_their_own_status_fields() {
    let k = cluster();
    let ns = namespace(k, "kinds");
    let reg = Registry::start(Auth::None);
    let repo = format!("{}/team/agent", reg.host());
    let tag = "main-1700000100-aaaaaaa";
    let d1 = candidate(&repo, tag);
    let r1 = format!("{repo}:{tag}@{d1}");
    k.apply(&format!(
        "apiVersion: settings-image.configbutler.io/v1alpha1\nkind: SettingsRollout\nmetadata:\n  name: staging\n  namespace: {ns}\n\
         spec:\n  repository: {repo}\n"
    ));
    let ctl = Controller::start(k, &ns, &["--cluster-name", "staging"]);
    for (kind, name, extra) in [
        ("StatefulSet", "db", "  serviceName: db\n  replicas: 2\n"),
        ("DaemonSet", "agent", ""),
        ("DaemonSet", "warming", ""),
    ] {
        k.apply(&format!(
            "apiVersion: apps/v1\nkind: {kind}\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n{extra}  \
             selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec: {}",
            pod_spec(&r1)
        ));
    }
    let ready_pod = |name: &str, app: &str, ready: &str| {
        k.apply(&format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {ns}\n  labels: {{app: {app}}}\nspec: {}",
            pod_spec(&r1)
        ));
        let status = json!({"status": {"conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": ready}
        ]}});
        k.patch_status(&ns, "pod", name, &status.to_string());
    };
    ready_pod("db-0", "db", "2026-12-01T10:00:00Z");
    ready_pod("db-1", "db", "2026-12-01T10:00:40Z");
    ready_pod("agent-x", "agent", "2026-12-01T11:00:00Z");
    ready_pod("warming-x", "warming", "2026-12-01T11:00:00Z");
    let status = |kind: &str, name: &str, body: Value| {
        let generation =
            get(k, &ns, &format!("{}/{name}", kind.to_lowercase()))["metadata"]["generation"]
                .clone();
        let mut body = body;
        body["observedGeneration"] = generation;
        k.patch_status(
            &ns,
            &kind.to_lowercase(),
            name,
            &json!({"status": body}).to_string(),
        );
    };
    let ds = |available: u32| {
        json!({"desiredNumberScheduled": 1, "currentNumberScheduled": 1, "updatedNumberScheduled": 1,
               "numberReady": 1, "numberAvailable": available, "numberMisscheduled": 0})
    };
    status("DaemonSet", "warming", ds(0));
    status("DaemonSet", "agent", ds(1));
    status(
        "StatefulSet",
        "db",
        json!({"replicas": 2, "readyReplicas": 2, "availableReplicas": 2, "updatedReplicas": 2, "currentReplicas": 2}),
    );
    let v = wait_rollout(&ctl, k, &ns, "db and agent Ready", |v| {
        v["status"]["workloads"]
            .as_array()
            .is_some_and(|w| w.iter().filter(|w| w["state"] == "Ready").count() == 2)
    });
    let states: Vec<(String, String, String, String)> = v["status"]["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            let s = |k: &str| w[k].as_str().unwrap_or_default().to_string();
            (s("kind"), s("name"), s("state"), s("readySince"))
        })
        .collect();
    assert_eq!(
        states,
        [
            (
                "DaemonSet".into(),
                "agent".into(),
                "Ready".into(),
                "2026-12-01T11:00:00Z".into()
            ),
            (
                "DaemonSet".into(),
                "warming".into(),
                "Progressing".into(),
                String::new()
            ),
            (
                "StatefulSet".into(),
                "db".into(),
                "Ready".into(),
                "2026-12-01T10:00:40Z".into()
            ),
        ]
    );
    let mut recs: Vec<(String, String, u64)> = records(&format!("{repo}@{d1}"))
        .into_iter()
        .map(|(_, r)| {
            (
                r["kind"].as_str().unwrap().to_string(),
                r["name"].as_str().unwrap().to_string(),
                r["replicas"].as_u64().unwrap(),
            )
        })
        .collect();
    recs.sort();
    assert_eq!(
        recs,
        [
            ("DaemonSet".into(), "agent".into(), 1),
            ("StatefulSet".into(), "db".into(), 2)
        ]
    );
}

/// docs/controller.md, `/readyz`: started with `--cluster-name` on an API
/// server of its own without the SettingsRollout CRD, the controller is
/// not ready and `/readyz` names the missing CRD and how to install it, as
/// for a missing GitRepository CRD; the log says it once at `warn`, not
/// per retry (they are counted); once the CRD is installed it is ready
/// and a SettingsRollout is reconciled.
#[test]
fn without_the_settingsrollout_crd_readyz_names_it() {
    let k = common::kube::private();
    apply_config(&k);
    k.install_crds(&[
        &common::kube::flux_crd_dir().join("source.toolkit.fluxcd.io_gitrepositories.yaml")
    ]);
    run_ok(k.kubectl().args([
        "delete",
        "crd",
        "settingsrollouts.settings-image.configbutler.io",
    ]));
    let ns = namespace(&k, "nocrd");
    let ctl = Controller::start(&k, &ns, &["--cluster-name", "staging"]);
    let missing = "settingsrollouts: the SettingsRollout CRD (settings-image.configbutler.io/v1alpha1) \
                   is not installed: kubectl apply -k config/";
    wait_readyz(&ctl, "503 naming the SettingsRollout CRD", |code, body| {
        code == 503 && body.contains(missing)
    });
    ctl.metrics_until("three retries of the SettingsRollout watch", |m| {
        m.get("settings_image_watch_errors_total{resource=\"settingsrollouts\"}")
            .is_some_and(|n| *n >= 3.0)
    });
    let (code, body) = readyz(&ctl);
    eprintln!("/readyz without the CRD: {code}\n{body}");
    assert_eq!(code, 503);
    // Every other watch is listed: the CRD is the one thing missing.
    assert!(
        !body.contains("gitrepositories")
            && !body.contains("settingsimages")
            && !body.contains("deployments"),
        "{body}"
    );
    let logs = ctl.logs();
    let said: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains("SettingsRollout CRD"))
        .collect();
    assert_eq!(said.len(), 1, "said once, not per retry:\n{logs}");
    assert!(said[0].contains("\"warn\""), "{}", said[0]);

    k.install_crds(&[
        &repo().join("config/crd/settings-image.configbutler.io_settingsrollouts.yaml")
    ]);
    wait_readyz(&ctl, "200 once the CRD is installed", |code, _| code == 200);
    k.apply(&format!(
        "apiVersion: settings-image.configbutler.io/v1alpha1\nkind: SettingsRollout\nmetadata:\n  name: staging\n  namespace: {ns}\n\
         spec:\n  repository: registry.example/team/shop\n"
    ));
    let v = wait_rollout(&ctl, &k, &ns, "Ready", |v| {
        condition(v, "Ready").is_some_and(|c| c.0 == "True")
    });
    assert_eq!(
        condition(&v, "Ready").map(|c| c.2),
        Some("cluster staging: 0 workload(s) of the repository, 0 fully rolled out".into())
    );
}
