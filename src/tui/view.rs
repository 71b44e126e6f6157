//! Drawing the dashboard. Reads the state, never changes it.

use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::style::{Color, Modifier, Style, Stylize};
use ratatui::symbols;
use ratatui::text::{Line, Span};
use ratatui::widgets::{
    Axis, Bar, BarChart, BarGroup, Block, Borders, Chart, Dataset, Gauge, GraphType, Paragraph, Row, Table,
};
use ratatui::Frame;

use super::state::Dashboard;
use crate::stats::{MethodSummary, OutcomeKind, Snapshot};

pub fn draw(frame: &mut Frame, dash: &Dashboard) {
    let area = frame.area();
    let methods = dash.snapshot.methods.len() as u16;
    let rows = Layout::default()
        .direction(Direction::Vertical)
        .constraints([
            Constraint::Length(5),
            Constraint::Min(10),
            Constraint::Length(methods + 4),
            Constraint::Length(6),
            Constraint::Length(1),
        ])
        .split(area);
    header(frame, rows[0], dash);
    let middle = Layout::default()
        .direction(Direction::Horizontal)
        .constraints([Constraint::Percentage(60), Constraint::Percentage(40)])
        .split(rows[1]);
    charts(frame, middle[0], dash);
    latency(frame, middle[1], dash);
    methods_table(frame, rows[2], dash);
    errors(frame, rows[3], dash);
    frame.render_widget(
        Paragraph::new(" q quit (results are written) · p pause/resume · + / - target · v latency: last second / whole run")
            .style(Style::default().add_modifier(Modifier::DIM)),
        rows[4],
    );
}

fn header(frame: &mut Frame, area: Rect, dash: &Dashboard) {
    let s = &dash.snapshot;
    let model = if s.open { "open model" } else { "closed model" };
    let unit = if s.open { "requests/s" } else { "in flight" };
    let block = Block::default().borders(Borders::ALL).title(format!(
        " volley · {} → {} · {} · {model} ",
        dash.scenario, dash.target, dash.transport
    ));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let lines = Layout::default()
        .direction(Direction::Vertical)
        .constraints([
            Constraint::Length(1),
            Constraint::Length(1),
            Constraint::Length(1),
        ])
        .split(inner);
    let elapsed = s.elapsed.as_secs_f64();
    let label = match s.planned {
        Some(planned) => format!("{elapsed:.1}s / {:.1}s", planned.as_secs_f64()),
        None => format!("{elapsed:.1}s"),
    };
    let warming = if s.elapsed < s.warmup { " (warmup)" } else { "" };
    frame.render_widget(
        Gauge::default()
            .gauge_style(Style::default().fg(Color::Cyan))
            .ratio(dash.progress().unwrap_or(0.0))
            .label(format!("{label}{warming}")),
        lines[0],
    );
    let stage = match s.stage {
        Some(stage) => format!("stage {}/{} · ", stage + 1, s.stages),
        None => String::new(),
    };
    frame.render_widget(
        Paragraph::new(format!(
            "{stage}target {:.0} {unit} · achieved {:.1} calls/s · in flight {} · calls {} · errors {}",
            s.target,
            dash.achieved(),
            s.in_flight,
            s.total.calls,
            s.total.errors
        )),
        lines[1],
    );
    frame.render_widget(Paragraph::new(Line::from(flags(s))), lines[2]);
}

/// The run's states worth a glance: paused, behind, subscriptions,
/// unsolicited messages, finished.
fn flags(s: &Snapshot) -> Vec<Span<'static>> {
    let mut flags = Vec::new();
    if s.paused {
        flags.push(Span::styled(
            " PAUSED ",
            Style::default().bg(Color::Yellow).fg(Color::Black),
        ));
    }
    if s.behind {
        flags.push(Span::styled(
            " ⚠ BEHIND SCHEDULE: the generator cannot keep the rate; add connections ",
            Style::default()
                .bg(Color::Red)
                .fg(Color::White)
                .add_modifier(Modifier::BOLD),
        ));
    }
    if s.subscriptions > 0 {
        flags.push(Span::raw(format!(
            " {} subscriptions · {} notifications ",
            s.subscriptions, s.notifications
        )));
    }
    if s.unsolicited > 0 {
        flags.push(Span::raw(format!(
            " {} messages answered no call ",
            s.unsolicited
        )));
    }
    if let Some((cores, rss)) = s.server {
        flags.push(Span::raw(format!(
            " server: {cores:.2} cores · {:.1} MB resident ",
            rss as f64 / 1e6
        )));
    }
    if s.finished {
        flags.push(Span::styled(
            " finished ",
            Style::default().bg(Color::Green).fg(Color::Black),
        ));
    }
    flags
}

fn charts(frame: &mut Frame, area: Rect, dash: &Dashboard) {
    let halves = Layout::default()
        .direction(Direction::Vertical)
        .constraints([Constraint::Percentage(50), Constraint::Percentage(50)])
        .split(area);
    let x_max = dash.rate.last().map_or(1.0, |p| p.0).max(1.0);
    let x_min = dash.rate.first().map_or(0.0, |p| p.0 - 1.0);
    let rate_max = dash.rate.iter().map(|p| p.1).fold(1.0, f64::max) * 1.1;
    let rate = Chart::new(vec![Dataset::default()
        .name("calls/s")
        .marker(symbols::Marker::Braille)
        .graph_type(GraphType::Line)
        .style(Style::default().fg(Color::Cyan))
        .data(&dash.rate)])
    .legend_position(None)
    .block(Block::default().borders(Borders::ALL).title(" calls/s "))
    .x_axis(Axis::default().bounds([x_min, x_max]))
    .y_axis(
        Axis::default()
            .bounds([0.0, rate_max])
            .labels(vec![Span::raw("0"), Span::raw(format!("{rate_max:.0}"))]),
    );
    frame.render_widget(rate, halves[0]);
    let latency_max = dash.p99.iter().map(|p| p.1).fold(0.001, f64::max) * 1.1;
    let latency = Chart::new(vec![
        Dataset::default()
            .name("p50")
            .marker(symbols::Marker::Braille)
            .graph_type(GraphType::Line)
            .style(Style::default().fg(Color::Green))
            .data(&dash.p50),
        Dataset::default()
            .name("p99")
            .marker(symbols::Marker::Braille)
            .graph_type(GraphType::Line)
            .style(Style::default().fg(Color::Magenta))
            .data(&dash.p99),
    ])
    .block(
        Block::default()
            .borders(Borders::ALL)
            .title(" latency ms (p50, p99) "),
    )
    .x_axis(Axis::default().bounds([x_min, x_max]))
    .y_axis(
        Axis::default()
            .bounds([0.0, latency_max])
            .labels(vec![Span::raw("0"), Span::raw(format!("{latency_max:.2}"))]),
    );
    frame.render_widget(latency, halves[1]);
}

fn latency(frame: &mut Frame, area: Rect, dash: &Dashboard) {
    let s = &dash.snapshot;
    let (title, summary, buckets) = if dash.cumulative {
        (" latency · whole run ", Some(&s.total), &s.histogram)
    } else {
        (
            " latency · last second ",
            s.interval.as_ref(),
            &s.interval_histogram,
        )
    };
    let block = Block::default().borders(Borders::ALL).title(title);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let parts = Layout::default()
        .direction(Direction::Vertical)
        .constraints([Constraint::Length(2), Constraint::Min(3)])
        .split(inner);
    let figures = match summary {
        Some(m) => format!(
            "p50 {:.3} ms  p90 {:.3}  p99 {:.3}  p99.9 {:.3}  max {:.3}",
            m.latency.p50_ms, m.latency.p90_ms, m.latency.p99_ms, m.latency.p999_ms, m.latency.max_ms
        ),
        None => "waiting for the first second…".to_string(),
    };
    frame.render_widget(Paragraph::new(figures), parts[0]);
    let bars: Vec<Bar> = buckets
        .iter()
        .map(|(upper, count)| {
            Bar::default()
                .value(*count)
                .label(Line::from(format!("≤{upper:.2}")))
                .text_value(String::new())
        })
        .collect();
    frame.render_widget(
        BarChart::default()
            .data(BarGroup::default().bars(&bars))
            .direction(Direction::Horizontal)
            .bar_width(1)
            .bar_gap(0)
            .bar_style(Style::default().fg(Color::Blue)),
        parts[1],
    );
}

fn methods_table(frame: &mut Frame, area: Rect, dash: &Dashboard) {
    let header = Row::new([
        "method", "calls", "ok", "error %", "calls/s", "p50 ms", "p99 ms", "max ms",
    ])
    .bold();
    let row = |m: &MethodSummary| {
        Row::new(vec![
            m.method.clone(),
            m.calls.to_string(),
            m.ok.to_string(),
            format!("{:.2}", m.error_rate * 100.0),
            format!("{:.1}", m.rps),
            format!("{:.3}", m.latency.p50_ms),
            format!("{:.3}", m.latency.p99_ms),
            format!("{:.3}", m.latency.max_ms),
        ])
    };
    let mut rows: Vec<Row> = dash.snapshot.methods.iter().map(row).collect();
    rows.push(row(&dash.snapshot.total).bold());
    let widths = [
        Constraint::Length(28),
        Constraint::Length(10),
        Constraint::Length(10),
        Constraint::Length(8),
        Constraint::Length(10),
        Constraint::Length(9),
        Constraint::Length(9),
        Constraint::Length(9),
    ];
    frame.render_widget(
        Table::new(rows, widths).header(header).block(
            Block::default()
                .borders(Borders::ALL)
                .title(" methods (whole run) "),
        ),
        area,
    );
}

fn errors(frame: &mut Frame, area: Rect, dash: &Dashboard) {
    let total = &dash.snapshot.total;
    let mut lines = Vec::new();
    let outcomes: Vec<String> = OutcomeKind::ALL
        .iter()
        .skip(1)
        .filter(|k| total.outcome(**k) > 0)
        .map(|k| format!("{} {}", k.name(), total.outcome(*k)))
        .collect();
    lines.push(Line::from(if outcomes.is_empty() {
        "no errors".to_string()
    } else {
        outcomes.join(" · ")
    }));
    if !total.rpc_error_codes.is_empty() {
        let codes: Vec<String> = total
            .rpc_error_codes
            .iter()
            .map(|(c, n)| format!("{c}: {n}"))
            .collect();
        lines.push(Line::from(format!("JSON-RPC error codes: {}", codes.join(" · "))));
    }
    let detail: Vec<String> = total
        .protocol_errors
        .iter()
        .map(|(k, n)| format!("{k}: {n}"))
        .chain(total.http_statuses.iter().map(|(s, n)| format!("HTTP {s}: {n}")))
        .collect();
    if !detail.is_empty() {
        lines.push(Line::from(detail.join(" · ")));
    }
    if let Some(latest) = &dash.snapshot.last_error {
        lines.push(Line::from(format!("latest: {latest}")).style(Style::default().fg(Color::Red)));
    }
    frame.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(" errors ")),
        area,
    );
}
