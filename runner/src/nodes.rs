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

/// The namespace the pod runs in, as its service account says.
pub fn pod_namespace() -> Option<String> {
    std::fs::read_to_string(Path::new(SERVICE_ACCOUNT).join("namespace"))
        .ok()
        .map(|ns| ns.trim().to_owned())
}

/// The API server, as the pod's service account reaches it.
pub struct Api {
    agent: ureq::Agent,
    base: String,
    token: String,
    ca_pem: Vec<u8>,
}

/// Why the API server could not be reached or did not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The pod has no service account token to authenticate with.
    #[error(
        "no service account token in {SERVICE_ACCOUNT} ({0}): give the step a service \
         account that may get nodes (spec.podTemplates.<type>.serviceAccountName)"
    )]
    NoToken(#[source] std::io::Error),
    /// The service account's CA file cannot be read.
    #[error("read {SERVICE_ACCOUNT}/ca.crt: {0}")]
    CaFile(#[source] std::io::Error),
    /// The CA file holds no certificate.
    #[error("no certificate in the service account's ca.crt")]
    NoCertificate,
    /// Not in a pod: the environment names no API server.
    #[error("KUBERNETES_SERVICE_HOST is not set (not in a pod?)")]
    NotInPod,
    /// A request that must carry a body was given none.
    #[error("{method} {url}: no body")]
    NoBody { method: &'static str, url: String },
    /// The request got no answer: connection, TLS or timeout.
    #[error("{method} {url}: {source}")]
    Transport {
        method: &'static str,
        url: String,
        #[source]
        source: Box<ureq::Error>,
    },
    /// The answer came but its body could not be read.
    #[error("{method} {url}: read the answer: {source}")]
    Answer {
        method: &'static str,
        url: String,
        #[source]
        source: Box<ureq::Error>,
    },
    /// The API server answered with a status the request does not accept, and its words.
    #[error("{method} {path}: HTTP {status}: {message}")]
    Status {
        method: &'static str,
        path: String,
        status: u16,
        message: String,
    },
    /// A successful answer that is not JSON.
    #[error("{method} {path}: {source}")]
    Decode {
        method: &'static str,
        path: String,
        #[source]
        source: serde_json::Error,
    },
}

/// Why a Node could not be read or changed.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The API server could not be asked.
    #[error(transparent)]
    Api(#[from] ApiError),
    /// The step's service account may not read the Node.
    #[error(
        "the API server refused to show Node {name} ({status}): give the step a service \
         account that may get nodes"
    )]
    Forbidden { name: String, status: u16 },
    /// No Node of that name.
    #[error("no Node named {0}")]
    Missing(String),
    /// The taint is there but could not be removed.
    #[error(
        "could not remove the taint {key} from Node {name}: {source} (the step's service \
         account needs patch on nodes, as deploy/join/ grants)"
    )]
    RemoveTaint {
        key: String,
        name: String,
        #[source]
        source: ApiError,
    },
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
    pub fn in_cluster() -> Result<Api, ApiError> {
        let dir = Path::new(SERVICE_ACCOUNT);
        let token = std::fs::read_to_string(dir.join("token")).map_err(ApiError::NoToken)?;
        let ca = std::fs::read(dir.join("ca.crt")).map_err(ApiError::CaFile)?;
        let host = std::env::var("KUBERNETES_SERVICE_HOST").map_err(|_| ApiError::NotInPod)?;
        let port = std::env::var("KUBERNETES_SERVICE_PORT").unwrap_or_else(|_| "443".into());
        let host = if host.contains(':') {
            format!("[{host}]")
        } else {
            host
        };
        Api::new(&format!("https://{host}:{port}"), token.trim(), &ca)
    }

    /// An API server at `base` with a bearer `token`, whose certificate `ca_pem` signs.
    pub fn new(base: &str, token: &str, ca_pem: &[u8]) -> Result<Api, ApiError> {
        let certs = ureq::tls::parse_pem(ca_pem)
            .filter_map(|item| match item {
                Ok(ureq::tls::PemItem::Certificate(cert)) => Some(cert),
                _ => None,
            })
            .collect::<Vec<_>>();
        if certs.is_empty() {
            return Err(ApiError::NoCertificate);
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
            ca_pem: ca_pem.to_vec(),
        })
    }

    /// The cluster's CA certificates (PEM), as the service account has them.
    pub fn ca_pem(&self) -> &[u8] {
        &self.ca_pem
    }

    /// `GET path` as JSON; `None` when it does not exist.
    pub fn get_json(&self, path: &str) -> Result<Option<serde_json::Value>, ApiError> {
        let (status, body) = self.send("GET", path, None, "")?;
        match status {
            200 => serde_json::from_str(&body)
                .map(Some)
                .map_err(|source| ApiError::Decode {
                    method: "GET",
                    path: path.to_owned(),
                    source,
                }),
            404 => Ok(None),
            other => Err(status_error("GET", path, other, &body)),
        }
    }

    /// `POST path` of `body`: the status and, when it is not a success, the API server's words.
    pub fn post(&self, path: &str, body: &serde_json::Value) -> Result<(u16, String), ApiError> {
        let (status, text) = self.send("POST", path, Some(body), "application/json")?;
        Ok((status, api_message(&text)))
    }

    /// `POST path` of `body`, which must succeed.
    pub fn post_json(&self, path: &str, body: &serde_json::Value) -> Result<(), ApiError> {
        let (status, text) = self.send("POST", path, Some(body), "application/json")?;
        match status {
            200..=299 => Ok(()),
            other => Err(status_error("POST", path, other, &text)),
        }
    }

    /// `PATCH path` with a JSON patch.
    pub fn json_patch(&self, path: &str, patch: &serde_json::Value) -> Result<(), ApiError> {
        self.patch(path, patch, "application/json-patch+json")
    }

    /// `PATCH path` with a JSON merge patch.
    pub fn merge_patch(&self, path: &str, patch: &serde_json::Value) -> Result<(), ApiError> {
        self.patch(path, patch, "application/merge-patch+json")
    }

    fn patch(&self, path: &str, patch: &serde_json::Value, kind: &str) -> Result<(), ApiError> {
        let (status, text) = self.send("PATCH", path, Some(patch), kind)?;
        match status {
            200..=299 => Ok(()),
            other => Err(status_error("PATCH", path, other, &text)),
        }
    }

    /// `DELETE path`; gone already counts as deleted.
    pub fn delete(&self, path: &str) -> Result<(), ApiError> {
        let (status, text) = self.send("DELETE", path, None, "")?;
        match status {
            200..=299 | 404 => Ok(()),
            other => Err(status_error("DELETE", path, other, &text)),
        }
    }

    fn send(
        &self,
        method: &'static str,
        path: &str,
        body: Option<&serde_json::Value>,
        content_type: &str,
    ) -> Result<(u16, String), ApiError> {
        let url = format!("{}{path}", self.base);
        let auth = format!("Bearer {}", self.token);
        let response = match (method, body) {
            ("GET", _) => self.agent.get(&url).header("Authorization", &auth).call(),
            ("DELETE", _) => self
                .agent
                .delete(&url)
                .header("Authorization", &auth)
                .call(),
            (_, Some(body)) => {
                let request = if method == "POST" {
                    self.agent.post(&url)
                } else {
                    self.agent.patch(&url)
                };
                request
                    .header("Authorization", &auth)
                    .header("Content-Type", content_type)
                    .send(body.to_string().as_bytes())
            }
            (_, None) => return Err(ApiError::NoBody { method, url }),
        };
        let mut response = match response {
            Ok(response) => response,
            Err(source) => {
                return Err(ApiError::Transport {
                    method,
                    url,
                    source: Box::new(source),
                });
            }
        };
        let status = response.status().as_u16();
        let text = read_answer(&mut response, method, url)?;
        Ok((status, text))
    }

    /// The state of the Node `name`, or why it could not be read.
    pub fn node(&self, name: &str) -> Result<NodeState, NodeError> {
        let path = format!("/api/v1/nodes/{name}");
        let url = format!("{}{path}", self.base);
        let mut response = match self
            .agent
            .get(&url)
            .header("Authorization", &format!("Bearer {}", self.token))
            .header("Accept", "application/json")
            .call()
        {
            Ok(response) => response,
            Err(source) => {
                return Err(NodeError::Api(ApiError::Transport {
                    method: "GET",
                    url,
                    source: Box::new(source),
                }));
            }
        };
        let status = response.status().as_u16();
        let body = read_answer(&mut response, "GET", url)?;
        match status {
            200 => Ok(node_state(&body)),
            404 => Ok(NodeState::Missing),
            401 | 403 => Err(NodeError::Forbidden {
                name: name.to_owned(),
                status,
            }),
            other => Err(status_error("GET", &path, other, &body).into()),
        }
    }
}

/// The body of `response` (to a `method` of `url`), at most 4 MiB of it.
fn read_answer(
    response: &mut ureq::http::Response<ureq::Body>,
    method: &'static str,
    url: String,
) -> Result<String, ApiError> {
    response
        .body_mut()
        .with_config()
        .limit(4 * 1024 * 1024)
        .read_to_string()
        .map_err(|source| ApiError::Answer {
            method,
            url,
            source: Box::new(source),
        })
}

/// The API server's refusal of `method path` with `status`, in its own words.
fn status_error(method: &'static str, path: &str, status: u16, body: &str) -> ApiError {
    ApiError::Status {
        method,
        path: path.to_owned(),
        status,
        message: api_message(body),
    }
}

/// The `message` of an API server's Status, or the start of the body.
fn api_message(body: &str) -> String {
    serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| body.chars().take(200).collect())
}

/// Removes the taint `key` from the Node `name` when it has it (a JSON patch that tests the
/// taint is still at that index, so a concurrent change of the taints is not overwritten).
pub fn remove_taint(api: &Api, name: &str, key: &str) -> Result<bool, NodeError> {
    let path = format!("/api/v1/nodes/{name}");
    let node = api
        .get_json(&path)?
        .ok_or_else(|| NodeError::Missing(name.to_owned()))?;
    let taints = node["spec"]["taints"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let Some(index) = taints.iter().position(|t| t["key"] == key) else {
        return Ok(false);
    };
    let patch = serde_json::json!([
        {"op": "test", "path": format!("/spec/taints/{index}"), "value": taints[index]},
        {"op": "remove", "path": format!("/spec/taints/{index}")},
    ]);
    api.json_patch(&path, &patch)
        .map_err(|source| NodeError::RemoveTaint {
            key: key.to_owned(),
            name: name.to_owned(),
            source,
        })?;
    Ok(true)
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
pub fn check(
    api: &Api,
    targets: &[Target],
    timeout: Duration,
    remove: Option<&str>,
) -> Vec<TargetResult> {
    let start = Instant::now();
    let mut pending: Vec<usize> = (0..targets.len()).collect();
    let mut results: Vec<Option<TargetResult>> = vec![None; targets.len()];
    let mut last: Vec<String> = vec![String::new(); targets.len()];
    loop {
        pending.retain(|&i| {
            let target = &targets[i];
            let state = api
                .node(&target.name)
                .and_then(|state| match (state, remove) {
                    (NodeState::Ready, Some(key)) => {
                        if remove_taint(api, &target.name, key)? {
                            println!("[{}] removed the taint {key}", target.name);
                        }
                        Ok(NodeState::Ready)
                    }
                    (state, _) => Ok(state),
                });
            match state {
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
                    last[i] = why.to_string();
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
