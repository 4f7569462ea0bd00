"""`S3BlobStore` against a real S3-compatible server process (moto): the behaviours of
test_blobs.py, plus multipart uploads, aborted uploads and an S3 that goes away."""

from __future__ import annotations

import asyncio
import hashlib
import os
import tracemalloc
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from gateway.artifacts.blobs import BlobInfo
from gateway.artifacts.errors import BlobNotFound
from gateway.artifacts.s3 import PART_BYTES, BucketUnusable, S3BlobStore
from gateway.artifacts.s3_client import S3Options
from gateway.errors import PayloadTooLarge, StoreUnavailable
from tests.artifacts.conftest import Run
from tests.support.ports import free_port
from tests.support.s3_server import ACCESS_KEY, REGION, SECRET_KEY, S3Server, s3_server_or_skip

MiB = 1024 * 1024


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    with s3_server_or_skip(tmp_path_factory.mktemp("s3")) as server:
        yield server


@pytest.fixture
def bucket(s3: S3Server) -> str:
    return s3.create_bucket()


def _options(endpoint: str, **overrides: Any) -> S3Options:
    return S3Options(
        endpoint_url=endpoint,
        region=REGION,
        access_key=ACCESS_KEY,
        secret_key=SECRET_KEY,
        addressing="path",
        **overrides,
    )


@asynccontextmanager
async def _opened(endpoint: str, bucket: str, **kwargs: Any) -> AsyncIterator[S3BlobStore]:
    options = _options(endpoint, max_attempts=kwargs.pop("max_attempts", 3))
    async with S3BlobStore(bucket, options=options, **kwargs) as store:
        yield store


async def _generated(total: int, chunk: int = 64 * 1024) -> AsyncIterator[bytes]:
    """`total` bytes made chunk by chunk: the whole never exists at once."""
    for index in range(0, total, chunk):
        yield bytes([index // chunk % 251]) * min(chunk, total - index)


def _digest_of_generated(total: int, chunk: int = 64 * 1024) -> str:
    digest = hashlib.sha256()
    for index in range(0, total, chunk):
        digest.update(bytes([index // chunk % 251]) * min(chunk, total - index))
    return digest.hexdigest()


def test_round_trip_under_a_prefix(run: Run, s3: S3Server, bucket: str) -> None:
    data = os.urandom(2500)

    async def scenario() -> tuple[Any, ...]:
        async with _opened(s3.endpoint, bucket, prefix="/gw/art/", read_chunk_bytes=1000) as store:
            info = await store.write_bytes("ab12/art_1", data)
            listed = s3.keys(bucket)
            chunks = [chunk async for chunk in await store.read("ab12/art_1")]
            whole = await store.read_all("ab12/art_1", 2500)
            present = await store.exists("ab12/art_1")
            deleted = await store.delete("ab12/art_1")
            after = await store.exists("ab12/art_1")
            return (
                info,
                listed,
                chunks,
                whole,
                present,
                deleted,
                after,
                await store.delete("ab12/art_1"),
            )

    info, listed, chunks, whole, present, deleted, after, deleted_again = run(scenario())
    assert info == BlobInfo(
        size_bytes=2500, sha256=hashlib.sha256(data).hexdigest(), head=data[:64]
    )
    assert listed == ["gw/art/ab12/art_1"]
    assert all(0 < len(c) <= 1000 for c in chunks)
    assert b"".join(chunks) == whole == data
    assert (present, deleted, after, deleted_again) == (True, True, False, False)
    assert s3.keys(bucket) == []


def test_large_streaming_write_and_read_stay_small_in_memory(
    run: Run, s3: S3Server, bucket: str
) -> None:
    """30 MiB in 64 KiB chunks goes up as a multipart upload of 8 MiB parts holding about one
    part in memory; it comes back down in chunks holding far less."""
    total = 30 * MiB

    async def download(store: S3BlobStore) -> tuple[int, str, int]:
        digest, size, largest = hashlib.sha256(), 0, 0
        async for chunk in await store.read("t/big"):
            digest.update(chunk)
            size += len(chunk)
            largest = max(largest, len(chunk))
        return size, digest.hexdigest(), largest

    async def scenario() -> tuple[BlobInfo, int, tuple[int, str, int], int]:
        async with _opened(s3.endpoint, bucket) as store:
            tracemalloc.start()
            try:
                info = await store.write("t/big", _generated(total), max_bytes=total)
                _, write_peak = tracemalloc.get_traced_memory()
                tracemalloc.reset_peak()
                read = await download(store)
                _, read_peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
            return info, write_peak, read, read_peak

    info, write_peak, (size, sha256, largest), read_peak = run(scenario())
    assert info.size_bytes == total
    assert info.sha256 == _digest_of_generated(total)
    assert s3.keys(bucket) == ["t/big"]
    assert s3.etag(bucket, "t/big").endswith("-4")  # 8 + 8 + 8 + 6 MiB
    assert write_peak < PART_BYTES + 4 * MiB, f"peak {write_peak} bytes while writing {total}"
    assert (size, sha256) == (total, info.sha256)
    assert largest <= 256 * 1024
    assert read_peak < 4 * MiB, f"peak {read_peak} bytes while reading {total}"


def test_a_body_under_one_part_is_one_put(run: Run, s3: S3Server, bucket: str) -> None:
    async def scenario() -> BlobInfo:
        async with _opened(s3.endpoint, bucket) as store:
            return await store.write("t/small", _generated(3 * MiB), max_bytes=3 * MiB)

    info = run(scenario())
    assert info.sha256 == _digest_of_generated(3 * MiB)
    assert "-" not in s3.etag(bucket, "t/small")


@pytest.mark.parametrize("total", [3 * MiB, 20 * MiB], ids=["one-put", "multipart"])
def test_over_the_limit_leaves_nothing(run: Run, s3: S3Server, bucket: str, total: int) -> None:
    async def scenario() -> None:
        async with _opened(s3.endpoint, bucket) as store:
            await store.write("t/too-big", _generated(total), max_bytes=total - 2 * MiB)

    with pytest.raises(PayloadTooLarge) as caught:
        run(scenario())
    assert caught.value.status_code == 413
    assert s3.keys(bucket) == []
    assert s3.pending_uploads(bucket) == []  # the multipart upload was aborted


def test_a_failing_source_leaves_nothing(run: Run, s3: S3Server, bucket: str) -> None:
    async def broken() -> AsyncIterator[bytes]:
        yield b"x" * (9 * MiB)  # one part already sent
        raise ConnectionResetError("client went away")

    async def scenario() -> None:
        async with _opened(s3.endpoint, bucket) as store:
            await store.write("t/broken", broken(), max_bytes=50 * MiB)

    with pytest.raises(ConnectionResetError):  # the source's error, not translated
        run(scenario())
    assert s3.keys(bucket) == []
    assert s3.pending_uploads(bucket) == []


def test_no_partial_blob_is_visible_and_cancel_aborts(run: Run, s3: S3Server, bucket: str) -> None:
    started = asyncio.Event()

    async def stalls() -> AsyncIterator[bytes]:
        yield b"y" * (9 * MiB)  # past one part: bytes are in S3, in an open upload
        started.set()
        await asyncio.Event().wait()
        yield b""

    async def scenario() -> tuple[list[str], list[str], bool]:
        async with _opened(s3.endpoint, bucket) as store:
            writer = asyncio.create_task(store.write("t/slow", stalls(), max_bytes=50 * MiB))
            await started.wait()
            await asyncio.sleep(0.2)  # the behaviour under test: mid-upload, nothing visible
            visible, pending = s3.keys(bucket), s3.pending_uploads(bucket)
            with pytest.raises(BlobNotFound):
                await store.read("t/slow")
            writer.cancel()
            with pytest.raises(asyncio.CancelledError):
                await writer
            return visible, pending, await store.exists("t/slow")

    visible, pending, exists_after = run(scenario())
    assert (visible, pending) == ([], ["t/slow"])
    assert not exists_after
    assert s3.keys(bucket) == []
    assert s3.pending_uploads(bucket) == []


def test_missing_blob_and_read_all_cap(run: Run, s3: S3Server, bucket: str) -> None:
    async def scenario() -> None:
        async with _opened(s3.endpoint, bucket) as store:
            await store.write_bytes("t/small", b"0123456789")
            reads: list[Callable[[], Coroutine[Any, Any, object]]] = [
                lambda: store.read("t/none"),  # raises when awaited, before any iteration
                lambda: store.read_all("t/none", 10),
            ]
            for read in reads:
                with pytest.raises(BlobNotFound) as caught:
                    await read()
                assert caught.value.status_code == 404
            assert await store.read_all("t/small", 10) == b"0123456789"
            with pytest.raises(PayloadTooLarge):
                await store.read_all("t/small", 9)
            assert await store.write_bytes("t/empty", b"") == BlobInfo(
                size_bytes=0, sha256=hashlib.sha256(b"").hexdigest(), head=b""
            )
            assert [c async for c in await store.read("t/empty")] == []

    run(scenario())


def test_read_range_is_one_ranged_get(run: Run, s3: S3Server, bucket: str) -> None:
    data = os.urandom(10_000)

    async def scenario() -> None:
        async with _opened(s3.endpoint, bucket, read_chunk_bytes=1000) as store:
            await store.write_bytes("t/blob", data)
            client: Any = store._client
            get_object = client.get_object
            answered: list[tuple[str | None, int]] = []

            async def spied(**params: Any) -> dict[str, Any]:
                response: dict[str, Any] = await get_object(**params)
                answered.append((params.get("Range"), int(response["ContentLength"])))
                return response

            client.get_object = spied
            middle = [chunk async for chunk in await store.read_range("t/blob", 2500, 5600)]
            assert b"".join(middle) == data[2500:5600]
            assert [len(c) for c in middle] == [1000, 1000, 1000, 100]
            tail = [chunk async for chunk in await store.read_range("t/blob", 9999, 10_000)]
            assert tail == [data[9999:]]
            # S3 sent only the range: the object's other bytes never crossed the wire.
            assert answered == [("bytes=2500-5599", 3100), ("bytes=9999-9999", 1)]
            with pytest.raises(BlobNotFound):
                await store.read_range("t/none", 0, 1)

    run(scenario())


@pytest.mark.parametrize("key", ["", "../x", "a//b", ".hidden", "a/x.tmp", "a b"])
def test_unsafe_keys_are_refused(run: Run, s3: S3Server, bucket: str, key: str) -> None:
    async def scenario() -> None:
        async with _opened(s3.endpoint, bucket) as store:
            await store.write_bytes(key, b"data")

    with pytest.raises(ValueError):
        run(scenario())
    assert s3.keys(bucket) == []


def test_open_refuses_a_missing_bucket_and_an_unreachable_endpoint(run: Run, s3: S3Server) -> None:
    with pytest.raises(BucketUnusable, match=r"'no-such-bucket' .* does not exist"):
        run(_opened(s3.endpoint, "no-such-bucket").__aenter__())
    nowhere = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(BucketUnusable, match=f"at {nowhere} cannot be used"):
        run(_opened(nowhere, "some-bucket", max_attempts=1).__aenter__())


def test_an_s3_that_went_away_is_503(run: Run, tmp_path: Path) -> None:
    """Every operation fails with StoreUnavailable (503, retryable), the cause attached."""
    with s3_server_or_skip(tmp_path) as server:
        bucket = server.create_bucket()

        async def scenario() -> list[BaseException]:
            failures: list[BaseException] = []
            async with _opened(server.endpoint, bucket, max_attempts=1) as store:
                await store.write_bytes("t/kept", b"bytes")
                server.stop()
                calls: list[Callable[[], Coroutine[Any, Any, object]]] = [
                    lambda: store.write_bytes("t/new", b"bytes"),
                    lambda: store.write("t/big", _generated(20 * MiB), max_bytes=20 * MiB),
                    lambda: store.read("t/kept"),
                    lambda: store.read_all("t/kept", 100),
                    lambda: store.exists("t/kept"),
                    lambda: store.delete("t/kept"),
                ]
                for call in calls:
                    with pytest.raises(StoreUnavailable) as caught:
                        await call()
                    failures.append(caught.value)
            return failures

        failures = run(scenario())
    for failure in failures:
        assert isinstance(failure, StoreUnavailable)
        assert (failure.status_code, failure.retryable) == (503, True)
        assert failure.__cause__ is not None
