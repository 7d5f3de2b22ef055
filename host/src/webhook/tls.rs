//! The serving certificate every replica presents, swapped in place when the Secret changes:
//! each TLS handshake takes the latest, so a renewed certificate is served without a restart
//! and connections already open finish with the one they began with.

use std::sync::{Arc, PoisonError, RwLock};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tracing::{info, warn};

use super::certs::{self, TLS_CRT, TLS_KEY};

/// The certificate and key served now, if any has been read yet.
#[derive(Debug)]
pub struct ServingCert {
    provider: Arc<CryptoProvider>,
    current: RwLock<Option<(Arc<CertifiedKey>, String)>>,
}

impl ServingCert {
    /// Nothing served yet (handshakes fail until [`ServingCert::load`]), keys read with
    /// `provider`.
    pub fn new(provider: Arc<CryptoProvider>) -> Self {
        Self {
            provider,
            current: RwLock::new(None),
        }
    }

    /// Serves `cert_pem` (the serving certificate first) with `key_pem` from the next
    /// handshake on; returns its serial number (hex).
    ///
    /// # Errors
    /// The PEM holds no certificate, or the key is unreadable or of an unsupported kind.
    pub fn load(&self, cert_pem: &[u8], key_pem: &[u8]) -> Result<String, LoadError> {
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
            .collect::<Result<_, _>>()
            .map_err(|error| LoadError::CertificatePem { error })?;
        let first = chain.first().ok_or(LoadError::NoCertificate)?;
        let serial = certs::info(first, TLS_CRT)?.serial;
        let key =
            PrivateKeyDer::from_pem_slice(key_pem).map_err(|error| LoadError::KeyPem { error })?;
        let key = self
            .provider
            .key_provider
            .load_private_key(key)
            .map_err(|error| LoadError::Key { error })?;
        let certified = CertifiedKey::new(chain, key);
        certified
            .keys_match()
            .map_err(|error| LoadError::Mismatch { error })?;
        *self.current.write().unwrap_or_else(PoisonError::into_inner) =
            Some((Arc::new(certified), serial.clone()));
        Ok(serial)
    }

    /// The serial number (hex) of what is served, if anything.
    pub fn serial(&self) -> Option<String> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|(_, serial)| serial.clone())
    }
}

impl ResolvesServerCert for ServingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|(key, _)| key.clone())
    }
}

/// Why the certificate and key of the Secret cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{file}: {error}", file = TLS_CRT)]
    CertificatePem {
        error: rustls::pki_types::pem::Error,
    },
    #[error("{file} holds no certificate", file = TLS_CRT)]
    NoCertificate,
    #[error(transparent)]
    Certificate(#[from] certs::CertError),
    #[error("{file}: {error}", file = TLS_KEY)]
    KeyPem {
        error: rustls::pki_types::pem::Error,
    },
    #[error("{file}: {error}", file = TLS_KEY)]
    Key { error: rustls::Error },
    #[error("{key} does not match {cert}: {error}", key = TLS_KEY, cert = TLS_CRT)]
    Mismatch { error: rustls::Error },
}

/// Watches the Secret `namespace/name` (that one only: a field selector, which the install's
/// RBAC restricts by name) and serves each new certificate it holds, until the process ends.
pub async fn follow(client: Client, namespace: String, name: String, serving: Arc<ServingCert>) {
    let secrets: Api<Secret> = Api::namespaced(client, &namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut secrets = std::pin::pin!(watcher(secrets, config).default_backoff().applied_objects());
    while let Some(event) = secrets.next().await {
        let secret = match event {
            Ok(secret) => secret,
            Err(error) => {
                warn!(%error, secret = %name, %namespace, "cannot watch the webhook's certificate Secret");
                continue;
            }
        };
        let data = secret.data.unwrap_or_default();
        let (Some(cert), Some(key)) = (data.get(TLS_CRT), data.get(TLS_KEY)) else {
            continue;
        };
        if let Err(reason) = load_if_new(&serving, &cert.0, &key.0) {
            warn!(%reason, secret = %name, %namespace, "keeping the served certificate: the Secret's is unusable");
        }
    }
}

fn load_if_new(serving: &ServingCert, cert: &[u8], key: &[u8]) -> Result<(), LoadError> {
    let before = serving.serial();
    let serial = serving.load(cert, key)?;
    if before.as_ref() != Some(&serial) {
        info!(serial = %serial, "serving the webhook certificate");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use super::*;
    use crate::webhook::certs::{Lifetimes, Renewal, plan_renewal, renew, serving_names};

    fn renewed(data: &BTreeMap<String, Vec<u8>>, renewal: &Renewal) -> BTreeMap<String, Vec<u8>> {
        let names = serving_names("svc", "ns");
        let lifetimes = Lifetimes {
            ca: Duration::from_secs(3600),
            serving: Duration::from_secs(600),
        };
        renew(
            data,
            renewal,
            &names,
            lifetimes,
            time::OffsetDateTime::now_utc(),
        )
        .expect("certificates")
    }

    #[test]
    fn a_renewed_certificate_is_served_from_the_next_handshake_on() {
        let serving = ServingCert::new(crate::webhook::crypto_provider());
        assert_eq!(serving.serial(), None);
        let first = renewed(
            &BTreeMap::new(),
            &plan_renewal(&Default::default(), &[], false, 0),
        );
        let serial = serving
            .load(&first[TLS_CRT], &first[TLS_KEY])
            .expect("the first certificate loads");
        assert_eq!(serving.serial(), Some(serial.clone()));
        let second = renewed(
            &first,
            &Renewal {
                new_serving: true,
                ..Renewal::default()
            },
        );
        let renewed_serial = serving
            .load(&second[TLS_CRT], &second[TLS_KEY])
            .expect("the renewed certificate loads");
        assert_ne!(renewed_serial, serial);
        assert_eq!(serving.serial(), Some(renewed_serial));
    }

    #[test]
    fn a_key_that_does_not_match_keeps_the_certificate_served() {
        let serving = ServingCert::new(crate::webhook::crypto_provider());
        let first = renewed(
            &BTreeMap::new(),
            &plan_renewal(&Default::default(), &[], false, 0),
        );
        let serial = serving
            .load(&first[TLS_CRT], &first[TLS_KEY])
            .expect("loads");
        let other = renewed(
            &first,
            &Renewal {
                new_serving: true,
                ..Renewal::default()
            },
        );
        let refused = serving.load(&other[TLS_CRT], &first[TLS_KEY]);
        assert!(refused.is_err(), "{refused:?}");
        assert_eq!(serving.serial(), Some(serial));
    }
}
