"""Artifacts as the API and the worker use them: uploads, ingested references, task outputs.

Bytes go to the blob store (`blobs.py`), the record (tenant, type, size, digest, expiry) to the
gateway's store, so every replica sees it. A record is written only after its blob is complete,
so no partial artifact is ever visible. Another tenant's artifact does not exist (404).
Artifacts live for `retention_seconds` (7 days by default) and are then removed by `sweep`.

A reference is capped by its kind (`REFERENCE_MAX_BYTES`) whichever way it comes: a URL's
fetch and a data URI's decoding stop at the cap, and an artifact named as a reference (an
upload may be up to `UPLOAD_MAX_BYTES`) is refused by its recorded size, before a task is
created and again when the worker takes it. The worker then streams references with
`content`; nothing here reads a stored file whole into memory.

An image is also capped by its pixels (`max_image_pixels`, read from its header by
`image_size`, nothing decoded), whichever way it comes: an upload, a data URI, a URL's fetch
and an artifact named as a reference are refused beyond it (a 422 naming the field), so no
decoder downstream is handed an image larger than that.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from typing import Any

from gateway.artifacts.blobs import BlobInfo, BlobStore, LocalBlobStore
from gateway.artifacts.data_uri import DecodedData, decode_data_uri
from gateway.artifacts.errors import invalid_input
from gateway.artifacts.fetch import ReferenceFetcher
from gateway.artifacts.image_size import DEFAULT_MAX_IMAGE_PIXELS, IMAGE_HEADER_BYTES, image_size
from gateway.artifacts.multipart import open_upload, sanitize_filename
from gateway.artifacts.signing import UrlSigner
from gateway.artifacts.sniff import AUDIO_TYPES, IMAGE_TYPES, extension_for, sniff
from gateway.clock import Clock, wall
from gateway.errors import NotFound, UnsupportedMediaType
from gateway.ids import new_artifact_id
from gateway.logging import get_logger
from gateway.metrics import DisabledMetrics, Metrics
from gateway.store.base import ArtifactKind, ArtifactRecord, Store

__all__ = [
    "DOCUMENT_MAX_BYTES",
    "MEDIA_TYPES",
    "REFERENCE_MAX_BYTES",
    "STALE_TEMP_SECONDS",
    "UPLOAD_MAX_BYTES",
    "ArtifactService",
]

UPLOAD_MAX_BYTES = 100 * 1024 * 1024
REFERENCE_MAX_BYTES = {"image": 20 * 1024 * 1024, "audio": 50 * 1024 * 1024}
DOCUMENT_MAX_BYTES = 16 * 1024 * 1024
"""A PDF a chat request names by URL (`fetch_document`)."""
_DOCUMENT_TYPES = frozenset({"application/pdf"})
MEDIA_TYPES = {"image": frozenset(IMAGE_TYPES), "audio": frozenset(AUDIO_TYPES)}
_URL_TTL_SECONDS = 3600
STALE_TEMP_SECONDS = 3600.0
"""A blob temp file untouched this long belongs to no live write (writes touch theirs at least
every 1 MiB; an upload slower than that per hour is taken as dead)."""

_log = get_logger("gateway.artifacts")


class ArtifactService:
    def __init__(
        self,
        store: Store,
        blobs: BlobStore,
        signer: UrlSigner,
        fetcher: ReferenceFetcher,
        *,
        retention_seconds: float = 7 * 86_400,
        url_ttl_seconds: int = _URL_TTL_SECONDS,
        public_url: str = "",
        clock: Clock = wall,
        metrics: Metrics | None = None,
        max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS,
    ) -> None:
        self._store = store
        self._blobs = blobs
        self._signer = signer
        self._fetcher = fetcher
        self._retention = retention_seconds
        self._url_ttl = url_ttl_seconds
        self._public_url = public_url.rstrip("/")
        self._clock = clock
        self._metrics = metrics or DisabledMetrics()
        self.max_image_pixels = max_image_pixels

    # Coming in --------------------------------------------------------------------------

    async def upload(
        self, tenant: str, content_type: str | None, body: AsyncIterator[bytes]
    ) -> ArtifactRecord:
        """A multipart upload's `file` part, streamed to storage; images (within the pixel
        cap) and audio only."""
        upload = await open_upload(content_type, body)
        artifact_id = new_artifact_id()
        key = self._key(tenant, artifact_id)
        info = await self._blobs.write(key, upload.chunks, max_bytes=UPLOAD_MAX_BYTES)
        mime = sniff(info.head)
        if mime is None or mime not in MEDIA_TYPES["image"] | MEDIA_TYPES["audio"]:
            await self._blobs.delete(key)
            raise UnsupportedMediaType(
                "Upload an image (PNG, JPEG, WebP, GIF) or audio file (WAV, MP3, FLAC, OGG, M4A)."
            )
        if mime in IMAGE_TYPES:
            try:
                await self._check_stored_image(key, mime, info.size_bytes, field="file")
            except BaseException:
                await self._blobs.delete(key)
                raise
        return await self._record(tenant, artifact_id, "upload", upload.filename, mime, info, key)

    async def ingest(
        self, tenant: str, reference: dict[str, Any], *, field: str, kind: str
    ) -> ArtifactRecord:
        """A reference input (`url`, `data_uri` or `artifact`) as an artifact of `tenant`, at
        most `REFERENCE_MAX_BYTES[kind]` long; a 422 naming `field` when it is not one."""
        allowed = MEDIA_TYPES[kind]
        max_bytes = REFERENCE_MAX_BYTES[kind]
        source = reference.get("type")
        if source == "artifact":
            record = await self._store.get_artifact(tenant, str(reference.get("artifact_id")))
            if record is None:
                raise invalid_input(f"{field}.artifact_id", "no such artifact.")
            if record.mime_type not in allowed:
                raise invalid_input(f"{field}.artifact_id", f"is not an {kind} file.")
            if record.size_bytes > max_bytes:
                raise invalid_input(
                    f"{field}.artifact_id",
                    f"is larger than the limit of {max_bytes} bytes for an {kind} reference"
                    f" ({record.size_bytes} bytes).",
                )
            if record.mime_type in IMAGE_TYPES:
                await self._check_stored_image(
                    record.blob_key,
                    record.mime_type,
                    record.size_bytes,
                    field=f"{field}.artifact_id",
                )
            return record
        artifact_id = new_artifact_id()
        key = self._key(tenant, artifact_id)
        if source == "data_uri":
            decoded = decode_data_uri(
                str(reference.get("data_uri")),
                field=f"{field}.data_uri",
                allowed_types=allowed,
                max_bytes=max_bytes,
            )
            self.check_image(decoded, field=f"{field}.data_uri")
            info = await self._blobs.write_bytes(key, decoded.data)
            mime, name = decoded.mime_type, "reference"
        else:
            url = str(reference.get("url"))
            fetched = await self._fetcher.fetch(
                url,
                field=f"{field}.url",
                store=self._blobs,
                key=key,
                allowed_types=allowed,
                max_bytes=max_bytes,
            )
            info, mime = fetched.info, fetched.mime_type
            if mime in IMAGE_TYPES:
                try:
                    await self._check_stored_image(key, mime, info.size_bytes, field=f"{field}.url")
                except BaseException:
                    await self._blobs.delete(key)
                    raise
            # The client's own text: made a bare, printable name like an upload's.
            tail = url.rsplit("/", 1)[-1].split("?", 1)[0].split("#", 1)[0][:100]
            name = sanitize_filename(tail) if tail.strip() else "reference"
        filename = f"{name}.{extension_for(mime)}" if "." not in name else name
        return await self._record(tenant, artifact_id, "reference", filename, mime, info, key)

    def check_image(self, data: DecodedData, *, field: str) -> None:
        """422 naming `field` for an image whose header is unreadable or whose pixels are
        over `max_image_pixels`; anything that is not an image passes."""
        if data.mime_type in IMAGE_TYPES:
            self._check_pixels(data.data[:IMAGE_HEADER_BYTES], data.mime_type, field)

    async def _check_stored_image(self, key: str, mime: str, size: int, *, field: str) -> None:
        """`check_image` for a stored blob: only its first bytes are read."""
        chunks = await self._blobs.read_range(key, 0, min(size, IMAGE_HEADER_BYTES))
        head = b"".join([chunk async for chunk in chunks])
        self._check_pixels(head, mime, field)

    def _check_pixels(self, head: bytes, mime: str, field: str) -> None:
        size = image_size(head, mime)
        if size is None:
            raise invalid_input(
                field, f"is not a readable {extension_for(mime).upper()} image (no size found)."
            )
        width, height = size
        if width * height > self.max_image_pixels:
            raise invalid_input(
                field,
                f"is {width} x {height} pixels, over the limit of {self.max_image_pixels}"
                " pixels for an image.",
            )

    async def fetch_document(self, tenant: str, url: str, *, field: str) -> bytes:
        """A PDF a chat request names by URL, fetched under the reference rules (public
        https only, at most `DOCUMENT_MAX_BYTES`, sniffed as a PDF; a 422 naming `field`
        when refused) and handed back whole, nothing kept: the call sends its bytes, so what
        it costs is known before an upstream sees it."""
        key = self._key(tenant, new_artifact_id())
        try:
            await self._fetcher.fetch(
                url,
                field=field,
                store=self._blobs,
                key=key,
                allowed_types=_DOCUMENT_TYPES,
                max_bytes=DOCUMENT_MAX_BYTES,
            )
            return await self._blobs.read_all(key, DOCUMENT_MAX_BYTES)
        finally:
            await self._blobs.delete(key)

    def check_url(self, url: str, *, field: str) -> None:
        """422 now for a reference URL that could never be fetched (scheme, credentials)."""
        self._fetcher.check(url, field=field)

    async def save_reference(
        self, tenant: str, artifact_id: str, data: DecodedData, *, task_id: str
    ) -> ArtifactRecord:
        """A data URI reference, already decoded and checked, as artifact `artifact_id`."""
        key = self._key(tenant, artifact_id)
        info = await self._blobs.write_bytes(key, data.data)
        filename = f"reference.{extension_for(data.mime_type)}"
        try:
            return await self._record(
                tenant, artifact_id, "reference", filename, data.mime_type, info, key,
                task_id=task_id,
            )  # fmt: skip
        except BaseException:
            await self._blobs.delete(key)  # no record: nothing may point at it
            raise

    async def delete(self, record: ArtifactRecord) -> None:
        """Bytes, then record (idempotent): for what a refused request must not leave behind."""
        await self._blobs.delete(record.blob_key)
        await self._store.delete_artifact(record.artifact_id)

    async def save_output(
        self, tenant: str, task_id: str, data: bytes, mime_type: str, filename: str
    ) -> ArtifactRecord:
        artifact_id = new_artifact_id()
        key = self._key(tenant, artifact_id)
        info = await self._blobs.write_bytes(key, data)
        return await self._record(
            tenant, artifact_id, "output", filename, mime_type, info, key, task_id=task_id
        )

    async def _record(
        self,
        tenant: str,
        artifact_id: str,
        kind: ArtifactKind,
        filename: str,
        mime_type: str,
        info: BlobInfo,
        key: str,
        *,
        task_id: str | None = None,
    ) -> ArtifactRecord:
        now = self._clock()
        record = ArtifactRecord(
            artifact_id=artifact_id,
            tenant=tenant,
            kind=kind,
            filename=filename,
            mime_type=mime_type,
            size_bytes=info.size_bytes,
            sha256=info.sha256,
            blob_key=key,
            created_at=now,
            expires_at=now + self._retention,
            task_id=task_id,
        )
        await self._store.create_artifact(record)
        self._metrics.artifact_stored(kind, info.size_bytes)
        return record

    # Going out --------------------------------------------------------------------------

    async def get(self, tenant: str, artifact_id: str) -> ArtifactRecord:
        record = await self._store.get_artifact(tenant, artifact_id)
        if record is None or record.expires_at <= self._clock():
            raise NotFound("No such artifact.")
        return record

    async def get_signed(self, artifact_id: str, expires: int, signature: str) -> ArtifactRecord:
        """The artifact a signed URL names, without a key; 404 when the URL is not valid."""
        if not self._signer.verify(artifact_id, expires, signature):
            raise NotFound("No such artifact, or the link has expired.")
        record = await self._store.get_artifact(None, artifact_id)  # the signature vouches
        if record is None or record.expires_at <= self._clock():
            raise NotFound("No such artifact.")
        return record

    async def content(self, record: ArtifactRecord) -> AsyncIterator[bytes]:
        """The stored bytes in chunks (`READ_CHUNK_BYTES`); `BlobNotFound` now if gone."""
        return await self._blobs.read(record.blob_key)

    async def content_range(
        self, record: ArtifactRecord, start: int, stop: int
    ) -> AsyncIterator[bytes]:
        """Bytes `start` to `stop` (exclusive) of the content; only they are read."""
        return await self._blobs.read_range(record.blob_key, start, stop)

    def content_url(self, artifact_id: str) -> str:
        """A signed, expiring URL of the bytes, fetchable without the Authorization header."""
        return self._public_url + self._signer.content_url("", artifact_id, self._url_ttl)

    # Retention --------------------------------------------------------------------------

    async def sweep(self, *, limit: int = 500) -> int:
        """Remove expired artifacts (bytes, then record); returns how many went. On a local
        folder, also the temp files of writes a crash cut off (a `kill -9` mid-upload), once
        untouched for `STALE_TEMP_SECONDS`: a younger one may be a write still under way."""
        if isinstance(self._blobs, LocalBlobStore):
            stale = await self._blobs.sweep_temp(STALE_TEMP_SECONDS, now=self._clock())
            if stale:
                _log.info("temp_files_swept", removed=stale)
        removed = 0
        for record in await self._store.expired_artifacts(self._clock(), limit):
            await self._blobs.delete(record.blob_key)
            await self._store.delete_artifact(record.artifact_id)
            removed += 1
        if removed:
            _log.info("artifacts_swept", removed=removed)
        return removed

    @staticmethod
    def _key(tenant: str, artifact_id: str) -> str:
        return f"{hashlib.sha256(tenant.encode()).hexdigest()[:16]}/{artifact_id}"
