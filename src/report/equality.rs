//! The targets' answers compared, as the table prints them and as
//! `report.html` shows them: per method and target, the calls that
//! differed, then each pointer they differed at on a line of its own, most
//! answers first, with the hint where every answer differed alike.

use std::fmt::Write as _;

use super::html::esc;
use crate::equality::{EqualityReport, FieldTally, Hint, MethodEquality};
use crate::rpc::same::DiffKind;

/// Pointers a row prints; `summary.json` holds them all.
const FIELDS_SHOWN: usize = 16;

/// The targets' answers compared: the findings, the share of requests
/// sampled, and the block pinned for `"latest"`, if one was.
pub type Compared<'a> = (&'a EqualityReport, f64, Option<&'a str>);

/// The line the comparison opens with: what was compared, and how much
/// differed.
fn headline((report, sample, pinned): Compared) -> String {
    let mut out = format!(
        "answers compared with the first target's (a {}% sample of the requests{}{}): {} calls, {} answered otherwise",
        sample * 100.0,
        pinned.map_or(String::new(), |b| format!(", \"latest\" pinned to block {b}")),
        match report.ignore_sets.is_empty() {
            true => String::new(),
            false => format!(", ignore sets: {}", report.ignore_sets.join(", ")),
        },
        report.compared,
        report.mismatched
    );
    if report.ignored > 0 {
        let _ = write!(out, ", {} ignored by a rule", report.ignored);
    }
    if report.not_compared > 0 {
        let _ = write!(
            out,
            ", {} not compared (unanswered on a target)",
            report.not_compared
        );
    }
    out
}

/// What differed at a pointer, in words, and the values it differed by.
fn said(field: &FieldTally, target: &str) -> (String, String) {
    let values = format!("({} against {})", field.first, field.other);
    match field.kind {
        DiffKind::Outcome => ("answered otherwise".into(), values),
        DiffKind::Missing => (format!("missing on {target}"), String::new()),
        DiffKind::Extra => (format!("only on {target}"), String::new()),
        DiffKind::Type => ("type differs".into(), values),
        DiffKind::Length => (
            "length differs".into(),
            format!("({} entries against {})", field.first, field.other),
        ),
        DiffKind::Value => ("differs".into(), values),
    }
}

/// A pointer as shown: the whole answer where it is empty.
fn pointer(field: &FieldTally) -> &str {
    match field.pointer.is_empty() {
        true => "(the answer)",
        false => &field.pointer,
    }
}

/// A row's pointers, each on a line of its own, aligned.
fn field_lines(out: &mut String, m: &MethodEquality) {
    let shown = &m.fields[..m.fields.len().min(FIELDS_SHOWN)];
    let said: Vec<(String, String)> = shown.iter().map(|f| said(f, &m.target)).collect();
    let width = shown
        .iter()
        .map(|f| pointer(f).chars().count())
        .max()
        .unwrap_or(0);
    let what_width = said.iter().map(|(w, _)| w.chars().count()).max().unwrap_or(0);
    let count_width = m.compared.to_string().len();
    for (field, (what, values)) in shown.iter().zip(&said) {
        let line = format!(
            "    {:<width$}  {what:<what_width$}  {:>count_width$} of {}  {values}",
            pointer(field),
            field.answers,
            m.compared,
        );
        let _ = writeln!(out, "{}", line.trim_end());
    }
    let more = m.fields.len() - shown.len();
    if more > 0 || m.fields_untallied > 0 {
        let _ = writeln!(
            out,
            "    … {more} more pointers in summary.json{}",
            match m.fields_untallied {
                0 => String::new(),
                n => format!(" ({n} differences past its 256 pointers not tallied)"),
            }
        );
    }
}

/// A hint's lines: what to write in `[equality]`, and what each leaves out.
fn hint_lines(hint: &Hint) -> Vec<String> {
    let mut lines = vec![
        "hint: every answer differed at these pointers; if that is expected, [equality] leaves them out with"
            .into(),
    ];
    for remedy in &hint.remedies {
        let what = match remedy.about {
            Some(about) => format!("{}: {} ({about})", remedy.write, remedy.pointers.join(", ")),
            None => format!("a rule {}: {}", remedy.write, remedy.pointers.join(", ")),
        };
        lines.push(format!("  {what}"));
    }
    lines
}

/// The hint of a row, if it has one.
fn hint_of<'r>(report: &'r EqualityReport, m: &MethodEquality) -> Option<&'r Hint> {
    (report.hints.iter()).find(|h| h.method == m.method && h.target == m.target)
}

/// The comparison as the table prints it.
pub fn table(compared: Compared) -> String {
    let report = compared.0;
    let mut out = format!("\n{}\n", headline(compared));
    for m in &report.methods {
        if m.compared == 0 && m.ignored > 0 {
            let _ = writeln!(
                out,
                "  {:<24} {:<16} {:>7} ignored (a rule without a pointer: its answers are not compared)",
                m.method, m.target, m.ignored
            );
            continue;
        }
        let _ = writeln!(
            out,
            "  {:<24} {:<16} {:>7} compared {:>7} differ ({:.2}%)",
            m.method,
            m.target,
            m.compared,
            m.mismatched,
            m.mismatch_rate * 100.0
        );
        field_lines(&mut out, m);
        if let Some(example) = m.examples.first() {
            let _ = writeln!(out, "    again: {}", example.reproduce);
        }
        for line in hint_of(report, m).map(hint_lines).unwrap_or_default() {
            let _ = writeln!(out, "    {line}");
        }
    }
    out
}

/// The comparison as `report.html` shows it: a table of every pointer
/// tallied (the page has room for them all), the hints, and a line that
/// asks each target again.
pub fn html(compared: Compared) -> String {
    let report = compared.0;
    let mut out = format!(
        "<h2>Answers compared</h2>\n<p>{}</p>\n<table><tr>",
        esc(&headline(compared))
    );
    let head = [
        "method",
        "target",
        "compared",
        "differ",
        "pointer",
        "difference",
        "answers",
        "values",
    ];
    for name in head {
        let _ = write!(out, "<th>{name}</th>");
    }
    out.push_str("</tr>\n");
    let mut after = String::new();
    for m in &report.methods {
        let row = [m.method.clone(), m.target.clone(), m.compared.to_string()];
        let row = row.map(|cell| esc(&cell));
        let differ = match m.compared == 0 && m.ignored > 0 {
            true => format!("{} ignored", m.ignored),
            false => format!("{} ({:.2}%)", m.mismatched, m.mismatch_rate * 100.0),
        };
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{differ}</td>",
            row[0], row[1], row[2]
        );
        if m.fields.is_empty() {
            out.push_str("<td></td><td></td><td></td><td></td></tr>\n");
        }
        for (i, field) in m.fields.iter().enumerate() {
            if i > 0 {
                out.push_str("<tr><td></td><td></td><td></td><td></td>");
            }
            let (what, values) = said(field, &m.target);
            let _ = writeln!(
                out,
                "<td>{}</td><td>{}</td><td>{} of {}</td><td>{}</td></tr>",
                esc(pointer(field)),
                esc(&what),
                field.answers,
                m.compared,
                esc(&values)
            );
        }
        let label = esc(&format!("{} on {}", m.method, m.target));
        if let Some(hint) = hint_of(report, m) {
            let lines = hint_lines(hint);
            let _ = write!(after, "<p>{label}: {}</p>\n<ul>", esc(&lines[0]));
            for line in &lines[1..] {
                let _ = write!(after, "<li>{}</li>", esc(line.trim_start()));
            }
            after.push_str("</ul>\n");
        }
        if let Some(example) = m.examples.first() {
            let _ = writeln!(after, "<p>{label}: again: {}</p>", esc(&example.reproduce));
        }
    }
    out.push_str("</table>\n");
    out.push_str(&after);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_equality_line_says_what_was_not_compared_only_when_something_was_not() {
        let mut report = EqualityReport {
            compared: 10,
            mismatched: 1,
            ..Default::default()
        };
        let line = table((&report, 0.5, Some("0x10")));
        assert_eq!(
            line,
            "\nanswers compared with the first target's (a 50% sample of the requests, \"latest\" pinned to block 0x10): 10 calls, 1 answered otherwise\n"
        );
        report.not_compared = 1;
        let line = table((&report, 1.0, None));
        assert!(
            line.ends_with("10 calls, 1 answered otherwise, 1 not compared (unanswered on a target)\n"),
            "{line}"
        );
    }

    #[test]
    fn a_method_a_rule_ignores_is_said_to_be_ignored_not_compared() {
        let report = EqualityReport {
            compared: 10,
            ignored: 4,
            methods: vec![crate::equality::MethodEquality {
                method: "eth_blockNumber".into(),
                target: "b".into(),
                ignored: 4,
                ..Default::default()
            }],
            ..Default::default()
        };
        let table = table((&report, 1.0, None));
        assert!(
            table.contains("10 calls, 0 answered otherwise, 4 ignored by a rule\n"),
            "{table}"
        );
        assert!(
            table.contains(
                "eth_blockNumber          b                      4 ignored (a rule without a pointer"
            ),
            "{table}"
        );
        assert!(!table.contains("compared       0 differ"), "{table}");
    }

    #[test]
    fn a_row_prints_sixteen_pointers_and_says_where_the_rest_are() {
        let fields = (0..18)
            .map(|i| FieldTally {
                pointer: format!("/result/f{i:02}"),
                kind: DiffKind::Extra,
                answers: 3,
                first: String::new(),
                other: "1".into(),
            })
            .collect();
        let report = EqualityReport {
            compared: 3,
            mismatched: 3,
            methods: vec![MethodEquality {
                method: "m".into(),
                target: "b".into(),
                compared: 3,
                mismatched: 3,
                fields,
                ..Default::default()
            }],
            ..Default::default()
        };
        let table = table((&report, 1.0, None));
        let lines: Vec<&str> = table.lines().filter(|l| l.starts_with("    ")).collect();
        assert_eq!(lines.len(), 17, "{table}");
        assert_eq!(lines[0], "    /result/f00  only on b  3 of 3");
        assert_eq!(lines[15], "    /result/f15  only on b  3 of 3");
        assert_eq!(lines[16], "    … 2 more pointers in summary.json");
    }
}
