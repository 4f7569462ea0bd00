#!/usr/bin/env bash
# Task creation throughput: 202s per second of POST /v1/images/generations, one gateway process
# per store, workers off (creation only), wrk closed loop. Loopback only.
#
#   bench/task_bench.sh                       # both stores, c=16, 10 s
#   BACKENDS=sqlite CONCURRENCY="1 16" DURATION=5 bench/task_bench.sh
#   BACKENDS="redis cluster" bench/task_bench.sh   # one Redis against a Redis Cluster
#
# Redis: a private redis-server on 127.0.0.1:$OWN_REDIS_PORT (6398), started and stopped here.
# cluster: 3 masters + 3 replicas (bench/cluster.sh) on $CLUSTER_PORT.. (7100), likewise; its
# money writes wait for a replica (the store's default there).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
VENV="${VENV:-${VIRTUAL_ENV:-$ROOT/.venv}}"
BACKENDS="${BACKENDS:-sqlite redis}"
CONCURRENCY="${CONCURRENCY:-16}"
DURATION="${DURATION:-10}"
WARMUP="${WARMUP:-2}"
PORT="${GATEWAY_PORT:-8091}"
OWN_REDIS_PORT="${OWN_REDIS_PORT:-6398}"
PY="$VENV/bin/python"
GW="$VENV/bin/gateway"
WORK="$(mktemp -d)"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  "$HERE/cluster.sh" stop "$WORK/cluster" 2>/dev/null || true
  sleep 0.5; rm -rf "$WORK"
}
trap cleanup EXIT
command -v wrk >/dev/null || { echo "needs wrk (apt-get install -y wrk)" >&2; exit 2; }

BODY='{"model":"auto","prompt":"a lighthouse at dusk","quality":"standard","aspect_ratio":"16:9","n":2,"metadata":{"run":"bench"}}'
export BENCH_BODY="$BODY"

wait_health() {
  for _ in $(seq 1 300); do
    [ "$(curl -s -m 1 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/v1/health")" = 200 ] && return 0
    sleep 0.02
  done
  echo "gateway did not start" >&2; exit 1
}

printf '| store | conc | 202/s | non-2xx | p50 ms | p99 ms | gateway CPU ms per create | RSS after MiB |\n'
printf '|---|---:|---:|---:|---:|---:|---:|---:|\n'
for backend in $BACKENDS; do
  env=(GATEWAY_CONFIG="$HERE/task-bench.toml" GATEWAY_DATA_DIR="$WORK/$backend" GATEWAY_WORKERS=0
       GATEWAY_LOG_LEVEL=info GATEWAY_PORT="$PORT")
  if [ "$backend" = redis ]; then
    redis-server --bind 127.0.0.1 --port "$OWN_REDIS_PORT" --save '' --appendonly no \
      --dir "$WORK" >/dev/null 2>&1 &
    PIDS+=($!)
    sleep 0.3
    env+=(GATEWAY_STORE_URL="redis://127.0.0.1:$OWN_REDIS_PORT/0")
  elif [ "$backend" = cluster ]; then
    env+=(GATEWAY_STORE_URL="$("$HERE/cluster.sh" start "$WORK/cluster" "${CLUSTER_PORT:-7100}")")
  fi
  if [ "$backend" != sqlite ]; then
    key=$(env "${env[@]}" "$GW" keys create --tenant default 2>/dev/null)
    env "${env[@]}" "$GW" credits grant --tenant default --amount 1000000000 --reason bench >/dev/null 2>&1
  fi
  mkdir -p "$WORK/$backend"
  env "${env[@]}" "$GW" serve > "$WORK/$backend.log" 2>&1 &
  gpid=$!; PIDS+=("$gpid")
  wait_health
  [ "$backend" = sqlite ] && key=$(sed -n 's/^API key (tenant default): //p' "$WORK/$backend.log")
  export BENCH_API_KEY="$key"
  url="http://127.0.0.1:$PORT/v1/images/generations"
  for c in $CONCURRENCY; do
    wrk -t1 -c"$c" -d"${WARMUP}s" -s "$HERE/wrk_chat.lua" "$url" >/dev/null
    s0=$("$PY" "$HERE/proc_stats.py" "$gpid")
    n0=$(grep -c '"status":202' "$WORK/$backend.log" || true)
    out=$(wrk -t1 -c"$c" -d"${DURATION}s" -s "$HERE/wrk_chat.lua" "$url")
    sleep 0.3
    s1=$("$PY" "$HERE/proc_stats.py" "$gpid")
    n1=$(grep -c '"status":202' "$WORK/$backend.log" || true)
    line=$(grep '^WRKJSON ' <<<"$out" | sed 's/^WRKJSON //')
    "$PY" - "$backend" "$c" "$line" "$s0" "$s1" "$n0" "$n1" <<'PYEOF'
import json, sys
backend, c, line, s0, s1, n0, n1 = sys.argv[1:]
w, s0, s1 = json.loads(line), json.loads(s0), json.loads(s1)
created = int(n1) - int(n0)
cpu_ms = (s1["cpu_s"] - s0["cpu_s"]) * 1000 / created if created else float("nan")
print(f"| {backend} | {c} | {w['rps']:,.0f} | {w['err_status']} | {w['p50_ms']:.2f} | "
      f"{w['p99_ms']:.2f} | {cpu_ms:.3f} | {s1['rss_mib']:.0f} |")
PYEOF
  done
  kill "$gpid"; wait "$gpid" 2>/dev/null || true
done
