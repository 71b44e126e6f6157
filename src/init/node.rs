//! `volley init --from-node`: a read mix made of a chain's own values. The
//! last blocks of an Ethereum node are read (full transactions); their
//! block numbers, transaction hashes, addresses, contracts with code, the
//! calls made to those contracts and log filters over them go into data
//! files, and a scenario weights the methods as ethspam does (its defaults,
//! from a sample of Infura's traffic), with the block → receipts flow.
//! Each method is tried once with a harvested value: one the node answers
//! with an error is left out of the mix, and the scenario says why.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{json, Value};

use super::FromCapture;
use crate::engine::Session;

/// How many of the most called addresses are asked for their code.
const CONTRACTS_ASKED: usize = 50;
/// The most lines a data file of calls or log filters holds.
const MOST_LINES: usize = 500;

/// What the blocks held.
#[derive(Default)]
pub struct Harvest {
    /// Blocks read, and those with transactions (hex quantities).
    pub first: u64,
    pub last: u64,
    pub blocks_with_transactions: Vec<String>,
    pub transactions: Vec<String>,
    /// Every sender and recipient, most seen first.
    pub addresses: Vec<String>,
    /// Addresses with code, most called first.
    pub contracts: Vec<String>,
    /// `[{from, to, data}, "latest"]` of transactions to contracts.
    pub calls: Vec<Value>,
    /// `[{fromBlock, toBlock, address}]` where a contract was called.
    pub log_filters: Vec<Value>,
}

/// A transaction as the harvest keeps it.
struct Sent {
    block: u64,
    from: String,
    to: Option<String>,
    input: String,
}

/// Reads the last `blocks` blocks of the node behind `session`.
pub async fn harvest(session: &mut Session, blocks: u64) -> Result<Harvest, String> {
    let head = session.call("eth_blockNumber", &json!([])).await?;
    let head =
        quantity(&head).ok_or_else(|| format!("eth_blockNumber answered {head}, not a hex quantity"))?;
    let first = head.saturating_sub(blocks.saturating_sub(1));
    let mut harvest = Harvest {
        first,
        last: head,
        ..Harvest::default()
    };
    let mut sent = Vec::new();
    for number in first..=head {
        let block = session
            .call("eth_getBlockByNumber", &json!([format!("0x{number:x}"), true]))
            .await
            .map_err(|e| format!("eth_getBlockByNumber 0x{number:x}: {e}"))?;
        let transactions = block
            .get("transactions")
            .and_then(Value::as_array)
            .map_or(&[][..], |t| t);
        if !transactions.is_empty() {
            harvest.blocks_with_transactions.push(format!("0x{number:x}"));
        }
        for tx in transactions {
            let text = |key: &str| tx.get(key).and_then(Value::as_str).map(str::to_string);
            let (Some(hash), Some(from)) = (text("hash"), text("from")) else {
                continue;
            };
            harvest.transactions.push(hash);
            sent.push(Sent {
                block: number,
                from,
                to: text("to"),
                input: text("input").unwrap_or_default(),
            });
        }
    }
    if harvest.transactions.is_empty() {
        return Err(format!(
            "blocks 0x{first:x} to 0x{head:x} hold no transactions: read more of them (--blocks) or send some first"
        ));
    }
    harvest.addresses = most_seen(sent.iter().flat_map(|s| std::iter::once(&s.from).chain(&s.to)));
    let called = most_seen(
        sent.iter()
            .filter(|s| s.input.len() > 2)
            .filter_map(|s| s.to.as_ref()),
    );
    for address in called.into_iter().take(CONTRACTS_ASKED) {
        // A node without eth_getCode leaves the contracts unknown.
        match session.call("eth_getCode", &json!([address, "latest"])).await {
            Ok(Value::String(code)) if code.len() > 2 => harvest.contracts.push(address),
            Ok(_) => {}
            Err(_) => break,
        }
    }
    for s in &sent {
        let Some(to) = s.to.as_ref().filter(|to| harvest.contracts.contains(to)) else {
            continue;
        };
        let call = json!([{"from": s.from, "to": to, "data": s.input}, "latest"]);
        if harvest.calls.len() < MOST_LINES && !harvest.calls.contains(&call) {
            harvest.calls.push(call);
        }
        let block = format!("0x{:x}", s.block);
        let filter = json!([{"fromBlock": block, "toBlock": block, "address": to}]);
        if harvest.log_filters.len() < MOST_LINES && !harvest.log_filters.contains(&filter) {
            harvest.log_filters.push(filter);
        }
    }
    Ok(harvest)
}

fn quantity(value: &Value) -> Option<u64> {
    u64::from_str_radix(value.as_str()?.strip_prefix("0x")?, 16).ok()
}

/// Each value once, the most seen first (then in the order first seen).
fn most_seen<'a>(values: impl Iterator<Item = &'a String>) -> Vec<String> {
    let mut counts: Vec<(String, usize)> = Vec::new();
    let mut at: BTreeMap<&str, usize> = BTreeMap::new();
    let values: Vec<&String> = values.collect();
    for value in &values {
        match at.get(value.as_str()) {
            Some(&i) => counts[i].1 += 1,
            None => {
                at.insert(value.as_str(), counts.len());
                counts.push(((*value).clone(), 1));
            }
        }
    }
    counts.sort_by_key(|c| std::cmp::Reverse(c.1));
    counts.into_iter().map(|(value, _)| value).collect()
}

/// A method of the mix: ethspam's weight, its params as the scenario
/// writes them, the params it is tried with, and its check.
struct Method {
    name: &'static str,
    weight: u32,
    params: Option<String>,
    trial: Value,
    expect: Option<&'static str>,
}

/// The mix's methods the harvest has values for, each with the values it
/// is tried with; the names of those it has none for.
fn methods(harvest: &Harvest, data: &str) -> (Vec<Method>, Vec<&'static str>) {
    let file = |name: &str| format!("\"${{file('{data}/{name}')}}\"");
    let first = |values: &[String]| values.first().map(|v| json!(v));
    let mut methods = Vec::new();
    let mut without = Vec::new();
    let mut add = |name, weight, params: Option<String>, trial: Option<Value>, expect| match trial {
        Some(trial) => methods.push(Method {
            name,
            weight,
            params,
            trial,
            expect,
        }),
        None => without.push(name),
    };
    let non_null = Some("{ result = \"non-null\" }");
    // ethspam's defaults, per 5,000 calls.
    add(
        "eth_call",
        2000,
        Some(file("calls.jsonl")),
        harvest.calls.first().cloned(),
        None,
    );
    let tx = first(&harvest.transactions);
    let tx_params = Some(format!("[{}]", file("transactions.txt")));
    add(
        "eth_getTransactionReceipt",
        600,
        tx_params.clone(),
        tx.clone().map(|t| json!([t])),
        non_null,
    );
    let address = first(&harvest.addresses);
    let at_latest = Some(format!("[{}, \"latest\"]", file("addresses.txt")));
    add(
        "eth_getBalance",
        550,
        at_latest.clone(),
        address.clone().map(|a| json!([a, "latest"])),
        None,
    );
    let block = first(&harvest.blocks_with_transactions);
    let block_params = Some(format!("[{}, false]", file("blocks.txt")));
    add(
        "eth_getBlockByNumber",
        400,
        block_params,
        block.map(|b| json!([b, false])),
        non_null,
    );
    add(
        "eth_getTransactionCount",
        400,
        at_latest,
        address.map(|a| json!([a, "latest"])),
        None,
    );
    add("eth_blockNumber", 350, None, Some(json!([])), None);
    add(
        "eth_getTransactionByHash",
        250,
        tx_params,
        tx.map(|t| json!([t])),
        non_null,
    );
    add(
        "eth_getLogs",
        250,
        Some(file("log-filters.jsonl")),
        harvest.log_filters.first().cloned(),
        None,
    );
    let contract = first(&harvest.contracts).map(|c| json!([c, "latest"]));
    add(
        "eth_getCode",
        100,
        Some(format!("[{}, \"latest\"]", file("contracts.txt"))),
        contract,
        None,
    );
    (methods, without)
}

/// The scenario and its data files, each method tried once on `session`.
pub async fn scenario(
    session: &mut Session,
    harvest: &Harvest,
    target: &str,
    stem: &str,
) -> Result<FromCapture, String> {
    let data = format!("{stem}-data");
    let mut kept = Vec::new();
    let (methods, without) = methods(harvest, &data);
    let mut left_out: Vec<String> = (without.iter())
        .map(|name| {
            format!(
                "{name}: the blocks gave no value to call it with (no contract with code was called in them)"
            )
        })
        .collect();
    for method in methods {
        match session.call(method.name, &method.trial).await {
            Ok(_) => kept.push(method),
            Err(why) => left_out.push(format!("{}: the node refused its trial call: {why}", method.name)),
        }
    }
    if kept.is_empty() {
        return Err("the node answered none of the mix's methods".into());
    }
    let mut text = head(harvest, target, stem, &left_out);
    for method in &kept {
        let _ = write!(
            text,
            "\n[[calls]]\nmethod = \"{}\"\nweight = {}\n",
            method.name, method.weight
        );
        if let Some(params) = &method.params {
            let _ = writeln!(text, "params = {params}");
        }
        if let Some(expect) = method.expect {
            let _ = writeln!(text, "expect = {expect}");
        }
    }
    if kept.iter().any(|m| m.name == "eth_getTransactionReceipt") {
        let _ = write!(text, "{}", receipts_flow(&data));
    } else {
        text.push_str(
            "\n# Left out: the block → receipts flow, as the node refused eth_getTransactionReceipt.\n",
        );
    }
    let lines = |values: &[String]| values.iter().map(|v| format!("{v}\n")).collect::<String>();
    let json_lines = |values: &[Value]| values.iter().map(|v| format!("{v}\n")).collect::<String>();
    let files = [
        ("blocks.txt", lines(&harvest.blocks_with_transactions)),
        ("transactions.txt", lines(&harvest.transactions)),
        ("addresses.txt", lines(&harvest.addresses)),
        ("contracts.txt", lines(&harvest.contracts)),
        ("calls.jsonl", json_lines(&harvest.calls)),
        ("log-filters.jsonl", json_lines(&harvest.log_filters)),
    ];
    Ok(FromCapture {
        scenario: text,
        data_files: (files.into_iter())
            .filter(|(_, lines)| !lines.is_empty())
            .map(|(name, lines)| (format!("{data}/{name}"), lines))
            .collect(),
    })
}

fn head(harvest: &Harvest, target: &str, stem: &str, left_out: &[String]) -> String {
    let mut text = format!(
        "# Made by `volley init --from-node` from {}: blocks 0x{:x} to 0x{:x} ({} transactions).\n\
         # The values are the chain's own, in {stem}-data/; harvest again when the node prunes them.\n\
         # The weights are ethspam's defaults (github.com/shazow/ethspam), from a sample of\n\
         # Infura's traffic: eth_call 2000, eth_getTransactionReceipt 600, eth_getBalance 550,\n\
         # eth_getBlockByNumber 400, eth_getTransactionCount 400, eth_blockNumber 350,\n\
         # eth_getTransactionByHash 250, eth_getLogs 250, eth_getCode 100.\n",
        crate::redact::url(target),
        harvest.first,
        harvest.last,
        harvest.transactions.len()
    );
    for why in left_out {
        let _ = writeln!(text, "# Left out: {why}");
    }
    let _ = write!(
        text,
        "\nname = \"{stem}\"\ntarget = \"{target}\"\ntimeout = \"10s\"\n\n[load]\nconcurrency = 16\nduration = \"30s\"\nwarmup = \"2s\"\n"
    );
    text
}

/// An indexer's loop: a block, then each of its transactions' receipts.
fn receipts_flow(data: &str) -> String {
    format!(
        r#"
# A block of the harvest, then the receipt of each of its transactions.
[[flows]]
name = "receipts"
weight = 100

[[flows.steps]]
method = "eth_getBlockByNumber"
params = ["${{file('{data}/blocks.txt')}}", false]
capture = {{ tx = {{ pointer = "/transactions/*", pick = "all" }} }}

[[flows.steps]]
method = "eth_getTransactionReceipt"
params = ["${{tx}}"]
for_each = "tx"
for_each_limit = 20
expect = {{ pointer = "/transactionHash", equals = "${{tx}}" }}
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_most_seen_come_first_each_once() {
        let values: Vec<String> = ["a", "b", "b", "c", "b", "c"].map(String::from).to_vec();
        assert_eq!(most_seen(values.iter()), ["b", "c", "a"]);
    }

    #[test]
    fn a_method_without_values_is_not_in_the_mix() {
        let harvest = Harvest {
            transactions: vec!["0xaa".into()],
            ..Harvest::default()
        };
        let (methods, without) = methods(&harvest, "d");
        let names: Vec<&str> = methods.iter().map(|m| m.name).collect();
        assert_eq!(
            names,
            [
                "eth_getTransactionReceipt",
                "eth_blockNumber",
                "eth_getTransactionByHash"
            ]
        );
        assert_eq!(without.len(), 6, "{without:?}");
    }
}
