use std::sync::Arc;
use std::time::Duration;

use opentelemetry_proto::tonic::metrics::v1::HistogramDataPoint;

use super::*;
use crate::engine::Control;
use crate::stats::{CallDurations, MethodSummary, Outcome};

fn info(name: &str, url: &str) -> TargetInfo {
    TargetInfo {
        name: name.into(),
        url: url.into(),
        transport: "http/1.1".into(),
        thresholds: Vec::new(),
        control: Arc::new(Control::new()),
    }
}

fn about() -> About {
    About {
        scenario: "demo".into(),
        run_id: "0123".into(),
        shard: None,
        jsonrpc: "2.0".into(),
        renamed: vec![("latest block".into(), "eth_getBlockByNumber".into())],
    }
}

/// A row with `calls` of each outcome, each taking `us`.
fn row(name: &str, outcomes: &[(Outcome, u64)], us: u64) -> (MethodSummary, CallDurations) {
    let mut durations = CallDurations::default();
    let mut summary = MethodSummary {
        method: name.into(),
        ..MethodSummary::default()
    };
    for (outcome, n) in outcomes {
        for _ in 0..*n {
            durations.record(*outcome, us);
        }
        *summary.outcomes.entry(outcome.kind().name()).or_default() += n;
        summary.calls += n;
    }
    (summary, durations)
}

fn snapshot(rows: Vec<(MethodSummary, CallDurations)>) -> Snapshot {
    let (methods, call_durations) = rows.into_iter().unzip();
    Snapshot {
        methods,
        call_durations,
        elapsed: Duration::from_secs(3),
        ..Snapshot::default()
    }
}

fn attribute<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a any_value::Value> {
    let found = attributes.iter().find(|kv| kv.key == key)?;
    found.value.as_ref()?.value.as_ref()
}

fn text_of(attributes: &[KeyValue], key: &str) -> Option<String> {
    match attribute(attributes, key) {
        Some(any_value::Value::StringValue(text)) => Some(text.clone()),
        Some(any_value::Value::IntValue(n)) => Some(n.to_string()),
        _ => None,
    }
}

fn histogram_points(request: &ExportMetricsServiceRequest) -> (&Metric, &[HistogramDataPoint]) {
    let metrics = &request.resource_metrics[0].scope_metrics[0].metrics;
    let metric = metrics.iter().find(|m| m.name == CALL_DURATION).unwrap();
    match &metric.data {
        Some(metric::Data::Histogram(h)) => (metric, &h.data_points),
        other => panic!("not a histogram: {other:?}"),
    }
}

#[test]
fn every_call_is_a_point_of_the_histogram_with_its_method_and_outcome() {
    let target = info("node", "http://127.0.0.1:8545");
    let figures = snapshot(vec![
        row(
            "eth_blockNumber",
            &[
                (Outcome::Ok, 7),
                (Outcome::RpcError(-32000), 2),
                (Outcome::Connect, 1),
            ],
            300,
        ),
        row("latest block", &[(Outcome::HttpStatus(503), 4)], 70_000_000),
    ]);
    let targets = [Figures {
        info: &target,
        snapshot: &figures,
        started_ns: 1_000,
    }];
    let request = request(&about(), &targets, 5_000);
    let (metric, points) = histogram_points(&request);
    assert_eq!(metric.unit, "s");
    assert_eq!(points.len(), 4, "a point per method and outcome");
    assert_eq!(
        points.iter().map(|p| p.count).sum::<u64>(),
        14,
        "every call, once"
    );
    for point in points {
        assert_eq!(
            text_of(&point.attributes, "rpc.system.name").as_deref(),
            Some("jsonrpc")
        );
        assert!(text_of(&point.attributes, "rpc.method").is_some());
        assert_eq!(
            text_of(&point.attributes, "server.address").as_deref(),
            Some("127.0.0.1")
        );
        assert_eq!(text_of(&point.attributes, "server.port").as_deref(), Some("8545"));
        assert_eq!(
            text_of(&point.attributes, "jsonrpc.protocol.version").as_deref(),
            Some("2.0")
        );
        assert_eq!(point.bucket_counts.iter().sum::<u64>(), point.count);
        assert_eq!(point.bucket_counts.len(), point.explicit_bounds.len() + 1);
        assert_eq!((point.start_time_unix_nano, point.time_unix_nano), (1_000, 5_000));
    }
    assert_eq!(
        points[0].explicit_bounds[0], 0.00005,
        "the bounds of /metrics, in seconds"
    );
    assert_eq!(points[0].explicit_bounds[40], 60.0);
    let of = |outcome: &str| {
        (points.iter())
            .find(|p| text_of(&p.attributes, "volley.outcome").as_deref() == Some(outcome))
            .unwrap()
    };
    let ok = of("ok");
    assert_eq!((ok.count, ok.sum), (7, Some(0.0021)));
    assert_eq!(text_of(&ok.attributes, "error.type"), None);
    let error = of("rpc_error");
    assert_eq!(
        text_of(&error.attributes, "rpc.response.status_code").as_deref(),
        Some("-32000")
    );
    assert_eq!(
        text_of(&error.attributes, "error.type").as_deref(),
        Some("-32000")
    );
    assert_eq!(
        text_of(&of("connect").attributes, "error.type").as_deref(),
        Some("connect")
    );
    let status = of("http_status");
    assert_eq!(
        text_of(&status.attributes, "http.response.status_code").as_deref(),
        Some("503")
    );
    assert_eq!(
        text_of(&status.attributes, "rpc.method").as_deref(),
        Some("eth_getBlockByNumber")
    );
    assert_eq!(
        text_of(&status.attributes, "volley.call").as_deref(),
        Some("latest block")
    );
    assert_eq!(*status.bucket_counts.last().unwrap(), 4, "past the last bound");
}

#[test]
fn every_metric_names_the_run_and_each_point_its_target() {
    let (a, b) = (info("a", "https://node.example/rpc"), info("b", "builtin"));
    let figures = snapshot(vec![row("m", &[(Outcome::Ok, 1), (Outcome::Timeout, 2)], 10)]);
    let targets = [&a, &b].map(|info| Figures {
        info,
        snapshot: &figures,
        started_ns: 1,
    });
    let mut about = about();
    about.shard = Some(3);
    let request = request(&about, &targets, 2);
    let resource = request.resource_metrics[0].resource.as_ref().unwrap();
    for (key, value) in [
        ("service.name", "volley"),
        ("service.instance.id", "0123"),
        ("volley.run.id", "0123"),
        ("volley.scenario", "demo"),
        ("volley.shard", "3"),
    ] {
        assert_eq!(
            text_of(&resource.attributes, key).as_deref(),
            Some(value),
            "{key}"
        );
    }
    let metrics = &request.resource_metrics[0].scope_metrics[0].metrics;
    let names: Vec<&str> = metrics.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(
        names,
        [
            CALL_DURATION,
            "volley.calls",
            "volley.errors",
            "volley.run.state",
            "volley.run.rate",
            "volley.run.target",
            "volley.run.in_flight",
            "volley.run.elapsed"
        ]
    );
    for metric in metrics {
        let attributes: Vec<&[KeyValue]> = match metric.data.as_ref().unwrap() {
            metric::Data::Histogram(h) => h.data_points.iter().map(|p| &p.attributes[..]).collect(),
            metric::Data::Sum(s) => s.data_points.iter().map(|p| &p.attributes[..]).collect(),
            metric::Data::Gauge(g) => g.data_points.iter().map(|p| &p.attributes[..]).collect(),
            other => panic!("{other:?}"),
        };
        assert!(!attributes.is_empty(), "{}", metric.name);
        for point in attributes {
            assert_eq!(text_of(point, "rpc.system.name").as_deref(), Some("jsonrpc"));
            assert_eq!(text_of(point, "volley.shard").as_deref(), Some("3"));
            assert!(["a", "b"].contains(&text_of(point, "volley.target").unwrap().as_str()));
        }
    }
    let (_, points) = histogram_points(&request);
    let server = |target: &str| {
        let point = points
            .iter()
            .find(|p| text_of(&p.attributes, "volley.target").as_deref() == Some(target))
            .unwrap();
        (
            text_of(&point.attributes, "server.address"),
            text_of(&point.attributes, "server.port"),
        )
    };
    assert_eq!(server("a"), (Some("node.example".into()), Some("443".into())));
    assert_eq!(
        server("b"),
        (Some("127.0.0.1".into()), None),
        "the built-in server, on loopback, its port not known here"
    );
}

#[test]
fn the_counters_count_every_outcome_and_the_errors_by_code() {
    let target = info("t", "ws://[::1]:8546");
    let figures = snapshot(vec![row(
        "m",
        &[
            (Outcome::Ok, 5),
            (Outcome::RpcError(-32601), 2),
            (Outcome::RpcError(-32000), 1),
        ],
        10,
    )]);
    let targets = [Figures {
        info: &target,
        snapshot: &figures,
        started_ns: 1,
    }];
    let request = request(&about(), &targets, 2);
    let metrics = &request.resource_metrics[0].scope_metrics[0].metrics;
    let points = |name: &str| match metrics.iter().find(|m| m.name == name).unwrap().data.as_ref() {
        Some(metric::Data::Sum(sum)) => {
            assert!(sum.is_monotonic);
            assert_eq!(
                sum.aggregation_temporality,
                AggregationTemporality::Cumulative as i32
            );
            sum.data_points.clone()
        }
        other => panic!("{other:?}"),
    };
    let value = |p: &NumberDataPoint| match p.value {
        Some(number_data_point::Value::AsInt(n)) => n,
        _ => panic!(),
    };
    let calls = points("volley.calls");
    assert_eq!(calls.len(), OutcomeKind::COUNT, "every outcome, 0 too");
    assert_eq!(calls.iter().map(value).sum::<i64>(), 8);
    assert_eq!(
        text_of(&calls[0].attributes, "server.address").as_deref(),
        Some("::1")
    );
    let errors = points("volley.errors");
    let by_code: Vec<(Option<String>, i64)> = (errors.iter())
        .map(|p| (text_of(&p.attributes, "rpc.response.status_code"), value(p)))
        .collect();
    assert_eq!(by_code, [(Some("-32601".into()), 2), (Some("-32000".into()), 1)]);
}

#[test]
fn the_state_is_the_one_the_run_is_in() {
    let mut s = Snapshot {
        warmup: Duration::from_secs(2),
        planned: Some(Duration::from_secs(10)),
        elapsed: Duration::from_secs(1),
        ..Snapshot::default()
    };
    assert_eq!(state(&s), "warmup");
    s.elapsed = Duration::from_secs(5);
    assert_eq!(state(&s), "running");
    s.paused = true;
    assert_eq!(state(&s), "paused");
    s.paused = false;
    s.elapsed = Duration::from_secs(11);
    assert_eq!(state(&s), "ending");
    s.finished = true;
    assert_eq!(state(&s), "finished");
    assert!(STATES
        .iter()
        .all(|st| ["warmup", "running", "paused", "ending", "finished"].contains(st)));
}

#[test]
fn a_server_is_named_by_its_url_without_what_is_secret() {
    assert_eq!(
        server_of("http://u:pw@10.0.0.1/x"),
        Some(("10.0.0.1".into(), Some(80)))
    );
    assert_eq!(
        server_of("wss://node.example:8443/ws"),
        Some(("node.example".into(), Some(8443)))
    );
    assert_eq!(
        server_of("tcp://127.0.0.1:9000"),
        Some(("127.0.0.1".into(), Some(9000)))
    );
    assert_eq!(
        server_of("unix:///tmp/geth.ipc"),
        Some(("/tmp/geth.ipc".into(), None))
    );
    assert_eq!(server_of("builtin"), Some(("127.0.0.1".into(), None)));
    assert_eq!(server_of("stdio: node server.js"), None);
}
