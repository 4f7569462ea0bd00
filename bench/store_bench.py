"""Cost of the request path's two store round trips: admit + settle, sequentially, per backend.

Run from the repository root (with the project installed, e.g. `pip install -e .`):

    python bench/store_bench.py                          # SQLite in a temp dir, Redis at REDIS_URL
    python bench/store_bench.py --pairs 5000 --redis-url redis://127.0.0.1:6379/0
    python bench/store_bench.py --backend sqlite
    python bench/store_bench.py --backend redis --redis-url "$(bench/cluster.sh start /tmp/c)"

Each pair is what one chat call costs the store: `admit` with a token reservation, a credit hold
and an idempotency claim, then `settle` with a charge and a stored reply. It prints wall time
and process CPU per pair (the gateway's own CPU, its threads included; Redis's CPU is in another
process), for the whole run and for its first and last 2,000 pairs (a cost that grows with the
run shows there). The loop yields after each pair, as a server does between requests, so the
SQLite store's WAL checkpoint task runs; for SQLite it also prints the largest and the final
size of the -wal file. Redis keys go under a fresh prefix that is deleted afterwards, so a
shared Redis is left as it was.

    python bench/store_bench.py --backend sqlite --pairs 50000   # WAL bounded under load?
    python bench/store_bench.py --backend sqlite --pairs 50000 --rate 1700   # paced
    python bench/store_bench.py --bounded    # every admit wallet-bounded (holds all available)
    python bench/store_bench.py --key-budget # every call's key has a budget (one in the
                                             # admission; its spend moves with each charge)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import NamedTuple

from gateway.store.base import (
    Admission,
    AdmissionOutcome,
    Call,
    IdempotencyClaim,
    KeyBudget,
    RateLimits,
    Settlement,
    Store,
    StoredReply,
)
from gateway.store.redis import RedisStore
from gateway.store.sqlite import SqliteStore

__all__ = ["bench"]

_LIMITS = RateLimits(requests_per_minute=10_000_000, tokens_per_minute=1_000_000_000)
_REPLY = StoredReply(status=200, content_type="application/json", body=b'{"id":"x"}' * 40)


_WALLET = 10**15


_BUDGET = KeyBudget(units=10**15, period="month")


async def _pair(store: Store, i: int, bounded: bool = False, budget: bool = False) -> None:
    claim = IdempotencyClaim(scope=f"bench:POST:/v1/chat/completions:{i}", fingerprint="fp")
    call = Call(
        tenant="bench",
        api_key_id="key_bench",
        call_id=f"call_{i}",
        request_id=f"req_{i}",
        limits=_LIMITS,
        tokens_reserved=1200,
        idempotency=claim,
        budget=_BUDGET if budget else None,
    )
    if bounded:  # a hold above the wallet, a minimum within it: the store holds all it has
        admission = Admission(
            call=call, hold_units=_WALLET * 10, min_hold_units=500, min_tokens_reserved=600
        )
    else:
        admission = Admission(call=call, hold_units=500)
    result = await store.admit(admission)
    if result.outcome is not AdmissionOutcome.ADMITTED:
        raise RuntimeError(f"unexpected outcome {result.outcome}")
    await store.settle(Settlement(call=call, charge_units=320, tokens_used=700, reply=_REPLY))


class Numbers(NamedTuple):
    wall_ms: float
    """Per pair, over the whole run (also `cpu_ms`)."""
    cpu_ms: float
    p50_ms: float
    p99_ms: float
    p999_ms: float
    first_cpu_ms: float
    """CPU per pair over the first and the last `_CHUNK` pairs."""
    last_cpu_ms: float
    max_wal_bytes: int = 0
    end_wal_bytes: int = 0


_CHUNK = 2000


async def bench(
    store: Store,
    pairs: int,
    wal: Path | None = None,
    rate: float = 0,
    bounded: bool = False,
    budget: bool = False,
) -> Numbers:
    """Sequential pairs after a short warm-up; `wal` is a -wal file to watch (every 100 pairs).

    `rate` > 0 paces the pairs (per second), as requests arriving at that rate would;
    `bounded`: every admission is wallet-bounded; `budget`: every call's key has a budget.
    """
    await store.grant("bench", _WALLET, entry_id="bench:grant", reason="bench")
    for i in range(200):
        await _pair(store, -1 - i, bounded, budget)
        await asyncio.sleep(0)
    walls: list[float] = []
    chunk_cpu: list[float] = []
    max_wal = 0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    chunk0 = cpu0
    for i in range(pairs):
        t0 = time.perf_counter()
        await _pair(store, i, bounded, budget)
        walls.append(time.perf_counter() - t0)
        # A server yields between requests: background tasks (the WAL checkpoint) run.
        await asyncio.sleep(max(0.0, wall0 + (i + 1) / rate - time.perf_counter()) if rate else 0)
        if wal is not None and i % 100 == 0:
            max_wal = max(max_wal, _size(wal))
        if (i + 1) % _CHUNK == 0:
            now = time.process_time()
            chunk_cpu.append((now - chunk0) / _CHUNK * 1000)
            chunk0 = now
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    cuts = statistics.quantiles(walls, n=1000)
    end_wal = _size(wal) if wal is not None else 0
    return Numbers(
        wall_ms=wall / pairs * 1000,
        cpu_ms=cpu / pairs * 1000,
        p50_ms=statistics.median(walls) * 1000,
        p99_ms=cuts[989] * 1000,
        p999_ms=cuts[998] * 1000,
        first_cpu_ms=chunk_cpu[0] if chunk_cpu else cpu / pairs * 1000,
        last_cpu_ms=chunk_cpu[-1] if chunk_cpu else cpu / pairs * 1000,
        max_wal_bytes=max(max_wal, end_wal),
        end_wal_bytes=end_wal,
    )


def _size(path: Path | None) -> int:
    try:
        return os.stat(path).st_size if path is not None else 0
    except FileNotFoundError:
        return 0


async def _run(
    backend: str, pairs: int, redis_url: str, rate: float, bounded: bool, budget: bool
) -> None:
    if backend in ("sqlite", "all"):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "bench.db"
            store = SqliteStore(path)
            await store.open()
            try:
                numbers = await bench(store, pairs, Path(f"{path}-wal"), rate, bounded, budget)
                _report("sqlite", pairs, numbers)
            finally:
                await store.close()
    if backend in ("redis", "all"):
        redis_store = RedisStore(redis_url, prefix=f"bench:{uuid.uuid4().hex}:")
        await redis_store.open()
        try:
            numbers = await bench(redis_store, pairs, rate=rate, bounded=bounded, budget=budget)
            _report("redis", pairs, numbers)
        finally:
            client = redis_store.client
            keys = [k async for k in client.scan_iter(match=redis_store.keys.pattern())]
            for key in keys:  # one by one: on a cluster they are in many slots
                await client.unlink(key)
            await redis_store.close()


def _report(name: str, pairs: int, n: Numbers) -> None:
    print(
        f"{name:6} {pairs} admit+settle pairs: {n.wall_ms:.3f} ms wall/pair"
        f" (p50 {n.p50_ms:.3f}, p99 {n.p99_ms:.3f}, p99.9 {n.p999_ms:.3f}),"
        f" {n.cpu_ms:.3f} ms CPU/pair (first {_CHUNK}: {n.first_cpu_ms:.3f},"
        f" last {_CHUNK}: {n.last_cpu_ms:.3f})"
    )
    if name == "sqlite":
        mib = 1 << 20
        print(
            f"       WAL: largest {n.max_wal_bytes / mib:.1f} MiB,"
            f" at the end {n.end_wal_bytes / mib:.1f} MiB"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["sqlite", "redis", "all"], default="all")
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--rate", type=float, default=0, help="pairs per second (0: flat out)")
    parser.add_argument("--bounded", action="store_true", help="wallet-bounded admissions")
    parser.add_argument("--key-budget", action="store_true", help="every call's key has a budget")
    parser.add_argument(
        "--redis-url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    )
    args = parser.parse_args()
    asyncio.run(
        _run(args.backend, args.pairs, args.redis_url, args.rate, args.bounded, args.key_budget)
    )


if __name__ == "__main__":
    main()
