//! The human summary printed at the end, and the progress line.

use std::fmt::Write;

use super::RunReport;
use crate::rpc::OutcomeKind;
use crate::stats::{MethodSummary, SecondRow, LATE_THRESHOLD};

pub fn render_table(report: &RunReport) -> String {
    let (meta, summary) = (&report.meta, &report.summary);
    let mut out = String::new();
    let staged = if meta.load.stages > 0 {
        format!(" in {} stages", meta.load.stages)
    } else {
        String::new()
    };
    let load = match meta.load.rate {
        Some(rate) => format!("open model, {rate} requests/s{staged}"),
        None => format!("closed model{staged}"),
    };
    let _ = writeln!(
        out,
        "\n{} · {} ({}) · {}, {} connections · {:.2} s measured{}",
        meta.scenario,
        meta.target,
        meta.transport,
        load,
        meta.load.connections,
        summary.measured_seconds,
        if summary.partial {
            " · PARTIAL (stopped early)"
        } else {
            ""
        }
    );
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

    let total = &summary.total;
    if total.errors > 0 || summary.extra_batch_entries > 0 {
        let _ = writeln!(out, "\nerrors by outcome:");
        for kind in OutcomeKind::ALL.iter().skip(1) {
            let count = total.outcome(*kind);
            if count == 0 {
                continue;
            }
            let detail: Vec<String> = match kind {
                OutcomeKind::RpcError => total
                    .rpc_error_codes
                    .iter()
                    .map(|(c, n)| format!("{c}: {n}"))
                    .collect(),
                OutcomeKind::HttpStatus => total
                    .http_statuses
                    .iter()
                    .map(|(s, n)| format!("{s}: {n}"))
                    .collect(),
                OutcomeKind::Protocol => total
                    .protocol_errors
                    .iter()
                    .map(|(k, n)| format!("{k}: {n}"))
                    .collect(),
                _ => Vec::new(),
            };
            let detail = if detail.is_empty() {
                String::new()
            } else {
                format!("  ({})", detail.join(", "))
            };
            let _ = writeln!(out, "  {:<13} {:>10}{}", kind.name(), count, detail);
        }
        if summary.extra_batch_entries > 0 {
            let _ = writeln!(
                out,
                "  batch answer entries matching no call: {}",
                summary.extra_batch_entries
            );
        }
    }
    let statuses: Vec<String> = summary
        .http_statuses
        .iter()
        .map(|(s, n)| format!("{s}: {n}"))
        .collect();
    // Only HTTP has statuses.
    if !summary.http_statuses.is_empty() {
        let _ = writeln!(
            out,
            "\nrequests sent: {} · HTTP statuses: {}",
            summary.requests,
            statuses.join(", ")
        );
    } else {
        let _ = writeln!(out, "\nrequests sent: {}", summary.requests);
    }
    if let Some(schedule) = &summary.schedule {
        let d = &schedule.start_delay;
        let _ = writeln!(
            out,
            "start delay (actual send − intended send): p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms · {} calls late by more than {} ms · {} unsent",
            d.p50_ms,
            d.p99_ms,
            d.max_ms,
            schedule.late_calls,
            LATE_THRESHOLD.as_millis(),
            schedule.unsent
        );
    }
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
        let _ = writeln!(
            out,
            "setup: {} connections set up, {} failed{}",
            setup.connections_ok,
            setup.connections_failed,
            setup
                .first_error
                .as_ref()
                .map(|e| format!(" (first: {e})"))
                .unwrap_or_default()
        );
    }
    if !summary.stages.is_empty() {
        let _ = writeln!(
            out,
            "
stage     from      to      calls    calls/s    p50 ms    p99 ms  errors"
        );
        for stage in &summary.stages {
            let t = &stage.total;
            let _ = writeln!(
                out,
                "{:>5} {:>7.1}s {:>6.1}s {:>10} {:>10.1} {:>9.3} {:>9.3} {:>7}",
                stage.stage + 1,
                stage.start_s,
                stage.end_s,
                t.calls,
                t.rps,
                t.latency.p50_ms,
                t.latency.p99_ms,
                t.errors
            );
        }
    }
    for method in &summary.methods {
        for example in &method.assertion_examples {
            let _ = writeln!(out, "assertion failed in {}: {example}", method.method);
        }
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
        let _ = writeln!(
            out,
            "subscriptions: {} opened, {} notifications ({:.1}/s, {:.2}/s each); gap between notifications p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            subs.opened,
            subs.notifications,
            subs.per_second,
            subs.per_subscription_per_second,
            subs.gap.p50_ms,
            subs.gap.p99_ms,
            subs.gap.max_ms
        );
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
            "calls in flight when the run stopped (not counted): {}",
            summary.in_flight_at_end
        );
    }
    for warning in &meta.warnings {
        let _ = writeln!(out, "warning: {warning}");
    }
    out
}

fn method_line(m: &MethodSummary, width: usize) -> String {
    format!(
        "{:<width$} {:>10} {:>10} {:>8} {:>10.1} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3}",
        m.method,
        m.calls,
        m.ok,
        m.errors,
        m.rps,
        m.latency.p50_ms,
        m.latency.p90_ms,
        m.latency.p99_ms,
        m.latency.p999_ms,
        m.latency.max_ms
    )
}

/// One line per second while the run goes.
pub fn progress_line(row: &SecondRow) -> String {
    format!(
        "[{:>4}s] {:>8} calls {:>10.1}/s  ok {:>8}  errors {:>6}  p50 {:>8.3} ms  p99 {:>8.3} ms  max {:>8.3} ms",
        row.second + 1,
        row.calls,
        row.rps,
        row.ok,
        row.errors,
        row.p50_ms,
        row.p99_ms,
        row.max_ms
    )
}
