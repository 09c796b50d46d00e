//! What the kubelet of the test run's node did, asked the way a user asks
//! it: the pods' own output (`kubectl logs`, `kubectl exec`), their status
//! and their Events. The node is the one `scripts/flux.sh up --node` starts
//! (`flux_cluster.rs`): kubelet v1.36.3, containerd v2.4.2, runc v1.5.3.
//!
//! The test pods run the cluster's busybox image and print the settings
//! file they mount, then [`PRINTED`], then wait: what they printed is
//! complete once the marker is in their log.

use std::fs;
use std::process::Output;
use std::time::Duration;

use serde_json::Value;

use super::eventually;
use super::flux_cluster::FluxCluster;
use super::registry::Registry;

/// The line a test pod prints after the file.
pub const PRINTED: &str = "#printed";

/// A container's command: prints `file` (a path inside the pod), then
/// [`PRINTED`], then waits until it is stopped (a TERM ends it at once).
pub fn print_and_wait(file: &str) -> String {
    format!(
        "[\"sh\", \"-c\", \"cat {file}; echo; echo '{PRINTED}'; trap 'exit 0' TERM; sleep 86400 & wait\"]"
    )
}

/// A pod as the API server has it.
#[derive(Debug, Clone)]
pub struct Pod {
    /// Its name.
    pub name: String,
    /// The ReplicaSet that owns it (empty for a bare pod).
    pub replica_set: String,
    /// `status.phase`.
    pub phase: String,
    /// Its first image volume's reference.
    pub reference: String,
}

impl Pod {
    fn of(v: &Value) -> Pod {
        Pod {
            name: v["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            replica_set: v["metadata"]["ownerReferences"][0]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            phase: v["status"]["phase"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            reference: v["spec"]["volumes"]
                .as_array()
                .and_then(|vs| vs.iter().find_map(|v| v["image"]["reference"].as_str()))
                .unwrap_or_default()
                .to_string(),
        }
    }
}

impl FluxCluster {
    /// The workload image of the node: Debian's busybox-static, in the
    /// cluster's own registry.
    pub fn busybox(&self) -> &str {
        self.var("BUSYBOX_IMAGE")
    }

    /// Tells the node's containerd how to reach `registry`: a `hosts.toml`
    /// with its address and, over TLS, its CA (what a cluster's admin does
    /// for a registry of a private CA). containerd reads it at each pull.
    pub fn trust_registry(&self, registry: &Registry) {
        let host = registry.host();
        let dir = std::path::Path::new(self.var("REGISTRY_HOSTS_DIR")).join(&host);
        fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
        let toml = match &registry.ca {
            Some(ca) => format!(
                "server = \"https://{host}\"\n\n[host.\"https://{host}\"]\n  capabilities = [\"pull\", \"resolve\"]\n  ca = \"{}\"\n",
                ca.display()
            ),
            None => format!(
                "server = \"http://{host}\"\n\n[host.\"http://{host}\"]\n  capabilities = [\"pull\", \"resolve\"]\n"
            ),
        };
        fs::write(dir.join("hosts.toml"), toml).expect("writing hosts.toml");
    }

    /// Waits until Deployment `name` has rolled out its current template
    /// (every replica updated and available, none of an older template
    /// left, not even terminating); its one pod then.
    pub fn rolled_out(&self, ns: &str, name: &str) -> Pod {
        let d = self.wait(ns, &format!("deployment/{name}"), "rolled out", |v| {
            let s = &v["status"];
            v["metadata"]["generation"].is_u64()
                && s["observedGeneration"] == v["metadata"]["generation"]
                && s["updatedReplicas"] == v["spec"]["replicas"]
                && s["availableReplicas"] == v["spec"]["replicas"]
                && s["replicas"] == v["spec"]["replicas"]
        });
        let revision = d["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
            .as_str()
            .expect("the Deployment's revision")
            .to_string();
        let selector: Vec<String> = d["spec"]["selector"]["matchLabels"]
            .as_object()
            .expect("matchLabels")
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
            .collect();
        let selector = selector.join(",");
        eventually(Duration::from_secs(240), Duration::from_millis(200), || {
            let rs = self.list(ns, "replicasets", &selector);
            let current: Vec<&Value> = rs
                .iter()
                .filter(|r| {
                    r["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
                        == revision.as_str()
                })
                .collect();
            let pods = self.list(ns, "pods", &selector);
            if let [current] = current.as_slice()
                && let [pod] = pods.as_slice()
            {
                let pod = Pod::of(pod);
                if pod.replica_set == current["metadata"]["name"] && pod.phase == "Running" {
                    return Ok(pod);
                }
            }
            Err(format!(
                "{ns}/deployment/{name} never came down to one Running pod of revision {revision}:\n{}\n{}",
                self.kubectl_ok(&["get", "rs,pods", "-n", ns, "-l", &selector, "-o", "wide"]),
                self.kubectl_ok(&["get", "events", "-n", ns, "--sort-by=.lastTimestamp"])
            ))
        })
    }

    /// The items of `kind` in `ns` with labels `selector`.
    pub fn list(&self, ns: &str, kind: &str, selector: &str) -> Vec<Value> {
        let out = self.kubectl_ok(&["get", kind, "-n", ns, "-l", selector, "-o", "json"]);
        let v: Value = serde_json::from_str(&out).expect("kubectl's JSON");
        v["items"].as_array().cloned().unwrap_or_default()
    }

    /// What the one container of `pod` printed before [`PRINTED`]
    /// (`kubectl logs`), once it has.
    pub fn printed(&self, ns: &str, pod: &str) -> String {
        eventually(Duration::from_secs(120), Duration::from_millis(200), || {
            let out = self
                .kubectl()
                .args(["logs", "-n", ns, pod])
                .output()
                .expect("running kubectl logs");
            let log = String::from_utf8_lossy(&out.stdout).into_owned();
            // The `echo` after the file, then the marker.
            if let Some(text) = log.strip_suffix(&format!("\n{PRINTED}\n")) {
                let text = text.to_string();
                eprintln!("observed: pod {ns}/{pod} printed {text:?}");
                return Ok(text);
            }
            Err(format!(
                "{ns}/{pod} never printed {PRINTED}:\n{log}\n{}",
                String::from_utf8_lossy(&out.stderr)
            ))
        })
    }

    /// What the previous container of `pod` printed (`kubectl logs
    /// --previous`): of a container that exited and was restarted. The
    /// kubelet answers "unable to retrieve container logs" while it
    /// replaces the terminated container: asked again until it has one.
    pub fn printed_before_restart(&self, ns: &str, pod: &str) -> String {
        eventually(Duration::from_secs(120), Duration::from_millis(500), || {
            let said = self.kubectl_ok(&["logs", "-n", ns, pod, "--previous"]);
            if said.starts_with("unable to retrieve container logs") {
                Err(format!("{pod}: {said}"))
            } else {
                Ok(said)
            }
        })
    }

    /// The newest pod in `ns` with labels `selector` whose first volume
    /// mounts the image `reference`.
    pub fn newest_mounting(&self, ns: &str, selector: &str, reference: &str) -> Value {
        self.list(ns, "pods", selector)
            .into_iter()
            .filter(|p| p["spec"]["volumes"][0]["image"]["reference"] == reference)
            .max_by_key(|p| {
                p["metadata"]["creationTimestamp"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .unwrap_or_else(|| panic!("no pod of {ns} with {selector} mounts {reference}"))
    }

    /// `kubectl exec POD -- sh -c SCRIPT` in `ns`, whatever the result.
    pub fn exec(&self, ns: &str, pod: &str, script: &str) -> Output {
        self.kubectl()
            .args(["exec", "-n", ns, pod, "--", "sh", "-c", script])
            .output()
            .expect("running kubectl exec")
    }

    /// Waits until pod `name` no longer exists.
    pub fn gone(&self, ns: &str, name: &str) {
        self.wait(ns, &format!("pod/{name}"), "went away", Value::is_null);
    }

    /// The Events about object `name` in `ns`: (type, reason, message),
    /// oldest first.
    pub fn events(&self, ns: &str, name: &str) -> Vec<(String, String, String)> {
        let out = self.kubectl_ok(&[
            "get",
            "events",
            "-n",
            ns,
            "--field-selector",
            &format!("involvedObject.name={name}"),
            "--sort-by=.lastTimestamp",
            "-o",
            "json",
        ]);
        let v: Value = serde_json::from_str(&out).expect("kubectl's JSON");
        v["items"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|e| {
                let s = |k: &str| e[k].as_str().unwrap_or_default().to_string();
                (s("type"), s("reason"), s("message"))
            })
            .collect()
    }

    /// Waits until an Event about `name` in `ns` satisfies `pred`; that
    /// Event.
    pub fn wait_event(
        &self,
        ns: &str,
        name: &str,
        desc: &str,
        pred: impl Fn(&(String, String, String)) -> bool,
    ) -> (String, String, String) {
        eventually(Duration::from_secs(240), Duration::from_millis(300), || {
            let events = self.events(ns, name);
            match events.iter().find(|e| pred(e)) {
                Some(e) => {
                    eprintln!("observed: event about {ns}/{name}: {e:?}");
                    Ok(e.clone())
                }
                None => Err(format!("no Event about {ns}/{name} {desc}: {events:#?}")),
            }
        })
    }
}
