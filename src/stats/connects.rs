//! How the run's connections opened: the time each took, the ones that
//! failed and why, and those opened again during the run. Apart from the
//! calls' latency, as oha keeps its dial-up time apart: a connect storm is
//! the connections' cost, not the server's answers.

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
}

impl Default for Connects {
    fn default() -> Self {
        Connects {
            time: new_histogram(),
            opened: 0,
            reopened: 0,
            failed: 0,
            error: None,
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

    pub fn merge(&mut self, other: &Connects) {
        self.time.add(&other.time).ok();
        self.opened += other.opened;
        self.reopened += other.reopened;
        self.failed += other.failed;
        if self.error.is_none() {
            self.error.clone_from(&other.error);
        }
    }
}

/// The connections of a run, as reports show them.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ConnectSummary {
    /// Connections the run has.
    pub planned: u64,
    /// Opened before the measured schedule began.
    pub opened: u64,
    /// Opened again during the run.
    pub reopened: u64,
    pub failed: u64,
    /// The first failure's reason.
    #[serde(deserialize_with = "super::read::required")]
    pub error: Option<String>,
    /// How long an opening took.
    pub time: LatencySummary,
}

impl ConnectSummary {
    pub fn of(connects: &Connects, planned: u64) -> Self {
        ConnectSummary {
            planned,
            opened: connects.opened,
            reopened: connects.reopened,
            failed: connects.failed,
            error: connects.error.clone(),
            time: LatencySummary::from_micros(&connects.time),
        }
    }
}
