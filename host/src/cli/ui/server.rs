//! The web view's HTTP server, on loopback only: one static page, the JSON it reads, streams of
//! server-sent events that carry each change, and step logs.
//!
//! What keeps it from widening anyone's access: it acts with the credentials of the user who
//! started it, so it shows no more than `kubectl` shows them; it listens on loopback only; a
//! request must name it by a loopback host (no DNS rebinding) and carry the secret of this
//! start (the URL printed holds it once, a cookie the browser keeps after), so other users
//! of the machine and other web pages the browser opens get nothing; it answers only `GET`; and
//! its page may load nothing from anywhere else (`Content-Security-Policy`).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Bytes, Frame, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt as _;
use kube::api::Api;
use percent_encoding::percent_decode_str;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use super::live::{Extras, Live};
use crate::cli::get::{StepOutput, shown_output, step_output};

const INDEX: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const APP_CSS: &str = include_str!("assets/app.css");

/// The cookie that carries the secret after the first visit.
const COOKIE: &str = "workflow-ui";
/// The page may load its own script and style and talk to this server, nothing else.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
/// How long a stream waits after a change for more before it sends (a burst is one message).
const COALESCE: Duration = Duration::from_millis(20);
/// How often a stream looks again without a change (the Events and the locks, which are not
/// watched), and says it is alive.
const TICK: Duration = Duration::from_secs(2);

type Body = UnsyncBoxBody<Bytes, Infallible>;

/// What the server needs: the live data and the secret.
#[derive(Clone)]
pub struct Server {
    pub live: Live,
    pub secret: String,
    /// The `Host` headers that name this server.
    pub hosts: Vec<String>,
}

/// Serves on `listener` until the process ends.
pub async fn serve(listener: TcpListener, server: Server) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let server = server.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<Incoming>| {
                let server = server.clone();
                async move { Ok::<_, Infallible>(guarded(&server, req).await) }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// The secret of one start: 32 random bytes, in hex.
///
/// # Errors
/// The system has no randomness to give.
pub fn new_secret() -> anyhow::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("no randomness for a secret: {e}"))?;
    Ok(hex::encode(bytes))
}

/// The `Host` headers that name a server bound to `addr`.
pub fn hosts_of(addr: SocketAddr) -> Vec<String> {
    let port = addr.port();
    let mut hosts = vec![format!("localhost:{port}")];
    hosts.push(match addr {
        SocketAddr::V4(a) => format!("{}:{port}", a.ip()),
        SocketAddr::V6(a) => format!("[{}]:{port}", a.ip()),
    });
    hosts
}

/// `req` answered, once it is known to come from this server's page or its user.
async fn guarded(server: &Server, req: Request<Incoming>) -> Response<Body> {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    if !server.hosts.iter().any(|h| h == host) {
        return text(
            StatusCode::FORBIDDEN,
            "this server answers only to its loopback address\n",
        );
    }
    if req.method() != Method::GET {
        return text(
            StatusCode::METHOD_NOT_ALLOWED,
            "the view is read-only: GET only\n",
        );
    }
    // The URL printed at start: the secret becomes a cookie, and the URL loses it.
    if let Some(given) = req.uri().query().and_then(|q| query_value(q, "token"))
        && same(&given, &server.secret)
    {
        let mut response = text(StatusCode::SEE_OTHER, "");
        let cookie = format!(
            "{COOKIE}={}; Path=/; HttpOnly; SameSite=Strict",
            server.secret
        );
        let headers = response.headers_mut();
        headers.insert(header::LOCATION, HeaderValue::from_static("/"));
        if let Ok(value) = HeaderValue::from_str(&cookie) {
            headers.insert(header::SET_COOKIE, value);
        }
        return response;
    }

    if !carries_secret(&req, &server.secret) {
        return text(
            StatusCode::UNAUTHORIZED,
            "open the URL `workflow-operator ui` printed (it carries this start's secret)\n",
        );
    }
    route(server, req.uri().path()).await
}

/// Whether `req` has the secret in its cookie or as a bearer token.
fn carries_secret(req: &Request<Incoming>, secret: &str) -> bool {
    let cookies = req
        .headers()
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|c| c.to_str().ok())
        .flat_map(|c| c.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .any(|(name, value)| name == COOKIE && same(value, secret));
    let bearer = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.strip_prefix("Bearer "))
        .is_some_and(|t| same(t.trim(), secret));
    cookies || bearer
}

/// `a == b` in a time that does not depend on where they differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

fn query_value(query: &str, key: &str) -> Option<String> {
    query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| percent_decode_str(v).decode_utf8_lossy().into_owned())
}

async fn route(server: &Server, path: &str) -> Response<Body> {
    let parts: Vec<String> = path
        .trim_start_matches('/')
        .split('/')
        .map(|p| percent_decode_str(p).decode_utf8_lossy().into_owned())
        .collect();
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    let live = &server.live;
    match parts.as_slice() {
        [""] | ["index.html"] => asset("text/html; charset=utf-8", INDEX),
        ["app.js"] => asset("text/javascript; charset=utf-8", APP_JS),
        ["app.css"] => asset("text/css; charset=utf-8", APP_CSS),
        ["api", "groups"] => json(live.list_json()),
        ["api", "groups", ns, name] => match live.group(ns, name) {
            Some((group, workflows)) => {
                let extras = live.extras(&group, &workflows).await;
                json(live.group_json(&group, &workflows, &extras))
            }
            None => text(
                StatusCode::NOT_FOUND,
                &format!("no WorkflowGroup {name} in {ns}\n"),
            ),
        },
        ["api", "watch", "groups"] => list_stream(live.clone()),
        ["api", "watch", "groups", ns, name] => group_stream(live.clone(), ns, name),
        ["api", "logs", ns, group, workflow, step] => log(live, ns, group, workflow, step).await,
        _ => text(StatusCode::NOT_FOUND, "not found\n"),
    }
}

/// The list of groups, sent again on each change.
fn list_stream(live: Live) -> Response<Body> {
    stream(live, move |live, _| {
        let json = live.list_json();
        async move { Some(("groups", json)) }
    })
}

/// One group's page data, sent again on each change; `gone` once it is deleted.
fn group_stream(live: Live, ns: &str, name: &str) -> Response<Body> {
    let (ns, name) = (ns.to_string(), name.to_string());
    let extras: std::sync::Arc<tokio::sync::Mutex<Option<(Instant, Extras)>>> = Default::default();
    stream(live, move |live, ticked| {
        let (ns, name, extras) = (ns.clone(), name.clone(), extras.clone());
        async move {
            let Some((group, workflows)) = live.group(&ns, &name) else {
                let gone =
                    serde_json::json!(format!("WorkflowGroup {ns}/{name} is gone (deleted)"));
                return Some(("gone", gone.to_string()));
            };
            // Events and locks are read, not watched: at most once a tick.
            let mut cached = extras.lock().await;
            if ticked || cached.as_ref().is_none_or(|(at, _)| at.elapsed() >= TICK) {
                *cached = Some((Instant::now(), live.extras(&group, &workflows).await));
            }
            let json = cached
                .as_ref()
                .map(|(_, extras)| live.group_json(&group, &workflows, extras))?;
            Some(("group", json))
        }
    })
}

/// A stream of server-sent events: `next` (with whether the tick woke it rather than a change)
/// gives the event and its data; it is sent when it differs from what was sent last.
fn stream<F, Fut>(live: Live, next: F) -> Response<Body>
where
    F: Fn(Live, bool) -> Fut + Send + 'static,
    Fut: Future<Output = Option<(&'static str, String)>> + Send,
{
    let (tx, rx) = mpsc::channel::<Bytes>(8);
    tokio::spawn(async move {
        let mut changes = live.changes();
        let mut last = String::new();
        let mut ticked = false;
        loop {
            changes.borrow_and_update();
            if let Some((event, data)) = next(live.clone(), ticked).await
                && data != last
            {
                let message = format!("event: {event}\ndata: {data}\n\n");
                if tx.send(Bytes::from(message)).await.is_err() {
                    return;
                }
                last = data;
            } else if ticked && tx.send(Bytes::from_static(b": alive\n\n")).await.is_err() {
                return;
            }
            tokio::select! {
                changed = changes.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    tokio::time::sleep(COALESCE).await;
                    ticked = false;
                }
                () = tokio::time::sleep(TICK) => ticked = true,
            }
        }
    });
    let frames = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, Infallible>(Frame::data(b)), rx))
    });
    let body = StreamBody::new(futures::StreamExt::boxed(frames));
    let mut response = Response::new(BodyExt::boxed_unsync(body));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    secure(headers);
    response
}

/// The output of `step` of Workflow `workflow` of group `group`, as `logs` prints it.
async fn log(live: &Live, ns: &str, group: &str, workflow: &str, step: &str) -> Response<Body> {
    let Some((_, workflows)) = live.group(ns, group) else {
        return text(
            StatusCode::NOT_FOUND,
            &format!("no WorkflowGroup {group} in {ns}\n"),
        );
    };
    let Some(detail) = workflows
        .iter()
        .find(|w| w.name_any() == workflow)
        .filter(|w| w.spec.steps.iter().any(|s| s.name == step))
        .map(|w| {
            w.status
                .as_ref()
                .and_then(|s| s.step_details.get(step))
                .cloned()
                .unwrap_or_default()
        })
    else {
        return text(
            StatusCode::NOT_FOUND,
            &format!("group {ns}/{group} has no step {step} in {workflow}\n"),
        );
    };
    let pods: Api<Pod> = Api::namespaced(live.client().clone(), ns);
    let (source, body) = match step_output(&pods, workflow, step, &detail).await {
        Ok(StepOutput::Pod(output)) => ("pod", shown_output(&output).into_owned()),
        Ok(StepOutput::Kept(_, kept)) => ("status", shown_output(&kept).into_owned()),
        Ok(StepOutput::Nothing(why)) => ("none", why),
        Err(e) => return text(StatusCode::BAD_GATEWAY, &format!("{e:#}\n")),
    };
    let mut response = text(StatusCode::OK, &body);
    response
        .headers_mut()
        .insert("x-log-source", HeaderValue::from_static(source));
    response
}

fn asset(content_type: &'static str, body: &'static str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())).boxed_unsync());
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    secure(headers);
    response
}

fn json(body: String) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(body)).boxed_unsync());
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    secure(headers);
    response
}

fn text(status: StatusCode, body: &str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())).boxed_unsync());
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    secure(headers);
    response
}

/// The headers every answer carries: nothing cached, sniffed, framed or referred.
fn secure(headers: &mut hyper::HeaderMap) {
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
}

/// Binds `addr`, which must be a loopback address.
///
/// # Errors
/// `addr` is not loopback, or it cannot be bound.
pub async fn bind(addr: SocketAddr) -> anyhow::Result<TcpListener> {
    anyhow::ensure!(
        addr.ip().is_loopback(),
        "the view serves on loopback only (it acts with your credentials): {} is not a loopback address; use 127.0.0.1 or ::1 and reach it through `ssh -L` from elsewhere",
        addr.ip()
    );
    TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_secret_compares_whole_and_a_query_gives_its_value_decoded() {
        assert!(same("abc", "abc"));
        assert!(!same("abc", "abd") && !same("abc", "ab") && !same("", "a"));
        assert_eq!(
            query_value("a=1&token=x%2By", "token").as_deref(),
            Some("x+y")
        );
        assert_eq!(query_value("tokens=1", "token"), None);
        let secret = new_secret().expect("a secret");
        assert_eq!(secret.len(), 64);
        assert_ne!(secret, new_secret().expect("another"));
    }

    #[test]
    fn only_loopback_names_of_the_bound_port_are_hosts() {
        let v4: SocketAddr = "127.0.0.1:8080".parse().expect("an address");
        assert_eq!(hosts_of(v4), ["localhost:8080", "127.0.0.1:8080"]);
        let v6: SocketAddr = "[::1]:9".parse().expect("an address");
        assert_eq!(hosts_of(v6), ["localhost:9", "[::1]:9"]);
    }
}
