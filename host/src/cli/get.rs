//! `workflow-operator get`, `logs` and `approve`: a group's tree, a step's output, and an
//! Approval of a step, with the current kubeconfig as the user (also installed as the kubectl
//! plugin `kubectl workflow`).

use anyhow::{Context as _, anyhow, bail};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams, LogParams};
use kube::{Client, ResourceExt};

use crate::view::text::group_tree;
use workflow_model::text;

use crate::api::{
    Approval, ApprovalDecision, ApprovalSpec, LABEL_GROUP_NAME, LABEL_WORKFLOW_UID, Workflow,
    WorkflowGroup,
};
use crate::controllers::workflow::pod::CONTAINER;
use crate::names::approval_name;
use crate::provenance;

/// What `get` prints.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Kind {
    /// A WorkflowGroup, as a tree: its Workflows, their steps, the steps' targets.
    #[value(alias = "workflowgroup", alias = "workflowgroups")]
    Wfg,
}

/// Prints the tree of group `name`.
///
/// # Errors
/// No kubeconfig, the API server refused, or no such group.
pub fn get(_kind: Kind, name: &str, namespace: Option<String>) -> anyhow::Result<u8> {
    runtime()?.block_on(async {
        let (client, ns) = connect(namespace).await?;
        let (group, workflows) = group_and_workflows(&client, &ns, name).await?;
        print!("{}", group_tree(&group, &workflows, Timestamp::now()));
        Ok(0)
    })
}

/// Prints the output of step `step` (`step` or `type/step`) of group `group`: from its pod
/// while the pod exists, else the end of it its status kept.
///
/// # Errors
/// No kubeconfig, the API server refused, no such group or step.
pub fn logs(group: &str, step: &str, namespace: Option<String>) -> anyhow::Result<u8> {
    runtime()?.block_on(async {
        let (client, ns) = connect(namespace).await?;
        let (_, workflows) = group_and_workflows(&client, &ns, group).await?;
        let (found, step) = with_step(&workflows, &ns, group, step)?;
        let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
        for workflow in &found {
            if found.len() > 1 {
                println!(
                    "==> {} ({}) {} <==",
                    text::escape_controls(&workflow.name_any()),
                    text::escape_controls(&workflow.spec.type_),
                    text::escape_controls(step)
                );
            }
            let detail = workflow
                .status
                .as_ref()
                .and_then(|s| s.step_details.get(step))
                .cloned()
                .unwrap_or_default();
            match step_output(&pods, &workflow.name_any(), step, &detail).await? {
                StepOutput::Pod(output) => print!("{}", shown_output(&output)),
                StepOutput::Kept(pod, log) => {
                    eprintln!(
                        "(pod {pod} is gone: the end of its output, as the step's status kept it)"
                    );
                    println!("{}", shown_output(&log));
                }
                StepOutput::Nothing(why) => eprintln!("{why}"),
            }
        }
        Ok(0)
    })
}

/// A step's output, and where it comes from.
pub(crate) enum StepOutput {
    /// Its pod's log.
    Pod(String),
    /// Its pod (named) is gone: the end of its output, as its status kept it.
    Kept(String, String),
    /// There is none, and why.
    Nothing(String),
}

/// The output of `step` of Workflow `workflow` whose detail is `detail`: from its pod while the
/// pod exists, else what its status kept.
///
/// # Errors
/// The API server refused to give the pod's log.
pub(crate) async fn step_output(
    pods: &Api<Pod>,
    workflow: &str,
    step: &str,
    detail: &crate::api::StepDetail,
) -> anyhow::Result<StepOutput> {
    let Some(pod) = &detail.pod else {
        return Ok(StepOutput::Nothing(format!(
            "step {step} of {workflow} has not started"
        )));
    };
    let params = LogParams {
        container: Some(CONTAINER.into()),
        ..LogParams::default()
    };
    match pods.logs(pod, &params).await {
        Ok(output) => Ok(StepOutput::Pod(output)),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(match &detail.log {
            Some(log) => StepOutput::Kept(pod.clone(), log.clone()),
            None => StepOutput::Nothing(format!(
                "pod {pod} is gone and the step's status kept no output (a step that succeeded keeps only what it wrote to its termination message)"
            )),
        }),
        Err(e) => Err(anyhow!(e).context(format!("reading the log of pod {pod}"))),
    }
}

/// A step's output as `logs` prints it: its lines and tabs kept, every other control character
/// (ESC, carriage return, C1 controls, DEL) escaped, so that what a target wrote cannot drive
/// the terminal (output is inert).
pub(crate) fn shown_output(output: &str) -> std::borrow::Cow<'_, str> {
    text::escape_controls_in_lines(output)
}

/// The Workflows of a group that have step `step` (`step`, `type/step` or `workflow/step`),
/// and the step's name.
fn with_step<'a, 's>(
    workflows: &'a [Workflow],
    ns: &str,
    group: &str,
    step: &'s str,
) -> anyhow::Result<(Vec<&'a Workflow>, &'s str)> {
    let (within, step) = match step.split_once('/') {
        Some((t, s)) => (Some(t), s),
        None => (None, step),
    };
    let found: Vec<&Workflow> = workflows
        .iter()
        .filter(|w| within.is_none_or(|t| w.spec.type_ == t || w.name_any() == t))
        .filter(|w| w.spec.steps.iter().any(|s| s.name == step))
        .collect();
    if found.is_empty() {
        bail!(
            "group {ns}/{group} has no step {step:?}{} (yet)",
            within.map(|t| format!(" in {t}")).unwrap_or_default()
        );
    }
    Ok((found, step))
}

/// Whether `step` of `workflow` waits for approval now: its gate asked (the status records
/// what it asks to approve) and it has not started.
fn waits_for_approval(workflow: &Workflow, step: &str) -> bool {
    let Some(status) = workflow.status.as_ref() else {
        return false;
    };
    let pending = status
        .step_status
        .get(step)
        .is_none_or(|p| *p == crate::api::Phase::Pending);
    let detail = status.step_details.get(step);
    pending
        && detail.is_some_and(|d| d.pod.is_none())
        && detail
            .and_then(|d| d.approval.as_ref())
            .is_some_and(|a| !a.digest.is_empty())
}

/// The one Workflow of `found` whose `step` waits for approval: in a rollout, the wave that
/// waits.
fn waiting<'a>(found: &[&'a Workflow], step: &str, group: &str) -> anyhow::Result<&'a Workflow> {
    let waiting: Vec<&Workflow> = found
        .iter()
        .copied()
        .filter(|w| waits_for_approval(w, step))
        .collect();
    match waiting[..] {
        [workflow] => Ok(workflow),
        [] => {
            let names: Vec<String> = found.iter().map(|w| w.name_any()).collect();
            bail!(
                "step {step} of group {group} does not wait for approval now (in {}); `workflow-operator get wfg {group}` shows where it stands",
                names.join(", ")
            )
        }
        _ => bail!(
            "step {step} waits for approval in {} workflows of group {group} ({}): name one as <workflow>/{step}",
            waiting.len(),
            waiting
                .iter()
                .map(|w| w.name_any())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Approves (or rejects) step `step` (`step`, `type/step` or `workflow/step`) of group
/// `group` in its current run, as the current user: creates an Approval of what the step runs
/// now (its Workflow's UID and the digest its status shows), whose approver is that user (as
/// the API server says, `SelfSubjectReview`), with the user's groups that the step's gate
/// names. Its name is generated, so that no one can take it beforehand.
///
/// # Errors
/// No kubeconfig, no such group or step, the step does not wait for approval (or waits in
/// several Workflows), the user already decided on it, or the API server refused the Approval
/// (no right to create one, or the admission policy).
pub fn approve(
    group: &str,
    step: &str,
    namespace: Option<String>,
    reject: bool,
    comment: Option<String>,
) -> anyhow::Result<u8> {
    use kube::api::PostParams;
    runtime()?.block_on(async {
        let (client, ns) = connect(namespace).await?;
        let (_, workflows) = group_and_workflows(&client, &ns, group).await?;
        let (found, step) = with_step(&workflows, &ns, group, step)?;
        let (username, user_groups) = who_am_i(&client).await?;
        let api: Api<Approval> = Api::namespaced(client, &ns);
        // Said first: the step may have started on this very decision.
        already_decided(&api, &found, step, &username).await?;
        let workflow = waiting(&found, step, group)?;
        let record = workflow
            .status
            .as_ref()
            .and_then(|s| s.step_details.get(step))
            .and_then(|d| d.approval.clone())
            .ok_or_else(|| {
                anyhow!(
                    "step {step} of {} has no approval record",
                    workflow.name_any()
                )
            })?;
        let groups: Vec<String> = user_groups
            .into_iter()
            .filter(|g| {
                record
                    .approvers
                    .iter()
                    .any(|n| n.strip_prefix("group:") == Some(g.as_str()))
            })
            .collect();
        let run = crate::api::run_of(workflow);
        let uid = workflow.uid().unwrap_or_default();
        let decision = if reject {
            ApprovalDecision::Reject
        } else {
            ApprovalDecision::Approve
        };
        let mut approval = Approval::new(
            "",
            ApprovalSpec {
                workflow: workflow.name_any(),
                workflow_uid: uid.clone(),
                digest: record.digest.clone(),
                step: step.to_string(),
                run,
                approver: username.clone(),
                groups,
                decision,
                comment: comment.unwrap_or_default(),
            },
        );
        approval.metadata.name = None;
        approval.metadata.generate_name = Some(format!(
            "{}-",
            approval_name(&workflow.name_any(), step, run, &username)
        ));
        approval.metadata.namespace = Some(ns.clone());
        approval.metadata.labels = Some([(LABEL_WORKFLOW_UID.to_string(), uid)].into());
        let created = api
            .create(&PostParams::default(), &approval)
            .await
            .with_context(|| format!("creating an Approval in {ns}"))?;
        let verb = if reject { "rejected" } else { "approved" };
        println!(
            "{verb} step {step} of workflow {} (run {run}) as {username}: Approval {ns}/{}",
            workflow.name_any(),
            created.name_any()
        );
        println!("  what it runs: {}", text::escape_controls(&record.content));
        println!("  content: {}", record.digest);
        Ok(0)
    })
}

/// Fails when `username` already decided on `step` of one of `found` in its current run, for
/// what its status says the step runs.
async fn already_decided(
    api: &Api<Approval>,
    found: &[&Workflow],
    step: &str,
    username: &str,
) -> anyhow::Result<()> {
    for workflow in found {
        let Some(digest) = workflow
            .status
            .as_ref()
            .and_then(|s| s.step_details.get(step))
            .and_then(|d| d.approval.as_ref())
            .map(|a| a.digest.clone())
            .filter(|d| !d.is_empty())
        else {
            continue;
        };
        let (uid, run) = (
            workflow.uid().unwrap_or_default(),
            crate::api::run_of(workflow),
        );
        let given = api
            .list(&ListParams::default().labels(&format!("{LABEL_WORKFLOW_UID}={uid}")))
            .await
            .with_context(|| format!("listing the Approvals of {}", workflow.name_any()))?;
        if let Some(earlier) = given.items.iter().find(|a| {
            a.spec.approver == username
                && a.spec.step == step
                && a.spec.run == run
                && a.spec.workflow_uid == uid
                && a.spec.digest == digest
        }) {
            bail!(
                "you ({username}) have already decided on step {step} of {} in run {run}: Approval {}",
                workflow.name_any(),
                earlier.name_any()
            );
        }
    }
    Ok(())
}

/// The user the API server says the kubeconfig is, and the user's groups.
pub(super) async fn who_am_i(client: &Client) -> anyhow::Result<(String, Vec<String>)> {
    use k8s_openapi::api::authentication::v1::SelfSubjectReview;
    use kube::api::PostParams;
    let review = Api::<SelfSubjectReview>::all(client.clone())
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .context("asking the API server who you are (SelfSubjectReview)")?;
    let user = review.status.and_then(|s| s.user_info).unwrap_or_default();
    let username = user
        .username
        .filter(|u| !u.is_empty())
        .ok_or_else(|| anyhow!("the API server does not say who you are"))?;
    Ok((username, user.groups.unwrap_or_default()))
}

pub(super) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

pub(super) async fn connect(namespace: Option<String>) -> anyhow::Result<(Client, String)> {
    let client = Client::try_default()
        .await
        .context("no usable kubeconfig (KUBECONFIG, ~/.kube/config) or in-cluster config")?;
    let ns = namespace.unwrap_or_else(|| client.default_namespace().to_string());
    Ok((client, ns))
}

async fn group_and_workflows(
    client: &Client,
    ns: &str,
    name: &str,
) -> anyhow::Result<(WorkflowGroup, Vec<Workflow>)> {
    let groups: Api<WorkflowGroup> = Api::namespaced(client.clone(), ns);
    let group = groups
        .get_opt(name)
        .await
        .with_context(|| format!("reading WorkflowGroup {ns}/{name}"))?
        .ok_or_else(|| anyhow!("no WorkflowGroup {name} in namespace {ns}"))?;
    let uid = group.uid().unwrap_or_default();
    let workflows: Api<Workflow> = Api::namespaced(client.clone(), ns);
    let selector = ListParams::default().labels(&format!("{LABEL_GROUP_NAME}={name}"));
    let workflows = workflows
        .list(&selector)
        .await
        .with_context(|| format!("listing the Workflows of {ns}/{name}"))?
        .items
        .into_iter()
        .filter(|w| provenance::controlled_by(w, &uid))
        .collect();
    Ok((group, workflows))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_in_a_targets_output_are_shown_escaped_by_logs_and_its_lines_kept() {
        let output = "targets 1: 0 ok, 1 failed, 0 unreachable\n\
                      FAIL node-1: exit 1: \u{1b}[2J\u{1b}]0;owned\u{7}\n\
                      \t\u{1b}[1mbold\u{1b}[0m\rover\u{9b}2J\u{7f}\n";
        let shown = shown_output(output);
        assert_eq!(
            shown,
            "targets 1: 0 ok, 1 failed, 0 unreachable\n\
             FAIL node-1: exit 1: \\u{1b}[2J\\u{1b}]0;owned\\u{7}\n\
             \t\\u{1b}[1mbold\\u{1b}[0m\\rover\\u{9b}2J\\u{7f}\n"
        );
        assert!(
            !shown
                .chars()
                .any(|c| c.is_control() && c != '\n' && c != '\t')
        );
        let plain = "ok\n\tdone\n";
        assert!(matches!(shown_output(plain), std::borrow::Cow::Borrowed(p) if p == plain));
    }
}
