#!/usr/bin/env bash
# What the live dashboard costs: closed-model throughput against the built-in
# server with the dashboard on and with --no-tui (progress lines instead),
# both in a tmux pane as a person would run them, in interleaved rounds.
# Loopback only.
#
#   benches/tui_cost.sh            # ROUNDS=3 DURATION=5 by default
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
command -v tmux >/dev/null || { apt-get update -qq && apt-get install -y -qq tmux >/dev/null; }
cargo build --release --quiet
WORK=$(mktemp -d)
trap 'tmux kill-session -t volley-bench 2>/dev/null || true; rm -rf "$WORK"' EXIT
rps() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['summary']['total']['calls_per_s'])" "$1/summary.json"; }
# in_tmux OUT [FLAGS...]: one run in a fresh tmux pane, waiting for its end.
in_tmux() {
  local out=$1
  shift
  tmux new-session -d -s volley-bench -x 140 -y 45 \
    "target/release/volley run scenarios/demo.toml --duration ${DURATION}s --warmup 0s $* --out $out; touch $out.done"
  while [ ! -e "$out.done" ]; do sleep 0.2; done
  tmux kill-session -t volley-bench 2>/dev/null || true
}
for round in $(seq "$ROUNDS"); do
  out="$WORK/tui-$round"
  plain="$WORK/plain-$round"
  in_tmux "$out"
  in_tmux "$plain" --no-tui
  echo "round $round: dashboard $(rps "$out") calls/s, --no-tui $(rps "$plain") calls/s"
  echo "$(rps "$out") $(rps "$plain")" >>"$WORK/pairs"
done
python3 - "$WORK/pairs" <<'PY'
import statistics, sys
pairs = [tuple(map(float, l.split())) for l in open(sys.argv[1])]
tui = statistics.median(p[0] for p in pairs)
plain = statistics.median(p[1] for p in pairs)
print(f"median: dashboard {tui:.0f} calls/s, --no-tui {plain:.0f} calls/s, dashboard/--no-tui = {tui/plain:.3f}")
PY
