"""Cost of the request path's two store round trips: admit + settle, sequentially, per backend.

Run from the repository root (with the project installed, e.g. `pip install -e .`):

    python bench/store_bench.py                          # SQLite in a temp dir, Redis at REDIS_URL
    python bench/store_bench.py --pairs 5000 --redis-url redis://127.0.0.1:6379/0
    python bench/store_bench.py --backend sqlite

Each pair is what one chat call costs the store: `admit` with a token reservation, a credit hold
and an idempotency claim, then `settle` with a charge and a stored reply. It prints wall time
and process CPU per pair (the gateway's own CPU; Redis's CPU is in another process). Redis keys
go under a fresh prefix that is deleted afterwards, so a shared Redis is left as it was.
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

from gateway.store.base import (
    Admission,
    AdmissionOutcome,
    IdempotencyClaim,
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


async def _pair(store: Store, i: int) -> None:
    claim = IdempotencyClaim(scope=f"bench:POST:/v1/chat/completions:{i}", fingerprint="fp")
    adm = Admission(
        tenant="bench",
        api_key_id="key_bench",
        call_id=f"call_{i}",
        request_id=f"req_{i}",
        limits=_LIMITS,
        tokens=1200,
        hold_units=500,
        idempotency=claim,
    )
    result = await store.admit(adm)
    if result.outcome is not AdmissionOutcome.ADMITTED:
        raise RuntimeError(f"unexpected outcome {result.outcome}")
    await store.settle(
        Settlement(
            tenant="bench",
            api_key_id="key_bench",
            call_id=f"call_{i}",
            request_id=f"req_{i}",
            limits=_LIMITS,
            charge_units=320,
            tokens_reserved=1200,
            tokens_used=700,
            idempotency=claim,
            reply=_REPLY,
        )
    )


async def bench(store: Store, pairs: int) -> tuple[float, float, float]:
    """Returns (wall ms per pair, CPU ms per pair, p99 wall ms) after a short warm-up."""
    await store.grant("bench", 10**15, entry_id="bench:grant", reason="bench")
    for i in range(200):
        await _pair(store, -1 - i)
    walls: list[float] = []
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for i in range(pairs):
        t0 = time.perf_counter()
        await _pair(store, i)
        walls.append(time.perf_counter() - t0)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    p99 = statistics.quantiles(walls, n=100)[98]
    return wall / pairs * 1000, cpu / pairs * 1000, p99 * 1000


async def _run(backend: str, pairs: int, redis_url: str) -> None:
    if backend in ("sqlite", "all"):
        with tempfile.TemporaryDirectory() as tmp:
            store = SqliteStore(Path(tmp) / "bench.db")
            await store.open()
            try:
                _report("sqlite", pairs, await bench(store, pairs))
            finally:
                await store.close()
    if backend in ("redis", "all"):
        redis_store = RedisStore(redis_url, prefix=f"bench:{uuid.uuid4().hex}:")
        await redis_store.open()
        try:
            _report("redis", pairs, await bench(redis_store, pairs))
        finally:
            client = redis_store.client
            keys = [k async for k in client.scan_iter(match=redis_store.keys.pattern())]
            for start in range(0, len(keys), 1000):
                await client.unlink(*keys[start : start + 1000])
            await redis_store.close()


def _report(name: str, pairs: int, numbers: tuple[float, float, float]) -> None:
    wall, cpu, p99 = numbers
    print(
        f"{name:6} {pairs} admit+settle pairs: {wall:.3f} ms wall/pair (p99 {p99:.3f}),"
        f" {cpu:.3f} ms CPU/pair"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["sqlite", "redis", "all"], default="all")
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument(
        "--redis-url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    )
    args = parser.parse_args()
    asyncio.run(_run(args.backend, args.pairs, args.redis_url))


if __name__ == "__main__":
    main()
