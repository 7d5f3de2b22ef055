//! Prometheus metrics of the controllers.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
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

/// Counters exported on `/metrics`.
#[derive(Default)]
pub struct Metrics {
    finished: Family<PhaseLabels, Counter>,
    reconcile_errors: Family<ControllerLabels, Counter>,
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
}
