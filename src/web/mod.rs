//! The live web page (`--web-listen`): one self-contained page at `/`, and
//! at `/events` a server-sent event stream of the live feed, one JSON
//! event a second and a final one when the runs are over; at the end, the
//! result files under `/results/`, and the page saved beside them. With
//! `--web-control`, the page's buttons steer the runs (`control.rs`). The
//! run never waits for a browser: each stream holds at most the latest
//! event, and when the runs end the streams end, whoever is reading.

mod control;
pub mod events;
mod page;
mod results;
mod series;

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
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
use crate::report::RunReport;
use events::Beside;
use page::Mode;
use results::{Ended, Served, SAVED_PAGE};
use series::TargetSeries;

/// How often the page's figures are sent.
const EVERY: Duration = Duration::from_secs(1);

/// The page may fetch nothing but its own events and buttons.
const PAGE_POLICY: &str =
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; connect-src 'self'";

/// A result file fetches nothing (`report.html` is self-contained too).
const FILE_POLICY: &str =
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:";

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

/// What the server and its tasks share.
struct Shared {
    feed: Arc<Feed>,
    latest: watch::Sender<Sent>,
    open: Arc<AtomicUsize>,
    /// The series, each run's end and the files: written by the runs' end
    /// and each event, read by each request for a file.
    beside: Mutex<Beside>,
    served: Mutex<Served>,
    /// Each run's results directory, as the runs end.
    dirs: Mutex<Vec<PathBuf>>,
}

/// The page's server: the events it sends and the streams open.
pub struct Web {
    shared: Arc<Shared>,
}

impl Web {
    /// Serves the page on `listener` from `feed` until `stop`, sending an
    /// event a second; `public` lets any `Host` in (else only loopback
    /// names and addresses: see `endpoint::Access`); `control`
    /// (`--web-control`) lets the page steer the runs.
    pub fn start(
        listener: TcpListener,
        feed: Arc<Feed>,
        (public, control): (bool, bool),
        stop: CancellationToken,
    ) -> Web {
        let beside = Beside {
            series: (0..feed.len()).map(|_| TargetSeries::default()).collect(),
            ended: vec![None; feed.len()],
            files: Vec::new(),
            control,
        };
        let shared = Arc::new(Shared {
            feed,
            latest: watch::Sender::new(Sent::default()),
            open: Arc::new(AtomicUsize::new(0)),
            beside: Mutex::new(beside),
            served: Mutex::new(Served::default()),
            dirs: Mutex::new(Vec::new()),
        });
        send(&shared, false);
        tokio::spawn(tick(shared.clone(), stop.clone()));
        let handler = {
            let shared = shared.clone();
            move |request: Request<Incoming>| {
                let shared = shared.clone();
                async move { answer(request, &shared).await }
            }
        };
        let access = endpoint::Access {
            view: endpoint::View::Page,
            public,
        };
        tokio::spawn(endpoint::serve(listener, access, handler, stop));
        Web { shared }
    }

    /// Target `target`'s run ended with `report`, its files to be written
    /// into `dir`: the page shows its verdict and warnings.
    pub fn ended(&self, target: usize, report: &RunReport, dir: &Path) {
        if let Some(slot) = lock(&self.shared.beside).ended.get_mut(target) {
            *slot = Some(Ended::of(report, dir));
        }
        let mut dirs = lock(&self.shared.dirs);
        if !dirs.iter().any(|d| d == dir) {
            dirs.push(dir.to_path_buf());
        }
    }

    /// Sends the final event (the feed closed, every threshold judged, the
    /// files written), with links to the files, saves the page beside them,
    /// and waits, at most `within`, for the open streams to take it and end.
    pub async fn finish(&self, within: Duration) {
        let dirs = lock(&self.shared.dirs).clone();
        let mut served = Served::list(&dirs, &[SAVED_PAGE]);
        self.link(&served);
        let mut json = event_json(&self.shared, true);
        if let (Some(root), Some(page)) = (&served.root, &json) {
            let saved = root.join(SAVED_PAGE);
            if let Err(error) = std::fs::write(&saved, page::page(page, Mode::Saved)) {
                crate::note!(
                    "volley: cannot save the live page as {}: {error}",
                    saved.display()
                );
                // No link to a page that is not there.
                served.files.remove(SAVED_PAGE);
                self.link(&served);
                json = event_json(&self.shared, true);
            }
        }
        *lock(&self.shared.served) = served;
        if let Some(json) = json {
            publish(&self.shared.latest, json, true);
        }
        let deadline = tokio::time::Instant::now() + within;
        while self.shared.open.load(Ordering::Acquire) > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The events link to the files `served`: each run's report, and all.
    fn link(&self, served: &Served) {
        let mut beside = lock(&self.shared.beside);
        beside.files = served.files.keys().cloned().collect();
        for ended in beside.ended.iter_mut().flatten() {
            ended.report = served.report_of(&ended.dir);
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// The feed now as an event's JSON, the series brought up to date.
fn event_json(shared: &Shared, last: bool) -> Option<String> {
    let now = shared.feed.all_now();
    let mut beside = lock(&shared.beside);
    for (series, target) in beside.series.iter_mut().zip(&now) {
        series.observe(target);
    }
    serde_json::to_string(&events::event(&shared.feed, &now, &beside, last)).ok()
}

/// The feed now as an event, unless the last one went already.
fn send(shared: &Shared, last: bool) {
    if let Some(json) = event_json(shared, last) {
        publish(&shared.latest, json, last);
    }
}

fn publish(latest: &watch::Sender<Sent>, json: String, last: bool) {
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
async fn tick(shared: Arc<Shared>, stop: CancellationToken) {
    let mut every = tokio::time::interval(EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = every.tick() => {}
            _ = stop.cancelled() => return,
        }
        if shared.latest.borrow().last {
            return;
        }
        send(&shared, false);
    }
}

async fn answer(request: Request<Incoming>, shared: &Shared) -> Response<Body> {
    let path = request.uri().path();
    let mut response = if let Some(what) = path.strip_prefix("/control/") {
        let enabled = lock(&shared.beside).control;
        control::answer(what, request.method(), request.headers(), &shared.feed, enabled)
    } else if request.method() != Method::GET && request.method() != Method::HEAD {
        endpoint::respond(StatusCode::METHOD_NOT_ALLOWED, "text/plain", "GET only\n")
    } else if let Some(name) = path.strip_prefix("/results/") {
        result_file(name, shared).await
    } else {
        match path {
            "/" => {
                let control = lock(&shared.beside).control;
                let page = page::page(&shared.latest.borrow().json, Mode::Live { control });
                let mut response = endpoint::respond(StatusCode::OK, "text/html; charset=utf-8", page);
                let policy = HeaderValue::from_static(PAGE_POLICY);
                response.headers_mut().insert("content-security-policy", policy);
                response
            }
            "/events" => event_stream(shared.latest.subscribe(), shared.open.clone()),
            _ => endpoint::respond(StatusCode::NOT_FOUND, "text/plain", "see /\n"),
        }
    };
    response
        .headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
        .headers_mut()
        .insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    response
}

/// `/results/NAME`: a file the runs wrote, by its name in the list made at
/// the end (see `results.rs`); anything else is not found.
async fn result_file(name: &str, shared: &Shared) -> Response<Body> {
    let not_found = || endpoint::respond(StatusCode::NOT_FOUND, "text/plain", "no such result file\n");
    let Ok(name) = percent_encoding::percent_decode_str(name).decode_utf8() else {
        return not_found();
    };
    let Some(path) = lock(&shared.served).get(&name).map(Path::to_path_buf) else {
        return not_found();
    };
    // Read off the runtime's threads: a result file may be large.
    let Ok(Ok(bytes)) = tokio::task::spawn_blocking(move || std::fs::read(path)).await else {
        return not_found();
    };
    let mut response = endpoint::respond(StatusCode::OK, results::content_type(&name), bytes);
    let policy = HeaderValue::from_static(FILE_POLICY);
    response.headers_mut().insert("content-security-policy", policy);
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
