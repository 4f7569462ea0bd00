"""`providers.base.MediaInput`: a reference as a type, a size and a stream, checked as read."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from providers.base import MediaInput, ReferenceSizeMismatch
from tests.providers.references import ReferenceSource


def test_every_read_is_a_fresh_one_from_the_start() -> None:
    source = ReferenceSource(chunk_bytes=1000)
    reference = source.reference(3, 10_000, "image/png", b"\x89PNG")

    async def scenario() -> None:
        assert source.opened == 0  # holding a MediaInput reads nothing
        first = await reference.read()
        chunks = [chunk async for chunk in reference.chunks()]
        assert max(len(chunk) for chunk in chunks) <= 1000
        assert b"".join(chunks) == first
        assert len(first) == 10_000 and first.startswith(b"\x89PNG")
        assert source.opened == 2

    asyncio.run(scenario())
    data = b"abc" * 100
    assert asyncio.run(MediaInput.of_bytes(data, "image/png").read()) == data


@pytest.mark.parametrize(("size", "message"), [(10, "over its 10 bytes"), (30, "20 of its 30")])
def test_a_stream_of_another_length_than_announced_is_refused(size: int, message: str) -> None:
    """An upload announces `size_bytes` before sending; a stored file that changed length
    must fail the call, never send a part of the wrong length."""

    async def twenty_bytes() -> AsyncIterator[bytes]:
        async def chunks() -> AsyncIterator[bytes]:
            for _ in range(4):
                yield b"12345"

        return chunks()

    reference = MediaInput(mime_type="image/png", size_bytes=size, open=twenty_bytes)
    with pytest.raises(ReferenceSizeMismatch, match=message):
        asyncio.run(reference.read())
