//! The live endpoints of the real binary (`--metrics-listen`,
//! `--web-listen`) against clients that connect and send nothing: a
//! thousand such connections to each keep neither a scrape nor the page
//! out; a connection that sends nothing, or nothing more after its answer,
//! is closed; a page reading `/events` is not. Both take a loopback address
//! only unless told, and there answer only a `Host` that names loopback.
//! Every server here listens on loopback, and the run's load is 10 calls a
//! second to one of them, until the test ends it.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::bin::{live_addresses, temp_dir, text, volley, Guard};
use volley::serve::{ServeConfig, ServerHandle};

/// Idle connections held to each endpoint.
const IDLE: usize = 1000;

/// A hang guard on each read, not a timing assertion: an answer held up by
/// the idle connections never comes.
const GUARD: Duration = Duration::from_secs(10);

/// The hang guard on a connection the endpoint should close. The rule
/// closes it 2 s after its last answer or its coming; the old rule took
/// 10 s, and a guard above that could not tell them apart. 6 s of slack is
/// a hang guard still: scheduling delay is tens of milliseconds.
const CLOSE_GUARD: Duration = Duration::from_secs(8);

fn server() -> ServerHandle {
    volley::serve::spawn(ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        ..Default::default()
    })
    .unwrap()
}

/// `volley run` against `server` at 10 calls a second, for longer than a
/// test takes (the guard ends it), with both endpoints on free loopback
/// ports; `more` adds flags. Returns the run and (metrics, page) addresses.
fn start(server: &ServerHandle, name: &str, more: &[&str]) -> (Guard, String, String) {
    let mut child = volley()
        .args([
            "run",
            "--no-tui",
            "--method",
            "eth_chainId",
            "--rate",
            "10",
            "-d",
            "120s",
        ])
        .args(["--target", &server.url()])
        .args(["--metrics-listen", "127.0.0.1:0", "--web-listen", "127.0.0.1:0"])
        .args(more)
        .arg("--out")
        .arg(temp_dir(name))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (metrics, page) = live_addresses(child.stderr.take().unwrap());
    (Guard(Some(child)), metrics, page)
}

/// Room for `n` more open files in this process (and the run it starts),
/// the soft limit raised toward the hard one; false, said, where the hard
/// limit is too low.
fn room_for(n: u64) -> bool {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct it is given.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) }, 0);
    let wanted = n + 512;
    if limit.rlim_cur >= wanted {
        return true;
    }
    let raised = libc::rlimit {
        rlim_cur: wanted.min(limit.rlim_max),
        rlim_max: limit.rlim_max,
    };
    // SAFETY: setrlimit reads the struct it is given.
    let set = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0;
    if !set || raised.rlim_cur < wanted {
        eprintln!(
            "skipped: {wanted} open files needed, and the hard limit is {}",
            limit.rlim_max
        );
        return false;
    }
    true
}

/// `n` connections to `addr` that send nothing, held open.
fn hold_idle(addr: &str, n: usize) -> Vec<TcpStream> {
    (0..n).map(|_| TcpStream::connect(addr).unwrap()).collect()
}

/// `GET path` on a new connection to `addr` with `Host: host`: the whole
/// response, or what came before the read failed and why.
fn get(addr: &str, path: &str, host: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(GUARD)).unwrap();
    let sent = write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    );
    let mut response = Vec::new();
    let read = sent.and_then(|_| stream.read_to_end(&mut response));
    let mut response = text(&response);
    if let Err(error) = read {
        response.push_str(&format!("\n[read failed: {error}]"));
    }
    response
}

/// Whether the endpoint closes `stream`, read under [`CLOSE_GUARD`].
fn closed(stream: &mut TcpStream) -> bool {
    stream.set_read_timeout(Some(CLOSE_GUARD)).unwrap();
    let mut rest = Vec::new();
    match stream.read_to_end(&mut rest) {
        Ok(_) => true,
        Err(error) => error.kind() == std::io::ErrorKind::ConnectionReset,
    }
}

#[test]
fn a_thousand_idle_connections_to_each_endpoint_keep_out_neither_a_scrape_nor_the_page() {
    if !room_for(2 * IDLE as u64) {
        return;
    }
    let server = server();
    let (_run, metrics, page) = start(&server, "live-idle", &[]);

    let idle_to_metrics = hold_idle(&metrics, IDLE);
    let scrape = get(&metrics, "/metrics", &metrics);
    assert!(scrape.starts_with("HTTP/1.1 200"), "{scrape}");
    assert!(scrape.contains("# TYPE volley_calls_total counter"), "{scrape}");

    let idle_to_page = hold_idle(&page, IDLE);
    let html = get(&page, "/", &page);
    assert!(html.starts_with("HTTP/1.1 200"), "{html}");
    assert!(html.contains("<title>volley · live</title>"), "{html}");
    let mut events = TcpStream::connect(&page).unwrap();
    events.set_read_timeout(Some(GUARD)).unwrap();
    write!(events, "GET /events HTTP/1.1\r\nHost: {page}\r\n\r\n").unwrap();
    let first = BufReader::new(events)
        .lines()
        .map_while(Result::ok)
        .find(|line| line.starts_with("data: "));
    assert!(first.is_some(), "no event");

    // Both answered while the thousand idle connections were held.
    assert_eq!((idle_to_metrics.len(), idle_to_page.len()), (IDLE, IDLE));
}

#[test]
fn a_connection_that_sends_nothing_more_is_closed_but_an_events_reader_is_not() {
    let server = server();
    let (_run, metrics, page) = start(&server, "live-silent", &[]);
    for (addr, not_found) in [(&metrics, "see /metrics\n"), (&page, "see /\n")] {
        let mut silent = TcpStream::connect(addr).unwrap();
        assert!(closed(&mut silent), "{addr}: a connection that sent nothing");

        // Kept alive after one answer, then silent.
        let mut kept = TcpStream::connect(addr).unwrap();
        kept.set_read_timeout(Some(GUARD)).unwrap();
        write!(kept, "GET /nowhere HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
        let mut answer = Vec::new();
        let mut buf = [0u8; 1024];
        while !answer.ends_with(not_found.as_bytes()) {
            let n = kept.read(&mut buf).unwrap();
            assert!(n > 0, "{addr}: closed before its answer: {}", text(&answer));
            answer.extend_from_slice(&buf[..n]);
        }
        assert!(text(&answer).starts_with("HTTP/1.1 404"), "{}", text(&answer));
        assert!(closed(&mut kept), "{addr}: idle after its answer");
    }
    // Five events, a second apart: the stream goes on well past the wait
    // for a request's head, which never applies to a request read.
    let mut events = TcpStream::connect(&page).unwrap();
    events.set_read_timeout(Some(GUARD)).unwrap();
    write!(events, "GET /events HTTP/1.1\r\nHost: {page}\r\n\r\n").unwrap();
    let seen = BufReader::new(events)
        .lines()
        .map_while(Result::ok)
        .filter(|line| line.starts_with("data: "))
        .take(5)
        .count();
    assert_eq!(seen, 5, "the stream ended early");
}

#[test]
fn both_endpoints_answer_a_loopback_host_only_unless_public() {
    let server = server();
    let (run, metrics, page) = start(&server, "live-hosts", &[]);
    for (addr, path) in [(&metrics, "/metrics"), (&page, "/")] {
        let port = addr.rsplit_once(':').unwrap().1;
        for host in [
            addr.to_string(),
            format!("localhost:{port}"),
            format!("[::1]:{port}"),
        ] {
            let answer = get(addr, path, &host);
            assert!(answer.starts_with("HTTP/1.1 200"), "Host {host}: {answer}");
        }
        // A page elsewhere that pointed its own name at 127.0.0.1.
        let rebound = get(addr, path, &format!("rebound.example:{port}"));
        assert!(rebound.starts_with("HTTP/1.1 403"), "{rebound}");
        assert!(rebound.contains("-public lets any Host in"), "{rebound}");
    }
    drop(run);
    let public = ["--metrics-listen-public", "--web-listen-public"];
    let (_run, metrics, page) = start(&server, "live-hosts-public", &public);
    for (addr, path) in [(&metrics, "/metrics"), (&page, "/")] {
        let answer = get(addr, path, "rebound.example");
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }
}

#[test]
fn metrics_on_another_address_than_loopback_are_refused_before_anything_is_sent() {
    let server = server();
    let out = temp_dir("live-metrics-public");
    let output = volley()
        .args(["run", "--no-tui", "--method", "eth_chainId", "-n", "10"])
        .args(["--target", &server.url()])
        .args(["--metrics-listen", "0.0.0.0:0", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("--metrics-listen 0.0.0.0:0: not a loopback address"),
        "{stderr}"
    );
    assert!(stderr.contains("give --metrics-listen-public"), "{stderr}");
    assert_eq!(server.stats.calls.load(Ordering::Relaxed), 0, "a call was sent");
    assert!(!out.exists(), "no result directory claimed");
}
