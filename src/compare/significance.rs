//! Whether two sets of samples differ by more than chance: a rank test for
//! latencies and rates, a two-proportion test for error rates.

/// A change is told from noise at this significance (two-sided): strict, so
/// that two runs of one server at one load do not cry wolf.
pub const SIGNIFICANCE: f64 = 0.01;

/// Fewer samples than this a side, and the rank test cannot reach its
/// significance (5 against 5 wholly apart: p = 0.009).
pub const MIN_SAMPLES: usize = 5;

/// Two-sided p-value of the Mann-Whitney U test (normal approximation, ties
/// averaged); `None` with fewer than 3 seconds a side.
pub fn rank_test_p(a: &[f64], b: &[f64]) -> Option<f64> {
    let (n1, n2) = (a.len() as f64, b.len() as f64);
    if a.len() < 3 || b.len() < 3 {
        return None;
    }
    let mut all: Vec<(f64, bool)> = a
        .iter()
        .map(|v| (*v, true))
        .chain(b.iter().map(|v| (*v, false)))
        .collect();
    all.sort_by(|x, y| x.0.total_cmp(&y.0));
    let (mut rank_sum_a, mut i, mut tie_term) = (0.0, 0, 0.0);
    while i < all.len() {
        let j = (i..all.len())
            .find(|&j| all[j].0 != all[i].0)
            .unwrap_or(all.len());
        let average_rank = (i + j + 1) as f64 / 2.0;
        rank_sum_a += average_rank * all[i..j].iter().filter(|x| x.1).count() as f64;
        let t = (j - i) as f64;
        tie_term += t * t * t - t;
        i = j;
    }
    let u = rank_sum_a - n1 * (n1 + 1.0) / 2.0;
    let n = n1 + n2;
    let variance = n1 * n2 / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0)));
    if variance <= 0.0 {
        // Every second identical on both sides: no evidence of a change.
        return Some(1.0);
    }
    let z = (u - n1 * n2 / 2.0).abs() / variance.sqrt();
    Some(2.0 * normal_tail(z))
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

/// P(Z > z) for a standard normal Z (Abramowitz and Stegun 7.1.26, error
/// under 1.5e-7: plenty for a 1% threshold).
fn normal_tail(z: f64) -> f64 {
    let x = z / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736 + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    0.5 * poly * (-x * x).exp()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rank_test_tells_a_shift_from_noise() {
        let base = [10.0, 10.2, 9.9, 10.1, 10.0, 9.8, 10.3, 10.1];
        let same = [10.1, 9.9, 10.0, 10.2, 9.9, 10.1, 10.0, 9.8];
        let slower = [13.0, 13.2, 12.9, 13.1, 13.0, 12.8, 13.3, 13.1];
        assert!(rank_test_p(&base, &same).unwrap() > 0.3);
        assert!(rank_test_p(&base, &slower).unwrap() < 0.001);
        assert_eq!(rank_test_p(&base[..2], &slower), None, "too few seconds to tell");
        assert_eq!(rank_test_p(&[1.0; 4], &[1.0; 4]), Some(1.0));
    }

    #[test]
    fn error_rates_differ_only_past_chance() {
        assert!(two_proportion_p((10.0, 10_000.0), (12.0, 10_000.0)).unwrap() > 0.5);
        assert!(two_proportion_p((10.0, 10_000.0), (100.0, 10_000.0)).unwrap() < 1e-6);
        assert!((normal_tail(1.959_964) - 0.025).abs() < 1e-4);
    }

    #[test]
    fn five_quarter_seconds_a_side_wholly_apart_reach_the_significance() {
        let (fast, slow) = ([5.0, 5.1, 5.2, 5.3, 5.4], [25.0, 25.1, 25.2, 25.3, 25.4]);
        assert!(rank_test_p(&fast, &slow).unwrap() < SIGNIFICANCE);
        assert!(rank_test_p(&fast[..4], &slow[..4]).unwrap() > SIGNIFICANCE);
    }
}
