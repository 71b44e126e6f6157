#!/usr/bin/env bash
# Measurement truth, timed (so a bench, not a test):
#  1. against `volley serve --latency 10ms`, which reports the hold times it
#     really applied, volley's p50 at low load exceeds the server's median
#     hold by less than 0.5 ms; the difference is volley's per-call overhead
#     (client, loopback TCP and HTTP parsing together);
#  2. the same in rate mode (1,000 calls/s on 16 connections): a call's
#     latency is timed from its intended send, so the generator's own timer
#     would show here; it must not add more than 0.5 ms either;
#  3. in rate mode at 20,000 calls/s over 30 s, the achieved rate is within 1%.
# Loopback only; every run is bounded in time.
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=${PORT:-18945}
RATE=${RATE:-20000}
RATE_SECONDS=${RATE_SECONDS:-30}
cargo build --release --quiet
VOLLEY=${VOLLEY:-target/release/volley}  # another build to compare with
WORK=$(mktemp -d)
trap 'kill "${SERVER:-}" 2>/dev/null || true; rm -rf "$WORK"' EXIT
field() { python3 -c "import json,sys; d=json.load(open(sys.argv[1]))['summary']; print(eval(sys.argv[2]))" "$1/summary.json" "$2"; }
start_server() {
  "$VOLLEY" serve --listen "127.0.0.1:$PORT" --threads 1 "$@" >"$WORK/serve.log" 2>&1 &
  SERVER=$!
  for _ in $(seq 50); do grep -q "volley serve" "$WORK/serve.log" 2>/dev/null && break; sleep 0.1; done
}

# $1: the load options; $2: what to call them; $3: where its results go.
overhead_against_a_10ms_server() {
  start_server --latency 10ms
  "$VOLLEY" run --target "http://127.0.0.1:$PORT" --method eth_chainId $1 -d 10s --warmup 1s --quiet --out "$WORK/$3" >/dev/null
  kill -INT "$SERVER"; wait "$SERVER" || true
  hold=$(sed -n 's/^median hold really applied: \([0-9.]*\) ms$/\1/p' "$WORK/serve.log")
  p50=$(field "$WORK/$3" "d['total']['latency']['p50_ms']")
  python3 - "$p50" "$hold" "$2" <<'PY'
import sys
p50, hold = map(float, sys.argv[1:3])
overhead = p50 - hold
verdict = "PASS" if 0 <= overhead < 0.5 else "FAIL"
print(f"latency 10ms, {sys.argv[3]}: volley p50 {p50:.3f} ms, server's median hold {hold:.3f} ms, overhead {overhead*1000:.0f} µs  [{verdict}: under 500 µs]")
PY
}
overhead_against_a_10ms_server "-c 1" "1 connection" low
overhead_against_a_10ms_server "--rate 1000 --connections 16" "rate 1000/s" paced

start_server
"$VOLLEY" run --target "http://127.0.0.1:$PORT" --method eth_chainId --rate "$RATE" --connections 64 -d "${RATE_SECONDS}s" --quiet --out "$WORK/rate" >/dev/null
kill -INT "$SERVER"; wait "$SERVER" || true
python3 - "$(field "$WORK/rate" "d['total']['calls']")" "$(field "$WORK/rate" "d['measured_seconds']")" "$RATE" \
  "$(field "$WORK/rate" "d['schedule']['start_delay']['p50_ms']")" "$(field "$WORK/rate" "d['schedule']['start_delay']['p99_ms']")" <<'PY'
import sys
calls, seconds, rate, d50, d99 = map(float, sys.argv[1:])
achieved = calls / seconds
off = abs(achieved - rate) / rate * 100
verdict = "PASS" if off < 1 else "FAIL"
print(f"rate {rate:.0f}/s for {seconds:.0f} s: achieved {achieved:.1f}/s ({off:.3f}% off) · start delay p50 {d50:.3f} ms, p99 {d99:.3f} ms  [{verdict}: within 1%]")
PY
