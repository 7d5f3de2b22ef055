//! End to end: runs under the user's control. A finished group is re-run by writing a new id
//! (the annotation `kubectl annotate` sets, or `spec.rerun` that `kubectl apply` and GitOps
//! write), once per id, keeping what completed, through an operator kill; a step whose gate
//! asks for approval waits until a user allowed to approve does so with `kubectl workflow
//! approve`, the API server recording who that was.

#[path = "support/operator.rs"]
mod operator;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use operator::*;
use serde_json::{Value, json};
use workflow_e2e::poll_until;
use workflow_operator::api::{LABEL_RUN, LABEL_STEP};

/// Pods of a step fail (the kwok stage `pod-fail-step`) when this label of theirs, which they
/// get from their group through its Workflow, names the step.
const FAIL_STEP: &str = "e2e.workflow.rxg456.cn/fail-step";

/// The step pods of `group` in `ns`: (step, run) -> pod names.
fn step_pods(ns: &str, group: &str) -> BTreeMap<(String, String), Vec<String>> {
    let mut pods: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for pod in list(
        ns,
        "pods",
        Some(&format!("workflow.rxg456.cn/group-name={group}")),
    ) {
        let labels = &pod["metadata"]["labels"];
        let step = labels[LABEL_STEP].as_str().unwrap_or_default().to_string();
        let run = labels[LABEL_RUN].as_str().unwrap_or("1").to_string();
        let name = pod["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        pods.entry((step, run)).or_default().push(name);
    }
    pods
}

/// The Workflow of type `type_` of `group`.
fn workflow_of(ns: &str, group: &str, type_: &str) -> Value {
    let selector =
        format!("workflow.rxg456.cn/group-name={group},workflow.rxg456.cn/workflow-type={type_}");
    list(ns, "workflows", Some(&selector))
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("no {type_} Workflow of {ns}/{group}"))
}

fn runs(ns: &str, group: &str) -> Vec<Value> {
    get(ns, &format!("workflowgroup/{group}"))["status"]["runs"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// A group of the seed's three types whose pre-check fails at `check-network`, run to Failed;
/// then the cause is taken away (the label leaves its pre-check Workflow, so new pods do not
/// carry it). Returns the pre-check Workflow's name.
fn failed_at_check_network(ns: &str, name: &str, labels: &str, operator: &mut Operator) -> String {
    let labels = format!("    {FAIL_STEP}: check-network\n{labels}");
    cluster().apply_yaml_in(ns, &group_yaml(name, &SEED_TYPES, "", &labels));
    wait_group_phase(ns, name, "Failed", operator);
    let pre_check = workflow_of(ns, name, "pre-check");
    let wf = text(&pre_check, "/metadata/name").to_string();
    cluster().kubectl_ok(&["-n", ns, "label", "workflow", &wf, &format!("{FAIL_STEP}-")]);
    wf
}

#[test]
fn a_rerun_after_a_failure_runs_only_what_did_not_complete_once_per_id() {
    let cluster = cluster();
    let ns = cluster.fresh_namespace("e2e-rerun");
    let plugins = plugin_dir(&SEED_TYPES);
    let mut operator = Operator::start(&ns, plugins.path());
    failed_at_check_network(&ns, "again", "", &mut operator);
    let before = step_pods(&ns, "again");
    assert_eq!(
        before.len(),
        2,
        "validate-nodes and check-network ran: {before:?}"
    );

    // `kubectl annotate`: from the failed step.
    cluster.kubectl_ok(&[
        "-n",
        &ns,
        "annotate",
        "wfg",
        "again",
        "workflow.rxg456.cn/rerun=fix-1",
    ]);
    wait_group_phase(&ns, "again", "Completed", &mut operator);
    let runs = runs(&ns, "again");
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert_eq!(
        (runs[0]["run"].as_u64(), text(&runs[0], "/phase")),
        (Some(1), "Failed")
    );
    assert_eq!(
        (
            runs[1]["run"].as_u64(),
            text(&runs[1], "/phase"),
            text(&runs[1], "/id")
        ),
        (Some(2), "Completed", "fix-1")
    );
    let run_id = text(&runs[1], "/runId").to_string();
    assert_eq!(run_id.len(), 36, "a UUID: {run_id}");
    let after = step_pods(&ns, "again");
    let key = |s: &str, r: &str| (s.to_string(), r.to_string());
    // The completed step did not run again; the failed one did, in run 2, under a name of its own.
    assert_eq!(after[&key("validate-nodes", "1")].len(), 1);
    assert!(
        !after.contains_key(&key("validate-nodes", "2")),
        "{after:?}"
    );
    assert_eq!(
        after[&key("check-network", "1")],
        before[&key("check-network", "1")]
    );
    let rerun = &after[&key("check-network", "2")];
    assert_eq!(rerun.len(), 1, "{after:?}");
    assert!(rerun[0].contains("-r2-"), "{rerun:?}");
    // The types after it ran in run 2, for the first time.
    assert!(
        after.contains_key(&key("install-packages", "2")),
        "{after:?}"
    );
    let events = cluster.kubectl_ok(&[
        "-n",
        &ns,
        "get",
        "events.events.k8s.io",
        "--field-selector",
        "reason=Rerunning",
        "-o",
        "custom-columns=NOTE:.note",
    ]);
    assert!(events.contains(&run_id), "{events}");

    // The same id again, by annotation or in the spec: nothing.
    cluster.kubectl_ok(&[
        "-n",
        &ns,
        "annotate",
        "--overwrite",
        "wfg",
        "again",
        "workflow.rxg456.cn/rerun=fix-1",
    ]);
    cluster.kubectl_ok(&[
        "-n",
        &ns,
        "patch",
        "wfg",
        "again",
        "--type=merge",
        "-p",
        r#"{"spec":{"rerun":{"id":"fix-1"}}}"#,
    ]);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(runs_len(&ns, "again"), 2);
    assert_eq!(step_pods(&ns, "again"), after);
    let group = get(&ns, "workflowgroup/again");
    assert_eq!(text(&group, "/status/phase"), "Completed");

    // A new id in the spec, from All: every step runs again, in run 3.
    cluster.kubectl_ok(&[
        "-n",
        &ns,
        "patch",
        "wfg",
        "again",
        "--type=merge",
        "-p",
        r#"{"spec":{"rerun":{"id":"all-1","from":"All"}}}"#,
    ]);
    wait_until_run_completes(&ns, "again", 3, &mut operator);
    let all = step_pods(&ns, "again");
    let third: Vec<&String> = all
        .keys()
        .filter(|(_, r)| r == "3")
        .map(|(s, _)| s)
        .collect();
    assert_eq!(
        third.len(),
        5,
        "every step of the three types ran in run 3: {all:?}"
    );
    operator.assert_running();
}

fn runs_len(ns: &str, group: &str) -> usize {
    runs(ns, group).len()
}

/// Waits until the group's run `run` has completed.
fn wait_until_run_completes(ns: &str, group: &str, run: u64, operator: &mut Operator) {
    let log = operator.log();
    poll_until(
        Duration::from_millis(200),
        TIMEOUT,
        &format!("run {run} of {ns}/{group} to complete"),
        || {
            let runs = runs(ns, group);
            match runs.last() {
                Some(r) if r["run"].as_u64() == Some(run) && r["phase"] == "Completed" => Ok(()),
                _ => {
                    operator.assert_running();
                    Err(runs)
                }
            }
        },
        |runs| {
            format!(
                "runs: {runs:?}\n{}\n{log}",
                cluster().kubectl_ok(&["-n", ns, "get", "wfg,wf,pods", "-o", "wide"])
            )
        },
    );
}

#[test]
fn a_rerun_survives_an_operator_kill_mid_way() {
    let cluster = cluster();
    let ns = cluster.fresh_namespace("e2e-rerun-kill");
    let plugins = plugin_dir(&SEED_TYPES);
    let mut operator = Operator::start(&ns, plugins.path());
    // Slow pods (1.5 s each): the kill lands while run 2 runs.
    failed_at_check_network(
        &ns,
        "kill",
        "    e2e.workflow.rxg456.cn/slow: \"true\"\n",
        &mut operator,
    );
    cluster.kubectl_ok(&[
        "-n",
        &ns,
        "patch",
        "wfg",
        "kill",
        "--type=merge",
        "-p",
        r#"{"spec":{"rerun":{"id":"after-kill"}}}"#,
    ]);
    let (run_id, _) = poll_until(
        Duration::from_millis(50),
        TIMEOUT,
        "run 2 to start its first pod",
        || {
            let runs = runs(&ns, "kill");
            let started = step_pods(&ns, "kill").keys().any(|(_, r)| r == "2");
            match runs.get(1) {
                Some(r) if started => Ok(text(r, "/runId").to_string()),
                _ => Err(runs),
            }
        },
        |runs| format!("{runs:?}"),
    );
    operator.crash();
    let mut operator = Operator::start(&ns, plugins.path());
    wait_group_phase(&ns, "kill", "Completed", &mut operator);
    let runs = runs(&ns, "kill");
    assert_eq!(runs.len(), 2, "one re-run for one id: {runs:?}");
    assert_eq!(text(&runs[1], "/runId"), run_id, "the run kept its id");
    assert_eq!(text(&runs[1], "/phase"), "Completed");
    let pods = step_pods(&ns, "kill");
    for ((step, run), names) in &pods {
        assert_eq!(names.len(), 1, "{step} ran once in run {run}: {pods:?}");
    }
    assert!(
        !pods.contains_key(&("validate-nodes".to_string(), "2".to_string())),
        "{pods:?}"
    );
    let locks = cluster.kubectl_ok(&[
        "-n",
        &ns,
        "get",
        "leases",
        "-l",
        "workflow.rxg456.cn/lock",
        "-o",
        "name",
    ]);
    assert_eq!(locks.trim(), "", "no lock is left");
}

/// A kubeconfig for user `user` in `groups`: the cluster's admin credentials, impersonating.
fn kubeconfig_as(dir: &Path, user: &str, groups: &[&str]) -> std::path::PathBuf {
    let mut config: Value = serde_json::from_str(&cluster().kubectl_ok(&[
        "config",
        "view",
        "--raw",
        "--flatten",
        "-o",
        "json",
    ]))
    .expect("kubeconfig as JSON");
    for u in config["users"].as_array_mut().into_iter().flatten() {
        u["user"]["as"] = json!(user);
        u["user"]["as-groups"] = json!(groups);
    }
    let path = dir.join(format!("kubeconfig-{user}"));
    std::fs::write(&path, config.to_string()).expect("write kubeconfig");
    path
}

/// `workflow-operator <args>` with `kubeconfig`: exit status, stdout and stderr.
fn cli_with(kubeconfig: &Path, args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_workflow-operator"))
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .output()
        .expect("run workflow-operator");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// An `at` group on kwok asking for `approval`.
fn approval_group(name: &str, approval: Value) -> String {
    let params = json!({"at": {"schedule": "2020-01-01T00:00:00Z", "command": "reboot", "approval": approval}});
    group_yaml(name, &["at"], &format!("  params: {params}\n"), "")
}

/// Waits until group `name` says `reason` in its `Succeeded` condition; returns its message.
fn wait_reason(ns: &str, name: &str, reason: &str, operator: &mut Operator) -> String {
    let (message, _) = poll_until(
        Duration::from_millis(100),
        TIMEOUT,
        &format!("{ns}/{name} to say {reason}"),
        || {
            let group = get(ns, &format!("workflowgroup/{name}"));
            let c = succeeded_condition(&group);
            operator.assert_running();
            if c["reason"] == reason {
                Ok(text(&c, "/message").to_string())
            } else {
                Err(c)
            }
        },
        |c| format!("{c}"),
    );
    message
}

#[test]
fn a_step_waits_for_approval_by_an_allowed_user_who_is_recorded_and_a_timeout_does_what_the_gate_said()
 {
    let cluster = cluster();
    let ns = cluster.fresh_namespace("e2e-approval");
    let plugins = plugin_dir(&["at"]);
    let mut operator = Operator::start(&ns, plugins.path());
    // alice and bob may create Approvals here; mallory may not.
    cluster.kubectl_ok(&[
        "-n",
        &ns,
        "create",
        "rolebinding",
        "approvers",
        "--clusterrole=workflow.rxg456.cn:approver",
        "--user=alice",
        "--user=bob",
    ]);
    cluster.apply_yaml_in(
        &ns,
        &approval_group(
            "gated",
            json!({"approvers": ["group:ops"], "reason": "reboots the fleet"}),
        ),
    );
    cluster.apply_yaml_in(
        &ns,
        &approval_group("vetoed", json!({"approvers": ["alice"]})),
    );
    cluster.apply_yaml_in(
        &ns,
        &approval_group(
            "late",
            json!({"approvers": ["alice"], "timeoutSeconds": 2, "onTimeout": "Fail"}),
        ),
    );
    cluster.apply_yaml_in(
        &ns,
        &approval_group(
            "late-ok",
            json!({"approvers": ["alice"], "timeoutSeconds": 2, "onTimeout": "Start"}),
        ),
    );

    let message = wait_reason(&ns, "gated", "WaitingForApproval", &mut operator);
    assert!(
        message.contains("step run waits for approval (0 of 1, by group:ops): reboots the fleet"),
        "{message}"
    );
    let reason_column = cluster.kubectl_ok(&["-n", &ns, "get", "wfg", "gated", "--no-headers"]);
    assert!(
        reason_column.contains("WaitingForApproval"),
        "{reason_column}"
    );
    let gated = workflow_of(&ns, "gated", "at");
    let wf = text(&gated, "/metadata/name").to_string();
    let wf_uid = text(&gated, "/metadata/uid").to_string();
    // What the step asks to be approved: its content's digest, in its status and the message.
    let digest = text(&gated, "/status/stepDetails/run/approval/digest").to_string();
    assert!(
        digest.starts_with("sha256:") && digest.len() == 71,
        "{digest}"
    );
    assert!(
        message.contains("; runs `reboot` in "),
        "the wait says what it runs: {message}"
    );
    assert!(message.contains(&digest[..19]), "{message}");
    let approval_of = |user: &str, approver: &str, digest: &str| {
        format!(
            "apiVersion: workflow.rxg456.cn/v1alpha1\nkind: Approval\nmetadata:\n  name: by-{user}\n  namespace: {ns}\nspec:\n  workflow: {wf}\n  workflowUID: {wf_uid}\n  digest: \"{digest}\"\n  step: run\n  approver: {approver}\n"
        )
    };
    let approval = |user: &str, approver: &str| approval_of(user, approver, &digest);
    let create_as = |user: &str, yaml: String| {
        let out = cluster.kubectl_with_stdin(&["--as", user, "create", "-f", "-"], yaml.as_bytes());
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // Without the right: refused by RBAC.
    let (ok, err) = create_as("mallory", approval("mallory", "mallory"));
    assert!(!ok && err.contains("forbidden"), "{err}");
    // With it, in someone else's name: refused by the admission policy.
    let (ok, err) = create_as("bob", approval("bob", "alice"));
    assert!(
        !ok && err
            .contains("spec.approver must be the user who creates the Approval, bob, not alice"),
        "{err}"
    );
    // In bob's own name: accepted, and ignored, since the gate wants group ops.
    let (ok, err) = create_as("bob", approval("bob", "bob"));
    assert!(ok, "{err}");
    poll_until(
        Duration::from_millis(100),
        TIMEOUT,
        "bob's approval to be ignored, saying so",
        || {
            let m = condition_message(&get(&ns, "workflowgroup/gated"));
            if m.contains("not an approver, ignored: bob (by-bob)") {
                Ok(())
            } else {
                Err(m)
            }
        },
        |m| m.clone(),
    );
    assert_eq!(
        text(&get(&ns, "workflowgroup/gated"), "/status/phase"),
        "Running"
    );
    // alice of group ops approves other content than what waits (as for a Workflow of this
    // name whose command was different): it does not count, and the wait says so.
    let alice_as = [
        "--as",
        "alice",
        "--as-group",
        "ops",
        "--as-group",
        "system:authenticated",
    ];
    let other = approval_of(
        "alice-other",
        "alice",
        &format!("sha256:{}", "0".repeat(64)),
    )
    .replace("approver: alice\n", "approver: alice\n  groups: [ops]\n");
    let out = cluster.kubectl_with_stdin(
        &[&alice_as[..], &["create", "-f", "-"]].concat(),
        other.as_bytes(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    poll_until(
        Duration::from_millis(100),
        TIMEOUT,
        "alice's approval of other content not to count, saying so",
        || {
            let m = condition_message(&get(&ns, "workflowgroup/gated"));
            if m.contains("not counted, given for other content, another Workflow of this name or before the step asked: alice (by-alice-other)") {
                Ok(())
            } else {
                Err(m)
            }
        },
        |m| m.clone(),
    );
    assert_eq!(
        text(&get(&ns, "workflowgroup/gated"), "/status/phase"),
        "Running"
    );
    // Her name taken beforehand by someone else does not block `approve`: its names are
    // generated.
    let squatter = approval_of("squat", "bob", &digest).replace(
        "name: by-squat",
        &format!(
            "name: {}",
            workflow_operator::names::approval_name(&wf, "run", 1, "alice")
        ),
    );
    let out =
        cluster.kubectl_with_stdin(&["--as", "bob", "create", "-f", "-"], squatter.as_bytes());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // alice of group ops approves in one line.
    let dir = tempfile::tempdir().expect("temporary directory");
    let alice = kubeconfig_as(dir.path(), "alice", &["ops", "system:authenticated"]);
    let (ok, out, err) = cli_with(
        &alice,
        &[
            "approve",
            "gated",
            "run",
            "-n",
            &ns,
            "--comment",
            "window open",
        ],
    );
    assert!(ok, "{err}");
    assert!(
        out.starts_with(&format!(
            "approved step run of workflow {wf} (run 1) as alice"
        )),
        "{out}"
    );
    let (ok, _, err) = cli_with(&alice, &["approve", "gated", "run", "-n", &ns]);
    assert!(!ok && err.contains("have already decided"), "{err}");
    wait_group_phase(&ns, "gated", "Completed", &mut operator);
    let record = &get(&ns, &format!("workflow/{wf}"))["status"]["stepDetails"]["run"]["approval"];
    assert_eq!(record["approvedBy"], json!(["alice"]), "{record}");
    let approvals = list(&ns, "approvals", None);
    let by_alice: Vec<&Value> = approvals
        .iter()
        .filter(|a| a["spec"]["approver"] == "alice" && a["spec"]["digest"] == digest.as_str())
        .collect();
    assert_eq!(by_alice.len(), 1, "{approvals:?}");
    assert_eq!(by_alice[0]["spec"]["groups"], json!(["ops"]));
    assert_eq!(by_alice[0]["spec"]["comment"], "window open");
    // An Approval cannot be changed afterwards.
    let name = text(by_alice[0], "/metadata/name").to_string();
    let out = cluster.kubectl(&[
        "-n",
        &ns,
        "patch",
        "approval",
        &name,
        "--type=merge",
        "-p",
        r#"{"spec":{"approver":"bob"}}"#,
    ]);
    assert!(!out.status.success(), "an Approval was changed");

    // alice rejects another group's step: it fails, naming her and why.
    let vetoed = text(&workflow_of(&ns, "vetoed", "at"), "/metadata/name").to_string();
    let (ok, out, err) = cli_with(
        &alice,
        &[
            "approve",
            "vetoed",
            "run",
            "-n",
            &ns,
            "--reject",
            "--comment",
            "not today",
        ],
    );
    assert!(ok, "{err}");
    assert!(
        out.starts_with(&format!(
            "rejected step run of workflow {vetoed} (run 1) as alice"
        )),
        "{out}"
    );
    wait_group_phase(&ns, "vetoed", "Failed", &mut operator);
    let message = condition_message(&get(&ns, "workflowgroup/vetoed"));
    assert!(
        message.contains("step run was rejected by alice") && message.contains("not today"),
        "{message}"
    );

    // No approval within 2 s: one fails, the other starts, as their gates said.
    wait_group_phase(&ns, "late", "Failed", &mut operator);
    let message = condition_message(&get(&ns, "workflowgroup/late"));
    assert!(
        message.contains("step run was not approved within 2s"),
        "{message}"
    );
    wait_group_phase(&ns, "late-ok", "Completed", &mut operator);
}

/// A namespace user who may create pods, ConfigMaps and Workflows (and read groups) forges what
/// the operator would make, with ownerReferences to its objects: a Workflow under a group's
/// name, a targets ConfigMap naming other machines and a step pod that succeeds at once,
/// before the step's approval. None is adopted: the Workflow runs nothing and its group does
/// not count it, the step neither passes its gate nor starts until the pod is deleted, and its
/// own pod carries the group's targets (a short list travels in the pod, so the ConfigMap is
/// never read).
#[test]
fn objects_a_namespace_user_made_under_our_names_are_not_adopted() {
    let cluster = cluster();
    let ns = cluster.fresh_namespace("e2e-forged");
    let plugins = plugin_dir(&["at"]);
    let mut operator = Operator::start(&ns, plugins.path());
    cluster.kubectl_ok(&[
        "-n",
        &ns,
        "create",
        "role",
        "forger",
        "--verb=get,list,create,delete",
        "--resource=pods,configmaps,workflows.workflow.rxg456.cn,workflowgroups.workflow.rxg456.cn",
    ]);
    cluster.kubectl_ok(&[
        "-n",
        &ns,
        "create",
        "rolebinding",
        "forger",
        "--role=forger",
        "--user=mallory",
    ]);
    cluster.kubectl_ok(&[
        "-n",
        &ns,
        "create",
        "rolebinding",
        "approvers",
        "--clusterrole=workflow.rxg456.cn:approver",
        "--user=alice",
    ]);
    let as_mallory = |yaml: String| {
        let out =
            cluster.kubectl_with_stdin(&["--as", "mallory", "create", "-f", "-"], yaml.as_bytes());
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let owner = |kind: &str, obj: &Value| {
        format!(
            "  ownerReferences:\n  - {{apiVersion: workflow.rxg456.cn/v1alpha1, kind: {kind}, name: {}, uid: {}, controller: true}}\n",
            text(obj, "/metadata/name"),
            text(obj, "/metadata/uid")
        )
    };

    // 1. A Workflow under a paused group's name, claiming the group, whose step succeeds.
    let paused = approval_group("claimed", json!({"approvers": ["alice"]}))
        .replace("spec:\n", "spec:\n  paused: true\n");
    cluster.apply_yaml_in(&ns, &paused);
    let group = get(&ns, "workflowgroup/claimed");
    let group_obj: workflow_operator::api::WorkflowGroup =
        serde_json::from_value(group.clone()).expect("a WorkflowGroup");
    let name = workflow_operator::names::workflow_name(&group_obj, "at");
    as_mallory(format!(
        "apiVersion: workflow.rxg456.cn/v1alpha1\nkind: Workflow\nmetadata:\n  name: {name}\n  namespace: {ns}\n  labels: {{workflow.rxg456.cn/group-name: claimed, workflow.rxg456.cn/workflow-type: at}}\n{}spec:\n  type: at\n  clusterName: test-cluster\n  targets: [{{name: node-1, ip: 10.9.9.9, role: Master}}]\n  params: {{schedule: '2020-01-01T00:00:00Z', command: 'true'}}\n  steps: [{{name: run, command: 'true'}}]\n",
        owner("WorkflowGroup", &group)
    ));
    cluster.kubectl_ok(&[
        "-n",
        &ns,
        "patch",
        "workflowgroup",
        "claimed",
        "--type=merge",
        "-p",
        r#"{"spec":{"paused":false}}"#,
    ]);
    let message = wait_reason(&ns, "claimed", "TemplateFailed", &mut operator);
    assert!(
        message.contains(&format!(
            "a Workflow named {name} already exists and does not belong to this group"
        )),
        "{message}"
    );
    poll_until(
        Duration::from_millis(100),
        TIMEOUT,
        "the forged Workflow to fail without running",
        || {
            let c = succeeded_condition(&get(&ns, &format!("workflow/{name}")));
            (c["reason"] == "NotMadeByItsGroup").then_some(()).ok_or(c)
        },
        |c| format!("{c}"),
    );
    assert!(
        list(
            &ns,
            "pods",
            Some(&format!("workflow.rxg456.cn/workflow-name={name}"))
        )
        .is_empty(),
        "a step of the forged Workflow ran"
    );

    // 2. A step that waits for approval: its pod and targets ConfigMap made beforehand.
    cluster.apply_yaml_in(
        &ns,
        &approval_group("gate", json!({"approvers": ["alice"]})),
    );
    wait_reason(&ns, "gate", "WaitingForApproval", &mut operator);
    let wf = workflow_of(&ns, "gate", "at");
    let wf_obj: workflow_operator::api::Workflow =
        serde_json::from_value(wf.clone()).expect("a Workflow");
    let wf_name = text(&wf, "/metadata/name").to_string();
    let pod = workflow_operator::names::pod_name(&wf_obj, "run", 1);
    let map = workflow_operator::names::targets_config_map_name(&wf_obj);
    as_mallory(format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {map}\n  namespace: {ns}\n{}immutable: true\ndata:\n  targets.json: '[{{\"name\":\"node-1\",\"ip\":\"10.9.9.9\",\"role\":\"Master\"}}]'\n",
        owner("Workflow", &wf)
    ));
    as_mallory(format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {pod}\n  namespace: {ns}\n  labels: {{workflow.rxg456.cn/workflow-uid: {uid}, workflow.rxg456.cn/step: run, workflow.rxg456.cn/attempt: '1'}}\n{}spec:\n  restartPolicy: Never\n  containers: [{{name: step, image: busybox, command: ['/bin/sh', '-c', 'true']}}]\n",
        owner("Workflow", &wf),
        uid = text(&wf, "/metadata/uid")
    ));
    // Whatever the forged pod does, the step still waits for its approval.
    std::thread::sleep(Duration::from_secs(3));
    let status = &get(&ns, &format!("workflow/{wf_name}"))["status"];
    assert_eq!(status["stepStatus"]["run"], "Pending", "{status}");
    assert_eq!(
        succeeded_condition(&get(&ns, "workflowgroup/gate"))["reason"],
        "WaitingForApproval"
    );
    // Approved: the names are taken by objects the operator did not make, and it says so.
    let dir = tempfile::tempdir().expect("temporary directory");
    let alice = kubeconfig_as(dir.path(), "alice", &["system:authenticated"]);
    let (ok, _, err) = cli_with(&alice, &["approve", "gate", "run", "-n", &ns]);
    assert!(ok, "{err}");
    poll_until(
        Duration::from_millis(100),
        TIMEOUT,
        "the step to refuse the forged Pod",
        || {
            let m = condition_message(&get(&ns, &format!("workflow/{wf_name}")));
            m.contains(&format!(
                "Pod {pod} exists and was not made by the operator for this step"
            ))
            .then_some(())
            .ok_or(m)
        },
        |m| m.clone(),
    );
    assert_eq!(
        get(&ns, &format!("workflow/{wf_name}"))["status"]["stepStatus"]["run"],
        "Pending"
    );
    cluster.kubectl_ok(&["-n", &ns, "delete", "pod", &pod, "--wait=false"]);
    // Once it is gone, the step runs its own pod, with the group's targets in it; the forged
    // ConfigMap is neither read nor adopted.
    wait_group_phase(&ns, "gate", "Completed", &mut operator);
    let own = get(&ns, &format!("pod/{pod}"));
    assert!(
        own["metadata"]["annotations"]["workflow.rxg456.cn/signature"].is_string(),
        "the step's own pod is signed"
    );
    let carried = text(&own, "/metadata/annotations/workflow.rxg456.cn~1targets");
    assert!(
        carried.contains("node-1") && !carried.contains("10.9.9.9"),
        "{carried}"
    );
    assert!(
        !own["spec"]["volumes"].to_string().contains(&map),
        "the step mounts the forged ConfigMap: {}",
        own["spec"]["volumes"]
    );
    let forged = get(&ns, &format!("configmap/{map}"));
    assert!(
        text(&forged, "/data/targets.json").contains("10.9.9.9"),
        "{forged}"
    );
}
