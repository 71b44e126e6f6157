//! Answers kept to compare targets: a sample of the run's requests chosen
//! by their place in the sequence alone, so every run with the same seed
//! keeps the same requests (request N is the same everywhere) and their
//! answers can be set side by side afterwards.

use std::sync::Mutex;

use bytes::Bytes;

use crate::rpc::Entry;

/// One sampled request and what came back.
#[derive(Clone, Debug)]
pub struct Captured {
    /// The request's place in the run's sequence.
    pub seq: u64,
    pub batch: bool,
    /// Its calls (and notifications), ids from the request's first id.
    pub entries: Vec<Entry>,
    pub request: Bytes,
    /// The answer's body; `None` when none came (a timeout, a failure).
    pub answer: Option<Bytes>,
}

#[derive(Debug)]
pub struct Capture {
    /// A request is kept when its scrambled place falls below this.
    threshold: u64,
    kept: Mutex<Vec<Captured>>,
}

impl Capture {
    /// At most this many requests are kept, whatever the share.
    pub const MAX: usize = 10_000;

    /// Keeps about `share` (0 to 1) of the requests.
    pub fn new(share: f64) -> Capture {
        Capture {
            threshold: (share.clamp(0.0, 1.0) * u64::MAX as f64) as u64,
            kept: Mutex::new(Vec::new()),
        }
    }

    /// Whether request `seq` is in the sample. An odd multiplier permutes
    /// the 64-bit numbers, so consecutive places spread evenly below and
    /// above the threshold.
    pub fn wants(&self, seq: u64) -> bool {
        seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) < self.threshold
    }

    pub fn keep(&self, captured: Captured) {
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        if kept.len() < Self::MAX {
            kept.push(captured);
        }
    }

    /// What was kept, in sequence order.
    pub fn take(&self) -> Vec<Captured> {
        let mut kept = std::mem::take(&mut *self.kept.lock().unwrap_or_else(|p| p.into_inner()));
        kept.sort_by_key(|c| c.seq);
        kept
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sample_is_a_share_of_places_the_same_each_time() {
        let tenth = Capture::new(0.1);
        let chosen: Vec<u64> = (0..10_000).filter(|s| tenth.wants(*s)).collect();
        assert!((900..=1100).contains(&chosen.len()), "{}", chosen.len());
        let again: Vec<u64> = (0..10_000).filter(|s| Capture::new(0.1).wants(*s)).collect();
        assert_eq!(chosen, again);
        assert_eq!((0..1000).filter(|s| Capture::new(1.0).wants(*s)).count(), 1000);
        assert_eq!((0..1000).filter(|s| Capture::new(0.0).wants(*s)).count(), 0);
    }

    #[test]
    fn at_most_max_are_kept_in_sequence_order() {
        let all = Capture::new(1.0);
        for seq in (0..Capture::MAX as u64 + 5).rev() {
            all.keep(Captured {
                seq,
                batch: false,
                entries: Vec::new(),
                request: Bytes::new(),
                answer: None,
            });
        }
        let kept = all.take();
        assert_eq!(kept.len(), Capture::MAX);
        assert!(kept.windows(2).all(|w| w[0].seq < w[1].seq));
    }
}
