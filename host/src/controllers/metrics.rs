//! Prometheus metrics of the controllers.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabels {
    kind: String,
    phase: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabels {
    controller: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReconcileLabels {
    controller: String,
    /// `ok` or `error`.
    result: String,
}

/// Metrics exported on `/metrics`.
pub struct Metrics {
    finished: Family<PhaseLabels, Counter>,
    reconcile_errors: Family<ControllerLabels, Counter>,
    reconcile_duration: Family<ReconcileLabels, Histogram>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            finished: Family::default(),
            reconcile_errors: Family::default(),
            // 100 µs to about 13 s: a reconcile is a few API calls and plugin calls.
            reconcile_duration: Family::new_with_constructor(|| {
                Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
                    0.0001, 2.0, 18,
                ))
            }),
        }
    }
}

impl Metrics {
    /// Registers the metrics in `registry` under the `workflow_operator` prefix.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        let sub = registry.sub_registry_with_prefix("workflow_operator");
        sub.register(
            "finished",
            "Workflows and WorkflowGroups that reached a final phase",
            metrics.finished.clone(),
        );
        sub.register(
            "reconcile_errors",
            "Reconciles that failed and were retried",
            metrics.reconcile_errors.clone(),
        );
        sub.register(
            "reconcile_duration_seconds",
            "How long reconciles took, by controller and result",
            metrics.reconcile_duration.clone(),
        );
        metrics
    }

    /// Counts a Workflow reaching `phase`.
    pub fn workflow_finished(&self, phase: &str) {
        self.finished(("workflow", phase));
    }

    /// Counts a WorkflowGroup reaching `phase`.
    pub fn group_finished(&self, phase: &str) {
        self.finished(("workflowgroup", phase));
    }

    fn finished(&self, (kind, phase): (&str, &str)) {
        self.finished
            .get_or_create(&PhaseLabels {
                kind: kind.into(),
                phase: phase.into(),
            })
            .inc();
    }

    /// Counts a failed reconcile of `controller`.
    pub fn reconcile_failed(&self, controller: &str) {
        self.reconcile_errors
            .get_or_create(&ControllerLabels {
                controller: controller.into(),
            })
            .inc();
    }

    /// Records how long a reconcile of `controller` took.
    pub fn reconciled(&self, controller: &str, took: Duration, ok: bool) {
        self.reconcile_duration
            .get_or_create(&ReconcileLabels {
                controller: controller.into(),
                result: if ok { "ok" } else { "error" }.into(),
            })
            .observe(took.as_secs_f64());
    }
}
