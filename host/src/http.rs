//! Health, readiness, metrics and the loaded plugins, over HTTP.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

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

/// Serves `/healthz`, `/readyz`, `/metrics` (Prometheus text) and `/plugins` (JSON: the loaded
/// types and the problems of the plugin directory) on `addr` until the process ends.
pub async fn serve(addr: SocketAddr, metrics: Arc<Registry>, plugins: PluginRegistry) {
    let listener = match TcpListener::bind(addr).await {
        Ok(listener) => listener,
        Err(error) => {
            warn!(%addr, %error, "cannot serve health and metrics endpoints");
            return;
        }
    };
    info!(%addr, "serving /healthz /readyz /metrics /plugins");
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let metrics = metrics.clone();
        let plugins = plugins.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<Incoming>| {
                let response = respond(req.uri().path(), &metrics, &plugins);
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

fn respond(path: &str, metrics: &Registry, plugins: &PluginRegistry) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match path {
        "/healthz" | "/readyz" => (StatusCode::OK, "text/plain", "ok\n".to_string()),
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
