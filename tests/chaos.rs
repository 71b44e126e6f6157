//! volley under every fault of `volley serve --chaos`: each call lands in
//! the right outcome, counted exactly as the server counted its faults, and
//! the run always completes.

mod common;

use std::collections::BTreeMap;

use volley::report::RunReport;
use volley::serve::{self, Chaos, Fault, ServeConfig, ServerHandle, ServerStats};

/// Enough that each fault, drawn at 10% or more, comes far more than the
/// 10 times a test needs (about 32 at 10%), whatever the seed draws.
const REQUESTS: u64 = 320;

fn run(chaos: &str, call: &str, requests: u64, timeout: &str) -> (RunReport, ServerHandle) {
    run_with(chaos, call, requests, timeout, "")
}

/// `run`, with `top` (keys of the scenario's top level) added.
fn run_with(chaos: &str, call: &str, requests: u64, timeout: &str, top: &str) -> (RunReport, ServerHandle) {
    let server = serve::spawn(ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        seed: 11,
        chaos: chaos.parse::<Chaos>().unwrap(),
        ..ServeConfig::default()
    })
    .unwrap();
    let text = format!(
        "target = \"{}\"\ntimeout = \"{timeout}\"\n{top}[load]\nconcurrency = 4\nrequests = {requests}\n[[calls]]\n{call}\n",
        server.url()
    );
    (common::run(&common::scenario(&text)), server)
}

const SINGLE: &str = "method = \"eth_chainId\"";
const BATCH: &str = "method = \"eth_chainId\"\nbatch = 3";

fn faulted(server: &ServerHandle, fault: Fault) -> u64 {
    let n = server.stats.chaos.get(fault);
    assert!(n > 10, "{} was applied {n} times: too few to test", fault.name());
    n
}

fn protocol(report: &RunReport, kind: &str) -> u64 {
    report
        .summary
        .total
        .protocol_errors
        .get(kind)
        .copied()
        .unwrap_or(0)
}

use common::outcomes;

/// Every call of the run was judged, and those not faulted were right.
fn all_judged(report: &RunReport, calls: u64, faulted: u64) {
    assert_eq!(report.summary.total.calls, calls);
    assert_eq!(report.summary.total.ok, calls - faulted, "{:?}", outcomes(report));
}

#[test]
fn wrong_ids_of_both_kinds() {
    let (report, server) = run("wrong-id=0.2,id-type=0.2", SINGLE, REQUESTS, "2s");
    let (wrong, typed) = (faulted(&server, Fault::WrongId), faulted(&server, Fault::IdType));
    assert_eq!(protocol(&report, "id_mismatch"), wrong);
    assert_eq!(protocol(&report, "id_wrong_type"), typed);
    all_judged(&report, REQUESTS, wrong + typed);
}

#[test]
fn batch_answers_missing_doubled_or_padded() {
    let (report, server) = run(
        "batch-missing=0.2,batch-duplicate=0.2,batch-extra=0.2",
        BATCH,
        REQUESTS,
        "2s",
    );
    let missing = faulted(&server, Fault::BatchMissing);
    let duplicate = faulted(&server, Fault::BatchDuplicate);
    let extra = faulted(&server, Fault::BatchExtra);
    assert_eq!(protocol(&report, "missing_entry"), missing);
    assert_eq!(protocol(&report, "duplicate_entry"), duplicate);
    assert_eq!(report.summary.extra_batch_entries, extra);
    all_judged(&report, 3 * REQUESTS, missing + duplicate);
}

#[test]
fn result_with_error_and_wrong_or_missing_versions() {
    let (report, server) = run(
        "result-and-error=0.2,wrong-version=0.15,missing-version=0.15",
        SINGLE,
        REQUESTS,
        "2s",
    );
    let both = faulted(&server, Fault::ResultAndError);
    let versions = faulted(&server, Fault::WrongVersion) + faulted(&server, Fault::MissingVersion);
    assert_eq!(protocol(&report, "result_and_error"), both);
    assert_eq!(protocol(&report, "wrong_version"), versions);
    all_judged(&report, REQUESTS, both + versions);
}

#[test]
fn http_errors_with_and_without_a_json_rpc_body() {
    let (report, server) = run(
        "http-500-body=0.15,http-503-body=0.15,http-500=0.15,http-503=0.15",
        SINGLE,
        REQUESTS,
        "2s",
    );
    let with_body = faulted(&server, Fault::Http500Body) + faulted(&server, Fault::Http503Body);
    let (bare_500, bare_503) = (faulted(&server, Fault::Http500), faulted(&server, Fault::Http503));
    let total = &report.summary.total;
    assert_eq!(total.rpc_error_codes.get(&-32603).copied(), Some(with_body));
    assert_eq!(
        total.http_statuses,
        BTreeMap::from([(500, bare_500), (503, bare_503)])
    );
    let statuses = &report.summary.http_statuses;
    assert_eq!(statuses[&500], bare_500 + faulted(&server, Fault::Http500Body));
    assert_eq!(statuses[&503], bare_503 + faulted(&server, Fault::Http503Body));
    all_judged(&report, REQUESTS, with_body + bare_500 + bare_503);
}

/// Four calls in flight on one pipelined connection: each fault lands on
/// its own call, counted as the server counted it, and no other call is
/// touched (answers are matched to requests by their order).
#[test]
fn faults_are_counted_the_same_on_a_pipelined_connection() {
    let (report, server) = run_with(
        "wrong-id=0.1,id-type=0.1,result-and-error=0.1,http-500-body=0.1,html=0.1",
        SINGLE,
        REQUESTS * 2,
        "2s",
        "pipeline = 8\n",
    );
    let wrong = faulted(&server, Fault::WrongId);
    let typed = faulted(&server, Fault::IdType);
    let both = faulted(&server, Fault::ResultAndError);
    let with_body = faulted(&server, Fault::Http500Body);
    let html = faulted(&server, Fault::Html);
    assert_eq!(protocol(&report, "id_mismatch"), wrong);
    assert_eq!(protocol(&report, "id_wrong_type"), typed);
    assert_eq!(protocol(&report, "result_and_error"), both);
    assert_eq!(
        report.summary.total.rpc_error_codes.get(&-32603).copied(),
        Some(with_body)
    );
    assert_eq!(outcomes(&report).get("invalid_json").copied(), Some(html));
    assert_eq!(
        report.summary.connections.opened_in_all, 1,
        "one connection carried every call"
    );
    all_judged(&report, REQUESTS * 2, wrong + typed + both + with_body + html);
}

#[test]
fn html_and_truncated_bodies_are_invalid_json() {
    let (report, server) = run("html=0.2,truncated=0.2", SINGLE, REQUESTS, "2s");
    let bad = faulted(&server, Fault::Html) + faulted(&server, Fault::Truncated);
    assert_eq!(outcomes(&report).get("invalid_json").copied(), Some(bad));
    all_judged(&report, REQUESTS, bad);
}

#[test]
fn a_trickled_answer_is_slow_but_right() {
    let (report, server) = run("trickle=0.3", SINGLE, REQUESTS, "2s");
    faulted(&server, Fault::Trickle);
    all_judged(&report, REQUESTS, 0);
    assert!(
        report.summary.total.latency.max_ms >= 15.0,
        "three pauses of 5 ms: {:?}",
        report.summary.total.latency
    );
}

#[test]
fn oversized_answers_and_resets_are_io_and_the_run_goes_on() {
    let (report, server) = run("oversized=0.1,reset=0.1", SINGLE, REQUESTS, "2s");
    let broken = faulted(&server, Fault::Oversized) + faulted(&server, Fault::Reset);
    assert_eq!(outcomes(&report).get("io").copied(), Some(broken));
    all_judged(&report, REQUESTS, broken);
}

#[test]
fn a_hung_answer_ends_as_a_timeout() {
    let (report, server) = run("hang=0.2", SINGLE, 120, "200ms");
    let hung = faulted(&server, Fault::Hang);
    assert_eq!(outcomes(&report).get("timeout").copied(), Some(hung));
    all_judged(&report, 120, hung);
    // Never before 200 ms; after it, by what a busy machine delays a timer
    // (tens of ms, once 830 ms on a machine loaded far past its cores). A
    // timeout taken as seconds, or as ten times itself, is far over.
    let max = report.summary.total.latency.max_ms;
    assert!(
        (200.0..2000.0).contains(&max),
        "a timeout is cut at 200 ms, max {max}"
    );
}

#[test]
fn a_stall_holds_answers_but_loses_none() {
    // The stall runs on the server's clock from its start: the run must
    // overlap a stall whenever it starts and however fast it goes. Holding
    // every answer 5 ms, 400 calls 4 at a time take at least 500 ms, so
    // with a stall of 300 ms every 600 ms one begins while calls go on for
    // 200 ms after it: the calls it catches early are held over 100 ms.
    // The timeout is far past any hold: 2 s was once passed by 8 calls on
    // two cores shared with two busy loops and the rest of the suite.
    let server = serve::spawn(ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        latency: "5ms".parse().unwrap(),
        chaos: "stall=300ms/600ms".parse::<Chaos>().unwrap(),
        ..ServeConfig::default()
    })
    .unwrap();
    let text = format!(
        "target = \"{}\"\ntimeout = \"10s\"\n[load]\nconcurrency = 4\nrequests = 400\n[[calls]]\n{SINGLE}\n",
        server.url()
    );
    let report = common::run(&common::scenario(&text));
    let stalled = ServerStats::get(&server.stats.chaos.stalled);
    assert!(stalled > 0);
    all_judged(&report, 400, 0);
    assert!(
        report.summary.total.latency.max_ms >= 100.0,
        "{:?}",
        report.summary.total.latency
    );
}

#[test]
fn a_listener_that_goes_away_and_returns_is_a_gap_not_a_crash() {
    let server = serve::spawn(ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        chaos: "outage=700ms/1500ms".parse().unwrap(),
        ..ServeConfig::default()
    })
    .unwrap();
    let text = format!(
        "target = \"{}\"\ntimeout = \"1s\"\n[load]\nrate = 200\nconnections = 8\nduration = \"6s\"\n[[calls]]\nmethod = \"eth_chainId\"\n",
        server.url()
    );
    let report = common::run(&common::scenario(&text));
    assert!(ServerStats::get(&server.stats.chaos.outages) >= 2);
    let total = &report.summary.total;
    let lost = total.calls - total.ok;
    assert!(
        lost > 0,
        "calls lost in the outage are counted: {:?}",
        outcomes(&report)
    );
    // The server's outages run on its clock: 1.5-2.2 s and 3.0-3.7 s after
    // it starts, the run a moment after it. Connections lost in one are
    // reopened with a backoff of up to 1 s, so how many calls get through
    // between outages depends on when each caller's retries fall, which a
    // busy machine shifts (283 ok of 800 due seen on a loaded box). What it
    // cannot change: calls answered after the first outage began (seconds 2
    // to 5; 4 s of them, as one loaded far past its cores once left the
    // first two without an answer) show the connections were reopened and
    // the run went on.
    let rows = &report.summary.timeseries;
    assert_eq!(rows.len(), 6);
    assert!(
        rows[2..].iter().map(|r| r.ok).sum::<u64>() > 0,
        "the run went on after the first outage: {:?}, {rows:?}",
        outcomes(&report)
    );
    let worst = rows.iter().map(|r| r.ok).min().unwrap();
    let best = rows.iter().map(|r| r.ok).max().unwrap();
    assert!(
        worst < best * 3 / 4,
        "the outage shows as a gap in the time series: {rows:?}"
    );
}

/// The server goes away a second into an open-model run: the calls due
/// then fail to connect, the schedule slips while the callers back off,
/// and the warning names the outage, never the generator.
#[test]
fn a_server_outage_is_blamed_on_the_server_not_the_generator() {
    let server = serve::spawn(ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        ..ServeConfig::default()
    })
    .unwrap();
    let text = format!(
        "target = \"{}\"\ntimeout = \"1s\"\n[load]\nrate = 200\nconnections = 8\nduration = \"3s\"\n[[calls]]\nmethod = \"eth_chainId\"\n",
        server.url()
    );
    let (report, _) = common::run_steered(&text, move |control| {
        common::wait_for_the_start(control);
        // An action, not a timing assertion: the server stops a second in.
        std::thread::sleep(std::time::Duration::from_secs(1));
        server.stop();
    });
    let outcomes = common::outcomes(&report);
    assert!(outcomes.get("connect").copied().unwrap_or(0) > 0, "{outcomes:?}");
    let warnings: Vec<String> = report.summary.warnings.iter().map(|w| w.to_string()).collect();
    let warnings = warnings.join("\n");
    assert!(report.summary.schedule.as_ref().unwrap().behind, "{warnings}");
    assert!(
        warnings.contains("the server could not be reached for part of the run"),
        "{warnings}"
    );
    assert!(!warnings.contains("volley sent late"), "{warnings}");
}

/// A server that holds every connection for a while (a stall), with
/// volley's engine threads idle: the lateness is the server's. It is said
/// so, with the figure of the requests that waited for a connection, never
/// put down to volley (`--threads`), and the figures stay valid.
#[test]
fn lateness_while_the_server_holds_every_connection_is_put_down_to_the_server() {
    let server = serve::spawn(ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        chaos: "stall=1500ms/3s".parse::<Chaos>().unwrap(),
        ..ServeConfig::default()
    })
    .unwrap();
    let text = format!(
        "target = \"{}\"\n[load]\nrate = 100\nconnections = 10\nduration = \"4s\"\n[[calls]]\nmethod = \"eth_chainId\"\n",
        server.url()
    );
    let report = common::run(&common::scenario(&text));
    let schedule = report.summary.schedule.as_ref().unwrap();
    assert!(schedule.behind && schedule.late_requests > 0, "{schedule:?}");
    assert!(
        schedule.late_for_connections * 2 >= schedule.late_requests,
        "most late requests waited for a connection: {schedule:?}"
    );
    let warnings: Vec<String> = report.summary.warnings.iter().map(|w| w.to_string()).collect();
    let warnings = warnings.join("\n");
    assert!(
        warnings.contains("the server did not keep up with the offered rate"),
        "{warnings}"
    );
    assert!(
        !warnings.contains("--threads") && !warnings.contains("volley sent late"),
        "{warnings}"
    );
    assert!(report.summary.verdict.valid, "{:?}", report.summary.verdict);
}

/// An outage ends every connection of its time, one that has not yet sent
/// its first byte too (the server waits to see whether it opens with TLS).
#[test]
fn an_outage_closes_a_connection_that_has_sent_nothing() {
    use std::io::Read;
    let server = serve::spawn(ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        chaos: "outage=300ms/600ms".parse().unwrap(),
        ..ServeConfig::default()
    })
    .unwrap();
    let mut idle = std::net::TcpStream::connect(server.addr).unwrap();
    // A hang guard, not a timing assertion: the server closes it at its
    // next outage, well within this.
    idle.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    let read = idle.read(&mut [0u8; 16]);
    // Closed: the end of the stream, or a reset; never the guard's timeout.
    let timed_out = matches!(&read, Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut));
    assert!(matches!(read, Ok(0) | Err(_)) && !timed_out, "{read:?}");
    assert!(ServerStats::get(&server.stats.chaos.outages) >= 1);
}
