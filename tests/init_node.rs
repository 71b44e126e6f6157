//! `volley init --from-node`: a node's last blocks read into data files and
//! a scenario that validates and runs clean against the same node, its
//! values the chain's own (the server sees only hashes it handed out);
//! methods the node refuses are left out, saying why. Against `volley
//! serve`'s chain always, and against anvil (a real dev node, started here
//! after it was sent transactions and given a contract) where it is
//! installed.

mod common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

use common::bin::{temp_dir, text};
use serde_json::{json, Value};
use volley::scenario::Scenario;
use volley::serve::{self, ServeConfig, ServerStats};

fn init(dir: &Path, url: &str, blocks: &str) -> String {
    std::fs::create_dir_all(dir).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_volley"))
        .args(["init", "node.toml", "--from-node", url, "--blocks", blocks])
        .current_dir(dir)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    std::fs::read_to_string(dir.join("node.toml")).unwrap()
}

fn lines(dir: &Path, file: &str) -> Vec<String> {
    let text = std::fs::read_to_string(dir.join("node-data").join(file)).unwrap_or_default();
    text.lines().map(str::to_string).collect()
}

/// The harvested scenario, run for a few hundred requests.
fn run(dir: &Path, requests: u64) -> volley::report::RunReport {
    let mut scenario = Scenario::load(&dir.join("node.toml")).expect("the scenario made is valid");
    scenario.load.duration = None;
    scenario.load.warmup = std::time::Duration::ZERO;
    scenario.load.requests = Some(requests);
    common::run(&scenario)
}

#[test]
fn a_harvest_of_the_built_in_chain_runs_clean_against_it() {
    let server = serve::spawn(ServeConfig {
        listen: "127.0.0.1:0".parse::<SocketAddr>().unwrap(),
        threads: 1,
        block_transactions: 3,
        ..ServeConfig::default()
    })
    .unwrap();
    let dir = temp_dir("from-node-serve");
    let scenario = init(&dir, &server.url(), "5");
    assert_eq!(lines(&dir, "blocks.txt").len(), 5);
    assert_eq!(lines(&dir, "transactions.txt").len(), 15);
    assert!(lines(&dir, "addresses.txt").len() >= 2);
    // The built-in server has no eth_getTransactionCount: left out, and why.
    assert!(
        scenario.contains(
            "# Left out: eth_getTransactionCount: the node refused its trial call: rpc_error(-32601)"
        ),
        "{scenario}"
    );
    assert!(
        scenario.contains("# Left out: eth_call: the blocks gave no value"),
        "{scenario}"
    );
    assert!(
        scenario.contains("weight = 600") && scenario.contains("[[flows]]"),
        "{scenario}"
    );
    let report = run(&dir, 300);
    let total = &report.summary.total;
    assert_eq!(
        (total.errors, report.summary.requests > 0),
        (0, true),
        "{:?}",
        total.outcomes
    );
    let flow = report
        .summary
        .methods
        .iter()
        .find(|m| m.method == "flow:receipts")
        .unwrap();
    assert!(flow.calls > 0 && flow.ok == flow.calls, "{flow:?}");
    // Every receipt asked for was of a transaction the chain holds.
    assert!(ServerStats::get(&server.stats.receipts_asked) > 0);
    assert_eq!(ServerStats::get(&server.stats.receipts_unknown), 0);
}

#[test]
fn a_node_that_cannot_be_reached_is_named() {
    let dir = temp_dir("from-node-unreachable");
    std::fs::create_dir_all(&dir).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_volley"))
        .args(["init", "node.toml", "--from-node", "http://127.0.0.1:1"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(
        text(&output.stderr).contains("--from-node http://127.0.0.1:1"),
        "{}",
        text(&output.stderr)
    );
    assert!(!dir.join("node.toml").exists());
}

/// One JSON-RPC call over HTTP to anvil; its result.
fn rpc(url: &str, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    let output = Command::new("curl")
        .args(["-s", "-H", "content-type: application/json", "-d", &body, url])
        .output()
        .expect("curl runs");
    let answer: Value = serde_json::from_slice(&output.stdout).expect("anvil answers JSON");
    assert!(answer.get("error").is_none(), "{method}: {answer}");
    answer["result"].clone()
}

/// Against anvil: transfers and calls to a contract (code set by
/// `anvil_setCode`) in a few blocks, harvested, then run clean.
#[test]
fn a_harvest_of_anvil_runs_clean_against_it() {
    if Command::new("anvil").arg("--version").output().is_err() {
        eprintln!("anvil is not installed (npm install -g @foundry-rs/anvil): this check is skipped");
        return;
    }
    // Its own process group: npm's `anvil` is a wrapper whose child is
    // the node, and killing the wrapper alone left the node running.
    let mut anvil = Group(
        Command::new("anvil")
            .args(["--host", "127.0.0.1", "--port", "0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap(),
    );
    let mut port = None;
    for line in BufReader::new(anvil.0.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if let Some(at) = line.strip_prefix("Listening on ") {
            port = Some(at.trim().to_string());
            break;
        }
    }
    let url = format!("http://{}", port.expect("anvil says where it listens"));
    let accounts = rpc(&url, "eth_accounts", json!([]));
    let (from, to) = (accounts[0].as_str().unwrap(), accounts[1].as_str().unwrap());
    // A contract whose code returns 32 bytes of 1: calls to it have data.
    let contract = "0x00000000000000000000000000000000000c0de1";
    rpc(&url, "anvil_setCode", json!([contract, "0x600160005260206000f3"]));
    for i in 0..6 {
        rpc(
            &url,
            "eth_sendTransaction",
            json!([{"from": from, "to": to, "value": "0x1"}]),
        );
        rpc(
            &url,
            "eth_sendTransaction",
            json!([{"from": from, "to": contract, "data": format!("0x{i:08x}")}]),
        );
    }
    let dir = temp_dir("from-node-anvil");
    let scenario = init(&dir, &url, "20");
    assert_eq!(lines(&dir, "transactions.txt").len(), 12, "{scenario}");
    assert_eq!(lines(&dir, "contracts.txt"), [contract]);
    assert_eq!(lines(&dir, "calls.jsonl").len(), 6);
    for method in [
        "eth_call",
        "eth_getLogs",
        "eth_getCode",
        "eth_getTransactionCount",
    ] {
        assert!(
            scenario.contains(&format!("method = \"{method}\"")),
            "{method}: {scenario}"
        );
    }
    let report = run(&dir, 300);
    assert_eq!(
        report.summary.total.errors, 0,
        "{:?}",
        report.summary.total.outcomes
    );
}

/// A child and the processes it started, killed together when dropped,
/// a failed assertion included.
struct Group(std::process::Child);

impl Drop for Group {
    fn drop(&mut self) {
        // SAFETY: kill(2) with a negative pid signals the child's own group.
        unsafe { libc::kill(-(self.0.id() as i32), libc::SIGKILL) };
        let _ = self.0.wait();
    }
}

/// Blocks without transactions give nothing to harvest: said, and no file
/// written.
#[test]
fn blocks_without_transactions_are_refused_with_the_way_out() {
    let server = serve::spawn(ServeConfig {
        listen: "127.0.0.1:0".parse::<SocketAddr>().unwrap(),
        threads: 1,
        ..ServeConfig::default()
    })
    .unwrap();
    let dir = temp_dir("from-node-empty");
    std::fs::create_dir_all(&dir).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_volley"))
        .args(["init", "node.toml", "--from-node", &server.url(), "--blocks", "3"])
        .current_dir(&dir)
        .output()
        .unwrap();
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("hold no transactions: read more of them (--blocks) or send some first"),
        "{stderr}"
    );
    assert!(!dir.join("node.toml").exists());
}
