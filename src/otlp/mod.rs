//! `--otlp URL`: the run's metrics pushed to an OpenTelemetry collector over
//! OTLP/HTTP, every few seconds and once at the end. Like `/metrics`, it
//! only reads the live feed (the snapshots the runs publish a few times a
//! second), on a task of its own: the engine never waits for it. A
//! collector that is down, slow or refusing is said once, and the run goes
//! on as it would without it.

mod config;
mod encode;
mod post;

pub use config::{Config, Encoding, ENDPOINT, HEADERS};
pub use encode::{request, About, Figures, CALL_DURATION, STATES};

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prost::Message;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::feed::Feed;
use crate::scenario::Scenario;
use post::{Failure, Poster};

/// A push checked and ready to start.
pub struct Prepared(Poster);

/// Pushes the feed's figures until told to finish.
pub struct Exporter {
    shared: Arc<Shared>,
    stop: CancellationToken,
    pushing: JoinHandle<()>,
}

struct Shared {
    poster: Poster,
    feed: Arc<Feed>,
    about: About,
    /// Each target's start (ns since 1970) and the run time its last
    /// snapshot had: the start is fixed when first seen, and again when a
    /// new run of the target begins (an A/B round), since a cumulative
    /// series that starts over must say so by a new start.
    starts: Mutex<BTreeMap<String, (u64, Duration)>>,
    /// The one warning: said at once, or kept for the end while the
    /// dashboard holds the terminal.
    warning: Mutex<Warning>,
    hold_warning: bool,
}

#[derive(Default)]
enum Warning {
    #[default]
    None,
    Held(String),
    Said,
}

impl Exporter {
    /// Checks the push `scenario` and the environment ask for (`None` when
    /// none): a bad variable or CA file is an error now, before anything is
    /// sent.
    pub fn prepare(scenario: &Scenario) -> anyhow::Result<Option<Prepared>> {
        let env = |name: &str| std::env::var(name).ok();
        let Some(config) = Config::resolve(scenario.otlp.as_ref(), &env).map_err(anyhow::Error::msg)? else {
            return Ok(None);
        };
        let poster = Poster::new(config).map_err(anyhow::Error::msg)?;
        Ok(Some(Prepared(poster)))
    }

    /// Starts pushing every interval, on the current runtime.
    /// `hold_warning`: a dashboard has the terminal, so a warning waits for
    /// the end.
    pub fn start(prepared: Prepared, feed: Arc<Feed>, about: About, hold_warning: bool) -> Exporter {
        let shared = Arc::new(Shared {
            poster: prepared.0,
            feed,
            about,
            starts: Mutex::default(),
            warning: Mutex::default(),
            hold_warning,
        });
        let stop = CancellationToken::new();
        let pushing = tokio::spawn(push_every_interval(shared.clone(), stop.clone()));
        Exporter {
            shared,
            stop,
            pushing,
        }
    }

    /// The runs are over: the pushes every interval stop (one under way is
    /// dropped), the final figures go in one last push, and a warning held
    /// for the end is said.
    pub async fn finish(self) {
        self.stop.cancel();
        let _ = self.pushing.await;
        self.shared.push().await;
        let mut warning = self.shared.warning.lock().unwrap_or_else(|p| p.into_inner());
        if let Warning::Held(text) = std::mem::replace(&mut *warning, Warning::Said) {
            crate::note!("{text}");
        }
    }
}

async fn push_every_interval(shared: Arc<Shared>, stop: CancellationToken) {
    let interval = shared.poster.config().interval;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = stop.cancelled() => return,
        }
        tokio::select! {
            _ = shared.push() => {}
            _ = stop.cancelled() => return,
        }
    }
}

/// A target's start, from `kept` (its start and the run time last seen;
/// zeros when never seen): fixed when first seen, and again when its run
/// time goes back, a new run of it having begun.
fn start_of(kept: &mut (u64, Duration), elapsed: Duration, now: SystemTime) -> u64 {
    let (started, seen) = kept;
    if *started == 0 || elapsed < *seen {
        *started = unix_nanos(now.checked_sub(elapsed).unwrap_or(now));
    }
    *seen = elapsed;
    *started
}

fn unix_nanos(time: SystemTime) -> u64 {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    since.as_nanos().min(u128::from(u64::MAX)) as u64
}

impl Shared {
    /// One push of every target's latest figures; nothing before the
    /// first snapshot.
    async fn push(&self) {
        let body = {
            let snapshots = self.feed.snapshots();
            if snapshots.is_empty() {
                return;
            }
            let now = SystemTime::now();
            let mut starts = self.starts.lock().unwrap_or_else(|p| p.into_inner());
            let targets: Vec<Figures> = (snapshots.iter())
                .map(|(info, snapshot)| Figures {
                    info,
                    snapshot,
                    started_ns: start_of(
                        starts.entry(info.name.clone()).or_default(),
                        snapshot.elapsed,
                        now,
                    ),
                })
                .collect();
            let request = request(&self.about, &targets, unix_nanos(now));
            match self.poster.config().encoding {
                Encoding::Protobuf => request.encode_to_vec(),
                Encoding::Json => serde_json::to_vec(&request).unwrap_or_default(),
            }
        };
        if let Err(failure) = self.poster.post(body).await {
            self.warn(&failure);
        }
    }

    /// Says the first failure, once: the pushes go on (a collector back
    /// up gets the whole run so far, every figure being cumulative).
    fn warn(&self, failure: &Failure) {
        let mut warning = self.warning.lock().unwrap_or_else(|p| p.into_inner());
        if !matches!(*warning, Warning::None) {
            return;
        }
        let config = self.poster.config();
        let text = format!(
            "volley: warning: the OTLP collector at {} {failure}; the run goes on, and the metrics are pushed again every {} without another word (--otlp)",
            config.endpoint,
            humantime::format_duration(config.interval)
        );
        *warning = match self.hold_warning {
            true => Warning::Held(text),
            false => {
                crate::note!("{text}");
                Warning::Said
            }
        };
    }
}

/// The run as every push names it: its scenario, a fresh id, its shard,
/// its JSON-RPC, and the rows a call's `name` renamed.
pub fn about(scenario: &Scenario) -> About {
    let calls = scenario.calls.iter().map(|c| (c.row(), c.method.as_str()));
    let steps = (scenario.flows.iter())
        .flat_map(|f| &f.steps)
        .map(|s| (s.row(), s.method.as_str()));
    let renamed = (calls.chain(steps))
        .filter(|(row, method)| row != method)
        .map(|(row, method)| (row.to_string(), method.to_string()))
        .collect();
    About {
        scenario: scenario.name.clone(),
        run_id: run_id(),
        shard: scenario.shard.map(|s| s.index),
        jsonrpc: scenario.version.to_string(),
        renamed,
    }
}

/// 128 random bits, written as a UUID (version 4) is: what
/// `service.instance.id` asks for.
fn run_id() -> String {
    let bits: u128 = rand::random();
    let bits = (bits & !(0xf << 76) | (0x4 << 76)) & !(0x3 << 62) | (0x2 << 62);
    let hex = format!("{bits:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_s_start_holds_until_a_new_run_of_it_begins() {
        let at = |s: u64| UNIX_EPOCH + Duration::from_secs(s);
        let mut kept = Default::default();
        let first = start_of(&mut kept, Duration::from_secs(2), at(100));
        assert_eq!(first, 98_000_000_000);
        assert_eq!(
            start_of(&mut kept, Duration::from_secs(7), at(105)),
            first,
            "the same run"
        );
        let again = start_of(&mut kept, Duration::from_secs(1), at(200));
        assert_eq!(again, 199_000_000_000, "an A/B round starts over");
    }

    #[test]
    fn a_run_id_is_written_as_a_version_4_uuid() {
        let id = run_id();
        let parts: Vec<usize> = id.split('-').map(str::len).collect();
        assert_eq!(parts, [8, 4, 4, 4, 12], "{id}");
        assert_eq!(&id[14..15], "4", "{id}");
        assert!("89ab".contains(&id[19..20]), "{id}");
        assert_ne!(run_id(), id);
    }
}
