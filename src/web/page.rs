//! The live page: one self-contained document (its style is
//! `report.html`'s, its script inline; it fetches nothing but `/events`
//! and, with `--web-control`, its buttons' `/control/...`), redrawn from
//! each event. Every text from an event goes in as text, never as markup.
//! The same document, drawn from the final event and opening no stream, is
//! the page saved into the results directory at the end.

use crate::report::html::{COLORS, STYLE};

/// What the page adds to `report.html`'s style.
const MORE_STYLE: &str = "h2{font-size:16px;margin:18px 0 4px}.pending{color:#9a6700}\
.status{padding:4px 8px;background:#f6f8fa;border:1px solid #e5e5e5;display:inline-block}\
.status.final{background:#dafbe1;border-color:#1a7f37}.status.lost{background:#fff8c5;border-color:#9a6700}\
td.url,#targets th:nth-child(2){text-align:left}td.url{color:#555}td.name{font-weight:600}\
#controls button{margin-right:6px}#end .verdict{font-weight:600}#end ul{margin:4px 0 8px}\
.histograms{display:flex;flex-wrap:wrap;gap:16px}";

/// Where the page is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Served at `/`: it follows `/events`; `control`, its buttons steer.
    Live { control: bool },
    /// Saved as `live.html` beside the result files, which it links to
    /// where they lie.
    Saved,
}

/// The page, whole, drawn at once from `latest` (the latest event's JSON)
/// and then, live, from each event.
pub fn page(latest: &str, mode: Mode) -> String {
    let colors = COLORS.map(|c| format!("\"{c}\"")).join(",");
    // Inside a script, `</` could end it: JSON allows `<\/` for it.
    let latest = latest.replace("</", "<\\/");
    let saved = mode == Mode::Saved;
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>volley · live</title>\n\
         <style>{STYLE}{MORE_STYLE}</style></head><body>\n{BODY}<script>\nconst COLORS=[{colors}];\n\
         const SAVED={saved};\nconst LATEST={latest};\n{SCRIPT}</script></body></html>\n"
    )
}

const BODY: &str = r##"<h1 id="title">volley · live</h1>
<p class="meta" id="meta">connecting to /events…</p>
<p><span id="status" class="status">waiting for the first figures…</span></p>
<p id="controls" hidden><button data-steer="pause">pause</button><button data-steer="resume">resume</button><button data-steer="lower">target −10%</button><button data-steer="raise">target +10%</button><span id="steered"></span></p>
<div id="end" hidden><h2>Results</h2><div id="verdicts"></div><p>Result files: <span id="files"></span></p></div>
<h2>Targets (calls/s, p50 and p99: the last second; the ratios: the whole run to the first target)</h2>
<table id="targets"><thead><tr><th>target</th><th>url</th><th>state</th><th>elapsed</th><th>calls/s</th><th>p50 ms</th><th>p99 ms</th><th>errors/s</th><th>in flight</th><th>calls</th><th>errors</th><th>error %</th><th>calls/s ×</th><th>p50 ×</th><th>p99 ×</th></tr></thead><tbody></tbody></table>
<div class="charts"><svg id="rate-chart" viewBox="0 0 560 300" width="560" height="300" role="img" aria-label="calls/s"></svg><svg id="latency-chart" viewBox="0 0 560 300" width="560" height="300" role="img" aria-label="latency"></svg></div>
<h2>Latency percentiles (ms)</h2>
<table id="spectrum"><thead><tr><th>target</th><th>over</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th></tr></thead><tbody></tbody></table>
<h2>Latency histogram (whole run so far)</h2>
<div id="histograms" class="histograms"></div>
<h2>Subscriptions and notifications</h2>
<table id="subscriptions"><thead><tr><th>target</th><th>subscriptions</th><th>notifications</th><th>messages that answered no call</th></tr></thead><tbody></tbody></table>
<h2>Errors a second by outcome (the last second)</h2>
<table id="errors"><thead><tr><th>target</th><th>outcome</th><th>errors/s</th></tr></thead><tbody></tbody></table>
<h2>Methods (whole run so far)</h2>
<table id="methods"><thead><tr><th>method</th><th>target</th><th>calls</th><th>errors</th><th>error %</th><th>calls/s</th><th>p50 ms</th><th>p99 ms</th><th>max ms</th></tr></thead><tbody></tbody></table>
<div class="charts"><svg id="method-rate-chart" viewBox="0 0 560 300" width="560" height="300" role="img" aria-label="calls/s by method"></svg><svg id="method-latency-chart" viewBox="0 0 560 300" width="560" height="300" role="img" aria-label="mean latency by method"></svg></div>
<h2>Thresholds so far</h2>
<table id="thresholds"><thead><tr><th>target</th><th>threshold</th><th>value</th><th></th></tr></thead><tbody></tbody></table>
"##;

/// The script: it draws each event (`page.js`).
const SCRIPT: &str = include_str!("page.js");

#[cfg(test)]
mod tests {
    use super::{page, Mode};

    #[test]
    fn the_page_fetches_nothing_but_its_events_and_its_buttons() {
        let live = Mode::Live { control: false };
        let page = page(
            "{\"kind\":\"tick\",\"scenario\":\"</script><b>\",\"targets\":[]}",
            live,
        );
        assert!(page.contains("const LATEST={\"kind\":\"tick\",\"scenario\":\"<\\/script><b>\""));
        assert_eq!(
            page.matches("</script>").count(),
            1,
            "the data cannot end the script"
        );
        assert!(page.contains("new EventSource(\"/events\")"));
        assert!(page.contains("fetch(\"/control/\" + button.dataset.steer, { method: \"POST\" })"));
        for outside in [
            "http://",
            "https://",
            "src=",
            "href=",
            "@import",
            "url(",
            "fetch(",
            "EventSource(",
        ] {
            let found: Vec<&str> = page.lines().filter(|l| l.contains(outside)).collect();
            // The one `http://` is SVG's namespace name, which is never
            // fetched; the stream and the buttons are the page's own.
            let allowed = |l: &&str| match outside {
                "http://" => l.contains("const W = 560"),
                "fetch(" => l.contains("fetch(\"/control/\""),
                "EventSource(" => l.contains("new EventSource(\"/events\")"),
                _ => false,
            };
            assert!(found.iter().all(allowed), "{outside}: {found:?}");
        }
        assert!(!page.contains("innerHTML"), "text goes in as text");
        assert!(page.contains("const SAVED=false;"));
    }

    #[test]
    fn the_saved_page_says_so_and_opens_no_stream() {
        let saved = page("{\"kind\":\"final\",\"targets\":[]}", Mode::Saved);
        assert!(saved.contains("const SAVED=true;"));
        assert!(saved.contains("if (!SAVED && !(LATEST && LATEST.kind === \"final\"))"));
    }
}
