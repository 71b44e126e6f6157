//! The real binary, as a user runs it.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::bin::{serve, summary_json, temp_dir, text, volley, wait_or_kill};
use serde_json::Value;

fn interrupt(child: &Child, signal: &str) {
    let status = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn the_demo_runs_and_writes_three_files() {
    let out = temp_dir("demo");
    let output = volley()
        .args([
            "run",
            "scenarios/demo.toml",
            "--duration",
            "2s",
            "--warmup",
            "0s",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    for expected in ["method", "TOTAL", "eth_getBalance", "p99.9 ms", "results:"] {
        assert!(stdout.contains(expected), "missing {expected:?} in:\n{stdout}");
    }
    let csv = std::fs::read_to_string(out.join("summary.csv")).unwrap();
    assert!(csv.starts_with(
        "method,calls,ok,errors,error_rate,calls_per_s,mean_ms,p50_ms,p90_ms,p99_ms,p999_ms,max_ms,rpc_error,"
    ));
    assert!(csv.lines().last().unwrap().starts_with("TOTAL,"));
    let series = std::fs::read_to_string(out.join("timeseries.csv")).unwrap();
    assert!(series.starts_with("second,calls,ok,errors,calls_per_s,p50_ms,p99_ms,max_ms"));
    assert_eq!(series.lines().count(), 3, "{series}");
    let json = summary_json(&out);
    assert_eq!(json["summary"]["partial"], false);
    assert_eq!(json["meta"]["scenario"], "demo");
    assert_eq!(json["meta"]["version"], env!("CARGO_PKG_VERSION"));
    assert!(json["summary"]["total"]["calls"].as_u64().unwrap() > 100);
    assert_eq!(json["summary"]["total"]["errors"], 0);
    // The notifications have a row of their own: each went alone (a 204,
    // no body), and every `log` counted is one of them.
    let rows = json["summary"]["methods"].as_array().unwrap();
    let calls = |name: &str| {
        rows.iter()
            .find(|m| m["method"] == name)
            .map(|m| m["calls"].clone())
    };
    let alone = &json["summary"]["http_statuses"]["204"];
    assert!(alone.as_u64().unwrap() > 0, "{alone}");
    assert_eq!(calls("log").as_ref(), Some(alone));
}

#[test]
fn rpc_errors_equal_the_errors_the_server_sent() {
    let (server, url) = serve(&["--error-rate", "0.1", "--seed", "7"]);
    let out = temp_dir("errors");
    let output = volley()
        .args([
            "run",
            "--target",
            &url,
            "--method",
            "eth_chainId",
            "--requests",
            "20000",
            "--quiet",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    interrupt(&server, "-INT");
    let served = text(&wait_or_kill(server, Duration::from_secs(10)).stdout);
    let injected: u64 = served
        .rsplit('(')
        .next()
        .and_then(|s| s.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no injected count in {served:?}"));
    let total = &summary_json(&out)["summary"]["total"];
    assert_eq!(total["calls"], 20000);
    assert_eq!(total["outcomes"]["rpc_error"].as_u64(), Some(injected));
    assert!(
        injected > 1500 && injected < 2500,
        "about 10% of 20000, got {injected}"
    );
}

#[test]
fn a_bad_scenario_names_file_line_and_key() {
    let dir = temp_dir("bad-scenario");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("broken.toml");
    std::fs::write(
        &path,
        "target = \"builtin\"\n[load]\nconcurrency = 4\nduraton = \"5s\"\n[[calls]]\nmethod = \"a\"\n",
    )
    .unwrap();
    let output = volley().arg("run").arg(&path).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains(&format!(
            "{}:4:1: key `load.duraton`: unknown field `duraton`",
            path.display()
        )),
        "{stderr}"
    );
}

#[test]
fn a_generator_that_could_overflow_is_refused_naming_file_line_and_key() {
    let dir = temp_dir("generator-overflow");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("wide.toml");
    for (params, says) in [
        ("[\"${float(-1e309, 1)}\"]", "`float` takes finite bounds"),
        (
            "[\"${int(0, 9223372036854775807) + 1}\"]",
            "past what a 64-bit whole number holds",
        ),
    ] {
        let scenario = format!("target = \"builtin\"\n[[calls]]\nmethod = \"m\"\nparams = {params}\n");
        std::fs::write(&path, scenario).unwrap();
        for command in ["validate", "run"] {
            let output = volley().arg(command).arg(&path).output().unwrap();
            assert_eq!(output.status.code(), Some(1), "{command} {params}");
            let stderr = text(&output.stderr);
            assert!(stderr.contains(&format!("{}:4:", path.display())), "{stderr}");
            assert!(
                stderr.contains("key `calls[0].params`") && stderr.contains(says),
                "{stderr}"
            );
        }
    }
    // A range wider than the largest float is a range: validate takes it.
    std::fs::write(
        &path,
        "target = \"builtin\"\n[[calls]]\nmethod = \"m\"\nparams = [\"${float(-1e308, 1e308)}\"]\n",
    )
    .unwrap();
    let output = volley().arg("validate").arg(&path).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
}

#[test]
fn a_duration_past_any_clock_is_refused_naming_the_flag() {
    let output = volley()
        .args([
            "run",
            "--target",
            "builtin",
            "--method",
            "m",
            "-d",
            "18446744073709551615s",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "a usage error, not a panic");
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("--duration") && stderr.contains("at most 365 days"),
        "{stderr}"
    );
}

#[test]
fn an_unreachable_target_is_said_plainly() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let output = volley()
        .args([
            "run",
            "--target",
            &format!("http://127.0.0.1:{port}"),
            "--method",
            "eth_chainId",
            "-n",
            "5",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains(&format!(
            "cannot connect to http://127.0.0.1:{port}: Connection refused"
        )),
        "{stderr}"
    );
}

#[test]
fn an_occupied_out_directory_is_never_overwritten() {
    let out = temp_dir("occupied");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("summary.json"), "precious").unwrap();
    let output = volley()
        .args(["run", "scenarios/demo.toml", "-n", "10", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(text(&output.stderr).contains("already holds files"));
    assert_eq!(
        std::fs::read_to_string(out.join("summary.json")).unwrap(),
        "precious"
    );
}

#[test]
fn ctrl_c_and_sigterm_still_write_partial_results() {
    for (signal, code) in [("-INT", 130), ("-TERM", 143)] {
        let out = temp_dir(&format!("signal{signal}"));
        let mut child = volley()
            .args([
                "run",
                "scenarios/demo.toml",
                "--duration",
                "60s",
                "--warmup",
                "0s",
                "--out",
            ])
            .arg(&out)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Wait for the first progress line: the run is under way.
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        stderr.read_line(&mut line).unwrap();
        assert!(line.contains("calls"), "{line}");
        interrupt(&child, signal);
        // A hang guard: a stop takes well under a second, but a machine at a
        // load of 16 once took 7.
        let output = wait_or_kill(child, Duration::from_secs(30));
        let mut rest = String::new();
        stderr.read_to_string(&mut rest).unwrap();
        assert_eq!(output.status.code(), Some(code), "{rest}");
        let json = summary_json(&out);
        assert_eq!(json["summary"]["partial"], true);
        assert!(json["summary"]["total"]["calls"].as_u64().unwrap() > 0);
        assert!(text(&output.stdout).contains("PARTIAL"));
        let csv = std::fs::read_to_string(out.join("summary.csv")).unwrap();
        assert!(csv.lines().last().unwrap().starts_with("TOTAL,"));
    }
}

#[test]
fn a_slow_server_warning_counts_calls_in_flight_apart_from_connections() {
    let (mut server, url) = serve(&["--latency", "1s"]);
    let out = temp_dir("behind-in-flight");
    let output = volley()
        .args(["run", "--target", &url, "--method", "eth_chainId", "--http2"])
        .args(["--rate", "50", "--connections", "1", "--max-in-flight", "2"])
        .args(["--duration", "2s", "--quiet", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    server.kill().unwrap();
    let _ = server.wait();
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains("the server had not answered (2 calls in flight at most over 1 connection)"),
        "{stdout}"
    );
    assert!(!stdout.contains("on 2 connections"), "{stdout}");
}

#[test]
fn a_slow_server_in_rate_mode_shows_in_the_latency() {
    let (server, url) = serve(&["--latency", "1s"]);
    let out = temp_dir("behind");
    let output = volley()
        .args([
            "run",
            "--target",
            &url,
            "--method",
            "eth_chainId",
            "--rate",
            "100",
            "--connections",
            "10",
        ])
        .args(["--duration", "5s", "--quiet", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let mut server = server;
    server.kill().unwrap();
    let _ = server.wait();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    // Every connection was waiting for the slow server: its fault, not volley's.
    assert!(
        stdout.contains("the server did not keep up with the offered rate")
            && stdout.contains("the server had not answered (10 connections)")
            && stdout.contains("verdict: valid"),
        "{stdout}"
    );
    let json = summary_json(&out);
    let summary = &json["summary"];
    let p50 = summary["total"]["latency"]["p50_ms"].as_f64().unwrap();
    let service_p50 = summary["total"]["service"]["p50_ms"].as_f64().unwrap();
    assert!(
        p50 > 1500.0,
        "latency from the intended send time must include the wait: p50 {p50} ms"
    );
    assert!(
        service_p50 < 1100.0,
        "the server itself answers in about 1 s: {service_p50} ms"
    );
    assert_eq!(summary["schedule"]["behind"], true);
    assert!(summary["schedule"]["unsent"].as_u64().unwrap() > 200);
}

#[test]
fn every_shipped_scenario_validates() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 6, "{files:?}");
    // The stdio scenarios name servers this machine need not have: stand-ins
    // on PATH, so the files are checked and not the machine.
    let stand_ins = temp_dir("stand-ins");
    std::fs::create_dir_all(&stand_ins).unwrap();
    for program in ["pyright-langserver", "mcp-server-everything"] {
        std::fs::write(stand_ins.join(program), "#!/bin/sh\n").unwrap();
    }
    let path = format!(
        "{}:{}",
        stand_ins.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for file in files {
        let output = volley()
            .env("PATH", &path)
            .arg("validate")
            .arg(&file)
            .output()
            .unwrap();
        let stdout = text(&output.stdout);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{}: {}",
            file.display(),
            text(&output.stderr)
        );
        assert!(stdout.contains(": valid"), "{stdout}");
        let samples = stdout.split("sample requests").nth(1).unwrap();
        let requests: Vec<Value> = samples
            .lines()
            .skip(1)
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l.trim()).unwrap())
            .collect();
        assert_eq!(requests.len(), 5, "{}", file.display());
        if file.ends_with("ci.toml") {
            assert!(
                stdout.contains("threshold:   p99 < 50ms (a failure exits 2)"),
                "{stdout}"
            );
        }
        if file.ends_with("ethereum-batch.toml") {
            // The plan as a reader checks it: the batch sizes drawn.
            assert!(
                stdout.contains("batches:     every request a batch of 1..50 drawn from the mix"),
                "{stdout}"
            );
            // What the poll will answer only the run can tell.
            assert!(
                stdout.contains("poll:        `head` every 2s; its answer must be a number or a hex quantity, which only the run can check"),
                "{stdout}"
            );
        }
    }
}

#[test]
fn validate_states_each_kind_of_batch_size() {
    let dir = temp_dir("batch-sizes");
    std::fs::create_dir_all(&dir).unwrap();
    for (size, shown) in [
        ("4", "batch of 4"),
        ("{ min = 2, max = 9 }", "batch of 2..9"),
        ("{ sizes = { 1 = 50, 10 = 30 } }", "batch of 1 | 10 (weighted)"),
    ] {
        let path = dir.join("batch.toml");
        std::fs::write(
            &path,
            format!("target = \"builtin\"\n[batch]\nsize = {size}\n[[calls]]\nmethod = \"m\"\n"),
        )
        .unwrap();
        let output = volley().arg("validate").arg(&path).output().unwrap();
        let stdout = text(&output.stdout);
        assert!(stdout.contains(shown), "{size}: {stdout}{}", text(&output.stderr));
    }
}

#[test]
fn validate_names_the_line_of_a_broken_copy() {
    let dir = temp_dir("broken-copy");
    std::fs::create_dir_all(&dir).unwrap();
    let original =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/demo.toml")).unwrap();
    let broken = original.replacen("weight = 25", "weight = 0", 1);
    let line = broken.lines().position(|l| l == "weight = 0").unwrap() + 1;
    let path = dir.join("demo.toml");
    std::fs::write(&path, broken).unwrap();
    let output = volley().arg("validate").arg(&path).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains(&format!("demo.toml:{line}:10: key `calls[1].weight`")),
        "{stderr}"
    );
    let typo = original.replacen("concurrency = 32", "concurency = 32", 1);
    std::fs::write(&path, typo).unwrap();
    let stderr = text(&volley().arg("validate").arg(&path).output().unwrap().stderr);
    assert!(stderr.contains("did you mean `concurrency`?"), "{stderr}");
}

#[test]
fn init_writes_a_starter_and_never_overwrites() {
    let dir = temp_dir("init");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("new.toml");
    let output = volley().arg("init").arg(&path).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let output = volley().arg("validate").arg(&path).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let again = volley().arg("init").arg(&path).output().unwrap();
    assert_eq!(again.status.code(), Some(1));
    assert!(text(&again.stderr).contains("already exists"));
}

#[test]
fn secrets_from_the_environment_appear_in_no_output() {
    let secret = "s3cr3t-tok3n-7f9a2b";
    let dir = temp_dir("secrets");
    std::fs::create_dir_all(&dir).unwrap();
    let scenario = dir.join("secret.toml");
    std::fs::write(
        &scenario,
        "target = \"builtin\"\n[headers]\nAuthorization = \"Bearer ${VOLLEY_TEST_SECRET}\"\n[load]\nconcurrency = 2\nrequests = 200\n[[calls]]\nmethod = \"eth_chainId\"\n[[calls]]\nmethod = \"nope\"\n",
    )
    .unwrap();
    let out = dir.join("out");
    let output = volley()
        .arg("run")
        .arg(&scenario)
        .args(["-H", "X-Api-Key: ${VOLLEY_TEST_SECRET}", "--out"])
        .arg(&out)
        .env("VOLLEY_TEST_SECRET", secret)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let mut seen = text(&output.stdout) + &text(&output.stderr);
    for file in std::fs::read_dir(&out).unwrap() {
        seen.push_str(&std::fs::read_to_string(file.unwrap().path()).unwrap());
    }
    assert!(
        seen.contains("Authorization") && seen.contains("X-Api-Key"),
        "header names are kept"
    );
    // An unreachable target and a malformed header fail with the secret set, too.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    for args in [
        vec!["--target".to_string(), format!("http://127.0.0.1:{port}")],
        vec![
            "-H".to_string(),
            "Bad Header Name: ${VOLLEY_TEST_SECRET}".to_string(),
        ],
        vec!["-H".to_string(), "${VOLLEY_TEST_SECRET}".to_string()],
    ] {
        let failed = volley()
            .arg("run")
            .arg(&scenario)
            .args(&args)
            .env("VOLLEY_TEST_SECRET", secret)
            .output()
            .unwrap();
        assert_eq!(failed.status.code(), Some(1));
        seen.push_str(&(text(&failed.stdout) + &text(&failed.stderr)));
    }
    assert!(!seen.contains(secret), "the secret leaked into:\n{seen}");
    assert!(!seen.contains("s3cr3t"), "part of the secret leaked");
}

#[test]
fn an_output_directory_in_the_way_is_refused_before_anything_is_sent() {
    let dir = temp_dir("in-the-way");
    std::fs::create_dir_all(&dir).unwrap();
    let blocker = dir.join("a-file");
    std::fs::write(&blocker, "not a directory").unwrap();
    for out in [blocker.clone(), blocker.join("results")] {
        let output = volley()
            .args(["run", "scenarios/demo.toml", "-n", "50", "--quiet", "--out"])
            .arg(&out)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(1));
        let stderr = text(&output.stderr);
        assert!(stderr.contains("--out"), "{stderr}");
        assert!(text(&output.stdout).is_empty(), "nothing ran");
    }
    assert_eq!(std::fs::read_to_string(&blocker).unwrap(), "not a directory");
}

#[test]
fn results_that_cannot_be_written_go_elsewhere_and_say_where() {
    let dir = temp_dir("unwritable");
    let out = dir.join("results");
    let child = volley()
        .args([
            "run",
            "scenarios/demo.toml",
            "-d",
            "3s",
            "--warmup",
            "0s",
            "--quiet",
            "--out",
        ])
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once the run has claimed its directory, a file takes its place.
    while !out.join("summary.json").exists() {
        std::thread::sleep(Duration::from_millis(5));
    }
    // A rename, not a removal: the run writes into the directory each
    // second, and a removal racing a new file fails with "not empty".
    let moved = dir.join("moved");
    std::fs::rename(&out, &moved).unwrap();
    std::fs::write(&out, "not a directory").unwrap();
    let output = child.wait_with_output().unwrap();
    std::fs::remove_dir_all(&moved).unwrap();
    assert_eq!(output.status.code(), Some(3));
    let stderr = text(&output.stderr);
    assert!(stderr.contains("cannot create result directory"), "{stderr}");
    let elsewhere = stderr
        .lines()
        .find_map(|l| l.strip_prefix("the results were written to "))
        .and_then(|l| l.strip_suffix(" instead"))
        .unwrap_or_else(|| panic!("no new place named in {stderr}"));
    let json = summary_json(std::path::Path::new(elsewhere));
    // Every second is there, though the directory they were written into
    // as the run went is gone.
    let series = std::fs::read_to_string(std::path::Path::new(elsewhere).join("timeseries.csv")).unwrap();
    std::fs::remove_dir_all(elsewhere).unwrap();
    assert_eq!(series.lines().count(), 4, "{series}");
    assert!(json["summary"]["requests"].as_u64().unwrap() > 0);
    assert!(text(&output.stdout).contains("TOTAL"));
}

#[test]
fn a_one_liner_sends_its_params() {
    let out = temp_dir("one-liner");
    let output = volley()
        .args([
            "run", "--target", "builtin", "--method", "add", "--params", "[40, 2]", "-n", "20", "--quiet",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let total = &summary_json(&out)["summary"]["total"];
    assert_eq!(total["calls"], 20);
    assert_eq!(
        total["ok"], 20,
        "add without its params would answer -32602: {total}"
    );
}

#[test]
fn serve_tls_makes_a_ca_that_run_trusts_with_cacert() {
    let dir = temp_dir("serve-tls");
    std::fs::create_dir_all(&dir).unwrap();
    let ca = dir.join("ca.pem");
    let ca_arg = ca.display().to_string();
    let (server, url) = serve(&["--tls", "--tls-ca-out", &ca_arg]);
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    let run = |extra: &[&str], out: &str| {
        volley()
            .args([
                "run",
                "--target",
                &url,
                "--method",
                "eth_chainId",
                "--requests",
                "300",
                "--quiet",
            ])
            .args(extra)
            .arg("--out")
            .arg(dir.join(out))
            .output()
            .unwrap()
    };
    let untrusted = run(&[], "untrusted");
    assert_eq!(untrusted.status.code(), Some(1));
    assert!(
        text(&untrusted.stderr).contains("--cacert FILE"),
        "{}",
        text(&untrusted.stderr)
    );
    let trusted = run(&["--cacert", &ca_arg], "trusted");
    assert_eq!(trusted.status.code(), Some(0), "{}", text(&trusted.stderr));
    assert_eq!(summary_json(&dir.join("trusted"))["summary"]["total"]["ok"], 300);
    let insecure = run(&["--insecure"], "insecure");
    assert_eq!(insecure.status.code(), Some(0));
    assert!(text(&insecure.stderr).contains("INSECURE"));
    assert!(text(&insecure.stdout).contains("INSECURE"));
    let json = summary_json(&dir.join("insecure"));
    let warning = &json["summary"]["warnings"][0];
    assert_eq!(warning["code"], "insecure", "{json}");
    assert!(
        warning["message"].as_str().unwrap().starts_with("INSECURE"),
        "{json}"
    );
    interrupt(&server, "-INT");
    wait_or_kill(server, Duration::from_secs(10));
}

/// The flag rule is written once (`cli::FLAG_RULE`): `volley run --help`
/// shows it, and the guide's scenarios page holds each of its lines word
/// for word.
#[test]
fn the_flag_rule_in_help_and_in_the_guide_is_one_text() {
    let help = text(&volley().args(["run", "--help"]).output().unwrap().stdout);
    assert!(help.contains(volley::cli::FLAG_RULE), "{help}");
    let guide = std::fs::read_to_string("docs/guide/scenarios.md").unwrap();
    for line in volley::cli::FLAG_RULE.lines().skip(1) {
        assert!(
            guide.contains(&format!("\n{line}\n")),
            "docs/guide/scenarios.md lacks: {line}"
        );
    }
}
