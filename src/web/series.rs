//! The page's series over the whole run: each target's seconds, and each
//! method's calls/s and mean latency. Up to [`POINTS`] points, every one
//! is kept; past that, neighbours are merged two by two, so a run of any
//! length is drawn whole in at most [`POINTS`] points. The feed keeps the
//! last seconds only; the page takes each new one from it as it comes.

use std::collections::BTreeMap;

use crate::feed::{Point, TargetNow};
use crate::stats::Snapshot;

/// Points a series holds at most: up to 120 s, a point a second.
pub const POINTS: usize = 120;

/// How a column of merged points is made of the two.
#[derive(Clone, Copy)]
enum Rule {
    /// The later one's (the time at the point's end).
    Last,
    /// Their mean, weighted by the seconds each stands for; a point without
    /// the figure (NaN: no latency that second) counts for nothing.
    Mean,
    /// The higher: a merged p99 hides no bad second.
    Max,
    /// Their mean weighted by the seconds times column `usize` (a mean
    /// latency weighted by its calls).
    MeanBy(usize),
}

/// Columns of a target's point: `[second, calls/s, p50 ms, p99 ms, errors/s]`.
const TARGET_RULES: [Rule; 5] = [Rule::Last, Rule::Mean, Rule::Mean, Rule::Max, Rule::Mean];
/// Columns of a method's point: `[second, calls/s, mean ms]`.
const METHOD_RULES: [Rule; 3] = [Rule::Last, Rule::Mean, Rule::MeanBy(1)];

/// One series, thinned as it grows.
#[derive(Clone, Debug, Default)]
pub struct Thinned<const N: usize> {
    /// Each point, with the seconds it stands for.
    points: Vec<([f64; N], f64)>,
}

impl<const N: usize> Thinned<N> {
    fn push(&mut self, point: [f64; N], seconds: f64, rules: &[Rule; N]) {
        self.points.push((point, seconds));
        if self.points.len() > POINTS {
            let pairs = std::mem::take(&mut self.points);
            self.points = pairs
                .chunks(2)
                .map(|pair| match pair {
                    [a, b] => merge(*a, *b, rules),
                    [a] => *a,
                    _ => unreachable!("chunks of two"),
                })
                .collect();
        }
    }

    /// The points, oldest first.
    pub fn points(&self) -> Vec<[f64; N]> {
        self.points.iter().map(|(p, _)| *p).collect()
    }

    /// The seconds the oldest point stands for: 1 until the series is thinned.
    pub fn step(&self) -> f64 {
        self.points.first().map_or(1.0, |(_, s)| *s)
    }
}

fn merge<const N: usize>(
    (a, wa): ([f64; N], f64),
    (b, wb): ([f64; N], f64),
    rules: &[Rule; N],
) -> ([f64; N], f64) {
    let mut merged = b;
    for (i, rule) in rules.iter().enumerate() {
        merged[i] = match rule {
            Rule::Last => b[i],
            Rule::Max if a[i].is_nan() => b[i],
            Rule::Max => a[i].max(b[i]),
            Rule::Mean => mean(a[i], wa, b[i], wb),
            Rule::MeanBy(by) => mean(a[i], wa * a[*by], b[i], wb * b[*by]),
        };
    }
    (merged, wa + wb)
}

/// The weighted mean of the figures there are (NaN where neither is).
fn mean(a: f64, wa: f64, b: f64, wb: f64) -> f64 {
    let (wa, wb) = (
        if a.is_nan() { 0.0 } else { wa },
        if b.is_nan() { 0.0 } else { wb },
    );
    match wa + wb {
        0.0 => f64::NAN,
        w => (a * wa + b * wb) / w,
    }
}

/// What a method had at the previous look: to tell its calls since.
#[derive(Clone, Copy, Default)]
struct Seen {
    elapsed_s: f64,
    calls: u64,
    sum_s: f64,
}

/// One target's series. A target may run several times (A/B rounds):
/// each run's seconds follow the last run's on the same axis.
#[derive(Default)]
pub struct TargetSeries {
    pub seconds: Thinned<5>,
    /// By method: calls/s and mean latency between two looks.
    pub methods: BTreeMap<String, Thinned<3>>,
    /// The last second taken, as the feed had it.
    taken: Option<Point>,
    /// Seconds of the earlier runs, before this run's first.
    offset: u32,
    /// The same for the methods' points, which go by the snapshots' time.
    method_offset_s: f64,
    seen: BTreeMap<String, Seen>,
}

/// The same second: NaN (no latency) the same as NaN.
fn same(a: &Point, b: &Point) -> bool {
    let bits = |p: &Point| [p.calls_per_s, p.p50_ms, p.p99_ms].map(f64::to_bits);
    a.second == b.second && a.errors == b.errors && bits(a) == bits(b)
}

impl TargetSeries {
    /// Takes what is new in `now`: the seconds after the last one taken,
    /// and each method's calls since the last look.
    pub fn observe(&mut self, now: &TargetNow) {
        let from = match &self.taken {
            Some(taken) => (now.history.iter().rposition(|p| same(p, taken))).map_or(0, |i| i + 1),
            None => 0,
        };
        for p in &now.history[from..] {
            let before = self.taken.map_or(0, |t| t.second);
            if p.second <= before {
                // A new run's first second: it follows the last run's.
                self.offset += before;
            }
            let point = [
                f64::from(self.offset + p.second),
                p.calls_per_s,
                p.p50_ms,
                p.p99_ms,
                p.errors as f64,
            ];
            self.seconds.push(point, 1.0, &TARGET_RULES);
            self.taken = Some(*p);
        }
        if let Some(snapshot) = &now.snapshot {
            self.observe_methods(snapshot);
        }
    }

    fn observe_methods(&mut self, s: &Snapshot) {
        let mut elapsed_s = s.elapsed.saturating_sub(s.warmup).as_secs_f64();
        let last_s = self.seen.values().map(|m| m.elapsed_s).fold(0.0, f64::max);
        if elapsed_s + self.method_offset_s < last_s {
            // A new run: its calls count from none, after the last run's time.
            self.method_offset_s = last_s;
            self.seen.clear();
        }
        elapsed_s += self.method_offset_s;
        for (m, buckets) in s.methods.iter().zip(&s.method_buckets) {
            let now = Seen {
                elapsed_s,
                calls: buckets.count,
                sum_s: buckets.sum_s,
            };
            let before = self.seen.insert(m.method.clone(), now).unwrap_or(Seen {
                elapsed_s: self.method_offset_s,
                ..Seen::default()
            });
            let span = elapsed_s - before.elapsed_s;
            if span <= 0.0 {
                continue;
            }
            let calls = now.calls.saturating_sub(before.calls);
            let mean_ms = match calls {
                0 => f64::NAN,
                n => (now.sum_s - before.sum_s) * 1e3 / n as f64,
            };
            let point = [elapsed_s, calls as f64 / span, mean_ms];
            let series = self.methods.entry(m.method.clone()).or_default();
            series.push(point, span, &METHOD_RULES);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_120_points_neighbours_merge_and_the_whole_run_stays() {
        let mut series = Thinned::<5>::default();
        for second in 1..=121u32 {
            // p99 of 9 ms in second 7 only; no latency in second 8.
            let p99 = match second {
                7 => 9.0,
                8 => f64::NAN,
                _ => 1.0,
            };
            let errors = f64::from(second % 2);
            series.push([f64::from(second), 100.0, 0.5, p99, errors], 1.0, &TARGET_RULES);
        }
        let points = series.points();
        assert_eq!(points.len(), 61);
        assert_eq!(series.step(), 2.0);
        assert_eq!(points[0], [2.0, 100.0, 0.5, 1.0, 0.5]);
        assert_eq!(points[3][3], 9.0, "seconds 7 and 8: the worst p99 that was");
        assert_eq!(points[60], [121.0, 100.0, 0.5, 1.0, 1.0], "the newest, whole");
        assert_eq!(points.last().unwrap()[0], 121.0, "the run's end is drawn");
    }

    #[test]
    fn a_merged_mean_latency_is_weighted_by_calls() {
        let merged = merge(([1.0, 100.0, 2.0], 1.0), ([2.0, 300.0, 4.0], 1.0), &METHOD_RULES);
        assert_eq!(merged, ([2.0, 200.0, 3.5], 2.0));
    }

    fn point(second: u32, calls_per_s: f64) -> Point {
        Point {
            second,
            calls_per_s,
            p50_ms: f64::NAN,
            p99_ms: 1.0,
            errors: 0,
        }
    }

    #[test]
    fn each_second_is_taken_once_and_a_second_run_follows_the_first() {
        let mut series = TargetSeries::default();
        let mut now = TargetNow {
            history: vec![point(1, 10.0), point(2, 20.0)],
            ..TargetNow::default()
        };
        series.observe(&now);
        series.observe(&now);
        now.history.push(point(3, 30.0));
        series.observe(&now);
        // The next round: its seconds count from 1 again.
        now.history.extend([point(1, 40.0), point(2, 50.0)]);
        series.observe(&now);
        let taken: Vec<(f64, f64)> = series.seconds.points().iter().map(|p| (p[0], p[1])).collect();
        assert_eq!(
            taken,
            [(1.0, 10.0), (2.0, 20.0), (3.0, 30.0), (4.0, 40.0), (5.0, 50.0)]
        );
    }
}
