//! Prometheus metrics (`settings_image_*`, OpenMetrics text on
//! `--metrics-bind-address` `/metrics`) and the probes (`/healthz`,
//! `/readyz` on `--health-probe-bind-address`), served by hyper.
//!
//! The metrics, all counted by the reconciler:
//! - `settings_image_reconciles_total{result}`: `published`, `unchanged`
//!   (the revision was already handled), `suspended`, `waiting` (no
//!   artifact yet), `stalled`, `failed`;
//! - `settings_image_publishes_total`: images whose push changed the
//!   registry (a new tag or blob), one per folder;
//! - `settings_image_failures_total{reason}`: the `Ready=False` reasons;
//! - `settings_image_reconcile_duration_seconds`: a histogram;
//! - `settings_image_uploaded_bytes_total`: blob bytes uploaded;
//! - `settings_image_leader`: 1 while this replica leads (or runs without
//!   leader election), else 0;
//! - `settings_image_watch_errors_total{resource}`: failed lists and
//!   watches of `settingsimages` and `gitrepositories` (each retried).
//!
//! `/readyz` means able to publish: the API server answered, and (while
//! leading) the watches of SettingsImages and GitRepositories are
//! established. A watch that fails (the API server restarting, a CRD not
//! installed) makes it answer 503 with the reason until the watch is
//! listed again. A standby replica (`--leader-elect`, not leading) is
//! ready once the API server answered: it is ready to take over.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

use crate::error::{Error, Result};

/// A label set of one label.
type One = [(&'static str, String); 1];

/// The controller's metrics.
pub struct Metrics {
    registry: Registry,
    reconciles: Family<One, Counter>,
    publishes: Counter,
    failures: Family<One, Counter>,
    duration: Histogram,
    uploaded_bytes: Counter,
    leader: Gauge,
    watch_errors: Family<One, Counter>,
    /// What keeps `/readyz` from answering 200, by what it is about
    /// (empty: ready).
    not_ready: Mutex<BTreeMap<&'static str, String>>,
}

impl Metrics {
    /// Registers every metric, at zero.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("settings_image");
        let reconciles = Family::<One, Counter>::default();
        registry.register(
            "reconciles",
            "SettingsImage reconciles, by result",
            reconciles.clone(),
        );
        let publishes = Counter::default();
        registry.register(
            "publishes",
            "Images whose push changed the registry (one per folder)",
            publishes.clone(),
        );
        let failures = Family::<One, Counter>::default();
        registry.register(
            "failures",
            "Failed reconciles, by the Ready condition's reason",
            failures.clone(),
        );
        // 10 ms to about 82 s.
        let duration = Histogram::new(exponential_buckets(0.01, 2.0, 14));
        registry.register(
            "reconcile_duration_seconds",
            "How long one reconcile took",
            duration.clone(),
        );
        let uploaded_bytes = Counter::default();
        registry.register(
            "uploaded_bytes",
            "Blob bytes uploaded to registries",
            uploaded_bytes.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "leader",
            "1 while this replica publishes (leads), else 0",
            leader.clone(),
        );
        let watch_errors = Family::<One, Counter>::default();
        registry.register(
            "watch_errors",
            "Failed lists and watches of the API server, by resource (each is retried)",
            watch_errors.clone(),
        );
        Metrics {
            registry,
            reconciles,
            publishes,
            failures,
            duration,
            uploaded_bytes,
            leader,
            watch_errors,
            not_ready: Mutex::new(BTreeMap::from([(
                "api",
                "the API server has not answered yet".to_string(),
            )])),
        }
    }

    /// Marks `what` ready (`None`) or not (`Some(reason)`); returns
    /// whether that changed anything (a new reason, or ready again).
    pub fn set_ready(&self, what: &'static str, reason: Option<String>) -> bool {
        let Ok(mut m) = self.not_ready.lock() else {
            return false;
        };
        match reason {
            None => m.remove(what).is_some(),
            Some(r) => m.insert(what, r.clone()).as_ref() != Some(&r),
        }
    }

    /// Why `/readyz` does not answer 200, one line each; empty when ready.
    pub fn not_ready(&self) -> Vec<String> {
        self.not_ready
            .lock()
            .map(|m| m.iter().map(|(k, v)| format!("{k}: {v}")).collect())
            .unwrap_or_else(|_| vec!["the readiness state is poisoned".into()])
    }

    /// Counts a failed list or watch of `resource`.
    pub fn watch_failed(&self, resource: &str) {
        self.watch_errors
            .get_or_create(&[("resource", resource.to_string())])
            .inc();
    }

    /// Counts one reconcile with `result` that took `secs`.
    pub fn reconciled(&self, result: &str, secs: f64) {
        self.reconciles
            .get_or_create(&[("result", result.to_string())])
            .inc();
        self.duration.observe(secs);
    }

    /// Counts a failure with the Ready reason `reason`.
    pub fn failed(&self, reason: &str) {
        self.failures
            .get_or_create(&[("reason", reason.to_string())])
            .inc();
    }

    /// Counts one image whose push changed the registry, and its bytes.
    pub fn published(&self, pushed: bool, bytes: u64) {
        if pushed {
            self.publishes.inc();
        }
        self.uploaded_bytes.inc_by(bytes);
    }

    /// Sets the leader gauge.
    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

/// Parses controller-runtime's bind address: `:8080` (all interfaces),
/// `127.0.0.1:8080`, or `0` (off, `None`). `flag` names it in errors.
pub fn bind_address(value: &str, flag: &str) -> Result<Option<SocketAddr>> {
    let v = value.trim();
    if v == "0" || v.is_empty() {
        return Ok(None);
    }
    let full = if v.starts_with(':') {
        format!("0.0.0.0{v}")
    } else {
        v.to_string()
    };
    full.parse().map(Some).map_err(|_| {
        Error::input(
            format!("{flag} {value:?} is not an address"),
            Some(format!(
                "give {flag} :PORT, HOST:PORT (e.g. 127.0.0.1:8080), or 0 to turn it off"
            )),
        )
    })
}

/// What one listener serves.
#[derive(Debug, Clone, Copy)]
pub enum Endpoint {
    /// `/metrics`.
    Metrics,
    /// `/healthz` and `/readyz`.
    Probes,
}

/// Binds `addr` now (so a taken port is an error at start) and returns
/// the bound address and the future that serves `what` forever.
pub async fn listen(
    addr: SocketAddr,
    what: Endpoint,
    metrics: Arc<Metrics>,
) -> Result<(SocketAddr, impl Future<Output = ()>)> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| Error::io(format!("listening on {addr}"), e))?;
    let bound = listener
        .local_addr()
        .map_err(|e| Error::io(format!("listening on {addr}"), e))?;
    let serve = async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let metrics = metrics.clone();
            tokio::spawn(async move {
                let io = hyper_util::rt::TokioIo::new(stream);
                let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let metrics = metrics.clone();
                    async move { Ok::<_, Infallible>(answer(what, &metrics, &req)) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, svc)
                    .await;
            });
        }
    };
    Ok((bound, serve))
}

fn answer(what: Endpoint, metrics: &Metrics, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let text = |status: StatusCode, content_type: &str, body: String| {
        let mut r = Response::new(Full::new(Bytes::from(body)));
        *r.status_mut() = status;
        if let Ok(v) = content_type.parse() {
            r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
        }
        r
    };
    let plain = "text/plain; charset=utf-8";
    match (what, req.uri().path()) {
        (Endpoint::Metrics, "/metrics") => text(
            StatusCode::OK,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            metrics.encode(),
        ),
        (Endpoint::Probes, "/healthz") => text(StatusCode::OK, plain, "ok\n".into()),
        (Endpoint::Probes, "/readyz") => {
            let reasons = metrics.not_ready();
            if reasons.is_empty() {
                text(StatusCode::OK, plain, "ok\n".into())
            } else {
                text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    plain,
                    format!("not ready:\n{}\n", reasons.join("\n")),
                )
            }
        }
        _ => text(StatusCode::NOT_FOUND, plain, "not found\n".into()),
    }
}
