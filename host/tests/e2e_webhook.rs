//! End to end: the validating admission webhook. The operator runs on the host as the
//! install's ServiceAccount and serves the webhook on a loopback port; each test registers a
//! ValidatingWebhookConfiguration of its own that points there by URL and covers only the
//! test's namespace (other tests share the cluster), and the operator keeps its caBundle
//! current, as the leader does for the install's. `kubectl` is a user.

#[path = "support/operator.rs"]
mod operator;

use std::collections::BTreeSet;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use operator::*;
use serde_json::json;
use workflow_e2e::poll_until;

/// What pre-check's `validate` says of a command that is not one word.
const PRE_CHECK_REFUSAL: &str = "invalid params at `requiredCommands[0]`: \"rm -rf\" is not a valid command name: it holds a blank, which would make it two words";

/// A pre-check group whose params its plugin refuses.
fn refused_group(name: &str) -> String {
    group_yaml(
        name,
        &["pre-check"],
        "  params:\n    pre-check:\n      requiredCommands: [\"rm -rf\"]\n",
        "",
    )
}

/// The webhook configuration of one test, with the ClusterRole that lets the operator's
/// ServiceAccount patch its caBundle (the install grants the same for its own); removed when
/// dropped.
struct Registration {
    name: String,
}

impl Registration {
    /// Registers `https://<addr>/validate-workflowgroup` for the groups of `ns`, with the
    /// install's defaults (failurePolicy Ignore: a webhook that does not answer lets groups
    /// in, so every refusal a test sees was the webhook's).
    fn create(ns: &str, addr: &str) -> Registration {
        let name = format!("workflow-operator-{ns}");
        let registration = Registration { name: name.clone() };
        let cluster = cluster();
        cluster.apply_yaml(
            &json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": name},
                "rules": [{
                    "apiGroups": ["admissionregistration.k8s.io"],
                    "resources": ["validatingwebhookconfigurations"],
                    "resourceNames": [name],
                    "verbs": ["get", "patch"],
                }],
            })
            .to_string(),
        );
        cluster.apply_yaml(
            &json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": name},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                "subjects": [{"kind": "ServiceAccount", "name": "workflow-operator", "namespace": "workflow-system"}],
            })
            .to_string(),
        );
        cluster.apply_yaml(
            &json!({
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": name},
                "webhooks": [{
                    "name": "workflowgroups.workflow.rxg456.cn",
                    "admissionReviewVersions": ["v1"],
                    "sideEffects": "None",
                    "failurePolicy": "Ignore",
                    "timeoutSeconds": 5,
                    "clientConfig": {"url": format!("https://{addr}/validate-workflowgroup")},
                    "rules": [{
                        "apiGroups": ["workflow.rxg456.cn"],
                        "apiVersions": ["v1alpha1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["workflowgroups"],
                        "scope": "Namespaced",
                    }],
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                    "matchConditions": [{
                        "name": "not-the-operator-nor-cluster-components",
                        "expression": "request.userInfo.username != 'system:serviceaccount:workflow-system:workflow-operator' && (!request.userInfo.username.startsWith('system:') || request.userInfo.username.startsWith('system:serviceaccount:'))",
                    }],
                }],
            })
            .to_string(),
        );
        registration
    }

    /// The PEM certificates of its caBundle (of its one webhook).
    fn ca_bundle(&self) -> Vec<String> {
        let configuration = cluster().kubectl_json(&[
            "get",
            "validatingwebhookconfiguration",
            &self.name,
            "-o",
            "json",
        ]);
        let encoded = text(&configuration, "/webhooks/0/clientConfig/caBundle");
        let pem = base64_decode(encoded);
        pem.split_inclusive("-----END CERTIFICATE-----")
            .filter(|c| c.contains("BEGIN CERTIFICATE"))
            .map(|c| c.trim().to_string())
            .collect()
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        for kind in [
            "validatingwebhookconfiguration",
            "clusterrolebinding",
            "clusterrole",
        ] {
            cluster().kubectl(&["delete", kind, &self.name, "--ignore-not-found"]);
        }
    }
}

fn base64_decode(text: &str) -> String {
    let mut child = Command::new("base64")
        .arg("-d")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run base64");
    std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), text.as_bytes())
        .expect("write to base64");
    let out = child.wait_with_output().expect("base64 output");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The operator with its webhook on a loopback port, registered for `ns`, answering: its
/// caBundle published and the API server calling it.
struct Webhook {
    operator: Operator,
    addr: String,
    registration: Registration,
    ns: String,
    /// The plugin directory, watched by the operator while it runs.
    _plugins: tempfile::TempDir,
}

impl Webhook {
    fn start(prefix: &str, plugins: &[(&str, std::path::PathBuf)], extra: &[&str]) -> Webhook {
        let ns = cluster().fresh_namespace(prefix);
        let dir = tempfile::tempdir().expect("plugin directory");
        for (type_name, wasm) in plugins {
            std::fs::copy(wasm, dir.path().join(format!("{type_name}.wasm"))).expect("copy plugin");
        }
        let config_name = format!("workflow-operator-{ns}");
        let args = [
            &[
                "--webhook-addr",
                "127.0.0.1:0",
                "--webhook-config-name",
                &config_name,
            ],
            extra,
        ]
        .concat();
        let mut operator = Operator::start_with(&ns, dir.path(), &args);
        operator.wait_for_log("serving the admission webhook");
        let addr = operator
            .log_text()
            .lines()
            .find(|l| l.contains("serving the admission webhook"))
            .and_then(|l| l.split_whitespace().find_map(|w| w.strip_prefix("addr=")))
            .expect("the webhook's address in the log")
            .to_string();
        let registration = Registration::create(&ns, &addr);
        let webhook = Webhook {
            operator,
            addr,
            registration,
            ns,
            _plugins: dir,
        };
        let log = webhook.operator.log();
        poll_until(
            Duration::from_millis(200),
            TIMEOUT,
            "the API server to call the webhook with its caBundle published",
            || {
                let out = webhook.apply(&refused_group("probe"), true);
                if stderr(&out).contains(PRE_CHECK_REFUSAL) {
                    Ok(())
                } else {
                    Err(out)
                }
            },
            |out| format!("last apply: {}{}\n{log}", stdout(&out), stderr(&out)),
        );
        webhook
    }

    /// `kubectl apply` of `yaml` in the test's namespace, as the cluster's admin.
    fn apply(&self, yaml: &str, dry_run: bool) -> Output {
        let mut args = vec!["-n", self.ns.as_str(), "apply", "-f", "-"];
        if dry_run {
            args.push("--dry-run=server");
        }
        cluster().kubectl_with_stdin(&args, yaml.as_bytes())
    }

    /// The serial number of the certificate the webhook serves now, from a TLS handshake.
    fn served_serial(&self) -> String {
        let handshake = Command::new("openssl")
            .args([
                "s_client",
                "-connect",
                &self.addr,
                "-servername",
                "localhost",
            ])
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run openssl s_client");
        let mut x509 = Command::new("openssl")
            .args(["x509", "-noout", "-serial"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("run openssl x509");
        std::io::Write::write_all(&mut x509.stdin.take().expect("stdin"), &handshake.stdout)
            .expect("write the handshake");
        let out = x509.wait_with_output().expect("openssl x509 output");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_group_whose_params_its_plugin_refuses_is_refused_by_kubectl_apply_with_the_plugins_words() {
    let webhook = Webhook::start(
        "e2e-webhook",
        &[
            ("pre-check", built_plugin("pre-check")),
            ("hostile", built("test-plugins", "hostile")),
        ],
        &[],
    );
    let ns = &webhook.ns;

    // Server-side dry run and a real apply say what the plugin said, naming the field.
    for dry_run in [true, false] {
        let out = webhook.apply(&refused_group("refused"), dry_run);
        let said = stderr(&out);
        assert!(
            !out.status.success(),
            "applied (dry run {dry_run}): {}",
            stdout(&out)
        );
        assert!(
            said.contains("denied the request")
                && said.contains(
                    "spec.params.pre-check: invalid parameters for workflow type pre-check"
                )
                && said.contains(PRE_CHECK_REFUSAL),
            "dry run {dry_run}: {said}"
        );
    }
    let missing = cluster().kubectl(&["-n", ns, "get", "workflowgroup", "refused"]);
    assert!(!missing.status.success(), "the refused group exists");

    // Good params go in, and so does an update that fixes refused ones.
    let good = group_yaml(
        "good",
        &["pre-check"],
        "  paused: true\n  params:\n    pre-check:\n      requiredCommands: [\"ls\"]\n",
        "",
    );
    let out = webhook.apply(&good, false);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("Warning"), "{}", stderr(&out));
    // An update the plugin refuses is refused; the stored group keeps its params.
    let out = webhook.apply(&good.replace("[\"ls\"]", "[\"rm -rf\"]"), false);
    assert!(stderr(&out).contains(PRE_CHECK_REFUSAL), "{}", stderr(&out));
    let stored = get(ns, "workflowgroup/good");
    assert_eq!(
        stored["spec"]["params"]["pre-check"]["requiredCommands"],
        json!(["ls"])
    );

    // A template whose steps form a cycle is refused, naming it.
    let cycle = group_yaml(
        "cycle",
        &["hostile"],
        "  params:\n    hostile:\n      mode: cycle\n",
        "",
    );
    let out = webhook.apply(&cycle, true);
    assert!(
        !out.status.success() && stderr(&out).contains("dependency cycle: a -> b -> a"),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );

    // What nobody can check here goes in with a warning: a type with no plugin loaded, and a
    // plugin that does not answer within its time limit.
    let unknown = group_yaml("unknown", &["not-loaded"], "  paused: true\n", "");
    let out = webhook.apply(&unknown, true);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("Warning: no plugin is loaded for workflow type \"not-loaded\""),
        "{}",
        stderr(&out)
    );
    let looping = group_yaml(
        "looping",
        &["hostile"],
        "  params:\n    hostile:\n      mode: loop\n",
        "",
    );
    let out = webhook.apply(&looping, true);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("Warning: workflow type \"hostile\" not checked")
            && stderr(&out).contains("time limit"),
        "{}",
        stderr(&out)
    );

    // Counted on /metrics by result.
    let mut operator = webhook.operator;
    let (status, metrics) = operator.http_get("/metrics");
    assert_eq!(status, 200);
    for result in ["refused", "allowed", "warned"] {
        assert!(
            metrics.contains(&format!(
                "workflow_operator_webhook_admissions_total{{result=\"{result}\"}}"
            )),
            "no {result} admissions counted: {metrics}"
        );
    }
    assert!(metrics.contains("workflow_operator_webhook_admission_duration_seconds_bucket"));
    drop(webhook.registration);
}

/// `workflow-operator plan -f` of `yaml` (put in namespace `ns`) with `--dry-run=server`.
fn plan_server_dry_run(ns: &str, yaml: &str) -> Output {
    let dir = tempfile::tempdir().expect("a directory for the group file");
    let file = dir.path().join("group.yaml");
    let yaml = yaml.replacen("metadata:\n", &format!("metadata:\n  namespace: {ns}\n"), 1);
    std::fs::write(&file, yaml).expect("write the group file");
    Command::new(env!("CARGO_BIN_EXE_workflow-operator"))
        .args(["plan", "--dry-run=server", "-f"])
        .arg(&file)
        .env("KUBECONFIG", cluster().kubeconfig())
        .output()
        .expect("run workflow-operator plan")
}

#[test]
fn a_server_side_dry_run_shows_the_plan_the_plugins_rendered_and_creates_nothing() {
    let webhook = Webhook::start(
        "e2e-webhook-plan",
        &[("pre-check", built_plugin("pre-check"))],
        &[],
    );
    let ns = &webhook.ns;
    let good = group_yaml(
        "planned",
        &["pre-check", "post-check"],
        "  rollout:\n    waveSize: 1\n  params:\n    pre-check:\n      requiredCommands: [\"ls\"]\n",
        "",
    );

    // kubectl's own dry run prints the plan as the webhook's warnings, one line each, with the
    // steps pre-check's plugin rendered and a word for the type no plugin answered for.
    let out = webhook.apply(&good, true);
    let said = stderr(&out);
    assert!(out.status.success(), "{said}");
    let plan: Vec<&str> = said
        .lines()
        .filter_map(|l| l.strip_prefix("Warning: plan: "))
        .collect();
    assert_eq!(
        plan.first().copied(),
        Some(
            format!(
                "WorkflowGroup {ns}/planned (cluster-expansion), cluster test-cluster: 1 target(s), 2 type(s), 1 wave(s); nothing is created"
            )
            .as_str()
        ),
        "{said}"
    );
    let pre_check = plan
        .iter()
        .find_map(|l| l.strip_prefix("  pre-check: "))
        .unwrap_or_else(|| panic!("no pre-check line: {said}"));
    assert!(
        !pre_check.is_empty() && !pre_check.starts_with('('),
        "pre-check's steps: {said}"
    );
    assert!(
        plan.contains(&"  post-check: (steps not listed: no plugin of this type answered)"),
        "{said}"
    );
    assert!(
        plan.iter().any(|l| l.starts_with("wave 1: node-1 (")),
        "{said}"
    );

    // The command line asks the API server the same way: the plugin's refusal is its error,
    // and a group let in is planned.
    let refused = plan_server_dry_run(ns, &refused_group("refused"));
    assert!(!refused.status.success(), "{}", stdout(&refused));
    assert!(
        stderr(&refused).contains("would be refused by the API server")
            && stderr(&refused).contains(PRE_CHECK_REFUSAL),
        "{}",
        stderr(&refused)
    );
    let accepted = plan_server_dry_run(ns, &good);
    assert!(accepted.status.success(), "{}", stderr(&accepted));
    let shown = stdout(&accepted);
    assert!(
        shown.starts_with(&format!("the API server accepts it in namespace {ns} ("))
            && shown.contains("\nwave 1: node-1 ("),
        "{shown}"
    );
    for name in ["planned", "refused"] {
        let missing = cluster().kubectl(&["-n", ns, "get", "workflowgroup", name]);
        assert!(!missing.status.success(), "{name} was created");
    }
}

#[test]
fn the_webhook_keeps_answering_while_its_serving_certificate_and_ca_are_renewed() {
    // A serving certificate renewed about every 4 s and a CA about every 19 s, checked every
    // 2 s: in 45 s, several serving certificates and at least one new CA.
    let webhook = Webhook::start(
        "e2e-webhook-rotation",
        &[("pre-check", built_plugin("pre-check"))],
        &[
            "--webhook-serving-lifetime-secs",
            "6",
            "--webhook-ca-lifetime-secs",
            "30",
            "--webhook-check-secs",
            "2",
        ],
    );
    let first_ca = webhook.registration.ca_bundle().first().cloned();
    assert!(first_ca.is_some(), "no caBundle published");
    let mut serials = BTreeSet::new();
    let mut cas = BTreeSet::new();
    let mut largest_bundle = 0;
    let mut reviews = 0;
    let log = webhook.operator.log();
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(45) {
        serials.insert(webhook.served_serial());
        let bundle = webhook.registration.ca_bundle();
        largest_bundle = largest_bundle.max(bundle.len());
        cas.extend(bundle);
        // Every review during renewals is the plugin's answer, not an ignored failure.
        let out = webhook.apply(&refused_group("refused"), true);
        assert!(
            stderr(&out).contains(PRE_CHECK_REFUSAL),
            "after {:?}, serving {serials:?}: {}{}\n{log}",
            started.elapsed(),
            stdout(&out),
            stderr(&out)
        );
        reviews += 1;
        std::thread::sleep(Duration::from_millis(300));
    }
    serials.remove("");
    assert!(
        serials.len() >= 4,
        "the served certificate changed too rarely ({reviews} reviews): {serials:?}\n{log}"
    );
    assert!(cas.len() >= 2, "the CA was never renewed: {cas:?}\n{log}");
    assert!(
        largest_bundle >= 2,
        "the old CA never stayed in the bundle beside the new one\n{log}"
    );
    eprintln!(
        "{reviews} reviews refused by the plugin while {} serving certificates and {} CAs were served",
        serials.len(),
        cas.len()
    );
}
