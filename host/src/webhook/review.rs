//! From an AdmissionReview's bytes to the answer's: decode, ask the plugins within the
//! budget, decide ([`super::admission`]), record.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use tracing::{debug, warn};

use super::admission::{self, TypeAnswer, Verdict};
use super::metrics::WebhookMetrics;
use crate::api::WorkflowGroup;
use crate::plugin::{Plugin, PluginRegistry};
use crate::render::render_workflow;

/// Answers admission reviews of WorkflowGroups with the plugins of a registry.
#[derive(Clone, Debug)]
pub struct Reviewer {
    pub plugins: PluginRegistry,
    /// How long the plugins of one review may take together; a type not answered by then is
    /// let in with a warning. Below the webhook's `timeoutSeconds`, so that the API server
    /// hears the answer and never applies the failure policy to a slow plugin.
    pub budget: Duration,
    pub metrics: Option<WebhookMetrics>,
}

impl Reviewer {
    /// The AdmissionReview (JSON) answering the one in `body`.
    pub async fn review(&self, body: &[u8]) -> Vec<u8> {
        let started = Instant::now();
        let (response, result) = match decode(body) {
            Ok(request) => {
                let verdict = self.verdict(&request).await;
                debug!(
                    namespace = request.namespace.as_deref().unwrap_or_default(),
                    name = %request.name,
                    dry_run = request.dry_run,
                    result = verdict.result(),
                    "admission review"
                );
                (respond(&request, &verdict), verdict.result())
            }
            Err(reason) => {
                warn!(%reason, "an admission request that is not an AdmissionReview");
                (AdmissionResponse::invalid(reason), "invalid")
            }
        };
        if let Some(metrics) = &self.metrics {
            metrics.observe(result, started.elapsed());
        }
        serde_json::to_vec(&response.into_review()).unwrap_or_default()
    }

    async fn verdict(&self, request: &AdmissionRequest<DynamicObject>) -> Verdict {
        if !matches!(request.operation, Operation::Create | Operation::Update) {
            return Verdict::Allowed { warnings: vec![] };
        }
        let Some(group) = request.object.as_ref().map(group_of) else {
            return Verdict::Allowed { warnings: vec![] };
        };
        let group = match group {
            Ok(group) => Arc::new(group),
            Err(e) => {
                // The CRD schema admitted it: a version this operator does not know.
                return Verdict::Allowed {
                    warnings: vec![format!("not checked: cannot read the WorkflowGroup: {e}")],
                };
            }
        };
        let old = request.old_object.as_ref().and_then(|o| group_of(o).ok());
        let types = match admission::types_to_review(&group, old.as_ref()) {
            Ok(types) => types,
            Err(verdict) => return verdict,
        };
        let deadline = tokio::time::Instant::now() + self.budget;
        let now = jiff_now();
        let asked = types.into_iter().map(|type_name| {
            let plugin = self.plugins.get(&type_name);
            let group = group.clone();
            async move {
                let answer = match plugin {
                    None => TypeAnswer::NoPlugin,
                    Some(plugin) => ask(&type_name, plugin, group, now, deadline).await,
                };
                (type_name, answer)
            }
        });
        let answers = futures::future::join_all(asked).await;
        admission::decide(&answers)
    }
}

/// Renders the group with `plugin` as the controller would (the plugins are synchronous and
/// bounded by their own time limit: on a blocking thread), giving up at `deadline`.
async fn ask(
    type_name: &str,
    plugin: Arc<Plugin>,
    group: Arc<WorkflowGroup>,
    now: i64,
    deadline: tokio::time::Instant,
) -> TypeAnswer {
    let call = tokio::task::spawn_blocking(move || render_workflow(&group, &plugin, now).map(drop));
    match tokio::time::timeout_at(deadline, call).await {
        Ok(Ok(rendered)) => TypeAnswer::of_render(type_name, rendered),
        Ok(Err(join)) => TypeAnswer::Unanswered(format!("the plugin call failed: {join}")),
        Err(_) => {
            TypeAnswer::Unanswered("the plugin did not answer within the admission budget".into())
        }
    }
}

fn jiff_now() -> i64 {
    k8s_openapi::jiff::Timestamp::now().as_second()
}

fn decode(body: &[u8]) -> Result<AdmissionRequest<DynamicObject>, String> {
    let review: AdmissionReview<DynamicObject> =
        serde_json::from_slice(body).map_err(|e| e.to_string())?;
    review
        .try_into()
        .map_err(|e: kube::core::admission::ConvertAdmissionReviewError| e.to_string())
}

fn group_of(object: &DynamicObject) -> Result<WorkflowGroup, serde_json::Error> {
    serde_json::to_value(object).and_then(serde_json::from_value)
}

fn respond(request: &AdmissionRequest<DynamicObject>, verdict: &Verdict) -> AdmissionResponse {
    let response = AdmissionResponse::from(request);
    match verdict {
        Verdict::Refused { message } => response.deny(message),
        Verdict::Allowed { warnings } => {
            let mut response = response;
            if !warnings.is_empty() {
                response.warnings = Some(warnings.clone());
            }
            response
        }
    }
}
