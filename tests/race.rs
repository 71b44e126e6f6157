//! The head race across targets, by the real binary with
//! `--parallel-targets`: servers on loopback that publish the same heads,
//! each some time after the first, over WebSocket subscriptions and over
//! HTTP polls. Counts are asserted exactly (each head is published well
//! inside the run, far from its ends); timings only by their order, as the
//! machine's load may stretch them.

mod common;

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::bin::{temp_dir, text, volley, wait_or_kill};
use futures_util::{SinkExt, StreamExt};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use std::process::Stdio;
use tokio_tungstenite::tungstenite::Message;

/// Heads every server publishes, each at `start + offset + every * i`:
/// one chain, several nodes that hear of it at different times.
struct Chain {
    heads: usize,
    every: Duration,
    /// Set once every target listens, with a lead-in after.
    start: OnceLock<Instant>,
    /// Subscriptions (or polls) seen, all servers together.
    listening: AtomicUsize,
    /// How many of those make the chain start.
    wanted: usize,
}

impl Chain {
    fn new(heads: usize, every: Duration, wanted: usize) -> Arc<Chain> {
        Arc::new(Chain {
            heads,
            every,
            start: OnceLock::new(),
            listening: AtomicUsize::new(0),
            wanted,
        })
    }

    /// Counts one more listener; the last one wanted starts the chain.
    fn listens(&self) {
        if self.listening.fetch_add(1, Ordering::SeqCst) + 1 == self.wanted {
            let _ = self.start.set(Instant::now() + Duration::from_millis(500));
        }
    }

    fn hash(i: usize) -> String {
        format!("0x{:064x}", (i as u128 + 1) * 0x9E37_79B9_7F4A_7C15)
    }

    /// When head `i` reaches a node `offset` behind the first.
    fn due(&self, i: usize, offset: Duration) -> Option<Instant> {
        Some(*self.start.get()? + offset + self.every * i as u32)
    }
}

/// How one node of the chain behaves.
#[derive(Clone, Copy)]
struct Node {
    offset: Duration,
    /// A head it never sends.
    skips: Option<usize>,
    /// Sends two notifications without a usable `/hash` first.
    junk: bool,
}

fn node(offset_ms: u64) -> Node {
    Node {
        offset: Duration::from_millis(offset_ms),
        skips: None,
        junk: false,
    }
}

/// A WebSocket node: answers every call, and publishes the chain's heads
/// on each `eth_subscribe`.
fn websocket_node(chain: Arc<Chain>, node: Node) -> std::net::SocketAddr {
    common::serve_on_a_thread(move |listener| async move {
        while let Ok((stream, _)) = listener.accept().await {
            let chain = chain.clone();
            tokio::spawn(async move {
                let Ok(socket) = tokio_tungstenite::accept_async(stream).await else {
                    return;
                };
                let (sink, mut messages) = socket.split();
                let sink = Arc::new(tokio::sync::Mutex::new(sink));
                while let Some(Ok(message)) = messages.next().await {
                    let Ok(request) = serde_json::from_str::<Value>(message.to_text().unwrap_or("")) else {
                        continue;
                    };
                    // The subscription's id, and every other call's result.
                    let answer = json!({"jsonrpc": "2.0", "result": "0x1", "id": request["id"]});
                    let subscribes = request["method"] == "eth_subscribe";
                    let _ = sink.lock().await.send(Message::text(answer.to_string())).await;
                    if subscribes {
                        chain.listens();
                        tokio::spawn(publish(chain.clone(), node, sink.clone()));
                    }
                }
            });
        }
    })
}

type Sink =
    futures_util::stream::SplitSink<tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>, Message>;

/// Sends the chain's heads as `eth_subscription` notifications, each when
/// this node hears of it.
async fn publish(chain: Arc<Chain>, node: Node, sink: Arc<tokio::sync::Mutex<Sink>>) {
    let notify = |result: Value| {
        json!({"jsonrpc": "2.0", "method": "eth_subscription", "params": {"subscription": "0x1", "result": result}})
            .to_string()
    };
    while chain.start.get().is_none() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    if node.junk {
        for junk in [json!({"number": "0x0"}), json!({"hash": "f".repeat(2000)})] {
            let _ = sink.lock().await.send(Message::text(notify(junk))).await;
        }
    }
    for i in 0..chain.heads {
        let due = chain.due(i, node.offset).unwrap();
        tokio::time::sleep_until(due.into()).await;
        if node.skips == Some(i) {
            continue;
        }
        let head = json!({"number": format!("0x{:x}", i + 1), "hash": Chain::hash(i)});
        if sink.lock().await.send(Message::text(notify(head))).await.is_err() {
            return;
        }
    }
}

/// An HTTP node: `eth_getBlockByNumber` answers the latest head it has
/// heard of (null before the first), every other call `0x1`. The chain
/// starts once the nodes have been polled `wanted` times in all.
fn http_node(chain: Arc<Chain>, node: Node) -> std::net::SocketAddr {
    common::serve_on_a_thread(move |listener| async move {
        while let Ok((stream, _)) = listener.accept().await {
            let chain = chain.clone();
            tokio::spawn(async move {
                let service =
                    hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                        let chain = chain.clone();
                        async move {
                            let body = request.into_body().collect().await.unwrap().to_bytes();
                            let request: Value = serde_json::from_slice(&body).unwrap_or_default();
                            let result = match request["method"] == "eth_getBlockByNumber" {
                                true => {
                                    chain.listens();
                                    latest(&chain, node)
                                }
                                false => json!("0x1"),
                            };
                            let answer = json!({"jsonrpc": "2.0", "result": result, "id": request["id"]});
                            Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from(
                                answer.to_string(),
                            ))))
                        }
                    });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    })
}

/// The latest head `node` has heard of, or null.
fn latest(chain: &Chain, node: Node) -> Value {
    let now = Instant::now();
    let heard = (0..chain.heads).filter(|&i| chain.due(i, node.offset).is_some_and(|due| due <= now));
    heard.last().map_or(
        Value::Null,
        |i| json!({"number": format!("0x{:x}", i + 1), "hash": Chain::hash(i)}),
    )
}

/// Runs `scenario` over its targets at once; the side-by-side summary and
/// the printed table.
fn run_parallel(name: &str, scenario: &str) -> (Value, String, String) {
    let out = temp_dir(name);
    let file = temp_dir(&format!("{name}-file"));
    std::fs::create_dir_all(&file).unwrap();
    let file = file.join("race.toml");
    std::fs::write(&file, scenario).unwrap();
    let child = volley()
        .arg("run")
        .arg(&file)
        .args(["--parallel-targets", "--no-tui", "-q", "--out"])
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let output = wait_or_kill(child, Duration::from_secs(120));
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}{}", text(&output.stderr));
    let summary = serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    (summary, stdout, page)
}

/// Each target's race figures: (heads, first, missed), and its lag p50.
fn raced(summary: &Value) -> Vec<((u64, u64, u64), f64)> {
    let targets = summary["targets"].as_array().unwrap();
    targets
        .iter()
        .map(|t| {
            let race = &t["race"];
            let count = |key: &str| race[key].as_u64().unwrap();
            let lag = race["lag_ms"]["p50"].as_f64().unwrap();
            ((count("heads"), count("first"), count("missed")), lag)
        })
        .collect()
}

const LOAD: &str = "timeout = \"5s\"\n[load]\nrate = 20\nconnections = 1\nduration = \"5s\"\nwarmup = \"0s\"\n[[calls]]\nmethod = \"eth_chainId\"\n";

#[test]
fn subscriptions_race_by_value_the_first_node_first_and_a_skipped_head_missed() {
    // Five heads 400 ms apart from 0.5 s after all three subscribed: the
    // second node 150 ms behind the first, the third 300 ms behind, never
    // sending the third head, and sending two notifications with no
    // usable /hash.
    let chain = Chain::new(5, Duration::from_millis(400), 3);
    let first = websocket_node(chain.clone(), node(0));
    let second = websocket_node(chain.clone(), node(150));
    let third = websocket_node(
        chain,
        Node {
            skips: Some(2),
            junk: true,
            ..node(300)
        },
    );
    let scenario = format!(
        "targets = [{{ name = \"first\", url = \"ws://{first}\" }}, {{ name = \"second\", url = \"ws://{second}\" }}, {{ name = \"third\", url = \"ws://{third}\" }}]\n{LOAD}[[subscribe]]\nmethod = \"eth_subscribe\"\nparams = [\"newHeads\"]\nrace = \"/hash\"\n"
    );
    let (summary, stdout, page) = run_parallel("race-ws", &scenario);
    let figures = raced(&summary);
    assert_eq!(figures[0], ((5, 5, 0), 0.0), "{summary:#}");
    assert_eq!(figures[1].0, (5, 0, 0), "{summary:#}");
    assert_eq!(figures[2].0, (5, 0, 1), "{summary:#}");
    // Behind the first, the third furthest.
    assert!(0.0 < figures[1].1 && figures[1].1 < figures[2].1, "{figures:?}");
    let third = &summary["targets"][2]["race"];
    assert_eq!(third["unreadable"], 2);
    assert_eq!(third["capped"], false);
    assert_eq!(
        (&third["source"], &third["pointer"], &third["resolution_ms"]),
        (&json!("subscribe[0]"), &json!("/hash"), &Value::Null)
    );
    assert!(
        stdout.contains("head race: \"/hash\" of subscribe[0]'s results, 5 heads raced"),
        "{stdout}"
    );
    assert!(
        stdout.contains("third: 2 results had no value at \"/hash\""),
        "{stdout}"
    );
    assert!(page.contains("<h2>Head race</h2>"), "{page}");
}

#[test]
fn polls_race_http_nodes_at_the_polls_resolution() {
    // Four heads 600 ms apart, from 0.5 s after six polls in all; the
    // second node 250 ms behind: more than a poll's longest wait (150 ms).
    // Blocks are polled, raced by their hash: a value that is no number.
    let chain = Chain::new(4, Duration::from_millis(600), 6);
    let first = http_node(chain.clone(), node(0));
    let second = http_node(chain, node(250));
    let scenario = format!(
        "targets = [{{ name = \"first\", url = \"http://{first}\" }}, {{ name = \"second\", url = \"http://{second}\" }}]\n{LOAD}[poll.head]\nmethod = \"eth_getBlockByNumber\"\nparams = [\"latest\", false]\nevery = \"100ms\"\nrace = \"/hash\"\n"
    );
    let (summary, stdout, _) = run_parallel("race-poll", &scenario);
    let figures = raced(&summary);
    assert_eq!(figures[0], ((4, 4, 0), 0.0), "{summary:#}");
    assert_eq!(figures[1].0, (4, 0, 0), "{summary:#}");
    assert!(figures[1].1 > 0.0, "{figures:?}");
    assert_eq!(summary["targets"][1]["race"]["resolution_ms"], 100.0);
    assert!(stdout.contains("resolution 100 ms"), "{stdout}");
}

#[test]
fn a_race_without_targets_listening_at_once_is_refused_before_anything_is_sent() {
    let dir = temp_dir("race-refused");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("race.toml");
    // Port 1: nothing listens; the refusal comes first.
    let targets = "targets = [{ name = \"a\", url = \"ws://127.0.0.1:1\" }, { name = \"b\", url = \"ws://127.0.0.1:1\" }]\n";
    let race = "[[subscribe]]\nmethod = \"eth_subscribe\"\nrace = \"/hash\"\n[[calls]]\nmethod = \"m\"\n";
    std::fs::write(&file, format!("{targets}{race}")).unwrap();
    let output = volley()
        .arg("run")
        .arg(&file)
        .args(["--no-tui", "-q"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let said = text(&output.stderr);
    assert!(
        said.contains(
            "`subscribe[0].race` races targets listening at the same time: run with --parallel-targets"
        ),
        "{said}"
    );
    let one = volley()
        .arg("run")
        .arg(&file)
        .args(["--target", "ws://127.0.0.1:1", "--no-tui", "-q"])
        .output()
        .unwrap();
    assert_eq!(one.status.code(), Some(1));
    assert!(
        text(&one.stderr).contains("races targets against each other: give two or more"),
        "{}",
        text(&one.stderr)
    );
    // `volley validate` says what will be raced.
    let validated = volley().arg("validate").arg(&file).output().unwrap();
    assert!(
        text(&validated.stdout).contains("race:        \"/hash\" of subscribe[0]'s results, matched across the targets (each notification timed as it arrives); run with --parallel-targets"),
        "{}",
        text(&validated.stdout)
    );
    // A bad pointer: the file, the line and the key.
    std::fs::write(&file, format!("{targets}{}", race.replace("/hash", "hash"))).unwrap();
    let bad = volley()
        .arg("run")
        .arg(&file)
        .args(["--parallel-targets", "--no-tui", "-q"])
        .output()
        .unwrap();
    let said = text(&bad.stderr);
    assert!(
        said.contains("race.toml:4:")
            && said.contains("key `subscribe[0].race`: `hash` is not a JSON pointer"),
        "{said}"
    );
}
