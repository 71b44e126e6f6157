//! One shard of a run split over several load generators: which share of
//! the requests, connections and calls in flight it takes, and which ids
//! are its own.
//!
//! Shares are striped, as k6's execution segments are: the run's requests
//! (and callers, and connections) are numbered, and shard `i` of `n` takes
//! those whose number is `i` modulo `n`. The shares then add up exactly for
//! any `n`, each stays within one of the others, and together the shards
//! send what one machine would have sent, request for request.

use std::fmt;

/// Shard `index` of `count` (from 0); `0/1` is the whole run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl Default for Shard {
    fn default() -> Self {
        Shard::WHOLE
    }
}

/// Ids a JSON number carries exactly everywhere (JavaScript's safe
/// integers): each shard's ids are a block of this space.
const ID_SPACE: u64 = 1 << 53;

/// The most shards a run may be split into: each still has over 10^11 ids.
pub const MAX_SHARDS: u32 = 65_536;

impl Shard {
    pub const WHOLE: Shard = Shard { index: 0, count: 1 };

    pub fn new(index: u32, count: u32) -> Result<Shard, String> {
        if count == 0 || count > MAX_SHARDS {
            return Err(format!(
                "the number of shards must be 1 to {MAX_SHARDS}, not {count}"
            ));
        }
        if index >= count {
            return Err(format!(
                "shard {index} of {count} does not exist: shards are numbered 0 to {}",
                count - 1
            ));
        }
        Ok(Shard { index, count })
    }

    pub fn is_whole(&self) -> bool {
        self.count == 1
    }

    /// This shard's share of `whole` things numbered from 0: those whose
    /// number is `index` modulo `count`.
    pub fn share(&self, whole: u64) -> u64 {
        let (index, count) = (u64::from(self.index), u64::from(self.count));
        whole.saturating_sub(index).div_ceil(count)
    }

    /// The run-wide number of this shard's `local`-th request: what it
    /// sends and when it is due follow from this number, as on one machine.
    pub fn request(&self, local: u64) -> u64 {
        local
            .saturating_mul(u64::from(self.count))
            .saturating_add(u64::from(self.index))
    }

    /// The first id of this shard's block; the block holds `id_block_len`.
    pub fn first_id(&self) -> u64 {
        1 + u64::from(self.index) * self.id_block_len()
    }

    /// Ids each shard owns: the id space split evenly, less the id 0.
    pub fn id_block_len(&self) -> u64 {
        (ID_SPACE - 1) / u64::from(self.count)
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl std::str::FromStr for Shard {
    type Err = String;

    /// `I/N`: shard I (from 0) of N.
    fn from_str(text: &str) -> Result<Shard, String> {
        let (index, count) = text
            .split_once('/')
            .ok_or_else(|| format!("'{text}' is not a shard: give INDEX/COUNT, e.g. 0/3"))?;
        let number = |part: &str, what: &str| {
            let n = (part.trim().parse::<u64>())
                .map_err(|_| format!("'{text}': the {what} '{part}' is not a whole number"))?;
            u32::try_from(n)
                .ok()
                .filter(|n| *n <= MAX_SHARDS)
                .ok_or_else(|| format!("'{text}': the {what} {n} is past the most shards, {MAX_SHARDS}"))
        };
        Shard::new(number(index, "index")?, number(count, "count")?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up_exactly_and_differ_by_one_at_most() {
        for count in 1..=7u32 {
            for whole in [0u64, 1, 2, 5, 6, 7, 64, 1000, 1001] {
                let shares: Vec<u64> = (0..count)
                    .map(|i| Shard::new(i, count).unwrap().share(whole))
                    .collect();
                assert_eq!(shares.iter().sum::<u64>(), whole, "{whole} over {count}");
                let (min, max) = (shares.iter().min().unwrap(), shares.iter().max().unwrap());
                assert!(max - min <= 1, "{shares:?}");
            }
        }
        assert_eq!(Shard::new(2, 3).unwrap().share(7), 2, "numbers 2 and 5");
        assert_eq!(Shard::new(0, 3).unwrap().share(7), 3, "numbers 0, 3 and 6");
    }

    #[test]
    fn a_share_never_shrinks_as_the_whole_grows() {
        for count in 1..=6u32 {
            for index in 0..count {
                let shard = Shard::new(index, count).unwrap();
                for whole in 0..50 {
                    assert!(shard.share(whole + 1) >= shard.share(whole));
                }
            }
        }
    }

    #[test]
    fn the_shards_requests_are_the_whole_runs_once_each() {
        let count = 3;
        let mut numbers: Vec<u64> = (0..count)
            .flat_map(|i| {
                let shard = Shard::new(i, count).unwrap();
                (0..shard.share(10)).map(move |local| shard.request(local))
            })
            .collect();
        numbers.sort_unstable();
        assert_eq!(numbers, (0..10).collect::<Vec<_>>());
        assert_eq!(Shard::WHOLE.request(41), 41);
    }

    #[test]
    fn id_blocks_are_disjoint_and_within_safe_integers() {
        for count in [1, 2, 3, 7, MAX_SHARDS] {
            let shards: Vec<Shard> = (0..count).map(|i| Shard::new(i, count).unwrap()).collect();
            for pair in shards.windows(2) {
                assert_eq!(pair[0].first_id() + pair[0].id_block_len(), pair[1].first_id());
            }
            let last = shards.last().unwrap();
            assert!(last.first_id() + last.id_block_len() <= ID_SPACE);
            assert_eq!(shards[0].first_id(), 1, "id 0 is never used");
        }
        assert_eq!(Shard::WHOLE.first_id(), 1);
    }

    #[test]
    fn a_shard_reads_as_index_over_count() {
        assert_eq!("2/5".parse::<Shard>(), Ok(Shard { index: 2, count: 5 }));
        for bad in ["5/5", "1/0", "x/2", "3", "-1/2", "0/70000", "0/99999999999"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
        assert!("5/5".parse::<Shard>().unwrap_err().contains("numbered 0 to 4"));
        assert!("0/99999999999"
            .parse::<Shard>()
            .unwrap_err()
            .contains("count 99999999999 is past"));
    }
}
