//! Live metrics in the Prometheus text format, served while a run goes
//! (`--metrics-listen 127.0.0.1:9464`), for a Grafana board to watch: every
//! series labelled with its `target` (and `shard`), read from the live feed.

use std::fmt::Write;
use std::sync::Arc;

use hyper::StatusCode;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::endpoint;
use crate::feed::{Feed, TargetInfo};
use crate::stats::{BucketCounts, OutcomeKind, Snapshot, BUCKET_BOUNDS_US};

/// Serves `GET /metrics` on `listener` from `feed` until `stop`; `public`
/// lets any `Host` in (else only loopback names and addresses: see
/// `endpoint::Access`).
pub async fn serve(listener: TcpListener, feed: Arc<Feed>, public: bool, stop: CancellationToken) {
    let handler = move |request: hyper::Request<hyper::body::Incoming>| {
        let feed = feed.clone();
        async move {
            match request.uri().path() {
                "/metrics" => endpoint::respond(
                    StatusCode::OK,
                    "text/plain; version=0.0.4; charset=utf-8",
                    render(&feed),
                ),
                _ => endpoint::respond(StatusCode::NOT_FOUND, "text/plain", "see /metrics\n"),
            }
        }
    };
    let access = endpoint::Access {
        view: endpoint::View::Metrics,
        public,
    };
    endpoint::serve(listener, access, handler, stop).await;
}

fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// One target's series: its labels (`target`, and `shard` for a shard) and
/// its latest snapshot.
struct Series<'a> {
    labels: String,
    snapshot: &'a Snapshot,
}

/// Every target's latest figures in the Prometheus text exposition format,
/// each metric's samples together under its `# HELP` and `# TYPE`.
pub fn render(feed: &Feed) -> String {
    let snapshots = feed.snapshots();
    let series: Vec<Series> = snapshots
        .iter()
        .map(|(info, snapshot): &(&TargetInfo, Arc<Snapshot>)| Series {
            labels: match feed.shard {
                Some(shard) => format!("target=\"{}\",shard=\"{shard}\"", label(&info.name)),
                None => format!("target=\"{}\"", label(&info.name)),
            },
            snapshot,
        })
        .collect();
    let mut text = String::new();
    method_metrics(&mut text, &series);
    latency_metrics(&mut text, &series);
    run_metrics(&mut text, &series);
    text
}

/// The `# HELP` and `# TYPE` lines that open a metric.
fn head(text: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(text, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// The counters labelled by method: calls, errors.
fn method_metrics(text: &mut String, series: &[Series]) {
    head(
        text,
        "volley_calls_total",
        "counter",
        "Calls judged, by method and outcome.",
    );
    for Series { labels, snapshot } in series {
        for m in &snapshot.methods {
            for kind in OutcomeKind::ALL {
                let _ = writeln!(
                    text,
                    "volley_calls_total{{{labels},method=\"{}\",outcome=\"{}\"}} {}",
                    label(&m.method),
                    kind.name(),
                    m.outcome(kind)
                );
            }
        }
    }
    head(
        text,
        "volley_rpc_errors_total",
        "counter",
        "JSON-RPC error answers, by method and code.",
    );
    for Series { labels, snapshot } in series {
        for m in &snapshot.methods {
            for (code, n) in &m.rpc_error_codes {
                let method = label(&m.method);
                let _ = writeln!(
                    text,
                    "volley_rpc_errors_total{{{labels},method=\"{method}\",code=\"{code}\"}} {n}"
                );
            }
        }
    }
    head(
        text,
        "volley_http_status_errors_total",
        "counter",
        "Calls failed by a non-2xx HTTP status, by status.",
    );
    for Series { labels, snapshot } in series {
        for m in &snapshot.methods {
            for (status, n) in &m.http_statuses {
                let method = label(&m.method);
                let _ = writeln!(
                    text,
                    "volley_http_status_errors_total{{{labels},method=\"{method}\",status=\"{status}\"}} {n}"
                );
            }
        }
    }
}

/// Latency: the histogram in fixed buckets (which add up across targets,
/// shards and instances) and the whole run's percentiles as the
/// HdrHistogram reads them (exact to 3 digits, but not to be added up).
fn latency_metrics(text: &mut String, series: &[Series]) {
    head(
        text,
        "volley_latency_seconds",
        "histogram",
        "Latency from the intended send time, whole run so far.",
    );
    for Series { labels, snapshot } in series {
        for (m, buckets) in snapshot.methods.iter().zip(&snapshot.method_buckets) {
            histogram(
                text,
                &format!("{labels},method=\"{}\"", label(&m.method)),
                buckets,
            );
        }
    }
    head(
        text,
        "volley_latency_quantile_seconds",
        "gauge",
        "Latency percentile from the intended send time, whole run so far (not to be added up).",
    );
    for Series { labels, snapshot } in series {
        for m in &snapshot.methods {
            let l = &m.latency;
            for (q, ms) in [
                ("0.5", l.p50_ms),
                ("0.9", l.p90_ms),
                ("0.99", l.p99_ms),
                ("0.999", l.p999_ms),
            ] {
                let _ = writeln!(
                    text,
                    "volley_latency_quantile_seconds{{{labels},method=\"{}\",quantile=\"{q}\"}} {}",
                    label(&m.method),
                    number(ms / 1000.0)
                );
            }
        }
    }
}

/// One histogram's `_bucket` (cumulative, then `+Inf`), `_sum` and `_count`.
fn histogram(text: &mut String, labels: &str, buckets: &BucketCounts) {
    for (bound, n) in BUCKET_BOUNDS_US.iter().zip(&buckets.at_or_below) {
        let _ = writeln!(
            text,
            "volley_latency_seconds_bucket{{{labels},le=\"{}\"}} {n}",
            seconds(*bound)
        );
    }
    let count = buckets.count;
    let _ = writeln!(
        text,
        "volley_latency_seconds_bucket{{{labels},le=\"+Inf\"}} {count}"
    );
    let _ = writeln!(
        text,
        "volley_latency_seconds_sum{{{labels}}} {}",
        number(buckets.sum_s)
    );
    let _ = writeln!(text, "volley_latency_seconds_count{{{labels}}} {count}");
}

/// Microseconds as seconds in plain decimals, exactly: `0.00005`, `1.3`, `60`.
fn seconds(us: u64) -> String {
    let text = format!("{}.{:06}", us / 1_000_000, us % 1_000_000);
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The metrics of each target's run as a whole.
fn run_metrics(text: &mut String, series: &[Series]) {
    type Gauge = fn(&Snapshot) -> f64;
    let gauges: [(&str, &str, Gauge); 7] = [
        ("volley_in_flight", "Calls in flight now.", |s| s.in_flight as f64),
        (
            "volley_target",
            "Target now: requests/s (open model) or calls in flight (closed).",
            |s| s.target,
        ),
        (
            "volley_achieved_calls_per_second",
            "Calls judged in the last complete second.",
            |s| s.interval.as_ref().map_or(0.0, |i| i.rps),
        ),
        (
            "volley_elapsed_seconds",
            "Time since the run started, warmup included.",
            |s| s.elapsed.as_secs_f64(),
        ),
        (
            "volley_behind_schedule",
            "1 when the generator is behind its schedule.",
            |s| f64::from(u8::from(s.behind)),
        ),
        ("volley_paused", "1 while the load is paused.", |s| {
            f64::from(u8::from(s.paused))
        }),
        ("volley_finished", "1 once the run has ended.", |s| {
            f64::from(u8::from(s.finished))
        }),
    ];
    for (name, help, value) in gauges {
        head(text, name, "gauge", help);
        for Series { labels, snapshot } in series {
            let _ = writeln!(text, "{name}{{{labels}}} {}", number(value(snapshot)));
        }
    }
    type Counter = fn(&Snapshot) -> u64;
    let counters: [(&str, &str, Counter); 2] = [
        (
            "volley_subscription_notifications_total",
            "Notifications of the subscriptions the run opened.",
            |s| s.notifications,
        ),
        (
            "volley_unsolicited_messages_total",
            "Messages from the server that answered no call.",
            |s| s.unsolicited,
        ),
    ];
    for (name, help, value) in counters {
        head(text, name, "counter", help);
        for Series { labels, snapshot } in series {
            let _ = writeln!(text, "{name}{{{labels}}} {}", value(snapshot));
        }
    }
    // Only a run with a head race has these series.
    if series.iter().any(|s| s.snapshot.race.is_some()) {
        type Raced = fn((u64, u64)) -> u64;
        let raced: [(&str, &str, Raced); 2] = [
            (
                "volley_race_heads_total",
                "Distinct heads the head race has had from the target.",
                |(heads, _)| heads,
            ),
            (
                "volley_race_first_total",
                "Heads the target delivered before any other target.",
                |(_, first)| first,
            ),
        ];
        for (name, help, value) in raced {
            head(text, name, "counter", help);
            for Series { labels, snapshot } in series {
                let _ = writeln!(text, "{name}{{{labels}}} {}", snapshot.race.map_or(0, value));
            }
        }
    }
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
    use super::{number, render, seconds};

    #[test]
    fn the_race_heads_and_firsts_are_counted_per_target_only_in_a_run_with_a_race() {
        let info = |name: &str| crate::feed::TargetInfo {
            name: name.into(),
            url: "ws://127.0.0.1:8546".into(),
            transport: "websocket".into(),
            thresholds: Vec::new(),
            control: std::sync::Arc::new(crate::engine::Control::new()),
        };
        let feed = crate::feed::Feed::new("race", None, true, vec![info("a"), info("b")]);
        let raced = |heads, first| crate::stats::Snapshot {
            race: Some((heads, first)),
            ..Default::default()
        };
        feed.publish(0, &raced(12, 10));
        feed.publish(1, &raced(11, 2));
        let text = render(&feed);
        let samples = |name: &str| -> Vec<String> {
            (text.lines())
                .filter(|l| l.starts_with(&format!("{name}{{")))
                .map(String::from)
                .collect()
        };
        let heads = samples("volley_race_heads_total");
        assert_eq!(heads.len(), 2, "{text}");
        assert!(heads[0].contains("\"a\"") && heads[0].ends_with(" 12"), "{text}");
        assert!(heads[1].contains("\"b\"") && heads[1].ends_with(" 11"), "{text}");
        let first = samples("volley_race_first_total");
        assert!(first[0].ends_with(" 10") && first[1].ends_with(" 2"), "{text}");
        let plain = crate::feed::Feed::new("plain", None, false, vec![info("a")]);
        plain.publish(0, &crate::stats::Snapshot::default());
        assert!(!render(&plain).contains("volley_race_heads_total"));
    }

    #[test]
    fn bucket_bounds_read_as_plain_exact_seconds() {
        assert_eq!(seconds(50), "0.00005");
        assert_eq!(seconds(71), "0.000071");
        assert_eq!(seconds(1_200), "0.0012");
        assert_eq!(seconds(1_300_000), "1.3");
        assert_eq!(seconds(60_000_000), "60");
        for bound in crate::stats::BUCKET_BOUNDS_US {
            assert_eq!(seconds(bound).parse::<f64>(), Ok(bound as f64 / 1e6));
        }
    }

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
