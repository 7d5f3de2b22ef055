//! `--drain` and `--delete-nodes`: taking Nodes out of the cluster through the API server, as
//! `kubectl drain` and `kubectl delete node` do, reported per target as the SSH runs are.
//!
//! A drain cordons the target's Node (recording who did in the annotation
//! [`CORDONED_BY`]; a Node cordoned already is left as it was found), then evicts its pods
//! through the Eviction API, so PodDisruptionBudgets are respected, until none is left or the
//! time is up. DaemonSet pods and mirror pods stay (their controllers would put them back); a
//! pod no controller manages, or one with `emptyDir` data, stops the drain unless allowed
//! (`--drain-force`, `--drain-delete-emptydir-data`), as in `kubectl drain`. A drain that cannot
//! finish names the pods that block it and why. The drain never uncordons; `--uncordon` does,
//! only for the Nodes the same group cordoned.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use workflow_model::Target;

use crate::nodes::{Api, ApiError};
use crate::report::{Outcome, TargetResult};

/// The annotation a Node cordoned by a drain gets: `<namespace>/<group>` of the group.
pub const CORDONED_BY: &str = "workflow.rxg456.cn/cordoned-by";
/// How often a drain looks at what is left.
const POLL: Duration = Duration::from_secs(1);

/// Why a Node could not be drained or deleted.
#[derive(Debug, thiserror::Error)]
enum DrainError {
    /// The API server could not be asked.
    #[error(transparent)]
    Api(#[from] ApiError),
    /// The Node could not be cordoned.
    #[error(
        "could not cordon Node {name}: {source} (the step's service account needs patch on nodes)"
    )]
    Cordon {
        name: String,
        #[source]
        source: ApiError,
    },
    /// The Node's pods could not be listed.
    #[error(
        "could not list the pods of Node {name}: {source} (the step's service account needs \
         list on pods)"
    )]
    ListPods {
        name: String,
        #[source]
        source: ApiError,
    },
    /// A pod the options do not let the drain evict.
    #[error("cannot drain Node {name}: pod {pod} {why} (nothing was evicted after it)")]
    Refused {
        name: String,
        pod: String,
        why: &'static str,
    },
    /// The API server refused an eviction for good (not a PodDisruptionBudget's "not now").
    #[error(
        "could not evict pod {pod}: HTTP {status}: {message} (the step's service account needs \
         create on pods/eviction)"
    )]
    Evict {
        pod: String,
        status: u16,
        message: String,
    },
    /// Time ran out while evicted pods were still terminating.
    #[error(
        "the drain of Node {name} did not finish in {} s: pods still terminating: {} (the Node \
         stays cordoned)",
        timeout.as_secs(),
        pods.join(", ")
    )]
    Terminating {
        name: String,
        timeout: Duration,
        pods: Vec<String>,
    },
    /// Time ran out while evictions were refused (`<pod>: <why>` each).
    #[error(
        "the drain of Node {name} did not finish in {} s: blocked: {} (the Node stays cordoned)",
        timeout.as_secs(),
        blocked.join("; ")
    )]
    Blocked {
        name: String,
        timeout: Duration,
        blocked: Vec<String>,
    },
    /// The Node could not be made schedulable again.
    #[error(
        "could not uncordon Node {name}: {source} (the step's service account needs patch on \
         nodes)"
    )]
    Uncordon {
        name: String,
        #[source]
        source: ApiError,
    },
    /// The Node object could not be deleted.
    #[error(
        "could not delete Node {name}: {source} (the step's service account needs delete on \
         nodes, as deploy/join/ grants)"
    )]
    Delete {
        name: String,
        #[source]
        source: ApiError,
    },
}

/// How a drain treats the pods it finds.
#[derive(Debug, Clone)]
pub struct DrainOptions {
    /// How long a Node's drain may take.
    pub timeout: Duration,
    /// The evicted pods' grace period (their own when `None`).
    pub grace_period: Option<i64>,
    /// Evict pods with `emptyDir` volumes (their data is lost).
    pub delete_empty_dir_data: bool,
    /// Evict pods no controller manages (nothing makes them again).
    pub force: bool,
    /// Who cordons: `<namespace>/<group>`.
    pub owner: String,
    /// The drain's own pod (`<namespace>/<name>`), which it never evicts.
    pub own_pod: Option<String>,
}

/// Drains every target's Node, all at once, each within `options.timeout`.
pub fn drain(api: &Api, targets: &[Target], options: &DrainOptions) -> Vec<TargetResult> {
    std::thread::scope(|scope| {
        let runs: Vec<_> = targets
            .iter()
            .map(|target| {
                scope.spawn(move || {
                    let start = Instant::now();
                    let outcome = match drain_node(api, &target.name, options) {
                        Ok(()) => Outcome::Succeeded,
                        Err(why) => Outcome::CheckFailed(why.to_string()),
                    };
                    result(target, outcome, start)
                })
            })
            .collect();
        runs.into_iter()
            .zip(targets)
            .map(|(run, target)| {
                run.join().unwrap_or_else(|_| {
                    result(
                        target,
                        Outcome::CheckFailed("the drain panicked".into()),
                        Instant::now(),
                    )
                })
            })
            .collect()
    })
}

/// Makes every target's Node schedulable again when `owner` (`<namespace>/<group>`) cordoned
/// it, removing the record; a Node cordoned by anyone else, or not cordoned, is left as it is
/// (and counts as done).
pub fn uncordon(api: &Api, targets: &[Target], owner: &str) -> Vec<TargetResult> {
    targets
        .iter()
        .map(|target| {
            let start = Instant::now();
            let outcome = match uncordon_node(api, &target.name, owner) {
                Ok(()) => Outcome::Succeeded,
                Err(why) => Outcome::CheckFailed(why.to_string()),
            };
            result(target, outcome, start)
        })
        .collect()
}

fn uncordon_node(api: &Api, name: &str, owner: &str) -> Result<(), DrainError> {
    let path = format!("/api/v1/nodes/{name}");
    let Some(node) = api.get_json(&path)? else {
        println!("[{name}] no Node named {name}: nothing to uncordon");
        return Ok(());
    };
    let cordoned_by = node["metadata"]["annotations"][CORDONED_BY].as_str();
    match (node["spec"]["unschedulable"] == true, cordoned_by) {
        (true, Some(by)) if by == owner => {
            // Test-and-set: the patch applies only to the Node as read, so a cordon by
            // someone else in between is never undone.
            let patch = json!({
                "spec": {"unschedulable": false},
                "metadata": {
                    "annotations": {CORDONED_BY: null},
                    "resourceVersion": node["metadata"]["resourceVersion"],
                },
            });
            api.merge_patch(&path, &patch)
                .map_err(|source| DrainError::Uncordon {
                    name: name.to_owned(),
                    source,
                })?;
            println!("[{name}] uncordoned (cordoned by {owner})");
        }
        (true, Some(by)) => println!("[{name}] left cordoned: cordoned by {by}, not {owner}"),
        (true, None) => println!("[{name}] left cordoned: cordoned by someone else"),
        (false, _) => println!("[{name}] schedulable already"),
    }
    Ok(())
}

/// Deletes every target's Node object (a Node that is gone already counts as deleted).
pub fn delete_nodes(api: &Api, targets: &[Target]) -> Vec<TargetResult> {
    targets
        .iter()
        .map(|target| {
            let start = Instant::now();
            let outcome = match api.delete(&format!("/api/v1/nodes/{}", target.name)) {
                Ok(()) => {
                    println!("[{}] Node {} deleted", target.name, target.name);
                    Outcome::Succeeded
                }
                Err(source) => Outcome::CheckFailed(
                    DrainError::Delete {
                        name: target.name.clone(),
                        source,
                    }
                    .to_string(),
                ),
            };
            result(target, outcome, start)
        })
        .collect()
}

fn result(target: &Target, outcome: Outcome, start: Instant) -> TargetResult {
    if let Outcome::CheckFailed(why) = &outcome {
        println!("[{}] {why}", target.name);
    }
    TargetResult {
        name: target.name.clone(),
        outcome,
        duration: start.elapsed(),
        tail: String::new(),
    }
}

fn drain_node(api: &Api, name: &str, options: &DrainOptions) -> Result<(), DrainError> {
    let path = format!("/api/v1/nodes/{name}");
    let Some(node) = api.get_json(&path)? else {
        println!("[{name}] no Node named {name}: nothing to drain");
        return Ok(());
    };
    if node["spec"]["unschedulable"] == true {
        println!("[{name}] cordoned already (left as it was found)");
    } else {
        let patch = json!({
            "spec": {"unschedulable": true},
            "metadata": {"annotations": {CORDONED_BY: options.owner}},
        });
        api.merge_patch(&path, &patch)
            .map_err(|source| DrainError::Cordon {
                name: name.to_owned(),
                source,
            })?;
        println!("[{name}] cordoned");
    }
    let deadline = Instant::now() + options.timeout;
    let mut evicting: Vec<String> = Vec::new();
    loop {
        let mut pods = pods_on(api, name)?;
        pods.retain(|pod| Some(pod_id(pod)) != options.own_pod);
        let mut blocked = Vec::new();
        for pod in &pods {
            let id = pod_id(pod);
            // Evicted already and on its way out: waited for, not asked again.
            if pod["metadata"]["deletionTimestamp"].is_string() {
                continue;
            }
            if let Some(why) = refusal(pod, options) {
                return Err(DrainError::Refused {
                    name: name.to_owned(),
                    pod: id,
                    why,
                });
            }
            match evict(api, pod, options.grace_period)? {
                Eviction::Started if !evicting.contains(&id) => {
                    println!("[{name}] evicting {id}");
                    evicting.push(id);
                }
                Eviction::Started | Eviction::Gone => {}
                Eviction::Blocked(why) => blocked.push(format!("{id}: {why}")),
            }
        }
        if pods.is_empty() {
            println!("[{name}] drained ({} pods evicted)", evicting.len());
            return Ok(());
        }
        if Instant::now() + POLL > deadline {
            let (name, timeout) = (name.to_owned(), options.timeout);
            return Err(if blocked.is_empty() {
                DrainError::Terminating {
                    name,
                    timeout,
                    pods: pods.iter().map(pod_id).collect(),
                }
            } else {
                DrainError::Blocked {
                    name,
                    timeout,
                    blocked,
                }
            });
        }
        std::thread::sleep(POLL);
    }
}

/// The pods on Node `name` a drain must move: not those of DaemonSets, not mirror pods.
fn pods_on(api: &Api, name: &str) -> Result<Vec<Value>, DrainError> {
    let list = api
        .get_json(&format!(
            "/api/v1/pods?fieldSelector=spec.nodeName%3D{name}"
        ))
        .map_err(|source| DrainError::ListPods {
            name: name.to_owned(),
            source,
        })?
        .unwrap_or_default();
    Ok(list["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|pod| {
            let mirror = pod["metadata"]["annotations"]["kubernetes.io/config.mirror"].is_string();
            let daemon = controller(pod).is_some_and(|c| c["kind"] == "DaemonSet");
            !mirror && !daemon
        })
        .collect())
}

fn controller(pod: &Value) -> Option<&Value> {
    pod["metadata"]["ownerReferences"]
        .as_array()?
        .iter()
        .find(|o| o["controller"] == true)
}

fn pod_id(pod: &Value) -> String {
    format!(
        "{}/{}",
        pod["metadata"]["namespace"].as_str().unwrap_or_default(),
        pod["metadata"]["name"].as_str().unwrap_or_default()
    )
}

/// Why a drain with `options` may not evict `pod`, as `kubectl drain` refuses it.
fn refusal(pod: &Value, options: &DrainOptions) -> Option<&'static str> {
    let finished = matches!(
        pod["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed")
    );
    if controller(pod).is_none() && !options.force && !finished {
        return Some(
            "is managed by no controller: nothing would make it again (force: true evicts it)",
        );
    }
    let empty_dir = pod["spec"]["volumes"]
        .as_array()
        .is_some_and(|v| v.iter().any(|v| v.get("emptyDir").is_some()));
    if empty_dir && !options.delete_empty_dir_data && !finished {
        return Some("has emptyDir data that would be lost (deleteEmptyDirData: true evicts it)");
    }
    None
}

enum Eviction {
    Started,
    Gone,
    /// Refused for now (a PodDisruptionBudget): the API server's words.
    Blocked(String),
}

fn evict(api: &Api, pod: &Value, grace_period: Option<i64>) -> Result<Eviction, DrainError> {
    let (namespace, name) = (
        pod["metadata"]["namespace"].as_str().unwrap_or_default(),
        pod["metadata"]["name"].as_str().unwrap_or_default(),
    );
    let mut body = json!({
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
    });
    if let Some(seconds) = grace_period {
        body["deleteOptions"] = json!({"gracePeriodSeconds": seconds});
    }
    let path = format!("/api/v1/namespaces/{namespace}/pods/{name}/eviction");
    match api.post(&path, &body)? {
        (200..=299, _) => Ok(Eviction::Started),
        (404, _) => Ok(Eviction::Gone),
        (429, why) => Ok(Eviction::Blocked(why)),
        (status, message) => Err(DrainError::Evict {
            pod: format!("{namespace}/{name}"),
            status,
            message,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> DrainOptions {
        DrainOptions {
            timeout: Duration::from_secs(1),
            grace_period: None,
            delete_empty_dir_data: false,
            force: false,
            owner: "ns/group".into(),
            own_pod: None,
        }
    }

    #[test]
    fn a_drain_refuses_unmanaged_pods_and_emptydir_data_unless_allowed() {
        let managed =
            json!({"metadata": {"ownerReferences": [{"kind": "ReplicaSet", "controller": true}]}});
        let bare = json!({"metadata": {}});
        let scratch = json!({
            "metadata": {"ownerReferences": [{"kind": "ReplicaSet", "controller": true}]},
            "spec": {"volumes": [{"name": "tmp", "emptyDir": {}}]},
        });
        let finished_bare = json!({"metadata": {}, "status": {"phase": "Succeeded"}});
        assert_eq!(refusal(&managed, &options()), None);
        assert!(refusal(&bare, &options()).is_some_and(|w| w.contains("no controller")));
        assert!(refusal(&scratch, &options()).is_some_and(|w| w.contains("emptyDir")));
        assert_eq!(refusal(&finished_bare, &options()), None);
        let lenient = DrainOptions {
            force: true,
            delete_empty_dir_data: true,
            ..options()
        };
        assert_eq!(refusal(&bare, &lenient), None);
        assert_eq!(refusal(&scratch, &lenient), None);
    }

    #[test]
    fn a_drain_out_of_time_names_what_is_left_and_that_the_node_stays_cordoned() {
        let timeout = Duration::from_secs(60);
        let terminating = DrainError::Terminating {
            name: "node-1".into(),
            timeout,
            pods: vec!["a/p1".into(), "b/p2".into()],
        };
        assert_eq!(
            terminating.to_string(),
            "the drain of Node node-1 did not finish in 60 s: pods still terminating: a/p1, b/p2 \
             (the Node stays cordoned)"
        );
        let blocked = DrainError::Blocked {
            name: "node-1".into(),
            timeout,
            blocked: vec!["a/p1: budget".into(), "b/p2: budget".into()],
        };
        assert_eq!(
            blocked.to_string(),
            "the drain of Node node-1 did not finish in 60 s: blocked: a/p1: budget; b/p2: budget \
             (the Node stays cordoned)"
        );
    }
}
