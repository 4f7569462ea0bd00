"""Cost of a filtered task listing when the tenant has many tasks that do not match.

Run from the repository root (with the project installed, e.g. `pip install -e .`):

    python bench/list_bench.py                       # both backends, 11,000 tasks
    python bench/list_bench.py --backend redis --tasks 50000
    python bench/list_bench.py --redis-url redis://127.0.0.1:6379/0   # a Redis of yours

One tenant gets `--tasks` tasks through the store API: 5 music tasks first (3 of them
running), then image tasks, every one finalized `succeeded` except 2 `failed`. So a listing
filtered by `status=failed`, `status=running` or `capability=text_to_music` matches a handful,
the oldest ones, under thousands that do not. For each listing it prints the latency of
`--calls` sequential calls (p50, p99, max), the wall time of `--parallel` calls at once, and the
slowest `ping()` due every 5 ms while those ran, from when it was due to its answer (what
`GET /v1/health` waits for on the same event loop). Only the store API is used, so the same
script measures any version of the store.

Redis: a private `redis-server` on a free port (no persistence), stopped at the end, unless
`--redis-url` is given (then keys go under a fresh prefix, deleted afterwards). SQLite: a file
in a temporary folder.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from gateway.store import base
from gateway.store.base import RateLimits, Store, TaskCreate, TaskFinal
from gateway.store.redis import RedisStore
from gateway.store.sqlite import SqliteStore

__all__ = ["bench"]

_LISTINGS: list[tuple[str, dict[str, Any]]] = [
    ("status=failed", {"status": "failed"}),
    ("status=running", {"status": "running"}),
    ("capability=text_to_music", {"capability": "text_to_music"}),
    ("status=succeeded", {"status": "succeeded"}),
    ("no filter", {}),
]


def _create(task_id: str, capability: str) -> TaskCreate:
    return TaskCreate(
        task_id=task_id,
        tenant="bench",
        api_key_id="key_bench",
        request_id=f"req_{task_id}",
        limits=RateLimits(requests_per_minute=0),
        capability=capability,
        model="auto",
        resolved_model="image-model-2",
        price_units=0,
        input={"prompt": "a red fox in the snow, watercolour", "n": 1, "size": "1024x1024"},
        metadata={"job": task_id},
    )


async def _made(store: Store, task_id: str, capability: str) -> None:
    """A task created, and confirmed where creates take two steps (earlier versions: one)."""
    await store.create_task(_create(task_id, capability))
    confirm, step = getattr(store, "confirm_task", None), getattr(base, "TaskConfirm", None)
    if confirm is not None and step is not None:
        await confirm(step(tenant="bench", task_id=task_id))


async def _fill(store: Store, tasks: int) -> None:
    for i in range(5):
        await _made(store, f"rare_{i}", "text_to_music")
    for i in range(3):
        await store.claim_task(f"bench-w{i}", lease_seconds=3600)
    ids = [f"bulk_{i:06d}" for i in range(tasks - 5)]
    for start in range(0, len(ids), 200):
        batch = ids[start : start + 200]
        await asyncio.gather(*(_made(store, i, "text_to_image") for i in batch))
        await asyncio.gather(
            *(
                store.finalize_task(
                    TaskFinal(
                        tenant="bench", task_id=i, status="failed" if i in ids[:2] else "succeeded"
                    )
                )
                for i in batch
            )
        )


async def _timed(store: Store, filters: dict[str, Any]) -> float:
    t0 = time.perf_counter()
    await store.list_tasks("bench", limit=20, **filters)
    return time.perf_counter() - t0


async def _parallel(store: Store, filters: dict[str, Any], n: int) -> tuple[float, float]:
    """Wall time of `n` listings at once, and the slowest probe meanwhile: a `ping()` due every
    5 ms, timed from when it was due (a blocked event loop delays it) to its answer."""
    pings: list[float] = []
    done = asyncio.Event()

    async def probe() -> None:
        while True:
            due = time.perf_counter() + 0.005
            await asyncio.sleep(0.005)
            await store.ping()
            pings.append(time.perf_counter() - due)
            if done.is_set():
                return

    prober = asyncio.create_task(probe())
    t0 = time.perf_counter()
    await asyncio.gather(*(store.list_tasks("bench", limit=20, **filters) for _ in range(n)))
    wall = time.perf_counter() - t0
    done.set()
    await prober
    return wall, max(pings, default=0.0)


async def bench(store: Store, name: str, tasks: int, calls: int, parallel: int) -> None:
    t0 = time.perf_counter()
    await _fill(store, tasks)
    print(f"{name}: {tasks} tasks written in {time.perf_counter() - t0:.1f} s")
    for label, filters in _LISTINGS:
        await _timed(store, filters)  # warm
        times = sorted([await _timed(store, filters) for _ in range(calls)])
        wall, ping = await _parallel(store, filters, parallel)
        p99 = times[min(len(times) - 1, round(len(times) * 0.99))]
        print(
            f"  {label:26} p50 {statistics.median(times) * 1000:8.2f} ms"
            f"  p99 {p99 * 1000:8.2f} ms  max {times[-1] * 1000:8.2f} ms"
            f"  | {parallel} at once {wall * 1000:8.1f} ms, slowest ping {ping * 1000:6.1f} ms"
        )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def _private_redis() -> Iterator[str]:
    """A redis-server of this run's own on a free port (no persistence); its URL."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("no redis-server on PATH: pass --redis-url")
    port = _free_port()
    with tempfile.TemporaryDirectory() as tmp:
        args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", tmp]
        process = subprocess.Popen(
            [*args, "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            process.terminate()
            process.wait(timeout=10)


@asynccontextmanager
async def _redis(url: str) -> AsyncIterator[RedisStore]:
    store = RedisStore(url, prefix=f"bench:{uuid.uuid4().hex}:")
    await store.open()
    try:
        deadline = time.monotonic() + 10
        while not await store.ping():
            if time.monotonic() > deadline:
                raise SystemExit(f"Redis at {url} does not answer")
            await asyncio.sleep(0.02)
        yield store
        client = store.client  # only this run's keys go (the Redis may be yours)
        keys = [k async for k in client.scan_iter(match=store.keys.pattern())]
        for start in range(0, len(keys), 1000):
            await client.unlink(*keys[start : start + 1000])
    finally:
        await store.close()


async def _run(backend: str, tasks: int, calls: int, parallel: int, url: str) -> None:
    if backend in ("sqlite", "all"):
        with tempfile.TemporaryDirectory() as tmp:
            store = SqliteStore(Path(tmp) / "bench.db")
            await store.open()
            try:
                await bench(store, "sqlite", tasks, calls, parallel)
            finally:
                await store.close()
    if backend in ("redis", "all"):
        async with _redis(url) as redis_store:
            await bench(redis_store, "redis", tasks, calls, parallel)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["sqlite", "redis", "all"], default="all")
    parser.add_argument("--tasks", type=int, default=11_000)
    parser.add_argument("--calls", type=int, default=30, help="sequential calls per listing")
    parser.add_argument("--parallel", type=int, default=10, help="calls at once per listing")
    parser.add_argument("--redis-url", default=None, help="default: a private redis-server")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        url = args.redis_url
        if url is None and args.backend != "sqlite":
            url = stack.enter_context(_private_redis())
        asyncio.run(_run(args.backend, args.tasks, args.calls, args.parallel, url or ""))


if __name__ == "__main__":
    main()
