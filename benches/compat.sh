#!/usr/bin/env bash
# Checks volley against real third-party JSON-RPC servers from the package
# registries (see docs/compatibility.md): two Ethereum development nodes
# over HTTP and WebSocket, the MCP reference server over stdio and
# streamable HTTP, and a language server over stdio. Every server listens
# on 127.0.0.1; every run is bounded in time. Needs Node.js and npm.
# One line per run: calls, ok, protocol outcomes (must be 0), calls/s, p50.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${SECONDS_EACH:-10}
PEERS=${PEERS:-$PWD/target/peers}
cargo build --release --quiet
VOLLEY=$PWD/target/release/volley
mkdir -p "$PEERS"
if [ ! -x "$PEERS/node_modules/.bin/hardhat" ]; then
  (cd "$PEERS" && npm init -y >/dev/null && npm install --no-fund --no-audit \
    hardhat@2 ganache@7 @modelcontextprotocol/server-everything pyright >/dev/null 2>&1)
fi
# A block a second, so newHeads has something to say; chain id 1337 as the
# Ethereum scenarios expect.
echo 'module.exports = { networks: { hardhat: { chainId: 1337, mining: { auto: true, interval: 1000 } } } };' >"$PEERS/hardhat.config.js"
export PATH=$PEERS/node_modules/.bin:$PATH
WORK=$(mktemp -d)
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null || true; rm -rf "$WORK"' EXIT
(cd "$PEERS" && HARDHAT_DISABLE_TELEMETRY_PROMPT=true exec hardhat node --hostname 127.0.0.1 --port 18545 >"$WORK/hardhat.log" 2>&1) &
PIDS+=($!)
ganache --server.host 127.0.0.1 --server.port 18555 --miner.blockTime 1 --logging.quiet >"$WORK/ganache.log" 2>&1 &
PIDS+=($!)
PORT=13001 mcp-server-everything streamableHttp >"$WORK/mcp.log" 2>&1 &
PIDS+=($!)
for port in 18545 18555 13001; do
  for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.2; done
done
mkdir -p /tmp/volley-lsp

run() { # label, scenario, extra args...
  local label=$1 scenario=$2
  shift 2
  "$VOLLEY" run "$scenario" --duration "${SECONDS_EACH}s" --quiet --no-tui --out "$WORK/$label" "$@" >/dev/null
  python3 - "$label" "$WORK/$label/summary.json" <<'PY'
import json, sys
label, path = sys.argv[1:]
s = json.load(open(path))
t = s["summary"]["total"]
extra = ""
subs = s["summary"].get("subscriptions")
if subs:
    extra += f"  subs {subs['opened']}, {subs['per_subscription_per_second']:.2f}/s each, gap p50 {subs['gap']['p50_ms']:.0f} ms"
ends = s["summary"].get("child_shutdown")
if ends:
    extra += f"  children: {ends['clean']} clean, {ends['killed']} killed"
print(f"{label:<16} {s['meta']['transport']:<12} calls {t['calls']:>7}  ok {t['ok']:>7}  protocol {t['outcomes']['protocol']}  "
      f"{t['calls_per_s']:>8.1f}/s  p50 {t['latency']['p50_ms']:.2f} ms  other msgs {s['summary']['unsolicited_messages']}{extra}")
PY
}

run hardhat-http scenarios/ethereum-read.toml --target http://127.0.0.1:18545
run hardhat-ws scenarios/ethereum-ws.toml --target ws://127.0.0.1:18545
run ganache-http scenarios/ethereum-read.toml --target http://127.0.0.1:18555
run ganache-ws scenarios/ethereum-ws.toml --target ws://127.0.0.1:18555
run mcp-stdio scenarios/mcp-stdio.toml
run mcp-http scenarios/mcp-http.toml --target http://127.0.0.1:13001/mcp
run pyright scenarios/lsp-stdio.toml
