//! End to end: groups that share targets take turns (per-target locks on Leases), through
//! deletions and operator crashes; on kwok, and on the real node.
//!
//! Who ran when comes from a watch of the pods (`PodWatch`): the API server's order of
//! events, finer than the second that pod timestamps carry.

#[path = "support/operator.rs"]
mod operator;

use std::time::{Duration, Instant};

use operator::*;
use serde_json::Value;
use workflow_e2e::poll_until;

/// The `Succeeded` condition's reason of group `name`.
fn reason_of(ns: &str, name: &str) -> String {
    succeeded_condition(&get(ns, &format!("workflowgroup/{name}")))["reason"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Waits until group `name` waits for locks; returns its condition's message.
fn wait_waiting(ns: &str, name: &str, operator: &mut Operator) -> String {
    let log = operator.log();
    let (message, _) = poll_until(
        Duration::from_millis(100),
        TIMEOUT,
        &format!("group {ns}/{name} to wait for its targets"),
        || {
            operator.assert_running();
            let group = get(ns, &format!("workflowgroup/{name}"));
            let condition = succeeded_condition(&group);
            if condition["reason"] == "WaitingForTargets" {
                return Ok(condition_message(&group));
            }
            Err(group["status"].to_string())
        },
        |status| format!("group {name}: {status}\n{log}"),
    );
    message
}

/// Waits (at most `within`) until group `name` no longer waits for its targets; the time waited.
fn wait_no_longer_waiting(ns: &str, name: &str, within: Duration, operator: &Operator) -> Duration {
    let log = operator.log();
    let ((), waited) = poll_until(
        Duration::from_millis(100),
        within,
        &format!("group {name} to stop waiting for its targets"),
        || {
            let reason = reason_of(ns, name);
            if reason == "WaitingForTargets" {
                Err(reason)
            } else {
                Ok(())
            }
        },
        |reason| format!("{reason}\n{log}"),
    );
    waited
}

/// An `at` group on one target `ip` whose Workflow waits for `schedule` (holding the target).
fn at_group(name: &str, ip: &str, schedule: jiff::Timestamp) -> String {
    let params =
        format!("  params:\n    at:\n      schedule: \"{schedule}\"\n      command: date\n");
    group_yaml_on(name, &["at"], ip, &params, "")
}

fn in_seconds(seconds: i64) -> jiff::Timestamp {
    jiff::Timestamp::from_second(jiff::Timestamp::now().as_second() + seconds).expect("a time")
}

#[test]
fn groups_sharing_a_target_take_turns_and_the_waiting_one_says_who_holds_it() {
    let cluster = cluster();
    let ns = cluster.fresh_namespace("e2e-locks");
    let plugins = plugin_dir(&SEED_TYPES);
    let mut operator = Operator::start(&ns, plugins.path());
    let watch = PodWatch::start(&ns);
    let shared = own_target_ip();
    for name in ["first", "second", "third"] {
        cluster.apply_yaml_in(&ns, &group_yaml_on(name, &SEED_TYPES, &shared, "", ""));
    }
    // A limit of one running group per group type, on targets of their own.
    let one_at_a_time = "  exclusion:\n    scope: Type\n";
    for name in ["typed-1", "typed-2"] {
        let yaml = group_yaml(name, &SEED_TYPES, one_at_a_time, "")
            .replace("type: cluster-expansion", "type: kernel-upgrade");
        cluster.apply_yaml_in(&ns, &yaml);
    }

    // Whichever waits names the target and the group that holds it, in its condition, in
    // `kubectl get`'s Reason column, and in one Event. A wait is brief on a fast machine and
    // the groups move on: the row and the condition are read from one moment, the row first,
    // then the group while it still waits (else both are read again).
    let ((waiting, message), _) = poll_until(
        Duration::from_millis(100),
        TIMEOUT,
        "one of the groups sharing a target to wait for it, as kubectl get shows",
        || {
            let table = cluster.kubectl_ok(&["-n", &ns, "get", "wfg", "first", "second", "third"]);
            let header = table.lines().next().unwrap_or_default();
            if !header.contains("REASON") {
                return Err(format!("no REASON column: {table}"));
            }
            for row in table.lines().skip(1) {
                let name = row.split_whitespace().next().unwrap_or_default();
                if !row.contains("WaitingForTargets") {
                    continue;
                }
                let group = get(&ns, &format!("workflowgroup/{name}"));
                if succeeded_condition(&group)["reason"] == "WaitingForTargets" {
                    return Ok((name.to_string(), condition_message(&group)));
                }
            }
            Err(table)
        },
        |table| format!("{table}\n{}", operator.log()),
    );
    assert!(
        message.contains(&format!("target node-1 ({shared})"))
            && message.contains(&format!("is held by group {ns}/")),
        "{waiting}: {message}"
    );
    // The messages of a group's WaitingForTargets Events.
    let waiting_events = |name: &str| {
        cluster.kubectl_ok(&[
            "-n",
            &ns,
            "get",
            "events",
            "--field-selector",
            &format!("involvedObject.name={name},reason=WaitingForTargets"),
            "-o",
            "jsonpath={.items[*].message}",
        ])
    };
    let events = waiting_events(&waiting);
    assert!(events.contains("is held by group"), "the Event: {events:?}");
    // Whichever of the two typed groups came second waited for the one running. Its wait may
    // be over by now (the reads above take their time on a loaded machine): its Event stays.
    let ((typed, holder), _) = poll_until(
        Duration::from_millis(100),
        TIMEOUT,
        "one of the typed groups to have waited for the other",
        || {
            for (name, other) in [("typed-1", "typed-2"), ("typed-2", "typed-1")] {
                let events = waiting_events(name);
                if !events.is_empty() {
                    return Ok((events, other));
                }
            }
            Err(())
        },
        |()| operator.log().to_string(),
    );
    assert!(
        typed.contains("running slots of group type \"kernel-upgrade\"")
            && typed.contains(&format!("held by group {ns}/{holder}")),
        "{typed}"
    );

    for name in ["first", "second", "third", "typed-1", "typed-2"] {
        wait_group_phase(&ns, name, "Completed", &mut operator);
    }
    let events = watch.stop();
    assert_no_overlap(&events, &["first", "second", "third"]);
    assert_no_overlap(&events, &["typed-1", "typed-2"]);
    // Every lock went back with its group.
    wait_no_locks(&ns, Duration::from_secs(5));
}

#[test]
fn a_group_deleted_while_holding_its_targets_frees_them_at_once() {
    let cluster = cluster();
    let ns = cluster.fresh_namespace("e2e-locks-delete");
    let plugins = plugin_dir(&["at", "pre-check", "setup", "post-check"]);
    let mut operator = Operator::start(&ns, plugins.path());
    let shared = own_target_ip();
    // `holder`'s Workflow waits an hour for its schedule, holding the target.
    cluster.apply_yaml_in(&ns, &at_group("holder", &shared, in_seconds(3600)));
    wait_group_phase(&ns, "holder", "Running", &mut operator);
    cluster.apply_yaml_in(&ns, &group_yaml_on("next", &SEED_TYPES, &shared, "", ""));
    let message = wait_waiting(&ns, "next", &mut operator);
    assert!(
        message.contains(&format!("held by group {ns}/holder")),
        "{message}"
    );
    assert_eq!(locks_left(&ns).len(), 1, "one Lease for the one target");

    let deleted = Instant::now();
    cluster.kubectl_ok(&["-n", &ns, "delete", "wfg", "holder", "--wait=false"]);
    wait_no_longer_waiting(&ns, "next", TIMEOUT, &operator);
    let freed = deleted.elapsed();
    // Not the sweeper (lease time 30 s) nor the periodic look (10 s): the deletion itself.
    assert!(freed < Duration::from_secs(5), "freed after {freed:?}");
    wait_group_phase(&ns, "next", "Completed", &mut operator);
    wait_no_locks(&ns, Duration::from_secs(5));
}

#[test]
fn a_group_waiting_for_its_schedule_gives_its_locks_to_a_group_that_waits() {
    let cluster = cluster();
    let ns = cluster.fresh_namespace("e2e-locks-idle");
    let plugins = plugin_dir(&["at", "pre-check", "setup", "post-check"]);
    let mut operator = Operator::start_with(&ns, plugins.path(), &["--lock-idle-seconds", "2"]);
    let watch = PodWatch::start(&ns);
    let shared = own_target_ip();
    // `holder` takes the target at once and waits 45 s for its schedule; `next`, on the same
    // target, does not wait for that schedule.
    cluster.apply_yaml_in(&ns, &at_group("holder", &shared, in_seconds(45)));
    wait_group_phase(&ns, "holder", "Running", &mut operator);
    cluster.apply_yaml_in(&ns, &group_yaml_on("next", &SEED_TYPES, &shared, "", ""));
    wait_group_phase(&ns, "next", "Completed", &mut operator);
    let gave = cluster.kubectl_ok(&[
        "-n",
        &ns,
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=holder,reason=GaveWay",
        "-o",
        "jsonpath={.items[*].message}",
    ]);
    assert!(
        gave.contains(&format!("gave the locks of its targets to group {ns}/next")),
        "the Event: {gave:?}\n{}",
        operator.log()
    );
    // Its schedule comes: it takes the target again, and runs.
    wait_group_phase(&ns, "holder", "Completed", &mut operator);
    let events = watch.stop();
    assert_no_overlap(&events, &["holder", "next"]);
    wait_no_locks(&ns, Duration::from_secs(5));
}

#[test]
fn locks_held_through_an_operator_crash_are_neither_broken_nor_stuck() {
    let cluster = cluster();
    let ns = cluster.fresh_namespace("e2e-locks-crash");
    let plugins = plugin_dir(&["at", "pre-check", "setup", "post-check"]);
    let lease_args = ["--lock-lease-seconds", "6"];
    let mut operator = Operator::start_with(&ns, plugins.path(), &lease_args);
    let watch = PodWatch::start(&ns);
    let (t1, t2) = (own_target_ip(), own_target_ip());
    // `soon` holds t1 until its schedule, a few seconds after the crash; `after` waits for it.
    cluster.apply_yaml_in(&ns, &at_group("soon", &t1, in_seconds(12)));
    // `gone` holds t2 for an hour, and is deleted while no operator runs; `heir` waits for it.
    cluster.apply_yaml_in(&ns, &at_group("gone", &t2, in_seconds(3600)));
    wait_group_phase(&ns, "soon", "Running", &mut operator);
    wait_group_phase(&ns, "gone", "Running", &mut operator);
    cluster.apply_yaml_in(&ns, &group_yaml_on("after", &SEED_TYPES, &t1, "", ""));
    cluster.apply_yaml_in(&ns, &group_yaml_on("heir", &SEED_TYPES, &t2, "", ""));
    wait_waiting(&ns, "after", &mut operator);
    wait_waiting(&ns, "heir", &mut operator);

    operator.crash();
    cluster.kubectl_ok(&["-n", &ns, "delete", "wfg", "gone", "--wait=false"]);
    let held = locks_left(&ns);
    assert_eq!(held.len(), 2, "the crash gave nothing back: {held:?}");
    let mut operator = Operator::start_with(&ns, plugins.path(), &lease_args);

    // The deleted holder's lock goes within the lease time; the live holder keeps its own
    // until it finishes, then the group waiting for it runs.
    let waited = wait_no_longer_waiting(&ns, "heir", Duration::from_secs(20), &operator);
    assert!(
        waited < Duration::from_secs(6),
        "within the lease time: {waited:?}"
    );
    for name in ["soon", "after", "heir"] {
        wait_group_phase(&ns, name, "Completed", &mut operator);
    }
    let events = watch.stop();
    assert_no_overlap(&events, &["soon", "after"]);
    wait_no_locks(&ns, Duration::from_secs(6));
}

/// `yaml` (of [`group_yaml_on`], on one target) with `more` targets after its first.
fn with_targets(yaml: &str, more: &[&str]) -> String {
    let first = "    role: Master\n";
    let extra: String = more
        .iter()
        .enumerate()
        .map(|(i, ip)| format!("  - name: node-{}\n    ip: {ip}\n    role: Worker\n", i + 2))
        .collect();
    yaml.replacen(first, &format!("{first}{extra}"), 1)
}

/// The range a target of the test cluster falls in, as the operator hashes it.
fn range_of(ip: &str) -> u8 {
    use sha2::Digest;
    sha2::Sha256::digest(format!("test-cluster/{ip}").as_bytes())[0]
}

#[test]
fn a_group_locking_by_range_takes_turns_with_groups_on_its_targets_only() {
    let cluster = cluster();
    let ns = cluster.fresh_namespace("e2e-locks-range");
    let plugins = plugin_dir(&["at", "pre-check", "setup", "post-check"]);
    // Groups of more than two targets lock by range.
    let ranges = ["--lock-ranges-above", "2"];
    let mut operator = Operator::start_with(&ns, plugins.path(), &ranges);
    let watch = PodWatch::start(&ns);

    // A group by target holds one; a large group that needs it waits, naming who holds it.
    let (shared, a, b) = (own_target_ip(), own_target_ip(), own_target_ip());
    cluster.apply_yaml_in(&ns, &at_group("holder", &shared, in_seconds(3600)));
    wait_group_phase(&ns, "holder", "Running", &mut operator);
    let large = with_targets(
        &group_yaml_on("large", &SEED_TYPES, &shared, "", ""),
        &[&a, &b],
    );
    cluster.apply_yaml_in(&ns, &large);
    let message = wait_waiting(&ns, "large", &mut operator);
    assert!(
        message.contains(&format!(
            "target node-1 ({shared}) is held by group {ns}/holder"
        )),
        "{message}"
    );
    let deleted = Instant::now();
    cluster.kubectl_ok(&["-n", &ns, "delete", "wfg", "holder", "--wait=false"]);
    wait_no_longer_waiting(&ns, "large", TIMEOUT, &operator);
    let freed = deleted.elapsed();
    assert!(
        freed < Duration::from_secs(5),
        "woken by the delete: {freed:?}"
    );
    wait_group_phase(&ns, "large", "Completed", &mut operator);

    // A large group holds its ranges: a few Leases that list its targets, none per target.
    let (shared, a, b) = (own_target_ip(), own_target_ip(), own_target_ip());
    let big = with_targets(&at_group("big", &shared, in_seconds(3600)), &[&a, &b]);
    cluster.apply_yaml_in(&ns, &big);
    wait_group_phase(&ns, "big", "Running", &mut operator);
    let leases = list(&ns, "leases", Some("workflow.rxg456.cn/lock"));
    let mut locked: Vec<String> = Vec::new();
    for lease in &leases {
        assert_eq!(
            lease["metadata"]["labels"]["workflow.rxg456.cn/lock"], "range",
            "{lease}"
        );
        let holder = lease["spec"]["holderIdentity"].as_str().unwrap_or_default();
        assert!(holder.starts_with(&format!("{ns}/big/")), "{lease}");
        let annotations = &lease["metadata"]["annotations"];
        let locks = annotations["workflow.rxg456.cn/locks"]
            .as_str()
            .unwrap_or_default();
        locked.extend(locks.lines().map(str::to_string));
    }
    assert!((1..=3).contains(&leases.len()), "{leases:?}");
    locked.sort();
    let mut want: Vec<String> = [&shared, &a, &b]
        .iter()
        .map(|ip| format!("test-cluster/{ip}"))
        .collect();
    want.sort();
    assert_eq!(locked, want);

    // A group on one of its targets waits for it; a group on another target of the same
    // range does not.
    cluster.apply_yaml_in(&ns, &group_yaml_on("small", &SEED_TYPES, &a, "", ""));
    let neighbour = std::iter::repeat_with(own_target_ip)
        .find(|ip| range_of(ip) == range_of(&a))
        .expect("an address in the range");
    let neighbour = group_yaml_on("neighbour", &SEED_TYPES, &neighbour, "", "");
    cluster.apply_yaml_in(&ns, &neighbour);
    let message = wait_waiting(&ns, "small", &mut operator);
    assert!(
        message.contains(&format!("target node-1 ({a}) is held by group {ns}/big")),
        "{message}"
    );
    wait_group_phase(&ns, "neighbour", "Completed", &mut operator);
    cluster.kubectl_ok(&["-n", &ns, "delete", "wfg", "big", "--wait=false"]);
    wait_group_phase(&ns, "small", "Completed", &mut operator);

    // All at once: two large groups sharing a target, and small groups on some of theirs.
    let t: Vec<String> = (0..5).map(|_| own_target_ip()).collect();
    let on = |name: &str, ips: &[&String]| {
        let yaml = group_yaml_on(name, &SEED_TYPES, ips[0], "", "");
        let more: Vec<&str> = ips[1..].iter().map(|s| s.as_str()).collect();
        with_targets(&yaml, &more)
    };
    let groups = [
        ("l1", on("l1", &[&t[0], &t[1], &t[2]])),
        ("l2", on("l2", &[&t[2], &t[3], &t[4]])),
        ("s1", on("s1", &[&t[0]])),
        ("s2", on("s2", &[&t[3]])),
        ("s3", on("s3", &[&t[4]])),
    ];
    let all: String = groups.iter().map(|(_, y)| format!("---\n{y}")).collect();
    cluster.apply_yaml_in(&ns, &all);
    for (name, _) in &groups {
        wait_group_phase(&ns, name, "Completed", &mut operator);
    }
    let events = watch.stop();
    for pair in [["l1", "l2"], ["l1", "s1"], ["l2", "s2"], ["l2", "s3"]] {
        assert_no_overlap(&events, &pair);
    }
    wait_no_locks(&ns, Duration::from_secs(5));
}

#[test]
fn on_the_real_node_groups_sharing_a_target_take_turns() {
    let cluster = cluster();
    cluster.require_real_node();
    let ns = cluster.fresh_namespace("e2e-locks-real");
    let plugins = plugin_dir(&["at"]);
    let mut operator = Operator::start(&ns, plugins.path());
    let watch = PodWatch::start(&ns);
    let target: Value = serde_json::json!([{"name": "node-1", "ip": own_target_ip()}]);
    let names = ["real-1", "real-2", "real-3"];
    for name in names {
        let group = real_node_at_group(
            name,
            serde_json::json!({"command": "sleep 1"}),
            serde_json::json!({}),
            target.clone(),
        );
        cluster.apply_yaml_in(&ns, &group);
    }
    for name in names {
        wait_group_phase(&ns, name, "Completed", &mut operator);
    }
    let events = watch.stop();
    assert_no_overlap(&events, &names);
    wait_no_locks(&ns, Duration::from_secs(5));
}
