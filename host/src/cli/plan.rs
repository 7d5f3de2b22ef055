//! `workflow-operator plan -f group.yaml` (also `kubectl workflow plan`): what a group would
//! do, in the order it would do it, before anything runs. Its waves with their targets, each
//! wave's types (with their steps, when the plugins are at hand), when waves may start, and
//! which of its targets are locked now and by whom. Nothing is created.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use anyhow::anyhow;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use workflow_model::text;

use k8s_openapi::api::core::v1::Node;

use crate::api::window::Opening;
use crate::api::{Target, TargetSelector, Workflow, WorkflowGroup};
use crate::controllers::workflowgroup::plan::{Unit, spec_problem, units};
use crate::controllers::workflowgroup::select::nodes_as_targets;
use crate::locks::{ANNOTATION_LOCKS, LABEL_LOCK, LockKind, claims};
use crate::plugin::{Plugin, Runtime, RuntimeConfig};
use crate::render::render_workflow;

/// What each of a group's targets is held by now: the lock Lease names it would take, and the
/// group that holds each (`namespace/name`).
pub type Held = BTreeMap<String, String>;

/// Prints the plan of the group in `file`. Plugins (`*.wasm`) are read from `plugins` when
/// given, to list each type's steps; the locks are read from `lock_namespace` of the current
/// kubeconfig's cluster when there is one. With `server_dry_run`, the API server is asked
/// first to apply the group without keeping it (`kubectl apply --dry-run=server`): its schema,
/// its rules and the admission webhook, where one runs, judge it as they would at apply.
///
/// # Errors
/// The file is not a WorkflowGroup, its spec would be refused, or (with `server_dry_run`) the
/// API server refuses it or cannot be asked.
pub fn plan(
    file: &Path,
    plugins: Option<&Path>,
    lock_namespace: &str,
    server_dry_run: bool,
) -> anyhow::Result<u8> {
    let group = super::plugin::read_group(file)?;
    if let Some(problem) = spec_problem(&group) {
        return Err(anyhow!("{} would not run: {problem}", file.display()));
    }
    let plugins = match plugins {
        Some(dir) => load_plugins(dir)?,
        None => BTreeMap::new(),
    };
    // One client for the Nodes and the locks; without a cluster, both say so.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| anyhow!("cannot start the async runtime: {e}"))?;
    let client = runtime
        .block_on(kube::Client::try_default())
        .map_err(|e| format!("no cluster to ask ({e})"));
    if server_dry_run {
        let client = client
            .as_ref()
            .map_err(|why| anyhow!("--dry-run=server needs a cluster: {why}"))?;
        let namespace = runtime
            .block_on(apply_dry_run(client, &group))
            .map_err(|e| anyhow!("{} would be refused by the API server: {e}", file.display()))?;
        println!(
            "the API server accepts it in namespace {} (a server-side dry run: its schema, its rules and the admission webhook where one runs); nothing is kept",
            word(&namespace)
        );
    }
    let mut group = group;
    if let Some(selector) = group.spec.target_selector.clone()
        && group.spec.targets.is_empty()
        && let Ok(client) = &client
        && let Ok(nodes) = runtime.block_on(nodes_now(client, &selector))
    {
        // As the group would choose them if it started now.
        group.spec.targets = nodes;
    }
    let locks = match &client {
        Ok(client) => runtime.block_on(held_now(client, lock_namespace)),
        Err(why) => Err(why.clone()),
    };
    let now = Timestamp::now().as_second();
    let steps = |type_: &str| steps_of(&group, plugins.get(type_), now);
    print!("{}", preview(&group, &steps, &locks, now));
    Ok(0)
}

/// Applies `group` server-side without keeping it, in its namespace (by default the
/// kubeconfig's): the namespace it was judged in, or the API server's refusal.
async fn apply_dry_run(
    client: &kube::Client,
    group: &WorkflowGroup,
) -> Result<String, kube::Error> {
    let namespace = group
        .namespace()
        .unwrap_or_else(|| client.default_namespace().to_string());
    let groups: Api<WorkflowGroup> = Api::namespaced(client.clone(), &namespace);
    let params = PatchParams::apply("kubectl-workflow-plan").dry_run();
    groups
        .patch(&group.name_any(), &params, &Patch::Apply(group))
        .await?;
    Ok(namespace)
}

/// Every plugin of `dir`, by its type.
fn load_plugins(dir: &Path) -> anyhow::Result<BTreeMap<String, Arc<Plugin>>> {
    let runtime = Runtime::new(RuntimeConfig::default())?;
    let entries = std::fs::read_dir(dir)
        .map_err(|e| anyhow!("cannot read plugin directory {}: {e}", dir.display()))?;
    let mut plugins = BTreeMap::new();
    for path in entries.filter_map(Result::ok).map(|e| e.path()) {
        if path.extension().is_some_and(|x| x == "wasm") {
            let plugin = super::plugin::load(&runtime, &path)?;
            plugins.insert(plugin.type_name().to_string(), plugin);
        }
    }
    Ok(plugins)
}

/// The Nodes `selector` selects now, as targets, or why they could not be listed.
async fn nodes_now(
    client: &kube::Client,
    selector: &TargetSelector,
) -> Result<Vec<Target>, String> {
    let labels = selector.selector().map_err(|e| e.to_string())?;
    let nodes: Api<Node> = Api::all(client.clone());
    let listed = nodes
        .list(&ListParams::default().labels_from(&labels))
        .await
        .map_err(|e| format!("cannot list the Nodes: {e}"))?;
    Ok(nodes_as_targets(&listed.items, selector.address_type).targets)
}

/// The lock Leases of `namespace` and who holds them, or why they could not be read.
async fn held_now(client: &kube::Client, namespace: &str) -> Result<Held, String> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let listed = leases
        .list(&ListParams::default().labels(LABEL_LOCK))
        .await
        .map_err(|e| format!("cannot list the lock Leases in {namespace}: {e}"))?;
    // By Lease name, and by each target a range Lease locks (target keys are no Lease names).
    let mut held = Held::new();
    for lease in &listed.items {
        let holder = crate::locks::holder_name(lease);
        if lease.labels().get(LABEL_LOCK).map(String::as_str) == Some(LockKind::Range.as_str()) {
            let keys = lease.annotations().get(ANNOTATION_LOCKS);
            for key in keys.iter().flat_map(|k| k.lines()) {
                held.insert(key.to_string(), holder.clone());
            }
        }
        held.insert(lease.name_any(), holder);
    }
    Ok(held)
}

/// The plan as people read it, at `now` (Unix seconds), with each type's steps as `steps`
/// lists them.
pub fn preview(
    group: &WorkflowGroup,
    steps: &dyn Fn(&str) -> String,
    locks: &Result<Held, String>,
    now: i64,
) -> String {
    let mut out = String::new();
    let units = units(group);
    let waves = units.iter().filter_map(|u| u.wave).max().unwrap_or(1);
    let spec = &group.spec;
    let _ = writeln!(
        out,
        "WorkflowGroup {}/{} ({}), cluster {}: {} target(s), {} type(s), {waves} wave(s); nothing is created",
        word(&group.namespace().unwrap_or_else(|| "default".into())),
        word(&group.name_any()),
        word(&spec.type_),
        word(&spec.cluster_name),
        spec.targets.len(),
        spec.workflow_steps.len(),
    );
    if let Some(selector) = &spec.target_selector {
        let labels = selector
            .selector()
            .map_or_else(|e| e.to_string(), |s| s.to_string());
        let _ = writeln!(
            out,
            "targets: the Nodes of spec.targetSelector ({}), at their {} address, chosen when the group starts (below: those it selects now)",
            word(&labels),
            selector.address_type.as_str()
        );
    }
    timing(&mut out, group, now);
    let steps: BTreeMap<&str, String> = spec
        .workflow_steps
        .iter()
        .map(|t| (t.as_str(), steps(t)))
        .collect();
    let mut wave = None;
    for (i, unit) in units.iter().enumerate() {
        if i == 0 || unit.wave != wave {
            wave = unit.wave;
            targets_of(&mut out, unit);
        }
        let _ = writeln!(
            out,
            "  {}: {}",
            word(&unit.type_),
            steps.get(unit.type_.as_str()).map_or("", String::as_str)
        );
    }
    locked(&mut out, group, locks);
    out
}

/// The line that opens a wave (or the one set of targets without a rollout).
fn targets_of(out: &mut String, unit: &Unit<'_>) {
    let names: Vec<String> = unit
        .targets
        .iter()
        .map(|t| format!("{} ({})", word(&t.name), word(&t.ip)))
        .collect();
    if names.is_empty() {
        return;
    }
    let _ = match unit.wave {
        Some(w) => writeln!(out, "wave {w}: {}", names.join(", ")),
        None => writeln!(out, "targets: {}", names.join(", ")),
    };
}

/// When waves may start: the rest between them and the window, with its next opening.
fn timing(out: &mut String, group: &WorkflowGroup, now: i64) {
    let Some(rollout) = &group.spec.rollout else {
        return;
    };
    if let Some(pause) = &rollout.pause_between_waves {
        let _ = writeln!(out, "rest between waves: {}", word(pause));
    }
    if let Some(gate) = &rollout.health_gate {
        let _ = writeln!(
            out,
            "health gate before each wave after the first: `{}`",
            word(&gate.command)
        );
    }
    let Some(window) = &rollout.window else {
        return;
    };
    let now = Timestamp::from_second(now).unwrap_or(Timestamp::UNIX_EPOCH);
    let state = match window.schedule().map(|s| s.at(now)) {
        Ok(Opening::Open { closes }) => format!("open now, until {closes}"),
        Ok(Opening::Closed { opens }) => format!("closed now, opens at {opens}"),
        Err(e) => e.to_string(),
    };
    let _ = writeln!(out, "window: {}: {state}", word(&window.shown()));
}

/// A type's steps in the order they may run (`name <- needs`), or why they are not listed.
fn steps_of(group: &WorkflowGroup, plugin: Option<&Arc<Plugin>>, now: i64) -> String {
    let Some(plugin) = plugin else {
        return "(steps: give --plugins with this type's .wasm)".into();
    };
    match render_workflow(group, plugin, now) {
        Ok(workflow) => steps_line(&workflow),
        Err(e) => format!("(its plugin refuses the group: {})", word(&e.to_string())),
    }
}

/// A rendered Workflow's steps in the order they may run: `name <- needs; ...`.
pub fn steps_line(workflow: &Workflow) -> String {
    let steps: Vec<String> = workflow
        .spec
        .steps
        .iter()
        .map(|s| match s.depends_on.as_slice() {
            [] => word(&s.name),
            deps => format!("{} <- {}", word(&s.name), word(&deps.join(","))),
        })
        .collect();
    steps.join("; ")
}

/// Which of the group's locks are held now, and by whom.
fn locked(out: &mut String, group: &WorkflowGroup, locks: &Result<Held, String>) {
    let held = match locks {
        Ok(held) => held,
        Err(why) => {
            let _ = writeln!(out, "locks: not checked: {}", word(why));
            return;
        }
    };
    let claims = claims(group, &group.spec.targets);
    if claims.is_empty() {
        let _ = writeln!(out, "locks: none (spec.exclusion)");
        return;
    }
    let taken: Vec<String> = claims
        .iter()
        .filter_map(|c| {
            let holder = c.leases.iter().find_map(|l| held.get(l));
            let holder = holder.or_else(|| held.get(&c.key))?;
            Some(format!("{} held by {}", word(&c.what), word(holder)))
        })
        .collect();
    if taken.is_empty() {
        let _ = writeln!(out, "locks: all {} free now", claims.len());
    } else {
        let _ = writeln!(
            out,
            "locks: {} of {} held now: {}",
            taken.len(),
            claims.len(),
            taken.join("; ")
        );
    }
}

/// A word of the group or a plugin, printed inert.
fn word(s: &str) -> String {
    text::escape_controls(s).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn maintenance() -> WorkflowGroup {
        serde_saphyr::from_str(include_str!(
            "../../../examples/workflowgroup-maintenance.yaml"
        ))
        .expect("the example")
    }

    fn no_plugins(_type: &str) -> String {
        steps_of(&maintenance(), None, 0)
    }

    #[test]
    fn the_plan_lists_each_wave_in_order_with_its_window_and_who_holds_its_targets() {
        let group = maintenance();
        let lease = claims(&group, &group.spec.targets[1..2])[0].leases[0].clone();
        let held = Ok(Held::from([(lease, "ops/kernel-patch".to_string())]));
        // Friday 2027-01-15T08:00:00Z: the window opens on Monday at 22:00 in Berlin.
        let shown = preview(&group, &no_plugins, &held, 1_800_000_000);
        let lines: Vec<&str> = shown.lines().collect();
        assert_eq!(
            lines,
            [
                "WorkflowGroup default/workflowgroup-maintenance (kernel-upgrade), cluster test-cluster: 3 target(s), 2 type(s), 3 wave(s); nothing is created",
                "rest between waves: 10m",
                "window: Mon,Tue,Wed,Thu 22:00-04:00 Europe/Berlin: closed now, opens at 2027-01-18T21:00:00Z",
                "wave 1: node-1 (192.168.1.121)",
                "  pre-check: (steps: give --plugins with this type's .wasm)",
                "  post-check: (steps: give --plugins with this type's .wasm)",
                "wave 2: node-2 (192.168.1.122)",
                "  pre-check: (steps: give --plugins with this type's .wasm)",
                "  post-check: (steps: give --plugins with this type's .wasm)",
                "wave 3: node-3 (192.168.1.123)",
                "  pre-check: (steps: give --plugins with this type's .wasm)",
                "  post-check: (steps: give --plugins with this type's .wasm)",
                "locks: 1 of 3 held now: node-2 (192.168.1.122) held by ops/kernel-patch",
            ]
        );
    }

    #[test]
    fn a_plan_without_a_cluster_says_the_locks_were_not_checked_and_escapes_what_it_shows() {
        let mut gated = maintenance();
        if let Some(rollout) = gated.spec.rollout.as_mut() {
            rollout.health_gate = Some(crate::api::HealthGate {
                command: "curl -sf http://metrics/ok".into(),
                image: None,
                timeout_seconds: 60,
                retries: 0,
            });
        }
        let shown = preview(&gated, &no_plugins, &Err("none".into()), 1_800_000_000);
        assert!(
            shown.contains(
                "\nrest between waves: 10m\nhealth gate before each wave after the first: `curl -sf http://metrics/ok`\n"
            ),
            "{shown}"
        );
        let mut group = maintenance();
        group.spec.rollout = None;
        group.spec.targets[0].ip = "10.0.0.1\u{1b}[2J".into();
        let shown = preview(
            &group,
            &no_plugins,
            &Err("no cluster to ask".into()),
            1_800_000_000,
        );
        assert!(
            shown.contains("targets: node-1 (10.0.0.1\\u{1b}[2J), node-2"),
            "{shown}"
        );
        assert!(!shown.contains('\u{1b}'), "{shown}");
        assert!(
            shown.ends_with("locks: not checked: no cluster to ask\n"),
            "{shown}"
        );
    }
}
