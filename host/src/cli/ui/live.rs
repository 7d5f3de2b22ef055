//! What the web view shows, kept live: WorkflowGroups and Workflows watched with the user's
//! own credentials into caches, a counter that moves on every change, and the JSON of the list
//! and of one group (its [`GroupView`], its Events, its locks) built from them.

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::StreamExt as _;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ListParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Client, Resource as _, ResourceExt};
use serde::Serialize;
use tokio::sync::watch;

use crate::api::{LABEL_GROUP_NAME, Phase, Workflow, WorkflowGroup};
use crate::controllers::reason::WAITING_FOR_TARGETS;
use crate::controllers::status::succeeded;
use crate::locks::{
    ANNOTATION_LOCKS, LABEL_LOCK, LABEL_LOCK_HOLDER, claims, holder_name, locked_by,
};
use crate::provenance;
use crate::view::GroupView;

/// Most Events listed for a group, the newest.
const MAX_EVENTS: usize = 50;

/// The caches of groups and Workflows the view reads, and what it may ask the API server.
#[derive(Clone)]
pub struct Live {
    client: Client,
    /// The namespace watched; none for all the user may list.
    namespace: Option<String>,
    lock_namespace: String,
    groups: Store<WorkflowGroup>,
    workflows: Store<Workflow>,
    /// Moves on every change of a group or a Workflow.
    changes: watch::Receiver<u64>,
    /// Why each watch fails now (forbidden, the API server gone), for the page to say.
    problems: [Problem; 2],
}

/// A row of the list of groups.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GroupRow {
    namespace: String,
    name: String,
    #[serde(rename = "type")]
    type_: String,
    phase: Phase,
    paused: bool,
    progress: Option<String>,
    workflows: String,
    failed_targets: Option<u32>,
    reason: Option<String>,
    message: Option<String>,
    started: Option<Time>,
    finished: Option<Time>,
}

/// What a group's page shows beyond its objects.
#[derive(Serialize, Default)]
pub struct Extras {
    events: Vec<EventRow>,
    locks: Locks,
}

/// Why one watch fails now.
type Problem = Arc<std::sync::Mutex<Option<String>>>;

/// The locks of a group: those it holds, and those it waits for with who holds them.
#[derive(Serialize, Default)]
#[serde(rename_all = "camelCase")]
struct Locks {
    held: Vec<String>,
    waiting_for: Vec<WaitingFor>,
    error: Option<String>,
}

#[derive(Serialize)]
struct WaitingFor {
    lock: String,
    holder: String,
}

/// An Event about a group or one of its Workflows.
#[derive(Serialize)]
struct EventRow {
    #[serde(rename = "type")]
    type_: String,
    reason: String,
    message: String,
    object: String,
    count: i32,
    last: Option<Time>,
}

impl Live {
    /// Starts watching groups and Workflows in `namespace` (all when none) as `client`'s user.
    pub fn start(client: Client, namespace: Option<String>, lock_namespace: String) -> Self {
        let (tx, changes) = watch::channel(0u64);
        let tx = Arc::new(tx);
        let problems = [Problem::default(), Problem::default()];
        let groups = watch_into::<WorkflowGroup>(&client, namespace.as_deref(), &tx, &problems[0]);
        let workflows = watch_into::<Workflow>(&client, namespace.as_deref(), &tx, &problems[1]);
        Live {
            client,
            namespace,
            lock_namespace,
            groups,
            workflows,
            changes,
            problems,
        }
    }

    /// A receiver that wakes on every change.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.clone()
    }

    /// The list of groups, newest first, as JSON.
    pub fn list_json(&self) -> String {
        let mut groups = self.groups.state();
        groups.sort_by(|a, b| {
            b.creation_timestamp()
                .cmp(&a.creation_timestamp())
                .then_with(|| a.name_any().cmp(&b.name_any()))
        });
        let rows: Vec<GroupRow> = groups.iter().map(|g| row(g)).collect();
        serde_json::json!({
            "namespace": self.namespace,
            "error": self.problem(),
            "groups": rows,
        })
        .to_string()
    }

    /// Group `namespace/name` and its Workflows, from the caches; none when there is no such
    /// group (any more).
    pub fn group(
        &self,
        namespace: &str,
        name: &str,
    ) -> Option<(Arc<WorkflowGroup>, Vec<Workflow>)> {
        let group = self
            .groups
            .get(&reflector::ObjectRef::new(name).within(namespace))?;
        let workflows = self.workflows_of(&group);
        Some((group, workflows))
    }

    /// What the API server says about `group` beyond the caches: its Events and its locks.
    pub async fn extras(&self, group: &WorkflowGroup, workflows: &[Workflow]) -> Extras {
        let names: BTreeSet<String> = workflows.iter().map(|w| w.name_any()).collect();
        let namespace = group.namespace().unwrap_or_default();
        Extras {
            events: self.events(&namespace, &group.name_any(), &names).await,
            locks: self.locks(group).await,
        }
    }

    /// The JSON of `group`'s page.
    pub fn group_json(
        &self,
        group: &WorkflowGroup,
        workflows: &[Workflow],
        extras: &Extras,
    ) -> String {
        serde_json::json!({
            "group": GroupView::new(group, workflows),
            "events": extras.events,
            "locks": extras.locks,
            "error": self.problem(),
        })
        .to_string()
    }

    /// The client, as the user.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Why the view may be out of date, if it may.
    fn problem(&self) -> Option<String> {
        let said: Vec<String> = self
            .problems
            .iter()
            .filter_map(|p| p.lock().ok().and_then(|p| p.clone()))
            .collect();
        (!said.is_empty()).then(|| said.join("; "))
    }

    /// The Workflows `group` controls.
    fn workflows_of(&self, group: &WorkflowGroup) -> Vec<Workflow> {
        let uid = group.uid().unwrap_or_default();
        let namespace = group.namespace();
        self.workflows
            .state()
            .iter()
            .filter(|w| {
                w.namespace() == namespace
                    && w.labels().get(LABEL_GROUP_NAME) == Some(&group.name_any())
                    && provenance::controlled_by(&***w, &uid)
            })
            .map(|w| (**w).clone())
            .collect()
    }

    /// The Events of the group and of its Workflows, newest first.
    async fn events(
        &self,
        namespace: &str,
        group: &str,
        workflows: &BTreeSet<String>,
    ) -> Vec<EventRow> {
        let api: Api<Event> = Api::namespaced(self.client.clone(), namespace);
        let ours = format!(
            "involvedObject.apiVersion={}",
            WorkflowGroup::api_version(&())
        );
        let Ok(listed) = api.list(&ListParams::default().fields(&ours)).await else {
            return Vec::new();
        };
        let mut rows: Vec<(Option<Time>, EventRow)> = listed
            .items
            .into_iter()
            .filter(|e| {
                let of = e.involved_object.name.as_deref().unwrap_or_default();
                match e.involved_object.kind.as_deref() {
                    Some("WorkflowGroup") => of == group,
                    Some("Workflow") => workflows.contains(of),
                    _ => false,
                }
            })
            .map(|e| {
                let last = e
                    .last_timestamp
                    .clone()
                    .or_else(|| e.event_time.clone().map(|t| Time(t.0)));
                let row = EventRow {
                    type_: e.type_.unwrap_or_default(),
                    reason: e.reason.unwrap_or_default(),
                    message: e.message.unwrap_or_default(),
                    object: format!(
                        "{}/{}",
                        e.involved_object.kind.unwrap_or_default(),
                        e.involved_object.name.unwrap_or_default()
                    ),
                    count: e.count.unwrap_or(1),
                    last: last.clone(),
                };
                (last, row)
            })
            .collect();
        rows.sort_by(|a, b| b.0.cmp(&a.0));
        rows.into_iter().take(MAX_EVENTS).map(|(_, r)| r).collect()
    }

    /// The locks `group` holds and, while it waits for its targets, those held by others.
    async fn locks(&self, group: &WorkflowGroup) -> Locks {
        let api: Api<Lease> = Api::namespaced(self.client.clone(), &self.lock_namespace);
        let leases = match api.list(&ListParams::default().labels(LABEL_LOCK)).await {
            Ok(listed) => listed.items,
            Err(e) => {
                return Locks {
                    error: Some(format!(
                        "cannot list the lock Leases in {}: {e}",
                        self.lock_namespace
                    )),
                    ..Locks::default()
                };
            }
        };
        let uid = group.uid().unwrap_or_default();
        let mine = |l: &Lease| l.labels().get(LABEL_LOCK_HOLDER) == Some(&uid);
        let held = leases
            .iter()
            .filter(|l| mine(l))
            .flat_map(|l| match l.annotations().get(ANNOTATION_LOCKS) {
                // A range Lease locks a target a line.
                Some(locks) => locks.lines().map(str::to_string).collect(),
                None => vec![l.name_any()],
            })
            .collect();
        let waiting = group
            .status
            .as_ref()
            .and_then(|s| succeeded(&s.conditions))
            .is_some_and(|c| c.reason == WAITING_FOR_TARGETS);
        let waiting_for = if waiting {
            claims(group, &group.spec.targets)
                .into_iter()
                .filter_map(|claim| {
                    let locks = |l: &Lease| {
                        claim.leases.contains(&l.name_any())
                            || !locked_by(std::slice::from_ref(&claim), annotation(l)).is_empty()
                    };
                    let lease = leases.iter().find(|l| locks(l) && !mine(l))?;
                    Some(WaitingFor {
                        lock: claim.what,
                        holder: holder_name(lease),
                    })
                })
                .collect()
        } else {
            Vec::new()
        };
        Locks {
            held,
            waiting_for,
            error: None,
        }
    }
}

/// What a lock Lease says it locks (a range's: a target a line).
fn annotation(lease: &Lease) -> &str {
    lease
        .annotations()
        .get(ANNOTATION_LOCKS)
        .map_or("", String::as_str)
}

/// A row of the list for `group`.
fn row(group: &WorkflowGroup) -> GroupRow {
    let status = group.status.clone().unwrap_or_default();
    let condition = succeeded(&status.conditions);
    let done = status
        .workflows
        .iter()
        .filter(|w| w.status == Phase::Completed)
        .count();
    GroupRow {
        namespace: group.namespace().unwrap_or_default(),
        name: group.name_any(),
        type_: group.spec.type_.clone(),
        phase: status.phase.unwrap_or_default(),
        paused: group.spec.paused,
        progress: status.rollout.as_ref().map(|r| r.progress.clone()),
        workflows: format!("{done}/{}", group.spec.workflow_steps.len()),
        failed_targets: status.rollout.as_ref().map(|r| r.failed_targets),
        reason: condition.map(|c| c.reason.clone()),
        message: condition.map(|c| c.message.clone()),
        started: status.start_time,
        finished: status.completion_time,
    }
}

/// A cache of `K` in `namespace` (all when none), watched as the client's user: every change
/// moves `changes`, and a failing watch says why in `problem` until it recovers.
fn watch_into<K>(
    client: &Client,
    namespace: Option<&str>,
    changes: &Arc<watch::Sender<u64>>,
    problem: &Problem,
) -> Store<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    let api: Api<K> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let (reader, writer) = reflector::store();
    let stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .reflect(writer);
    let changes = changes.clone();
    let problem = problem.clone();
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            let said = event
                .err()
                .map(|e| format!("watching {}: {e}", K::plural(&K::DynamicType::default())));
            if let Ok(mut p) = problem.lock() {
                *p = said;
            }
            changes.send_modify(|n| *n += 1);
        }
    });
    reader
}
