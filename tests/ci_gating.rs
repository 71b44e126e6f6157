//! What CI gates on: the run's verdict on itself.

mod common;

use common::bin::{serve, volley};

use serde_json::Value;

fn out_dir(name: &str) -> std::path::PathBuf {
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("volley-gating-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    out
}

/// Runs a one-liner against `url` with `extra` flags; returns the exit
/// code, the table and `summary.json`.
fn gated(url: &str, name: &str, extra: &[&str]) -> (Option<i32>, String, Value) {
    let out = out_dir(name);
    let output = volley()
        .args([
            "run",
            "--target",
            url,
            "--method",
            "eth_chainId",
            "-c",
            "2",
            "-n",
            "200",
        ])
        .args(["--no-tui", "-q", "--out"])
        .arg(&out)
        .args(extra)
        .output()
        .unwrap();
    let json: Value = serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let table = String::from_utf8_lossy(&output.stdout).into_owned();
    std::fs::remove_dir_all(&out).unwrap();
    (output.status.code(), table, json)
}

/// `volley run` against `url` at 200/s on 10 connections for 3 s, with
/// `extra` flags, stopped (SIGSTOP) for a second once under way, as a
/// machine that stalls stops it: every engine thread wakes late together,
/// with connections to spare. Its exit code, table and summary.json.
fn stalled_run(url: &str, out: &std::path::Path, extra: &[&str]) -> (Option<i32>, String, Value) {
    let child = volley()
        .args(["run", "--target", url, "--method", "eth_chainId", "--rate", "200"])
        .args(["--connections", "10", "-d", "3s", "--no-tui", "-q", "--out"])
        .arg(out)
        .args(extra)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // An action, not a timing assertion: once a second is measured, the
    // process stops for a second.
    let start = std::time::Instant::now();
    while !std::fs::read_to_string(out.join("timeseries.csv")).is_ok_and(|t| t.lines().count() > 1) {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "the run never got under way"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let pid = child.id() as i32;
    // SAFETY: signals to the child this test started.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    std::thread::sleep(std::time::Duration::from_secs(1));
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let output = common::bin::wait_or_kill(child, std::time::Duration::from_secs(60));
    let json: Value = serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        json,
    )
}

#[test]
fn a_run_volley_could_not_keep_is_an_invalid_run_and_fails_ci() {
    let (mut server, url) = serve(&[]);
    let out = out_dir("stalled");
    let (code, table, json) = stalled_run(&url, &out, &["--require-valid"]);
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(code, Some(2), "{table}");
    let verdict = &json["summary"]["verdict"];
    assert_eq!(verdict["valid"], false, "{verdict}");
    assert!(
        verdict["reasons"]
            .to_string()
            .contains("after their intended time"),
        "{verdict}"
    );
    assert!(table.contains("verdict: invalid: "), "{table}");
    // Put down to this machine, never to the server.
    assert!(table.contains("this machine stalled or was busy"), "{table}");
    assert!(!table.contains("the server did not keep up"), "{table}");
    std::fs::remove_dir_all(&out).unwrap();
}

/// A rate the server, on its connections, cannot keep is a finding about
/// the server, with its figures: the run is valid (the latency counts every
/// wait from the intended send), and CI gates it with thresholds.
#[test]
fn a_rate_the_server_cannot_keep_is_a_finding_not_an_invalid_run() {
    let (mut server, url) = serve(&["--latency", "10ms"]);
    let out = out_dir("server-limited");
    // Two connections carry at most 200 calls/s of a 10 ms server.
    let output = volley()
        .args([
            "run",
            "--target",
            &url,
            "--method",
            "eth_chainId",
            "--rate",
            "1000",
        ])
        .args([
            "--connections",
            "2",
            "-d",
            "1s",
            "--no-tui",
            "-q",
            "--require-valid",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{table}");
    let json: Value = serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let schedule = &json["summary"]["schedule"];
    assert!(schedule["unsent"].as_u64().unwrap() > 0, "{schedule}");
    assert!(
        table.contains("the server did not keep up with the offered rate"),
        "{table}"
    );
    assert!(table.contains("verdict: valid"), "{table}");
    std::fs::remove_dir_all(&out).unwrap();
    // A gate on them: no error was made, and still CI goes red.
    let gate = volley()
        .args([
            "run",
            "--target",
            &url,
            "--method",
            "eth_chainId",
            "--rate",
            "1000",
        ])
        .args(["--connections", "2", "-d", "1s", "--no-tui", "-q", "--out"])
        .arg(&out)
        .args(["--threshold", "error_rate == 0", "--threshold", "unsent == 0"])
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    let table = String::from_utf8_lossy(&gate.stdout);
    assert_eq!(gate.status.code(), Some(2), "{table}");
    assert!(table.contains("pass  error_rate == 0  (0%)"), "{table}");
    let line = table
        .lines()
        .find(|l| l.contains("FAIL  unsent == 0  ("))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(line.ends_with(" requests never sent)"), "{line}");
    std::fs::remove_dir_all(&out).unwrap();
    // The closed model has no schedule: refused before anything is sent.
    let closed = volley()
        .args([
            "run",
            "--target",
            &url,
            "--method",
            "eth_chainId",
            "-c",
            "2",
            "-n",
            "10",
        ])
        .args(["--no-tui", "-q", "--threshold", "unsent == 0", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&closed.stderr);
    assert_eq!(closed.status.code(), Some(1), "{said}");
    assert!(said.contains("`unsent` needs a rate"), "{said}");
    assert!(!out.exists(), "nothing written");
}

#[test]
fn a_broken_threshold_exits_2_and_a_kept_one_0() {
    let (mut server, url) = serve(&["--latency", "5ms"]);
    let broken = gated(
        &url,
        "broken",
        &["--threshold", "p99 < 1ms", "--threshold", "errors == 0"],
    );
    let kept = gated(
        &url,
        "kept",
        &["--threshold", "p99 < 500ms", "--threshold", "calls == 200"],
    );
    let _ = server.kill();
    let _ = server.wait();

    let (code, table, json) = broken;
    assert_eq!(code, Some(2), "{table}");
    assert!(table.contains("thresholds: 1 of 2 FAILED"), "{table}");
    assert!(table.contains("  FAIL  p99 < 1ms  ("), "{table}");
    assert!(table.contains("  pass  errors == 0  (0 calls)"), "{table}");
    let first = &json["thresholds"][0];
    assert_eq!(
        (first["expression"].as_str(), first["passed"].as_bool()),
        (Some("p99 < 1ms"), Some(false))
    );
    // Every answer waited 5 ms: the measured value says so.
    assert!(first["measured"].as_f64().unwrap() >= 5.0, "{first}");

    let (code, table, json) = kept;
    assert_eq!(code, Some(0), "{table}");
    assert!(table.contains("thresholds: all 2 passed"), "{table}");
    assert_eq!(json["thresholds"][1]["measured"], 200.0);
}

#[test]
fn thresholds_make_an_invalid_run_fail_without_being_asked() {
    // The threshold itself holds; the stall makes the figures untrustworthy.
    let (mut server, url) = serve(&[]);
    let out = out_dir("invalid");
    let (code, table, _) = stalled_run(&url, &out, &["--threshold", "error_rate < 50%"]);
    let _ = server.kill();
    let _ = server.wait();
    assert!(table.contains("thresholds: passed"), "{table}");
    assert!(table.contains("verdict: invalid: "), "{table}");
    assert_eq!(code, Some(2), "{table}");
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn a_scenarios_thresholds_are_checked_before_anything_is_sent() {
    let dir = out_dir("files");
    std::fs::create_dir_all(&dir).unwrap();
    let calls = "[[calls]]\nmethod = \"eth_call\"\n";
    for (name, thresholds, expect) in [
        (
            "bad-expression",
            "checks = [\"p99 < 200ms\", \"p99 < 200 parsecs\"]",
            ":6:26: key `thresholds.checks[1]`: threshold `p99 < 200 parsecs`: `parsecs` is not a unit of time",
        ),
        (
            "unknown-method",
            "checks = [\"eth_getLogs.p99 < 200ms\"]",
            "key `thresholds.checks`: threshold `eth_getLogs.p99 < 200ms`: no method `eth_getLogs` in this run; its methods are `eth_call`",
        ),
        (
            "grace-alone",
            "checks = [\"p99 < 1s\"]\nabort_grace = \"5s\"",
            "key `thresholds.abort_grace`: abort_grace goes with `abort_on_fail = true`",
        ),
        (
            "no-stages",
            "checks = [\"stage[2].rps > 10\"]",
            "threshold `stage[2].rps > 10`: the load has no stages",
        ),
    ] {
        // Port 9 (discard) on loopback: nothing is listening, and nothing may be sent.
        let file = dir.join(format!("{name}.toml"));
        std::fs::write(
            &file,
            format!("target = \"http://127.0.0.1:9\"\n{calls}\n[thresholds]\n{thresholds}\n"),
        )
        .unwrap();
        for command in ["validate", "run"] {
            let output = volley().arg(command).arg(&file).output().unwrap();
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(output.status.code(), Some(1), "{command} {name}: {stderr}");
            assert!(stderr.contains(expect), "{command} {name}: {stderr}");
            assert!(!stderr.contains("cannot connect"), "refused before connecting: {stderr}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn junit_markdown_and_benchmark_files_say_what_ci_shows() {
    let (mut server, url) = serve(&[]);
    let dir = out_dir("ci-files");
    std::fs::create_dir_all(&dir).unwrap();
    let (junit, markdown, step) = (dir.join("junit.xml"), dir.join("summary.md"), dir.join("step.md"));
    std::fs::write(&step, "earlier step\n").unwrap();
    let out = dir.join("run");
    let output = volley()
        .args([
            "run",
            "--target",
            &url,
            "--method",
            "eth_chainId",
            "-c",
            "2",
            "-n",
            "300",
        ])
        .args([
            "--no-tui",
            "-q",
            "--threshold",
            "p99 < 0.001ms",
            "--threshold",
            "errors == 0",
        ])
        .arg("--junit")
        .arg(&junit)
        .arg("--summary-md")
        .arg(&markdown)
        .arg("--out")
        .arg(&out)
        .env("GITHUB_STEP_SUMMARY", &step)
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(
        output.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );

    // JUnit as the common schema has it: suites, cases, failures with messages.
    let xml = std::fs::read_to_string(&junit).unwrap();
    let doc = roxmltree::Document::parse(&xml).expect("well-formed XML");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    assert_eq!(
        (root.attribute("tests"), root.attribute("failures")),
        (Some("3"), Some("1"))
    );
    let suite = root.children().find(|n| n.has_tag_name("testsuite")).unwrap();
    assert_eq!(suite.attribute("name"), Some("eth_chainId"));
    let cases: Vec<_> = suite.children().filter(|n| n.has_tag_name("testcase")).collect();
    let names: Vec<_> = cases.iter().map(|c| c.attribute("name").unwrap()).collect();
    assert_eq!(
        names,
        [
            "verdict: the figures measure the server",
            "p99 < 0.001ms",
            "errors == 0"
        ]
    );
    let failed: Vec<_> = cases
        .iter()
        .filter_map(|c| c.children().find(|n| n.has_tag_name("failure")))
        .collect();
    assert_eq!(failed.len(), 1);
    let failing: Vec<_> = cases
        .iter()
        .filter(|c| c.children().any(|n| n.has_tag_name("failure")))
        .map(|c| c.attribute("name").unwrap())
        .collect();
    assert_eq!(
        failing,
        ["p99 < 0.001ms"],
        "the threshold that failed, not the one that held"
    );
    assert!(
        failed[0].attribute("message").unwrap().starts_with("measured "),
        "{xml}"
    );
    assert!(cases
        .iter()
        .all(|c| c.attribute("classname").is_some() && c.attribute("time").is_some()));

    // The same Markdown in the file and appended to the step summary.
    let md = std::fs::read_to_string(&markdown).unwrap();
    assert!(md.contains("| **TOTAL** | 300 | 0 |"), "{md}");
    assert!(
        md.contains("| `eth_chainId` | 300 | 0 |"),
        "a method's row by its name: {md}"
    );
    assert!(
        md.lines().next().unwrap().ends_with("❌"),
        "a failed threshold fails the heading: {md}"
    );
    assert!(
        md.contains("| `p99 < 0.001ms` |") && md.contains("❌ FAIL"),
        "{md}"
    );
    assert_eq!(
        std::fs::read_to_string(&step).unwrap(),
        format!("earlier step\n{md}")
    );

    // github-action-benchmark: arrays of name, unit and value.
    for (file, unit, name) in [
        ("benchmark-latency.json", "ms", "TOTAL p99"),
        ("benchmark-rate.json", "calls/s", "TOTAL calls/s"),
    ] {
        let entries: Value = serde_json::from_slice(&std::fs::read(out.join(file)).unwrap()).unwrap();
        let entries = entries.as_array().unwrap();
        assert!(entries
            .iter()
            .all(|e| e["name"].is_string() && e["unit"] == unit && e["value"].is_number()));
        let total = entries
            .iter()
            .find(|e| e["name"] == name)
            .unwrap_or_else(|| panic!("{entries:?}"));
        assert!(total["value"].as_f64().unwrap() > 0.0);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn abort_on_fail_stops_a_run_once_a_threshold_has_failed() {
    let (mut server, url) = serve(&["--latency", "5ms"]);
    let out = out_dir("abort");
    let output = volley()
        .args([
            "run",
            "--target",
            &url,
            "--method",
            "eth_chainId",
            "-c",
            "2",
            "-d",
            "60s",
        ])
        .args([
            "--no-tui",
            "-q",
            "--threshold",
            "p99 < 1ms",
            "--abort-on-fail",
            "1s",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(
        output.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let json: Value = serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let summary = &json["summary"];
    // Stopped long before its 60 s: a guard far from any timing, not a bound on it.
    assert!(
        summary["measured_seconds"].as_f64().unwrap() < 50.0,
        "{}",
        summary["measured_seconds"]
    );
    assert_eq!(summary["partial"], true);
    let warnings = json["summary"]["warnings"].as_array().unwrap();
    let stopped = warnings.iter().find(|w| w["code"] == "abort_on_fail");
    assert!(
        stopped.is_some_and(|w| w["message"]
            .as_str()
            .unwrap()
            .contains("threshold `p99 < 1ms` failed on the figures so far")),
        "{warnings:?}"
    );
    assert_eq!(json["thresholds"][0]["passed"], false);
    // Without a threshold there is nothing to stop on.
    let output = volley()
        .args([
            "run",
            "--target",
            "builtin",
            "--method",
            "m",
            "--abort-on-fail",
            "1s",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr)
        .contains("--abort-on-fail: stops a run when a threshold fails"));
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn a_server_whose_every_call_timed_out_answered_nothing_and_fails_ci() {
    let (mut server, url) = serve(&["--chaos", "hang=1"]);
    let out = out_dir("all-timeouts");
    let output = volley()
        .args(["run", "--target", &url, "--method", "eth_chainId", "--rate", "20"])
        .args([
            "--connections",
            "8",
            "--timeout",
            "200ms",
            "-d",
            "1s",
            "--no-tui",
            "-q",
        ])
        .args(["--require-valid", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    let json: Value = serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let total = &json["summary"]["total"];
    assert!(total["outcomes"]["timeout"].as_u64().unwrap() > 0, "{total}");
    assert_eq!(total["ok"], 0);
    assert_eq!(
        output.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    let reasons = json["summary"]["verdict"]["reasons"].to_string();
    assert!(reasons.contains("the server answered no call"), "{reasons}");
    std::fs::remove_dir_all(&out).unwrap();
}

/// The baseline the CI workflow and the CI guide compare with is read by
/// this volley: a layout change that forgets to retake it fails here, not
/// in every user's CI.
#[test]
fn the_committed_baseline_is_read_by_this_volley() {
    let run = volley::results::SavedRun::read(std::path::Path::new("results/baseline"))
        .expect("results/baseline reads: retake it with this volley (docs/guide/ci.md, Baselines)");
    assert_eq!(run.report.meta.scenario, "ci");
    assert!(run.report.summary.verdict.valid);
    assert!(run.samples.as_ref().is_some_and(|s| !s.is_empty()));
}
