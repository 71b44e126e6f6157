//! The live feed's figures as one OTLP export request, by OpenTelemetry's
//! semantic conventions for JSON-RPC clients: `rpc.client.call.duration`
//! in seconds with `rpc.system.name = "jsonrpc"` and `rpc.method` on every
//! point, an error answer's code as `rpc.response.status_code`. Every figure
//! is the whole run's so far (cumulative), so a push that is lost costs
//! nothing: the next one carries it. A pure function of its inputs.

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::metrics::v1::{
    metric, number_data_point, AggregationTemporality, Gauge, Histogram, HistogramDataPoint, Metric,
    NumberDataPoint, ResourceMetrics, ScopeMetrics, Sum,
};
use opentelemetry_proto::tonic::resource::v1::Resource;

use crate::feed::TargetInfo;
use crate::stats::{OutcomeKey, OutcomeKind, Snapshot, BUCKET_BOUNDS_US};

/// The call histogram's name, as the conventions give it.
pub const CALL_DURATION: &str = "rpc.client.call.duration";

/// What the run is, the same in every push.
#[derive(Clone, Debug)]
pub struct About {
    pub scenario: String,
    /// Made at the start, unique to the run (`service.instance.id`).
    pub run_id: String,
    pub shard: Option<u32>,
    /// The JSON-RPC spoken: "2.0" or "1.0".
    pub jsonrpc: String,
    /// Each row whose name is not its method's (a call's or a step's
    /// `name`): the row and the method it calls.
    pub renamed: Vec<(String, String)>,
}

/// One target's latest figures, and when its run began (ns since 1970).
pub struct Figures<'a> {
    pub info: &'a TargetInfo,
    pub snapshot: &'a Snapshot,
    pub started_ns: u64,
}

/// The request pushed at `now_ns`: one resource (the run), one scope
/// (volley), each metric with a point per target and attribute set.
pub fn request(about: &About, targets: &[Figures], now_ns: u64) -> ExportMetricsServiceRequest {
    let mut metrics = vec![call_durations(about, targets, now_ns)];
    metrics.extend(counters(about, targets, now_ns));
    metrics.extend(gauges(about, targets, now_ns));
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(resource(about)),
            scope_metrics: vec![ScopeMetrics {
                scope: Some(InstrumentationScope {
                    name: "volley".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    ..Default::default()
                }),
                metrics,
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
    }
}

fn resource(about: &About) -> Resource {
    let mut attributes = vec![
        text("service.name", "volley"),
        text("service.version", env!("CARGO_PKG_VERSION")),
        text("service.instance.id", &about.run_id),
        text("volley.run.id", &about.run_id),
        text("volley.scenario", &about.scenario),
    ];
    if let Some(shard) = about.shard {
        attributes.push(int("volley.shard", i64::from(shard)));
    }
    Resource {
        attributes,
        ..Default::default()
    }
}

fn value(value: any_value::Value) -> Option<AnyValue> {
    Some(AnyValue { value: Some(value) })
}

fn text(key: &str, text: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: value(any_value::Value::StringValue(text.into())),
        ..Default::default()
    }
}

fn int(key: &str, n: i64) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: value(any_value::Value::IntValue(n)),
        ..Default::default()
    }
}

/// What every point of a target carries: the RPC system, the protocol's
/// version, the target and where it is, and the shard.
fn target_attributes(about: &About, info: &TargetInfo) -> Vec<KeyValue> {
    let mut attributes = vec![
        text("rpc.system.name", "jsonrpc"),
        text("jsonrpc.protocol.version", &about.jsonrpc),
        text("volley.target", &info.name),
    ];
    if let Some((address, port)) = server_of(&info.url) {
        attributes.push(text("server.address", &address));
        if let Some(port) = port {
            attributes.push(int("server.port", i64::from(port)));
        }
    }
    if let Some(shard) = about.shard {
        attributes.push(int("volley.shard", i64::from(shard)));
    }
    attributes
}

/// A target URL's server address and port (the scheme's when the URL
/// gives none; a Unix socket's path has none). The built-in server
/// listens on loopback, at a port chosen as it starts (not known here);
/// a child's stdio has no address.
fn server_of(url: &str) -> Option<(String, Option<u16>)> {
    if url == "builtin" {
        return Some((BUILTIN_ADDRESS.to_string(), None));
    }
    let (scheme, rest) = url.split_once("://")?;
    if scheme == "unix" {
        return Some((rest.to_string(), None));
    }
    let authority = crate::redact::host(url);
    let default = match scheme {
        "http" | "ws" => Some(80),
        "https" | "wss" => Some(443),
        _ => None,
    };
    let colon = match authority.rfind(']') {
        Some(end) => authority[end..].find(':').map(|i| end + i),
        None => authority.rfind(':'),
    };
    let (host, port) = match colon {
        Some(at) => (&authority[..at], authority[at + 1..].parse().ok()),
        None => (authority, default),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    (!host.is_empty()).then(|| (host.to_string(), port))
}

/// Where the built-in server listens (`cmd/execute.rs`).
const BUILTIN_ADDRESS: &str = "127.0.0.1";

/// A row's method (`rpc.method`), and the row's own name beside it where
/// a call's `name` gave it one.
fn method_attributes(about: &About, row: &str) -> Vec<KeyValue> {
    match about.renamed.iter().find(|(r, _)| r == row) {
        Some((row, method)) => vec![text("rpc.method", method), text("volley.call", row)],
        None => vec![text("rpc.method", row)],
    }
}

/// An outcome as the conventions say it: a JSON-RPC error's code as
/// `rpc.response.status_code`, an HTTP status as `http.response.status_code`,
/// `error.type` on every failure; volley's own name for it beside.
fn outcome_attributes(key: OutcomeKey) -> Vec<KeyValue> {
    let mut attributes = vec![text("volley.outcome", key.kind.name())];
    match (key.kind, key.detail) {
        (OutcomeKind::Ok, _) => {}
        (OutcomeKind::RpcError, Some(code)) => {
            attributes.push(text("rpc.response.status_code", &code.to_string()));
            attributes.push(text("error.type", &code.to_string()));
        }
        (OutcomeKind::HttpStatus, Some(status)) => {
            attributes.push(int("http.response.status_code", status));
            attributes.push(text("error.type", &status.to_string()));
        }
        (kind, _) => attributes.push(text("error.type", kind.name())),
    }
    attributes
}

fn metric(name: &str, description: &str, unit: &str, data: metric::Data) -> Metric {
    Metric {
        name: name.into(),
        description: description.into(),
        unit: unit.into(),
        data: Some(data),
        ..Default::default()
    }
}

/// Every call's duration, a point per target, method and outcome, in the
/// buckets `/metrics` has: from the intended send time, as volley's
/// latency is (a call that never reached a connection, with the time it
/// took to fail).
fn call_durations(about: &About, targets: &[Figures], now_ns: u64) -> Metric {
    let bounds: Vec<f64> = BUCKET_BOUNDS_US.iter().map(|us| *us as f64 / 1e6).collect();
    let mut points = Vec::new();
    for figures in targets {
        let common = target_attributes(about, figures.info);
        let snapshot = figures.snapshot;
        for (row, durations) in snapshot.methods.iter().zip(&snapshot.call_durations) {
            for counts in durations.0.iter().filter(|c| c.count() > 0) {
                let mut attributes = common.clone();
                attributes.extend(method_attributes(about, &row.method));
                attributes.extend(outcome_attributes(counts.key));
                points.push(HistogramDataPoint {
                    attributes,
                    start_time_unix_nano: figures.started_ns,
                    time_unix_nano: now_ns,
                    count: counts.count(),
                    sum: Some(counts.sum_us as f64 / 1e6),
                    bucket_counts: counts.buckets.to_vec(),
                    explicit_bounds: bounds.clone(),
                    ..Default::default()
                });
            }
        }
    }
    metric(
        CALL_DURATION,
        "Duration of JSON-RPC calls, from their intended send time; every call, failed ones too; a notification until it was written.",
        "s",
        metric::Data::Histogram(Histogram {
            data_points: points,
            aggregation_temporality: AggregationTemporality::Cumulative as i32,
        }),
    )
}

fn number(
    attributes: Vec<KeyValue>,
    figures: &Figures,
    now_ns: u64,
    value: number_data_point::Value,
) -> NumberDataPoint {
    NumberDataPoint {
        attributes,
        start_time_unix_nano: figures.started_ns,
        time_unix_nano: now_ns,
        value: Some(value),
        ..Default::default()
    }
}

fn sum(name: &str, description: &str, points: Vec<NumberDataPoint>) -> Metric {
    metric(
        name,
        description,
        "{call}",
        metric::Data::Sum(Sum {
            data_points: points,
            aggregation_temporality: AggregationTemporality::Cumulative as i32,
            is_monotonic: true,
        }),
    )
}

/// Calls by method and outcome (every outcome, 0 too, so a rate reads 0
/// rather than nothing), and the failed ones by outcome with their codes.
fn counters(about: &About, targets: &[Figures], now_ns: u64) -> [Metric; 2] {
    let (mut calls, mut errors) = (Vec::new(), Vec::new());
    for figures in targets {
        let common = target_attributes(about, figures.info);
        let snapshot = figures.snapshot;
        for row in &snapshot.methods {
            for kind in OutcomeKind::ALL {
                let mut attributes = common.clone();
                attributes.extend(method_attributes(about, &row.method));
                attributes.push(text("volley.outcome", kind.name()));
                let n = number_data_point::Value::AsInt(row.outcome(kind) as i64);
                calls.push(number(attributes, figures, now_ns, n));
            }
        }
        for (row, durations) in snapshot.methods.iter().zip(&snapshot.call_durations) {
            for counts in durations.0.iter().filter(|c| c.key.kind != OutcomeKind::Ok) {
                let mut attributes = common.clone();
                attributes.extend(method_attributes(about, &row.method));
                attributes.extend(outcome_attributes(counts.key));
                let n = number_data_point::Value::AsInt(counts.count() as i64);
                errors.push(number(attributes, figures, now_ns, n));
            }
        }
    }
    [
        sum("volley.calls", "Calls judged, by method and outcome.", calls),
        sum(
            "volley.errors",
            "Failed calls, by method and outcome, with a JSON-RPC error's code or an HTTP status.",
            errors,
        ),
    ]
}

/// Where a target's run stands: one of these.
pub const STATES: [&str; 5] = ["warmup", "running", "paused", "ending", "finished"];

fn state(snapshot: &Snapshot) -> &'static str {
    let over = snapshot.planned.is_some_and(|planned| snapshot.elapsed > planned);
    match () {
        _ if snapshot.finished => "finished",
        _ if snapshot.paused => "paused",
        _ if snapshot.elapsed < snapshot.warmup => "warmup",
        _ if over => "ending",
        _ => "running",
    }
}

/// The run's state (a point per state, 1 for the one it is in), its rate
/// in the last complete second, its target and its calls in flight.
fn gauges(about: &About, targets: &[Figures], now_ns: u64) -> Vec<Metric> {
    type Figure = fn(&Snapshot) -> f64;
    let figures: [(&str, &str, &str, Figure); 4] = [
        (
            "volley.run.rate",
            "Calls judged in the last complete second.",
            "{call}/s",
            |s| s.interval.as_ref().map_or(0.0, |i| i.rps),
        ),
        (
            "volley.run.target",
            "The load asked for now: requests/s (open model) or calls in flight (closed).",
            "1",
            |s| s.target,
        ),
        ("volley.run.in_flight", "Calls in flight now.", "{call}", |s| {
            s.in_flight as f64
        }),
        (
            "volley.run.elapsed",
            "Time since the run started, warmup included.",
            "s",
            |s| s.elapsed.as_secs_f64(),
        ),
    ];
    let gauge = |name: &str, description: &str, unit: &str, points| {
        metric(
            name,
            description,
            unit,
            metric::Data::Gauge(Gauge { data_points: points }),
        )
    };
    let mut states = Vec::new();
    for figures in targets {
        let now = state(figures.snapshot);
        for each in STATES {
            let mut attributes = target_attributes(about, figures.info);
            attributes.push(text("volley.run.state", each));
            let one = number_data_point::Value::AsInt(i64::from(each == now));
            states.push(number(attributes, figures, now_ns, one));
        }
    }
    let mut metrics = vec![gauge(
        "volley.run.state",
        "1 for the state the run is in (warmup, running, paused, ending, finished), 0 for the others.",
        "1",
        states,
    )];
    for (name, description, unit, read) in figures {
        let points = (targets.iter())
            .map(|f| {
                let mut attributes = target_attributes(about, f.info);
                if name == "volley.run.target" {
                    let model = if f.snapshot.open { "open" } else { "closed" };
                    attributes.push(text("volley.load.model", model));
                }
                number(
                    attributes,
                    f,
                    now_ns,
                    number_data_point::Value::AsDouble(read(f.snapshot)),
                )
            })
            .collect();
        metrics.push(gauge(name, description, unit, points));
    }
    metrics
}

#[cfg(test)]
mod tests;
