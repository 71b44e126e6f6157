//! The head race across targets as the side-by-side table and
//! `report.html` show it: who delivered each head first, who missed any,
//! and how far behind the first each target was, with the resolution the
//! arrivals were timed at.

use std::fmt::Write as _;

use super::html::esc;
use super::targets::TargetRun;
use crate::stats::race::{RaceFigures, MAX_HEADS};

/// The race's figures of each target, when every run has them.
fn raced<'a>(runs: &[TargetRun<'a>]) -> Option<Vec<(&'a str, &'a RaceFigures)>> {
    runs.iter().map(|run| Some((run.name, run.race?))).collect()
}

/// What was raced and how finely: the line above the figures.
fn headline(race: &RaceFigures) -> String {
    let timed = match race.resolution_ms {
        Some(ms) => format!(
            "resolution {ms} ms: each target polled at least every {ms} ms (each wait drawn from {} to {ms} ms), so an arrival is known only to within a poll",
            ms / 2.0
        ),
        None => "each notification timed as it arrived".to_string(),
    };
    format!(
        "head race: \"{}\" of {}'s results, {} heads raced; {timed}",
        race.pointer, race.source, race.tally.heads
    )
}

fn share(part: u64, whole: u64) -> String {
    match whole {
        0 => "-".to_string(),
        _ => format!("{:.1}%", part as f64 * 100.0 / whole as f64),
    }
}

/// Each lag figure, `-` where the target delivered no head.
fn lag_cells(race: &RaceFigures) -> [String; 4] {
    match race.tally.lag_ms {
        Some(lag) => [lag.p50, lag.p90, lag.p99, lag.max].map(|ms| format!("{ms:.3}")),
        None => std::array::from_fn(|_| "-".to_string()),
    }
}

/// The notes under the figures: a cap reached, values not found.
fn notes(raced: &[(&str, &RaceFigures)]) -> Vec<String> {
    let mut notes = Vec::new();
    for (name, race) in raced {
        if race.capped {
            notes.push(format!(
                "{name} kept {MAX_HEADS} distinct heads, the most a target keeps: heads after that were not raced, for any target"
            ));
        }
        if race.unreadable > 0 {
            notes.push(format!(
                "{name}: {} results had no value at \"{}\" (or a null, or one over 1 KiB): not raced",
                race.unreadable, race.pointer
            ));
        }
    }
    notes
}

/// The race's lines in the side-by-side table; empty without a race.
pub fn table(runs: &[TargetRun]) -> String {
    raced(runs).map_or_else(String::new, |raced| table_of(&raced))
}

/// The race's section of `report.html`; empty without a race.
pub fn html(runs: &[TargetRun]) -> String {
    raced(runs).map_or_else(String::new, |raced| html_of(&raced))
}

fn table_of(raced: &[(&str, &RaceFigures)]) -> String {
    let mut out = String::new();
    let Some((_, first)) = raced.first() else {
        return out;
    };
    let width = raced.iter().map(|(n, _)| n.len()).max().unwrap_or(6).max(6);
    let _ = writeln!(out, "\n{}", headline(first));
    let _ = writeln!(
        out,
        "{:<width$} {:>14} {:>7} {:>10} {:>10} {:>10} {:>10}",
        "target", "first", "missed", "lag p50 ms", "p90 ms", "p99 ms", "max ms"
    );
    for (name, race) in raced {
        let first = format!(
            "{} ({})",
            race.tally.first,
            share(race.tally.first, race.tally.heads)
        );
        let [p50, p90, p99, max] = lag_cells(race);
        let _ = writeln!(
            out,
            "{name:<width$} {first:>14} {:>7} {p50:>10} {p90:>10} {p99:>10} {max:>10}",
            race.tally.missed
        );
    }
    for note in notes(raced) {
        let _ = writeln!(out, "{note}");
    }
    out
}

fn html_of(raced: &[(&str, &RaceFigures)]) -> String {
    let mut out = String::new();
    let Some((_, first)) = raced.first() else {
        return out;
    };
    let _ = write!(
        out,
        "<h2>Head race</h2>\n<p>{}</p>\n<table><tr>",
        esc(&headline(first))
    );
    for name in [
        "target",
        "heads",
        "first",
        "missed",
        "lag p50 ms",
        "p90 ms",
        "p99 ms",
        "max ms",
    ] {
        let _ = write!(out, "<th>{name}</th>");
    }
    out.push_str("</tr>\n");
    for (name, race) in raced {
        let t = &race.tally;
        let first = format!("{} ({})", t.first, share(t.first, t.heads));
        let cells = [name.to_string(), t.heads.to_string(), first, t.missed.to_string()];
        out.push_str("<tr>");
        for cell in cells.iter().chain(lag_cells(race).iter()) {
            let _ = write!(out, "<td>{}</td>", esc(cell));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
    for note in notes(raced) {
        let _ = writeln!(out, "<p>{}</p>", esc(&note));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::race::{LagMs, RaceTally};

    fn figures(first: u64, missed: u64, lag: Option<f64>, every: Option<f64>) -> RaceFigures {
        RaceFigures {
            source: "subscribe[0]".into(),
            pointer: "/hash".into(),
            resolution_ms: every,
            tally: RaceTally {
                heads: 20,
                first,
                missed,
                lag_ms: lag.map(|ms| LagMs {
                    p50: ms,
                    p90: ms,
                    p99: ms,
                    max: ms,
                }),
            },
            capped: false,
            unreadable: 0,
        }
    }

    #[test]
    fn each_target_has_a_row_with_its_share_first_and_its_lag() {
        let (a, b) = (figures(19, 0, Some(0.0), None), figures(1, 2, Some(40.5), None));
        let raced = [("fast", &a), ("slow", &b)];
        let text = table_of(&raced);
        assert!(
            text.contains("\"/hash\" of subscribe[0]'s results, 20 heads raced; each notification timed"),
            "{text}"
        );
        assert!(
            text.contains("fast       19 (95.0%)       0      0.000"),
            "{text}"
        );
        assert!(
            text.contains("slow         1 (5.0%)       2     40.500"),
            "{text}"
        );
        let page = html_of(&raced);
        assert!(
            page.contains("<td>slow</td><td>20</td><td>1 (5.0%)</td><td>2</td><td>40.500</td>"),
            "{page}"
        );
    }

    #[test]
    fn a_polled_race_states_its_resolution_and_a_silent_target_has_no_lag() {
        let polled = figures(0, 20, None, Some(100.0));
        let text = table_of(&[("a", &polled)]);
        assert!(
            text.contains("resolution 100 ms: each target polled at least every 100 ms (each wait drawn from 50 to 100 ms)"),
            "{text}"
        );
        assert!(text.contains("-          -          -          -"), "{text}");
    }

    #[test]
    fn a_cap_reached_and_values_not_found_are_said() {
        let mut race = figures(20, 0, Some(0.0), None);
        (race.capped, race.unreadable) = (true, 3);
        let text = table_of(&[("a", &race)]);
        assert!(text.contains("a kept 100000 distinct heads"), "{text}");
        assert!(text.contains("a: 3 results had no value at \"/hash\""), "{text}");
    }
}
