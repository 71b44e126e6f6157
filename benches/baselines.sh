#!/usr/bin/env bash
# What stored baselines can tell on this machine: RUNS back-to-back runs of
# an unchanged Python server (PyPI's jsonrpcserver on aiohttp), each
# compared with every other (every ordered pair), three of them as
# baselines against each of the rest, and the same server SLOW_MS slower a
# call against one baseline and against three. `volley compare` at its
# default limits; each comparison's exit code and result line are printed,
# then how many went red.
#
#   benches/baselines.sh                       # 5 runs of 8 s, -c 16, 5 ms slower
#   RUNS=5 DURATION=8 SLOW_MS=5 benches/baselines.sh
#   VOLLEY=/path/to/volley benches/baselines.sh   # that build, no build here
#
# Loopback only; every run is bounded by DURATION.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}
DURATION=${DURATION:-8}
SLOW_MS=${SLOW_MS:-5}
PORT=${PORT:-18780}
if [ -z "${VOLLEY:-}" ]; then
  cargo build --release --quiet
  VOLLEY=$PWD/target/release/volley
fi
python3 -c "import jsonrpcserver, aiohttp" 2>/dev/null || pip install -q jsonrpcserver aiohttp
WORK=$(mktemp -d)
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null || true; rm -rf "$WORK"' EXIT

cat >"$WORK/app.py" <<'PY'
# eth_chainId on aiohttp, dispatched by jsonrpcserver; `ms` of sleep a call.
import asyncio, sys
from aiohttp import web
from jsonrpcserver import Success, async_dispatch, method
port, ms = int(sys.argv[1]), float(sys.argv[2])
@method
async def eth_chainId():
    if ms:
        await asyncio.sleep(ms / 1000)
    return Success("0x1")
async def handle(request):
    return web.Response(text=await async_dispatch(await request.text()), content_type="application/json")
app = web.Application()
app.router.add_post("/", handle)
web.run_app(app, host="127.0.0.1", port=port, print=None)
PY

# start PORT MS: the app, waited for until it answers.
start() {
  python3 "$WORK/app.py" "$1" "$2" &
  PIDS+=($!)
  for _ in $(seq 100); do
    curl -s -o /dev/null -d '{"jsonrpc":"2.0","method":"eth_chainId","id":1}' "http://127.0.0.1:$1/" && return
    sleep 0.1
  done
  echo "the app on $1 did not start" >&2
  exit 1
}

# measure PORT DIR: one run at the defaults (-c 16).
measure() {
  "$VOLLEY" run --target "http://127.0.0.1:$1" --method eth_chainId -c 16 -d "${DURATION}s" \
    --no-tui -q --out "$2" >/dev/null
  python3 -c "import json,sys; t=json.load(open(sys.argv[1]))['summary']['total']; print(f\"  {sys.argv[2]}: p50 {t['latency']['p50_ms']:.2f} ms, p99 {t['latency']['p99_ms']:.2f} ms, {t['calls_per_s']:.0f} calls/s\")" "$2/summary.json" "$(basename "$2")"
}

# judge NAME ARGS...: one comparison; its exit code and result line.
red=0 total=0
judge() {
  local name=$1 code=0
  shift
  "$VOLLEY" compare "$@" >"$WORK/compare.txt" 2>&1 || code=$?
  echo "$name: exit $code · $(grep -m1 '^result:' "$WORK/compare.txt" || tail -1 "$WORK/compare.txt")"
  total=$((total + 1))
  [ "$code" = 0 ] || red=$((red + 1))
}

start "$PORT" 0
start "$((PORT + 1))" "$SLOW_MS"
echo "machine: load $(cut -d' ' -f1-3 /proc/loadavg); $RUNS runs of ${DURATION}s, -c 16, compare at its default limits"
for i in $(seq "$RUNS"); do measure "$PORT" "$WORK/run-$i"; done
measure "$((PORT + 1))" "$WORK/slow"

echo "every ordered pair of unchanged runs (baseline, current):"
for i in $(seq "$RUNS"); do
  for j in $(seq "$RUNS"); do
    [ "$i" = "$j" ] || judge "  run-$i -> run-$j" "$WORK/run-$i" "$WORK/run-$j"
  done
done
echo "unchanged: $red of $total red"
red=0 total=0
echo "three baselines against each of the others:"
for j in $(seq 4 "$RUNS"); do
  judge "  run-1..3 -> run-$j" "$WORK/run-1" "$WORK/run-2" "$WORK/run-3" "$WORK/run-$j"
done
echo "unchanged against three: $red of $total red"
red=0 total=0
echo "the app ${SLOW_MS} ms slower a call:"
judge "  run-1 -> slow" "$WORK/run-1" "$WORK/slow"
judge "  run-1..3 -> slow" "$WORK/run-1" "$WORK/run-2" "$WORK/run-3" "$WORK/slow"
echo "slower: $red of $total red"
