#!/usr/bin/env bash
# Side-by-side benchmark: volley against oha and wrk on one `volley serve`.
#
#   benches/peers.sh                 # full run: 1, 64 and 1000 connections, then rate mode
#   ROUNDS=5 DURATION=10 benches/peers.sh
#   TLS=1 CONNECTIONS=64 benches/peers.sh   # the same over HTTPS (the server's own CA)
#   BASE=/path/to/older/volley CONNECTIONS=64 benches/peers.sh
#                                    # also the previous build, as the tool `base`
#
# Each tool sends the same JSON-RPC call (eth_chainId) over HTTP/1.1 keep-alive
# with the same connections for the same time, in interleaved rounds
# (volley, oha, wrk, volley, oha, wrk, ...). The server is pinned to CPU 0 and
# every client to CPU 1, so a client is charged only for its own work.
# Per tool it reports the median calls/s, the client's CPU seconds per
# 100,000 calls (user + system, from the process's own accounting), the peak
# resident memory, and volley's ratios to the others. CSV goes to
# results/bench/. Everything listens on and talks to 127.0.0.1 only.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
CONNECTIONS=${CONNECTIONS:-"1 64 1000"}
RATE=${RATE:-20000}
PORT=${PORT:-18645}
TLS=${TLS:-}
SCHEME=http; [ -n "$TLS" ] && SCHEME=https
URL="$SCHEME://127.0.0.1:${PORT}/"
BODY='{"jsonrpc":"2.0","method":"eth_chainId","id":1}'
OUT=results/bench
mkdir -p "$OUT"
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
CSV="$OUT/peers-$STAMP.csv"
WORK=$(mktemp -d)
trap 'kill "${SERVER_PID:-0}" 2>/dev/null || true; rm -rf "$WORK"' EXIT

need() { command -v "$1" >/dev/null 2>&1; }
if ! need wrk || ! need h2load || [ ! -x /usr/bin/time ]; then
  apt-get update -qq && apt-get install -y -qq wrk nghttp2-client time >/dev/null
fi
need oha || cargo install oha --locked
cargo build --release --quiet
VOLLEY=target/release/volley
ulimit -n 65536 2>/dev/null || true
CPUS=$(nproc)
if [ "$CPUS" -ge 2 ]; then SERVER_CPU=0; CLIENT_CPU=1; else SERVER_CPU=0; CLIENT_CPU=0; fi

SERVE_TLS=(); VOLLEY_TLS=(); OHA_TLS=()
if [ -n "$TLS" ]; then
  SERVE_TLS=(--tls --tls-ca-out "$WORK/ca.pem"); VOLLEY_TLS=(--cacert "$WORK/ca.pem"); OHA_TLS=(--cacert "$WORK/ca.pem")
fi
taskset -c "$SERVER_CPU" "$VOLLEY" serve --listen "127.0.0.1:$PORT" --threads 1 "${SERVE_TLS[@]}" >"$WORK/serve.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 50); do grep -q "volley serve" "$WORK/serve.log" 2>/dev/null && break; sleep 0.1; done

cat >"$WORK/post.lua" <<EOF
wrk.method = "POST"
wrk.body = '$BODY'
wrk.headers["Content-Type"] = "application/json"
EOF

echo "mode,connections,tool,round,calls_per_s,calls,cpu_s,cpu_s_per_100k,max_rss_kb" >"$CSV"

# run TOOL MODE CONNECTIONS ROUND: one timed run, one CSV row.
run() {
  local tool=$1 mode=$2 conns=$3 round=$4 out="$WORK/$1.out" timing="$WORK/$1.time"
  local rate_args=()
  case "$tool" in
    volley|base)
      local binary=$VOLLEY; [ "$tool" = base ] && binary=$BASE
      [ "$mode" = rate ] && rate_args=(--rate "$RATE") || rate_args=(-c "$conns")
      /usr/bin/time -o "$timing" -f "%U %S %M" taskset -c "$CLIENT_CPU" "$binary" run --target "$URL" \
        --method eth_chainId "${rate_args[@]}" --connections "$conns" -d "${DURATION}s" --threads 1 --quiet "${VOLLEY_TLS[@]}" \
        --out "$WORK/$tool-$mode-$conns-$round" >"$out" 2>&1
      python3 - "$WORK/$tool-$mode-$conns-$round/summary.json" >"$WORK/calls" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
print(s["total"]["calls_per_s"], s["total"]["calls"])
PY
      ;;
    oha)
      [ "$mode" = rate ] && rate_args=(-q "$RATE")
      /usr/bin/time -o "$timing" -f "%U %S %M" taskset -c "$CLIENT_CPU" oha --no-tui -c "$conns" "${OHA_TLS[@]}" \
        "${rate_args[@]}" -z "${DURATION}s" -m POST -H 'content-type: application/json' -d "$BODY" "$URL" >"$out" 2>&1
      python3 - "$out" "$DURATION" >"$WORK/calls" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
rps = float(re.search(r"Requests/sec:\s*([\d.]+)", text).group(1))
print(rps, int(rps * float(sys.argv[2])))
PY
      ;;
    wrk)
      /usr/bin/time -o "$timing" -f "%U %S %M" taskset -c "$CLIENT_CPU" wrk -t1 -c "$conns" -d "${DURATION}s" \
        -s "$WORK/post.lua" "$URL" >"$out" 2>&1
      python3 - "$out" >"$WORK/calls" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
rps = float(re.search(r"Requests/sec:\s*([\d.]+)", text).group(1))
calls = int(re.search(r"(\d+) requests in", text).group(1))
print(rps, calls)
PY
      ;;
  esac
  read -r rps calls <"$WORK/calls"
  read -r user sys rss <"$timing"
  python3 - "$mode" "$conns" "$tool" "$round" "$rps" "$calls" "$user" "$sys" "$rss" >>"$CSV" <<'PY'
import sys
mode, conns, tool, rnd, rps, calls, user, sys_, rss = sys.argv[1:]
cpu = float(user) + float(sys_)
per = cpu / max(int(calls), 1) * 100000
print(f"{mode},{conns},{tool},{rnd},{float(rps):.1f},{calls},{cpu:.2f},{per:.3f},{rss}")
PY
  tail -n 1 "$CSV"
}

BASE=${BASE:-}
EXTRA=; [ -n "$BASE" ] && EXTRA=base
for conns in $CONNECTIONS; do
  for round in $(seq "$ROUNDS"); do
    for tool in volley oha wrk $EXTRA; do run "$tool" closed "$conns" "$round"; done
  done
done
for round in $(seq "$ROUNDS"); do
  for tool in volley oha $EXTRA; do run "$tool" rate 64 "$round"; done
done

echo
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); server on CPU $SERVER_CPU, clients on CPU $CLIENT_CPU; $URL"
echo "rounds: $ROUNDS x ${DURATION}s; rate mode: $RATE calls/s target (wrk has no rate mode)"
python3 - "$CSV" "$RATE" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
rate = float(sys.argv[2])
groups = {}
for r in rows:
    groups.setdefault((r["mode"], int(r["connections"])), {}).setdefault(r["tool"], []).append(r)
med = lambda rs, k: statistics.median(float(r[k]) for r in rs)
print(f"\n{'mode':<7}{'conns':>6} {'tool':<7}{'calls/s':>11}{'cpu s/100k':>12}{'peak MB':>9}   volley/oha   volley/wrk   volley/base")
for (mode, conns), tools in sorted(groups.items()):
    v = tools.get("volley")
    for tool, rs in tools.items():
        line = f"{mode:<7}{conns:>6} {tool:<7}{med(rs,'calls_per_s'):>11.0f}{med(rs,'cpu_s_per_100k'):>12.3f}{max(float(r['max_rss_kb']) for r in rs)/1024:>9.1f}"
        if tool == "volley":
            for peer in ("oha", "wrk", "base"):
                p = tools.get(peer)
                if p:
                    line += f"   {med(v,'calls_per_s')/med(p,'calls_per_s'):.2f}x rate, {med(v,'cpu_s_per_100k')/med(p,'cpu_s_per_100k'):.2f}x cpu"
        print(line)
    if mode == "rate":
        for tool, rs in tools.items():
            print(f"        rate kept by {tool}: {med(rs,'calls_per_s')/rate*100:.2f}% of {rate:.0f}/s")
print(f"\nrows: {sys.argv[1]}")
PY
