//! Prometheus metrics of plugin calls, under the `workflow_operator_plugin` prefix: how long
//! each call took and how it ended, by workflow type and export.
//!
//! The operator registers them in the registry it serves on `/metrics` and hands them to the
//! [`Runtime`](super::Runtime); only prometheus-client types appear here, no Kubernetes ones.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

/// Upper bounds of the duration buckets, in seconds: from 10 µs (a trivial call costs tens
/// of microseconds) to 1 s (the default time limit), in 1-2.5-5 steps.
const DURATION_BUCKETS: [f64; 16] = [
    0.000_01, 0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025,
    0.05, 0.1, 0.25, 0.5, 1.0,
];

/// One export of one workflow type.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    /// The workflow type; a plugin being loaded is named by its origin until `info` answers.
    workflow_type: Arc<str>,
    /// `info`, `validate`, `template`, `gate` or `evaluate`.
    export: &'static str,
}

/// One export of one workflow type, and how its call ended.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    workflow_type: Arc<str>,
    export: &'static str,
    /// `ok`, or a short kind of error such as `timeout` or `trap`.
    outcome: &'static str,
}

/// The duration histogram and outcome counter of plugin calls. Cheap to clone: clones record
/// into the same metrics.
#[derive(Clone, Debug)]
pub struct PluginMetrics {
    durations: Family<CallLabels, Histogram, fn() -> Histogram>,
    calls: Family<OutcomeLabels, Counter>,
}

impl PluginMetrics {
    /// Registers `workflow_operator_plugin_call_duration_seconds` (a histogram) and
    /// `workflow_operator_plugin_calls_total` (a counter) in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            durations: Family::new_with_constructor(|| Histogram::new(DURATION_BUCKETS)),
            calls: Family::default(),
        };
        let sub = registry.sub_registry_with_prefix("workflow_operator_plugin");
        sub.register_with_unit(
            "call_duration",
            "Duration of plugin calls, from a fresh store to the checked answer",
            Unit::Seconds,
            metrics.durations.clone(),
        );
        sub.register(
            "calls",
            "Plugin calls by how they ended: ok, or the kind of error",
            metrics.calls.clone(),
        );
        metrics
    }

    /// Records one call of `export` of `workflow_type` that took `elapsed` and ended as
    /// `outcome`.
    pub(super) fn observe(
        &self,
        workflow_type: &Arc<str>,
        export: &'static str,
        outcome: &'static str,
        elapsed: Duration,
    ) {
        self.durations
            .get_or_create(&CallLabels {
                workflow_type: workflow_type.clone(),
                export,
            })
            .observe(elapsed.as_secs_f64());
        self.calls
            .get_or_create(&OutcomeLabels {
                workflow_type: workflow_type.clone(),
                export,
                outcome,
            })
            .inc();
    }
}
