//! The page and its charts, asserted by what they draw: where a value
//! lands on an axis, which lines and markers a chart has, and the text
//! of the verdict, thresholds and table. The plot area is 466 × 216
//! pixels from (64, 36): a value's place is worked out by hand below.

use super::*;

fn histogram(values_us: impl IntoIterator<Item = u64>) -> Histogram<u64> {
    let mut h = Histogram::new(3).unwrap();
    for v in values_us {
        h.record(v).unwrap();
    }
    h
}

fn line(name: &str, points: &[(f64, f64)]) -> Series {
    Series {
        name: name.to_string(),
        points: points.to_vec(),
    }
}

/// The `points` of each polyline, in order.
fn polylines(svg: &str) -> Vec<&str> {
    svg.split("<polyline ")
        .skip(1)
        .map(|rest| {
            let start = rest.find("points=\"").unwrap() + 8;
            let len = rest[start..].find('"').unwrap();
            &rest[start..start + len]
        })
        .collect()
}

/// The text of every `<title>` (a line's name, a marker's label).
fn titles(svg: &str) -> Vec<&str> {
    svg.split("<title>")
        .skip(1)
        .map(|rest| &rest[..rest.find("</title>").unwrap()])
        .collect()
}

#[test]
fn axes_are_round_and_percentiles_read_as_nines() {
    assert_eq!(
        (nice(0.0), nice(7.0), nice(12.0), nice(0.031)),
        (1.0, 10.0, 20.0, 0.05)
    );
    assert_eq!(
        (nice(-3.0), nice(f64::NAN), nice(1.0), nice(50.0)),
        (1.0, 1.0, 1.0, 50.0)
    );
    assert_eq!((nice(70.0), nice(0.07)), (100.0, 0.1));
    let ticks: Vec<String> = x_ticks(XAxis::Percentile, 3.0).into_iter().map(|t| t.1).collect();
    assert_eq!(ticks, ["0%", "90%", "99%", "99.9%"]);
    assert_eq!(esc("<a & \"b\">"), "&lt;a &amp; &quot;b&quot;&gt;");
    let labels: Vec<String> = [0.0, 0.75, 37.5, 2500.0, 0.0125].map(tick).to_vec();
    assert_eq!(labels, ["0", "0.75", "37.5", "2500", "0.013"]);
    assert_eq!(
        (shorten("abcdef", 6), shorten("abcdefg", 6), shorten("ééééééé", 6)),
        ("abcdef".to_string(), "abcdef…".to_string(), "éééééé…".to_string())
    );
}

#[test]
fn a_value_lands_where_its_axis_ticks_say() {
    let svg = chart(
        "t",
        "seconds",
        "ms",
        &[line("a", &[(0.0, 0.0), (5.0, 50.0), (10.0, 100.0)])],
        XAxis::Linear,
        &[],
    );
    // y from 0 to 100 in quarters, 54 px each, 100 at the top (y 36).
    for (value, y) in [
        ("0", 252.0),
        ("25", 198.0),
        ("50", 144.0),
        ("75", 90.0),
        ("100", 36.0),
    ] {
        let grid = format!(
            "<line x1=\"64\" x2=\"530\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#eee\"/><text x=\"58\" y=\"{:.1}\" text-anchor=\"end\">{value}</text>",
            y + 4.0
        );
        assert!(svg.contains(&grid), "no y tick {value} at {y} in {svg}");
    }
    // x from 0 to 10 by 2s (a sixth of the range, rounded up), 93.2 px each.
    for (value, x) in [
        ("0", "64.0"),
        ("2", "157.2"),
        ("4", "250.4"),
        ("6", "343.6"),
        ("8", "436.8"),
        ("10", "530.0"),
    ] {
        let grid = format!(
            "<line x1=\"{x}\" x2=\"{x}\" y1=\"36\" y2=\"252\" stroke=\"#f3f3f3\"/><text x=\"{x}\" y=\"268\" text-anchor=\"middle\">{value}</text>"
        );
        assert!(svg.contains(&grid), "no x tick {value} at {x} in {svg}");
    }
    assert_eq!(svg.matches("stroke=\"#f3f3f3\"").count(), 6);
    assert!(svg.contains(
        "<line x1=\"64\" x2=\"64\" y1=\"36\" y2=\"252\" stroke=\"#999\"/><line x1=\"64\" x2=\"530\" y1=\"252\" y2=\"252\" stroke=\"#999\"/>"
    ));
    assert!(svg.contains(
        "<text x=\"297.0\" y=\"290\" text-anchor=\"middle\">seconds</text><text transform=\"translate(14 144.0) rotate(-90)\" text-anchor=\"middle\">ms</text>"
    ));
    assert_eq!(polylines(&svg), ["64.0,252.0 297.0,144.0 530.0,36.0"]);
    assert!(svg.contains("<rect x=\"74.0\" y=\"41.0\" width=\"10\" height=\"10\" fill=\"#1f77b4\"/><text x=\"88.0\" y=\"50.0\">a</text>"));
}

#[test]
fn the_axes_start_at_zero_and_round_their_top_up() {
    // 0 to 3 s: ticks each second (never finer); y up to 40 → 50.
    let svg = chart(
        "t",
        "x",
        "y",
        &[line("a", &[(1.0, 40.0), (3.0, 10.0)])],
        XAxis::Linear,
        &[],
    );
    let ticks: Vec<(f64, String)> = x_ticks(XAxis::Linear, 3.0);
    assert_eq!(
        ticks,
        [
            (0.0, "0".into()),
            (1.0, "1".into()),
            (2.0, "2".into()),
            (3.0, "3".into())
        ]
    );
    // x = 64 + v/3 × 466, y = 252 − v/50 × 216
    assert_eq!(polylines(&svg), ["219.3,79.2 530.0,208.8"]);
    assert!(svg.contains(">12.5</text>") && svg.contains(">50</text>"));
    // Nothing to plot: an axis from 0 to 1 each way, not a division by zero.
    let empty = chart("t", "x", "y", &[line("a", &[])], XAxis::Linear, &[]);
    assert!(empty.contains("<text x=\"530.0\" y=\"268\" text-anchor=\"middle\">1</text>"));
    assert!(empty.contains("<text x=\"58\" y=\"40.0\" text-anchor=\"end\">1</text>"));
    assert!(!empty.contains("NaN") && !empty.contains("inf"));
    // One point at x 0: the axis still spans a width.
    let one = chart("t", "x", "y", &[line("a", &[(0.0, 2.0)])], XAxis::Linear, &[]);
    assert_eq!(polylines(&one), ["64.0,36.0"]);
}

#[test]
fn markers_inside_the_range_are_dashed_lines_with_their_label() {
    let markers = [
        (-0.5, "before".to_string()),
        (0.0, "at zero".to_string()),
        (2.0, "stage 1".to_string()),
        (4.0, "at the end".to_string()),
        (4.5, "after".to_string()),
        (1.0, "a label longer than twenty-four characters".to_string()),
    ];
    let svg = chart(
        "t",
        "x",
        "y",
        &[line("a", &[(4.0, 1.0)])],
        XAxis::Linear,
        &markers,
    );
    assert_eq!(
        titles(&svg),
        [
            "at zero",
            "stage 1",
            "at the end",
            "a label longer than twenty-four characters",
            "a"
        ]
    );
    assert!(svg.contains(
        "<line x1=\"297.0\" x2=\"297.0\" y1=\"36\" y2=\"252\" stroke=\"#888\" stroke-dasharray=\"4 3\"><title>stage 1</title></line><text x=\"300.0\" y=\"248.0\" style=\"font-size:10px;fill:#666\">stage 1</text>"
    ));
    assert!(svg.contains(">a label longer than twen…</text>"));
}

#[test]
fn the_legend_wraps_to_a_new_row_where_a_name_would_pass_the_edge() {
    let names = [
        "first-series-name-xx",
        "second-series-name-x",
        "third",
        "a-name-well-past-twenty-chars",
    ];
    let series: Vec<Series> = names.iter().map(|n| line(n, &[(1.0, 1.0)])).collect();
    let svg = chart("t", "x", "y", &series, XAxis::Linear, &[]);
    // Each entry 24 + 7 px a character wide: 164 for twenty. The third
    // (59 wide) fits after two (74 + 328 + 59 ≤ 530); the fourth (cut to
    // twenty characters) does not, and starts the second row.
    for (x, y, color, name) in [
        ("74.0", "50.0", "#1f77b4", "first-series-name-xx"),
        ("238.0", "50.0", "#d62728", "second-series-name-x"),
        ("402.0", "50.0", "#2ca02c", "third"),
        ("74.0", "66.0", "#ff7f0e", "a-name-well-past-twe…"),
    ] {
        let entry = format!(
            "<rect x=\"{x}\" y=\"{:.1}\" width=\"10\" height=\"10\" fill=\"{color}\"/><text x=\"{:.1}\" y=\"{y}\">{name}</text>",
            y.parse::<f64>().unwrap() - 9.0,
            x.parse::<f64>().unwrap() + 14.0
        );
        assert!(svg.contains(&entry), "no {entry} in {svg}");
    }
    // An entry that ends on the plot's right edge (74 + 5 × 24 + 48 × 7 =
    // 530) stays on its row; one a pixel on wraps.
    let names = [
        "abcdefghij",
        "bcdefghijk",
        "cdefghijkl",
        "defghijklm",
        "efghijkl",
        "f",
    ];
    let series: Vec<Series> = names.iter().map(|n| line(n, &[(1.0, 1.0)])).collect();
    let svg = chart("t", "x", "y", &series, XAxis::Linear, &[]);
    assert!(
        svg.contains("<text x=\"464.0\" y=\"50.0\">efghijkl</text>"),
        "{svg}"
    );
    assert!(svg.contains("<text x=\"88.0\" y=\"66.0\">f</text>"), "{svg}");
    // Colours cycle after eight.
    let nine: Vec<Series> = (0..9).map(|i| line(&i.to_string(), &[(1.0, 1.0)])).collect();
    let svg = chart("t", "x", "y", &nine, XAxis::Linear, &[]);
    assert_eq!(svg.matches("stroke=\"#1f77b4\"").count(), 2);
}

#[test]
fn a_spectrum_goes_as_deep_in_nines_as_the_calls_resolve() {
    // 1 to 100 ms: 100 calls resolve 99% but not 99.5%.
    let h = histogram((1..=100).map(|ms| ms * 1000));
    let s = spectrum("add", &h);
    let xs: Vec<String> = s.points.iter().map(|p| format!("{:.3}", p.0)).collect();
    assert_eq!(xs, ["0.000", "0.301", "0.602", "1.000", "1.301", "2.000"]);
    let ms: Vec<f64> = s.points.iter().map(|p| p.1.round()).collect();
    assert_eq!(ms, [1.0, 50.0, 75.0, 90.0, 95.0, 99.0]);
    // One call: only its value, at 0%.
    assert_eq!(spectrum("one", &histogram([7000])).points, [(0.0, 7.0)]);
    let svg = spectrum_chart(&BTreeMap::from([
        ("add".to_string(), h),
        ("none".to_string(), histogram([])),
    ]));
    // The percentile axis ends at the deepest point: 0%, 90% and 99%.
    assert_eq!(svg.matches("stroke=\"#f3f3f3\"").count(), 3);
    assert!(svg.contains(">99%</text>") && !svg.contains(">99.9%</text>"));
    assert_eq!(titles(&svg), ["add"]);
}

#[test]
fn each_second_adds_to_the_spectrum_and_to_its_p99_line() {
    let mut latencies = Latencies::default();
    latencies.add("add", 0, &histogram([1000, 2000]));
    latencies.add("add", 1, &histogram([40_000]));
    latencies.add("TOTAL", 1, &histogram([3000]));
    assert_eq!(latencies.spectra["add"].len(), 3);
    assert_eq!(latencies.spectra["add"].max(), histogram([40_000]).max());
    let p99: Vec<(u32, f64)> = latencies.p99_by_second["add"]
        .iter()
        .map(|(s, ms)| (*s, ms.round()))
        .collect();
    assert_eq!(p99, [(0, 2.0), (1, 40.0)]);
    // Second n is plotted at n + 1 (the end of that second).
    let svg = per_method_chart(&latencies.p99_by_second);
    assert_eq!(titles(&svg), ["TOTAL", "add"]);
    let lines = polylines(&svg);
    let x = |point: &str| point.split(',').next().unwrap().to_string();
    assert_eq!(lines[1].split(' ').map(x).collect::<Vec<_>>(), ["297.0", "530.0"]);
}

fn second(
    second: u32,
    calls_per_s: f64,
    p50_ms: f64,
    p99_ms: f64,
    errors: &[(&'static str, u64)],
) -> SecondRow {
    SecondRow {
        second,
        calls: 0,
        ok: 0,
        errors: 0,
        rps: calls_per_s,
        p50_ms,
        p99_ms,
        max_ms: 0.0,
        error_outcomes: errors.iter().copied().collect(),
        flows: 0,
        flow_errors: 0,
        server_cpu_cores: None,
        server_rss_bytes: None,
    }
}

pub(crate) fn meta() -> crate::report::RunMeta {
    use crate::report::{LoadMeta, RunMeta};
    let load = LoadMeta {
        model: "closed",
        rate: None,
        concurrency: Some(1),
        connections: 1,
        duration_s: Some(4.0),
        requests: None,
        warmup_s: 2.0,
        timeout_s: 1.0,
        grace_s: Some(1.0),
        threads: 1,
        stages: 2,
        shard: None,
        recorded_pace: false,
        pipeline: 1,
    };
    RunMeta {
        tool: "volley".into(),
        version: "0".into(),
        scenario: "demo <1>".into(),
        scenario_file: None,
        target: "http://127.0.0.1:1/".into(),
        transport: "http/1.1".into(),
        jsonrpc: "1.0".into(),
        tls: None,
        load,
        seed: 0,
        started_at: "T0".into(),
        ended_at: "T1".into(),
        header_names: Vec::new(),
    }
}

fn summary() -> RunReport {
    use crate::stats::{ControlEvent, LatencySummary, MethodSummary, StageSummary, Verdict, Warning};
    let method = |name: &str, calls: u64, ok: u64| MethodSummary {
        method: name.into(),
        calls,
        ok,
        errors: calls - ok,
        rps: 12.34,
        latency: LatencySummary {
            mean_ms: 1.0,
            p50_ms: 1.5,
            p90_ms: 2.25,
            p99_ms: 3.0,
            p999_ms: 4.0,
            max_ms: 5.125,
            timed: 4,
        },
        ..MethodSummary::default()
    };
    let (methods, total) = (
        vec![method("add", 10, 9), method("echo", 5, 5)],
        method("TOTAL", 15, 14),
    );
    let mut summary = RunSummary::of_methods(methods, total, 4.0);
    summary.verdict = Verdict {
        valid: false,
        reasons: vec!["fell behind".into(), "too few calls".into()],
    };
    summary.stages = [(0, 0.0), (1, 2.0)]
        .map(|(stage, start_s)| StageSummary {
            stage,
            start_s,
            end_s: start_s + 2.0,
            total: MethodSummary::default(),
        })
        .to_vec();
    summary.events = [(1.0, "during warmup"), (5.0, "rate 200")]
        .map(|(at_s, what)| ControlEvent {
            at_s,
            what: what.into(),
        })
        .to_vec();
    summary.timeseries = vec![
        second(0, 10.0, 1.0, 2.0, &[("timeout", 2)]),
        second(1, 20.0, 1.0, 4.0, &[("io", 1)]),
        second(2, 20.0, 1.0, 4.0, &[]),
        second(3, 40.0, 2.0, 8.0, &[]),
    ];
    summary.warnings = vec![Warning::new(
        crate::stats::WarningCode::Scenario,
        "the client & its load",
    )];
    let threshold = |expression: &str, shown: &str, passed| crate::thresholds::ThresholdResult {
        expression: expression.into(),
        measured: Some(1.0),
        unit: "ms",
        passed,
        shown: shown.into(),
        note: None,
    };
    RunReport {
        format: crate::report::FORMAT,
        meta: meta(),
        summary,
        thresholds: vec![
            threshold("p99 < 10ms", "3.000 ms", true),
            threshold("errors < 1", "1", false),
        ],
        captured: Vec::new(),
        race: None,
        shard: None,
    }
}

#[test]
fn the_page_says_the_verdict_thresholds_and_each_methods_figures() {
    let page = render(&summary(), &Latencies::default());
    assert!(page.contains("<title>volley · demo &lt;1&gt;</title>"));
    assert!(page.contains(
        "<p class=\"meta\">http://127.0.0.1:1/ (http/1.1, JSON-RPC 1.0) · closed model · 4.00 s measured · started T0</p>"
    ));
    assert!(page.contains(
        "<p class=\"invalid\"><b>verdict: invalid</b>: fell behind; too few calls · the server failed 7% of calls</p>"
    ));
    assert!(page.contains(
        "<tr><td><code>p99 &lt; 10ms</code></td><td>3.000 ms</td><td class=\"pass\">pass</td></tr>\n<tr><td><code>errors &lt; 1</code></td><td>1</td><td class=\"fail\">FAIL</td></tr>\n</table>"
    ));
    for row in [
        "<tr><td>add</td><td>10</td><td>9</td><td>1</td><td>12.3</td><td>1.500</td><td>2.250</td><td>3.000</td><td>4.000</td><td>5.125</td></tr>",
        "<tr><td>echo</td><td>5</td><td>5</td><td>0</td>",
        "<tr class=\"total\"><td>TOTAL</td><td>15</td><td>14</td><td>1</td>",
    ] {
        assert!(page.contains(row), "no {row}");
    }
    assert!(page.contains("<p class=\"warning\">warning: the client &amp; its load</p>\n</body></html>\n"));
    let mut valid = summary();
    valid.summary.verdict = crate::stats::Verdict {
        valid: true,
        reasons: vec![],
    };
    valid.thresholds = vec![];
    let page = render(&valid, &Latencies::default());
    assert!(page.contains("<p class=\"valid\"><b>verdict: valid</b> · the server failed 7% of calls</p>"));
    assert!(!page.contains("<th>threshold</th>") && !page.contains("class=\"invalid\""));
}

#[test]
fn the_time_charts_plot_each_second_with_stages_events_and_each_error_outcome() {
    let charts = time_charts(&summary().summary, 2.0);
    assert_eq!(charts.len(), 3);
    // Four seconds, plotted at 1 to 4: x = 64 + s/4 × 466.
    // Calls/s up to nice(40) = 50: y = 252 − v/50 × 216.
    assert_eq!(
        polylines(&charts[0]),
        ["180.5,208.8 297.0,165.6 413.5,165.6 530.0,79.2"]
    );
    // The second stage starts at 2 s; the event at 5 s of the run is at 3 s
    // of the measured part (2 s of warmup); one during the warmup is not shown.
    for svg in &charts {
        assert!(svg.contains("<line x1=\"297.0\" x2=\"297.0\" y1=\"36\" y2=\"252\" stroke=\"#888\" stroke-dasharray=\"4 3\"><title>stage 2</title>"));
        assert!(svg.contains("<line x1=\"413.5\" x2=\"413.5\" y1=\"36\" y2=\"252\" stroke=\"#888\" stroke-dasharray=\"4 3\"><title>rate 200</title>"));
        assert!(!svg.contains("stage 1") && !svg.contains("during warmup"));
    }
    assert_eq!(titles(&charts[1])[2..], ["p50", "p99"]);
    // y up to nice(8) = 10: p99 4 ms at 165.6, 8 ms at 79.2.
    assert_eq!(
        polylines(&charts[1])[1],
        "180.5,208.8 297.0,165.6 413.5,165.6 530.0,79.2"
    );
    // Each outcome that happened, by name, zero in the seconds it did not.
    assert_eq!(titles(&charts[2])[2..], ["io", "timeout"]);
    assert_eq!(
        polylines(&charts[2]),
        [
            "180.5,252.0 297.0,144.0 413.5,252.0 530.0,252.0",
            "180.5,36.0 297.0,252.0 413.5,252.0 530.0,252.0"
        ]
    );
    let mut quiet = summary();
    quiet.summary.timeseries = vec![second(0, 1.0, 0.0, 0.0, &[])];
    let charts = time_charts(&quiet.summary, 0.0);
    // Without a warmup the event at 1 s is inside the one second plotted.
    assert_eq!(titles(&charts[2]), ["during warmup", "errors"]);
    assert_eq!(polylines(&charts[2]), ["530.0,252.0"]);
}

#[test]
fn side_by_side_plots_a_tag_only_where_two_runs_have_it_and_colours_rows() {
    let a = BTreeMap::from([
        ("add".to_string(), histogram([1000])),
        ("only_a".to_string(), histogram([1000])),
        ("empty_b".to_string(), histogram([1000])),
    ]);
    let b = BTreeMap::from([
        ("add".to_string(), histogram([2000])),
        ("empty_b".to_string(), histogram([])),
    ]);
    let rows = ["REGRESSION", "fail", "improved", "same"].map(|v| CompareRow {
        cells: vec![format!("<{v}>"), "1".into()],
        verdict: v.into(),
    });
    let page = compare_page(&["method", "x"], &rows, &["a & b".into()], &a, &b);
    assert!(page.contains("<title>volley compare</title>"));
    assert!(page.contains("<table><tr><th>method</th><th>x</th></tr>\n<tr class=\"fail\"><td>&lt;REGRESSION&gt;</td><td>1</td></tr>\n<tr class=\"fail\"><td>&lt;fail&gt;</td>"));
    assert!(page.contains("<tr class=\"pass\"><td>&lt;improved&gt;</td><td>1</td></tr>\n<tr><td>&lt;same&gt;</td><td>1</td></tr>\n</table>\n<p>a &amp; b</p>"));
    assert_eq!(page.matches("<svg ").count(), 1);
    assert!(page.contains("aria-label=\"add: latency by percentile\""));
    assert_eq!(titles(&page)[1..], ["baseline", "current"]);
}

#[test]
fn a_sweep_draws_p50_and_p99_over_the_rate_achieved_per_target() {
    let one = sweep_chart(&[("node", vec![(200.0, 2.0, 8.0), (100.0, 1.0, 4.0)])]);
    assert!(one.contains("aria-label=\"Latency against throughput · node\""));
    assert_eq!(titles(&one), ["p50", "p99"]);
    // Sorted by rate: x = 64 + r/200 × 466; y up to 10.
    assert_eq!(
        polylines(&one),
        ["297.0,230.4 530.0,208.8", "297.0,165.6 530.0,79.2"]
    );
    let two = sweep_chart(&[("a", vec![(1.0, 1.0, 1.0)]), ("b", vec![(1.0, 1.0, 1.0)])]);
    assert_eq!(titles(&two), ["a p50", "a p99", "b p50", "b p99"]);
    assert!(two.contains("· a, b\""));
}
