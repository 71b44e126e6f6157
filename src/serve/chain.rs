//! The chain's transactions, for flows that carry a value from one answer
//! to the next call: hashes handed out (listed in a block, or answered to
//! `eth_sendRawTransaction`) get a receipt once asked for often enough, as
//! a node's transaction is mined after a while; any other hash gets `null`.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::Instant;

use serde_json::Value;

use super::methods::{self, MethodResult, INVALID_PARAMS};
use super::{ServeConfig, ServerStats};

/// The most transactions `--block-transactions` may list in a block (a
/// full block of them is about 7 MB).
pub const MAX_BLOCK_TRANSACTIONS: u64 = 10_000;
/// The most `null` answers `--receipts-after` may ask for before a receipt.
pub const MAX_RECEIPTS_AFTER: u32 = 1_000_000;
/// Hashes (and, apart, blocks) remembered at most, so a long run cannot
/// eat memory: past it the oldest is forgotten, not the newest (a flow
/// asks about what it was just handed), and a forgotten hash answers `null`
/// as an unknown one would. 900,000 keeps each map within 2^20 buckets:
/// about 110 MB for both at most, not twice that.
const MAX_REMEMBERED: usize = 900_000;

/// A transaction hash's 32 bytes.
pub type TxHash = [u8; 32];

/// What the chain methods see of the server.
pub struct Chain<'a> {
    pub config: &'a ServeConfig,
    pub stats: &'a ServerStats,
    /// When the head was at its first block (`methods::head`).
    pub started: Instant,
}

impl Chain<'_> {
    /// Transactions a block lists: the flag's value, held to its bound
    /// for a config made in process, where no flag checked it.
    pub fn per_block(&self) -> u64 {
        self.config.block_transactions.min(MAX_BLOCK_TRANSACTIONS)
    }

    /// Notes that block `number`'s transactions were handed out.
    pub fn hand_out_block(&self, number: u64) {
        let mut ledger = self.stats.ledger.lock();
        if ledger.blocks.insert_new(number, ()) {
            self.stats
                .transactions_handed_out
                .fetch_add(self.per_block(), Ordering::Relaxed);
        }
    }

    /// `eth_sendRawTransaction([raw])`: the hash of the raw bytes, handed
    /// out (mined in the head block as it was when sent).
    pub fn send_raw(&self, params: &Value) -> MethodResult {
        let raw = params.get(0).and_then(Value::as_str).ok_or(INVALID_PARAMS)?;
        let digits = raw.strip_prefix("0x").ok_or(INVALID_PARAMS)?;
        if digits.is_empty() || digits.len() % 2 != 0 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(INVALID_PARAMS);
        }
        // The hex digits, lower-cased, stand for the bytes: the same raw
        // in either case is the same transaction.
        let hash = raw_hash(digits.bytes().map(|b| b.to_ascii_lowercase()));
        let mined = Mined {
            block: methods::head(self.started),
            index: 0,
        };
        let entry = Entry { asks: 0, mined };
        if self.stats.ledger.lock().hashes.insert_new(hash, entry) {
            self.stats.transactions_handed_out.fetch_add(1, Ordering::Relaxed);
        }
        Ok(format!("\"{}\"", hex(&hash)))
    }

    /// `eth_getTransactionReceipt([hash])`: `null` for the first
    /// `receipts_after` asks of a hash handed out, then its receipt; `null`
    /// always for any other hash.
    pub fn receipt(&self, params: &Value) -> MethodResult {
        let text = params.get(0).and_then(Value::as_str).ok_or(INVALID_PARAMS)?;
        let hash = parse_hash(text).ok_or(INVALID_PARAMS)?;
        let stats = self.stats;
        let Some((asks, mined)) = self.ask(&hash) else {
            stats.receipts_unknown.fetch_add(1, Ordering::Relaxed);
            return Ok("null".into());
        };
        stats.receipts_asked.fetch_add(1, Ordering::Relaxed);
        if asks <= self.config.receipts_after {
            return Ok("null".into());
        }
        stats.receipts_found.fetch_add(1, Ordering::Relaxed);
        Ok(receipt(&hash, mined))
    }

    /// Counts an ask of `hash`: the asks so far, this one too, and where it
    /// was mined; `None` for a hash never handed out (or forgotten).
    fn ask(&self, hash: &TxHash) -> Option<(u32, Mined)> {
        let mut ledger = self.stats.ledger.lock();
        if ledger.hashes.get_mut(hash).is_none() {
            // A block's transaction is remembered from its first ask on,
            // not from the block's answer: thousands a block, mostly never
            // asked for.
            let (block, index) = listed_in(hash)?;
            if index >= self.per_block() || !ledger.blocks.contains(&block) {
                return None;
            }
            let entry = Entry {
                asks: 0,
                mined: Mined { block, index },
            };
            ledger.hashes.insert_new(*hash, entry);
        }
        let entry = ledger.hashes.get_mut(hash)?;
        entry.asks = entry.asks.saturating_add(1);
        Some((entry.asks, entry.mined))
    }
}

/// Where a transaction was mined.
#[derive(Clone, Copy, Debug)]
struct Mined {
    block: u64,
    index: u64,
}

#[derive(Debug)]
struct Entry {
    /// Times its receipt was asked for.
    asks: u32,
    mined: Mined,
}

/// The hashes and blocks handed out, behind one lock.
#[derive(Default)]
pub struct Ledger(Mutex<Remembered>);

impl Ledger {
    fn lock(&self) -> std::sync::MutexGuard<'_, Remembered> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl std::fmt::Debug for Ledger {
    /// Its sizes only: a million hashes are no one's debug output.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ledger = self.lock();
        f.debug_struct("Ledger")
            .field("blocks", &ledger.blocks.map.len())
            .field("hashes", &ledger.hashes.map.len())
            .finish()
    }
}

#[derive(Default)]
struct Remembered {
    /// Blocks whose transactions were listed.
    blocks: Bounded<u64, ()>,
    /// Hashes sent, or of a block's transactions and asked for.
    hashes: Bounded<TxHash, Entry>,
}

/// A map of at most `most` keys (`MAX_REMEMBERED`), the oldest forgotten
/// first.
struct Bounded<K, V> {
    map: HashMap<K, V>,
    order: VecDeque<K>,
    most: usize,
}

impl<K, V> Default for Bounded<K, V> {
    fn default() -> Self {
        Bounded {
            map: HashMap::new(),
            order: VecDeque::new(),
            most: MAX_REMEMBERED,
        }
    }
}

impl<K: Hash + Eq + Copy, V> Bounded<K, V> {
    /// Inserts `key` if it is new (true), forgetting the oldest key when full.
    fn insert_new(&mut self, key: K, value: V) -> bool {
        if self.map.contains_key(&key) {
            return false;
        }
        if self.map.len() >= self.most {
            if let Some(oldest) = self.order.pop_front() {
                self.map.remove(&oldest);
            }
        }
        self.map.insert(key, value);
        self.order.push_back(key);
        true
    }

    fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        self.map.get_mut(key)
    }

    fn contains(&self, key: &K) -> bool {
        self.map.contains_key(key)
    }
}

/// Block `number`'s transaction `index`: a hash that says which it is
/// (`listed_in`), so a block's thousands need not be remembered.
pub fn tx_hash(number: u64, index: u64) -> String {
    let check = listing_check(number, index);
    format!("0x{check:016x}{number:016x}{index:016x}{:016x}", !check)
}

fn listing_check(number: u64, index: u64) -> u64 {
    let mut bytes = [0u8; 18];
    bytes[..2].copy_from_slice(b"tx");
    bytes[2..10].copy_from_slice(&number.to_le_bytes());
    bytes[10..].copy_from_slice(&index.to_le_bytes());
    methods::fnv1a(&bytes)
}

/// The block and index a `tx_hash` names; `None` for any other hash.
fn listed_in(hash: &TxHash) -> Option<(u64, u64)> {
    let word = |i: usize| {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(&hash[i * 8..i * 8 + 8]);
        u64::from_be_bytes(bytes)
    };
    let (check, number, index, inverse) = (word(0), word(1), word(2), word(3));
    (inverse == !check && check == listing_check(number, index)).then_some((number, index))
}

/// Four FNV-1a lanes over the raw transaction: cheap, and the same raw
/// always gives the same hash.
fn raw_hash(bytes: impl Iterator<Item = u8>) -> TxHash {
    let mut lanes: [u64; 4] = std::array::from_fn(|k| 0xcbf2_9ce4_8422_2325 ^ (k as u64 + 1));
    for b in bytes {
        for lane in &mut lanes {
            *lane = (*lane ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    let mut hash = [0u8; 32];
    for (k, lane) in lanes.iter().enumerate() {
        hash[k * 8..k * 8 + 8].copy_from_slice(&lane.to_be_bytes());
    }
    hash
}

/// `0x` and 64 hex digits (either case) as bytes.
fn parse_hash(text: &str) -> Option<TxHash> {
    let digits = text.strip_prefix("0x")?.as_bytes();
    if digits.len() != 64 {
        return None;
    }
    let mut hash = [0u8; 32];
    for (byte, pair) in hash.iter_mut().zip(digits.chunks_exact(2)) {
        let pair = std::str::from_utf8(pair).ok()?;
        // from_str_radix takes a leading `+`: only hex digits pass.
        if !pair.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        *byte = u8::from_str_radix(pair, 16).ok()?;
    }
    Some(hash)
}

fn hex(hash: &TxHash) -> String {
    let mut out = String::with_capacity(66);
    out.push_str("0x");
    for b in hash {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// A successful transfer's receipt, as a node answers it after EIP-1559.
fn receipt(hash: &TxHash, mined: Mined) -> String {
    let seed = methods::transaction_seed(mined.block, mined.index);
    let cumulative = 21_000u64.saturating_mul(mined.index.saturating_add(1));
    format!(
        r#"{{"transactionHash":"{}","blockHash":"{}","blockNumber":{},"transactionIndex":{},"status":"0x1","gasUsed":"0x5208","cumulativeGasUsed":{},"logs":[],"from":"{}","to":"{}","type":"0x2","effectiveGasPrice":"0x4a817c800","contractAddress":null,"logsBloom":"0x{}"}}"#,
        hex(hash),
        methods::block_hash(mined.block),
        methods::quantity(mined.block),
        methods::quantity(mined.index),
        methods::quantity(cumulative),
        methods::address(seed),
        methods::address(seed ^ 1),
        "0".repeat(512),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config(block_transactions: u64, receipts_after: u32) -> ServeConfig {
        ServeConfig {
            block_transactions,
            receipts_after,
            ..ServeConfig::default()
        }
    }

    /// Calls `method` on a server of `config` and `stats`, its result as JSON.
    fn call(config: &ServeConfig, stats: &ServerStats, method: &str, params: Value) -> Result<Value, i64> {
        let chain = Chain {
            config,
            stats,
            started: Instant::now(),
        };
        let mut hold = std::time::Duration::ZERO;
        let text = methods::call(method, Some(&params.to_string()), &chain, &mut hold).map_err(|e| e.0)?;
        Ok(serde_json::from_str(&text).expect("a JSON result"))
    }

    fn count(counter: &std::sync::atomic::AtomicU64) -> u64 {
        ServerStats::get(counter)
    }

    fn is_hash(value: &Value) -> bool {
        value
            .as_str()
            .is_some_and(|h| parse_hash(h).is_some() && h == h.to_ascii_lowercase())
    }

    #[test]
    fn a_block_lists_its_transactions_hashed_or_whole() {
        let (config, stats) = (config(3, 0), ServerStats::default());
        let block = call(&config, &stats, "eth_getBlockByNumber", json!(["0x10", false])).unwrap();
        let hashes = block["transactions"].as_array().unwrap().clone();
        assert_eq!(hashes.len(), 3);
        assert!(hashes.iter().all(is_hash), "{hashes:?}");
        let distinct: std::collections::HashSet<_> = hashes.iter().map(|h| h.as_str().unwrap()).collect();
        assert_eq!(distinct.len(), 3);
        assert_eq!(block["gasUsed"], "0xf618", "three transfers of 21,000 gas");
        let next = call(&config, &stats, "eth_getBlockByNumber", json!(["0x11"])).unwrap();
        assert!(next["transactions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| !hashes.contains(h)));
        let full = call(&config, &stats, "eth_getBlockByNumber", json!(["0x10", true])).unwrap();
        let whole = full["transactions"].as_array().unwrap();
        for (i, transaction) in whole.iter().enumerate() {
            assert_eq!(transaction["hash"], hashes[i]);
            assert_eq!(transaction["blockHash"], block["hash"]);
            assert_eq!(transaction["transactionIndex"], format!("0x{i:x}"));
        }
        // Block 0x10 counted once, though answered twice.
        assert_eq!(count(&stats.transactions_handed_out), 6);
    }

    #[test]
    fn a_receipt_comes_after_its_nulls_and_names_its_block() {
        let (config, stats) = (config(2, 2), ServerStats::default());
        let block = call(&config, &stats, "eth_getBlockByNumber", json!(["0x10", false])).unwrap();
        let hash = block["transactions"][1].clone();
        let ask = || call(&config, &stats, "eth_getTransactionReceipt", json!([hash])).unwrap();
        assert_eq!(ask(), Value::Null);
        assert_eq!(ask(), Value::Null);
        let receipt = ask();
        assert_eq!(receipt["transactionHash"], hash);
        assert_eq!(receipt["blockHash"], block["hash"]);
        assert_eq!(receipt["blockNumber"], "0x10");
        assert_eq!(receipt["transactionIndex"], "0x1");
        assert_eq!(receipt["cumulativeGasUsed"], "0xa410");
        assert_eq!(receipt["status"], "0x1");
        assert_eq!(receipt["contractAddress"], Value::Null);
        assert_eq!(receipt["logsBloom"].as_str().unwrap().len(), 514);
        assert_eq!(ask(), receipt, "once mined, always the same receipt");
        // Upper-case hex names the same transaction.
        let upper = format!("0x{}", hash.as_str().unwrap()[2..].to_ascii_uppercase());
        let again = call(&config, &stats, "eth_getTransactionReceipt", json!([upper])).unwrap();
        assert_eq!(again, receipt);
        assert_eq!(count(&stats.receipts_asked), 5);
        assert_eq!(count(&stats.receipts_found), 3);
        assert_eq!(count(&stats.receipts_unknown), 0);
    }

    #[test]
    fn a_hash_never_handed_out_has_no_receipt() {
        let (config, stats) = (config(2, 0), ServerStats::default());
        let ask = |hash: String| call(&config, &stats, "eth_getTransactionReceipt", json!([hash]));
        // Made as a block's would be, but that block was never answered.
        assert_eq!(ask(tx_hash(0x10, 0)), Ok(Value::Null));
        call(&config, &stats, "eth_getBlockByNumber", json!(["0x10"])).unwrap();
        assert_eq!(ask(tx_hash(0x10, 2)), Ok(Value::Null), "past the block's last");
        assert_eq!(ask(format!("0x{}", "ab".repeat(32))), Ok(Value::Null));
        assert_eq!(count(&stats.receipts_unknown), 3);
        assert!(ask(tx_hash(0x10, 1)).unwrap().is_object());
        assert_eq!(
            (count(&stats.receipts_asked), count(&stats.receipts_found)),
            (1, 1)
        );
        for bad in [
            json!(["0x12"]),
            json!([format!("0x{}", "g".repeat(64))]),
            json!([format!("0x+{}", "1".repeat(63))]),
            json!([format!("{}", "1".repeat(66))]),
            json!([format!("0x{}", "é".repeat(32))]),
            json!([1]),
            json!([]),
            json!({}),
        ] {
            let params = bad.to_string();
            assert_eq!(
                call(&config, &stats, "eth_getTransactionReceipt", bad),
                Err(-32602),
                "{params}"
            );
        }
        assert_eq!(count(&stats.receipts_unknown), 3);
    }

    #[test]
    fn a_sent_transaction_is_hashed_from_its_bytes_and_handed_out() {
        let (config, stats) = (config(0, 1), ServerStats::default());
        let send = |raw: Value| call(&config, &stats, "eth_sendRawTransaction", json!([raw]));
        let hash = send(json!("0x02f8ab")).unwrap();
        assert!(is_hash(&hash), "{hash}");
        assert_eq!(send(json!("0x02F8AB")).unwrap(), hash);
        assert_ne!(send(json!("0x02f8ac")).unwrap(), hash);
        assert_eq!(count(&stats.transactions_handed_out), 2);
        let ask = || call(&config, &stats, "eth_getTransactionReceipt", json!([hash])).unwrap();
        assert_eq!(ask(), Value::Null);
        assert_eq!(ask()["transactionHash"], hash);
        for bad in [
            json!("0x"),
            json!("0x123"),
            json!("02f8"),
            json!("0xzz"),
            json!(7),
        ] {
            assert_eq!(send(bad.clone()), Err(-32602), "{bad}");
        }
        assert_eq!(
            call(&config, &stats, "eth_sendRawTransaction", json!([])),
            Err(-32602)
        );
    }

    #[test]
    fn with_no_transactions_a_block_lists_none_and_hands_none_out() {
        let (config, stats) = (ServeConfig::default(), ServerStats::default());
        let block = call(&config, &stats, "eth_getBlockByNumber", json!(["0x10", true])).unwrap();
        assert_eq!(block["transactions"], json!([]));
        assert_eq!(count(&stats.transactions_handed_out), 0);
        let ask = call(
            &config,
            &stats,
            "eth_getTransactionReceipt",
            json!([tx_hash(0x10, 0)]),
        );
        assert_eq!(ask, Ok(Value::Null));
        assert_eq!(count(&stats.receipts_unknown), 1);
    }

    #[test]
    fn a_config_past_the_bound_is_held_to_it() {
        let (config, stats) = (config(u64::MAX, 0), ServerStats::default());
        let chain = Chain {
            config: &config,
            stats: &stats,
            started: Instant::now(),
        };
        assert_eq!(chain.per_block(), MAX_BLOCK_TRANSACTIONS);
    }

    #[test]
    fn the_oldest_is_forgotten_when_full() {
        let mut bounded: Bounded<u64, ()> = Bounded {
            most: 2,
            ..Bounded::default()
        };
        assert!(bounded.insert_new(1, ()));
        assert!(!bounded.insert_new(1, ()));
        assert!(bounded.insert_new(2, ()));
        assert!(bounded.insert_new(3, ()));
        assert!(!bounded.contains(&1) && bounded.contains(&2) && bounded.contains(&3));
        assert_eq!(bounded.map.len(), 2);
        assert_eq!(bounded.order.len(), 2);
    }

    #[test]
    fn hashes_say_which_block_listed_them() {
        let hash = parse_hash(&tx_hash(1_000_123, 42)).unwrap();
        assert_eq!(listed_in(&hash), Some((1_000_123, 42)));
        let mut spoiled = hash;
        spoiled[31] ^= 1;
        assert_eq!(listed_in(&spoiled), None);
        assert_eq!(listed_in(&raw_hash(b"0x02".iter().copied())), None);
        assert_eq!(hex(&hash), tx_hash(1_000_123, 42));
    }
}
