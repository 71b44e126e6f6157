//! When request i is due: the one home of the open model's times. The
//! schedule asks it as it hands a request out, steering as it sets a new
//! rate after the requests already handed out, and the end of the run as
//! it counts what was due. A shard's n-th request is the run's
//! `shard.request(n)`, due when one machine would have sent that one.

use std::sync::Arc;

use crate::plan::{LoadPlan, Profile, Shard};

/// From this machine's request `at_seq` on, requests are due from `at_s`
/// at the whole run's `rate` (a rate set while the run goes, or a pause):
/// a shard's `1/count` of it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Override {
    pub at_seq: u64,
    pub at_s: f64,
    /// Zero while paused.
    pub rate: f64,
}

/// When a request is due, in seconds from the run's start.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Due {
    At(f64),
    /// Paused: it leaves when the run resumes.
    Paused,
    /// Past the profile's (or a replay's) last time: nothing more is due.
    Past,
}

/// The open model's plan of times: its rate over time, or a replay's
/// recorded times, and which of the run's requests are this machine's.
#[derive(Debug)]
pub(super) struct Timetable {
    profile: Profile,
    recorded: Option<Arc<[f64]>>,
    shard: Shard,
}

impl Timetable {
    pub fn new(plan: &LoadPlan, rate: f64) -> Self {
        Timetable {
            profile: plan.profile(rate),
            recorded: plan.recorded.clone(),
            shard: plan.shard,
        }
    }

    /// When the run's request `seq` falls due by the plan: at its recorded
    /// time in a replay that keeps them, else by the rate.
    pub fn planned(&self, seq: u64) -> Option<f64> {
        match &self.recorded {
            Some(times) => times.get(usize::try_from(seq).ok()?).copied(),
            None => self.profile.due_time(seq as f64),
        }
    }

    /// When this machine's `local`-th request is due, under `steered`, the
    /// override in force for it.
    pub fn due(&self, local: u64, steered: Option<Override>) -> Due {
        match steered {
            Some(o) if o.rate <= 0.0 => Due::Paused,
            Some(o) => Due::At(o.at_s + local.saturating_sub(o.at_seq) as f64 / self.own(o.rate)),
            None => self.planned(self.shard.request(local)).map_or(Due::Past, Due::At),
        }
    }

    /// This machine's share of the whole run's `rate`.
    fn own(&self, rate: f64) -> f64 {
        rate / f64::from(self.shard.count.max(1))
    }

    /// This machine's requests due in the first `seconds`, under
    /// `steered`, the override in force then.
    pub fn due_within(&self, seconds: f64, steered: Option<Override>) -> u64 {
        match steered {
            Some(o) => o.at_seq + ((seconds - o.at_s).max(0.0) * self.own(o.rate)).ceil() as u64,
            None => self.shard.share(match &self.recorded {
                Some(times) => times.partition_point(|t| *t < seconds) as u64,
                None => self.profile.due_within(seconds).ceil() as u64,
            }),
        }
    }
}
