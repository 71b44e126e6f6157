//! Drawing the dashboard. Reads the state, never changes it.

use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::style::{Color, Modifier, Style, Stylize};
use ratatui::symbols;
use ratatui::text::{Line, Span};
use ratatui::widgets::{
    Axis, Bar, BarChart, BarGroup, Block, Borders, Chart, Dataset, Gauge, GraphType, Paragraph, Row, Table,
};
use ratatui::Frame;

use super::fit::{wrap, Rows};
use super::state::Dashboard;
use crate::feed::Point;
use crate::report::latency_cell;
use crate::stats::{MethodSummary, OutcomeKind, Snapshot};
use crate::thresholds::{SoFar, Standing};

pub fn draw(frame: &mut Frame, dash: &Dashboard) {
    if dash.side_by_side() {
        return super::side_by_side::draw(frame, dash);
    }
    let current = dash.current();
    let area = frame.area();
    let methods = dash.snapshot(current).methods.len() as u16;
    let thresholds = dash.targets.get(current).map_or(0, |t| t.thresholds.len()) as u16;
    let status = status_lines(dash, current, area.width.saturating_sub(2));
    // The borders and the gauge, then the status whole.
    let header_rows = 3 + status.len() as u16;
    let fit = Rows::share(area.height, header_rows, methods + 4, 6.max(thresholds + 2));
    let rows = Layout::default()
        .direction(Direction::Vertical)
        .constraints([fit.header, fit.charts, fit.methods, fit.bottom, fit.keys].map(Constraint::Length))
        .split(area);
    header(frame, rows[0], dash, current, status);
    if fit.charts > 0 {
        let middle = Layout::default()
            .direction(Direction::Horizontal)
            .constraints([Constraint::Percentage(60), Constraint::Percentage(40)])
            .split(rows[1]);
        charts(frame, middle[0], dash, current);
        latency(frame, middle[1], dash, current);
    }
    methods_table(frame, rows[2], dash.snapshot(current));
    // Where the charts had no room, the percentiles top the errors.
    let spectrum = (fit.charts == 0).then(|| {
        let (span, figures) = latency_figures(dash, current);
        Line::from(format!("{span}: {figures}")).bold()
    });
    match dash.targets.get(current).filter(|t| !t.thresholds.is_empty()) {
        Some(target) => {
            let bottom = Layout::default()
                .direction(Direction::Horizontal)
                .constraints([Constraint::Percentage(55), Constraint::Percentage(45)])
                .split(rows[3]);
            errors(frame, bottom[0], dash.snapshot(current), spectrum);
            thresholds_list(frame, bottom[1], &target.thresholds, " thresholds so far ");
        }
        None => errors(frame, rows[3], dash.snapshot(current), spectrum),
    }
    keys(frame, rows[4], false);
}

/// The keys, on the last line: in short where the whole would be cut.
pub(super) fn keys(frame: &mut Frame, area: Rect, several: bool) {
    let (whole, short) = match several {
        false => (
            " q quit (results are written) · p pause/resume · + / - target · v latency: last second / whole run",
            " q quit · p pause/resume · +/- target · v latency: second/run",
        ),
        true => (
            " q quit (results are written) · p pause/resume all · + / - every target · v last second / whole run · m methods",
            " q quit · p pause all · +/- targets · v second/run · m methods",
        ),
    };
    let text = match Span::raw(whole).width() > usize::from(area.width) {
        true => short,
        false => whole,
    };
    frame.render_widget(
        Paragraph::new(text).style(Style::default().add_modifier(Modifier::DIM)),
        area,
    );
}

/// Each threshold's value so far and where it stands.
pub(super) fn thresholds_list(frame: &mut Frame, area: Rect, thresholds: &[SoFar], title: &str) {
    let lines: Vec<Line> = thresholds.iter().map(threshold_line).collect();
    frame.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(title.to_string())),
        area,
    );
}

/// `pass  p99 < 200ms  (12.3 ms)`, coloured by where it stands.
pub(super) fn threshold_line(t: &SoFar) -> Line<'static> {
    let (word, color) = match t.standing {
        Standing::Pass => ("pass   ", Color::Green),
        Standing::Fail => ("FAIL   ", Color::Red),
        Standing::Pending => ("pending", Color::Yellow),
    };
    Line::from(vec![
        Span::styled(word, Style::default().fg(color).add_modifier(Modifier::BOLD)),
        Span::raw(format!("  {}  ({})", t.expression, t.shown)),
    ])
}

fn header(frame: &mut Frame, area: Rect, dash: &Dashboard, current: usize, status: Vec<Line<'static>>) {
    let s = dash.snapshot(current);
    let info = dash.info(current);
    let model = if s.open { "open model" } else { "closed model" };
    let which = match dash.targets.len() {
        1 => String::new(),
        n => format!("· target {}/{n}: {} ", current + 1, info.name),
    };
    let block = Block::default().borders(Borders::ALL).title(format!(
        " volley · {} {which}→ {} · {} · {model} ",
        dash.feed.scenario, info.url, info.transport
    ));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let lines = Layout::default()
        .direction(Direction::Vertical)
        .constraints([Constraint::Length(1), Constraint::Min(1)])
        .split(inner);
    frame.render_widget(progress(dash, current), lines[0]);
    frame.render_widget(Paragraph::new(status), lines[1]);
}

/// The status under the gauge, its figures then its flags, in lines of
/// `width` broken between figures, so that each is whole.
fn status_lines(dash: &Dashboard, current: usize, width: u16) -> Vec<Line<'static>> {
    let s = dash.snapshot(current);
    let unit = if s.open { "requests/s" } else { "in flight" };
    let achieved = dash
        .achieved(current)
        .map_or("-".to_string(), |a| format!("{a:.1}"));
    let mut figures: Vec<String> = s
        .stage
        .map(|stage| format!("stage {}/{}", stage + 1, s.stages))
        .into_iter()
        .collect();
    figures.extend([
        format!("target {:.0} {unit}", s.target),
        format!("achieved {achieved} calls/s"),
        format!("in flight {}", s.in_flight),
        format!("calls {}", s.total.calls),
        format!("errors {}", s.total.errors),
    ]);
    let mut lines = wrap(figures.into_iter().map(Span::raw).collect(), " · ", width);
    // No flag, no line: a small terminal keeps the row.
    lines.extend(wrap(flags(s), "", width));
    lines
}

/// The gauge of a target's time: elapsed of planned, and the warmup.
pub(super) fn progress(dash: &Dashboard, target: usize) -> Gauge<'static> {
    let s = dash.snapshot(target);
    let elapsed = s.elapsed.as_secs_f64();
    let label = match s.planned {
        Some(planned) => format!("{elapsed:.1}s / {:.1}s", planned.as_secs_f64()),
        None => format!("{elapsed:.1}s"),
    };
    let warming = match s.planned {
        _ if s.elapsed < s.warmup => " (warmup)",
        // The schedule is over: the calls in flight have their grace.
        Some(planned) if s.elapsed > planned && !s.finished => " (grace: waiting for the calls in flight)",
        _ => "",
    };
    Gauge::default()
        .gauge_style(Style::default().fg(Color::Cyan))
        .ratio(dash.progress(target).unwrap_or(0.0))
        .label(format!("{label}{warming}"))
}

/// The run's states worth a glance: paused, behind, subscriptions,
/// unsolicited messages, finished.
pub(super) fn flags(s: &Snapshot) -> Vec<Span<'static>> {
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

fn charts(frame: &mut Frame, area: Rect, dash: &Dashboard, current: usize) {
    let halves = Layout::default()
        .direction(Direction::Vertical)
        .constraints([Constraint::Percentage(50), Constraint::Percentage(50)])
        .split(area);
    let history = dash.targets.get(current).map_or(&[][..], |t| &t.history[..]);
    let series = |pick: fn(&Point) -> f64| -> Vec<(f64, f64)> {
        (history.iter())
            .map(|p| (f64::from(p.second), pick(p)))
            .filter(|p| p.1.is_finite())
            .collect()
    };
    let (rate, p50, p99) = (
        series(|p| p.calls_per_s),
        series(|p| p.p50_ms),
        series(|p| p.p99_ms),
    );
    let x_max = rate.last().map_or(1.0, |p| p.0).max(1.0);
    let x_min = rate.first().map_or(0.0, |p| p.0 - 1.0);
    let rate_max = rate.iter().map(|p| p.1).fold(1.0, f64::max) * 1.1;
    let rate_chart = Chart::new(vec![Dataset::default()
        .name("calls/s")
        .marker(symbols::Marker::Braille)
        .graph_type(GraphType::Line)
        .style(Style::default().fg(Color::Cyan))
        .data(&rate)])
    .legend_position(None)
    .block(Block::default().borders(Borders::ALL).title(" calls/s "))
    .x_axis(Axis::default().bounds([x_min, x_max]))
    .y_axis(
        Axis::default()
            .bounds([0.0, rate_max])
            .labels(vec![Span::raw("0"), Span::raw(format!("{rate_max:.0}"))]),
    );
    frame.render_widget(rate_chart, halves[0]);
    let latency_max = p99.iter().map(|p| p.1).fold(0.001, f64::max) * 1.1;
    let latency = Chart::new(vec![
        Dataset::default()
            .name("p50")
            .marker(symbols::Marker::Braille)
            .graph_type(GraphType::Line)
            .style(Style::default().fg(Color::Green))
            .data(&p50),
        Dataset::default()
            .name("p99")
            .marker(symbols::Marker::Braille)
            .graph_type(GraphType::Line)
            .style(Style::default().fg(Color::Magenta))
            .data(&p99),
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

fn latency(frame: &mut Frame, area: Rect, dash: &Dashboard, current: usize) {
    let s = dash.snapshot(current);
    let (span, figures) = latency_figures(dash, current);
    let buckets = match dash.cumulative {
        true => &s.histogram,
        false => &s.interval_histogram,
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .title(format!(" latency · {span} "));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let parts = Layout::default()
        .direction(Direction::Vertical)
        .constraints([Constraint::Length(2), Constraint::Min(3)])
        .split(inner);
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

/// The percentiles the view shows, and over what: the last second or the
/// whole run.
fn latency_figures(dash: &Dashboard, current: usize) -> (&'static str, String) {
    let s = dash.snapshot(current);
    let (span, summary) = match dash.cumulative {
        true => ("whole run", Some(&s.total)),
        false => ("last second", s.interval.as_ref()),
    };
    let figures = match summary {
        // Paused, every call failed to connect, or notifications only: no
        // latency, not 0 ms.
        Some(m) if m.latency.timed == 0 => "no call answered: no latency".to_string(),
        Some(m) => format!(
            "p50 {:.3} ms  p90 {:.3}  p99 {:.3}  p99.9 {:.3}  max {:.3}",
            m.latency.p50_ms, m.latency.p90_ms, m.latency.p99_ms, m.latency.p999_ms, m.latency.max_ms
        ),
        None => "waiting for the first second…".to_string(),
    };
    (span, figures)
}

fn methods_table(frame: &mut Frame, area: Rect, snapshot: &Snapshot) {
    // Narrow, the `ok` column goes (calls and error % say it) and the
    // method's name takes its room.
    let narrow = area.width < 100;
    let header = [
        "method", "calls", "ok", "error %", "calls/s", "p50 ms", "p99 ms", "max ms",
    ];
    let header = Row::new(columns(header, narrow)).bold();
    let row = |m: &MethodSummary| {
        let cells = [
            m.method.clone(),
            m.calls.to_string(),
            m.ok.to_string(),
            format!("{:.2}", m.error_rate * 100.0),
            format!("{:.1}", m.rps),
            latency_cell(m.latency.timed, m.latency.p50_ms),
            latency_cell(m.latency.timed, m.latency.p99_ms),
            latency_cell(m.latency.timed, m.latency.max_ms),
        ];
        Row::new(columns(cells, narrow))
    };
    let mut rows: Vec<Row> = snapshot.methods.iter().map(row).collect();
    rows.push(row(&snapshot.total).bold());
    let widths = columns([28, 10, 10, 8, 10, 9, 9, 9].map(Constraint::Length), narrow);
    frame.render_widget(
        Table::new(rows, widths).header(header).block(
            Block::default()
                .borders(Borders::ALL)
                .title(" methods (whole run) "),
        ),
        area,
    );
}

/// The methods table's columns, without `ok` when `narrow`.
fn columns<T>(cells: [T; 8], narrow: bool) -> Vec<T> {
    (cells.into_iter().enumerate())
        .filter(|(i, _)| !(narrow && *i == 2))
        .map(|(_, cell)| cell)
        .collect()
}

/// The errors; `first`, a line above them (the percentiles, where the
/// charts had no room).
fn errors(frame: &mut Frame, area: Rect, snapshot: &Snapshot, first: Option<Line<'static>>) {
    let total = &snapshot.total;
    let mut lines: Vec<Line> = first.into_iter().collect();
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
    if let Some(latest) = &snapshot.last_error {
        lines.push(Line::from(format!("latest: {latest}")).style(Style::default().fg(Color::Red)));
    }
    frame.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(" errors ")),
        area,
    );
}
