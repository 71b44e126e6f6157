//! The dashboard of several targets run at once: a row per target (calls/s,
//! p50, p99, errors, in flight, the ratios to the first), their calls/s and
//! p99 on shared charts, each one's methods on demand, errors and
//! thresholds per target.

use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::style::{Color, Modifier, Style, Stylize};
use ratatui::symbols;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Axis, Block, Borders, Chart, Dataset, GraphType, Paragraph, Row, Table};
use ratatui::Frame;

use super::fit::Rows;
use super::state::Dashboard;
use super::view::{keys, progress, threshold_line};
use crate::feed::Phase;
use crate::report::latency_cell;
use crate::report::targets::Ratios;
use crate::stats::{MethodSummary, OutcomeKind};

/// Each target's colour on the charts, in order.
const COLORS: [Color; 6] = [
    Color::Cyan,
    Color::Magenta,
    Color::Green,
    Color::Yellow,
    Color::Blue,
    Color::Red,
];

pub fn draw(frame: &mut Frame, dash: &Dashboard) {
    let n = dash.targets.len() as u16;
    let methods: u16 = (0..dash.targets.len())
        .map(|i| dash.snapshot(i).methods.len() as u16)
        .sum();
    let thresholds: u16 = dash.targets.iter().map(|t| t.thresholds.len() as u16).sum();
    let per_method = if dash.per_method { methods + 3 } else { 0 };
    // The header and every target's row whole, then the methods asked
    // for, then errors and thresholds; the charts take what is left, or go.
    let fit = Rows::share(
        frame.area().height,
        4 + n + 3,
        per_method,
        (n + 2).max(thresholds + 2),
    );
    let rows = Layout::default()
        .direction(Direction::Vertical)
        .constraints(
            [
                4,
                fit.header.saturating_sub(4),
                fit.charts,
                fit.methods,
                fit.bottom,
                fit.keys,
            ]
            .map(Constraint::Length),
        )
        .split(frame.area());
    header(frame, rows[0], dash);
    targets_table(frame, rows[1], dash);
    if fit.charts > 0 {
        charts(frame, rows[2], dash);
    }
    if dash.per_method {
        methods_table(frame, rows[3], dash);
    }
    // Narrow, errors above thresholds where the rows allow: side by side,
    // each would be cut.
    let (errors_rows, thresholds_rows) = (n + 2, thresholds + 2);
    let bottom = match rows[4].width < 120 && rows[4].height >= errors_rows + thresholds_rows {
        true => Layout::default()
            .direction(Direction::Vertical)
            .constraints([Constraint::Length(errors_rows), Constraint::Min(thresholds_rows)])
            .split(rows[4]),
        false => Layout::default()
            .direction(Direction::Horizontal)
            .constraints([Constraint::Percentage(55), Constraint::Percentage(45)])
            .split(rows[4]),
    };
    errors(frame, bottom[0], dash);
    thresholds_list(frame, bottom[1], dash);
    keys(frame, rows[5], true);
}

fn header(frame: &mut Frame, area: Rect, dash: &Dashboard) {
    let first = dash.snapshot(0);
    let model = if first.open { "open model" } else { "closed model" };
    let block = Block::default().borders(Borders::ALL).title(format!(
        " volley · {} · {} targets at once · {model} ",
        dash.feed.scenario,
        dash.targets.len()
    ));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let lines = Layout::default()
        .direction(Direction::Vertical)
        .constraints([Constraint::Length(1), Constraint::Length(1)])
        .split(inner);
    frame.render_widget(progress(dash, 0), lines[0]);
    let mut flags = Vec::new();
    let each = |pick: fn(&crate::stats::Snapshot) -> bool| -> Vec<&str> {
        (0..dash.targets.len())
            .filter(|i| pick(dash.snapshot(*i)))
            .map(|i| dash.info(i).name.as_str())
            .collect()
    };
    let paused = each(|s| s.paused);
    if !paused.is_empty() {
        flags.push(Span::styled(
            format!(" PAUSED: {} ", paused.join(", ")),
            Style::default().bg(Color::Yellow).fg(Color::Black),
        ));
    }
    let behind = each(|s| s.behind);
    if !behind.is_empty() {
        flags.push(Span::styled(
            format!(" ⚠ BEHIND SCHEDULE: {} ", behind.join(", ")),
            Style::default()
                .bg(Color::Red)
                .fg(Color::White)
                .add_modifier(Modifier::BOLD),
        ));
    }
    let raced: Vec<String> = (0..dash.targets.len())
        .filter_map(|i| {
            let (heads, first) = dash.snapshot(i).race?;
            Some(format!("{} {first} of {heads}", dash.info(i).name))
        })
        .collect();
    if !raced.is_empty() {
        flags.push(Span::raw(format!(
            " race, heads first so far: {} ",
            raced.join(" · ")
        )));
    }
    if dash.targets.iter().all(|t| t.phase() == Phase::Finished) {
        flags.push(Span::styled(
            " finished ",
            Style::default().bg(Color::Green).fg(Color::Black),
        ));
    }
    frame.render_widget(Paragraph::new(Line::from(flags)), lines[1]);
}

/// The figures a row shows: the last second's, or the whole run's.
fn figures(dash: &Dashboard, target: usize) -> Option<&MethodSummary> {
    let s = dash.snapshot(target);
    match dash.cumulative {
        true => Some(&s.total).filter(|t| t.calls > 0),
        false => s.interval.as_ref(),
    }
}

/// Whether any of the calls has a latency: those that failed to connect have none.
/// A target's name in a narrow column.
const NARROW_NAME: usize = 10;

/// `name` in `width` characters: its end where it is longer (`…0.1:18545`),
/// since targets on one host differ by their port.
fn fit_name(name: &str, width: usize) -> String {
    let chars: Vec<char> = name.chars().collect();
    match chars.len() > width {
        true => std::iter::once('…')
            .chain(chars[chars.len() + 1 - width..].iter().copied())
            .collect(),
        false => name.to_string(),
    }
}

fn timed(m: &MethodSummary) -> bool {
    m.latency.timed > 0
}

fn number(value: Option<f64>, decimals: usize) -> String {
    value.map_or("-".to_string(), |v| format!("{v:.decimals$}"))
}

fn times(ratio: Option<f64>) -> String {
    ratio.map_or("-".to_string(), |r| format!("{r:.2}x"))
}

/// The targets table's columns kept where it is narrow: the target, its
/// state, the figures and the ratios (errors, in flight, calls and the
/// URL are said elsewhere or whole in the wide view).
const NARROW_TARGET_COLUMNS: [usize; 9] = [0, 1, 2, 3, 4, 6, 9, 10, 11];

/// `cells`, only those `NARROW_TARGET_COLUMNS` keeps when `narrow`.
fn target_columns<T>(cells: [T; 13], narrow: bool) -> Vec<T> {
    (cells.into_iter().enumerate())
        .filter(|(i, _)| !narrow || NARROW_TARGET_COLUMNS.contains(i))
        .map(|(_, cell)| cell)
        .collect()
}

fn targets_table(frame: &mut Frame, area: Rect, dash: &Dashboard) {
    let narrow = area.width < 120;
    let header = Row::new(target_columns(
        [
            "target",
            "state",
            "calls/s",
            "p50 ms",
            "p99 ms",
            "errors",
            "error %",
            "in flight",
            "calls",
            "calls/s ×",
            "p50 ×",
            "p99 ×",
            "url",
        ],
        narrow,
    ))
    .bold();
    let first = figures(dash, 0);
    let rows: Vec<Row> = (0..dash.targets.len())
        .map(|i| {
            let s = dash.snapshot(i);
            let m = figures(dash, i);
            let ratios = match (m, first) {
                (Some(m), Some(first)) if i > 0 => Some(Ratios::of(m, first)),
                _ => None,
            };
            let mut state = dash.targets[i].phase().name().to_string();
            if s.paused {
                state.push_str(" (paused)");
            }
            Row::new(target_columns(
                [
                    match narrow {
                        true => fit_name(&dash.info(i).name, NARROW_NAME),
                        false => dash.info(i).name.clone(),
                    },
                    state,
                    number(m.map(|m| m.rps), 1),
                    // Without a call that connected (paused, say), no latency, not 0 ms.
                    number(m.filter(|m| timed(m)).map(|m| m.latency.p50_ms), 3),
                    number(m.filter(|m| timed(m)).map(|m| m.latency.p99_ms), 3),
                    m.map_or("-".to_string(), |m| m.errors.to_string()),
                    number(m.map(|m| m.error_rate * 100.0), 2),
                    s.in_flight.to_string(),
                    s.total.calls.to_string(),
                    times(ratios.and_then(|r| r.calls_per_s)),
                    times(ratios.and_then(|r| r.p50)),
                    times(ratios.and_then(|r| r.p99)),
                    dash.info(i).url.clone(),
                ],
                narrow,
            ))
            .style(Style::default().fg(COLORS[i % COLORS.len()]))
        })
        .collect();
    let widths = [16, 16, 9, 8, 8, 7, 7, 9, 9, 9, 6, 6].map(Constraint::Length);
    let widths = match narrow {
        // Each kept column as wide as its widest figure.
        true => target_columns(
            [NARROW_NAME as u16, 9, 8, 7, 7, 0, 7, 0, 0, 9, 6, 6, 0].map(Constraint::Length),
            true,
        ),
        false => widths.into_iter().chain([Constraint::Min(10)]).collect(),
    };
    let view = if dash.cumulative {
        "whole run"
    } else {
        "last second"
    };
    let title = format!(" targets · {view} · ratios to {} ", dash.info(0).name);
    frame.render_widget(
        Table::new(rows, widths)
            .header(header)
            .block(Block::default().borders(Borders::ALL).title(title)),
        area,
    );
}

fn charts(frame: &mut Frame, area: Rect, dash: &Dashboard) {
    let halves = Layout::default()
        .direction(Direction::Horizontal)
        .constraints([Constraint::Percentage(50), Constraint::Percentage(50)])
        .split(area);
    let series = |pick: fn(&crate::feed::Point) -> f64| -> Vec<Vec<(f64, f64)>> {
        (dash.targets.iter())
            .map(|t| {
                (t.history.iter())
                    .map(|p| (f64::from(p.second), pick(p)))
                    .filter(|p| p.1.is_finite())
                    .collect()
            })
            .collect()
    };
    chart(frame, halves[0], dash, " calls/s ", &series(|p| p.calls_per_s));
    chart(frame, halves[1], dash, " p99 ms ", &series(|p| p.p99_ms));
}

/// One line per target over the seconds so far.
fn chart(frame: &mut Frame, area: Rect, dash: &Dashboard, title: &str, lines: &[Vec<(f64, f64)>]) {
    let all = || lines.iter().flatten();
    let x_max = all().map(|p| p.0).fold(1.0, f64::max);
    let x_min = all().map(|p| p.0 - 1.0).fold(x_max - 1.0, f64::min).max(0.0);
    let y_max = all().map(|p| p.1).fold(0.001, f64::max) * 1.1;
    let datasets = (lines.iter().enumerate())
        .map(|(i, points)| {
            Dataset::default()
                .name(dash.info(i).name.clone())
                .marker(symbols::Marker::Braille)
                .graph_type(GraphType::Line)
                .style(Style::default().fg(COLORS[i % COLORS.len()]))
                .data(points)
        })
        .collect();
    let label = if y_max >= 100.0 {
        format!("{y_max:.0}")
    } else {
        format!("{y_max:.2}")
    };
    frame.render_widget(
        Chart::new(datasets)
            .block(Block::default().borders(Borders::ALL).title(title.to_string()))
            .x_axis(Axis::default().bounds([x_min, x_max]))
            .y_axis(
                Axis::default()
                    .bounds([0.0, y_max])
                    .labels(vec![Span::raw("0"), Span::raw(label)]),
            ),
        area,
    );
}

fn methods_table(frame: &mut Frame, area: Rect, dash: &Dashboard) {
    // Narrow, `max ms` goes and the method's name takes its room.
    let narrow = area.width < 110;
    let keep = |cells: [_; 9]| -> Vec<_> {
        (cells.into_iter().enumerate())
            .filter(|(i, _)| !(narrow && *i == 7))
            .map(|(_, cell)| cell)
            .collect()
    };
    let header = [
        "method", "target", "calls", "error %", "calls/s", "p50 ms", "p99 ms", "max ms", "p99 ×",
    ];
    let header = Row::new(keep(header.map(String::from))).bold();
    let mut rows = Vec::new();
    let first = dash.snapshot(0);
    for (i, target) in (0..dash.targets.len()).map(|i| (i, dash.snapshot(i))) {
        for m in &target.methods {
            let base = first.methods.iter().find(|b| b.method == m.method);
            let ratio = base.filter(|_| i > 0).map(|b| Ratios::of(m, b));
            rows.push(
                Row::new(keep([
                    m.method.clone(),
                    match narrow {
                        true => fit_name(&dash.info(i).name, NARROW_NAME),
                        false => dash.info(i).name.clone(),
                    },
                    m.calls.to_string(),
                    format!("{:.2}", m.error_rate * 100.0),
                    format!("{:.1}", m.rps),
                    latency_cell(m.latency.timed, m.latency.p50_ms),
                    latency_cell(m.latency.timed, m.latency.p99_ms),
                    latency_cell(m.latency.timed, m.latency.max_ms),
                    times(ratio.and_then(|r| r.p99)),
                ]))
                .style(Style::default().fg(COLORS[i % COLORS.len()])),
            );
        }
    }
    let widths = match narrow {
        true => [Constraint::Min(14)]
            .into_iter()
            .chain([10, 8, 7, 8, 7, 7, 6].map(Constraint::Length))
            .collect(),
        false => [28, 18, 10, 8, 10, 9, 9, 9, 7].map(Constraint::Length).to_vec(),
    };
    frame.render_widget(
        Table::new(rows, widths).header(header).block(
            Block::default()
                .borders(Borders::ALL)
                .title(" methods · whole run (m hides) "),
        ),
        area,
    );
}

/// Per target: its errors by outcome so far, and its latest failed answer.
fn errors(frame: &mut Frame, area: Rect, dash: &Dashboard) {
    let lines: Vec<Line> = (0..dash.targets.len())
        .map(|i| {
            let s = dash.snapshot(i);
            let outcomes: Vec<String> = (OutcomeKind::ALL.iter().skip(1))
                .filter(|k| s.total.outcome(**k) > 0)
                .map(|k| format!("{} {}", k.name(), s.total.outcome(*k)))
                .collect();
            let mut text = match outcomes.is_empty() {
                true => "no errors".to_string(),
                false => outcomes.join(" · "),
            };
            if let Some(latest) = &s.last_error {
                text.push_str(&format!(" · latest: {latest}"));
            }
            Line::from(vec![
                Span::styled(
                    format!("{}: ", dash.info(i).name),
                    Style::default().fg(COLORS[i % COLORS.len()]).bold(),
                ),
                Span::raw(text),
            ])
        })
        .collect();
    frame.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(" errors ")),
        area,
    );
}

fn thresholds_list(frame: &mut Frame, area: Rect, dash: &Dashboard) {
    let mut lines = Vec::new();
    for (i, target) in dash.targets.iter().enumerate() {
        for t in &target.thresholds {
            let mut line = threshold_line(t);
            line.spans.insert(
                0,
                Span::styled(
                    format!("{}: ", dash.info(i).name),
                    Style::default().fg(COLORS[i % COLORS.len()]),
                ),
            );
            lines.push(line);
        }
    }
    if lines.is_empty() {
        lines.push(Line::from("no thresholds"));
    }
    frame.render_widget(
        Paragraph::new(lines).block(
            Block::default()
                .borders(Borders::ALL)
                .title(" thresholds so far "),
        ),
        area,
    );
}
