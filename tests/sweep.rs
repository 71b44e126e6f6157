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

#[test]
fn a_sweep_runs_the_steps_its_search_asks_for_and_writes_them() {
    let (mut server, url) = serve(&["--latency", "1ms", "--capacity", "400"]);
    let out = temp_dir("sweep");
    let child = volley()
        .args(["sweep", "--target", &url, "--method", "eth_chainId"])
        .args([
            "--slo",
            "p99<50ms,error_rate<1%",
            "--from",
            "50",
            "--max-rate",
            "800",
        ])
        .args([
            "--precision",
            "25%",
            "--step",
            "300ms",
            "--step-warmup",
            "100ms",
            "--seed",
            "3",
        ])
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let output = wait_or_kill(child, Duration::from_secs(120));
    server.kill().unwrap();
    let stdout = text(&output.stdout);
    assert!(
        matches!(output.status.code(), Some(0 | 2)),
        "{stdout}{}",
        text(&output.stderr)
    );

    let summary: Value = serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let steps = summary["steps"].as_array().unwrap();
    assert!(!steps.is_empty());
    // The search, replayed on the verdicts the steps got, asks for the same
    // rates in the same order and finds the same.
    let mut search = Search::new(50.0, 0.25, 800.0);
    for step in steps {
        assert_eq!(step["rate"].as_f64(), search.next(), "{summary:#}");
        let verdict = step["verdict"].as_str().unwrap();
        assert!(["pass", "fail", "invalid"].contains(&verdict));
        search.record(step["rate"].as_f64().unwrap(), verdict == "pass");
    }
    if summary["stopped"].is_null() {
        assert_eq!(search.next(), None, "the search had ended");
    }
    let found: Found = match summary["result"]["found"].as_str().unwrap() {
        "rate" => Found::Rate {
            rate: summary["result"]["rate"].as_f64().unwrap(),
            failed_at: summary["result"]["failed_at"].as_f64().unwrap(),
        },
        "below_start" => Found::BelowStart { start: 50.0 },
        other => Found::AtCeiling {
            rate: summary["result"]["rate"]
                .as_f64()
                .unwrap_or_else(|| panic!("{other}")),
        },
    };
    assert_eq!(found, search.found());
    assert!(stdout.contains(&volley::sweep::said(found)), "{stdout}");

    // A directory per step with its run's own files, a CSV row per step.
    for i in 1..=steps.len() {
        let step = common::bin::summary_json(&out.join(format!("step-{i:02}")));
        assert_eq!(step["meta"]["load"]["rate"], steps[i - 1]["rate"]);
        assert!(step["summary"]["total"]["calls"].as_u64().unwrap() > 0);
    }
    let csv = std::fs::read_to_string(out.join("sweep.csv")).unwrap();
    assert_eq!(csv.lines().count(), steps.len() + 1);
    assert!(csv.starts_with(
        "target,step,target_rate,achieved_rate,p50_ms,p90_ms,p99_ms,error_rate,verdict,broken\n"
    ));
    let svg = std::fs::read_to_string(out.join("sweep.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("p99") && svg.trim_end().ends_with("</svg>"));
    assert!(summary["knees"]["eth_chainId"].is_array());
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
