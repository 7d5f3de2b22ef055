//! The HTTPS endpoint the API servers call: `POST /validate-workflowgroup` with an
//! AdmissionReview, answered by a [`Review`] (the [`Reviewer`]). Every replica serves it,
//! within its [`WebhookLimits`]: each stage of a connection has its time (handshake, head,
//! body, age), each request its size, and connections, bodies' bytes and reviews their
//! number, so that slow, large or many clients cost a bounded amount and are answered (or
//! closed) early, while the API server's reviews go on.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONNECTION, CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use rustls::ServerConfig;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;
use tracing::{debug, info, warn};

use super::complexity;
use super::limits::WebhookLimits;
use super::metrics::{Rejection, WebhookMetrics};
use super::request;
use super::review::Reviewer;
use super::tls::ServingCert;

/// The path of the WorkflowGroup validation, as the webhook configurations name it.
pub const VALIDATE_PATH: &str = "/validate-workflowgroup";
/// How long to wait after a failed accept (out of file descriptors, say) before the next:
/// the error would only repeat at once.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// hyper's smallest read buffer.
const MIN_READ_BUFFER: usize = 8192;

/// What answers the AdmissionReviews the server has read and checked: the [`Reviewer`].
pub trait Review: Send + Sync + 'static {
    /// The AdmissionReview (JSON) answering the one in `body`.
    fn review(&self, body: &[u8]) -> impl Future<Output = Vec<u8>> + Send;
}

impl Review for Reviewer {
    fn review(&self, body: &[u8]) -> impl Future<Output = Vec<u8>> + Send {
        Reviewer::review(self, body)
    }
}

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
pub struct Webhook<R = Reviewer> {
    listener: TcpListener,
    shared: Arc<Shared<R>>,
}

/// What every connection of one server uses.
struct Shared<R> {
    acceptor: TlsAcceptor,
    reviewer: R,
    limits: WebhookLimits,
    metrics: Option<WebhookMetrics>,
    /// One permit a byte of the request bodies held at once.
    body_budget: Arc<Semaphore>,
    /// One permit a review being decoded and decided.
    reviews: Arc<Semaphore>,
}

impl<R> Shared<R> {
    fn reject(&self, why: Rejection) {
        if let Some(metrics) = &self.metrics {
            metrics.reject(why);
        }
    }
}

impl<R: Review> Webhook<R> {
    /// Binds `addr` (port 0: any free port, see [`Webhook::local_addr`]); every handshake
    /// presents what `serving` holds then; connections and requests are held to `limits`,
    /// and what they turn away is counted in `metrics`.
    ///
    /// # Errors
    /// The address cannot be bound, or rustls refuses the configuration.
    pub async fn bind(
        addr: SocketAddr,
        serving: Arc<ServingCert>,
        provider: Arc<rustls::crypto::CryptoProvider>,
        reviewer: R,
        limits: WebhookLimits,
        metrics: Option<WebhookMetrics>,
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
            shared: Arc::new(Shared {
                acceptor: TlsAcceptor::from(Arc::new(config)),
                reviewer,
                body_budget: Arc::new(Semaphore::new(limits.body_budget_bytes)),
                reviews: Arc::new(Semaphore::new(limits.max_reviews_in_flight)),
                limits,
                metrics,
            }),
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
        let connections = Arc::new(Semaphore::new(self.shared.limits.max_connections));
        loop {
            let (stream, peer) = match self.listener.accept().await {
                Ok(accepted) => accepted,
                Err(error) => {
                    warn!(%error, "the webhook cannot accept a connection");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            };
            // Closed at once: a connection waiting for a slot would hold its socket anyway.
            let Ok(slot) = connections.clone().try_acquire_owned() else {
                debug!(%peer, "webhook connection refused: too many open");
                self.shared.reject(Rejection::TooManyConnections);
                continue;
            };
            let shared = self.shared.clone();
            tokio::spawn(async move {
                serve_connection(stream, peer, &shared).await;
                drop(slot);
            });
        }
    }
}

/// One connection, from the handshake until it closes, at most `max_connection_age` (and a
/// body's time to finish what is in progress then).
async fn serve_connection<R: Review>(stream: TcpStream, peer: SocketAddr, shared: &Arc<Shared<R>>) {
    let limits = &shared.limits;
    let tls = match tokio::time::timeout(limits.handshake_timeout, shared.acceptor.accept(stream))
        .await
    {
        Ok(Ok(tls)) => tls,
        Ok(Err(error)) => {
            debug!(%peer, %error, "webhook TLS handshake failed");
            return;
        }
        Err(_) => {
            debug!(%peer, "webhook TLS handshake timed out");
            shared.reject(Rejection::Timeout);
            return;
        }
    };
    // Whether a request was answered: a head timeout after one is an idle connection closed,
    // not a slow client turned away.
    let answered = Arc::new(AtomicBool::new(false));
    let service = {
        let shared = shared.clone();
        let answered = answered.clone();
        service_fn(move |request: Request<Incoming>| {
            let shared = shared.clone();
            let answered = answered.clone();
            async move {
                let response = respond(request, &shared).await;
                answered.store(true, Ordering::Relaxed);
                Ok::<_, Infallible>(response)
            }
        })
    };
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.head_timeout)
        .max_header_size(limits.max_head_bytes)
        .max_buf_size(limits.max_head_bytes.max(MIN_READ_BUFFER));
    let mut connection = pin!(builder.serve_connection(TokioIo::new(tls), service));
    let ended = tokio::select! {
        ended = connection.as_mut() => ended,
        () = tokio::time::sleep(limits.max_connection_age) => {
            connection.as_mut().graceful_shutdown();
            match tokio::time::timeout(limits.body_timeout, connection.as_mut()).await {
                Ok(ended) => ended,
                Err(_) => {
                    debug!(%peer, "webhook connection closed: past its age");
                    shared.reject(Rejection::Timeout);
                    return;
                }
            }
        }
    };
    if let Err(error) = ended {
        if error.is_timeout() && !answered.load(Ordering::Relaxed) {
            shared.reject(Rejection::Timeout);
        } else if error.is_parse_too_large() {
            shared.reject(Rejection::TooLarge);
        }
        debug!(%peer, %error, "webhook connection");
    }
}

async fn respond<R: Review>(
    request: Request<Incoming>,
    shared: &Shared<R>,
) -> Response<Full<Bytes>> {
    if request.method() != Method::POST || request.uri().path() != VALIDATE_PATH {
        return plain(StatusCode::NOT_FOUND, "not found");
    }
    let limits = &shared.limits;
    let body = match request::read_body(request.into_body(), limits, &shared.body_budget).await {
        Ok(body) => body,
        Err(refused) => {
            if let Some(why) = refused.rejection() {
                shared.reject(why);
            }
            let mut response = plain(refused.status(), &refused.to_string());
            if refused.status() == StatusCode::SERVICE_UNAVAILABLE {
                retry_soon(&mut response);
            }
            // What is left of the body is not read: the connection cannot carry another request.
            response
                .headers_mut()
                .insert(CONNECTION, HeaderValue::from_static("close"));
            return response;
        }
    };
    let Ok(_slot) = shared.reviews.try_acquire() else {
        shared.reject(Rejection::Busy);
        let mut response = plain(
            StatusCode::SERVICE_UNAVAILABLE,
            "the webhook is reviewing as many requests as it takes at once; try again",
        );
        retry_soon(&mut response);
        return response;
    };
    if let Err(why) = complexity::check(body.bytes(), limits.max_json_values, limits.max_json_depth)
    {
        shared.reject(Rejection::TooComplex);
        return plain(StatusCode::BAD_REQUEST, &why.to_string());
    }
    let mut response = Response::new(Full::new(Bytes::from(
        shared.reviewer.review(body.bytes()).await,
    )));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn plain(status: StatusCode, text: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(format!("{text}\n"))));
    *response.status_mut() = status;
    response
}

fn retry_soon(response: &mut Response<Full<Bytes>>) {
    response
        .headers_mut()
        .insert(RETRY_AFTER, HeaderValue::from_static("1"));
}
