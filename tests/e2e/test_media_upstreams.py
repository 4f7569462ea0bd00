"""Image and music tasks on a real gateway in front of real HTTP upstreams (local fakes): the
OpenAI Images API (`kind = "openai"`) and MusicGen on Replicate (`kind = "replicate"`)."""

from __future__ import annotations

import base64
import io
import wave
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from PIL import Image

from tests.e2e.media_support import (
    assert_books_balance,
    data_uri,
    fetch_unsigned,
    png_bytes,
    post_task,
    root_of,
    task_entries,
    wait_for_task,
    wallet_balance,
    wav_bytes,
)
from tests.fakes.openai_images_upstream import FakeOpenAIImages, ImageReply
from tests.fakes.replicate_upstream import FakeReplicate, Job
from tests.support.gateway_process import GatewayProcess, start_gateway
from tests.support.serving import serving
from tests.support.waiting import wait_until

IMAGES = "/v1/images/generations"
IMAGE_TO_IMAGE = "/v1/images/image-to-image"
TEXT_TO_MUSIC = "/v1/music/text-to-music"
REFERENCE_MUSIC = "/v1/music/reference-audio-to-music"
VERSION = "671ac645ce5e552cc63a54a2bbff63fcf798043055d2dac5fc9e36a837eedcfb"

CONFIG = """
[gateway]
starting_grant_credits = 5000
hold_seconds = 60
task_lease_seconds = 3

[limits]
requests_per_minute = 100000
tokens_per_minute = 100000000

[providers.images]
kind = "openai"
base_url = "{images_url}"
api_key = "sk-images-secret"
image_checkpoint_seconds = 0.1

[providers.music]
kind = "replicate"
base_url = "{music_url}"
api_key = "r8-music-secret"
poll_interval_seconds = 0.05
duration_seconds = 2

[[models]]
id = "gpt-image"
provider = "images"
upstream_model = "gpt-image-1"
capabilities = ["text_to_image", "image_to_image"]
pricing = {{ credits_per_image = {{ standard = 50, hd = 300 }} }}

[[models]]
id = "musicgen"
provider = "music"
upstream_model = "meta/musicgen:{version}"
capabilities = ["text_to_music", "reference_audio_to_music"]
options_namespace = "musicgen"
pricing = {{ credits_per_task = 80 }}

[routing.auto]
text_to_image = ["gpt-image"]
image_to_image = ["gpt-image"]
text_to_music = ["musicgen"]
reference_audio_to_music = ["musicgen"]

[tenants.default]
"""


@pytest.fixture(scope="module")
def images() -> Iterator[FakeOpenAIImages]:
    fake = FakeOpenAIImages()
    with serving(fake):
        yield fake


@pytest.fixture(scope="module")
def music() -> Iterator[FakeReplicate]:
    fake = FakeReplicate()
    with serving(fake):
        yield fake


@pytest.fixture(scope="module")
def gateway(
    images: FakeOpenAIImages, music: FakeReplicate, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    config = CONFIG.format(images_url=images.base_url, music_url=music.base_url, version=VERSION)
    process = start_gateway(tmp_path_factory.mktemp("media-upstreams"), config)
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def root(gateway: GatewayProcess) -> str:
    return root_of(gateway.base_url)


@pytest.fixture(scope="module")
def api(gateway: GatewayProcess, root: str) -> Iterator[httpx.Client]:
    assert gateway.api_key, "serve printed no key"
    headers = {"Authorization": f"Bearer {gateway.api_key}"}
    with httpx.Client(base_url=root, headers=headers, timeout=15) as client:
        yield client


def ledger_of(api: httpx.Client, task_id: str) -> list[tuple[str, str]]:
    return [(e["kind"], e["amount_credits"]) for e in task_entries(api, task_id)]


def download(root: str, url: str, content_type: str, size: int) -> bytes:
    response = fetch_unsigned(root, url)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].split(";")[0] == content_type
    assert len(response.content) == size
    return response.content


def open_png(data: bytes) -> Image.Image:
    picture = Image.open(io.BytesIO(data))
    picture.load()
    assert picture.format == "PNG"
    return picture


# --- images -------------------------------------------------------------------------------------


def test_text_to_image_hd_through_the_images_api(
    api: httpx.Client, root: str, images: FakeOpenAIImages
) -> None:
    before = wallet_balance(api)
    body = {"model": "auto", "prompt": "a lighthouse", "quality": "hd", "aspect_ratio": "16:9"}
    created = post_task(api, IMAGES, body | {"n": 2})
    assert created["billing"]["charged_credits"] == "600.0000"
    task = wait_for_task(api, created["task_id"])
    assert task["status"] == "succeeded", task
    assert task["resolved_model"] == "gpt-image"
    sent = images.requests[-1]
    assert sent.path == "/v1/images/generations"
    assert sent.headers["authorization"] == "Bearer sk-images-secret"
    assert sent.json == {
        "model": "gpt-image-1",
        "prompt": "a lighthouse",
        "size": "1536x1024",
        "quality": "high",
        "output_format": "png",
        "n": 2,
    }
    pictures = []
    for image in task["output"]["images"]:
        assert (image["format"], image["mime_type"]) == ("png", "image/png")
        assert (image["width"], image["height"]) == (1536, 1024)
        data = download(root, image["url"], "image/png", image["size_bytes"])
        picture = open_png(data)
        assert picture.size == (1536, 1024)
        pictures.append(picture.getpixel((10, 10)))
    assert len(set(pictures)) == 2  # two different images came back
    assert task["usage"]["image_count"] == 2
    assert task["usage"]["image_pixels"] == 2 * 1536 * 1024
    assert ledger_of(api, task["task_id"]) == [("debit", "-600.0000")]
    assert wallet_balance(api) == before - 600


def test_image_to_image_sends_the_references_as_multipart(
    api: httpx.Client, root: str, images: FakeOpenAIImages
) -> None:
    first, second = png_bytes(40, 30, (200, 10, 10)), png_bytes(30, 40, (10, 200, 10))
    created = post_task(
        api,
        IMAGE_TO_IMAGE,
        {
            "model": "gpt-image",
            "prompt": "the same, at night",
            "aspect_ratio": "3:4",
            "image": {"type": "data_uri", "data_uri": data_uri(first)},
            "extra_images": [{"type": "data_uri", "data_uri": data_uri(second)}],
        },
    )
    task = wait_for_task(api, created["task_id"])
    assert task["status"] == "succeeded", task
    sent = images.requests[-1]
    assert sent.path == "/v1/images/edits"
    assert sent.headers["content-type"].startswith("multipart/form-data; boundary=")
    assert sent.fields["prompt"] == "the same, at night"
    assert (sent.fields["size"], sent.fields["quality"], sent.fields["n"]) == (
        "1024x1536",
        "medium",
        "1",
    )
    assert [(f.name, f.filename, f.content_type) for f in sent.files] == [
        ("image[]", "image-1.png", "image/png"),
        ("image[]", "image-2.png", "image/png"),
    ]
    assert [f.data for f in sent.files] == [first, second]
    (image,) = task["output"]["images"]
    picture = open_png(download(root, image["url"], "image/png", image["size_bytes"]))
    assert picture.size == (image["width"], image["height"]) == (1024, 1536)
    assert task["billing"]["charged_credits"] == "50.0000"


def test_fewer_images_than_asked_refunds_the_difference(
    api: httpx.Client, images: FakeOpenAIImages
) -> None:
    images.enqueue(ImageReply(count=1))
    created = post_task(api, IMAGES, {"model": "gpt-image", "prompt": "three cats", "n": 3})
    task = wait_for_task(api, created["task_id"])
    assert task["status"] == "succeeded", task
    assert len(task["output"]["images"]) == 1
    assert [w["code"] for w in task["warnings"]] == ["fewer_images"]
    assert task["billing"]["charged_credits"] == "150.0000"
    assert task["billing"]["refunded_credits"] == "100.0000"
    assert ledger_of(api, task["task_id"]) == [("debit", "-150.0000"), ("refund", "100.0000")]


@pytest.mark.parametrize(
    ("reply", "code", "message"),
    [
        (
            ImageReply.error(
                400, "Rejected by our safety system.", code="content_policy_violation"
            ),
            "invalid_request",
            "content_policy_violation: Rejected by our safety system.",
        ),
        (
            ImageReply.error(500, "The server had an error.", type="server_error"),
            "upstream_error",
            "",
        ),
    ],
)
def test_a_failing_image_upstream_is_refunded_in_full(
    api: httpx.Client, images: FakeOpenAIImages, reply: ImageReply, code: str, message: str
) -> None:
    before = wallet_balance(api)
    images.enqueue(reply)
    created = post_task(api, IMAGES, {"model": "gpt-image", "prompt": "p", "quality": "hd"})
    task = wait_for_task(api, created["task_id"])
    assert task["status"] == "failed", task
    assert task["error"]["code"] == code
    assert message in task["error"]["message"]
    assert task["billing"]["refunded_credits"] == "300.0000"
    assert ledger_of(api, task["task_id"]) == [("debit", "-300.0000"), ("refund", "300.0000")]
    assert wallet_balance(api) == before
    assert_books_balance(api)


# --- music --------------------------------------------------------------------------------------


def open_wav(data: bytes) -> tuple[int, int, float]:
    with wave.open(io.BytesIO(data), "rb") as audio:
        return audio.getnchannels(), audio.getframerate(), audio.getnframes() / audio.getframerate()


def test_text_to_music_through_replicate(
    api: httpx.Client, root: str, music: FakeReplicate
) -> None:
    before = wallet_balance(api)
    created = post_task(
        api,
        TEXT_TO_MUSIC,
        {
            "model": "auto",
            "prompt": "calm piano by the sea",
            "title": "Harbour",
            "model_options": {"musicgen": {"duration": 3, "model_version": "stereo-large"}},
        },
    )
    assert created["billing"]["charged_credits"] == "80.0000"
    task = wait_for_task(api, created["task_id"])
    assert task["status"] == "succeeded", task
    prediction = music.created[-1]
    assert prediction.version == VERSION
    assert prediction.input == {
        "prompt": "calm piano by the sea",
        "duration": 3,
        "output_format": "wav",
        "model_version": "stereo-large",
    }
    assert music.requests[-2].headers["authorization"] == "Bearer r8-music-secret"  # last poll
    assert "authorization" not in music.downloads[-1].headers
    (clip,) = task["output"]["clips"]
    assert (clip["format"], clip["mime_type"], clip["title"]) == ("wav", "audio/wav", "Harbour")
    assert clip["duration_seconds"] == 3.0
    data = download(root, clip["audio_url"], "audio/wav", clip["size_bytes"])
    assert open_wav(data) == (1, 32000, 3.0)
    assert task["usage"]["audio_seconds"] == 3.0
    assert ledger_of(api, task["task_id"]) == [("debit", "-80.0000")]
    assert wallet_balance(api) == before - 80


def test_reference_audio_goes_to_the_prediction(
    api: httpx.Client, root: str, music: FakeReplicate
) -> None:
    audio = wav_bytes(0.5)
    upload = api.post("/v1/uploads", files={"file": ("hum.wav", audio, "audio/wav")})
    assert upload.status_code == 201, upload.text
    reference = {"type": "artifact", "artifact_id": upload.json()["artifact_id"]}
    created = post_task(
        api,
        REFERENCE_MUSIC,
        {"model": "musicgen", "prompt": "on strings", "reference_audio": reference},
    )
    task = wait_for_task(api, created["task_id"])
    assert task["status"] == "succeeded", task
    sent = music.created[-1].input["input_audio"]
    assert sent == "data:audio/wav;base64," + base64.b64encode(audio).decode("ascii")
    (clip,) = task["output"]["clips"]
    data = download(root, clip["audio_url"], "audio/wav", clip["size_bytes"])
    assert open_wav(data)[2] == clip["duration_seconds"] == 2.0  # the provider's duration_seconds


@pytest.mark.parametrize(
    ("job", "body", "code", "message"),
    [
        (
            Job(end="failed", error="CUDA out of memory"),
            {},
            "upstream_error",
            "The model failed: CUDA out of memory",
        ),
        (None, {"lyrics": "la la la"}, "invalid_request", "cannot sing lyrics"),
    ],
)
def test_a_failing_music_task_is_refunded_in_full(
    api: httpx.Client,
    music: FakeReplicate,
    job: Job | None,
    body: dict[str, Any],
    code: str,
    message: str,
) -> None:
    before = wallet_balance(api)
    if job is not None:
        music.enqueue(job)
    created = post_task(api, TEXT_TO_MUSIC, {"model": "musicgen", "prompt": "p"} | body)
    task = wait_for_task(api, created["task_id"])
    assert task["status"] == "failed", task
    assert task["error"]["code"] == code
    assert message in task["error"]["message"]
    assert task["error"]["retryable"] is False  # the same input would fail the same way
    assert ledger_of(api, task["task_id"]) == [("debit", "-80.0000"), ("refund", "80.0000")]
    assert wallet_balance(api) == before
    assert_books_balance(api)


def test_cancel_a_running_music_task_cancels_the_prediction(
    api: httpx.Client, music: FakeReplicate
) -> None:
    music.enqueue(Job(stall=True))
    count = len(music.created)
    created = post_task(api, TEXT_TO_MUSIC, {"model": "musicgen", "prompt": "endless"})
    task_id = created["task_id"]
    wait_until(
        lambda: {"polls": music.created[count].polls if len(music.created) > count else 0},
        lambda value: value["polls"] >= 2,
        what="the prediction being polled",
    )
    prediction = music.created[count]
    running = wait_for_task(api, task_id, statuses=frozenset({"running"}))
    assert running["progress"]["stage"] in {"queued", "generating"}
    response = api.post(f"/v1/tasks/{task_id}/cancel")
    assert response.status_code == 200, response.text
    task = wait_for_task(api, task_id)
    assert task["status"] == "canceled", task
    wait_until(
        lambda: {"canceled": list(music.canceled)},
        lambda value: prediction.id in value["canceled"],
        what="the upstream cancel",
    )
    assert prediction.status == "canceled"
    assert ledger_of(api, task_id) == [("debit", "-80.0000"), ("refund", "80.0000")]
    assert_books_balance(api)
