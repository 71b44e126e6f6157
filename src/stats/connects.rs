//! How the run's connections opened: the time each took, the ones that
//! failed and why, those opened again during the run, those closed on
//! purpose (`reconnect_every`, a flow's own session), and the time each
//! setup call took. Apart from the calls' latency, as oha keeps its dial-up
//! time apart: a connect storm is the connections' cost, not the server's
//! answers.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::{micros, new_histogram, LatencySummary};

/// What one engine thread saw of its connections' openings.
#[derive(Clone, Debug)]
pub struct Connects {
    /// How long each opening took (µs): the connect, TLS and any
    /// handshake, not the setup calls (those have figures of their own).
    pub time: Histogram<u64>,
    /// Opened before the measured schedule began.
    pub opened: u64,
    /// Opened during the run, for a connection that closed or never opened.
    pub reopened: u64,
    /// Openings that failed, before the schedule or during it.
    pub failed: u64,
    /// The first failure's reason.
    pub error: Option<String>,
    /// Closed on purpose: after `reconnect_every` requests, or at the end
    /// of the flow that opened it (`session = "per_flow"`).
    pub recycled: u64,
    /// How long each setup call that was answered right took (µs), from
    /// its send to its answer (a notification's: until written).
    pub setup_time: Histogram<u64>,
    /// Waits before opening a connection again after one failed (volley's
    /// backoff), and their time in all (µs): the closed model keeps them
    /// out of every call's latency, so they are counted here.
    pub backoff_waits: u64,
    pub backoff_micros: u64,
}

impl Default for Connects {
    fn default() -> Self {
        Connects {
            time: new_histogram(),
            opened: 0,
            reopened: 0,
            failed: 0,
            error: None,
            recycled: 0,
            setup_time: new_histogram(),
            backoff_waits: 0,
            backoff_micros: 0,
        }
    }
}

impl Connects {
    /// An opening that worked, `before` the schedule or during it.
    pub fn opened(&mut self, took: std::time::Duration, before: bool) {
        self.time.record(micros(took)).ok();
        match before {
            true => self.opened += 1,
            false => self.reopened += 1,
        }
    }

    pub fn failed(&mut self, reason: &str) {
        self.failed += 1;
        self.error.get_or_insert_with(|| reason.to_string());
    }

    /// A wait of `took` before opening again after a failure.
    pub fn backed_off(&mut self, took: std::time::Duration) {
        self.backoff_waits += 1;
        self.backoff_micros += micros(took);
    }

    /// A setup call answered right after `took`.
    pub fn set_up(&mut self, took: std::time::Duration) {
        self.setup_time.record(micros(took)).ok();
    }

    pub fn merge(&mut self, other: &Connects) {
        self.time.add(&other.time).ok();
        self.setup_time.add(&other.setup_time).ok();
        self.opened += other.opened;
        self.reopened += other.reopened;
        self.failed += other.failed;
        self.recycled += other.recycled;
        self.backoff_waits += other.backoff_waits;
        self.backoff_micros += other.backoff_micros;
        if self.error.is_none() {
            self.error.clone_from(&other.error);
        }
    }
}

/// The connections of a run, as reports show them.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(from = "ConnectFields")]
pub struct ConnectSummary {
    /// Connections the run has.
    pub planned: u64,
    /// Opened before the measured schedule began.
    pub opened: u64,
    /// Opened again during the run.
    pub reopened: u64,
    /// Opened in all: before the schedule and during the run.
    pub opened_in_all: u64,
    /// Closed on purpose (`reconnect_every`, a flow's own session).
    pub recycled: u64,
    pub failed: u64,
    /// The first failure's reason.
    pub error: Option<String>,
    /// How long an opening took.
    pub time: LatencySummary,
    /// Waits before opening again after a failure (volley's backoff), and
    /// their seconds in all.
    pub backoff_waits: u64,
    pub backoff_s: f64,
}

/// `ConnectSummary` as `summary.json` holds it: a file from a volley
/// before `opened_in_all` and `recycled` has neither (it recycled none).
#[derive(Deserialize)]
struct ConnectFields {
    planned: u64,
    opened: u64,
    reopened: u64,
    #[serde(default)]
    opened_in_all: Option<u64>,
    #[serde(default)]
    recycled: u64,
    failed: u64,
    #[serde(deserialize_with = "super::read::required")]
    error: Option<String>,
    time: LatencySummary,
    /// Absent from a file of a volley before they were counted.
    #[serde(default)]
    backoff_waits: u64,
    #[serde(default)]
    backoff_s: f64,
}

impl From<ConnectFields> for ConnectSummary {
    fn from(f: ConnectFields) -> Self {
        ConnectSummary {
            opened_in_all: f.opened_in_all.unwrap_or(f.opened.saturating_add(f.reopened)),
            planned: f.planned,
            opened: f.opened,
            reopened: f.reopened,
            recycled: f.recycled,
            failed: f.failed,
            error: f.error,
            time: f.time,
            backoff_waits: f.backoff_waits,
            backoff_s: f.backoff_s,
        }
    }
}

impl ConnectSummary {
    pub fn of(connects: &Connects, planned: u64) -> Self {
        ConnectSummary {
            planned,
            opened: connects.opened,
            reopened: connects.reopened,
            opened_in_all: connects.opened.saturating_add(connects.reopened),
            recycled: connects.recycled,
            failed: connects.failed,
            error: connects.error.clone(),
            time: LatencySummary::from_micros(&connects.time),
            backoff_waits: connects.backoff_waits,
            backoff_s: connects.backoff_micros as f64 / 1e6,
        }
    }
}
