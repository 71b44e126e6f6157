//! `[batch]`, and a call's `batch`: how many requests go in one batch.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

use super::RawScenario;
use crate::plan::BatchSize;
use crate::scenario::error::{Locator, ScenarioError};
use crate::scenario::BatchSpec;

const MAX_BATCH: i64 = 100_000;

/// Its name appears in serde's message for a value that matches no
/// variant, which `SHAPES` replaces.
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum RawBatchSize {
    Fixed(i64),
    Range { min: i64, max: i64 },
    Table { sizes: BTreeMap<String, i64> },
}

/// `[batch]`: every request a batch drawn from the mix.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBatchMix {
    size: Spanned<RawBatchSize>,
    notifications: Option<Spanned<f64>>,
}

impl RawScenario {
    pub(super) fn batch(&self, at: &Locator) -> Result<Option<BatchSpec>, ScenarioError> {
        let batch = match &self.batch {
            Some(batch) => {
                let notifications = match &batch.notifications {
                    Some(share) if (0.0..=1.0).contains(share.get_ref()) => *share.get_ref(),
                    Some(share) => {
                        return Err(at.error(
                            Some(share.span()),
                            Some("batch.notifications"),
                            "must be a share between 0 and 1",
                        ))
                    }
                    None => 0.0,
                };
                Some(BatchSpec {
                    size: batch_size(at, &batch.size, "batch.size")?,
                    notifications,
                })
            }
            None => None,
        };
        Ok(batch)
    }
}

pub(super) fn batch_size(
    at: &Locator,
    raw: &Spanned<RawBatchSize>,
    key: &str,
) -> Result<BatchSize, ScenarioError> {
    let bad = |message: String| at.error(Some(raw.span()), Some(key), message);
    let check = |n: i64| {
        if (1..=MAX_BATCH).contains(&n) {
            Ok(n as u32)
        } else {
            Err(bad(format!(
                "batch sizes must be between 1 and {MAX_BATCH}, not {n}"
            )))
        }
    };
    match raw.get_ref() {
        RawBatchSize::Fixed(n) => Ok(BatchSize::Fixed(check(*n)?)),
        RawBatchSize::Range { min, max } => {
            let (min, max) = (check(*min)?, check(*max)?);
            if max < min {
                return Err(bad(format!("the range {min}..{max} is empty")));
            }
            Ok(BatchSize::Uniform(min, max))
        }
        RawBatchSize::Table { sizes } => {
            let mut table = Vec::new();
            // Drawn from in 32 bits, as the calls' weights are.
            let mut sum: u32 = 0;
            for (size, weight) in sizes {
                let size = size
                    .parse::<i64>()
                    .map_err(|_| bad(format!("`{size}` is not a batch size")))?;
                let weight = u32::try_from(*weight)
                    .ok()
                    .filter(|w| *w > 0)
                    .ok_or_else(|| bad(format!("weights must be between 1 and {}", u32::MAX)))?;
                sum = sum.checked_add(weight).ok_or_else(|| {
                    bad(format!(
                        "the sizes' weights add up to more than {}, the most a batch size can be drawn from; scale them down (only their ratios matter)",
                        u32::MAX
                    ))
                })?;
                table.push((check(size)?, weight));
            }
            if table.is_empty() {
                return Err(bad("the sizes table is empty".into()));
            }
            Ok(BatchSize::weighted(table))
        }
    }
}
