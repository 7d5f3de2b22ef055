//! Prometheus metrics of admissions, under the `workflow_operator_webhook` prefix: how many
//! by result, how long each took from the request's body to the answer, and the requests and
//! connections the webhook's limits turned away, by reason.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

/// Upper bounds of the duration buckets, in seconds: from 250 µs (a group whose update
/// changes nothing the plugins see) to 5 s (the webhook's `timeoutSeconds` in deploy/).
const DURATION_BUCKETS: [f64; 14] = [
    0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

/// How an admission ended.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    /// `allowed`, `warned` (allowed with warnings), `refused`, or `invalid` (not an
    /// AdmissionReview we could read).
    result: &'static str,
}

/// Why the webhook turned a connection or request away ([`super::WebhookLimits`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rejection {
    /// The handshake, the head, the body or the connection's age ran out of time.
    Timeout,
    /// A head or body over its limit.
    TooLarge,
    /// Every review slot taken, or the bodies' byte budget spent: try again.
    Busy,
    /// Every connection slot taken: closed as accepted.
    TooManyConnections,
    /// A body of too many JSON values, or nested too deep.
    TooComplex,
}

impl Rejection {
    /// The `reason` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Rejection::Timeout => "timeout",
            Rejection::TooLarge => "too_large",
            Rejection::Busy => "busy",
            Rejection::TooManyConnections => "too_many_connections",
            Rejection::TooComplex => "too_complex",
        }
    }
}

/// Why the webhook turned something away.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    /// [`Rejection::as_str`].
    reason: &'static str,
}

/// The admissions counter and duration histogram, and the rejections counter. Cheap to
/// clone: clones record into the same metrics.
#[derive(Clone, Debug)]
pub struct WebhookMetrics {
    admissions: Family<ResultLabels, Counter>,
    duration: Histogram,
    rejections: Family<ReasonLabels, Counter>,
}

impl WebhookMetrics {
    /// Registers `workflow_operator_webhook_admissions_total` (by result),
    /// `workflow_operator_webhook_admission_duration_seconds` and
    /// `workflow_operator_webhook_rejections_total` (by reason) in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            admissions: Family::default(),
            duration: Histogram::new(DURATION_BUCKETS),
            rejections: Family::default(),
        };
        let sub = registry.sub_registry_with_prefix("workflow_operator_webhook");
        sub.register(
            "admissions",
            "Admission reviews of WorkflowGroups by result",
            metrics.admissions.clone(),
        );
        sub.register_with_unit(
            "admission_duration",
            "Time to answer an admission review, plugin calls included",
            Unit::Seconds,
            metrics.duration.clone(),
        );
        sub.register(
            "rejections",
            "Connections and requests the webhook's limits turned away, by reason",
            metrics.rejections.clone(),
        );
        metrics
    }

    /// Records one admission that ended as `result` after `elapsed`.
    pub fn observe(&self, result: &'static str, elapsed: Duration) {
        self.admissions
            .get_or_create(&ResultLabels { result })
            .inc();
        self.duration.observe(elapsed.as_secs_f64());
    }

    /// Records one connection or request turned away.
    pub fn reject(&self, why: Rejection) {
        self.rejections
            .get_or_create(&ReasonLabels {
                reason: why.as_str(),
            })
            .inc();
    }
}
