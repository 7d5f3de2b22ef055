//! Publishing a plugin as a Wasm OCI artifact.

use std::collections::BTreeMap;

use oci_client::Reference;
use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::manifest::OciImageManifest;
use oci_client::secrets::RegistryAuth;

use super::{CONFIG_MEDIA_TYPE, LAYER_MEDIA_TYPE, SCHEME, pinned};

/// How to reach the registry, and what to say of the plugin in the manifest's annotations.
#[derive(Debug, Clone)]
pub struct PushOptions {
    /// Speak plain HTTP (a registry on loopback).
    pub insecure: bool,
    pub auth: RegistryAuth,
    /// The plugin's type name, version and description.
    pub type_name: String,
    pub version: String,
    pub description: String,
}

/// Pushes `component` to `reference` (`oci://registry/repository[:tag]`; the tag is the
/// plugin's version when none is given) and returns the reference pinned to the manifest's
/// digest, as a plugin ConfigMap should name it.
pub async fn push(
    component: Vec<u8>,
    reference: &str,
    options: &PushOptions,
) -> Result<String, String> {
    let rest = reference
        .trim()
        .strip_prefix(SCHEME)
        .unwrap_or(reference.trim());
    let mut target: Reference = rest
        .parse()
        .map_err(|e| format!("{reference:?} is not an OCI reference: {e}"))?;
    if target.digest().is_some() {
        return Err(format!(
            "{reference:?} names a digest; push to a tag (or to the repository alone: the tag is the plugin's version)"
        ));
    }
    if !rest.contains(':')
        || rest
            .rsplit_once(':')
            .is_some_and(|(_, tag)| tag.contains('/'))
    {
        target = Reference::with_tag(
            target.registry().to_string(),
            target.repository().to_string(),
            options.version.clone(),
        );
    }
    let protocol = if options.insecure {
        ClientProtocol::Http
    } else {
        ClientProtocol::Https
    };
    let client = super::client(ClientConfig {
        protocol,
        // One request per blob: some registries (go-containerregistry's among them) answer
        // a chunked upload's first request without the Location the next one needs.
        use_monolithic_push: true,
        ..ClientConfig::default()
    });
    let layer_digest = super::digest_of(&component);
    let config = serde_json::json!({
        "created": jiff::Timestamp::now().to_string(),
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [layer_digest],
    });
    let config = Config::new(
        serde_json::to_vec(&config).map_err(|e| e.to_string())?,
        CONFIG_MEDIA_TYPE.to_string(),
        None,
    );
    let layers = [ImageLayer::new(
        component,
        LAYER_MEDIA_TYPE.to_string(),
        None,
    )];
    let annotations = BTreeMap::from([
        (
            "org.opencontainers.image.title".to_string(),
            options.type_name.clone(),
        ),
        (
            "org.opencontainers.image.version".to_string(),
            options.version.clone(),
        ),
        (
            "org.opencontainers.image.description".to_string(),
            options.description.clone(),
        ),
    ]);
    let manifest = OciImageManifest::build(&layers, &config, Some(annotations));
    client
        .push(&target, &layers, config, &options.auth, Some(manifest))
        .await
        .map_err(|e| format!("cannot push to {}: {e}", target.whole()))?;
    let digest = client
        .fetch_manifest_digest(&target, &options.auth)
        .await
        .map_err(|e| {
            format!(
                "pushed, but cannot read back the digest of {}: {e}",
                target.whole()
            )
        })?;
    Ok(pinned(&target, &digest))
}
