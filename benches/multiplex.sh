#!/usr/bin/env bash
# Multiplexing is real: against `volley serve --latency 10ms`, 4 connections
# with 64 calls in flight each, over every multiplexed transport. The ideal
# is 4 x 64 / 10 ms = 25,600 calls/s; the target is 15,000. HTTP/1.1 on 4
# connections is shown beside them: it cannot pass 4 / 10 ms = 400.
# Loopback only; every run is bounded in time.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${SECONDS_EACH:-5}
cargo build --release --quiet
VOLLEY=$PWD/target/release/volley
WORK=$(mktemp -d)
trap 'kill "${SERVER:-}" 2>/dev/null || true; rm -rf "$WORK"' EXIT
"$VOLLEY" serve --listen 127.0.0.1:0 --latency 10ms --tcp 127.0.0.1:0 --ws 127.0.0.1:0 \
  --unix "$WORK/serve.sock" --threads 1 >"$WORK/serve.log" 2>&1 &
SERVER=$!
for _ in $(seq 50); do grep -q "unix://" "$WORK/serve.log" && break; sleep 0.1; done
url() { grep -o "$1://[^ ]*" "$WORK/serve.log" | head -1; }

run() { # name, target line(s)
  local name=$1 target=$2
  cat >"$WORK/$name.toml" <<EOF
$target
[load]
concurrency = 256
connections = 4
duration = "${SECONDS_EACH}s"
warmup = "1s"
[[calls]]
method = "eth_blockNumber"
EOF
  "$VOLLEY" run "$WORK/$name.toml" --quiet --no-tui --out "$WORK/out-$name" >/dev/null
  python3 - "$name" "$WORK/out-$name/summary.json" <<'PY'
import json, sys
name, path = sys.argv[1:]
s = json.load(open(path))
t = s["summary"]["total"]
rate = t["calls_per_s"]
verdict = "" if name == "http1" else ("  PASS" if rate >= 15000 else "  FAIL")
print(f"{name:<22} {s['meta']['transport']:<16} {rate:>9,.0f} calls/s  ok {t['ok']}/{t['calls']}  p50 {t['latency']['p50_ms']:.2f} ms{verdict}")
PY
}

echo "4 connections x 64 in flight vs volley serve --latency 10ms, ${SECONDS_EACH}s each (ideal 25,600 calls/s)"
run tcp "target = \"$(url tcp)\""
run unix "target = \"unix://$WORK/serve.sock\""
run websocket "target = \"$(url ws)\""
run http2 "target = \"$(url http)\"
http2 = true"
for framing in ndjson content-length; do
  run "stdio-$framing" "command = [\"$VOLLEY\", \"serve\", \"--stdio\", \"--framing\", \"$framing\", \"--latency\", \"10ms\", \"--threads\", \"1\"]
framing = \"$framing\""
done
run http1 "target = \"$(url http)\""
