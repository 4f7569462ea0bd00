"""A fake Replicate predictions API running MusicGen: a real aiohttp server on free ports.

    POST /v1/predictions, POST /v1/models/{owner}/{name}/predictions   create (201)
    GET  /v1/predictions/{id}                                          one poll, one step on
    POST /v1/predictions/{id}/cancel                                   status -> canceled
    POST /v1/files                                                     upload (201, urls.get)
    GET  /files/{name}   on `delivery_url`, a second origin (127.0.0.2), like replicate.delivery

Each created prediction plays a `Job`: the states successive polls see (`steps`), then its
end. The audio is real: a WAV sine tone (16-bit mono, 32 kHz, as MusicGen writes) or MP3
frames of silence (ID3v2 tag, Info frame, MPEG-1 Layer III 128 kbit/s 44.1 kHz), lasting the
input's `duration` unless the job says otherwise.

    async with FakeReplicate() as fake:
        fake.enqueue(Job(end="failed", error="CUDA out of memory"))
        fake.enqueue(CreateReply.error(422, "- input.duration: Must be <= 300"))
        fake.requests; fake.created[0].input; fake.canceled; fake.downloads
"""

from __future__ import annotations

import io
import math
import struct
import wave
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import msgspec
from aiohttp import web

from tests.fakes.server import FakeServer

__all__ = [
    "PROCESSING",
    "CreateReply",
    "FakeReplicate",
    "Job",
    "Recorded",
    "Step",
    "mp3_bytes",
    "sine_wav",
]


@dataclass(frozen=True)
class Step:
    status: str  # starting | processing
    logs: str = ""


PROCESSING = (Step("starting"), Step("processing", " 0%|  | 0/400"), Step("processing", " 50%|"))


@dataclass(frozen=True)
class Job:
    """`steps`: what polls see before the end (the create answer is the first); `stall`: never
    end; `end`: succeeded, failed, canceled or aborted; `outputs`: files (1: a string output,
    more: a list); `output`: a raw output value instead; `seconds`/`fmt`: of the audio (None:
    the input's `duration` / `output_format`); `poll_errors`: statuses the first polls get."""

    steps: tuple[Step, ...] = PROCESSING
    stall: bool = False
    end: str = "succeeded"
    error: str | None = None
    outputs: int = 1
    output: object = None
    seconds: float | None = None
    fmt: str | None = None
    poll_errors: tuple[int, ...] = ()
    file_body: bytes | None = None  # served instead of the audio


@dataclass(frozen=True)
class CreateReply:
    """A create answered with this status and body instead of a prediction."""

    status: int
    body: object
    headers: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def error(cls, status: int, detail: str, **headers: str) -> CreateReply:
        """Replicate's problem-details error body."""
        return cls(status, {"detail": detail, "status": status, "title": "Error"}, headers)


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    host: str
    headers: dict[str, str]  # lower-case names
    json: Any
    files: list[tuple[str, str, str, bytes]]  # multipart (name, filename, type, data)


@dataclass
class _Prediction:
    id: str
    model: str
    version: str | None
    input: dict[str, Any]
    job: Job
    polls: int = 0
    status: str = "starting"
    logs: str = ""
    output: object = None
    error: str | None = None


class FakeReplicate(FakeServer[Recorded, Job | CreateReply]):
    """The Replicate fake (see `FakeServer`): the API on `base_url` (ending in `/v1`), the
    files on `delivery_url` (a second host)."""

    hosts = ("127.0.0.1", "127.0.0.2")
    client_max_size = 64 * 1024 * 1024
    handler_cancellation = False
    thread_name = "fake-replicate"

    def __init__(self) -> None:
        super().__init__()
        self.created: list[_Prediction] = []
        self.canceled: list[str] = []
        self.downloads: list[Recorded] = []
        self.uploads: dict[str, bytes] = {}
        self.files: dict[str, tuple[bytes, str]] = {}
        self._ports = (0, 0)  # port 0 in the URLs until started

    @property
    def delivery_url(self) -> str:
        return f"http://{self.hosts[1]}:{self._ports[1]}"

    def prediction(self, prediction_id: str) -> _Prediction:
        return next(p for p in self.created if p.id == prediction_id)

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/predictions", self._create)
        app.router.add_post("/v1/models/{owner}/{name}/predictions", self._create)
        app.router.add_get("/v1/predictions/{id}", self._get)
        app.router.add_post("/v1/predictions/{id}/cancel", self._cancel)
        app.router.add_post("/v1/files", self._upload)
        app.router.add_get("/files/{name}", self._download)

    async def _record(self, request: web.Request) -> Recorded:
        files: list[tuple[str, str, str, bytes]] = []
        body: Any = None
        if request.content_type.startswith("multipart/"):
            reader = await request.multipart()
            while (part := await reader.next()) is not None:
                assert isinstance(part, aiohttp.BodyPartReader)
                kind = part.headers.get("Content-Type", "")
                files.append((part.name or "", part.filename or "", kind, bytes(await part.read())))
        elif request.can_read_body:
            body = msgspec.json.decode(await request.read())
        headers = {name.lower(): value for name, value in request.headers.items()}
        recorded = Recorded(request.method, request.path, request.host, headers, body, files)
        self.requests.append(recorded)
        return recorded

    async def _create(self, request: web.Request) -> web.Response:
        recorded = await self._record(request)
        item = self._script.popleft() if self._script else Job()
        if isinstance(item, CreateReply):
            return web.json_response(item.body, status=item.status, headers=dict(item.headers))
        owner, name = request.match_info.get("owner"), request.match_info.get("name")
        prediction = _Prediction(
            id=f"pred{len(self.created) + 1:04d}",
            model=f"{owner}/{name}" if owner else "meta/musicgen",
            version=recorded.json.get("version"),
            input=recorded.json["input"],
            job=item,
        )
        self.created.append(prediction)
        self._advance(prediction)
        return web.json_response(self._view(prediction), status=201)

    async def _get(self, request: web.Request) -> web.Response:
        await self._record(request)
        prediction = self.prediction(request.match_info["id"])
        prediction.polls += 1
        if prediction.polls <= len(prediction.job.poll_errors):
            status = prediction.job.poll_errors[prediction.polls - 1]
            return web.json_response({"detail": "try again", "status": status}, status=status)
        self._advance(prediction)
        return web.json_response(self._view(prediction))

    async def _cancel(self, request: web.Request) -> web.Response:
        await self._record(request)
        prediction = self.prediction(request.match_info["id"])
        self.canceled.append(prediction.id)
        if prediction.status in ("starting", "processing"):
            prediction.status = "canceled"
        return web.json_response(self._view(prediction))

    async def _upload(self, request: web.Request) -> web.Response:
        recorded = await self._record(request)
        file_id = f"file{len(self.uploads) + 1:04d}"
        self.uploads[file_id] = recorded.files[0][3]
        url = f"{self.base_url}/files/{file_id}"
        return web.json_response({"id": file_id, "urls": {"get": url}}, status=201)

    async def _download(self, request: web.Request) -> web.Response:
        self.downloads.append(await self._record(request))
        found = self.files.get(request.match_info["name"])
        if found is None:
            return web.Response(status=404, text="Not found")
        return web.Response(body=found[0], content_type=found[1])

    def _advance(self, prediction: _Prediction) -> None:
        """One step on: the next scripted state, or the end once they are used up."""
        if prediction.status not in ("starting", "processing"):
            return
        job = prediction.job
        step_index = prediction.polls - len(job.poll_errors) if prediction.polls else 0
        if step_index < len(job.steps) or job.stall:
            step = job.steps[min(step_index, len(job.steps) - 1)]
            prediction.status, prediction.logs = step.status, step.logs
            return
        prediction.status = job.end
        prediction.error = job.error
        if job.end == "succeeded":
            prediction.output = job.output if job.output is not None else self._outputs(prediction)

    def _outputs(self, prediction: _Prediction) -> object:
        job = prediction.job
        seconds = job.seconds if job.seconds is not None else prediction.input.get("duration", 8)
        fmt = job.fmt or prediction.input.get("output_format", "wav")
        urls = []
        for take in range(job.outputs):
            name = f"{prediction.id}-{take}.{fmt}"
            if job.file_body is not None:
                data = job.file_body
            else:
                data = sine_wav(seconds, 220.0 * (take + 1)) if fmt == "wav" else mp3_bytes(seconds)
            self.files[name] = (data, "audio/wav" if fmt == "wav" else "audio/mpeg")
            urls.append(f"{self.delivery_url}/files/{name}")
        return urls[0] if len(urls) == 1 else urls

    def _view(self, prediction: _Prediction) -> dict[str, Any]:
        url = f"{self.base_url}/predictions/{prediction.id}"
        return {
            "id": prediction.id,
            "model": prediction.model,
            "version": prediction.version,
            "input": prediction.input,
            "logs": prediction.logs,
            "output": prediction.output,
            "error": prediction.error,
            "status": prediction.status,
            "created_at": "2026-01-01T00:00:00.000Z",
            "urls": {"get": url, "cancel": f"{url}/cancel"},
            "metrics": {},
        }


def sine_wav(seconds: float, frequency: float = 220.0, rate: int = 32000) -> bytes:
    """A mono 16-bit PCM WAV of a sine tone."""
    frames = round(seconds * rate)
    step = 2 * math.pi * frequency / rate
    samples = struct.pack(f"<{frames}h", *(int(9000 * math.sin(step * i)) for i in range(frames)))
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(samples)
    return buffer.getvalue()


_MP3_HEADER = b"\xff\xfb\x90\x00"  # MPEG-1 Layer III, no CRC, 128 kbit/s, 44.1 kHz, stereo
_MP3_FRAME = 417  # 144000 * 128 // 44100 bytes, without padding


def mp3_bytes(seconds: float, *, info_frame: bool = True, id3: bool = True) -> bytes:
    """Silent MP3 frames lasting `seconds` (rounded to whole 1152-sample frames)."""
    frames = max(1, round(seconds * 44100 / 1152))
    silent = _MP3_HEADER + bytes(_MP3_FRAME - 4)
    out = bytearray()
    if id3:
        text = b"\x03Take 1\x00"  # UTF-8, NUL-terminated
        tag = b"TIT2" + len(text).to_bytes(4, "big") + b"\x00\x00" + text
        size = len(tag)
        syncsafe = bytes([size >> 21 & 127, size >> 14 & 127, size >> 7 & 127, size & 127])
        out += b"ID3\x04\x00\x00" + syncsafe + tag
    if info_frame:
        info = bytearray(silent)
        info[4 + 32 : 4 + 36] = b"Info"
        out += info
    out += silent * frames
    out += b"TAG" + bytes(125)  # an ID3v1 tag at the end
    return bytes(out)
