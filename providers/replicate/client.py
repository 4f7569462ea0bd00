"""The Replicate music provider: one prediction per task, polled to its end, files fetched.

Steps of `generate_music` and their checkpoints:

    checks              lyrics, model_options, model name: refused before anything is sent
    "starting"    2 %   then the reference is inlined (data URL, up to
                        `inline_reference_max_bytes`) or streamed up (`POST /files`)
    create              `POST /predictions` (by version) or `/models/{owner}/{name}/predictions`
    "queued"      5 %   every poll while the prediction is `starting` (waiting for a worker)
    "generating" 10-90  every poll while `processing`, from the model's tqdm percentage
    "downloading" 90+   after each output file; its real duration is read from its bytes

A cancel (TaskCanceled from a checkpoint), running out of `max_wait_seconds`, a poll failing
for good or the worker stopping all cancel the prediction upstream (`POST .../cancel`, best
effort) before the error goes on, so nothing keeps running (and billing) for nobody. A poll
that fails transiently (429, 5xx, timeout, refused) is retried up to three times in a row.
A prediction that ends `failed` is UpstreamModelFailed with Replicate's error as the message,
retryable only when Replicate says the run was interrupted (`passing_failure`); `aborted` (it
never started before its deadline) is UpstreamUnavailable.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import Sequence

import msgspec
from yarl import URL

from providers.base import GeneratedClip, MediaInput, MusicRequest, MusicResult, TaskControl
from providers.errors import (
    ProviderError,
    UpstreamModelFailed,
    UpstreamRejectedRequest,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from providers.http import MAX_MEDIA_BYTES
from providers.reference_part import ReferencePart
from providers.replicate.audio import probe_audio
from providers.replicate.options import Options
from providers.replicate.translate import (
    Prediction,
    UploadedFile,
    clip_title,
    create_call,
    decode,
    failure_message,
    log_percent,
    output_urls,
    passing_failure,
    prediction_input,
)
from providers.secrets import SecretSink
from providers.uploads import Form
from providers.upstream import Timeouts, Upstream, key_header

__all__ = ["ReplicateProvider", "create"]

_POLL_RETRIES = 3
_MAX_RETRY_AFTER = 30.0
_CANCEL_SECONDS = 5.0
_ENDED = frozenset({"succeeded", "failed", "canceled", "aborted"})


def create(name: str, options: Options) -> ReplicateProvider:
    """Build the provider (inside the running loop); ValueError when the key is misconfigured."""
    auth = key_header(options, "Authorization", "Bearer ")
    if any(header.lower() == "authorization" for header in options.extra_headers):
        auth = {}  # the configured header (on every request, from the session) wins
    return ReplicateProvider(name, options, Upstream(options, {}), auth)


class ReplicateProvider:
    """Implements `providers.base.MusicProvider` against Replicate's predictions API."""

    def __init__(
        self,
        name: str,
        options: Options,
        upstream: Upstream,
        auth: dict[str, str],
    ) -> None:
        self.name = name
        self._options = options
        self._upstream = upstream
        self._auth = auth  # sent to the API's origin only
        self._json = {**auth, "Content-Type": "application/json"}
        self._origin = options.url("").origin()
        self._cancel_timeout = Timeouts(total=_CANCEL_SECONDS)

    async def generate_music(self, request: MusicRequest, control: TaskControl) -> MusicResult:
        options = self._options
        path, body = create_call(request.model, prediction_input(request, options))
        await control.checkpoint(2.0, "starting", f"{self.name}: {request.model}")
        if request.reference_audio is not None:
            body["input"]["input_audio"] = await self._reference(request.reference_audio)
        raw = await self._call("POST", options.url(path), msgspec.json.encode(body))
        prediction = decode(raw, Prediction, "prediction")
        try:
            prediction = await self._wait(prediction, control)
        except BaseException:  # canceled, out of time, polls failing, the worker stopping
            await self._cancel(prediction.id)
            raise
        _raise_unless_succeeded(prediction)
        urls = output_urls(prediction.output)
        clips = []
        for take, url in enumerate(urls):
            try:
                data = await self._call("GET", _file_url(url))
            except UpstreamRejectedRequest as exc:  # a missing output is not the caller's fault
                raise ProviderError(
                    f"downloading an output failed: {exc.message}",
                    upstream_status=exc.upstream_status,
                ) from exc
            kind, mime, seconds = probe_audio(data)
            clips.append(
                GeneratedClip(
                    data=data,
                    mime_type=mime,
                    format=kind,
                    duration_seconds=round(seconds, 3),
                    title=clip_title(request, take),
                )
            )
            percent = 90.0 + 9.0 * (take + 1) / len(urls)
            await control.checkpoint(percent, "downloading", f"clip {take + 1} of {len(urls)}")
        return MusicResult(clips=clips)

    @property
    def secrets(self) -> SecretSink:
        """The credentials it sends, for the gateway to mask (`providers.secrets`)."""
        return self._upstream.secrets

    async def close(self) -> None:
        await self._upstream.close()

    async def _reference(self, reference: MediaInput) -> str:
        """A URL the prediction can read the reference from: inline (read whole, which only
        a file up to `inline_reference_max_bytes` is), or streamed up to the Files API."""
        if not reference.size_bytes:
            raise UpstreamRejectedRequest("reference audio is empty")
        mime = reference.mime_type.split(";")[0].strip().lower() or "application/octet-stream"
        if reference.size_bytes <= self._options.inline_reference_max_bytes:
            data = await reference.read()
            return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
        form = Form()
        extension = mime.rpartition("/")[2].removeprefix("x-") or "bin"
        part = ReferencePart(reference, mime)
        form.add_file("content", part, filename=f"reference.{extension}", content_type=mime)
        raw = await self._call("POST", self._options.url("/files"), form, uploads=(part,))
        return decode(raw, UploadedFile, "file upload answer").urls.get

    async def _wait(self, prediction: Prediction, control: TaskControl) -> Prediction:
        """Poll until the prediction has ended (in any state), checkpointing at every poll."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._options.max_wait_seconds
        url = self._options.url(f"/predictions/{prediction.id}")
        failures = 0
        while prediction.status not in _ENDED:
            await control.checkpoint(*_progress(prediction))
            if loop.time() >= deadline:
                raise UpstreamTimeout(
                    f"the prediction did not finish in {self._options.max_wait_seconds:g} s"
                )
            await asyncio.sleep(self._options.poll_interval_seconds)
            try:
                prediction = decode(await self._call("GET", url), Prediction, "prediction")
            except ProviderError as exc:
                failures += 1
                if failures > _POLL_RETRIES or not _transient(exc):
                    raise
                await asyncio.sleep(min(exc.retry_after or 0.0, _MAX_RETRY_AFTER))
                continue
            failures = 0
        return prediction

    async def _cancel(self, prediction_id: str) -> None:
        """Best effort: the task is ending anyway, so a failure here is only logged upstream."""
        url = self._options.url(f"/predictions/{prediction_id}/cancel")
        with contextlib.suppress(ProviderError):  # whatever the answer, the task is ending
            await self._upstream.request(
                "POST", url, b"", headers=self._auth, timeouts=self._cancel_timeout
            )

    async def _call(
        self,
        method: str,
        url: URL,
        data: bytes | Form | None = None,
        uploads: Sequence[ReferencePart] = (),
    ) -> bytes:
        """One request; the key only goes to the API's origin; non-2xx raises."""
        same_origin = url.origin() == self._origin
        headers = (self._json if isinstance(data, bytes) else self._auth) if same_origin else None
        return await self._upstream.request(
            method, url, data, headers=headers, max_bytes=MAX_MEDIA_BYTES, uploads=uploads
        )


def _raise_unless_succeeded(prediction: Prediction) -> None:
    if prediction.status == "succeeded":
        return
    if prediction.status == "aborted":
        raise UpstreamUnavailable("the prediction could not start before its deadline")
    if prediction.status == "canceled":
        raise ProviderError("the prediction was canceled upstream")
    message = failure_message(prediction.error)
    raise UpstreamModelFailed(message, retryable=passing_failure(message))


def _file_url(url: str) -> URL:
    parsed = URL(url)
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ProviderError(f"the prediction's output is not an HTTP URL: {url[:200]!r}")
    return parsed


def _progress(prediction: Prediction) -> tuple[float, str, str]:
    if prediction.status == "starting":
        return 5.0, "queued", "waiting for a worker"
    percent = log_percent(prediction.logs)
    if percent is None:
        return 10.0, "generating", prediction.status
    return 10.0 + 0.8 * percent, "generating", f"{percent:.0f} % done"


def _transient(error: ProviderError) -> bool:
    if isinstance(error, UpstreamUnavailable | UpstreamTimeout):
        return True
    return (error.upstream_status or 0) >= 500
