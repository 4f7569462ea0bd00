"""`TaskClient`: create image and music tasks, follow them to the end, fetch their files.

    with TaskClient("http://127.0.0.1:8080/v1", key) as client:
        task = client.wait(client.create_image(prompt="a lighthouse").task_id)
        paths = client.download(task, "out")

Creates carry an Idempotency-Key (a fresh one per call unless given), so the client retries a
create whose answer was lost without paying twice; what else is retried is `gateway.client.retry`.
"""

from __future__ import annotations

import builtins
import contextlib
import io
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self
from urllib.parse import quote

import httpx
import msgspec

from gateway.client.errors import DownloadError, ProtocolError, TaskNotFinished, WaitTimeout
from gateway.client.files import extension_for, guess_mime_type, safe_name, write_atomically
from gateway.client.models import Artifact, Task, TaskPage
from gateway.client.pace import Pace, changed
from gateway.client.references import Reference, reference
from gateway.client.retry import RetryPolicy, parse_retry_after
from gateway.client.sender import Sender

__all__ = ["ProgressCallback", "Reference", "TaskClient", "reference"]

ProgressCallback = Callable[[Task], None]

_TASK = msgspec.json.Decoder(Task)
_PAGE = msgspec.json.Decoder(TaskPage)
_ARTIFACT = msgspec.json.Decoder(Artifact)

POLL_INITIAL = 0.5
POLL_MAX = 5.0


def _decode(decoder: msgspec.json.Decoder[Any], response: httpx.Response) -> Any:
    try:
        return decoder.decode(response.content)
    except msgspec.DecodeError as exc:
        raise ProtocolError(
            f"{response.request.method} {response.request.url}: unexpected answer: {exc}"
        ) from exc


class TaskClient:
    """A synchronous client of the gateway's task API (`base_url` ends in `/v1`)."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._sender = Sender(
            base_url,
            api_key,
            timeout=timeout,
            transport=transport,
            retry=retry or RetryPolicy(),
            sleep=sleep,
            clock=clock,
        )

    def close(self) -> None:
        self._sender.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # Creating -----------------------------------------------------------------------------

    def create_image(
        self,
        *,
        prompt: str,
        model: str = "auto",
        quality: str | None = None,
        aspect_ratio: str | None = None,
        n: int | None = None,
        metadata: Mapping[str, str] | None = None,
        model_options: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> Task:
        """POST /v1/images/generations (`text_to_image`); omitted fields take the API defaults."""
        body: dict[str, Any] = {"model": model, "prompt": prompt, "quality": quality}
        body |= {"aspect_ratio": aspect_ratio, "n": n}
        return self._create("images/generations", body, metadata, model_options, idempotency_key)

    def image_to_image(
        self,
        *,
        prompt: str,
        image: Reference,
        extra_images: builtins.list[Reference] | None = None,
        model: str = "auto",
        quality: str | None = None,
        aspect_ratio: str | None = None,
        n: int | None = None,
        metadata: Mapping[str, str] | None = None,
        model_options: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> Task:
        """POST /v1/images/image-to-image: `image` plus up to 15 `extra_images`."""
        body: dict[str, Any] = {"model": model, "prompt": prompt, "image": reference(image)}
        if extra_images:
            body["extra_images"] = [reference(item) for item in extra_images]
        body |= {"quality": quality, "aspect_ratio": aspect_ratio, "n": n}
        return self._create("images/image-to-image", body, metadata, model_options, idempotency_key)

    def create_music(
        self,
        *,
        prompt: str,
        model: str = "auto",
        lyrics: str | None = None,
        instrumental: bool | None = None,
        title: str | None = None,
        metadata: Mapping[str, str] | None = None,
        model_options: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> Task:
        """POST /v1/music/text-to-music."""
        body: dict[str, Any] = {"model": model, "prompt": prompt, "lyrics": lyrics}
        body |= {"instrumental": instrumental, "title": title}
        return self._create("music/text-to-music", body, metadata, model_options, idempotency_key)

    def reference_audio_to_music(
        self,
        *,
        prompt: str,
        reference_audio: Reference,
        model: str = "auto",
        lyrics: str | None = None,
        instrumental: bool | None = None,
        title: str | None = None,
        metadata: Mapping[str, str] | None = None,
        model_options: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> Task:
        """POST /v1/music/reference-audio-to-music (`reference_audio`: an upload or a URL)."""
        body: dict[str, Any] = {"model": model, "prompt": prompt}
        body |= {"reference_audio": reference(reference_audio), "lyrics": lyrics}
        body |= {"instrumental": instrumental, "title": title}
        return self._create(
            "music/reference-audio-to-music", body, metadata, model_options, idempotency_key
        )

    def _create(
        self,
        path: str,
        body: dict[str, Any],
        metadata: Mapping[str, str] | None,
        model_options: Mapping[str, Any] | None,
        idempotency_key: str | None,
    ) -> Task:
        sent = {name: value for name, value in body.items() if value is not None}
        if metadata:
            sent["metadata"] = dict(metadata)
        if model_options:
            sent["model_options"] = dict(model_options)
        headers = {"Idempotency-Key": idempotency_key or f"tc-{uuid.uuid4().hex}"}
        response = self._sender.send(
            lambda: self._sender.build("POST", path, json=sent, headers=headers),
            replayable=True,
        )
        return _decode(_TASK, response)  # type: ignore[no-any-return]

    # Reading and cancelling ---------------------------------------------------------------

    def get(self, task_id: str) -> Task:
        """GET /v1/tasks/{task_id}; `NotFound` for an unknown id (or another tenant's)."""
        return self._get(task_id, None)[0]

    def _get(self, task_id: str, deadline: float | None) -> tuple[Task, float | None]:
        """The task and the server's poll hint (its Retry-After header, when it sends one)."""
        path = f"tasks/{quote(task_id, safe='')}"
        response = self._sender.send(
            lambda: self._sender.build("GET", path), replayable=True, deadline=deadline
        )
        hint = parse_retry_after(response.headers.get("retry-after"))
        return _decode(_TASK, response), hint

    def page(
        self,
        *,
        status: str | None = None,
        capability: str | None = None,
        limit: int = 20,
        after: str | None = None,
    ) -> TaskPage:
        """One page of GET /v1/tasks, newest first (`limit` 1 to 100)."""
        params = {"limit": str(limit), "status": status, "capability": capability, "after": after}
        query = {name: value for name, value in params.items() if value is not None}
        response = self._sender.send(
            lambda: self._sender.build("GET", "tasks", params=query), replayable=True
        )
        return _decode(_PAGE, response)  # type: ignore[no-any-return]

    def list(
        self,
        *,
        status: str | None = None,
        capability: str | None = None,
        limit: int = 20,
        after: str | None = None,
    ) -> Iterator[Task]:
        """Every matching task, newest first, fetched `limit` at a time as the caller iterates."""
        while True:
            page = self.page(status=status, capability=capability, limit=limit, after=after)
            yield from page.data
            if not page.has_more or not page.next_after:
                return
            after = page.next_after

    def cancel(self, task_id: str) -> Task:
        """POST /v1/tasks/{task_id}/cancel: best effort; a terminal task comes back unchanged."""
        path = f"tasks/{quote(task_id, safe='')}/cancel"
        response = self._sender.send(lambda: self._sender.build("POST", path), replayable=True)
        return _decode(_TASK, response)  # type: ignore[no-any-return]

    # Waiting ------------------------------------------------------------------------------

    def wait(
        self,
        task_id: str,
        *,
        timeout: float | None = 600.0,
        on_progress: ProgressCallback | None = None,
    ) -> Task:
        """Poll until the task is terminal and return it (failed and canceled included).

        Polls start 0.5 s apart and stretch (x1.5, with jitter) to 5 s; once the progress
        percent moves, the next poll comes no later than the finish it predicts, so a short task
        is not overslept. A Retry-After on the answer is the server's own pace and wins.
        `on_progress` gets the task whenever its status or progress changed. Once the task was
        seen, passing failures (429, 503, the gateway restarting) are waited out until the
        timeout; then `WaitTimeout`, carrying the last task seen.
        """
        clock = self._sender.clock
        deadline = None if timeout is None else clock() + timeout
        interval, seen = POLL_INITIAL, None
        pace = Pace()
        while True:
            # Until the task was seen once, a gateway that never answers is a mistake (a wrong
            # URL), reported after the usual retries rather than at the deadline.
            task, hint = self._get(task_id, deadline if seen is not None else None)
            if on_progress is not None and changed(seen, task):
                on_progress(task)
            if task.terminal:
                return task
            if seen is not None:
                interval = min(POLL_MAX, interval * 1.5)
            seen = task
            eta = pace.eta(task.progress.percent, clock())
            pause = interval if eta is None else max(POLL_INITIAL, min(interval, eta))
            pause *= self._sender.rng.uniform(0.8, 1.2)
            if hint is not None:
                pause = hint
            if deadline is not None:
                left = deadline - clock()
                if left <= 0:
                    raise WaitTimeout(
                        f"task {task_id} is still {task.status} after {timeout:g} s", task
                    )
                pause = min(pause, left)
            self._sender.sleep(pause)

    # Files --------------------------------------------------------------------------------

    def upload(
        self,
        source: str | Path | bytes,
        *,
        filename: str | None = None,
        mime_type: str | None = None,
    ) -> Artifact:
        """POST /v1/uploads: a file (streamed from disk) or bytes; returns its artifact."""
        with contextlib.ExitStack() as stack:
            if isinstance(source, bytes):
                handle: IO[bytes] = io.BytesIO(source)
                name = filename or "upload.bin"
            else:
                handle = stack.enter_context(Path(source).open("rb"))
                name = filename or Path(source).name
            kind = mime_type or guess_mime_type(name)

            def build() -> httpx.Request:
                handle.seek(0)
                return self._sender.build("POST", "uploads", files={"file": (name, handle, kind)})

            response = self._sender.send(build, replayable=False)
            return _decode(_ARTIFACT, response)  # type: ignore[no-any-return]

    def artifact(self, artifact_id: str) -> Artifact:
        """GET /v1/artifacts/{artifact_id}: the file's metadata."""
        path = f"artifacts/{quote(artifact_id, safe='')}"
        response = self._sender.send(lambda: self._sender.build("GET", path), replayable=True)
        return _decode(_ARTIFACT, response)  # type: ignore[no-any-return]

    def download(self, target: Task | Artifact | str, directory: str | Path) -> builtins.list[Path]:
        """Save a succeeded task's outputs (or one artifact) into `directory`; their paths.

        Task outputs are named `<task_id>-<n>.<ext>` and fetched by their signed links (no API
        key sent); an artifact is `<artifact_id>.<ext>`. Each file appears whole or not at all.
        `target` may also be a task id or an artifact id (`art_...`).
        """
        folder = Path(directory)
        if isinstance(target, str):
            target = self.artifact(target) if target.startswith("art_") else self.get(target)
        if isinstance(target, Artifact):
            path = f"artifacts/{quote(target.artifact_id, safe='')}/content"
            name = safe_name(target.artifact_id) + extension_for(None, target.mime_type)
            content = self._sender.base_url.join(path)
            return [self._fetch(content, folder / name, target.size_bytes, authorized=True)]
        if target.status != "succeeded":
            raise TaskNotFinished(
                f"task {target.task_id} is {target.status}: it has no files to download", target
            )
        items = [(i.url, i.format, i.mime_type, i.size_bytes) for i in target.output.images]
        items += [(c.audio_url, c.format, c.mime_type, c.size_bytes) for c in target.output.clips]
        paths = []
        for index, (url, fmt, mime, size) in enumerate(items, start=1):
            name = f"{safe_name(target.task_id)}-{index}{extension_for(fmt, mime)}"
            paths.append(self._fetch(self._sender.absolute(url), folder / name, size))
        return paths

    def _fetch(
        self, url: httpx.URL, target: Path, size: int | None, *, authorized: bool = False
    ) -> Path:
        """Stream one file to `target`; a connection that breaks mid-file starts it again."""
        attempt = 0
        while True:
            response = self._sender.send(
                lambda: self._sender.build("GET", url, authorized=authorized),
                replayable=True,
                stream=True,
            )
            try:
                return write_atomically(target, response.iter_bytes(), size)
            except httpx.TransportError as exc:
                if attempt >= self._sender.retry.max_retries:
                    raise DownloadError(f"{target.name}: the transfer broke: {exc}") from exc
            finally:
                response.close()
            self._sender.sleep(self._sender.retry.backoff(attempt, self._sender.rng))
            attempt += 1
