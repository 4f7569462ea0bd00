"""Fake upstreams served from a thread of their own, for tests that drive a gateway process
synchronously (the gateway reaches the fake over real HTTP)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

__all__ = ["Served", "serving"]


class Served(Protocol):
    async def start(self) -> None: ...
    async def stop(self) -> None: ...


@contextmanager
def serving(fake: Served) -> Iterator[None]:
    """Run a fake upstream on its own event loop in a daemon thread."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="fake-upstream", daemon=True)
    thread.start()
    try:
        asyncio.run_coroutine_threadsafe(fake.start(), loop).result(10)
        yield
        asyncio.run_coroutine_threadsafe(fake.stop(), loop).result(10)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
