//! The live web page (`--web-listen`): one self-contained page at `/`, and
//! at `/events` a server-sent event stream of the live feed, one JSON
//! event a second and a final one when the runs are over. The run never
//! waits for a browser: each stream holds at most the latest event, and
//! when the runs end the streams end, whoever is reading.

pub mod events;
mod page;

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::header::{HeaderValue, CACHE_CONTROL};
use hyper::{Method, Request, Response, StatusCode};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::endpoint::{self, Body};
use crate::feed::Feed;

/// How often the page's figures are sent.
const EVERY: Duration = Duration::from_secs(1);

/// The latest event: its JSON, as sent (`data: JSON`), and whether it is
/// the last.
#[derive(Clone)]
struct Sent {
    json: Arc<str>,
    text: Bytes,
    last: bool,
}

impl Default for Sent {
    fn default() -> Self {
        Sent {
            json: Arc::from("null"),
            text: Bytes::new(),
            last: false,
        }
    }
}

/// The page's server: the events it sends and the streams open.
pub struct Web {
    feed: Arc<Feed>,
    latest: Arc<watch::Sender<Sent>>,
    open: Arc<AtomicUsize>,
}

impl Web {
    /// Serves the page on `listener` from `feed` until `stop`, sending an
    /// event a second; `public` lets any `Host` in (else only loopback
    /// names and addresses: see `endpoint::Access`).
    pub fn start(listener: TcpListener, feed: Arc<Feed>, public: bool, stop: CancellationToken) -> Web {
        let latest = Arc::new(watch::Sender::new(Sent::default()));
        let web = Web {
            feed,
            latest,
            open: Arc::new(AtomicUsize::new(0)),
        };
        web.send(false);
        tokio::spawn(tick(web.feed.clone(), web.latest.clone(), stop.clone()));
        let (latest, open) = (web.latest.clone(), web.open.clone());
        let handler = move |request: Request<Incoming>| {
            let answer = answer(&request, &latest, &open);
            async move { answer }
        };
        let access = endpoint::Access {
            view: endpoint::View::Page,
            public,
        };
        tokio::spawn(endpoint::serve(listener, access, handler, stop));
        web
    }

    /// Sends the final event (the feed closed, every threshold judged) and
    /// waits, at most `within`, for the open streams to take it and end.
    pub async fn finish(&self, within: Duration) {
        self.send(true);
        let deadline = tokio::time::Instant::now() + within;
        while self.open.load(Ordering::Acquire) > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    fn send(&self, last: bool) {
        send(&self.feed, &self.latest, last);
    }
}

/// The feed now as an event, unless the last one went already.
fn send(feed: &Feed, latest: &watch::Sender<Sent>, last: bool) {
    let Ok(json) = serde_json::to_string(&events::event(feed, last)) else {
        return;
    };
    let text = Bytes::from(format!("data: {json}\n\n"));
    latest.send_if_modified(|sent| {
        if sent.last {
            return false;
        }
        *sent = Sent {
            json: Arc::from(json),
            text,
            last,
        };
        true
    });
}

/// An event a second until `stop` (or the last event is sent).
async fn tick(feed: Arc<Feed>, latest: Arc<watch::Sender<Sent>>, stop: CancellationToken) {
    let mut every = tokio::time::interval(EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = every.tick() => {}
            _ = stop.cancelled() => return,
        }
        if latest.borrow().last {
            return;
        }
        send(&feed, &latest, false);
    }
}

fn answer(
    request: &Request<Incoming>,
    latest: &watch::Sender<Sent>,
    open: &Arc<AtomicUsize>,
) -> Response<Body> {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return endpoint::respond(StatusCode::METHOD_NOT_ALLOWED, "text/plain", "GET only\n");
    }
    let mut response = match request.uri().path() {
        "/" => {
            let page = page::page(&latest.borrow().json);
            let mut response = endpoint::respond(StatusCode::OK, "text/html; charset=utf-8", page);
            // Belt and braces: the page may fetch nothing but its events.
            response.headers_mut().insert(
                "content-security-policy",
                HeaderValue::from_static(
                    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; connect-src 'self'",
                ),
            );
            response
        }
        "/events" => event_stream(latest.subscribe(), open.clone()),
        _ => endpoint::respond(StatusCode::NOT_FOUND, "text/plain", "see /\n"),
    };
    response
        .headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
        .headers_mut()
        .insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    response
}

/// Counts a stream open while it lives.
struct OpenStream(Arc<AtomicUsize>);

impl OpenStream {
    fn new(open: Arc<AtomicUsize>) -> OpenStream {
        open.fetch_add(1, Ordering::AcqRel);
        OpenStream(open)
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What a stream sends next.
enum Step {
    /// The reconnection delay, and the latest event at once.
    Greet,
    Next,
    Done,
}

/// `/events`: the latest event at once, then each new one; it ends after
/// the last. A client that does not read holds up only its own stream,
/// which keeps the latest event and no more.
fn event_stream(latest: watch::Receiver<Sent>, open: Arc<AtomicUsize>) -> Response<Body> {
    let state = (latest, OpenStream::new(open), Step::Greet);
    let frames = futures_util::stream::unfold(state, |(mut latest, guard, step)| async move {
        let text = match step {
            Step::Done => return None,
            Step::Greet => {
                let sent = latest.borrow_and_update().clone();
                let mut text = b"retry: 1000\n\n".to_vec();
                text.extend_from_slice(&sent.text);
                (Bytes::from(text), sent.last)
            }
            Step::Next => {
                latest.changed().await.ok()?;
                let sent = latest.borrow_and_update().clone();
                (sent.text, sent.last)
            }
        };
        let next = if text.1 { Step::Done } else { Step::Next };
        Some((Ok::<_, Infallible>(Frame::data(text.0)), (latest, guard, next)))
    });
    let mut response = Response::new(StreamBody::new(frames).boxed_unsync());
    let headers = response.headers_mut();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    // A stream that ended is the end of its connection: the page opens a
    // new one to reconnect, and no idle connection outlives the events.
    headers.insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
    response
}
