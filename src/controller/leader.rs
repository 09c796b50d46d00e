//! Leader election on a `coordination.k8s.io/v1` Lease, the way client-go's
//! `leaderelection` does it, so two replicas never publish at once:
//!
//! - a candidate takes the Lease when it is free (no holder) or when the
//!   holder has not renewed it for `leaseDurationSeconds`, measured on the
//!   candidate's own clock from when it *saw* the record change (clocks of
//!   two pods are never compared);
//! - the leader renews it every retry period; a leader that cannot renew
//!   within the renew deadline stops leading (the process exits, as
//!   controller-runtime's managers do). The deadline bounds the renewal
//!   itself, not only the wait between two: a request that hangs (the
//!   connection to the API server stops answering without closing) is
//!   abandoned at the deadline, counted from when the last successful
//!   renewal was *sent*. A standby takes over no earlier than the lease
//!   duration after it *saw* that renewal, which is later still, so the
//!   leader has stopped before another can start (renew deadline < lease
//!   duration, which the flags enforce);
//! - on shutdown the leader releases it (empty holder), so a standby takes
//!   over at once instead of after the lease duration;
//! - every write is a replace with the `resourceVersion` read, so two
//!   candidates racing for a free Lease cannot both win.
//!
//! Why not a crate: `kube` has no leader election, and the ones beside it
//! either pull their own runtime stack or lack release-on-cancel; the loop
//! is a hundred lines over the API kube gives us.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use tokio::sync::watch;
use tokio::time::Instant;

/// The Lease and its timings (controller-runtime's flags).
#[derive(Debug, Clone)]
pub struct Config {
    /// The Lease's name (`--leader-election-id`).
    pub name: String,
    /// This replica's identity (the pod name and a random suffix).
    pub identity: String,
    /// How long a Lease holds without renewal (`--leader-elect-lease-duration`).
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before giving up
    /// (`--leader-elect-renew-deadline`).
    pub renew_deadline: Duration,
    /// How often candidates try and the leader renews (`--leader-elect-retry-period`).
    pub retry_period: Duration,
}

/// What a candidate last saw of the Lease, and when (on its own clock).
struct Observed {
    holder: Option<String>,
    renew: Option<Timestamp>,
    at: Instant,
}

/// A candidate or leader for one Lease.
pub struct Elector {
    api: Api<Lease>,
    cfg: Config,
    observed: Option<Observed>,
    /// When the last write that made or kept this replica the holder was
    /// sent.
    renewed: Option<Instant>,
}

impl Elector {
    /// A candidate for `cfg.name` in the namespace of `api`.
    pub fn new(api: Api<Lease>, cfg: Config) -> Elector {
        Elector {
            api,
            cfg,
            observed: None,
            renewed: None,
        }
    }

    /// Waits until this replica holds the Lease (true), or until
    /// `shutdown` is set (false).
    pub async fn acquire(&mut self, shutdown: &mut watch::Receiver<bool>) -> bool {
        loop {
            if *shutdown.borrow() {
                return false;
            }
            // A hung request must not hold a candidate for ever either.
            match tokio::time::timeout(self.cfg.renew_deadline, self.try_acquire_or_renew()).await {
                Ok(Ok(true)) => return true,
                Ok(Ok(false)) => {}
                Ok(Err(e)) => super::logs::warn(&format!(
                    "leader election: cannot read or write Lease {}: {e}",
                    self.cfg.name
                )),
                Err(_) => super::logs::warn(&format!(
                    "leader election: no answer about Lease {} within {} s",
                    self.cfg.name,
                    self.cfg.renew_deadline.as_secs_f64()
                )),
            }
            tokio::select! {
                _ = tokio::time::sleep(self.cfg.retry_period) => {}
                _ = shutdown.changed() => {}
            }
        }
    }

    /// Renews the Lease every retry period; returns only when leadership
    /// is lost: no renewal succeeded within the renew deadline (a request
    /// still waiting for an answer at the deadline is abandoned), or
    /// another replica holds it. (On shutdown the caller keeps renewing
    /// until its publishes are done, then drops this future and releases
    /// the Lease.)
    pub async fn hold(&mut self) {
        loop {
            let renewed = *self.renewed.get_or_insert_with(Instant::now);
            let deadline = renewed + self.cfg.renew_deadline;
            tokio::time::sleep_until((Instant::now() + self.cfg.retry_period).min(deadline)).await;
            if Instant::now() >= deadline {
                self.lost("no renewal succeeded");
                return;
            }
            match tokio::time::timeout_at(deadline, self.try_acquire_or_renew()).await {
                Ok(Ok(true)) => {}
                // Another replica holds it now: stop at once.
                Ok(Ok(false)) if self.held_by_other() => {
                    self.lost("another replica holds it");
                    return;
                }
                // A conflicting write (someone touched the Lease): retry.
                Ok(Ok(false)) => {}
                Ok(Err(e)) => super::logs::warn(&format!(
                    "leader election: renewing Lease {} failed: {e}",
                    self.cfg.name
                )),
                Err(_) => {
                    self.lost("the renewal got no answer");
                    return;
                }
            }
        }
    }

    fn lost(&self, why: &str) {
        super::logs::error(&format!(
            "leader election: lost Lease {}: {why} within the renew deadline ({} s); stopping",
            self.cfg.name,
            self.cfg.renew_deadline.as_secs_f64()
        ));
    }

    /// Gives the Lease up (empty holder, one-second duration), so a standby
    /// replica takes over at once. Best effort.
    pub async fn release(&mut self) {
        // A release that gets no answer is given up: the Lease expires.
        let _ = tokio::time::timeout(self.cfg.renew_deadline, self.release_now()).await;
    }

    async fn release_now(&mut self) {
        let Ok(Some(mut lease)) = self.api.get_opt(&self.cfg.name).await else {
            return;
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if spec.holder_identity.as_deref() != Some(self.cfg.identity.as_str()) {
            return;
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        if let Err(e) = self
            .api
            .replace(&self.cfg.name, &PostParams::default(), &lease)
            .await
        {
            super::logs::warn(&format!(
                "leader election: releasing Lease {} failed: {e}",
                self.cfg.name
            ));
        }
    }

    /// Whether the Lease, as last read, names another holder.
    fn held_by_other(&self) -> bool {
        self.observed.as_ref().is_some_and(|o| {
            o.holder
                .as_deref()
                .is_some_and(|h| h != self.cfg.identity.as_str())
        })
    }

    /// One round: true when this replica holds the Lease afterwards.
    async fn try_acquire_or_renew(&mut self) -> Result<bool, kube::Error> {
        // Before anything is sent: the deadline counts from here.
        let sent = Instant::now();
        let now = Timestamp::now();
        let secs = i32::try_from(self.cfg.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX);
        let Some(mut lease) = self.api.get_opt(&self.cfg.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.cfg.name.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.cfg.identity.clone()),
                    lease_duration_seconds: Some(secs),
                    acquire_time: Some(MicroTime(now)),
                    renew_time: Some(MicroTime(now)),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => {
                    self.renewed = Some(sent);
                    Ok(true)
                }
                // Another candidate created it first.
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                Err(e) => Err(e),
            };
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let renew = spec.renew_time.as_ref().map(|t| t.0);
        let changed = self
            .observed
            .as_ref()
            .is_none_or(|o| o.holder != holder || o.renew != renew);
        if changed {
            self.observed = Some(Observed {
                holder: holder.clone(),
                renew,
                at: Instant::now(),
            });
        }
        let mine = holder.as_deref() == Some(self.cfg.identity.as_str());
        let held_for = Duration::from_secs(
            u64::try_from(spec.lease_duration_seconds.unwrap_or(secs).max(0)).unwrap_or(0),
        );
        let expired = self
            .observed
            .as_ref()
            .is_some_and(|o| o.at.elapsed() > held_for);
        if !mine && holder.is_some() && !expired {
            return Ok(false);
        }
        if !mine {
            spec.acquire_time = Some(MicroTime(now));
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        spec.holder_identity = Some(self.cfg.identity.clone());
        spec.lease_duration_seconds = Some(secs);
        spec.renew_time = Some(MicroTime(now));
        match self
            .api
            .replace(&self.cfg.name, &PostParams::default(), &lease)
            .await
        {
            Ok(written) => {
                self.observed = Some(Observed {
                    holder: Some(self.cfg.identity.clone()),
                    renew: written
                        .spec
                        .as_ref()
                        .and_then(|s| s.renew_time.as_ref())
                        .map(|t| t.0),
                    at: Instant::now(),
                });
                self.renewed = Some(sent);
                Ok(true)
            }
            // Someone wrote it since we read it: they won this round.
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }
}
