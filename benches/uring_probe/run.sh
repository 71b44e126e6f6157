#!/usr/bin/env bash
# uring_probe against volley (epoll) and wrk, pinned like benches/peers.sh:
# `volley serve --threads 1` on CPU 0, each client alone on CPU 1, interleaved
# rounds, client CPU (user + sys) from /usr/bin/time.
#
#   benches/uring_probe/run.sh
#   ROUNDS=7 DURATION=5 CONNECTIONS="1 64 1000" PIPELINE=1 \
#     TOOLS="uring volley wrk" benches/uring_probe/run.sh
#
# TOOLS: uring (the probe as built), uring-fixed (registered files),
# uring-skip (sends with CQE_SKIP_SUCCESS + MSG_WAITALL), uring-fs (both),
# uring-w8 (submit_and_wait(8)), uring-coop (COOP_TASKRUN, no DEFER_TASKRUN),
# uring-mw (wait for 16 completions or 50 us after the first), uring-batch
# (wrk's pipelining: the next N once all N are answered),
# volley (peers.sh's command; pipeline 1 only), wrk (-t1; Lua pipelining for
# PIPELINE > 1). Prints a CSV and the medians; CSV in $OUT_CSV.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-5}
CONNECTIONS=${CONNECTIONS:-64}
PIPELINE=${PIPELINE:-1}
TOOLS=${TOOLS:-"uring volley wrk"}
PORT=${PORT:-19745}
VOLLEY=${VOLLEY:-target/release/volley}
PROBE=benches/uring_probe/target/release/uring_probe
[ -x "$PROBE" ] || (cd benches/uring_probe && cargo build --release --quiet)
[ -x "$VOLLEY" ] || cargo build --release --quiet
BODY='{"jsonrpc":"2.0","method":"eth_chainId","id":1}'
OUT_CSV=${OUT_CSV:-results/bench/uring-probe-$(date -u +%Y%m%dT%H%M%SZ).csv}
mkdir -p results/bench
WORK=$(mktemp -d)
trap 'kill "${SERVER_PID:-}" 2>/dev/null || true; rm -rf "$WORK"' EXIT
ulimit -n 65536 2>/dev/null || true

taskset -c 0 "$VOLLEY" serve --listen "127.0.0.1:$PORT" --threads 1 >"$WORK/serve.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 50); do grep -q "volley serve" "$WORK/serve.log" 2>/dev/null && break; sleep 0.1; done

cat >"$WORK/post.lua" <<EOF
wrk.method = "POST"
wrk.body = '$BODY'
wrk.headers["Content-Type"] = "application/json"
EOF
cat >"$WORK/pipeline.lua" <<EOF
wrk.method = "POST"
wrk.body = '$BODY'
wrk.headers["Content-Type"] = "application/json"
init = function(args)
  local r = {}
  for i = 1, $PIPELINE do r[i] = wrk.format() end
  req = table.concat(r)
end
request = function() return req end
EOF

echo "connections,pipeline,tool,round,calls_per_s,calls,user_s,sys_s,cpu_s_per_100k,extra" >"$OUT_CSV"
run() {
  local tool=$1 conns=$2 round=$3 out="$WORK/out" timing="$WORK/time" extra=""
  case "$tool" in
    uring*)
      local flags=()
      case "$tool" in
        uring-fixed) flags=(--fixed) ;;
        uring-skip) flags=(--skip-send-cqe) ;;
        uring-fs) flags=(--fixed --skip-send-cqe) ;;
        uring-w8) flags=(--wait 8) ;;
        uring-coop) flags=(--no-defer) ;;
        uring-mw) flags=(--wait 16 --min-wait-us 50) ;;
        uring-batch) flags=(--batch) ;;
        uring-sb) flags=(--buf-count 256) ;;
        uring-sbmw) flags=(--buf-count 256 --wait 16 --min-wait-us 50) ;;
      esac
      /usr/bin/time -o "$timing" -f "%U %S" taskset -c 1 "$PROBE" --url-port "$PORT" -c "$conns" \
        -d "$DURATION" --pipeline "$PIPELINE" "${flags[@]}" >"$out" 2>&1 || { cat "$out"; exit 1; }
      calls=$(sed -n 's/.*calls=\([0-9]*\) .*/\1/p' "$out")
      rps=$(sed -n 's/.*calls_per_s=\([0-9.]*\).*/\1/p' "$out")
      extra=$(grep -o 'turns=.*' "$out" | tr ' ' ';')
      ;;
    volley)
      [ "$PIPELINE" = 1 ] || return 0
      rm -rf "$WORK/vout"
      /usr/bin/time -o "$timing" -f "%U %S" taskset -c 1 "$VOLLEY" run --target "http://127.0.0.1:$PORT/" \
        --method eth_chainId -c "$conns" --connections "$conns" -d "${DURATION}s" --threads 1 --quiet \
        --out "$WORK/vout" >"$out" 2>&1 || { cat "$out"; exit 1; }
      read -r rps calls < <(python3 -c '
import json,sys
t=json.load(open(sys.argv[1]))["summary"]["total"]
assert t["ok"]==t["calls"], "calls not ok"
print(t["calls_per_s"], t["calls"])' "$WORK/vout/summary.json")
      ;;
    wrk)
      local lua="$WORK/post.lua"; [ "$PIPELINE" = 1 ] || lua="$WORK/pipeline.lua"
      /usr/bin/time -o "$timing" -f "%U %S" taskset -c 1 wrk -t1 -c "$conns" -d "${DURATION}s" \
        -s "$lua" "http://127.0.0.1:$PORT/" >"$out" 2>&1 || { cat "$out"; exit 1; }
      rps=$(sed -n 's/Requests\/sec:[[:space:]]*\([0-9.]*\).*/\1/p' "$out")
      calls=$(sed -n 's/^[[:space:]]*\([0-9]*\) requests in.*/\1/p' "$out")
      if grep -q "Non-2xx\|Socket errors" "$out"; then extra=$(grep "Non-2xx\|Socket errors" "$out" | tr ' ,' '_;'); fi
      ;;
  esac
  read -r user sys <"$timing"
  python3 -c '
import sys
c,p,t,r,rps,calls,u,s,x=sys.argv[1:]
cpu=float(u)+float(s)
print(f"{c},{p},{t},{r},{float(rps):.0f},{calls},{u},{s},{cpu/int(calls)*1e5:.4f},{x}")' \
    "$conns" "$PIPELINE" "$tool" "$round" "$rps" "$calls" "$user" "$sys" "$extra" | tee -a "$OUT_CSV"
}

echo "load before: $(uptime)"
for conns in $CONNECTIONS; do
  for round in $(seq "$ROUNDS"); do
    for tool in $TOOLS; do run "$tool" "$conns" "$round"; done
  done
done
echo "load after: $(uptime)"

python3 - "$OUT_CSV" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
groups = {}
for r in rows:
    groups.setdefault((int(r["connections"]), int(r["pipeline"])), {}).setdefault(r["tool"], []).append(r)
for (c, p), tools in sorted(groups.items()):
    print(f"\n== {c} connections, pipeline {p}")
    print(f"{'tool':12} {'calls/s med':>12} {'min..max':>18} {'cpu s/100k med':>15} {'min..max':>16} {'calls/cpu-s':>12}")
    med = {}
    for t, rs in tools.items():
        rps = [float(r["calls_per_s"]) for r in rs]
        cpu = [float(r["cpu_s_per_100k"]) for r in rs]
        med[t] = (statistics.median(rps), statistics.median(cpu))
        print(f"{t:12} {med[t][0]:12.0f} {min(rps):8.0f}..{max(rps):<8.0f} {med[t][1]:15.4f} {min(cpu):7.4f}..{max(cpu):<7.4f} {1e5/med[t][1]:12.0f}")
    # Ratios of the medians, and the median of each round's own ratio
    # (tools adjacent in time share the machine's load at that moment).
    others = [o for o in ("uring", "volley", "wrk") if o in med]
    for t in med:
        if not t.startswith("uring"):
            continue
        for o in others:
            if o == t:
                continue
            by_round = {r["round"]: r for r in tools[o]}
            pr_rps = [float(r["calls_per_s"]) / float(by_round[r["round"]]["calls_per_s"]) for r in tools[t] if r["round"] in by_round]
            pr_cpu = [float(by_round[r["round"]]["cpu_s_per_100k"]) / float(r["cpu_s_per_100k"]) for r in tools[t] if r["round"] in by_round]
            print(f"  {t}/{o}: calls/s {med[t][0]/med[o][0]:.3f}x (per round med {statistics.median(pr_rps):.3f}x, {min(pr_rps):.2f}..{max(pr_rps):.2f}), "
                  f"calls per client CPU-s {med[o][1]/med[t][1]:.3f}x (per round med {statistics.median(pr_cpu):.3f}x, {min(pr_cpu):.2f}..{max(pr_cpu):.2f})")
PY
