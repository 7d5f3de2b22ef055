//! End to end, on the real node: a cluster-expansion group makes its target hosts Nodes of the
//! local cluster. The hosts are the test's own (`tests/cluster/target-hosts.sh`), each able to
//! run a kubelet and containerd of its own; setup's `join` (with the opt-in rights of
//! `deploy/join/`) mints a bootstrap token, starts them there, and post-check's `nodeReady`
//! removes the joining taint once each Node is Ready. Then pods run on the new Nodes.

#[path = "support/operator.rs"]
mod operator;
#[path = "support/target_hosts.rs"]
mod target_hosts;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use operator::*;
use serde_json::{Value, json};
use target_hosts::*;
use workflow_e2e::{poll_until, repo_root};

/// How long joining three hosts may take on a loaded machine.
const JOIN_TIMEOUT: Duration = Duration::from_secs(300);

/// The kubelet the local cluster's real node runs (`tests/cluster/build.sh`): the targets see
/// this machine's files beneath their own, so it is "already on the targets".
fn kubelet() -> PathBuf {
    let out = Command::new(repo_root().join("tests/cluster/build.sh"))
        .arg("--print-bin-dir")
        .output()
        .expect("run tests/cluster/build.sh --print-bin-dir");
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("kubelet")
}

/// The image archives `tests/cluster/node.sh` imports into the real node (no registry is
/// reachable from here): the pause image and busybox.
fn node_images() -> [PathBuf; 2] {
    let out = Command::new(repo_root().join("tests/cluster/node.sh"))
        .arg("images-dir")
        .output()
        .expect("run tests/cluster/node.sh images-dir");
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    [dir.join("pause.tar"), dir.join("busybox.tar")]
}

fn base64_of(bytes: &[u8]) -> String {
    let out = Command::new("base64")
        .arg("-w0")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write as _;
            child.stdin.take().expect("stdin").write_all(bytes)?;
            child.wait_with_output()
        })
        .expect("base64");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `deploy/join/join.yaml`, its ServiceAccount in `ns` instead of `workflow-nodes`.
fn grant_join(cluster: &workflow_e2e::Cluster, ns: &str) {
    let yaml = std::fs::read_to_string(repo_root().join("deploy/join/join.yaml"))
        .expect("deploy/join/join.yaml");
    cluster.apply_yaml(&yaml.replace("workflow-nodes", ns));
}

/// A group of `types` over `targets` on the real node, with `params`, its setup and post-check
/// steps run as the ServiceAccount of `deploy/join/`.
fn expansion_group(name: &str, types: &[&str], params: Value, targets: Value) -> String {
    let joiner = json!({"serviceAccountName": "workflow-node-joiner"});
    // The ServiceAccount for the types that reach the API server (the CRD allows a template
    // only for types the group lists).
    let templates: serde_json::Map<String, Value> = ["setup", "post-check", "decommission"]
        .into_iter()
        .filter(|t| types.contains(t))
        .map(|t| (t.to_owned(), joiner.clone()))
        .collect();
    json!({
        "apiVersion": "workflow.rxg456.cn/v1alpha1",
        "kind": "WorkflowGroup",
        "metadata": {"name": name},
        "spec": {
            "type": "cluster-expansion",
            "clusterName": "local",
            "workflowSteps": types,
            "targets": targets,
            "params": params,
            "podTemplate": workflow_e2e::real_node_placement(),
            "podTemplates": templates,
        }
    })
    .to_string()
}

/// setup's `join` as the local cluster needs it: its kubelet, and its images imported.
fn join_params() -> Value {
    let images: Vec<String> = node_images()
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    json!({
        "kubelet": kubelet().to_string_lossy(),
        "sandboxImage": "localhost/workflow-pause:1.0",
        "images": images,
        "nodeLabels": ["workflow.rxg456.cn/joined-by=e2e"],
    })
}

/// Waits until group `ns/name` is `want`, up to `within`; fails sooner when it stays finished
/// otherwise for 15 s (a re-run asked for by annotation takes a moment to start).
fn wait_phase(ns: &str, name: &str, want: &str, within: Duration, operator: &mut Operator) {
    let log = operator.log();
    let mut otherwise_since: Option<Instant> = None;
    poll_until(
        Duration::from_millis(500),
        within,
        &format!("group {ns}/{name} to be {want}"),
        || {
            let group = get(ns, &format!("workflowgroup/{name}"));
            let phase = group["status"]["phase"].as_str().unwrap_or_default();
            if phase == want {
                return Ok(());
            }
            operator.assert_running();
            if matches!(phase, "Failed" | "Completed") {
                let since = *otherwise_since.get_or_insert_with(Instant::now);
                assert!(
                    since.elapsed() < Duration::from_secs(15),
                    "group {ns}/{name} is {phase}, not {want}: {}\n{}\n{log}",
                    group["status"],
                    cluster().kubectl_ok(&["-n", ns, "get", "wfg,wf,pods", "-o", "wide"])
                );
            }
            Err(group["status"].to_string())
        },
        |last| {
            format!(
                "group {ns}/{name}: {last}\n{}\n{log}",
                cluster().kubectl_ok(&["-n", ns, "get", "wfg,wf,pods", "-o", "wide"])
            )
        },
    );
}

/// The step's log of `group`'s pod for `step`.
fn step_log(cluster: &workflow_e2e::Cluster, ns: &str, group: &str, step: &str) -> String {
    let selector = format!("workflow.rxg456.cn/group-name={group},workflow.rxg456.cn/step={step}");
    cluster.kubectl_ok(&["-n", ns, "logs", "-l", &selector, "--tail=-1"])
}

/// The Nodes of `names` that are Ready.
fn ready_nodes(cluster: &workflow_e2e::Cluster, names: &[String]) -> Vec<Value> {
    let nodes = cluster.kubectl_json(&["get", "nodes", "-o", "json"]);
    nodes["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|n| {
            names
                .iter()
                .any(|name| n["metadata"]["name"] == name.as_str())
        })
        .filter(|n| {
            n["status"]["conditions"].as_array().is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            })
        })
        .collect()
}

/// Deletes the Nodes `names` when dropped (their kubelets end with the target hosts).
struct JoinedNodes(Vec<String>);

impl Drop for JoinedNodes {
    fn drop(&mut self) {
        let mut args = vec!["delete", "node", "--ignore-not-found", "--wait=false"];
        args.extend(self.0.iter().map(String::as_str));
        let _ = cluster().kubectl(&args);
    }
}

#[test]
fn a_cluster_expansion_group_makes_its_targets_ready_nodes_that_run_pods() {
    let cluster = cluster();
    cluster.require_real_node();
    import_step_image();
    for image in node_images() {
        assert!(
            image.is_file(),
            "{} (tests/cluster/node.sh makes it)",
            image.display()
        );
    }
    let hosts = TargetHosts::start(5);
    let ns = cluster.fresh_namespace("e2e-join");
    grant_join(cluster, &ns);
    // The joiner's right to make Secrets in kube-system is for bootstrap tokens of ours only.
    let joiner = format!("system:serviceaccount:{ns}:workflow-node-joiner");
    // (The policy takes effect within moments of being made: a Secret made before is removed.)
    let (said, _) = poll_until(
        Duration::from_millis(300),
        Duration::from_secs(30),
        "the policy to refuse the joiner a Secret that is not a bootstrap token",
        || {
            let denied = cluster.kubectl(&[
                "--as",
                &joiner,
                "-n",
                "kube-system",
                "create",
                "secret",
                "generic",
                "not-a-token",
                "--from-literal=key=value",
            ]);
            let said = String::from_utf8_lossy(&denied.stderr).into_owned();
            if said.contains("workflow-node-joiner may only create and delete bootstrap tokens") {
                return Ok(said);
            }
            let _ = cluster.kubectl(&["-n", "kube-system", "delete", "secret", "not-a-token"]);
            Err(said)
        },
        |said| said,
    );
    assert!(said.contains("denied"), "{said}");
    let precious = format!("precious-{ns}");
    cluster.kubectl_ok(&[
        "-n",
        "kube-system",
        "create",
        "secret",
        "generic",
        &precious,
        "--from-literal=key=value",
    ]);
    let denied = cluster.kubectl(&[
        "--as",
        &joiner,
        "-n",
        "kube-system",
        "delete",
        "secret",
        &precious,
    ]);
    assert!(
        !denied.status.success(),
        "the joiner deleted another Secret of kube-system"
    );
    cluster.kubectl_ok(&["-n", "kube-system", "delete", "secret", &precious]);
    hosts.secret(cluster, &ns, "workflow-ssh", &hosts.file("ssh-privatekey"));
    let plugins = plugin_dir(&["pre-check", "setup", "post-check", "decommission"]);
    let mut operator = Operator::start(&ns, plugins.path());

    // Node names of this run: a Node outlives nothing of it by accident.
    let run = std::process::id() % 100_000;
    let names: Vec<String> = (1..=5).map(|n| format!("joined-{run}-{n}")).collect();
    let _joined = JoinedNodes(names.clone());
    let targets = |numbers: &[usize]| -> Value {
        numbers
            .iter()
            .map(|&n| json!({"name": names[n - 1], "ip": hosts.hosts[n - 1].1, "role": "Worker"}))
            .collect()
    };
    let before = cluster.kubectl_ok(&["get", "nodes"]);

    let started = Instant::now();
    cluster.apply_yaml_in(
        &ns,
        &expansion_group(
            "expand",
            &["pre-check", "setup", "post-check"],
            json!({
                "pre-check": {"requiredCommands": ["sh"]},
                "setup": {"join": join_params()},
                "post-check": {"nodeReady": true, "nodeReadyTimeoutSeconds": 120},
            }),
            targets(&[1, 2, 3]),
        ),
    );
    wait_phase(&ns, "expand", "Completed", JOIN_TIMEOUT, &mut operator);
    eprintln!(
        "3 Nodes joined and Ready {:.1} s after the apply",
        started.elapsed().as_secs_f64()
    );

    // Three new Nodes, Ready, at their targets' addresses, without the joining taint.
    let joined = &names[..3];
    let ready = ready_nodes(cluster, joined);
    assert_eq!(
        ready.len(),
        3,
        "kubectl get nodes before:\n{before}\nafter:\n{}",
        cluster.kubectl_ok(&["get", "nodes", "-o", "wide"])
    );
    for (node, (_, ip)) in ready.iter().zip(&hosts.hosts) {
        let name = text(node, "/metadata/name");
        let addresses = node["status"]["addresses"].to_string();
        assert!(
            addresses.contains(ip.as_str()),
            "{name} at {ip}: {addresses}"
        );
        let taints = node["spec"]["taints"].to_string();
        assert!(
            !taints.contains("workflow.rxg456.cn/joining"),
            "{name}: {taints}"
        );
        assert_eq!(
            node["metadata"]["labels"]["workflow.rxg456.cn/joined-by"], "e2e",
            "{name}"
        );
    }
    // The run's token is gone, and it was never in a log, the group or a Workflow.
    let tokens = cluster.kubectl_ok(&[
        "-n",
        "kube-system",
        "get",
        "secrets",
        "-l",
        "workflow.rxg456.cn/bootstrap-token",
        "-o",
        "name",
    ]);
    assert_eq!(tokens.trim(), "", "the bootstrap token is deleted");
    let log = step_log(cluster, &ns, "expand", "join-cluster");
    assert!(log.contains("bootstrap token bootstrap-token-"), "{log}");
    for name in joined {
        assert!(
            log.contains(&format!("[{name}] joined as Node {name}")),
            "{log}"
        );
    }
    let token_id = log
        .split("bootstrap-token-")
        .nth(1)
        .map(|rest| rest.chars().take(6).collect::<String>())
        .expect("the token's id");
    let written = cluster.kubectl_ok(&["-n", &ns, "get", "wfg,wf,pods", "-o", "yaml"]);
    assert!(
        !written.contains(&format!("{token_id}.")),
        "the token's secret is in no object"
    );
    assert!(!log.contains(&format!("{token_id}.")), "nor in the log");
    let machine = hosts.exec(1, "ls /etc/kubernetes");
    let machine = String::from_utf8_lossy(&machine.stdout);
    assert!(
        machine.contains("kubelet.conf") && !machine.contains("bootstrap-kubelet.conf"),
        "the target keeps its own credentials, not the token: {machine}"
    );

    // A pod pinned to each new Node runs a real container there.
    for name in joined {
        cluster.apply_yaml_in(
            &ns,
            &json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": format!("on-{name}")},
                "spec": {
                    "nodeName": name,
                    "restartPolicy": "Never",
                    "containers": [{
                        "name": "hello",
                        "image": "busybox:1.36",
                        "imagePullPolicy": "IfNotPresent",
                        "command": ["sh", "-c", "echo hello from $(hostname)"],
                    }],
                }
            })
            .to_string(),
        );
    }
    for name in joined {
        let pod = format!("pod/on-{name}");
        poll_until(
            Duration::from_millis(500),
            Duration::from_secs(120),
            &format!("{pod} to succeed on {name}"),
            || {
                let pod = get(&ns, &pod);
                match pod["status"]["phase"].as_str().unwrap_or_default() {
                    "Succeeded" => Ok(()),
                    other => Err(format!("{other}: {}", pod["status"])),
                }
            },
            |last| last.clone(),
        );
        let out = cluster.kubectl_ok(&["-n", &ns, "logs", &pod]);
        assert!(out.starts_with("hello from "), "{pod}: {out}");
    }

    // Joining again changes nothing on a machine that is a Node already.
    cluster.apply_yaml_in(
        &ns,
        &expansion_group(
            "again",
            &["setup"],
            json!({"setup": {"join": join_params()}}),
            targets(&[1]),
        ),
    );
    wait_phase(&ns, "again", "Completed", JOIN_TIMEOUT, &mut operator);
    let log = step_log(cluster, &ns, "again", "join-cluster");
    assert!(
        log.contains(&format!("[{}] already a Node of this cluster", names[0])),
        "{log}"
    );

    // A machine without containerd, and no package source for it: named in the group.
    let removed = hosts.exec(4, "rm -f /usr/bin/containerd && ! command -v containerd");
    assert!(removed.status.success(), "{removed:?}");
    cluster.apply_yaml_in(
        &ns,
        &expansion_group(
            "no-runtime",
            &["setup"],
            json!({"setup": {"join": join_params()}}),
            targets(&[4]),
        ),
    );
    wait_phase(&ns, "no-runtime", "Failed", JOIN_TIMEOUT, &mut operator);
    let message = condition_message(&get(&ns, "workflowgroup/no-runtime"));
    assert!(
        message.contains(&format!("{} failed", names[3]))
            && message
                .contains("containerd is not installed and apt-get could not install containerd"),
        "{message}"
    );

    // An API server the machine cannot reach: named in the group.
    let mut unreachable = join_params();
    unreachable["apiServer"] = json!("https://127.0.0.1:1");
    cluster.apply_yaml_in(
        &ns,
        &expansion_group(
            "no-api",
            &["setup"],
            json!({"setup": {"join": unreachable}}),
            targets(&[2]),
        ),
    );
    wait_phase(&ns, "no-api", "Failed", JOIN_TIMEOUT, &mut operator);
    let message = condition_message(&get(&ns, "workflowgroup/no-api"));
    assert!(
        message.contains(&format!("{} failed", names[1]))
            && message.contains("cannot reach the API server https://127.0.0.1:1"),
        "{message}"
    );
    // A wrong token: the kubelet is refused its certificate, and the join says so. The script
    // runs as the runner runs it, its input a bootstrap kubeconfig with a token the API server
    // does not know (the runner only ever sends the one it made).
    let server = cluster.kubectl_ok(&[
        "get",
        "endpoints",
        "kubernetes",
        "-n",
        "default",
        "-o",
        "jsonpath=https://{.subsets[0].addresses[0].ip}:{.subsets[0].ports[0].port}",
    ]);
    let ca = cluster.kubectl_ok(&[
        "-n",
        &ns,
        "get",
        "configmap",
        "kube-root-ca.crt",
        "-o",
        "jsonpath={.data.ca\\.crt}",
    ]);
    let bogus = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n    \
         certificate-authority-data: {}\ncontexts:\n- name: b\n  context: {{cluster: c, user: b}}\n\
         current-context: b\nusers:\n- name: b\n  user:\n    token: abcdef.0123456789abcdef\n",
        base64_of(ca.as_bytes())
    );
    std::fs::write(hosts.file("bogus.kubeconfig"), bogus).expect("a kubeconfig");
    let script = format!(
        "KUBELET='{}'\nKUBERNETES_VERSION=''\nSANDBOX_IMAGE='localhost/workflow-pause:1.0'\nIMAGES='{}'\n\
         POD_SUBNET='10.88.0.0/16'\nNODE_LABELS=''\nJOIN_TAINT='workflow.rxg456.cn/joining:NoSchedule'\n\
         CLUSTER_DNS=''\nCLUSTER_DOMAIN='cluster.local'\nBOOTSTRAP_TIMEOUT='20'\n{}",
        kubelet().display(),
        node_images()[0].display(),
        std::fs::read_to_string(repo_root().join("plugins/setup/scripts/join-cluster.sh"))
            .expect("the join script")
    );
    std::fs::write(hosts.file("join.sh"), script).expect("the script");
    let refused = hosts.exec(
        5,
        &format!(
            "WORKFLOW_TARGET_NAME={} WORKFLOW_TARGET_IP={} sh {} < {}",
            names[4],
            hosts.hosts[4].1,
            hosts.file("join.sh").display(),
            hosts.file("bogus.kubeconfig").display()
        ),
    );
    let said = String::from_utf8_lossy(&refused.stdout);
    let last = said.lines().last().unwrap_or_default();
    assert_eq!(refused.status.code(), Some(1), "{said}");
    assert!(
        last.contains("the kubelet") && last.contains("Unauthorized"),
        "a wrong token is named by the kubelet's own words: {said}"
    );
    assert_eq!(
        ready_nodes(cluster, joined).len(),
        3,
        "the Nodes stay Ready"
    );

    // A kubelet that never becomes Ready (a CNI configuration that cannot be loaded): named by
    // post-check within its timeout, with the kubelet's reason.
    let broken = hosts.exec(
        5,
        "mkdir -p /etc/cni/net.d && echo '{not json' > /etc/cni/net.d/00-broken.conf",
    );
    assert!(broken.status.success(), "{broken:?}");
    cluster.apply_yaml_in(
        &ns,
        &expansion_group(
            "never-ready",
            &["setup", "post-check"],
            json!({
                "setup": {"join": join_params()},
                "post-check": {"nodeReady": true, "nodeReadyTimeoutSeconds": 15},
            }),
            targets(&[5]),
        ),
    );
    wait_phase(&ns, "never-ready", "Failed", JOIN_TIMEOUT, &mut operator);
    let message = condition_message(&get(&ns, "workflowgroup/never-ready"));
    assert!(
        message.contains("verify-node-ready")
            && message.contains(&format!("Node {} is not Ready: Ready=False", names[4])),
        "{message}"
    );

    // A machine whose kubelet belongs to another cluster (another CA) is refused, untouched.
    let other = hosts.exec(
        1,
        "sed -i 's/^\\( *certificate-authority-data: \\).*/\\1b3RoZXIgY2x1c3Rlcg==/' /etc/kubernetes/kubelet.conf \
         && grep -c b3RoZXIgY2x1c3Rlcg== /etc/kubernetes/kubelet.conf",
    );
    assert!(other.status.success(), "{other:?}");
    cluster.apply_yaml_in(
        &ns,
        &expansion_group(
            "foreign",
            &["setup"],
            json!({"setup": {"join": join_params()}}),
            targets(&[1]),
        ),
    );
    wait_phase(&ns, "foreign", "Failed", JOIN_TIMEOUT, &mut operator);
    let message = condition_message(&get(&ns, "workflowgroup/foreign"));
    assert!(
        message.contains(&format!("{} failed", names[0]))
            && message.contains("already a Node of another cluster"),
        "{message}"
    );

    // Decommission takes the third Node out. A PodDisruptionBudget that allows no disruption of
    // a pod there holds the drain, which fails naming it; once lifted, a re-run finishes.
    let third = &names[2];
    cluster.apply_yaml_in(
        &ns,
        &json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "kept"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "kept"}},
                "template": {
                    "metadata": {"labels": {"app": "kept"}},
                    "spec": {
                        "nodeSelector": {"kubernetes.io/hostname": third},
                        "terminationGracePeriodSeconds": 1,
                        "containers": [{
                            "name": "sleep",
                            "image": "busybox:1.36",
                            "imagePullPolicy": "IfNotPresent",
                            "command": ["sleep", "3600"],
                        }],
                    },
                },
            }
        })
        .to_string(),
    );
    cluster.apply_yaml_in(
        &ns,
        r#"{"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "kept"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "kept"}}}}"#,
    );
    let kept = poll_until(
        Duration::from_millis(500),
        Duration::from_secs(120),
        "the Deployment's pod to run on the third Node and its budget to count it",
        || {
            let pods = list(&ns, "pods", Some("app=kept"));
            let running = pods.iter().find(|p| p["status"]["phase"] == "Running");
            let budget = get(&ns, "pdb/kept");
            match running {
                Some(pod) if budget["status"]["currentHealthy"] == 1 => {
                    Ok(text(pod, "/metadata/name").to_owned())
                }
                _ => Err(format!("{pods:?} {}", budget["status"])),
            }
        },
        |last| last.clone(),
    )
    .0;
    cluster.apply_yaml_in(
        &ns,
        &expansion_group(
            "take-out",
            &["decommission"],
            json!({"decommission": {"drainTimeoutSeconds": 5, "gracePeriodSeconds": 1, "clean": true}}),
            targets(&[3]),
        ),
    );
    wait_phase(&ns, "take-out", "Failed", JOIN_TIMEOUT, &mut operator);
    let message = condition_message(&get(&ns, "workflowgroup/take-out"));
    assert!(
        message.contains(&format!("{third} failed"))
            && message.contains(&format!("{ns}/{kept}"))
            && message.contains("disruption budget"),
        "the drain names the pod its budget keeps: {message}"
    );
    let node = cluster.kubectl_json(&["get", "node", third]);
    assert_eq!(node["spec"]["unschedulable"], true, "left cordoned: {node}");
    assert_eq!(
        node["metadata"]["annotations"]["workflow.rxg456.cn/cordoned-by"],
        format!("{ns}/take-out")
    );
    cluster.kubectl_ok(&["-n", &ns, "delete", "pdb", "kept"]);
    cluster.kubectl_ok(&[
        "-n",
        &ns,
        "annotate",
        "wfg",
        "take-out",
        "workflow.rxg456.cn/rerun=lifted",
    ]);
    wait_phase(&ns, "take-out", "Completed", JOIN_TIMEOUT, &mut operator);
    let gone = cluster.kubectl(&["get", "node", third]);
    assert!(!gone.status.success(), "Node {third} is deleted");
    let stopped = hosts.exec(
        3,
        "test ! -e /run/kubelet.pid && test ! -e /etc/kubernetes/kubelet.conf",
    );
    assert!(
        stopped.status.success(),
        "the kubelet is stopped and its files removed: {stopped:?}"
    );
    assert_eq!(
        ready_nodes(cluster, &names[..2]).len(),
        2,
        "the other two stay: {}",
        cluster.kubectl_ok(&["get", "nodes"])
    );

    // Stopping the hosts ends their kubelets, containerds and pods, and removes their cgroups.
    let id = hosts.id();
    hosts.down();
    let ours = format!("wft-{id}-");
    let left: Vec<String> = std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(&ours))
        .collect();
    assert!(left.is_empty(), "processes of the hosts are left: {left:?}");
    for hierarchy in ["memory", "pids", "cpu", "systemd", "unified"] {
        let dir = PathBuf::from("/sys/fs/cgroup").join(hierarchy);
        let cgroups: Vec<String> = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with(&ours))
            .collect();
        assert!(
            cgroups.is_empty(),
            "cgroups left in {}: {cgroups:?}",
            dir.display()
        );
    }
}
