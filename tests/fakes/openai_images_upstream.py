"""A fake OpenAI Images API: a real aiohttp server on 127.0.0.1 and a free port.

It answers `POST /v1/images/generations` (JSON) and `POST /v1/images/edits` (multipart) with
real images (Pillow, solid colours) in `data[].b64_json`, `n` of them at the requested size
("auto": 1024x1024), and records what it was sent, multipart parts included:

    async with FakeOpenAIImages() as fake:
        fake.enqueue(ImageReply(count=1))                  # next call: one image, whatever n
        fake.enqueue(ImageReply.error(400, "no", code="content_policy_violation"))
        fake.enqueue(ImageReply(delay=5))                  # slow (the client may give up)
        fake.requests[0].json; fake.requests[1].fields["size"]; fake.requests[1].files[0].data
        await fake.wait_for_disconnects(1)

Scripted replies are used in order, one per request; with none left, the default answer.
File parts are read in chunks and recorded by size and SHA-256; their bytes are kept only up
to `keep_part_bytes` (larger parts have `data == b""`), so a test may send hundreds of MiB.
For a gateway in another process: `await fake.start()` in a thread's loop (see the e2e tests).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import msgspec
from aiohttp import web
from PIL import Image

from tests.fakes.server import FakeServer

__all__ = ["FakeOpenAIImages", "ImageReply", "ImagesRequest", "Part", "image_bytes"]

_SAVE_FORMAT = {"png": "PNG", "jpeg": "JPEG", "webp": "WEBP"}


def image_bytes(width: int, height: int, colour: tuple[int, int, int], fmt: str = "png") -> bytes:
    """A solid-colour image file (fast to encode at any size)."""
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), colour).save(
        buffer, format=_SAVE_FORMAT[fmt], **({"compress_level": 1} if fmt == "png" else {})
    )
    return buffer.getvalue()


@dataclass(frozen=True)
class ImageReply:
    """One answer. `body`: None = images made as below; dict = that JSON; bytes = raw.
    `count`: images returned (None: the `n` asked); `size`: (width, height) of each (None: the
    `size` asked); `fmt`: png, jpeg or webp (None: the `output_format` asked, else png)."""

    status: int = 200
    body: object = None
    count: int | None = None
    size: tuple[int, int] | None = None
    fmt: str | None = None
    delay: float = 0.0
    headers: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def error(
        cls,
        status: int,
        message: str,
        *,
        code: str | None = None,
        type: str = "invalid_request_error",
        headers: Mapping[str, str] | None = None,
    ) -> ImageReply:
        """An answer with OpenAI's error body shape."""
        error = {"message": message, "type": type, "param": None, "code": code}
        return cls(status=status, body={"error": error}, headers=headers or {})


@dataclass(frozen=True)
class Part:
    """One file part of a multipart request."""

    name: str
    filename: str
    content_type: str
    data: bytes  # b"" when the part was over `keep_part_bytes`
    size: int
    sha256: str
    headers: dict[str, str]  # the part's own headers, lower-case names


@dataclass(frozen=True)
class ImagesRequest:
    path: str
    headers: dict[str, str]  # lower-case names
    json: Any  # the decoded JSON body (generations), else None
    fields: dict[str, str]  # the text parts (edits)
    files: list[Part]  # the file parts (edits), in order

    @property
    def params(self) -> dict[str, Any]:
        """The request's parameters, whichever way they came."""
        return dict(self.json) if isinstance(self.json, dict) else dict(self.fields)


class FakeOpenAIImages(FakeServer[ImagesRequest, ImageReply]):
    """The OpenAI Images fake (see `FakeServer`); `base_url` ends in `/v1`."""

    client_max_size = 64 * 1024 * 1024
    thread_name = "fake-openai-images"
    keep_part_bytes = 8 * 1024 * 1024

    def __init__(self) -> None:
        super().__init__()
        self._served = 0

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/images/generations", self._generations)
        app.router.add_post("/v1/images/edits", self._edits)

    async def _generations(self, request: web.Request) -> web.Response:
        raw = await request.read()
        try:
            decoded: Any = msgspec.json.decode(raw)
        except msgspec.DecodeError:
            decoded = None
        self.requests.append(ImagesRequest(request.path, _headers(request), decoded, {}, []))
        return await self._answer(self.requests[-1].params)

    async def _edits(self, request: web.Request) -> web.Response:
        fields: dict[str, str] = {}
        files: list[Part] = []
        reader = await request.multipart()
        while (part := await reader.next()) is not None:
            assert isinstance(part, aiohttp.BodyPartReader)
            if part.filename is None:
                fields[part.name or ""] = bytes(await part.read()).decode()
                continue
            files.append(await self._file(part))
        self.requests.append(ImagesRequest(request.path, _headers(request), None, fields, files))
        return await self._answer(fields)

    async def _file(self, part: aiohttp.BodyPartReader) -> Part:
        digest = hashlib.sha256()
        kept = bytearray()
        size = 0
        while chunk := await part.read_chunk(1024 * 1024):
            digest.update(chunk)
            size += len(chunk)
            if size <= self.keep_part_bytes:
                kept += chunk
        return Part(
            part.name or "",
            part.filename or "",
            part.headers.get("Content-Type", ""),
            bytes(kept) if size <= self.keep_part_bytes else b"",
            size,
            digest.hexdigest(),
            {name.lower(): value for name, value in part.headers.items()},
        )

    async def _answer(self, params: Mapping[str, Any]) -> web.Response:
        reply = self._script.popleft() if self._script else ImageReply()
        try:
            await asyncio.sleep(reply.delay)
        except asyncio.CancelledError:
            self.disconnects += 1
            raise
        body = reply.body if reply.body is not None else self._images(reply, params)
        if not isinstance(body, bytes | str):
            body = msgspec.json.encode(body)
        return web.Response(
            status=reply.status,
            body=body.encode() if isinstance(body, str) else body,
            headers=dict(reply.headers),
            content_type="application/json",
        )

    def _images(self, reply: ImageReply, params: Mapping[str, Any]) -> dict[str, Any]:
        count = reply.count if reply.count is not None else int(params.get("n", 1))
        size = str(params.get("size", "1024x1024"))
        width, height = reply.size or (
            (1024, 1024) if size == "auto" else tuple(int(v) for v in size.split("x"))
        )
        fmt = reply.fmt or str(params.get("output_format", "png"))
        data = []
        for _ in range(count):
            self._served += 1
            colour = (self._served * 40 % 256, self._served * 90 % 256, 200)
            picture = image_bytes(width, height, colour, fmt)
            data.append({"b64_json": base64.b64encode(picture).decode("ascii")})
        usage = {"input_tokens": 50, "output_tokens": 4160 * count, "total_tokens": 0}
        usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]
        return {"created": 1700000000, "data": data, "output_format": fmt, "usage": usage}


def _headers(request: web.Request) -> dict[str, str]:
    return {name.lower(): value for name, value in request.headers.items()}
