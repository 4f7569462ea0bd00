#!/usr/bin/env python3
"""What keeping a Responses API response costs the store, per call, in process: `put_response`
(what every `store: true` response adds before its answer goes out) and `get_response` (what a
`previous_response_id` adds before its call), for a short turn and for a turn that carries a
longer history, on SQLite (a file in a temporary directory) and, given `--redis URL`, on Redis.

    .venv/bin/python bench/responses_store_bench.py [--calls 2000] [--redis redis://...]

Prints the mean microseconds of wall time per call (the SQLite store runs inline on the event
loop, so on SQLite that is the loop's time; on Redis most of it is the round trip).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import msgspec

from gateway.store.base import Store, StoredResponse
from gateway.store.redis import RedisStore
from gateway.store.sqlite import SqliteStore


def record(index: int, turns: int) -> StoredResponse:
    items: list[dict[str, Any]] = []
    for turn in range(turns):
        items.append(
            {
                "id": f"msg_u{turn}",
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "Tell me more. " * 20}],
            }
        )
        items.append(
            {
                "id": f"msg_a{turn}",
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Here is more. " * 40}],
            }
        )
    response = {
        "id": f"resp_{index}",
        "object": "response",
        "status": "completed",
        "output": items[-1:],
        "usage": {"input_tokens": 100, "output_tokens": 50},
    }
    now = time.time()
    return StoredResponse(
        response_id=f"resp_{index}",
        tenant="bench",
        response=msgspec.json.encode(response),
        input_items=items,
        created_at=now,
        expires_at=now + 86_400,
    )


async def measure(store: Store, name: str, calls: int) -> None:
    for turns, label in ((1, "a short turn"), (20, "20 earlier turns")):
        records = [record(i, turns) for i in range(calls)]
        size = len(msgspec.msgpack.encode(records[0]))
        started = time.perf_counter()
        for one in records:
            await store.put_response(one)
        put = (time.perf_counter() - started) / calls * 1e6
        started = time.perf_counter()
        for one in records:
            await store.get_response("bench", one.response_id)
        get = (time.perf_counter() - started) / calls * 1e6
        print(f"{name:7} {label:17} ({size:6} bytes): put {put:8.1f} µs, get {get:8.1f} µs")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--redis", default="")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        sqlite = SqliteStore(Path(directory) / "bench.db")
        await sqlite.open()
        try:
            await measure(sqlite, "sqlite", args.calls)
        finally:
            await sqlite.close()
    if args.redis:
        redis = RedisStore(args.redis, prefix=f"bench:{uuid.uuid4().hex}:")
        await redis.open()
        try:
            await measure(redis, "redis", args.calls)
            keys = [key async for key in redis.client.scan_iter(match=redis.keys.pattern())]
            if keys:
                await redis.client.delete(*keys)
        finally:
            await redis.close()


if __name__ == "__main__":
    asyncio.run(main())
