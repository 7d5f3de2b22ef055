//! Plugins from OCI registries, as Wasm OCI artifacts: a manifest whose config is
//! `application/vnd.wasm.config.v0+json` and whose one layer is the component,
//! `application/wasm` (the convention `wkg`, `wash` and Spin use).
//!
//! A plugin ConfigMap names an artifact instead of holding it: a `data` entry `<type>.wasm`
//! whose value is `oci://<registry>/<repository>@sha256:<digest>` (or `:<tag>`, resolved once
//! and pinned). [`Puller`] fetches it in the background, keeps it on disk by digest, and
//! backs off when a pull fails; the ConfigMap source offers the bytes to the registry like
//! any other plugin file. [`push`] publishes a plugin (`workflow-operator plugin push`).

mod auth;
mod pull;
mod push;

use std::time::Duration;

pub use auth::{AuthError, DOCKER_CONFIG_KEY, registry_auth};
pub use pull::{PullConfig, Puller};
pub use push::{PushOptions, push};

/// What a reference to an artifact starts with.
pub const SCHEME: &str = "oci://";
/// The config media type of a Wasm artifact.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The media type of the one layer of a Wasm artifact: the component.
pub const LAYER_MEDIA_TYPE: &str = "application/wasm";

/// How big an artifact may be unless the flags say otherwise: the largest components of
/// interpreted languages (Python with its standard library) are about 40 MB.
pub const DEFAULT_MAX_BYTES: u64 = 128 << 20;
/// How long one pull may take unless the flags say otherwise.
pub const DEFAULT_PULL_TIMEOUT: Duration = Duration::from_secs(120);

/// A registry client over rustls with ring, the provider the rest of the operator uses.
fn client(config: oci_client::client::ClientConfig) -> oci_client::Client {
    // Only the first install in a process takes; a provider already there is kept.
    let _ = rustls::crypto::ring::default_provider().install_default();
    oci_client::Client::new(config)
}

/// `oci://registry/repository@sha256:...` (or `:tag`) as a registry reference.
pub fn parse_reference(text: &str) -> Result<oci_client::Reference, String> {
    let Some(rest) = text.trim().strip_prefix(SCHEME) else {
        return Err(format!(
            "{text:?} is not an OCI reference: write oci://<registry>/<repository>@sha256:<digest> (or :<tag>)"
        ));
    };
    let reference: oci_client::Reference = rest
        .parse()
        .map_err(|e| format!("{text:?} is not an OCI reference ({e}): write oci://<registry>/<repository>@sha256:<digest> (or :<tag>)"))?;
    // As written: a bare `plugins/x` would mean Docker Hub's `docker.io/plugins/x`.
    let registry = rest.split('/').next().unwrap_or_default();
    if !rest.contains('/') || (!registry.contains(['.', ':']) && registry != "localhost") {
        return Err(format!(
            "{text:?} names no registry: write oci://<registry>/<repository>@sha256:<digest>"
        ));
    }
    Ok(reference)
}

/// The OCI digest of `bytes`: `sha256:<hex>`.
pub fn digest_of(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes)))
}

/// `reference` written back as the `oci://` form, pinned to `digest`.
pub fn pinned(reference: &oci_client::Reference, digest: &str) -> String {
    format!(
        "{SCHEME}{}/{}@{digest}",
        reference.registry(),
        reference.repository()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reference_needs_the_scheme_and_a_registry_and_keeps_its_digest_or_tag() {
        let digest = format!("sha256:{}", "a".repeat(64));
        let r = parse_reference(&format!("oci://127.0.0.1:5000/checks/disk@{digest}")).unwrap();
        assert_eq!(r.registry(), "127.0.0.1:5000");
        assert_eq!(r.repository(), "checks/disk");
        assert_eq!(r.digest(), Some(digest.as_str()));
        let r = parse_reference("oci://ghcr.io/acme/disk:1.2").unwrap();
        assert_eq!((r.tag(), r.digest()), (Some("1.2"), None));
        assert_eq!(
            pinned(&r, &digest),
            format!("oci://ghcr.io/acme/disk@{digest}")
        );
        for bad in [
            "ghcr.io/acme/disk:1.2",
            "oci://disk:1.2",
            "oci://ghcr.io/Acme/disk",
            "oci://",
        ] {
            let e = parse_reference(bad).expect_err(bad);
            assert!(e.contains("oci://<registry>/"), "{bad}: {e}");
        }
    }
}
