"""Fixtures for the artifacts tests: one event loop per test, driven through `run`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

import pytest

Run = Callable[[Coroutine[Any, Any, Any]], Any]


@pytest.fixture
def run() -> Iterator[Run]:
    with asyncio.Runner() as runner:
        yield runner.run
