//! What `volley compare` compares and how far each figure may move the
//! wrong way: a share of the baseline plus an absolute floor, so that a
//! sub-millisecond figure's jitter is not a regression.

use std::collections::BTreeMap;

use crate::thresholds::{Metric, Stat};

/// The figures compared, and whether more is worse.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ComparedFigure {
    P50,
    P99,
    Rps,
    ErrorRate,
}

impl ComparedFigure {
    pub const ALL: [ComparedFigure; 4] = [
        ComparedFigure::P50,
        ComparedFigure::P99,
        ComparedFigure::Rps,
        ComparedFigure::ErrorRate,
    ];

    /// The threshold figure this is, whose name it goes by.
    pub fn metric(self) -> Metric {
        match self {
            ComparedFigure::P50 => Metric::Latency(Stat::P50),
            ComparedFigure::P99 => Metric::Latency(Stat::P99),
            ComparedFigure::Rps => Metric::Rate,
            ComparedFigure::ErrorRate => Metric::ErrorRate,
        }
    }

    pub fn name(self) -> &'static str {
        self.metric().name()
    }

    /// p50 or p99: a latency, which notifications have none of.
    pub fn is_latency(self) -> bool {
        matches!(self, ComparedFigure::P50 | ComparedFigure::P99)
    }

    /// Read by thresholds' reading of figures' names, so `--max-regression`
    /// and `--threshold` take the same spellings (`calls_per_s` for `rps`).
    fn parse(name: &str) -> Option<ComparedFigure> {
        let metric = Metric::named(name)?;
        ComparedFigure::ALL.into_iter().find(|f| f.metric() == metric)
    }

    pub fn higher_is_worse(self) -> bool {
        self != ComparedFigure::Rps
    }
}

/// How far a figure may move the wrong way: `relative` of the baseline
/// plus `absolute` in the figure's own unit (ms, calls/s; for the error
/// rate, a fraction: percentage points / 100).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerance {
    pub relative: f64,
    pub absolute: f64,
}

impl Tolerance {
    /// The change allowed from `baseline`, in the figure's unit.
    pub fn allowed(&self, baseline: f64) -> f64 {
        self.relative * baseline.abs() + self.absolute
    }
}

/// Each compared figure's tolerance.
#[derive(Clone, Debug, PartialEq)]
pub struct Tolerances(pub BTreeMap<ComparedFigure, Tolerance>);

/// The limits when none are given. A fixed-rate run of one unchanged
/// server differs from the next by tenths of a millisecond at the median
/// and by more in the tail (a Python server on a busy 2-core machine: p50
/// 0.86 against 1.18 ms), so the latencies have room, and a floor for
/// sub-millisecond servers; the rate of an open-model run is fixed by its
/// scenario and has little. Several baselines tighten this: a change must
/// also pass what they differ by among themselves.
pub const DEFAULT_LIMITS: &str = "p50=50%+1ms,p99=100%+5ms,rps=30%,error_rate=0.1pp";

impl Default for Tolerances {
    fn default() -> Self {
        DEFAULT_LIMITS.parse().expect("the default limits parse")
    }
}

impl std::str::FromStr for Tolerances {
    type Err = String;

    /// `p99=10%+1ms,rps=5%,error_rate=0.1pp`: the metrics named replace
    /// the defaults' limits; the others keep theirs.
    fn from_str(text: &str) -> Result<Self, String> {
        let mut tolerances = match text == DEFAULT_LIMITS {
            true => Tolerances(BTreeMap::new()),
            false => Tolerances::default(),
        };
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, value) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}`: expected METRIC=LIMIT, e.g. p99=10%"))?;
            let metric = ComparedFigure::parse(name.trim()).ok_or_else(|| {
                let known: Vec<&str> = ComparedFigure::ALL.iter().map(|f| f.name()).collect();
                format!("`{name}`: unknown metric ({})", known.join(", "))
            })?;
            let limit = parse_limit(metric, value.trim()).map_err(|why| format!("`{part}`: {why}"))?;
            tolerances.0.insert(metric, limit);
        }
        Ok(tolerances)
    }
}

fn parse_limit(metric: ComparedFigure, value: &str) -> Result<Tolerance, String> {
    let (share, floor) = match value.split_once('+') {
        Some((share, floor)) => (share.trim(), Some(floor.trim())),
        None => (value, None),
    };
    let relative = match metric {
        ComparedFigure::ErrorRate => {
            let points = share
                .strip_suffix("pp")
                .ok_or("the error rate moves in percentage points: give e.g. error_rate=0.1pp")?;
            return match floor {
                None => Ok(Tolerance {
                    relative: 0.0,
                    absolute: number(points)? / 100.0,
                }),
                Some(_) => Err("the error rate takes points alone (error_rate=0.1pp), no `+`".into()),
            };
        }
        _ => {
            number(share.strip_suffix('%').ok_or_else(|| {
                format!(
                    "give a percentage ({}=10%), and for a floor beside it {}",
                    metric.name(),
                    match metric {
                        ComparedFigure::Rps => "calls a second (rps=5%+10/s)",
                        _ => "a time (p50=10%+0.2ms)",
                    }
                )
            })?)?
                / 100.0
        }
    };
    let absolute = match (metric, floor) {
        (_, None) => 0.0,
        (ComparedFigure::Rps, Some(floor)) => number(
            floor
                .strip_suffix("/s")
                .ok_or("a floor for rps is calls a second, as in rps=5%+10/s")?,
        )?,
        (_, Some(floor)) => milliseconds(floor)?,
    };
    Ok(Tolerance { relative, absolute })
}

fn number(text: &str) -> Result<f64, String> {
    text.trim()
        .parse()
        .ok()
        .filter(|n: &f64| n.is_finite() && *n >= 0.0)
        .ok_or_else(|| format!("`{text}` is not a number at or above 0"))
}

fn milliseconds(text: &str) -> Result<f64, String> {
    let units = [("ms", 1.0), ("us", 1e-3), ("µs", 1e-3), ("s", 1e3)];
    let (value, scale) = units
        .iter()
        .find_map(|(unit, scale)| text.strip_suffix(unit).map(|v| (v, *scale)))
        .ok_or_else(|| format!("a latency floor needs a unit: `{text}` (us, ms or s, as in 0.2ms)"))?;
    Ok(number(value)? * scale)
}

/// A limit as it is written: `25%+0.5ms`, `5%`, `0.10pp`.
pub fn shown(metric: ComparedFigure, limit: &Tolerance) -> String {
    let share = format!("{}%", trim(limit.relative * 100.0));
    match metric {
        ComparedFigure::ErrorRate => format!("{:.2}pp", limit.absolute * 100.0),
        _ if limit.absolute == 0.0 => share,
        ComparedFigure::Rps => format!("{share}+{}/s", trim(limit.absolute)),
        _ => format!("{share}+{}ms", trim(limit.absolute)),
    }
}

/// A number without trailing zeros: 25, 0.5, 0.25.
fn trim(value: f64) -> String {
    let text = format!("{value:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_parse_with_a_floor_and_refuse_by_name() {
        let t: Tolerances = "p99=20%+1ms, p50=10%+200us, error_rate=0.5pp, rps=5%+10/s"
            .parse()
            .unwrap();
        assert_eq!(
            t.0[&ComparedFigure::P99],
            Tolerance {
                relative: 0.2,
                absolute: 1.0
            }
        );
        assert_eq!(
            t.0[&ComparedFigure::P50],
            Tolerance {
                relative: 0.1,
                absolute: 0.2
            }
        );
        assert_eq!(
            t.0[&ComparedFigure::Rps],
            Tolerance {
                relative: 0.05,
                absolute: 10.0
            }
        );
        assert!((t.0[&ComparedFigure::ErrorRate].absolute - 0.005).abs() < 1e-12);
        let only: Tolerances = "p99=10%".parse().unwrap();
        assert_eq!(
            only.0[&ComparedFigure::P50],
            Tolerances::default().0[&ComparedFigure::P50],
            "the others keep theirs"
        );
        let alias: Tolerances = "calls_per_s=5%".parse().unwrap();
        assert_eq!(alias.0[&ComparedFigure::Rps].relative, 0.05);
        for uncompared in ["p90", "p99.9", "mean", "calls", "timeout", "rpc_error"] {
            let error = format!("{uncompared}=10%").parse::<Tolerances>().unwrap_err();
            let expected = format!("`{uncompared}`: unknown metric (p50, p99, rps, error_rate)");
            assert_eq!(error, expected);
        }
        for bad in [
            "p98=10%",
            "p99=10",
            "error_rate=1%",
            "rps=x%",
            "p99",
            "p50=10%+2",
            "rps=5%+2ms",
            "error_rate=1pp+1ms",
        ] {
            assert!(bad.parse::<Tolerances>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_limit_allows_its_share_and_its_floor() {
        let limit = Tolerance {
            relative: 0.25,
            absolute: 0.5,
        };
        assert_eq!(limit.allowed(2.0), 1.0);
        assert_eq!(shown(ComparedFigure::P50, &limit), "25%+0.5ms");
        assert_eq!(
            shown(
                ComparedFigure::Rps,
                &Tolerance {
                    relative: 0.05,
                    absolute: 0.0
                }
            ),
            "5%"
        );
        assert_eq!(
            shown(
                ComparedFigure::ErrorRate,
                &Tolerance {
                    relative: 0.0,
                    absolute: 0.001
                }
            ),
            "0.10pp"
        );
        assert_eq!(Tolerances::default().0.len(), 4);
    }
}
