#!/usr/bin/env bash
# Gateway overhead benchmark, one command: mock upstream + one gateway process per store backend,
# direct-vs-gateway load (wrk, non-streaming; stream_bench.py, streaming), process facts
# (start-up time, RSS idle/after, CPU per request) and the Idempotency-Key path.
#
#   bench/run.sh                                  # quick pass (~6 min)
#   DURATION=15 ROUNDS=2 WARMUP=3 bench/run.sh    # the full run of docs/performance.md (~16 min)
#
# Results: bench/results/<LABEL>/ (gitignored): summary.md (all tables + target check), and per
# variant <backend>[-idem]/ with wrk.jsonl, stream.jsonl, cpu.jsonl, meta.json, summary.md,
# plus the gateway's own log (gateway.log, one JSON line per request) per backend.
#
# Environment knobs (defaults in brackets):
#   LABEL            results folder name                                  [run-<date>-<time>]
#   BACKENDS         store backends to measure, in order: sqlite, redis, cluster (a local
#                    Redis Cluster, 3 masters + 3 replicas by bench/cluster.sh on
#                    CLUSTER_PORT.., 7100; money writes wait for a replica)   ["sqlite redis"]
#   IDEM_BACKENDS    backends that also run the unique-Idempotency-Key load ["sqlite redis"]
#   REDIS_URL        Redis for the redis backend; its DB is FLUSHED first [redis://127.0.0.1:6379/15]
#                    (unset and nothing answering on 127.0.0.1:6379: a private redis-server is
#                    started on 127.0.0.1:$OWN_REDIS_PORT [6399] and stopped at the end)
#   CONCURRENCY      wrk connection counts                                ["1 16 64"]
#   DURATION         measured seconds per wrk run                         [10]
#   WARMUP           unrecorded wrk seconds before each measured run      [2]
#   ROUNDS           rounds per concurrency level (order flips each round) [1]
#   WRK_THREADS      wrk threads (capped at the concurrency)              [1]
#   WRK_TIMEOUT      wrk per-request timeout                              [10s]
#   STREAM_N         measured streaming requests per target               [200]
#   SKIP_STREAM=1    skip the streaming part
#   IDLE_WAIT        seconds of quiet before the idle RSS reading         [5]
#   LOG_LEVEL        GATEWAY_LOG_LEVEL of the gateway                     [info]
#   PROCESSES        serving processes of the gateway (`serve --processes`; above 1 needs
#                    BACKENDS=redis); CPU is the whole group's, requests are counted per pid [1]
#   API              the path measured: chat (POST /v1/chat/completions, OpenAI mock), messages
#                    (POST /v1/messages to an Anthropic upstream, passed through: direct is the
#                    Anthropic mock, bench/mock_anthropic.py on 127.0.0.1:8002), or
#                    messages-translated (POST /v1/messages to the OpenAI mock, translated;
#                    direct is the OpenAI mock with the chat body the gateway sends it). The
#                    Messages paths skip the streaming part (stream_bench.py speaks OpenAI) [chat]
#   GATEWAY_PORT     gateway listen port (127.0.0.1)                      [8090]
#   VENV             venv with the project installed (gateway CLI)        [$VIRTUAL_ENV or /tmp/gwvenv]
#   INSTALL=0        do not install missing tools (wrk via apt-get, psutil via pip); fail instead
#   OUT_DIR          results root                                         [bench/results]
#   WRK              wrk binary                                           [wrk]
# The mock upstream listens on 127.0.0.1:8001 (fixed: bench/gateway-bench.toml points there).
# Everything runs on loopback; every process started here is stopped by PID on exit.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
LABEL="${LABEL:-run-$(date +%Y%m%d-%H%M%S)}"
BACKENDS="${BACKENDS:-sqlite redis}"
IDEM_BACKENDS="${IDEM_BACKENDS:-sqlite redis}"
CONCURRENCY="${CONCURRENCY:-1 16 64}"
DURATION="${DURATION:-10}"
WARMUP="${WARMUP:-2}"
ROUNDS="${ROUNDS:-1}"
WRK_THREADS="${WRK_THREADS:-1}"
WRK_TIMEOUT="${WRK_TIMEOUT:-10s}"
STREAM_N="${STREAM_N:-200}"
SKIP_STREAM="${SKIP_STREAM:-0}"
IDLE_WAIT="${IDLE_WAIT:-5}"
LOG_LEVEL="${LOG_LEVEL:-info}"
PROCESSES="${PROCESSES:-1}"
PROCESS_ARGS=()  # only when asked for, so that a version without the option can be measured
[ "$PROCESSES" = 1 ] || PROCESS_ARGS=(--processes "$PROCESSES")
GATEWAY_PORT="${GATEWAY_PORT:-8090}"
OWN_REDIS_PORT="${OWN_REDIS_PORT:-6399}"
VENV="${VENV:-${VIRTUAL_ENV:-/tmp/gwvenv}}"
INSTALL="${INSTALL:-1}"
OUT_DIR="${OUT_DIR:-$HERE/results}"
WRK="${WRK:-wrk}"
MOCK_PORT=8001
CONFIG="$HERE/gateway-bench.toml"
PY="$VENV/bin/python"
GW="$VENV/bin/gateway"
MODEL=bench-model
DIRECT_URL="http://127.0.0.1:$MOCK_PORT/v1"
GW_URL="http://127.0.0.1:$GATEWAY_PORT/v1"
RUN_DIR="$OUT_DIR/$LABEL"
BODY='{"model":"bench-model","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Say hello in one short sentence."}],"max_tokens":16}'
API="${API:-chat}"
ANTHROPIC_MOCK_PORT=8002
messages_body() { echo '{"model":"'"$1"'","system":"You are a helpful assistant.","messages":[{"role":"user","content":"Say hello in one short sentence."}],"max_tokens":16}'; }
case "$API" in  # what the gateway is sent (GW_*) and what the direct baseline is sent (DIRECT_*)
  chat) GW_PATH=/chat/completions; GW_BODY=$BODY; GW_MARK='"choices"'
        DIRECT_PATH=/chat/completions; DIRECT_BODY=$BODY; DIRECT_MARK='"choices"' ;;
  messages) GW_PATH=/messages; GW_BODY=$(messages_body bench-claude); GW_MARK='"content"'
        DIRECT_URL="http://127.0.0.1:$ANTHROPIC_MOCK_PORT/v1"
        DIRECT_PATH=/messages; DIRECT_BODY=$GW_BODY; DIRECT_MARK='"content"'; SKIP_STREAM=1 ;;
  messages-translated) GW_PATH=/messages; GW_BODY=$(messages_body bench-model); GW_MARK='"content"'
        DIRECT_PATH=/chat/completions; DIRECT_BODY=$BODY; DIRECT_MARK='"choices"'; SKIP_STREAM=1 ;;
  *) echo "run.sh: unknown API $API (chat, messages, messages-translated)" >&2; exit 1 ;;
esac
ROUTE="/v1$GW_PATH"
export BENCH_ROUTE="$ROUTE"

say() { echo "[$(date +%T)] $*"; }
die() { echo "run.sh: $*" >&2; exit 1; }

# ---- 1. prerequisites ----------------------------------------------------------------------
[ -x "$GW" ] && [ -x "$PY" ] || die "no gateway CLI in $VENV (set VENV, or: python3 -m venv /tmp/gwvenv && /tmp/gwvenv/bin/pip install -e .)"
if ! command -v "$WRK" >/dev/null 2>&1; then
  [ "$INSTALL" = 1 ] && [ "$(id -u)" = 0 ] || die "wrk is missing: apt-get install -y wrk"
  say "installing wrk (apt-get)"
  { apt-get install -y -qq wrk || { apt-get update -qq && apt-get install -y -qq wrk; }; } >/dev/null
fi
if ! "$PY" -c 'import psutil' 2>/dev/null; then
  [ "$INSTALL" = 1 ] || die "psutil is missing in $VENV: $VENV/bin/pip install psutil"
  say "installing psutil into $VENV"
  "$PY" -m pip install -q psutil >/dev/null
fi
"$PY" -c 'import uvicorn, uvloop, httptools' || die "$VENV lacks uvicorn/uvloop/httptools (pip install -e . installs them)"
command -v curl >/dev/null || die "curl is missing: apt-get install -y curl"
for b in $BACKENDS; do
  case "$b" in sqlite|redis|cluster) ;; *) die "unknown backend $b (sqlite, redis, cluster)";; esac
done

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
port_busy "$MOCK_PORT" && die "127.0.0.1:$MOCK_PORT is already in use (the mock upstream needs it)"
[ "$API" != messages ] || ! port_busy "$ANTHROPIC_MOCK_PORT" || die "127.0.0.1:$ANTHROPIC_MOCK_PORT is already in use (the Anthropic mock needs it)"
port_busy "$GATEWAY_PORT" && die "127.0.0.1:$GATEWAY_PORT is already in use (set GATEWAY_PORT)"

# ---- process bookkeeping: everything started here is stopped by PID -------------------------
PIDS=()
WORK_TMP="$(mktemp -d /tmp/gw-bench.XXXXXX)"
stop_pid() {  # $1 pid: TERM, wait up to 10 s, then KILL
  local p=$1
  kill -0 "$p" 2>/dev/null || return 0
  kill "$p" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || return 0; sleep 0.1; done
  kill -9 "$p" 2>/dev/null || true
}
cleanup() {
  local i
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do stop_pid "${PIDS[$i]}"; done
  [ -d "$WORK_TMP/cluster" ] && "$HERE/cluster.sh" stop "$WORK_TMP/cluster"
  rm -rf "$WORK_TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

wait_http() {  # $1 url, $2 max seconds, $3 pid to watch; polls every ~10 ms
  local end=$(( $(date +%s) + $2 ))
  while [ "$(date +%s)" -lt "$end" ]; do
    [ "$(curl -s -m 1 -o /dev/null -w '%{http_code}' "$1")" = 200 ] && return 0
    kill -0 "$3" 2>/dev/null || { echo "process $3 died" >&2; return 1; }
    sleep 0.01
  done
  echo "timeout waiting for $1" >&2; return 1
}

stats() { "$PY" "$HERE/proc_stats.py" "$1"; }      # {"rss_mib":..,"cpu_s":..}
jget() { "$PY" -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
now() { date +%s.%N; }

# Requests the gateway answered on the measured route so far (its log has one line per request).
served() { grep -c "\"route\":\"$ROUTE\"" "$1" 2>/dev/null || true; }

# ---- Redis ------------------------------------------------------------------------------------
REDIS_PID=""
setup_redis() {
  if [ -z "${REDIS_URL:-}" ]; then
    if [ "$(redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null)" = PONG ]; then
      REDIS_URL=redis://127.0.0.1:6379/15
    else
      if ! command -v redis-server >/dev/null; then
        [ "$INSTALL" = 1 ] && [ "$(id -u)" = 0 ] || die "no Redis: set REDIS_URL or apt-get install -y redis-server"
        say "installing redis-server (apt-get)"
        { apt-get install -y -qq redis-server || { apt-get update -qq && apt-get install -y -qq redis-server; }; } >/dev/null
      fi
      port_busy "$OWN_REDIS_PORT" && die "127.0.0.1:$OWN_REDIS_PORT busy (set OWN_REDIS_PORT or REDIS_URL)"
      say "starting a private redis-server on 127.0.0.1:$OWN_REDIS_PORT"
      redis-server --bind 127.0.0.1 --port "$OWN_REDIS_PORT" --save '' --appendonly no \
        --dir "$WORK_TMP" > "$WORK_TMP/redis.log" 2>&1 &
      REDIS_PID=$!; PIDS+=("$REDIS_PID")
      for _ in $(seq 1 100); do
        [ "$(redis-cli -p "$OWN_REDIS_PORT" ping 2>/dev/null)" = PONG ] && break; sleep 0.1
      done
      REDIS_URL="redis://127.0.0.1:$OWN_REDIS_PORT/15"
    fi
  fi
  case "$REDIS_URL" in
    redis://127.*|redis://localhost*|redis://\[::1\]*) ;;
    *) die "REDIS_URL must be a loopback address: $REDIS_URL";;
  esac
  [ "$(redis-cli -u "$REDIS_URL" ping 2>/dev/null)" = PONG ] || die "no Redis answers at $REDIS_URL"
}
redis_pid_of() {  # the redis-server's PID, if it runs on this machine
  local p
  p=$(redis-cli -u "$REDIS_URL" info server 2>/dev/null | tr -d '\r' | sed -n 's/^process_id://p')
  [ -n "$p" ] && [ -d "/proc/$p" ] && echo "$p" || true
}

# ---- load -------------------------------------------------------------------------------------
run_wrk() {  # $1 role(baseline|target) $2 url $3 key $4 conc $5 round $6 res dir $7 idem(0|1) $8 gw pid $9 gw log
  local role=$1 url=$2 key=$3 c=$4 r=$5 res=$6 idem=$7 gpid=$8 glog=$9 t out line s0 s1 n0 n1 label
  t=$(( WRK_THREADS < c ? WRK_THREADS : c ))
  local path=$DIRECT_PATH
  export BENCH_BODY="$DIRECT_BODY" BENCH_API_KEY="$key"
  [ "$role" = target ] && { path=$GW_PATH; export BENCH_BODY="$GW_BODY"; }
  label=$([ "$role" = target ] && basename "$res" || echo direct)
  if [ "$role" = target ]; then s0=$(stats "$gpid"); n0=$(served "$glog"); fi
  if [ "$WARMUP" -gt 0 ]; then
    [ "$idem" = 1 ] && export BENCH_IDEMPOTENCY_PREFIX="$LABEL-$role-c$c-r$r-warm-$RANDOM$RANDOM"
    timeout $((WARMUP + 30)) "$WRK" -t"$t" -c"$c" -d"${WARMUP}s" --timeout "$WRK_TIMEOUT" \
      -s "$HERE/wrk_chat.lua" "$url$path" >/dev/null
  fi
  [ "$idem" = 1 ] && export BENCH_IDEMPOTENCY_PREFIX="$LABEL-$role-c$c-r$r-$RANDOM$RANDOM"
  out=$(timeout $((DURATION + 30)) "$WRK" -t"$t" -c"$c" -d"${DURATION}s" --timeout "$WRK_TIMEOUT" \
      -s "$HERE/wrk_chat.lua" "$url$path")
  unset BENCH_IDEMPOTENCY_PREFIX
  line=$(grep '^WRKJSON ' <<<"$out" | sed 's/^WRKJSON //')
  [ -n "$line" ] || { echo "wrk gave no result for $role c=$c: $out" >&2; return 1; }
  printf '{"role":"%s","label":"%s","url":"%s","concurrency":%d,"round":%d,"threads":%d,"duration_s":%d,%s\n' \
    "$role" "$label" "$url" "$c" "$r" "$t" "$DURATION" "${line#\{}" >> "$res/wrk.jsonl"
  local cpu_note=""
  if [ "$role" = target ]; then
    sleep 0.3   # let the last log lines land
    s1=$(stats "$gpid"); n1=$(served "$glog")
    "$PY" - "$res/cpu.jsonl" "$c" "$r" "$s0" "$s1" "$n0" "$n1" "${SQLITE_WAL:-}" <<'EOF'
import json, os, sys
out, c, r, s0, s1, n0, n1, wal = sys.argv[1:]
s0, s1 = json.loads(s0), json.loads(s1)
n = int(n1) - int(n0)
cpu = s1["cpu_s"] - s0["cpu_s"]
with open(out, "a") as f:
    f.write(json.dumps({"concurrency": int(c), "round": int(r), "requests": n,
                        "cpu_s": round(cpu, 3), "cpu_ms_per_req": round(cpu * 1000 / n, 4) if n else None,
                        "rss_mib": s1["rss_mib"],
                        "wal_mib": round(os.path.getsize(wal) / 2**20, 1) if wal and os.path.exists(wal) else None,
                        }) + "\n")
EOF
    cpu_note=" cpu=$(tail -1 "$res/cpu.jsonl" | sed -E 's/.*"cpu_ms_per_req": ([0-9.]+|null).*/\1/')ms/req"
  fi
  echo "  $(date +%T) $label c=$c round=$r: $(sed -E 's/.*"rps":([0-9.]+).*"err_status":([0-9]+).*"p50_ms":([0-9.]+),"p90_ms":([0-9.]+),"p99_ms":([0-9.]+).*/rps=\1 non2xx=\2 p50=\3ms p90=\4ms p99=\5ms/' <<<"$line")$cpu_note"
}

wrk_phase() {  # $1 res dir, $2 key, $3 idem, $4 gw pid, $5 gw log
  local res=$1 key=$2 idem=$3 gpid=$4 glog=$5 c r
  for c in $CONCURRENCY; do
    for r in $(seq 1 "$ROUNDS"); do
      if [ $((r % 2)) -eq 1 ]; then
        run_wrk baseline "$DIRECT_URL" "" "$c" "$r" "$res" "$idem" "$gpid" "$glog"
        run_wrk target "$GW_URL" "$key" "$c" "$r" "$res" "$idem" "$gpid" "$glog"
      else
        run_wrk target "$GW_URL" "$key" "$c" "$r" "$res" "$idem" "$gpid" "$glog"
        run_wrk baseline "$DIRECT_URL" "" "$c" "$r" "$res" "$idem" "$gpid" "$glog"
      fi
    done
  done
}

sanity() {  # $1 base url, $2 key (none: the direct baseline), $3 extra header (optional)
  local auth=() extra=() out code body=$DIRECT_BODY path=$DIRECT_PATH mark=$DIRECT_MARK
  [ -n "$2" ] && { auth=(-H "Authorization: Bearer $2"); body=$GW_BODY; path=$GW_PATH; mark=$GW_MARK; }
  [ -n "${3:-}" ] && extra=(-H "$3")
  out=$(curl -s -m 30 -w '\n%{http_code}' "${auth[@]}" "${extra[@]}" -H 'Content-Type: application/json' \
        -d "$body" "$1$path") || die "sanity: $1 unreachable"
  code="${out##*$'\n'}"
  if [ "$code" != 200 ] || ! grep -q "$mark" <<<"$out"; then
    die "sanity: $1 answered HTTP $code: ${out:0:300}"
  fi
}

# ---- one backend: one gateway process -----------------------------------------------------------
bench_backend() {  # $1 backend
  local backend=$1 res="$RUN_DIR/$1" store_url="" key t0 t1 t2 gpid glog idle after_wrk after_stream after_all
  local rpid="" ridle="" rafter="" m0 m1 n_wrk0 n_wrk1 n_s0 n_s1 s_wrk0 data_dir
  mkdir -p "$res"
  [ "$PROCESSES" = 1 ] || [ "$backend" != sqlite ] || die "PROCESSES=$PROCESSES needs a Redis backend"
  glog="$res/gateway.log"
  data_dir="$WORK_TMP/data-$backend"
  SQLITE_WAL=""; [ "$backend" = sqlite ] && SQLITE_WAL="$data_dir/gateway.db-wal"
  if [ "$backend" = redis ]; then
    setup_redis
    store_url="$REDIS_URL"
    say "[$backend] flushing $REDIS_URL, creating a key and the grant"
    redis-cli -u "$REDIS_URL" flushdb >/dev/null
    key=$(GATEWAY_CONFIG="$CONFIG" GATEWAY_STORE_URL="$store_url" GATEWAY_DATA_DIR="$data_dir" \
          "$GW" keys create --tenant default 2>/dev/null)
    GATEWAY_CONFIG="$CONFIG" GATEWAY_STORE_URL="$store_url" GATEWAY_DATA_DIR="$data_dir" \
      "$GW" credits grant --tenant default --amount 1000000000 --reason "bench grant" >/dev/null 2>&1
    rpid=$(redis_pid_of)
  elif [ "$backend" = cluster ]; then
    say "[$backend] starting a Redis Cluster (3 masters, 3 replicas) on 127.0.0.1:${CLUSTER_PORT:-7100}.."
    store_url=$("$HERE/cluster.sh" start "$WORK_TMP/cluster" "${CLUSTER_PORT:-7100}")
    key=$(GATEWAY_CONFIG="$CONFIG" GATEWAY_STORE_URL="$store_url" GATEWAY_DATA_DIR="$data_dir" \
          "$GW" keys create --tenant default 2>/dev/null)
    GATEWAY_CONFIG="$CONFIG" GATEWAY_STORE_URL="$store_url" GATEWAY_DATA_DIR="$data_dir" \
      "$GW" credits grant --tenant default --amount 1000000000 --reason "bench grant" >/dev/null 2>&1
  fi

  say "[$backend] starting the gateway on 127.0.0.1:$GATEWAY_PORT (store: ${store_url:-embedded SQLite in $data_dir})"
  t0=$(now)
  GATEWAY_CONFIG="$CONFIG" GATEWAY_STORE_URL="$store_url" GATEWAY_DATA_DIR="$data_dir" \
    GATEWAY_LOG_LEVEL="$LOG_LEVEL" "$GW" serve --host 127.0.0.1 --port "$GATEWAY_PORT" \
    ${PROCESS_ARGS[@]+"${PROCESS_ARGS[@]}"} \
    > "$glog" 2> "$res/gateway.err" &
  gpid=$!; PIDS+=("$gpid")
  wait_http "$GW_URL/health" 60 "$gpid" || { cat "$res/gateway.err" >&2; die "gateway did not start"; }
  t1=$(now)
  if [ "$backend" = sqlite ]; then
    key=$(sed -n 's/^API key (tenant default): //p' "$glog" | head -1)
    [ -n "$key" ] || die "no API key printed by the embedded gateway"
  fi
  sanity "$GW_URL" "$key"
  t2=$(now)
  sleep "$IDLE_WAIT"
  idle=$(stats "$gpid")
  [ -n "$rpid" ] && ridle=$(stats "$rpid")
  m0=$(stats "$MOCK_PID")
  say "[$backend] start-up $(awk "BEGIN{printf \"%.3f\", $t1-$t0}") s to /v1/health 200, first completion at $(awk "BEGIN{printf \"%.3f\", $t2-$t0}") s; idle $idle"

  : > "$res/wrk.jsonl"; : > "$res/cpu.jsonl"; rm -f "$res/stream.jsonl"
  say "[$backend] wrk: concurrency [$CONCURRENCY], ${DURATION}s (+${WARMUP}s warm-up) x $ROUNDS rounds"
  n_wrk0=$(served "$glog"); s_wrk0=$(stats "$gpid")
  wrk_phase "$res" "$key" 0 "$gpid" "$glog"
  sleep 0.3
  after_wrk=$(stats "$gpid"); n_wrk1=$(served "$glog")

  n_s0=$n_wrk1; n_s1=$n_wrk1; after_stream=$after_wrk
  if [ "$SKIP_STREAM" != 1 ]; then
    say "[$backend] streaming: $STREAM_N sequential requests per target, interleaved"
    timeout 600 "$PY" "$HERE/stream_bench.py" --model "$MODEL" -n "$STREAM_N" \
      --target "direct=$DIRECT_URL" --target "$backend=$GW_URL@$key" --max-seconds 500 \
      | grep '^STREAMJSON ' | sed 's/^STREAMJSON //' > "$res/stream.jsonl"
    sleep 0.3
    after_stream=$(stats "$gpid"); n_s1=$(served "$glog")
  fi

  local idem_res=""
  if [[ " $IDEM_BACKENDS " == *" $backend "* ]]; then
    idem_res="$RUN_DIR/$backend-idem"
    mkdir -p "$idem_res"; : > "$idem_res/wrk.jsonl"; : > "$idem_res/cpu.jsonl"
    sanity "$GW_URL" "$key" "Idempotency-Key: $LABEL-sanity-$RANDOM$RANDOM"
    say "[$backend] idempotency variant (a unique Idempotency-Key on every request, direct gets it too)"
    wrk_phase "$idem_res" "$key" 1 "$gpid" "$glog"
  fi
  sleep 0.3
  after_all=$(stats "$gpid")
  m1=$(stats "$MOCK_PID")
  [ -n "$rpid" ] && rafter=$(stats "$rpid")
  say "[$backend] after load: $after_all"
  stop_pid "$gpid"

  "$PY" - "$res/meta.json" "$backend" "${store_url:-embedded sqlite}" "$t0" "$t1" "$t2" "$idle" \
      "$s_wrk0" "$after_wrk" "$after_stream" "$after_all" "$n_wrk0" "$n_wrk1" "$n_s0" "$n_s1" \
      "$m0" "$m1" "${ridle:-null}" "${rafter:-null}" "$(served "$glog")" <<'EOF'
import json, os, sys
(out, backend, store, t0, t1, t2, idle, s_wrk0, after_wrk, after_stream, after_all,
 n_wrk0, n_wrk1, n_s0, n_s1, m0, m1, ridle, rafter, total) = sys.argv[1:]
j = json.loads
idle, s_wrk0, after_wrk, after_stream, after_all = map(j, (idle, s_wrk0, after_wrk, after_stream, after_all))
m0, m1, ridle, rafter = map(j, (m0, m1, ridle, rafter))
n_wrk = int(n_wrk1) - int(n_wrk0)
by_pid = {}  # with several processes: how the kernel spread the requests
for line in open(out.rsplit("/", 1)[0] + "/gateway.log", errors="replace"):
    if f'"route":"{os.environ["BENCH_ROUTE"]}"' in line and '"pid":' in line:
        pid = line.rsplit('"pid":', 1)[1].split("}", 1)[0].split(",", 1)[0]
        by_pid[pid] = by_pid.get(pid, 0) + 1
n_s = int(n_s1) - int(n_s0)
cpu_wrk = after_wrk["cpu_s"] - s_wrk0["cpu_s"]
cpu_s = after_stream["cpu_s"] - after_wrk["cpu_s"]
meta = {
    "backend": backend,
    "store": store,
    "startup_to_health_200_s": round(float(t1) - float(t0), 3),
    "startup_to_first_completion_s": round(float(t2) - float(t0), 3),
    "gateway_idle_rss_mib": idle["rss_mib"],
    "gateway_rss_after_nonstream_load_mib": after_wrk["rss_mib"],
    "gateway_rss_after_all_load_mib": after_all["rss_mib"],
    "gateway_processes": after_all["nprocs"],
    "nonstream_requests_served (warm-ups included)": n_wrk,
    "nonstream_cpu_s (whole phase, incl. idle time during direct runs)": round(cpu_wrk, 2),
    "nonstream_cpu_ms_per_request (whole phase)": round(cpu_wrk * 1000 / n_wrk, 4) if n_wrk else None,
    "streams_served (warm-ups included)": n_s,
    "stream_cpu_ms_per_stream (whole phase)": round(cpu_s * 1000 / n_s, 4) if n_s else None,
    "chat_requests_served_total": int(total),
    "chat_requests_by_pid": by_pid,
    "mock_cpu_s_during_bench": round(m1["cpu_s"] - m0["cpu_s"], 1),
    "mock_rss_after_mib": m1["rss_mib"],
}
if ridle and rafter:
    meta["redis_server_cpu_s_during_bench"] = round(rafter["cpu_s"] - ridle["cpu_s"], 2)
    meta["redis_server_cpu_ms_per_gateway_request"] = (
        round((rafter["cpu_s"] - ridle["cpu_s"]) * 1000 / int(total), 4) if int(total) else None)
json.dump(meta, open(out, "w"), indent=1)
EOF
  "$PY" "$HERE/summarize.py" "$res" > "$res/summary.md"
  [ -n "$idem_res" ] && "$PY" "$HERE/summarize.py" "$idem_res" > "$idem_res/summary.md"
  return 0
}

# ---- main -------------------------------------------------------------------------------------
mkdir -p "$RUN_DIR"
n_conc=$(wc -w <<<"$CONCURRENCY"); n_b=$(wc -w <<<"$BACKENDS"); n_i=0
for b in $BACKENDS; do [[ " $IDEM_BACKENDS " == *" $b "* ]] && n_i=$((n_i + 1)); done
est=$(( (n_b + n_i) * n_conc * ROUNDS * 2 * (DURATION + WARMUP + 1) + n_b * (IDLE_WAIT + 20) ))
say "label $LABEL -> $RUN_DIR; backends [$BACKENDS], idempotency on [$IDEM_BACKENDS]; about $((est / 60 + 1)) min"

"$PY" - "$RUN_DIR/run.json" "$ROOT" <<EOF
import json, os, platform, subprocess, sys, datetime
from importlib import metadata as m
out, root = sys.argv[1:]
def sh(*a):
    try:
        return subprocess.run(a, capture_output=True, text=True, cwd=root, timeout=10).stdout.strip()
    except Exception:
        return ""
vers = {}
for p in ("generation-gateway", "litestar", "uvicorn", "uvloop", "httptools", "aiohttp", "msgspec", "redis", "structlog", "psutil"):
    try:
        vers[p] = m.version(p)
    except m.PackageNotFoundError:
        vers[p] = None
cpu = ""
try:
    cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
except Exception:
    pass
json.dump({
    "label": "$LABEL",
    "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
    "git_commit": sh("git", "rev-parse", "--short", "HEAD"),
    "git_uncommitted_paths": len([l for l in sh("git", "status", "--porcelain").splitlines() if l]),
    "git_uncommitted": [l.split(maxsplit=1)[1] for l in sh("git", "status", "--porcelain").splitlines() if l.strip()],
    "python": platform.python_version(),
    "packages": vers,
    "wrk": sh("$WRK", "-v").splitlines()[0] if sh("$WRK", "-v") else "",
    "redis_server": sh("redis-server", "--version"),
    "cpu": cpu, "cpus": os.cpu_count(), "kernel": platform.release(),
    "knobs": {"BACKENDS": "$BACKENDS", "IDEM_BACKENDS": "$IDEM_BACKENDS", "CONCURRENCY": "$CONCURRENCY",
              "DURATION": $DURATION, "WARMUP": $WARMUP, "ROUNDS": $ROUNDS, "WRK_THREADS": $WRK_THREADS,
              "STREAM_N": $STREAM_N, "SKIP_STREAM": "$SKIP_STREAM", "LOG_LEVEL": "$LOG_LEVEL",
              "PROCESSES": $PROCESSES, "API": "$API",
              "IDLE_WAIT": $IDLE_WAIT},
}, open(out, "w"), indent=1)
EOF

say "starting the mock upstream on 127.0.0.1:$MOCK_PORT"
"$PY" "$HERE/mock_upstream.py" --host 127.0.0.1 --port "$MOCK_PORT" > "$RUN_DIR/mock.log" 2>&1 &
MOCK_PID=$!; PIDS+=("$MOCK_PID")
wait_http "http://127.0.0.1:$MOCK_PORT/health" 30 "$MOCK_PID" || die "mock upstream did not start"
if [ "$API" = messages ]; then
  say "starting the Anthropic mock upstream on 127.0.0.1:$ANTHROPIC_MOCK_PORT"
  "$PY" "$HERE/mock_anthropic.py" --host 127.0.0.1 --port "$ANTHROPIC_MOCK_PORT" > "$RUN_DIR/mock-anthropic.log" 2>&1 &
  ANTHROPIC_MOCK_PID=$!; PIDS+=("$ANTHROPIC_MOCK_PID")
  wait_http "http://127.0.0.1:$ANTHROPIC_MOCK_PORT/health" 30 "$ANTHROPIC_MOCK_PID" || die "Anthropic mock did not start"
  MOCK_PID=$ANTHROPIC_MOCK_PID  # the mock whose CPU the run reports
fi
sanity "$DIRECT_URL" ""

for b in $BACKENDS; do
  bench_backend "$b"
done
[ -f "$RUN_DIR/redis/meta.json" ] && [ -n "${REDIS_URL:-}" ] && \
  "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); d["redis_url"]=sys.argv[2]; json.dump(d,open(sys.argv[1],"w"),indent=1)' \
  "$RUN_DIR/run.json" "$REDIS_URL"

"$PY" "$HERE/report.py" "$RUN_DIR" > "$RUN_DIR/summary.md"
cat "$RUN_DIR/summary.md"
say "done: $RUN_DIR/summary.md"
