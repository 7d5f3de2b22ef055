//! Health, readiness, metrics and the loaded plugins, over HTTP.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tracing::{info, warn};

use crate::plugin::PluginRegistry;

/// What `/readyz` reports: ready once the plugins have been loaded and both controllers'
/// caches have synced. Cheap to clone; all clones share the flags.
#[derive(Clone, Debug, Default)]
pub struct Readiness {
    plugins_loaded: Arc<AtomicBool>,
    controllers_synced: Arc<AtomicBool>,
}

impl Readiness {
    /// The plugin sources have been read once.
    pub fn set_plugins_loaded(&self) {
        self.plugins_loaded.store(true, Ordering::Release);
    }

    /// Both controllers have listed and watch their objects.
    pub fn set_controllers_synced(&self) {
        self.controllers_synced.store(true, Ordering::Release);
    }

    /// What is not ready yet; empty when ready.
    pub fn waiting_for(&self) -> Vec<&'static str> {
        let mut waiting = Vec::new();
        if !self.plugins_loaded.load(Ordering::Acquire) {
            waiting.push("plugins not loaded yet");
        }
        if !self.controllers_synced.load(Ordering::Acquire) {
            waiting.push("controller caches not synced yet");
        }
        waiting
    }
}

/// Serves `/healthz`, `/readyz`, `/metrics` (Prometheus text) and `/plugins` (JSON: the loaded
/// types and the problems of the plugin directory) on `addr` until the process ends.
pub async fn serve(
    addr: SocketAddr,
    metrics: Arc<Registry>,
    plugins: PluginRegistry,
    readiness: Readiness,
) {
    let listener = match TcpListener::bind(addr).await {
        Ok(listener) => listener,
        Err(error) => {
            warn!(%addr, %error, "cannot serve health and metrics endpoints");
            return;
        }
    };
    // The bound address: with port 0 the system picks one, and this line says which.
    let addr = listener.local_addr().unwrap_or(addr);
    info!(%addr, "serving /healthz /readyz /metrics /plugins");
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let metrics = metrics.clone();
        let plugins = plugins.clone();
        let readiness = readiness.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<Incoming>| {
                let response = respond(req.uri().path(), &metrics, &plugins, &readiness);
                async move { Ok::<_, Infallible>(response) }
            });
            if let Err(error) = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                warn!(%error, "http connection");
            }
        });
    }
}

fn respond(
    path: &str,
    metrics: &Registry,
    plugins: &PluginRegistry,
    readiness: &Readiness,
) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match path {
        "/healthz" => (StatusCode::OK, "text/plain", "ok\n".to_string()),
        "/readyz" => match readiness.waiting_for().as_slice() {
            [] => (StatusCode::OK, "text/plain", "ok\n".to_string()),
            waiting => (
                StatusCode::SERVICE_UNAVAILABLE,
                "text/plain",
                format!("not ready: {}\n", waiting.join(", ")),
            ),
        },
        "/metrics" => {
            let mut text = String::new();
            match prometheus_client::encoding::text::encode(&mut text, metrics) {
                Ok(()) => (
                    StatusCode::OK,
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    text,
                ),
                Err(e) => (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "text/plain",
                    format!("{e}\n"),
                ),
            }
        }
        "/plugins" => {
            let body = serde_json::json!({
                "types": plugins.types(),
                "problems": plugins.problems(),
            });
            (StatusCode::OK, "application/json", format!("{body:#}\n"))
        }
        _ => (
            StatusCode::NOT_FOUND,
            "text/plain",
            "not found\n".to_string(),
        ),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    if let Ok(value) = content_type.parse() {
        response
            .headers_mut()
            .insert(hyper::header::CONTENT_TYPE, value);
    }
    response
}
