#!/usr/bin/env bash
# What `volley record` adds: the same open-model load against `volley serve`
# directly and through the recording proxy (with --answers), in interleaved
# rounds; the median p50 and p99 of each, and what the proxy adds.
#
#   benches/record.sh                  # 2,000 calls/s, 16 connections, 5 s, 3 rounds
#   RATE=5000 ROUNDS=5 benches/record.sh
#
# The server is pinned to CPU 0, the proxy and the client share CPU 1 (as a
# recording proxy on the client's machine would). Loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."
RATE=${RATE:-2000}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
CONNECTIONS=${CONNECTIONS:-16}
PORT=${PORT:-18745}
cargo build --release -q
V=target/release/volley
WORK=$(mktemp -d)
trap 'kill "${SERVER:-}" "${PROXY:-}" 2>/dev/null || true; rm -rf "$WORK"' EXIT
taskset -c 0 "$V" serve --listen "127.0.0.1:$PORT" --threads 1 >/dev/null 2>&1 & SERVER=$!
taskset -c 1 "$V" record --upstream "http://127.0.0.1:$PORT" --listen "127.0.0.1:$((PORT + 1))" \
  --answers -o "$WORK/capture.jsonl" >"$WORK/record.log" 2>&1 & PROXY=$!
sleep 0.5
figure() { # dir key
  python3 -c "import json,sys; print(json.load(open('$1/summary.json'))['summary']['total']['latency']['$2'])"
}
for round in $(seq "$ROUNDS"); do
  for via in direct proxy; do
    port=$PORT; [ "$via" = proxy ] && port=$((PORT + 1))
    taskset -c 1 "$V" run --target "http://127.0.0.1:$port" --method eth_chainId --rate "$RATE" \
      --duration "${DURATION}s" --connections "$CONNECTIONS" --no-tui -q -o "$WORK/$via-$round" >/dev/null
    echo "$via $(figure "$WORK/$via-$round" p50_ms) $(figure "$WORK/$via-$round" p99_ms)" >>"$WORK/figures"
  done
done
kill -INT "$PROXY"; wait "$PROXY" || true
python3 - "$WORK/figures" "$RATE" "$CONNECTIONS" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
med = lambda via, i: statistics.median(float(r[i]) for r in rows if r[0] == via)
print(f"volley record at {sys.argv[2]} calls/s over {sys.argv[3]} connections (median of {len(rows)//2} rounds)")
print(f"{'':8} {'p50 ms':>8} {'p99 ms':>8}")
for via in ("direct", "proxy"):
    print(f"{via:8} {med(via, 1):8.3f} {med(via, 2):8.3f}")
print(f"{'added':8} {med('proxy', 1) - med('direct', 1):8.3f} {med('proxy', 2) - med('direct', 2):8.3f}")
PY
tail -1 "$WORK/record.log"
