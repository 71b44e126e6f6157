//! Named sets of pointers an `[equality]` table can leave out by name
//! (`ignore_sets = ["dev_chain"]`): what answers differ in by construction,
//! written once here rather than as a dozen rules in every file.

use super::{glob, pointer_matches, EqualityRule, RuleKind};

/// A named set: methods (a glob each) and pointers within their results.
#[derive(Debug, PartialEq)]
pub struct IgnoreSet {
    pub name: &'static str,
    /// What its pointers have in common, as a hint says it.
    pub about: &'static str,
    pub entries: &'static [(&'static str, &'static [&'static str])],
}

/// A block's own fields that two chains started apart never share: its
/// hash and its parent's, the state root of their own genesis accounts,
/// the time it was made, what each client writes in `extraData`, the
/// nonce and mixHash it draws, and the size that follows from those. Roots
/// of the block's transactions, receipts and withdrawals are left to
/// compare: the same transactions give the same roots on any chain.
const BLOCK: &[&str] = &[
    "/hash",
    "/parentHash",
    "/stateRoot",
    "/parentBeaconBlockRoot",
    "/timestamp",
    "/nonce",
    "/mixHash",
    "/extraData",
    "/size",
    "/transactions/*/blockHash",
];

/// Independent development chains (anvil, Hardhat, Ganache, a dev geth):
/// each block's own fields, and the block hash every transaction, receipt
/// and log carries.
const DEV_CHAIN: IgnoreSet = IgnoreSet {
    name: "dev_chain",
    about: "what independent development chains differ in by construction",
    entries: &[
        ("eth_getBlockBy*", BLOCK),
        ("eth_getHeaderBy*", BLOCK),
        ("eth_getUncleBy*", BLOCK),
        ("eth_getTransactionBy*", &["/blockHash"]),
        ("eth_getTransactionReceipt", &["/blockHash", "/logs/*/blockHash"]),
        ("eth_getBlockReceipts", &["/*/blockHash", "/*/logs/*/blockHash"]),
        ("eth_getLogs", &["/*/blockHash"]),
        ("eth_getFilter*", &["/*/blockHash"]),
    ],
};

/// Every set a scenario can name.
pub const IGNORE_SETS: &[IgnoreSet] = &[DEV_CHAIN];

impl IgnoreSet {
    /// The set called `name`, or an error naming the sets there are.
    pub fn named(name: &str) -> Result<&'static IgnoreSet, String> {
        IGNORE_SETS.iter().find(|s| s.name == name).ok_or_else(|| {
            let known: Vec<&str> = IGNORE_SETS.iter().map(|s| s.name).collect();
            format!(
                "`{name}` is not an ignore set: known sets are {}",
                known.join(", ")
            )
        })
    }

    /// Its pointers as rules: each value left out, the field still due.
    pub fn rules(&self) -> impl Iterator<Item = EqualityRule> + '_ {
        self.entries.iter().flat_map(|(method, pointers)| {
            pointers.iter().map(|pointer| EqualityRule {
                method: method.to_string(),
                pointer: Some(pointer.to_string()),
                kind: RuleKind::IgnoreValue,
            })
        })
    }

    /// Whether it leaves out `method`'s value at `pointer` (within the
    /// result, array indices as `*`).
    pub fn covers(&self, method: &str, pointer: &str) -> bool {
        self.entries
            .iter()
            .any(|(m, pointers)| glob(m, method) && pointers.iter().any(|p| pointer_matches(p, pointer)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_is_found_by_name_and_covers_only_its_methods_and_pointers() {
        let set = IgnoreSet::named("dev_chain").unwrap();
        assert!(set.covers("eth_getBlockByNumber", "/hash"));
        assert!(set.covers("eth_getBlockByHash", "/transactions/*/blockHash"));
        assert!(set.covers("eth_getLogs", "/*/blockHash"));
        assert!(!set.covers("eth_getBlockByNumber", "/gasLimit"));
        assert!(!set.covers("eth_getBlockByNumber", "/transactionsRoot"));
        assert!(!set.covers("eth_call", "/hash"));
        let error = IgnoreSet::named("dev_chains").unwrap_err();
        assert_eq!(
            error,
            "`dev_chains` is not an ignore set: known sets are dev_chain"
        );
        assert!(set
            .rules()
            .all(|r| r.kind == RuleKind::IgnoreValue && r.pointer.is_some()));
    }
}
