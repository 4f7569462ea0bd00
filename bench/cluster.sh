#!/usr/bin/env bash
# A local Redis Cluster for the benchmarks: 3 masters and 3 replicas on loopback ports
# BASE..BASE+5 (cluster bus: +100), no persistence.
#
#   bench/cluster.sh start DIR [BASE]   # prints the store URL (redis+cluster://127.0.0.1:BASE)
#   bench/cluster.sh stop DIR           # stops the nodes it started (by the PIDs in DIR)
set -euo pipefail
cmd="${1:?start|stop}"; dir="${2:?folder}"; base="${3:-7100}"
case "$cmd" in
  start)
    mkdir -p "$dir"
    nodes=()
    for i in 0 1 2 3 4 5; do
      port=$((base + i)); mkdir -p "$dir/$port"
      redis-server --port "$port" --bind 127.0.0.1 --cluster-enabled yes \
        --cluster-config-file nodes.conf --cluster-port $((port + 100)) \
        --cluster-node-timeout 2000 --repl-diskless-sync yes --repl-diskless-sync-delay 0 \
        --dir "$dir/$port" --save '' --appendonly no --daemonize yes \
        --pidfile "$dir/$port/redis.pid" --logfile "$dir/$port/redis.log"
      nodes+=("127.0.0.1:$port")
    done
    for _ in $(seq 1 100); do
      ok=1; for n in "${nodes[@]}"; do redis-cli -p "${n#*:}" ping >/dev/null 2>&1 || ok=0; done
      [ "$ok" = 1 ] && break; sleep 0.05
    done
    redis-cli --cluster create "${nodes[@]}" --cluster-replicas 1 --cluster-yes >/dev/null
    for _ in $(seq 1 200); do  # every master with its replica online
      online=0
      for i in 0 1 2 3 4 5; do
        online=$((online + $(redis-cli -p $((base + i)) info replication | grep -c 'state=online' || true)))
      done
      [ "$online" -ge 3 ] && break; sleep 0.1
    done
    echo "redis+cluster://127.0.0.1:$base"
    ;;
  stop)
    for f in "$dir"/*/redis.pid; do [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null || true; done
    ;;
  *) echo "usage: $0 start|stop DIR [BASE]" >&2; exit 2 ;;
esac
