//! The watches of SettingsImages and GitRepositories (and, with
//! `--cluster-name`, of SettingsRollouts and the workloads they read): whether each is
//! established (what `/readyz` answers), what a failure means in words an
//! operator acts on, and how soon a failed one is tried again.
//!
//! Why not kube-runtime's `default_backoff`: it waits 0.8 s doubling to
//! 30 s, and an API server restart (connections refused for a few seconds,
//! then "too old resource version" and a relist) runs it up to tens of
//! seconds before the watch is back, while nothing is published. Here a
//! failed watch is tried again after 250 ms, doubling to 4 s, reset once
//! it works again: a restart costs seconds, and a watch that cannot work
//! (a CRD not installed) asks the API server every 4 s.

use std::sync::Arc;
use std::time::Duration;

use std::sync::atomic::{AtomicBool, Ordering};

use futures_util::{Stream, StreamExt};
use kube::runtime::{WatchStreamExt, watcher};

use super::logs;
use super::metrics::Metrics;

/// One watched resource, as the metrics, `/readyz` and the log name it.
#[derive(Debug, Clone, Copy)]
pub struct Watched {
    /// The resource (`settingsimages`): the metric label and the key of
    /// `/readyz`'s reason.
    pub resource: &'static str,
    /// The kind, for people.
    pub kind: &'static str,
    /// The API group and version.
    pub api: &'static str,
    /// What installs it.
    pub install: &'static str,
}

/// `settingsimages.settings-image.configbutler.io`.
pub const SETTINGS_IMAGES: Watched = Watched {
    resource: "settingsimages",
    kind: "SettingsImage",
    api: "settings-image.configbutler.io/v1alpha1",
    install: "kubectl apply -k config/",
};

/// `settingsrollouts.settings-image.configbutler.io` (`--cluster-name`).
pub const SETTINGS_ROLLOUTS: Watched = Watched {
    resource: "settingsrollouts",
    kind: "SettingsRollout",
    api: "settings-image.configbutler.io/v1alpha1",
    install: "kubectl apply -k config/",
};

/// Deployments (`--cluster-name`): built in, never a missing CRD.
pub const DEPLOYMENTS: Watched = Watched {
    resource: "deployments",
    kind: "Deployment",
    api: "apps/v1",
    install: "a built-in type: the API server does not serve apps/v1",
};

/// StatefulSets (`--cluster-name`).
pub const STATEFUL_SETS: Watched = Watched {
    resource: "statefulsets",
    kind: "StatefulSet",
    api: "apps/v1",
    install: DEPLOYMENTS.install,
};

/// DaemonSets (`--cluster-name`).
pub const DAEMON_SETS: Watched = Watched {
    resource: "daemonsets",
    kind: "DaemonSet",
    api: "apps/v1",
    install: DEPLOYMENTS.install,
};

/// Flux's `gitrepositories.source.toolkit.fluxcd.io`.
pub const GIT_REPOSITORIES: Watched = Watched {
    resource: "gitrepositories",
    kind: "GitRepository",
    api: "source.toolkit.fluxcd.io/v1",
    install: "install Flux's source-controller (flux install) or its CRDs",
};

/// Whether a kube error means the resource type is not served at all (its
/// CRD is missing): the API server answers a plain-text `404 page not
/// found`, which the client reports as a 404 it could not parse.
pub fn type_not_served(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404 && s.reason != "NotFound")
}

/// What a watch error means, in words.
fn describe(w: Watched, e: &watcher::Error) -> String {
    let client = match e {
        watcher::Error::InitialListFailed(c)
        | watcher::Error::WatchStartFailed(c)
        | watcher::Error::WatchFailed(c) => Some(c),
        _ => None,
    };
    match (client, e) {
        (Some(c), _) if type_not_served(c) => format!(
            "the {} CRD ({}) is not installed: {}; the watch is tried again every few seconds",
            w.kind, w.api, w.install
        ),
        (Some(kube::Error::Api(s)), _) if s.code == 403 => format!(
            "the controller may not list or watch {} ({}): bind the ClusterRole of config/rbac in the namespace (just after an API server restart this passes by itself)",
            w.resource, s.message
        ),
        (_, watcher::Error::WatchError(s)) if s.code == 410 => format!(
            "the watch of {} expired (the API server restarted or compacted); listing again",
            w.resource
        ),
        _ => format!(
            "cannot list or watch {}: {e}; tried again shortly",
            w.resource
        ),
    }
}

/// `stream` (a watcher's) with its health reported and its retries
/// paced: not ready until the first object or the end of the first list,
/// then ready after each and not ready after every error, with the error's
/// meaning logged once per change (not once per retry) and every error
/// counted. A failed watch is tried again with [`Backoff`].
pub fn resilient<K, S>(stream: S, w: Watched, metrics: Arc<Metrics>) -> impl Stream<Item = S::Item>
where
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send,
{
    metrics.set_ready(
        w.resource,
        Some(format!("the watch of {} is not listed yet", w.resource)),
    );
    let healthy = Arc::new(AtomicBool::new(false));
    let expired = Arc::new(AtomicBool::new(false));
    let backoff = Backoff {
        next: FIRST,
        healthy: healthy.clone(),
        expired: expired.clone(),
    };
    stream
        .inspect(move |item| match item {
            // The start of a (re)list says nothing yet: the list may fail.
            Ok(watcher::Event::Init) => {}
            Ok(_) => {
                healthy.store(true, Ordering::Relaxed);
                if metrics.set_ready(w.resource, None) {
                    logs::info(&format!("watching {}", w.resource));
                }
            }
            Err(e) => {
                healthy.store(false, Ordering::Relaxed);
                expired.store(
                    matches!(e, watcher::Error::WatchError(s) if s.code == 410),
                    Ordering::Relaxed,
                );
                metrics.watch_failed(w.resource);
                let reason = describe(w, e);
                if metrics.set_ready(w.resource, Some(reason.clone())) {
                    logs::warn(&reason);
                }
            }
        })
        .backoff(backoff)
}

/// The retries of a failed watch: 250 ms doubling to 4 s, with up to a
/// quarter of jitter. kube-runtime resets a backoff on every event, and a
/// relist starts with one (`Init`) before the list that may fail again:
/// only an event that proves the watch works (an object, the end of a
/// list) resets this one. An expired watch (410 Gone: the API server
/// restarted or compacted) is listed again at once: the server answered,
/// nothing failed.
#[derive(Debug, Clone)]
pub struct Backoff {
    next: Duration,
    healthy: Arc<AtomicBool>,
    expired: Arc<AtomicBool>,
}

const FIRST: Duration = Duration::from_millis(250);
const MOST: Duration = Duration::from_secs(4);

impl Iterator for Backoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        if self.expired.swap(false, Ordering::Relaxed) {
            return Some(Duration::ZERO);
        }
        let wait = self.next;
        self.next = (self.next * 2).min(MOST);
        Some(wait + wait.mul_f64(fastrand::f64() / 4.0))
    }
}

impl kube::runtime::utils::Backoff for Backoff {
    fn reset(&mut self) {
        if self.healthy.load(Ordering::Relaxed) {
            self.next = FIRST;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_stay_within_seconds_and_reset_only_when_the_watch_works() {
        use kube::runtime::utils::Backoff as _;
        let healthy = Arc::new(AtomicBool::new(false));
        let expired = Arc::new(AtomicBool::new(false));
        let mut b = Backoff {
            next: FIRST,
            healthy: healthy.clone(),
            expired: expired.clone(),
        };
        let waits: Vec<Duration> = b.by_ref().take(10).collect();
        assert!(waits[0] >= FIRST && waits[0] <= FIRST.mul_f64(1.25));
        assert!(waits.iter().all(|w| *w <= MOST.mul_f64(1.25)), "{waits:?}");
        assert!(waits[9] >= MOST, "{waits:?}");
        // A relist's `Init` resets nothing: the list has not worked yet.
        b.reset();
        assert!(b.next().is_some_and(|w| w >= MOST));
        // An expired watch is listed again at once, and the pace stays.
        expired.store(true, Ordering::Relaxed);
        assert_eq!(b.next(), Some(Duration::ZERO));
        assert!(b.next().is_some_and(|w| w >= MOST));
        healthy.store(true, Ordering::Relaxed);
        b.reset();
        assert!(b.next().is_some_and(|w| w <= FIRST.mul_f64(1.25)));
    }

    #[test]
    fn a_missing_crd_is_named_not_quoted() {
        // What kube-client makes of the API server's plain-text 404 for a
        // resource type it does not serve.
        let e = watcher::Error::InitialListFailed(kube::Error::Api(Box::new(
            kube::core::Status::failure("404 page not found\n", "Failed to parse error data")
                .with_code(404),
        )));
        let said = describe(GIT_REPOSITORIES, &e);
        assert!(
            said.starts_with(
                "the GitRepository CRD (source.toolkit.fluxcd.io/v1) is not installed"
            ),
            "{said}"
        );
        assert!(!said.contains("parse"), "{said}");
    }
}
