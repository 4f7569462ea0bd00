"""A media task's time spread over its progress checkpoints, so a cancel is seen within 0.1 s.

A task of `seconds` has `steps` equal shares on a fixed schedule from the first step: step k
reports its stage at percent 95 * k / steps (the gateway reports 100 % when it stores the
result), then waits until its share ends, reporting a rising percent at least every 0.1 s.
Work done after a step (rendering, encoding) eats into the next step's share instead of
adding to the total, so a task takes `seconds` unless its work is slower than that.
"""

from __future__ import annotations

import asyncio
from typing import NoReturn

from providers.base import TaskControl

__all__ = ["Progress"]

_TICK = 0.1  # longest time between two checkpoints while waiting
_SPAN = 95.0  # percent reached when the last step ends


class Progress:
    def __init__(self, control: TaskControl, seconds: float, steps: int) -> None:
        self._control = control
        self._share = seconds / steps
        self._steps = steps
        self._done = 0
        self._began: float | None = None
        self._percent = 0.0

    async def step(self, stage: str, message: str = "") -> None:
        """Report the next step, then spend what is left of its share of the time."""
        loop = asyncio.get_running_loop()
        if self._began is None:
            self._began = loop.time()
        index = min(self._done, self._steps - 1)
        self._done += 1
        start = _SPAN * index / self._steps
        await self._report(start, stage, message)
        if self._share <= 0:
            return
        step_start = self._began + index * self._share
        end = step_start + self._share
        while (left := end - loop.time()) > 0:
            await asyncio.sleep(min(_TICK, left))
            now = loop.time()
            if now < end:  # the next step (or the result) follows at once otherwise
                share_done = max(0.0, now - step_start) / self._share
                await self._report(start + _SPAN / self._steps * share_done, stage, message)

    async def stall(self, stage: str, message: str) -> NoReturn:
        """Never finish: report the same percent every 0.1 s until `checkpoint` raises."""
        while True:
            await self._report(self._percent, stage, message)
            await asyncio.sleep(_TICK)

    async def _report(self, percent: float, stage: str, message: str) -> None:
        self._percent = max(self._percent, round(percent, 1))
        await self._control.checkpoint(self._percent, stage, message)
