"""The OpenAI adapter's Images API against a real local fake: request shapes, sizes read from
the bytes, fewer images, errors, and cancel at a checkpoint."""

from __future__ import annotations

import asyncio
import base64
import time
import tracemalloc
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

import msgspec
import pytest

from providers.base import (
    ChatProvider,
    EmbeddingsProvider,
    ImageProvider,
    ImageRequest,
    MediaInput,
    ReferenceSizeMismatch,
)
from providers.errors import (
    ProviderError,
    TaskCanceled,
    UpstreamRejectedRequest,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from providers.openai import Options, create
from providers.openai.client import OpenAIProvider
from providers.openai.images import image_dimensions, image_size
from providers.openai.options import ImageQuality
from providers.registry import serves, spec_for
from tests.fakes.openai_images_upstream import FakeOpenAIImages, ImageReply, image_bytes
from tests.providers.references import ReferenceSource, SourceBroke


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(test())


class Control:
    """A TaskControl that records checkpoints and cancels after `cancel_after` of them."""

    def __init__(self, cancel_after: int | None = None) -> None:
        self.cancel_after = cancel_after
        self.calls: list[tuple[float, str, str]] = []

    async def checkpoint(self, percent: float, stage: str, message: str = "") -> None:
        if self.cancel_after is not None and len(self.calls) >= self.cancel_after:
            raise TaskCanceled("canceled by the caller")
        self.calls.append((percent, stage, message))


@asynccontextmanager
async def upstream(**options: Any) -> AsyncIterator[tuple[FakeOpenAIImages, OpenAIProvider]]:
    async with FakeOpenAIImages() as fake:
        provider = create("openai", Options(base_url=fake.base_url, api_key="sk-img", **options))
        try:
            yield fake, provider
        finally:
            await provider.close()


def request(**fields: Any) -> ImageRequest:
    values: dict[str, Any] = {
        "model": "gpt-image-1",
        "prompt": "a lighthouse at dusk",
        "n": 1,
        "quality": "standard",
        "aspect_ratio": "1:1",
    }
    return ImageRequest(**(values | fields))


PNG_A = image_bytes(64, 48, (255, 0, 0))
JPEG_B = image_bytes(32, 32, (0, 255, 0), "jpeg")
WEBP_C = image_bytes(20, 40, (0, 0, 255), "webp")


# --- registry, options, mapping -----------------------------------------------------------------


def test_openai_serves_chat_and_both_image_capabilities() -> None:
    for capability in ("chat", "text_to_image", "image_to_image"):
        assert serves("openai", capability)
    assert not serves("openai", "text_to_music")
    spec = spec_for("openai")
    assert spec.capabilities == frozenset({"chat", "embeddings", "text_to_image", "image_to_image"})

    async def test() -> None:
        provider = spec.create("o", Options(base_url="http://127.0.0.1:9/v1"))
        try:
            assert isinstance(provider, ChatProvider)
            assert isinstance(provider, ImageProvider)
            assert isinstance(provider, EmbeddingsProvider)
        finally:
            await provider.close()

    run(test)


def test_image_options_are_strict() -> None:
    base: dict[str, Any] = {"base_url": "http://x/v1"}
    options = msgspec.convert(base, Options)
    assert (options.image_quality.standard, options.image_quality.hd) == ("medium", "high")
    assert options.image_output_format == "png"
    assert options.image_timeout_seconds == 300.0
    custom = msgspec.convert(base | {"image_quality": {"standard": "low"}}, Options)
    assert (custom.image_quality.standard, custom.image_quality.hd) == ("low", "high")
    cases: list[tuple[dict[str, Any], str]] = [
        ({"image_quality": {"ultra": "high"}}, "ultra"),
        ({"image_quality": {"hd": "best"}}, "image_quality.hd"),
        ({"image_output_format": "gif"}, "image_output_format"),
        ({"image_timeout_seconds": 0}, "image_timeout_seconds"),
        ({"image_checkpoint_seconds": -1}, "image_checkpoint_seconds"),
    ]
    for bad, field in cases:
        with pytest.raises(msgspec.ValidationError, match=field):
            msgspec.convert(base | bad, Options)


@pytest.mark.parametrize(
    ("model", "ratio", "size"),
    [
        ("gpt-image-1", "1:1", "1024x1024"),
        ("gpt-image-1", "16:9", "1536x1024"),
        ("gpt-image-1", "4:3", "1536x1024"),
        ("gpt-image-1", "2:1", "1536x1024"),
        ("gpt-image-1", "9:16", "1024x1536"),
        ("gpt-image-1", "3:4", "1024x1536"),
        ("gpt-image-1", "auto", "auto"),
        ("gpt-image-1-mini", "16:9", "1536x1024"),
        ("some-compatible-model", "9:16", "1024x1536"),
        ("dall-e-3", "16:9", "1792x1024"),
        ("dall-e-3", "3:4", "1024x1792"),
        ("dall-e-3", "auto", "1024x1024"),
        ("dall-e-2", "16:9", "1024x1024"),
    ],
)
def test_the_nearest_supported_size(model: str, ratio: str, size: str) -> None:
    assert image_size(model, ratio) == size


def test_dimensions_come_from_the_bytes() -> None:
    assert image_dimensions(PNG_A) == ("png", 64, 48)
    assert image_dimensions(JPEG_B) == ("jpeg", 32, 32)
    assert image_dimensions(WEBP_C) == ("webp", 20, 40)
    with pytest.raises(ProviderError, match="IHDR"):
        image_dimensions(PNG_A[:20])
    with pytest.raises(ProviderError, match="not PNG, JPEG or WebP"):
        image_dimensions(b"GIF89a" + bytes(20))
    with pytest.raises(ProviderError, match="unreadable jpeg"):
        image_dimensions(b"\xff\xd8\xff" + bytes(10))


def test_an_answer_image_of_a_bomb_s_size_is_a_provider_error() -> None:
    """Pillow refuses to open a header over twice its MAX_IMAGE_PIXELS: that is the
    upstream's fault (a ProviderError), not a crash of the task."""
    data = bytearray(JPEG_B)
    frame = data.index(b"\xff\xc0")
    data[frame + 5 : frame + 9] = (20_000).to_bytes(2, "big") * 2  # height, width
    with pytest.raises(ProviderError, match="unreadable jpeg"):
        image_dimensions(bytes(data))


# --- text to image ------------------------------------------------------------------------------


def test_gpt_image_generation_request_and_decoding() -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            control = Control()
            result = await provider.generate_images(
                request(n=2, quality="hd", aspect_ratio="16:9"), control
            )
            (sent,) = fake.requests
            assert sent.path == "/v1/images/generations"
            assert sent.json == {
                "model": "gpt-image-1",
                "prompt": "a lighthouse at dusk",
                "size": "1536x1024",
                "quality": "high",
                "output_format": "png",
                "n": 2,
            }
            assert sent.headers["authorization"] == "Bearer sk-img"
            assert sent.headers["content-type"] == "application/json"
            assert len(result.images) == 2
            for image in result.images:
                assert image.data.startswith(b"\x89PNG\r\n\x1a\n")
                assert (image.mime_type, image.format) == ("image/png", "png")
                assert (image.width, image.height) == (1536, 1024)
            assert result.images[0].data != result.images[1].data
            assert control.calls[0][:2] == (2.0, "starting")
            assert control.calls[-1][:2] == (92.0, "generating")
            assert control.calls[-1][2] == "2 of 2 received"

    run(test)


def test_standard_quality_auto_size_and_custom_mapping() -> None:
    async def test() -> None:
        async with upstream(image_quality=ImageQuality(standard="low")) as (fake, provider):
            result = await provider.generate_images(request(aspect_ratio="auto"), Control())
            assert fake.requests[0].json["quality"] == "low"
            assert fake.requests[0].json["size"] == "auto"
            assert (result.images[0].width, result.images[0].height) == (1024, 1024)

    run(test)


def test_the_reported_size_is_the_real_one() -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(ImageReply(size=(1000, 600)))
            result = await provider.generate_images(request(aspect_ratio="16:9"), Control())
            assert fake.requests[0].json["size"] == "1536x1024"
            assert (result.images[0].width, result.images[0].height) == (1000, 600)

    run(test)


def test_webp_output_format() -> None:
    async def test() -> None:
        async with upstream(image_output_format="webp") as (fake, provider):
            result = await provider.generate_images(request(aspect_ratio="9:16"), Control())
            assert fake.requests[0].json["output_format"] == "webp"
            (image,) = result.images
            assert image.data[:4] == b"RIFF" and image.data[8:12] == b"WEBP"
            assert (image.mime_type, image.format) == ("image/webp", "webp")
            assert (image.width, image.height) == (1024, 1536)

    run(test)


def test_dall_e_3_makes_one_call_per_image_with_b64_json() -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            control = Control()
            result = await provider.generate_images(
                request(model="dall-e-3", n=3, quality="hd", aspect_ratio="16:9"), control
            )
            assert [r.json for r in fake.requests] == [
                {
                    "model": "dall-e-3",
                    "prompt": "a lighthouse at dusk",
                    "size": "1792x1024",
                    "quality": "hd",
                    "response_format": "b64_json",
                    "n": 1,
                }
            ] * 3
            assert [(i.width, i.height) for i in result.images] == [(1792, 1024)] * 3
            assert [c[2] for c in control.calls if c[2].endswith("received")] == [
                "1 of 3 received",
                "2 of 3 received",
                "3 of 3 received",
            ]

    run(test)


def test_dall_e_2_sends_no_quality() -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            await provider.generate_images(request(model="dall-e-2", n=2), Control())
            assert fake.requests[0].json == {
                "model": "dall-e-2",
                "prompt": "a lighthouse at dusk",
                "size": "1024x1024",
                "response_format": "b64_json",
                "n": 2,
            }

    run(test)


def test_fewer_images_than_asked_are_returned() -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(ImageReply(count=1), ImageReply(count=0))
            result = await provider.generate_images(request(n=3), Control())
            assert len(result.images) == 1
            assert (await provider.generate_images(request(n=2), Control())).images == []

    run(test)


# --- image to image -----------------------------------------------------------------------------


def test_edits_send_every_reference_as_an_image_part() -> None:
    references = [
        MediaInput.of_bytes(PNG_A, "image/png"),
        MediaInput.of_bytes(JPEG_B, "image/jpeg"),
        MediaInput.of_bytes(WEBP_C, "image/webp; charset=binary"),
    ]

    async def test() -> None:
        async with upstream() as (fake, provider):
            result = await provider.generate_images(
                request(n=2, quality="hd", aspect_ratio="3:4", references=references), Control()
            )
            (sent,) = fake.requests
            assert sent.path == "/v1/images/edits"
            assert sent.headers["content-type"].startswith("multipart/form-data; boundary=")
            assert sent.headers["authorization"] == "Bearer sk-img"
            assert sent.json is None
            assert sent.fields == {
                "model": "gpt-image-1",
                "prompt": "a lighthouse at dusk",
                "size": "1024x1536",
                "quality": "high",
                "output_format": "png",
                "n": "2",
            }
            assert [(f.name, f.filename, f.content_type) for f in sent.files] == [
                ("image[]", "image-1.png", "image/png"),
                ("image[]", "image-2.jpg", "image/jpeg"),
                ("image[]", "image-3.webp", "image/webp"),
            ]
            assert [f.data for f in sent.files] == [PNG_A, JPEG_B, WEBP_C]
            assert [(i.width, i.height) for i in result.images] == [(1024, 1536)] * 2

    run(test)


def test_dall_e_2_edits_take_one_image_part() -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            references = [MediaInput.of_bytes(PNG_A, "image/png")]
            await provider.generate_images(
                request(model="dall-e-2", references=references), Control()
            )
            assert [(f.name, f.filename) for f in fake.requests[0].files] == [
                ("image", "image-1.png")
            ]
            assert fake.requests[0].fields["response_format"] == "b64_json"
            assert "quality" not in fake.requests[0].fields

    run(test)


@pytest.mark.parametrize(
    ("model", "references", "match"),
    [
        ("dall-e-3", [("image/png", PNG_A)], "dall-e-3 models cannot edit images"),
        ("dall-e-2", [("image/png", PNG_A)] * 2, "at most 1 reference image"),
        ("gpt-image-1", [("image/png", PNG_A)] * 17, "at most 16 reference image"),
        ("gpt-image-1", [("image/png", PNG_A), ("image/gif", b"GIF89a")], "2 is image/gif"),
    ],
)
def test_edits_the_api_cannot_take_are_refused_before_any_call(
    model: str, references: list[tuple[str, bytes]], match: str
) -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            inputs = [MediaInput.of_bytes(data, mime) for mime, data in references]
            control = Control()
            with pytest.raises(UpstreamRejectedRequest, match=match):
                await provider.generate_images(request(model=model, references=inputs), control)
            assert fake.requests == []
            assert control.calls == []

    run(test)


def test_edits_stream_sixteen_large_references_whole_one_at_a_time() -> None:
    """16 references of 2 MiB reach the upstream whole while the adapter holds about a chunk:
    traced memory peaks far below the 32 MiB that reading them first would take (a count
    of allocations, not a timing). Their lengths are known, so the request is not chunked."""
    size, count = 2 * 1024 * 1024, 16
    source = ReferenceSource()
    head = image_bytes(8, 8, (1, 2, 3))
    references = [source.reference(i, size, "image/png", head) for i in range(count)]

    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.keep_part_bytes = 0  # the fake keeps digests only, so memory is the adapter's
            fake.enqueue(ImageReply(size=(16, 16)))
            assert source.opened == 0  # a MediaInput holds no bytes until it is read
            tracemalloc.start()
            try:
                await provider.generate_images(request(references=references), Control())
                _, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
            (sent,) = fake.requests
            assert [(f.filename, f.size) for f in sent.files] == [
                (f"image-{i + 1}.png", size) for i in range(count)
            ]
            assert [f.sha256 for f in sent.files] == [
                source.digest(i, size, head) for i in range(count)
            ]
            assert int(sent.headers["content-length"]) > count * size
            assert "transfer-encoding" not in sent.headers
            assert (source.opened, source.most_reading) == (count, 1)
            assert peak < 8 * 1024 * 1024, f"traced memory peaked at {peak / 2**20:.1f} MiB"

    run(test)


def test_a_reference_that_cannot_be_read_fails_with_its_own_error() -> None:
    """The store failing mid-upload is not the upstream's fault: its error comes out as it
    was (aiohttp alone would report a broken connection), and so does a short stream."""
    source = ReferenceSource()
    source.fail_after = 300_000
    broken = [source.reference(0, 1024 * 1024, "image/png")]
    short = MediaInput(
        mime_type="image/png", size_bytes=len(PNG_A) + 10, open=MediaInput.of_bytes(PNG_A, "").open
    )

    async def test() -> None:
        async with upstream() as (fake, provider):
            with pytest.raises(SourceBroke, match="broke after"):
                await provider.generate_images(request(references=broken), Control())
            with pytest.raises(ReferenceSizeMismatch, match=f"{len(PNG_A)} of"):
                await provider.generate_images(request(references=[short]), Control())
            assert fake.requests == []  # neither body arrived whole

    run(test)


# --- errors -------------------------------------------------------------------------------------

POLICY = "Your request was rejected as a result of our safety system."


@pytest.mark.parametrize(
    ("reply", "error", "message"),
    [
        (
            ImageReply.error(400, POLICY, code="content_policy_violation"),
            UpstreamRejectedRequest,
            f"content_policy_violation: {POLICY}",
        ),
        (
            ImageReply.error(400, "Blocked by moderation.", code="moderation_blocked"),
            UpstreamRejectedRequest,
            "moderation_blocked: Blocked by moderation.",
        ),
        (
            ImageReply.error(400, "Invalid size 'x'.", code="invalid_value"),
            UpstreamRejectedRequest,
            "Invalid size 'x'.",
        ),
        (ImageReply.error(500, "boom", type="server_error"), ProviderError, "HTTP 500: boom"),
        (ImageReply.error(401, "bad key"), ProviderError, "credentials (HTTP 401): bad key"),
        (ImageReply(body=b"{not json"), ProviderError, "malformed Images API answer"),
        (ImageReply(body={"data": [{"b64_json": "!!!"}]}), ProviderError, "invalid base64"),
        (
            ImageReply(body={"data": [{"b64_json": base64.b64encode(b"hello").decode()}]}),
            ProviderError,
            "not PNG, JPEG or WebP",
        ),
        (ImageReply(body={"data": [{"url": "https://x/y.png"}]}), ProviderError, "b64_json"),
        (ImageReply(body={"error": {"message": "odd"}}), ProviderError, "odd"),
    ],
)
def test_errors(reply: ImageReply, error: type[ProviderError], message: str) -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(reply)
            with pytest.raises(error) as raised:
                await provider.generate_images(request(), Control())
            assert type(raised.value) is error
            assert raised.value.message.endswith(message) or message in raised.value.message
            if reply.status != 200:
                assert raised.value.upstream_status == reply.status

    run(test)


def test_rate_limit_keeps_retry_after() -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(ImageReply.error(429, "slow down", headers={"Retry-After": "7"}))
            with pytest.raises(UpstreamUnavailable) as raised:
                await provider.generate_images(request(), Control())
            assert raised.value.retry_after == 7.0
            assert raised.value.upstream_status == 429

    run(test)


def test_a_call_slower_than_image_timeout_seconds_times_out() -> None:
    async def test() -> None:
        async with upstream(image_timeout_seconds=0.3) as (fake, provider):
            fake.enqueue(ImageReply(delay=5))
            started = time.monotonic()
            with pytest.raises(UpstreamTimeout):
                await provider.generate_images(request(), Control())
            assert time.monotonic() - started < 4  # not the 5 s reply

    run(test)


# --- progress and cancel ------------------------------------------------------------------------


def test_cancel_at_the_first_checkpoint_sends_nothing() -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            with pytest.raises(TaskCanceled):
                await provider.generate_images(request(), Control(cancel_after=0))
            assert fake.requests == []

    run(test)


def test_a_waiting_call_reports_progress_and_a_cancel_closes_it() -> None:
    async def test() -> None:
        async with upstream(image_checkpoint_seconds=0.05) as (fake, provider):
            fake.enqueue(ImageReply(delay=10))
            control = Control(cancel_after=3)  # starting, then two while waiting
            started = time.monotonic()
            with pytest.raises(TaskCanceled):
                await provider.generate_images(request(), control)
            assert time.monotonic() - started < 5  # not the 10 s reply
            assert [c[1] for c in control.calls] == ["starting", "generating", "generating"]
            assert control.calls[1][2].startswith("call 1 of 1: 1 image(s), ")
            await fake.wait_for_disconnects(1)
            assert len(fake.requests) == 1

    run(test)


def test_cancel_between_dall_e_3_calls_stops_the_rest() -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            control = Control(cancel_after=1)  # starting; canceled when call 1 is back
            with pytest.raises(TaskCanceled):
                await provider.generate_images(request(model="dall-e-3", n=3), control)
            assert len(fake.requests) == 1
            assert [c[1] for c in control.calls] == ["starting"]

    run(test)
