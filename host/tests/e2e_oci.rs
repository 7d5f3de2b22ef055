//! Plugins named by OCI references, pulled from a real registry (the CNCF Distribution
//! registry, built by `tests/oci/build-registry.sh`, on loopback) by the operator against the
//! real cluster: published with `workflow-operator plugin push` as a user would, served, run,
//! kept on disk across a restart; and each way a pull goes wrong said on the ConfigMap, on
//! `/plugins` and on the group that waits for the type, while the last good version serves.

#[path = "support/operator.rs"]
mod operator;
#[path = "support/registry.rs"]
mod registry;

use std::io::Read as _;
use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use oci_client::secrets::RegistryAuth;
use operator::*;
use registry::{Registry, free_port};
use serde_json::json;
use sha2::{Digest as _, Sha256};
use workflow_operator::oci;

/// The login of the private registry, and the bcrypt hash its htpasswd file keeps.
const PULL_USER: &str = "puller";
const PULL_PASSWORD: &str = "e2e-pull-password";
const PULL_PASSWORD_BCRYPT: &str = "$2b$10$l7wYJfV.CNt2nI9IC9KEdOiAKmF.LybJvm2Z/8UnvZhIWmRKdDPea";

/// Pushes `bytes` as a Wasm artifact with the library, as `plugin push` does but without its
/// check that they are a plugin: how the broken artifacts get in.
fn push_raw(registry: &str, repository: &str, bytes: Vec<u8>) -> String {
    push_as(registry, repository, bytes, RegistryAuth::Anonymous)
}

fn push_as(registry: &str, repository: &str, bytes: Vec<u8>, auth: RegistryAuth) -> String {
    let options = oci::PushOptions {
        insecure: true,
        auth,
        type_name: repository.into(),
        version: "1.0.0".into(),
        description: String::new(),
    };
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(oci::push(
            bytes,
            &format!("oci://{registry}/{repository}:1"),
            &options,
        ))
        .unwrap_or_else(|e| panic!("push {repository}: {e}"))
}

/// The digest `/plugins` serves for `type_name`, once it serves one; `what` names the wait.
fn wait_served(operator: &mut Operator, type_name: &str, what: &str) -> String {
    let log = operator.log();
    let (digest, _) = workflow_e2e::poll_until(
        Duration::from_millis(50),
        TIMEOUT,
        what,
        || served_digest(&served_plugins(operator), type_name).ok_or(()),
        |()| log.to_string(),
    );
    digest
}

/// Every file under `dir`.
fn walk_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(walk_files(&path));
        } else {
            found.push(path);
        }
    }
    found
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// A plugin ConfigMap in `ns` whose entry `<type>.wasm` names `reference`.
fn name_plugin(ns: &str, type_name: &str, reference: &str) {
    let yaml = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": type_name, "labels": {"workflow.rxg456.cn/plugin": "true"}},
        "data": {format!("{type_name}.wasm"): reference},
    });
    cluster().apply_yaml_in(ns, &yaml.to_string());
}

/// The problem `/plugins` reports for the ConfigMap entry of `type_name`, once there is one
/// that contains `wanted`.
fn wait_problem(operator: &mut Operator, ns: &str, type_name: &str, wanted: &str) -> String {
    let file = format!("configmap/{ns}/{type_name}/{type_name}.wasm");
    let mut last = String::new();
    let started = Instant::now();
    loop {
        let plugins = served_plugins(operator);
        if let Some(p) = plugins["problems"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["file"] == file.as_str())
        {
            last = p["message"].as_str().unwrap_or_default().to_string();
            if last.contains(wanted) {
                return last;
            }
        }
        assert!(
            started.elapsed() < TIMEOUT,
            "no problem saying {wanted:?} for {file}; the last one: {last:?}; log:\n{}",
            operator.log_text()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn plugins_named_by_oci_references_are_pulled_served_kept_on_disk_and_every_bad_pull_is_said_where_users_look()
 {
    let cluster = cluster();
    let ns = cluster.fresh_namespace("e2e-oci");
    let registry = Registry::start();
    let reg = registry.addr.clone();

    // Published as a user would: the CLI checks the plugin and prints the pinned reference.
    let post_check = built_plugin("post-check");
    let out = Command::new(env!("CARGO_BIN_EXE_workflow-operator"))
        .args(["plugin", "push"])
        .arg(&post_check)
        .args([&format!("oci://{reg}/plugins/post-check"), "--insecure"])
        .output()
        .expect("run plugin push");
    let stdout = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        out.status.success(),
        "plugin push failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let prefix = format!("oci://{reg}/plugins/post-check@sha256:");
    assert!(
        stdout.starts_with(&prefix) && stdout.len() == prefix.len() + 64,
        "{stdout}"
    );
    let pinned = stdout;
    let good_digest = sha256_hex(&std::fs::read(&post_check).expect("read post-check"));

    // What can go wrong. Registries nobody answers on, or that never answer:
    let down = format!("127.0.0.1:{}", free_port());
    let silent = TcpListener::bind("127.0.0.1:0").expect("a silent registry");
    let silent_addr = silent.local_addr().expect("its address").to_string();
    // Artifacts that are not what they claim (pushed without the CLI's check):
    let garbage = push_raw(&reg, "plugins/garbage", b"not a component".to_vec());
    let wrong = push_raw(
        &reg,
        "plugins/wrong-contract",
        std::fs::read(built("test-plugins", "wrong-contract")).expect("read wrong-contract"),
    );
    let huge = push_raw(&reg, "plugins/huge", vec![0u8; 200 << 20]);
    let at = std::fs::read(built_plugin("at")).expect("read at");
    let tampered = push_raw(&reg, "plugins/tampered", at.clone());
    // The registry's copy of that component changes under it: same size, other bytes.
    let at_blob = registry.blob_file(&format!("sha256:{}", sha256_hex(&at)));
    let mut other = at.clone();
    other[at.len() / 2] ^= 0xff;
    std::fs::write(&at_blob, other).expect("tamper with the blob");
    let absent = format!("oci://{reg}/plugins/post-check@sha256:{}", "0".repeat(64));
    // A registry that wants a login.
    let private = Registry::start_with_login(PULL_USER, PULL_PASSWORD_BCRYPT);
    let decommission = std::fs::read(built_plugin("decommission")).expect("read decommission");
    let private_ref = push_as(
        &private.addr,
        "plugins/decommission",
        decommission.clone(),
        RegistryAuth::Basic(PULL_USER.into(), PULL_PASSWORD.into()),
    );

    let pull_cache = tempfile::tempdir().expect("pull cache");
    let compile_cache = tempfile::tempdir().expect("compile cache");
    let no_dir = tempfile::tempdir().expect("empty plugin directory");
    let insecure = [reg.as_str(), &down, &silent_addr, &private.addr].join(",");
    let flags = |cache: &Path| -> Vec<String> {
        vec![
            "--plugin-insecure-registries".into(),
            insecure.clone(),
            "--plugin-pull-cache".into(),
            cache.display().to_string(),
            "--plugin-pull-timeout-seconds".into(),
            "3".into(),
            "--plugin-compile-cache".into(),
            compile_cache.path().display().to_string(),
        ]
    };
    let args = flags(pull_cache.path());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut operator = Operator::start_with(&ns, no_dir.path(), &args);

    let named = Instant::now();
    name_plugin(&ns, "post-check", &pinned);
    let digest = wait_served(
        &mut operator,
        "post-check",
        "post-check to be pulled and served",
    );
    eprintln!(
        "pulled and served {} ms after the ConfigMap was applied",
        named.elapsed().as_millis()
    );
    assert_eq!(digest, good_digest);
    cluster.apply_yaml_in(&ns, &group_yaml("pulled", &["post-check"], "", ""));
    wait_group_phase(&ns, "pulled", "Completed", &mut operator);

    for (type_name, reference, wanted) in [
        (
            "down",
            format!("oci://{down}/plugins/down:1"),
            "Connection refused",
        ),
        (
            "silent",
            format!("oci://{silent_addr}/plugins/silent:1"),
            "did not answer within 3 s",
        ),
        ("garbage", garbage, "is not a WebAssembly component"),
        (
            "wrong-contract",
            wrong,
            "was built for contract workflow:plugin@0.9.0",
        ),
        (
            "huge",
            huge,
            &format!(
                "is {} bytes, over the limit of {} bytes",
                200 << 20,
                128 << 20
            ),
        ),
        ("tampered", tampered, "do not match its digest"),
        ("absent", absent.clone(), "cannot pull plugin"),
        (
            "no-registry",
            "oci://plugins/x:1".to_string(),
            "names no registry",
        ),
    ] {
        name_plugin(&ns, type_name, &reference);
        let problem = wait_problem(&mut operator, &ns, type_name, wanted);
        eprintln!("{type_name}: {problem}");
    }
    // A private registry: without credentials the pull is refused; with a Secret the
    // install's Role does not name, the operator may not read it; with the install's pull
    // Secret it is pulled and served.
    name_plugin(&ns, "decommission", &private_ref);
    wait_problem(
        &mut operator,
        &ns,
        "decommission",
        "the registry wants a login",
    );
    let annotate = |secret: &str| {
        cluster.kubectl_ok(&[
            "-n",
            &ns,
            "annotate",
            "--overwrite",
            "configmap",
            "decommission",
            &format!("workflow.rxg456.cn/pull-secret={secret}"),
        ]);
    };
    annotate("other");
    wait_problem(
        &mut operator,
        &ns,
        "decommission",
        "may not read its pull secret \"other\"",
    );
    cluster.kubectl_ok(&[
        "-n",
        &ns,
        "create",
        "secret",
        "docker-registry",
        "workflow-operator-plugin-pull",
        &format!("--docker-server={}", private.addr),
        &format!("--docker-username={PULL_USER}"),
        &format!("--docker-password={PULL_PASSWORD}"),
    ]);
    annotate("workflow-operator-plugin-pull");
    let digest = wait_served(
        &mut operator,
        "decommission",
        "decommission to be pulled with the pull Secret",
    );
    assert_eq!(digest, sha256_hex(&decommission));

    // Said on the ConfigMap ...
    cluster.wait_for(
        "a Warning Event on the ConfigMap of the unreachable registry",
        TIMEOUT,
        || {
            list(&ns, "events", None).iter().any(|e| {
                e["involvedObject"]["name"] == "down"
                    && e["type"] == "Warning"
                    && e["reason"] == "PluginInvalid"
                    && e["message"]
                        .as_str()
                        .unwrap_or_default()
                        .contains("cannot pull plugin")
            })
        },
    );
    // ... and on the group that waits for the type.
    cluster.apply_yaml_in(&ns, &group_yaml("waits", &["down"], "", ""));
    cluster.wait_for("the waiting group to say why", TIMEOUT, || {
        let group = get(&ns, "workflowgroup/waits");
        let message = condition_message(&group);
        message.contains("no plugin is loaded for workflow type \"down\"")
            && message.contains(&format!("oci://{down}/plugins/down:1"))
            && message.contains("Connection refused")
    });

    // A reference that breaks keeps the last good version serving.
    name_plugin(&ns, "post-check", &absent);
    let problem = wait_problem(
        &mut operator,
        &ns,
        "post-check",
        "still serving the last good version of post-check",
    );
    assert!(problem.contains("cannot pull plugin"), "{problem}");
    assert_eq!(
        served_digest(&served_plugins(&mut operator), "post-check"),
        Some(good_digest.clone())
    );
    operator.assert_running();

    // A restart pulls nothing it has and compiles nothing it compiled: with the registry
    // gone, the pinned reference is served from the disk, compiled from the cache.
    let compiled = walk_files(compile_cache.path());
    assert!(
        !compiled.is_empty(),
        "nothing was kept in the compile cache"
    );
    name_plugin(&ns, "post-check", &pinned);
    drop(operator);
    drop(registry);
    let mut operator = Operator::start_with(&ns, no_dir.path(), &args);
    let digest = wait_served(
        &mut operator,
        "post-check",
        "post-check to be served from the disk",
    );
    assert_eq!(digest, good_digest);
    assert!(
        !operator.log_text().contains("pulled plugin"),
        "{}",
        operator.log_text()
    );
    cluster.apply_yaml_in(&ns, &group_yaml("from-disk", &["post-check"], "", ""));
    wait_group_phase(&ns, "from-disk", "Completed", &mut operator);
    operator.assert_running();

    // The silent registry held every connection it was given, unanswered.
    silent.set_nonblocking(true).expect("nonblocking");
    let mut held = 0;
    while let Ok((mut conn, _)) = silent.accept() {
        let mut buf = [0u8; 1];
        conn.set_nonblocking(true).expect("nonblocking");
        let _ = conn.read(&mut buf);
        held += 1;
    }
    assert!(held >= 1, "the operator never asked the silent registry");
}
