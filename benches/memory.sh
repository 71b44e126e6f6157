#!/usr/bin/env bash
# Memory over a long run at 1,000 connections: resident memory sampled at
# 10 s and at 60 s (it must stay within 5%), and the peak (under 64 MB).
# Loopback only, bounded to 61 s.
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=${PORT:-19045}
CONNECTIONS=${CONNECTIONS:-1000}
cargo build --release --quiet
VOLLEY=target/release/volley
WORK=$(mktemp -d)
trap 'kill "${SERVER:-}" "${RUN:-}" 2>/dev/null || true; rm -rf "$WORK"' EXIT
ulimit -n 65536 2>/dev/null || true
"$VOLLEY" serve --listen "127.0.0.1:$PORT" --threads 1 >"$WORK/serve.log" 2>&1 &
SERVER=$!
sleep 0.5
/usr/bin/time -f "%M" -o "$WORK/peak" "$VOLLEY" run --target "http://127.0.0.1:$PORT" --method eth_getBalance \
  --params '["0x00000000219ab540356cBB839Cbe05303d7705Fa","latest"]' -c "$CONNECTIONS" -d 61s --no-tui --quiet \
  --out "$WORK/run" >/dev/null &
RUN=$!
rss() { grep VmRSS "/proc/$(pgrep -P "$RUN" -f 'volley run' || echo "$RUN")/status" | awk '{print $2}'; }
sleep 10; at10=$(rss)
sleep 50; at60=$(rss)
wait "$RUN"
python3 - "$at10" "$at60" "$(cat "$WORK/peak")" "$CONNECTIONS" <<'PY'
import sys
at10, at60, peak, conns = map(int, sys.argv[1:])
growth = (at60 - at10) / at10 * 100
print(f"{conns} connections: resident {at10/1024:.1f} MB at 10 s, {at60/1024:.1f} MB at 60 s ({growth:+.1f}%), peak {peak/1024:.1f} MB"
      f"  [{'PASS' if abs(growth) <= 5 and peak < 64*1024 else 'FAIL'}: within 5%, under 64 MB]")
PY
