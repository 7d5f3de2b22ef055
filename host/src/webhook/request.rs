//! Reading a request's body under the webhook's limits: no more than its limit, within its
//! time, and only while the bytes fit in the budget shared by every connection, so that many
//! clients sending at once cannot make the operator hold more than the budget.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, LengthLimitError, Limited};
use hyper::StatusCode;
use hyper::body::{Body as HttpBody, Bytes};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::limits::WebhookLimits;
use super::metrics::Rejection;

/// A body read whole, and its share of the budget, given back when it is dropped.
#[derive(Debug)]
pub struct Body {
    bytes: Vec<u8>,
    _budget: OwnedSemaphorePermit,
}

impl Body {
    /// The body's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

/// Why a body was not read.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// Longer than the limit, declared or sent.
    #[error("the request body is larger than {max} bytes")]
    TooLarge { max: usize },
    /// The bodies being read and reviewed hold the whole budget now.
    #[error("the webhook is reading as many request bytes as it holds at once; try again")]
    OverBudget,
    /// Not sent whole in time.
    #[error("the request body did not arrive within {after:?}")]
    Timeout { after: Duration },
    /// The connection failed or the framing is wrong.
    #[error("cannot read the request body: {0}")]
    Unreadable(String),
}

impl Refused {
    /// The status to answer with.
    pub fn status(&self) -> StatusCode {
        match self {
            Refused::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Refused::OverBudget => StatusCode::SERVICE_UNAVAILABLE,
            Refused::Timeout { .. } => StatusCode::REQUEST_TIMEOUT,
            Refused::Unreadable(_) => StatusCode::BAD_REQUEST,
        }
    }

    /// The limit that refused it, if one did.
    pub fn rejection(&self) -> Option<Rejection> {
        match self {
            Refused::TooLarge { .. } => Some(Rejection::TooLarge),
            Refused::OverBudget => Some(Rejection::Busy),
            Refused::Timeout { .. } => Some(Rejection::Timeout),
            Refused::Unreadable(_) => None,
        }
    }
}

/// Reads `body` whole within `limits.body_timeout`, at most `limits.max_body_bytes`, taking
/// its bytes from `budget` (one permit a byte) as they arrive. A declared length is checked
/// and taken from the budget before anything is read, so a body that cannot be held is
/// refused without reading it.
///
/// # Errors
/// [`Refused`]: too large, over the budget, too slow, or unreadable.
pub async fn read_body<B>(
    body: B,
    limits: &WebhookLimits,
    budget: &Arc<Semaphore>,
) -> Result<Body, Refused>
where
    B: HttpBody<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let max = limits.max_body_bytes;
    let declared = usize::try_from(body.size_hint().lower()).unwrap_or(usize::MAX);
    if declared > max {
        return Err(Refused::TooLarge { max });
    }
    let read = async {
        let mut held = reserve(budget, declared)?;
        let mut bytes = Vec::with_capacity(declared);
        let mut body = Limited::new(body, max);
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|error| {
                if error.is::<LengthLimitError>() {
                    Refused::TooLarge { max }
                } else {
                    Refused::Unreadable(error.to_string())
                }
            })?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            let wanted = bytes.len() + data.len();
            if wanted > held.num_permits() {
                held.merge(reserve(budget, wanted - held.num_permits())?);
            }
            bytes.extend_from_slice(&data);
        }
        Ok(Body {
            bytes,
            _budget: held,
        })
    };
    tokio::time::timeout(limits.body_timeout, read)
        .await
        .unwrap_or(Err(Refused::Timeout {
            after: limits.body_timeout,
        }))
}

fn reserve(budget: &Arc<Semaphore>, bytes: usize) -> Result<OwnedSemaphorePermit, Refused> {
    let bytes = u32::try_from(bytes).map_err(|_| Refused::OverBudget)?;
    budget
        .clone()
        .try_acquire_many_owned(bytes)
        .map_err(|_| Refused::OverBudget)
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use futures::stream;
    use http_body_util::{Full, StreamBody};
    use hyper::body::Frame;

    use super::*;

    fn limits() -> WebhookLimits {
        WebhookLimits {
            max_body_bytes: 1000,
            body_timeout: Duration::from_secs(30),
            ..WebhookLimits::default()
        }
    }

    fn chunked(
        chunks: Vec<&'static [u8]>,
    ) -> StreamBody<impl futures::Stream<Item = Result<Frame<Bytes>, Infallible>> + Unpin> {
        StreamBody::new(stream::iter(
            chunks
                .into_iter()
                .map(|c| Ok(Frame::data(Bytes::from_static(c)))),
        ))
    }

    #[tokio::test]
    async fn a_body_is_read_whole_and_its_bytes_return_to_the_budget_when_dropped() {
        let budget = Arc::new(Semaphore::new(4096));
        let body = read_body(chunked(vec![b"{\"a\":", b"1}"]), &limits(), &budget)
            .await
            .expect("read");
        assert_eq!(body.bytes(), b"{\"a\":1}");
        assert_eq!(budget.available_permits(), 4096 - 7);
        drop(body);
        assert_eq!(budget.available_permits(), 4096);
    }

    #[tokio::test]
    async fn a_declared_length_over_the_limit_is_refused_before_reading() {
        let budget = Arc::new(Semaphore::new(1 << 20));
        let refused = read_body(Full::new(Bytes::from(vec![b' '; 1001])), &limits(), &budget)
            .await
            .expect_err("too large");
        assert!(
            matches!(refused, Refused::TooLarge { max: 1000 }),
            "{refused}"
        );
        assert_eq!(refused.status(), StatusCode::PAYLOAD_TOO_LARGE);
    }

    #[tokio::test]
    async fn a_chunked_body_over_the_limit_is_refused_as_too_large() {
        let budget = Arc::new(Semaphore::new(1 << 20));
        let refused = read_body(
            chunked(vec![&[b' '; 600], &[b' '; 600]]),
            &limits(),
            &budget,
        )
        .await
        .expect_err("too large");
        assert!(
            matches!(refused, Refused::TooLarge { max: 1000 }),
            "{refused}"
        );
        assert_eq!(budget.available_permits(), 1 << 20);
    }

    #[tokio::test]
    async fn a_body_that_does_not_fit_the_budget_left_is_refused_as_busy() {
        let budget = Arc::new(Semaphore::new(1000));
        let first = read_body(Full::new(Bytes::from(vec![b' '; 700])), &limits(), &budget)
            .await
            .expect("the first fits");
        let refused = read_body(Full::new(Bytes::from(vec![b' '; 400])), &limits(), &budget)
            .await
            .expect_err("over the budget");
        assert!(matches!(refused, Refused::OverBudget), "{refused}");
        assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
        drop(first);
        read_body(Full::new(Bytes::from(vec![b' '; 400])), &limits(), &budget)
            .await
            .expect("fits once the first is dropped");
    }

    #[tokio::test]
    async fn a_body_that_stops_arriving_times_out() {
        let budget = Arc::new(Semaphore::new(1 << 20));
        let stalled = StreamBody::new(stream::pending::<Result<Frame<Bytes>, Infallible>>());
        let limits = WebhookLimits {
            body_timeout: Duration::from_millis(50),
            ..limits()
        };
        let refused = read_body(stalled, &limits, &budget)
            .await
            .expect_err("times out");
        assert!(matches!(refused, Refused::Timeout { .. }), "{refused}");
        assert_eq!(refused.status(), StatusCode::REQUEST_TIMEOUT);
    }
}
