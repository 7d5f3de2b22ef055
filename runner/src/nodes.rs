//! `--node-ready`: instead of logging in to the targets, checks that each target's Node object
//! (the Node named as the target) is Ready, through the API server with the step pod's
//! service account, waiting for it up to a time limit. It reports as the SSH runs do, so the
//! plugins' success logic reads it the same way.

use std::path::Path;
use std::time::{Duration, Instant};

use serde::Deserialize;
use workflow_model::Target;

use crate::report::{Outcome, TargetResult};

/// Where Kubernetes mounts a pod's service account.
const SERVICE_ACCOUNT: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// How often a Node that is not Ready yet is read again.
const POLL: Duration = Duration::from_secs(2);

/// The API server, as the pod's service account reaches it.
pub struct Api {
    agent: ureq::Agent,
    base: String,
    token: String,
}

/// What the API server says of one Node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeState {
    Ready,
    /// Not Ready: its Ready condition's status, reason and message.
    NotReady(String),
    /// No Node of that name.
    Missing,
}

impl Api {
    /// The API server of the cluster the pod runs in, or why it cannot be reached.
    pub fn in_cluster() -> Result<Api, String> {
        let dir = Path::new(SERVICE_ACCOUNT);
        let token = std::fs::read_to_string(dir.join("token")).map_err(|e| {
            format!(
                "no service account token in {SERVICE_ACCOUNT} ({e}): give the step a service \
                 account that may get nodes (spec.podTemplates.<type>.serviceAccountName)"
            )
        })?;
        let ca = std::fs::read(dir.join("ca.crt"))
            .map_err(|e| format!("read {SERVICE_ACCOUNT}/ca.crt: {e}"))?;
        let host = std::env::var("KUBERNETES_SERVICE_HOST")
            .map_err(|_| "KUBERNETES_SERVICE_HOST is not set (not in a pod?)".to_owned())?;
        let port = std::env::var("KUBERNETES_SERVICE_PORT").unwrap_or_else(|_| "443".into());
        let host = if host.contains(':') {
            format!("[{host}]")
        } else {
            host
        };
        Api::new(&format!("https://{host}:{port}"), token.trim(), &ca)
    }

    /// An API server at `base` with a bearer `token`, whose certificate `ca_pem` signs.
    pub fn new(base: &str, token: &str, ca_pem: &[u8]) -> Result<Api, String> {
        let certs = ureq::tls::parse_pem(ca_pem)
            .filter_map(|item| match item {
                Ok(ureq::tls::PemItem::Certificate(cert)) => Some(cert),
                _ => None,
            })
            .collect::<Vec<_>>();
        if certs.is_empty() {
            return Err("no certificate in the service account's ca.crt".into());
        }
        let tls = ureq::tls::TlsConfig::builder()
            .root_certs(ureq::tls::RootCerts::new_with_certs(&certs))
            .build();
        let agent = ureq::Agent::config_builder()
            .tls_config(tls)
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(10)))
            .build()
            .into();
        Ok(Api {
            agent,
            base: base.trim_end_matches('/').to_owned(),
            token: token.to_owned(),
        })
    }

    /// The state of the Node `name`, or why it could not be read.
    pub fn node(&self, name: &str) -> Result<NodeState, String> {
        let url = format!("{}/api/v1/nodes/{name}", self.base);
        let mut response = self
            .agent
            .get(&url)
            .header("Authorization", &format!("Bearer {}", self.token))
            .header("Accept", "application/json")
            .call()
            .map_err(|e| format!("GET {url}: {e}"))?;
        let status = response.status().as_u16();
        let body = response
            .body_mut()
            .with_config()
            .limit(4 * 1024 * 1024)
            .read_to_string()
            .map_err(|e| format!("read the Node {name}: {e}"))?;
        match status {
            200 => Ok(node_state(&body)),
            404 => Ok(NodeState::Missing),
            401 | 403 => Err(format!(
                "the API server refused to show Node {name} ({status}): give the step a service \
                 account that may get nodes"
            )),
            other => Err(format!("GET {url}: HTTP {other}")),
        }
    }
}

#[derive(Deserialize)]
struct Node {
    #[serde(default)]
    status: NodeStatus,
}

#[derive(Deserialize, Default)]
struct NodeStatus {
    #[serde(default)]
    conditions: Vec<Condition>,
}

#[derive(Deserialize)]
struct Condition {
    #[serde(rename = "type")]
    type_: String,
    status: String,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    message: String,
}

/// A Node's readiness from its JSON.
pub fn node_state(json: &str) -> NodeState {
    let Ok(node) = serde_json::from_str::<Node>(json) else {
        return NodeState::NotReady("its status could not be read".into());
    };
    match node.status.conditions.iter().find(|c| c.type_ == "Ready") {
        Some(c) if c.status == "True" => NodeState::Ready,
        Some(c) => NodeState::NotReady(format!("Ready={} {}: {}", c.status, c.reason, c.message)),
        None => NodeState::NotReady("it has no Ready condition yet".into()),
    }
}

/// Checks every target's Node until all are Ready or `timeout` has passed.
pub fn check(api: &Api, targets: &[Target], timeout: Duration) -> Vec<TargetResult> {
    let start = Instant::now();
    let mut pending: Vec<usize> = (0..targets.len()).collect();
    let mut results: Vec<Option<TargetResult>> = vec![None; targets.len()];
    let mut last: Vec<String> = vec![String::new(); targets.len()];
    loop {
        pending.retain(|&i| {
            let target = &targets[i];
            match api.node(&target.name) {
                Ok(NodeState::Ready) => {
                    println!("[{}] Node {} is Ready", target.name, target.name);
                    results[i] = Some(TargetResult {
                        name: target.name.clone(),
                        outcome: Outcome::Succeeded,
                        duration: start.elapsed(),
                        tail: String::new(),
                    });
                    false
                }
                Ok(NodeState::Missing) => {
                    last[i] = format!("no Node named {}", target.name);
                    true
                }
                Ok(NodeState::NotReady(why)) => {
                    last[i] = format!("Node {} is not Ready: {why}", target.name);
                    true
                }
                Err(why) => {
                    last[i] = why;
                    true
                }
            }
        });
        if pending.is_empty() || start.elapsed() + POLL > timeout {
            break;
        }
        std::thread::sleep(POLL);
    }
    let waited = start.elapsed().as_secs();
    for &i in &pending {
        let why = format!("{} (after {waited} s)", last[i]);
        println!("[{}] {why}", targets[i].name);
        results[i] = Some(TargetResult {
            name: targets[i].name.clone(),
            outcome: Outcome::CheckFailed(why),
            duration: start.elapsed(),
            tail: String::new(),
        });
    }
    results.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nodes_readiness_is_its_ready_condition() {
        let node = |conditions: &str| format!(r#"{{"status": {{"conditions": {conditions}}}}}"#);
        assert_eq!(
            node_state(&node(
                r#"[{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "True"}]"#
            )),
            NodeState::Ready
        );
        assert_eq!(
            node_state(&node(
                r#"[{"type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": "CNI not ready"}]"#
            )),
            NodeState::NotReady("Ready=False KubeletNotReady: CNI not ready".into())
        );
        assert_eq!(
            node_state(&node("[]")),
            NodeState::NotReady("it has no Ready condition yet".into())
        );
        assert_eq!(
            node_state("{}"),
            NodeState::NotReady("it has no Ready condition yet".into())
        );
    }
}
