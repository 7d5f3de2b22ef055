//! `rerun`, `pause` and `resume`: asking a group for a re-run or a pause as you, with your
//! name in the request (`workflow.rxg456.cn/requested-by`, which the admission policy
//! `requests.workflow.rxg456.cn` lets be only the user who makes the request), so that
//! `status.runs` records who asked.

use anyhow::{Context as _, anyhow};
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use super::get::{connect, runtime, who_am_i};
use crate::api::{ANNOTATION_REQUESTED_BY, RerunFrom, RerunTargets, WorkflowGroup};

/// What a re-run asks for (`spec.rerun`).
pub struct Rerun {
    /// Its id; by default one made of the time.
    pub id: Option<String>,
    pub from: RerunFrom,
    pub targets: RerunTargets,
}

/// Asks `group` to run again as `rerun` says, as the current user.
///
/// # Errors
/// No kubeconfig, no such group, or the API server refused the request.
pub fn rerun(group: &str, namespace: Option<String>, rerun: Rerun) -> anyhow::Result<u8> {
    let id = rerun.id.unwrap_or_else(|| {
        format!(
            "rerun-{}",
            k8s_openapi::jiff::Timestamp::now().as_millisecond()
        )
    });
    let spec = json!({"rerun": {
        "id": id,
        "from": rerun.from,
        "targets": rerun.targets,
        "steps": [],
        "types": [],
    }});
    let by = ask(group, namespace, spec)?;
    println!("asked {group} to run again (re-run {id}), as {by}");
    Ok(0)
}

/// Pauses `group` (no new step or Workflow starts), or resumes it, as the current user.
///
/// # Errors
/// No kubeconfig, no such group, or the API server refused the request.
pub fn pause(group: &str, namespace: Option<String>, paused: bool) -> anyhow::Result<u8> {
    let by = ask(group, namespace, json!({"paused": paused}))?;
    let what = if paused { "paused" } else { "resumed" };
    println!("{what} {group}, as {by}");
    Ok(0)
}

/// Patches `spec` into `group` with the current user's name in the request: that name.
fn ask(group: &str, namespace: Option<String>, spec: Value) -> anyhow::Result<String> {
    runtime()?.block_on(async {
        let (client, ns) = connect(namespace).await?;
        let (username, _) = who_am_i(&client).await?;
        let groups: Api<WorkflowGroup> = Api::namespaced(client, &ns);
        let patch = json!({
            "metadata": {"annotations": {ANNOTATION_REQUESTED_BY: username}},
            "spec": spec,
        });
        groups
            .patch(group, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| match e {
                kube::Error::Api(status) if status.code == 404 => {
                    anyhow!("no WorkflowGroup {group} in namespace {ns}")
                }
                e => anyhow::Error::new(e),
            })
            .with_context(|| format!("asking WorkflowGroup {ns}/{group}"))?;
        Ok(username)
    })
}
