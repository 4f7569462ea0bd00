"""The OpenAI Images API behind `providers.base.ImageProvider`, on the chat provider's upstream.

    text_to_image    POST {base_url}/images/generations   JSON
    image_to_image   POST {base_url}/images/edits         multipart/form-data, one part per
                                                           reference (`image[]`, `image-N.png`)

An edit's references are streamed into the request from the gateway's store while it is
written (`providers.uploads.Form`, `providers.reference_part`): one chunk in memory at a time,
their lengths announced (the request has a Content-Length), so 16 references of 20 MiB cost no
more than one small one.

What is sent depends on the upstream model's family (its name; unknown names are taken as
gpt-image, the shape OpenAI-compatible servers copy):

    gpt-image-*  sizes 1024x1024, 1536x1024, 1024x1536 or "auto"; `quality` from the
                 `image_quality` option (standard -> medium, hd -> high); `output_format`
                 from `image_output_format`; always answers `b64_json`; up to 16 references
    dall-e-3     sizes 1024x1024, 1792x1024, 1024x1792; quality standard|hd as given; needs
                 `response_format=b64_json` and makes one image per call, so n calls; no edits
    dall-e-2     1024x1024 only; no quality; `response_format=b64_json`; edits take one
                 reference, sent as `image`

The size is the family's nearest to the aspect ratio (4:3 and 2:1 -> 1536x1024); the width
and height reported are read from the returned bytes (PNG IHDR; JPEG/WebP headers through
Pillow), never assumed. Fewer images than `n` may come back; the gateway refunds the rest.
Errors go through `providers.status`; a content-policy refusal (400 with code
`content_policy_violation` or `moderation_blocked`) is UpstreamRejectedRequest with the code
and the upstream's message. Progress: a checkpoint before the first call, every
`image_checkpoint_seconds` while a call waits (a cancel closes the connection at once), and
after each call.
"""

from __future__ import annotations

import asyncio
import binascii
import contextlib
import io
import math
import struct
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec
from PIL import Image

from providers.base import GeneratedImage, ImageRequest, ImageResult, MediaInput, TaskControl
from providers.errors import ProviderError, UpstreamRejectedRequest
from providers.http import MAX_MEDIA_BYTES
from providers.openai.errors import error_event
from providers.openai.options import Options
from providers.reference_part import ReferencePart
from providers.status import error_for_response, message_from_error
from providers.uploads import Form
from providers.upstream import Timeouts, Upstream

__all__ = ["OpenAIImages", "image_dimensions", "image_size"]

_RATIOS = {"1:1": 1.0, "16:9": 16 / 9, "9:16": 9 / 16, "4:3": 4 / 3, "3:4": 3 / 4, "2:1": 2.0}
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_MIME = {"png": "image/png", "jpeg": "image/jpeg", "webp": "image/webp"}
_EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/jpg": "jpg", "image/webp": "webp"}
_POLICY_CODES = frozenset({"content_policy_violation", "moderation_blocked"})


@dataclass(frozen=True, slots=True)
class _Family:
    name: str
    sizes: tuple[tuple[int, int], ...]  # the first is the default (square)
    auto_size: bool  # sends size "auto" for aspect_ratio "auto"
    per_call: int  # images one call may ask for
    response_format: bool  # must ask for b64_json (the default is a URL)
    edit_field: str | None  # multipart name of a reference; None: no edits
    max_references: int


_GPT_IMAGE = _Family(
    name="gpt-image",
    sizes=((1024, 1024), (1536, 1024), (1024, 1536)),
    auto_size=True,
    per_call=10,
    response_format=False,
    edit_field="image[]",
    max_references=16,
)
_DALL_E_3 = _Family(
    name="dall-e-3",
    sizes=((1024, 1024), (1792, 1024), (1024, 1792)),
    auto_size=False,
    per_call=1,
    response_format=True,
    edit_field=None,
    max_references=0,
)
_DALL_E_2 = _Family(
    name="dall-e-2",
    sizes=((1024, 1024),),
    auto_size=False,
    per_call=10,
    response_format=True,
    edit_field="image",
    max_references=1,
)


def _family_of(model: str) -> _Family:
    """The family of an upstream model name (gpt-image for names it does not know)."""
    if model.startswith("dall-e-3"):
        return _DALL_E_3
    if model.startswith("dall-e-2"):
        return _DALL_E_2
    return _GPT_IMAGE


def image_size(model: str, aspect_ratio: str) -> str:
    """The API `size` for an aspect ratio: the family's size whose ratio is nearest."""
    family = _family_of(model)
    if aspect_ratio == "auto" and family.auto_size:
        return "auto"
    target = math.log(_RATIOS.get(aspect_ratio, 1.0))
    width, height = min(family.sizes, key=lambda size: abs(math.log(size[0] / size[1]) - target))
    return f"{width}x{height}"


def image_dimensions(data: bytes) -> tuple[str, int, int]:
    """(format, width, height) read from the bytes; ProviderError when they are no image."""
    if data.startswith(_PNG_SIGNATURE):
        if len(data) < 24 or data[12:16] != b"IHDR":
            raise ProviderError("the upstream sent a PNG without an IHDR header")
        width, height = struct.unpack(">II", data[16:24])
        return "png", width, height
    if data.startswith(b"\xff\xd8\xff"):
        kind = "jpeg"
    elif data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        kind = "webp"
    else:
        raise ProviderError("the upstream sent an image that is not PNG, JPEG or WebP")
    try:
        with Image.open(io.BytesIO(data), formats=[kind.upper()]) as picture:  # header only
            width, height = picture.size
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
        raise ProviderError(f"the upstream sent an unreadable {kind} image: {exc}") from exc
    return kind, width, height


class _Answer(msgspec.Struct):
    data: list[dict[str, Any]] = []
    error: Any = None


def _decode(raw: bytes) -> list[GeneratedImage]:
    """`data[].b64_json` of an Images API answer -> images (an empty list is allowed)."""
    try:
        answer = msgspec.json.decode(raw, type=_Answer)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ProviderError(f"the upstream sent a malformed Images API answer: {exc}") from exc
    if answer.error is not None:
        raise error_event({"error": answer.error})
    images = []
    for item in answer.data:
        encoded = item.get("b64_json")
        if not isinstance(encoded, str):
            raise ProviderError("the upstream answered without b64_json (a URL instead?)")
        try:
            data = binascii.a2b_base64(encoded, strict_mode=True)
        except (binascii.Error, ValueError) as exc:
            raise ProviderError(f"the upstream sent invalid base64 image data: {exc}") from exc
        kind, width, height = image_dimensions(data)
        mime = _MIME[kind]
        images.append(
            GeneratedImage(data=data, mime_type=mime, format=kind, width=width, height=height)
        )
    return images


def _error(status: int, raw: bytes, headers: Mapping[str, str]) -> ProviderError:
    error = error_for_response(status, raw, headers)
    if isinstance(error, UpstreamRejectedRequest):
        with contextlib.suppress(msgspec.DecodeError):
            body = msgspec.json.decode(raw)
            detail = body.get("error") if isinstance(body, dict) else None
            code = detail.get("code") if isinstance(detail, dict) else None
            if code in _POLICY_CODES:
                message = message_from_error(detail) or "refused by the content policy"
                return UpstreamRejectedRequest(
                    f"{code}: {message}", upstream_status=status, retry_after=error.retry_after
                )
    return error


def _references(family: _Family, references: list[MediaInput]) -> list[tuple[str, str, MediaInput]]:
    """(filename, mime type, reference) per reference; UpstreamRejectedRequest before any call."""
    if family.edit_field is None:
        raise UpstreamRejectedRequest(
            f"{family.name} models cannot edit images; use a gpt-image model for image_to_image"
        )
    if len(references) > family.max_references:
        raise UpstreamRejectedRequest(
            f"{family.name} edits take at most {family.max_references} reference image(s),"
            f" got {len(references)}"
        )
    files = []
    for number, reference in enumerate(references, 1):
        mime = reference.mime_type.split(";")[0].strip().lower()
        extension = _EXTENSIONS.get(mime)
        if extension is None:
            raise UpstreamRejectedRequest(
                f"reference image {number} is {mime}; the OpenAI Images API takes PNG, JPEG or WebP"
            )
        files.append((f"image-{number}.{extension}", mime, reference))
    return files


class OpenAIImages:
    """The Images API calls of one OpenAI provider (its upstream, URLs and options)."""

    def __init__(self, options: Options, upstream: Upstream) -> None:
        self._upstream = upstream
        self._generations = options.url("/images/generations")
        self._edits = options.url("/images/edits")
        self._timeout = Timeouts(
            total=options.image_timeout_seconds, connect=options.connect_timeout_seconds
        )
        self._quality = options.image_quality
        self._output_format = options.image_output_format
        self._every = options.image_checkpoint_seconds

    async def generate(self, request: ImageRequest, control: TaskControl) -> ImageResult:
        family = _family_of(request.model)
        files = _references(family, request.references) if request.references else None
        fields = self._fields(family, request)
        step = family.per_call
        calls = [min(step, request.n - done) for done in range(0, request.n, step)]
        await control.checkpoint(
            2.0, "starting", f"{request.model}: {request.n} image(s) at {fields['size']}"
        )
        images: list[GeneratedImage] = []
        for index, count in enumerate(calls):
            waiting = 2.0 + 90.0 * index / len(calls)
            message = f"call {index + 1} of {len(calls)}: {count} image(s)"
            raw = await self._waiting(
                self._post(family, fields | {"n": count}, files), control, waiting, message
            )
            images += _decode(raw)
            done = 2.0 + 90.0 * (index + 1) / len(calls)
            await control.checkpoint(done, "generating", f"{len(images)} of {request.n} received")
        return ImageResult(images=images[: request.n])

    def _fields(self, family: _Family, request: ImageRequest) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "model": request.model,
            "prompt": request.prompt,
            "size": image_size(request.model, request.aspect_ratio),
        }
        if family is _GPT_IMAGE:
            quality = self._quality
            fields["quality"] = quality.hd if request.quality == "hd" else quality.standard
            fields["output_format"] = self._output_format
        elif family is _DALL_E_3:
            fields["quality"] = request.quality
        if family.response_format:
            fields["response_format"] = "b64_json"
        return fields

    async def _post(
        self,
        family: _Family,
        fields: dict[str, Any],
        files: list[tuple[str, str, MediaInput]] | None,
    ) -> bytes:
        data: bytes | Form
        parts: list[ReferencePart] = []
        if files is None:
            url, data = self._generations, msgspec.json.encode(fields)
        else:
            form = Form()
            for name, value in fields.items():
                form.add_field(name, str(value))
            for filename, mime, reference in files:
                parts.append(ReferencePart(reference, mime))
                form.add_file(
                    family.edit_field or "image", parts[-1], filename=filename, content_type=mime
                )
            url, data = self._edits, form  # sent with its own content type
        return await self._upstream.request(
            "POST",
            url,
            data,
            timeouts=self._timeout,
            max_bytes=MAX_MEDIA_BYTES,
            errors=_error,
            uploads=parts,
        )

    async def _waiting(
        self, call: Awaitable[bytes], control: TaskControl, percent: float, message: str
    ) -> bytes:
        """Await `call`, reporting progress every `image_checkpoint_seconds` meanwhile; a
        cancel (or any error from `control`) abandons the call, closing its connection."""
        task = asyncio.ensure_future(call)
        waited = 0.0
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=self._every)
                if done:
                    return task.result()
                waited += self._every
                await control.checkpoint(percent, "generating", f"{message}, {waited:.0f} s")
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
