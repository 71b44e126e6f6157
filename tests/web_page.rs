//! The live page as a browser draws it: a run that subscribes, over
//! WebSocket to the built-in server, with `--web-listen` and `--linger`;
//! once it serves the final figures, headless Chromium loads the page and
//! the test reads the DOM it rendered: the verdict, the percentiles with
//! p99.9, the subscriptions, a link to `report.html` that leads to the
//! file. Without Chromium the browser's part is skipped, and says so.
//! The result files are served by their names only, and the buttons
//! steer the run only with `--web-control` and from the page's origin.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use regex::Regex;
use serde_json::Value;
use volley::serve::{ServeConfig, ServerHandle};

use common::bin::{summary_json, temp_dir, volley, wait_or_kill, Guard};

/// Chromium, where this machine has it.
fn chromium() -> Option<PathBuf> {
    let names = ["chromium", "chromium-browser", "google-chrome"];
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| names.map(|name| dir.join(name)))
        .find(|candidate| candidate.is_file())
}

/// The built-in server over WebSocket, a head every 100 ms.
fn server() -> ServerHandle {
    volley::serve::spawn(ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        ws: Some("127.0.0.1:0".parse().unwrap()),
        heads_every: Duration::from_millis(100),
        threads: 1,
        ..ServeConfig::default()
    })
    .unwrap()
}

/// `volley run` of a scenario that subscribes on each of its 2
/// connections, with the page on a free port and `more` flags; and the
/// lines of its stderr as they come.
fn start(
    server: &ServerHandle,
    dir: &Path,
    duration: &str,
    more: &[&str],
) -> (Child, mpsc::Receiver<String>) {
    std::fs::create_dir_all(dir).unwrap();
    let scenario = dir.join("subscribes.toml");
    let text = format!(
        "name = \"subscribes\"\ntarget = \"{}\"\n[load]\nconcurrency = 2\nconnections = 2\nduration = \"{duration}\"\nwarmup = \"0s\"\n\
         [[subscribe]]\nmethod = \"eth_subscribe\"\nparams = [\"newHeads\"]\n\
         [[calls]]\nmethod = \"eth_blockNumber\"\n[[calls]]\nmethod = \"eth_chainId\"\n",
        server.ws_url().unwrap()
    );
    std::fs::write(&scenario, text).unwrap();
    let mut child = volley()
        .arg("run")
        .arg(&scenario)
        .args(["--no-tui", "--web-listen", "127.0.0.1:0", "--out"])
        .arg(dir.join("out"))
        .args(more)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    (child, rx)
}

/// Waits for a line of stderr that starts with `prefix`; returns its rest.
fn said(lines: &mpsc::Receiver<String>, prefix: &str) -> String {
    loop {
        let line = lines
            .recv_timeout(Duration::from_secs(60))
            .expect("volley says it");
        if let Some(rest) = line.strip_prefix(prefix) {
            return rest.to_string();
        }
    }
}

/// `method path` on `addr` with `headers`: the status and the body.
fn request(addr: &str, method: &str, path: &str, headers: &str) -> (u16, Vec<u8>) {
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}Content-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let end = response.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&response[..end]).to_string();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, response[end + 4..].to_vec())
}

/// The text of the element with `id` in `dom`, its tags dropped.
fn text_of(dom: &str, id: &str) -> String {
    let open = Regex::new(&format!(r#"<(\w+)[^>]*\bid="{id}"[^>]*>"#)).unwrap();
    let found = open
        .captures(dom)
        .unwrap_or_else(|| panic!("no #{id} in:\n{dom}"));
    let tag = found[1].to_string();
    let start = found.get(0).unwrap().end();
    let tags = Regex::new(&format!(r"<(/?){tag}\b[^>]*>")).unwrap();
    let mut depth = 1;
    let mut end = dom.len();
    for t in tags.captures_iter(&dom[start..]) {
        depth += if &t[1] == "/" { -1 } else { 1 };
        if depth == 0 {
            end = start + t.get(0).unwrap().start();
            break;
        }
    }
    let text = Regex::new(r"<[^>]*>").unwrap().replace_all(&dom[start..end], " ");
    let text = text
        .replace("&amp;", "&")
        .replace("&lt;", "<")
        .replace("&gt;", ">");
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The DOM Chromium renders of `url`, from a profile of its own.
fn rendered(chromium: &Path, url: &str, profile: &Path) -> String {
    let child = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let output = wait_or_kill(child, Duration::from_secs(60));
    assert!(output.status.success(), "chromium failed: {:?}", output.status);
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn the_finished_runs_page_in_chromium_shows_the_verdict_percentiles_subscriptions_and_links() {
    let server = server();
    let dir = temp_dir("web-page");
    let (child, lines) = start(&server, &dir, "2s", &["--linger", "60s"]);
    let _guard = Guard(Some(child));
    let addr = said(&lines, "volley: live page at http://")
        .trim_end_matches('/')
        .to_string();
    said(&lines, "volley: serving the final figures");
    let out = dir.join("out");
    let summary = summary_json(&out);
    let s = &summary["summary"];

    // The files: report.html as written, nothing outside the list.
    let (status, body) = request(&addr, "GET", "/results/report.html", "");
    assert_eq!(status, 200);
    assert_eq!(body, std::fs::read(out.join("report.html")).unwrap());
    for outside in [
        "/results/../subscribes.toml",
        "/results/%2e%2e/subscribes.toml",
        "/results/",
        "/results/nothing",
    ] {
        assert_eq!(request(&addr, "GET", outside, "").0, 404, "{outside}");
    }
    // Whatever a client asks, the page goes on answering.
    let deep = format!("/results/{}", "a/".repeat(2000));
    for (method, path) in [
        ("POST", "/results/report.html"),
        ("DELETE", "/"),
        ("GET", "/control/%ff"),
        ("PUT", "/control/pause"),
        ("GET", "/results/%ff%fe"),
        ("GET", "/results/report.html%00"),
        ("GET", deep.as_str()),
    ] {
        let status = request(&addr, method, path, "").0;
        assert!((400..500).contains(&status), "{method} {path}: {status}");
    }
    assert_eq!(request(&addr, "GET", "/", "").0, 200);
    let saved = std::fs::read_to_string(out.join("live.html")).unwrap();
    assert!(
        saved.contains("const SAVED=true;"),
        "the page is saved beside the files"
    );
    assert!(
        saved.contains("\"kind\":\"final\""),
        "drawn from the final figures"
    );
    // Without --web-control the buttons steer nothing.
    let origin = format!("Origin: http://{addr}\r\n");
    assert_eq!(request(&addr, "POST", "/control/pause", &origin).0, 403);

    let Some(chromium) = chromium() else {
        println!("SKIPPED: chromium is not installed (apt-get install -y chromium): the page is not checked in a browser");
        return;
    };
    let dom = rendered(&chromium, &format!("http://{addr}/"), &dir.join("chromium"));
    assert_eq!(text_of(&dom, "status"), "finished: the final figures");
    let valid = s["verdict"]["valid"].as_bool().unwrap();
    let verdict = text_of(&dom, "verdicts");
    let expected = if valid {
        "verdict: valid"
    } else {
        "verdict: invalid"
    };
    assert!(verdict.starts_with(expected), "{verdict}");
    assert!(verdict.contains("The run's report: report.html"), "{verdict}");
    assert!(
        dom.contains(r#"<a href="results/report.html">report.html</a>"#),
        "{dom}"
    );

    let spectrum = text_of(&dom, "spectrum");
    assert!(
        spectrum.starts_with("target over p50 p90 p99 p99.9 max"),
        "{spectrum}"
    );
    let l = &s["total"]["latency"];
    let figure = |key: &str| format!("{:.3}", l[key].as_f64().unwrap());
    let whole = ["p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms"]
        .map(figure)
        .join(" ");
    assert!(
        spectrum.contains(&format!("whole run {whole}")),
        "{spectrum} / {whole}"
    );

    let subs = text_of(&dom, "subscriptions");
    let opened = s["subscriptions"]["opened"].as_u64().unwrap();
    assert_eq!(opened, 2, "one a connection");
    let row = Regex::new(r"127\.0\.0\.1:\d+ (\d+) (\d+) (\d+)$").unwrap();
    let counts = row.captures(&subs).unwrap_or_else(|| panic!("{subs}"));
    assert_eq!(counts[1].parse::<u64>().unwrap(), opened, "{subs}");
    assert!(
        counts[2].parse::<u64>().unwrap() > 0,
        "notifications came: {subs}"
    );

    // The page saved beside the files draws the same end, its links to them.
    let saved_url = format!("file://{}", out.join("live.html").display());
    let saved_dom = rendered(&chromium, &saved_url, &dir.join("chromium-saved"));
    let status = text_of(&saved_dom, "status");
    assert_eq!(status, "finished: the final figures, saved at the end of the run");
    assert_eq!(text_of(&saved_dom, "verdicts"), verdict);
    assert!(
        saved_dom.contains(r#"<a href="report.html">report.html</a>"#),
        "{saved_dom}"
    );

    // The p99 and p50 lines, equal or not, are drawn each its own way.
    let latency_chart = Regex::new(r#"(?s)<svg id="latency-chart".*?</svg>"#).unwrap();
    let chart = latency_chart.find(&dom).unwrap().as_str();
    let drawn = Regex::new(r#"<polyline [^>]*stroke-width="([^"]+)"[^>]*>"#).unwrap();
    let lines: Vec<(&str, bool)> = (drawn.captures_iter(chart))
        .map(|c| (c.get(1).unwrap().as_str(), c[0].contains("stroke-dasharray")))
        .collect();
    assert_eq!(lines.len(), 2, "{chart}");
    assert_ne!(lines[0], lines[1], "two lines drawn alike: {chart}");

    // Every y-axis tick reads short: 0.5, 20, 2.5k, never 181635.
    let ticks = Regex::new(r#"class="y-tick"[^>]*>([^<]*)<"#).unwrap();
    let labels: Vec<&str> = ticks
        .captures_iter(&dom)
        .map(|c| c.get(1).unwrap().as_str())
        .collect();
    assert!(labels.len() >= 10, "{labels:?}");
    let short = Regex::new(r"^\d{1,3}(\.\d{1,2})?[kM]?$").unwrap();
    assert!(labels.iter().all(|l| short.is_match(l)), "{labels:?}");
    println!(
        "chromium rendered: {} · {verdict} · {spectrum} · {subs}",
        text_of(&dom, "status")
    );
}

#[test]
fn with_web_control_the_pages_own_posts_pause_and_resume_the_run() {
    let server = server();
    let dir = temp_dir("web-control");
    let (child, lines) = start(&server, &dir, "3s", &["--web-control"]);
    let guard = Guard(Some(child));
    let addr = said(&lines, "volley: live page at http://")
        .trim_end_matches('/')
        .to_string();
    let origin = format!("Origin: http://{addr}\r\n");
    // Elsewhere's POST is refused, whatever it asks.
    let elsewhere = "Origin: http://example.com\r\n";
    assert_eq!(request(&addr, "POST", "/control/pause", elsewhere).0, 403);
    assert_eq!(request(&addr, "GET", "/control/pause", &origin).0, 405);
    // The run steers once it runs: wait for its first figures.
    let events = TcpStream::connect(&addr).unwrap();
    write!(&events, "GET /events HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let running = BufReader::new(events).lines().map_while(Result::ok).find(|line| {
        let Some(json) = line.strip_prefix("data: ") else {
            return false;
        };
        let event: Value = serde_json::from_str(json).unwrap();
        event["targets"][0]["phase"] == "running"
    });
    assert!(running.is_some(), "the run ran");
    assert_eq!(request(&addr, "POST", "/control/pause", &origin).0, 204);
    assert_eq!(request(&addr, "POST", "/control/resume", &origin).0, 204);
    let mut guard = guard;
    let output = wait_or_kill(guard.0.take().unwrap(), Duration::from_secs(60));
    assert!(output.status.success(), "{:?}", output.status);
    let summary = summary_json(&dir.join("out"));
    let steered: Vec<&str> = (summary["summary"]["events"].as_array().unwrap().iter())
        .map(|e| e["what"].as_str().unwrap())
        .collect();
    assert_eq!(steered, ["paused", "resumed"]);
}
