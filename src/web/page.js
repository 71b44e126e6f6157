"use strict";
// The live page's script: each event redraws every table and chart.
// Every text from an event goes in as text (textContent), never as markup.
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

function spectrum(ev) {
  const rows = [];
  for (const t of ev.targets) {
    for (const [over, l] of [["last second", t.latency.last_second], ["whole run", t.latency.whole]]) {
      if (!l) continue;
      rows.push(row([t.name, over, fixed(l.p50_ms, 3), fixed(l.p90_ms, 3), fixed(l.p99_ms, 3),
        fixed(l.p999_ms, 3), fixed(l.max_ms, 3)], ["name"]));
    }
  }
  fill("spectrum", rows, "no latency yet");
}

function subscriptions(ev) {
  const rows = ev.targets.filter((t) => t.subscriptions).map((t) => {
    const s = t.subscriptions;
    return row([t.name, s.opened, s.notifications, s.unsolicited], ["name"]);
  });
  fill("subscriptions", rows, "no subscriptions yet");
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

// A result file's link: under /results/ when served, beside the page
// when it is the page saved with them.
function link(name, text) {
  const a = document.createElement("a");
  a.textContent = text || name;
  a.setAttribute("href", (SAVED ? "" : "results/") + name.split("/").map(encodeURIComponent).join("/"));
  return a;
}

function ending(ev) {
  const ended = ev.targets.filter((t) => t.ended);
  $("end").hidden = ended.length === 0;
  $("verdicts").replaceChildren(...ended.map((t) => {
    const div = document.createElement("div");
    const p = document.createElement("p");
    p.className = "verdict " + (t.ended.valid ? "valid" : "invalid");
    p.textContent = (ev.targets.length > 1 ? t.name + ": " : "") + "verdict: " + t.ended.verdict;
    div.appendChild(p);
    if (t.ended.warnings.length) {
      const ul = document.createElement("ul");
      for (const w of t.ended.warnings) {
        const li = document.createElement("li");
        li.className = "warning";
        li.textContent = "warning: " + w;
        ul.appendChild(li);
      }
      div.appendChild(ul);
    }
    if (t.ended.report) {
      const p = document.createElement("p");
      p.append("The run's report: ", link(t.ended.report));
      div.appendChild(p);
    }
    return div;
  }));
  const files = ev.files.flatMap((name, i) => i ? [" · ", link(name)] : [link(name)]);
  $("files").replaceChildren(...(files.length ? files : ["written when the runs end"]));
}

function el(name, attrs, text) {
  const node = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = String(text);
  return node;
}

// A tick's label: 1-2-5 steps read as 0.5, 20, 2.5k, 1.2M, never 181635.
function label(v) {
  const a = Math.abs(v);
  const short = (x, unit) => Number(x.toPrecision(3)).toString() + unit;
  if (a >= 1e6) return short(v / 1e6, "M");
  if (a >= 1e3) return short(v / 1e3, "k");
  return short(v, "");
}

// Ticks from 0 in steps of 1, 2 or 5 times a power of ten, at most 5
// steps, the last at or above `max`.
function ticks(max) {
  if (!(max > 0)) return [0, 1];
  const rough = max / 5, power = Math.pow(10, Math.floor(Math.log10(rough)));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= rough);
  const out = [];
  for (let v = 0; v < max + step / 2; v += step) out.push(Number(v.toPrecision(12)));
  if (out[out.length - 1] < max) out.push(Number((out.length * step).toPrecision(12)));
  return out;
}

// Ticks between `from` and `to` in steps of 1, 2 or 5 times a power of ten.
function spanTicks(from, to) {
  if (!(to > from)) return [];
  const rough = (to - from) / 5, power = Math.pow(10, Math.floor(Math.log10(rough)));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= rough);
  const out = [];
  for (let v = Math.ceil(from / step) * step; v <= to + step / 1e6; v += step) out.push(Number(v.toPrecision(12)));
  return out;
}

// Lines drawn later are thinner, on top: two equal lines show as one
// inside the other, never as one. A p50 is dashed; a colour come round
// again is dashed its own way.
const DASHES = ["", "8 4", "2 3", "10 3 2 3"];

function chart(id, title, yLabel, lines, xLabel) {
  const svg = $(id);
  const points = lines.flatMap((l) => l.points);
  const xs = points.map((p) => p[0]), ys = points.map((p) => p[1]).filter(known);
  const x0 = xs.length ? Math.min(...xs) - 1 : 0, x1 = xs.length ? Math.max(...xs) : 1;
  const yTicks = ticks(ys.length ? Math.max(...ys) : 0), yMax = yTicks[yTicks.length - 1];
  const pw = W - L - R, ph = H - T - B;
  const x = (v) => L + (x1 > x0 ? (v - x0) / (x1 - x0) : 0) * pw;
  const y = (v) => T + ph - (v / yMax) * ph;
  const nodes = [el("text", { x: L, y: 20, style: "font-weight:600;font-size:14px" }, title)];
  for (const v of yTicks) {
    nodes.push(el("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), stroke: "#eee" }));
    nodes.push(el("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end", class: "y-tick" }, label(v)));
  }
  for (const v of spanTicks(x0, x1)) {
    nodes.push(el("line", { x1: x(v), x2: x(v), y1: T, y2: T + ph, stroke: "#f3f3f3" }));
    nodes.push(el("text", { x: x(v), y: T + ph + 16, "text-anchor": "middle" }, label(v)));
  }
  nodes.push(el("line", { x1: L, x2: L, y1: T, y2: T + ph, stroke: "#999" }));
  nodes.push(el("line", { x1: L, x2: W - R, y1: T + ph, y2: T + ph, stroke: "#999" }));
  nodes.push(el("text", { x: L + pw / 2, y: H - 10, "text-anchor": "middle" }, xLabel || "seconds"));
  nodes.push(el("text", { transform: "translate(14 " + (T + ph / 2) + ") rotate(-90)", "text-anchor": "middle" }, yLabel));
  let lx = L + 10, ly = T + 14;
  lines.forEach((line, i) => {
    const pts = line.points.filter((p) => known(p[1])).map((p) => x(p[0]).toFixed(1) + "," + y(p[1]).toFixed(1));
    const width = Math.max(1.5, 2 + 1.5 * (lines.length - 1 - i));
    const attrs = { fill: "none", stroke: line.color, "stroke-width": width, points: pts.join(" "), "data-line": line.name };
    const dash = line.dashed ? "4 3" : DASHES[Math.floor(i / COLORS.length) % DASHES.length];
    if (dash) attrs["stroke-dasharray"] = dash;
    nodes.push(el("polyline", attrs));
    const wide = 24 + 7 * line.name.length;
    if (lx + wide > W - R) { lx = L + 10; ly += 16; }
    nodes.push(el("rect", { x: lx, y: ly - 9, width: 10, height: 10, fill: line.color }));
    nodes.push(el("text", { x: lx + 14, y: ly }, line.name));
    lx += wide;
  });
  svg.replaceChildren(...nodes);
}

function charts(ev) {
  const color = (i) => COLORS[i % COLORS.length];
  const step = Math.max(1, ...ev.targets.map((t) => t.history_step_s || 1));
  const xLabel = step > 1 ? "seconds (the whole run: a point for up to " + step + " s)" : "seconds";
  chart("rate-chart", "calls/s", "calls/s", ev.targets.map((t, i) => (
    { name: t.name, color: color(i), points: t.history.map((h) => [h[0], h[1]]) })), xLabel);
  chart("latency-chart", "latency ms (p99 solid, p50 dashed)", "ms", ev.targets.flatMap((t, i) => [
    { name: t.name + " p99", color: color(i), points: t.history.map((h) => [h[0], h[3]]) },
    { name: t.name + " p50", color: color(i), dashed: true, points: t.history.map((h) => [h[0], h[2]]) },
  ]), xLabel);
  const several = ev.targets.length > 1;
  const perMethod = ev.targets.flatMap((t) => t.method_series.map((m) => ({ t, m })));
  const name = ({ t, m }) => several ? t.name + " · " + m.method : m.method;
  chart("method-rate-chart", "calls/s by method", "calls/s", perMethod.map((tm, i) => (
    { name: name(tm), color: color(i), points: tm.m.points.map((p) => [p[0], p[1]]) })));
  chart("method-latency-chart", "mean latency ms by method", "ms", perMethod.map((tm, i) => (
    { name: name(tm), color: color(i), points: tm.m.points.map((p) => [p[0], p[2]]) })));
}

// Each target's latency histogram: a bar per bucket, its upper bound below.
function histograms(ev) {
  const svgs = ev.targets.map((t, ti) => {
    const buckets = t.histogram.whole;
    const svg = el("svg", { viewBox: "0 0 560 220", width: 560, height: 220, role: "img", "aria-label": t.name + " latency histogram" });
    const top = ticks(Math.max(0, ...buckets.map((b) => b[1]))), most = top[top.length - 1];
    const pw = W - L - R, ph = 220 - T - B, bw = buckets.length ? pw / buckets.length : pw;
    const nodes = [el("text", { x: L, y: 20, style: "font-weight:600;font-size:14px" }, t.name + ": calls by latency (ms, upper bound)")];
    for (const v of top) {
      const y = T + ph - (v / most) * ph;
      nodes.push(el("line", { x1: L, x2: W - R, y1: y, y2: y, stroke: "#eee" }));
      nodes.push(el("text", { x: L - 6, y: y + 4, "text-anchor": "end", class: "y-tick" }, label(v)));
    }
    buckets.forEach(([upper, n], i) => {
      const h = (n / most) * ph;
      nodes.push(el("rect", { x: L + i * bw + 1, y: T + ph - h, width: Math.max(1, bw - 2), height: h,
        fill: COLORS[ti % COLORS.length], "data-upper-ms": upper, "data-calls": n }));
      if (i % Math.ceil(buckets.length / 8) === 0) {
        nodes.push(el("text", { x: L + i * bw + bw / 2, y: T + ph + 16, "text-anchor": "middle" }, "≤" + label(upper)));
      }
    });
    svg.replaceChildren(...nodes);
    return svg;
  });
  $("histograms").replaceChildren(...svgs);
}

function render(ev) {
  $("title").textContent = "volley · " + ev.scenario + " · live";
  const n = ev.targets.length;
  const how = n > 1 ? (ev.parallel ? " at once" : " one after another") : "";
  const shard = known(ev.shard) ? " · shard " + ev.shard : "";
  $("meta").textContent = n + (n === 1 ? " target" : " targets") + how + shard + (SAVED ? "" : " · updated every second");
  for (const draw of [targets, ending, spectrum, histograms, subscriptions, errors, methods, thresholds, charts]) draw(ev);
  const status = $("status");
  $("controls").hidden = !(ev.control && !SAVED && ev.kind !== "final");
  if (ev.kind === "final") {
    status.textContent = SAVED ? "finished: the final figures, saved at the end of the run" : "finished: the final figures";
    status.className = "status final";
  } else {
    status.textContent = "running: live figures";
    status.className = "status";
  }
}

for (const button of document.querySelectorAll("#controls button")) {
  button.addEventListener("click", () => {
    fetch("/control/" + button.dataset.steer, { method: "POST" }).then((answer) => {
      $("steered").textContent = answer.ok ? " " + button.textContent + ": done" : " refused (" + answer.status + ")";
    }, () => { $("steered").textContent = " not sent: the connection is lost"; });
  });
}

if (LATEST) render(LATEST);
if (!SAVED && !(LATEST && LATEST.kind === "final")) {
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
}
