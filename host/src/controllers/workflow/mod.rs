//! The Workflow controller: runs a workflow's steps as Pods, in dependency order, each started
//! after its plugin's `gate` and judged by its plugin's `evaluate`.
//!
//! Step state is derived each time from the pods that exist (their attempt labels and
//! phases), the steps already judged Completed in status, and the pinned plugin's verdicts, so
//! a lost status write or an operator restart loses nothing: the next reconcile computes the
//! same state again. What to do is decided in [`plan`] (the workflow) and [`step`] (one step);
//! [`pod`] builds and reads the pods; this module reads, calls the plan and writes.

pub mod plan;
pub mod pod;
pub mod refusal;
pub mod step;
pub mod verdicts;

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use tracing::{info, warn};

use self::plan::{
    Observed, PluginChoice, StepPod, plan_finished, plan_plugin_missing, plan_workflow,
    plugin_choice,
};
use self::pod::{CachedPod, latest_attempts};
use self::refusal::PodRefusal;
pub use self::verdicts::Verdicts;
use super::context::Context;
use super::error::{Error, Result};
use super::write;
use crate::api::{
    Phase, PluginRef, StepDetail, Workflow, WorkflowSpec, WorkflowStatus, rerun_pending,
};
use crate::names;
use crate::provenance::{self, Provenance};

/// Reconciles one Workflow.
pub async fn reconcile(workflow: Arc<Workflow>, ctx: Arc<Context>) -> Result<Action> {
    write::instrumented(&*workflow, &ctx, reconcile_workflow(&workflow, &ctx)).await
}

/// Prepares a Workflow for the shared cache. Its managedFields go, as nothing reads them. Of a
/// finished Workflow only what is still read stays: its name, owner and whether its group
/// made it, its type, phase, conditions and the targets its steps reported not ok (the group
/// reads its type, phase, `Succeeded` message and failed targets; its own reconcile stops at
/// the phase). Its steps, targets, params and the rest of its step details stay in the API
/// server: thousands of finished Workflows would otherwise hold them for nothing.
///
/// A finished Workflow whose conditions its reconcile still has to complete (one that finished
/// before those conditions existed) is kept whole: that reconcile writes the status whole, and
/// must not write a slimmed one.
pub fn keep_what_is_read(
    workflow: &mut Workflow,
    provenance: &Provenance,
    verdicts: &mut Verdicts,
) {
    workflow.metadata.managed_fields = None;
    mark_group_signed(workflow, provenance, verdicts);
    if rerun_pending(workflow) {
        // Its reconcile starts it again from its steps and their status.
        return;
    }
    let Some(status) = workflow
        .status
        .as_mut()
        .filter(|s| s.phase.is_some_and(|p| p.is_finished()))
    else {
        return;
    };
    if plan::plan_finished_writes(status) {
        return;
    }
    // The targets its steps reported not ok: the group's rollout counts them.
    let step_details = std::mem::take(&mut status.step_details)
        .into_iter()
        .filter_map(|(step, detail)| {
            let targets = detail.targets.filter(|t| !t.problems.is_empty())?;
            Some((
                step,
                StepDetail {
                    targets: Some(targets),
                    ..StepDetail::default()
                },
            ))
        })
        .collect();
    *status = WorkflowStatus {
        phase: status.phase,
        run: status.run,
        conditions: std::mem::take(&mut status.conditions),
        step_details,
        ..WorkflowStatus::default()
    };
    workflow.spec = WorkflowSpec {
        type_: std::mem::take(&mut workflow.spec.type_),
        rerun: workflow.spec.rerun.take(),
        ..WorkflowSpec::default()
    };
    // Nor are its labels (its group's, copied, its type and wave) or annotations (its
    // plugin's digest, its signature) read any more, but whether its group made it, noted
    // above: a map of even one entry takes half a KiB, and there are thousands of these.
    let signed = group_signed(workflow);
    workflow.metadata.labels = None;
    workflow.metadata.annotations = None;
    provenance::mark_verified(&mut workflow.metadata, signed);
}

/// The UID of the WorkflowGroup `workflow` names as its controller, if it names one.
pub fn group_owner_uid(workflow: &Workflow) -> Option<&str> {
    workflow
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true) && o.kind == "WorkflowGroup")
        .map(|o| o.uid.as_str())
}

/// Notes on `workflow` (a copy for the cache) whether the group it names made it as it is.
fn mark_group_signed(workflow: &mut Workflow, provenance: &Provenance, verdicts: &mut Verdicts) {
    let signed = group_owner_uid(workflow).is_some_and(|group| {
        verdicts.signed(workflow, group, || {
            provenance.workflow_is_ours(workflow, group)
        })
    });
    provenance::mark_verified(&mut workflow.metadata, signed);
}

/// Whether the cached `workflow` is its group's as the group made it.
pub fn group_signed(workflow: &Workflow) -> bool {
    provenance::verified(&workflow.metadata)
}

async fn reconcile_workflow(workflow: &Workflow, ctx: &Context) -> Result<Action> {
    let ns = workflow.namespace().ok_or(Error::MissingNamespace)?;
    let old = workflow.status.clone().unwrap_or_default();
    let workflows: Api<Workflow> = Api::namespaced(ctx.client.clone(), &ns);
    if let Some(plan) = plan_without_steps(workflow, &old) {
        write::record_transition(ctx, &workflows, workflow, &old, &plan.status, &plan.events)
            .await?;
        if plan.status.run > old.run {
            info!(run = plan.status.run, "workflow runs again");
        }
        return Ok(Action::await_change());
    }
    let choice = plugin_choice(workflow);
    let plugin = match &choice {
        PluginChoice::Pinned(digest) => ctx.registry.get_pinned(&workflow.spec.type_, digest),
        PluginChoice::Current => ctx.registry.get(&workflow.spec.type_),
    };
    let Some(plugin) = plugin else {
        let plan = plan_plugin_missing(workflow, &choice, Timestamp::now());
        write::record_transition(ctx, &workflows, workflow, &old, &plan.status, &plan.events)
            .await?;
        // The registry's change notification reconciles us again when plugins change.
        return Ok(Action::await_change());
    };
    let plugin_ref = PluginRef {
        version: plugin.info().version.clone(),
        digest: plugin.digest().to_string(),
    };

    let uid = workflow.uid().unwrap_or_default();
    let pods_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let pods = step_pods(ctx, workflow, &old, &pods_api, &uid).await?;
    let now = Timestamp::now();
    let mut observed = Observed {
        attempts: latest_attempts(workflow, &pods, now),
        ..Observed::default()
    };
    observe_approvals(ctx, workflow, &mut observed).await;
    let mut starter = Starter {
        ctx,
        workflow,
        pods_api: &pods_api,
        uid: &uid,
        created: BTreeSet::new(),
        stopped: BTreeSet::new(),
        // The targets' ConfigMap (only for lists too long for a pod) goes with the first pod:
        // one that exists was made with it.
        targets_written: !pods.is_empty() || !pod::needs_targets_config_map(workflow),
    };
    // A refused pod changes the plan (its step waits, or fails): plan again knowing the
    // refusal until every pod the plan starts exists. Each round adds a refusal of a step
    // whose pod was still to start, so there are at most as many rounds as steps.
    let plan = loop {
        let plan = plan_workflow(
            workflow,
            &observed,
            plugin.as_ref(),
            &plugin_ref,
            &ctx.config.step_defaults,
            now,
        );
        starter.stop(&plan.stop).await?;
        match starter.start(&plan.create).await? {
            Some((step, refusal)) => {
                observed.refused.insert(step, refusal);
            }
            None => break plan,
        }
    };
    let written =
        write::record_transition(ctx, &workflows, workflow, &old, &plan.status, &plan.events)
            .await?;
    if let Some(phase) = plan.status.phase.filter(|p| written && p.is_finished()) {
        ctx.metrics.workflow_finished(phase.as_str());
        info!(%phase, "workflow finished");
    }
    next(plan)
}

/// What the controller does after `plan` was carried out: retries with back-off while its
/// plugin does not answer or a pod is refused, looks again when it must, or waits for a change.
fn next(plan: plan::WorkflowPlan) -> Result<Action> {
    if let Some(error) = plan.unavailable {
        return Err(Error::PluginUnavailable(error));
    }
    if let Some(why) = plan.refused {
        return Err(Error::PodRefused(why));
    }
    Ok(plan
        .requeue_after
        .map_or_else(Action::await_change, Action::requeue))
}

/// The status of a Workflow whose steps are not to be looked at in this reconcile: one that
/// claims a group it was not made by (or was changed since), whose steps never run; one its
/// group runs again (the status that says so first, the steps from the next reconcile, which
/// this write triggers); and one finished before the conditions it now has existed.
fn plan_without_steps(workflow: &Workflow, old: &WorkflowStatus) -> Option<plan::WorkflowPlan> {
    if group_owner_uid(workflow).is_some() && !group_signed(workflow) {
        return Some(plan::plan_not_made_by_group(workflow, Timestamp::now()));
    }
    if let Some(plan) = plan::plan_rerun(workflow, Timestamp::now()) {
        return Some(plan);
    }
    old.phase
        .is_some_and(|p| p.is_finished())
        .then(|| plan_finished(workflow))
}

/// The Workflow's own signed pods: from the cache, and from the API server those the status
/// says were started and the cache does not hold yet (it may lag behind our own writes), so
/// that only a pod really gone counts as deleted.
async fn step_pods(
    ctx: &Context,
    workflow: &Workflow,
    old: &WorkflowStatus,
    pods_api: &Api<Pod>,
    uid: &str,
) -> Result<Vec<CachedPod>> {
    let ns = workflow.namespace().ok_or(Error::MissingNamespace)?;
    let mut pods = cached_pods(ctx, workflow, &ns, uid);
    for missing in unseen_pods(old, &pods) {
        if let Some(pod) = pods_api.get_opt(&missing).await.map_err(Error::Kube)? {
            let pod = pod::keep_pod_evidence(pod, &ctx.provenance);
            if pod.made_for(uid) {
                pods.push(pod);
            }
        }
    }
    Ok(pods)
}

/// The approvals given for the Workflow's steps, each counted only if its giver is trusted
/// (with a note saying why not).
async fn observe_approvals(ctx: &Context, workflow: &Workflow, observed: &mut Observed) {
    let approvals = ctx.approvals.of_workflow(workflow);
    if approvals.is_empty() {
        return;
    }
    let trust = ctx.approvals.trust().await;
    for (step, given) in approvals {
        let (counted, note) = crate::approvals::judge::trusted(given, &trust);
        if let Some(note) = note {
            observed.approval_notes.insert(step.clone(), note);
        }
        observed.approvals.insert(step, counted);
    }
}

/// Starts and stops step pods, remembering across the plan's rounds what it did.
struct Starter<'a> {
    ctx: &'a Context,
    workflow: &'a Workflow,
    pods_api: &'a Api<Pod>,
    uid: &'a str,
    /// The pods created so far.
    created: BTreeSet<String>,
    /// The pods deleted so far.
    stopped: BTreeSet<String>,
    /// Whether the ConfigMap with the Workflow's targets exists.
    targets_written: bool,
}

impl Starter<'_> {
    /// Deletes the pods of `stop` not deleted yet: steps past their timeout.
    async fn stop(&mut self, stop: &[String]) -> Result<()> {
        for pod_name in stop {
            if self.stopped.insert(pod_name.clone()) {
                write::delete(self.pods_api, pod_name).await?;
                info!(pod = %pod_name, "stopped a step pod past its timeout");
            }
        }
        Ok(())
    }

    /// Creates the pods of `starts` not created yet, in order (the first after the targets'
    /// ConfigMap it mounts), until the API server refuses one: that step and its refusal are
    /// returned.
    async fn start(&mut self, starts: &[StepPod]) -> Result<Option<(String, PodRefusal)>> {
        for start in starts {
            let name = start.pod.name_any();
            if self.created.contains(&name) {
                continue;
            }
            let created = if self.targets_written {
                Ok(())
            } else {
                self.write_targets().await
            };
            let created = match created {
                Ok(()) => self.create_pod(&start.pod).await,
                Err(e) => Err(e),
            };
            match created {
                Ok(()) => {}
                Err(Error::NameTaken { kind, name }) => {
                    let refusal = PodRefusal::name_taken(&kind, &name);
                    warn!(step = %start.step, attempt = start.attempt, message = %refusal.message, "step pod refused");
                    return Ok(Some((start.step.clone(), refusal)));
                }
                Err(Error::Kube(e)) => match PodRefusal::of(&e) {
                    Some(refusal) => {
                        warn!(step = %start.step, attempt = start.attempt, message = %refusal.message, "step pod refused");
                        return Ok(Some((start.step.clone(), refusal)));
                    }
                    None => return Err(Error::Kube(e)),
                },
                Err(e) => return Err(e),
            }
            self.created.insert(name);
            if let Some(since) = start.ready_since {
                let waited = Timestamp::now().duration_since(since);
                self.ctx.metrics.step_started(waited.unsigned_abs());
            }
            info!(step = %start.step, attempt = start.attempt, "started step");
        }
        Ok(None)
    }

    /// Creates `pod`, signed as the operator's. One of its name that exists counts as created
    /// only when it carries that signature (an earlier reconcile made it and its status write
    /// was lost); otherwise someone else holds the name: [`Error::NameTaken`].
    async fn create_pod(&self, pod: &Pod) -> Result<()> {
        let mut pod = pod.clone();
        self.ctx.provenance.sign_pod(&mut pod, self.uid);
        write::create_or_accept(self.pods_api, &pod, |existing| {
            write::controlled_by(existing, self.uid)
                && self.ctx.provenance.pod_is_ours(existing, self.uid)
        })
        .await
    }

    /// Creates the ConfigMap of the Workflow's targets. One of its name that exists is used only
    /// when it holds exactly these targets, immutably (whoever made it); otherwise someone else
    /// holds the name: [`Error::NameTaken`]. The runner checks the file against the digest in
    /// the pod too, so a ConfigMap replaced later cannot redirect a step either.
    async fn write_targets(&mut self) -> Result<()> {
        let ns = self.workflow.namespace().ok_or(Error::MissingNamespace)?;
        let maps: Api<ConfigMap> = Api::namespaced(self.ctx.client.clone(), &ns);
        let map = pod::targets_config_map(self.workflow);
        write::create_or_accept(&maps, &map, |existing| {
            pod::targets_config_map_fits(existing, self.workflow)
        })
        .await?;
        self.targets_written = true;
        Ok(())
    }
}

/// Pods of running steps that the status records and `pods` does not hold.
fn unseen_pods(old: &WorkflowStatus, pods: &[CachedPod]) -> Vec<String> {
    old.step_status
        .iter()
        .filter(|(_, phase)| **phase == Phase::Running)
        .filter_map(|(step, _)| old.step_details.get(step)?.pod.clone())
        .filter(|name| !pods.iter().any(|p| p.metadata.name.as_ref() == Some(name)))
        .collect()
}

/// This Workflow's pods in the cache, found by their deterministic names (attempts 1 to one
/// past what the status knows, in case the status write after a create was lost), not by
/// scanning every pod: a reconcile costs the same with 5 pods in the cache or 50,000.
fn cached_pods(ctx: &Context, workflow: &Workflow, ns: &str, uid: &str) -> Vec<CachedPod> {
    names::step_pod_names(workflow)
        .filter_map(|name| ctx.pods.get(&ObjectRef::new(&name).within(ns)))
        .filter(|p| p.made_for(uid))
        .map(|p| CachedPod::clone(&p))
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::controllers::workflowgroup::plan::ObservedWorkflow;

    fn workflow(phase: &str) -> Workflow {
        let mut workflow: Workflow = serde_json::from_value(json!({
            "apiVersion": "workflow.rxg456.cn/v1alpha1",
            "kind": "Workflow",
            "metadata": {
                "name": "g-setup-733756a5",
                "namespace": "ns",
                "uid": "uid-w",
                "generation": 1,
                "resourceVersion": "42",
                "labels": {"workflow.rxg456.cn/workflow-type": "setup"},
                "annotations": {"workflow.rxg456.cn/plugin-digest": "b08e27c6"},
                "ownerReferences": [{
                    "apiVersion": "workflow.rxg456.cn/v1alpha1", "kind": "WorkflowGroup",
                    "name": "g", "uid": "uid-g", "controller": true
                }],
                "managedFields": [{"manager": "workflow-operator", "operation": "Apply"}]
            },
            "spec": {
                "type": "setup",
                "clusterName": "c",
                "targets": [{"name": "node-1", "ip": "192.168.1.101", "role": "Master"}],
                "params": {"version": "1.34"},
                "steps": [
                    {"name": "install", "command": "install.sh"},
                    {"name": "verify", "command": "verify.sh", "dependsOn": ["install"]}
                ]
            },
            "status": {
                "phase": phase,
                "startTime": "2026-12-01T07:01:09Z",
                "stepStatus": {"install": "Completed", "verify": phase},
                "stepDetails": {
                    "install": {"attempts": 1, "pod": "g-setup-733756a5-install-1-6bed9408"},
                    "verify": {"attempts": 2, "pod": "g-setup-733756a5-verify-2-1c2d3e4f",
                               "message": "exit code 1"}
                },
                "progress": "1/2",
                "conditions": [{
                    "type": "Succeeded", "status": "False", "reason": "StepFailed",
                    "message": "step verify failed: exit code 1", "observedGeneration": 1,
                    "lastTransitionTime": "2026-12-01T07:01:10Z"
                }],
                "observedGeneration": 1,
                "plugin": {"version": "0.1.0", "digest": "b08e27c6"}
            }
        }))
        .expect("a Workflow");
        // As this operator writes it: `Succeeded` and the conditions derived from it.
        if let Some(status) = workflow.status.as_mut() {
            crate::controllers::status::derive_kstatus_conditions(&mut status.conditions);
        }
        workflow
    }

    #[test]
    fn a_cached_finished_workflow_tells_its_group_and_its_reconcile_the_same_as_the_workflow() {
        for phase in ["Completed", "Failed"] {
            let mut full = workflow(phase);
            let report = workflow_model::TargetReport::parse(
                "targets 2: 1 ok, 1 failed, 0 unreachable\nFAIL node-2: disk full\nOK node-1 (0.1 s)",
            );
            if let Some(detail) = full
                .status
                .as_mut()
                .and_then(|s| s.step_details.values_mut().next())
            {
                detail.targets = report.clone();
            }
            let provenance = Provenance::new(b"test");
            provenance.sign_workflow(&mut full, "uid-g");
            let mut cached = full.clone();
            keep_what_is_read(&mut cached, &provenance, &mut Verdicts::default());
            assert_eq!(
                ObservedWorkflow::of(&cached)
                    .failed_targets
                    .keys()
                    .collect::<Vec<_>>(),
                ["node-2"],
                "{phase}"
            );
            assert_eq!(
                ObservedWorkflow::of(&cached),
                ObservedWorkflow::of(&full),
                "{phase}"
            );
            assert_eq!(cached.spec.type_, full.spec.type_);
            assert!(write::controlled_by(&cached, "uid-g"));
            let status = cached.status.as_ref().expect("a status");
            assert!(status.phase.is_some_and(|p| p.is_finished()), "{phase}");
            assert_eq!(cached.metadata.managed_fields, None);
            // Whether its group made it is all that is left of its labels and annotations.
            assert!(group_signed(&cached), "{phase}");
            assert_eq!(cached.metadata.labels, None);
            assert_eq!(
                cached.metadata.annotations.as_ref().map(|a| a.len()),
                Some(1)
            );
            let mut forged = full.clone();
            forged.spec.targets[0].ip = "10.9.9.9".into();
            keep_what_is_read(&mut forged, &provenance, &mut Verdicts::default());
            assert!(
                !group_signed(&forged),
                "{phase}: changed after it was signed"
            );
            assert_eq!(forged.metadata.annotations, None);
            // What no reconcile reads of a finished Workflow is gone.
            assert!(cached.spec.steps.is_empty() && cached.spec.targets.is_empty());
            assert_eq!(cached.spec.params, None);
            assert!(status.step_status.is_empty());
            // Of the step details, only the targets reported not ok.
            assert_eq!(status.step_details.len(), 1, "{phase}");
            assert!(
                status
                    .step_details
                    .values()
                    .all(|d| d.targets == report && d.pod.is_none() && d.attempts == 0)
            );
        }
    }

    #[test]
    fn a_finished_workflow_whose_reconcile_still_writes_its_conditions_is_cached_whole() {
        let mut full = workflow("Completed");
        // Finished before the kstatus conditions existed: only `Succeeded`.
        if let Some(status) = full.status.as_mut() {
            status.conditions.truncate(1);
        }
        let mut cached = full.clone();
        keep_what_is_read(
            &mut cached,
            &Provenance::new(b"test"),
            &mut Verdicts::default(),
        );
        assert_eq!(cached.spec, full.spec);
        assert_eq!(cached.status, full.status);
    }

    #[test]
    fn a_cached_running_workflow_keeps_all_but_its_managed_fields() {
        for phase in ["Running", "Pending"] {
            let full = workflow(phase);
            let mut cached = full.clone();
            keep_what_is_read(
                &mut cached,
                &Provenance::new(b"test"),
                &mut Verdicts::default(),
            );
            let mut expected = full;
            expected.metadata.managed_fields = None;
            assert_eq!(cached.metadata, expected.metadata, "{phase}");
            assert_eq!(cached.spec, expected.spec, "{phase}");
            assert_eq!(cached.status, expected.status, "{phase}");
        }
        let mut unstarted = workflow("Running");
        unstarted.status = None;
        let expected = unstarted.clone();
        keep_what_is_read(
            &mut unstarted,
            &Provenance::new(b"test"),
            &mut Verdicts::default(),
        );
        assert_eq!(unstarted.spec, expected.spec);
    }
}
