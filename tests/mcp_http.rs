//! MCP's streamable HTTP against `volley serve --mcp`: the session id that
//! `initialize` returns is carried on every later request of the
//! connection, answers that come as event streams are found among the
//! other events, and those other events are counted apart.

mod common;

use volley::serve::{self, ServeConfig, ServerHandle, ServerStats};

fn mcp_server() -> ServerHandle {
    serve::spawn(ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        mcp: true,
        threads: 2,
        ..ServeConfig::default()
    })
    .unwrap()
}

fn scenario(url: &str, extra: &str, setup: bool) -> String {
    let setup = if setup { common::MCP_SETUP } else { "" };
    format!(
        r#"
target = "{url}/mcp"
timeout = "5s"
{extra}
[load]
concurrency = 8
connections = 4
requests = 1200
{setup}
[[calls]]
method = "tools/list"
weight = 2
expect = {{ pointer = "/tools/0/name", equals = "add" }}
[[calls]]
method = "ping"
[[calls]]
method = "notifications/progress"
params = {{ progressToken = 1, progress = 1 }}
notification = true
"#
    )
}

#[test]
fn sessions_are_carried_and_event_streams_decoded() {
    for (transport, extra) in [("http/1.1", ""), ("http/2 (h2c)", "http2 = true")] {
        let server = mcp_server();
        let report = common::run(&common::scenario(&scenario(&server.url(), extra, true)));
        let (summary, stats) = (&report.summary, &server.stats);
        assert_eq!(report.meta.transport, transport);
        assert_eq!(summary.requests, 1200, "{transport}");
        assert_eq!(
            summary.total.ok, summary.total.calls,
            "{transport}: {:?}",
            summary.total.outcomes
        );
        assert_eq!(
            ServerStats::get(&stats.mcp_sessions),
            4,
            "{transport}: one session per connection"
        );
        assert_eq!(ServerStats::get(&stats.mcp_refused), 0, "{transport}");
        let setup = summary.setup.as_ref().unwrap();
        assert_eq!((setup.connections_ok, setup.connections_failed), (4, 0));
        // Every answer came as an event stream after a log message: the
        // answers were judged, the log messages counted apart.
        let notifications = summary
            .methods
            .iter()
            .find(|m| m.method == "notifications/progress")
            .unwrap();
        let answered = summary.total.calls - notifications.calls;
        assert_eq!(
            ServerStats::get(&stats.event_streams),
            answered + 4,
            "{transport}: plus the initializes"
        );
        assert_eq!(summary.unsolicited_messages, answered, "{transport}");
        let table = volley::report::render_table(&report);
        assert!(
            table.contains(&format!("\nmessages that answered no call: {answered} (")),
            "{transport}: {table}"
        );
        assert_eq!(
            summary.http_statuses.get(&202),
            Some(&notifications.calls),
            "{transport}"
        );
    }
}

#[test]
fn without_initialize_every_request_is_refused_and_counted() {
    let server = mcp_server();
    let report = common::run(&common::scenario(&scenario(&server.url(), "", false)));
    assert_eq!(report.summary.total.ok, 0);
    assert_eq!(ServerStats::get(&server.stats.mcp_refused), 1200);
    assert_eq!(report.summary.http_statuses.get(&400), Some(&1200));
}
