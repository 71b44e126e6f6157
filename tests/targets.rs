//! Several targets side by side: two `volley serve` instances (one with
//! added latency) as two targets of one scenario, each receiving the same
//! requests, counted exactly on both sides, with the ratio to the first in
//! every output.

mod common;

use std::process::Stdio;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::Value;
use volley::serve::{ServeConfig, ServerHandle};

use common::bin::{temp_dir, text, volley, wait_or_kill};

const REQUESTS: u64 = 400;

fn server(latency: &str) -> ServerHandle {
    volley::serve::spawn(ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        latency: latency.parse().unwrap(),
        ..Default::default()
    })
    .unwrap()
}

fn run(args: &[&str], name: &str) -> (std::path::PathBuf, String) {
    let out = temp_dir(name);
    let child = volley()
        .arg("run")
        .args(args)
        .args(["--no-tui", "-q", "--out"])
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let output = wait_or_kill(child, Duration::from_secs(120));
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}{}", text(&output.stderr));
    (out, stdout)
}

fn json(path: &std::path::Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// Each method's calls in a target's own summary.
fn calls_by_method(summary: &Value) -> Vec<(String, u64)> {
    summary["summary"]["methods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["method"].as_str().unwrap().to_string(),
                m["calls"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn two_targets_get_the_same_requests_and_every_output_sets_them_side_by_side() {
    let (fast, slow) = (server("0ms"), server("2ms"));
    let dir = temp_dir("targets-file");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("two.toml");
    std::fs::write(
        &file,
        format!(
            r#"seed = 9
targets = [{{ name = "fast", url = "http://{}" }}, {{ name = "slow", url = "http://{}" }}]
[load]
concurrency = 8
requests = {REQUESTS}
[[calls]]
method = "eth_chainId"
weight = 3
[[calls]]
method = "eth_getBalance"
params = ["0x${{hex(20)}}", "latest"]
[thresholds]
checks = ["p99 < 60s"]
"#,
            fast.addr, slow.addr
        ),
    )
    .unwrap();
    let (out, stdout) = run(&[file.to_str().unwrap()], "targets");

    // Counted on both sides: each server answered every call, no more.
    assert_eq!(fast.stats.calls.load(Ordering::Relaxed), REQUESTS);
    assert_eq!(slow.stats.calls.load(Ordering::Relaxed), REQUESTS);
    let (own_fast, own_slow) = (
        json(&out.join("fast/summary.json")),
        json(&out.join("slow/summary.json")),
    );
    // Request N is drawn from the seed and N: the same mix on both, call
    // for call, whatever the connections made of the order.
    assert_eq!(calls_by_method(&own_fast), calls_by_method(&own_slow));
    assert_eq!(
        calls_by_method(&own_fast).iter().map(|m| m.1).sum::<u64>(),
        REQUESTS
    );
    assert_eq!(own_fast["meta"]["seed"], 9);

    // summary.json: both runs whole, and the ratios to the first.
    let both = json(&out.join("summary.json"));
    let targets = both["targets"].as_array().unwrap();
    assert_eq!(
        targets
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["fast", "slow"]
    );
    let p99 = |s: &Value| s["summary"]["total"]["latency"]["p99_ms"].as_f64().unwrap();
    let total_ratio = |t: &Value| {
        t["ratios"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r[0] == "TOTAL")
            .unwrap()[1]
            .clone()
    };
    assert!(
        total_ratio(&targets[0]).is_null(),
        "the first is the measure of the others"
    );
    let ratio = total_ratio(&targets[1])["p99"].as_f64().unwrap();
    assert!((ratio - p99(&own_slow) / p99(&own_fast)).abs() < 1e-9);

    // summary.csv: a target column, each row's ratio columns.
    let csv = std::fs::read_to_string(out.join("summary.csv")).unwrap();
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    let head: Vec<String> = reader.headers().unwrap().iter().map(str::to_string).collect();
    assert_eq!(head[0], "target");
    assert_eq!(
        &head[head.len() - 3..],
        ["calls_per_s_ratio", "p50_ratio", "p99_ratio"]
    );
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 6, "two methods and TOTAL, for each target");
    let slow_total = rows.iter().find(|r| &r[0] == "slow" && &r[1] == "TOTAL").unwrap();
    assert_eq!(slow_total[2].parse::<u64>().unwrap(), REQUESTS);
    assert_eq!(
        slow_total[head.len() - 1].parse::<f64>().unwrap(),
        (ratio * 1e4).round() / 1e4
    );

    // latency.hlog: a tag per target and method; report.html and the table.
    let hlog = std::fs::read_to_string(out.join("latency.hlog")).unwrap();
    for tag in ["fast/TOTAL", "slow/TOTAL", "slow/eth_getBalance"] {
        assert!(hlog.contains(&format!("Tag={tag},")), "{tag}");
    }
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(page.contains("<td>slow</td>") && page.contains(&format!("{ratio:.2}x")));
    assert!(stdout.contains("2 targets, the same requests (seed 9), one after another · ratios to fast"));
    assert!(stdout.contains(&format!("{ratio:.2}x")), "{stdout}");
    // The table: each method once, then TOTAL, a row per target with its
    // own figures; valid runs whose threshold held say nothing more.
    let rows: Vec<(String, String, u64)> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("method "))
        .skip(1)
        .take_while(|l| !l.is_empty() && !l.contains(": "))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[0].to_string(), f[1].to_string(), f[2].parse().unwrap())
        })
        .collect();
    let own_calls = |own: &Value, method: &str| {
        calls_by_method(own)
            .into_iter()
            .find(|m| m.0 == method)
            .unwrap()
            .1
    };
    let expected: Vec<(String, String, u64)> = ["eth_chainId", "eth_getBalance"]
        .into_iter()
        .flat_map(|m| {
            [
                (m.to_string(), "fast".to_string(), own_calls(&own_fast, m)),
                (m.to_string(), "slow".to_string(), own_calls(&own_slow, m)),
            ]
        })
        .chain([
            ("TOTAL".to_string(), "fast".to_string(), REQUESTS),
            ("TOTAL".to_string(), "slow".to_string(), REQUESTS),
        ])
        .collect();
    assert_eq!(rows, expected, "{stdout}");
    assert!(
        !stdout.contains("not valid") && !stdout.contains("threshold failed"),
        "{stdout}"
    );

    // timeseries.csv: one head with a target column, then each target's own
    // rows, named.
    let series = std::fs::read_to_string(out.join("timeseries.csv")).unwrap();
    let own_series = |name: &str| std::fs::read_to_string(out.join(name).join("timeseries.csv")).unwrap();
    let fast_series = own_series("fast");
    let mut expected = format!("target,{}\n", fast_series.lines().next().unwrap());
    for name in ["fast", "slow"] {
        for line in own_series(name).lines().skip(1) {
            expected.push_str(&format!("{name},{line}\n"));
        }
    }
    assert_eq!(series, expected);
    assert!(series.lines().count() > 2, "{series}");
}

#[test]
fn targets_given_as_flags_run_at_once_when_asked() {
    let (a, b) = (server("0ms"), server("1ms"));
    let (url_a, url_b) = (format!("http://{}", a.addr), format!("http://{}", b.addr));
    let (out, _) = run(
        &[
            "--target",
            &url_a,
            "--target",
            &url_b,
            "--method",
            "eth_chainId",
            "-n",
            "300",
            "-c",
            "4",
            "--parallel-targets",
        ],
        "targets-parallel",
    );
    assert_eq!(a.stats.calls.load(Ordering::Relaxed), 300);
    assert_eq!(b.stats.calls.load(Ordering::Relaxed), 300);
    let both = json(&out.join("summary.json"));
    assert_eq!(both["order"], "parallel");
    let names: Vec<String> = both["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        names,
        [a.addr.to_string(), b.addr.to_string()],
        "named by host and port"
    );
    for name in &names {
        assert_eq!(
            json(&out.join(name).join("summary.json"))["summary"]["total"]["calls"],
            300
        );
    }
}

#[test]
fn targets_are_named_once_and_not_beside_a_target() {
    let refused = |text: &str| {
        volley::scenario::Scenario::parse(text, "t.toml", "t", &|_| None)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    let calls = "[[calls]]\nmethod = \"m\"\n";
    let both = refused(&format!(
        "target = \"http://a:1\"\ntargets = [{{ url = \"http://b:1\" }}]\n{calls}"
    ));
    assert!(
        both.contains(
            "key `targets`: give `targets` (several to compare) or `target`/`command` (one), not both"
        ),
        "{both}"
    );
    let twice = refused(&format!("targets = [{{ name = \"x\", url = \"http://a:1\" }}, {{ name = \"x\", url = \"http://b:1\" }}]\n{calls}"));
    assert!(
        twice.contains("key `targets[1].name`: `x` names two targets"),
        "{twice}"
    );
    let path = refused(&format!(
        "targets = [{{ name = \"../up\", url = \"http://a:1\" }}]\n{calls}"
    ));
    assert!(path.contains("key `targets[0].name`: a name is needed"), "{path}");
    let scheme = refused(&format!(
        "targets = [{{ url = \"http://a:1\" }}, {{ url = \"ftp://x\" }}]\n{calls}"
    ));
    assert!(
        scheme.contains("key `targets[1].url`: scheme `ftp` is not supported"),
        "{scheme}"
    );
    let one = refused(&format!("target = \"ftp://x\"\n{calls}"));
    assert!(
        one.contains("t.toml:1:10: key `target`: scheme `ftp` is not supported"),
        "{one}"
    );
    let named = volley::scenario::NamedTarget::from_urls(&[
        "http://h:1/a".into(),
        "http://h:1/b".into(),
        "builtin".into(),
        // A password or a token in the URL names nothing: names go into
        // directories and the metrics' `target` label.
        "https://alice:s3cret@node.example/rpc".into(),
        "https://t0ken@node.example?key=1".into(),
    ]);
    let names: Vec<&str> = named.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        ["h:1", "h:1-2", "builtin", "node.example", "node.example-2"]
    );
}

#[test]
fn a_target_answering_one_method_differently_is_caught_with_its_rate_and_example() {
    let same = server("0ms");
    let differs = volley::serve::spawn(ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        differ: vec!["add".into()],
        ..Default::default()
    })
    .unwrap();
    let dir = temp_dir("targets-equality");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("equal.toml");
    std::fs::write(
        &file,
        format!(
            r#"seed = 2
targets = [{{ name = "same", url = "http://{}" }}, {{ name = "differs", url = "http://{}" }}]
[load]
concurrency = 4
requests = 300
[[calls]]
method = "eth_chainId"
[[calls]]
method = "add"
params = [1, 2]
[[calls]]
method = "echo"
params = {{ text = "${{int(1, 9)}}", n = 7 }}
batch = 2
[[calls]]
method = "eth_blockNumber"
[equality]
sample = "100%"
rules = [{{ method = "eth_block*", rule = "ignore" }}]
"#,
            same.addr, differs.addr
        ),
    )
    .unwrap();
    let (out, stdout) = run(&[file.to_str().unwrap()], "targets-equal");
    let both = json(&out.join("summary.json"));
    let equality = &both["equality"];
    let own = json(&out.join("same/summary.json"));
    let calls_of = |method: &str| {
        calls_by_method(&own)
            .into_iter()
            .find(|m| m.0 == method)
            .unwrap()
            .1
    };
    let method = |name: &str| {
        equality["methods"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["method"] == name)
            .unwrap()
            .clone()
    };
    // Every call compared but those a rule ignores, which are said to be
    // ignored: the one method that differs differs every time.
    let ignored = calls_of("eth_blockNumber");
    assert!(ignored > 0);
    assert_eq!(method("eth_blockNumber")["ignored"], ignored);
    assert_eq!(method("eth_blockNumber")["compared"], 0);
    assert_eq!(equality["ignored"], ignored);
    assert_eq!(equality["compared"], total_calls(&own) - ignored);
    assert_eq!(equality["not_compared"], 0);
    assert!(
        stdout.contains(&format!(
            "eth_blockNumber          differs          {ignored:>7} ignored (a rule without a pointer"
        )),
        "{stdout}"
    );
    assert_eq!(method("add")["compared"], calls_of("add"));
    assert_eq!(method("add")["mismatched"], calls_of("add"));
    assert_eq!(method("add")["mismatch_rate"], 1.0);
    for alike in ["eth_chainId", "echo"] {
        assert_eq!(method(alike)["mismatched"], 0, "{alike}");
        assert_eq!(method(alike)["compared"], calls_of(alike), "{alike}");
    }
    let example = &method("add")["examples"][0];
    assert_eq!(example["target"], "differs");
    assert_eq!(
        example["differences"][0],
        "the result: 3 against \"volley serve --differ\""
    );
    let again = example["reproduce"].as_str().unwrap();
    assert!(
        again.starts_with("curl -sS -X POST") && again.ends_with(&format!("http://{}", differs.addr)),
        "{again}"
    );
    assert!(
        again.contains(r#""method":"add""#) && again.contains(r#""params":[1,2]"#),
        "{again}"
    );
    assert!(stdout.contains("answered otherwise"), "{stdout}");
    assert_eq!(method("add")["target"], "differs");

    // --fail-on-diff makes the difference a failed check.
    let failed = volley()
        .args([
            "run",
            file.to_str().unwrap(),
            "--no-tui",
            "-q",
            "--fail-on-diff",
            "--out",
        ])
        .arg(temp_dir("targets-equal-fail"))
        .output()
        .unwrap();
    assert_eq!(failed.status.code(), Some(2));
}

/// Calls (not notifications) in a run's own summary.
fn total_calls(summary: &Value) -> u64 {
    summary["summary"]["total"]["calls"].as_u64().unwrap()
}

#[test]
fn a_warmup_by_time_still_leaves_requests_to_compare() {
    let (a, b) = (server("0ms"), server("1ms"));
    let (url_a, url_b) = (format!("http://{}", a.addr), format!("http://{}", b.addr));
    let (out, _) = run(
        &[
            "--target",
            &url_a,
            "--target",
            &url_b,
            "--method",
            "eth_chainId",
            "-n",
            "200",
            "-c",
            "2",
            "--warmup",
            "300ms",
            "--fail-on-diff",
            "--check-equal-sample",
            "100%",
        ],
        "targets-warmup",
    );
    let equality = &json(&out.join("summary.json"))["equality"];
    // Request N is the same on both, warmup or not: every one both sent is compared, alike.
    assert!(equality["compared"].as_u64().unwrap() >= 200, "{equality:#}");
    assert_eq!(equality["mismatched"], 0);
    // The faster target's warmup went further: the requests the other never
    // sent are outside the comparison, not calls left out of it.
    assert_eq!(equality["not_compared"], 0, "{equality:#}");
}

#[test]
fn a_bad_second_target_stops_the_run_before_the_first_is_sent_to() {
    let first = server("0ms");
    let out = temp_dir("targets-bad-second");
    let done = volley()
        .args([
            "run",
            "--target",
            &format!("http://{}", first.addr),
            "--target",
            "ftp://x",
            "--method",
            "eth_chainId",
            "-n",
            "50",
            "-q",
            "--no-tui",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(done.status.code(), Some(1));
    assert!(
        text(&done.stderr).contains("target x: target `ftp://x`: scheme `ftp` is not supported"),
        "{}",
        text(&done.stderr)
    );
    assert_eq!(first.stats.calls.load(Ordering::Relaxed), 0, "nothing was sent");
    assert!(!out.exists(), "no results directory left behind");
}

#[test]
fn a_directory_of_several_runs_is_not_read_as_one() {
    let (a, b) = (server("0ms"), server("0ms"));
    let (out, _) = run(
        &[
            "--target",
            &format!("http://{}", a.addr),
            "--target",
            &format!("http://{}", b.addr),
            "--method",
            "eth_chainId",
            "-n",
            "50",
        ],
        "targets-report",
    );
    for command in [
        vec!["report", out.to_str().unwrap()],
        vec!["compare", out.to_str().unwrap(), out.to_str().unwrap()],
    ] {
        let refused = volley().args(&command).output().unwrap();
        assert_eq!(refused.status.code(), Some(1), "{command:?}");
        assert!(
            text(&refused.stderr).contains("holds several targets' runs"),
            "{}",
            text(&refused.stderr)
        );
    }
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(page.contains("targets side by side"), "left as it was");
    // The page says what the table says: no interval, and each verdict.
    assert!(
        page.contains("ratios of one run each: no interval"),
        "report.html"
    );
    assert!(
        page.matches(": verdict: valid").count() >= 2,
        "each target's verdict"
    );
}

#[test]
fn targets_in_turn_under_quiet_print_the_summary_alone_with_each_targets_verdict_and_warnings() {
    let (a, b) = (server("0ms"), server("0ms"));
    let (url_a, url_b) = (format!("http://{}", a.addr), format!("http://{}", b.addr));
    let out = temp_dir("targets-quiet");
    let args = [
        "run",
        "--target",
        &url_a,
        "--target",
        &url_b,
        "--method",
        "eth_chainId",
        "-n",
        "100",
        "-c",
        "2",
    ];
    let child = volley()
        .args(args)
        .args(["--no-tui", "-q", "--out"])
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let output = wait_or_kill(child, Duration::from_secs(120));
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert_eq!(output.status.code(), Some(0), "{stdout}{stderr}");
    assert!(!stderr.contains("target 1/2"), "--quiet: {stderr}");
    for server in [&a, &b] {
        let name = server.addr.to_string();
        assert!(stdout.contains(&format!("{name}: verdict: valid")), "{stdout}");
        // 100 calls take well under the 2 s compare needs: each says so.
        assert!(
            stdout.contains(&format!("{name}: warning: a measured run of")),
            "{stdout}"
        );
    }
}
