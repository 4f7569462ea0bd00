"""`S3BlobStore`: the `BlobStore` contract on an S3-compatible bucket, so replicas share bytes.

Atomic the S3 way: an object becomes visible only when `PutObject` or
`CompleteMultipartUpload` succeeds, so a reader never sees a partial blob. A body smaller than
one part (8 MiB) is buffered and sent with one `PutObject`; a larger one goes as a multipart
upload with one part in memory at a time, and any failure (the limit, a broken source, a
cancellation) aborts the upload. Digest and size are computed on the way; each part is hashed
in a thread while it uploads, so the event loop never hashes megabytes.

Every client call runs inside `s3_errors` (`s3_client.py`): an unreachable or refusing S3 is
`StoreUnavailable` (503, retryable), a missing key `BlobNotFound` (404).

The client owns an aiohttp session, so the store has a lifecycle: `open()` creates the client
and checks the bucket (a missing bucket stops start-up with `BucketUnusable`), `close()` ends
it. The gateway opens the store once in its lifespan, not per routing-file version.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

from gateway.artifacts.blobs import HEAD_BYTES, READ_CHUNK_BYTES, BlobInfo, check_key
from gateway.artifacts.errors import BlobNotFound
from gateway.artifacts.s3_client import S3Body, S3Client, S3Options, open_client, s3_errors
from gateway.errors import PayloadTooLarge
from gateway.logging import get_logger

__all__ = ["MIN_PART_BYTES", "PART_BYTES", "BucketUnusable", "S3BlobStore"]

PART_BYTES = 8 * 1024 * 1024
MIN_PART_BYTES = 5 * 1024 * 1024
"""S3 refuses smaller parts (all but the last)."""

_log = get_logger("gateway.artifacts.s3")


class BucketUnusable(RuntimeError):
    """At start: the bucket is missing, forbidden or unreachable; the message says which."""


def _hash(digest: hashlib._Hash, buffer: io.BytesIO) -> None:
    with buffer.getbuffer() as view:  # no copy; the upload reads the same buffer meanwhile
        digest.update(view)


@dataclass(slots=True)
class _Multipart:
    key: str
    upload_id: str
    parts: list[dict[str, Any]] = field(default_factory=list)


class S3BlobStore:
    """`BlobStore` on `bucket`; a blob key `k` is the object `<prefix>/k`."""

    def __init__(
        self,
        bucket: str,
        *,
        prefix: str = "",
        options: S3Options | None = None,
        part_bytes: int = PART_BYTES,
        read_chunk_bytes: int = READ_CHUNK_BYTES,
    ) -> None:
        if part_bytes < MIN_PART_BYTES:
            raise ValueError(f"part_bytes must be at least {MIN_PART_BYTES}")
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.options = options or S3Options()
        self.part_bytes = part_bytes
        self.read_chunk_bytes = read_chunk_bytes
        self._stack: AsyncExitStack | None = None
        self._client: S3Client | None = None

    def __repr__(self) -> str:
        return f"S3BlobStore({self.bucket!r}, prefix={self.prefix!r}, options={self.options!r})"

    # Lifecycle ------------------------------------------------------------------------

    async def open(self) -> None:
        """Create the client and check the bucket; `BucketUnusable` if it cannot be used."""
        if self._client is not None:
            return
        stack = AsyncExitStack()
        client = await stack.enter_async_context(open_client(self.options))
        where = f"S3 bucket {self.bucket!r} at {self.options.endpoint_url or 'AWS'}"
        try:
            with s3_errors:
                await client.head_bucket(Bucket=self.bucket)
        except BlobNotFound as exc:
            await stack.aclose()
            raise BucketUnusable(f"{where} does not exist; create it first") from exc
        except Exception as exc:
            await stack.aclose()
            cause = exc.__cause__ or exc
            raise BucketUnusable(f"{where} cannot be used: {cause}") from exc
        self._stack, self._client = stack, client

    async def close(self) -> None:
        stack, self._stack, self._client = self._stack, None, None
        if stack is not None:
            await stack.aclose()

    async def __aenter__(self) -> S3BlobStore:
        await self.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def _object_key(self, key: str) -> str:
        check_key(key)
        return f"{self.prefix}/{key}" if self.prefix else key

    @property
    def _s3(self) -> S3Client:
        if self._client is None:
            raise RuntimeError("S3BlobStore is not open; call open() first")
        return self._client

    # Writing --------------------------------------------------------------------------

    async def write(self, key: str, chunks: AsyncIterator[bytes], *, max_bytes: int) -> BlobInfo:
        object_key = self._object_key(key)
        digest = hashlib.sha256()
        size, head = 0, b""
        buffer = io.BytesIO()
        upload: _Multipart | None = None
        try:
            async for chunk in chunks:  # the source's own errors pass through untranslated
                if not chunk:
                    continue
                size += len(chunk)
                if size > max_bytes:
                    raise PayloadTooLarge(f"The content exceeds the limit of {max_bytes} bytes.")
                if len(head) < HEAD_BYTES:
                    head += chunk[: HEAD_BYTES - len(head)]
                buffer.write(chunk)
                if buffer.tell() >= self.part_bytes:
                    if upload is None:
                        upload = await self._start(object_key)
                    await self._send_part(upload, buffer, digest)
                    buffer = io.BytesIO()
            if upload is None:
                await self._put(object_key, buffer, digest)
            else:
                if buffer.tell():
                    await self._send_part(upload, buffer, digest)
                with s3_errors:
                    await self._s3.complete_multipart_upload(
                        Bucket=self.bucket,
                        Key=upload.key,
                        UploadId=upload.upload_id,
                        MultipartUpload={"Parts": upload.parts},
                    )
        except BaseException:
            # Inline on purpose: it must also run when the task is being cancelled.
            if upload is not None:
                await self._abort(upload)
            raise
        return BlobInfo(size_bytes=size, sha256=digest.hexdigest(), head=head)

    async def write_bytes(self, key: str, data: bytes) -> BlobInfo:
        async def one() -> AsyncIterator[bytes]:
            yield data

        return await self.write(key, one(), max_bytes=len(data))

    async def _start(self, object_key: str) -> _Multipart:
        with s3_errors:
            created = await self._s3.create_multipart_upload(Bucket=self.bucket, Key=object_key)
        return _Multipart(object_key, str(created["UploadId"]))

    async def _put(self, object_key: str, buffer: io.BytesIO, digest: hashlib._Hash) -> None:
        async def put() -> None:
            with s3_errors:
                await self._s3.put_object(Bucket=self.bucket, Key=object_key, Body=buffer)

        buffer.seek(0)
        await asyncio.gather(asyncio.to_thread(_hash, digest, buffer), put())

    async def _send_part(
        self, upload: _Multipart, buffer: io.BytesIO, digest: hashlib._Hash
    ) -> None:
        number = len(upload.parts) + 1

        async def send() -> str:
            with s3_errors:
                sent = await self._s3.upload_part(
                    Bucket=self.bucket,
                    Key=upload.key,
                    UploadId=upload.upload_id,
                    PartNumber=number,
                    Body=buffer,
                )
            return str(sent["ETag"])

        buffer.seek(0)
        _, etag = await asyncio.gather(asyncio.to_thread(_hash, digest, buffer), send())
        upload.parts.append({"ETag": etag, "PartNumber": number})

    async def _abort(self, upload: _Multipart) -> None:
        """Best effort: a leftover upload is invisible, and a bucket lifecycle rule
        (AbortIncompleteMultipartUpload) removes it later."""
        try:
            with s3_errors:
                await self._s3.abort_multipart_upload(
                    Bucket=self.bucket, Key=upload.key, UploadId=upload.upload_id
                )
        except Exception as exc:
            _log.warning("s3_abort_failed", key=upload.key, error=repr(exc))

    # Reading --------------------------------------------------------------------------

    async def read(self, key: str) -> AsyncIterator[bytes]:
        # One GET: `BlobNotFound` comes now; the body streams when iterated and its
        # connection goes back to the pool at the end (or when the iterator is dropped).
        body, _ = await self._get(key)
        return self._chunks(body)

    async def read_range(self, key: str, start: int, stop: int) -> AsyncIterator[bytes]:
        # A ranged GET: S3 sends only those bytes.
        body, _ = await self._get(key, Range=f"bytes={start}-{stop - 1}")
        return self._chunks(body)

    async def _get(self, key: str, **params: str) -> tuple[S3Body, int]:
        with s3_errors:
            response = await self._s3.get_object(
                Bucket=self.bucket, Key=self._object_key(key), **params
            )
        body: S3Body = response["Body"]
        return body, int(response["ContentLength"])

    async def _chunks(self, body: S3Body) -> AsyncIterator[bytes]:
        try:
            while True:
                with s3_errors:
                    chunk = await body.read(self.read_chunk_bytes)
                if not chunk:
                    return
                yield chunk
        finally:
            body.close()

    async def read_all(self, key: str, max_bytes: int) -> bytes:
        body, length = await self._get(key)
        try:
            if length > max_bytes:
                raise PayloadTooLarge(f"The content exceeds the limit of {max_bytes} bytes.")
            with s3_errors:
                return await body.read()  # botocore checks it against the Content-Length
        finally:
            body.close()

    async def delete(self, key: str) -> bool:
        # S3 deletes say nothing about what was there; the HEAD answers "was there one".
        if not await self.exists(key):
            return False
        with s3_errors:
            await self._s3.delete_object(Bucket=self.bucket, Key=self._object_key(key))
        return True

    async def exists(self, key: str) -> bool:
        try:
            with s3_errors:
                await self._s3.head_object(Bucket=self.bucket, Key=self._object_key(key))
        except BlobNotFound:
            return False
        return True
