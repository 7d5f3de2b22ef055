//! The Lease writes: take one, delete one exactly as seen, give back all of a holder's.

use std::collections::BTreeMap;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams, Preconditions};
use tracing::{info, warn};

use super::claim::{Claim, HolderId};
use super::{ANNOTATION_HOLDER, ANNOTATION_LOCKS, LABEL_LOCK, LABEL_LOCK_HOLDER, LockConfig};
use crate::api::WorkflowGroup;

/// The group named on `lease`, for people; "another group" when it names none.
pub fn holder_name(lease: &Lease) -> String {
    lease
        .annotations()
        .get(ANNOTATION_HOLDER)
        .cloned()
        .unwrap_or_else(|| "another group".into())
}

/// The lock Lease `name` for `claim`, held by `group`.
pub fn new_lease(config: &LockConfig, group: &WorkflowGroup, claim: &Claim, name: &str) -> Lease {
    let now = MicroTime(Timestamp::now());
    let holder = HolderId::of(group);
    Lease {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(config.namespace.clone()),
            labels: Some(BTreeMap::from([
                (LABEL_LOCK.to_string(), claim.kind.as_str().to_string()),
                (LABEL_LOCK_HOLDER.to_string(), holder.uid.clone()),
            ])),
            annotations: Some(BTreeMap::from([
                (ANNOTATION_LOCKS.to_string(), claim.key.clone()),
                (ANNOTATION_HOLDER.to_string(), holder.shown()),
            ])),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(holder.to_string()),
            lease_duration_seconds: i32::try_from(config.lease_duration.as_secs()).ok(),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            ..LeaseSpec::default()
        }),
    }
}

/// Creates `lease`: `Ok(false)` when it exists already (the API server lets one create win).
pub async fn create(api: &Api<Lease>, lease: &Lease) -> kube::Result<bool> {
    match api.create(&PostParams::default(), lease).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}

/// What became of a Lease deleted as it was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deleted {
    /// Deleted now.
    Now,
    /// Gone already (its holder gave it back meanwhile).
    Already,
    /// It changed since (taken again): left alone.
    Changed,
}

/// Deletes `lease` if it is still the object seen (same UID and resourceVersion).
pub async fn delete_exact(api: &Api<Lease>, lease: &Lease) -> kube::Result<Deleted> {
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: lease.uid(),
            resource_version: lease.resource_version(),
        }),
        ..DeleteParams::default()
    };
    match api.delete(&lease.name_any(), &params).await {
        Ok(_) => Ok(Deleted::Now),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(Deleted::Already),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(Deleted::Changed),
        Err(e) => Err(e),
    }
}

/// Deletes every lock Lease of the holder `uid`: one delete-collection by the holder label (a
/// lock changes holder only by being deleted and created again, so the label is exact).
pub async fn delete_held(api: &Api<Lease>, uid: &str) -> kube::Result<()> {
    if uid.is_empty() {
        return Ok(());
    }
    let selector = ListParams::default().labels(&format!("{LABEL_LOCK_HOLDER}={uid}"));
    api.delete_collection(&DeleteParams::default(), &selector)
        .await?;
    info!(holder = uid, "gave back locks");
    Ok(())
}

/// Gives back the locks of a group that was deleted (from the group watch), at once.
pub async fn release_deleted(client: kube::Client, namespace: String, group: WorkflowGroup) {
    let api: Api<Lease> = Api::namespaced(client, &namespace);
    let uid = group.uid().unwrap_or_default();
    if let Err(error) = delete_held(&api, &uid).await {
        warn!(%error, group = %group.name_any(), "could not give back the locks of a deleted group; the sweeper will");
    }
}
