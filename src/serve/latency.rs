//! Added server latency: a fixed hold or a distribution.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use rand::RngExt;

/// How long the server holds each request before answering.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub enum Latency {
    #[default]
    None,
    Fixed(Duration),
    /// Uniform between the two bounds.
    Uniform(Duration, Duration),
    /// Exponential with this mean.
    Exponential(Duration),
}

impl Latency {
    pub fn sample<R: RngExt>(&self, rng: &mut R) -> Duration {
        match *self {
            Latency::None => Duration::ZERO,
            Latency::Fixed(d) => d,
            Latency::Uniform(low, high) => {
                if high <= low {
                    low
                } else {
                    rng.random_range(low..=high)
                }
            }
            Latency::Exponential(mean) => {
                let u: f64 = rng.random_range(f64::EPSILON..1.0);
                mean.mul_f64(-u.ln())
            }
        }
    }
}

impl FromStr for Latency {
    type Err = String;

    /// `2ms`, `uniform:1ms..5ms`, `exp:2ms`.
    fn from_str(s: &str) -> Result<Self, String> {
        let duration = |text: &str| {
            humantime::parse_duration(text.trim())
                .map_err(|e| format!("`{text}` is not a duration (e.g. 2ms): {e}"))
        };
        if let Some(range) = s.strip_prefix("uniform:") {
            let (low, high) = range
                .split_once("..")
                .ok_or_else(|| format!("`{s}`: expected uniform:LOW..HIGH, e.g. uniform:1ms..5ms"))?;
            let (low, high) = (duration(low)?, duration(high)?);
            if high < low {
                return Err(format!("`{s}`: the upper bound is below the lower one"));
            }
            Ok(Latency::Uniform(low, high))
        } else if let Some(mean) = s.strip_prefix("exp:") {
            Ok(Latency::Exponential(duration(mean)?))
        } else if s == "0" || s.is_empty() {
            Ok(Latency::None)
        } else {
            Ok(Latency::Fixed(duration(s)?))
        }
    }
}

impl fmt::Display for Latency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let h = |d: &Duration| humantime::format_duration(*d).to_string();
        match self {
            Latency::None => f.write_str("none"),
            Latency::Fixed(d) => f.write_str(&h(d)),
            Latency::Uniform(a, b) => write!(f, "uniform:{}..{}", h(a), h(b)),
            Latency::Exponential(m) => write!(f, "exp:{}", h(m)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    #[test]
    fn parses_each_form() {
        assert_eq!("2ms".parse(), Ok(Latency::Fixed(Duration::from_millis(2))));
        assert_eq!(
            "uniform:1ms..5ms".parse(),
            Ok(Latency::Uniform(
                Duration::from_millis(1),
                Duration::from_millis(5)
            ))
        );
        assert_eq!(
            "exp:3ms".parse(),
            Ok(Latency::Exponential(Duration::from_millis(3)))
        );
        assert!("uniform:5ms..1ms".parse::<Latency>().is_err());
        assert!("fast".parse::<Latency>().is_err());
    }

    #[test]
    fn uniform_samples_stay_in_bounds() {
        let latency: Latency = "uniform:1ms..5ms".parse().unwrap();
        let mut rng = SmallRng::seed_from_u64(1);
        for _ in 0..1000 {
            let d = latency.sample(&mut rng);
            assert!(d >= Duration::from_millis(1) && d <= Duration::from_millis(5));
        }
    }
}
