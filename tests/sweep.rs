//! `volley sweep` end to end against `volley serve --capacity`: each step
//! is a run of its own with its files, the steps are exactly those the
//! search asks for given the verdicts seen (whatever this machine's speed
//! made of them), and the CSV, plot and summary agree.

mod common;

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use volley::sweep::{Found, Search};

use common::bin::{serve, temp_dir, text, volley, wait_or_kill};

/// Checks one target's sweep in `summary`: its steps are those the search
/// asks for given their verdicts, its result is the search's, and each
/// step's run files are under `dir`.
fn check_target(sweep: &Value, dir: &std::path::Path, stdout: &str) {
    let steps = sweep["steps"].as_array().unwrap();
    assert!(!steps.is_empty());
    let mut search = Search::new(50.0, 0.25, 800.0);
    let mut undriven = None;
    for step in steps {
        // The rate, and why it was run (the search's next, a retry, a repeat).
        let asked = search.next().expect("the search asked for this step");
        assert_eq!(step["rate"].as_f64(), Some(asked.rate), "{sweep:#}");
        let purpose = serde_json::to_value(asked.purpose).unwrap();
        assert_eq!(step["purpose"], purpose, "{sweep:#}");
        let verdict = step["verdict"].as_str().unwrap();
        assert!(["pass", "fail", "invalid"].contains(&verdict));
        // A failed step says why in words.
        let reason = step["reason"].as_str().unwrap();
        assert!(verdict == "pass" || !reason.is_empty(), "{step:#}");
        // A step volley could not drive (a busy machine) ends the search
        // on a floor, recorded as neither a pass nor a failure.
        match verdict {
            "invalid" => undriven = Some(asked.rate),
            verdict => search.record(asked.rate, verdict == "pass"),
        }
    }
    if sweep["stopped"].is_null() {
        assert_eq!(search.next(), None, "the search had ended");
    }
    let result = &sweep["result"];
    let found: Found = match result["found"].as_str().unwrap() {
        "rate" => Found::Rate {
            rate: result["rate"].as_f64().unwrap(),
            failed_at: result["failed_at"].as_f64().unwrap(),
        },
        "below_start" => Found::BelowStart { start: 50.0 },
        "floor" => Found::Floor {
            held: result["held"].as_f64(),
            undriven_at: result["undriven_at"].as_f64().unwrap(),
        },
        other => Found::AtCeiling {
            rate: result["rate"].as_f64().unwrap_or_else(|| panic!("{other}")),
        },
    };
    let expected = match undriven {
        Some(undriven_at) => Found::Floor {
            held: search.held(),
            undriven_at,
        },
        None => search.found(),
    };
    assert_eq!(found, expected);
    // The rate above the one found failed on the rate alone when its
    // latest step broke nothing else.
    let rate_alone = match found {
        Found::Rate { failed_at, .. } => (steps.iter().rev())
            .find(|s| s["rate"].as_f64() == Some(failed_at))
            .is_some_and(|s| s["rate_kept"] == false && s["broken"] == serde_json::json!(["rate not kept"])),
        _ => false,
    };
    assert!(
        stdout.contains(&volley::sweep::said(found, rate_alone)),
        "{stdout}"
    );
    // No --seed given: the sweep draws one, and every step sends with it.
    let first = common::bin::summary_json(&dir.join("step-01"));
    for (i, step) in steps.iter().enumerate() {
        let own = common::bin::summary_json(&dir.join(format!("step-{:02}", i + 1)));
        assert_eq!(own["meta"]["load"]["rate"], step["rate"]);
        assert_eq!(own["meta"]["target"], sweep["target"]);
        assert_eq!(own["meta"]["seed"], first["meta"]["seed"], "step {}", i + 1);
        assert_eq!(own["meta"]["load"]["threads"], 1, "--threads 1, step {}", i + 1);
    }
    assert!(sweep["knees"]["eth_chainId"].is_array());
}

fn sweep(targets: &[&str], name: &str) -> (std::path::PathBuf, Value, String) {
    let out = temp_dir(name);
    let mut command = volley();
    command.args(["sweep", "--method", "eth_chainId"]);
    for target in targets {
        command.args(["--target", target]);
    }
    let child = command
        .args([
            "--slo",
            "p99<50ms,error_rate<1%",
            "--from",
            "50",
            "--max-rate",
            "800",
        ])
        .args(["--precision", "25%", "--step", "300ms", "--step-warmup", "100ms"])
        .args(["--threads", "1"])
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let output = wait_or_kill(child, Duration::from_secs(180));
    let stdout = text(&output.stdout);
    assert!(
        matches!(output.status.code(), Some(0 | 2)),
        "{stdout}{}",
        text(&output.stderr)
    );
    let summary: Value = serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    (out, summary, stdout)
}

#[test]
fn a_sweep_runs_the_steps_its_search_asks_for_and_writes_them() {
    let (mut server, url) = serve(&["--latency", "1ms", "--capacity", "400"]);
    let (out, summary, stdout) = sweep(&[&url], "sweep");
    server.kill().unwrap();
    let targets = summary["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 1);
    check_target(&targets[0], &out, &stdout);
    let steps = targets[0]["steps"].as_array().unwrap().len();
    let csv = std::fs::read_to_string(out.join("sweep.csv")).unwrap();
    assert_eq!(csv.lines().count(), steps + 1);
    assert!(csv.starts_with(
        "target,step,target_rate,achieved_rate,p50_ms,p90_ms,p99_ms,error_rate,verdict,broken,reason\n"
    ));
    let svg = std::fs::read_to_string(out.join("sweep.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("p99") && svg.trim_end().ends_with("</svg>"));
}

#[test]
fn several_targets_are_swept_in_turn_each_in_its_directory() {
    let (mut a, url_a) = serve(&["--capacity", "200"]);
    let (mut b, url_b) = serve(&["--capacity", "400"]);
    let (out, summary, stdout) = sweep(&[&url_a, &url_b], "sweep-two");
    a.kill().unwrap();
    b.kill().unwrap();
    let targets = summary["targets"].as_array().unwrap();
    let names = volley::scenario::NamedTarget::from_urls(&[url_a.clone(), url_b.clone()]);
    assert_eq!(targets.len(), 2);
    let mut rows = 0;
    for (sweep, named) in targets.iter().zip(&names) {
        check_target(sweep, &out.join(&named.name), &stdout);
        rows += sweep["steps"].as_array().unwrap().len();
    }
    let csv = std::fs::read_to_string(out.join("sweep.csv")).unwrap();
    assert_eq!(csv.lines().count(), rows + 1, "a row per step of each target");
    let svg = std::fs::read_to_string(out.join("sweep.svg")).unwrap();
    for named in &names {
        assert!(
            svg.contains(&format!("{} p99", named.name)),
            "a line per target: {}",
            named.name
        );
    }
    let numbers: Vec<String> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(1).unwrap().to_string())
        .collect();
    assert_eq!(
        numbers.iter().filter(|n| *n == "1").count(),
        2,
        "steps numbered per target: {numbers:?}"
    );
}

/// One sweep of a single rate, 50/s, over one connection to `url`.
fn sweep_at_50(url: &str, extra: &[&str], name: &str) -> (Option<i32>, Value, csv::StringRecord) {
    let out = temp_dir(name);
    let child = volley()
        .args(["sweep", "--target", url, "--method", "eth_chainId"])
        .args([
            "--slo",
            "p99<10s,error_rate<1%",
            "--from",
            "50",
            "--max-rate",
            "50",
        ])
        .args(["--connections", "1", "--step", "300ms", "--step-warmup", "100ms"])
        .args(extra)
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let output = wait_or_kill(child, Duration::from_secs(60));
    let summary: Value = serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let mut rows = csv::Reader::from_path(out.join("sweep.csv")).unwrap();
    let first = rows.records().next().unwrap().unwrap();
    (output.status.code(), summary, first)
}

#[test]
fn a_rate_not_kept_fails_its_step_with_the_reason_unless_the_slo_alone_judges() {
    // One connection to a server that holds each call 50 ms carries 20
    // calls/s: at 50/s every connection is busy and requests leave late,
    // while p99 stays far within 10 s.
    let (mut server, url) = serve(&["--latency", "50ms"]);
    let (code, summary, row) = sweep_at_50(&url, &[], "sweep-late");
    let (slo_code, slo_summary, slo_row) = sweep_at_50(&url, &["--slo-only"], "sweep-slo-only");
    server.kill().unwrap();
    let remedy = ": every connection busy waiting on the server: the server is at its limit at this rate, or more --connections help if it serves more at once";
    let step = &summary["targets"][0]["steps"][0];
    assert_eq!(code, Some(2), "{summary:#}");
    assert_eq!(step["verdict"], "fail", "{summary:#}");
    assert_eq!(step["broken"][0], "rate not kept");
    let reason = step["reason"].as_str().unwrap();
    assert!(
        reason.contains("% of requests sent over 10 ms") && reason.ends_with(remedy),
        "{reason}"
    );
    assert_eq!((&row[8], &row[10]), ("fail", reason), "the CSV row says why");
    // With --slo-only the same step passes, its reason still said; the
    // rate found is run once more before it is reported.
    let steps = slo_summary["targets"][0]["steps"].as_array().unwrap();
    assert_eq!(slo_code, Some(0), "{slo_summary:#}");
    let purposes: Vec<&str> = steps.iter().map(|s| s["purpose"].as_str().unwrap()).collect();
    assert_eq!(purposes, ["search", "repeat"], "{slo_summary:#}");
    for step in steps {
        assert_eq!(
            (step["verdict"].as_str(), step["rate_kept"].as_bool()),
            (Some("pass"), Some(false))
        );
        let reason = step["reason"].as_str().unwrap();
        assert!(
            reason.starts_with("not judged (--slo-only): ") && reason.ends_with(remedy),
            "{reason}"
        );
    }
    assert_eq!((&slo_row[8], &slo_row[9]), ("pass", ""));
    assert!(slo_row[10].ends_with(remedy), "{slo_row:?}");
}

#[test]
fn a_bad_slo_or_range_is_refused_before_anything_is_sent() {
    let refused = |args: &[&str]| {
        let out = volley()
            .args(["sweep", "--target", "http://127.0.0.1:1", "--method", "m"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        text(&out.stderr)
    };
    assert!(refused(&["--slo", "p99<<1ms"]).contains("--slo `p99<<1ms`"));
    assert!(refused(&["--from", "0"]).contains("--from must be a rate above 0"));
    assert!(refused(&["--precision", "150%"]).contains("is not a share between 0 and 100%"));
}
