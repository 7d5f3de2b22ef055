//! Why a reconcile failed, and how long to wait before the next try.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use crate::plugin::PluginError;

/// Why a reconcile failed. The controller retries each with backoff; none of these is the
/// user's fault (those end up in conditions instead).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A call to the Kubernetes API failed.
    #[error("kubernetes api: {0}")]
    Kube(#[source] kube::Error),
    /// A namespaced object came without a namespace.
    #[error("object has no namespace")]
    MissingNamespace,
    /// A plugin could not answer now (it ran out of time or could not be started); the
    /// object's condition says so and the call is made again after a backoff.
    #[error("plugin unavailable: {0}")]
    PluginUnavailable(#[source] PluginError),
    /// The API server refused a step's pod for now (a full quota); the Workflow's condition
    /// says so and the pod is tried again after a backoff.
    #[error("step pod refused for now: {0}")]
    PodRefused(String),
    /// An object we name deterministically exists and belongs to someone else.
    #[error("a {kind} named {name} already exists and is not ours")]
    NameTaken { kind: String, name: String },
}

impl Error {
    /// Whether this is a 409 conflict from the API server: a race with another writer, not a
    /// failure.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Error::Kube(kube::Error::Api(e)) if e.code == 409)
    }

    /// What failed, as the `kind` label of the reconcile error metric: `api`,
    /// `missing-namespace`, `plugin-<kind>` ([`crate::plugin::PluginErrorKind`]),
    /// `pod-refused` or `name-taken`.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Kube(_) => "api",
            Error::MissingNamespace => "missing-namespace",
            Error::PluginUnavailable(e) => e.kind().label(),
            Error::PodRefused(_) => "pod-refused",
            Error::NameTaken { .. } => "name-taken",
        }
    }
}

/// How soon a conflict (a race with another writer) is retried.
pub const CONFLICT_RETRY: Duration = Duration::from_millis(100);

/// Result of a reconcile.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Exponential backoff per object, as controller-runtime's per-item rate limiter does: the
/// first retry after `base`, each further consecutive failure doubles it, up to `cap`; a
/// successful reconcile starts over.
#[derive(Debug)]
pub struct Backoff {
    base: Duration,
    cap: Duration,
    failures: Mutex<HashMap<String, u32>>,
}

impl Default for Backoff {
    /// 1 s doubling up to 5 minutes: a plugin timing out under load is asked again soon, one
    /// that keeps timing out costs a call every few minutes.
    fn default() -> Self {
        Self::new(Duration::from_secs(1), Duration::from_secs(300))
    }
}

impl Backoff {
    /// A backoff from `base` doubling up to `cap`.
    pub fn new(base: Duration, cap: Duration) -> Self {
        Self {
            base,
            cap,
            failures: Mutex::default(),
        }
    }

    /// Counts a failure of `key` and says how long to wait before retrying it. A conflict is
    /// retried at once (100 ms) and not counted.
    pub fn failed(&self, key: &str, error: &Error) -> Duration {
        if error.is_conflict() {
            return CONFLICT_RETRY;
        }
        let mut failures = self
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = failures.entry(key.to_string()).or_default();
        *n = n.saturating_add(1);
        let factor = 2u32.saturating_pow(n.saturating_sub(1).min(31));
        self.base.saturating_mul(factor).min(self.cap)
    }

    /// Forgets the failures of `key` after a successful reconcile.
    pub fn succeeded(&self, key: &str) {
        let mut failures = self
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        failures.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unavailable() -> Error {
        Error::PluginUnavailable(PluginError::Timeout {
            plugin: "at".into(),
            call: "gate",
            limit: Duration::from_secs(1),
        })
    }

    #[test]
    fn consecutive_failures_double_the_wait_up_to_the_cap_and_success_starts_over() {
        let backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(5));
        let waits: Vec<_> = (0..5)
            .map(|_| backoff.failed("ns/a", &unavailable()).as_secs())
            .collect();
        assert_eq!(waits, [1, 2, 4, 5, 5]);
        assert_eq!(backoff.failed("ns/b", &unavailable()).as_secs(), 1);
        backoff.succeeded("ns/a");
        assert_eq!(backoff.failed("ns/a", &unavailable()).as_secs(), 1);
    }

    #[test]
    fn a_thousand_failures_do_not_overflow() {
        let backoff = Backoff::default();
        for _ in 0..1000 {
            backoff.failed("ns/a", &unavailable());
        }
        assert_eq!(
            backoff.failed("ns/a", &unavailable()),
            Duration::from_secs(300)
        );
    }
}
