//! Watching a comparison live: two built-in servers (one slower) driven at
//! once by the real binary with `--parallel-targets`, `--metrics-listen`
//! and `--web-listen`. The metrics name both targets, and their latency
//! histograms count every call of the run, exactly; the page's event
//! stream names both while the run goes; and a client that holds the
//! stream open does not keep the run from ending.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::Value;
use volley::serve::{ServeConfig, ServerHandle};

use common::bin::{live_addresses, summary_json, temp_dir, text, volley, wait_or_kill, Guard};

const REQUESTS: u64 = 3000;

fn server(latency: &str) -> ServerHandle {
    volley::serve::spawn(ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        latency: latency.parse().unwrap(),
        ..Default::default()
    })
    .unwrap()
}

/// `volley run` against both servers at once, with the live views on free
/// ports, its output piped; `more` adds flags.
fn start(fast: &ServerHandle, slow: &ServerHandle, out: &std::path::Path, more: &[&str]) -> Child {
    volley()
        .args([
            "run",
            "--parallel-targets",
            "--no-tui",
            "-c",
            "4",
            "--method",
            "eth_chainId",
        ])
        .args(["--target", &fast.url(), "--target", &slow.url()])
        .args(["-n", &REQUESTS.to_string()])
        .args(["--metrics-listen", "127.0.0.1:0", "--web-listen", "127.0.0.1:0"])
        .args(more)
        .arg("--out")
        .arg(out)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// `GET path` on `addr`, the whole response.
fn get(addr: &str, path: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

/// `/events`, opened: the connection, its request sent.
fn open_events(addr: &str) -> TcpStream {
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(stream, "GET /events HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    stream
}

/// Every event a stream delivers until it ends, each as JSON.
fn events(stream: TcpStream) -> Vec<Value> {
    BufReader::new(stream)
        .lines()
        .map_while(Result::ok)
        .filter_map(|line| {
            line.strip_prefix("data: ")
                .map(|json| serde_json::from_str(json).unwrap())
        })
        .collect()
}

/// The value of each sample named `series` in Prometheus text, by its labels.
fn samples(body: &str, series: &str) -> BTreeMap<String, f64> {
    body.lines()
        .filter_map(|line| line.strip_prefix(series)?.strip_prefix('{'))
        .map(|rest| {
            let (labels, value) = rest.rsplit_once("} ").unwrap();
            (labels.to_string(), value.parse().unwrap())
        })
        .collect()
}

/// Each target's latency histogram in the final metrics counts every call
/// of its run, as its own `summary.json` and its server count them.
fn counted_exactly(last: &str, out: &std::path::Path, names: &[String; 2], servers: [&ServerHandle; 2]) {
    let counts = samples(last, "volley_latency_seconds_count");
    let everything = samples(last, "volley_latency_seconds_bucket");
    for (name, server) in names.iter().zip(servers) {
        let own = summary_json(&out.join(name));
        let calls = own["summary"]["total"]["calls"].as_u64().unwrap();
        assert_eq!(calls, REQUESTS, "{name}");
        assert_eq!(
            server.stats.calls.load(Ordering::Relaxed),
            REQUESTS,
            "{name}'s server"
        );
        let labels = format!("target=\"{name}\",method=\"eth_chainId\"");
        assert_eq!(counts[&labels], calls as f64, "{name}: {last}");
        assert_eq!(
            everything[&format!("{labels},le=\"+Inf\"")],
            calls as f64,
            "{name}"
        );
        // Cumulative: each bucket holds the ones below it.
        let mut buckets: Vec<(f64, f64)> = (everything.iter())
            .filter_map(|(l, n)| {
                let le = l.strip_prefix(&format!("{labels},le=\""))?.trim_end_matches('"');
                Some((le.parse::<f64>().unwrap_or(f64::INFINITY), *n))
            })
            .collect();
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        assert!(buckets.windows(2).all(|w| w[0].1 <= w[1].1), "{buckets:?}");
        assert_eq!(buckets.len(), 42, "41 bounds and +Inf");
        assert!(
            last.contains(&format!("volley_finished{{target=\"{name}\"}} 1")),
            "{last}"
        );
    }
}

/// The stream named both targets, with calls, while the run went, then
/// ended with the final figures.
fn named_while_it_went(seen: &[Value], names: &[String; 2]) {
    let (last_event, ticks) = seen.split_last().expect("events came");
    assert_eq!(last_event["kind"], "final");
    for name in names {
        let with_calls = |event: &Value| {
            (event["targets"].as_array().unwrap().iter())
                .any(|t| t["name"] == name.as_str() && t["whole"]["calls"].as_u64() > Some(0))
        };
        assert!(
            ticks.iter().filter(|e| e["kind"] == "tick").any(with_calls),
            "{name}: {seen:?}"
        );
        assert!(with_calls(last_event), "{name}");
    }
    let final_calls: Vec<u64> = (last_event["targets"].as_array().unwrap().iter())
        .map(|t| t["whole"]["calls"].as_u64().unwrap())
        .collect();
    assert_eq!(final_calls, [REQUESTS, REQUESTS]);
}

#[test]
fn two_targets_at_once_are_watched_live_and_counted_exactly() {
    let (fast, slow) = (server("0ms"), server("4ms"));
    let out = temp_dir("live-targets");
    let mut run = Guard(Some(start(&fast, &slow, &out, &["--linger", "60s"])));
    let child = run.0.as_mut().unwrap();
    let (metrics, page) = live_addresses(child.stderr.take().unwrap());
    let names = [fast.addr.to_string(), slow.addr.to_string()];

    // The page and its stream, while the run goes.
    let html = get(&page, "/");
    assert!(html.starts_with("HTTP/1.1 200"), "{html}");
    assert!(html.contains("new EventSource(\"/events\")"), "{html}");
    let stream = open_events(&page);
    // A target is in the metrics from its run's first snapshot, once its
    // connections are open: asked again until both are.
    let asked = std::time::Instant::now();
    let during = loop {
        let body = get(&metrics, "/metrics");
        if names
            .iter()
            .all(|name| body.contains(&format!("target=\"{name}\"")))
        {
            break body;
        }
        assert!(asked.elapsed() < Duration::from_secs(60), "hang guard: {body}");
        std::thread::sleep(Duration::from_millis(20));
    };
    // While the run goes: the slower target's 3,000 calls over 4
    // connections, each held 4 ms, take 3 s at least.
    let slow_running = format!("volley_finished{{target=\"{}\"}} 0", names[1]);
    assert!(during.contains(&slow_running), "{during}");

    // The run ends, its files are written; the figures are still served.
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut printed = String::new();
    while !printed.contains("results: ") {
        let mut line = String::new();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "the run ended without its results: {printed}"
        );
        printed.push_str(&line);
    }
    counted_exactly(&get(&metrics, "/metrics"), &out, &names, [&fast, &slow]);
    named_while_it_went(&events(stream), &names);

    // A signal ends the linger; the run's own exit code stands.
    let child = run.0.take().unwrap();
    // SAFETY: kill(2) on the child this test started, by its id.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let output = wait_or_kill(child, Duration::from_secs(60));
    assert_eq!(output.status.code(), Some(0), "{printed}{}", text(&output.stderr));
}

#[test]
fn a_page_left_open_does_not_keep_the_run_from_ending() {
    let (fast, slow) = (server("0ms"), server("4ms"));
    let out = temp_dir("live-left-open");
    let mut run = Guard(Some(start(&fast, &slow, &out, &[])));
    let (_, page) = live_addresses(run.0.as_mut().unwrap().stderr.take().unwrap());
    // One client reads nothing at all; another reads to the end.
    let idle = open_events(&page);
    let reader = {
        let stream = open_events(&page);
        std::thread::spawn(move || events(stream))
    };
    // A hang guard, not a timing assertion: a run that waits for its
    // clients never ends.
    let output = wait_or_kill(run.0.take().unwrap(), Duration::from_secs(120));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let seen = reader.join().unwrap();
    assert_eq!(seen.last().map(|e| e["kind"].clone()), Some("final".into()));
    drop(idle);
}

#[test]
fn the_page_on_another_address_than_loopback_is_refused_before_anything_is_sent() {
    // Targets nothing listens on: had volley reached for them first, the
    // error would be theirs.
    let closed = || {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let out = temp_dir("live-public");
    let output = volley()
        .args(["run", "--no-tui", "--method", "eth_chainId", "-n", "10"])
        .args(["--target", &closed(), "--target", &closed()])
        .args(["--web-listen", "0.0.0.0:0", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("--web-listen 0.0.0.0:0: not a loopback address"),
        "{stderr}"
    );
    assert!(stderr.contains("--web-listen-public"), "{stderr}");
    assert!(!out.exists(), "no result directory claimed");
}
