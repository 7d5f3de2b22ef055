//! What a step pod says of its attempt: the evidence the cache keeps of it, and the attempt
//! read from it (finished, failed, deleted, past its deadline, or waiting and why).

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;

use k8s_openapi::api::core::v1::{ContainerStateTerminated, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::ObjectMeta;

use crate::api::{LABEL_WORKFLOW_UID, Workflow};
use crate::cached_pod::{CachedPod, CachedPodStatus, step_and_attempt};
use crate::controllers::workflow::step::Attempt;
use crate::plugin::StepOutcome;
use crate::provenance::Provenance;

/// The cache's copy of a step pod: only what the Workflow controller reads (its
/// name, controller, times, the step and attempt its labels name, phase, the step container's
/// state and an unschedulable condition), when a finished pod was first seen, and whether the
/// operator made it (`provenance` verifies its signature, which the spec it drops is needed
/// for). No label or annotation is kept as such. The rest (its spec, with the command and
/// every target, the group's labels, IPs, images, other conditions) is ours or the kubelet's,
/// and thousands of cached pods would hold it all.
pub fn keep_pod_evidence(pod: Pod, provenance: &Provenance) -> CachedPod {
    let workflow_uid = pod
        .labels()
        .get(LABEL_WORKFLOW_UID)
        .cloned()
        .unwrap_or_default();
    let ours = provenance.pod_is_ours(&pod, &workflow_uid);
    let Pod {
        metadata: meta,
        status,
        ..
    } = pod;
    let status = status.map(CachedPodStatus::from);
    let finished = status.as_ref().is_some_and(CachedPodStatus::finished);
    let (step, attempt) = step_and_attempt(meta.labels.as_ref());
    let metadata = ObjectMeta {
        name: meta.name,
        namespace: meta.namespace,
        uid: meta.uid,
        resource_version: meta.resource_version,
        creation_timestamp: meta.creation_timestamp,
        deletion_timestamp: meta.deletion_timestamp,
        deletion_grace_period_seconds: meta.deletion_grace_period_seconds,
        owner_references: meta.owner_references.map(|refs| {
            refs.into_iter()
                .filter(|r| r.controller == Some(true))
                .collect()
        }),
        ..ObjectMeta::default()
    };
    CachedPod {
        metadata,
        step,
        attempt,
        signed: ours,
        observed_finished: finished.then(Timestamp::now),
        status,
    }
}

/// The latest attempt of each step of `workflow`, from its pods, at `now`.
pub fn latest_attempts(
    workflow: &Workflow,
    pods: &[CachedPod],
    now: Timestamp,
) -> BTreeMap<String, Attempt> {
    let mut latest: BTreeMap<String, (u32, &CachedPod)> = BTreeMap::new();
    for pod in pods {
        let (Some(step), Some(attempt)) = (pod.step.as_deref(), pod.attempt) else {
            continue;
        };
        match latest.entry(step.to_string()) {
            Entry::Vacant(e) => {
                e.insert((attempt, pod));
            }
            Entry::Occupied(mut e) if e.get().0 < attempt => {
                e.insert((attempt, pod));
            }
            Entry::Occupied(_) => {}
        }
    }
    latest
        .into_iter()
        .map(|(step, (number, pod))| {
            let timeout = workflow
                .spec
                .steps
                .iter()
                .find(|s| s.name == step)
                .and_then(|s| s.timeout_seconds);
            (step, observe_pod(pod, number, timeout, now))
        })
        .collect()
}

/// What one pod says about its attempt at `now`: its evidence once finished; while it runs,
/// its deadline and the evidence it gives should it still run then. Whether the deadline has
/// passed is the plan's decision ([`Attempt::at`]).
///
/// A pod whose deletion was asked at or after its deadline gives the deadline's evidence, not
/// "deleted": the operator deletes a pod still running at its deadline, and a reconcile that
/// runs on a Workflow cached before that status was written must judge the step as the
/// deadline did (the same status, so no second write), whatever the pod shows while it is
/// being stopped (terminating, or Failed once its container was killed).
pub fn observe_pod(pod: &CachedPod, number: u32, timeout: Option<u32>, now: Timestamp) -> Attempt {
    let status = pod.status.as_ref();
    let created = pod.metadata.creation_timestamp.as_ref().map(|t| t.0);
    let deadline = timeout
        .zip(created)
        .map(|(secs, created)| created.as_second() + i64::from(secs));
    let observed = pod.observed_finished;
    let finished = |succeeded: bool, message: String| {
        let terminated = terminated(status);
        let mut message = terminated
            .and_then(|t| t.message.clone())
            .filter(|m| !m.trim().is_empty())
            .unwrap_or(message);
        message.truncate(message.trim_end().len());
        StepOutcome {
            succeeded,
            exit_code: terminated.map(|t| t.exit_code),
            // A step that acts on the targets reports per target (`workflow-runner`).
            targets: workflow_model::TargetReport::parse(&message),
            message,
            attempt: number,
            duration_ms: duration_ms(status, created, now),
        }
    };
    // The evidence of an attempt still unfinished at its deadline: it ran its whole timeout,
    // ending then, whenever it is judged.
    let at_deadline = timeout.map(|secs| {
        let message = match status.and_then(waiting_reason) {
            Some(why) => format!("DeadlineExceeded: not finished within {secs}s ({why})"),
            None => format!("DeadlineExceeded: not finished within {secs}s"),
        };
        StepOutcome {
            succeeded: false,
            exit_code: None,
            targets: None,
            message,
            attempt: number,
            duration_ms: u64::from(secs) * 1000,
        }
    });
    let attempt = |outcome: Option<StepOutcome>| Attempt {
        number,
        pod: pod.name_any(),
        observed: outcome.as_ref().and(observed),
        created,
        deadline,
        at_deadline: outcome.is_none().then(|| at_deadline.clone()).flatten(),
        outcome,
    };
    let phase = status.and_then(|s| s.phase.as_deref());
    if phase != Some("Succeeded")
        && let Some((deadline, evidence)) = deadline.zip(at_deadline.clone())
        && stopped_at_or_after(pod, deadline)
    {
        return Attempt {
            observed: Timestamp::from_second(deadline).ok(),
            ..attempt(Some(evidence))
        };
    }
    match phase {
        Some("Succeeded") => return attempt(Some(finished(true, String::new()))),
        Some("Failed") => {
            // No container evidence (a deadline, an eviction): the pod's own reason.
            let why = status
                .map(|s| reason_and_message(s.reason.as_deref(), s.message.as_deref()))
                .unwrap_or_default();
            return attempt(Some(finished(false, why)));
        }
        _ => {}
    }
    if pod.metadata.deletion_timestamp.is_some() {
        let message = "its pod was deleted before it finished".to_string();
        return attempt(Some(finished(false, message)));
    }
    attempt(None)
}

/// Whether `pod`'s deletion was asked at or after `deadline` (Unix seconds) and stopped its
/// container: it was still running then, or it failed with its container ended by the stop,
/// not before the deadline (a pod evicted or failed earlier keeps its own evidence). Its
/// `deletionTimestamp` is when the deletion was asked plus the grace period given.
fn stopped_at_or_after(pod: &CachedPod, deadline: i64) -> bool {
    let Some(deleted) = pod.metadata.deletion_timestamp.as_ref() else {
        return false;
    };
    let grace = pod.metadata.deletion_grace_period_seconds.unwrap_or(0);
    let asked = deleted.0.as_second() - grace;
    let status = pod.status.as_ref();
    let ended_by_the_stop = match status.and_then(|s| s.phase.as_deref()) {
        Some("Failed") => terminated(status)
            .and_then(|t| t.finished_at.as_ref())
            .is_some_and(|t| t.0.as_second() >= deadline),
        _ => true,
    };
    asked >= deadline && ended_by_the_stop
}

fn terminated(status: Option<&CachedPodStatus>) -> Option<&ContainerStateTerminated> {
    status?.step.as_ref()?.terminated.as_ref()
}

/// Why a pod that has not started its container is still waiting: unschedulable, or its
/// image cannot be pulled.
fn waiting_reason(status: &CachedPodStatus) -> Option<String> {
    let unschedulable = status
        .unschedulable
        .as_ref()
        .map(|c| reason_and_message(c.reason.as_deref(), c.message.as_deref()));
    let waiting = || {
        status
            .step
            .as_ref()?
            .waiting
            .as_ref()
            .map(|w| reason_and_message(w.reason.as_deref(), w.message.as_deref()))
    };
    unschedulable.or_else(waiting).filter(|s| !s.is_empty())
}

fn reason_and_message(reason: Option<&str>, message: Option<&str>) -> String {
    match (reason.unwrap_or(""), message.unwrap_or("")) {
        (r, "") => r.to_string(),
        ("", m) => m.to_string(),
        (r, m) => format!("{r}: {m}"),
    }
}

/// How long the container ran, from its own times when it has them.
fn duration_ms(
    status: Option<&CachedPodStatus>,
    created: Option<Timestamp>,
    now: Timestamp,
) -> u64 {
    let terminated = terminated(status);
    let start = terminated
        .and_then(|t| t.started_at.as_ref())
        .map(|t| t.0)
        .or(created);
    let end = terminated
        .and_then(|t| t.finished_at.as_ref())
        .map(|t| t.0)
        .unwrap_or(now);
    start
        .map(|start| {
            (end.as_millisecond() - start.as_millisecond())
                .max(0)
                .unsigned_abs()
        })
        .unwrap_or(0)
}
