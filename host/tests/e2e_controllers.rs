//! End to end: the operator binary against the real local cluster, driven with `kubectl`.
//!
//! Each test runs its own operator process, scoped to its own namespace, with its own plugin
//! directory, so the tests run in parallel without seeing each other.

#[path = "support/operator.rs"]
mod operator;

use std::path::Path;
use std::time::{Duration, Instant};

use operator::*;
use rstest::rstest;
use serde_json::{Value, json};
use workflow_e2e::{FAIL_LABEL, poll_until, repo_root};

#[test]
fn the_seed_sample_group_completes_with_workflows_created_in_order_and_pods_in_dependency_order() {
    let cluster = cluster();
    let ns = "default";
    let name = "workflowgroup-sample";
    cluster.kubectl_ok(&[
        "-n",
        ns,
        "delete",
        "wfg",
        name,
        "--ignore-not-found",
        "--wait=true",
    ]);
    let plugins = plugin_dir(&["pre-check", "setup", "post-check"]);
    let mut operator = Operator::start(ns, plugins.path());

    let sample = repo_root().join("examples/workflowgroup-sample.yaml");
    let applied = Instant::now();
    cluster.kubectl_ok(&["apply", "-f", &sample.to_string_lossy()]);
    wait_group_phase(ns, name, "Completed", &mut operator);
    eprintln!(
        "seed sample group: kubectl apply -> Completed in {:.2}s",
        applied.elapsed().as_secs_f64()
    );

    // The local API server enforces API Priority and Fairness (as every server since 1.29
    // does), which the operator found out by itself: no client-side limit in front of it.
    let log = operator.log_text();
    assert!(
        log.contains("no client-side rate limit of API requests: the API server enforces API Priority and Fairness"),
        "the operator did not find the API server fair:\n{log}"
    );

    let group = get(ns, &format!("wfg/{name}"));
    assert_eq!(group["status"]["progress"], "3/3");
    assert_eq!(succeeded_condition(&group)["status"], "True");
    let refs = group["status"]["workflows"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let types: Vec<&str> = refs.iter().filter_map(|r| r["type"].as_str()).collect();
    assert_eq!(types, ["pre-check", "setup", "post-check"]);
    assert!(refs.iter().all(|r| r["status"] == "Completed"), "{refs:?}");
    // Each finished object says so once, in the Events `kubectl describe` shows.
    let described = cluster.kubectl_ok(&["-n", ns, "describe", "wfg", name]);
    assert!(
        described.contains("GroupCompleted") && described.contains("all 3 workflows completed"),
        "kubectl describe shows no GroupCompleted event:\n{described}"
    );
    // ... and counts it once.
    let (_, metrics) = operator.http_get("/metrics");
    for (kind, count) in [("workflowgroup", 1), ("workflow", 3)] {
        let series = format!(
            "workflow_operator_finished_total{{kind=\"{kind}\",phase=\"Completed\"}} {count}\n"
        );
        assert!(metrics.contains(&series), "no {series:?} in:\n{metrics}");
    }
    for r in &refs {
        let described = cluster.kubectl_ok(&["-n", ns, "describe", "wf", text(r, "/name")]);
        assert_eq!(
            described.matches("WorkflowCompleted").count(),
            1,
            "kubectl describe shows no single WorkflowCompleted event:\n{described}"
        );
    }

    let mut previous_completion: Option<String> = None;
    for r in &refs {
        let wf_name = text(r, "/name");
        let wf_type = text(r, "/type");
        let wf = get(ns, &format!("wf/{wf_name}"));
        assert_eq!(
            step_shapes(&wf["spec"]["steps"]),
            seed_steps(wf_type),
            "steps of {wf_type}"
        );
        for step in wf["spec"]["steps"].as_array().into_iter().flatten() {
            assert_eq!(
                text(step, "/command"),
                "workflow-runner",
                "{wf_type}'s steps act on the targets"
            );
        }
        assert_eq!(
            wf["metadata"]["labels"]["workflow.rxg456.cn/group-name"],
            name
        );
        assert_eq!(
            wf["metadata"]["labels"]["workflow.rxg456.cn/workflow-type"],
            wf_type
        );
        assert_eq!(
            wf["metadata"]["ownerReferences"][0]["kind"],
            "WorkflowGroup"
        );
        assert_eq!(wf["metadata"]["ownerReferences"][0]["controller"], true);
        assert_eq!(wf["spec"]["targets"].as_array().map(Vec::len), Some(3));
        let created = text(&wf, "/metadata/creationTimestamp").to_string();
        if let Some(prev) = &previous_completion {
            assert!(
                created >= *prev,
                "{wf_name} was created at {created}, before the previous workflow completed at {prev}"
            );
        }
        previous_completion = Some(text(&wf, "/status/completionTime").to_string());
        assert_ne!(
            previous_completion.as_deref(),
            Some(""),
            "{wf_name} has no completionTime"
        );

        // Pods ran in dependency order: a dependent's pod was created after its dependency's
        // pod finished.
        let selector = format!(
            "workflow.rxg456.cn/workflow-uid={}",
            text(&wf, "/metadata/uid")
        );
        let pods = list(ns, "pods", Some(&selector));
        let pod_of = |step: &str| {
            pods.iter()
                .find(|p| p["metadata"]["labels"]["workflow.rxg456.cn/step"] == step)
                .cloned()
                .unwrap_or_else(|| panic!("no pod for step {step} of {wf_name}"))
        };
        let steps = wf["spec"]["steps"].as_array().cloned().unwrap_or_default();
        for step in &steps {
            let pod = pod_of(text(step, "/name"));
            assert_eq!(pod["metadata"]["ownerReferences"][0]["name"], wf_name);
            assert_eq!(pod["spec"]["restartPolicy"], "Never");
            for dep in step["dependsOn"].as_array().cloned().unwrap_or_default() {
                let dep_pod = pod_of(dep.as_str().unwrap_or_default());
                let dep_done = text(
                    &dep_pod,
                    "/status/containerStatuses/0/state/terminated/finishedAt",
                );
                assert!(!dep_done.is_empty(), "{dep} has not finished: {dep_pod}");
                let started = text(&pod, "/metadata/creationTimestamp");
                assert!(
                    started >= dep_done,
                    "pod of {} started at {started} before {dep} finished at {dep_done}",
                    step["name"]
                );
            }
        }
        assert_eq!(pods.len(), steps.len(), "one pod per step");
    }
    operator.assert_running();
    cluster.kubectl_ok(&["-n", ns, "delete", "wfg", name, "--wait=true"]);
}

#[test]
fn a_failing_step_fails_its_workflow_and_the_group_and_nothing_after_it_is_created() {
    let cluster = cluster();
    let ns = cluster.fresh_namespace("e2e-fail");
    let plugins = plugin_dir(&["pre-check", "setup"]);
    let mut operator = Operator::start(&ns, plugins.path());
    // The local cluster fails pods carrying the fail label; a group's labels reach its pods.
    let labels = format!("    {FAIL_LABEL}: \"true\"\n");
    cluster.apply_yaml_in(
        &ns,
        &group_yaml("doomed", &["pre-check", "setup"], "", &labels),
    );
    wait_group_phase(&ns, "doomed", "Failed", &mut operator);

    let workflows = list(&ns, "workflows", None);
    assert_eq!(
        workflows.len(),
        1,
        "no workflow after the failed one: {workflows:?}"
    );
    let wf = &workflows[0];
    assert_eq!(wf["spec"]["type"], "pre-check");
    assert_eq!(wf["status"]["phase"], "Failed");
    assert_eq!(wf["status"]["stepStatus"]["validate-nodes"], "Failed");
    assert_eq!(wf["status"]["stepStatus"]["check-network"], "Pending");
    let message = condition_message(wf);
    assert!(
        message.contains("validate-nodes") && message.contains("simulated failure"),
        "{message}"
    );

    let group = get(&ns, "wfg/doomed");
    assert_eq!(succeeded_condition(&group)["status"], "False");
    let group_message = condition_message(&group);
    assert!(group_message.contains("validate-nodes"), "{group_message}");

    let events = cluster.kubectl_ok(&[
        "-n",
        &ns,
        "get",
        "events.events.k8s.io",
        "-o",
        "custom-columns=REASON:.reason,NOTE:.note",
    ]);
    assert!(
        events
            .lines()
            .any(|l| l.starts_with("StepFailed") && l.contains("validate-nodes")),
        "no StepFailed event naming the step:\n{events}"
    );
    let described = cluster.kubectl_ok(&["-n", &ns, "describe", "wf"]);
    assert!(
        described.contains("StepFailed") && described.contains("WorkflowFailed"),
        "kubectl describe shows no StepFailed and WorkflowFailed events:\n{described}"
    );
    let described = cluster.kubectl_ok(&["-n", &ns, "describe", "wfg", "doomed"]);
    assert!(
        described.contains("GroupFailed"),
        "kubectl describe shows no GroupFailed event:\n{described}"
    );
    operator.assert_running();
}

#[test]
fn an_at_group_runs_no_pod_before_its_schedule_and_runs_it_after() {
    let cluster = cluster();
    let ns = cluster.fresh_namespace("e2e-at");
    let plugins = plugin_dir(&["at"]);
    let mut operator = Operator::start(&ns, plugins.path());
    let schedule = jiff::Timestamp::from_second(jiff::Timestamp::now().as_second() + 10)
        .expect("a valid time");
    let schedule_text = schedule.to_string();
    let params =
        format!("  params:\n    at:\n      schedule: \"{schedule_text}\"\n      command: date\n");
    cluster.apply_yaml_in(&ns, &group_yaml("later", &["at"], &params, ""));

    // Until the schedule, the Workflow waits and no Job exists.
    let mut saw_waiting_workflow = false;
    while jiff::Timestamp::now() < schedule - jiff::SignedDuration::from_millis(1500) {
        let pods = list(&ns, "pods", None);
        assert!(
            pods.is_empty(),
            "a pod exists before the schedule {schedule_text}: {pods:?}"
        );
        saw_waiting_workflow |= list(&ns, "workflows", None)
            .iter()
            .any(|w| succeeded_condition(w)["reason"] == "WaitingForSchedule");
        operator.assert_running();
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(
        saw_waiting_workflow,
        "the at workflow never said it waits for its schedule"
    );
    wait_group_phase(&ns, "later", "Completed", &mut operator);
    // Completed, its step no longer says it waits for its schedule (a status written whole).
    let workflow = &list(&ns, "workflows", None)[0];
    let details = &workflow["status"]["stepDetails"];
    assert!(
        !details.to_string().contains("waiting for its schedule"),
        "a completed step keeps a stale message: {details}"
    );
    let pods = list(&ns, "pods", None);
    assert_eq!(pods.len(), 1);
    let created = text(&pods[0], "/metadata/creationTimestamp");
    assert!(
        created >= schedule_text.as_str(),
        "pod created at {created}, before {schedule_text}"
    );
    let command = &pods[0]["spec"]["containers"][0]["command"];
    assert_eq!(command, &json!(["/bin/sh", "-c", "date"]));
}

#[test]
fn a_workflow_deleted_while_it_runs_fails_its_group_naming_the_deletion_and_is_not_made_again() {
    let cluster = cluster();
    let ns = cluster.fresh_namespace("e2e-wf-deleted");
    let plugins = plugin_dir(&["at", "pre-check"]);
    let mut operator = Operator::start(&ns, plugins.path());
    // Its `at` Workflow waits an hour for its schedule, holding its target.
    let schedule = jiff::Timestamp::from_second(jiff::Timestamp::now().as_second() + 3600)
        .expect("a valid time");
    let params =
        format!("  params:\n    at:\n      schedule: \"{schedule}\"\n      command: date\n");
    cluster.apply_yaml_in(
        &ns,
        &group_yaml("loses-one", &["at", "pre-check"], &params, ""),
    );
    let (name, _) = poll_until(
        Duration::from_millis(100),
        TIMEOUT,
        "the at Workflow to wait for its schedule",
        || {
            list(&ns, "workflows", None)
                .iter()
                .find(|w| succeeded_condition(w)["reason"] == "WaitingForSchedule")
                .map(|w| text(w, "/metadata/name").to_string())
                .ok_or(())
        },
        |()| operator.log().to_string(),
    );
    cluster.kubectl_ok(&["-n", &ns, "delete", "workflow", &name, "--wait=true"]);

    wait_group_phase(&ns, "loses-one", "Failed", &mut operator);
    let group = get(&ns, "workflowgroup/loses-one");
    let message = condition_message(&group);
    assert!(
        message.contains(&format!(
            "workflow {name} (at) failed: it was deleted while it ran"
        )),
        "{message}"
    );
    assert_eq!(
        group["status"]["workflows"],
        json!([{"name": name, "type": "at", "status": "Failed"}])
    );
    // Neither made again nor followed by the next type; its target's lock went back.
    assert!(list(&ns, "workflows", None).is_empty());
    wait_no_locks(&ns, Duration::from_secs(10));
}

#[test]
fn a_group_waits_for_a_missing_plugin_and_starts_when_it_is_copied_in() {
    let cluster = cluster();
    let ns = cluster.fresh_namespace("e2e-missing");
    let plugins = plugin_dir(&[]);
    let mut operator = Operator::start(&ns, plugins.path());
    cluster.apply_yaml_in(&ns, &group_yaml("waiting", &["post-check"], "", ""));
    cluster.wait_for("the group to report the missing plugin", TIMEOUT, || {
        succeeded_condition(&get(&ns, "wfg/waiting"))["reason"] == "PluginMissing"
    });
    let group = get(&ns, "wfg/waiting");
    assert_eq!(group["status"]["phase"], "Pending");
    let message = condition_message(&group);
    assert!(message.contains("\"post-check\""), "{message}");
    assert!(list(&ns, "workflows", None).is_empty());

    // Drop the plugin in, as an update of the plugins ConfigMap would: no restart.
    let tmp = plugins.path().join(".post-check.wasm.tmp");
    std::fs::copy(built_plugin("post-check"), &tmp).expect("copy plugin");
    std::fs::rename(&tmp, plugins.path().join("post-check.wasm")).expect("move plugin in");
    wait_group_phase(&ns, "waiting", "Completed", &mut operator);
    operator.assert_running();
}

#[test]
fn invalid_input_gets_a_failed_phase_or_a_pending_condition_naming_the_problem() {
    let cluster = cluster();
    let ns = cluster.fresh_namespace("e2e-invalid");
    let plugins = plugin_dir(&["pre-check", "at"]);
    let mut operator = Operator::start(&ns, plugins.path());

    cluster.apply_yaml_in(
        &ns,
        "apiVersion: workflow.rxg456.cn/v1alpha1
kind: Workflow
metadata:
  name: cyclic
spec:
  type: pre-check
  clusterName: test-cluster
  targets: []
  steps:
  - {name: a, command: 'true', dependsOn: [c]}
  - {name: b, command: 'true', dependsOn: [a]}
  - {name: c, command: 'true', dependsOn: [b]}
",
    );
    let params = "  params:\n    at:\n      schedule: not-a-time\n      command: date\n";
    cluster.apply_yaml_in(&ns, &group_yaml("bad-params", &["at"], params, ""));

    cluster.wait_for("the cyclic workflow to fail", TIMEOUT, || {
        get(&ns, "wf/cyclic")["status"]["phase"] == "Failed"
    });
    let workflow = get(&ns, "wf/cyclic");
    assert_eq!(succeeded_condition(&workflow)["reason"], "InvalidSteps");
    let message = condition_message(&workflow);
    assert!(
        message.contains("cycle") && message.contains("a -> c -> b -> a"),
        "{message}"
    );

    cluster.wait_for("the group with bad params to say why", TIMEOUT, || {
        succeeded_condition(&get(&ns, "wfg/bad-params"))["reason"] == "InvalidParams"
    });
    let group = get(&ns, "wfg/bad-params");
    assert_eq!(group["status"]["phase"], "Pending");
    let message = condition_message(&group);
    assert!(
        message.contains("schedule") && message.contains("not-a-time"),
        "{message}"
    );
    assert!(
        list(&ns, "pods", None).is_empty(),
        "no pod runs for invalid input"
    );
    operator.assert_running();
}

#[test]
fn restarting_the_operator_mid_group_makes_no_duplicates_and_the_group_completes() {
    let cluster = cluster();
    let ns = cluster.fresh_namespace("e2e-restart");
    let plugins = plugin_dir(&["pre-check", "setup", "post-check"]);
    let mut operator = Operator::start(&ns, plugins.path());
    cluster.apply_yaml_in(
        &ns,
        &group_yaml("survivor", &["pre-check", "setup", "post-check"], "", ""),
    );
    cluster.wait_for("the setup workflow to exist", TIMEOUT, || {
        operator.assert_running();
        list(&ns, "workflows", None)
            .iter()
            .any(|w| w["spec"]["type"] == "setup")
    });
    operator.crash();
    let mut operator = Operator::start(&ns, plugins.path());
    wait_group_phase(&ns, "survivor", "Completed", &mut operator);

    let mut types: Vec<String> = list(&ns, "workflows", None)
        .iter()
        .map(|w| text(w, "/spec/type").to_string())
        .collect();
    types.sort();
    assert_eq!(
        types,
        ["post-check", "pre-check", "setup"],
        "exactly one workflow per type"
    );
    let pods: Vec<String> = list(&ns, "pods", None)
        .iter()
        .map(|p| text(p, "/metadata/name").to_string())
        .collect();
    assert_eq!(pods.len(), 5, "exactly one pod per step: {pods:?}");
}

#[test]
fn deleting_a_group_garbage_collects_its_workflows_and_pods() {
    let cluster = cluster();
    let ns = cluster.fresh_namespace("e2e-delete");
    let plugins = plugin_dir(&["post-check"]);
    let mut operator = Operator::start(&ns, plugins.path());
    cluster.apply_yaml_in(&ns, &group_yaml("short-lived", &["post-check"], "", ""));
    wait_group_phase(&ns, "short-lived", "Completed", &mut operator);
    assert_eq!(list(&ns, "workflows", None).len(), 1);
    assert_eq!(list(&ns, "pods", None).len(), 1);

    cluster.kubectl_ok(&["-n", &ns, "delete", "wfg", "short-lived"]);
    cluster.wait_for(
        "workflows and pods to be garbage-collected",
        TIMEOUT,
        || list(&ns, "workflows", None).is_empty() && list(&ns, "pods", None).is_empty(),
    );
    operator.assert_running();
}

#[test]
fn a_plugin_that_times_out_is_asked_again_with_backoff_instead_of_failing_for_good() {
    let cluster = cluster();
    let ns = cluster.fresh_namespace("e2e-transient");
    let plugins = tempfile::tempdir().expect("temporary plugin directory");
    std::fs::copy(
        built("test-plugins", "hostile"),
        plugins.path().join("hostile.wasm"),
    )
    .expect("copy the hostile test plugin");
    let mut operator = Operator::start_with(&ns, plugins.path(), &["--plugin-timeout-ms", "300"]);

    // A Workflow whose step `loop` makes the plugin's `gate` loop until its time limit, and
    // a group whose params make `template` do the same.
    cluster.apply_yaml_in(
        &ns,
        "apiVersion: workflow.rxg456.cn/v1alpha1
kind: Workflow
metadata:
  name: gate-times-out
spec:
  type: hostile
  clusterName: test-cluster
  targets: []
  steps:
  - {name: loop, command: 'true'}
",
    );
    let params = "  params:\n    hostile:\n      mode: loop\n";
    cluster.apply_yaml_in(
        &ns,
        &group_yaml("template-times-out", &["hostile"], params, ""),
    );

    for what in ["wf/gate-times-out", "wfg/template-times-out"] {
        cluster.wait_for(
            &format!("{what} to say its plugin is unavailable"),
            TIMEOUT,
            || succeeded_condition(&get(&ns, what))["reason"] == "PluginUnavailable",
        );
    }
    // Asked again (1 s, then 2 s later) and still neither failed nor given up on.
    std::thread::sleep(Duration::from_secs(4));
    for what in ["wf/gate-times-out", "wfg/template-times-out"] {
        let obj = get(&ns, what);
        assert_eq!(obj["status"]["phase"], "Pending", "{what}: {obj}");
        assert_eq!(succeeded_condition(&obj)["reason"], "PluginUnavailable");
        let message = condition_message(&obj);
        assert!(message.contains("time limit"), "{what}: {message}");
    }
    let retries = operator.log_text().matches("plugin unavailable").count();
    assert!(
        retries >= 4,
        "expected retries in the operator log, saw {retries}"
    );
    let described = cluster.kubectl_ok(&["-n", &ns, "describe", "wf/gate-times-out"]);
    assert!(described.contains("PluginUnavailable"), "{described}");

    // Once the plugin can answer, both carry on to Completed.
    cluster.kubectl_ok(&[
        "-n",
        &ns,
        "patch",
        "wf/gate-times-out",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/steps/0/name","value":"ok"}]"#,
    ]);
    cluster.kubectl_ok(&[
        "-n",
        &ns,
        "patch",
        "wfg/template-times-out",
        "--type=merge",
        "-p",
        r#"{"spec":{"params":{"hostile":{"mode":"ok"}}}}"#,
    ]);
    cluster.wait_for("the workflow to complete", TIMEOUT, || {
        get(&ns, "wf/gate-times-out")["status"]["phase"] == "Completed"
    });
    wait_group_phase(&ns, "template-times-out", "Completed", &mut operator);
    operator.assert_running();
}

#[test]
fn a_plugin_configmap_is_served_at_once_and_a_broken_update_is_reported_while_the_last_good_version_serves()
 {
    let cluster = cluster();
    let ns = cluster.fresh_namespace("e2e-configmaps");
    let no_dir = tempfile::tempdir().expect("temporary plugin directory");
    let mut operator = Operator::start(&ns, no_dir.path());
    assert_eq!(
        served_digest(&served_plugins(&mut operator), "post-check"),
        None
    );

    // The path a plugin author follows: create the ConfigMap from the file, then label it.
    let wasm = built_plugin("post-check");
    let from_file = format!("--from-file=post-check.wasm={}", wasm.display());
    cluster.kubectl_ok(&["-n", &ns, "create", "configmap", "post-check", &from_file]);
    let labelled = Instant::now();
    cluster.kubectl_ok(&[
        "-n",
        &ns,
        "label",
        "configmap",
        "post-check",
        "workflow.rxg456.cn/plugin=true",
    ]);
    let log = operator.log();
    let (good, _) = poll_until(
        Duration::from_millis(10),
        Duration::from_secs(10),
        "the labelled ConfigMap to be served",
        || served_digest(&served_plugins(&mut operator), "post-check").ok_or(()),
        |()| log.to_string(),
    );
    let live = labelled.elapsed();
    eprintln!(
        "plugin ConfigMap served {} ms after `kubectl label` started",
        live.as_millis()
    );
    // A mounted volume would take the kubelet's sync period (60-90 s).
    assert!(live < Duration::from_secs(10), "served after {live:?}");
    cluster.apply_yaml_in(&ns, &group_yaml("from-configmap", &["post-check"], "", ""));
    wait_group_phase(&ns, "from-configmap", "Completed", &mut operator);

    // A broken version: reported on /plugins and as a Warning Event on the ConfigMap, while
    // the last good version keeps serving.
    let garbage =
        serde_json::to_string(&json!({"binaryData": {"post-check.wasm": "bm90IHdhc20="}}))
            .expect("patch");
    cluster.kubectl_ok(&[
        "-n",
        &ns,
        "patch",
        "configmap",
        "post-check",
        "--type=merge",
        "-p",
        &garbage,
    ]);
    cluster.wait_for("a Warning Event on the broken ConfigMap", TIMEOUT, || {
        !list(&ns, "events", None)
            .iter()
            .filter(|e| e["involvedObject"]["kind"] == "ConfigMap")
            .filter(|e| e["involvedObject"]["name"] == "post-check")
            .filter(|e| e["type"] == "Warning" && e["reason"] == "PluginInvalid")
            .collect::<Vec<_>>()
            .is_empty()
    });
    let plugins = served_plugins(&mut operator);
    assert_eq!(
        served_digest(&plugins, "post-check"),
        Some(good.clone()),
        "{plugins}"
    );
    let problems = plugins["problems"].to_string();
    assert!(
        problems.contains(&format!("configmap/{ns}/post-check/post-check.wasm"))
            && problems.contains("still serving the last good version of post-check"),
        "{problems}"
    );
    cluster.apply_yaml_in(&ns, &group_yaml("on-last-good", &["post-check"], "", ""));
    wait_group_phase(&ns, "on-last-good", "Completed", &mut operator);

    // Over the API server's limit: its own refusal, and nothing changes here.
    let big = tempfile::NamedTempFile::new().expect("temporary file");
    std::fs::write(big.path(), vec![0u8; 1_100_000]).expect("write");
    let too_big = cluster.kubectl(&[
        "-n",
        &ns,
        "create",
        "configmap",
        "too-big",
        &format!("--from-file=too-big.wasm={}", big.path().display()),
    ]);
    let stderr = String::from_utf8_lossy(&too_big.stderr);
    assert!(
        !too_big.status.success() && stderr.contains("1048576"),
        "{stderr}"
    );

    // Deleting the ConfigMap removes the type.
    cluster.kubectl_ok(&["-n", &ns, "delete", "configmap", "post-check"]);
    cluster.wait_for("post-check to be removed", TIMEOUT, || {
        served_digest(&served_plugins(&mut operator), "post-check").is_none()
    });
    operator.assert_running();
}

#[test]
fn the_operators_service_account_is_refused_what_it_does_not_need() {
    let cluster = cluster();
    let ns = cluster.fresh_namespace("e2e-rbac");
    let outside = cluster.fresh_namespace("e2e-rbac-outside");
    grant_own_namespace(&ns);
    let can_i = |args: &[&str]| -> String {
        let out = kubectl_as_operator(&[&["auth", "can-i"], args].concat());
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    // What it needs (the identity works) ...
    assert_eq!(can_i(&["create", "pods", "-n", &ns]), "yes");
    assert_eq!(can_i(&["watch", "configmaps", "-n", &ns]), "yes");
    assert_eq!(can_i(&["create", "configmaps", "-n", &outside]), "yes");
    assert_eq!(
        can_i(&["patch", "leases.coordination.k8s.io", "-n", &ns]),
        "yes"
    );
    // The one pull Secret of plugins from private registries, by name.
    assert_eq!(
        can_i(&["get", "secrets/workflow-operator-plugin-pull", "-n", &ns]),
        "yes"
    );
    assert_eq!(can_i(&["get", "secrets/other", "-n", &ns]), "no");
    // ... and not what it does not.
    for (verb, resource, namespace) in [
        ("get", "secrets", ns.as_str()),
        ("list", "configmaps", outside.as_str()),
        ("create", "leases.coordination.k8s.io", outside.as_str()),
        ("delete", "workflows.workflow.rxg456.cn", ns.as_str()),
        ("update", "workflowgroups.workflow.rxg456.cn", ns.as_str()),
        ("update", "pods", ns.as_str()),
        ("create", "deployments.apps", ns.as_str()),
    ] {
        assert_eq!(
            can_i(&[verb, resource, "-n", namespace]),
            "no",
            "the operator may {verb} {resource} in {namespace}"
        );
    }
    let secrets = kubectl_as_operator(&["-n", &ns, "get", "secrets"]);
    let stderr = String::from_utf8_lossy(&secrets.stderr);
    assert!(
        !secrets.status.success() && stderr.contains("forbidden"),
        "reading Secrets was not refused: {stderr}"
    );
    let configmaps = kubectl_as_operator(&["-n", &outside, "get", "configmaps"]);
    assert!(
        !configmaps.status.success(),
        "ConfigMaps outside its namespace were readable"
    );
}

#[test]
fn a_standby_takes_over_when_the_leader_is_killed_mid_group_and_nothing_runs_twice() {
    let cluster = cluster();
    let ns = cluster.fresh_namespace("e2e-leader");
    let plugins = plugin_dir(&["pre-check", "setup", "post-check"]);
    let mut leader = Operator::spawn(&ns, plugins.path(), &["--leader-elect"]);
    leader.wait_for_log("controllers started");
    let mut standby = Operator::spawn(&ns, plugins.path(), &["--leader-elect"]);
    standby.wait_for_log("waiting for the leader lease");
    cluster.wait_for("the leader to be ready", TIMEOUT, || {
        leader.http_get("/readyz").0 == 200
    });
    // The standby is alive, not ready, and runs no controllers.
    assert_eq!(standby.http_get("/healthz").0, 200);
    let (status, body) = standby.http_get("/readyz");
    assert_eq!(status, 503, "{body}");
    assert!(!standby.log_text().contains("controllers started"));

    cluster.apply_yaml_in(
        &ns,
        &group_yaml("handed-over", &["pre-check", "setup", "post-check"], "", ""),
    );
    cluster.wait_for("the setup workflow to exist", TIMEOUT, || {
        leader.assert_running();
        list(&ns, "workflows", None)
            .iter()
            .any(|w| w["spec"]["type"] == "setup")
    });
    leader.crash();
    let killed = Instant::now();
    standby.wait_for_log("became the leader");
    let takeover = killed.elapsed();
    eprintln!(
        "the standby took over {} ms after the leader was killed",
        takeover.as_millis()
    );
    wait_group_phase(&ns, "handed-over", "Completed", &mut standby);
    assert!(
        takeover <= Duration::from_secs(20),
        "takeover took {takeover:?}, more than the lease duration allows"
    );

    let mut types: Vec<String> = list(&ns, "workflows", None)
        .iter()
        .map(|w| text(w, "/spec/type").to_string())
        .collect();
    types.sort();
    assert_eq!(
        types,
        ["post-check", "pre-check", "setup"],
        "exactly one workflow per type"
    );
    assert_eq!(list(&ns, "pods", None).len(), 5, "exactly one pod per step");
    cluster.wait_for("the new leader to be ready", TIMEOUT, || {
        standby.http_get("/readyz").0 == 200
    });

    // A leader that finds the lease taken stops at once, with an error saying why.
    let taken = serde_json::to_string(&json!({"spec": {
        "holderIdentity": "another-replica",
        "renewTime": jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string(),
        "leaseDurationSeconds": 3600,
    }}))
    .expect("patch");
    cluster.kubectl_ok(&[
        "-n",
        &ns,
        "patch",
        "lease",
        "workflow-operator",
        "--type=merge",
        "-p",
        &taken,
    ]);
    let patched = Instant::now();
    cluster.wait_for("the leader to stop", TIMEOUT, || standby.exited());
    eprintln!(
        "the leader stopped {} ms after its lease was taken",
        patched.elapsed().as_millis()
    );
    assert!(
        standby.log_text().contains("lost the leader lease"),
        "{}",
        standby.log_text()
    );
}

/// `kubectl apply`s `yaml` in `ns`, expecting the API server to refuse it; returns the
/// refusal (stderr), after checking nothing of that kind was stored.
fn apply_refused(ns: &str, yaml: &str, kind: &str) -> String {
    let out = cluster().kubectl_with_stdin(&["-n", ns, "apply", "-f", "-"], yaml.as_bytes());
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !out.status.success(),
        "the API server accepted it: {}{stderr}\n{yaml}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(list(ns, kind, None).is_empty(), "a {kind} was stored");
    stderr
}

/// A group of `types` with `targets` (YAML list items) and `extra_spec`.
fn group_with(name: &str, types: &str, targets: &str, extra_spec: &str) -> String {
    format!(
        "apiVersion: workflow.rxg456.cn/v1alpha1
kind: WorkflowGroup
metadata:
  name: {name}
spec:
  type: cluster-expansion
  clusterName: test-cluster
  workflowSteps: {types}
  targets:
{targets}{extra_spec}"
    )
}

const ONE_TARGET: &str = "  - {name: node-1, ip: 192.168.1.101, role: Master}\n";

/// A Workflow applied by hand, of `type_name`, with `targets` (a YAML flow list).
fn workflow_with(name: &str, type_name: &str, targets: &str) -> String {
    format!(
        "apiVersion: workflow.rxg456.cn/v1alpha1
kind: Workflow
metadata:
  name: {name}
spec:
  type: {type_name}
  clusterName: test-cluster
  targets: {targets}
  steps:
  - {{name: a, command: 'true'}}
"
    )
}

/// What the API server checks at `kubectl apply` (the CRDs' bounds and CEL rules): each case is
/// an object it must refuse, the kind that must stay empty, and what the refusal must say.
#[rstest]
#[case::a_group_without_workflow_types(
    group_with("empty", "[]", ONE_TARGET, ""),
    "workflowgroups",
    &["spec.workflowSteps", "at least 1 items"],
)]
#[case::a_group_listing_a_workflow_type_twice(
    group_with("twice", "[pre-check, setup, pre-check]", ONE_TARGET, ""),
    "workflowgroups",
    &["spec.workflowSteps", "workflow type \"pre-check\" is listed more than once"],
)]
#[case::a_group_with_a_workflow_type_in_capitals_and_underscores(
    group_with("bad-type", "[pre-check, \"Pre_Check\"]", ONE_TARGET, ""),
    "workflowgroups",
    &["spec.workflowSteps", "workflow type \"Pre_Check\" is not a valid name: a DNS label"],
)]
#[case::a_group_with_a_workflow_type_starting_with_a_dash(
    group_with("bad-type", "[pre-check, \"-setup\"]", ONE_TARGET, ""),
    "workflowgroups",
    &["spec.workflowSteps", "workflow type \"-setup\" is not a valid name: a DNS label"],
)]
#[case::a_group_with_a_workflow_type_longer_than_a_dns_label(
    group_with("bad-type", &format!("[pre-check, \"{}\"]", "x".repeat(64)), ONE_TARGET, ""),
    "workflowgroups",
    &["spec.workflowSteps", "spec.workflowSteps[1]: Too long: may not be more than 63"],
)]
#[case::a_group_with_params_for_a_type_it_does_not_list(
    group_with(
        "stray",
        "[pre-check]",
        ONE_TARGET,
        "  params:\n    pre-check: {}\n    at: {schedule: \"2026-01-01T00:00:00Z\", command: date}\n",
    ),
    "workflowgroups",
    &[
        "spec.params",
        "params are given for workflow type \"at\", which spec.workflowSteps does not list",
    ],
)]
#[case::a_group_target_whose_ip_is_not_an_ip_address(
    group_with(
        "bad-ip",
        "[pre-check]",
        "  - {name: node-1, ip: 192.168.1.101}\n  - {name: node-2, ip: 192.168.1.300}\n",
        "",
    ),
    "workflowgroups",
    &["spec.targets[1].ip", "\"192.168.1.300\" is not an IPv4 or IPv6 address"],
)]
#[case::a_group_name_too_long_for_a_label_value(
    group_yaml(&format!("g{}", "x".repeat(76)), &["pre-check"], "", ""),
    "workflowgroups",
    &["metadata.name must be at most 63 characters"],
)]
#[case::a_workflow_target_whose_ip_is_not_an_ip_address(
    workflow_with("bad-ip", "pre-check", "[{name: node-1, ip: node-1.example.com}]"),
    "workflows",
    &["spec.targets[0].ip", "\"node-1.example.com\" is not an IPv4 or IPv6 address"],
)]
#[case::a_workflow_whose_type_is_not_a_dns_label(
    workflow_with("bad-type", "Pre_Check", "[]"),
    "workflows",
    &["spec.type", "workflow type \"Pre_Check\" is not a valid name"],
)]
fn refused_at_apply_with_the_reason(
    #[case] yaml: String,
    #[case] kind: &str,
    #[case] reason: &[&str],
) {
    let ns = cluster().fresh_namespace("e2e-refused");
    let refusal = apply_refused(&ns, &yaml, kind);
    let unsaid: Vec<&str> = reason
        .iter()
        .copied()
        .filter(|text| !refusal.contains(text))
        .collect();
    assert!(
        unsaid.is_empty(),
        "the refusal does not say {unsaid:?}:\n{refusal}"
    );
}

#[test]
fn a_target_whose_ip_is_an_ipv6_address_is_accepted() {
    let ns = cluster().fresh_namespace("e2e-ipv6");
    let targets = "  - {name: node-1, ip: \"fd00::1\"}\n";
    cluster().apply_yaml_in(&ns, &group_with("ipv6", "[pre-check]", targets, ""));
}

#[test]
fn a_workflow_applied_by_hand_with_params_its_plugin_refuses_fails_naming_them() {
    let cluster = cluster();
    let ns = cluster.fresh_namespace("e2e-wf-params");
    let plugins = plugin_dir(&["at"]);
    let mut operator = Operator::start(&ns, plugins.path());
    // An `at` workflow without params: no schedule to wait for. It must not wait for ever.
    cluster.apply_yaml_in(
        &ns,
        "apiVersion: workflow.rxg456.cn/v1alpha1
kind: Workflow
metadata:
  name: no-schedule
spec:
  type: at
  clusterName: test-cluster
  targets: []
  steps:
  - {name: run, command: date}
",
    );
    cluster.wait_for("the workflow without params to fail", TIMEOUT, || {
        operator.assert_running();
        get(&ns, "wf/no-schedule")["status"]["phase"] == "Failed"
    });
    let workflow = get(&ns, "wf/no-schedule");
    let condition = succeeded_condition(&workflow);
    assert_eq!(condition["status"], "False");
    assert_eq!(condition["reason"], "InvalidParams");
    let message = condition_message(&workflow);
    assert!(
        message.starts_with("spec.params: ") && message.contains("schedule"),
        "{message}"
    );
    assert!(!message.contains("after the epoch"), "{message}");

    // Params that pass the schema and fail `validate` are refused the same way.
    cluster.apply_yaml_in(
        &ns,
        "apiVersion: workflow.rxg456.cn/v1alpha1
kind: Workflow
metadata:
  name: bad-schedule
spec:
  type: at
  clusterName: test-cluster
  targets: []
  params: {schedule: tomorrow, command: date}
  steps:
  - {name: run, command: date}
",
    );
    cluster.wait_for("the workflow with a bad schedule to fail", TIMEOUT, || {
        get(&ns, "wf/bad-schedule")["status"]["phase"] == "Failed"
    });
    let workflow = get(&ns, "wf/bad-schedule");
    assert_eq!(succeeded_condition(&workflow)["reason"], "InvalidParams");
    let message = condition_message(&workflow);
    assert!(
        message.contains("`schedule`") && message.contains("\"tomorrow\""),
        "{message}"
    );
    assert!(list(&ns, "pods", None).is_empty(), "no step ran");
    let events = cluster.kubectl_ok(&[
        "-n",
        &ns,
        "get",
        "events.events.k8s.io",
        "-o",
        "custom-columns=REASON:.reason,NOTE:.note",
    ]);
    assert!(
        events.lines().any(|l| l.starts_with("InvalidParams")),
        "no InvalidParams event:\n{events}"
    );
    operator.assert_running();
}

/// The objects of the kustomize base `deploy/` as `kubectl apply -k` would send them, with the
/// built-in plugins where `make deploy-plugins` puts them (in a copy of the base and of the
/// `crds/` it takes, side by side as in the repository).
fn rendered_install() -> (Vec<Value>, Vec<u8>) {
    let copy = tempfile::tempdir().expect("temporary directory");
    let copy_files = |dir: &str, files: &[&str]| {
        std::fs::create_dir_all(copy.path().join(dir)).expect("create a directory");
        for file in files {
            let path = Path::new(dir).join(file);
            std::fs::copy(repo_root().join(&path), copy.path().join(&path))
                .unwrap_or_else(|e| panic!("copy {}: {e}", path.display()));
        }
    };
    copy_files(
        "deploy",
        &[
            "kustomization.yaml",
            "namespace.yaml",
            "rbac.yaml",
            "operator.yaml",
            "webhook.yaml",
            "network-policy.yaml",
        ],
    );
    copy_files(
        "crds",
        &[
            "kustomization.yaml",
            "workflow.rxg456.cn.yaml",
            "approval-policy.yaml",
            "request-policy.yaml",
        ],
    );
    let base = copy.path().join("deploy");
    std::fs::create_dir_all(base.join("plugins")).expect("plugins directory");
    for t in BUILTIN_TYPES {
        std::fs::copy(
            built_plugin(t),
            base.join("plugins").join(format!("{t}.wasm")),
        )
        .expect("copy a plugin");
    }
    let yaml = cluster().kubectl_ok(&["kustomize", &base.to_string_lossy()]);
    let out = cluster().kubectl_with_stdin(
        &["create", "--dry-run=client", "-o", "json", "-f", "-"],
        yaml.as_bytes(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // One JSON document per object.
    let items: Vec<Value> = serde_json::Deserializer::from_slice(&out.stdout)
        .into_iter::<Value>()
        .collect::<Result<_, _>>()
        .expect("kubectl printed JSON");
    (items, yaml.into_bytes())
}

#[test]
fn the_kustomize_base_is_accepted_whole_with_two_leader_electing_replicas_a_pdb_and_a_configmap_per_plugin()
 {
    let (objects, yaml) = rendered_install();
    let of_kind =
        |kind: &str| -> Vec<&Value> { objects.iter().filter(|o| o["kind"] == kind).collect() };
    assert_eq!(of_kind("CustomResourceDefinition").len(), 3);
    // The approvals' policy and the requests' (who asked for a re-run or a pause).
    let names = |kind: &str| -> Vec<&str> {
        let mut names: Vec<&str> = of_kind(kind)
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap_or_default())
            .collect();
        names.sort_unstable();
        names
    };
    let policies = [
        "approvals.workflow.rxg456.cn",
        "requests.workflow.rxg456.cn",
    ];
    assert_eq!(names("ValidatingAdmissionPolicy"), policies);
    assert_eq!(names("ValidatingAdmissionPolicyBinding"), policies);

    let deployment = of_kind("Deployment");
    assert_eq!(deployment.len(), 1);
    let spec = &deployment[0]["spec"];
    assert_eq!(spec["replicas"], 2);
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "workflow-operator");
    let container = &pod["containers"][0];
    assert!(
        container["args"]
            .as_array()
            .is_some_and(|a| a.contains(&json!("--leader-elect"))),
        "{container}"
    );
    // Not /readyz, which only the leader answers: a standby must count as available, or a
    // rollout and the PodDisruptionBudget would wait for each other for ever.
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    // The read-only root keeps nothing; the caches of compiled and pulled plugins live in a
    // volume of the pod's.
    let args = container["args"].to_string();
    assert!(
        args.contains("\"--plugin-pull-cache\",\"/var/cache/workflow-operator/pulled\"")
            && args
                .contains("\"--plugin-compile-cache\",\"/var/cache/workflow-operator/compiled\""),
        "{args}"
    );
    assert_eq!(
        container["volumeMounts"][0]["mountPath"],
        "/var/cache/workflow-operator"
    );
    assert!(pod["volumes"][0]["emptyDir"].is_object(), "{pod}");

    assert_eq!(of_kind("PodDisruptionBudget").len(), 1);
    // The webhook port admits the API servers only: the base holds a placeholder address that
    // scripts/deploy.sh replaces; the metrics port admits labelled namespaces.
    let policy = of_kind("NetworkPolicy");
    assert_eq!(policy.len(), 1);
    let ingress = &policy[0]["spec"]["ingress"];
    assert_eq!(ingress[0]["ports"][0]["port"], "webhook");
    assert_eq!(ingress[0]["from"][0]["ipBlock"]["cidr"], "192.0.2.1/32");
    assert_eq!(ingress[1]["ports"][0]["port"], "http");
    assert_eq!(
        ingress[1]["from"][0]["namespaceSelector"]["matchLabels"]["workflow.rxg456.cn/metrics-access"],
        "true"
    );
    let service = of_kind("Service");
    assert_eq!(service[0]["spec"]["ports"][0]["port"], 8080);

    let mut plugins: Vec<String> = of_kind("ConfigMap")
        .iter()
        .filter(|cm| cm["metadata"]["labels"]["workflow.rxg456.cn/plugin"] == "true")
        .filter(|cm| cm["metadata"]["namespace"] == "workflow-system")
        .flat_map(|cm| {
            cm["binaryData"]
                .as_object()
                .map(|d| d.keys().cloned().collect::<Vec<_>>())
                .unwrap_or_default()
        })
        .collect();
    plugins.sort();
    assert_eq!(
        plugins,
        [
            "at.wasm",
            "decommission.wasm",
            "post-check.wasm",
            "pre-check.wasm",
            "setup.wasm"
        ],
        "one labelled ConfigMap per built-in type"
    );

    // The API server accepts every object (server-side dry run: nothing is changed).
    let out = cluster().kubectl_with_stdin(
        &["apply", "--server-side", "--dry-run=server", "-f", "-"],
        &yaml,
    );
    assert!(
        out.status.success(),
        "the API server refused the install: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_image_entrypoint_runs_as_the_service_account_on_the_installed_plugin_configmaps_and_the_seed_sample_completes()
 {
    let cluster = cluster();
    let ns = cluster.fresh_namespace("e2e-image");
    // The image `make image` built, unpacked without a container engine.
    let bundle = tempfile::tempdir().expect("temporary directory");
    let out = std::process::Command::new(repo_root().join("scripts/image-rootfs.sh"))
        .arg(bundle.path().join("bundle"))
        .output()
        .expect("run scripts/image-rootfs.sh");
    assert!(
        out.status.success(),
        "cannot unpack the image (run `make image`): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let entrypoint = std::path::PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let config: Value = serde_json::from_slice(
        &std::fs::read(bundle.path().join("bundle/config.json")).expect("runtime config"),
    )
    .expect("runtime config is JSON");
    assert_ne!(
        config["process"]["user"]["uid"], 0,
        "the image runs as root"
    );

    // The plugin ConfigMaps of the install, in this test's namespace.
    let (objects, _) = rendered_install();
    for mut cm in objects.into_iter().filter(|o| o["kind"] == "ConfigMap") {
        cm["metadata"]["namespace"] = json!(ns);
        let out = cluster.kubectl_with_stdin(
            &["apply", "--server-side", "-f", "-"],
            cm.to_string().as_bytes(),
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    let mut operator = Operator::spawn_program(&entrypoint, &ns, []);
    operator.wait_for_log("controllers started");
    let served = served_plugins(&mut operator);
    for t in BUILTIN_TYPES {
        assert!(
            served_digest(&served, t).is_some(),
            "{t} is not served: {served}"
        );
    }
    cluster.apply_yaml_in(
        &ns,
        &group_yaml(
            "from-the-image",
            &["pre-check", "setup", "post-check"],
            "",
            "",
        ),
    );
    wait_group_phase(&ns, "from-the-image", "Completed", &mut operator);
    assert_eq!(list(&ns, "pods", None).len(), 5, "one pod per step");
}
