//! A long run's files: written second by second as the run goes, so a run
//! killed with SIGKILL leaves its seconds so far, readable, and a summary
//! marked unfinished that no command takes for a run; a run that ends
//! writes them whole, and its figures add up exactly.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::bin::{summary_json, temp_dir, text, volley, wait_or_kill, Guard};
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};

/// The data rows of `timeseries.csv` (complete lines only).
fn rows(dir: &Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(dir.join("timeseries.csv")).unwrap_or_default();
    text.lines()
        .skip(1)
        .map(|l| l.split(',').map(str::to_string).collect::<Vec<_>>())
        .collect()
}

/// Each interval of `latency.hlog`: (tag, second, calls).
fn intervals(dir: &Path) -> Vec<(String, u32, u64)> {
    let log = std::fs::read(dir.join("latency.hlog")).unwrap();
    let mut found = Vec::new();
    for entry in IntervalLogIterator::new(&log) {
        let LogEntry::Interval(interval) = entry.unwrap() else {
            continue;
        };
        use base64::Engine;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(interval.encoded_histogram())
            .unwrap();
        let histogram: hdrhistogram::Histogram<u64> = hdrhistogram::serialization::Deserializer::new()
            .deserialize(&mut &bytes[..])
            .unwrap();
        let second = interval.start_timestamp().as_secs() as u32;
        found.push((
            interval.tag().unwrap().as_str().to_string(),
            second,
            histogram.len(),
        ));
    }
    found
}

/// `volley run scenarios/demo.toml` with `args` into `out`, quiet, its
/// output dropped: a run to be killed.
fn start_demo(args: &[&str], out: &Path) -> std::process::Child {
    volley()
        .args(["run", "scenarios/demo.toml"])
        .args(args)
        .args(["--no-tui", "-q", "--out"])
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// `volley ARGS` to its end (bounded), its output kept.
fn volley_ran<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> std::process::Output {
    let child = volley()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_or_kill(child, Duration::from_secs(60))
}

#[test]
fn a_run_killed_with_sigkill_leaves_its_seconds_and_a_summary_marked_unfinished() {
    let out = temp_dir("killed");
    let run = start_demo(&["--rate", "400", "-d", "120s", "--warmup", "0s"], &out);
    let mut guard = Guard(Some(run));
    // Waiting for what the run writes, bounded: no figure is timed.
    let start = Instant::now();
    while rows(&out).len() < 3 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no seconds written as the run goes"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut run = guard.0.take().unwrap();
    run.kill().unwrap(); // SIGKILL: nothing of volley's runs after it
    run.wait().unwrap();

    let seconds = rows(&out);
    let columns = std::fs::read_to_string(out.join("timeseries.csv")).unwrap();
    let width = columns.lines().next().unwrap().split(',').count();
    let whole: Vec<&Vec<String>> = seconds.iter().filter(|r| r.len() == width).collect();
    assert!(whole.len() >= 3, "{columns}");
    for (i, row) in whole.iter().enumerate() {
        assert_eq!(row[0], i.to_string(), "seconds in order: {columns}");
        assert!(
            row[1].parse::<u64>().unwrap() > 0,
            "calls in each second: {columns}"
        );
        assert_eq!(row.last().unwrap(), "true", "a killed run's seconds are partial");
    }
    // The histograms of each second written: every timed call of it among
    // TOTAL's and its method's (the demo's `log` notifications are counted
    // in the rows, but nothing answers them to time).
    let log = intervals(&out);
    for (i, row) in whole.iter().enumerate() {
        let second = |tag: &str| {
            log.iter()
                .find(|(t, s, _)| t == tag && *s == i as u32)
                .map(|t| t.2)
        };
        let methods: u64 = ["eth_blockNumber", "eth_getBalance", "add", "echo", "eth_chainId"]
            .iter()
            .filter_map(|m| second(m))
            .sum();
        let calls: u64 = row[1].parse().unwrap();
        assert_eq!(second("TOTAL"), Some(methods), "second {i}: {log:?}");
        assert!(
            methods > 0 && methods <= calls,
            "second {i}: {methods} of {calls}"
        );
        assert_eq!(second("log"), None, "a notification has no latency");
    }
    let samples = std::fs::read_to_string(out.join("samples.csv")).unwrap();
    assert!(samples.starts_with("tick,method,length_s,calls,errors,p50_ms,p99_ms\n"));
    assert!(samples.lines().count() > 1, "{samples}");

    let summary = summary_json(&out);
    assert_eq!(summary["finished"], false, "{summary}");
    assert_eq!(summary["summary"]["partial"], true);
    assert!(summary["summary"]["total"]["calls"].as_u64().unwrap() > 0);
    assert_eq!(summary["meta"]["scenario"], "demo");
    // No command takes it for a run.
    for command in [vec!["report"], vec!["compare", "--max-regression", "p50=50%"]] {
        let mut args = command.clone();
        let dir = out.to_str().unwrap();
        args.push(dir);
        if args[0] == "compare" {
            args.push(dir);
        }
        let output = volley_ran(&args);
        let said = text(&output.stderr);
        assert_ne!(output.status.code(), Some(0), "{args:?}: {said}");
        assert!(said.contains("the run did not finish"), "{args:?}: {said}");
    }
}

#[test]
fn a_finished_run_writes_its_files_whole_and_its_seconds_add_up_to_its_figures() {
    let out = temp_dir("finished");
    let run = [
        "run",
        "scenarios/demo.toml",
        "--rate",
        "300",
        "-d",
        "3s",
        "--warmup",
        "0s",
        "--no-tui",
        "-q",
    ];
    let mut args: Vec<&std::ffi::OsStr> = run.iter().map(std::ffi::OsStr::new).collect();
    args.extend([std::ffi::OsStr::new("--out"), out.as_os_str()]);
    let output = volley_ran(&args);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let summary = summary_json(&out);
    assert!(
        summary.get("finished").is_none(),
        "the finished summary has no mark"
    );
    let total = summary["summary"]["total"]["calls"].as_u64().unwrap();
    let seconds = rows(&out);
    assert_eq!(seconds.len(), 3);
    assert!(seconds.iter().all(|r| r.last().unwrap() == "false"));
    let by_rows: u64 = seconds.iter().map(|r| r[1].parse::<u64>().unwrap()).sum();
    assert_eq!(by_rows, total, "the rows count every call");
    let in_json: u64 = (summary["summary"]["timeseries"].as_array().unwrap().iter())
        .map(|r| r["calls"].as_u64().unwrap())
        .sum();
    assert_eq!(in_json, total);
    let with_latency: u64 = intervals(&out)
        .iter()
        .filter(|(tag, ..)| tag == "TOTAL")
        .map(|(.., calls)| calls)
        .sum();
    // Every call but the notifications (`log`), which nothing answers.
    let methods = summary["summary"]["methods"].as_array().unwrap();
    let notified = methods.iter().find(|m| m["method"] == "log").unwrap()["calls"]
        .as_u64()
        .unwrap();
    assert!(notified > 0);
    assert_eq!(summary["summary"]["total"]["latency"]["timed"], total - notified);
    assert_eq!(
        with_latency,
        total - notified,
        "every answered call's latency, once"
    );
    let samples: u64 = std::fs::read_to_string(out.join("samples.csv"))
        .unwrap()
        .lines()
        .skip(1)
        .filter(|l| l.split(',').nth(1) == Some("TOTAL"))
        .map(|l| l.split(',').nth(3).unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(samples, total);
    // And it reads back as a run.
    let report = volley_ran(&[std::ffi::OsStr::new("report"), out.as_os_str()]);
    assert_eq!(report.status.code(), Some(0), "{}", text(&report.stderr));
}

/// Kills `run` once `ready` holds (bounded), as SIGKILL would: nothing of
/// volley's runs after it.
fn kill_when(run: std::process::Child, ready: impl Fn() -> bool) {
    let mut guard = Guard(Some(run));
    let start = Instant::now();
    while !ready() {
        assert!(start.elapsed() < Duration::from_secs(60), "never ready");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut run = guard.0.take().unwrap();
    run.kill().unwrap();
    run.wait().unwrap();
}

fn written(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.len() > 0)
}

#[test]
fn a_run_killed_before_its_first_second_leaves_no_empty_summary() {
    // A long warmup: no measured second closes before the kill.
    let out = temp_dir("killed-early");
    let run = start_demo(&["--rate", "100", "-d", "10s", "--warmup", "60s"], &out);
    kill_when(run, || written(&out.join("summary.json")));
    let summary = summary_json(&out);
    assert_eq!(summary["finished"], false, "{summary}");
    assert!(rows(&out).is_empty(), "no second measured yet");

    // Several targets: the comparison's own summary.json says so too.
    let out = temp_dir("killed-comparison");
    let targets = ["--target", "builtin", "--target", "builtin"];
    let run = start_demo(
        &[&targets[..], &["--rate", "100", "-d", "60s", "--warmup", "0s"]].concat(),
        &out,
    );
    let first = out.clone();
    kill_when(run, || {
        std::fs::read_dir(&first).is_ok_and(|dirs| dirs.flatten().any(|d| rows(&d.path()).len() >= 2))
    });
    let summary = summary_json(&out);
    assert_eq!(summary["finished"], false, "{summary}");
    let output = volley_ran(&[std::ffi::OsStr::new("report"), out.as_os_str()]);
    assert!(
        text(&output.stderr).contains("did not finish"),
        "{}",
        text(&output.stderr)
    );
}
