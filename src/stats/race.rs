//! The head race across targets: each target's arrivals of the same values
//! (a block hash from `newHeads`, a number from a poll), matched by value
//! after the run, tallied as who delivered each first and how far behind
//! the others were. Pure: arrivals are microseconds on a clock every
//! target shares, so the rules are tested on synthetic times.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use serde::{Deserialize, Serialize};

/// Distinct heads a target keeps: past this, new ones are not raced (said
/// in the output), so a server sending endless distinct values cannot grow
/// volley's memory. At one head a second, over a day of heads.
pub const MAX_HEADS: usize = 100_000;

/// A value longer than this is no head (a hash is 66 bytes): left out and
/// counted as unreadable, never kept.
pub const MAX_VALUE_BYTES: usize = 1024;

/// Heads first delivered this close to the end of any target's listening
/// are left out: another target may still have been on its way with them,
/// and its not having come yet is no miss.
pub const SETTLE_US: u64 = 1_000_000;

/// One target's arrivals: each head (by [`head_key`]) and when it first
/// came on any of the target's connections, in µs on the shared clock.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Arrivals {
    pub heads: HashMap<u64, u64>,
    /// From the target's measured start (a warmup is no race) ...
    pub from_us: u64,
    /// ... until it stopped listening, or filled its [`MAX_HEADS`].
    pub until_us: u64,
    /// It reached [`MAX_HEADS`]: later heads were not kept.
    pub capped: bool,
    /// Notifications or poll results with no value at the pointer (or a
    /// null, or one over [`MAX_VALUE_BYTES`]).
    pub unreadable: u64,
}

/// A target's delays behind the first deliverer, over the heads it
/// delivered (0 where it was first).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct LagMs {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

/// One target's place in the race.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RaceTally {
    /// Heads raced: first delivered by any target while every target listened.
    pub heads: u64,
    /// Of those, the ones this target delivered first (a tie is first for each).
    pub first: u64,
    /// Of those, the ones this target never delivered.
    pub missed: u64,
    /// `None` when it delivered none.
    pub lag_ms: Option<LagMs>,
}

/// What `summary.json`'s `targets[i].race` holds: the tally and what it
/// was made of.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RaceFigures {
    /// Where the values came from: `subscribe[0]`, or `poll.NAME`.
    pub source: String,
    /// The JSON pointer into each notification's (or poll's) `result`.
    pub pointer: String,
    /// A poll's interval: no arrival is known closer than this. `None` for
    /// a subscription, where each notification's arrival is timed.
    pub resolution_ms: Option<f64>,
    #[serde(flatten)]
    pub tally: RaceTally,
    /// This target kept [`MAX_HEADS`] and no more: heads after that were
    /// not raced, for any target.
    pub capped: bool,
    pub unreadable: u64,
}

/// The race so far across the targets of one run, for the live views: who
/// delivered each head first, and each target's count of firsts. Only a
/// target's new heads come here (a few a second), never a call; the
/// figures reported are [`tally`]'s, after the runs.
#[derive(Debug, Default)]
pub struct RaceBoard {
    inner: std::sync::Mutex<Board>,
}

#[derive(Debug, Default)]
struct Board {
    first_by: HashMap<u64, usize>,
    /// By target, in the order the run lists them.
    firsts: Vec<u64>,
}

/// One board per run, shared by its targets: equal only to itself.
impl PartialEq for RaceBoard {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl RaceBoard {
    fn board(&self) -> std::sync::MutexGuard<'_, Board> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Target `lane` has delivered `head` for the first time: first, unless
    /// another target had. Past [`MAX_HEADS`] heads, no new one is counted.
    pub fn delivered(&self, lane: usize, head: u64) {
        let mut board = self.board();
        if board.firsts.len() <= lane {
            board.firsts.resize(lane + 1, 0);
        }
        if board.first_by.contains_key(&head) || board.first_by.len() >= MAX_HEADS {
            return;
        }
        board.first_by.insert(head, lane);
        board.firsts[lane] += 1;
    }

    /// The heads target `lane` has delivered first so far.
    pub fn firsts(&self, lane: usize) -> u64 {
        self.board().firsts.get(lane).copied().unwrap_or(0)
    }
}

/// The key a head is matched by: a hash of its value, so a kept head costs
/// the same whatever its size. A string by its text (escapes undone: two
/// servers may escape alike characters differently), anything else by its
/// JSON; `None` for a null or a value over [`MAX_VALUE_BYTES`].
pub fn head_key(value: &str) -> Option<u64> {
    if value.len() > MAX_VALUE_BYTES {
        return None;
    }
    let mut hasher = DefaultHasher::new();
    match serde_json::from_str::<serde_json::Value>(value).ok()? {
        serde_json::Value::Null => return None,
        serde_json::Value::String(text) => (0u8, text).hash(&mut hasher),
        other => (1u8, other.to_string()).hash(&mut hasher),
    }
    Some(hasher.finish())
}

/// Each target's tally, in the order given. A head is raced when its first
/// delivery (by any target) falls while every target listened, short of
/// [`SETTLE_US`] before the first of them stopped.
pub fn tally(targets: &[Arrivals]) -> Vec<RaceTally> {
    let from = targets.iter().map(|t| t.from_us).max().unwrap_or(0);
    let until = (targets.iter().map(|t| t.until_us).min().unwrap_or(0)).saturating_sub(SETTLE_US);
    let mut first_at: HashMap<u64, u64> = HashMap::new();
    for target in targets {
        for (&head, &at) in &target.heads {
            let earliest = first_at.entry(head).or_insert(at);
            *earliest = (*earliest).min(at);
        }
    }
    first_at.retain(|_, at| (from..=until).contains(at));
    targets
        .iter()
        .map(|target| {
            let mut lags_us = Vec::new();
            let mut tally = RaceTally {
                heads: first_at.len() as u64,
                ..RaceTally::default()
            };
            for (head, first) in &first_at {
                match target.heads.get(head) {
                    None => tally.missed += 1,
                    Some(at) => {
                        tally.first += u64::from(at == first);
                        lags_us.push(at - first);
                    }
                }
            }
            tally.lag_ms = lag_ms(&mut lags_us);
            tally
        })
        .collect()
}

/// Nearest-rank percentiles of `lags_us`, in ms.
fn lag_ms(lags_us: &mut [u64]) -> Option<LagMs> {
    lags_us.sort_unstable();
    let rank = |q: f64| {
        let index = ((q * lags_us.len() as f64).ceil() as usize).clamp(1, lags_us.len()) - 1;
        lags_us[index] as f64 / 1000.0
    };
    (!lags_us.is_empty()).then(|| LagMs {
        p50: rank(0.50),
        p90: rank(0.90),
        p99: rank(0.99),
        max: rank(1.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1000;

    /// A target listening from 0 to 60 s that delivered `heads` (value,
    /// ms).
    fn target(heads: &[(&str, u64)]) -> Arrivals {
        Arrivals {
            heads: heads
                .iter()
                .map(|(value, ms)| (head_key(&format!("\"{value}\"")).unwrap(), ms * MS))
                .collect(),
            from_us: 0,
            until_us: 60_000 * MS,
            ..Arrivals::default()
        }
    }

    #[test]
    fn the_first_deliverer_is_first_and_the_other_lags_by_its_delay() {
        // Ten heads 500 ms apart; the second target 40 ms behind on each
        // but one, where it was 10 ms ahead.
        let mut a = Vec::new();
        let mut b = Vec::new();
        let names: Vec<String> = (0..10).map(|i| format!("0x{i:x}")).collect();
        for (i, name) in names.iter().enumerate() {
            let at = 1000 + 500 * i as u64;
            a.push((name.as_str(), at));
            b.push((name.as_str(), if i == 3 { at - 10 } else { at + 40 }));
        }
        let tallies = tally(&[target(&a), target(&b)]);
        assert_eq!(
            (tallies[0].heads, tallies[0].first, tallies[0].missed),
            (10, 9, 0)
        );
        assert_eq!(
            (tallies[1].heads, tallies[1].first, tallies[1].missed),
            (10, 1, 0)
        );
        let lag_a = tallies[0].lag_ms.unwrap();
        assert_eq!((lag_a.p50, lag_a.p90, lag_a.max), (0.0, 0.0, 10.0));
        let lag_b = tallies[1].lag_ms.unwrap();
        assert_eq!(
            (lag_b.p50, lag_b.p90, lag_b.p99, lag_b.max),
            (40.0, 40.0, 40.0, 40.0)
        );
    }

    #[test]
    fn a_head_one_target_never_delivered_is_missed_by_it_alone() {
        let a = target(&[("0x1", 1000), ("0x2", 1500), ("0x3", 2000)]);
        let b = target(&[("0x1", 1040), ("0x3", 2040)]);
        let tallies = tally(&[a, b]);
        assert_eq!((tallies[0].heads, tallies[0].first, tallies[0].missed), (3, 3, 0));
        assert_eq!((tallies[1].heads, tallies[1].first, tallies[1].missed), (3, 0, 1));
        // Its lag is over what it delivered.
        assert_eq!(tallies[1].lag_ms.unwrap().max, 40.0);
    }

    #[test]
    fn a_tie_is_first_for_each_and_a_target_that_delivered_nothing_has_no_lag() {
        let a = target(&[("0x1", 1000)]);
        let b = target(&[("0x1", 1000)]);
        let silent = target(&[]);
        let tallies = tally(&[a, b, silent]);
        assert_eq!((tallies[0].first, tallies[1].first), (1, 1));
        assert_eq!((tallies[2].heads, tallies[2].first, tallies[2].missed), (1, 0, 1));
        assert_eq!(tallies[2].lag_ms, None);
    }

    #[test]
    fn only_heads_first_delivered_while_every_target_listened_are_raced() {
        // The second target listened from 2 s, the first stopped at 10 s:
        // a head before 2 s, or within a second of 10 s, is no race.
        let mut a = target(&[("early", 1500), ("raced", 4000), ("late", 9500)]);
        a.until_us = 10_000 * MS;
        let mut b = target(&[("raced", 4100), ("late", 9600)]);
        b.from_us = 2000 * MS;
        let tallies = tally(&[a, b]);
        assert_eq!((tallies[0].heads, tallies[0].first), (1, 1));
        assert_eq!((tallies[1].heads, tallies[1].missed), (1, 0));
        assert_eq!(tallies[1].lag_ms.unwrap().p50, 100.0);
    }

    #[test]
    fn heads_are_matched_by_value_not_by_how_it_is_written() {
        // The same string escaped two ways is one head; a number and the
        // string of its digits are two.
        assert_eq!(head_key(r#""0xab""#), head_key(r#""0x\u0061b""#));
        assert_ne!(head_key("1"), head_key(r#""1""#));
        assert_eq!(head_key(r#"{"a": 1}"#), head_key(r#"{"a":1}"#));
        // A null, a value past the bound or no JSON at all is no head.
        assert_eq!(head_key("null"), None);
        assert_eq!(head_key(&format!("\"{}\"", "f".repeat(MAX_VALUE_BYTES))), None);
        assert_eq!(head_key("not json"), None);
    }

    #[test]
    fn the_board_counts_a_head_first_for_the_target_that_delivered_it_first() {
        let board = RaceBoard::default();
        board.delivered(1, 7);
        board.delivered(0, 7);
        board.delivered(0, 8);
        board.delivered(1, 8);
        board.delivered(1, 9);
        assert_eq!((board.firsts(0), board.firsts(1), board.firsts(2)), (1, 2, 0));
    }

    #[test]
    fn percentiles_are_by_nearest_rank() {
        let mut lags: Vec<u64> = (1..=100).map(|ms| ms * MS).collect();
        let lag = lag_ms(&mut lags).unwrap();
        assert_eq!((lag.p50, lag.p90, lag.p99, lag.max), (50.0, 90.0, 99.0, 100.0));
        assert_eq!(lag_ms(&mut []), None);
    }
}
