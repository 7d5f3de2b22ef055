//! What the leader alone does for the webhook: keeps the CA and serving certificate in their
//! Secret current, and the webhook configuration's `caBundle` equal to the Secret's bundle.
//!
//! One writer at a time (the leader), and every write is conditional on what was read (the
//! Secret's resourceVersion): a replica that lost its lease without knowing yet cannot undo
//! its successor's renewal.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use time::OffsetDateTime;
use tracing::{info, warn};

use super::certs::{self, CA_BUNDLE, CA_CRT, CertError, Lifetimes};

/// Field manager of the keeper's writes.
const MANAGER: &str = "workflow-operator-webhook";

/// Why a round of the keeper failed; it tries again at the next.
#[derive(Debug, thiserror::Error)]
pub enum KeeperError {
    /// The API server refused a read or a write.
    #[error("{what}: {source}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
    /// Certificates could not be made.
    #[error(transparent)]
    Cert(#[from] CertError),
}

/// Where the certificates live and whom they are for.
#[derive(Debug, Clone)]
pub struct KeeperConfig {
    /// Namespace of the Secret (the operator's own).
    pub namespace: String,
    /// Name of the Secret.
    pub secret: String,
    /// The ValidatingWebhookConfiguration whose webhooks' `caBundle` is kept current; none:
    /// the install keeps it itself.
    pub webhook_configuration: Option<String>,
    /// Names the serving certificate covers.
    pub names: Vec<String>,
    pub lifetimes: Lifetimes,
    /// How often the certificates are checked.
    pub interval: Duration,
}

/// Keeps the certificates and the bundle current until the process ends (the leader only
/// runs it: it ends with the lease).
pub async fn keep(client: Client, config: KeeperConfig) {
    loop {
        if let Err(error) = round(&client, &config).await {
            warn!(%error, secret = %config.secret, namespace = %config.namespace, "cannot renew the webhook's certificates; trying again");
        }
        tokio::time::sleep(config.interval).await;
    }
}

/// One check: renew what is due, then publish the bundle.
async fn round(client: &Client, config: &KeeperConfig) -> Result<(), KeeperError> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &config.namespace);
    let configurations: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let existing = secrets
        .get_opt(&config.secret)
        .await
        .map_err(|source| api_error(format!("reading Secret {}", config.secret), source))?;
    let data: BTreeMap<String, Vec<u8>> = existing
        .as_ref()
        .and_then(|s| s.data.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect();
    let configuration = match &config.webhook_configuration {
        Some(name) => configurations.get_opt(name).await.map_err(|source| {
            api_error(
                format!("reading ValidatingWebhookConfiguration {name}"),
                source,
            )
        })?,
        None => None,
    };
    let published = match (&config.webhook_configuration, &configuration) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(_), Some(c)) => ca_published(c, data.get(CA_CRT).map(Vec::as_slice)),
    };
    let now = OffsetDateTime::now_utc();
    let stored = certs::read(&data);
    let renewal = certs::plan_renewal(&stored, &config.names, published, now.unix_timestamp());
    let data = if renewal.is_empty() {
        data
    } else {
        let renewed = certs::renew(&data, &renewal, &config.names, config.lifetimes, now)?;
        write(&secrets, existing, config, &renewed).await?;
        let after = certs::read(&renewed);
        info!(
            new_ca = renewal.new_ca,
            new_serving = renewal.new_serving,
            dropped = ?renewal.drop_from_bundle,
            ca = after.ca.as_ref().map_or("", |c| &c.serial),
            serving = after.serving.as_ref().map_or("", |c| &c.serial),
            "renewed the webhook's certificates"
        );
        renewed
    };
    if let (Some(name), Some(configuration)) = (&config.webhook_configuration, configuration) {
        let bundle = data.get(CA_BUNDLE).cloned().unwrap_or_default();
        publish(&configurations, name, &configuration, bundle).await?;
    }
    Ok(())
}

fn patch_params() -> PatchParams {
    PatchParams {
        field_manager: Some(MANAGER.into()),
        ..PatchParams::default()
    }
}

fn api_error(what: String, source: kube::Error) -> KeeperError {
    KeeperError::Api { what, source }
}

/// Whether every webhook of `configuration` trusts the CA `ca_pem`.
fn ca_published(configuration: &ValidatingWebhookConfiguration, ca_pem: Option<&[u8]>) -> bool {
    let Some(ca) = ca_pem.and_then(|pem| certs::pem_certs(pem).into_iter().next()) else {
        return false;
    };
    let webhooks = configuration.webhooks.as_deref().unwrap_or_default();
    !webhooks.is_empty()
        && webhooks.iter().all(|w| {
            w.client_config
                .ca_bundle
                .as_ref()
                .is_some_and(|b| certs::pem_certs(&b.0).contains(&ca))
        })
}

/// Creates the Secret, or replaces it if it is still as read.
async fn write(
    secrets: &Api<Secret>,
    existing: Option<Secret>,
    config: &KeeperConfig,
    data: &BTreeMap<String, Vec<u8>>,
) -> Result<(), KeeperError> {
    let data = data
        .iter()
        .map(|(k, v)| (k.clone(), ByteString(v.clone())))
        .collect();
    let params = PostParams {
        field_manager: Some(MANAGER.into()),
        ..PostParams::default()
    };
    let result = match existing {
        Some(mut secret) => {
            secret.data = Some(data);
            secrets.replace(&config.secret, &params, &secret).await
        }
        None => {
            let secret = Secret {
                metadata: ObjectMeta {
                    name: Some(config.secret.clone()),
                    namespace: Some(config.namespace.clone()),
                    labels: Some(BTreeMap::from([(
                        "app.kubernetes.io/name".into(),
                        "workflow-operator".into(),
                    )])),
                    ..ObjectMeta::default()
                },
                type_: Some("kubernetes.io/tls".into()),
                data: Some(data),
                ..Secret::default()
            };
            secrets.create(&params, &secret).await
        }
    };
    result
        .map(drop)
        .map_err(|source| api_error(format!("writing Secret {}", config.secret), source))
}

/// Sets every webhook's `caBundle` of `configuration` to `bundle`, when one differs.
async fn publish(
    configurations: &Api<ValidatingWebhookConfiguration>,
    name: &str,
    configuration: &ValidatingWebhookConfiguration,
    bundle: Vec<u8>,
) -> Result<(), KeeperError> {
    let webhooks = configuration.webhooks.as_deref().unwrap_or_default();
    if webhooks
        .iter()
        .all(|w| w.client_config.ca_bundle.as_ref().map(|b| &b.0) == Some(&bundle))
    {
        return Ok(());
    }
    let ca_bundle = ByteString(bundle);
    // A strategic merge patch: webhooks merge by name, so only caBundle changes.
    let patch = serde_json::json!({
        "webhooks": webhooks.iter().map(|w| serde_json::json!({
            "name": w.name,
            "clientConfig": {"caBundle": ca_bundle},
        })).collect::<Vec<_>>(),
    });
    configurations
        .patch(name, &patch_params(), &Patch::Strategic(patch))
        .await
        .map_err(|source| {
            api_error(
                format!("patching the caBundle of ValidatingWebhookConfiguration {name}"),
                source,
            )
        })?;
    info!(configuration = %name, webhooks = webhooks.len(), "published the webhook's CA bundle");
    Ok(())
}
