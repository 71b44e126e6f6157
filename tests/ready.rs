//! How fast a stdio server is ready: `[ready]` names the notification that
//! says so (LSP's `$/progress` end), and each child the run spawns (a
//! fresh one each `reconnect_every` requests: cold starts) is reported
//! with its first answer, its ready time and its memory then and at its
//! end. Counts and the order of events are asserted, never durations.

mod common;

use common::bin::{summary_json, temp_dir, text, volley};

/// LSP's handshake and a hover a request.
const LSP_MIX: &str = r#"[[setup]]
method = "initialize"
params = { processId = 0, rootUri = "file:///tmp", capabilities = {} }
[[calls]]
method = "textDocument/hover"
params = { textDocument = { uri = "file:///tmp/a.py" }, position = { line = 0, character = 0 } }
"#;

/// `volley run` of `text` written to `scenario`, its results in `out`:
/// its stdout, once it exited 0.
fn run(scenario: &std::path::Path, text_of: &str, out: &std::path::Path) -> String {
    std::fs::write(scenario, text_of).unwrap();
    let output = volley()
        .arg("run")
        .arg(scenario)
        .args(["--no-tui", "-q", "--out"])
        .arg(out)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    text(&output.stdout)
}

/// A run of `volley serve --stdio` children (LSP framing, `--ready-after`
/// 1ms, each answer held 20 ms) with this `[ready]` table, 40 requests
/// on one connection opened anew every 10 (so exactly 4 children): its
/// summary.json and stdout.
fn lsp_run(name: &str, ready: &str) -> (serde_json::Value, String) {
    let out = temp_dir(name);
    let scenario = out.with_extension("toml");
    let command = env!("CARGO_BIN_EXE_volley");
    let text_of = format!(
        r#"command = ["{command}", "serve", "--stdio", "--framing", "content-length", "--ready-after", "1ms", "--latency", "20ms"]
framing = "content-length"
timeout = "2s"
{ready}
[load]
concurrency = 1
requests = 40
reconnect_every = 10
{LSP_MIX}"#
    );
    let stdout = run(&scenario, &text_of, &out);
    (summary_json(&out), stdout)
}

#[test]
fn each_cold_start_is_timed_to_its_ready_signal_with_its_memory() {
    let signal = "[ready]\nmethod = \"$/progress\"\npointer = \"/value/kind\"\nvalue = \"end\"";
    let (summary, table) = lsp_run("ready-signal", signal);
    let ready = &summary["summary"]["ready"];
    assert_eq!(ready["signal"], "$/progress /value/kind = \"end\"", "{ready}");
    let children = ready["children"].as_array().unwrap();
    assert_eq!(ready["spawns"], 4, "40 requests, 10 a child: {ready}");
    assert_eq!(children.len(), 4);
    assert_eq!(ready["never_ready"], 0, "{ready}");
    let calls: u64 = children.iter().map(|c| c["calls"].as_u64().unwrap()).sum();
    assert_eq!(
        calls,
        4 * (10 + 2),
        "each child's 10 requests, its initialize and LSP's shutdown: {ready}"
    );
    for child in children {
        assert!(child["first_answer_ms"].as_f64().is_some(), "{child}");
        assert!(child["ready_ms"].as_f64().is_some(), "{child}");
        assert!(child["rss_at_ready_bytes"].as_u64().unwrap() > 1 << 20, "{child}");
        assert!(child["rss_at_end_bytes"].as_u64().unwrap() > 1 << 20, "{child}");
    }
    // Each child's peak is at least what it held when read at its ready
    // time and its end (a child living under a second between two
    // readings of the watch had its peak there).
    for usage in summary["summary"]["server"].as_array().unwrap() {
        let child = children.iter().find(|c| c["pid"] == usage["pid"]).unwrap();
        let held = child["rss_at_ready_bytes"]
            .as_u64()
            .max(child["rss_at_end_bytes"].as_u64());
        assert!(
            usage["peak_rss_bytes"].as_u64() >= held,
            "{usage} against {child}"
        );
    }
    let spread = &ready["ready_ms"];
    assert!(
        spread["min"].as_f64() <= spread["p50"].as_f64() && spread["p50"].as_f64() <= spread["max"].as_f64()
    );
    assert!(
        table.contains("ready ($/progress /value/kind = \"end\"): 4 spawns · first answer p50 "),
        "{table}"
    );
}

#[test]
fn without_a_signal_a_child_is_ready_at_its_first_answer_and_one_never_sent_stays_not_ready() {
    let (summary, _) = lsp_run("ready-first-answer", "");
    let ready = &summary["summary"]["ready"];
    assert_eq!(ready["signal"], serde_json::Value::Null);
    for child in ready["children"].as_array().unwrap() {
        assert_eq!(child["ready_ms"], child["first_answer_ms"], "{child}");
    }
    // A signal the server never sends: every child is counted, none ready.
    let never = "[ready]\nmethod = \"textDocument/publishDiagnostics\"";
    let (summary, table) = lsp_run("ready-never", never);
    let ready = &summary["summary"]["ready"];
    assert_eq!(
        (ready["spawns"].as_u64(), ready["never_ready"].as_u64()),
        (Some(4), Some(4))
    );
    assert_eq!(ready["ready_ms"], serde_json::Value::Null);
    assert!(
        table.contains("ready: none") && table.contains("· 4 never ready"),
        "{table}"
    );
}

#[test]
fn a_ready_signal_without_a_command_or_with_a_bad_pointer_is_refused_naming_the_key() {
    let dir = temp_dir("ready-refused");
    std::fs::create_dir_all(&dir).unwrap();
    for (body, says) in [
        (
            "target = \"http://127.0.0.1:9\"\n[ready]\nmethod = \"$/progress\"\n[[calls]]\nmethod = \"m\"\n",
            "key `ready.method`: [ready] names a stdio server's ready signal: it needs a `command`",
        ),
        (
            "command = [\"sh\"]\n[ready]\nmethod = \"$/progress\"\npointer = \"value/kind\"\n[[calls]]\nmethod = \"m\"\n",
            "key `ready.pointer`: a JSON pointer into the notification's params starts with `/`",
        ),
        (
            "command = [\"sh\"]\n[ready]\nmethod = \"$/progress\"\nvalue = \"end\"\n[[calls]]\nmethod = \"m\"\n",
            "key `ready.value`: `value` is what `pointer` reaches",
        ),
    ] {
        let file = dir.join("bad.toml");
        std::fs::write(&file, body).unwrap();
        let output = volley().arg("validate").arg(&file).output().unwrap();
        let said = text(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{said}");
        assert!(said.contains("bad.toml:") && said.contains(says), "{said}");
    }
}

/// Stdio servers side by side: `targets` takes commands as it takes URLs,
/// each target's children reported on their own.
#[test]
fn stdio_servers_side_by_side_each_report_their_own_spawns() {
    let out = temp_dir("ready-side");
    let scenario = out.with_extension("toml");
    let command = env!("CARGO_BIN_EXE_volley");
    let server = |after: &str| {
        format!(
            r#"["{command}", "serve", "--stdio", "--framing", "content-length", "--ready-after", "{after}"]"#
        )
    };
    let text_of = format!(
        r#"targets = [{{ name = "fast", command = {} }}, {{ name = "slow", command = {} }}]
framing = "content-length"
[ready]
method = "$/progress"
[load]
concurrency = 1
requests = 20
reconnect_every = 5
{LSP_MIX}"#,
        server("1ms"),
        server("30ms")
    );
    let table = run(&scenario, &text_of, &out);
    for name in ["fast", "slow"] {
        let ready = &summary_json(&out.join(name))["summary"]["ready"];
        assert_eq!(
            (ready["spawns"].as_u64(), ready["never_ready"].as_u64()),
            (Some(4), Some(0)),
            "{name}: {ready}"
        );
        assert!(
            table.contains(&format!("{name}: ready ($/progress): 4 spawns")),
            "{table}"
        );
    }
}
