#!/usr/bin/env bash
# Side-by-side benchmark: volley against oha and wrk on one `volley serve`.
#
#   benches/peers.sh                 # full run: 1, 64 and 1000 connections, rate mode,
#                                    # large answers and multiplexed transports
#   ROUNDS=5 DURATION=10 benches/peers.sh
#   TLS=1 CONNECTIONS=64 benches/peers.sh   # the same over HTTPS (the server's own CA)
#   BASE=/path/to/older/volley CONNECTIONS=64 benches/peers.sh
#                                    # also the previous build, as the tool `base`
#   LARGE= MUX= benches/peers.sh     # without the large-answer and multiplexed cases
#   PIPELINE="16" benches/peers.sh   # also HTTP/1.1 pipelined 16 deep (the default; empty: none)
#   CONNECTIONS= RATEMODE= LARGE= MUX= benches/peers.sh   # the flow case alone
#
# Each tool sends the same JSON-RPC call (eth_chainId) over HTTP/1.1 keep-alive
# with the same connections for the same time, in interleaved rounds
# (volley, oha, wrk, h2load, volley, ...). The server is pinned to CPU 0 and
# every client to CPU 1, so a client is charged only for its own work.
# Per tool it reports the median calls/s, the client's CPU seconds per
# 100,000 calls (user + system, from the process's own accounting), the peak
# resident memory, and volley's ratios to the others. CSV goes to
# results/bench/. Everything listens on and talks to 127.0.0.1 only.
#
# Rate mode: the open model at $RATE calls/s on 64 connections, beside the
# closed model at the same rate and connections (64 in flight against a
# server that answers at most RATE calls a second: `paced`), so CPU per
# call compares like with like. Large answers: the `block` method with LARGE
# transactions (150: 122 KB, 1,500: 1.2 MB) on 64 connections,
# every answer judged whole; MB/s is calls/s times the answer's size.
# Multiplexed: 4 connections x 64 in flight against a server holding each
# answer 10 ms (ideal 25,600 calls/s), over TCP, WebSocket, h2c and a
# child's stdio, with h2load and oha on h2c.
# Pipelined: 64 connections, each PIPELINE requests deep (volley
# --pipeline, wrk with a script sending that many requests at once, h2load
# --h1 -m), beside volley at depth 1.
# Flows: volley alone, 64 connections, a flow of two steps (eth_chainId, its
# result captured and sent on to `echo`, whose answer must equal it) beside
# the same two calls as a plain mix with the same check: the CPU a flow's
# step costs against a plain call's (`flow/plain`, which should stay
# within 1.2x).
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
CONNECTIONS=${CONNECTIONS-"1 64 1000"}
RATE=${RATE:-20000}
LARGE=${LARGE-"150 1500"}
MUX=${MUX-1}
RATEMODE=${RATEMODE-1}
FLOW=${FLOW-1}
PIPELINE=${PIPELINE-16}
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
trap 'kill "${SERVER_PID:-}" "${PACED_PID:-}" "${MUX_PID:-}" 2>/dev/null || true; rm -rf "$WORK"' EXIT

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
# The closed model paced to RATE: 64 in flight, the server answering RATE
# a second (the rest queue).
# (Plain HTTP: under TLS=1 the rate rows compare over HTTPS, this one not.)
PACED_URL="http://127.0.0.1:$((PORT + 1))/"
taskset -c "$SERVER_CPU" "$VOLLEY" serve --listen "127.0.0.1:$((PORT + 1))" --threads 1 \
  --capacity "$RATE" >"$WORK/paced.log" 2>&1 &
PACED_PID=$!

# wrk_script FILE BODY: wrk's script that POSTs BODY.
wrk_script() {
  printf 'wrk.method = "POST"\nwrk.body = %s\nwrk.headers["Content-Type"] = "application/json"\n' "'$2'" >"$1"
}
wrk_script "$WORK/post.lua" "$BODY"
# The same, N requests written at once (N is the script's argument).
cp "$WORK/post.lua" "$WORK/pipeline.lua"
cat >>"$WORK/pipeline.lua" <<'LUA'
init = function(args)
  local depth, each = tonumber(args[1]), {}
  for i = 1, depth do each[i] = wrk.format() end
  batch = table.concat(each)
end
request = function() return batch end
LUA
printf '%s' "$BODY" >"$WORK/body.json"

echo "mode,connections,tool,round,calls_per_s,calls,cpu_s,cpu_s_per_100k,user_s_per_100k,max_rss_kb" >"$CSV"

# run TOOL MODE CONNECTIONS ROUND: one timed run, one CSV row. MODE is
# closed, rate (the open model), paced (the closed model at RATE),
# large-N (the `block` method with N transactions) or pipe-N (HTTP/1.1
# pipelined N deep).
run() {
  local tool=$1 mode=$2 conns=$3 round=$4 out="$WORK/$1.out" timing="$WORK/$1.time"
  local url=$URL body=$BODY lua="$WORK/post.lua" call=(--method eth_chainId) load=(-c "$conns") oha_rate=()
  local depth=1 wrk_args=()
  # Each run its own result directory: a case may run a tool twice a round.
  RUN_NO=$((${RUN_NO:-0} + 1))
  case "$mode" in
    pipe-*)
      depth=${mode#pipe-}; lua="$WORK/pipeline.lua"; wrk_args=(-- "$depth")
      load=(-c "$((conns * depth))" --pipeline "$depth") ;;
    rate) load=(--rate "$RATE"); oha_rate=(-q "$RATE") ;;
    paced) url=$PACED_URL ;;
    large-*)
      local n=${mode#large-}
      body="{\"jsonrpc\":\"2.0\",\"method\":\"block\",\"params\":[$n],\"id\":1}"
      call=(--method block --params "[$n]"); lua="$WORK/large-$n.lua"; wrk_script "$lua" "$body" ;;
  esac
  case "$tool" in
    volley|base)
      local binary=$VOLLEY; [ "$tool" = base ] && binary=$BASE
      local tls=("${VOLLEY_TLS[@]}"); [ "$mode" = paced ] && tls=()
      /usr/bin/time -o "$timing" -f "%U %S %M" taskset -c "$CLIENT_CPU" "$binary" run --target "$url" \
        "${call[@]}" "${load[@]}" --connections "$conns" -d "${DURATION}s" --threads 1 --quiet "${tls[@]}" \
        --out "$WORK/$tool-$mode-$conns-$round-$RUN_NO" >"$out" 2>&1
      python3 - "$WORK/$tool-$mode-$conns-$round-$RUN_NO/summary.json" >"$WORK/calls" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
t = s["total"]
# Every call judged: one that was not ok would make the comparison unfair.
assert t["ok"] == t["calls"], f"{t['calls'] - t['ok']} calls not ok"
print(t["calls_per_s"], t["calls"])
PY
      ;;
    oha)
      /usr/bin/time -o "$timing" -f "%U %S %M" taskset -c "$CLIENT_CPU" oha --no-tui -c "$conns" "${OHA_TLS[@]}" \
        "${oha_rate[@]}" -z "${DURATION}s" -m POST -H 'content-type: application/json' -d "$body" "$url" >"$out" 2>&1
      python3 - "$out" "$DURATION" >"$WORK/calls" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
rps = float(re.search(r"Requests/sec:\s*([\d.]+)", text).group(1))
print(rps, int(rps * float(sys.argv[2])))
PY
      ;;
    wrk)
      /usr/bin/time -o "$timing" -f "%U %S %M" taskset -c "$CLIENT_CPU" wrk -t1 -c "$conns" -d "${DURATION}s" \
        -s "$lua" "$url" "${wrk_args[@]}" >"$out" 2>&1
      python3 - "$out" >"$WORK/calls" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
rps = float(re.search(r"Requests/sec:\s*([\d.]+)", text).group(1))
calls = int(re.search(r"(\d+) requests in", text).group(1))
print(rps, calls)
PY
      ;;
    h2load)
      /usr/bin/time -o "$timing" -f "%U %S %M" taskset -c "$CLIENT_CPU" h2load --h1 -t 1 -c "$conns" -m "$depth" \
        -D "$DURATION" -d "$WORK/body.json" -H 'content-type: application/json' "$url" >"$out" 2>&1
      python3 - "$out" >"$WORK/calls" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
rps = float(re.search(r"finished in [\d.]+s, ([\d.]+) req/s", text).group(1))
done = re.search(r"requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded, (\d+) failed", text)
assert done.group(2) == "0", f"{done.group(2)} requests failed"
print(rps, int(done.group(1)))
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
user_per = float(user) / max(int(calls), 1) * 100000
print(f"{mode},{conns},{tool},{rnd},{float(rps):.1f},{calls},{cpu:.2f},{per:.3f},{user_per:.3f},{rss}")
PY
  tail -n 1 "$CSV"
}

BASE=${BASE:-}
EXTRA=; [ -n "$BASE" ] && EXTRA=base
for conns in $CONNECTIONS; do
  for round in $(seq "$ROUNDS"); do
    for tool in volley oha wrk h2load $EXTRA; do run "$tool" closed "$conns" "$round"; done
  done
done
for depth in $PIPELINE; do
  for round in $(seq "$ROUNDS"); do
    run volley closed 64 "$round"
    for tool in volley wrk h2load $EXTRA; do run "$tool" "pipe-$depth" 64 "$round"; done
  done
done
if [ -n "$RATEMODE" ]; then
  for round in $(seq "$ROUNDS"); do
    for tool in volley oha $EXTRA; do run "$tool" rate 64 "$round"; done
    run volley paced 64 "$round"
  done
fi
for n in $LARGE; do
  for round in $(seq "$ROUNDS"); do
    for tool in volley oha wrk $EXTRA; do run "$tool" "large-$n" 64 "$round"; done
  done
  # The answer's size, for bytes/s.
  python3 - "$URL" "$n" >"$WORK/size-$n" <<'PY'
import ssl, sys, urllib.request
url, n = sys.argv[1:]
body = ('{"jsonrpc":"2.0","method":"block","params":[%s],"id":1}' % n).encode()
req = urllib.request.Request(url, body, {"content-type": "application/json"})
print(len(urllib.request.urlopen(req, context=ssl._create_unverified_context()).read()))
PY
done

# mux TOOL ROUND: one run of 4 connections x 64 in flight against the
# server that holds each answer 10 ms.
mux() {
  local tool=$1 round=$2 out="$WORK/$1.out" timing="$WORK/$1.time" body='{"jsonrpc":"2.0","method":"eth_blockNumber","id":1}'
  local time=(/usr/bin/time -o "$timing" -f "%U %S %M" taskset -c "$CLIENT_CPU")
  case "$tool" in
    volley-*)
      local target
      case "$tool" in
        volley-tcp) target="target = \"tcp://127.0.0.1:$((PORT + 3))\"" ;;
        volley-ws) target="target = \"ws://127.0.0.1:$((PORT + 4))\"" ;;
        volley-h2c) target="target = \"http://127.0.0.1:$((PORT + 2))/\"
http2 = true" ;;
        volley-stdio) target="command = [\"taskset\", \"-c\", \"$SERVER_CPU\", \"$PWD/$VOLLEY\", \"serve\", \"--stdio\", \"--latency\", \"10ms\", \"--threads\", \"1\"]" ;;
      esac
      printf '%s\n[load]\nconcurrency = 256\nconnections = 4\nduration = "%ss"\n[[calls]]\nmethod = "eth_blockNumber"\n' \
        "$target" "$DURATION" >"$WORK/$tool.toml"
      "${time[@]}" "$VOLLEY" run "$WORK/$tool.toml" --threads 1 --quiet --out "$WORK/$tool-$round" >"$out" 2>&1
      python3 - "$WORK/$tool-$round/summary.json" >"$WORK/calls" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["summary"]["total"]
assert t["ok"] == t["calls"], f"{t['calls'] - t['ok']} calls not ok"
print(t["calls_per_s"], t["calls"])
PY
      ;;
    h2load)
      printf '%s' "$body" >"$WORK/body.json"
      "${time[@]}" h2load -c 4 -m 64 -t 1 -D "$DURATION" -d "$WORK/body.json" -H 'content-type: application/json' \
        "http://127.0.0.1:$((PORT + 2))/" >"$out" 2>&1
      python3 - "$out" >"$WORK/calls" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
rps = float(re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", text).group(1))
print(rps, int(re.search(r"(\d+) succeeded", text).group(1)))
PY
      ;;
    oha-h2c)
      "${time[@]}" oha --no-tui --http2 -c 4 -p 64 -z "${DURATION}s" -m POST -H 'content-type: application/json' \
        -d "$body" "http://127.0.0.1:$((PORT + 2))/" >"$out" 2>&1
      python3 - "$out" "$DURATION" >"$WORK/calls" <<'PY'
import re, sys
rps = float(re.search(r"Requests/sec:\s*([\d.]+)", open(sys.argv[1]).read()).group(1))
print(rps, int(rps * float(sys.argv[2])))
PY
      ;;
  esac
  read -r rps calls <"$WORK/calls"
  read -r user sys rss <"$timing"
  python3 - "$tool" "$round" "$rps" "$calls" "$user" "$sys" "$rss" >>"$CSV" <<'PY'
import sys
tool, rnd, rps, calls, user, sys_, rss = sys.argv[1:]
cpu, n = float(user) + float(sys_), max(int(calls), 1)
print(f"mux,4,{tool},{rnd},{float(rps):.1f},{calls},{cpu:.2f},{cpu / n * 1e5:.3f},{float(user) / n * 1e5:.3f},{rss}")
PY
  tail -n 1 "$CSV"
}
if [ -n "$MUX" ]; then
  taskset -c "$SERVER_CPU" "$VOLLEY" serve --listen "127.0.0.1:$((PORT + 2))" --tcp "127.0.0.1:$((PORT + 3))" \
    --ws "127.0.0.1:$((PORT + 4))" --latency 10ms --threads 1 >"$WORK/mux.log" 2>&1 &
  MUX_PID=$!
  for _ in $(seq 50); do grep -q "ws://" "$WORK/mux.log" 2>/dev/null && break; sleep 0.1; done
  for round in $(seq "$ROUNDS"); do
    for tool in volley-tcp volley-ws volley-h2c volley-stdio h2load oha-h2c; do mux "$tool" "$round"; done
  done
fi

# flowrun TOOL ROUND: `flow` (two steps, a value captured from the first
# sent in the second) or `plain` (the same two calls as a mix).
flowrun() {
  local tool=$1 round=$2 out="$WORK/$1.out" timing="$WORK/$1.time" file="$WORK/$1.toml"
  printf 'target = "%s"\n[load]\nconcurrency = 64\nconnections = 64\nduration = "%ss"\n' "$URL" "$DURATION" >"$file"
  if [ "$tool" = flow ]; then
    cat >>"$file" <<'TOML'
[[flows]]
name = "f"
[[flows.steps]]
method = "eth_chainId"
capture = { v = "" }
[[flows.steps]]
method = "echo"
params = ["${v}"]
expect = { pointer = "/0", equals = "${v}" }
TOML
  else
    cat >>"$file" <<'TOML'
[[calls]]
method = "eth_chainId"
[[calls]]
method = "echo"
params = ["0x539"]
expect = { pointer = "/0", equals = "0x539" }
TOML
  fi
  /usr/bin/time -o "$timing" -f "%U %S %M" taskset -c "$CLIENT_CPU" "$VOLLEY" run "$file" --threads 1 --quiet \
    "${VOLLEY_TLS[@]}" --out "$WORK/$tool-$round" >"$out" 2>&1
  python3 - "$WORK/$tool-$round/summary.json" >"$WORK/calls" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["summary"]["total"]
assert t["ok"] == t["calls"], f"{t['calls'] - t['ok']} calls not ok"
print(t["calls_per_s"], t["calls"])
PY
  read -r rps calls <"$WORK/calls"
  read -r user sys rss <"$timing"
  python3 - "$tool" "$round" "$rps" "$calls" "$user" "$sys" "$rss" >>"$CSV" <<'PY'
import sys
tool, rnd, rps, calls, user, sys_, rss = sys.argv[1:]
cpu, n = float(user) + float(sys_), max(int(calls), 1)
print(f"flow,64,{tool},{rnd},{float(rps):.1f},{calls},{cpu:.2f},{cpu / n * 1e5:.3f},{float(user) / n * 1e5:.3f},{rss}")
PY
  tail -n 1 "$CSV"
}
if [ -n "$FLOW" ]; then
  for round in $(seq "$ROUNDS"); do
    for tool in flow plain; do flowrun "$tool" "$round"; done
  done
fi

echo
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); server on CPU $SERVER_CPU, clients on CPU $CLIENT_CPU; $URL"
echo "rounds: $ROUNDS x ${DURATION}s; rate mode: $RATE calls/s target (wrk has no rate mode)"
python3 - "$CSV" "$RATE" "$WORK" <<'PY'
import csv, os, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
rate, work = float(sys.argv[2]), sys.argv[3]
groups = {}
for r in rows:
    groups.setdefault((r["mode"], int(r["connections"])), {}).setdefault(r["tool"], []).append(r)
med = lambda rs, k: statistics.median(float(r[k]) for r in rs)
print(f"\n{'mode':<11}{'conns':>6} {'tool':<13}{'calls/s':>10}{'cpu s/100k':>11}{'user':>7}{'peak MB':>9}   volley/oha   volley/wrk   volley/h2load   volley/base")
order = lambda item: (["closed", "rate", "paced", "flow"].index(item[0][0]) if item[0][0] in ("closed", "rate", "paced", "flow") else 4, item[0])
for (mode, conns), tools in sorted(groups.items(), key=order):
    v = tools.get("volley")
    for tool, rs in tools.items():
        line = (f"{mode:<11}{conns:>6} {tool:<13}{med(rs,'calls_per_s'):>10.0f}{med(rs,'cpu_s_per_100k'):>11.3f}"
                f"{med(rs,'user_s_per_100k'):>7.3f}{max(float(r['max_rss_kb']) for r in rs)/1024:>9.1f}")
        if tool == "volley":
            for peer in ("oha", "wrk", "h2load", "base"):
                p = tools.get(peer)
                if p:
                    line += f"   {med(v,'calls_per_s')/med(p,'calls_per_s'):.2f}x rate, {med(v,'cpu_s_per_100k')/med(p,'cpu_s_per_100k'):.2f}x cpu"
                    if peer == "wrk":
                        line += f", {med(v,'user_s_per_100k')/med(p,'user_s_per_100k'):.2f}x user"
        if mode.startswith("large-"):
            size = int(open(os.path.join(work, "size-" + mode[6:])).read())
            line += f"   {size / 1000:.0f} KB answers: {med(rs,'calls_per_s') * size / 1e6:.0f} MB/s"
        if mode == "mux":
            line += f"   {med(rs,'calls_per_s') / 25600 * 100:.0f}% of 25,600"
        print(line)
    if mode == "rate":
        for tool, rs in tools.items():
            print(f"        rate kept by {tool}: {med(rs,'calls_per_s')/rate*100:.2f}% of {rate:.0f}/s")
one = groups.get(("closed", 64), {}).get("volley")
for (mode, conns), tools in sorted(groups.items()):
    if mode.startswith("pipe-") and one and tools.get("volley"):
        deep = tools["volley"]
        print(f"\nvolley pipelined {mode[5:]} deep: {med(deep,'calls_per_s')/med(one,'calls_per_s'):.2f}x its own calls/s at depth 1, "
              f"{med(one,'cpu_s_per_100k')/med(deep,'cpu_s_per_100k'):.2f}x its calls per client CPU-second")
flow, plain = groups.get(("flow", 64), {}).get("flow"), groups.get(("flow", 64), {}).get("plain")
if flow and plain:
    print(f"\na flow's step: {med(flow,'cpu_s_per_100k')/med(plain,'cpu_s_per_100k'):.2f}x the CPU of a plain call (flow/plain; within 1.2x is the bar)")
open_, paced = groups.get(("rate", 64), {}).get("volley"), groups.get(("paced", 64), {}).get("volley")
if open_ and paced:
    print(f"\nvolley's open model at {rate:.0f}/s: {med(open_,'cpu_s_per_100k')/med(paced,'cpu_s_per_100k'):.2f}x the CPU per call of its closed model at the same rate")
print(f"\nrows: {sys.argv[1]}")
PY
