//! The head race's arrivals on one target: each value its notifications
//! (or polls) brought, when it first came on any of its connections. A
//! target's threads share one log behind a lock: a notification is rare
//! beside the calls, and the lock keeps the earliest arrival whichever
//! thread saw it. The tally across targets is `stats::race`'s, after the run.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Instant;

use crate::plan::{Pointer, Race};
use crate::stats::race::{head_key, Arrivals, RaceBoard, MAX_HEADS};

/// The one clock every target's arrivals are read on: they run in one
/// process, so their instants compare, and are kept as µs since this.
static ORIGIN: LazyLock<Instant> = LazyLock::new(Instant::now);

pub struct RaceLog {
    pointer: Pointer,
    kept: Mutex<Kept>,
    /// The live tally across targets, and this target's place on it.
    board: (Arc<RaceBoard>, usize),
}

#[derive(Default)]
struct Kept {
    heads: HashMap<u64, Instant>,
    /// When a head came past [`MAX_HEADS`]: the target's listening ends there.
    capped_at: Option<Instant>,
    unreadable: u64,
    /// The measured start, and when the run ended its listening: nothing
    /// is kept after.
    window: Option<(Instant, Instant)>,
}

impl RaceLog {
    pub fn new(race: &Race) -> RaceLog {
        LazyLock::force(&ORIGIN);
        RaceLog {
            pointer: race.pointer.clone(),
            kept: Mutex::new(Kept::default()),
            board: (race.board.clone(), race.lane),
        }
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A notification's (or poll's) `result`, raw JSON, that came at `at`.
    pub fn note(&self, result: Option<&str>, at: Instant) {
        let mut found = Vec::new();
        if let Some(result) = result {
            self.pointer.find(result, &mut found);
        }
        let key = found.first().and_then(|value| head_key(value));
        let mut kept = self.kept();
        if kept.window.is_some() {
            return;
        }
        let Some(key) = key else {
            kept.unreadable += 1;
            return;
        };
        let full = kept.heads.len() >= MAX_HEADS;
        match kept.heads.get_mut(&key) {
            Some(earliest) => *earliest = (*earliest).min(at),
            None if full => {
                kept.capped_at.get_or_insert(at);
            }
            None => {
                kept.heads.insert(key, at);
                // Under the log's lock: the board is only ever taken after it.
                self.board.0.delivered(self.board.1, key);
            }
        }
    }

    /// Distinct heads so far, and those first across targets, for the
    /// live views.
    pub fn so_far(&self) -> (u64, u64) {
        let heads = self.kept().heads.len() as u64;
        (heads, self.board.0.firsts(self.board.1))
    }

    /// Ends the listening now, the race's figures counted from `from`
    /// (the measured start: a warmup is no race).
    pub fn close(&self, from: Instant) {
        self.kept().window.get_or_insert((from, Instant::now()));
    }

    /// The arrivals, on the clock every target shares, from the measured
    /// start to the end of the listening (or the cap); `None` before
    /// [`close`](Self::close).
    pub fn arrivals(&self) -> Option<Arrivals> {
        let kept = self.kept();
        let (from, until) = kept.window?;
        let since = |at: Instant| at.saturating_duration_since(*ORIGIN).as_micros() as u64;
        Some(Arrivals {
            heads: kept.heads.iter().map(|(key, at)| (*key, since(*at))).collect(),
            from_us: since(from),
            until_us: since(kept.capped_at.unwrap_or(until).min(until)),
            capped: kept.capped_at.is_some(),
            unreadable: kept.unreadable,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn race(pointer: &str) -> Race {
        Race {
            pointer: Pointer::parse(pointer).unwrap(),
            source: "subscribe[0]".into(),
            every: None,
            board: Default::default(),
            lane: 0,
        }
    }

    #[test]
    fn each_head_keeps_its_earliest_arrival_and_a_result_without_the_value_is_unreadable() {
        let log = RaceLog::new(&race("/hash"));
        let start = Instant::now();
        let later = start + Duration::from_millis(30);
        log.note(Some(r#"{"hash":"0x1","number":"0x1"}"#), later);
        log.note(Some(r#"{"hash":"0x1"}"#), start);
        log.note(Some(r#"{"number":"0x2"}"#), start);
        log.note(Some(r#"{"hash":null}"#), start);
        log.note(None, start);
        log.note(Some("not json"), start);
        assert_eq!(log.arrivals(), None, "open still");
        log.close(start);
        let arrivals = log.arrivals().unwrap();
        assert_eq!(arrivals.heads.len(), 1);
        let kept = arrivals.heads[&head_key(r#""0x1""#).unwrap()];
        assert_eq!(kept, arrivals.from_us, "the earlier of the two arrivals");
        assert_eq!((arrivals.unreadable, arrivals.capped), (4, false));
        // Closed: nothing more is kept.
        log.note(Some(r#"{"hash":"0x2"}"#), later);
        assert_eq!(log.so_far(), (1, 1));
    }

    #[test]
    fn past_the_cap_no_head_is_kept_and_the_listening_ends_where_it_was_reached() {
        let log = RaceLog::new(&race(""));
        let start = Instant::now();
        for n in 0..MAX_HEADS as u64 + 5 {
            log.note(Some(&n.to_string()), start + Duration::from_micros(n));
        }
        log.close(start);
        let arrivals = log.arrivals().unwrap();
        assert_eq!(arrivals.heads.len(), MAX_HEADS);
        assert!(arrivals.capped);
        assert_eq!(arrivals.until_us - arrivals.from_us, MAX_HEADS as u64);
    }
}
