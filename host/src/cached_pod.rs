//! A step pod as the operator's cache keeps it: its metadata and what its status says of the
//! step's attempt (the Workflow controller makes it, `keep_pod_evidence`, and reads the
//! attempt from it; the locks read whether the step still runs).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ContainerState, Pod, PodCondition, PodStatus};
use k8s_openapi::jiff::Timestamp;
use kube::api::ObjectMeta;

use crate::api::{LABEL_ATTEMPT, LABEL_STEP};
use crate::provenance;

/// Name of the single container of a step's pod.
pub const CONTAINER: &str = "step";

/// A step pod as the cache keeps it: its metadata and what its status says of the attempt.
/// A `Pod` takes 2.2 KiB before any of its strings (its spec and whole status are laid out
/// inline even when empty, and each container status 0.7 KiB more); this takes 0.8 KiB, and
/// the cache holds every step pod of every Workflow until its group is deleted. What the
/// operator reads of its labels and notes of its own are fields, not maps: a map of even one
/// label allocates room for eleven (about 0.5 KiB), and two of them were half of what a
/// cached pod took with its strings.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CachedPod {
    /// Its name, namespace, uid, resource version, times and controller reference.
    pub metadata: ObjectMeta,
    /// The step it runs, from its label.
    pub step: Option<String>,
    /// The attempt it runs, from its label.
    pub attempt: Option<u32>,
    /// Whether the operator made it (`keep_pod_evidence` found its signature): one without
    /// it was made by someone else, whatever its ownerReferences claim.
    pub signed: bool,
    /// When the cache first had it finished: the start of the next step is timed from it.
    pub observed_finished: Option<Timestamp>,
    pub status: Option<CachedPodStatus>,
}

/// What the cache keeps of a step pod's status.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CachedPodStatus {
    pub phase: Option<String>,
    pub reason: Option<String>,
    pub message: Option<String>,
    /// Its `PodScheduled` condition while that is `False`: why it cannot be scheduled.
    pub unschedulable: Option<PodCondition>,
    /// The step container's state, once the kubelet reports it.
    pub step: Option<ContainerState>,
}

/// Implements `kube::Resource` as a Pod's for `$ty`, a pod read in part, whose metadata is
/// `self.$meta`.
macro_rules! pod_resource {
    ($ty:ty, $($meta:tt).+) => {
        impl kube::Resource for $ty {
            type DynamicType = ();
            type Scope = k8s_openapi::NamespaceResourceScope;

            fn kind(dt: &()) -> std::borrow::Cow<'_, str> {
                <k8s_openapi::api::core::v1::Pod as kube::Resource>::kind(dt)
            }
            fn group(dt: &()) -> std::borrow::Cow<'_, str> {
                <k8s_openapi::api::core::v1::Pod as kube::Resource>::group(dt)
            }
            fn version(dt: &()) -> std::borrow::Cow<'_, str> {
                <k8s_openapi::api::core::v1::Pod as kube::Resource>::version(dt)
            }
            fn plural(dt: &()) -> std::borrow::Cow<'_, str> {
                <k8s_openapi::api::core::v1::Pod as kube::Resource>::plural(dt)
            }
            fn meta(&self) -> &kube::api::ObjectMeta {
                &self.$($meta).+
            }
            fn meta_mut(&mut self) -> &mut kube::api::ObjectMeta {
                &mut self.$($meta).+
            }
        }
    };
}
pub(crate) use pod_resource;

pod_resource!(CachedPod, metadata);

impl CachedPod {
    /// Whether the operator made it as a step pod of the Workflow `workflow_uid`: signed, with
    /// that Workflow as its controller (a reference alone anyone who may create pods can write).
    pub fn made_for(&self, workflow_uid: &str) -> bool {
        self.signed && provenance::controlled_by(self, workflow_uid)
    }
}

/// The step and attempt a step pod's `labels` name.
pub fn step_and_attempt(
    labels: Option<&BTreeMap<String, String>>,
) -> (Option<String>, Option<u32>) {
    let label = |key: &str| labels?.get(key);
    (
        label(LABEL_STEP).cloned(),
        label(LABEL_ATTEMPT).and_then(|a| a.parse().ok()),
    )
}

impl CachedPodStatus {
    /// Whether the pod has ended, Succeeded or Failed.
    pub fn finished(&self) -> bool {
        matches!(self.phase.as_deref(), Some("Succeeded" | "Failed"))
    }
}

impl From<Pod> for CachedPod {
    /// The pod's metadata as it is, its step and attempt labels read, and of its status what
    /// an attempt is read from. Whether it is signed is what its metadata says it was found
    /// ([`provenance::verified`]); `keep_pod_evidence` checks the signature itself.
    fn from(pod: Pod) -> Self {
        let (step, attempt) = step_and_attempt(pod.metadata.labels.as_ref());
        CachedPod {
            step,
            attempt,
            signed: provenance::verified(&pod.metadata),
            observed_finished: None,
            metadata: pod.metadata,
            status: pod.status.map(CachedPodStatus::from),
        }
    }
}

impl From<PodStatus> for CachedPodStatus {
    fn from(status: PodStatus) -> Self {
        CachedPodStatus {
            phase: status.phase,
            reason: status.reason,
            message: status.message,
            unschedulable: status
                .conditions
                .into_iter()
                .flatten()
                .find(|c| c.type_ == "PodScheduled" && c.status == "False"),
            step: status
                .container_statuses
                .into_iter()
                .flatten()
                .find(|c| c.name == CONTAINER)
                .and_then(|c| c.state),
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ContainerStateWaiting, ContainerStatus};

    use super::*;

    fn waiting(reason: &str) -> Option<ContainerState> {
        Some(ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some(reason.into()),
                message: None,
            }),
            ..ContainerState::default()
        })
    }

    fn condition(type_: &str, status: &str, reason: &str) -> PodCondition {
        PodCondition {
            type_: type_.into(),
            status: status.into(),
            reason: Some(reason.into()),
            ..PodCondition::default()
        }
    }

    #[test]
    fn the_cached_status_keeps_the_step_containers_state_and_why_it_is_unschedulable() {
        let status = PodStatus {
            phase: Some("Pending".into()),
            reason: Some("why".into()),
            message: Some("what".into()),
            pod_ip: Some("10.0.0.9".into()),
            conditions: Some(vec![
                condition("Initialized", "False", "ContainersNotInitialized"),
                condition("PodScheduled", "False", "Unschedulable"),
            ]),
            container_statuses: Some(vec![
                ContainerStatus {
                    name: "sidecar".into(),
                    state: waiting("CrashLoopBackOff"),
                    ..ContainerStatus::default()
                },
                ContainerStatus {
                    name: CONTAINER.into(),
                    image: "busybox".into(),
                    state: waiting("ErrImagePull"),
                    ..ContainerStatus::default()
                },
            ]),
            ..PodStatus::default()
        };
        assert_eq!(
            CachedPodStatus::from(status),
            CachedPodStatus {
                phase: Some("Pending".into()),
                reason: Some("why".into()),
                message: Some("what".into()),
                unschedulable: Some(condition("PodScheduled", "False", "Unschedulable")),
                step: waiting("ErrImagePull"),
            }
        );
    }

    #[test]
    fn a_scheduled_pod_without_its_step_container_keeps_neither() {
        let status = PodStatus {
            conditions: Some(vec![condition("PodScheduled", "True", "")]),
            container_statuses: Some(vec![ContainerStatus {
                name: "sidecar".into(),
                state: waiting("ContainerCreating"),
                ..ContainerStatus::default()
            }]),
            ..PodStatus::default()
        };
        assert_eq!(CachedPodStatus::from(status), CachedPodStatus::default());
    }

    #[test]
    fn a_pod_is_made_for_a_workflow_only_when_signed_and_controlled_by_it() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
        let owner = |uid: &str, controller: bool| OwnerReference {
            uid: uid.into(),
            controller: Some(controller),
            ..OwnerReference::default()
        };
        let pod = |signed: bool, owner: OwnerReference| CachedPod {
            signed,
            metadata: ObjectMeta {
                owner_references: Some(vec![owner]),
                ..ObjectMeta::default()
            },
            ..CachedPod::default()
        };
        assert!(pod(true, owner("w", true)).made_for("w"));
        assert!(!pod(false, owner("w", true)).made_for("w"), "unsigned");
        assert!(
            !pod(true, owner("w", false)).made_for("w"),
            "not its controller"
        );
        assert!(
            !pod(true, owner("v", true)).made_for("w"),
            "another Workflow's"
        );
        assert!(!CachedPod::default().made_for(""), "no owner at all");
    }

    #[test]
    fn a_cached_pod_is_laid_out_in_well_under_half_a_pods_size() {
        assert!(
            2 * size_of::<CachedPod>() < size_of::<Pod>(),
            "{} bytes against a Pod's {}",
            size_of::<CachedPod>(),
            size_of::<Pod>()
        );
    }
}
