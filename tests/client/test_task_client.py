"""`TaskClient` against a real gateway process (SQLite store, simulator providers)."""

from __future__ import annotations

import io
import time
import wave
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
from PIL import Image as PILImage

from gateway.client import (
    Artifact,
    AuthenticationError,
    NotFound,
    RateLimited,
    RetryPolicy,
    Task,
    TaskClient,
    TaskNotFinished,
    ValidationError,
    WaitTimeout,
)
from tests.client.support import media_gateway
from tests.e2e.media_support import png_bytes, wav_bytes
from tests.support.gateway_process import GatewayProcess
from tests.support.waiting import wait_until


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    yield from media_gateway(tmp_path_factory.mktemp("client"))


class Sleeps(list[float]):
    """A `sleep` that sleeps and remembers for how long it was asked to."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)
        time.sleep(seconds)  # really waits: the client's pacing is what is tested


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def client(gateway: GatewayProcess, sleeps: Sleeps) -> Iterator[TaskClient]:
    with TaskClient(gateway.base_url, gateway.api_key or "", timeout=15, sleep=sleeps) as c:
        yield c


def _running(client: TaskClient, task_id: str) -> Task:
    return wait_until(
        lambda: client.get(task_id), lambda task: task.status == "running", what="a running task"
    )


def _no_partial_files(folder: Path) -> None:
    leftovers = [p.name for p in folder.iterdir() if p.name.startswith(".")]
    assert leftovers == [], f"temporary files left behind: {leftovers}"


def test_image_task_progress_and_png_files(client: TaskClient, tmp_path: Path) -> None:
    created = client.create_image(
        prompt="a lighthouse at dusk [[sim:task_ms=3000]]",
        aspect_ratio="16:9",
        n=2,
        metadata={"order": "42"},
    )
    assert created.status in {"queued", "running"}
    assert created.capability == "text_to_image"
    assert created.metadata == {"order": "42"}
    assert created.billing.charged_credits == Decimal("100")
    seen: list[Task] = []
    task = client.wait(created.task_id, timeout=30, on_progress=seen.append)
    assert task.status == "succeeded", task
    assert task.terminal and task.progress.percent == 100
    # The callback saw the task move: running states with rising percent, then the end.
    running = [t.progress.percent for t in seen if t.status == "running"]
    assert len(running) >= 2, [(t.status, t.progress.percent) for t in seen]
    assert running == sorted(running) and 0 < running[-1] < 100
    assert seen[-1].status == "succeeded" and seen[-1].progress.percent == 100
    assert len({(t.status, t.progress.percent, t.progress.stage) for t in seen}) == len(seen)

    paths = client.download(task, tmp_path / "out")
    assert [p.name for p in paths] == [f"{task.task_id}-1.png", f"{task.task_id}-2.png"]
    for path, image in zip(paths, task.output.images, strict=True):
        assert path.stat().st_size == image.size_bytes
        picture = PILImage.open(path)
        picture.load()
        assert picture.format == "PNG" and picture.size == (512, 288)
    _no_partial_files(tmp_path / "out")


def test_music_task_wav_files(client: TaskClient, tmp_path: Path) -> None:
    created = client.create_music(prompt="calm piano", model="alpha-5.5", instrumental=True)
    assert created.billing.charged_credits == Decimal("80")
    task = client.wait(created.task_id, timeout=30)
    assert task.status == "succeeded", task
    assert task.input["instrumental"] is True
    assert len(task.output.clips) == 2
    paths = client.download(task.task_id, tmp_path)
    assert [p.suffix for p in paths] == [".wav", ".wav"]
    for path, clip in zip(paths, task.output.clips, strict=True):
        assert path.stat().st_size == clip.size_bytes
        with wave.open(str(path), "rb") as audio:
            seconds = audio.getnframes() / audio.getframerate()
        assert clip.duration_seconds is not None and abs(seconds - clip.duration_seconds) < 0.05


def test_cancel_a_running_task(client: TaskClient, tmp_path: Path) -> None:
    created = client.create_music(prompt="endless [[sim:stall]]", model="beta-music-2.6")
    _running(client, created.task_id)
    asked = client.cancel(created.task_id)
    assert asked.task_id == created.task_id
    assert asked.cancel_requested_at is not None or asked.status == "canceled"
    task = client.wait(created.task_id, timeout=30)
    assert task.status == "canceled", task
    assert task.billing.refunded_credits == task.billing.charged_credits == Decimal("50")
    assert client.cancel(task.task_id).status == "canceled"  # terminal: returned unchanged
    with pytest.raises(TaskNotFinished) as raised:
        client.download(task, tmp_path)
    assert raised.value.task.status == "canceled"
    assert list(tmp_path.iterdir()) == []


def test_wait_times_out_with_the_last_task_seen(client: TaskClient) -> None:
    created = client.create_music(prompt="forever [[sim:stall]]", model="beta-music-2.6")
    started = time.monotonic()
    with pytest.raises(WaitTimeout) as raised:
        client.wait(created.task_id, timeout=1.0)
    assert 1.0 <= time.monotonic() - started < 3.0
    assert raised.value.task.task_id == created.task_id
    assert raised.value.task.status in {"queued", "running"}
    client.cancel(created.task_id)


def test_list_walks_every_page(gateway: GatewayProcess, tmp_path: Path) -> None:
    gateway.grant("lister", "1000")
    with TaskClient(gateway.base_url, gateway.new_key("lister")) as client:
        ids = [client.create_image(prompt=f"picture {i}").task_id for i in range(5)]
        for task_id in ids:
            client.wait(task_id, timeout=30)
        first = client.page(limit=2)
        assert [t.task_id for t in first.data] == ids[::-1][:2]
        assert first.has_more and first.next_after == ids[-2]
        assert [t.task_id for t in client.list(limit=2)] == ids[::-1]
        assert [t.task_id for t in client.list(status="succeeded", limit=100)] == ids[::-1]
        assert list(client.list(status="failed")) == []
        assert list(client.list(capability="text_to_music")) == []


def test_upload_then_use_it_as_a_reference(client: TaskClient, tmp_path: Path) -> None:
    audio = tmp_path / "hum.wav"
    audio.write_bytes(wav_bytes(0.5))
    uploaded = client.upload(audio)
    assert isinstance(uploaded, Artifact)
    assert uploaded.artifact_id.startswith("art_")
    assert uploaded.mime_type == "audio/wav" and uploaded.size_bytes == audio.stat().st_size
    assert uploaded.filename == "hum.wav" and uploaded.source == "upload"
    music = client.reference_audio_to_music(prompt="in the style of this", reference_audio=uploaded)
    done = client.wait(music.task_id, timeout=30)
    assert done.status == "succeeded", done
    assert done.capability == "reference_audio_to_music"
    assert done.input["reference_audio"]["artifact_id"] == uploaded.artifact_id

    picture = png_bytes(40, 30, (0, 0, 255))
    image = client.upload(picture, filename="blue.png")
    assert client.artifact(image.artifact_id).sha256 == image.sha256
    edited = client.wait(
        client.image_to_image(prompt="brighter", image=image.artifact_id).task_id, timeout=30
    )
    assert edited.status == "succeeded", edited
    assert edited.input["image"]["artifact_id"] == image.artifact_id
    (saved,) = client.download(image, tmp_path / "back")
    assert saved.name == f"{image.artifact_id}.png"
    assert saved.read_bytes() == picture
    assert PILImage.open(io.BytesIO(saved.read_bytes())).size == (40, 30)


def test_a_retried_create_with_the_same_key_is_one_task(client: TaskClient) -> None:
    key = f"client-test-{time.time_ns()}"
    first = client.create_image(prompt="once", idempotency_key=key)
    again = client.create_image(prompt="once", idempotency_key=key)
    assert again.task_id == first.task_id
    different = client.create_image(prompt="once")  # a fresh key per call by default
    assert different.task_id != first.task_id


def test_errors_map_to_their_classes(
    gateway: GatewayProcess, client: TaskClient, sleeps: Sleeps
) -> None:
    with pytest.raises(NotFound) as missing:
        client.get("task_doesnotexist")
    assert missing.value.status == 404 and missing.value.code == "not_found"
    assert missing.value.retryable is False
    assert (missing.value.request_id or "").startswith("req_")

    with pytest.raises(ValidationError) as invalid:
        client.create_image(prompt="too many", n=9)
    assert invalid.value.status == 422 and invalid.value.code == "validation_error"
    assert [d.field for d in invalid.value.details] == ["n"]
    assert invalid.value.request_id and invalid.value.request_id in str(invalid.value)

    with pytest.raises(ValidationError) as hd_auto:
        client.create_image(prompt="x", quality="hd", aspect_ratio="auto")
    assert hd_auto.value.code == "validation_error"
    assert sleeps == [], "a 4xx that is not retryable was retried"

    stranger = TaskClient(gateway.base_url, "gw-not-a-key", sleep=sleeps)
    with stranger, pytest.raises(AuthenticationError) as denied:
        stranger.page()
    assert denied.value.status == 401 and denied.value.code == "invalid_api_key"
    assert (denied.value.request_id or "").startswith("req_")
    assert sleeps == []

    # The envelope's request id is the X-Request-Id the gateway answered with.
    raw = httpx.get(
        f"{gateway.base_url}/tasks/task_doesnotexist",
        headers={"Authorization": f"Bearer {gateway.api_key}", "X-Request-Id": "mine-1"},
    )
    assert raw.json()["error"]["request_id"] == raw.headers["x-request-id"] == "mine-1"


def test_a_rate_limited_call_follows_retry_after(gateway: GatewayProcess) -> None:
    """One request a minute: the second gets 429 with Retry-After ~60 s. A client that may
    wait that long waits exactly what the gateway says before each retry; the default client
    does not hang for a minute but reports the limit at once."""
    key = gateway.new_key("throttled")
    asked: list[float] = []
    patient = RetryPolicy(max_retries=2, max_retry_after=120)
    with TaskClient(gateway.base_url, key, retry=patient, sleep=asked.append) as client:
        assert client.page(limit=1).data == []
        with pytest.raises(RateLimited) as limited:
            client.page(limit=1)
    error = limited.value
    assert error.status == 429 and error.code == "rate_limited" and error.retryable
    assert error.retry_after is not None and 55 <= error.retry_after <= 60
    assert len(asked) == 2, asked  # waited before each of the two retries, then gave up
    assert all(55 <= seconds <= 60 for seconds in asked), asked

    started = time.monotonic()
    impatient = TaskClient(gateway.base_url, key, sleep=asked.append)
    with impatient, pytest.raises(RateLimited) as again:
        impatient.page(limit=1)
    assert time.monotonic() - started < 2 and len(asked) == 2  # no wait at all
    assert again.value.request_id and again.value.retry_after is not None
