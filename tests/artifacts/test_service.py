"""ArtifactService over a real SqliteStore and real files: retention, tenants, signed access.

Time is the service's and the store's injected clock, moved by the test instead of sleeping.
"""

from __future__ import annotations

import os
from base64 import b64encode
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.artifacts import LocalBlobStore, ReferenceFetcher, UrlSigner
from gateway.artifacts.service import REFERENCE_MAX_BYTES, STALE_TEMP_SECONDS, ArtifactService
from gateway.errors import NotFound, UnsupportedMediaType, ValidationFailed
from gateway.store.base import ArtifactRecord
from gateway.store.sqlite import SqliteStore
from tests.artifacts.conftest import Run
from tests.artifacts.media import PNG, WAV, png_header, sample


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def _service(
    tmp_path: Path, clock: Clock, *, max_image_pixels: int = 40_000_000
) -> tuple[ArtifactService, SqliteStore, Path]:
    store = SqliteStore(tmp_path / "gateway.db", clock=clock)
    blobs_root = tmp_path / "blobs"
    service = ArtifactService(
        store,
        LocalBlobStore(blobs_root),
        UrlSigner(b"k" * 32, clock=clock),
        ReferenceFetcher(),
        retention_seconds=3600,
        clock=clock,
        max_image_pixels=max_image_pixels,
    )
    return service, store, blobs_root


async def _multipart(data: bytes, filename: str) -> AsyncIterator[bytes]:
    yield (
        b'--b0undary\r\nContent-Disposition: form-data; name="file"; filename="'
        + filename.encode()
        + b'"\r\nContent-Type: application/octet-stream\r\n\r\n'
    )
    for start in range(0, len(data), 1000):
        yield data[start : start + 1000]
    yield b"\r\n--b0undary--\r\n"


CONTENT_TYPE = "multipart/form-data; boundary=b0undary"


def test_an_upload_is_kept_for_the_retention_window_then_swept(tmp_path: Path, run: Run) -> None:
    clock = Clock()
    service, store, blobs_root = _service(tmp_path, clock)

    async def scenario() -> None:
        await store.open()
        record = await service.upload("t1", CONTENT_TYPE, _multipart(sample(WAV, 5000), "a.wav"))
        assert (record.mime_type, record.size_bytes, record.filename) == (
            "audio/wav",
            5000,
            "a.wav",
        )
        assert (await service.get("t1", record.artifact_id)).sha256 == record.sha256
        with pytest.raises(NotFound):  # another tenant's artifact does not exist
            await service.get("t2", record.artifact_id)
        assert await service.sweep() == 0

        clock.now += 3601
        with pytest.raises(NotFound):  # expired: gone for callers at once
            await service.get("t1", record.artifact_id)
        assert await service.sweep() == 1
        assert not any(p.is_file() for p in blobs_root.rglob("*"))
        assert await store.get_artifact(None, record.artifact_id) is None
        await store.close()

    run(scenario())


def test_the_sweep_removes_temp_files_a_crashed_write_left_once_they_are_stale(
    tmp_path: Path, run: Run
) -> None:
    clock = Clock()
    service, store, blobs_root = _service(tmp_path, clock)
    folder = blobs_root / "0123456789abcdef"
    folder.mkdir(parents=True)
    dead, live = folder / ".art_dead.x1.tmp", folder / ".art_live.x2.tmp"
    for path, age in ((dead, STALE_TEMP_SECONDS + 60), (live, STALE_TEMP_SECONDS - 60)):
        path.write_bytes(b"half an upload")
        os.utime(path, (clock.now - age, clock.now - age))

    async def scenario() -> None:
        await store.open()
        assert await service.sweep() == 0  # no artifact expired; the temp files are no artifacts
        await store.close()

    run(scenario())
    assert not dead.exists(), "a crashed upload's temp file was kept"
    assert live.exists(), "a write that may still be under way lost its temp file"


def test_uploads_of_other_types_are_refused_and_leave_nothing(tmp_path: Path, run: Run) -> None:
    service, store, blobs_root = _service(tmp_path, Clock())

    async def scenario() -> None:
        await store.open()
        with pytest.raises(UnsupportedMediaType):
            await service.upload("t1", CONTENT_TYPE, _multipart(b"just text" * 100, "a.txt"))
        assert not any(p.is_file() for p in blobs_root.rglob("*"))
        await store.close()

    run(scenario())


def test_signed_links_open_outputs_until_they_expire(tmp_path: Path, run: Run) -> None:
    clock = Clock()
    service, store, _ = _service(tmp_path, clock)

    async def scenario() -> None:
        await store.open()
        record = await service.save_output("t1", "task_1", sample(PNG, 300), "image/png", "o.png")
        url = service.content_url(record.artifact_id)
        query = dict(part.split("=", 1) for part in url.split("?", 1)[1].split("&"))
        expires, signature = int(query["expires"]), query["signature"]
        opened = await service.get_signed(record.artifact_id, expires, signature)
        assert opened.task_id == "task_1"
        assert b"".join([c async for c in await service.content(opened)]) == sample(PNG, 300)
        with pytest.raises(NotFound):
            await service.get_signed(record.artifact_id, expires + 1, signature)
        clock.now = expires + 1
        with pytest.raises(NotFound):
            await service.get_signed(record.artifact_id, expires, signature)
        await store.close()

    run(scenario())


def test_references_by_artifact_must_be_the_tenants_and_the_right_kind(
    tmp_path: Path, run: Run
) -> None:
    service, store, _ = _service(tmp_path, Clock())

    async def scenario() -> None:
        await store.open()
        png = sample(png_header(8, 8), 300)
        image = await service.save_output("t1", "task_1", png, "image/png", "o.png")
        ref = {"type": "artifact", "artifact_id": image.artifact_id}
        assert (await service.ingest("t1", ref, field="image", kind="image")) == image
        with pytest.raises(ValidationFailed) as other_tenant:
            await service.ingest("t2", ref, field="image", kind="image")
        assert other_tenant.value.details[0].field == "image.artifact_id"
        with pytest.raises(ValidationFailed, match="audio"):
            await service.ingest("t1", ref, field="reference_audio", kind="audio")
        await store.close()

    run(scenario())


@pytest.mark.parametrize(("kind", "mime_type"), [("image", "image/png"), ("audio", "audio/wav")])
def test_an_artifact_reference_over_its_kinds_cap_is_refused_naming_the_field(
    tmp_path: Path, run: Run, kind: str, mime_type: str
) -> None:
    """An upload may be 100 MiB; as a reference it obeys the same cap as a URL or data URI,
    judged by its recorded size, so nothing is read to refuse it."""
    clock = Clock()
    service, store, _ = _service(tmp_path, clock)
    cap = REFERENCE_MAX_BYTES[kind]

    def record(artifact_id: str, size: int) -> ArtifactRecord:
        return ArtifactRecord(
            artifact_id=artifact_id,
            tenant="t1",
            kind="upload",
            filename=f"{artifact_id}.bin",
            mime_type=mime_type,
            size_bytes=size,
            sha256="0" * 64,
            blob_key=f"t1/{artifact_id}",
            created_at=clock.now,
            expires_at=clock.now + 3600,
        )

    async def scenario() -> None:
        await store.open()
        at_cap, over = record("art_atcap", cap), record("art_over", cap + 1)
        for each in (at_cap, over):
            await store.create_artifact(each)
        if kind == "image":  # its header is read: within the pixel cap
            blobs = LocalBlobStore(tmp_path / "blobs")
            await blobs.write_bytes(at_cap.blob_key, sample(png_header(64, 64), cap))
        ref = {"type": "artifact", "artifact_id": at_cap.artifact_id}
        assert await service.ingest("t1", ref, field="extra_images[2]", kind=kind) == at_cap
        ref = {"type": "artifact", "artifact_id": over.artifact_id}
        with pytest.raises(ValidationFailed) as refused:
            await service.ingest("t1", ref, field="extra_images[3]", kind=kind)
        assert refused.value.status_code == 422
        assert refused.value.code == "validation_error"
        [detail] = refused.value.details
        assert detail.field == "extra_images[3].artifact_id"
        assert f"limit of {cap} bytes" in detail.message
        await store.close()

    run(scenario())


def test_images_over_the_pixel_cap_are_refused_by_their_header_whichever_way_they_come(
    tmp_path: Path, run: Run
) -> None:
    """200 x 100 is over a cap of 10,000 pixels: an upload, a data URI and an artifact named
    as a reference are each refused naming their field, and a refused upload leaves nothing;
    100 x 100 passes. The pixels are never there to decode: only the header is."""
    service, store, blobs_root = _service(tmp_path, Clock(), max_image_pixels=10_000)
    over, within = sample(png_header(200, 100), 2000), sample(png_header(100, 100), 2000)

    def data_uri(data: bytes) -> dict[str, str]:
        return {"type": "data_uri", "data_uri": "data:image/png;base64," + b64encode(data).decode()}

    async def scenario() -> None:
        await store.open()
        with pytest.raises(ValidationFailed) as upload:
            await service.upload("t1", CONTENT_TYPE, _multipart(over, "big.png"))
        [detail] = upload.value.details
        assert detail.field == "file"
        assert detail.message == "is 200 x 100 pixels, over the limit of 10000 pixels for an image."
        assert not any(p.is_file() for p in blobs_root.rglob("*"))

        with pytest.raises(ValidationFailed) as inline:
            await service.ingest("t1", data_uri(over), field="image", kind="image")
        assert [d.field for d in inline.value.details] == ["image.data_uri"]

        stored = await service.save_output("t1", "task_1", over, "image/png", "o.png")
        reference = {"type": "artifact", "artifact_id": stored.artifact_id}
        with pytest.raises(ValidationFailed) as named:
            await service.ingest("t1", reference, field="extra_images[1]", kind="image")
        assert [d.field for d in named.value.details] == ["extra_images[1].artifact_id"]

        kept = await service.upload("t1", CONTENT_TYPE, _multipart(within, "ok.png"))
        reference = {"type": "artifact", "artifact_id": kept.artifact_id}
        assert await service.ingest("t1", reference, field="image", kind="image") == kept
        await service.ingest("t1", data_uri(within), field="image", kind="image")
        await store.close()

    run(scenario())


def test_an_image_whose_header_gives_no_size_is_refused(tmp_path: Path, run: Run) -> None:
    service, store, _ = _service(tmp_path, Clock())

    async def scenario() -> None:
        await store.open()
        with pytest.raises(ValidationFailed) as refused:
            headless = b"\x89PNG\r\n\x1a\n" + bytes(300)  # no IHDR chunk
            await service.upload("t1", CONTENT_TYPE, _multipart(headless, "x.png"))
        assert refused.value.details[0].message == "is not a readable PNG image (no size found)."
        await store.close()

    run(scenario())
