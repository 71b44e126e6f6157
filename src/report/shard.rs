//! `shard.json`: what a shard of a split run adds to its result directory,
//! so that `volley merge` can add the shards up exactly: which shard of
//! which run it was, its clock, and every count and histogram it gathered.

use serde::{Deserialize, Serialize};

use super::RunReport;
use crate::stats::{ClientCpu, SavedRecorder};

/// The version of this file's layout: a merge reads only its own.
pub const FORMAT: u32 = 2;

#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct ShardRecord {
    pub format: u32,
    pub volley: String,
    pub index: u32,
    pub count: u32,
    pub scenario: String,
    /// The whole run as the scenario and flags describe it, before the
    /// split, key by key: every shard of one run has the same.
    pub run: std::collections::BTreeMap<String, String>,
    pub seed: u64,
    /// This shard's ids: `first_id` and the `id_block` after it.
    pub first_id: u64,
    pub id_block: u64,
    pub clock: ShardClock,
    pub measured_seconds: f64,
    /// The mix's methods, in the order of `total.methods`.
    pub methods: Vec<String>,
    /// Each stage's start and end, seconds into the measured run.
    pub stage_bounds: Vec<(f64, f64)>,
    /// The thresholds, as written, to judge the merged run by.
    pub thresholds: Vec<String>,
    /// Open model: this shard's requests due by the end, and the whole
    /// run's constant rate (none when staged or closed).
    pub open: bool,
    pub due: u64,
    /// Of those, never sent.
    pub unsent: u64,
    pub rate: Option<f64>,
    pub cpu: ClientCpu,
    pub in_flight_at_end: u64,
    pub panicked_connections: u64,
    pub partial: bool,
    pub total: SavedRecorder,
    pub stages: Vec<SavedRecorder>,
}

/// When the shard ran, by the wall clock (unix seconds), for lining the
/// shards' seconds up.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ShardClock {
    /// `--start-at`, when given.
    pub start_at: Option<f64>,
    /// When the load began (after the connection was reached and any wait).
    pub started: f64,
    /// How much later than `start_at` it began (0 when on time or early).
    pub late_s: Option<f64>,
    /// When the measured part began (after the warmup).
    pub measure_start: f64,
}

/// `shard.json`, for a run that was a shard.
pub fn render(report: &RunReport) -> Option<Vec<u8>> {
    let record = report.shard.as_ref()?;
    Some(serde_json::to_vec_pretty(record).expect("a shard record is plain data"))
}
