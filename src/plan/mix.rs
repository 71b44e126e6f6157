//! Where requests come from: a weighted mix of calls (single, batched, or
//! every request a batch drawn from the mix), or a replayed file.

use rand::distr::weighted::WeightedIndex;
use rand::distr::Distribution;
use rand::RngExt;

use bytes::Bytes;

use super::{CallTemplate, Flow, RequestBuilder};
use crate::rpc::{Entry, Expectation};

/// How many calls a batch carries.
#[derive(Clone, Debug)]
pub enum BatchSize {
    Fixed(u32),
    /// Uniform between the bounds, inclusive.
    Uniform(u32, u32),
    Weighted(Vec<u32>, WeightedIndex<u32>),
}

impl BatchSize {
    /// A table of `(size, weight)`; weights are positive (the scenario checks).
    pub fn weighted(table: Vec<(u32, u32)>) -> Self {
        let index = WeightedIndex::new(table.iter().map(|(_, w)| *w)).expect("positive weights");
        BatchSize::Weighted(table.into_iter().map(|(size, _)| size).collect(), index)
    }

    pub fn sample<R: RngExt>(&self, rng: &mut R) -> u32 {
        match self {
            BatchSize::Fixed(n) => *n,
            BatchSize::Uniform(low, high) => rng.random_range(*low..=*high),
            BatchSize::Weighted(sizes, index) => sizes[index.sample(rng)],
        }
    }
}

impl std::fmt::Display for BatchSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BatchSize::Fixed(n) => write!(f, "{n}"),
            BatchSize::Uniform(low, high) => write!(f, "{low}..{high}"),
            BatchSize::Weighted(sizes, _) => {
                let sizes: Vec<String> = sizes.iter().map(u32::to_string).collect();
                write!(f, "{} (weighted)", sizes.join(" | "))
            }
        }
    }
}

// Only tests compare sizes.
#[cfg(test)]
impl PartialEq for BatchSize {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (BatchSize::Fixed(a), BatchSize::Fixed(b)) => a == b,
            (BatchSize::Uniform(a, b), BatchSize::Uniform(c, d)) => (a, b) == (c, d),
            (BatchSize::Weighted(a, _), BatchSize::Weighted(b, _)) => a == b,
            _ => false,
        }
    }
}

/// One kind of call.
#[derive(Clone, Debug)]
pub struct MixCall {
    /// Index into [`Mix::methods`]. Indexes are 32 bits wide: a replay file
    /// decides how many calls there are, and 16 bits wrapped past 65,536.
    pub method: u32,
    pub template: CallTemplate,
    /// `Some`: sent as a batch of this many such calls.
    pub batch: Option<BatchSize>,
    pub notification: bool,
}

/// One call of the request being planned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Planned {
    /// Index into [`Mix::calls`].
    pub call: u32,
    pub notification: bool,
}

/// Every request a batch whose entries are drawn from the mix.
#[derive(Clone, Debug)]
pub struct MixBatch {
    pub size: BatchSize,
    /// Share of entries sent as notifications.
    pub notifications: f64,
}

/// Recorded requests, as indexes into [`Mix::calls`].
#[derive(Debug)]
pub struct ReplaySource {
    pub requests: Vec<(bool, Vec<Planned>)>,
    pub looping: bool,
}

impl ReplaySource {
    pub fn new(requests: Vec<(bool, Vec<Planned>)>, looping: bool) -> Self {
        ReplaySource { requests, looping }
    }
}

/// What an arrival brings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// A request (planned into the caller's list), a batch or not.
    Request { batch: bool },
    /// A flow, by its index in [`Mix::flows`].
    Flow(u32),
}

#[derive(Debug)]
pub struct Mix {
    /// Each row's name: the calls' and steps' (a name, else the method),
    /// then one per flow (`flow:NAME`), the last `flows.len()` rows.
    /// Statistics are kept per row.
    pub methods: Vec<String>,
    pub calls: Vec<MixCall>,
    /// Journeys, drawn by weight with the calls.
    pub flows: Vec<Flow>,
    /// What each call's answer must look like, indexed like `calls`.
    pub expectations: Vec<Option<Expectation>>,
    weights: Option<WeightedIndex<u32>>,
    pub batch: Option<MixBatch>,
    pub replay: Option<ReplaySource>,
}

impl Mix {
    /// Whether any arrival goes on a connection the run keeps (every one
    /// but a flow with a connection of its own).
    pub fn shares_connections(&self) -> bool {
        !self.calls.is_empty() || self.replay.is_some() || self.flows.iter().any(|f| !f.own_connection)
    }

    /// A weighted mix; `calls` carry their weights (all positive).
    pub fn weighted(
        methods: Vec<String>,
        calls: Vec<(MixCall, u32, Option<Expectation>)>,
        batch: Option<MixBatch>,
    ) -> Self {
        Self::with_flows(methods, calls, Vec::new(), batch)
    }

    /// A weighted mix of calls and flows, each with its weight (all
    /// positive); a flow's row and its steps' are among `methods`.
    pub fn with_flows(
        methods: Vec<String>,
        calls: Vec<(MixCall, u32, Option<Expectation>)>,
        flows: Vec<(Flow, u32)>,
        batch: Option<MixBatch>,
    ) -> Self {
        let weights = calls
            .iter()
            .map(|(_, w, _)| *w)
            .chain(flows.iter().map(|(_, w)| *w));
        let weights = WeightedIndex::new(weights)
            .expect("the scenario guarantees at least one call or flow and positive weights");
        let (calls, expectations) = calls.into_iter().map(|(c, _, e)| (c, e)).unzip();
        Mix {
            methods,
            calls,
            flows: flows.into_iter().map(|(f, _)| f).collect(),
            expectations,
            weights: Some(weights),
            batch,
            replay: None,
        }
    }

    /// A recorder shaped for the mix: a row per name, the flows' counts.
    pub fn recorder(&self) -> crate::stats::Recorder {
        let steps: Vec<usize> = self.flows.iter().map(|f| f.steps.len()).collect();
        crate::stats::Recorder::with_flows(self.methods.len(), &steps)
    }

    /// A replay of recorded requests over `calls`.
    /// `expectations` (one per call, or empty for none) are the recorded
    /// answers the calls must match.
    pub fn replay(
        methods: Vec<String>,
        calls: Vec<MixCall>,
        replay: ReplaySource,
        mut expectations: Vec<Option<Expectation>>,
    ) -> Self {
        expectations.resize(calls.len(), None);
        Mix {
            methods,
            calls,
            flows: Vec::new(),
            expectations,
            weights: None,
            batch: None,
            replay: Some(replay),
        }
    }

    /// The JSON-RPC the mix's calls are written in (one for all: the
    /// scenario's `protocol`), which their answers are judged by.
    pub fn version(&self) -> crate::rpc::Version {
        let first_step = self.flows.first().and_then(|f| f.steps.first());
        (self.calls.first().map(|call| &call.template))
            .or(first_step.map(|step| &step.template))
            .map_or_else(Default::default, CallTemplate::version)
    }

    /// One call drawn by weight. Lossless: an index below `calls.len()`,
    /// which the scenario's compiler checked fits 32 bits.
    pub fn pick<R: RngExt>(&self, rng: &mut R) -> u32 {
        match &self.weights {
            Some(weights) => weights.sample(rng) as u32,
            None => 0,
        }
    }

    /// Plans the next arrival: a flow, or a request planned into `planned`;
    /// `None` when a replay that does not loop has run out.
    pub fn next<R: RngExt>(&self, seq: u64, rng: &mut R, planned: &mut Vec<Planned>) -> Option<Next> {
        if !self.flows.is_empty() {
            let drawn = self.pick(rng);
            let calls = self.calls.len() as u32;
            if drawn >= calls {
                planned.clear();
                return Some(Next::Flow(drawn - calls));
            }
            return Some(Next::Request {
                batch: self.plan_call(drawn, rng, planned),
            });
        }
        self.next_request(seq, rng, planned)
            .map(|batch| Next::Request { batch })
    }

    /// Plans one `[[calls]]` entry's request; returns whether it is a batch.
    fn plan_call<R: RngExt>(&self, call: u32, rng: &mut R, planned: &mut Vec<Planned>) -> bool {
        planned.clear();
        let spec = &self.calls[call as usize];
        let count = spec.batch.as_ref().map_or(1, |size| size.sample(rng));
        planned.extend((0..count).map(|_| Planned {
            call,
            notification: spec.notification,
        }));
        spec.batch.is_some()
    }

    /// Plans the next request into `planned`; returns whether it is a batch,
    /// or `None` when a replay that does not loop has run out.
    fn next_request<R: RngExt>(&self, seq: u64, rng: &mut R, planned: &mut Vec<Planned>) -> Option<bool> {
        planned.clear();
        if let Some(replay) = &self.replay {
            // Request `seq` of the run is the file's line `seq`: the same
            // line on every run and shard, and at its own recorded time.
            let lines = replay.requests.len() as u64;
            if !replay.looping && seq >= lines {
                return None;
            }
            let (batch, calls) = &replay.requests[(seq % lines) as usize];
            planned.extend_from_slice(calls);
            return Some(*batch);
        }
        if let Some(batch) = &self.batch {
            for _ in 0..batch.size.sample(rng) {
                let call = self.pick(rng);
                let notification = self.calls[call as usize].notification
                    || (batch.notifications > 0.0 && rng.random_bool(batch.notifications));
                planned.push(Planned { call, notification });
            }
            return Some(true);
        }
        let call = self.pick(rng);
        Some(self.plan_call(call, rng, planned))
    }

    /// Writes the planned request; its calls get consecutive ids from `first_id`.
    pub fn write<R: RngExt>(
        &self,
        builder: &mut RequestBuilder,
        planned: &[Planned],
        batch: bool,
        first_id: u64,
        rng: &mut R,
    ) -> Bytes {
        builder.begin(batch);
        let mut next_id = first_id;
        for p in planned {
            let id = (!p.notification).then(|| {
                next_id += 1;
                next_id - 1
            });
            let call = &self.calls[p.call as usize];
            builder.push(
                &call.template,
                Entry {
                    method: call.method,
                    call: p.call,
                    id,
                },
                rng,
            );
        }
        builder.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    fn call(method: u32) -> MixCall {
        MixCall {
            method,
            template: CallTemplate::new(crate::rpc::Version::V2, "m", None),
            batch: None,
            notification: false,
        }
    }

    #[test]
    fn weights_are_honoured_within_one_percent() {
        let mix = Mix::weighted(
            vec!["a".into(), "b".into(), "c".into()],
            vec![(call(0), 50, None), (call(1), 30, None), (call(2), 20, None)],
            None,
        );
        let mut rng = SmallRng::seed_from_u64(7);
        let mut counts = [0u32; 3];
        let draws = 200_000;
        for _ in 0..draws {
            counts[mix.pick(&mut rng) as usize] += 1;
        }
        for (count, weight) in counts.iter().zip([0.5, 0.3, 0.2]) {
            let share = *count as f64 / draws as f64;
            assert!((share - weight).abs() < 0.01, "share {share} for weight {weight}");
        }
        // The same seed draws the same sequence.
        let sequence = |seed| {
            let mut rng = SmallRng::seed_from_u64(seed);
            (0..50).map(|_| mix.pick(&mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(sequence(3), sequence(3));
        assert_ne!(sequence(3), sequence(4));
    }

    #[test]
    fn batch_sizes_follow_their_form() {
        let mut rng = SmallRng::seed_from_u64(1);
        let uniform = BatchSize::Uniform(1, 20);
        let sizes: Vec<u32> = (0..2000).map(|_| uniform.sample(&mut rng)).collect();
        assert_eq!(sizes.iter().min(), Some(&1));
        assert_eq!(sizes.iter().max(), Some(&20));
        let table = BatchSize::weighted(vec![(1, 3), (50, 1)]);
        let big = (0..40_000).filter(|_| table.sample(&mut rng) == 50).count() as f64 / 40_000.0;
        assert!((big - 0.25).abs() < 0.01, "{big}");
    }

    #[test]
    fn batches_drawn_from_the_mix_carry_notifications() {
        let mix = Mix::weighted(
            vec!["a".into(), "b".into()],
            vec![(call(0), 1, None), (call(1), 1, None)],
            Some(MixBatch {
                size: BatchSize::Fixed(10),
                notifications: 0.1,
            }),
        );
        let mut rng = SmallRng::seed_from_u64(5);
        let mut planned = Vec::new();
        let (mut total, mut notes) = (0, 0);
        for _ in 0..5000 {
            assert_eq!(mix.next_request(0, &mut rng, &mut planned), Some(true));
            total += planned.len();
            notes += planned.iter().filter(|p| p.notification).count();
        }
        assert_eq!(total, 50_000);
        assert!((notes as f64 / total as f64 - 0.1).abs() < 0.01);
    }

    #[test]
    fn a_replay_stops_or_loops() {
        let requests = vec![(
            false,
            vec![Planned {
                call: 0,
                notification: false,
            }],
        )];
        let stop = Mix::replay(
            vec!["m".into()],
            vec![call(0)],
            ReplaySource::new(requests.clone(), false),
            Vec::new(),
        );
        let mut rng = SmallRng::seed_from_u64(0);
        let mut planned = Vec::new();
        assert_eq!(stop.next_request(0, &mut rng, &mut planned), Some(false));
        assert_eq!(stop.next_request(1, &mut rng, &mut planned), None);
        let looping = Mix::replay(
            vec!["m".into()],
            vec![call(0)],
            ReplaySource::new(requests, true),
            Vec::new(),
        );
        for seq in 0..3 {
            assert_eq!(looping.next_request(seq, &mut rng, &mut planned), Some(false));
        }
    }
}
