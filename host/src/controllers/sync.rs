//! The frame both controllers share around their pure plans: tell the children an object
//! controls (read from the watch caches, never listed), create children idempotently, delete,
//! write status only when it changed, publish the plan's events, and handle a failed reconcile
//! (log, count, back off). Each reconcile runs in a tracing span naming its object and is
//! timed.

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tracing::{Instrument, debug, info_span, warn};

use super::context::Context;
use super::error::{Error, Result};
use super::status::{Transition, printable};

/// Whether `obj` is controlled by the object with `owner_uid` (a label alone could be copied;
/// only a controller reference counts).
pub fn controlled_by(obj: &impl Resource, owner_uid: &str) -> bool {
    obj.owner_references()
        .iter()
        .any(|o| o.uid == owner_uid && o.controller == Some(true))
}

/// Creates `child`, whose name is deterministic. One that already exists and is controlled by
/// `owner_uid` was created by an earlier reconcile whose status write we have not seen: it
/// counts as created.
///
/// # Errors
/// [`Error::NameTaken`] when an object of that name exists and is someone else's;
/// [`Error::Kube`] when the API fails.
pub async fn create_controlled<K>(api: &Api<K>, child: &K, owner_uid: &str) -> Result<()>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + Debug,
{
    let name = child.name_any();
    match api.create(&PostParams::default(), child).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => {
            let existing = api.get(&name).await.map_err(Error::Kube)?;
            if controlled_by(&existing, owner_uid) {
                Ok(())
            } else {
                Err(Error::NameTaken {
                    kind: K::kind(&()).to_string(),
                    name,
                })
            }
        }
        Err(e) => Err(Error::Kube(e)),
    }
}

/// Deletes `name`; one already gone counts as deleted.
pub async fn delete<K>(api: &Api<K>, name: &str) -> Result<()>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(Error::Kube(e)),
    }
}

/// The field manager of every status the operator writes.
pub const FIELD_MANAGER: &str = "workflow-operator";

/// Writes `new` as the status of `name` when it differs from `old`, by server-side apply: the
/// status is written whole, so a field the new status leaves out (a step's message that no
/// longer applies) disappears, which a merge patch cannot do.
pub async fn write_status<K, S>(api: &Api<K>, name: &str, old: &S, new: &S) -> Result<()>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
    S: Serialize + PartialEq,
{
    if old == new {
        return Ok(());
    }
    let patch = serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": new,
    });
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch_status(name, &params, &Patch::Apply(&patch))
        .await
        .map_err(Error::Kube)?;
    Ok(())
}

/// Publishes each of `events` on `obj`.
pub async fn publish_all<K: Resource<DynamicType = ()>>(
    ctx: &Context,
    obj: &K,
    events: &[Transition],
) {
    for event in events {
        ctx.publish(obj, event).await;
    }
}

/// Runs one reconcile of `obj` in a span naming it, times it, and forgets the object's
/// failures when it succeeds.
pub async fn instrumented<K, F>(obj: &K, ctx: &Context, reconcile: F) -> Result<Action>
where
    K: Resource<DynamicType = ()>,
    F: Future<Output = Result<Action>>,
{
    let controller = controller_name::<K>();
    let span = info_span!(
        "reconcile",
        controller = %controller,
        namespace = obj.meta().namespace.as_deref().unwrap_or(""),
        name = obj.meta().name.as_deref().unwrap_or(""),
    );
    let started = Instant::now();
    let result = reconcile.instrument(span).await;
    ctx.metrics
        .reconciled(&controller, started.elapsed(), result.is_ok());
    if result.is_ok() {
        ctx.backoff.succeeded(&object_key(obj));
    }
    result
}

/// The error policy of both controllers: logs the error, counts it, and retries the object
/// after its exponential backoff. A conflict is a race with another writer, retried at once
/// and not counted as a failure.
pub fn error_policy<K>(obj: Arc<K>, error: &Error, ctx: Arc<Context>) -> Action
where
    K: Resource<DynamicType = ()>,
{
    let controller = controller_name::<K>();
    let key = object_key(&*obj);
    let wait = ctx.backoff.failed(&key, error);
    let conflict = error.is_conflict();
    // Errors carry plugin text: escaped and cut before it reaches the log.
    let error = printable(&error.to_string(), 2048);
    if conflict {
        debug!(%controller, object = %key, %error, "conflict, retrying");
    } else {
        warn!(%controller, object = %key, %error, retry_in = ?wait, "reconcile failed");
        ctx.metrics.reconcile_failed(&controller);
    }
    Action::requeue(wait)
}

/// `namespace/name` of `obj`, prefixed with its kind.
fn object_key<K: Resource<DynamicType = ()>>(obj: &K) -> String {
    format!(
        "{}/{}/{}",
        K::kind(&()),
        obj.meta().namespace.as_deref().unwrap_or(""),
        obj.meta().name.as_deref().unwrap_or("")
    )
}

/// The controller of kind `K`, as metrics and logs name it: its kind in lower case
/// (`workflow`, `workflowgroup`).
fn controller_name<K: Resource<DynamicType = ()>>() -> String {
    K::kind(&()).to_lowercase()
}
