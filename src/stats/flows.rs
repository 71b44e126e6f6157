//! A flow's counts beside its row (`flow:NAME`, whose calls are the flows
//! started, its ok the flows completed, its latency a whole flow's): at
//! which step each failed flow stopped and why, and how many steps were
//! never sent because an earlier one failed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{read, Outcome, OutcomeKind};

/// What one thread counted of one flow since its last hand-over.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FlowCounts {
    /// Per step, the flows that stopped there, by the step's outcome.
    pub failed_at: Vec<[u64; OutcomeKind::COUNT]>,
    /// Steps not sent because an earlier step of their flow failed.
    pub skipped: u64,
    /// Flows that kept their connection through every step, the bound of
    /// flows in flight (`max_flows`) being reached.
    pub held: u64,
}

impl FlowCounts {
    pub fn new(steps: usize) -> Self {
        FlowCounts {
            failed_at: vec![[0; OutcomeKind::COUNT]; steps],
            skipped: 0,
            held: 0,
        }
    }

    /// A flow stopped at `step` with `outcome`, leaving `skipped` steps unsent.
    pub fn failed(&mut self, step: usize, outcome: Outcome, skipped: u64) {
        if let Some(counts) = self.failed_at.get_mut(step) {
            counts[outcome.kind() as usize] += 1;
        }
        self.skipped += skipped;
    }

    pub fn merge(&mut self, other: &FlowCounts) {
        if self.failed_at.len() < other.failed_at.len() {
            self.failed_at
                .resize(other.failed_at.len(), [0; OutcomeKind::COUNT]);
        }
        for (mine, theirs) in self.failed_at.iter_mut().zip(&other.failed_at) {
            for (a, b) in mine.iter_mut().zip(theirs) {
                *a += b;
            }
        }
        self.skipped += other.skipped;
        self.held += other.held;
    }
}

/// A flow's figures in `summary.json`, beside its row.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct FlowSummary {
    /// Its row: `flow:NAME`.
    pub flow: String,
    /// Completed, failed, and still going when the run ended.
    pub started: u64,
    pub completed: u64,
    pub failed: u64,
    /// Started and not ended when the run stopped (as calls in flight are,
    /// counted apart from the row, whose calls are the flows that ended).
    #[serde(default)]
    pub in_flight_at_end: u64,
    /// Steps never sent because an earlier one failed.
    pub skipped_steps: u64,
    /// Flows that kept their connection through every step, the bound of
    /// flows in flight (`max_flows`) being reached.
    #[serde(default)]
    pub held_connection: u64,
    /// Each step (from 1, in the file's order) and the flows that stopped
    /// there, by outcome; steps where none stopped are left out.
    pub failed_at: Vec<FailedStep>,
}

/// The flows that stopped at one step.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct FailedStep {
    /// 1 for the first step, in the file's order.
    pub step: usize,
    pub failed: u64,
    #[serde(deserialize_with = "read::by_outcome")]
    pub outcomes: BTreeMap<&'static str, u64>,
}

impl FlowSummary {
    /// Each flow's figures: `names` are the recorder's rows' names, the
    /// flows' rows the last ones; `in_flight` each flow's still going at
    /// the end.
    pub fn each(names: &[String], recorder: &super::Recorder, in_flight: &[u64]) -> Vec<FlowSummary> {
        let first = recorder.call_rows().len();
        (recorder.flows.iter().enumerate())
            .filter_map(|(i, counts)| {
                let row = recorder.methods.get(first + i)?;
                let mut summary = FlowSummary::new(names.get(first + i)?, row, counts);
                summary.in_flight_at_end = in_flight.get(i).copied().unwrap_or(0);
                summary.started += summary.in_flight_at_end;
                Some(summary)
            })
            .collect()
    }

    /// `row` is the flow's own figures (those that ended).
    pub fn new(flow: &str, row: &super::MethodStats, counts: &FlowCounts) -> Self {
        let failed_at = (counts.failed_at.iter().enumerate())
            .filter(|(_, outcomes)| outcomes.iter().any(|n| *n > 0))
            .map(|(i, outcomes)| FailedStep {
                step: i + 1,
                failed: outcomes.iter().sum(),
                outcomes: (OutcomeKind::ALL.iter())
                    .filter(|k| outcomes[**k as usize] > 0)
                    .map(|k| (k.name(), outcomes[*k as usize]))
                    .collect(),
            })
            .collect();
        FlowSummary {
            flow: flow.to_string(),
            started: row.calls(),
            completed: row.ok(),
            failed: row.calls() - row.ok(),
            in_flight_at_end: 0,
            skipped_steps: counts.skipped,
            held_connection: counts.held,
            failed_at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_kept_by_step_and_outcome_and_merge() {
        let mut a = FlowCounts::new(2);
        a.failed(1, Outcome::Capture, 3);
        let mut b = FlowCounts::new(2);
        b.failed(1, Outcome::Timeout, 1);
        b.failed(0, Outcome::Capture, 2);
        a.merge(&b);
        assert_eq!(a.skipped, 6);
        assert_eq!(a.failed_at[0][OutcomeKind::Capture as usize], 1);
        assert_eq!(a.failed_at[1][OutcomeKind::Capture as usize], 1);
        assert_eq!(a.failed_at[1][OutcomeKind::Timeout as usize], 1);
        let mut row = super::super::MethodStats::default();
        for outcome in [Outcome::Ok, Outcome::Capture, Outcome::Capture, Outcome::Timeout] {
            row.record(outcome, std::time::Duration::ZERO, std::time::Duration::ZERO, 0);
        }
        let summary = FlowSummary::new("flow:f", &row, &a);
        assert_eq!((summary.started, summary.completed, summary.failed), (4, 1, 3));
        assert_eq!(summary.failed_at.len(), 2);
        assert_eq!(summary.failed_at[1].step, 2);
        assert_eq!(summary.failed_at[1].failed, 2);
        assert_eq!(summary.failed_at[1].outcomes["timeout"], 1);
    }
}
