//! The HTTPS endpoint the API servers call: `POST /validate-workflowgroup` with an
//! AdmissionReview, answered by a [`Reviewer`]. Every replica serves it.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rustls::ServerConfig;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tracing::{debug, info};

use super::review::Reviewer;
use super::tls::ServingCert;

/// The path of the WorkflowGroup validation, as the webhook configurations name it.
pub const VALIDATE_PATH: &str = "/validate-workflowgroup";
/// Largest request body read: an AdmissionReview carries the object and its old version,
/// each at most etcd's 1.5 MiB.
const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;
/// A client that has not finished its TLS handshake by then is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the webhook could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// rustls refused the configuration.
    #[error("cannot configure TLS: {0}")]
    Tls(#[from] rustls::Error),
}

/// The bound listener and its TLS configuration, ready to [`Webhook::run`].
pub struct Webhook {
    listener: TcpListener,
    acceptor: TlsAcceptor,
    reviewer: Reviewer,
}

impl Webhook {
    /// Binds `addr` (port 0: any free port, see [`Webhook::local_addr`]); every handshake
    /// presents what `serving` holds then.
    ///
    /// # Errors
    /// The address cannot be bound, or rustls refuses the configuration.
    pub async fn bind(
        addr: SocketAddr,
        serving: Arc<ServingCert>,
        provider: Arc<rustls::crypto::CryptoProvider>,
        reviewer: Reviewer,
    ) -> Result<Self, ServeError> {
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_cert_resolver(serving);
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| ServeError::Bind { addr, source })?;
        Ok(Self {
            listener,
            acceptor: TlsAcceptor::from(Arc::new(config)),
            reviewer,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Serves until the process ends.
    pub async fn run(self) {
        if let Some(addr) = self.local_addr() {
            info!(%addr, path = VALIDATE_PATH, "serving the admission webhook");
        }
        loop {
            let Ok((stream, peer)) = self.listener.accept().await else {
                continue;
            };
            let acceptor = self.acceptor.clone();
            let reviewer = self.reviewer.clone();
            tokio::spawn(async move {
                let tls =
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => tls,
                        Ok(Err(error)) => {
                            debug!(%peer, %error, "webhook TLS handshake failed");
                            return;
                        }
                        Err(_) => return,
                    };
                let service = service_fn(move |request: Request<Incoming>| {
                    let reviewer = reviewer.clone();
                    async move { Ok::<_, Infallible>(respond(request, &reviewer).await) }
                });
                if let Err(error) = http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .await
                {
                    debug!(%peer, %error, "webhook connection");
                }
            });
        }
    }
}

async fn respond(request: Request<Incoming>, reviewer: &Reviewer) -> Response<Full<Bytes>> {
    if request.method() != Method::POST || request.uri().path() != VALIDATE_PATH {
        return plain(StatusCode::NOT_FOUND, "not found\n");
    }
    let body = match Limited::new(request.into_body(), MAX_BODY_BYTES)
        .collect()
        .await
    {
        Ok(body) => body.to_bytes(),
        Err(error) => return plain(StatusCode::BAD_REQUEST, &format!("{error}\n")),
    };
    let mut response = Response::new(Full::new(Bytes::from(reviewer.review(&body).await)));
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}

fn plain(status: StatusCode, text: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(text.to_string())));
    *response.status_mut() = status;
    response
}
