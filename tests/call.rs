//! `volley call`: one call by hand, its answer and the pointers into its
//! result, over every transport, under a scenario's setup and headers.

mod common;

use common::bin::{temp_dir, text, volley};

/// `volley call` prints the answer and the pointers into its result, so a
/// capture is written from what the server answers; exit 0 for a right
/// answer, 2 for another, 1 when no call could be made.
#[test]
fn call_prints_the_answer_and_the_pointers_into_its_result() {
    let output = volley()
        .args(["call", "builtin", "block", "[3]"])
        .output()
        .unwrap();
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    assert!(stdout.starts_with("block on builtin: ok in "), "{stdout}");
    for line in [
        "\"result\": {",
        "  /transactions                ",
        "  /transactions/*",
        "  /transactions/0/hash",
    ] {
        assert!(stdout.contains(line), "{line} missing from:\n{stdout}");
    }
    let output = volley()
        .args(["call", "builtin", "no_such_method"])
        .output()
        .unwrap();
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(2), "{stdout}");
    assert!(stdout.contains(": rpc_error(-32601) in "), "{stdout}");
    assert!(stdout.contains("\"code\": -32601"), "{stdout}");
    assert!(stdout.contains("no `result` to point into"), "{stdout}");
    let output = volley().args(["call", "builtin", "echo", "7"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(text(&output.stderr).contains("PARAMS must be a JSON array"));
}

/// With --scenario, its setup calls go first on the connection (a failing
/// one stops the call, named), and no header value is shown anywhere.
#[test]
fn call_sends_the_scenarios_setup_first_and_shows_no_header_value() {
    let dir = temp_dir("call-scenario");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("s.toml");
    let setup = |method: &str| {
        format!(
            "target = \"builtin\"\n[[setup]]\nmethod = \"{method}\"\n[[calls]]\nmethod = \"eth_chainId\"\n"
        )
    };
    std::fs::write(&file, setup("no_such_setup")).unwrap();
    let secret = ["-H", "Authorization: Bearer s3cr3t-t0ken"];
    let file_arg = file.to_str().unwrap();
    let output = volley()
        .args(["call", "-", "eth_chainId", "--scenario", file_arg])
        .args(secret)
        .output()
        .unwrap();
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("setup call `no_such_setup` failed: rpc_error(-32601)"),
        "{stderr}"
    );
    std::fs::write(&file, setup("eth_blockNumber")).unwrap();
    let output = volley()
        .args(["call", "-", "eth_chainId", "--scenario", file_arg])
        .args(secret)
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert_eq!(output.status.code(), Some(0), "{stdout}{stderr}");
    assert!(!stdout.contains("s3cr3t") && !stderr.contains("s3cr3t"));
    let output = volley().args(["call", "-", "eth_chainId"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(text(&output.stderr).contains("no --scenario is given"));
    let _ = std::fs::remove_dir_all(dir);
}

/// `volley call` over the stream transports: TCP, WebSocket and a child's
/// stdio (a scenario's `command`, named by TARGET `-`).
#[test]
fn call_speaks_every_transport() {
    let server = volley::serve::spawn(volley::serve::ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        tcp: Some("127.0.0.1:0".parse().unwrap()),
        ws: Some("127.0.0.1:0".parse().unwrap()),
        threads: 1,
        ..Default::default()
    })
    .unwrap();
    let tcp = format!("tcp://{}", server.tcp_addr.unwrap());
    let ws = format!("ws://{}", server.ws_addr.unwrap());
    for target in [server.url(), tcp, ws] {
        let output = volley().args(["call", &target, "eth_chainId"]).output().unwrap();
        let stdout = text(&output.stdout);
        assert_eq!(output.status.code(), Some(0), "{target}: {stdout}");
        assert!(stdout.contains("\"result\": \"0x"), "{target}: {stdout}");
    }
    let dir = temp_dir("call-stdio");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("stdio.toml");
    let command = format!(
        "command = [\"{}\", \"serve\", \"--stdio\"]\n[[calls]]\nmethod = \"eth_chainId\"\n",
        env!("CARGO_BIN_EXE_volley")
    );
    std::fs::write(&file, command).unwrap();
    let output = volley()
        .args(["call", "-", "add", "[2, 3]", "--scenario", file.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}{}", text(&output.stderr));
    assert!(stdout.contains("\"result\": 5"), "{stdout}");
    let _ = std::fs::remove_dir_all(dir);
}
