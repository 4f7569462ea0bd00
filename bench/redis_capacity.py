"""What the Redis store costs Redis: commands and server CPU per chat call and per task, and so
how many of them one master sustains. On one Redis or a Redis Cluster (any store URL).

Run from the repository root (with the project installed), against a Redis nobody else uses:

    python bench/redis_capacity.py --redis-url redis://127.0.0.1:6379/0 --server-pids PID
    python bench/redis_capacity.py --redis-url "$(bench/cluster.sh start /tmp/c)" \\
        --server-pids "$(cat /tmp/c/710[0-5]/redis.pid | paste -sd,)"

`--concurrency` loops (one tenant each) run for `--seconds`: in `chat` mode each loop makes
admit + settle pairs (a token reservation, a hold, an idempotency claim, a charge and a stored
reply: what one chat call asks of the store); in `task` mode each makes a task's whole life
(create, confirm, claim, finalize, with its queue steps). It prints, per call or per task: the
Redis commands run (from `INFO commandstats` of every master, before and after), the Redis
server CPU (from /proc of `--server-pids`, every node of a cluster: replicas apply the writes
too), the client's CPU, and the rate reached. A master saturates when its CPU is busy all the
time: its share of the server CPU per call says how many calls per second that is.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
import uuid
from collections import Counter
from typing import Any

from gateway.store.base import (
    Admission,
    AdmissionOutcome,
    Call,
    IdempotencyClaim,
    RateLimits,
    Settlement,
    StoredReply,
    TaskConfirm,
    TaskCreate,
    TaskCreateOutcome,
    TaskFinal,
)
from gateway.store.redis import RedisStore

__all__ = ["main"]

_LIMITS = RateLimits(requests_per_minute=10_000_000, tokens_per_minute=1_000_000_000)
_REPLY = StoredReply(status=200, content_type="application/json", body=b'{"id":"x"}' * 40)
_TICKS = os.sysconf("SC_CLK_TCK")


async def _chat(store: RedisStore, tenant: str, i: int) -> None:
    claim = IdempotencyClaim(scope=f"cap:{tenant}:{i}", fingerprint="fp")
    call = Call(
        tenant=tenant,
        api_key_id=f"key_{tenant}",
        call_id=f"call_{tenant}_{i}",
        request_id=f"req_{i}",
        limits=_LIMITS,
        tokens_reserved=1200,
        idempotency=claim,
    )
    result = await store.admit(Admission(call=call, hold_units=500))
    if result.outcome is not AdmissionOutcome.ADMITTED:
        raise RuntimeError(f"unexpected outcome {result.outcome}")
    await store.settle(Settlement(call=call, charge_units=320, tokens_used=700, reply=_REPLY))


async def _task(store: RedisStore, tenant: str, i: int) -> None:
    task_id = f"task_{tenant}_{i}"
    created = await store.create_task(
        TaskCreate(
            task_id=task_id,
            tenant=tenant,
            api_key_id=f"key_{tenant}",
            request_id=f"req_{i}",
            limits=_LIMITS,
            capability="text_to_image",
            model="auto",
            resolved_model="image-model-2",
            price_units=500,
            input={"prompt": "a lighthouse at dusk", "n": 1},
            metadata={},
        )
    )
    if created.outcome is not TaskCreateOutcome.CREATED:
        raise RuntimeError(f"unexpected outcome {created.outcome}")
    await store.confirm_task(TaskConfirm(tenant=tenant, task_id=task_id))
    # Any queued task (the loops claim each other's): one is there, or soon.
    claimed = await store.claim_task(f"w-{tenant}", lease_seconds=60, wait_seconds=5)
    if claimed is None:
        raise RuntimeError("nothing to claim")
    await store.finalize_task(
        TaskFinal(tenant=claimed.tenant, task_id=claimed.task_id, status="succeeded")
    )


def _server_cpu(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / _TICKS


async def _commands(store: RedisStore) -> Counter[str]:
    """Calls per command, summed over the masters."""
    client: Any = store.client
    found: Counter[str] = Counter()
    if store.target.topology == "cluster":
        from redis.asyncio import RedisCluster

        stats = await client.info("commandstats", target_nodes=RedisCluster.PRIMARIES)
        per_node = stats.values()
    else:
        per_node = [await client.info("commandstats")]
    for node in per_node:
        for name, value in node.items():
            found[name.removeprefix("cmdstat_")] += int(value["calls"])
    return found


async def _run(args: argparse.Namespace) -> None:
    store = RedisStore(args.redis_url, prefix=f"cap:{uuid.uuid4().hex}:")
    await store.open()
    pids = [int(p) for p in args.server_pids.split(",") if p]
    work = _chat if args.mode == "chat" else _task
    tenants = [f"t{n}" for n in range(args.concurrency)]
    try:
        for tenant in tenants:
            await store.grant(tenant, 10**15, entry_id="cap:grant", reason="bench")
            for i in range(20):  # warm-up: scripts loaded, connections open
                await work(store, tenant, -1 - i)
        done = 0
        stop = time.perf_counter() + args.seconds

        async def loop(tenant: str) -> None:
            nonlocal done
            i = 0
            while time.perf_counter() < stop:
                await work(store, tenant, i)
                i += 1
                done += 1

        before, cpu0, server0 = await _commands(store), time.process_time(), _server_cpu(pids)
        wall0 = time.perf_counter()
        await asyncio.gather(*(loop(t) for t in tenants))
        wall = time.perf_counter() - wall0
        cpu, server = time.process_time() - cpu0, _server_cpu(pids) - server0
        after = await _commands(store)
        unit = "chat call" if args.mode == "chat" else "task"
        print(f"{args.mode}: {done} in {wall:.1f} s = {done / wall:,.0f}/s, c={args.concurrency}")
        print(f"  client CPU {cpu / done * 1000:.3f} ms per {unit}")
        if pids:
            print(f"  server CPU {server / done * 1000:.3f} ms per {unit} ({len(pids)} processes)")
        ops = {name: (after[name] - before[name]) / done for name in after}
        shown = {k: round(v, 2) for k, v in sorted(ops.items()) if v >= 0.01 and k != "info"}
        print(f"  commands per {unit}: {shown}")
    finally:
        client: Any = store.client
        async for key in client.scan_iter(match=store.keys.pattern(), count=1000):
            await client.unlink(key)
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--redis-url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1/0"))
    parser.add_argument("--server-pids", default="", help="redis-server PIDs, comma separated")
    parser.add_argument("--mode", choices=["chat", "task"], default="chat")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=10)
    asyncio.run(_run(parser.parse_args()))


if __name__ == "__main__":
    main()
