#!/usr/bin/env bash
# What the live views cost together: the dashboard, /metrics (scraped every
# second) and the web page (one page reading /events), against the same run
# with none of them (--no-tui), both in a tmux pane as a person would run
# them, at 64 connections against a `volley serve` of its own, in
# interleaved rounds: calls/s, and volley's CPU time per call (user + system,
# from /usr/bin/time), which a busy machine moves less. Loopback only; every
# run is bounded by --duration.
#
#   benches/live_cost.sh           # ROUNDS=5 DURATION=5 by default
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-5}
METRICS=127.0.0.1:19464
WEB=127.0.0.1:19465
command -v tmux >/dev/null || { echo "needs tmux" >&2; exit 1; }
cargo build --release --quiet
WORK=$(mktemp -d)
SERVER=""
cleanup() {
  tmux kill-session -t volley-live-bench 2>/dev/null || true
  [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null || true
  jobs -p | xargs -r kill 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
target/release/volley serve --listen 127.0.0.1:0 --threads 1 >"$WORK/serve.log" &
SERVER=$!
until URL=$(grep -o 'http://[0-9.:]*' "$WORK/serve.log" | head -1) && [ -n "$URL" ]; do sleep 0.1; done
rps() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['summary']['total']['calls_per_s'])" "$1/summary.json"; }
# CPU µs per call of the run in OUT.
cpu() {
  python3 -c "import json,sys; c=json.load(open(sys.argv[1]))['summary']['total']['calls']; u,s=map(float,open(sys.argv[2]).read().split()[-2:]); print(f'{(u+s)*1e6/c:.2f}')" "$1/summary.json" "$1.cpu"
}
# in_tmux OUT [FLAGS...]: one run in a fresh tmux pane, waiting for its end.
in_tmux() {
  local out=$1
  shift
  tmux new-session -d -s volley-live-bench -x 200 -y 50 \
    "/usr/bin/time -o $out.cpu -f '%U %S' target/release/volley run --target $URL --method eth_chainId -c 64 --duration ${DURATION}s --warmup 0s $* --out $out; touch $out.done"
}
wait_done() {
  while [ ! -e "$1.done" ]; do sleep 0.2; done
  tmux kill-session -t volley-live-bench 2>/dev/null || true
}
# watch: a scrape of /metrics a second and one reader of /events, as long as the run.
watch() {
  local out=$1
  until curl -s -o /dev/null "http://$METRICS/metrics"; do sleep 0.05; done
  curl -sN "http://$WEB/events" >"$out.events" &
  while [ ! -e "$out.done" ]; do
    curl -s -o /dev/null "http://$METRICS/metrics" || true
    sleep 1
  done
}
for round in $(seq "$ROUNDS"); do
  live="$WORK/live-$round"
  plain="$WORK/plain-$round"
  in_tmux "$live" --metrics-listen "$METRICS" --web-listen "$WEB"
  watch "$live"
  wait_done "$live"
  in_tmux "$plain" --no-tui
  wait_done "$plain"
  echo "round $round: live views $(rps "$live") calls/s, $(cpu "$live") µs CPU a call ($(grep -c '^data:' "$live.events") events read); none $(rps "$plain") calls/s, $(cpu "$plain") µs CPU a call"
  echo "$(rps "$live") $(rps "$plain") $(cpu "$live") $(cpu "$plain")" >>"$WORK/pairs"
done
python3 - "$WORK/pairs" <<'PY'
import statistics, sys
pairs = [tuple(map(float, l.split())) for l in open(sys.argv[1])]
live = statistics.median(p[0] for p in pairs)
plain = statistics.median(p[1] for p in pairs)
ratios = sorted(p[0] / p[1] for p in pairs)
print(f"median: live views {live:.0f} calls/s, none {plain:.0f} calls/s, live/none = {live/plain:.3f}")
print(f"each round's live/none: median {statistics.median(ratios):.3f}, from {ratios[0]:.3f} to {ratios[-1]:.3f}")
cpu = sorted(p[2] / p[3] for p in pairs)
print(f"CPU a call: live views {statistics.median(p[2] for p in pairs):.2f} µs, none {statistics.median(p[3] for p in pairs):.2f} µs; each round's live/none: median {statistics.median(cpu):.3f}, from {cpu[0]:.3f} to {cpu[-1]:.3f}")
PY
