//! Each figure a user reads, checked against a second source: `summary.csv`
//! against `summary.json` and the server's own counts, the mix's shares
//! against the scenario's weights, the calls in flight against the closed
//! model's stages and its `+`/`-` steps.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;
use volley::report::{self, RunReport};
use volley::serve::{self, ServeConfig, ServerHandle, ServerStats};
use volley::stats::Snapshot;

fn server(config: ServeConfig) -> ServerHandle {
    serve::spawn(ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        ..config
    })
    .unwrap()
}

fn written(report: &RunReport) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("volley-figures-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    report::write_files(&dir, report).unwrap();
    dir
}

/// `summary.csv` as rows of column name to text.
fn csv_rows(path: &std::path::Path) -> Vec<BTreeMap<String, String>> {
    let mut reader = csv::Reader::from_path(path).unwrap();
    let header: Vec<String> = reader.headers().unwrap().iter().map(str::to_string).collect();
    reader
        .records()
        .map(|r| {
            header
                .iter()
                .cloned()
                .zip(r.unwrap().iter().map(str::to_string))
                .collect()
        })
        .collect()
}

fn number(row: &BTreeMap<String, String>, column: &str) -> f64 {
    row[column]
        .parse()
        .unwrap_or_else(|_| panic!("{column}: {:?}", row[column]))
}

/// The figure `summary.json` holds for a CSV column.
fn json_figure(method: &Value, column: &str) -> f64 {
    let latency = |block: &str, key: &str| method[block][key].as_f64().unwrap();
    match column {
        "calls" | "ok" | "errors" | "error_rate" | "calls_per_s" | "answer_bytes_mean"
        | "answer_bytes_max" => method[column].as_f64().unwrap(),
        "service_p50_ms" => latency("service", "p50_ms"),
        "service_p99_ms" => latency("service", "p99_ms"),
        c if c.ends_with("_ms") => latency("latency", c),
        outcome => method["outcomes"][outcome].as_f64().unwrap(),
    }
}

#[test]
fn summary_csv_holds_what_summary_json_and_the_server_counted() {
    let server = server(ServeConfig {
        error_rate: 0.2,
        seed: 7,
        ..ServeConfig::default()
    });
    let text = format!(
        "target = \"{}\"\nseed = 3\n[load]\nconcurrency = 4\nrequests = 3000\n\
         [[calls]]\nmethod = \"eth_blockNumber\"\nweight = 3\n\
         [[calls]]\nmethod = \"eth_chainId\"\nweight = 1\n\
         [[calls]]\nmethod = \"add\"\nparams = [1, 2]\nweight = 1\n",
        server.url()
    );
    let report = common::run(&common::scenario(&text));
    let dir = written(&report);
    let rows = csv_rows(&dir.join("summary.csv"));
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    let methods = json["summary"]["methods"].as_array().unwrap();
    assert_eq!(rows.len(), methods.len() + 1, "a row per method and TOTAL");
    assert_eq!(methods.len(), 3);
    for (row, method) in rows.iter().zip(methods.iter().chain([&json["summary"]["total"]])) {
        assert_eq!(row["method"], method["method"].as_str().unwrap());
        assert_eq!(row["partial"], "false");
        for column in row
            .keys()
            .filter(|c| !["method", "partial"].contains(&c.as_str()))
        {
            let (csv, json) = (number(row, column), json_figure(method, column));
            // The CSV rounds each figure to the decimals it shows; counts are exact.
            let shown = match column.as_str() {
                "error_rate" => 5e-7,
                "calls_per_s" => 5e-3,
                "answer_bytes_mean" => 5e-2,
                c if c.ends_with("_ms") => 5e-4,
                _ => 0.0,
            };
            assert!(
                (csv - json).abs() <= shown * 1.0001,
                "{} {column}: csv {csv}, json {json}",
                row["method"]
            );
        }
    }
    let total = rows.last().unwrap();
    for column in ["calls", "ok", "errors", "rpc_error", "io", "timeout"] {
        let sum: f64 = rows[..rows.len() - 1].iter().map(|r| number(r, column)).sum();
        assert_eq!(
            number(total, column),
            sum,
            "TOTAL {column} is the sum of the rows"
        );
    }
    // The server's own counts: every call it saw, every error it made.
    let stats = &server.stats;
    assert_eq!(number(total, "calls"), 3000.0);
    assert_eq!(number(total, "calls") as u64, ServerStats::get(&stats.calls));
    assert_eq!(
        number(total, "rpc_error") as u64,
        ServerStats::get(&stats.injected_errors)
    );
    assert_eq!(
        number(total, "ok") as u64,
        ServerStats::get(&stats.calls) - ServerStats::get(&stats.injected_errors)
    );
}

#[test]
fn the_mix_follows_the_scenarios_weights() {
    let server = server(ServeConfig::default());
    let weights = [
        ("eth_blockNumber", 70u32),
        ("eth_chainId", 20),
        ("echo", 7),
        ("add", 3),
    ];
    let mut text = format!(
        "target = \"{}\"\nseed = 11\n[load]\nconcurrency = 8\nrequests = 20000\n",
        server.url()
    );
    for (method, weight) in weights {
        text += &format!("[[calls]]\nmethod = \"{method}\"\nparams = [1, 2]\nweight = {weight}\n");
    }
    let report = common::run(&common::scenario(&text));
    let calls: BTreeMap<&str, u64> = report
        .summary
        .methods
        .iter()
        .map(|m| (m.method.as_str(), m.calls))
        .collect();
    assert_eq!(calls.values().sum::<u64>(), 20000);
    for (method, weight) in weights {
        let share = calls[method] as f64 / 20000.0;
        let expected = weight as f64 / 100.0;
        // Five standard deviations of a 20,000-draw share at most.
        assert!(
            (share - expected).abs() < 0.01,
            "{method}: {share} for weight {weight}%"
        );
    }
}

/// The highest number of calls in flight seen in the snapshots taken
/// while `keep` holds.
fn most_in_flight(snapshots: &[Snapshot], keep: impl Fn(&Snapshot) -> bool) -> u64 {
    snapshots
        .iter()
        .filter(|s| keep(s))
        .map(|s| s.in_flight)
        .max()
        .unwrap_or(0)
}

#[test]
fn the_closed_model_keeps_each_stages_calls_in_flight() {
    // 50 ms an answer: every caller is waiting at almost any moment.
    let server = server(ServeConfig {
        latency: "50ms".parse().unwrap(),
        ..ServeConfig::default()
    });
    // Stages ramp to their targets: hold 2, ramp, hold 6.
    let text = format!(
        "target = \"{}\"\n[load]\nstages = [{{ duration = \"500ms\", concurrency = 2 }}, {{ duration = \"1500ms\", concurrency = 2 }}, {{ duration = \"500ms\", concurrency = 6 }}, {{ duration = \"1500ms\", concurrency = 6 }}]\n[[calls]]\nmethod = \"eth_chainId\"\n",
        server.url()
    );
    let (report, snapshots) = common::run_steered(&text, |_| {});
    assert_eq!(report.summary.stages.len(), 4);
    let two = most_in_flight(&snapshots, |s| s.stage == Some(1));
    let six = most_in_flight(&snapshots, |s| s.stage == Some(3) && !s.finished);
    assert_eq!((two, six), (2, 6), "the most in flight while each target holds");
}

#[test]
fn plus_and_minus_steer_the_closed_models_calls_in_flight() {
    let server = server(ServeConfig {
        latency: "20ms".parse().unwrap(),
        ..ServeConfig::default()
    });
    let text = format!(
        "target = \"{}\"\n[load]\nconcurrency = 5\nduration = \"4s\"\n[[calls]]\nmethod = \"eth_chainId\"\n",
        server.url()
    );
    let (report, snapshots) = common::run_steered(&text, |control| {
        common::wait_for_the_start(control);
        std::thread::sleep(Duration::from_millis(500));
        control.step(false);
        control.step(false);
        control.step(false);
        // Sequencing, not timing: calls sent before the steps end within
        // 20 ms; the snapshots are judged from the events' own times.
        std::thread::sleep(Duration::from_millis(1500));
        control.step(true);
        control.step(true);
    });
    let events = &report.summary.events;
    let steps: Vec<&str> = events.iter().map(|e| e.what.as_str()).collect();
    assert_eq!(
        steps,
        [
            "target set to 4 calls in flight",
            "target set to 3 calls in flight",
            "target set to 2 calls in flight",
            "target set to 3 calls in flight",
            "target set to 4 calls in flight",
        ]
    );
    let (lowered, raised) = (events[2].at_s, events[4].at_s);
    let low = most_in_flight(&snapshots, |s| {
        let at = s.elapsed.as_secs_f64();
        at > lowered + 0.3 && at < events[3].at_s
    });
    let high = most_in_flight(&snapshots, |s| {
        s.elapsed.as_secs_f64() > raised + 0.3 && !s.finished
    });
    assert_eq!((low, high), (2, 4), "the most in flight after each step");
}

/// An open model whose stages do not last whole seconds: each call counts
/// in the stage of its intended send time, each stage's rate over its own
/// span. Request i is due at i / 200 s, so the counts are exact; only the
/// very end (calls unsent or in flight when the run stops) is uncertain.
fn staged_at_200(stages: &[&str]) -> RunReport {
    let server = server(ServeConfig::default());
    let stages: Vec<String> = stages
        .iter()
        .map(|d| format!("{{ duration = \"{d}\", rate = 200 }}"))
        .collect();
    let text = format!(
        "target = \"{}\"\n[load]\nrate = 200\nconnections = 16\nstages = [{}]\n[[calls]]\nmethod = \"eth_chainId\"\n",
        server.url(),
        stages.join(", ")
    );
    common::run(&common::scenario(&text))
}

fn stage_calls(report: &RunReport) -> Vec<u64> {
    report.summary.stages.iter().map(|s| s.total.calls).collect()
}

/// The last stage's calls, with those the end of the run left unsent or
/// in flight: what was due in it.
fn last_stage_due(report: &RunReport) -> u64 {
    let summary = &report.summary;
    let unsent = summary.schedule.as_ref().unwrap().unsent;
    summary.stages.last().unwrap().total.calls + unsent + summary.in_flight_at_end
}

#[test]
fn stages_of_a_second_and_a_half_count_their_own_calls() {
    let report = staged_at_200(&["1500ms", "1500ms"]);
    let calls = stage_calls(&report);
    assert_eq!(calls[0], 300, "{calls:?}");
    assert_eq!(last_stage_due(&report), 300, "{calls:?}");
    let first = &report.summary.stages[0].total;
    assert!((first.rps - 200.0).abs() < 1e-9, "{}", first.rps);
}

#[test]
fn stages_shorter_than_a_second_count_their_own_calls() {
    let report = staged_at_200(&["500ms", "500ms", "500ms"]);
    let calls = stage_calls(&report);
    assert_eq!(calls[..2], [100, 100], "{calls:?}");
    assert_eq!(last_stage_due(&report), 100, "{calls:?}");
    assert_eq!(
        calls.iter().sum::<u64>(),
        report.summary.total.calls,
        "every call in a stage"
    );
}

/// Two entries of one method with names are two rows (each with its own
/// threshold), while each request still carries the method: the built-in
/// server answers every one.
#[test]
fn named_calls_of_one_method_are_rows_of_their_own() {
    let server = server(ServeConfig::default());
    let text = format!(
        "target = \"{}\"\nseed = 3\n[thresholds]\nchecks = [\"chain-a.p99 < 60s\", \"chain-b.calls > 0\"]\n\
         [load]\nconcurrency = 4\nrequests = 2000\n\
         [[calls]]\nmethod = \"eth_chainId\"\nname = \"chain-a\"\n\
         [[calls]]\nmethod = \"eth_chainId\"\nname = \"chain-b\"\nweight = 3\n\
         [[calls]]\nmethod = \"eth_blockNumber\"\n",
        server.url()
    );
    let scenario = common::scenario(&text);
    scenario.check_thresholds().expect("thresholds name the rows");
    let report = common::run(&scenario);
    let rows: Vec<(&str, u64, u64)> = (report.summary.methods.iter())
        .map(|m| (m.method.as_str(), m.calls, m.ok))
        .collect();
    assert_eq!(
        rows.iter().map(|r| r.0).collect::<Vec<_>>(),
        ["chain-a", "chain-b", "eth_blockNumber"]
    );
    assert!(
        rows.iter().all(|(_, calls, ok)| calls == ok && *calls > 0),
        "{rows:?}"
    );
    assert_eq!(rows.iter().map(|r| r.1).sum::<u64>(), 2000);
    assert_eq!(ServerStats::get(&server.stats.calls), 2000);
    let judged: Vec<(&str, bool)> = (report.thresholds.iter())
        .map(|t| (t.expression.as_str(), t.passed))
        .collect();
    assert_eq!(judged, [("chain-a.p99 < 60s", true), ("chain-b.calls > 0", true)]);
    // The method is no longer a row: a threshold on it is refused.
    let on_method = text.replace("chain-a.p99", "eth_chainId.p99");
    let refused = volley::scenario::Scenario::parse(&on_method, "test.toml", "test", &|_| None)
        .expect_err("a threshold on a method that is no row")
        .to_string();
    assert!(
        refused.contains("no method `eth_chainId` in this run"),
        "{refused}"
    );
}
