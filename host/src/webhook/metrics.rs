//! Prometheus metrics of admissions, under the `workflow_operator_webhook` prefix: how many
//! by result, and how long each took from the request's body to the answer.

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

/// The admissions counter and duration histogram. Cheap to clone: clones record into the
/// same metrics.
#[derive(Clone, Debug)]
pub struct WebhookMetrics {
    admissions: Family<ResultLabels, Counter>,
    duration: Histogram,
}

impl WebhookMetrics {
    /// Registers `workflow_operator_webhook_admissions_total` (by result) and
    /// `workflow_operator_webhook_admission_duration_seconds` in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            admissions: Family::default(),
            duration: Histogram::new(DURATION_BUCKETS),
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
        metrics
    }

    /// Records one admission that ended as `result` after `elapsed`.
    pub fn observe(&self, result: &'static str, elapsed: Duration) {
        self.admissions
            .get_or_create(&ResultLabels { result })
            .inc();
        self.duration.observe(elapsed.as_secs_f64());
    }
}
