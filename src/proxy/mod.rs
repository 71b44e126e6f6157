//! `volley record`: a transparent JSON-RPC proxy that writes what passes
//! through it as a capture, one line a request: when it arrived (seconds
//! since the recording began), the connection it came on, the header names
//! (never their values), the request as sent (a call or a batch) and,
//! with `--answers`, the answer and how long the upstream took.
//!
//! Bounded: `--duration` and `--max-size` end it, as Ctrl-C does; every
//! way it ends flushes the file whole (each line is written whole or not at
//! all). A capture is what `replay = { file = ..., timing = "recorded" }`
//! and `volley init --from-capture` read.

mod http;
mod ws;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::value::RawValue;
use std::io::Write as _;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// What to record, where from and to, and when to stop.
#[derive(Clone, Debug)]
pub struct RecordConfig {
    pub listen: SocketAddr,
    pub upstream: Upstream,
    pub out: PathBuf,
    /// Also keep each answer and its latency.
    pub answers: bool,
    /// Stop once the capture would pass this many bytes.
    pub max_size: u64,
    pub duration: Option<Duration>,
}

/// The server requests are passed on to: `http://` or `ws://`, a host, a
/// port and a path.
#[derive(Clone, Debug, PartialEq)]
pub struct Upstream {
    pub websocket: bool,
    /// `host:port`, as connected to and sent in `Host`.
    pub authority: String,
    /// With its query, `/` at least.
    pub path: String,
}

impl Upstream {
    pub fn parse(url: &str) -> Result<Upstream, String> {
        let (websocket, rest) = if let Some(rest) = url.strip_prefix("http://") {
            (false, rest)
        } else if let Some(rest) = url.strip_prefix("ws://") {
            (true, rest)
        } else {
            return Err(format!(
                "'{}': the upstream must be http://HOST:PORT[/PATH] or ws://HOST:PORT[/PATH] (TLS upstreams are not proxied yet)",
                crate::redact::url(url)
            ));
        };
        let (authority, path) = rest.split_at(rest.find(['/', '?']).unwrap_or(rest.len()));
        if authority.is_empty() {
            return Err(format!("'{}': no host", crate::redact::url(url)));
        }
        // The clients' own headers go upstream, credentials among them:
        // the proxy adds none of its own.
        if authority.contains('@') {
            return Err(format!(
                "'{}': the upstream's user information (user:password@) is not sent by the proxy; give the upstream without it, and the client its credentials",
                crate::redact::url(url)
            ));
        }
        let (host, port) =
            crate::transport::host_and_port(url, authority, Some(80)).map_err(|e| e.to_string())?;
        let authority = format!("{host}:{port}");
        Ok(Upstream {
            websocket,
            authority,
            path: match path.starts_with('/') {
                true => path.to_string(),
                false => format!("/{path}"),
            },
        })
    }
}

/// One recorded request, as a capture line holds it.
#[derive(serde::Serialize)]
pub struct Line<'a> {
    /// Seconds since the recording began.
    pub at: f64,
    /// Which client connection it came on, from 1.
    pub conn: u64,
    /// Header names only: their values may be secrets.
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub headers: &'a [String],
    pub request: &'a RawValue,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<f64>,
}

/// What was recorded, said at the end.
#[derive(Debug, Default)]
pub struct Recorded {
    pub requests: u64,
    pub bytes: u64,
    /// Messages passed on but not recorded: not a JSON-RPC request.
    pub not_json: u64,
    /// Requests passed on once the capture had reached `--max-size`.
    pub past_the_bound: u64,
    pub connections: u64,
    /// Why it stopped: "stopped" (a signal), "duration", "max-size".
    pub ended_by: &'static str,
}

/// Shared by every proxied connection: the clock, the writer's queue,
/// and the counts.
pub(crate) struct Recorder {
    start: Instant,
    lines: mpsc::UnboundedSender<Vec<u8>>,
    answers: bool,
    upstream: Upstream,
    /// Lines handed to the writer (it writes them while under the size bound).
    queued: AtomicU64,
    not_json: AtomicU64,
}

impl Recorder {
    /// A message passed on and not recorded (not a JSON-RPC call over POST).
    fn pass(&self) {
        self.not_json.fetch_add(1, Ordering::Relaxed);
    }

    fn since_start(&self, at: Instant) -> f64 {
        at.saturating_duration_since(self.start).as_secs_f64()
    }

    /// Queues one request's line: whole, and only if it is JSON. A body
    /// that is not stays out of the capture (and is counted).
    fn write(
        &self,
        conn: u64,
        headers: &[String],
        arrived: Instant,
        request: &[u8],
        answer: Option<(&[u8], Duration)>,
    ) {
        let Some(request) = compact(request).filter(|r| is_request(r)) else {
            self.not_json.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let answer = answer.filter(|_| self.answers);
        let answer_raw = answer.and_then(|(body, _)| compact(body));
        let line = Line {
            at: self.since_start(arrived),
            conn,
            headers,
            request: &request,
            answer: answer_raw.as_deref(),
            // To the microsecond: the clock says no more.
            latency_ms: answer.map(|(_, latency)| latency.as_micros() as f64 / 1000.0),
        };
        let mut bytes = serde_json::to_vec(&line).expect("a line is plain data");
        bytes.push(b'\n');
        self.queued.fetch_add(1, Ordering::Relaxed);
        let _ = self.lines.send(bytes);
    }
}

/// A JSON-RPC request: an object, or a batch of at least one (what a
/// replay can send again). Anything else is passed on, not recorded.
fn is_request(body: &RawValue) -> bool {
    match body.get().as_bytes().first() {
        Some(b'{') => true,
        Some(b'[') => serde_json::from_str::<Vec<&RawValue>>(body.get())
            .is_ok_and(|calls| !calls.is_empty() && calls.iter().all(|c| c.get().starts_with('{'))),
        _ => false,
    }
}

/// The JSON text as one line: as sent when it holds no line break, else
/// written again compactly. `None` when it is not JSON.
fn compact(body: &[u8]) -> Option<Box<RawValue>> {
    let text = std::str::from_utf8(body).ok()?.trim();
    if text.contains(['\n', '\r']) {
        let value: serde_json::Value = serde_json::from_str(text).ok()?;
        return RawValue::from_string(value.to_string()).ok();
    }
    RawValue::from_string(text.to_string()).ok()
}

/// Records until `cancel`, the duration or the size bound; returns what was
/// recorded. The listener is bound before this returns its first line:
/// `ready` hears the address.
pub async fn record(
    config: RecordConfig,
    cancel: CancellationToken,
    ready: impl FnOnce(SocketAddr),
) -> std::io::Result<Recorded> {
    let named = |what: String| move |e: std::io::Error| std::io::Error::new(e.kind(), format!("{what}: {e}"));
    let file = std::fs::File::create(&config.out)
        .map_err(named(format!("cannot write {}", config.out.display())))?;
    let listener = (tokio::net::TcpListener::bind(config.listen).await)
        .map_err(named(format!("cannot listen on {}", config.listen)))?;
    ready(listener.local_addr()?);
    let (lines, queue) = mpsc::unbounded_channel();
    let stop = cancel.child_token();
    let ended_by = Arc::new(std::sync::Mutex::new("stopped"));
    let writer = tokio::spawn(write_lines(
        file,
        queue,
        config.max_size,
        stop.clone(),
        ended_by.clone(),
    ));
    let recorder = Arc::new(Recorder {
        start: Instant::now(),
        lines,
        answers: config.answers,
        upstream: config.upstream.clone(),
        queued: AtomicU64::new(0),
        not_json: AtomicU64::new(0),
    });
    if let Some(duration) = config.duration {
        let (stop, ended_by) = (stop.clone(), ended_by.clone());
        tokio::spawn(async move {
            tokio::select! {
                _ = tokio::time::sleep(duration) => {
                    *ended_by.lock().unwrap_or_else(|p| p.into_inner()) = "duration";
                    stop.cancel();
                }
                _ = stop.cancelled() => {}
            }
        });
    }
    let mut connections = 0;
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stop.cancelled() => break,
        };
        let Ok((stream, _)) = accepted else { continue };
        connections += 1;
        let (recorder, stop) = (recorder.clone(), stop.clone());
        tokio::spawn(async move {
            let proxied = if recorder.upstream.websocket {
                ws::proxy(stream, connections, &recorder).boxed()
            } else {
                http::proxy(stream, connections, &recorder).boxed()
            };
            tokio::select! {
                _ = proxied => {}
                _ = stop.cancelled() => {}
            }
        });
    }
    let not_json = recorder.not_json.load(Ordering::Relaxed);
    let queued = Arc::clone(&recorder);
    // The last sender goes with the recorder once the connections end.
    drop(recorder);
    let (requests, bytes) = writer.await.unwrap_or(Ok((0, 0)))?;
    let unrecorded = queued.queued.load(Ordering::Relaxed).saturating_sub(requests);
    let ended_by = *ended_by.lock().unwrap_or_else(|p| p.into_inner());
    Ok(Recorded {
        requests,
        bytes,
        not_json,
        past_the_bound: unrecorded,
        connections,
        ended_by,
    })
}

use futures_util::FutureExt as _;

/// Writes queued lines until the queue closes or the size bound is
/// reached (then stops the recording); returns the lines and bytes written.
async fn write_lines(
    file: std::fs::File,
    mut queue: mpsc::UnboundedReceiver<Vec<u8>>,
    max_size: u64,
    stop: CancellationToken,
    ended_by: Arc<std::sync::Mutex<&'static str>>,
) -> std::io::Result<(u64, u64)> {
    // Plain buffered writes: a line at a time into memory, a system call
    // per 64 KiB.
    let mut out = std::io::BufWriter::with_capacity(64 << 10, file);
    let (mut lines, mut written) = (0u64, 0u64);
    loop {
        let line = tokio::select! {
            line = queue.recv() => line,
            // Stopped: what is queued is written, then the file closes.
            _ = stop.cancelled() => queue.try_recv().ok(),
        };
        let Some(line) = line else { break };
        if written.saturating_add(line.len() as u64) > max_size {
            *ended_by.lock().unwrap_or_else(|p| p.into_inner()) = "max-size";
            stop.cancel();
            break;
        }
        out.write_all(&line)?;
        written += line.len() as u64;
        lines += 1;
    }
    out.flush()?;
    out.get_ref().sync_all()?;
    Ok((lines, written))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_upstream_is_http_or_ws_with_a_port() {
        let up = Upstream::parse("http://127.0.0.1:8545").unwrap();
        assert_eq!(
            (up.websocket, up.authority.as_str(), up.path.as_str()),
            (false, "127.0.0.1:8545", "/")
        );
        let up = Upstream::parse("ws://localhost/rpc?x=1").unwrap();
        assert_eq!(
            (up.websocket, up.authority.as_str(), up.path.as_str()),
            (true, "localhost:80", "/rpc?x=1")
        );
        assert_eq!(
            Upstream::parse("http://[::1]:9000/").unwrap().authority,
            "[::1]:9000"
        );
        let bad_ports = [
            "http://h:abc",
            "http://h:0",
            "http://h:70000",
            "ws://h:+80",
            "http://:80",
        ];
        let refused =
            Upstream::parse("http://alice:hunter2pass@127.0.0.1:1/v3/0123456789abcdef0123456789abcdef")
                .unwrap_err();
        assert!(
            refused.contains("user information")
                && !refused.contains("hunter2pass")
                && !refused.contains("0123456789abcdef0"),
            "{refused}"
        );
        assert_eq!(Upstream::parse("http://127.0.0.1:1?k=v").unwrap().path, "/?k=v");
        for bad in ["https://x:1", "tcp://x:1", "http://", "x"]
            .into_iter()
            .chain(bad_ports)
        {
            assert!(Upstream::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_body_is_kept_on_one_line_or_not_at_all() {
        assert_eq!(compact(b" {\"a\": 1} ").unwrap().get(), "{\"a\": 1}", "as sent");
        assert_eq!(compact(b"{\n \"a\": [1,\n 2]}").unwrap().get(), "{\"a\":[1,2]}");
        assert!(compact(b"<html>").is_none());
        assert!(compact(&[0xff, b'{']).is_none());
    }
}
