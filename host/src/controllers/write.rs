//! The write layer both controllers share around their pure plans: tell the children an
//! object controls (read from the watch caches, never listed), create children idempotently,
//! delete, write status only when it changed, publish the plan's events, and handle a failed
//! reconcile (log, count, back off). Each reconcile runs in a tracing span naming its object
//! and is timed. Every API write a reconcile makes goes through here.

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event as KubeEvent;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tracing::{Instrument, debug, info_span, warn};

use super::context::Context;
use super::error::{Error, Result};
use super::status::Transition;
use workflow_model::text::printable;

pub use crate::provenance::controlled_by;

/// Creates `child`, whose name is deterministic. One that already exists counts as created
/// when `ours` accepts it (an earlier reconcile made it and its status write was lost, as the
/// object's signature or content shows): an ownerReference alone proves nothing, since anyone
/// who may create the object can write one.
///
/// # Errors
/// [`Error::NameTaken`] when an object of that name exists and `ours` refuses it;
/// [`Error::Kube`] when the API fails.
pub async fn create_or_accept<K>(api: &Api<K>, child: &K, ours: impl Fn(&K) -> bool) -> Result<()>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + Debug,
{
    let name = child.name_any();
    match api.create(&PostParams::default(), child).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => {
            let existing = api.get(&name).await.map_err(Error::Kube)?;
            if ours(&existing) {
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

/// Writes `new` as the status of `obj` when it differs from `old` (and from what was last
/// written to it, when the cache has not caught up with that write yet), by server-side apply:
/// the status is written whole, so a field the new status leaves out (a step's message that no
/// longer applies) disappears, which a merge patch cannot do. Returns whether it wrote.
async fn write_status<K, S>(ctx: &Context, api: &Api<K>, obj: &K, old: &S, new: &S) -> Result<bool>
where
    K: Resource<DynamicType = ()>,
    S: Serialize + PartialEq,
{
    let uid = obj.uid().unwrap_or_default();
    if ctx.written.already_written(&uid, old, new) || old == new {
        return Ok(false);
    }
    let patch = serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": new,
    });
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let mut request = kube::core::Request::new(api.resource_url())
        .patch_subresource("status", &obj.name_any(), &params, &Patch::Apply(&patch))
        .map_err(|e| Error::Kube(kube::Error::BuildRequest(e)))?;
    request.extensions_mut().insert("patch_status");
    // The answer, the whole object with its managedFields, is parsed but not built.
    let _: serde::de::IgnoredAny = ctx.client.request(request).await.map_err(Error::Kube)?;
    ctx.written.remember(&uid, new);
    Ok(true)
}

/// Records a transition of `obj`: writes `new` as its status when it changed (`write_status`)
/// and, when that wrote, publishes `events` on it. Returns whether it wrote, so that what else happens
/// once per transition (a finished counter) happens with it, not again from a reconcile that
/// runs on a cache older than our own write.
pub async fn record_transition<K, S>(
    ctx: &Context,
    api: &Api<K>,
    obj: &K,
    old: &S,
    new: &S,
    events: &[Transition],
) -> Result<bool>
where
    K: Resource<DynamicType = ()>,
    S: Serialize + PartialEq,
{
    let written = write_status(ctx, api, obj, old, new).await?;
    if written {
        for event in events {
            publish(ctx, obj, event).await;
        }
    }
    Ok(written)
}

/// Publishes `transition` as a Kubernetes Event on `obj`; a failure to publish is logged,
/// never fatal.
pub async fn publish<K: Resource<DynamicType = ()>>(
    ctx: &Context,
    obj: &K,
    transition: &Transition,
) {
    let published = if transition.once {
        create_event(ctx, obj.object_ref(&()), transition).await
    } else {
        record_event(ctx, obj.object_ref(&()), transition).await
    };
    if let Err(error) = published {
        warn!(%error, reason = %transition.reason, "could not publish event");
    }
}

/// The text of an Event's note: plugin text escaped and cut to what `kubectl describe` shows.
fn event_note(transition: &Transition) -> String {
    printable(&transition.message, 1000)
}

/// What an Event is about within its object: its subject, else the reconcile. The recorder
/// folds events of one object, reason and action into a series.
fn event_action(transition: &Transition) -> String {
    transition
        .subject
        .clone()
        .unwrap_or_else(|| "Reconcile".into())
}

/// Through the recorder, which folds a repeated event into a series and remembers every
/// event it published for six minutes to do so.
async fn record_event(
    ctx: &Context,
    regarding: ObjectReference,
    transition: &Transition,
) -> kube::Result<()> {
    let event = Event {
        type_: transition.type_,
        reason: transition.reason.clone(),
        note: Some(event_note(transition)),
        action: event_action(transition),
        secondary: None,
    };
    ctx.recorder.publish(&event, &regarding).await
}

/// Created as the recorder creates a new event, without remembering it: an event that
/// happens once per object would fill the recorder's memory at scale (thousands of finished
/// Workflows) for a series that never comes.
async fn create_event(
    ctx: &Context,
    regarding: ObjectReference,
    transition: &Transition,
) -> kube::Result<()> {
    let now = Timestamp::now();
    let reporter = &ctx.reporter;
    let namespace = regarding
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let name = format!(
        "{}.{:x}",
        regarding.name.as_deref().unwrap_or(&reporter.controller),
        now.as_nanosecond()
    );
    let event = KubeEvent {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(namespace.clone()),
            ..ObjectMeta::default()
        },
        action: Some(event_action(transition)),
        reason: Some(transition.reason.clone()),
        note: Some(event_note(transition)),
        event_time: Some(MicroTime(now)),
        regarding: Some(regarding),
        reporting_controller: Some(reporter.controller.clone()),
        reporting_instance: Some(
            reporter
                .instance
                .clone()
                .unwrap_or_else(|| reporter.controller.clone()),
        ),
        type_: Some(
            match transition.type_ {
                EventType::Normal => "Normal",
                EventType::Warning => "Warning",
            }
            .into(),
        ),
        ..KubeEvent::default()
    };
    Api::<KubeEvent>::namespaced(ctx.client.clone(), &namespace)
        .create(&PostParams::default(), &event)
        .await
        .map(drop)
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
    let kind = error.kind();
    // Errors carry plugin text: escaped and cut before it reaches the log.
    let error = printable(&error.to_string(), 2048);
    if conflict {
        debug!(%controller, object = %key, %error, "conflict, retrying");
    } else {
        warn!(%controller, object = %key, %error, retry_in = ?wait, "reconcile failed");
        ctx.metrics.reconcile_failed(&controller, kind);
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
