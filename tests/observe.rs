//! What the server spends: `--observe-pid` on a `volley serve` made to
//! burn a known amount of CPU per call reports what `/proc` says the server
//! spent over the same run, and a stdio child's memory is in the output.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::bin::{serve, summary_json, temp_dir, text, volley, wait_or_kill};

/// The CPU seconds `pid` has used, as `/proc` counts them (ticks of 1/100 s
/// on Linux's usual configuration, read as the kernel reports them).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 1..].split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    // SAFETY: sysconf reads a configuration value.
    ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

#[test]
fn observe_pid_reports_the_cpu_proc_counts_for_the_run() {
    let (mut server, url) = serve(&[]);
    let pid = server.id();
    let out = temp_dir("observe-pid");
    let before = cpu_seconds(pid);
    // 200 calls that each spend 5 ms of the server's CPU: 1 s at least.
    let child = volley()
        .args(["run", "--target", &url, "--method", "burn", "--params", "[5]"])
        .args(["--requests", "200", "--concurrency", "2", "--no-tui", "-q"])
        .args(["--observe-pid", &pid.to_string(), "--out"])
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let output = wait_or_kill(child, Duration::from_secs(120));
    let spent = cpu_seconds(pid) - before;
    server.kill().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let summary = summary_json(&out);
    let usage = &summary["summary"]["server"][0];
    assert_eq!(usage["pid"], pid);
    let reported = usage["cpu_seconds"].as_f64().unwrap();
    assert!(
        spent >= 1.0 && reported >= 0.95,
        "the burn was spent: {reported} of {spent}"
    );
    // The run lies within the interval read here: what volley reports is
    // that interval's CPU, less the little spent before and after it.
    let margin = 0.05 + 0.05 * spent;
    assert!(
        (spent - reported).abs() <= margin,
        "reported {reported} s against /proc's {spent} s"
    );
    let per_1000 = usage["cpu_seconds_per_1000_calls"].as_f64().unwrap();
    assert!((per_1000 - reported * 5.0).abs() < 1e-9, "200 calls: {per_1000}");
    assert!(usage["peak_rss_bytes"].as_u64().unwrap() > 1 << 20);
    let table = text(&output.stdout);
    assert!(table.contains(&format!("server pid {pid}: ")), "{table}");
    let series = std::fs::read_to_string(out.join("timeseries.csv")).unwrap();
    let header = series.lines().next().unwrap();
    assert!(
        header.ends_with(",server_cpu_cores,server_rss_mb,partial"),
        "{header}"
    );
    let first = series.lines().nth(1).unwrap();
    assert!(
        !first.contains(",,"),
        "each second has the server's figures: {first}"
    );
}

/// A run of `volley serve --stdio` children with this `[load]` and one
/// `[[calls]]` entry; its summary.json, once it exited 0.
fn stdio_run(name: &str, load: &str, call: &str) -> serde_json::Value {
    let out = temp_dir(name);
    let scenario = out.with_extension("toml");
    let command = env!("CARGO_BIN_EXE_volley");
    let text_of =
        format!("command = [\"{command}\", \"serve\", \"--stdio\"]\n[load]\n{load}\n[[calls]]\n{call}\n");
    std::fs::write(&scenario, text_of).unwrap();
    let output = volley()
        .arg("run")
        .arg(&scenario)
        .args(["--no-tui", "-q", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    summary_json(&out)
}

#[test]
fn each_stdio_childs_cpu_is_per_its_own_calls() {
    let summary = stdio_run(
        "observe-children",
        "concurrency = 3\nconnections = 3\nrequests = 3000",
        "method = \"burn\"\nparams = [1]",
    );
    let usage = summary["summary"]["server"].as_array().unwrap();
    assert_eq!(usage.len(), 3, "one per connection: {usage:?}");
    let shares: Vec<u64> = usage.iter().map(|u| u["calls"].as_u64().unwrap()).collect();
    assert_eq!(
        shares.iter().sum::<u64>(),
        3000,
        "the run's calls, shared: {shares:?}"
    );
    assert!(shares.iter().all(|&n| n > 0 && n < 3000), "{shares:?}");
    for child in usage {
        let (cpu, calls) = (
            child["cpu_seconds"].as_f64().unwrap(),
            child["calls"].as_f64().unwrap(),
        );
        let per_1000 = child["cpu_seconds_per_1000_calls"].as_f64().unwrap();
        assert!((per_1000 - cpu * 1000.0 / calls).abs() < 1e-9, "{child}");
    }
}

#[test]
fn a_stdio_childs_memory_is_in_the_output_and_a_bad_pid_is_refused() {
    let summary = stdio_run(
        "observe-stdio",
        "concurrency = 2\nduration = \"1500ms\"",
        "method = \"eth_chainId\"",
    );
    let usage = summary["summary"]["server"].as_array().unwrap();
    assert_eq!(
        usage.len(),
        1,
        "the one child under load, not the one that checked the target: {usage:?}"
    );
    assert!(usage[0]["label"].as_str().unwrap().starts_with("stdio child"));
    assert!(
        usage[0]["peak_rss_bytes"].as_u64().unwrap() > 1 << 20,
        "{usage:?}"
    );
    let refused = volley()
        .args([
            "run",
            "--target",
            "http://127.0.0.1:9",
            "--method",
            "m",
            "--observe-pid",
            "4294967295",
        ])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        text(&refused.stderr).contains("--observe-pid"),
        "{}",
        text(&refused.stderr)
    );
}
