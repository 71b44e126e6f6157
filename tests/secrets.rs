//! A target URL's secrets never reach an output. One run, and one
//! comparison of two targets, through every output volley has: stdout,
//! stderr, every file in the results directory, the Markdown summary (and
//! `$GITHUB_STEP_SUMMARY`), JUnit, the live page, its events and
//! `/metrics`. The URL holds user information, a 32-hex path key and a
//! query key; none of the three shows anywhere, while the host still names
//! the target.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, ChildStderr, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use volley::serve::{ServeConfig, ServerHandle};

use common::bin::{temp_dir, text, volley, wait_or_kill};

const PASSWORD: &str = "hunter2pass";
const PATH_KEY: &str = "0123456789abcdef0123456789abcdef";
const QUERY_KEY: &str = "QUERYKEY789";

/// The built-in server; `differ` names methods it answers with a result
/// of its own, so a comparison shows a mismatch (and how to send it again).
fn server_differing(differ: &[&str]) -> ServerHandle {
    volley::serve::spawn(ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        differ: differ.iter().map(|m| m.to_string()).collect(),
        ..Default::default()
    })
    .unwrap()
}

fn server() -> ServerHandle {
    server_differing(&[])
}

/// The server's URL with the three secrets in it.
fn secret_url(server: &ServerHandle) -> String {
    format!(
        "http://alice:{PASSWORD}@{}/v3/{PATH_KEY}?apikey={QUERY_KEY}",
        server.addr
    )
}

/// Which of the three secrets `text` holds, named by what they are.
fn secrets_in(text: &str) -> Vec<&'static str> {
    [
        ("password", PASSWORD),
        ("path key", PATH_KEY),
        ("query key", QUERY_KEY),
    ]
    .into_iter()
    .filter(|(_, secret)| text.contains(secret))
    .map(|(name, _)| name)
    .collect()
}

/// Every file under `dir`, each with what it holds (bytes read as text)
/// and its path, which must hide the secrets too.
fn files_under(dir: &Path) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(files_under(&path));
        } else {
            found.push((path.display().to_string(), text(&std::fs::read(&path).unwrap())));
        }
    }
    found
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

/// stderr, drained by a thread into a channel, line by line.
fn lines_of(stderr: ChildStderr) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    rx
}

/// Kills the run when a test fails before it ended.
struct Guard(Option<Child>);

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(child) = self.0.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Runs `volley run` with `args` and every output on: the live views on
/// free ports (lingering), the Markdown summary, `$GITHUB_STEP_SUMMARY`
/// and JUnit. Returns everything it showed and wrote: (where, text).
fn every_output(args: &[String], scratch: &Path) -> Vec<(String, String)> {
    let out = scratch.join("results");
    let (md, junit, step) = (
        scratch.join("summary.md"),
        scratch.join("junit.xml"),
        scratch.join("step.md"),
    );
    let child = volley()
        .arg("run")
        .args(args)
        .args([
            "--no-tui",
            "--metrics-listen",
            "127.0.0.1:0",
            "--web-listen",
            "127.0.0.1:0",
        ])
        .args(["--linger", "60s", "--threshold", "p99 < 10s"])
        .arg("--summary-md")
        .arg(&md)
        .arg("--junit")
        .arg(&junit)
        .arg("--out")
        .arg(&out)
        .env("GITHUB_STEP_SUMMARY", &step)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut run = Guard(Some(child));
    let child = run.0.as_mut().unwrap();
    let stderr = lines_of(child.stderr.take().unwrap());
    let mut said = String::new();
    let (mut metrics, mut page) = (None, None);
    while metrics.is_none() || page.is_none() {
        let line = stderr
            .recv_timeout(Duration::from_secs(60))
            .expect("the addresses are said");
        let address = |prefix: &str| Some(line.strip_prefix(prefix)?.trim_end_matches('/').to_string());
        metrics = metrics.or(address("volley: metrics at http://").map(|a| a.replace("/metrics", "")));
        page = page.or(address("volley: live page at http://"));
        said.push_str(&line);
        said.push('\n');
    }
    let (metrics, page) = (metrics.unwrap(), page.unwrap());
    let mut shown = vec![("the page, while it runs".to_string(), get(&page, "/"))];
    // The events while the run goes, then the final one.
    let mut events = TcpStream::connect(&page).unwrap();
    write!(events, "GET /events HTTP/1.1\r\nHost: {page}\r\n\r\n").unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut printed = String::new();
    while !printed.contains("results: ") {
        let mut line = String::new();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "the run ended early: {printed}"
        );
        printed.push_str(&line);
    }
    shown.push(("/metrics".to_string(), get(&metrics, "/metrics")));
    shown.push(("the page, lingering".to_string(), get(&page, "/")));
    let mut streamed = String::new();
    events.read_to_string(&mut streamed).unwrap();
    assert!(streamed.contains("\"kind\":\"final\""), "{streamed}");
    shown.push(("/events".to_string(), streamed));

    let child = run.0.take().unwrap();
    // SAFETY: kill(2) on the child this test started, by its id.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let output = wait_or_kill(child, Duration::from_secs(60));
    while let Ok(line) = stderr.recv_timeout(Duration::from_secs(10)) {
        said.push_str(&line);
        said.push('\n');
    }
    printed.push_str(&text(&output.stdout));
    assert_eq!(output.status.code(), Some(0), "{printed}{said}");
    shown.push(("stdout".to_string(), printed));
    shown.push(("stderr".to_string(), said));
    for file in [&md, &junit, &step] {
        shown.push((file.display().to_string(), std::fs::read_to_string(file).unwrap()));
    }
    shown.extend(files_under(&out));
    shown
}

/// No output holds a secret, in its text or its name.
fn assert_no_secrets(shown: &[(String, String)]) {
    let leaks: Vec<String> = (shown.iter())
        .flat_map(|(place, text)| [place.as_str(), text.as_str()].map(|t| (place, secrets_in(t))))
        .filter(|(_, found)| !found.is_empty())
        .map(|(place, found)| format!("{place}: {found:?}"))
        .collect();
    assert!(leaks.is_empty(), "secrets shown:\n{}", leaks.join("\n"));
}

/// The text of the output named `place`.
fn output<'a>(shown: &'a [(String, String)], place: &str) -> &'a str {
    &(shown.iter().find(|(p, _)| p.ends_with(place)))
        .unwrap_or_else(|| panic!("no output {place}"))
        .1
}

#[test]
fn a_target_urls_secrets_reach_no_output() {
    let server = server();
    let scratch = temp_dir("secrets-one");
    std::fs::create_dir_all(&scratch).unwrap();
    let args: Vec<String> = [
        "--target",
        &secret_url(&server),
        "--method",
        "eth_chainId",
        "-n",
        "2000",
        "-c",
        "4",
    ]
    .map(String::from)
    .to_vec();
    let shown = every_output(&args, &scratch);
    assert_no_secrets(&shown);
    // The host still names the target, and the files are there to check.
    let host = server.addr.to_string();
    for place in ["stdout", "summary.json", "report.html", "summary.md", "/events"] {
        assert!(
            output(&shown, place).contains(&host),
            "{place}: {}",
            output(&shown, place)
        );
    }
    for place in ["latency.hlog", "timeseries.csv"] {
        assert!(!output(&shown, place).is_empty(), "{place} is written");
    }
    // Requests went to the whole URL: every call was answered.
    assert_eq!(
        server.stats.calls.load(std::sync::atomic::Ordering::Relaxed),
        2000
    );
}

#[test]
fn two_compared_targets_secrets_reach_no_output() {
    let (first, second) = (server(), server_differing(&["eth_chainId"]));
    let scratch = temp_dir("secrets-two");
    std::fs::create_dir_all(&scratch).unwrap();
    let args: Vec<String> = [
        "--target",
        &secret_url(&first),
        "--target",
        &secret_url(&second),
        "--check-equal-sample",
        "100%",
        "--method",
        "eth_chainId",
        "-n",
        "500",
        "-c",
        "2",
    ]
    .map(String::from)
    .to_vec();
    let shown = every_output(&args, &scratch);
    assert_no_secrets(&shown);
    // The answers differed, and the way to send one again names the host.
    let curl = format!("{}/v3/…?apikey=…", second.addr);
    let side_by_side = output(&shown, "results/summary.json");
    assert!(side_by_side.contains(&curl), "{side_by_side}");
    for server in [&first, &second] {
        assert!(output(&shown, "stdout").contains(&server.addr.to_string()));
        assert_eq!(server.stats.calls.load(std::sync::atomic::Ordering::Relaxed), 500);
    }
}

#[test]
fn errors_about_a_target_hide_its_secrets() {
    // Nothing listens on port 1 of loopback; the other two are refused
    // before anything is sent.
    let urls = [
        format!("http://alice:{PASSWORD}@127.0.0.1:1/v3/{PATH_KEY}?apikey={QUERY_KEY}"),
        format!("ftp://alice:{PASSWORD}@127.0.0.1:1/v3/{PATH_KEY}?apikey={QUERY_KEY}"),
        format!("alice:{PASSWORD}@127.0.0.1:1/v3/{PATH_KEY}?apikey={QUERY_KEY}"),
    ];
    for url in urls {
        let output = volley()
            .args(["run", "--no-tui", "--target", &url, "--method", "m", "-n", "1"])
            .output()
            .unwrap();
        let said = format!("{}{}", text(&output.stdout), text(&output.stderr));
        assert_eq!(output.status.code(), Some(1), "{url}: {said}");
        assert!(said.contains("127.0.0.1:1"), "{said}");
        assert_eq!(secrets_in(&said), Vec::<&str>::new(), "{said}");
    }
    // A scenario's mistake shows its line, its URL and header values hidden;
    // `init --from-node` and `tcp://` name the URL the same way.
    let scratch = temp_dir("secret-errors");
    std::fs::create_dir_all(&scratch).unwrap();
    let url = format!("http://alice:{PASSWORD}@127.0.0.1:1/v3/{PATH_KEY}?apikey={QUERY_KEY}");
    let files = [
        format!("target = \"{url}\"\ntypo = 1\n"),
        format!("target = \"{url}\n"),
        format!("targets = [{{ url = \"{url}\", nme = \"a\" }}]\n"),
        format!("target = \"http://127.0.0.1:1\"\n[headers]\nAuthorization = [\"{PASSWORD}\"]\n"),
    ];
    let mut runs: Vec<Vec<String>> = Vec::new();
    for (i, file) in files.iter().enumerate() {
        let path = scratch.join(format!("s{i}.toml"));
        std::fs::write(&path, file).unwrap();
        runs.push(vec!["run".into(), path.display().to_string()]);
    }
    runs.push(vec![
        "init".into(),
        "--from-node".into(),
        url.clone(),
        scratch.join("n.toml").display().to_string(),
    ]);
    runs.push(vec![
        "call".into(),
        format!("tcp://127.0.0.1:1/v3/{PATH_KEY}?apikey={QUERY_KEY}"),
        "m".into(),
    ]);
    runs.push(vec![
        "call".into(),
        format!("tcp://alice:{PASSWORD}@127.0.0.1:1"),
        "m".into(),
    ]);
    for args in runs {
        let output = volley().args(&args).output().unwrap();
        let said = format!("{}{}", text(&output.stdout), text(&output.stderr));
        assert_eq!(output.status.code(), Some(1), "{args:?}: {said}");
        assert_eq!(secrets_in(&said), Vec::<&str>::new(), "{args:?}: {said}");
    }
    let _ = std::fs::remove_dir_all(scratch);
}

#[test]
fn a_call_by_hand_and_a_conformance_check_hide_the_targets_secrets() {
    let server = server();
    let url = secret_url(&server);
    let shown = format!("http://…@{}/v3/…?apikey=…", server.addr);
    let commands: [&[&str]; 3] = [
        &["call", &url, "eth_chainId"],
        &["check", &url],
        &["check", &url, "--json"],
    ];
    for args in commands {
        let output = volley().args(args).output().unwrap();
        let said = format!("{}{}", text(&output.stdout), text(&output.stderr));
        assert!(said.contains(&shown), "{args:?}: {said}");
        assert_eq!(secrets_in(&said), Vec::<&str>::new(), "{args:?}: {said}");
    }
}
