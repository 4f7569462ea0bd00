"""`providers.all_or_none`: results in order, and a failure that leaves nothing running."""

from __future__ import annotations

import asyncio

import pytest

from providers.all_or_none import all_or_none


def test_results_come_in_the_order_given() -> None:
    async def after(seconds: float, value: int) -> int:
        await asyncio.sleep(seconds)
        return value

    assert asyncio.run(all_or_none([after(0.02, 1), after(0.0, 2), after(0.01, 3)])) == [1, 2, 3]


def test_the_first_failure_is_raised_once_the_others_were_cancelled() -> None:
    ended: list[str] = []

    async def refused() -> int:
        await asyncio.sleep(0)
        raise ValueError("refused")

    async def slow() -> int:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            ended.append("cancelled")
            raise
        return 1

    async def main() -> None:
        with pytest.raises(ValueError, match="refused"):
            await all_or_none([slow(), refused(), slow()])
        assert ended == ["cancelled", "cancelled"], "both were stopped before it raised"
        assert asyncio.all_tasks() == {asyncio.current_task()}, "nothing is left running"

    asyncio.run(main())
