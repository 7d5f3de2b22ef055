//! Leader election on a `coordination.k8s.io` Lease, with `kube-lease-manager`.
//!
//! Only the holder of the lease runs the controllers; the others wait as standbys (serving
//! `/healthz`, not `/readyz`). A leader that loses the lease stops at once, as
//! controller-runtime's managers do: the process ends and is restarted as a standby.

use std::time::{Duration, Instant};

use kube::Client;
use kube_lease_manager::{LeaseCreateMode, LeaseManager, LeaseManagerBuilder};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{info, warn};

/// How long a lease is valid after its last renewal (controller-runtime's default).
pub const LEASE_DURATION: Duration = Duration::from_secs(15);
/// How often the holder renews (controller-runtime's retry period): a leader whose lease was
/// taken learns it within this time, and a renewal may fail for 13 s before the lease expires.
pub const RENEW_EVERY: Duration = Duration::from_secs(2);
/// How long to wait for the lease to be released on shutdown.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(2);

/// Which lease, and who we are.
#[derive(Clone, Debug)]
pub struct LeaseConfig {
    pub name: String,
    pub namespace: String,
    /// Unique among the candidates: the pod name in a cluster.
    pub identity: String,
}

/// The lease, held.
pub struct Leadership {
    held: watch::Receiver<bool>,
    task: JoinHandle<kube_lease_manager::Result<LeaseManager>>,
}

/// Waits until this process holds the lease.
///
/// # Errors
/// When the Lease cannot be read or created (for example, RBAC refuses it).
pub async fn acquire(client: Client, config: &LeaseConfig) -> anyhow::Result<Leadership> {
    let manager = LeaseManagerBuilder::new(client, &config.name)
        .with_namespace(&config.namespace)
        .with_identity(&config.identity)
        .with_duration(LEASE_DURATION.as_secs())
        // kube-lease-manager renews `grace` before expiry.
        .with_grace((LEASE_DURATION - RENEW_EVERY).as_secs())
        .with_create_mode(LeaseCreateMode::AutoCreate)
        .with_field_manager("workflow-operator-leader-election")
        .build()
        .await
        .map_err(|e| {
            anyhow::anyhow!("cannot use lease {}/{}: {e}", config.namespace, config.name)
        })?;
    let (mut held, task) = manager.watch().await;
    info!(lease = %config.name, namespace = %config.namespace, identity = %config.identity, "waiting for the leader lease");
    let waiting = Instant::now();
    while !*held.borrow_and_update() {
        if held.changed().await.is_err() {
            anyhow::bail!("the leader election task stopped before the lease was held");
        }
    }
    info!(
        identity = %config.identity,
        waited_ms = waiting.elapsed().as_millis() as u64,
        "became the leader"
    );
    Ok(Leadership { held, task })
}

impl Leadership {
    /// Resolves when the lease is lost (not renewed in time, or taken by another).
    pub async fn lost(&mut self) {
        loop {
            if !*self.held.borrow_and_update() {
                return;
            }
            if self.held.changed().await.is_err() {
                return;
            }
        }
    }

    /// Gives the lease up so that a standby takes over without waiting for it to expire.
    pub async fn release(self) {
        // Closing the channel makes the task release the lease and end.
        drop(self.held);
        match tokio::time::timeout(RELEASE_TIMEOUT, self.task).await {
            Ok(Ok(Ok(_))) => info!("released the leader lease"),
            Ok(Ok(Err(error))) => warn!(%error, "could not release the leader lease"),
            Ok(Err(error)) => warn!(%error, "leader election task failed"),
            Err(_) => warn!("releasing the leader lease timed out; it expires on its own"),
        }
    }
}
