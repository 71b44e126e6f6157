#!/usr/bin/env bash
# A long run's memory and what a killed run leaves behind.
#
# 1. The demo mix (built-in server, in-process) at 2,000 calls/s for 100 s:
#    resident memory read every 5 s; the growth from 25 s to 95 s must be
#    at most 512 KB.
# 2. The same run killed with SIGKILL 12 s in: its timeseries.csv must
#    hold at least 8 per-second rows, and latency.hlog its histograms.
#
# Loopback only (the built-in server), bounded to about 2 minutes.
# SECONDS_LONG=100 RATE=2000 benches/long_run_memory.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RATE=${RATE:-2000}
LONG=${SECONDS_LONG:-100}
cargo build --release --quiet
VOLLEY=$PWD/target/release/volley
WORK=$(mktemp -d)
trap 'kill -9 "${RUN:-}" 2>/dev/null || true; rm -rf "$WORK"' EXIT

"$VOLLEY" run scenarios/demo.toml --rate "$RATE" -d "${LONG}s" --warmup 0s --no-tui --quiet \
  --out "$WORK/long" >"$WORK/long.out" 2>&1 &
RUN=$!
: >"$WORK/rss"
for ((t = 5; t <= LONG - 5; t += 5)); do
  sleep 5
  echo "$t $(awk '/VmRSS/ {print $2}' "/proc/$RUN/status")" >>"$WORK/rss"
done
wait "$RUN" || true
RUN=

"$VOLLEY" run scenarios/demo.toml --rate "$RATE" -d 60s --warmup 0s --no-tui --quiet \
  --out "$WORK/killed" >/dev/null 2>&1 &
RUN=$!
sleep 12
kill -9 "$RUN"
wait "$RUN" 2>/dev/null || true
RUN=
rows=$(($(wc -l <"$WORK/killed/timeseries.csv" 2>/dev/null || echo 1) - 1))
intervals=$(grep -vc '^#\|^"' "$WORK/killed/latency.hlog" 2>/dev/null || echo 0)
partial=$(grep -o '"finished": *false' "$WORK/killed/summary.json" 2>/dev/null || echo "missing or not marked")

python3 - "$WORK/rss" "$rows" "$intervals" "$partial" "$RATE" "$LONG" <<'PY'
import sys
path, rows, intervals, partial, rate, long = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]
rss = dict(tuple(map(int, line.split())) for line in open(path) if len(line.split()) == 2)
print("resident KB by second:", " ".join(f"{t}:{kb}" for t, kb in sorted(rss.items())))
at25, at95 = rss.get(25), rss.get(95)
if at25 is None or at95 is None:
    print("FAIL: no reading at 25 s or at 95 s"); sys.exit(1)
growth = at95 - at25
memory_ok = growth <= 512
print(f"demo mix at {rate}/s for {long} s: resident {at25} KB at 25 s, {at95} KB at 95 s ({growth:+d} KB)"
      f"  [{'PASS' if memory_ok else 'FAIL'}: at most +512 KB]")
killed_ok = rows >= 8
print(f"killed at 12 s: {rows} rows in timeseries.csv, {intervals} histograms in latency.hlog, summary.json {partial!r}"
      f"  [{'PASS' if killed_ok else 'FAIL'}: at least 8 rows]")
sys.exit(0 if memory_ok and killed_ok else 1)
PY
