"""Waiting for a condition with a deadline: the one way tests wait for something to happen.

`wait_until(check, done)` calls `check` until `done(value)` holds and returns that value; past
the deadline it fails with `what` and the last value seen. With no `done`, the value itself must
be true. `wait_until_async` is the same inside an event loop (`check` may be a coroutine
function). A bare sleep is for a pause that is itself the behaviour under test.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import subprocess
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["answers_or_exits", "wait_until", "wait_until_async"]

T = TypeVar("T")


def _truthy(value: object) -> bool:
    return bool(value)


def wait_until(
    check: Callable[[], T],
    done: Callable[[T], bool] = _truthy,
    *,
    timeout: float = 20.0,
    interval: float = 0.05,
    what: str = "the condition",
) -> T:
    """`check()` again every `interval` until `done` holds; its last value."""
    deadline = time.monotonic() + timeout
    value = check()
    while not done(value):
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g} s: {what}; last value: {value!r}")
        time.sleep(interval)
        value = check()
    return value


async def wait_until_async(
    check: Callable[[], T | Awaitable[T]],
    done: Callable[[T], bool] = _truthy,
    *,
    seconds: float = 20.0,
    interval: float = 0.01,
    what: str = "the condition",
) -> T:
    """`wait_until` on the running loop (other tasks run while it waits); `seconds` is its
    deadline."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds

    async def value_now() -> T:
        value = check()
        if inspect.isawaitable(value):
            return await value  # type: ignore[no-any-return]
        return value

    value = await value_now()
    while not done(value):
        if loop.time() > deadline:
            raise AssertionError(f"not within {seconds:g} s: {what}; last value: {value!r}")
        await asyncio.sleep(interval)
        value = await value_now()
    return value


def answers_or_exits(
    process: subprocess.Popen[bytes], answers: Callable[[], bool], timeout: float
) -> bool:
    """Whether a server we just started answers (`answers()`) within `timeout`: False as soon
    as its process has exited, or when the deadline passes."""
    with contextlib.suppress(AssertionError):
        wait_until(
            lambda: process.poll() is not None or answers(),
            timeout=timeout,
            interval=0.02,
            what="the server to answer",
        )
    return process.poll() is None and answers()
