//! The statistics of `volley compare`, in one room: the run is the unit of
//! chance. A figure of a further run of the baseline falls, 99 times in
//! 100, within the prediction interval built from the baseline runs'
//! figures (on a log scale: a busier machine scales a latency, it does not
//! add to it); a current run outside it differs by more than runs differ.
//! Quarter-second samples of one run are not replicates: two runs of one
//! server differ as whole runs (the machine, the warm-up, the neighbours).
//! Error rates are counts of calls: a two-proportion test.

use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

/// A change is told from chance at this level (two-sided): strict, so that
/// runs of one server at one load do not cry wolf.
pub const SIGNIFICANCE: f64 = 0.01;

/// Where a further run's figure falls with probability 1 − SIGNIFICANCE,
/// from the baseline runs' `figures`: `None` with fewer than two, or with a
/// figure that is not positive (no log scale for it).
pub fn prediction_interval(figures: &[f64]) -> Option<(f64, f64)> {
    if figures.len() < 2 || figures.iter().any(|f| !(f.is_finite() && *f > 0.0)) {
        return None;
    }
    let k = figures.len() as f64;
    let logs: Vec<f64> = figures.iter().map(|f| f.ln()).collect();
    let mean = logs.iter().sum::<f64>() / k;
    let variance = logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / (k - 1.0);
    let t = StudentsT::new(0.0, 1.0, k - 1.0)
        .ok()?
        .inverse_cdf(1.0 - SIGNIFICANCE / 2.0);
    let half = t * variance.sqrt() * (1.0 + 1.0 / k).sqrt();
    Some(((mean - half).exp(), (mean + half).exp()))
}

/// The ratio of B to A over paired rounds (each round's B against the same
/// round's A, so drift between rounds cancels), as their geometric mean,
/// with its interval at 1 − SIGNIFICANCE (Student's t over the rounds' log
/// ratios): `(ratio, low, high)`. `None` with fewer than two rounds, or a
/// figure that is not positive.
pub fn paired_ratio(a: &[f64], b: &[f64]) -> Option<(f64, f64, f64)> {
    let positive = |v: &f64| v.is_finite() && *v > 0.0;
    if a.len() != b.len() || !a.iter().chain(b).all(positive) {
        return None;
    }
    let logs: Vec<f64> = a.iter().zip(b).map(|(a, b)| (b / a).ln()).collect();
    let (mean, half) = mean_and_half_width(&logs)?;
    Some((mean.exp(), (mean - half).exp(), (mean + half).exp()))
}

/// The difference B − A over paired rounds (for error rates, which may be
/// zero), its mean with its interval: `(difference, low, high)`.
pub fn paired_difference(a: &[f64], b: &[f64]) -> Option<(f64, f64, f64)> {
    if a.len() != b.len() || !a.iter().chain(b).all(|v| v.is_finite()) {
        return None;
    }
    let differences: Vec<f64> = a.iter().zip(b).map(|(a, b)| b - a).collect();
    let (mean, half) = mean_and_half_width(&differences)?;
    Some((mean, mean - half, mean + half))
}

/// The mean of `values` and the half width of its interval at
/// 1 − SIGNIFICANCE; `None` with fewer than two.
fn mean_and_half_width(values: &[f64]) -> Option<(f64, f64)> {
    if values.len() < 2 {
        return None;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    let t = StudentsT::new(0.0, 1.0, n - 1.0)
        .ok()?
        .inverse_cdf(1.0 - SIGNIFICANCE / 2.0);
    Some((mean, t * (variance / n).sqrt()))
}

/// Two-sided p-value that two error rates (errors, calls) differ.
pub fn two_proportion_p((e1, n1): (f64, f64), (e2, n2): (f64, f64)) -> Option<f64> {
    if n1 < 1.0 || n2 < 1.0 {
        return None;
    }
    let pooled = (e1 + e2) / (n1 + n2);
    let se = (pooled * (1.0 - pooled) * (1.0 / n1 + 1.0 / n2)).sqrt();
    if se == 0.0 {
        return Some(1.0);
    }
    Some(2.0 * normal_tail(((e1 / n1) - (e2 / n2)).abs() / se))
}

/// P(Z > z) for a standard normal Z.
fn normal_tail(z: f64) -> f64 {
    Normal::standard().sf(z)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_rates_differ_only_past_chance() {
        assert!(two_proportion_p((10.0, 10_000.0), (12.0, 10_000.0)).unwrap() > 0.5);
        assert!(two_proportion_p((10.0, 10_000.0), (100.0, 10_000.0)).unwrap() < 1e-6);
        assert!((normal_tail(1.959_964) - 0.025).abs() < 1e-6);
    }

    use rand::rngs::SmallRng;
    use rand::{RngExt, SeedableRng};

    /// A standard normal draw (Box-Muller).
    fn normal(rng: &mut SmallRng) -> f64 {
        let (u, v): (f64, f64) = (rng.random::<f64>().max(f64::MIN_POSITIVE), rng.random());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }

    /// One run's p50 as a run makes it: the run's own drift (the machine,
    /// the warm-up: `drift` on a log scale), then the median of 40 quarter
    /// seconds that follow each other (autocorrelated, ρ = 0.7).
    fn run(rng: &mut SmallRng, median: f64, drift: f64) -> f64 {
        let level = median * (drift * normal(rng)).exp();
        let mut quarter = 0.0;
        let mut quarters: Vec<f64> = (0..40)
            .map(|_| {
                quarter = 0.7 * quarter + 0.1 * normal(rng);
                level * quarter.exp()
            })
            .collect();
        quarters.sort_by(f64::total_cmp);
        (quarters[19] + quarters[20]) / 2.0
    }

    /// How often, in `trials`, a current run `shift` times slower than
    /// `baselines` runs of the same server lies above their interval.
    fn above(trials: u32, baselines: usize, drift: f64, shift: f64, seed: u64) -> u32 {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut count = 0;
        for _ in 0..trials {
            let base: Vec<f64> = (0..baselines).map(|_| run(&mut rng, 5.0, drift)).collect();
            let current = run(&mut rng, 5.0 * shift, drift);
            let (_, high) = prediction_interval(&base).unwrap();
            count += u32::from(current > high);
        }
        count
    }

    #[test]
    fn unchanged_runs_lie_outside_the_interval_no_more_often_than_its_level() {
        // 1,000 unchanged pairs, either side: 1% expected, and the binomial
        // margin (2.33 standard deviations, one-sided 1%) on top.
        let margin = 10.0 + 2.33 * (1000.0f64 * 0.01 * 0.99).sqrt();
        for (baselines, drift, seed) in [(3, 0.15, 1), (5, 0.05, 2), (10, 0.3, 3)] {
            let mut rng = SmallRng::seed_from_u64(seed);
            let outside = (0..1000)
                .filter(|_| {
                    let base: Vec<f64> = (0..baselines).map(|_| run(&mut rng, 5.0, drift)).collect();
                    let current = run(&mut rng, 5.0, drift);
                    let (low, high) = prediction_interval(&base).unwrap();
                    current < low || current > high
                })
                .count();
            assert!(
                outside as f64 <= margin,
                "{outside} of 1,000 outside with {baselines} baselines, drift {drift}"
            );
        }
    }

    #[test]
    fn a_slowdown_larger_than_the_runs_differ_by_is_caught() {
        // Runs that differ by about 8% (5% of drift, and the noise of the
        // run's own quarter seconds): twice as slow is caught 95% of the time
        // with five baselines, 60% slower nearly always with ten.
        assert!(above(200, 5, 0.05, 2.0, 4) >= 190);
        assert!(above(200, 10, 0.05, 1.6, 5) >= 195);
        // Drift as large as the change: the interval cannot tell, and says so.
        assert!(above(200, 3, 0.3, 1.6, 6) < 100);
    }

    /// `rounds` rounds of A and B in ABBA order on a machine that drifts
    /// (each round 2% slower than the last) and differs from round to round
    /// (`noise`, log scale): each run's figure, A's then B's.
    fn rounds(rng: &mut SmallRng, rounds: usize, noise: f64, shift: f64) -> (Vec<f64>, Vec<f64>) {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let mut slot = 0.0;
        for round in 0..rounds {
            let mut at = |rng: &mut SmallRng, factor: f64| {
                slot += 1.0;
                5.0 * factor * (0.01 * slot + noise * normal(rng)).exp()
            };
            let (first_a, second) = match round % 2 {
                0 => (at(rng, 1.0), at(rng, shift)),
                _ => {
                    let first = at(rng, shift);
                    (at(rng, 1.0), first)
                }
            };
            a.push(first_a);
            b.push(second);
        }
        (a, b)
    }

    #[test]
    fn paired_rounds_of_one_server_rarely_rule_out_no_change() {
        // 1,000 unchanged A/B pairs of 8 rounds: the interval leaves out 1
        // about 1% of the time (and the binomial margin), drift or not.
        let margin = 10.0 + 2.33 * (1000.0f64 * 0.01 * 0.99).sqrt();
        let mut rng = SmallRng::seed_from_u64(7);
        let alarms = (0..1000)
            .filter(|_| {
                let (a, b) = rounds(&mut rng, 8, 0.1, 1.0);
                let (_, low, high) = paired_ratio(&a, &b).unwrap();
                low > 1.0 || high < 1.0
            })
            .count();
        assert!(alarms as f64 <= margin, "{alarms} of 1,000");
    }

    #[test]
    fn paired_rounds_catch_a_slowdown_the_runs_differ_by() {
        // Rounds that differ by 10%: eight of them catch 60% slower always,
        // 20% slower more often than not; rounds that differ by 5% catch
        // 20% slower always.
        let mut rng = SmallRng::seed_from_u64(8);
        let caught = |rng: &mut SmallRng, shift: f64| {
            (0..200)
                .filter(|_| {
                    let (a, b) = rounds(rng, 8, 0.1, shift);
                    paired_ratio(&a, &b).unwrap().1 > 1.0
                })
                .count()
        };
        let (sixty, twenty) = (caught(&mut rng, 1.6), caught(&mut rng, 1.2));
        let quieter = (0..200)
            .filter(|_| {
                let (a, b) = rounds(&mut rng, 8, 0.05, 1.2);
                paired_ratio(&a, &b).unwrap().1 > 1.0
            })
            .count();
        assert_eq!(sixty, 200);
        assert!(twenty >= 110, "{twenty}");
        assert_eq!(quieter, 200);
        let (ratio, low, high) = paired_ratio(&[1.0, 2.0], &[2.0, 4.0]).unwrap();
        assert!((ratio - 2.0).abs() < 1e-12 && (low - 2.0).abs() < 1e-12 && (high - 2.0).abs() < 1e-12);
        assert_eq!(
            paired_ratio(&[1.0], &[2.0]),
            None,
            "one round says nothing of chance"
        );
        assert_eq!(paired_ratio(&[1.0, 0.0], &[2.0, 1.0]), None);
        let (difference, ..) = paired_difference(&[0.0, 0.1], &[0.1, 0.2]).unwrap();
        assert!((difference - 0.1).abs() < 1e-12);
    }

    #[test]
    fn an_interval_needs_two_positive_figures() {
        assert_eq!(prediction_interval(&[5.0]), None);
        assert_eq!(prediction_interval(&[5.0, 0.0]), None);
        let (low, high) = prediction_interval(&[4.0, 4.0, 4.0]).unwrap();
        assert!(
            (low - 4.0).abs() < 1e-9 && (high - 4.0).abs() < 1e-9,
            "no spread, no room"
        );
        // Two runs of 4 and 5 ms: t(1) at 99.5% is 63.66, the interval huge.
        let (low, high) = prediction_interval(&[4.0, 5.0]).unwrap();
        assert!(low < 0.1 && high > 200.0, "{low} {high}");
    }
}
