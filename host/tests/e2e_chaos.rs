//! Chaos, end to end: while several groups run, the operator is killed again and again at
//! random moments, kube-apiserver is restarted, etcd is restarted, and a plugin is replaced by
//! a broken version and then by a good one. Each time every group must end Completed with
//! exactly one Workflow per type and one pod per step attempt; but for the kills, the one
//! operator process must recover on its own. Each recovery time is printed.
//!
//! Restarting the API server or etcd disturbs every other test using the cluster at that
//! moment. Cargo runs test binaries one after another, so these tests live in a binary of their
//! own, and run one at a time ([`serial`]). To try them while other tests use the local
//! cluster, start a second one: `WORKFLOW_CLUSTER_DIR=/tmp/c2 tests/cluster/cluster.sh up`,
//! then run `cargo test --test e2e_chaos` with the same `WORKFLOW_CLUSTER_DIR`.

#[path = "support/operator.rs"]
mod operator;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use operator::{
    Operator, SEED_TYPES, TIMEOUT, built_plugin, cluster, group_yaml, plugin_dir, replace_plugin,
    seed_steps, served_digest, served_plugins, text,
};
use serde_json::Value;
use workflow_e2e::{poll_until, repo_root};
use workflow_operator::api::{LABEL_ATTEMPT, LABEL_GROUP_NAME, LABEL_STEP, LABEL_WORKFLOW_TYPE};

/// Pods a group of the seed sample runs: pre-check 2, setup 2, post-check 1.
const SEED_PODS: usize = 5;

/// Holds the cluster for one test: the tests of this binary restart what the others use.
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    // A failed test poisons the lock; the next one still runs.
    SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A small pseudo-random generator (xorshift64*): the seed is printed, and `CHAOS_SEED` replays
/// a run.
struct Chaos(u64);

impl Chaos {
    fn new() -> Chaos {
        let seed = std::env::var("CHAOS_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| operator::now_millis() as u64);
        eprintln!("chaos seed {seed} (CHAOS_SEED={seed} replays it)");
        Chaos(seed.max(1))
    }

    /// A duration in `[low, high)`.
    fn between(&mut self, low: Duration, high: Duration) -> Duration {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let r = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d);
        let span = (high - low).as_millis() as u64;
        low + Duration::from_millis(r % span.max(1))
    }
}

/// The groups, Workflows and pods of a namespace at one moment, read in one request.
struct Snapshot {
    groups: Vec<Value>,
    workflows: Vec<Value>,
    pods: Vec<Value>,
}

impl Snapshot {
    /// Reads `ns`; `None` while the API server does not answer.
    fn take(ns: &str) -> Option<Snapshot> {
        let out = cluster().kubectl(&[
            "--request-timeout=5s",
            "-n",
            ns,
            "get",
            "workflowgroups,workflows,pods",
            "-o",
            "json",
        ]);
        if !out.status.success() {
            return None;
        }
        let all: Value = serde_json::from_slice(&out.stdout).ok()?;
        let mut snapshot = Snapshot {
            groups: Vec::new(),
            workflows: Vec::new(),
            pods: Vec::new(),
        };
        for item in all["items"].as_array()? {
            match item["kind"].as_str() {
                Some("WorkflowGroup") => snapshot.groups.push(item.clone()),
                Some("Workflow") => snapshot.workflows.push(item.clone()),
                Some("Pod") => snapshot.pods.push(item.clone()),
                _ => {}
            }
        }
        Some(snapshot)
    }

    /// What the operator has written so far, as one number that only grows: pods and
    /// Workflows created, Workflows and groups completed.
    fn progress(&self) -> usize {
        let completed = |objs: &[Value]| {
            objs.iter()
                .filter(|o| o["status"]["phase"] == "Completed")
                .count()
        };
        self.pods.len()
            + self.workflows.len()
            + completed(&self.workflows)
            + completed(&self.groups)
    }

    fn all_completed(&self, groups: &[String]) -> bool {
        groups.iter().all(|name| {
            self.groups.iter().any(|g| {
                g["metadata"]["name"] == name.as_str() && g["status"]["phase"] == "Completed"
            })
        })
    }

    fn describe(&self) -> String {
        let line = |o: &Value| {
            format!(
                "  {} {} {}",
                text(o, "/kind"),
                text(o, "/metadata/name"),
                text(o, "/status/phase")
            )
        };
        self.groups
            .iter()
            .chain(&self.workflows)
            .chain(&self.pods)
            .map(line)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Polls `ns` until the operator's progress passes `from`; the time waited.
fn wait_progress_beyond(ns: &str, from: usize, operator: &mut Operator) -> Duration {
    let log = operator.log();
    let ((), waited) = poll_until(
        Duration::from_millis(50),
        TIMEOUT,
        &format!("progress in {ns} beyond {from}"),
        || {
            let snapshot = Snapshot::take(ns);
            if snapshot.as_ref().is_some_and(|s| s.progress() > from) {
                return Ok(());
            }
            operator.assert_running();
            Err(snapshot)
        },
        |snapshot| match snapshot {
            Some(s) => format!("progress {}:\n{}\n{log}", s.progress(), s.describe()),
            None => format!("the API server did not answer\n{log}"),
        },
    );
    waited
}

/// Waits until every group in `groups` is Completed; the time waited.
fn wait_all_completed(ns: &str, groups: &[String], operator: &mut Operator) -> Duration {
    let log = operator.log();
    let ((), waited) = poll_until(
        Duration::from_millis(100),
        TIMEOUT,
        &format!("every group of {ns} to complete"),
        || {
            let snapshot = Snapshot::take(ns);
            if snapshot.as_ref().is_some_and(|s| s.all_completed(groups)) {
                return Ok(());
            }
            operator.assert_running();
            Err(snapshot)
        },
        |snapshot| {
            format!(
                "{}\n{log}",
                snapshot.map(|s| s.describe()).unwrap_or_default()
            )
        },
    );
    waited
}

/// Applies a seed-sample group named `name` in `ns`; returns the name.
fn apply_group(ns: &str, name: &str) -> String {
    cluster().apply_yaml_in(ns, &group_yaml(name, &SEED_TYPES, "", ""));
    name.to_string()
}

/// The outcome every chaos test demands: each group Completed with 3/3, exactly one Workflow
/// per type, and exactly one pod per step attempt (pods counted by name: the seed's five steps,
/// each at attempt 1, and no pod name run twice).
fn assert_every_group_completed_once(ns: &str, groups: &[String]) {
    let snapshot = Snapshot::take(ns).expect("the API server answers");
    let of_group = |objs: &[Value], group: &str| -> Vec<Value> {
        objs.iter()
            .filter(|o| o["metadata"]["labels"][LABEL_GROUP_NAME] == group)
            .cloned()
            .collect()
    };
    for group in groups {
        let g = snapshot
            .groups
            .iter()
            .find(|g| g["metadata"]["name"] == group.as_str())
            .unwrap_or_else(|| panic!("no group {group}"));
        assert_eq!(g["status"]["phase"], "Completed", "{group}: {g}");
        assert_eq!(g["status"]["progress"], "3/3", "{group}");

        let workflows = of_group(&snapshot.workflows, group);
        let mut types: Vec<&str> = workflows.iter().map(|w| text(w, "/spec/type")).collect();
        types.sort_unstable();
        assert_eq!(
            types,
            ["post-check", "pre-check", "setup"],
            "exactly one Workflow per type in {group}"
        );
        assert!(
            workflows
                .iter()
                .all(|w| w["status"]["phase"] == "Completed"),
            "{group}: {workflows:?}"
        );

        let pods = of_group(&snapshot.pods, group);
        let mut names: Vec<&str> = pods.iter().map(|p| text(p, "/metadata/name")).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(
            names.len(),
            SEED_PODS,
            "exactly one pod per step in {group}: {names:?}"
        );
        let label = |p: &Value, key: &str| {
            text(p, &format!("/metadata/labels/{}", key.replace('/', "~1"))).to_string()
        };
        let mut steps: Vec<(String, String)> = pods
            .iter()
            .map(|p| (label(p, LABEL_WORKFLOW_TYPE), label(p, LABEL_STEP)))
            .collect();
        steps.sort_unstable();
        let mut expected: Vec<(String, String)> = SEED_TYPES
            .iter()
            .flat_map(|t| {
                let steps = seed_steps(t);
                steps
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|s| (t.to_string(), text(s, "/name").to_string()))
                    .collect::<Vec<_>>()
            })
            .collect();
        expected.sort_unstable();
        assert_eq!(steps, expected, "the seed's steps, once each, in {group}");
        for pod in &pods {
            assert_eq!(
                pod["metadata"]["labels"][LABEL_ATTEMPT],
                "1",
                "a first attempt only: {}",
                text(pod, "/metadata/name")
            );
            assert_eq!(pod["status"]["phase"], "Succeeded");
        }
    }
    assert_eq!(
        snapshot.pods.len(),
        SEED_PODS * groups.len(),
        "no pod besides the groups' steps"
    );
    assert_no_pod_name_ran_twice(ns);
}

/// A pod deleted and created again under the same name would run its step twice with the
/// count by name unchanged: the scheduler's `Scheduled` Events name each pod's uid, and no name
/// may have two. (Events can be lost while the API server is away, so this bounds from above.)
fn assert_no_pod_name_ran_twice(ns: &str) {
    let events = cluster().kubectl_json(&[
        "-n",
        ns,
        "get",
        "events.events.k8s.io",
        "--field-selector",
        "reason=Scheduled",
    ]);
    let mut seen: std::collections::BTreeMap<String, String> = Default::default();
    for e in events["items"].as_array().cloned().unwrap_or_default() {
        let name = text(&e, "/regarding/name").to_string();
        let uid = text(&e, "/regarding/uid").to_string();
        if let Some(first) = seen.insert(name.clone(), uid.clone()) {
            assert_eq!(first, uid, "pod {name} was created twice");
        }
    }
}

/// `tests/cluster/cluster.sh <args>` on the cluster of `state_dir`; panics if it fails.
fn cluster_sh(state_dir: &Path, args: &[&str]) {
    let script = repo_root().join("tests/cluster/cluster.sh");
    let out = Command::new("bash")
        .arg(&script)
        .args(args)
        .env(workflow_e2e::CLUSTER_DIR_ENV, state_dir)
        .stdin(Stdio::null())
        .output()
        .expect("run cluster.sh");
    assert!(
        out.status.success(),
        "cluster.sh {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The local cluster's state directory. These tests restart its control plane, which only a
/// cluster of `tests/cluster/cluster.sh` lets them do: against any other they fail saying so
/// rather than pass without testing anything.
fn restartable_cluster() -> PathBuf {
    cluster().local_state_dir().unwrap_or_else(|| {
        panic!(
            "{} is not a cluster of tests/cluster/cluster.sh: its apiserver and etcd cannot be \
             restarted; run these tests against the local cluster (unset WORKFLOW_E2E_KUBECONFIG)",
            cluster().kubeconfig().display()
        )
    })
}

/// Asserts that `operator` is the process that started the test and that it never panicked.
fn assert_same_process_never_panicked(operator: &mut Operator, pid: u32) {
    operator.assert_running();
    assert_eq!(operator.pid(), pid);
    let log = operator.log_text();
    assert!(!log.contains("panicked"), "the operator panicked: {log}");
}

#[test]
fn an_operator_killed_again_and_again_at_random_moments_leaves_every_group_completed_once() {
    let _serial = serial();
    let mut chaos = Chaos::new();
    let ns = cluster().fresh_namespace("chaos-kill");
    let plugins = plugin_dir(&SEED_TYPES);
    let mut groups: Vec<String> = (0..3)
        .map(|i| apply_group(&ns, &format!("group-{i}")))
        .collect();

    let mut before = 0;
    let mut spawned = Instant::now();
    let mut operator = Operator::spawn(&ns, plugins.path(), &[]);
    for kill in 1..=5 {
        // Each operator is killed at a random moment of its work: 0.2-2 s after its controllers
        // start (plugin loading before that writes nothing). How long it took to start and to
        // make its first write is printed.
        operator.wait_for_log("controllers started");
        let start_up = spawned.elapsed();
        let lifetime = chaos.between(Duration::from_millis(200), Duration::from_millis(2000));
        let started = Instant::now();
        let mut first_progress = None;
        while started.elapsed() < lifetime {
            if first_progress.is_none()
                && Snapshot::take(&ns).is_some_and(|s| s.progress() > before)
            {
                first_progress = Some(spawned.elapsed());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        operator.assert_running();
        let alive = started.elapsed();
        operator.crash();
        eprintln!(
            "kill {kill}: started in {} ms, first progress {}, SIGKILL {} ms after its controllers started",
            start_up.as_millis(),
            first_progress.map_or("none before the kill".into(), |d| format!(
                "{} ms after it was spawned",
                d.as_millis()
            )),
            alive.as_millis(),
        );
        // A group arrives while no operator runs.
        groups.push(apply_group(&ns, &format!("while-down-{kill}")));
        before = Snapshot::take(&ns).map_or(0, |s| s.progress());
        spawned = Instant::now();
        operator = Operator::spawn(&ns, plugins.path(), &[]);
    }

    wait_progress_beyond(&ns, before, &mut operator);
    let first = spawned.elapsed();
    wait_all_completed(&ns, &groups, &mut operator);
    eprintln!(
        "after the last kill: first progress {} ms, all {} groups Completed {} ms after the restart",
        first.as_millis(),
        groups.len(),
        spawned.elapsed().as_millis()
    );
    assert_every_group_completed_once(&ns, &groups);
}

/// Restarts a control-plane process with `cluster.sh <command>` while groups run, without
/// touching the operator, and checks that it recovers: progress resumes, every group completes
/// once, and a group created afterwards (seen only through re-established watches) completes.
fn the_operator_rides_out_a_restart_of(what: &str, command: &[&str]) {
    let state_dir = restartable_cluster();
    let ns = cluster().fresh_namespace(&format!("chaos-{what}"));
    let plugins = plugin_dir(&SEED_TYPES);
    let mut operator = Operator::start(&ns, plugins.path());
    let pid = operator.pid();
    // Enough groups that work is left when the component stops: four seed groups on kwok
    // could all complete between the first progress and the stop (`cluster.sh` starting up).
    let mut groups: Vec<String> = (0..12)
        .map(|i| apply_group(&ns, &format!("group-{i}")))
        .collect();
    wait_progress_beyond(&ns, 0, &mut operator);
    let before = Snapshot::take(&ns).expect("the API server answers before the restart");
    assert!(
        !before.all_completed(&groups),
        "every group completed before {what} went away: nothing left to recover"
    );

    let restart = Instant::now();
    cluster_sh(&state_dir, command);
    let back = Instant::now();
    // Progress beyond what was done when it went away: nothing moves while it is down, and the
    // operator may be back at work before `cluster.sh` sees /readyz and returns.
    let first = wait_progress_beyond(&ns, before.progress(), &mut operator);
    wait_all_completed(&ns, &groups, &mut operator);
    let done = back.elapsed();
    eprintln!(
        "{what} restart: down and back in {} ms; from the API server ready again: first progress {} ms, all {} groups Completed {} ms",
        (back - restart).as_millis(),
        first.as_millis(),
        groups.len(),
        done.as_millis(),
    );

    let applied = Instant::now();
    groups.push(apply_group(&ns, "after-restart"));
    wait_all_completed(&ns, &groups, &mut operator);
    eprintln!(
        "{what} restart: a group created afterwards Completed {} ms after kubectl apply",
        applied.elapsed().as_millis()
    );
    assert_every_group_completed_once(&ns, &groups);
    assert_same_process_never_panicked(&mut operator, pid);
}

#[test]
fn a_restarted_api_server_is_ridden_out_without_restarting_the_operator() {
    let _serial = serial();
    the_operator_rides_out_a_restart_of("kube-apiserver", &["restart-apiserver"]);
}

#[test]
fn a_restarted_etcd_is_ridden_out_without_restarting_the_operator() {
    let _serial = serial();
    the_operator_rides_out_a_restart_of("etcd", &["restart-etcd"]);
}

#[test]
fn a_plugin_replaced_by_a_broken_version_and_then_a_good_one_keeps_every_group_running() {
    let _serial = serial();
    let ns = cluster().fresh_namespace("chaos-plugin");
    let plugins = plugin_dir(&SEED_TYPES);
    let mut operator = Operator::start(&ns, plugins.path());
    let pid = operator.pid();
    let good = served_digest(&served_plugins(&mut operator), "setup").expect("setup is served");
    let mut groups: Vec<String> = (0..3)
        .map(|i| apply_group(&ns, &format!("group-{i}")))
        .collect();
    wait_progress_beyond(&ns, 0, &mut operator);

    // Broken while the groups are on pre-check: their setup Workflows start under it.
    let broken = Instant::now();
    replace_plugin(
        plugins.path(),
        "setup",
        b"this is not a WebAssembly component",
    );
    let (served, _) = poll_until(
        Duration::from_millis(20),
        TIMEOUT,
        "the broken plugin to be reported on /plugins",
        || {
            let served = served_plugins(&mut operator);
            if served["problems"].to_string().contains("setup.wasm") {
                Ok(served)
            } else {
                Err(served)
            }
        },
        |served| format!("/plugins: {served}"),
    );
    let problems = served["problems"].to_string();
    assert!(
        problems.contains("still serving the last good version of setup"),
        "{problems}"
    );
    assert_eq!(served_digest(&served, "setup"), Some(good.clone()));
    let reported = broken.elapsed();
    groups.push(apply_group(&ns, "while-broken"));

    let fixed = Instant::now();
    replace_plugin(
        plugins.path(),
        "setup",
        &std::fs::read(built_plugin("setup")).expect("read the built plugin"),
    );
    let (served, _) = poll_until(
        Duration::from_millis(20),
        TIMEOUT,
        "the problem to be cleared on /plugins",
        || {
            let served = served_plugins(&mut operator);
            if served["problems"].as_array().is_some_and(Vec::is_empty) {
                Ok(served)
            } else {
                Err(served)
            }
        },
        |served| format!("/plugins: {served}"),
    );
    assert_eq!(served_digest(&served, "setup"), Some(good.clone()));
    let cleared = fixed.elapsed();
    let done = wait_all_completed(&ns, &groups, &mut operator);
    eprintln!(
        "plugin swap: the broken version reported on /plugins after {} ms; the good one back and the problem cleared after {} ms; all {} groups Completed {} ms later",
        reported.as_millis(),
        cleared.as_millis(),
        groups.len(),
        done.as_millis()
    );
    assert_every_group_completed_once(&ns, &groups);
    assert_same_process_never_panicked(&mut operator, pid);
}

/// Pods of groups with this label run for 1.5 s on kwok (`tests/cluster/kwok/pod-complete-slow.yaml`).
const SLOW_LABEL: &str = "e2e.workflow.rxg456.cn/slow";

/// A seed group on the targets with addresses `ips`, its pods slow.
fn apply_shared_group(ns: &str, name: &str, ips: &[&str]) -> String {
    let labels = format!("    {SLOW_LABEL}: \"true\"\n");
    let more: String = ips[1..]
        .iter()
        .enumerate()
        .map(|(i, ip)| format!("  - name: node-{}\n    ip: {ip}\n", i + 2))
        .collect();
    let yaml = operator::group_yaml_on(name, &SEED_TYPES, ips[0], "", &labels)
        .replace("    role: Master\n", &format!("    role: Master\n{more}"));
    cluster().apply_yaml_in(ns, &yaml);
    name.to_string()
}

/// Per group, from its first pod's creation to its last pod's finish, in whole seconds (what
/// the API server keeps).
fn group_spans(ns: &str) -> std::collections::BTreeMap<String, (i64, i64)> {
    let snapshot = Snapshot::take(ns).expect("the API server answers");
    let second = |v: &Value| -> i64 {
        v.as_str()
            .and_then(|t| t.parse::<jiff::Timestamp>().ok())
            .map(|t| t.as_second())
            .unwrap_or_else(|| panic!("not a time: {v}"))
    };
    let mut spans = std::collections::BTreeMap::new();
    for pod in &snapshot.pods {
        let group = text(
            pod,
            &format!("/metadata/labels/{}", LABEL_GROUP_NAME.replace('/', "~1")),
        );
        let created = second(&pod["metadata"]["creationTimestamp"]);
        let finished =
            second(&pod["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"]);
        let span = spans
            .entry(group.to_string())
            .or_insert((created, finished));
        span.0 = span.0.min(created);
        span.1 = span.1.max(finished);
    }
    spans
}

#[test]
fn groups_sharing_targets_take_turns_through_operator_kills_and_an_api_server_restart() {
    let _serial = serial();
    let state_dir = restartable_cluster();
    let mut chaos = Chaos::new();
    let ns = cluster().fresh_namespace("chaos-locks");
    let plugins = plugin_dir(&SEED_TYPES);
    // Six targets; each group takes two neighbours, so every group shares a target with two
    // others and needs both at once.
    let ips: Vec<String> = (0..6).map(|_| operator::own_target_ip()).collect();
    let pairs: Vec<[usize; 2]> = (0..6)
        .map(|i| [i, (i + 1) % 6])
        .chain([[0, 3], [2, 5]])
        .collect();
    let groups: Vec<String> = pairs
        .iter()
        .enumerate()
        .map(|(g, [a, b])| apply_shared_group(&ns, &format!("shared-{g}"), &[&ips[*a], &ips[*b]]))
        .collect();

    let mut operator = Operator::spawn(&ns, plugins.path(), &["--lock-lease-seconds", "6"]);
    for kill in 1..=3 {
        operator.wait_for_log("controllers started");
        let lifetime = chaos.between(Duration::from_millis(500), Duration::from_millis(4000));
        std::thread::sleep(lifetime);
        operator.assert_running();
        operator.crash();
        eprintln!(
            "kill {kill}: SIGKILL {} ms after its controllers started",
            lifetime.as_millis()
        );
        operator = Operator::spawn(&ns, plugins.path(), &["--lock-lease-seconds", "6"]);
    }
    operator.wait_for_log("controllers started");
    let snapshot = Snapshot::take(&ns).expect("the API server answers");
    assert!(
        !snapshot.all_completed(&groups),
        "every group completed before the restart"
    );
    cluster_sh(&state_dir, &["restart-apiserver"]);
    wait_all_completed(&ns, &groups, &mut operator);
    assert_every_group_completed_once(&ns, &groups);

    let spans = group_spans(&ns);
    for (i, a) in pairs.iter().enumerate() {
        for (j, b) in pairs.iter().enumerate().skip(i + 1) {
            if !a.iter().any(|t| b.contains(t)) {
                continue;
            }
            let (sa, sb) = (spans[&groups[i]], spans[&groups[j]]);
            assert!(
                sa.1 <= sb.0 || sb.1 <= sa.0,
                "{} {sa:?} and {} {sb:?} share a target and ran at the same time: {spans:?}",
                groups[i],
                groups[j]
            );
        }
    }
    // Every lock went back (a gone holder's within the 6 s lease time).
    operator::wait_no_locks(&ns, Duration::from_secs(12));
}
