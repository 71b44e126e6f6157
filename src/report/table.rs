//! The human summary printed at the end, and the progress line.

use std::fmt::Write;

use super::RunReport;
use crate::stats::OutcomeKind;
use crate::stats::{count, noun_for, MethodSummary, RunSummary, SecondRow, LATE_THRESHOLD};

pub fn render_table(report: &RunReport) -> String {
    let (meta, summary) = (&report.meta, &report.summary);
    let mut out = String::new();
    headline(&mut out, report);
    if let Some(tls) = &meta.tls {
        let _ = writeln!(out, "tls: {tls}");
    }
    let width = summary
        .methods
        .iter()
        .map(|m| m.method.len())
        .max()
        .unwrap_or(5)
        .max(6);
    let _ = writeln!(
        out,
        "\n{:<width$} {:>10} {:>10} {:>8} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "method", "calls", "ok", "errors", "calls/s", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "max ms"
    );
    for method in summary.methods.iter().chain(std::iter::once(&summary.total)) {
        let _ = writeln!(out, "{}", method_line(method, width));
    }
    errors(&mut out, summary);
    examples(&mut out, &summary.total);
    requests(&mut out, summary);
    stages(&mut out, summary);
    extras(&mut out, summary);
    for warning in &summary.warnings {
        let _ = writeln!(out, "warning: {warning}");
    }
    let _ = writeln!(out, "verdict: {}", verdict_line(summary));
    if !report.thresholds.is_empty() {
        let failed = report.thresholds.iter().filter(|t| !t.passed).count();
        let _ = match failed {
            0 if report.thresholds.len() == 1 => writeln!(out, "thresholds: passed"),
            0 => writeln!(out, "thresholds: all {} passed", report.thresholds.len()),
            n => writeln!(out, "thresholds: {n} of {} FAILED", report.thresholds.len()),
        };
        for threshold in &report.thresholds {
            let _ = writeln!(out, "  {threshold}");
        }
    }
    // Last, where a reader looks: a valid measurement of nothing but failures.
    if let Some(none) = crate::stats::none_succeeded(summary) {
        let _ = writeln!(out, "FAILED: {none}");
    }
    out
}

/// The verdict as every view says it: whether the figures hold, then what
/// the server did (a valid run of failures is no healthy server).
pub fn verdict_line(summary: &RunSummary) -> String {
    let did = crate::stats::server_did(&summary.total).map_or(String::new(), |did| format!(" · {did}"));
    // Requests never sent are in no call's figure: a valid run (an outage,
    // a server that held every connection) says so beside what the calls
    // sent met; an invalid one gives them among its reasons.
    let unsent = summary.schedule.as_ref().map_or(0, |s| s.unsent);
    match summary.verdict.valid {
        true if unsent > 0 => format!(
            "valid (engine threads busy {:.0}% of the run){did} · {} due never sent",
            summary.client_cpu.busy_share * 100.0,
            count(unsent, "request")
        ),
        true => format!(
            "valid (engine threads busy {:.0}% of the run){did}",
            summary.client_cpu.busy_share * 100.0
        ),
        false => format!("invalid: {}{did}", summary.verdict.reasons.join("; ")),
    }
}

/// Requests a second, or `-` where no time was measured.
fn measured_rate(requests: u64, seconds: f64) -> String {
    match seconds > 0.0 {
        true => format!("{:.1}", requests as f64 / seconds),
        false => "-".to_string(),
    }
}

/// What was run against what, and whether it ran to its end.
fn headline(out: &mut String, report: &RunReport) {
    let (meta, summary) = (&report.meta, &report.summary);
    let load = &meta.load;
    let staged = if load.stages > 0 {
        format!(" in {}", count(load.stages as u64, "stage"))
    } else {
        String::new()
    };
    // A staged load has no one rate: its stages say what ran.
    let rate = match (load.rate.filter(|_| load.stages == 0), summary.steered_to) {
        // The target in force at the end, where it began, and what the
        // whole run measured: the end's target alone overstates it.
        (Some(rate), Some(to)) if load.model == "open" => format!(
            ", {} {}/s at the end (steered from {}; {}/s over the run)",
            short_number(to),
            noun_for(to == 1.0, "request"),
            short_number(rate),
            measured_rate(summary.requests, summary.measured_seconds)
        ),
        (Some(rate), _) => format!(", {} {}/s", short_number(rate), noun_for(rate == 1.0, "request")),
        (None, Some(to)) if load.model == "closed" => {
            format!(", steered to {} in flight", count(to as u64, "call"))
        }
        (None, _) if load.recorded_pace => ", at the recorded pace".to_string(),
        (None, _) => String::new(),
    };
    let paused = match summary.paused_seconds > 0.0 {
        true => format!(" ({:.2} s paused, left out)", summary.paused_seconds),
        false => String::new(),
    };
    let shard = load
        .shard
        .as_ref()
        .map_or(String::new(), |s| format!(" · shard {s}"));
    let _ = writeln!(
        out,
        "\n{} · {} over {} · {} model{rate}{staged}, {} · {} measured{paused}{shard}{}",
        meta.scenario,
        meta.target,
        meta.transport_shown(),
        load.model,
        count(load.connections as u64, "connection"),
        super::measured_time(summary.measured_seconds),
        if summary.partial {
            " · PARTIAL (stopped early)"
        } else {
            ""
        }
    );
}

/// A rate as people write it: 2000, 666.67 (a shard's share), not 666.6666666666666.
fn short_number(value: f64) -> String {
    let text = format!("{value:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Errors by outcome, with their codes, statuses and protocol kinds.
fn errors(out: &mut String, summary: &RunSummary) {
    let total = &summary.total;
    if total.errors == 0 && summary.extra_batch_entries == 0 {
        return;
    }
    let _ = writeln!(out, "\nerrors by outcome:");
    for kind in OutcomeKind::ALL.iter().skip(1) {
        let n = total.outcome(*kind);
        if n == 0 {
            continue;
        }
        let detail: Vec<String> = match kind {
            OutcomeKind::RpcError => pairs(&total.rpc_error_codes),
            OutcomeKind::HttpStatus => pairs(&total.http_statuses),
            OutcomeKind::Protocol => pairs(&total.protocol_errors),
            _ => Vec::new(),
        };
        let detail = if detail.is_empty() {
            String::new()
        } else {
            format!("  ({})", detail.join(", "))
        };
        let _ = writeln!(out, "  {:<13} {:>10}{}", kind.name(), n, detail);
    }
    if summary.extra_batch_entries > 0 {
        let _ = writeln!(
            out,
            "  batch answer entries matching no call: {}",
            summary.extra_batch_entries
        );
    }
}

fn pairs<K: std::fmt::Display>(map: &std::collections::BTreeMap<K, u64>) -> Vec<String> {
    map.iter().map(|(k, n)| format!("{k}: {n}")).collect()
}

/// The first example of each error outcome, on one line each: enough to
/// tell an HTML error page from a refused connection without opening a file.
fn examples(out: &mut String, total: &MethodSummary) {
    if total.error_examples.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\nexamples (the first of each outcome; more in summary.json):"
    );
    for kind in OutcomeKind::ALL.iter().skip(1) {
        let Some(first) = total.error_examples.get(kind.name()).and_then(|e| e.first()) else {
            continue;
        };
        let answer = if matches!(
            kind,
            OutcomeKind::Timeout | OutcomeKind::Connect | OutcomeKind::Io
        ) {
            "no answer".to_string()
        } else if first.answer.is_empty() {
            "answer: (empty)".to_string()
        } else {
            let cut = if first.answer_bytes > first.answer.len() {
                " …"
            } else {
                ""
            };
            format!("answer: {}{cut}", one_line(&first.answer))
        };
        let _ = writeln!(
            out,
            "  {:<13} {}: {} · {answer}",
            kind.name(),
            first.method,
            one_line(&first.reason)
        );
    }
}

/// Text from the server on one line of the terminal: its line breaks and
/// other control characters (an escape sequence, say) become spaces.
fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// Requests sent, HTTP statuses, and how the schedule was kept.
/// How the connections opened: before the schedule, then during the run.
fn connections_line(c: &crate::stats::ConnectSummary) -> String {
    let time = format!(
        "(connect time p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms)",
        c.time.p50_ms, c.time.p99_ms, c.time.max_ms
    );
    let mut line = match c.planned {
        // Flows with sessions of their own: nothing opens before the run.
        0 => format!(
            "connections: none before the schedule began · {} opened during the run {time}",
            c.opened_in_all
        ),
        planned => format!(
            "connections: {} of {planned} opened before the schedule began {time}",
            c.opened
        ),
    };
    if c.reopened > 0 && c.planned > 0 {
        let _ = write!(
            line,
            " · {} reopened during the run, {} opened in all",
            c.reopened, c.opened_in_all
        );
    }
    if c.recycled > 0 {
        let _ = write!(
            line,
            " · {} closed on purpose (reconnect_every or a flow's own session)",
            c.recycled
        );
    }
    if c.backoff_waits > 0 {
        let _ = write!(
            line,
            " · {} before opening again ({:.3} s in all; volley's backoff)",
            crate::stats::count(c.backoff_waits, "wait"),
            c.backoff_s
        );
    }
    if c.failed > 0 {
        let _ = write!(
            line,
            " · {} failed to open: {}",
            c.failed,
            c.error.as_deref().unwrap_or("no reason given")
        );
    }
    line
}

fn requests(out: &mut String, summary: &RunSummary) {
    // Only HTTP has statuses.
    if !summary.http_statuses.is_empty() {
        let _ = writeln!(
            out,
            "\nrequests: {} · HTTP statuses: {}",
            summary.requests,
            pairs(&summary.http_statuses).join(", ")
        );
    } else {
        let _ = writeln!(out, "\nrequests: {}", summary.requests);
    }
    if let Some(schedule) = &summary.schedule {
        let d = &schedule.start_delay;
        let _ = writeln!(
            out,
            "start delay (actual send − intended send): p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms · {} late by more than {} ms · {} unsent",
            d.p50_ms,
            d.p99_ms,
            d.max_ms,
            count(schedule.late_requests, "request"),
            LATE_THRESHOLD.as_millis(),
            schedule.unsent
        );
    }
    let _ = writeln!(out, "{}", connections_line(&summary.connections));
    if let Some(batches) = &summary.batches {
        let sizes: Vec<String> = batches
            .sizes
            .iter()
            .take(12)
            .map(|(size, n)| format!("{size}: {n}"))
            .collect();
        let more = if batches.sizes.len() > 12 { ", …" } else { "" };
        let _ = writeln!(
            out,
            "batches: {} sent, {:.1} calls each on average (sizes {}{more}) · round trip p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
            batches.requests,
            batches.size_mean,
            sizes.join(", "),
            batches.round_trip.p50_ms,
            batches.round_trip.p99_ms,
            batches.round_trip.max_ms
        );
    }
    if let Some(setup) = &summary.setup {
        let times = setup.calls.as_ref().map(|c| {
            format!(
                " · {} answered in p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms (not in the load's latency)",
                count(c.answered, "setup call"),
                c.time.p50_ms,
                c.time.p99_ms,
                c.time.max_ms
            )
        });
        let _ = writeln!(
            out,
            "setup: {} set up, {} failed{}{}",
            count(setup.connections_ok, "connection"),
            setup.connections_failed,
            setup
                .first_error
                .as_ref()
                .map(|e| format!(" (first: {e})"))
                .unwrap_or_default(),
            times.unwrap_or_default()
        );
    }
}

/// A line per stage, numbered from 1 as in `summary.json`.
fn stages(out: &mut String, summary: &RunSummary) {
    if summary.stages.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\nstage     from      to      calls    calls/s    p50 ms    p99 ms  errors"
    );
    for stage in &summary.stages {
        let t = &stage.total;
        let _ = writeln!(
            out,
            "{:>5} {:>7.1}s {:>6.1}s {:>10} {:>10.1} {:>9} {:>9} {:>7}",
            stage.number(),
            stage.start_s,
            stage.end_s,
            t.calls,
            t.rps,
            latency_cell(t.latency.timed, t.latency.p50_ms),
            latency_cell(t.latency.timed, t.latency.p99_ms),
            t.errors
        );
    }
}

/// What each watched server process spent: `server pid 42: 0.51 CPU s
/// per 1,000 calls (3.1 s in all), resident 45.2 MB at peak, 44.0 MB at the end`.
pub fn server_usage_line(usage: &crate::stats::ServerUsage) -> String {
    let mb = |bytes: u64| bytes as f64 / 1e6;
    format!(
        "server {}: {:.3} CPU s per 1,000 calls ({:.2} s in all), resident {:.1} MB at peak, {:.1} MB at the {}",
        usage.label,
        usage.cpu_seconds_per_1000_calls,
        usage.cpu_seconds,
        mb(usage.peak_rss_bytes),
        mb(usage.final_rss_bytes),
        if usage.exited {
            "last reading: it ended during the run"
        } else {
            "end"
        }
    )
}

/// Server processes shown a line each; more (a stdio child a connection,
/// or one every `reconnect_every` requests) are summed up in one.
const SERVER_LINES: usize = 4;

/// Many watched processes in one line: their medians.
fn servers_line(all: &[crate::stats::ServerUsage]) -> String {
    let median = |mut values: Vec<f64>| {
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    let cpu = median(all.iter().map(|u| u.cpu_seconds_per_1000_calls).collect());
    let peak = median(all.iter().map(|u| u.peak_rss_bytes as f64).collect());
    format!(
        "server: {} processes watched (each in summary.json's `server`): CPU s per 1,000 calls p50 {cpu:.3}, resident at peak p50 {:.1} MB",
        all.len(),
        peak / 1e6
    )
}

/// The subscriptions opened and what they brought: the gaps between
/// notifications only where some subscription had two.
fn subscriptions_line(subs: &crate::stats::SubscriptionSummary) -> String {
    let opened = format!("subscriptions: {} opened", subs.opened);
    if subs.notifications == 0 {
        return format!("{opened}, no notifications (no gap figures)");
    }
    let received = format!(
        "{opened}, {} ({:.1}/s, {:.2}/s each)",
        count(subs.notifications, "notification"),
        subs.per_second,
        subs.per_subscription_per_second
    );
    match &subs.gap {
        Some(gap) => format!(
            "{received}; gap between notifications p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            gap.p50_ms, gap.p99_ms, gap.max_ms
        ),
        None => format!("{received}; no gap figures (no subscription had two notifications)"),
    }
}

/// Children, unsolicited messages, subscriptions and calls left in flight.
fn extras(out: &mut String, summary: &RunSummary) {
    match summary.server.len() {
        0..=SERVER_LINES => {
            for usage in &summary.server {
                let _ = writeln!(out, "{}", server_usage_line(usage));
            }
        }
        _ => {
            let _ = writeln!(out, "{}", servers_line(&summary.server));
        }
    }
    if summary.servers_read_once > 0 {
        let _ = writeln!(
            out,
            "server: {} read only once in the run (under a second alive): no CPU figures for {}",
            count(summary.servers_read_once, "process"),
            if summary.servers_read_once == 1 {
                "it"
            } else {
                "them"
            }
        );
    }
    if let Some(ready) = &summary.ready {
        let _ = writeln!(out, "{}", super::ready::ready_line(ready));
    }
    if let Some(exit) = &summary.child_exit {
        let _ = writeln!(
            out,
            "child processes that ended during the run: {} (first: {exit})",
            summary.children_exited
        );
    }
    if summary.unsolicited_messages > 0 {
        let _ = writeln!(
            out,
            "messages that answered no call: {} (the server's notifications, log messages, late or stray answers)",
            summary.unsolicited_messages
        );
    }
    if let Some(subs) = &summary.subscriptions {
        let _ = writeln!(out, "{}", subscriptions_line(subs));
    }
    if let Some(ends) = &summary.child_shutdown {
        let _ = writeln!(
            out,
            "child processes at the end: {} shut down cleanly, {} exited failing, {} killed",
            ends.clean, ends.failed, ends.killed
        );
    }
    if summary.in_flight_at_end > 0 {
        let _ = writeln!(
            out,
            "calls cut unanswered by the stop (not counted; a stop skips the grace): {}",
            summary.in_flight_at_end
        );
    }
    let going: Vec<String> = (summary.flows.iter())
        .filter(|f| f.in_flight_at_end > 0)
        .map(|f| format!("{} {}", f.flow, f.in_flight_at_end))
        .collect();
    if !going.is_empty() {
        let _ = writeln!(
            out,
            "flows still going when the run ended (sending no step after it; not in their rows): {}",
            going.join(", ")
        );
    }
}

fn method_line(m: &MethodSummary, width: usize) -> String {
    let ms = |value: f64| latency_cell(m.latency.timed, value);
    format!(
        "{:<width$} {:>10} {:>10} {:>8} {:>10.1} {:>9} {:>9} {:>9} {:>9} {:>9}",
        m.method,
        m.calls,
        m.ok,
        m.errors,
        m.rps,
        ms(m.latency.p50_ms),
        ms(m.latency.p90_ms),
        ms(m.latency.p99_ms),
        ms(m.latency.p999_ms),
        ms(m.latency.max_ms)
    )
}

/// A latency in ms, or `-` for a row without `timed` calls (none made,
/// or only notifications and connect failures): it has no latency, and
/// `0.000` would read as an instant answer.
pub fn latency_cell(timed: u64, ms: f64) -> String {
    match timed {
        0 => "-".to_string(),
        _ => format!("{ms:.3}"),
    }
}

/// One line per second while the run goes.
pub fn progress_line(row: &SecondRow) -> String {
    format!(
        // The noun padded to its plural's width keeps the columns in line.
        "[{:>4}s] {:>8} {:<5} {:>10.1}/s  ok {:>8}  errors {:>6}  p50 {:>8} ms  p99 {:>8} ms  max {:>8} ms",
        row.second + 1,
        row.calls,
        noun_for(row.calls == 1, "call"),
        row.rps,
        row.ok,
        row.errors,
        latency_cell(row.calls, row.p50_ms),
        latency_cell(row.calls, row.p99_ms),
        latency_cell(row.calls, row.max_ms)
    )
}

#[cfg(test)]
mod tests;
