//! `--join`: before logging in to the targets, mints a bootstrap token for this run (the Secret
//! `bootstrap-token-<id>` in `kube-system`, as `kubeadm token create` and Cluster API's kubeadm
//! bootstrap provider make it, with a short expiry and the group
//! [`EXTRA_GROUP`]) and gives every target, on its standard input, a bootstrap kubeconfig:
//! the API server's address as targets reach it, the cluster's CA and the token. The token is in
//! no argument, environment variable, log line or report. When the run ends, the Secret is
//! deleted; should the runner die first, the expiry ends it (the token cleaner deletes it).
//!
//! The pod's service account needs what `deploy/join/` grants: create and delete Secrets in
//! `kube-system` (a ValidatingAdmissionPolicy there narrows it to bootstrap tokens of
//! [`EXTRA_GROUP`]) and get the `default/kubernetes` Endpoints.

use std::time::Duration;

use base64::Engine as _;
use serde_json::json;
use workflow_model::text::shell_quote;

use crate::nodes::{Api, ApiError};

/// The group a token of ours authenticates in, besides `system:bootstrappers`: what
/// `deploy/join/` lets create a node client CSR and have it approved.
pub const EXTRA_GROUP: &str = "system:bootstrappers:workflow-operator";
/// Labels the Secrets this runner makes.
const LABEL: &str = "workflow.rxg456.cn/bootstrap-token";

/// Why a run's bootstrap token could not be made.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    /// The API server could not be asked.
    #[error(transparent)]
    Api(#[from] ApiError),
    /// The cluster does not say where its API server is.
    #[error("no Endpoints default/kubernetes: name the API server in setup's join.apiServer")]
    NoEndpoints,
    /// The cluster's Endpoints list no address for its API server.
    #[error(
        "the Endpoints default/kubernetes list no address: name the API server in setup's \
         join.apiServer"
    )]
    NoAddress,
    /// The kernel's random source cannot be opened.
    #[error("open /dev/urandom: {0}")]
    OpenRandom(#[source] std::io::Error),
    /// The kernel's random source cannot be read.
    #[error("read /dev/urandom: {0}")]
    ReadRandom(#[source] std::io::Error),
    /// The token's expiry is beyond what a timestamp holds.
    #[error("the token's expiry: {0}")]
    Expiry(#[source] jiff::Error),
    /// The token's Secret could not be created.
    #[error(
        "could not create the bootstrap token Secret {name} in kube-system: {source} (the \
         step's service account needs the rights deploy/join/ grants)"
    )]
    CreateSecret {
        name: String,
        #[source]
        source: ApiError,
    },
}

/// A bootstrap token of this run, and what the targets are given.
pub struct Bootstrap {
    /// The Secret's name, `bootstrap-token-<id>`.
    pub secret: String,
    /// The bootstrap kubeconfig, sent on every target's standard input.
    pub kubeconfig: Vec<u8>,
    /// Shell assignments put before the command: the API server and its version.
    pub assignments: String,
}

/// Mints a token valid for `ttl` and builds the bootstrap kubeconfig for `server` (or the API
/// server's advertised address, from the `default/kubernetes` Endpoints).
pub fn mint(api: &Api, ttl: Duration, server: Option<&str>) -> Result<Bootstrap, JoinError> {
    let server = match server {
        Some(server) => server.trim_end_matches('/').to_owned(),
        None => advertised(api)?,
    };
    let version = api
        .get_json("/version")?
        .and_then(|v| v["gitVersion"].as_str().map(str::to_owned))
        .unwrap_or_default();
    let id = random_word(6)?;
    let secret = random_word(16)?;
    let name = format!("bootstrap-token-{id}");
    let expiration = expiry(ttl)?;
    let body = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": "kube-system",
            "labels": {LABEL: "true"},
        },
        "type": "bootstrap.kubernetes.io/token",
        "stringData": {
            "description": "workflow-operator setup join: one run of a join step",
            "token-id": id,
            "token-secret": secret,
            "expiration": expiration,
            "usage-bootstrap-authentication": "true",
            "auth-extra-groups": EXTRA_GROUP,
        },
    });
    api.post_json("/api/v1/namespaces/kube-system/secrets", &body)
        .map_err(|source| JoinError::CreateSecret {
            name: name.clone(),
            source,
        })?;
    let ca = base64::engine::general_purpose::STANDARD.encode(api.ca_pem());
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: cluster\n  cluster:\n    server: {server}\n    \
         certificate-authority-data: {ca}\ncontexts:\n- name: bootstrap\n  context:\n    cluster: cluster\n    \
         user: bootstrap\ncurrent-context: bootstrap\nusers:\n- name: bootstrap\n  user:\n    token: {id}.{secret}\n"
    );
    Ok(Bootstrap {
        secret: name,
        kubeconfig: kubeconfig.into_bytes(),
        assignments: format!(
            "WORKFLOW_API_SERVER={}\nWORKFLOW_CLUSTER_VERSION={}\n",
            shell_quote(&server),
            shell_quote(&version)
        ),
    })
}

/// Deletes the run's token; says why when it could not (the expiry still ends it).
pub fn revoke(api: &Api, bootstrap: &Bootstrap) -> Result<(), ApiError> {
    api.delete(&format!(
        "/api/v1/namespaces/kube-system/secrets/{}",
        bootstrap.secret
    ))
}

/// `https://<address>:<port>` of the API server as the `default/kubernetes` Endpoints list it:
/// the address it advertises, which machines outside the cluster reach (the Service's cluster IP
/// needs a kube-proxy they do not run yet).
fn advertised(api: &Api) -> Result<String, JoinError> {
    let endpoints = api
        .get_json("/api/v1/namespaces/default/endpoints/kubernetes")?
        .ok_or(JoinError::NoEndpoints)?;
    let subset = &endpoints["subsets"][0];
    let ip = subset["addresses"][0]["ip"]
        .as_str()
        .ok_or(JoinError::NoAddress)?;
    let ports = subset["ports"].as_array().cloned().unwrap_or_default();
    let port = ports
        .iter()
        .find(|p| p["name"] == "https")
        .or(ports.first())
        .and_then(|p| p["port"].as_u64())
        .unwrap_or(443);
    Ok(if ip.contains(':') {
        format!("https://[{ip}]:{port}")
    } else {
        format!("https://{ip}:{port}")
    })
}

/// `len` characters of `[a-z0-9]`, the bootstrap token alphabet, from the kernel's random source.
fn random_word(len: usize) -> Result<String, JoinError> {
    use std::io::Read as _;
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut word = String::with_capacity(len);
    let mut file = std::fs::File::open("/dev/urandom").map_err(JoinError::OpenRandom)?;
    let mut byte = [0u8; 1];
    while word.len() < len {
        file.read_exact(&mut byte).map_err(JoinError::ReadRandom)?;
        // 252 = 7 * 36: every character equally likely.
        if byte[0] < 252 {
            word.push(ALPHABET[usize::from(byte[0]) % ALPHABET.len()] as char);
        }
    }
    Ok(word)
}

/// `ttl` from now, as RFC 3339 in UTC to the second (the form the token cleaner reads).
fn expiry(ttl: Duration) -> Result<String, JoinError> {
    let at = jiff::SignedDuration::try_from(ttl)
        .and_then(|ttl| jiff::Timestamp::now().checked_add(ttl))
        .and_then(|t| t.round(jiff::Unit::Second))
        .map_err(JoinError::Expiry)?;
    Ok(at.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiries_are_whole_seconds_in_utc() {
        let at = expiry(Duration::from_secs(900)).expect("an expiry");
        let parsed: jiff::Timestamp = at.parse().expect("RFC 3339");
        let ahead = parsed.duration_since(jiff::Timestamp::now()).as_secs();
        assert!((898..=900).contains(&ahead), "{at} is {ahead} s ahead");
        assert!(at.ends_with('Z') && !at.contains('.'), "{at}");
    }

    #[test]
    fn token_words_use_the_bootstrap_alphabet() {
        let id = random_word(6).expect("random");
        let secret = random_word(16).expect("random");
        assert_eq!((id.len(), secret.len()), (6, 16));
        assert!(
            format!("{id}{secret}")
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()),
            "{id}.{secret}"
        );
        assert_ne!(secret, random_word(16).expect("random"));
    }
}
