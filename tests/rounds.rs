//! A/B rounds: `volley run --target A --target B --rounds N` runs the
//! targets in turn, N rounds each in a balanced order, and judges B
//! against A round by round: a slower server is a regression (exit 2), the
//! same server twice is not, and what cannot be made into rounds is
//! refused before anything is sent.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::bin::{serve, summary_json, temp_dir, text, volley, wait_or_kill};

fn rounds(a: &str, b: &str, out: &Path, extra: &[&str]) -> std::process::Output {
    let child = volley()
        .args(["run", "--target", a, "--target", b, "--method", "eth_chainId"])
        .args([
            "--rate", "50", "-d", "4s", "--rounds", "4", "--no-tui", "-q", "--out",
        ])
        .arg(out)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_or_kill(child, Duration::from_secs(120))
}

#[test]
fn a_slower_server_is_a_regression_round_by_round_and_the_same_one_is_not() {
    let (fast, a) = serve(&["--latency", "1ms"]);
    let (slow, b) = serve(&["--latency", "12ms"]);
    let out = temp_dir("rounds-slower");
    let junit = out.with_extension("xml");
    let output = rounds(&a, &b, &out, &["--junit", junit.to_str().unwrap()]);
    let table = text(&output.stdout);
    assert_eq!(output.status.code(), Some(2), "{table}{}", text(&output.stderr));
    // Each round wrote its seconds as it went, into its own directory.
    assert!(
        !text(&output.stderr).contains("cannot write"),
        "{}",
        text(&output.stderr)
    );
    let p50 = table
        .lines()
        .find(|l| l.contains(" TOTAL ") && l.contains(" p50 "))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(p50.ends_with("REGRESSION"), "{p50}");
    assert!(table.contains("in the order AB BA AB BA"), "{table}");
    assert!(
        table.lines().last().unwrap_or("").starts_with("results: "),
        "{table}"
    );
    assert!(table.contains("result: REGRESSION ("), "{table}");
    let summary = summary_json(&out);
    assert_eq!(summary["order"], "AB BA AB BA");
    assert_eq!(summary["ab"]["notes"], serde_json::json!([]), "4 rounds: no note");
    let said = summary["result"].as_str().unwrap();
    assert!(
        said.starts_with("REGRESSION ("),
        "the table's result, unprefixed: {said}"
    );
    for target in summary["targets"].as_array().unwrap() {
        let each = target["rounds"].as_array().unwrap();
        assert_eq!(each.len(), 4, "{target}");
        for round in each {
            // 50/s for each round's second: the same requests every round.
            assert_eq!(round["total"]["calls"], 50, "{round}");
            let dir = out.join(round["dir"].as_str().unwrap());
            assert!(dir.join("timeseries.csv").is_file(), "{}", dir.display());
        }
    }
    let row = (summary["ab"]["rows"].as_array().unwrap().iter())
        .find(|r| r["method"] == "TOTAL" && r["metric"] == "p50")
        .unwrap();
    let (ratio, low) = (
        row["ratio"][0].as_f64().unwrap(),
        row["ratio"][1].as_f64().unwrap(),
    );
    assert!(ratio > 3.0 && low > 1.0, "{row}");
    // Compare takes one run: it names a round's, which it can read.
    let refused = volley().arg("compare").arg(&out).arg(&out).output().unwrap();
    let said = text(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{said}");
    let named = (said.split("of its own (").nth(1))
        .and_then(|s| s.split(", ").next())
        .unwrap_or("");
    assert!(said.contains("holds A/B rounds"), "{said}");
    assert!(Path::new(named).join("summary.json").is_file(), "{said}");
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        page.contains("<title>volley A/B rounds</title>") && page.contains("REGRESSION"),
        "report.html"
    );
    assert!(
        page.contains(">eth_chainId: latency by percentile</text>"),
        "each method's spectra"
    );
    let junit = std::fs::read_to_string(&junit).unwrap();
    assert!(
        junit.contains("failures=\"") && junit.contains("REGRESSION p50"),
        "{junit}"
    );
    assert!(junit.contains("type=\"regression\">REGRESSION p50"), "{junit}");

    // One server against itself: no regression.
    let same = temp_dir("rounds-same");
    let output = rounds(&a, &a.replace("127.0.0.1", "localhost"), &same, &[]);
    let table = text(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{table}{}", text(&output.stderr));
    assert!(table.contains("result: no regression"), "{table}");
    for mut server in [fast, slow] {
        server.kill().unwrap();
    }
    for dir in [out, same] {
        let _ = std::fs::remove_dir_all(dir);
    }
}

#[test]
fn what_cannot_be_made_into_rounds_is_refused_before_anything_is_sent() {
    let url = "http://127.0.0.1:1";
    for (args, said) in [
        (
            vec!["--target", url, "--rounds", "4", "-d", "4s"],
            "--rounds alternates targets",
        ),
        (
            vec!["--target", url, "--target", url, "--rounds", "1", "-d", "4s"],
            "two rounds at least",
        ),
        (
            vec!["--target", url, "--target", url, "--rounds", "4", "-d", "2s"],
            "each round would measure under 1 s",
        ),
        (
            vec!["--target", url, "--target", url, "--rounds", "2", "-n", "100"],
            "cannot be split",
        ),
        (
            vec![
                "--target",
                url,
                "--target",
                url,
                "--rounds",
                "2",
                "-d",
                "4s",
                "--parallel-targets",
            ],
            "--parallel-targets",
        ),
        (
            vec!["--target", url, "--max-regression", "p50=10%"],
            "give --rounds N too",
        ),
    ] {
        let output = volley()
            .arg("run")
            .args(&args)
            .args(["--method", "eth_chainId", "--no-tui"])
            .output()
            .unwrap();
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(said), "{args:?}: {stderr}");
    }
}

/// A round the machine made invalid (volley stopped for a second, as a
/// machine that stalls stops it) says nothing of either server: it is run
/// again, its runs kept aside, and the rounds are judged on valid runs.
#[test]
fn a_round_the_machine_made_invalid_is_run_again() {
    let (mut server, a) = serve(&[]);
    let b = a.replace("127.0.0.1", "localhost");
    let out = temp_dir("rounds-stalled");
    let child = volley()
        .args(["run", "--target", &a, "--target", &b, "--method", "eth_chainId"])
        .args(["--rate", "200", "-d", "6s", "--rounds", "2", "--no-tui", "--out"])
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // An action, not a timing assertion: once the first round has a
    // measured second, the process stops for a second.
    let first = out.join(a.trim_start_matches("http://").trim_end_matches('/'));
    let seconds = first.join("round-01").join("timeseries.csv");
    let start = std::time::Instant::now();
    while !std::fs::read_to_string(&seconds).is_ok_and(|t| t.lines().count() > 1) {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no round under way in {}",
            first.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = child.id() as i32;
    // SAFETY: signals to the child this test started.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    std::thread::sleep(Duration::from_secs(1));
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let output = wait_or_kill(child, Duration::from_secs(120));
    server.kill().unwrap();
    let (table, notes) = (text(&output.stdout), text(&output.stderr));
    assert_eq!(output.status.code(), Some(0), "{table}{notes}");
    assert!(notes.contains("round 1/2 runs again: "), "{notes}");
    assert!(table.contains("round 1 was run again: "), "{table}");
    let summary = summary_json(&out);
    let reruns = summary["reruns"].as_array().unwrap();
    assert_eq!(reruns.len(), 1, "{summary}");
    assert_eq!(reruns[0]["round"], 1);
    assert!(
        reruns[0]["reasons"]
            .to_string()
            .contains("after their intended time"),
        "{summary}"
    );
    for dir in reruns[0]["dirs"].as_array().unwrap() {
        assert!(
            out.join(dir.as_str().unwrap()).join("summary.json").is_file(),
            "{dir}"
        );
    }
    for target in summary["targets"].as_array().unwrap() {
        let each = target["rounds"].as_array().unwrap();
        assert_eq!(each.len(), 2, "{target}");
        assert!(each.iter().all(|r| r["valid"] == true), "{target}");
    }
    let _ = std::fs::remove_dir_all(out);
}

/// A threshold is judged on each round of each target (a round is a run
/// of its own), never left out: one that breaks fails the run, saying in
/// how many rounds and with what figures.
#[test]
fn a_threshold_broken_in_the_rounds_fails_them() {
    let (mut server, a) = serve(&["--latency", "2ms"]);
    let b = a.replace("127.0.0.1", "localhost");
    let out = temp_dir("rounds-threshold");
    let output = rounds(
        &a,
        &b,
        &out,
        &["--threshold", "p50 < 1ms", "--threshold", "p50 < 1s"],
    );
    server.kill().unwrap();
    let table = text(&output.stdout);
    assert_eq!(output.status.code(), Some(2), "{table}{}", text(&output.stderr));
    let (first, second) = (a.trim_start_matches("http://"), b.trim_start_matches("http://"));
    for target in [first, second] {
        let target = target.trim_end_matches('/');
        let fail = format!("FAIL p50 < 1ms on {target}: failed in 4 of 4 rounds (");
        let line = table
            .lines()
            .find(|l| l.starts_with(&fail))
            .unwrap_or_else(|| panic!("{table}"));
        // The failing figures, lowest to highest: `2.1 ms to 2.6 ms`.
        assert!(line.ends_with(" ms)"), "{line}");
        assert!(
            table.contains(&format!("PASS p50 < 1s on {target}: held in all 4 rounds")),
            "{table}"
        );
    }
    assert!(
        table.contains("result: THRESHOLD FAILED (p50 < 1ms on "),
        "{table}"
    );
    let summary = summary_json(&out);
    let thresholds = summary["ab"]["thresholds"].as_array().unwrap();
    assert_eq!(thresholds.len(), 4, "two thresholds, two targets");
    assert_eq!(thresholds[0]["failed"], 4);
    let _ = std::fs::remove_dir_all(out);
}

/// Each target's warnings stand beside its rounds: a server that cannot
/// keep the rate says so, with the rounds it said it in.
#[test]
fn each_targets_warnings_stand_beside_its_rounds() {
    let (mut fast, a) = serve(&[]);
    let (mut slow, b) = serve(&["--capacity", "20"]);
    let out = temp_dir("rounds-warnings");
    let output = rounds(&a, &b, &out, &["--connections", "2", "--timeout", "30s"]);
    for server in [&mut fast, &mut slow] {
        server.kill().unwrap();
    }
    let table = text(&output.stdout);
    let b_lines = table.split("B = ").nth(1).unwrap_or_else(|| panic!("{table}"));
    assert!(
        b_lines.contains("  warning, in 4 of 4 rounds: the server did not keep up with the offered rate"),
        "{table}"
    );
    let a_lines = table.split("B = ").next().unwrap();
    assert!(!a_lines.contains("warning, in"), "{table}");
    assert!(
        !table.contains("measure at least 2 s"),
        "no round is judged alone: {table}"
    );
    let _ = std::fs::remove_dir_all(out);
}

/// Notifications have no latency: no p50 or p99 row for them (a
/// `0.000 ms` row judged `ok` said something was compared), and still
/// their rate.
#[test]
fn a_method_of_notifications_has_no_latency_rows() {
    let (mut server, a) = serve(&[]);
    let out = temp_dir("rounds-notifications");
    let scenario = out.with_extension("toml");
    std::fs::write(
        &scenario,
        "seed = 7\n[load]\nrate = 50\n[[calls]]\nmethod = \"eth_chainId\"\n[[calls]]\nmethod = \"log\"\nnotification = true\n",
    )
    .unwrap();
    let child = volley()
        .args(["run", scenario.to_str().unwrap(), "--target", &a, "--target", &a])
        .args(["-d", "2s", "--rounds", "2", "--no-tui", "-q", "--out"])
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let output = wait_or_kill(child, Duration::from_secs(120));
    server.kill().unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}{}",
        text(&output.stdout),
        text(&output.stderr)
    );
    let summary = summary_json(&out);
    let metrics_of = |method: &str| -> Vec<String> {
        (summary["ab"]["rows"].as_array().unwrap().iter())
            .filter(|r| r["method"] == method)
            .map(|r| r["metric"].as_str().unwrap().to_string())
            .collect()
    };
    // Two rounds, quiet: the note stands in the results, not on stderr only.
    let note = summary["ab"]["notes"][0].as_str().unwrap_or_default();
    assert!(
        note.starts_with("2 rounds: an interval over so few is wide"),
        "{}",
        summary["ab"]
    );
    assert!(text(&output.stdout).contains(&format!("note: {note}")));
    // One URL given twice: said, as the rounds compare a server with itself.
    let same = summary["ab"]["notes"][1].as_str().unwrap_or_default();
    assert!(
        same.ends_with(" are one endpoint: the rounds compare it with itself (one URL given twice?)"),
        "{}",
        summary["ab"]
    );
    let log = metrics_of("log");
    assert!(
        !log.is_empty() && !log.iter().any(|m| m == "p50" || m == "p99"),
        "{log:?}"
    );
    assert!(metrics_of("eth_chainId").iter().any(|m| m == "p50"));
    let _ = std::fs::remove_file(scenario);
    let _ = std::fs::remove_dir_all(out);
}
