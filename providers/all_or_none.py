"""Awaitables run at once, where the first failure stops the rest.

`asyncio.gather` raises the first failure and leaves the others running: a request already
refused would go on fetching, or calling an upstream that bills for the answer nobody reads.
Here the others are cancelled and waited for before the failure is raised, so nothing the
call started outlives it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from typing import TypeVar

__all__ = ["all_or_none"]

_T = TypeVar("_T")


async def all_or_none(awaitables: Iterable[Awaitable[_T]]) -> list[_T]:
    """Every result in order; else the first failure, once the others have been cancelled."""
    tasks = [asyncio.ensure_future(each) for each in awaitables]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
