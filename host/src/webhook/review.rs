//! From an AdmissionReview's bytes to the answer's: decode, ask the plugins within the
//! budget, decide ([`super::admission`]), record.
//!
//! The plugin calls of reviews take turns on a few permits of their own: any number of
//! reviews never run more plugin calls at once than that, so the controllers (which call the
//! same plugins from their own workers) keep the CPU and the instance pool.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use tokio::sync::Semaphore;
use tracing::{debug, warn};

use super::admission::{self, TypeAnswer, Verdict};
use super::metrics::WebhookMetrics;
use crate::api::WorkflowGroup;
use crate::cli::plan::{preview, steps_line};
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
    /// The permits of reviews' plugin calls ([`super::WebhookLimits::max_review_plugin_calls`]).
    pub plugin_calls: Arc<Semaphore>,
}

impl Reviewer {
    /// Reviews with `plugins` within `budget`, running at most `plugin_calls` plugin calls at
    /// once whatever the number of reviews.
    pub fn new(
        plugins: PluginRegistry,
        budget: Duration,
        plugin_calls: usize,
        metrics: Option<WebhookMetrics>,
    ) -> Self {
        Self {
            plugins,
            budget,
            metrics,
            plugin_calls: Arc::new(Semaphore::new(plugin_calls)),
        }
    }

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
            let permits = &self.plugin_calls;
            async move {
                let (answer, steps) = match plugin {
                    None => (TypeAnswer::NoPlugin, None),
                    Some(plugin) => ask(&type_name, plugin, group, now, permits, deadline).await,
                };
                ((type_name.clone(), answer), (type_name, steps))
            }
        });
        let (answers, steps): (Vec<_>, BTreeMap<_, _>) =
            futures::future::join_all(asked).await.into_iter().unzip();
        let mut verdict = admission::decide(&answers);
        if request.dry_run
            && let Verdict::Allowed { warnings } = &mut verdict
        {
            warnings.extend(plan_warnings(&group, &steps, now));
        }
        verdict
    }
}

/// Renders the group with `plugin` as the controller would, as one of the reviews' plugin
/// calls (`permits`), giving up at `deadline`: the answer, and the steps when it rendered.
async fn ask(
    type_name: &str,
    plugin: Arc<Plugin>,
    group: Arc<WorkflowGroup>,
    now: i64,
    permits: &Arc<Semaphore>,
    deadline: tokio::time::Instant,
) -> (TypeAnswer, Option<String>) {
    match bounded_call(permits, deadline, move || {
        render_workflow(&group, &plugin, now).map(|w| steps_line(&w))
    })
    .await
    {
        Ok(Ok(steps)) => (TypeAnswer::Accepted, Some(steps)),
        Ok(Err(e)) => (TypeAnswer::of_render(type_name, Err(e)), None),
        Err(why) => (TypeAnswer::Unanswered(why.to_string()), None),
    }
}

/// Most characters of one warning: the API server may cut longer ones.
const MAX_WARNING_CHARS: usize = 256;
/// Most characters of a dry run's plan in warnings, below the API server's 4096 for all the
/// warnings of a request, leaving room for the others.
const MAX_PLAN_CHARS: usize = 3072;

/// The plan of a group a server-side dry run lets in, as warnings (`kubectl apply
/// --dry-run=server` prints them): one per line of `kubectl workflow plan`, each type's steps
/// as its plugin rendered them here. Long lines are cut and a long plan ends with how many
/// lines were left out; the locks are not read here.
fn plan_warnings(
    group: &WorkflowGroup,
    steps: &BTreeMap<String, Option<String>>,
    now: i64,
) -> Vec<String> {
    let steps_of = |type_: &str| match steps.get(type_) {
        Some(Some(steps)) => steps.clone(),
        _ => "(steps not listed: no plugin of this type answered)".to_string(),
    };
    let locks = Err("not read by the webhook (`kubectl workflow plan -f` reads them)".to_string());
    let shown = preview(group, &steps_of, &locks, now);
    let lines: Vec<&str> = shown.lines().collect();
    let mut warnings = Vec::new();
    let mut used = 0;
    for (i, line) in lines.iter().enumerate() {
        let warning = format!("plan: {line}");
        let warning = match warning.char_indices().nth(MAX_WARNING_CHARS - 1) {
            Some((at, _)) => format!("{}…", &warning[..at]),
            None => warning,
        };
        used += warning.chars().count();
        if used > MAX_PLAN_CHARS {
            warnings.push(format!(
                "plan: {} more line(s): `kubectl workflow plan -f` shows them all",
                lines.len() - i
            ));
            break;
        }
        warnings.push(warning);
    }
    warnings
}

/// Why a plugin call of a review gave no answer.
#[derive(Debug, thiserror::Error)]
enum Unanswered {
    /// No permit came free before the deadline.
    #[error("other reviews' plugin calls took the admission budget")]
    NoTurn,
    /// The call began but had not returned by the deadline.
    #[error("the plugin did not answer within the admission budget")]
    Late,
    /// The call's thread panicked or was cancelled.
    #[error("the plugin call failed: {0}")]
    Failed(#[from] tokio::task::JoinError),
}

/// Runs `call` (a plugin call: synchronous, bounded by its own time limit) on a blocking
/// thread once one of `permits` is free, waiting until `deadline` at most. The permit goes
/// with the call and is given back when the call returns, not when the review stops waiting
/// for it: a late call still counts until it ends.
async fn bounded_call<T: Send + 'static>(
    permits: &Arc<Semaphore>,
    deadline: tokio::time::Instant,
    call: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Unanswered> {
    let Ok(Ok(permit)) = tokio::time::timeout_at(deadline, permits.clone().acquire_owned()).await
    else {
        return Err(Unanswered::NoTurn);
    };
    let running = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        call()
    });
    match tokio::time::timeout_at(deadline, running).await {
        Ok(done) => Ok(done?),
        Err(_) => Err(Unanswered::Late),
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;

    use super::*;

    fn group_of_targets(n: usize) -> WorkflowGroup {
        let mut group: WorkflowGroup = serde_saphyr::from_str(include_str!(
            "../../../examples/workflowgroup-maintenance.yaml"
        ))
        .expect("the example");
        let target = group.spec.targets[0].clone();
        group.spec.targets = (0..n)
            .map(|i| crate::api::Target {
                name: format!("node-{i}"),
                ..target.clone()
            })
            .collect();
        group
    }

    #[test]
    fn a_dry_runs_plan_is_a_warning_per_line_with_the_steps_the_plugins_rendered() {
        let group = group_of_targets(3);
        let steps = BTreeMap::from([
            (
                "pre-check".to_string(),
                Some("ping; disk <- ping".to_string()),
            ),
            ("post-check".to_string(), None),
        ]);
        let warnings = plan_warnings(&group, &steps, 1_800_000_000);
        assert!(
            warnings.iter().all(|w| w.starts_with("plan: ")),
            "{warnings:#?}"
        );
        assert!(
            warnings.contains(&"plan:   pre-check: ping; disk <- ping".to_string()),
            "{warnings:#?}"
        );
        assert!(
            warnings.contains(
                &"plan:   post-check: (steps not listed: no plugin of this type answered)"
                    .to_string()
            ),
            "{warnings:#?}"
        );
        assert_eq!(
            warnings.last().map(String::as_str),
            Some(
                "plan: locks: not checked: not read by the webhook (`kubectl workflow plan -f` reads them)"
            )
        );
    }

    #[test]
    fn a_long_plan_fits_the_api_servers_limits_on_warnings_and_says_what_it_left_out() {
        // waveSize 1: a wave (three lines) per target.
        let group = group_of_targets(400);
        let warnings = plan_warnings(&group, &BTreeMap::new(), 1_800_000_000);
        assert!(
            warnings
                .iter()
                .all(|w| w.chars().count() <= MAX_WARNING_CHARS),
            "{warnings:#?}"
        );
        let total: usize = warnings.iter().map(|w| w.chars().count()).sum();
        assert!(total <= 4096, "{total} characters");
        let last = warnings.last().expect("warnings");
        assert!(
            last.starts_with("plan: ")
                && last.ends_with(" more line(s): `kubectl workflow plan -f` shows them all"),
            "{last}"
        );
        let mut wide = group_of_targets(1);
        wide.spec.rollout = None;
        wide.spec.targets[0].name = "n".repeat(300);
        let warnings = plan_warnings(&wide, &BTreeMap::new(), 1_800_000_000);
        let cut = warnings
            .iter()
            .find(|w| w.starts_with("plan: targets: "))
            .expect("the targets line");
        assert_eq!(cut.chars().count(), MAX_WARNING_CHARS, "{cut}");
        assert!(cut.ends_with('…'), "{cut}");
    }

    fn far() -> tokio::time::Instant {
        tokio::time::Instant::now() + Duration::from_secs(60)
    }

    #[tokio::test]
    async fn reviews_never_run_more_plugin_calls_at_once_than_their_permits() {
        let permits = Arc::new(Semaphore::new(2));
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let calls = (0..8).map(|_| {
            let (running, most) = (running.clone(), most.clone());
            bounded_call(&permits, far(), move || {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(20));
                running.fetch_sub(1, Ordering::SeqCst);
            })
        });
        let done = futures::future::join_all(calls).await;
        assert!(done.iter().all(Result::is_ok), "{done:?}");
        assert!(most.load(Ordering::SeqCst) <= 2, "{most:?} at once");
    }

    #[tokio::test]
    async fn a_call_past_the_deadline_keeps_its_permit_until_it_returns() {
        let permits = Arc::new(Semaphore::new(1));
        let (release, released) = mpsc::channel::<()>();
        let soon = tokio::time::Instant::now() + Duration::from_millis(50);
        let late = bounded_call(&permits, soon, move || {
            let _ = released.recv();
        })
        .await;
        assert!(matches!(late, Err(Unanswered::Late)), "{late:?}");
        assert_eq!(permits.available_permits(), 0, "the late call still runs");
        let waited = bounded_call(
            &permits,
            tokio::time::Instant::now() + Duration::from_millis(50),
            || (),
        )
        .await;
        assert!(matches!(waited, Err(Unanswered::NoTurn)), "{waited:?}");
        release.send(()).expect("the late call waits");
        assert!(bounded_call(&permits, far(), || ()).await.is_ok());
    }
}
