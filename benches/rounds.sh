#!/usr/bin/env bash
# What A/B rounds can tell on this machine: trials of `volley run --target A
# --target B --rounds N` where A is a CPU-bound server (a busy wait of
# SPIN_MS a call, Python's standard library) and B a copy of it, unchanged
# or SLOWER percent slower a call. Each trial's exit code (2: REGRESSION or
# CANNOT COMPARE) and TOTAL p50 ratio with its interval are printed, then how
# many trials of each kind went red.
#
#   benches/rounds.sh                                  # 10 trials each: unchanged, 20% slower
#   TRIALS=10 ROUNDS=16 DURATION=24 SLOWER="20 40" LIMIT=p50=10% benches/rounds.sh
#
# Loopback only; each trial is bounded by its rounds' time (DURATION seconds
# of measured time per target, plus a second of warmup each).
set -euo pipefail
cd "$(dirname "$0")/.."
TRIALS=${TRIALS:-10}
ROUNDS=${ROUNDS:-8}
DURATION=${DURATION:-12}
RATE=${RATE:-200}
SPIN_MS=${SPIN_MS:-2}
SLOWER=${SLOWER:-20}
LIMIT=${LIMIT:-p50=10%}
PORT=${PORT:-18745}
# VOLLEY=/path/to/volley measures that build (no build here).
if [ -z "${VOLLEY:-}" ]; then
  cargo build --release --quiet
  VOLLEY=$PWD/target/release/volley
fi
WORK=$(mktemp -d)
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null || true; rm -rf "$WORK"' EXIT

cat >"$WORK/spin.py" <<'PY'
# A JSON-RPC server that spins `ms` of CPU a call (threads: calls queue as
# they would on a CPU-bound node), answering eth_chainId.
import http.server, json, socketserver, sys, time
port, ms = int(sys.argv[1]), float(sys.argv[2])
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Head and body go out in two writes: with Nagle's algorithm the body
    # waits for the client's delayed ACK (40 ms a call).
    disable_nagle_algorithm = True
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        end = time.perf_counter() + ms / 1000
        while time.perf_counter() < end:
            pass
        out = json.dumps({"jsonrpc": "2.0", "id": body.get("id"), "result": "0x1"}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
    def log_message(self, *args):
        pass
class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
Server(("127.0.0.1", port), Handler).serve_forever()
PY

# start PORT MS: a spinning server, waited for until it answers.
start() {
  python3 "$WORK/spin.py" "$1" "$2" &
  PIDS+=($!)
  for _ in $(seq 50); do
    curl -s -o /dev/null -d '{"jsonrpc":"2.0","method":"eth_chainId","id":1}' "http://127.0.0.1:$1/" && return
    sleep 0.1
  done
  echo "the server on $1 did not start" >&2
  exit 1
}

start "$PORT" "$SPIN_MS"
copies=("unchanged:$((PORT + 1)):$SPIN_MS")
start "$((PORT + 1))" "$SPIN_MS"
i=2
for pct in $SLOWER; do
  ms=$(python3 -c "print($SPIN_MS * (1 + $pct / 100))")
  start "$((PORT + i))" "$ms"
  copies+=("$pct%-slower:$((PORT + i)):$ms")
  i=$((i + 1))
done

echo "A: ${SPIN_MS} ms a call; --rate $RATE --connections 8 --rounds $ROUNDS -d ${DURATION}s --max-regression $LIMIT; $TRIALS trials a copy"
declare -A red
for trial in $(seq "$TRIALS"); do
  for copy in "${copies[@]}"; do
    IFS=: read -r name port _ <<<"$copy"
    out="$WORK/$name-$trial"
    code=0
    "$VOLLEY" run --target "http://127.0.0.1:$PORT" --target "http://127.0.0.1:$port" --method eth_chainId \
      --rate "$RATE" --connections 8 --rounds "$ROUNDS" -d "${DURATION}s" --warmup 1s \
      --max-regression "$LIMIT" --no-tui -q --out "$out" >"$out.txt" 2>&1 || code=$?
    line=$(grep -E "TOTAL +p50" "$out.txt" | head -1 | tr -s ' ')
    reruns=$(grep -c " was run again: " "$out.txt" || true)
    result=$(grep -m1 "^result: " "$out.txt" | cut -c9-60)
    echo "trial $trial $name: exit $code · ${line:-no p50 row} · rounds run again: $reruns · $result"
    [ "$code" = 2 ] && red[$name]=$((${red[$name]:-0} + 1))
  done
done
for copy in "${copies[@]}"; do
  IFS=: read -r name _ _ <<<"$copy"
  echo "$name: exit 2 in ${red[$name]:-0} of $TRIALS trials"
done
