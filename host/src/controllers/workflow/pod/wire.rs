//! A step pod as the pod watch reads it off the wire: only what [`keep_pod_evidence`] keeps
//! or checks is decoded. The rest of a pod (its managedFields, the targets annotation of up to
//! 128 KiB, environment, volumes, IPs, images, most of its status) is skipped while parsing
//! instead of being built into a `Pod` to be dropped a moment later; the watch decodes every
//! pod on every change of it.
//!
//! [`keep_pod_evidence`]: super::keep_pod_evidence

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStatus, Pod, PodCondition, PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use serde::{Deserialize, Deserializer};

use crate::cached_pod::{CachedPod, pod_resource};
use crate::provenance::{self, Provenance};

/// A pod decoded for the pod watch; [`pod_event`] gives its events as the cache's copy of it.
#[derive(Clone, Debug)]
pub struct WirePod(pub Pod);

pod_resource!(WirePod, 0.metadata);

impl<'de> Deserialize<'de> for WirePod {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = Wire::deserialize(deserializer)?;
        let m = wire.metadata;
        Ok(WirePod(Pod {
            metadata: ObjectMeta {
                name: m.name,
                namespace: m.namespace,
                uid: m.uid,
                resource_version: m.resource_version,
                creation_timestamp: m.creation_timestamp,
                deletion_timestamp: m.deletion_timestamp,
                deletion_grace_period_seconds: m.deletion_grace_period_seconds,
                owner_references: m.owner_references,
                labels: m.labels,
                annotations: m.annotations.map(|a| a.0),
                ..ObjectMeta::default()
            },
            spec: wire.spec.map(|s| PodSpec {
                containers: s
                    .containers
                    .into_iter()
                    .map(|c| Container {
                        name: c.name,
                        command: c.command,
                        ..Container::default()
                    })
                    .collect(),
                ..PodSpec::default()
            }),
            status: wire.status.map(|s| PodStatus {
                phase: s.phase,
                reason: s.reason,
                message: s.message,
                conditions: s.conditions,
                container_statuses: s.container_statuses.map(|cs| {
                    cs.into_iter()
                        .map(|c| ContainerStatus {
                            name: c.name,
                            state: c.state,
                            ..ContainerStatus::default()
                        })
                        .collect()
                }),
                ..PodStatus::default()
            }),
        }))
    }
}

#[derive(Deserialize)]
struct Wire {
    #[serde(default)]
    metadata: WireMeta,
    spec: Option<WireSpec>,
    status: Option<WireStatus>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WireMeta {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    creation_timestamp: Option<Time>,
    deletion_timestamp: Option<Time>,
    deletion_grace_period_seconds: Option<i64>,
    owner_references: Option<Vec<OwnerReference>>,
    labels: Option<BTreeMap<String, String>>,
    annotations: Option<Signature>,
}

/// Of a pod's annotations, only its signature: the others are skipped unread.
struct Signature(BTreeMap<String, String>);

impl<'de> Deserialize<'de> for Signature {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Signature;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a map of annotations")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Signature, A::Error> {
                let mut kept = BTreeMap::new();
                while let Some(key) = map.next_key::<String>()? {
                    if key == provenance::ANNOTATION {
                        kept.insert(key, map.next_value::<String>()?);
                    } else {
                        map.next_value::<serde::de::IgnoredAny>()?;
                    }
                }
                Ok(Signature(kept))
            }
        }
        deserializer.deserialize_map(Visitor)
    }
}

#[derive(Deserialize)]
struct WireSpec {
    #[serde(default)]
    containers: Vec<WireContainer>,
}

#[derive(Deserialize)]
struct WireContainer {
    name: String,
    command: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireStatus {
    phase: Option<String>,
    reason: Option<String>,
    message: Option<String>,
    conditions: Option<Vec<PodCondition>>,
    container_statuses: Option<Vec<WireContainerStatus>>,
}

#[derive(Deserialize)]
struct WireContainerStatus {
    name: String,
    state: Option<ContainerState>,
}

/// A watch event of a [`WirePod`] as one of the cache's copy of it ([`keep_pod_evidence`]).
///
/// [`keep_pod_evidence`]: super::keep_pod_evidence
pub fn pod_event(
    event: kube::runtime::watcher::Event<WirePod>,
    provenance: &Provenance,
) -> kube::runtime::watcher::Event<CachedPod> {
    use kube::runtime::watcher::Event;
    let keep = |pod: WirePod| super::keep_pod_evidence(pod.0, provenance);
    match event {
        Event::Apply(pod) => Event::Apply(keep(pod)),
        Event::Delete(pod) => Event::Delete(keep(pod)),
        Event::Init => Event::Init,
        Event::InitApply(pod) => Event::InitApply(keep(pod)),
        Event::InitDone => Event::InitDone,
    }
}
