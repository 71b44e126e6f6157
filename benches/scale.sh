#!/usr/bin/env bash
# Cost curves: what a call costs volley, and what it holds in memory, as
# the connections grow, at one fixed rate.
#
#   benches/scale.sh                           # 1, 64, 1000, 5000, 10000 connections
#   CONNECTIONS="64 1000" RATE=1000 DURATION=5 benches/scale.sh
#
# For HTTP/1.1, WebSocket and TCP (newline-delimited JSON), volley runs the
# open model at $RATE calls/s for $DURATION s with --warmup 0s against one
# `volley serve` pinned to CPU 0 (every client on CPU 1); on HTTP/1.1 oha
# runs beside it at the same rate and connections (wrk has no rate mode).
# Per run: calls/s, the client's CPU seconds per 100,000 calls (user +
# system, from the process's own accounting), the same less what opening
# the connections cost (volley: a one-request run over the same
# connections, measured apart; 10,000 connections cost about as much CPU
# as 10,000 calls, which is not a call's cost; oha opens its connections
# within its run, so its figure is whole), its peak resident memory and
# that over the connections, and volley's verdict. CSV goes to
# results/bench/, the plot (CPU per call and peak MB against connections,
# log scale) to docs/scale.svg. Everything stays on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."

CONNECTIONS=${CONNECTIONS:-"1 64 1000 5000 10000"}
RATE=${RATE:-2000}
DURATION=${DURATION:-10}
PORT=${PORT:-18745}
OUT=results/bench
mkdir -p "$OUT"
CSV="$OUT/scale-$(date -u +%Y%m%dT%H%M%SZ).csv"
WORK=$(mktemp -d)
trap 'kill "${SERVER_PID:-}" 2>/dev/null || true; rm -rf "$WORK"' EXIT

command -v oha >/dev/null 2>&1 || cargo install oha --locked
[ -x /usr/bin/time ] || { apt-get update -qq && apt-get install -y -qq time >/dev/null; }
cargo build --release --quiet
VOLLEY=target/release/volley
# Each connection is a descriptor here and one in the server.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
if [ "$(nproc)" -ge 2 ]; then SERVER_CPU=0; CLIENT_CPU=1; else SERVER_CPU=0; CLIENT_CPU=0; fi

taskset -c "$SERVER_CPU" "$VOLLEY" serve --listen "127.0.0.1:$PORT" --tcp "127.0.0.1:$((PORT + 1))" \
  --ws "127.0.0.1:$((PORT + 2))" --threads 1 >"$WORK/serve.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 50); do grep -q "ws://" "$WORK/serve.log" 2>/dev/null && break; sleep 0.1; done

echo "transport,tool,connections,calls_per_s,calls,cpu_s_per_100k,cpu_s_per_100k_after_connect,peak_mb,kb_per_connection,verdict" >"$CSV"

# record TRANSPORT TOOL CONNECTIONS CALLS_PER_S CALLS VERDICT CONNECT_CPU_S:
# one CSV row from $WORK/time.
record() {
  read -r user sys rss <"$WORK/time"
  python3 - "$@" "$user" "$sys" "$rss" >>"$CSV" <<'PY'
import sys
transport, tool, conns, rps, calls, verdict, connect, user, sys_, rss = sys.argv[1:]
calls = max(int(calls), 1)
whole = float(user) + float(sys_)
cpu = whole / calls * 1e5
after = max(whole - float(connect), 0.0) / calls * 1e5
print(f"{transport},{tool},{conns},{float(rps):.1f},{calls},{cpu:.3f},{after:.3f},{int(rss)/1024:.1f},{int(rss)/int(conns):.1f},{verdict}")
PY
  tail -n 1 "$CSV"
}

for conns in $CONNECTIONS; do
  for transport in http ws tcp; do
    case "$transport" in
      http) target="http://127.0.0.1:$PORT" ;;
      ws) target="ws://127.0.0.1:$((PORT + 2))" ;;
      tcp) target="tcp://127.0.0.1:$((PORT + 1))" ;;
    esac
    /usr/bin/time -o "$WORK/time" -f "%U %S %M" taskset -c "$CLIENT_CPU" "$VOLLEY" run --target "$target" \
      --method eth_blockNumber --rate "$RATE" --connections "$conns" -d "${DURATION}s" --warmup 0s \
      --threads 1 --no-tui -q --out "$WORK/$transport-$conns" >/dev/null 2>&1 || true
    # What opening the connections (and closing them) costs, apart.
    /usr/bin/time -o "$WORK/connect" -f "%U %S" taskset -c "$CLIENT_CPU" "$VOLLEY" run --target "$target" \
      --method eth_blockNumber --rate "$RATE" --connections "$conns" -n 1 --warmup 0s \
      --threads 1 --no-tui -q --out "$WORK/$transport-$conns-connect" >/dev/null 2>&1 || true
    connect=$(awk '{print $1 + $2}' "$WORK/connect")
    read -r rps calls verdict < <(python3 - "$WORK/$transport-$conns/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
t = s["total"]
print(t["calls_per_s"], t["calls"], "valid" if s["verdict"]["valid"] else "invalid")
PY
)
    record "$transport" volley "$conns" "$rps" "$calls" "$verdict" "$connect"
  done
  /usr/bin/time -o "$WORK/time" -f "%U %S %M" taskset -c "$CLIENT_CPU" oha --no-tui -c "$conns" -q "$RATE" \
    -z "${DURATION}s" -m POST -H 'content-type: application/json' \
    -d '{"jsonrpc":"2.0","method":"eth_blockNumber","id":1}' "http://127.0.0.1:$PORT/" >"$WORK/oha.out" 2>&1 || true
  read -r rps calls < <(python3 - "$WORK/oha.out" "$DURATION" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
found = re.search(r"Requests/sec:\s*([\d.]+)", text)
rps = float(found.group(1)) if found else 0.0
print(rps, int(rps * float(sys.argv[2])))
PY
)
  record http oha "$conns" "$rps" "$calls" "-" 0
done

echo
echo "machine: $(nproc) CPUs; server on CPU $SERVER_CPU, clients on CPU $CLIENT_CPU; open model at $RATE calls/s, ${DURATION}s, --warmup 0s"
python3 - "$CSV" docs/scale.svg <<'PY'
import csv, math, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print(f"\n{'transport':<10}{'tool':<8}{'conns':>7}{'calls/s':>10}{'cpu s/100k':>12}{'less connect':>14}{'peak MB':>9}{'KB/conn':>9}  verdict")
for r in rows:
    print(f"{r['transport']:<10}{r['tool']:<8}{r['connections']:>7}{float(r['calls_per_s']):>10.0f}"
          f"{float(r['cpu_s_per_100k']):>12.3f}{float(r['cpu_s_per_100k_after_connect']):>14.3f}"
          f"{float(r['peak_mb']):>9.1f}{float(r['kb_per_connection']):>9.1f}  {r['verdict']}")
series = {}
for r in rows:
    series.setdefault(f"{r['transport']} {r['tool']}", []).append(
        (int(r["connections"]), float(r["cpu_s_per_100k_after_connect"]), float(r["peak_mb"])))
for name, points in series.items():
    by = dict((c, cpu) for c, cpu, _ in points)
    if 64 in by and 10000 in by and by[64] > 0:
        print(f"{name}: CPU per call (less connecting) at 10,000 connections is {by[10000] / by[64]:.2f}x that at 64")
# The plot: two panels, connections on a log axis.
W, H, PAD = 900, 360, 60
colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"]
conns = sorted({c for pts in series.values() for c, _, _ in pts})
lo, hi = math.log10(max(min(conns), 1)), math.log10(max(conns))
def x(c, left):
    return left + PAD + (math.log10(max(c, 1)) - lo) / max(hi - lo, 1e-9) * (W / 2 - 2 * PAD)
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">']
for panel, (title, index) in enumerate([("CPU s per 100,000 calls, less connecting", 1), ("peak resident MB", 2)]):
    left = panel * W / 2
    top = max(p[index] for pts in series.values() for p in pts) or 1
    y = lambda v: H - PAD - v / top * (H - 2 * PAD)
    svg.append(f'<text x="{left + PAD}" y="20">{title}, against connections (log)</text>')
    svg.append(f'<line x1="{left + PAD}" y1="{H - PAD}" x2="{left + W / 2 - PAD}" y2="{H - PAD}" stroke="#888"/>')
    svg.append(f'<line x1="{left + PAD}" y1="{PAD}" x2="{left + PAD}" y2="{H - PAD}" stroke="#888"/>')
    for c in conns:
        svg.append(f'<text x="{x(c, left):.1f}" y="{H - PAD + 15}" text-anchor="middle">{c}</text>')
    svg.append(f'<text x="{left + PAD - 5}" y="{PAD}" text-anchor="end">{top:.1f}</text>')
    for k, (name, pts) in enumerate(sorted(series.items())):
        pts = sorted(pts)
        path = " ".join(f"{x(c, left):.1f},{y(cpu if index == 1 else mb):.1f}" for c, cpu, mb in pts)
        svg.append(f'<polyline fill="none" stroke="{colors[k % len(colors)]}" stroke-width="2" points="{path}"/>')
        if panel == 0:
            svg.append(f'<text x="{W / 2 - 150}" y="{40 + 14 * k}" fill="{colors[k % len(colors)]}">{name}</text>')
svg.append("</svg>")
open(sys.argv[2], "w").write("\n".join(svg) + "\n")
print(f"\nplot: {sys.argv[2]}\nrows: {sys.argv[1]}")
PY
