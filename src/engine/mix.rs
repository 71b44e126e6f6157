//! The weighted mix of calls a run draws its requests from.

use rand::distributions::{Distribution, WeightedIndex};
use rand::Rng;

use crate::rpc::CallTemplate;

/// One kind of request in the mix.
#[derive(Clone, Debug)]
pub struct MixCall {
    /// Index into [`Mix::methods`].
    pub method: u16,
    pub template: CallTemplate,
    /// `Some(n)`: sent as a batch (a JSON array) of `n` such calls.
    pub batch: Option<u32>,
    pub notification: bool,
}

impl MixCall {
    /// Calls in one request of this kind.
    pub fn size(&self) -> u32 {
        self.batch.unwrap_or(1)
    }
}

#[derive(Clone, Debug)]
pub struct Mix {
    /// Distinct method names; statistics are kept per method.
    pub methods: Vec<String>,
    pub calls: Vec<MixCall>,
    weights: WeightedIndex<u32>,
}

impl Mix {
    /// `calls` with their weights (all positive: the scenario checks).
    pub fn new(calls: Vec<(MixCall, u32)>, methods: Vec<String>) -> Self {
        let weights = WeightedIndex::new(calls.iter().map(|(_, w)| *w))
            .expect("the scenario guarantees at least one call and positive weights");
        Mix {
            methods,
            calls: calls.into_iter().map(|(c, _)| c).collect(),
            weights,
        }
    }

    pub fn pick<R: Rng>(&self, rng: &mut R) -> &MixCall {
        &self.calls[self.weights.sample(rng)]
    }
}
