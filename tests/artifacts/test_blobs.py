"""`LocalBlobStore` on real files in tmp_path."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from gateway.artifacts import blobs
from gateway.artifacts.blobs import BlobInfo, LocalBlobStore, check_key
from gateway.artifacts.errors import BlobNotFound
from gateway.errors import PayloadTooLarge
from tests.artifacts.conftest import Run

MiB = 1024 * 1024


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


async def _generated(total: int, chunk: int = 64 * 1024) -> AsyncIterator[bytes]:
    """`total` bytes made chunk by chunk: the whole never exists at once."""
    for index in range(0, total, chunk):
        yield bytes([index // chunk % 251]) * min(chunk, total - index)


def _digest_of_generated(total: int, chunk: int = 64 * 1024) -> str:
    digest = hashlib.sha256()
    for index in range(0, total, chunk):
        digest.update(bytes([index // chunk % 251]) * min(chunk, total - index))
    return digest.hexdigest()


def test_round_trip(run: Run, tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path, read_chunk_bytes=1000)
    data = os.urandom(2500)

    async def scenario() -> tuple[BlobInfo, list[bytes], bytes, bool, bool, bool, bool]:
        info = await store.write_bytes("ab12/art_1", data)
        chunks = [chunk async for chunk in await store.read("ab12/art_1")]
        whole = await store.read_all("ab12/art_1", 2500)
        present = await store.exists("ab12/art_1")
        deleted = await store.delete("ab12/art_1")
        return (
            info,
            chunks,
            whole,
            present,
            deleted,
            await store.exists("ab12/art_1"),
            (await store.delete("ab12/art_1")),
        )

    info, chunks, whole, present, deleted, after, deleted_again = run(scenario())
    assert info == BlobInfo(
        size_bytes=2500, sha256=hashlib.sha256(data).hexdigest(), head=data[:64]
    )
    assert [len(c) for c in chunks] == [1000, 1000, 500]
    assert b"".join(chunks) == whole == data
    assert (present, deleted, after, deleted_again) == (True, True, False, False)
    assert _files(tmp_path) == []


_LARGE_WRITE = """
import asyncio, json, sys, tracemalloc
from pathlib import Path
from gateway.artifacts.blobs import LocalBlobStore
from tests.artifacts.test_blobs import _generated

handoffs = 0
to_thread = asyncio.to_thread

async def counting_to_thread(func, /, *args):
    global handoffs
    handoffs += 1
    return await to_thread(func, *args)

asyncio.to_thread = counting_to_thread
root, total = Path(sys.argv[1]), int(sys.argv[2])
tracemalloc.start()
info = asyncio.run(LocalBlobStore(root).write("t/big", _generated(total), max_bytes=total))
_, peak = tracemalloc.get_traced_memory()
print(json.dumps({"peak": peak, "handoffs": handoffs, "size": info.size_bytes,
                  "sha256": info.sha256}))
"""


def test_large_streaming_write_stays_small_in_memory(tmp_path: Path) -> None:
    """30 MiB in 64 KiB chunks: traced peak memory is a small fraction of the size, the
    digest is right, and disk work goes to threads in batches (not one handoff per chunk).

    Measured in a process of its own (tracemalloc counts every thread's allocations). ~1.16 MB
    is the writer's own: a batch of ~1 MiB and a chunk. Under load it had reached 4.3 MB, as
    each batch outlived its write in the executor's work item until that thread ran again."""
    total = 30 * MiB
    done = subprocess.run(
        [sys.executable, "-c", _LARGE_WRITE, str(tmp_path), str(total)],
        cwd=Path(__file__).resolve().parents[2],  # where `tests` imports from
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    measured = json.loads(done.stdout)
    assert measured["size"] == total
    assert measured["sha256"] == _digest_of_generated(total)
    assert (tmp_path / "t" / "big").stat().st_size == total
    assert measured["peak"] < 2 * MiB, f"peak {measured['peak']} bytes while writing {total}"
    assert 30 <= measured["handoffs"] <= 40  # ~1 MiB per batch: 480 chunks, about 32 handoffs


def test_over_the_limit_leaves_nothing(run: Run, tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path)
    with pytest.raises(PayloadTooLarge) as caught:
        run(store.write("t/too-big", _generated(3 * MiB), max_bytes=2 * MiB))
    assert caught.value.status_code == 413
    assert _files(tmp_path) == []
    assert not run(store.exists("t/too-big"))


def test_a_failing_source_leaves_nothing(run: Run, tmp_path: Path) -> None:
    async def broken() -> AsyncIterator[bytes]:
        yield b"x" * (2 * MiB)
        raise ConnectionResetError("client went away")

    store = LocalBlobStore(tmp_path)
    with pytest.raises(ConnectionResetError):
        run(store.write("t/broken", broken(), max_bytes=10 * MiB))
    assert _files(tmp_path) == []


def test_no_partial_blob_is_visible_and_cancel_cleans_up(run: Run, tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path)
    started = asyncio.Event()

    async def stalls() -> AsyncIterator[bytes]:
        yield b"y" * (3 * MiB)  # past one batch: bytes are on disk, in the temp file
        started.set()
        await asyncio.Event().wait()
        yield b""

    async def scenario() -> tuple[list[str], bool]:
        writer = asyncio.create_task(store.write("t/slow", stalls(), max_bytes=10 * MiB))
        await started.wait()
        await asyncio.sleep(0.05)  # the behaviour under test: mid-write, nothing visible
        during = _files(tmp_path)
        with pytest.raises(BlobNotFound):
            await store.read("t/slow")
        writer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await writer
        return during, await store.exists("t/slow")

    during, exists_after = run(scenario())
    assert len(during) == 1 and during[0].startswith("t/.slow.") and during[0].endswith(".tmp")
    assert not exists_after
    assert _files(tmp_path) == []


def test_sweep_removes_only_old_temp_files(run: Run, tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path)
    run(store.write_bytes("t/kept", b"blob"))
    folder = tmp_path / "t"
    old, young = folder / ".art_1.k2j3.tmp", folder / ".art_2.x9y8.tmp"
    old.write_bytes(b"partial")
    young.write_bytes(b"partial")
    an_hour_ago = time.time() - 3600
    os.utime(old, (an_hour_ago, an_hour_ago))

    assert run(store.sweep_temp(600)) == 1
    assert _files(tmp_path) == ["t/.art_2.x9y8.tmp", "t/kept"]
    assert run(store.sweep_temp(600, now=time.time() + 3600)) == 1
    assert _files(tmp_path) == ["t/kept"]
    assert run(LocalBlobStore(tmp_path / "missing").sweep_temp(0)) == 0


def test_missing_blob_and_read_all_cap(run: Run, tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path)
    run(store.write_bytes("t/small", b"0123456789"))
    reads: list[Callable[[], Coroutine[Any, Any, object]]] = [
        lambda: store.read("t/none"),
        lambda: store.read_all("t/none", 10),
    ]
    for read in reads:
        with pytest.raises(BlobNotFound) as caught:
            run(read())
        assert caught.value.status_code == 404
    assert run(store.read_all("t/small", 10)) == b"0123456789"
    with pytest.raises(PayloadTooLarge):
        run(store.read_all("t/small", 9))


def test_read_range_reads_only_the_range(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LocalBlobStore(tmp_path, read_chunk_bytes=1000)
    data = os.urandom(10_000)
    run(store.write_bytes("t/blob", data))
    read_from_disk: list[int] = []
    open_at = blobs._open_at

    def counting_open_at(path: Path, offset: int) -> Any:
        file = open_at(path, offset)
        read = file.read

        def counted(size: int = -1) -> bytes:
            chunk = read(size)
            read_from_disk.append(len(chunk))
            return chunk

        file.read = counted  # type: ignore[method-assign]
        return file

    monkeypatch.setattr(blobs, "_open_at", counting_open_at)

    async def chunks(start: int, stop: int) -> list[bytes]:
        return [chunk async for chunk in await store.read_range("t/blob", start, stop)]

    middle = run(chunks(2500, 5600))
    assert [len(c) for c in middle] == [1000, 1000, 1000, 100]
    assert b"".join(middle) == data[2500:5600]
    assert sum(read_from_disk) == 3100  # seeked to the start, stopped at the end
    assert b"".join(run(chunks(9990, 10_000))) == data[9990:]
    assert b"".join(run(chunks(0, 1))) == data[:1]
    with pytest.raises(BlobNotFound):
        run(store.read_range("t/none", 0, 1))


@pytest.mark.parametrize(
    "key",
    ["", "../x", "a/../b", "/abs", "a//b", "a/", ".hidden", "a/.", "a\\b", "a b", "ü", "a/x.tmp",
     "a:b", "a\x00b", "/".join(["a"] * 9), "x" * 129],
)  # fmt: skip
def test_unsafe_keys_are_refused(tmp_path: Path, run: Run, key: str) -> None:
    with pytest.raises(ValueError):
        check_key(key)
    with pytest.raises(ValueError):
        run(LocalBlobStore(tmp_path).write_bytes(key, b"data"))
    assert _files(tmp_path) == []


def test_safe_keys_are_accepted() -> None:
    for key in ("art_1", "9f86d081/art_0123abcd", "a-b/c.d/e_f.png"):
        assert check_key(key) == key
