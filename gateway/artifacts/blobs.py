"""Blob storage: the `BlobStore` contract and `LocalBlobStore`, a folder on local disk.

A blob is written in full or not at all: bytes stream into a temporary file beside the
target (`.<name>.<random>.tmp`, a name no key can have), hashed and counted as they go, then
fsynced and renamed into place. A reader never sees a partial blob; a crash leaves only temp
files, which `sweep_temp` removes. Disk work runs in a thread, one call per batch of chunks
(about 1 MiB), so a large upload neither blocks the event loop nor pays a thread handoff per
small chunk. The content is never held whole in memory.

The protocol is small on purpose so an S3-compatible store can implement it later.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

from gateway.artifacts.errors import BlobNotFound
from gateway.errors import PayloadTooLarge

__all__ = ["HEAD_BYTES", "READ_CHUNK_BYTES", "BlobInfo", "BlobStore", "LocalBlobStore", "check_key"]

HEAD_BYTES = 64
"""Leading bytes kept in `BlobInfo.head`: enough for every signature `sniff` knows."""
READ_CHUNK_BYTES = 256 * 1024
_BATCH_BYTES = 1024 * 1024
"""Bytes gathered before one thread handoff writes and hashes them."""
_TEMP_SUFFIX = ".tmp"
_SEGMENT = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$")
_MAX_SEGMENTS = 8


@dataclass(frozen=True, slots=True)
class BlobInfo:
    """What a write learned on the way: size, digest and the head for type sniffing."""

    size_bytes: int
    sha256: str
    """Lowercase hex."""
    head: bytes
    """The first bytes (up to `HEAD_BYTES`)."""


class BlobStore(Protocol):
    """Where artifact bytes live; keys are relative paths such as `<tenant-hash>/<art_id>`."""

    async def write(self, key: str, chunks: AsyncIterator[bytes], *, max_bytes: int) -> BlobInfo:
        """Store the chunks under `key` atomically; `PayloadTooLarge` past `max_bytes`."""
        ...

    async def write_bytes(self, key: str, data: bytes) -> BlobInfo: ...

    async def read(self, key: str) -> AsyncIterator[bytes]:
        """The blob in chunks; `BlobNotFound` (raised here, before iterating) if absent."""
        ...

    async def read_range(self, key: str, start: int, stop: int) -> AsyncIterator[bytes]:
        """Bytes `start` to `stop` (exclusive, within the blob) in chunks, reading only them;
        `BlobNotFound` as for `read`."""
        ...

    async def read_all(self, key: str, max_bytes: int) -> bytes: ...

    async def delete(self, key: str) -> bool:
        """Remove the blob; False when there was none."""
        ...

    async def exists(self, key: str) -> bool: ...


def check_key(key: str) -> str:
    """Refuse any key that is not a plain relative path of safe segments (ValueError)."""
    segments = key.split("/")
    if not key or len(segments) > _MAX_SEGMENTS:
        raise ValueError(f"invalid blob key {key!r}")
    for segment in segments:
        # A segment never starts with a dot: no `.`, `..`, hidden or temp-file names.
        if not _SEGMENT.match(segment) or segment.endswith(_TEMP_SUFFIX):
            raise ValueError(f"invalid blob key {key!r}")
    return key


def _write_batch(file: IO[bytes], digest: hashlib._Hash, batch: list[bytes]) -> None:
    for part in batch:
        digest.update(part)  # hashlib releases the GIL for large buffers
        file.write(part)
    # Let go of the parts here: the executor's work item keeps `batch` until its thread gets
    # the GIL back, and on a busy machine the next batches came in meanwhile (on new threads),
    # ~4 MiB held once instead of ~1.
    batch.clear()


def _finish(file: IO[bytes], temp: Path, target: Path) -> None:
    file.flush()
    os.fsync(file.fileno())
    file.close()
    os.replace(temp, target)
    _fsync_dir(target.parent)


def _fsync_dir(folder: Path) -> None:
    """Make the rename itself durable, so a crash cannot leave the key pointing nowhere."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _open_at(path: Path, offset: int) -> IO[bytes]:
    file = path.open("rb")
    if offset:
        file.seek(offset)
    return file


def _discard(file: IO[bytes], temp: Path) -> None:
    file.close()
    temp.unlink(missing_ok=True)


class LocalBlobStore:
    """`BlobStore` on a local folder; one file per key under `root`."""

    def __init__(self, root: Path, *, read_chunk_bytes: int = READ_CHUNK_BYTES) -> None:
        self.root = root
        self.read_chunk_bytes = read_chunk_bytes

    def path_for(self, key: str) -> Path:
        """The file that holds `key` (the key is checked first)."""
        return self.root.joinpath(*check_key(key).split("/"))

    async def write(self, key: str, chunks: AsyncIterator[bytes], *, max_bytes: int) -> BlobInfo:
        target = self.path_for(key)
        file, temp = await asyncio.to_thread(self._open_temp, target)
        digest = hashlib.sha256()
        size, head = 0, b""
        batch: list[bytes] = []
        batch_bytes = 0
        try:
            async for chunk in chunks:
                if not chunk:
                    continue
                size += len(chunk)
                if size > max_bytes:
                    raise PayloadTooLarge(f"The content exceeds the limit of {max_bytes} bytes.")
                if len(head) < HEAD_BYTES:
                    head += chunk[: HEAD_BYTES - len(head)]
                batch.append(chunk)
                batch_bytes += len(chunk)
                if batch_bytes >= _BATCH_BYTES:
                    await asyncio.to_thread(_write_batch, file, digest, batch)
                    batch, batch_bytes = [], 0
            await asyncio.to_thread(_write_batch, file, digest, batch)
            await asyncio.to_thread(_finish, file, temp, target)
        except BaseException:
            # Inline on purpose: it must also run when the task is being cancelled.
            _discard(file, temp)
            raise
        return BlobInfo(size_bytes=size, sha256=digest.hexdigest(), head=head)

    @staticmethod
    def _open_temp(target: Path) -> tuple[IO[bytes], Path]:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(
            dir=target.parent, prefix=f".{target.name}.", suffix=_TEMP_SUFFIX
        )
        return os.fdopen(fd, "wb"), Path(name)

    async def write_bytes(self, key: str, data: bytes) -> BlobInfo:
        async def one() -> AsyncIterator[bytes]:
            yield data

        return await self.write(key, one(), max_bytes=len(data))

    async def read(self, key: str) -> AsyncIterator[bytes]:
        path = self.path_for(key)
        if not await asyncio.to_thread(path.is_file):
            raise BlobNotFound()
        return self._chunks(path)

    async def read_range(self, key: str, start: int, stop: int) -> AsyncIterator[bytes]:
        path = self.path_for(key)
        if not await asyncio.to_thread(path.is_file):
            raise BlobNotFound()
        return self._chunks(path, start, stop)

    async def _chunks(
        self, path: Path, start: int = 0, stop: int | None = None
    ) -> AsyncIterator[bytes]:
        # Opened on first iteration, so an iterator never started holds no file handle.
        try:
            file = await asyncio.to_thread(_open_at, path, start)
        except FileNotFoundError as exc:  # deleted since `read` looked
            raise BlobNotFound() from exc
        left = -1 if stop is None else stop - start  # -1: to the end
        try:
            while left:
                size = self.read_chunk_bytes if left < 0 else min(left, self.read_chunk_bytes)
                chunk = await asyncio.to_thread(file.read, size)
                if not chunk:
                    return
                if left > 0:
                    left -= len(chunk)
                yield chunk
        finally:
            file.close()

    async def read_all(self, key: str, max_bytes: int) -> bytes:
        path = self.path_for(key)

        def load() -> bytes:
            with path.open("rb") as file:
                data = file.read(max_bytes + 1)
            if len(data) > max_bytes:
                raise PayloadTooLarge(f"The content exceeds the limit of {max_bytes} bytes.")
            return data

        try:
            return await asyncio.to_thread(load)
        except FileNotFoundError as exc:
            raise BlobNotFound() from exc

    async def delete(self, key: str) -> bool:
        path = self.path_for(key)

        def remove() -> bool:
            try:
                path.unlink()
            except FileNotFoundError:
                return False
            return True

        return await asyncio.to_thread(remove)

    async def exists(self, key: str) -> bool:
        return await asyncio.to_thread(self.path_for(key).is_file)

    async def sweep_temp(self, older_than: float, *, now: float | None = None) -> int:
        """Remove temp files last touched more than `older_than` seconds ago; returns how many.

        Only old ones: a young temp file may belong to a write still in progress.
        """
        cutoff = (time.time() if now is None else now) - older_than

        def sweep() -> int:
            removed = 0
            if not self.root.is_dir():
                return 0
            for path in self.root.rglob(f".*{_TEMP_SUFFIX}"):
                try:
                    if path.is_file() and path.stat().st_mtime < cutoff:
                        path.unlink()
                        removed += 1
                except FileNotFoundError:  # finished or swept meanwhile
                    continue
            return removed

        return await asyncio.to_thread(sweep)
