//! `--otlp`: the real binary against a receiver of its own, on loopback,
//! that reads each push with the OpenTelemetry project's own definitions
//! (the `opentelemetry-proto` crate), not volley's types; and against a
//! collector that is not there.

mod common;

use std::convert::Infallible;
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use common::bin::{serve, summary_json, temp_dir, text, volley, wait_or_kill, Guard};
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{any_value, KeyValue};
use opentelemetry_proto::tonic::metrics::v1::{metric, number_data_point, Metric};
use prost::Message;

const SECRET: &str = "s3cret-otlp-token";

/// One request the receiver took: its path, content type, authorization
/// header and body.
struct Push {
    path: String,
    content_type: String,
    authorization: String,
    body: Bytes,
}

/// An OTLP/HTTP receiver on 127.0.0.1:0 that keeps every push and answers
/// each with an empty `ExportMetricsServiceResponse`.
fn receiver() -> (String, Arc<Mutex<Vec<Push>>>) {
    let pushes = Arc::new(Mutex::new(Vec::new()));
    let kept = pushes.clone();
    let addr = common::serve_on_a_thread(move |listener| async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let kept = kept.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
                    let kept = kept.clone();
                    async move {
                        let header = |name: &str| {
                            let value = request.headers().get(name);
                            value.map_or(String::new(), |v| v.to_str().unwrap().to_string())
                        };
                        let (content_type, authorization) = (header("content-type"), header("authorization"));
                        let path = request.uri().path().to_string();
                        let body = request.into_body().collect().await.unwrap().to_bytes();
                        kept.lock().unwrap().push(Push {
                            path,
                            content_type,
                            authorization,
                            body,
                        });
                        let answer = ExportMetricsServiceResponse::default().encode_to_vec();
                        let mut response = Response::new(Full::new(Bytes::from(answer)));
                        let protobuf = hyper::header::HeaderValue::from_static("application/x-protobuf");
                        response.headers_mut().insert("content-type", protobuf);
                        Ok::<_, Infallible>(response)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (format!("http://{addr}"), pushes)
}

/// `volley run` with `args` and the environment `env`, under the hang guard.
fn run(args: &[&str], env: &[(&str, &str)], out: &std::path::Path) -> Output {
    let mut command: Command = volley();
    command
        .arg("run")
        .args(args)
        .arg("--out")
        .arg(out)
        .arg("--no-tui");
    for name in [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_HEADERS",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
    ] {
        command.env_remove(name);
    }
    command.envs(env.iter().copied());
    let child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_or_kill(child, Duration::from_secs(60))
}

fn attribute(attributes: &[KeyValue], key: &str) -> Option<String> {
    let value = attributes.iter().find(|kv| kv.key == key)?.value.as_ref()?;
    match value.value.as_ref()? {
        any_value::Value::StringValue(text) => Some(text.clone()),
        any_value::Value::IntValue(n) => Some(n.to_string()),
        other => panic!("{key}: {other:?}"),
    }
}

fn metrics(request: &ExportMetricsServiceRequest) -> &[Metric] {
    &request.resource_metrics[0].scope_metrics[0].metrics
}

/// Whether the push says the run has finished (`volley.run.state`).
fn says_finished(request: &ExportMetricsServiceRequest) -> bool {
    let state = metrics(request)
        .iter()
        .find(|m| m.name == "volley.run.state")
        .unwrap();
    let Some(metric::Data::Gauge(gauge)) = &state.data else {
        panic!("volley.run.state is a gauge")
    };
    gauge.data_points.iter().any(|p| {
        attribute(&p.attributes, "volley.run.state").as_deref() == Some("finished")
            && p.value == Some(number_data_point::Value::AsInt(1))
    })
}

/// The calls `rpc.client.call.duration` counts, over every point; each
/// point checked for what the conventions ask.
fn calls_counted(request: &ExportMetricsServiceRequest, server_port: &str) -> u64 {
    let metric = (metrics(request).iter())
        .find(|m| m.name == "rpc.client.call.duration")
        .expect("the call histogram is in every push");
    assert_eq!(metric.unit, "s");
    let Some(metric::Data::Histogram(histogram)) = &metric.data else {
        panic!("rpc.client.call.duration is a histogram: {:?}", metric.data)
    };
    for point in &histogram.data_points {
        let attributes = &point.attributes;
        assert_eq!(
            attribute(attributes, "rpc.system.name").as_deref(),
            Some("jsonrpc")
        );
        assert_eq!(
            attribute(attributes, "rpc.method").as_deref(),
            Some("eth_blockNumber")
        );
        assert_eq!(
            attribute(attributes, "jsonrpc.protocol.version").as_deref(),
            Some("2.0")
        );
        assert_eq!(
            attribute(attributes, "server.address").as_deref(),
            Some("127.0.0.1")
        );
        assert_eq!(attribute(attributes, "server.port").as_deref(), Some(server_port));
        let outcome = attribute(attributes, "volley.outcome").unwrap();
        let code = attribute(attributes, "rpc.response.status_code");
        match outcome.as_str() {
            "rpc_error" => assert_eq!(code.as_deref(), Some("-32000"), "the error object's code"),
            _ => assert_eq!(code, None, "{outcome} is no error answer"),
        }
        assert_eq!(point.bucket_counts.iter().sum::<u64>(), point.count);
        assert_eq!(point.explicit_bounds.len(), 41, "the bounds of /metrics");
    }
    histogram.data_points.iter().map(|p| p.count).sum()
}

/// A run against `volley serve` (a fifth of its answers errors) that
/// pushes to a receiver of its own; checks every push, and returns the
/// calls each counted with whether it said the run had finished, and
/// summary.json's calls.
fn pushed(run_args: &[&str], interval: Option<&str>, name: &str) -> (Vec<(u64, bool)>, u64) {
    let (collector, pushes) = receiver();
    let (server, url) = serve(&["--error-rate", "0.2", "--seed", "7"]);
    let _server = Guard(Some(server));
    let port = url.rsplit(':').next().unwrap().trim_end_matches('/').to_string();
    let out = temp_dir(name);
    let header = format!("authorization=Bearer%20{SECRET}");
    let mut env = vec![("OTEL_EXPORTER_OTLP_HEADERS", header.as_str())];
    env.extend(interval.map(|ms| ("OTEL_METRIC_EXPORT_INTERVAL", ms)));
    let args = [
        "--target",
        &url,
        "--method",
        "eth_blockNumber",
        "-c",
        "4",
        "--otlp",
        &collector,
    ];
    let output = run(&[&args[..], run_args].concat(), &env, &out);
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(
        !stderr.contains("warning"),
        "the collector took every push: {stderr}"
    );
    let summary = summary_json(&out);
    let calls = summary["summary"]["total"]["calls"].as_u64().unwrap();
    assert!(
        summary["summary"]["total"]["errors"].as_u64().unwrap() > 0,
        "errors are in the run"
    );

    let pushes = pushes.lock().unwrap();
    let mut counted = Vec::new();
    for push in pushes.iter() {
        assert_eq!(push.path, "/v1/metrics");
        assert_eq!(push.content_type, "application/x-protobuf");
        assert_eq!(
            push.authorization,
            format!("Bearer {SECRET}"),
            "the header, whole"
        );
        let request = ExportMetricsServiceRequest::decode(push.body.clone()).expect("every push decodes");
        let resource = request.resource_metrics[0].resource.as_ref().unwrap();
        assert_eq!(
            attribute(&resource.attributes, "service.name").as_deref(),
            Some("volley")
        );
        counted.push((calls_counted(&request, &port), says_finished(&request)));
    }
    // The header's value reaches the collector and nothing else.
    let mut shown = format!("{stdout}{stderr}");
    for file in std::fs::read_dir(&out).unwrap() {
        shown.push_str(&String::from_utf8_lossy(
            &std::fs::read(file.unwrap().path()).unwrap(),
        ));
    }
    assert!(!shown.contains(SECRET), "the header's value is shown somewhere");
    (counted, calls)
}

#[test]
fn the_push_at_the_end_counts_exactly_the_calls_of_summary_json() {
    // Far shorter than the 5 s between pushes: the end's push alone.
    let (counted, calls) = pushed(&["-n", "3000"], None, "otlp-end");
    assert_eq!(calls, 3000);
    let finished: Vec<u64> = counted.iter().filter(|(_, f)| *f).map(|(n, _)| *n).collect();
    assert!(!finished.is_empty(), "a push once the run finished: {counted:?}");
    assert!(
        finished.iter().all(|n| *n == calls),
        "{finished:?} against {calls} calls"
    );
}

#[test]
fn pushes_go_while_the_run_does_each_decoding_and_none_counting_more_than_the_run() {
    let (counted, calls) = pushed(&["-d", "1500ms"], Some("100"), "otlp-while");
    let running = counted.iter().filter(|(_, finished)| !finished).count();
    assert!(running >= 2, "pushes while the run went: {counted:?}");
    assert!(
        counted.iter().all(|(n, _)| *n <= calls),
        "{counted:?} against {calls}"
    );
    let finished: Vec<u64> = counted.iter().filter(|(_, f)| *f).map(|(n, _)| *n).collect();
    assert!(
        finished.iter().all(|n| *n == calls),
        "{finished:?} against {calls} calls"
    );
    assert!(!finished.is_empty());
}

/// `run` twice, the same but for `--otlp URL` (a closed port); returns both.
fn without_and_with(otlp: &str, name: &str) -> (Output, Output) {
    let args = [
        "--target",
        "builtin",
        "--method",
        "eth_blockNumber",
        "-d",
        "1s",
        "-c",
        "2",
    ];
    let header = format!("authorization=Bearer%20{SECRET}");
    let env = [
        ("OTEL_EXPORTER_OTLP_HEADERS", header.as_str()),
        ("OTEL_METRIC_EXPORT_INTERVAL", "50"),
    ];
    let without = run(&args, &env, &temp_dir(&format!("{name}-without")));
    let out = temp_dir(&format!("{name}-with"));
    let with = run(&[&args[..], &["--otlp", otlp]].concat(), &env, &out);
    assert!(summary_json(&out)["summary"]["total"]["calls"].as_u64().unwrap() > 0);
    (without, with)
}

#[test]
fn a_collector_that_is_down_is_said_once_and_the_run_ends_as_without_it() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let collector = format!("http://127.0.0.1:{port}");
    let (without, with) = without_and_with(&collector, "otlp-down");
    assert_eq!(
        with.status.code(),
        without.status.code(),
        "the exit code is the run's"
    );
    assert!(with.status.success(), "{}", text(&with.stderr));
    let stderr = text(&with.stderr);
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains("warning")).collect();
    let before = text(&without.stderr)
        .lines()
        .filter(|l| l.contains("warning"))
        .count();
    assert_eq!(
        warnings.len(),
        before + 1,
        "one warning more, however many pushes failed: {stderr}"
    );
    let said: Vec<&&str> = warnings.iter().filter(|l| l.contains("OTLP")).collect();
    assert_eq!(said.len(), 1, "{stderr}");
    assert!(
        said[0].contains(&format!("127.0.0.1:{port}/v1/metrics")),
        "{}",
        said[0]
    );
    assert!(said[0].contains("cannot be reached"), "{}", said[0]);
    assert!(!stderr.contains(SECRET) && !text(&with.stdout).contains(SECRET));
}

#[test]
fn a_collector_that_never_answers_holds_up_neither_the_run_nor_its_end() {
    // Connections are taken into the backlog and never answered.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let collector = format!("http://{}", silent.local_addr().unwrap());
    let args = [
        "--target",
        "builtin",
        "--method",
        "eth_blockNumber",
        "-d",
        "1s",
        "-c",
        "2",
    ];
    let env = [
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "200"),
        ("OTEL_METRIC_EXPORT_INTERVAL", "50"),
    ];
    let out = temp_dir("otlp-silent");
    let output = run(&[&args[..], &["--otlp", &collector]].concat(), &env, &out);
    let stderr = text(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let said: Vec<&str> = stderr.lines().filter(|l| l.contains("OTLP")).collect();
    assert_eq!(said.len(), 1, "{stderr}");
    assert!(said[0].contains("did not answer within 200ms"), "{}", said[0]);
    assert!(summary_json(&out)["summary"]["total"]["calls"].as_u64().unwrap() > 0);
    drop(silent);
}

#[test]
fn a_bad_otlp_url_is_refused_naming_the_flag_or_the_key_before_anything_is_sent() {
    let out = temp_dir("otlp-bad-flag");
    let output = run(
        &[
            "--target",
            "builtin",
            "--method",
            "eth_blockNumber",
            "--otlp",
            "127.0.0.1:4318",
        ],
        &[],
        &out,
    );
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("--otlp: `127.0.0.1:4318` has no scheme"),
        "{stderr}"
    );
    assert!(!out.exists(), "nothing was run");

    let dir = temp_dir("otlp-bad-key");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("s.toml");
    std::fs::write(
        &file,
        "target = \"builtin\"\notlp = \"grpc://127.0.0.1:4317\"\n\n[[calls]]\nmethod = \"eth_chainId\"\n",
    )
    .unwrap();
    let output = run(&[file.to_str().unwrap(), "-n", "10"], &[], &dir.join("out"));
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("s.toml:2:"), "the file's line: {stderr}");
    assert!(
        stderr.contains("otlp") && stderr.contains("is not an http"),
        "{stderr}"
    );

    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
        ("OTEL_EXPORTER_OTLP_HEADERS", "Bearer-s3cret"),
    ];
    let output = run(
        &["--target", "builtin", "--method", "eth_blockNumber"],
        &env,
        &dir.join("out2"),
    );
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("$OTEL_EXPORTER_OTLP_HEADERS: entry 1"),
        "{stderr}"
    );
    assert!(!stderr.contains("s3cret"), "{stderr}");
}
