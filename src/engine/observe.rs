//! Watching what the server spends: each watched process (`--observe-pid`,
//! and a stdio target's children) read from `/proc` once a second and at
//! the end: CPU time (user and system) and resident memory. Off the hot
//! path: one task on the control runtime, a few file reads a second.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use tokio_util::sync::CancellationToken;

use crate::proc::read;
use crate::stats::{UsageSample, Watched};
use crate::transport::StreamTarget;

/// The stdio target's children to watch: those started from now on.
pub(super) struct Children {
    target: StreamTarget,
    /// Started before the run (to check the target answers): not the
    /// server under load. Taken when the watch is set up, before any
    /// connection of the run opens; the task itself may first run after
    /// the run's children started (it did, on a loaded machine).
    before: Vec<u32>,
}

impl Children {
    pub(super) fn from_now(target: StreamTarget) -> Self {
        let before = target.children();
        Children { target, before }
    }
}

/// Reads until `stop`, then once more; returns every process's readings.
pub(super) async fn watch(
    mut watched: Vec<Watched>,
    children: Option<Children>,
    measure_start: Instant,
    stop: CancellationToken,
    now: Arc<Mutex<Option<(f64, u64)>>>,
) -> Vec<Watched> {
    // Every tenth of a second new children are looked for (and read soon,
    // so a short run has a reading of each); every second, all.
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    for round in 0u64.. {
        let stopped = tokio::select! {
            _ = tick.tick() => false,
            _ = stop.cancelled() => true,
        };
        let known = watched.len();
        if let Some(Children { target, before }) = &children {
            for pid in target.children() {
                if !before.contains(&pid) && !watched.iter().any(|w| w.pid == pid) {
                    watched.push(Watched {
                        pid,
                        label: format!("stdio child {pid}"),
                        samples: Vec::new(),
                        gone: false,
                    });
                }
            }
        }
        let every = stopped || round.is_multiple_of(10);
        let at = signed_seconds(Instant::now(), measure_start);
        for (index, process) in watched.iter_mut().enumerate() {
            // A child found a tick ago is read once it has started (found
            // this tick, it may not have yet).
            let first_reading = process.samples.is_empty() && index < known;
            if !(every || first_reading) {
                continue;
            }
            if process.gone {
                continue;
            }
            match read(process.pid) {
                Some((cpu_seconds, rss_bytes)) => process.samples.push(UsageSample {
                    at,
                    cpu_seconds,
                    rss_bytes,
                }),
                // Read before, not now: it ended (a stdio child at the
                // run's end is read before it is shut down).
                None => process.gone = !process.samples.is_empty(),
            }
        }
        if every {
            *now.lock().unwrap_or_else(|p| p.into_inner()) = latest(&watched, at);
        }
        if stopped {
            break;
        }
    }
    watched
}

/// Every process read at `at`: their CPU in cores since their reading
/// before, and their resident bytes, together.
fn latest(watched: &[Watched], at: f64) -> Option<(f64, u64)> {
    let mut total: Option<(f64, u64)> = None;
    for process in watched {
        let [.., before, last] = process.samples.as_slice() else {
            continue;
        };
        if last.at != at {
            continue;
        }
        let cores = (last.cpu_seconds - before.cpu_seconds).max(0.0) / (last.at - before.at).max(1e-3);
        let (c, r) = total.get_or_insert((0.0, 0));
        *c += cores;
        *r += last.rss_bytes;
    }
    total
}

fn signed_seconds(now: Instant, origin: Instant) -> f64 {
    match now.checked_duration_since(origin) {
        Some(after) => after.as_secs_f64(),
        None => -(origin - now).as_secs_f64(),
    }
}
