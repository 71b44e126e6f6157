//! What a server process spent while it was under load: CPU time and
//! resident memory, sampled once a second (from `/proc`), turned into CPU
//! seconds per 1,000 calls and the peak and final resident size.

use serde::{Deserialize, Serialize};

/// One reading of a process.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UsageSample {
    /// Seconds since the measured part began (negative in the warmup).
    pub at: f64,
    /// CPU time the process has used since it started, user and system.
    pub cpu_seconds: f64,
    pub rss_bytes: u64,
}

/// A watched process's readings over the run.
#[derive(Clone, Debug, Default)]
pub struct Watched {
    pub pid: u32,
    /// What it is: `--observe-pid`, or the stdio child.
    pub label: String,
    pub samples: Vec<UsageSample>,
    /// It could not be read any more after it had been: it ended.
    pub gone: bool,
}

/// What one server process spent over the measured run.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ServerUsage {
    pub pid: u32,
    pub label: String,
    /// CPU time used between the first reading in the measured run and the
    /// last one.
    pub cpu_seconds: f64,
    /// That, per 1,000 calls: a stdio child's own share of the run's
    /// calls (by the calls sent to each child), any other process's all
    /// the run's calls (its own share is not known).
    pub cpu_seconds_per_1000_calls: f64,
    /// The calls that figure is per (absent from summaries written before
    /// it was kept).
    #[serde(default)]
    pub calls: u64,
    pub peak_rss_bytes: u64,
    pub final_rss_bytes: u64,
    /// Readings taken (once a second, and at the end).
    pub samples: usize,
    /// The process ended during the run: its figures stop there.
    pub exited: bool,
}

impl Watched {
    /// The usage over the measured run (readings at 0 s and after), for
    /// `calls` calls; `None` when the process was read there less than
    /// twice (a stdio child that lived under a second): one reading tells
    /// no CPU time, and 0 would say it spent none.
    pub fn summary(&self, calls: u64) -> Option<ServerUsage> {
        let measured: Vec<&UsageSample> = self.samples.iter().filter(|s| s.at >= 0.0).collect();
        // The last warmup reading, when there is one, is where the
        // measured part's CPU starts from.
        let before = self.samples.iter().rev().find(|s| s.at < 0.0);
        let first = before.or(measured.first().copied())?;
        let last = measured.last()?;
        if std::ptr::eq(first, *last) {
            return None;
        }
        let cpu_seconds = (last.cpu_seconds - first.cpu_seconds).max(0.0);
        Some(ServerUsage {
            pid: self.pid,
            label: self.label.clone(),
            cpu_seconds,
            cpu_seconds_per_1000_calls: if calls == 0 {
                0.0
            } else {
                cpu_seconds * 1000.0 / calls as f64
            },
            calls,
            peak_rss_bytes: measured.iter().map(|s| s.rss_bytes).max().unwrap_or(0),
            final_rss_bytes: last.rss_bytes,
            samples: measured.len(),
            exited: self.gone,
        })
    }

    /// The CPU (in cores: 1.0 is one core busy) and resident size over
    /// measured second `second`, from the readings around it.
    pub fn second(&self, second: u32) -> Option<(f64, u64)> {
        let (from, to) = (f64::from(second), f64::from(second) + 1.0);
        let start = self.samples.iter().rev().find(|s| s.at <= from + 0.5)?;
        let end = self
            .samples
            .iter()
            .find(|s| s.at > start.at && s.at <= to + 0.5)?;
        let cpu = (end.cpu_seconds - start.cpu_seconds).max(0.0) / (end.at - start.at).max(1e-3);
        Some((cpu, end.rss_bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(at: f64, cpu_seconds: f64, rss_mb: u64) -> UsageSample {
        UsageSample {
            at,
            cpu_seconds,
            rss_bytes: rss_mb << 20,
        }
    }

    #[test]
    fn cpu_is_counted_from_the_measured_start_to_the_last_reading() {
        let watched = Watched {
            pid: 7,
            label: "server".into(),
            gone: false,
            samples: vec![
                sample(-1.0, 5.0, 10),
                sample(-0.1, 5.5, 12),
                sample(0.9, 6.0, 30),
                sample(1.9, 7.0, 20),
                sample(2.3, 7.5, 18),
            ],
        };
        let usage = watched.summary(4000).unwrap();
        assert_eq!(usage.cpu_seconds, 2.0, "from the last warmup reading");
        assert_eq!(usage.cpu_seconds_per_1000_calls, 0.5);
        assert_eq!(
            (usage.peak_rss_bytes, usage.final_rss_bytes),
            (30 << 20, 18 << 20),
            "the warmup's left out"
        );
        assert_eq!(usage.samples, 3);
        let (cpu, rss) = watched.second(1).unwrap();
        assert!((cpu - 1.0).abs() < 1e-9, "{cpu}");
        assert_eq!(rss, 20 << 20);
        assert_eq!(Watched::default().summary(1), None);
    }

    #[test]
    fn one_reading_gives_no_figures() {
        let once = |samples| Watched {
            pid: 7,
            label: "stdio child 7".into(),
            gone: true,
            samples,
        };
        assert_eq!(
            once(vec![sample(0.4, 0.3, 8)]).summary(50),
            None,
            "read once, in the run"
        );
        assert!(
            once(vec![sample(-0.2, 0.1, 8), sample(0.4, 0.3, 8)])
                .summary(50)
                .is_some(),
            "read in the warmup and in the run"
        );
        assert_eq!(
            once(vec![sample(-0.2, 0.1, 8)]).summary(50),
            None,
            "read in the warmup only"
        );
    }
}
