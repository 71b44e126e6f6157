//! Fitting the dashboard to the terminal: what gets the rows when there
//! are too few (a terminal of 80×24 is common), and lines of parts that
//! wrap between parts, never inside one, so that no figure is cut.

use ratatui::text::{Line, Span};

/// Rows the charts need to say anything: fewer, and they give their rows
/// to the errors.
const MIN_CHARTS: u16 = 8;

/// The rows of the one-target dashboard, top to bottom.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rows {
    pub header: u16,
    pub charts: u16,
    pub methods: u16,
    pub bottom: u16,
    pub keys: u16,
}

impl Rows {
    /// Shares `height` out: the header and the keys whole, then the methods
    /// table (every method, as far as the rows go), then the errors and
    /// thresholds, then the charts, which go first when rows are short.
    pub fn share(height: u16, header: u16, methods: u16, bottom: u16) -> Rows {
        let keys = 1;
        let header = header.min(height.saturating_sub(keys));
        let mut left = height.saturating_sub(header + keys);
        // The errors keep a line (and its borders) whatever the methods.
        let methods = methods.min(left.saturating_sub(3));
        left -= methods;
        let (charts, bottom) = match left.checked_sub(bottom) {
            Some(charts) if charts >= MIN_CHARTS => (charts, bottom),
            _ => (0, left),
        };
        Rows {
            header,
            charts,
            methods,
            bottom,
            keys,
        }
    }
}

/// `parts` laid out in lines at most `width` wide, `separator` between
/// parts on a line: a line breaks between parts only, so each part is
/// whole (one wider than `width` has a line of its own).
pub fn wrap<'a>(parts: Vec<Span<'a>>, separator: &'a str, width: u16) -> Vec<Line<'a>> {
    let width = usize::from(width);
    let gap = Span::raw(separator).width();
    let mut lines: Vec<Line> = Vec::new();
    let mut used = 0;
    for part in parts {
        let wide = part.width();
        match lines.last_mut() {
            Some(line) if used + gap + wide <= width => {
                line.spans.push(Span::raw(separator));
                line.spans.push(part);
                used += gap + wide;
            }
            _ => {
                lines.push(Line::from(vec![part]));
                used = wide;
            }
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_rows_go_from_the_charts_first_then_the_errors() {
        // 80×24, six methods (and the header, TOTAL and borders: 10 rows).
        let rows = Rows::share(24, 5, 10, 6);
        assert_eq!((rows.header, rows.methods, rows.keys), (5, 10, 1));
        assert_eq!((rows.charts, rows.bottom), (0, 8));
        // Tall enough: every part as asked, the charts the rest.
        let rows = Rows::share(44, 5, 10, 6);
        assert_eq!((rows.charts, rows.bottom), (22, 6));
        // Too many methods: the errors keep three rows.
        let rows = Rows::share(24, 5, 40, 6);
        assert_eq!((rows.methods, rows.bottom), (15, 3));
    }

    #[test]
    fn lines_break_between_parts_only() {
        let parts = ["calls 5000", "errors 37", "in flight 17"]
            .map(Span::raw)
            .to_vec();
        let text = |lines: Vec<Line>| lines.iter().map(|l| l.to_string()).collect::<Vec<_>>();
        assert_eq!(
            text(wrap(parts.clone(), " · ", 80)),
            ["calls 5000 · errors 37 · in flight 17"]
        );
        assert_eq!(
            text(wrap(parts, " · ", 25)),
            ["calls 5000 · errors 37", "in flight 17"]
        );
    }
}
