//! The head race a scenario asks for: which value of each notification (or
//! poll result) is matched across targets, and where it comes from.

use std::sync::Arc;
use std::time::Duration;

use super::Pointer;
use crate::stats::race::RaceBoard;

/// A `race = "POINTER"` key on a `[[subscribe]]` entry or a `[poll.NAME]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Race {
    /// Into each notification's `result` (a poll's result): one value.
    pub pointer: Pointer,
    /// The key's table, as errors and reports name it: `subscribe[0]`,
    /// `poll.head`.
    pub source: String,
    /// A poll's interval, the resolution of every arrival; `None` for a
    /// subscription, whose notifications are each timed as they come.
    pub every: Option<Duration>,
    /// Who was first so far, shared by every target's run (each a clone).
    pub board: Arc<RaceBoard>,
    /// This run's place among the targets (set for each target's run).
    pub lane: usize,
}
