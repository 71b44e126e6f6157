//! Targets' answers compared field by field: three crafted servers on
//! loopback answer `eth_getBlockByNumber` and `eth_chainId` as anvil,
//! Ganache and Hardhat do (a field missing, a value changed, a type
//! changed, what independent chains differ in by construction), and the
//! real binary tallies each pointer over every answer, ranks them, hints at
//! the set or rule that leaves them out, and fails on what is left.

mod common;

use std::process::Output;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{json, Value};

use common::bin::{summary_json, temp_dir, text, volley, wait_or_kill};

/// The block anvil answers: what the others are compared with.
fn block() -> Value {
    json!({
        "number": "0x0", "hash": "0xa1", "stateRoot": "0xb1", "timestamp": "0x10",
        "mixHash": "0x0", "nonce": "0x0000000000000000", "gasLimit": "0x1c9c380",
        "blobGasUsed": "0x0", "extraData": "0x", "miner": "0x0",
    })
}

fn answer(request: &Value, block: Value, chain: &str) -> (u16, String) {
    let result = match request["method"].as_str() {
        Some("eth_chainId") => json!(chain),
        _ => block,
    };
    let body = json!({"jsonrpc": "2.0", "id": request["id"], "result": result});
    (200, body.to_string())
}

fn anvil(request: &Value) -> (u16, String) {
    answer(request, block(), "0x7a69")
}

/// Ganache: no `blobGasUsed`, a nonce that is a number, its own hash,
/// root, time and mixHash, and its own chain id.
fn ganache(request: &Value) -> (u16, String) {
    let mut block = block();
    let fields = block.as_object_mut().unwrap();
    fields.remove("blobGasUsed");
    fields.insert("nonce".into(), json!(0));
    for (key, value) in [
        ("hash", "0xa2"),
        ("stateRoot", "0xb2"),
        ("timestamp", "0x11"),
        ("mixHash", "0x9"),
    ] {
        fields.insert(key.into(), json!(value));
    }
    answer(request, block, "0x539")
}

/// Hardhat's block differs in what anvil's differs by construction, in
/// its gas limit, and in its nonce's type (a number); its miner differs
/// in every third answer, each counted here.
static MINER_DIFFERED: AtomicU64 = AtomicU64::new(0);

fn hardhat(request: &Value) -> (u16, String) {
    let mut block = block();
    let fields = block.as_object_mut().unwrap();
    for (key, value) in [
        ("hash", "0xa3"),
        ("stateRoot", "0xb3"),
        ("gasLimit", "0x3938700"),
        ("extraData", "0x1234"),
    ] {
        fields.insert(key.into(), json!(value));
    }
    fields.insert("nonce".into(), json!(0));
    let is_block = request["method"] == "eth_getBlockByNumber";
    if is_block && request["id"].as_u64().unwrap().is_multiple_of(3) {
        fields.insert("miner".into(), json!("0x1"));
        MINER_DIFFERED.fetch_add(1, Ordering::SeqCst);
    }
    answer(request, block, "0x7a69")
}

/// A chain like anvil's that differs only by construction.
fn twin(request: &Value) -> (u16, String) {
    let mut block = block();
    let fields = block.as_object_mut().unwrap();
    for (key, value) in [
        ("hash", "0xa4"),
        ("stateRoot", "0xb4"),
        ("timestamp", "0x12"),
        ("extraData", "0x99"),
    ] {
        fields.insert(key.into(), json!(value));
    }
    answer(request, block, "0x7a69")
}

/// Requests made to the server that counts them.
static ASKED: AtomicU64 = AtomicU64::new(0);

fn counted(request: &Value) -> (u16, String) {
    ASKED.fetch_add(1, Ordering::SeqCst);
    anvil(request)
}

/// A scenario of both methods against `targets` (name, address), every
/// answer compared, `extra` added to `[equality]`.
fn scenario(name: &str, targets: &[(&str, std::net::SocketAddr)], extra: &str) -> std::path::PathBuf {
    let dir = temp_dir(name);
    std::fs::create_dir_all(&dir).unwrap();
    let targets: Vec<String> = (targets.iter())
        .map(|(name, addr)| format!(r#"{{ name = "{name}", url = "http://{addr}" }}"#))
        .collect();
    let file = dir.join("nodes.toml");
    let text = format!(
        r#"seed = 3
targets = [{}]
[load]
concurrency = 2
requests = 60
[[calls]]
method = "eth_getBlockByNumber"
params = ["latest", false]
[[calls]]
method = "eth_chainId"
[equality]
sample = "100%"
{extra}
"#,
        targets.join(", ")
    );
    std::fs::write(&file, text).unwrap();
    file
}

fn run(file: &std::path::Path, flags: &[&str]) -> (Output, std::path::PathBuf) {
    let out = file.parent().unwrap().join(format!("out{}", flags.len()));
    let child = volley()
        .arg("run")
        .arg(file)
        .args(["--no-tui", "-q"])
        .args(flags)
        .arg("--out")
        .arg(&out)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    (wait_or_kill(child, Duration::from_secs(120)), out)
}

/// A method's row against `target` in `summary.json`'s `equality`.
fn row<'a>(equality: &'a Value, method: &str, target: &str) -> &'a Value {
    (equality["methods"].as_array().unwrap().iter())
        .find(|m| m["method"] == method && m["target"] == target)
        .unwrap_or_else(|| panic!("no row of {method} on {target}: {equality:#}"))
}

/// A row's tally: pointer, kind and answers, in its order.
fn tally(row: &Value) -> Vec<(String, String, u64)> {
    (row["fields"].as_array().unwrap().iter())
        .map(|f| {
            let text = |k: &str| f[k].as_str().unwrap().to_string();
            (text("pointer"), text("kind"), f["answers"].as_u64().unwrap())
        })
        .collect()
}

fn field(pointer: &str, kind: &str, answers: u64) -> (String, String, u64) {
    (pointer.into(), kind.into(), answers)
}

/// The lines printed, their runs of spaces made one.
fn lines(output: &Output) -> Vec<String> {
    (text(&output.stdout).lines())
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

/// Each method's calls in a target's own summary.
fn calls(out: &std::path::Path, target: &str, method: &str) -> u64 {
    let own = summary_json(&out.join(target));
    let methods = own["summary"]["methods"].as_array().unwrap();
    let m = methods.iter().find(|m| m["method"] == method).unwrap();
    m["calls"].as_u64().unwrap()
}

/// The three nodes compared once, with no set: what it printed, where it
/// wrote, and how many times Hardhat's miner differed.
struct ThreeNodes {
    output: Output,
    out: std::path::PathBuf,
    miner_differed: u64,
}

fn three_nodes() -> &'static ThreeNodes {
    static RUN: std::sync::OnceLock<ThreeNodes> = std::sync::OnceLock::new();
    RUN.get_or_init(|| {
        let servers = [
            ("anvil", common::crafted_server(anvil)),
            ("ganache", common::crafted_server(ganache)),
            ("hardhat", common::crafted_server(hardhat)),
        ];
        let file = scenario("equality-tally", &servers, "");
        let (output, out) = run(&file, &[]);
        assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
        let miner_differed = MINER_DIFFERED.load(Ordering::SeqCst);
        ThreeNodes {
            output,
            out,
            miner_differed,
        }
    })
}

#[test]
fn each_pointer_is_tallied_over_every_answer_ranked_and_told_missing_changed_or_retyped() {
    let ThreeNodes {
        output,
        out,
        miner_differed: m,
    } = three_nodes();
    let (n, c) = (
        calls(out, "anvil", "eth_getBlockByNumber"),
        calls(out, "anvil", "eth_chainId"),
    );
    assert!(n > 0 && c > 0 && *m > 0 && *m < n, "{n} {c} {m}");
    let equality = &summary_json(out)["equality"];
    let blocks = row(equality, "eth_getBlockByNumber", "ganache");
    assert_eq!(
        (&blocks["compared"], &blocks["mismatched"]),
        (&json!(n), &json!(n))
    );
    assert_eq!(
        tally(blocks),
        [
            field("/result/blobGasUsed", "missing", n),
            field("/result/nonce", "type", n),
            field("/result/hash", "value", n),
            field("/result/mixHash", "value", n),
            field("/result/stateRoot", "value", n),
            field("/result/timestamp", "value", n),
        ]
    );
    // Ranked by answers, then a changed type before a changed value.
    assert_eq!(
        tally(row(equality, "eth_getBlockByNumber", "hardhat")),
        [
            field("/result/nonce", "type", n),
            field("/result/extraData", "value", n),
            field("/result/gasLimit", "value", n),
            field("/result/hash", "value", n),
            field("/result/stateRoot", "value", n),
            field("/result/miner", "value", *m),
        ]
    );
    let chain = row(equality, "eth_chainId", "ganache");
    assert_eq!(tally(chain), [field("/result", "value", c)]);
    assert_eq!(
        (&chain["fields"][0]["first"], &chain["fields"][0]["other"]),
        (&json!("\"0x7a69\""), &json!("\"0x539\""))
    );
    assert_eq!(tally(row(equality, "eth_chainId", "hardhat")), []);

    // Each pointer on a line of its own.
    let printed = lines(output);
    for line in [
        format!("/result/blobGasUsed missing on ganache {n} of {n}"),
        format!(r#"/result/gasLimit differs {n} of {n} ("0x1c9c380" against "0x3938700")"#),
        format!(r#"/result/nonce type differs {n} of {n} ("0x0000000000000000" against 0)"#),
        format!(r#"/result/miner differs {m} of {n} ("0x0" against "0x1")"#),
        format!(r#"/result differs {c} of {c} ("0x7a69" against "0x539")"#),
    ] {
        assert!(printed.contains(&line), "{line}\n{}", text(&output.stdout));
    }
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    let cells = format!("<td>/result/blobGasUsed</td><td>missing on ganache</td><td>{n} of {n}</td>");
    assert!(page.contains(&cells), "{page}");
}

#[test]
fn what_every_answer_differed_at_gets_a_hint_naming_the_set_or_writing_the_rule() {
    let ThreeNodes { output, out, .. } = three_nodes();
    let printed = lines(output);
    let equality = &summary_json(out)["equality"];
    // What every answer differed at gets a hint: the set for the values it
    // covers, a rule for the rest (a retyped nonce is no value by construction);
    // the miner, which differed now and then, gets none.
    let set = "ignore_sets = [\"dev_chain\"]: /result/extraData, /result/hash, /result/stateRoot (what independent development chains differ in by construction)";
    let rule = |pointer: &str| {
        format!(
            r#"a rule {{ method = "eth_getBlockByNumber", pointer = "/{pointer}", rule = "ignore" }}: /result/{pointer}"#
        )
    };
    let hinted: Vec<&String> = printed
        .iter()
        .filter(|l| l.starts_with("ignore_sets") || l.starts_with("a rule"))
        .collect();
    assert_eq!(
        hinted,
        [
            &r#"a rule { method = "eth_chainId", rule = "ignore" }: /result"#.to_string(),
            &"ignore_sets = [\"dev_chain\"]: /result/hash, /result/mixHash, /result/stateRoot, /result/timestamp (what independent development chains differ in by construction)".to_string(),
            &rule("blobGasUsed"),
            &rule("nonce"),
            &set.to_string(),
            &rule("nonce"),
            &rule("gasLimit"),
        ]
    );
    let hints = equality["hints"].as_array().unwrap();
    assert_eq!(hints.len(), 3, "{hints:#?}");
    assert_eq!(hints[2]["target"], "hardhat");
    assert_eq!(
        hints[2]["remedies"][0]["pointers"],
        json!(["/result/extraData", "/result/hash", "/result/stateRoot"])
    );
}

#[test]
fn an_ignore_set_leaves_out_values_by_construction_and_fail_on_diff_judges_what_is_left() {
    let (first, other) = (common::crafted_server(anvil), common::crafted_server(ganache));
    let set = r#"ignore_sets = ["dev_chain"]"#;
    let file = scenario("equality-set", &[("anvil", first), ("ganache", other)], set);
    let (output, out) = run(&file, &["--fail-on-diff"]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    let n = calls(&out, "anvil", "eth_getBlockByNumber");
    let c = calls(&out, "anvil", "eth_chainId");
    let equality = &summary_json(&out)["equality"];
    assert_eq!(equality["ignore_sets"], json!(["dev_chain"]));
    // The hash, root, time and mixHash are gone; the field missing, and
    // the nonce of another type, are not.
    assert_eq!(
        tally(row(equality, "eth_getBlockByNumber", "ganache")),
        [
            field("/result/blobGasUsed", "missing", n),
            field("/result/nonce", "type", n)
        ]
    );
    assert_eq!(
        tally(row(equality, "eth_chainId", "ganache")),
        [field("/result", "value", c)]
    );
    assert!(
        !text(&output.stdout).contains("ignore_sets = [\"dev_chain\"]:"),
        "a set in use is not proposed"
    );

    // A chain that differs only by construction passes with the set, and
    // fails without it, with the hint that names the set.
    let twin = common::crafted_server(twin);
    let file = scenario("equality-twin", &[("anvil", first), ("twin", twin)], set);
    let (output, out) = run(&file, &["--fail-on-diff"]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}{}",
        text(&output.stdout),
        text(&output.stderr)
    );
    let equality = &summary_json(&out)["equality"];
    assert_eq!(
        (&equality["compared"], &equality["mismatched"]),
        (&json!(60), &json!(0))
    );
    let file = scenario("equality-twin-bare", &[("anvil", first), ("twin", twin)], "");
    let (output, _) = run(&file, &["--fail-on-diff"]);
    assert_eq!(output.status.code(), Some(2));
    let hint = "ignore_sets = [\"dev_chain\"]: /result/extraData, /result/hash, /result/stateRoot, /result/timestamp (what independent development chains differ in by construction)";
    assert!(
        lines(&output).contains(&hint.to_string()),
        "{}",
        text(&output.stdout)
    );
}

#[test]
fn an_unknown_ignore_set_is_refused_with_its_file_line_and_key_before_anything_is_sent() {
    let servers = [
        ("a", common::crafted_server(counted)),
        ("b", common::crafted_server(counted)),
    ];
    let file = scenario(
        "equality-unknown-set",
        &servers,
        r#"ignore_sets = ["dev_chains"]"#,
    );
    let (output, _) = run(&file, &[]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("nodes.toml:13:16: key `equality.ignore_sets[0]`: `dev_chains` is not an ignore set: known sets are dev_chain"),
        "{stderr}"
    );
    assert_eq!(ASKED.load(Ordering::SeqCst), 0);
    // A known set is said by `volley validate`, beside the rules.
    let file = scenario("equality-known-set", &servers, r#"ignore_sets = ["dev_chain"]"#);
    let said = volley().arg("validate").arg(&file).output().unwrap();
    assert!(
        text(&said.stdout)
            .contains("answers:     compared on a 100% sample, 0 rule(s), ignore sets: dev_chain\n"),
        "{}",
        text(&said.stdout)
    );
    assert_eq!(ASKED.load(Ordering::SeqCst), 0);
}
