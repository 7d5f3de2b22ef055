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
struct ErrorLabels {
    controller: String,
    /// What failed ([`super::Error::kind`]): `api`, `plugin-transient`, ...
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ApiLabels {
    /// get, list, watch, create, update, patch, delete.
    verb: String,
    /// The resource, with its subresource: `pods`, `workflows/status`, `events`.
    resource: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReconcileLabels {
    controller: String,
    /// `ok` or `error`.
    result: String,
}

/// Upper bounds of the step start latency buckets, in seconds: 1-2.5-5 steps from 1 ms to
/// 10 s, so that 50 ms and 250 ms (what a step may cost us at p50 and p99) are bounds.
const STEP_START_BUCKETS: [f64; 13] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Metrics exported on `/metrics`.
pub struct Metrics {
    finished: Family<PhaseLabels, Counter>,
    reconcile_errors: Family<ErrorLabels, Counter>,
    reconcile_duration: Family<ReconcileLabels, Histogram>,
    api_requests: Family<ApiLabels, Counter>,
    step_start_latency: Histogram,
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
            api_requests: Family::default(),
            step_start_latency: Histogram::new(STEP_START_BUCKETS),
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
            "Reconciles that failed and were retried, by controller and kind of error",
            metrics.reconcile_errors.clone(),
        );
        sub.register(
            "reconcile_duration_seconds",
            "How long reconciles took, by controller and result",
            metrics.reconcile_duration.clone(),
        );
        sub.register(
            "api_requests",
            "Requests the operator made to the Kubernetes API, by verb and resource",
            metrics.api_requests.clone(),
        );
        sub.register(
            "step_start_latency_seconds",
            "From the moment the operator saw a step's last dependency (or its previous attempt) finish to the moment it created the step's pod",
            metrics.step_start_latency.clone(),
        );
        metrics
    }

    /// Records how long a step waited, once it could start, for its pod to be created.
    pub fn step_started(&self, waited: Duration) {
        self.step_start_latency.observe(waited.as_secs_f64());
    }

    /// Counts one request to the Kubernetes API (called by the client's request layer).
    pub fn api_request(&self, method: &str, path: &str, query: Option<&str>) {
        let (verb, resource) = classify_request(method, path, query);
        self.api_requests
            .get_or_create(&ApiLabels {
                verb: verb.into(),
                resource,
            })
            .inc();
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

    /// Counts a failed reconcile of `controller`, by what failed (`kind`).
    pub fn reconcile_failed(&self, controller: &str, kind: &str) {
        self.reconcile_errors
            .get_or_create(&ErrorLabels {
                controller: controller.into(),
                kind: kind.into(),
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

/// The verb and resource of a Kubernetes API request, from its method, path and query:
/// `GET /api/v1/namespaces/ns/pods?watch=true` is (`watch`, `pods`), `PATCH
/// /apis/workflow.rxg456.cn/v1alpha1/namespaces/ns/workflows/wf/status` is (`patch`,
/// `workflows/status`).
pub fn classify_request(method: &str, path: &str, query: Option<&str>) -> (&'static str, String) {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    // /api/{version}/... or /apis/{group}/{version}/...
    let rest = match segments.first() {
        Some(&"api") => segments.get(2..),
        Some(&"apis") => segments.get(3..),
        _ => None,
    }
    .unwrap_or(&[]);
    let rest = match rest {
        ["namespaces", _, tail @ ..] if !tail.is_empty() => tail,
        other => other,
    };
    let (resource, named) = match rest {
        [] => ("other".to_string(), false),
        [resource] => ((*resource).to_string(), false),
        [resource, _name] => ((*resource).to_string(), true),
        [resource, _name, sub, ..] => (format!("{resource}/{sub}"), true),
    };
    let watch = query.is_some_and(|q| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"));
    let verb = match method {
        "GET" if watch => "watch",
        "GET" if named => "get",
        "GET" => "list",
        "POST" => "create",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" => "delete",
        _ => "other",
    };
    (verb, resource)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_classified_by_verb_and_resource() {
        let cases = [
            (
                "GET",
                "/api/v1/namespaces/ns/pods",
                Some("labelSelector=a&watch=true"),
                ("watch", "pods"),
            ),
            (
                "GET",
                "/api/v1/namespaces/ns/pods",
                Some("labelSelector=a"),
                ("list", "pods"),
            ),
            (
                "GET",
                "/api/v1/namespaces/ns/pods/p-1",
                None,
                ("get", "pods"),
            ),
            (
                "POST",
                "/api/v1/namespaces/ns/pods",
                None,
                ("create", "pods"),
            ),
            (
                "PATCH",
                "/apis/workflow.rxg456.cn/v1alpha1/namespaces/ns/workflows/wf/status",
                None,
                ("patch", "workflows/status"),
            ),
            (
                "GET",
                "/apis/workflow.rxg456.cn/v1alpha1/workflowgroups",
                Some("watch=1"),
                ("watch", "workflowgroups"),
            ),
            (
                "POST",
                "/apis/events.k8s.io/v1/namespaces/ns/events",
                None,
                ("create", "events"),
            ),
            (
                "DELETE",
                "/api/v1/namespaces/ns/pods/p-1",
                None,
                ("delete", "pods"),
            ),
            ("GET", "/version", None, ("list", "other")),
        ];
        for (method, path, query, (verb, resource)) in cases {
            assert_eq!(
                classify_request(method, path, query),
                (verb, resource.to_string()),
                "{method} {path}"
            );
        }
    }
}
