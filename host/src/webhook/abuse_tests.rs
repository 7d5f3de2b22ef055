//! The webhook's limits held against the real server on loopback, with a real TLS client:
//! slow heads and bodies, oversized bodies, too many connections, too many reviews, bodies
//! too complex to decode, and memory while many such clients hold connections. Limits are
//! shortened here, and every wait has a generous deadline: nothing depends on how fast a
//! loaded machine runs.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use prometheus_client::registry::Registry;
use rustls::pki_types::ServerName;
use rustls::pki_types::pem::PemObject;
use rustls::{ClientConfig, RootCertStore};
use serde_json::json;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use super::certs::{CA_CRT, Lifetimes, TLS_CRT, TLS_KEY, plan_renewal, renew, serving_names};
use super::{Review, Reviewer, ServingCert, VALIDATE_PATH, Webhook, WebhookLimits, WebhookMetrics};
use crate::plugin::{PluginRegistry, Runtime, RuntimeConfig};

/// Longest any step of a test waits for the server: far beyond what it needs.
const PATIENCE: Duration = Duration::from_secs(30);

/// A reviewer that counts the reviews it is given and answers each once its gate opens.
struct Gated {
    entered: AtomicUsize,
    gate: Semaphore,
}

impl Gated {
    fn closed() -> Arc<Self> {
        Arc::new(Self {
            entered: AtomicUsize::new(0),
            gate: Semaphore::new(0),
        })
    }

    fn open() -> Arc<Self> {
        let gated = Self::closed();
        gated.let_through();
        gated
    }

    fn let_through(&self) {
        self.gate.add_permits(Semaphore::MAX_PERMITS / 2);
    }

    fn entered(&self) -> usize {
        self.entered.load(Ordering::SeqCst)
    }
}

impl Review for Arc<Gated> {
    async fn review(&self, _body: &[u8]) -> Vec<u8> {
        self.entered.fetch_add(1, Ordering::SeqCst);
        let _pass = self.gate.acquire().await;
        br#"{"reviewed":true}"#.to_vec()
    }
}

/// A server on a loopback port, and what a client needs to reach it.
struct Server {
    addr: SocketAddr,
    connector: TlsConnector,
    registry: Registry,
}

impl Server {
    async fn start<R: Review>(
        limits: WebhookLimits,
        reviewer: impl FnOnce(WebhookMetrics) -> R,
    ) -> Self {
        let provider = super::crypto_provider();
        let names = serving_names("webhook", "test");
        let data = renew(
            &BTreeMap::new(),
            &plan_renewal(&Default::default(), &names, false, 0),
            &names,
            Lifetimes {
                ca: Duration::from_secs(3600),
                serving: Duration::from_secs(600),
            },
            time::OffsetDateTime::now_utc(),
        )
        .expect("certificates");
        let serving = Arc::new(ServingCert::new(provider.clone()));
        serving
            .load(&data[TLS_CRT], &data[TLS_KEY])
            .expect("the serving certificate loads");
        let mut roots = RootCertStore::empty();
        for ca in rustls::pki_types::CertificateDer::pem_slice_iter(&data[CA_CRT]) {
            roots.add(ca.expect("the CA")).expect("a root");
        }
        let client = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .expect("protocol versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        let mut registry = Registry::default();
        let metrics = WebhookMetrics::register(&mut registry);
        let webhook = Webhook::bind(
            "127.0.0.1:0".parse().expect("an address"),
            serving,
            provider,
            reviewer(metrics.clone()),
            limits,
            Some(metrics),
        )
        .await
        .expect("the webhook binds");
        let addr = webhook.local_addr().expect("a bound address");
        tokio::spawn(webhook.run());
        Self {
            addr,
            connector: TlsConnector::from(Arc::new(client)),
            registry,
        }
    }

    /// A connection whose handshake completed.
    async fn connect(&self) -> std::io::Result<TlsStream<TcpStream>> {
        let tcp = TcpStream::connect(self.addr).await?;
        let name = ServerName::try_from("localhost").expect("a server name");
        tokio::time::timeout(PATIENCE, self.connector.connect(name, tcp))
            .await
            .map_err(|_| std::io::Error::other("the handshake did not end"))?
    }

    /// Sends `request` on a new connection and reads the answer until the server closes it.
    async fn exchange(&self, request: &[u8]) -> Answer {
        let mut tls = self.connect().await.expect("a connection");
        // A server that answers before reading it all may close while this still writes.
        let _ = tls.write_all(request).await;
        read_answer(&mut tls).await
    }

    /// How many times the webhook turned something away for `reason`.
    fn rejections(&self, reason: &str) -> u64 {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).expect("metrics");
        let series = format!("workflow_operator_webhook_rejections_total{{reason=\"{reason}\"}} ");
        text.lines()
            .find_map(|line| line.strip_prefix(&series))
            .map_or(0, |n| n.trim().parse().expect("a count"))
    }

    /// Waits until the webhook has turned something away for `reason`.
    async fn rejected(&self, reason: &str) {
        eventually(&format!("a rejection for {reason}"), || {
            self.rejections(reason) > 0
        })
        .await;
    }
}

/// What the server answered, as far as it was received.
#[derive(Debug)]
struct Answer {
    status: Option<u16>,
    head: String,
    body: String,
}

/// Reads until the server closes the connection (or it fails), within [`PATIENCE`].
async fn read_answer(stream: &mut (impl AsyncRead + Unpin)) -> Answer {
    let mut received = Vec::new();
    let mut chunk = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + PATIENCE;
    // A closed connection may end in a reset instead of a TLS close: what arrived counts.
    while let Ok(Ok(n @ 1..)) = tokio::time::timeout_at(deadline, stream.read(&mut chunk)).await {
        received.extend_from_slice(&chunk[..n]);
    }
    let text = String::from_utf8_lossy(&received).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    Answer {
        status: head.split(' ').nth(1).and_then(|code| code.parse().ok()),
        head: head.to_ascii_lowercase(),
        body: body.to_string(),
    }
}

async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let started = Instant::now();
    while !check() {
        assert!(
            started.elapsed() < PATIENCE,
            "waited {PATIENCE:?} for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The head of a review request of `length` bytes; the server closes after answering.
fn head(length: usize) -> String {
    format!(
        "POST {VALIDATE_PATH} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
         Content-Length: {length}\r\nConnection: close\r\n\r\n"
    )
}

fn request(body: &[u8]) -> Vec<u8> {
    let mut request = head(body.len()).into_bytes();
    request.extend_from_slice(body);
    request
}

/// An AdmissionReview of a new group of a type no plugin serves here.
fn admission_review() -> Vec<u8> {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "7c1e4bd8-7a4f-4c55-9b52-0d1f3c0b9e01",
            "kind": {"group": "workflow.rxg456.cn", "version": "v1alpha1", "kind": "WorkflowGroup"},
            "resource": {"group": "workflow.rxg456.cn", "version": "v1alpha1", "resource": "workflowgroups"},
            "name": "nodes",
            "namespace": "default",
            "operation": "CREATE",
            "userInfo": {"username": "alice"},
            "object": {
                "apiVersion": "workflow.rxg456.cn/v1alpha1",
                "kind": "WorkflowGroup",
                "metadata": {"name": "nodes", "namespace": "default"},
                "spec": {
                    "type": "cluster-expansion",
                    "clusterName": "c",
                    "workflowSteps": ["pre-check"],
                    "targets": [{"name": "node-1", "ip": "10.0.0.1", "role": "Worker"}],
                },
            },
            "dryRun": false,
        },
    })
    .to_string()
    .into_bytes()
}

/// The operator's reviewer, with no plugin loaded.
fn real_reviewer(metrics: WebhookMetrics) -> Reviewer {
    let runtime = Runtime::new(RuntimeConfig {
        max_concurrent_calls: 1,
        ..RuntimeConfig::default()
    })
    .expect("a plugin runtime");
    Reviewer::new(
        PluginRegistry::new(runtime),
        Duration::from_secs(3),
        1,
        Some(metrics),
    )
}

fn assert_allowed(answer: &Answer) {
    assert_eq!(answer.status, Some(200), "{answer:?}");
    let review: serde_json::Value = serde_json::from_str(&answer.body).expect("an AdmissionReview");
    assert_eq!(review["response"]["allowed"], true, "{review}");
}

/// Sends a head's start, then one more byte of a header every 50 ms, until the connection
/// fails.
async fn drip_a_head(mut writer: impl AsyncWrite + Unpin) -> std::io::Result<()> {
    let line = format!("POST {VALIDATE_PATH} HTTP/1.1\r\nX-Slow: ");
    writer.write_all(line.as_bytes()).await?;
    loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        writer.write_all(b"a").await?;
        writer.flush().await?;
    }
}

/// Resident memory of this process, from /proc/self/status.
fn resident_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|kib| kib.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmRSS")
        * 1024
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_sent_byte_by_byte_is_cut_off_at_the_head_timeout() {
    let limits = WebhookLimits {
        head_timeout: Duration::from_millis(300),
        ..WebhookLimits::default()
    };
    let server = Server::start(limits, |_| Gated::open()).await;
    let tls = server.connect().await.expect("a connection");
    let (mut reader, writer) = tokio::io::split(tls);
    let started = Instant::now();
    let dripping = tokio::spawn(drip_a_head(writer));
    read_answer(&mut reader).await;
    let closed_after = started.elapsed();
    dripping.abort();
    assert!(closed_after < PATIENCE, "still open after {closed_after:?}");
    assert!(
        closed_after >= Duration::from_millis(300),
        "closed after {closed_after:?}"
    );
    server.rejected("timeout").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_stops_arriving_is_answered_408_at_the_body_timeout() {
    let limits = WebhookLimits {
        body_timeout: Duration::from_millis(300),
        ..WebhookLimits::default()
    };
    let gated = Gated::open();
    let server = Server::start(limits, |_| gated.clone()).await;
    let mut tls = server.connect().await.expect("a connection");
    tls.write_all(head(1000).as_bytes())
        .await
        .expect("the head");
    tls.write_all(b"{\"pad\":\"")
        .await
        .expect("a start of body");
    let answer = read_answer(&mut tls).await;
    assert_eq!(answer.status, Some(408), "{answer:?}");
    assert_eq!(gated.entered(), 0, "nothing was reviewed");
    server.rejected("timeout").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_body_over_the_limit_is_answered_413_without_being_sent() {
    let server = Server::start(WebhookLimits::default(), |_| Gated::open()).await;
    let mut tls = server.connect().await.expect("a connection");
    tls.write_all(head(100 << 20).as_bytes())
        .await
        .expect("the head");
    let answer = read_answer(&mut tls).await;
    assert_eq!(answer.status, Some(413), "{answer:?}");
    assert!(
        answer.body.contains("larger than 3407872 bytes"),
        "{answer:?}"
    );
    assert!(answer.head.contains("connection: close"), "{answer:?}");
    server.rejected("too_large").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_over_its_limit_is_refused() {
    let server = Server::start(WebhookLimits::default(), |_| Gated::open()).await;
    let padding = "a".repeat(32 << 10);
    let request = format!("POST {VALIDATE_PATH} HTTP/1.1\r\nX-Pad: {padding}\r\n\r\n");
    let answer = server.exchange(request.as_bytes()).await;
    assert_eq!(answer.status, Some(431), "{answer:?}");
    server.rejected("too_large").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_limit_are_closed_as_accepted_and_one_gets_in_once_a_slot_frees() {
    let limits = WebhookLimits {
        max_connections: 3,
        head_timeout: Duration::from_secs(120),
        ..WebhookLimits::default()
    };
    let server = Server::start(limits, |_| Gated::open()).await;
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(
            server
                .connect()
                .await
                .expect("a connection within the limit"),
        );
    }
    let refused = server.connect().await;
    assert!(refused.is_err(), "a fourth connection was served");
    server.rejected("too_many_connections").await;
    drop(held.pop());
    let started = Instant::now();
    loop {
        if let Ok(mut tls) = server.connect().await
            && tls.write_all(&request(b"{}")).await.is_ok()
            && read_answer(&mut tls).await.status == Some(200)
        {
            break;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "no connection got in after one closed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_beyond_those_in_flight_is_answered_503_with_retry_after() {
    let limits = WebhookLimits {
        max_reviews_in_flight: 2,
        ..WebhookLimits::default()
    };
    let gated = Gated::closed();
    let server = Arc::new(Server::start(limits, |_| gated.clone()).await);
    let waiting: Vec<_> = (0..2)
        .map(|_| {
            let server = server.clone();
            tokio::spawn(async move { server.exchange(&request(b"{}")).await })
        })
        .collect();
    eventually("two reviews in flight", || gated.entered() == 2).await;
    let answer = server.exchange(&request(b"{}")).await;
    assert_eq!(answer.status, Some(503), "{answer:?}");
    assert!(answer.head.contains("retry-after: 1"), "{answer:?}");
    server.rejected("busy").await;
    gated.let_through();
    for answer in waiting {
        let answer = answer.await.expect("a review");
        assert_eq!(answer.status, Some(200), "{answer:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_beyond_the_byte_budget_left_is_answered_503_before_it_is_read() {
    let limits = WebhookLimits {
        body_budget_bytes: 100 << 10,
        max_body_bytes: 80 << 10,
        ..WebhookLimits::default()
    };
    let gated = Gated::closed();
    let server = Arc::new(Server::start(limits, |_| gated.clone()).await);
    let large = format!("{{\"pad\":\"{}\"}}", "a".repeat(60 << 10));
    let held = {
        let server = server.clone();
        tokio::spawn(async move { server.exchange(&request(large.as_bytes())).await })
    };
    eventually("a large body held in review", || gated.entered() == 1).await;
    let answer = server.exchange(head(60 << 10).as_bytes()).await;
    assert_eq!(answer.status, Some(503), "{answer:?}");
    assert!(answer.head.contains("retry-after: 1"), "{answer:?}");
    server.rejected("busy").await;
    gated.let_through();
    assert_eq!(held.await.expect("a review").status, Some(200));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deeply_nested_json_is_refused_before_it_is_decoded() {
    let gated = Gated::open();
    let server = Server::start(WebhookLimits::default(), |_| gated.clone()).await;
    let nested = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
    let answer = server.exchange(&request(nested.as_bytes())).await;
    assert_eq!(answer.status, Some(400), "{answer:?}");
    assert!(answer.body.contains("deeper than 100 levels"), "{answer:?}");
    assert_eq!(gated.entered(), 0, "nothing was reviewed");
    server.rejected("too_complex").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_past_its_age_is_closed_after_answering() {
    let limits = WebhookLimits {
        max_connection_age: Duration::from_millis(300),
        head_timeout: Duration::from_secs(120),
        ..WebhookLimits::default()
    };
    let server = Server::start(limits, |_| Gated::open()).await;
    let mut tls = server.connect().await.expect("a connection");
    // Kept alive: only its age closes it.
    let keep_alive = format!(
        "POST {VALIDATE_PATH} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n\r\n{{}}"
    );
    tls.write_all(keep_alive.as_bytes())
        .await
        .expect("a request");
    let started = Instant::now();
    let answer = read_answer(&mut tls).await;
    assert_eq!(answer.status, Some(200), "{answer:?}");
    assert!(
        started.elapsed() < PATIENCE,
        "open after {:?}",
        started.elapsed()
    );
}

/// The attack of the issue: slow heads, slow bodies and oversized bodies, a hundred and ten
/// connections at once. Without the budget the slow bodies alone would hold 150 MiB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_many_slow_and_oversized_clients_memory_stays_flat_and_a_review_is_answered() {
    const SLOW_HEADS: usize = 50;
    const SLOW_BODIES: usize = 50;
    const OVERSIZED: usize = 10;
    const SLOW_BODY_BYTES: usize = 3 << 20;
    const SETTLE: Duration = Duration::from_secs(2);
    let limits = WebhookLimits {
        // Long enough that every slow client holds on while the test measures.
        head_timeout: Duration::from_secs(120),
        body_timeout: Duration::from_secs(120),
        ..WebhookLimits::default()
    };
    let server = Arc::new(Server::start(limits, real_reviewer).await);
    assert_allowed(&server.exchange(&request(&admission_review())).await);
    let before = resident_bytes();
    let peak = Arc::new(AtomicUsize::new(0));
    let sampling = {
        let peak = peak.clone();
        tokio::spawn(async move {
            loop {
                let now = usize::try_from(resident_bytes()).unwrap_or(usize::MAX);
                peak.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };

    static CHUNK: [u8; 64 << 10] = [b' '; 64 << 10];
    let sent = Arc::new(AtomicUsize::new(0));
    let mut attackers = Vec::new();
    for i in 0..SLOW_HEADS + SLOW_BODIES + OVERSIZED {
        let server = server.clone();
        let sent = sent.clone();
        attackers.push(tokio::spawn(async move {
            let Ok(mut tls) = server.connect().await else {
                sent.fetch_add(1, Ordering::SeqCst);
                return None;
            };
            let _ = if i < SLOW_HEADS {
                tls.write_all(format!("POST {VALIDATE_PATH} HTTP/1.1\r\nX-Slow: ").as_bytes())
                    .await
            } else if i < SLOW_HEADS + SLOW_BODIES {
                // All but the last byte, then nothing: the server holds what it read.
                let mut result = tls.write_all(head(SLOW_BODY_BYTES).as_bytes()).await;
                let mut left = SLOW_BODY_BYTES - 1;
                while result.is_ok() && left > 0 {
                    let n = left.min(CHUNK.len());
                    result = tls.write_all(&CHUNK[..n]).await;
                    left -= n;
                }
                result
            } else {
                tls.write_all(head(100 << 20).as_bytes()).await
            };
            let _ = tls.flush().await;
            sent.fetch_add(1, Ordering::SeqCst);
            Some(tls)
        }));
    }
    eventually("every attacker has sent what it sends", || {
        sent.load(Ordering::SeqCst) == attackers.len()
    })
    .await;
    // A review from the API server gets through while they hold on.
    let during = server.exchange(&request(&admission_review())).await;
    // What the attackers wrote may still sit in the kernel's buffers: the server takes it in
    // meanwhile (without the byte budget, its 150 MiB arrive within a second here).
    tokio::time::sleep(SETTLE).await;
    let after = resident_bytes();
    sampling.abort();
    let peak = u64::try_from(peak.load(Ordering::SeqCst))
        .unwrap_or(u64::MAX)
        .max(after);
    let mib = |bytes: u64| bytes as f64 / f64::from(1 << 20);
    eprintln!(
        "webhook under attack: resident {:.1} MiB before, {:.1} MiB at peak (+{:.1} MiB), \
         {} too_large, {} busy",
        mib(before),
        mib(peak),
        mib(peak.saturating_sub(before)),
        server.rejections("too_large"),
        server.rejections("busy"),
    );
    assert_allowed(&during);
    assert!(
        peak.saturating_sub(before) < 64 << 20,
        "resident memory grew by {:.1} MiB",
        mib(peak.saturating_sub(before))
    );
    assert!(server.rejections("too_large") >= OVERSIZED as u64);
    assert!(
        server.rejections("busy") > 0,
        "the byte budget turned none away"
    );
    drop(attackers);
}
