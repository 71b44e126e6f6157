//! The built-in server's methods.

use std::time::Duration;

use serde_json::Value;

use super::chain::{self, Chain};

/// A method's answer: the JSON text of its result, or an error.
pub type MethodResult = Result<String, (i64, &'static str)>;

pub const METHOD_NOT_FOUND: (i64, &str) = (-32601, "Method not found");
pub const INVALID_PARAMS: (i64, &str) = (-32602, "Invalid params");

/// The longest `sleep` the server will do, so a typo cannot hang a test.
const MAX_SLEEP: Duration = Duration::from_secs(60);

/// Runs `method`; `hold` is raised by methods that take time (`sleep`).
/// `chain` is the server's state, for the methods of its transactions.
pub fn call(method: &str, params: Option<&str>, chain: &Chain, hold: &mut Duration) -> MethodResult {
    let started = chain.started;
    match method {
        "echo" => Ok(params.unwrap_or("null").to_string()),
        // Takes any params and does nothing: a method to send as a
        // notification (called, it answers null).
        "log" => Ok("null".to_string()),
        "add" => add(parse(params)?),
        "sleep" => {
            let ms = first_number(&parse(params)?, "ms").ok_or(INVALID_PARAMS)?;
            let wanted = Duration::from_millis(ms);
            if wanted > MAX_SLEEP {
                return Err(INVALID_PARAMS);
            }
            *hold = (*hold).max(wanted);
            Ok(ms.to_string())
        }
        "burn" => {
            let ms = first_number(&parse(params)?, "ms").ok_or(INVALID_PARAMS)?;
            if ms > MAX_BURN_MS {
                return Err(INVALID_PARAMS);
            }
            Ok(burn(Duration::from_millis(ms)).to_string())
        }
        "block" => {
            let n = first_number(&parse(params)?, "transactions").ok_or(INVALID_PARAMS)?;
            if n > MAX_BLOCK_TRANSACTIONS {
                return Err(INVALID_PARAMS);
            }
            Ok(made_block(head(started), n))
        }
        "eth_chainId" => Ok(quantity(1337)),
        "eth_blockNumber" => Ok(quantity(head(started))),
        "eth_getBalance" => {
            let params = parse(params)?;
            let address = params.get(0).and_then(Value::as_str).ok_or(INVALID_PARAMS)?;
            if !is_hex_bytes(address, 20) {
                return Err(INVALID_PARAMS);
            }
            Ok(quantity(fnv1a(address.to_ascii_lowercase().as_bytes()) >> 4))
        }
        "eth_getBlockByNumber" => get_block_by_number(&parse(params)?, chain),
        "eth_getTransactionReceipt" => chain.receipt(&parse(params)?),
        "eth_sendRawTransaction" => chain.send_raw(&parse(params)?),
        // MCP's and LSP's methods, so the server stands in for either.
        other => super::stand_in::call(other, &parse(params)?).unwrap_or(Err(METHOD_NOT_FOUND)),
    }
}

/// `eth_getBlockByNumber([number, full])`: `null` past the head; a block
/// listing `--block-transactions` transactions, hashes only or (`full`
/// true) whole, each handed out.
fn get_block_by_number(params: &Value, chain: &Chain) -> MethodResult {
    let head = head(chain.started);
    let number = match params.get(0).and_then(Value::as_str) {
        Some("latest" | "pending" | "safe" | "finalized") => head,
        Some("earliest") => 0,
        Some(hex) => parse_quantity(hex).ok_or(INVALID_PARAMS)?,
        None => return Err(INVALID_PARAMS),
    };
    if number > head {
        return Ok("null".to_string());
    }
    let count = chain.per_block();
    let full = params.get(1).and_then(Value::as_bool).unwrap_or(false);
    if count > 0 {
        chain.hand_out_block(number);
    }
    let block_hash = block_hash(number);
    // A whole transaction is about 700 bytes, a quoted hash 69.
    let each = if full { 700 } else { 70 };
    let mut out = String::with_capacity(each * count as usize + 512);
    out.push_str(&format!(
        r#"{{"number":{},"hash":"{block_hash}","parentHash":"{}","timestamp":{},"gasUsed":{},"transactions":["#,
        quantity(number),
        self::block_hash(number.saturating_sub(1)),
        quantity(1_700_000_000 + number * 12),
        quantity(21_000 * count),
    ));
    for i in 0..count {
        if i > 0 {
            out.push(',');
        }
        let hash = chain::tx_hash(number, i);
        if full {
            push_transaction(&mut out, &block_hash, number, i, &hash);
        } else {
            out.push('"');
            out.push_str(&hash);
            out.push('"');
        }
    }
    out.push_str("]}");
    Ok(out)
}

/// A block's hash: its number's, in 32 bytes.
pub(super) fn block_hash(number: u64) -> String {
    word_hash(number)
}

/// 32 bytes that look like a hash, made of `seed`.
fn word_hash(seed: u64) -> String {
    format!(
        "0x{:016x}{:016x}{:016x}{:016x}",
        fnv1a(&seed.to_le_bytes()),
        seed,
        !seed,
        seed ^ 0x5eed
    )
}

/// 20 bytes that look like an address, made of `seed`.
pub(super) fn address(seed: u64) -> String {
    format!(
        "0x{:016x}{:016x}{:08x}",
        fnv1a(&seed.to_be_bytes()),
        seed,
        seed as u32
    )
}

/// What a block's transaction `i` is made of (its sender, its nonce...).
pub(super) fn transaction_seed(number: u64, i: u64) -> u64 {
    number.wrapping_mul(100_000).wrapping_add(i)
}

/// The most transactions one `block` answer holds (about 10 MB).
const MAX_BLOCK_TRANSACTIONS: u64 = 15_000;

thread_local! {
    /// The last block each server thread made: (number, transactions,
    /// text). The head moves once a second, so a load of `block` calls
    /// makes each block once a second per thread, not once per call (at
    /// 1 MB, making it was most of the server's work: it, not the client
    /// under test, set the pace).
    static LAST_BLOCK: std::cell::RefCell<Option<(u64, u64, String)>> = const { std::cell::RefCell::new(None) };
}

/// `block(number, count)`, made once while it stays the last one asked for.
fn made_block(number: u64, count: u64) -> String {
    LAST_BLOCK.with_borrow_mut(|last| match last {
        Some((n, c, text)) if (*n, *c) == (number, count) => text.clone(),
        _ => last.insert((number, count, block(number, count))).2.clone(),
    })
}

/// A block as `eth_getBlockByNumber(n, true)` answers it, with `count`
/// full transactions (about 700 bytes each, alike in shape to mainnet's
/// EIP-1559 ones), so that the answer's size is set by one number: 150
/// transactions is 122 KB, 1,500 1.2 MB.
fn block(number: u64, count: u64) -> String {
    let block_hash = word_hash(number);
    let mut out = String::with_capacity(700 * count as usize + 1024);
    out.push_str(&format!(
        r#"{{"number":{},"hash":"{block_hash}","parentHash":"{}","timestamp":{},"gasLimit":"0x1c9c380","gasUsed":"0x{:x}","baseFeePerGas":"0x3b9aca00","miner":"{}","transactions":["#,
        quantity(number),
        word_hash(number.wrapping_sub(1)),
        quantity(1_700_000_000 + number * 12),
        21_000 * count,
        address(number)
    ));
    for i in 0..count {
        if i > 0 {
            out.push(',');
        }
        push_transaction(
            &mut out,
            &block_hash,
            number,
            i,
            &word_hash(transaction_seed(number, i)),
        );
    }
    out.push_str("]}");
    out
}

/// Block `number`'s transaction `i`, hashed `hash`, as a whole object.
fn push_transaction(out: &mut String, block_hash: &str, number: u64, i: u64, hash: &str) {
    let seed = transaction_seed(number, i);
    out.push_str(&format!(
        r#"{{"blockHash":"{block_hash}","blockNumber":{},"from":"{}","to":"{}","gas":"0x5208","gasPrice":"0x4a817c800","maxFeePerGas":"0x6fc23ac00","maxPriorityFeePerGas":"0x3b9aca00","hash":"{hash}","input":"0xa9059cbb000000000000000000000000{:016x}{:016x}{:08x}0000000000000000000000000000000000000000000000000de0b6b3a7640000","nonce":"0x{:x}","transactionIndex":"0x{i:x}","value":"0x0","type":"0x2","accessList":[],"chainId":"0x539","v":"0x1","r":"{}","s":"{}","yParity":"0x1"}}"#,
        quantity(number),
        address(seed),
        address(seed ^ 1),
        fnv1a(&i.to_le_bytes()),
        seed,
        i as u32,
        seed % 1000,
        word_hash(seed ^ 0xaaaa),
        word_hash(seed ^ 0x5555),
    ));
}

/// The most CPU one `burn` call may spend.
const MAX_BURN_MS: u64 = 1_000;

/// Spends `cpu` of this thread's CPU time (not wall time: a busy machine
/// makes it slower, never cheaper), so that what the server spent is known.
/// Returns the rounds spun.
fn burn(cpu: Duration) -> u64 {
    let thread_cpu = || {
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `now` is a valid timespec for the call to fill.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
        Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
    };
    let until = thread_cpu() + cpu;
    let mut rounds: u64 = 0;
    while thread_cpu() < until {
        rounds = std::hint::black_box(rounds.wrapping_add(1));
    }
    rounds
}

fn parse(params: Option<&str>) -> Result<Value, (i64, &'static str)> {
    match params {
        Some(raw) => serde_json::from_str(raw).map_err(|_| INVALID_PARAMS),
        None => Ok(Value::Null),
    }
}

/// `[n]` or `{"name": n}`.
fn first_number(params: &Value, name: &str) -> Option<u64> {
    match params {
        Value::Array(items) => items.first()?.as_u64(),
        Value::Object(fields) => fields.get(name)?.as_u64(),
        _ => None,
    }
}

pub(super) fn add(params: Value) -> MethodResult {
    let numbers: Vec<&Value> = match &params {
        Value::Array(items) => items.iter().collect(),
        Value::Object(fields) => fields.values().collect(),
        _ => return Err(INVALID_PARAMS),
    };
    if numbers.is_empty() || !numbers.iter().all(|n| n.is_number()) {
        return Err(INVALID_PARAMS);
    }
    if numbers.iter().all(|n| n.is_i64()) {
        let sum = numbers
            .iter()
            .try_fold(0i64, |acc, n| acc.checked_add(n.as_i64()?));
        if let Some(sum) = sum {
            return Ok(sum.to_string());
        }
    }
    let sum: f64 = numbers.iter().filter_map(|n| n.as_f64()).sum();
    serde_json::to_string(&sum).map_err(|_| INVALID_PARAMS)
}

/// The chain head moves one block a second from an arbitrary height.
pub(super) fn head(started: std::time::Instant) -> u64 {
    1_000_000 + started.elapsed().as_secs()
}

/// Ethereum's quantity: `0x`-prefixed hex, most compact, `0x0` for zero.
pub fn quantity(n: u64) -> String {
    format!("\"0x{n:x}\"")
}

fn parse_quantity(text: &str) -> Option<u64> {
    let digits = text.strip_prefix("0x")?;
    if digits.is_empty() || (digits.len() > 1 && digits.starts_with('0')) {
        return None;
    }
    u64::from_str_radix(digits, 16).ok()
}

fn is_hex_bytes(text: &str, bytes: usize) -> bool {
    text.strip_prefix("0x")
        .is_some_and(|h| h.len() == bytes * 2 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

pub(super) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ *b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_block_is_as_large_as_its_transactions_and_valid_json() {
        let small: serde_json::Value = serde_json::from_str(&super::block(7, 0)).unwrap();
        assert_eq!(small["transactions"].as_array().unwrap().len(), 0);
        let text = super::block(7, 150);
        let full: serde_json::Value = serde_json::from_str(&text).unwrap();
        let transactions = full["transactions"].as_array().unwrap();
        assert_eq!(transactions.len(), 150);
        assert_eq!(transactions[3]["transactionIndex"], "0x3");
        assert!(
            (90_000..130_000).contains(&text.len()),
            "about 100 KB: {}",
            text.len()
        );
        assert!(super::block(7, 1500).len() > 900_000, "about 1 MB");
        // Made once, kept while it is the one asked for.
        assert_eq!(super::made_block(7, 150), text);
        assert_eq!(super::made_block(7, 150), text);
        assert_eq!(super::made_block(7, 2), super::block(7, 2));
        assert_eq!(super::made_block(8, 2), super::block(8, 2));
        assert_ne!(super::block(8, 2), super::block(7, 2));
    }

    use super::*;

    fn run(method: &str, params: &str) -> MethodResult {
        run_holding(method, params).0
    }

    /// The answer, and the hold the method asked for.
    fn run_holding(method: &str, params: &str) -> (MethodResult, Duration) {
        let mut hold = Duration::ZERO;
        let (config, stats) = (
            super::super::ServeConfig::default(),
            super::super::ServerStats::default(),
        );
        let chain = Chain {
            config: &config,
            stats: &stats,
            started: std::time::Instant::now(),
        };
        (call(method, Some(params), &chain, &mut hold), hold)
    }

    #[test]
    fn without_block_transactions_blocks_are_as_they_were() {
        // The answer before `--block-transactions`, byte for byte.
        let block = run("eth_getBlockByNumber", r#"["0x10",false]"#).unwrap();
        assert_eq!(
            block,
            r#"{"number":"0x10","hash":"0x987468c2d70edbd50000000000000010ffffffffffffffef0000000000005efd","parentHash":"0x43addb5f5ec6ac6a000000000000000ffffffffffffffff00000000000005ee2","timestamp":"0x6553f1c0","gasUsed":"0x0","transactions":[]}"#
        );
        assert_eq!(run("eth_getBlockByNumber", r#"["0x10",true]"#).unwrap(), block);
        // And `block`'s, fingerprinted: the FNV-1a of its text before the
        // transaction's shape was shared with eth_getBlockByNumber.
        assert_eq!(fnv1a(super::block(7, 150).as_bytes()), 0xe77b_8319_26f6_ea7d);
        assert_eq!(
            fnv1a(super::block(1_000_123, 3).as_bytes()),
            0x534d_81ba_3ff0_57a8
        );
    }

    #[test]
    fn methods_answer_as_documented() {
        assert_eq!(run("echo", r#"[1,"a"]"#), Ok(r#"[1,"a"]"#.to_string()));
        assert_eq!(run("log", r#"{"level":"info"}"#), Ok("null".to_string()));
        assert_eq!(run("add", "[1,2,3]"), Ok("6".to_string()));
        assert_eq!(run("add", r#"{"a":1.5,"b":1}"#), Ok("2.5".to_string()));
        assert_eq!(run("add", r#"["x"]"#), Err(INVALID_PARAMS));
        assert_eq!(run("eth_chainId", "[]"), Ok("\"0x539\"".to_string()));
        assert_eq!(run("nope", "[]"), Err(METHOD_NOT_FOUND));
        assert_eq!(run("eth_getBalance", r#"["0x12"]"#), Err(INVALID_PARAMS));
        let balance = run(
            "eth_getBalance",
            r#"["0x00000000219ab540356cBB839Cbe05303d7705Fa","latest"]"#,
        )
        .unwrap();
        assert!(balance.starts_with("\"0x") && !balance.starts_with("\"0x0"));
        assert_eq!(
            run("eth_getBlockByNumber", r#"["0x99999999",false]"#),
            Ok("null".to_string())
        );
        let block: Value =
            serde_json::from_str(&run("eth_getBlockByNumber", r#"["latest",false]"#).unwrap()).unwrap();
        assert!(block["number"].as_str().unwrap().starts_with("0x"));
    }

    #[test]
    fn sleep_raises_the_hold() {
        assert_eq!(
            run_holding("sleep", "[25]"),
            (Ok("25".to_string()), Duration::from_millis(25))
        );
    }

    #[test]
    fn quantities_are_compact() {
        assert_eq!(quantity(0), "\"0x0\"");
        assert_eq!(quantity(1024), "\"0x400\"");
        assert_eq!(parse_quantity("0x41"), Some(65));
        assert_eq!(parse_quantity("0x041"), None);
        assert_eq!(parse_quantity("0x"), None);
    }
}
