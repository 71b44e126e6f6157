//! The live page: one self-contained document (its style is
//! `report.html`'s, its script inline; it fetches nothing but `/events`),
//! redrawn from each event. Every text from an event goes in as text, never
//! as markup.

use crate::report::html::{COLORS, STYLE};

/// What the page adds to `report.html`'s style.
const MORE_STYLE: &str = "h2{font-size:16px;margin:18px 0 4px}.pending{color:#9a6700}\
.status{padding:4px 8px;background:#f6f8fa;border:1px solid #e5e5e5;display:inline-block}\
.status.final{background:#dafbe1;border-color:#1a7f37}.status.lost{background:#fff8c5;border-color:#9a6700}\
td.url,#targets th:nth-child(2){text-align:left}td.url{color:#555}td.name{font-weight:600}";

/// The page, whole, drawn at once from `latest` (the latest event's JSON)
/// and then from each event.
pub fn page(latest: &str) -> String {
    let colors = COLORS.map(|c| format!("\"{c}\"")).join(",");
    // Inside a script, `</` could end it: JSON allows `<\/` for it.
    let latest = latest.replace("</", "<\\/");
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>volley · live</title>\n\
         <style>{STYLE}{MORE_STYLE}</style></head><body>\n{BODY}<script>\nconst COLORS=[{colors}];\n\
         const LATEST={latest};\n{SCRIPT}</script></body></html>\n"
    )
}

const BODY: &str = r##"<h1 id="title">volley · live</h1>
<p class="meta" id="meta">connecting to /events…</p>
<p><span id="status" class="status">waiting for the first figures…</span></p>
<h2>Targets (calls/s, p50 and p99: the last second; the ratios: the whole run to the first target)</h2>
<table id="targets"><thead><tr><th>target</th><th>url</th><th>state</th><th>elapsed</th><th>calls/s</th><th>p50 ms</th><th>p99 ms</th><th>errors/s</th><th>in flight</th><th>calls</th><th>errors</th><th>error %</th><th>calls/s ×</th><th>p50 ×</th><th>p99 ×</th></tr></thead><tbody></tbody></table>
<div class="charts"><svg id="rate-chart" viewBox="0 0 560 300" width="560" height="300" role="img" aria-label="calls/s"></svg><svg id="latency-chart" viewBox="0 0 560 300" width="560" height="300" role="img" aria-label="latency"></svg></div>
<h2>Errors a second by outcome (the last second)</h2>
<table id="errors"><thead><tr><th>target</th><th>outcome</th><th>errors/s</th></tr></thead><tbody></tbody></table>
<h2>Methods (whole run so far)</h2>
<table id="methods"><thead><tr><th>method</th><th>target</th><th>calls</th><th>errors</th><th>error %</th><th>calls/s</th><th>p50 ms</th><th>p99 ms</th><th>max ms</th></tr></thead><tbody></tbody></table>
<h2>Thresholds so far</h2>
<table id="thresholds"><thead><tr><th>target</th><th>threshold</th><th>value</th><th></th></tr></thead><tbody></tbody></table>
"##;

const SCRIPT: &str = r##""use strict";
const W = 560, H = 300, L = 64, R = 30, T = 36, B = 48, SVG = "http://www.w3.org/2000/svg";
const $ = (id) => document.getElementById(id);
let finished = false;
const known = (v) => v !== null && v !== undefined && Number.isFinite(v);
const fixed = (v, digits) => known(v) ? v.toFixed(digits) : "–";
const times = (v) => known(v) ? v.toFixed(2) + "x" : "–";

function row(cells, classes) {
  const tr = document.createElement("tr");
  cells.forEach((text, i) => {
    const td = document.createElement("td");
    td.textContent = String(text);
    if (classes && classes[i]) td.className = classes[i];
    tr.appendChild(td);
  });
  return tr;
}

function fill(id, rows, empty) {
  const body = $(id).tBodies[0];
  const cols = $(id).tHead.rows[0].cells.length;
  if (rows.length === 0) {
    const tr = row([empty]);
    tr.cells[0].colSpan = cols;
    rows = [tr];
  }
  body.replaceChildren(...rows);
}

function elapsed(t) {
  if (!known(t.elapsed_s)) return "–";
  const now = t.elapsed_s.toFixed(1) + " s";
  return known(t.planned_s) ? now + " / " + t.planned_s.toFixed(1) + " s" : now;
}

function state(t) {
  let text = t.phase;
  if (t.paused) text += " (paused)";
  if (t.behind) text += " (behind schedule)";
  return text;
}

function targets(ev) {
  fill("targets", ev.targets.map((t) => {
    const s = t.last_second, w = t.whole, r = t.ratio;
    const tr = row([
      t.name, t.url, state(t), elapsed(t),
      fixed(s && s.calls_per_s, 1), fixed(s && s.p50_ms, 3), fixed(s && s.p99_ms, 3),
      s ? s.errors : "–", known(t.in_flight) ? t.in_flight : "–",
      w ? w.calls : "–", w ? w.errors : "–", fixed(w && w.error_rate * 100, 2),
      times(r && r.calls_per_s), times(r && r.p50), times(r && r.p99),
    ], ["name", "url"]);
    tr.dataset.target = t.name;
    return tr;
  }), "no targets");
}

function errors(ev) {
  const rows = [];
  for (const t of ev.targets) {
    const by = (t.last_second && t.last_second.errors_by_outcome) || {};
    for (const [outcome, n] of Object.entries(by)) rows.push(row([t.name, outcome, n], ["name"]));
  }
  fill("errors", rows, "no errors in the last second");
}

function methods(ev) {
  const rows = [];
  const names = [];
  for (const t of ev.targets) for (const m of t.methods) if (!names.includes(m.method)) names.push(m.method);
  for (const name of names) {
    for (const t of ev.targets) {
      const m = t.methods.find((x) => x.method === name);
      if (!m) continue;
      rows.push(row([name, t.name, m.calls, m.errors, fixed(m.error_rate * 100, 2), fixed(m.calls_per_s, 1),
        fixed(m.p50_ms, 3), fixed(m.p99_ms, 3), fixed(m.max_ms, 3)]));
    }
  }
  fill("methods", rows, "no calls yet");
}

function thresholds(ev) {
  const rows = [];
  for (const t of ev.targets) {
    for (const th of t.thresholds) {
      const word = th.state === "fail" ? "FAIL" : th.state;
      rows.push(row([t.name, th.expression, th.value, word], ["name", "", "", th.state]));
    }
  }
  fill("thresholds", rows, "no thresholds");
}

function el(name, attrs, text) {
  const node = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = String(text);
  return node;
}

function chart(id, title, yLabel, lines) {
  const svg = $(id);
  const points = lines.flatMap((l) => l.points);
  const xs = points.map((p) => p[0]), ys = points.map((p) => p[1]).filter(known);
  const x0 = xs.length ? Math.min(...xs) - 1 : 0, x1 = xs.length ? Math.max(...xs) : 1;
  const yMax = (ys.length ? Math.max(...ys) : 0) * 1.1 || 1;
  const pw = W - L - R, ph = H - T - B;
  const x = (v) => L + (x1 > x0 ? (v - x0) / (x1 - x0) : 0) * pw;
  const y = (v) => T + ph - (v / yMax) * ph;
  const nodes = [el("text", { x: L, y: 20, style: "font-weight:600;font-size:14px" }, title)];
  for (let i = 0; i <= 4; i++) {
    const v = (yMax * i) / 4;
    nodes.push(el("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), stroke: "#eee" }));
    nodes.push(el("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end" }, v >= 100 ? v.toFixed(0) : v.toPrecision(2)));
  }
  for (let i = 0; i <= 5 && x1 > x0; i++) {
    const v = Math.round(x0 + ((x1 - x0) * i) / 5);
    nodes.push(el("line", { x1: x(v), x2: x(v), y1: T, y2: T + ph, stroke: "#f3f3f3" }));
    nodes.push(el("text", { x: x(v), y: T + ph + 16, "text-anchor": "middle" }, v));
  }
  nodes.push(el("line", { x1: L, x2: L, y1: T, y2: T + ph, stroke: "#999" }));
  nodes.push(el("line", { x1: L, x2: W - R, y1: T + ph, y2: T + ph, stroke: "#999" }));
  nodes.push(el("text", { x: L + pw / 2, y: H - 10, "text-anchor": "middle" }, "seconds"));
  nodes.push(el("text", { transform: "translate(14 " + (T + ph / 2) + ") rotate(-90)", "text-anchor": "middle" }, yLabel));
  let lx = L + 10, ly = T + 14;
  lines.forEach((line) => {
    const pts = line.points.filter((p) => known(p[1])).map((p) => x(p[0]).toFixed(1) + "," + y(p[1]).toFixed(1));
    const attrs = { fill: "none", stroke: line.color, "stroke-width": 2, points: pts.join(" ") };
    if (line.dashed) attrs["stroke-dasharray"] = "4 3";
    nodes.push(el("polyline", attrs));
    const width = 24 + 7 * line.name.length;
    if (lx + width > W - R) { lx = L + 10; ly += 16; }
    nodes.push(el("rect", { x: lx, y: ly - 9, width: 10, height: 10, fill: line.color }));
    nodes.push(el("text", { x: lx + 14, y: ly }, line.name));
    lx += width;
  });
  svg.replaceChildren(...nodes);
}

function charts(ev) {
  const color = (i) => COLORS[i % COLORS.length];
  chart("rate-chart", "calls/s", "calls/s", ev.targets.map((t, i) => (
    { name: t.name, color: color(i), points: t.history.map((h) => [h[0], h[1]]) })));
  chart("latency-chart", "latency ms (p99 solid, p50 dashed)", "ms", ev.targets.flatMap((t, i) => [
    { name: t.name + " p99", color: color(i), points: t.history.map((h) => [h[0], h[3]]) },
    { name: t.name + " p50", color: color(i), dashed: true, points: t.history.map((h) => [h[0], h[2]]) },
  ]));
}

function render(ev) {
  $("title").textContent = "volley · " + ev.scenario + " · live";
  const n = ev.targets.length;
  const how = n > 1 ? (ev.parallel ? " at once" : " one after another") : "";
  const shard = known(ev.shard) ? " · shard " + ev.shard : "";
  $("meta").textContent = n + (n === 1 ? " target" : " targets") + how + shard + " · updated every second";
  targets(ev);
  errors(ev);
  methods(ev);
  thresholds(ev);
  charts(ev);
  const status = $("status");
  if (ev.kind === "final") {
    status.textContent = "finished: the final figures";
    status.className = "status final";
  } else {
    status.textContent = "running: live figures";
    status.className = "status";
  }
}

if (LATEST) render(LATEST);
const source = new EventSource("/events");
source.onmessage = (message) => {
  let ev;
  try { ev = JSON.parse(message.data); } catch (_) { return; }
  render(ev);
  if (ev.kind === "final") {
    finished = true;
    source.close();
  }
};
source.onerror = () => {
  if (finished) return;
  const status = $("status");
  status.textContent = "connection lost: reconnecting…";
  status.className = "status lost";
};
"##;

#[cfg(test)]
mod tests {
    use super::page;

    #[test]
    fn the_page_fetches_nothing_but_its_events() {
        let page = page("{\"kind\":\"tick\",\"scenario\":\"</script><b>\",\"targets\":[]}");
        assert!(page.contains("const LATEST={\"kind\":\"tick\",\"scenario\":\"<\\/script><b>\""));
        assert_eq!(
            page.matches("</script>").count(),
            1,
            "the data cannot end the script"
        );
        assert!(page.contains("new EventSource(\"/events\")"));
        for outside in ["http://", "https://", "src=", "href=", "@import", "url("] {
            let found: Vec<&str> = page.lines().filter(|l| l.contains(outside)).collect();
            // The one `http://` is SVG's namespace name, which is never fetched.
            let allowed = |l: &&str| l.contains("const W = 560") && outside == "http://";
            assert!(found.iter().all(allowed), "{outside}: {found:?}");
        }
        assert!(!page.contains("innerHTML"), "text goes in as text");
    }
}
