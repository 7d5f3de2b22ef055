//! Pull credentials: a `kubernetes.io/dockerconfigjson` Secret, as Pods name in
//! `imagePullSecrets`, read for the registry of a reference.

use base64::Engine as _;
use oci_client::secrets::RegistryAuth;
use serde::Deserialize;

/// The key of a `kubernetes.io/dockerconfigjson` Secret.
pub const DOCKER_CONFIG_KEY: &str = ".dockerconfigjson";

/// Why a Secret gives no credentials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error(
        "it has no {DOCKER_CONFIG_KEY} entry (make it with `kubectl create secret docker-registry`)"
    )]
    NoDockerConfig,
    #[error("its {DOCKER_CONFIG_KEY} is not a Docker config: {0}")]
    Malformed(String),
}

#[derive(Deserialize)]
struct DockerConfig {
    #[serde(default)]
    auths: std::collections::BTreeMap<String, Entry>,
}

#[derive(Deserialize)]
struct Entry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
}

/// The credentials `docker_config` (a `.dockerconfigjson`, when the Secret has one) holds
/// for `registry` (`host[:port]`); anonymous when it has none for that registry.
pub fn registry_auth(
    docker_config: Option<&[u8]>,
    registry: &str,
) -> Result<RegistryAuth, AuthError> {
    let bytes = docker_config.ok_or(AuthError::NoDockerConfig)?;
    let config: DockerConfig =
        serde_json::from_slice(bytes).map_err(|e| AuthError::Malformed(e.to_string()))?;
    // Keys are written as `host`, `host:port` or `https://host/v1/`.
    let entry = config.auths.iter().find_map(|(key, entry)| {
        let host = key
            .trim_start_matches("https://")
            .trim_start_matches("http://")
            .split('/')
            .next()
            .unwrap_or_default();
        (host == registry).then_some(entry)
    });
    let Some(entry) = entry else {
        return Ok(RegistryAuth::Anonymous);
    };
    if let (Some(user), Some(password)) = (&entry.username, &entry.password) {
        return Ok(RegistryAuth::Basic(user.clone(), password.clone()));
    }
    let Some(auth) = &entry.auth else {
        return Ok(RegistryAuth::Anonymous);
    };
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(auth.trim())
        .map_err(|e| AuthError::Malformed(format!("auths.{registry}.auth: {e}")))?;
    let decoded = String::from_utf8(decoded)
        .map_err(|_| AuthError::Malformed(format!("auths.{registry}.auth is not UTF-8")))?;
    let (user, password) = decoded.split_once(':').ok_or_else(|| {
        AuthError::Malformed(format!("auths.{registry}.auth is not user:password"))
    })?;
    Ok(RegistryAuth::Basic(user.into(), password.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_those_of_the_references_registry_in_any_key_form() {
        let config = serde_json::json!({"auths": {
            "https://ghcr.io/v1/": {"auth": base64::engine::general_purpose::STANDARD.encode("bot:s3cret")},
            "127.0.0.1:5000": {"username": "u", "password": "p"},
        }})
        .to_string();
        let auth = |registry| registry_auth(Some(config.as_bytes()), registry).unwrap();
        assert_eq!(
            auth("ghcr.io"),
            RegistryAuth::Basic("bot".into(), "s3cret".into())
        );
        assert_eq!(
            auth("127.0.0.1:5000"),
            RegistryAuth::Basic("u".into(), "p".into())
        );
        assert_eq!(auth("quay.io"), RegistryAuth::Anonymous);
        assert_eq!(
            registry_auth(None, "ghcr.io"),
            Err(AuthError::NoDockerConfig)
        );
        let bad = registry_auth(
            Some(b"{\"auths\":{\"ghcr.io\":{\"auth\":\"!!\"}}}"),
            "ghcr.io",
        );
        assert!(matches!(bad, Err(AuthError::Malformed(m)) if m.contains("auths.ghcr.io.auth")));
    }
}
