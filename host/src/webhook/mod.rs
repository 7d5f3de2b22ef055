//! The validating admission webhook: `kubectl apply` (and `--dry-run=server`) of a
//! WorkflowGroup whose params or template its plugins refuse fails with the plugins' words,
//! instead of the group failing later.
//!
//! - [`admission`]: the decision, a pure function of the group and its plugins' answers.
//! - [`review`]: AdmissionReview in, AdmissionReview out, asking the plugin each type would
//!   be pinned to now (the registry's current version), within a time budget.
//! - [`server`]: HTTPS on every replica ([`tls`]: the certificate, reloaded from its Secret
//!   without a restart), held to its [`limits`]: [`request`] reads a body within them and
//!   [`complexity`] measures it before it is decoded.
//! - [`certs`] and [`keeper`]: the operator's own CA and serving certificate, renewed by the
//!   leader, which also keeps the webhook configuration's `caBundle` current. No cert-manager.
//!
//! The webhook is an early answer, not the only check: the controllers still validate every
//! group, so a webhook that is off, unreachable or ignored (`failurePolicy: Ignore`) changes
//! only when a user hears about a bad group.

pub mod admission;
pub mod certs;
pub mod complexity;
pub mod keeper;
pub mod limits;
pub mod metrics;
pub mod request;
pub mod review;
pub mod server;
pub mod tls;

#[cfg(test)]
mod abuse_tests;

pub use certs::Lifetimes;
pub use keeper::KeeperConfig;
pub use limits::WebhookLimits;
pub use metrics::{Rejection, WebhookMetrics};
pub use review::Reviewer;
pub use server::{Review, VALIDATE_PATH, Webhook};
pub use tls::ServingCert;

/// The crypto provider of the webhook's TLS: ring, as kube's client uses.
pub fn crypto_provider() -> std::sync::Arc<rustls::crypto::CryptoProvider> {
    std::sync::Arc::new(rustls::crypto::ring::default_provider())
}
