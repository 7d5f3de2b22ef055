//! `workflow-operator get`, `logs` and `approve`: a group's tree, a step's output, and an
//! Approval of a step, with the current kubeconfig as the user (also installed as the kubectl
//! plugin `kubectl workflow`).

use anyhow::{Context as _, anyhow, bail};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams, LogParams};
use kube::{Client, ResourceExt};

use super::tree::group_tree;
use crate::api::{
    Approval, ApprovalDecision, ApprovalSpec, LABEL_GROUP_NAME, Workflow, WorkflowGroup,
};
use crate::controllers::workflow::pod::CONTAINER;
use crate::names::approval_name;

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
                println!("==> {} ({}) {step} <==", workflow.name_any(), workflow.spec.type_);
            }
            let detail = workflow
                .status
                .as_ref()
                .and_then(|s| s.step_details.get(step))
                .cloned()
                .unwrap_or_default();
            let Some(pod) = &detail.pod else {
                eprintln!("step {step} of {} has not started", workflow.name_any());
                continue;
            };
            let params = LogParams {
                container: Some(CONTAINER.into()),
                ..LogParams::default()
            };
            match pods.logs(pod, &params).await {
                Ok(text) => print!("{text}"),
                Err(kube::Error::Api(e)) if e.code == 404 => match &detail.log {
                    Some(log) => {
                        eprintln!("(pod {pod} is gone: the end of its output, as the step's status kept it)");
                        println!("{log}");
                    }
                    None => eprintln!(
                        "pod {pod} is gone and the step's status kept no output (a step that succeeded keeps only what it wrote to its termination message)"
                    ),
                },
                Err(e) => return Err(anyhow!(e).context(format!("reading the log of pod {ns}/{pod}"))),
            }
        }
        Ok(0)
    })
}

/// The Workflows of a group that have step `step` (`step` or `type/step`), and the step's name.
fn with_step<'a, 's>(
    workflows: &'a [Workflow],
    ns: &str,
    group: &str,
    step: &'s str,
) -> anyhow::Result<(Vec<&'a Workflow>, &'s str)> {
    let (type_, step) = match step.split_once('/') {
        Some((t, s)) => (Some(t), s),
        None => (None, step),
    };
    let found: Vec<&Workflow> = workflows
        .iter()
        .filter(|w| type_.is_none_or(|t| w.spec.type_ == t))
        .filter(|w| w.spec.steps.iter().any(|s| s.name == step))
        .collect();
    if found.is_empty() {
        bail!(
            "group {ns}/{group} has no step {step:?}{} (yet)",
            type_.map(|t| format!(" of type {t}")).unwrap_or_default()
        );
    }
    Ok((found, step))
}

/// Approves (or rejects) step `step` (`step` or `type/step`) of group `group` in its current
/// run, as the current user: creates an Approval whose approver is that user (as the API
/// server says, `SelfSubjectReview`), with the user's groups that the step's gate names.
///
/// # Errors
/// No kubeconfig, no such group or step, several Workflows with that step, or the API server
/// refused the Approval (no right to create one, or the admission policy).
pub fn approve(
    group: &str,
    step: &str,
    namespace: Option<String>,
    reject: bool,
    comment: Option<String>,
) -> anyhow::Result<u8> {
    use k8s_openapi::api::authentication::v1::SelfSubjectReview;
    use kube::api::PostParams;
    runtime()?.block_on(async {
        let (client, ns) = connect(namespace).await?;
        let (_, workflows) = group_and_workflows(&client, &ns, group).await?;
        let (found, step) = with_step(&workflows, &ns, group, step)?;
        let [workflow] = found[..] else {
            bail!(
                "group {ns}/{group} has step {step:?} in {} workflows ({}): name it as <type>/{step}",
                found.len(),
                found.iter().map(|w| w.spec.type_.as_str()).collect::<Vec<_>>().join(", ")
            );
        };
        let review = Api::<SelfSubjectReview>::all(client.clone())
            .create(&PostParams::default(), &SelfSubjectReview::default())
            .await
            .context("asking the API server who you are (SelfSubjectReview)")?;
        let user = review.status.and_then(|s| s.user_info).unwrap_or_default();
        let username = user
            .username
            .filter(|u| !u.is_empty())
            .ok_or_else(|| anyhow!("the API server does not say who you are"))?;
        let status = workflow.status.clone().unwrap_or_default();
        let named = status
            .step_details
            .get(step)
            .and_then(|d| d.approval.as_ref())
            .map(|a| a.approvers.clone())
            .unwrap_or_default();
        let groups: Vec<String> = user
            .groups
            .unwrap_or_default()
            .into_iter()
            .filter(|g| named.iter().any(|n| n.strip_prefix("group:") == Some(g.as_str())))
            .collect();
        let run = crate::api::run_of(workflow);
        let name = approval_name(&workflow.name_any(), step, run, &username);
        let decision = if reject {
            ApprovalDecision::Reject
        } else {
            ApprovalDecision::Approve
        };
        let mut approval = Approval::new(
            &name,
            ApprovalSpec {
                workflow: workflow.name_any(),
                step: step.to_string(),
                run,
                approver: username.clone(),
                groups,
                decision,
                comment: comment.unwrap_or_default(),
            },
        );
        approval.metadata.namespace = Some(ns.clone());
        let api: Api<Approval> = Api::namespaced(client, &ns);
        match api.create(&PostParams::default(), &approval).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {
                bail!("you ({username}) have already decided on step {step} of {} in run {run}: Approval {ns}/{name}", workflow.name_any())
            }
            Err(e) => return Err(anyhow!(e).context(format!("creating Approval {ns}/{name}"))),
        }
        let verb = if reject { "rejected" } else { "approved" };
        println!(
            "{verb} step {step} of workflow {} (run {run}) as {username}: Approval {ns}/{name}",
            workflow.name_any()
        );
        Ok(0)
    })
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

async fn connect(namespace: Option<String>) -> anyhow::Result<(Client, String)> {
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
        .filter(|w| {
            w.owner_references()
                .iter()
                .any(|r| r.controller == Some(true) && r.uid == uid)
        })
        .collect();
    Ok((group, workflows))
}
