//! A run in which no call succeeded ends saying so plainly, with the cause
//! most calls ended in and what to look at, and exits 2: a wrong path or a
//! method name typo is a valid measurement of nothing but failures, and CI
//! must not pass it. An error the scenario expects is a success. And the
//! verdict's line says what the server did beside whether the figures
//! hold: a valid run of 20% protocol errors says so, and exits 0 unless a
//! threshold asks otherwise.

mod common;

use common::bin::{run_guarded, serve, summary_json, temp_dir, text};

/// The table's last line: just above where the results went.
fn last_line(stdout: &str) -> &str {
    let mut lines = stdout.lines().rev().filter(|l| !l.trim().is_empty());
    assert!(
        lines.next().is_some_and(|l| l.starts_with("results: ")),
        "{stdout}"
    );
    lines.next().unwrap_or("")
}

/// `volley run --target URL --method METHOD` with `load` flags, which must
/// fail (exit 2); its stdout.
fn failed_run(url: &str, method: &str, load: &[&str], name: &str) -> String {
    let out = temp_dir(name);
    let run = ["run", "--target", url, "--method", method, "--quiet"];
    let output = run_guarded(&[&run[..], load].concat(), &out);
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(2), "{stdout}{}", text(&output.stderr));
    let _ = std::fs::remove_dir_all(out);
    stdout
}

#[test]
fn a_method_name_typo_fails_the_run_and_asks_about_the_name() {
    let (mut server, url) = serve(&[]);
    let stdout = failed_run(&url, "eth_chainIdd", &["-n", "50", "-c", "2"], "typo");
    server.kill().unwrap();
    assert_eq!(
        last_line(&stdout),
        "FAILED: no call succeeded: 50 of 50 calls ended in rpc_error -32601. Is the method name right? The server has no such method."
    );
    assert!(
        stdout.contains("verdict: valid"),
        "the measurement itself held: {stdout}"
    );
}

#[test]
fn a_wrong_path_fails_the_run_and_asks_about_the_path() {
    let addr = common::crafted_server(|_| (404, "<html><body>Not Found</body></html>".into()));
    let url = format!("http://{addr}/no-such-path");
    let stdout = failed_run(&url, "eth_chainId", &["-n", "40", "-c", "2"], "wrong-path");
    assert_eq!(
        last_line(&stdout),
        "FAILED: no call succeeded: 40 of 40 calls ended in http_status 404. Is the target's path right? The server has nothing at it."
    );
}

#[test]
fn errors_the_scenario_expects_are_successes() {
    let (mut server, url) = serve(&[]);
    let dir = temp_dir("expected-errors");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("negative.toml");
    std::fs::write(
        &path,
        format!(
            "target = \"{url}\"\n[load]\nconcurrency = 2\nrequests = 30\n[[calls]]\nmethod = \"no_such_method\"\nexpect = {{ error = [-32601] }}\n"
        ),
    )
    .unwrap();
    let output = run_guarded(&["run", path.to_str().unwrap(), "--quiet"], &dir.join("out"));
    server.kill().unwrap();
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}{}", text(&output.stderr));
    assert!(!stdout.contains("no call succeeded"), "{stdout}");
}

/// A server that answers nothing, with a timeout longer than the run: the
/// calls waiting at the end time out when the grace runs out, so none
/// succeeded; the run fails, saying so, not exit 0.
#[test]
fn a_server_that_answers_nothing_within_the_run_fails_it() {
    let (mut server, url) = serve(&["--chaos", "hang=1.0"]);
    let load = ["-c", "2", "-d", "1s", "--timeout", "10s", "--grace", "500ms"];
    let stdout = failed_run(&url, "eth_chainId", &load, "hung");
    server.kill().unwrap();
    assert_eq!(
        last_line(&stdout),
        "FAILED: no call succeeded: 2 of 2 calls ended in timeout. Is --timeout long enough for this server?"
    );
}

/// The table's `verdict:` line.
fn verdict_line(stdout: &str) -> &str {
    let line = stdout.lines().find(|l| l.starts_with("verdict: "));
    line.unwrap_or_else(|| panic!("no verdict line: {stdout}"))
}

#[test]
fn the_verdict_line_says_what_share_of_calls_the_server_failed_and_how() {
    // A server breaking the protocol in a fifth of its answers, as ganache did.
    let (mut server, url) = serve(&["--chaos", "wrong-version=0.2", "--seed", "7"]);
    let out = temp_dir("server-did");
    let args = [
        "run",
        "--target",
        &url,
        "--method",
        "eth_chainId",
        "-n",
        "400",
        "-c",
        "4",
        "-q",
    ];
    let output = run_guarded(&args, &out);
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "the figures hold: {stdout}");
    let total = &summary_json(&out)["summary"]["total"];
    let (calls, errors) = (
        total["calls"].as_u64().unwrap(),
        total["errors"].as_u64().unwrap(),
    );
    assert_eq!(calls, 400);
    assert_eq!(total["outcomes"]["protocol"].as_u64(), Some(errors));
    assert!((50..120).contains(&errors), "about a fifth: {errors}");
    let share = format!("{:.0}%", errors as f64 / 4.0);
    let line = verdict_line(&stdout);
    assert!(line.starts_with("verdict: valid ("), "{line}");
    assert!(
        line.ends_with(&format!(
            " · the server failed {share} of calls (protocol {share})"
        )),
        "{line}"
    );
    // A threshold on errors is how such a run fails.
    let gated = temp_dir("server-did-gated");
    let output = run_guarded(&[&args[..], &["--threshold", "error_rate < 1%"]].concat(), &gated);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stdout));
    server.kill().unwrap();
    let (mut healthy, url) = serve(&[]);
    let output = run_guarded(
        &[
            "run",
            "--target",
            &url,
            "--method",
            "eth_chainId",
            "-n",
            "200",
            "-q",
        ],
        &out.with_extension("ok"),
    );
    healthy.kill().unwrap();
    let stdout = text(&output.stdout);
    assert!(
        verdict_line(&stdout).ends_with(" · all 200 calls succeeded"),
        "{stdout}"
    );
    for dir in [out.clone(), gated, out.with_extension("ok")] {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// A server that answers nothing, with a warmup: the warmup's calls hold
/// every connection through the measured part, so no call of it is sent.
/// That is the server answering no call, not "nothing was measured" (a
/// replay used up, a run shorter than a call), and the run fails.
#[test]
fn a_silent_server_whose_warmup_calls_hold_every_connection_fails_the_run() {
    let (mut server, url) = serve(&["--chaos", "hang=1"]);
    let load = [
        "--rate",
        "20",
        "--connections",
        "2",
        "--warmup",
        "1s",
        "-d",
        "1s",
        "--timeout",
        "3s",
    ];
    let stdout = failed_run(&url, "eth_chainId", &load, "warmup-held");
    server.kill().unwrap();
    assert!(
        last_line(&stdout).starts_with("FAILED: no call succeeded: ")
            && last_line(&stdout).contains(" calls ended in no answer (never sent: every connection waited on calls the server never answered)"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "warning: the server answered no call: every connection waited, the whole measured part"
        ),
        "{stdout}"
    );
    assert!(!stdout.contains("nothing was measured"), "{stdout}");
}
