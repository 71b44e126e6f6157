//! Live metrics in the Prometheus text format, served while a run goes
//! (`--metrics-listen 127.0.0.1:9464`), for a Grafana board to watch.

use std::convert::Infallible;
use std::fmt::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::stats::OutcomeKind;
use crate::stats::{MethodSummary, Snapshot};

/// The latest snapshot, shared by the run (writer) and the endpoint.
#[derive(Default)]
pub struct Metrics {
    latest: Mutex<Option<Arc<Snapshot>>>,
}

impl Metrics {
    pub fn publish(&self, snapshot: &Snapshot) {
        *self.latest.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(snapshot.clone()));
    }

    pub fn render(&self) -> String {
        let latest = self.latest.lock().unwrap_or_else(|p| p.into_inner()).clone();
        latest.map(|s| render(&s)).unwrap_or_default()
    }
}

/// Serves `GET /metrics` on `listener` until `stop`.
pub async fn serve(listener: TcpListener, metrics: Arc<Metrics>, stop: CancellationToken) {
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(_) => continue,
            },
            _ = stop.cancelled() => return,
        };
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let service =
                hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                    let metrics = metrics.clone();
                    async move {
                        let response = if request.uri().path() == "/metrics" {
                            let mut response = Response::new(Full::new(Bytes::from(metrics.render())));
                            response.headers_mut().insert(
                                CONTENT_TYPE,
                                HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
                            );
                            response
                        } else {
                            let mut response =
                                Response::new(Full::new(Bytes::from_static(b"see /metrics\n")));
                            *response.status_mut() = StatusCode::NOT_FOUND;
                            response
                        };
                        Ok::<_, Infallible>(response)
                    }
                });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Binds the metrics address; loopback is the default and the advice.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The snapshot in the Prometheus text exposition format.
pub fn render(s: &Snapshot) -> String {
    let mut text = String::new();
    method_metrics(&mut text, &s.methods);
    run_metrics(&mut text, s);
    text
}

/// The `# HELP` and `# TYPE` lines that open a metric.
fn head(text: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(text, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// The metrics labelled by method: calls, errors and latency.
fn method_metrics(text: &mut String, methods: &[MethodSummary]) {
    head(
        text,
        "volley_calls_total",
        "counter",
        "Calls judged, by method and outcome.",
    );
    for m in methods {
        for kind in OutcomeKind::ALL {
            let _ = writeln!(
                text,
                "volley_calls_total{{method=\"{}\",outcome=\"{}\"}} {}",
                label(&m.method),
                kind.name(),
                m.outcome(kind)
            );
        }
    }
    head(
        text,
        "volley_rpc_errors_total",
        "counter",
        "JSON-RPC error answers, by method and code.",
    );
    for m in methods {
        for (code, n) in &m.rpc_error_codes {
            let _ = writeln!(
                text,
                "volley_rpc_errors_total{{method=\"{}\",code=\"{code}\"}} {n}",
                label(&m.method)
            );
        }
    }
    head(
        text,
        "volley_http_status_errors_total",
        "counter",
        "Calls failed by a non-2xx HTTP status, by status.",
    );
    for m in methods {
        for (status, n) in &m.http_statuses {
            let _ = writeln!(
                text,
                "volley_http_status_errors_total{{method=\"{}\",status=\"{status}\"}} {n}",
                label(&m.method)
            );
        }
    }
    head(
        text,
        "volley_latency_seconds",
        "summary",
        "Latency from the intended send time, whole run.",
    );
    for m in methods {
        latency(text, m);
    }
}

/// The metrics of the run as a whole.
fn run_metrics(text: &mut String, s: &Snapshot) {
    let gauges = [
        ("volley_in_flight", "Calls in flight now.", s.in_flight as f64),
        (
            "volley_target",
            "Target now: requests/s (open model) or calls in flight (closed).",
            s.target,
        ),
        (
            "volley_achieved_calls_per_second",
            "Calls judged in the last complete second.",
            s.interval.as_ref().map_or(0.0, |i| i.rps),
        ),
        (
            "volley_elapsed_seconds",
            "Time since the run started, warmup included.",
            s.elapsed.as_secs_f64(),
        ),
        (
            "volley_behind_schedule",
            "1 when the generator is behind its schedule.",
            f64::from(u8::from(s.behind)),
        ),
        (
            "volley_paused",
            "1 while the load is paused.",
            f64::from(u8::from(s.paused)),
        ),
        (
            "volley_finished",
            "1 once the run has ended.",
            f64::from(u8::from(s.finished)),
        ),
    ];
    for (name, help, value) in gauges {
        head(text, name, "gauge", help);
        let _ = writeln!(text, "{name} {}", number(value));
    }
    let counters = [
        (
            "volley_subscription_notifications_total",
            "Notifications of the subscriptions the run opened.",
            s.notifications,
        ),
        (
            "volley_unsolicited_messages_total",
            "Messages from the server that answered no call.",
            s.unsolicited,
        ),
    ];
    for (name, help, value) in counters {
        head(text, name, "counter", help);
        let _ = writeln!(text, "{name} {value}");
    }
}

fn latency(text: &mut String, m: &MethodSummary) {
    let method = label(&m.method);
    let l = &m.latency;
    for (q, ms) in [
        ("0.5", l.p50_ms),
        ("0.9", l.p90_ms),
        ("0.99", l.p99_ms),
        ("0.999", l.p999_ms),
    ] {
        let _ = writeln!(
            text,
            "volley_latency_seconds{{method=\"{method}\",quantile=\"{q}\"}} {}",
            number(ms / 1000.0)
        );
    }
    let _ = writeln!(
        text,
        "volley_latency_seconds_sum{{method=\"{method}\"}} {}",
        number(l.mean_ms / 1000.0 * m.calls as f64)
    );
    let _ = writeln!(
        text,
        "volley_latency_seconds_count{{method=\"{method}\"}} {}",
        m.calls
    );
}

/// Significant digits a sample value keeps: the figures are no finer
/// (latency is kept to 3 digits, times to the nanosecond), and arithmetic
/// noise such as `0.0007740000000000001` goes.
const SIGNIFICANT_DIGITS: usize = 9;

/// A float as Prometheus's text format reads it (Go's `ParseFloat`): at
/// most [`SIGNIFICANT_DIGITS`] significant digits, in the shortest text that
/// reads back as that rounded value; `NaN`, `+Inf` and `-Inf` as the format
/// spells them.
fn number(value: f64) -> String {
    if value.is_nan() {
        return "NaN".into();
    }
    if value.is_infinite() {
        return if value > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    let rounded: f64 = format!("{value:.*e}", SIGNIFICANT_DIGITS - 1)
        .parse()
        .unwrap_or(value);
    // Plain decimals where they are short; an exponent where they are not.
    if rounded == 0.0 || (1e-4..1e15).contains(&rounded.abs()) {
        format!("{rounded}")
    } else {
        format!("{rounded:e}")
    }
}

#[cfg(test)]
mod tests {
    use super::number;

    #[test]
    fn floats_keep_nine_significant_digits_at_most_in_the_shortest_text() {
        assert_eq!(number(0.774 / 1000.0), "0.000774");
        assert_eq!(0.774 / 1000.0, 0.0007740000000000001, "the noise rounded away");
        assert_eq!(number(1.234_567_891_2), "1.23456789");
        assert_eq!(number(12_345.678_9), "12345.6789");
        assert_eq!(number(3.0), "3");
        assert_eq!(number(0.0), "0");
        assert_eq!(number(2.5e-7), "2.5e-7");
        assert_eq!(number(1.0e20 / 3.0), "3.33333333e19");
        assert_eq!(number(f64::NAN), "NaN");
        assert_eq!(number(f64::INFINITY), "+Inf");
        assert_eq!(number(f64::NEG_INFINITY), "-Inf");
        for value in [0.000774, 1.23456789, 2.5e-7, 3.33333333e19] {
            assert_eq!(number(value).parse::<f64>(), Ok(value), "reads back");
        }
    }
}
