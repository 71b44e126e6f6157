//! A validated scenario turned into what the engine runs: the load plan,
//! the mix (or replay), setup calls and polls.

use std::time::SystemTime;

use super::{Replay, Scenario, TargetSpec, DEFAULT_CONCURRENCY, DEFAULT_DURATION, DEFAULT_OPEN_CONNECTIONS};
use crate::plan::{
    CallTemplate, Flow, LoadPlan, Mix, MixBatch, MixCall, Pacing, Planned, Poll, ReplaySource, SetupCall,
    Step,
};

pub struct Compiled {
    pub plan: LoadPlan,
    pub mix: Mix,
    pub setup: Vec<SetupCall>,
    pub polls: Vec<Poll>,
    /// Choices made for the user that they should know of.
    pub warnings: Vec<String>,
}

impl Scenario {
    pub fn compile(&self) -> Compiled {
        let mut warnings = Vec::new();
        Compiled {
            plan: self.load_plan(&mut warnings),
            mix: self.mix(),
            setup: self.setup.clone(),
            polls: self
                .polls
                .iter()
                .enumerate()
                .map(|(index, p)| Poll {
                    name: p.name.clone(),
                    template: CallTemplate::new(self.version, &p.method, p.params.as_ref()),
                    every: p.every,
                    polled: self.polled.clone(),
                    index,
                    race: p.race,
                })
                .collect(),
            warnings,
        }
    }

    fn load_plan(&self, warnings: &mut Vec<String>) -> LoadPlan {
        let load = &self.load;
        let shard = self.shard.unwrap_or_default();
        let (pacing, recorded) = self.pacing();
        let (connections, per_connection) = self.connections(pacing, warnings);
        let staged = load.stages.iter().map(|s| s.duration).sum();
        let requests = self.requests().map(|n| shard.share(n));
        let duration = match (load.duration, requests, load.stages.is_empty()) {
            (_, _, false) => Some(staged),
            (None, None, true) => Some(DEFAULT_DURATION),
            (duration, _, true) => duration,
        };
        let seed = self.seed.unwrap_or_else(draw_seed);
        // A staged closed model starts from `concurrency` when given, else
        // from the first stage's own value; a constant one keeps exactly its
        // concurrency busy, however its callers divide over connections.
        let initial_concurrency = load
            .concurrency
            .or_else(|| load.stages.first().map(|s| s.target.round() as u64))
            .unwrap_or(connections * per_connection) as usize;
        // Each captured connection a connection of the run's, in the order
        // they first appear.
        let groups = self
            .replay
            .as_ref()
            .and_then(|r| r.conns.as_deref())
            .map(connection_groups);
        let connections = groups.as_ref().map_or(connections, |g| g.len() as u64);
        LoadPlan {
            pacing,
            connections: shard.share(connections) as usize,
            per_connection: per_connection as usize,
            duration,
            requests,
            warmup: load.warmup,
            timeout: self.timeout,
            // As k6's gracefulStop: a call sent before the end may take
            // its whole timeout, by default.
            grace: load.grace.unwrap_or(self.timeout),
            threads: load.threads.map_or_else(
                || std::thread::available_parallelism().map_or(1, |n| n.get()),
                |t| t as usize,
            ),
            seed,
            stages: load.stages.clone(),
            initial_concurrency,
            shard,
            recorded,
            groups,
            reconnect_every: load.reconnect_every,
            max_flows: (load.max_flows).map_or(crate::plan::DEFAULT_MAX_FLOWS, |n| {
                usize::try_from(n).unwrap_or(usize::MAX)
            }),
        }
    }

    /// How many connections the run opens, and how many calls each
    /// carries at once: one on HTTP/1.1, more on a multiplexed transport
    /// or a pipelined one (at most its depth).
    fn connections(&self, pacing: Pacing, warnings: &mut Vec<String>) -> (u64, u64) {
        if self.pipeline > 1 {
            return self.pipelined_connections(pacing, warnings);
        }
        let load = &self.load;
        let shard = self.shard.unwrap_or_default();
        let staged_max = load.stages.iter().map(|s| s.target.ceil() as u64).max();
        let multiplexed = self.http2
            || matches!(&self.target, TargetSpec::Command { .. })
            || matches!(&self.target, TargetSpec::Url(url) if crate::transport::is_multiplexed(url));
        let shape = match (pacing, multiplexed) {
            (Pacing::Closed, false) => {
                let concurrency = staged_max
                    .or(load.concurrency)
                    .or(load.connections)
                    .unwrap_or(DEFAULT_CONCURRENCY);
                let connections = load.connections.unwrap_or(concurrency);
                if connections < concurrency {
                    warnings.push(format!(
                        "HTTP/1.1 carries one call per connection: {connections} connections give at most {connections} calls in flight, not {concurrency}"
                    ));
                }
                (connections, 1)
            }
            (Pacing::Open { .. }, false) => (load.connections.unwrap_or(DEFAULT_OPEN_CONNECTIONS), 1),
            (Pacing::Closed, true) => {
                let concurrency = staged_max.or(load.concurrency).unwrap_or(DEFAULT_CONCURRENCY);
                let connections = load
                    .connections
                    .unwrap_or_else(|| load.max_in_flight.map_or(1, |max| concurrency.div_ceil(max)))
                    .max(1);
                // A shard's callers carry its share of the calls in flight.
                let mine = shard.share(connections).max(1);
                (connections, shard.share(concurrency).div_ceil(mine).max(1))
            }
            (Pacing::Open { rate }, true) => {
                let connections = load.connections.unwrap_or(1);
                let per_connection = load
                    .max_in_flight
                    .unwrap_or_else(|| open_callers(self.peak_rate(rate), self.timeout, connections));
                (connections, per_connection)
            }
        };
        if load.max_in_flight.is_some() && !multiplexed {
            warnings.push("--max-in-flight applies to multiplexed transports (ws://, tcp://, unix://, --http2); HTTP/1.1 carries one call per connection".into());
        }
        shape
    }

    /// HTTP/1.1 pipelined `pipeline` deep: the closed model's calls in
    /// flight over as many connections as they fill (unless given); the
    /// open model's connections each `pipeline` deep.
    fn pipelined_connections(&self, pacing: Pacing, warnings: &mut Vec<String>) -> (u64, u64) {
        let load = &self.load;
        let depth = self.pipeline as u64;
        if load.max_in_flight.is_some() {
            warnings.push(format!(
                "--max-in-flight gives way to --pipeline {depth}: a pipelined connection carries {depth} calls at once"
            ));
        }
        let Pacing::Closed = pacing else {
            return (load.connections.unwrap_or(DEFAULT_OPEN_CONNECTIONS), depth);
        };
        let shard = self.shard.unwrap_or_default();
        let staged_max = load.stages.iter().map(|s| s.target.ceil() as u64).max();
        let concurrency = staged_max.or(load.concurrency).unwrap_or(DEFAULT_CONCURRENCY);
        let connections = load
            .connections
            .unwrap_or_else(|| concurrency.div_ceil(depth))
            .max(1);
        let mine = shard.share(connections).max(1);
        let per_connection = shard.share(concurrency).div_ceil(mine).max(1);
        if per_connection > depth {
            warnings.push(format!(
                "--pipeline {depth} on {connections} connections gives at most {} calls in flight, not {concurrency}",
                connections.saturating_mul(depth)
            ));
        }
        (connections, per_connection.min(depth))
    }

    /// The open model's highest rate: its stages' peak, else its rate.
    fn peak_rate(&self, rate: f64) -> f64 {
        (self.load.stages.iter()).map(|s| s.target).fold(rate, f64::max)
    }

    /// The whole run's request limit, if it has one. A replay that stops at
    /// the end of its file ends the run there, as a request limit would:
    /// nothing is left to send or to owe.
    fn requests(&self) -> Option<u64> {
        match &self.replay {
            Some(replay) if !replay.looping => {
                let lines = replay.requests.len() as u64;
                Some(self.load.requests.map_or(lines, |n| n.min(lines)))
            }
            _ => self.load.requests,
        }
    }

    /// The load model, and a replay's recorded times: a replay at its
    /// recorded pace is an open model whose requests are due when they were
    /// captured (its rate their mean).
    fn pacing(&self) -> (Pacing, Option<std::sync::Arc<[f64]>>) {
        let recorded: Option<std::sync::Arc<[f64]>> =
            self.replay.as_ref().and_then(|r| r.times.clone()).map(Into::into);
        let pacing = match &recorded {
            Some(times) => Pacing::Open {
                rate: times.len() as f64 / times.last().copied().unwrap_or(0.0).max(1e-3),
            },
            None => self.load.pacing,
        };
        (pacing, recorded)
    }

    fn mix(&self) -> Mix {
        match &self.replay {
            Some(replay) => self.replay_mix(replay),
            None => self.weighted_mix(),
        }
    }

    /// A call per recorded call, each line's in its order, checked against
    /// its recorded answer where the replay has them.
    fn replay_mix(&self, replay: &Replay) -> Mix {
        let mut methods = Methods::default();
        let mut calls = Vec::new();
        let mut expectations = Vec::new();
        let rules: std::sync::Arc<[crate::scenario::EqualityRule]> = replay.rules.clone().into();
        let requests = replay
            .requests
            .iter()
            .enumerate()
            .map(|(line, request)| {
                let answer = replay.answers.as_ref().and_then(|a| a[line].as_deref());
                let planned = request
                    .calls
                    .iter()
                    .map(|call| {
                        let params: Option<serde_json::Value> = call
                            .params
                            .as_ref()
                            .and_then(|p| serde_json::from_str(p.get()).ok());
                        calls.push(MixCall {
                            method: methods.index(&call.method),
                            template: CallTemplate::new(self.version, &call.method, params.as_ref()),
                            batch: None,
                            notification: call.notification,
                        });
                        expectations.push(
                            recorded_answer(answer, request.batch, call)
                                .map(|answer| recorded(&call.method, answer, &rules)),
                        );
                        Planned {
                            call: table_index(calls.len() - 1),
                            notification: call.notification,
                        }
                    })
                    .collect();
                (request.batch, planned)
            })
            .collect();
        let source = ReplaySource::new(requests, replay.looping);
        Mix::replay(methods.names, calls, source, expectations)
    }

    /// The `[[calls]]`, drawn by weight, each request alone or in a batch.
    fn weighted_mix(&self) -> Mix {
        let mut methods = Methods::default();
        let calls = self
            .calls
            .iter()
            .map(|call| {
                let mix_call = MixCall {
                    method: methods.index(call.row()),
                    // Params come compiled from a file, or as plain JSON from
                    // the command line.
                    template: match &call.template {
                        Some(template) => {
                            CallTemplate::generated(self.version, &call.method, Some(template.clone()))
                        }
                        None => CallTemplate::new(self.version, &call.method, call.params.as_ref()),
                    },
                    batch: call.batch.clone(),
                    notification: call.notification,
                };
                (mix_call, call.weight, call.expect.clone())
            })
            .collect::<Vec<_>>();
        // `Mix::pick` draws indexes below this, as 32 bits.
        table_index(calls.len() + self.flows.len());
        let batch = self.batch.as_ref().map(|b| MixBatch {
            size: b.size.clone(),
            notifications: b.notifications,
        });
        // The steps' rows among the calls', then the flows' own rows last:
        // every total leaves those out.
        let steps: Vec<Vec<Step>> = (self.flows.iter())
            .map(|flow| {
                flow.steps
                    .iter()
                    .map(|step| self.step(step, &mut methods))
                    .collect()
            })
            .collect();
        let flows = (self.flows.iter().zip(steps))
            .map(|(flow, steps)| {
                let compiled = Flow {
                    row: methods.index(&flow.row()),
                    vars: flow.vars.iter().map(|(slot, t, _)| (*slot, t.clone())).collect(),
                    steps,
                    slots: flow.slots.len(),
                    own_connection: flow.own_connection,
                };
                (compiled, flow.weight)
            })
            .collect();
        Mix::with_flows(methods.names, calls, flows, batch)
    }

    fn step(&self, step: &crate::scenario::StepSpec, methods: &mut Methods) -> Step {
        Step {
            row: methods.index(step.row()),
            template: CallTemplate::generated(self.version, &step.method, step.template.clone()),
            notification: step.notification,
            expect: step.expect.clone(),
            captures: step.captures.clone(),
            until: step.until.clone(),
            for_each: step.for_each,
            always: step.always,
        }
    }
}

/// Calls in flight each multiplexed connection carries in the open model
/// unless told: what the rate can have in flight at once, `rate × timeout`
/// (a call ends by its timeout), over the connections, at most
/// [`OPEN_IN_FLIGHT`]. Each is a caller task waiting its turn: 64 on each
/// of 5,000 WebSocket connections were 320,000 tasks, 1.4 GB and a
/// schedule 10% late at 500 calls/s, where 1 each does (82 MB, on time).
fn open_callers(rate: f64, timeout: std::time::Duration, connections: u64) -> u64 {
    let in_flight = (rate * timeout.as_secs_f64()).ceil();
    let in_flight = if in_flight.is_finite() && in_flight >= 1.0 {
        in_flight as u64
    } else {
        1
    };
    in_flight.div_ceil(connections.max(1)).clamp(1, OPEN_IN_FLIGHT)
}

/// The most calls in flight a multiplexed connection carries in the open
/// model unless `--max-in-flight` says.
pub const OPEN_IN_FLIGHT: u64 = 64;

/// An index into the mix's tables, whose length a file decides (a replay
/// file has a call per recorded call), as the 32 bits the engine keeps.
/// Checked, never wrapped: past 2^32 calls the tables alone would take
/// hundreds of GiB, so a file that large cannot have been read, and this
/// stops it before a call is sent as another.
fn table_index(index: usize) -> u32 {
    u32::try_from(index).expect("a scenario holds fewer than 2^32 calls")
}

/// The mix's method names, each once, in the order the calls first name
/// them.
#[derive(Default)]
struct Methods {
    names: Vec<String>,
}

impl Methods {
    fn index(&mut self, name: &str) -> u32 {
        match self.names.iter().position(|m| m == name) {
            Some(index) => table_index(index),
            None => {
                self.names.push(name.to_string());
                table_index(self.names.len() - 1)
            }
        }
    }
}

/// Each captured connection a connection of the run's, in the order they
/// first appear: per connection, the requests (lines) it sends.
fn connection_groups(conns: &[u64]) -> std::sync::Arc<[Box<[u64]>]> {
    let mut order: Vec<u64> = Vec::new();
    let mut groups: Vec<Vec<u64>> = Vec::new();
    for (seq, conn) in conns.iter().enumerate() {
        let at = order.iter().position(|c| c == conn).unwrap_or_else(|| {
            order.push(*conn);
            groups.push(Vec::new());
            order.len() - 1
        });
        groups[at].push(seq as u64);
    }
    groups.into_iter().map(Vec::into_boxed_slice).collect()
}

/// A call's own recorded answer: the line's answer, or in a batch's answer
/// the entry with the call's recorded id. None for a notification.
fn recorded_answer(
    answer: Option<&serde_json::value::RawValue>,
    batch: bool,
    call: &crate::scenario::ReplayCall,
) -> Option<serde_json::Value> {
    let id: serde_json::Value =
        serde_json::from_str(call.recorded_id.as_deref().filter(|_| !call.notification)?).ok()?;
    let answer: serde_json::Value = serde_json::from_str(answer?.get()).ok()?;
    if !batch {
        return Some(answer);
    }
    answer
        .as_array()?
        .iter()
        .find(|entry| entry.get("id") == Some(&id))
        .cloned()
}

fn recorded(
    method: &str,
    answer: serde_json::Value,
    rules: &std::sync::Arc<[crate::scenario::EqualityRule]>,
) -> crate::rpc::Expectation {
    crate::rpc::Expectation::Recorded(std::sync::Arc::new(crate::rpc::RecordedAnswer {
        method: method.to_string(),
        answer,
        rules: rules.clone(),
    }))
}

/// A seed for a run that names none: from the clock, so runs differ.
fn draw_seed() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

impl Scenario {
    /// Fixes the seed (the file's or the flag's, else one drawn now) and
    /// returns it: every run made from this scenario, each target's or
    /// each sweep step's, then sends the same calls.
    pub fn pin_seed(&mut self) -> u64 {
        *self.seed.get_or_insert_with(draw_seed)
    }
}
