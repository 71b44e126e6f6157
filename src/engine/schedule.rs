//! The schedule: one counter every connection task claims its next request
//! from, pacing the calls as the load plan says and stopping the run at its
//! limit or deadline.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use tokio_util::sync::CancellationToken;

use super::control::Control;
use super::timetable::{Due, Timetable};
use crate::plan::{LoadPlan, Pacing, Shard};

/// A claim on the next request of the run.
#[derive(Clone, Copy, Debug)]
pub struct Claim {
    /// When the request should leave: fixed by the schedule in the open
    /// model, "now" in the closed one.
    pub intended: Instant,
    /// The request's place in the run's sequence, from 0: what it sends is
    /// drawn from the seed and this alone, so every run with the seed (each
    /// target of a comparison) sends request N alike, whichever connection
    /// carries it.
    pub seq: u64,
    /// It became due while every connection was busy, and waited for one
    /// (open model): its lateness is the server's, not volley's.
    pub waited_for_room: bool,
}

/// The schedule's end on a cache line of its own: every call reads it
/// (how long it may wait), while the counters beside it are written at
/// every claim.
#[derive(Debug)]
#[repr(align(64))]
struct End {
    /// In ns from the start (`u64::MAX`: not yet): the deadline, the due
    /// time of the first request past the limit, or when the mix ran out.
    /// The grace counts from here.
    at: AtomicU64,
    /// The run's deadline, a copy of the schedule's.
    deadline: Option<Instant>,
}

/// Per captured connection, its requests and how many were claimed.
#[derive(Debug)]
struct Groups {
    seqs: std::sync::Arc<[Box<[u64]>]>,
    cursors: Box<[AtomicUsize]>,
}

/// Hands out requests: one counter shared by all connections, so that in the
/// open model whichever connection is free takes the next due request, and a
/// request due while all connections are busy waits (and shows it).
#[derive(Debug)]
pub struct Schedule {
    pub(super) claimed: Arc<AtomicU64>,
    /// The closed model's sequence (the open model's is `claimed`).
    sequence: AtomicU64,
    /// Claimed requests given back unsent because the run was paused.
    withdrawn: AtomicU64,
    /// Requests claimed after the warmup, which the request limit counts.
    measured: AtomicU64,
    measure_start: Instant,
    start: Instant,
    /// Pauses and manual rates set during the run.
    control: Arc<Control>,
    /// When each request is due, in the open model.
    timetable: Option<Arc<Timetable>>,
    /// Which of the run's requests are this machine's.
    shard: Shard,
    /// A replay keeps its recorded times: its last one is no end of the
    /// measured span.
    recorded: bool,
    /// A replay's captured connections, when it keeps them.
    groups: Option<Groups>,
    limit: Option<u64>,
    deadline: Option<Instant>,
    /// The run has no request left to hand out: its limit or deadline was
    /// reached, or its mix ran out. Idle callers look here, so they end too.
    finished: AtomicBool,
    /// When the schedule ended (or will), read by every call.
    end: End,
    /// The end is a time of the schedule's own (its deadline, or a due
    /// time of the open model's): the measured span ends there.
    span_known: AtomicBool,
    /// Cancelled once, as the end is first known: what the threads wait on.
    ending: CancellationToken,
}

impl Schedule {
    pub fn new(plan: &LoadPlan, start: Instant, control: Arc<Control>) -> Self {
        Schedule {
            claimed: Arc::new(AtomicU64::new(0)),
            sequence: AtomicU64::new(0),
            withdrawn: AtomicU64::new(0),
            measured: AtomicU64::new(0),
            measure_start: start + plan.warmup,
            start,
            control,
            timetable: match plan.pacing {
                Pacing::Open { rate } => Some(Arc::new(Timetable::new(plan, rate))),
                Pacing::Closed => None,
            },
            shard: plan.shard,
            recorded: plan.recorded.is_some(),
            groups: plan.groups.clone().map(|seqs| Groups {
                cursors: seqs.iter().map(|_| AtomicUsize::new(0)).collect(),
                seqs,
            }),
            limit: plan.requests,
            deadline: plan.duration.map(|d| start + plan.warmup + d),
            finished: AtomicBool::new(false),
            end: End {
                at: AtomicU64::new(u64::MAX),
                deadline: plan.duration.map(|d| start + plan.warmup + d),
            },
            span_known: AtomicBool::new(false),
            ending: CancellationToken::new(),
        }
    }

    #[cfg(test)]
    pub fn claim(&self) -> Option<Claim> {
        self.claim_for(0)
    }

    /// The next request for a caller on `connection`: any request, unless
    /// the replay keeps its captured connections (then that connection's).
    pub fn claim_for(&self, connection: usize) -> Option<Claim> {
        // A shard's n-th request is the run's `shard.request(n)`: it sends
        // what, and when, one machine would have sent that one.
        let (intended, seq) = match (&self.groups, &self.timetable) {
            (Some(groups), timetable) => self.next_in_group(groups, connection, timetable.as_deref())?,
            (None, None) => (
                Instant::now(),
                self.shard.request(self.sequence.fetch_add(1, Ordering::Relaxed)),
            ),
            (None, Some(timetable)) => {
                let local = self.claimed.fetch_add(1, Ordering::Relaxed);
                let intended = match timetable.due(local, self.control.override_for(local)) {
                    Due::At(due) => self.start + Duration::from_secs_f64(due),
                    // Paused: the worker waits for the resume and sends then.
                    Due::Paused => Instant::now(),
                    // Past the profile's (or a replay's) last time: the
                    // run still lasts until its deadline.
                    Due::Past => {
                        match self.deadline {
                            Some(deadline) => self.end_at(deadline, true),
                            None => self.finish(),
                        }
                        return None;
                    }
                };
                (intended, self.shard.request(local))
            }
        };
        // The request limit counts measured requests: a warmup comes on top.
        if let Some(limit) = self.limit {
            if intended >= self.measure_start && self.measured.fetch_add(1, Ordering::Relaxed) >= limit {
                // The open model's span ends when the next request would
                // have been due (200 at 100/s span 2 s); a replay's last
                // time, or the closed model's "now", is no such end.
                let timed = self.timetable.is_some() && !self.recorded && self.groups.is_none();
                self.end_at(intended, timed);
                return None;
            }
        }
        if let Some(deadline) = self.deadline.filter(|deadline| intended >= *deadline) {
            self.end_at(deadline, true);
            return None;
        }
        Some(Claim {
            intended,
            seq,
            waited_for_room: false,
        })
    }

    /// The next request of a captured connection's, and when it is due.
    fn next_in_group(
        &self,
        groups: &Groups,
        connection: usize,
        timetable: Option<&Timetable>,
    ) -> Option<(Instant, u64)> {
        let group = connection % groups.seqs.len().max(1);
        let at = groups.cursors.get(group)?.fetch_add(1, Ordering::Relaxed);
        let seq = *groups.seqs.get(group)?.get(at)?;
        self.claimed.fetch_add(1, Ordering::Relaxed);
        let intended = match timetable {
            Some(timetable) => self.start + Duration::from_secs_f64(timetable.planned(seq)?),
            None => Instant::now(),
        };
        Some((intended, seq))
    }

    /// The open model's times, which steering shares.
    pub(super) fn timetable(&self) -> Option<Arc<Timetable>> {
        self.timetable.clone()
    }

    /// Marks the run as having nothing left to send, from now.
    pub fn finish(&self) {
        self.end_at(Instant::now(), false);
    }

    /// Ends the schedule at `at` (the earliest end given wins); `timed`
    /// when `at` is a time of the schedule's own, which the measured span
    /// ends at.
    pub fn end_at(&self, at: Instant, timed: bool) {
        self.finished.store(true, Ordering::Release);
        let ns = u64::try_from(at.saturating_duration_since(self.start).as_nanos()).unwrap_or(u64::MAX - 1);
        let before = self.end.at.fetch_min(ns, Ordering::AcqRel);
        if timed && ns <= before {
            self.span_known.store(true, Ordering::Release);
        }
        if before == u64::MAX {
            self.ending.cancel();
        }
    }

    /// When the schedule ended, once it has.
    pub fn ended_at(&self) -> Option<Instant> {
        match self.end.at.load(Ordering::Acquire) {
            u64::MAX => None,
            ns => Some(self.start + Duration::from_nanos(ns)),
        }
    }

    /// Where the measured span ends, when the schedule ended at a time of
    /// its own: its deadline, or the open model's due time past its limit.
    pub fn span_end(&self) -> Option<Instant> {
        self.span_known
            .load(Ordering::Acquire)
            .then(|| self.ended_at())
            .flatten()
    }

    /// Waits until the schedule's end is known (it may lie ahead: the open
    /// model's next due time).
    pub async fn ending(&self) {
        self.ending.cancelled().await;
    }

    /// The run's deadline, when it has one.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// When the schedule ends or ended, as far as known now: its end, or
    /// its deadline.
    pub fn end_known(&self) -> Option<Instant> {
        match (self.ended_at(), self.end.deadline) {
            (Some(ended), Some(deadline)) => Some(ended.min(deadline)),
            (ended, deadline) => ended.or(deadline),
        }
    }

    /// Whether the run has nothing left to send.
    pub fn is_finished(&self) -> bool {
        self.finished.load(Ordering::Acquire)
    }

    /// Gives back a claimed request that a pause kept from being sent: it is
    /// no longer due.
    pub fn withdraw(&self) {
        self.withdrawn.fetch_add(1, Ordering::Relaxed);
    }

    /// Requests the open model had due before `end`.
    pub fn due_before(&self, end: Instant) -> u64 {
        let Some(timetable) = &self.timetable else {
            return 0;
        };
        let seconds = end.saturating_duration_since(self.start).as_secs_f64();
        let due = timetable.due_within(seconds, self.control.override_at(seconds));
        let due = due.saturating_sub(self.withdrawn.load(Ordering::Relaxed));
        let warmup = self.measure_start.saturating_duration_since(self.start);
        let warmup_due = timetable.due_within(warmup.as_secs_f64(), None);
        self.limit.map_or(due, |limit| due.min(limit + warmup_due))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Shard, Stage};

    fn plan(pacing: Pacing, requests: Option<u64>, duration: Option<Duration>) -> LoadPlan {
        LoadPlan {
            pacing,
            connections: 1,
            per_connection: 1,
            duration,
            requests,
            warmup: Duration::ZERO,
            timeout: Duration::from_secs(1),
            grace: Duration::from_secs(1),
            threads: 1,
            seed: 0,
            stages: Vec::new(),
            initial_concurrency: 1,
            shard: Default::default(),
            recorded: None,
            groups: None,
            reconnect_every: None,
            max_flows: crate::plan::DEFAULT_MAX_FLOWS,
        }
    }

    #[test]
    fn open_model_spaces_requests_evenly_from_the_start() {
        let start = Instant::now();
        let schedule = Schedule::new(
            &plan(Pacing::Open { rate: 100.0 }, None, Some(Duration::from_secs(1))),
            start,
            Default::default(),
        );
        let times: Vec<_> = (0..3)
            .map(|_| schedule.claim().unwrap().intended - start)
            .collect();
        assert_eq!(
            times,
            [
                Duration::ZERO,
                Duration::from_millis(10),
                Duration::from_millis(20)
            ]
        );
        assert_eq!(schedule.due_before(start + Duration::from_millis(995)), 100);
    }

    #[test]
    fn nothing_is_due_after_the_deadline() {
        let start = Instant::now();
        let schedule = Schedule::new(
            &plan(Pacing::Open { rate: 10.0 }, None, Some(Duration::from_secs(1))),
            start,
            Default::default(),
        );
        let claimed = std::iter::from_fn(|| schedule.claim()).count();
        assert_eq!(claimed, 10);
    }

    #[test]
    fn a_ramp_spreads_requests_as_its_rate_grows() {
        let mut plan = plan(Pacing::Open { rate: 100.0 }, None, None);
        plan.stages = vec![
            Stage {
                duration: Duration::from_secs(10),
                target: 300.0,
            },
            Stage {
                duration: Duration::from_secs(5),
                target: 300.0,
            },
        ];
        let profile = plan.profile(100.0);
        assert_eq!(profile.value_at(0.0), 100.0);
        assert_eq!(profile.value_at(5.0), 200.0);
        assert_eq!(profile.value_at(12.0), 300.0);
        // 10 s ramping 100 → 300 is 2000 requests, then 300/s for 5 s.
        assert!((profile.due_within(10.0) - 2000.0).abs() < 1e-6);
        assert!((profile.due_within(15.0) - 3500.0).abs() < 1e-6);
        assert!((profile.due_time(2000.0).unwrap() - 10.0).abs() < 1e-9);
        assert!((profile.due_time(3200.0).unwrap() - 14.0).abs() < 1e-9);
        assert_eq!(profile.due_time(3500.0), None);
        let start = Instant::now();
        let schedule = Schedule::new(&plan, start, Default::default());
        assert_eq!(std::iter::from_fn(|| schedule.claim()).count(), 3500);
    }

    #[test]
    fn shards_claim_the_whole_runs_requests_at_its_times_once_each() {
        let start = Instant::now();
        let whole = plan(Pacing::Open { rate: 300.0 }, None, Some(Duration::from_secs(1)));
        let single = Schedule::new(&whole, start, Default::default());
        let expected: Vec<(u64, Instant)> = std::iter::from_fn(|| single.claim())
            .map(|c| (c.seq, c.intended))
            .collect();
        let end = start + Duration::from_millis(995);
        let mut claimed = Vec::new();
        let mut due = 0;
        for index in 0..3 {
            let mut shard = whole.clone();
            shard.shard = Shard::new(index, 3).unwrap();
            let schedule = Schedule::new(&shard, start, Default::default());
            let mine: Vec<_> = std::iter::from_fn(|| schedule.claim()).collect();
            assert_eq!(mine.len(), 100, "shard {index}");
            assert!(mine.iter().all(|c| c.seq % 3 == u64::from(index)));
            claimed.extend(mine.iter().map(|c| (c.seq, c.intended)));
            due += schedule.due_before(end);
        }
        claimed.sort_by_key(|(seq, _)| *seq);
        assert_eq!(claimed, expected);
        assert_eq!(due, single.due_before(end), "what is due adds up too");
        assert_eq!(due, 299);
    }

    #[test]
    fn closed_model_shards_take_every_nth_request() {
        let mut plan = plan(Pacing::Closed, Some(4), None);
        plan.shard = Shard::new(1, 4).unwrap();
        let schedule = Schedule::new(&plan, Instant::now(), Default::default());
        let seqs: Vec<u64> = std::iter::from_fn(|| schedule.claim()).map(|c| c.seq).collect();
        assert_eq!(seqs, [1, 5, 9, 13]);
    }

    #[test]
    fn with_a_request_limit_only_the_limit_and_the_warmup_fall_due() {
        let start = Instant::now();
        let mut limited = plan(
            Pacing::Open { rate: 100.0 },
            Some(50),
            Some(Duration::from_secs(10)),
        );
        limited.warmup = Duration::from_secs(1);
        let schedule = Schedule::new(&limited, start, Default::default());
        assert_eq!(
            schedule.due_before(start + Duration::from_secs(5)),
            150,
            "50 and the warmup's 100"
        );
        assert_eq!(
            schedule.due_before(start + Duration::from_millis(1200)),
            120,
            "not yet at the limit"
        );
        assert_eq!(std::iter::from_fn(|| schedule.claim()).count(), 150);
        assert_eq!(
            schedule.span_end(),
            Some(start + Duration::from_millis(1500)),
            "the limit ends it, when the next request would have been due"
        );
        let timed = Schedule::new(
            &plan(Pacing::Open { rate: 100.0 }, None, Some(Duration::from_secs(1))),
            start,
            Default::default(),
        );
        assert_eq!(std::iter::from_fn(|| timed.claim()).count(), 100);
        assert_eq!(
            timed.span_end(),
            Some(start + Duration::from_secs(1)),
            "its deadline"
        );
        let unbounded = Schedule::new(&plan(Pacing::Closed, None, None), start, Default::default());
        assert_eq!(unbounded.end_known(), None);
        assert_eq!(
            unbounded.due_before(start + Duration::from_secs(5)),
            0,
            "nothing is due in the closed model"
        );
    }

    #[test]
    fn a_recorded_pace_is_followed_request_by_request() {
        let start = Instant::now();
        let mut replay = plan(Pacing::Open { rate: 3.0 }, Some(3), None);
        replay.recorded = Some(vec![0.0, 0.25, 1.5].into());
        let schedule = Schedule::new(&replay, start, Default::default());
        let times: Vec<Duration> = std::iter::from_fn(|| schedule.claim())
            .map(|c| c.intended - start)
            .collect();
        assert_eq!(
            times,
            [
                Duration::ZERO,
                Duration::from_millis(250),
                Duration::from_millis(1500)
            ]
        );
        assert_eq!(schedule.due_before(start + Duration::from_millis(300)), 2);
        assert_eq!(
            schedule.due_before(start + Duration::from_millis(250)),
            1,
            "due at the end is not yet due"
        );
        assert_eq!(schedule.due_before(start + Duration::from_secs(2)), 3);
    }

    #[test]
    fn a_replay_that_keeps_its_connections_gives_each_its_own_requests() {
        let start = Instant::now();
        let mut replay = plan(Pacing::Open { rate: 4.0 }, Some(4), None);
        replay.recorded = Some(vec![0.0, 0.1, 0.2, 0.3].into());
        replay.groups = Some(vec![vec![0, 2].into_boxed_slice(), vec![1, 3].into_boxed_slice()].into());
        let schedule = Schedule::new(&replay, start, Default::default());
        let seq = |connection| {
            schedule
                .claim_for(connection)
                .map(|c| (c.seq, c.intended - start))
        };
        assert_eq!(seq(1), Some((1, Duration::from_millis(100))));
        assert_eq!(seq(0), Some((0, Duration::ZERO)));
        assert_eq!(seq(1), Some((3, Duration::from_millis(300))));
        assert_eq!(seq(1), None, "its connection's requests are all sent");
        assert_eq!(seq(0), Some((2, Duration::from_millis(200))));
    }

    #[test]
    fn a_request_limit_is_exact() {
        let schedule = Schedule::new(
            &plan(Pacing::Closed, Some(7), None),
            Instant::now(),
            Default::default(),
        );
        assert_eq!(std::iter::from_fn(|| schedule.claim()).count(), 7);
    }
}
