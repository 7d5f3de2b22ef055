//! What one replica's webhook gives any client, at most: time, bytes, connections, reviews
//! and plugin calls. Whoever can reach the port (the NetworkPolicy of `deploy/` admits only
//! the API servers) cannot make the operator hold more than these, nor take the plugins from
//! the controllers.

use std::time::Duration;

/// The webhook's limits. The defaults suit what an API server sends; tests shorten them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookLimits {
    /// A client that has not finished its TLS handshake by then is dropped. Default: 10 s.
    pub handshake_timeout: Duration,
    /// Time to send a request's head (line and headers), counted from the handshake or the
    /// previous answer: a connection idle that long is closed too. Default: 10 s.
    pub head_timeout: Duration,
    /// Time to send a request's body once its head arrived; answered 408. Default: 10 s.
    pub body_timeout: Duration,
    /// A connection is closed after this long, once its request in progress (if any) is
    /// answered; the API server opens another. Default: 60 s.
    pub max_connection_age: Duration,
    /// Largest request head, in bytes; answered 431. Default: 16 KiB.
    pub max_head_bytes: usize,
    /// Largest request body, in bytes; answered 413, without reading a declared body. The API
    /// server accepts requests of at most 3 MiB; an AdmissionReview adds its envelope.
    /// Default: 3.25 MiB.
    pub max_body_bytes: usize,
    /// Bytes of request bodies held at once, across connections; a body that does not fit is
    /// answered 503. Default: 16 MiB.
    pub body_budget_bytes: usize,
    /// Open connections at once; a connection beyond them is closed as it is accepted.
    /// Default: 128.
    pub max_connections: usize,
    /// Reviews decoded and decided at once; one more is answered 503 with `Retry-After: 1`.
    /// Default: 4.
    pub max_reviews_in_flight: usize,
    /// Plugin calls of reviews at once, apart from the controllers' own: reviews wait for
    /// each other (within their time budget), never for the controllers nor they for them.
    /// Default: 2.
    pub max_review_plugin_calls: usize,
    /// Most JSON values (scalars, arrays, objects) in one body; more is answered 400.
    /// Default: 200 000.
    pub max_json_values: usize,
    /// Deepest nesting of arrays and objects in one body; deeper is answered 400.
    /// Default: 100.
    pub max_json_depth: usize,
}

impl Default for WebhookLimits {
    fn default() -> Self {
        Self {
            handshake_timeout: Duration::from_secs(10),
            head_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(10),
            max_connection_age: Duration::from_secs(60),
            max_head_bytes: 16 << 10,
            max_body_bytes: (3 << 20) + (256 << 10),
            body_budget_bytes: 16 << 20,
            max_connections: 128,
            max_reviews_in_flight: 4,
            max_review_plugin_calls: 2,
            max_json_values: 200_000,
            max_json_depth: 100,
        }
    }
}
