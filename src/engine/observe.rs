//! Watching what the server spends: each watched process (`--observe-pid`,
//! and a stdio target's children) read from `/proc` once a second and at
//! the end: CPU time (user and system) and resident memory. Off the hot
//! path: one task on the control runtime, a few file reads a second.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use tokio_util::sync::CancellationToken;

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

/// Whether a process can be read: checked before a run that watches it.
pub fn readable(pid: u32) -> bool {
    read(pid).is_some()
}

/// A process's CPU seconds so far and resident bytes, from `/proc`; `None`
/// when it is gone (or this is not Linux).
fn read(pid: u32) -> Option<(f64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).ok()?;
    parse(&stat, &statm, clock_ticks(), page_size())
}

/// `utime` and `stime` (fields 14 and 15) after the command name, which is
/// in parentheses and may hold anything, spaces and `)` included; resident
/// pages are `statm`'s second field.
fn parse(stat: &str, statm: &str, ticks_per_second: f64, page: u64) -> Option<(f64, u64)> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    // A process that has exited (a zombie, or dead) holds nothing any more.
    if matches!(after_name.split_whitespace().next(), Some("Z" | "X" | "x")) {
        return None;
    }
    let mut fields = after_name.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // Nothing resident: a process on its way out, no reading of a server.
    if pages == 0 {
        return None;
    }
    Some((
        utime.saturating_add(stime) as f64 / ticks_per_second,
        pages.saturating_mul(page),
    ))
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf only reads a configuration value.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as f64
    } else {
        100.0
    }
}

fn page_size() -> u64 {
    // SAFETY: as above.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(page).unwrap_or(4096)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_is_read_past_a_name_with_spaces_and_parentheses() {
        let stat =
            "4242 (a (weird) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0 123 4096 300";
        let (cpu, rss) = parse(stat, "1000 300 200 1 0 400 0", 100.0, 4096).unwrap();
        assert_eq!(cpu, 3.0, "250 + 50 ticks at 100 a second");
        assert_eq!(rss, 300 * 4096);
        assert_eq!(parse("4242 (x) S 1", "1 2", 100.0, 4096), None, "cut short");
        let zombie = stat.replace(") S ", ") Z ");
        assert_eq!(parse(&zombie, "1000 300", 100.0, 4096), None, "an exited process");
    }

    #[test]
    fn this_process_can_be_read() {
        let (cpu, rss) = read(std::process::id()).expect("Linux's /proc");
        assert!(cpu >= 0.0 && rss > 0);
        assert!(readable(std::process::id()));
        assert!(!readable(u32::MAX));
    }
}
