//! Pulling plugins from registries in the background: one pull per reference at a time, the
//! result kept on disk by digest, and back-off after a failure.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use oci_client::Reference;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::secrets::RegistryAuth;
use sha2::{Digest as _, Sha256};
use tracing::{info, warn};

use super::{LAYER_MEDIA_TYPE, digest_of, parse_reference, pinned};
use crate::plugin::PluginError;

/// The first wait after a failed pull; it doubles with each failure, up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(5);
const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// How the [`Puller`] reaches registries and where it keeps what it pulled.
#[derive(Debug, Clone)]
pub struct PullConfig {
    /// Where pulled components are kept, by digest (and tags' pins): a restart pulls nothing
    /// it has. None: in memory only.
    pub cache_dir: Option<PathBuf>,
    /// Registries (`host[:port]`) spoken to over plain HTTP.
    pub insecure_registries: Vec<String>,
    /// The largest component pulled, in bytes.
    pub max_bytes: u64,
    /// How long one pull may take.
    pub timeout: Duration,
}

/// Pulls plugin artifacts in the background. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct Puller {
    inner: Arc<Inner>,
}

struct Inner {
    config: PullConfig,
    runtime: tokio::runtime::Handle,
    entries: Mutex<HashMap<String, Entry>>,
    changed: tokio::sync::Notify,
}

enum Entry {
    Pulling,
    Pulled {
        layer_digest: String,
        bytes: Option<Arc<Vec<u8>>>,
    },
    Failed {
        error: String,
        failures: u32,
        retry_at: Instant,
    },
}

impl Puller {
    /// A puller using the current tokio runtime for its pulls.
    pub fn new(config: PullConfig) -> Self {
        Self {
            inner: Arc::new(Inner {
                config,
                runtime: tokio::runtime::Handle::current(),
                entries: Mutex::new(HashMap::new()),
                changed: tokio::sync::Notify::new(),
            }),
        }
    }

    /// Resolves once something offered may have changed: a pull ended, or a failed one is
    /// due to be tried again.
    pub async fn changed(&self) {
        self.inner.changed.notified().await;
    }

    /// The component `reference` names, once pulled (from disk when it was pulled before);
    /// meanwhile why not: it is being pulled, or the last pull failed and when the next try
    /// is. Starts a pull when none runs and none is waiting out its back-off. Blocks on the
    /// disk: call it off the async threads.
    pub fn offer(&self, reference: &str, auth: RegistryAuth) -> Result<Vec<u8>, PluginError> {
        let reference = reference.trim();
        let failed = |reason: String| PluginError::Pull {
            reference: reference.to_string(),
            reason,
        };
        let parsed = parse_reference(reference).map_err(failed)?;
        let mut entries = self
            .inner
            .entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut failures = 0;
        match entries.get(reference) {
            Some(Entry::Pulled {
                layer_digest,
                bytes,
            }) => {
                match bytes
                    .as_ref()
                    .map(|b| b.to_vec())
                    .or_else(|| self.inner.blob(layer_digest))
                {
                    Some(bytes) => return Ok(bytes),
                    None => {
                        warn!(%reference, "the pulled plugin is gone from the cache; pulling it again")
                    }
                }
            }
            Some(Entry::Pulling) => {
                return Err(PluginError::Pulling {
                    reference: reference.to_string(),
                });
            }
            Some(Entry::Failed {
                error,
                failures: n,
                retry_at,
            }) => {
                let now = Instant::now();
                if now < *retry_at {
                    let wait = retry_at.duration_since(now).as_secs().max(1);
                    return Err(failed(format!(
                        "{error} (failed {n} time{}; next try in {wait} s)",
                        if *n == 1 { "" } else { "s" }
                    )));
                }
                failures = *n;
            }
            None => {}
        }
        if let Some((layer_digest, bytes)) = self.inner.on_disk(reference, &parsed) {
            entries.insert(
                reference.to_string(),
                Entry::Pulled {
                    layer_digest,
                    bytes: None,
                },
            );
            return Ok(bytes);
        }
        entries.insert(reference.to_string(), Entry::Pulling);
        drop(entries);
        let inner = Arc::clone(&self.inner);
        let key = reference.to_string();
        self.inner.runtime.spawn(async move {
            let started = Instant::now();
            let result = match tokio::time::timeout(inner.config.timeout, inner.pull(&key, &parsed, &auth)).await {
                Ok(result) => result,
                Err(_) => Err(format!(
                    "the registry did not answer within {} s",
                    inner.config.timeout.as_secs()
                )),
            };
            let retry = match result {
                Ok((layer_digest, bytes)) => {
                    info!(reference = %key, %layer_digest, bytes = bytes.len(), ms = started.elapsed().as_millis() as u64, "pulled plugin");
                    let bytes = inner.config.cache_dir.is_none().then(|| Arc::new(bytes));
                    inner.set(&key, Entry::Pulled { layer_digest, bytes });
                    None
                }
                Err(error) => {
                    let failures = failures + 1;
                    let wait = backoff(failures);
                    warn!(reference = %key, %error, failures, retry_in_s = wait.as_secs(), "cannot pull plugin");
                    inner.set(&key, Entry::Failed { error, failures, retry_at: Instant::now() + wait });
                    Some(wait)
                }
            };
            inner.changed.notify_one();
            if let Some(wait) = retry {
                tokio::time::sleep(wait).await;
                inner.changed.notify_one();
            }
        });
        Err(PluginError::Pulling {
            reference: reference.to_string(),
        })
    }

    /// Forgets every reference not in `keep`, so that a reference removed and added again is
    /// pulled again (unless the disk has it) and the map does not grow.
    pub fn retain(&self, keep: &[&str]) {
        let mut entries = self
            .inner
            .entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        entries.retain(|k, e| matches!(e, Entry::Pulling) || keep.contains(&k.as_str()));
    }
}

impl std::fmt::Debug for Puller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Puller")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

/// `error: its cause: its cause's cause`: a transport error's own text rarely says what
/// happened ("error sending request"), its causes do ("Connection refused").
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(c) = cause {
        let c_text = c.to_string();
        if !text.contains(&c_text) {
            text = format!("{text}: {c_text}");
        }
        cause = c.source();
    }
    text
}

/// The wait after the `failures`th failure in a row.
fn backoff(failures: u32) -> Duration {
    FIRST_BACKOFF
        .saturating_mul(1 << failures.saturating_sub(1).min(16))
        .min(MAX_BACKOFF)
}

impl Inner {
    fn set(&self, key: &str, entry: Entry) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.insert(key.to_string(), entry);
    }

    /// Pulls the component of `reference`: the manifest (a tag resolved to its digest), its
    /// one `application/wasm` layer within the size limit, checked against its digest.
    async fn pull(
        &self,
        key: &str,
        reference: &Reference,
        auth: &RegistryAuth,
    ) -> Result<(String, Vec<u8>), String> {
        let anonymous = matches!(auth, RegistryAuth::Anonymous);
        let shown = |e: oci_client::errors::OciDistributionError| match e {
            oci_client::errors::OciDistributionError::UnauthorizedError { url } if anonymous => {
                format!(
                    "the registry wants a login ({url} answered 401 Unauthorized): name a pull Secret with the ConfigMap's annotation workflow.rxg456.cn/pull-secret"
                )
            }
            oci_client::errors::OciDistributionError::UnauthorizedError { url } => format!(
                "the registry refused the pull Secret's credentials ({url} answered 401 Unauthorized)"
            ),
            e => with_causes(&e),
        };
        // A client per pull: a client keeps the first credentials it was given for a registry,
        // and a pull Secret may have changed since.
        let client = super::client(ClientConfig {
            protocol: ClientProtocol::HttpsExcept(self.config.insecure_registries.clone()),
            connect_timeout: Some(Duration::from_secs(10)),
            // A pull as a whole is bounded by `config.timeout`.
            read_timeout: None,
            ..ClientConfig::default()
        });
        let manifest_digest = match reference.digest() {
            Some(digest) => digest.to_string(),
            None => client
                .fetch_manifest_digest(reference, auth)
                .await
                .map_err(shown)?,
        };
        let by_digest = Reference::with_digest(
            reference.registry().to_string(),
            reference.repository().to_string(),
            manifest_digest.clone(),
        );
        let (manifest, served) = client
            .pull_image_manifest(&by_digest, auth)
            .await
            .map_err(shown)?;
        if served != manifest_digest {
            return Err(format!(
                "the registry served a manifest of digest {served} for {manifest_digest}"
            ));
        }
        let layers: Vec<_> = manifest
            .layers
            .iter()
            .filter(|l| l.media_type == LAYER_MEDIA_TYPE)
            .collect();
        let [layer] = layers[..] else {
            let types: Vec<_> = manifest
                .layers
                .iter()
                .map(|l| l.media_type.as_str())
                .collect();
            return Err(format!(
                "not a Wasm artifact: it needs exactly one {LAYER_MEDIA_TYPE} layer, its layers are [{}] (push plugins with `workflow-operator plugin push`)",
                types.join(", ")
            ));
        };
        let max = self.config.max_bytes;
        if u64::try_from(layer.size).unwrap_or(u64::MAX) > max {
            return Err(format!(
                "the component is {} bytes, over the limit of {max} bytes (--plugin-max-mib)",
                layer.size
            ));
        }
        let mut stream = client
            .pull_blob_stream(&by_digest, layer)
            .await
            .map_err(shown)?
            .stream;
        let mut bytes = Vec::with_capacity(usize::try_from(layer.size).unwrap_or(0));
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| {
                // The client checks the digest as the bytes stream in; its error type is
                // private, its text is "Invalid digest. Expected ..., got ...".
                if e.to_string().starts_with("Invalid digest") {
                    format!("the component's bytes do not match its digest: {e}")
                } else {
                    format!("reading the component: {}", with_causes(&e))
                }
            })?;
            bytes.extend_from_slice(&chunk);
            if bytes.len() as u64 > max {
                return Err(format!(
                    "the component is over the limit of {max} bytes (--plugin-max-mib)"
                ));
            }
        }
        let actual = digest_of(&bytes);
        if actual != layer.digest {
            return Err(format!(
                "the component's bytes do not match its digest: the manifest says {}, the bytes are {actual}",
                layer.digest
            ));
        }
        if let Some(dir) = &self.config.cache_dir
            && let Err(e) = store(dir, key, reference, &manifest_digest, &actual, &bytes)
        {
            warn!(reference = %key, error = %e, dir = %dir.display(), "cannot keep the pulled plugin on disk; it is pulled again after a restart");
        }
        info!(reference = %key, pinned = %pinned(reference, &manifest_digest), "resolved plugin reference");
        Ok((actual, bytes))
    }

    /// What an earlier pull left on disk for `reference`: its layer digest and bytes, checked.
    fn on_disk(&self, key: &str, reference: &Reference) -> Option<(String, Vec<u8>)> {
        let dir = self.config.cache_dir.as_ref()?;
        let manifest = match reference.digest() {
            Some(digest) => digest.to_string(),
            None => read_text(&dir.join("refs").join(name_of(key)))?,
        };
        let layer = read_text(&dir.join("manifests").join(hex_of(&manifest)?))?;
        let bytes = self.blob(&layer)?;
        Some((layer, bytes))
    }

    /// The cached component of digest `layer`, when its bytes still match it.
    fn blob(&self, layer: &str) -> Option<Vec<u8>> {
        let dir = self.config.cache_dir.as_ref()?;
        let bytes = std::fs::read(dir.join("blobs").join(hex_of(layer)?)).ok()?;
        (digest_of(&bytes) == layer).then_some(bytes)
    }
}

/// Keeps a pulled component: `blobs/<layer>`, `manifests/<manifest>` naming the layer, and
/// for a tag `refs/<sha256 of the reference>` naming the manifest (the tag stays pinned).
fn store(
    dir: &Path,
    key: &str,
    reference: &Reference,
    manifest: &str,
    layer: &str,
    bytes: &[u8],
) -> std::io::Result<()> {
    let invalid = || std::io::Error::new(std::io::ErrorKind::InvalidData, "not a sha256 digest");
    write_atomic(
        &dir.join("blobs"),
        &hex_of(layer).ok_or_else(invalid)?,
        bytes,
    )?;
    write_atomic(
        &dir.join("manifests"),
        &hex_of(manifest).ok_or_else(invalid)?,
        layer.as_bytes(),
    )?;
    if reference.digest().is_none() {
        write_atomic(&dir.join("refs"), &name_of(key), manifest.as_bytes())?;
    }
    Ok(())
}

fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".{name}.{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, dir.join(name))
}

fn read_text(path: &Path) -> Option<String> {
    Some(std::fs::read_to_string(path).ok()?.trim().to_string())
}

/// The hex of a `sha256:<hex>` digest, when it is one (a safe file name).
fn hex_of(digest: &str) -> Option<String> {
    let hex = digest.strip_prefix("sha256:")?;
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| hex.to_ascii_lowercase())
}

/// A file name for a reference.
fn name_of(reference: &str) -> String {
    hex::encode(Sha256::digest(reference.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_after_a_failure_doubles_from_five_seconds_up_to_five_minutes() {
        let waits: Vec<u64> = (1..=9).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(waits, [5, 10, 20, 40, 80, 160, 300, 300, 300]);
        assert_eq!(backoff(u32::MAX), MAX_BACKOFF);
    }

    #[test]
    fn only_sha256_digests_name_files() {
        let hex = "ab".repeat(32);
        assert_eq!(hex_of(&format!("sha256:{hex}")), Some(hex));
        assert_eq!(hex_of("sha256:../../etc/passwd"), None);
        assert_eq!(hex_of(&format!("sha512:{}", "a".repeat(64))), None);
    }
}
