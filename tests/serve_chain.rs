//! `volley serve`'s chain for flows: a transaction hash handed out on one
//! listener (in a block, or as a sent transaction's) has its receipt on
//! every other after `--receipts-after` asks, counted exactly; the flags'
//! bounds are refused naming the flag; MCP resources are read; and LSP's
//! didOpen and didClose notifications get no answer on stdio.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};
use volley::serve::{self, ServeConfig, ServerStats};

/// A call's request text, id 1.
fn request(method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "method": method, "params": params, "id": 1}).to_string()
}

/// The result of one call over HTTP/1.1; panics on an error answer.
fn over_http(addr: SocketAddr, method: &str, params: Value) -> Value {
    let body = request(method, params);
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let head = format!(
        "POST / HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (_, body) = answer.split_once("\r\n\r\n").expect("an HTTP answer");
    result(body)
}

/// The result of one call as a line (TCP or Unix listener).
fn over_lines(mut stream: impl Read + Write, method: &str, params: Value) -> Value {
    stream
        .write_all(format!("{}\n", request(method, params)).as_bytes())
        .unwrap();
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line).unwrap();
    result(&line)
}

fn over_websocket(addr: SocketAddr, method: &str, params: Value) -> Value {
    use tokio_tungstenite::tungstenite::{client, Message};
    let stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let (mut socket, _) = client(format!("ws://{addr}/"), stream).unwrap();
    socket
        .send(Message::Text(request(method, params).into()))
        .unwrap();
    loop {
        match socket.read().unwrap() {
            Message::Text(text) => return result(&text),
            _ => continue,
        }
    }
}

fn result(text: &str) -> Value {
    let answer: Value = serde_json::from_str(text.trim()).expect("a JSON answer");
    assert!(answer.get("error").is_none(), "an error answer: {answer}");
    answer["result"].clone()
}

fn counts(stats: &ServerStats) -> [u64; 4] {
    let get = ServerStats::get;
    [
        get(&stats.transactions_handed_out),
        get(&stats.receipts_asked),
        get(&stats.receipts_found),
        get(&stats.receipts_unknown),
    ]
}

#[test]
fn every_listener_serves_the_same_chain() {
    let dir = common::bin::temp_dir("chain-unix");
    std::fs::create_dir_all(&dir).unwrap();
    let loopback: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let server = serve::spawn(ServeConfig {
        listen: loopback,
        tcp: Some(loopback),
        ws: Some(loopback),
        unix: Some(dir.join("chain.sock")),
        threads: 1,
        block_transactions: 2,
        receipts_after: 1,
        ..ServeConfig::default()
    })
    .unwrap();
    let (http, tcp, ws) = (server.addr, server.tcp_addr.unwrap(), server.ws_addr.unwrap());
    let unix = server.unix_path.clone().unwrap();
    let by_tcp = |method, params| over_lines(TcpStream::connect(tcp).unwrap(), method, params);
    let by_unix = |method, params| {
        over_lines(
            std::os::unix::net::UnixStream::connect(&unix).unwrap(),
            method,
            params,
        )
    };

    // Listed over HTTP, asked for on each other listener: the first ask
    // is null, the second the receipt.
    let block = over_http(http, "eth_getBlockByNumber", json!(["0x10", false]));
    let hashes = block["transactions"].as_array().unwrap().clone();
    assert_eq!(hashes.len(), 2);
    assert_eq!(
        by_tcp("eth_getTransactionReceipt", json!([hashes[0]])),
        Value::Null
    );
    let receipt = by_unix("eth_getTransactionReceipt", json!([hashes[0]]));
    assert_eq!(receipt["transactionHash"], hashes[0]);
    assert_eq!(receipt["blockHash"], block["hash"]);
    assert_eq!(
        over_websocket(ws, "eth_getTransactionReceipt", json!([hashes[0]])),
        receipt
    );

    // Whole transactions over WebSocket carry the same hashes.
    let full = over_websocket(ws, "eth_getBlockByNumber", json!(["0x10", true]));
    assert_eq!(full["transactions"][1]["hash"], hashes[1]);

    // Sent over TCP, asked for over HTTP.
    let sent = by_tcp("eth_sendRawTransaction", json!(["0x02f86b0180"]));
    assert_eq!(
        over_http(http, "eth_getTransactionReceipt", json!([sent])),
        Value::Null
    );
    assert_eq!(
        over_http(http, "eth_getTransactionReceipt", json!([sent]))["transactionHash"],
        sent
    );

    let never = format!("0x{}", "5a".repeat(32));
    assert_eq!(by_unix("eth_getTransactionReceipt", json!([never])), Value::Null);
    // Handed out: 2 in the block (listed twice), 1 sent. Asked: 3 + 2.
    assert_eq!(counts(&server.stats), [3, 5, 3, 1]);
}

#[test]
fn a_resource_read_is_counted() {
    let server = serve::spawn(ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        ..ServeConfig::default()
    })
    .unwrap();
    let listed = over_http(server.addr, "resources/list", json!({}));
    let uri = listed["resources"][0]["uri"].clone();
    let read = over_http(server.addr, "resources/read", json!({ "uri": uri }));
    assert_eq!(read["contents"][0]["uri"], uri);
    assert_eq!(ServerStats::get(&server.stats.resources_read), 1);
}

/// `volley serve` with `args` fails at once, saying `needle`.
fn refused(args: &[&str], needle: &str) {
    let output = common::bin::volley()
        .arg("serve")
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let output = common::bin::wait_or_kill(output, Duration::from_secs(30));
    assert!(!output.status.success(), "{args:?} started");
    let said = common::bin::text(&output.stderr);
    assert!(said.contains(needle), "{args:?} said: {said}");
}

#[test]
fn flags_past_their_bounds_are_refused_naming_the_flag() {
    refused(&["--block-transactions", "10001"], "--block-transactions");
    refused(&["--receipts-after", "1000001"], "--receipts-after");
    refused(&["--receipts-after=-1"], "--receipts-after");
}

#[test]
fn flags_reach_the_server() {
    let (mut child, url) = common::bin::serve(&["--block-transactions", "3", "--receipts-after", "2"]);
    let addr: SocketAddr = url.trim_start_matches("http://").parse().unwrap();
    let block = over_http(addr, "eth_getBlockByNumber", json!(["earliest", false]));
    let hash = block["transactions"][2].clone();
    let ask = || over_http(addr, "eth_getTransactionReceipt", json!([hash]));
    assert_eq!((ask(), ask()), (Value::Null, Value::Null));
    assert_eq!(ask()["transactionIndex"], "0x2");
    child.kill().unwrap();
    let _ = child.wait();
}

/// One LSP message, framed.
fn framed(message: Value) -> Vec<u8> {
    let body = message.to_string();
    format!("Content-Length: {}\r\n\r\n{body}", body.len()).into_bytes()
}

#[test]
fn lsp_notifications_get_no_answer_on_stdio() {
    let mut child = common::bin::volley()
        .args([
            "serve",
            "--stdio",
            "--framing",
            "content-length",
            "--threads",
            "1",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let document = json!({"uri": "file:///a.py", "languageId": "python", "version": 1, "text": "x = 1\n"});
    let mut input = Vec::new();
    for message in [
        json!({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": document}}),
        json!({"jsonrpc": "2.0", "method": "textDocument/didClose", "params": {"textDocument": {"uri": "file:///a.py"}}}),
        json!({"jsonrpc": "2.0", "method": "shutdown", "id": 1}),
        json!({"jsonrpc": "2.0", "method": "exit"}),
    ] {
        input.extend(framed(message));
    }
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let output = common::bin::wait_or_kill(child, Duration::from_secs(30));
    assert!(output.status.success(), "{}", common::bin::text(&output.stderr));
    let out = common::bin::text(&output.stdout);
    // The shutdown's answer alone: the notifications got none.
    assert_eq!(out.matches("Content-Length").count(), 1, "{out}");
    let (_, body) = out.split_once("\r\n\r\n").unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(body).unwrap(),
        json!({"jsonrpc": "2.0", "result": null, "id": 1})
    );
}
