//! A process as Linux's `/proc` tells it: its CPU seconds so far and its
//! resident memory. Read by the watch of what a server spends
//! (`engine/observe.rs`) and by a stdio child's life (its memory once
//! ready and at its end).

/// Whether a process can be read: checked before a run that watches it.
pub fn readable(pid: u32) -> bool {
    read(pid).is_some()
}

/// A process's CPU seconds so far and resident bytes, from `/proc`; `None`
/// when it is gone (or this is not Linux).
pub fn read(pid: u32) -> Option<(f64, u64)> {
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
