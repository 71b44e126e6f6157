//! How fast a stdio server is ready, over every child the run spawned:
//! from spawn to its first answer and to its ready signal (the scenario's
//! `[ready]`; without one, the first answer), and its resident memory once
//! ready and as it ended. A run that spawns many children (`reconnect_every`
//! opens each connection anew, a fresh child) makes these distributions of
//! cold starts.

use serde::{Deserialize, Serialize};

/// One child's life.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ChildReady {
    pub pid: u32,
    /// The calls sent to it.
    pub calls: u64,
    pub first_answer_ms: Option<f64>,
    pub ready_ms: Option<f64>,
    pub rss_at_ready_bytes: Option<u64>,
    pub rss_at_end_bytes: Option<u64>,
}

/// A figure over the children: its least, median, 90th percentile and most.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq)]
pub struct Spread {
    pub min: f64,
    pub p50: f64,
    pub p90: f64,
    pub max: f64,
}

impl Spread {
    /// `None` without a value. Percentiles by nearest rank: each is a
    /// value some child had.
    pub fn of(values: impl Iterator<Item = f64>) -> Option<Spread> {
        let mut sorted: Vec<f64> = values.filter(|v| v.is_finite()).collect();
        sorted.sort_by(f64::total_cmp);
        let rank = |q: f64| sorted[((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1];
        (!sorted.is_empty()).then(|| Spread {
            min: sorted[0],
            p50: rank(0.5),
            p90: rank(0.9),
            max: sorted[sorted.len() - 1],
        })
    }
}

/// Every child's readiness, and its spread.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ReadySummary {
    /// The signal waited for, in words; none: ready at the first answer.
    pub signal: Option<String>,
    pub spawns: u64,
    /// Children that never became ready (no answer, or no signal).
    pub never_ready: u64,
    pub first_answer_ms: Option<Spread>,
    pub ready_ms: Option<Spread>,
    pub rss_at_ready_bytes: Option<Spread>,
    pub rss_at_end_bytes: Option<Spread>,
    pub children: Vec<ChildReady>,
}

impl ReadySummary {
    pub fn of(signal: Option<String>, children: Vec<ChildReady>) -> Self {
        let spread = |of: fn(&ChildReady) -> Option<f64>| Spread::of(children.iter().filter_map(of));
        ReadySummary {
            signal,
            spawns: children.len() as u64,
            never_ready: children.iter().filter(|c| c.ready_ms.is_none()).count() as u64,
            first_answer_ms: spread(|c| c.first_answer_ms),
            ready_ms: spread(|c| c.ready_ms),
            rss_at_ready_bytes: spread(|c| c.rss_at_ready_bytes.map(|b| b as f64)),
            rss_at_end_bytes: spread(|c| c.rss_at_end_bytes.map(|b| b as f64)),
            children,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn child(first: Option<f64>, ready: Option<f64>) -> ChildReady {
        ChildReady {
            pid: 1,
            calls: 3,
            first_answer_ms: first,
            ready_ms: ready,
            rss_at_ready_bytes: ready.map(|_| 1 << 20),
            rss_at_end_bytes: None,
        }
    }

    #[test]
    fn the_spread_is_of_the_children_that_got_there_by_nearest_rank() {
        let values = (1..=10).map(f64::from);
        assert_eq!(
            Spread::of(values),
            Some(Spread {
                min: 1.0,
                p50: 5.0,
                p90: 9.0,
                max: 10.0
            })
        );
        assert_eq!(Spread::of(std::iter::empty()), None);
        let summary = ReadySummary::of(
            Some("$/progress".into()),
            vec![
                child(Some(2.0), Some(20.0)),
                child(Some(4.0), None),
                child(None, None),
            ],
        );
        assert_eq!((summary.spawns, summary.never_ready), (3, 2));
        assert_eq!(summary.first_answer_ms.map(|s| (s.min, s.max)), Some((2.0, 4.0)));
        assert_eq!(summary.ready_ms.map(|s| s.p50), Some(20.0));
        assert_eq!(summary.rss_at_end_bytes, None);
    }
}
