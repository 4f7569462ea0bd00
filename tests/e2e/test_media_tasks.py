"""Image and music tasks, uploads and artifacts, as a client meets them, on a real gateway."""

from __future__ import annotations

import base64
import hashlib
import io
import threading
import time
import wave
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest
import redis
from PIL import Image

from tests.e2e.gateway_process import GatewayProcess, start_gateway
from tests.e2e.media_support import (
    MEDIA_CONFIG,
    TERMINAL,
    assert_books_balance,
    data_uri,
    fetch_unsigned,
    ledger,
    parse_time,
    png_bytes,
    post_task,
    root_of,
    task_entries,
    wait_for_task,
    wait_until,
    wallet_balance,
    wav_bytes,
)

IMAGES = "/v1/images/generations"
IMAGE_TO_IMAGE = "/v1/images/image-to-image"
TEXT_TO_MUSIC = "/v1/music/text-to-music"
REFERENCE_MUSIC = "/v1/music/reference-audio-to-music"
WAV_TYPES = {"audio/wav", "audio/x-wav", "audio/wave", "audio/vnd.wave"}


def _redis_db(request: pytest.FixtureRequest, db: int) -> str:
    """A flushed database of the session's Redis, for one gateway (or one set of replicas)."""
    url: str = request.getfixturevalue("redis_url")
    shared = f"{url.rsplit('/', 1)[0]}/{db}"
    with redis.Redis.from_url(shared) as connection:
        connection.flushdb()
    return shared


@pytest.fixture(scope="module", params=["sqlite", "redis"])
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _start(
    workdir: Path, store_url: str | None, extra_env: dict[str, str] | None = None
) -> GatewayProcess:
    process = start_gateway(workdir, MEDIA_CONFIG, store_url=store_url, extra_env=extra_env)
    if process.api_key is None:  # a shared store prints no key and grants nothing
        process.api_key = process.new_key("default")
        process.grant("default", "1000")
    return process


@pytest.fixture(scope="module")
def media_gateway(
    store_kind: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    store_url = _redis_db(request, 11) if store_kind == "redis" else None
    process = _start(tmp_path_factory.mktemp("media"), store_url)
    try:
        process.grant("default", "20000")
        yield process
    finally:
        process.stop()


def _client(gateway: GatewayProcess, key: str) -> httpx.Client:
    return httpx.Client(
        base_url=root_of(gateway.base_url),
        headers={"Authorization": f"Bearer {key}"},
        timeout=15,
    )


@pytest.fixture(scope="module")
def api(media_gateway: GatewayProcess) -> Iterator[httpx.Client]:
    """A client of tenant `default`."""
    with _client(media_gateway, media_gateway.api_key or "") as client:
        yield client


@pytest.fixture(scope="module")
def other_api(media_gateway: GatewayProcess) -> Iterator[httpx.Client]:
    media_gateway.grant("other", "1000")
    with _client(media_gateway, media_gateway.new_key("other")) as client:
        yield client


@pytest.fixture(scope="module")
def root(media_gateway: GatewayProcess) -> str:
    return root_of(media_gateway.base_url)


def assert_envelope(task: dict[str, Any], capability: str, model: str, resolved: str) -> None:
    assert task["object"] == "task"
    assert task["task_id"].startswith("task_") and len(task["task_id"]) >= 5 + 22
    assert task["status"] in {"queued", "running", *TERMINAL}
    assert task["capability"] == capability
    assert task["model"] == model
    assert task["resolved_model"] == resolved
    assert isinstance(task["metadata"], dict)
    assert isinstance(task["input"], dict)
    assert set(task["progress"]) >= {"percent", "stage", "message"}
    assert isinstance(task["warnings"], list)
    assert set(task["billing"]) >= {
        "charged_credits",
        "refunded_credits",
        "charged_credits_usd_reference",
        "refunded_credits_usd_reference",
        "currency",
    }
    assert task["billing"]["currency"] == "USD"
    parse_time(task["created_at"])
    for name in ("started_at", "completed_at", "cancel_requested_at"):
        assert name in task
    assert task["links"] == {
        "self": f"/v1/tasks/{task['task_id']}",
        "cancel": f"/v1/tasks/{task['task_id']}/cancel",
    }


def assert_times(task: dict[str, Any]) -> None:
    created = parse_time(task["created_at"])
    started = parse_time(task["started_at"])
    completed = parse_time(task["completed_at"])
    assert created <= started <= completed


def assert_debit(client: httpx.Client, task_id: str, amount: str) -> list[dict[str, Any]]:
    entries = task_entries(client, task_id)
    assert entries, f"no ledger entry for {task_id}"
    assert entries[0]["kind"] == "debit"
    assert entries[0]["amount_credits"] == f"-{amount}"
    return entries


def download_png(root: str, image: dict[str, Any]) -> Image.Image:
    response = fetch_unsigned(root, image["url"])
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("image/png")
    assert len(response.content) == image["size_bytes"]
    picture = Image.open(io.BytesIO(response.content))
    picture.load()
    assert picture.format == "PNG"
    return picture


def download_wav(root: str, clip: dict[str, Any]) -> tuple[int, int, int, float]:
    response = fetch_unsigned(root, clip["audio_url"])
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].split(";")[0] in WAV_TYPES
    assert len(response.content) == clip["size_bytes"]
    with wave.open(io.BytesIO(response.content), "rb") as audio:
        frames, rate = audio.getnframes(), audio.getframerate()
        return audio.getnchannels(), audio.getsampwidth(), rate, frames / rate


# 1. text to image ------------------------------------------------------------------------------


def test_text_to_image_two_standard_images(api: httpx.Client, root: str) -> None:
    before = wallet_balance(api)
    body = {
        "model": "auto",
        "prompt": "a lighthouse at dusk",
        "aspect_ratio": "16:9",
        "n": 2,
        "metadata": {"order": "42"},
    }
    created = post_task(api, IMAGES, body, **{"X-Request-Id": "media-req-t2i-1"})
    assert_envelope(created, "text_to_image", "auto", "image-model-2")
    assert created["status"] in {"queued", "running"}
    assert created["metadata"] == {"order": "42"}
    assert created["error"] is None
    assert created["completed_at"] is None
    assert created["input"]["prompt"] == "a lighthouse at dusk"
    assert created["input"]["n"] == 2
    assert created["input"]["aspect_ratio"] == "16:9"
    assert created["billing"]["charged_credits"] == "100.0000"
    assert wallet_balance(api) == before - 100

    task = wait_for_task(api, created["task_id"])
    assert task["status"] == "succeeded", task
    assert_envelope(task, "text_to_image", "auto", "image-model-2")
    assert_times(task)
    assert task["error"] is None
    assert task["progress"]["percent"] == 100
    output = task["output"]
    assert output["type"] == "text_to_image"
    assert output["model"] == "image-model-2"
    assert len(output["images"]) == 2
    ids = set()
    for image in output["images"]:
        assert image["artifact_id"].startswith("art_")
        ids.add(image["artifact_id"])
        assert image["format"] == "png"
        assert image["mime_type"] == "image/png"
        assert (image["width"], image["height"]) == (512, 288)
        assert image["url"].split("?")[0] == f"/v1/artifacts/{image['artifact_id']}/content"
        picture = download_png(root, image)
        assert picture.size == (512, 288)
    assert len(ids) == 2
    assert task["usage"]["image_count"] == 2
    assert task["usage"]["image_pixels"] == 2 * 512 * 288
    assert task["usage"]["credits"] == "100.0000"
    lines = task["usage"]["lines"]
    assert sum(Decimal(line["billed_amount_credits"]) for line in lines) == 100
    assert task["billing"]["charged_credits"] == "100.0000"
    assert task["billing"]["refunded_credits"] == "0.0000"
    assert Decimal(task["billing"]["charged_credits_usd_reference"]) == Decimal("0.1")

    entries = assert_debit(api, task["task_id"], "100.0000")
    assert [e["kind"] for e in entries] == ["debit"]
    assert entries[0]["request_id"] == "media-req-t2i-1"
    assert wallet_balance(api) == before - 100
    assert_books_balance(api)


def test_text_to_image_hd_square(api: httpx.Client, root: str) -> None:
    before = wallet_balance(api)
    created = post_task(
        api, IMAGES, {"model": "image-model-2", "prompt": "a red fox", "quality": "hd"}
    )
    assert created["model"] == created["resolved_model"] == "image-model-2"
    task = wait_for_task(api, created["task_id"])
    assert task["status"] == "succeeded", task
    (image,) = task["output"]["images"]
    assert (image["width"], image["height"]) == (1024, 1024)
    assert download_png(root, image).size == (1024, 1024)
    assert task["input"]["quality"] == "hd"
    assert task["input"]["aspect_ratio"] == "1:1"  # the default
    assert task["input"]["n"] == 1  # the default
    assert task["billing"]["charged_credits"] == "300.0000"
    assert task["usage"]["image_count"] == 1
    assert_debit(api, task["task_id"], "300.0000")
    assert wallet_balance(api) == before - 300


def test_signed_urls_and_artifact_endpoints(api: httpx.Client, root: str) -> None:
    created = post_task(api, IMAGES, {"model": "auto", "prompt": "a signed picture", "n": 2})
    task = wait_for_task(api, created["task_id"])
    image, sibling = task["output"]["images"]
    # One artifact's signature does not open another.
    borrowed = f"/v1/artifacts/{sibling['artifact_id']}/content?{urlsplit(image['url']).query}"
    assert fetch_unsigned(root, borrowed).status_code in (403, 404)
    good = fetch_unsigned(root, image["url"])
    assert good.status_code == 200

    parts = urlsplit(image["url"])
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    assert set(query) >= {"expires", "signature"}
    assert 60 < int(query["expires"]) - time.time() <= 24 * 3600
    signature = query["signature"]
    altered = signature[:-1] + ("A" if signature[-1] != "A" else "B")
    bad = fetch_unsigned(root, f"{parts.path}?{urlencode({**query, 'signature': altered})}")
    assert bad.status_code in (403, 404), bad.text
    assert bad.content != good.content
    later = str(int(query["expires"]) + 3600)
    stretched = fetch_unsigned(root, f"{parts.path}?{urlencode({**query, 'expires': later})}")
    assert stretched.status_code in (403, 404)
    bare = fetch_unsigned(root, parts.path)
    assert bare.status_code == 401
    assert bare.json()["error"]["code"] == "invalid_api_key"

    meta = api.get(f"/v1/artifacts/{image['artifact_id']}")
    assert meta.status_code == 200, meta.text
    assert meta.json()["object"] == "artifact"
    assert meta.json()["artifact_id"] == image["artifact_id"]
    assert meta.json()["mime_type"] == "image/png"
    assert meta.json()["size_bytes"] == image["size_bytes"]
    assert meta.json()["sha256"] == hashlib.sha256(good.content).hexdigest()
    assert meta.json()["task_id"] == task["task_id"]
    content = api.get(f"/v1/artifacts/{image['artifact_id']}/content")
    assert content.status_code == 200
    assert content.content == good.content


# 2. image to image -----------------------------------------------------------------------------


def test_image_to_image_from_data_uri_then_from_an_output_artifact(
    api: httpx.Client, root: str
) -> None:
    before = wallet_balance(api)
    reference = png_bytes(300, 200, (255, 0, 0))
    created = post_task(
        api,
        IMAGE_TO_IMAGE,
        {
            "model": "auto",
            "prompt": "make it glow",
            "aspect_ratio": "auto",
            "image": {"type": "data_uri", "data_uri": data_uri(reference)},
        },
    )
    assert_envelope(created, "image_to_image", "auto", "image-model-2")
    assert created["billing"]["charged_credits"] == "60.0000"
    first = wait_for_task(api, created["task_id"])
    assert first["status"] == "succeeded", first
    # The data URI was ingested into tenant storage: the input names its artifact.
    ingested = first["input"]["image"]["artifact_id"]
    assert ingested.startswith("art_")
    assert "base64" not in str(first["input"])
    meta = api.get(f"/v1/artifacts/{ingested}")
    assert meta.status_code == 200, meta.text
    assert meta.json()["mime_type"] == "image/png"
    assert meta.json()["size_bytes"] == len(reference)
    assert meta.json()["sha256"] == hashlib.sha256(reference).hexdigest()
    stored = api.get(f"/v1/artifacts/{ingested}/content")
    assert stored.content == reference

    assert first["output"]["type"] == "image_to_image"
    (image,) = first["output"]["images"]
    # "auto" follows the reference's 3:2 shape at the standard long side of 512.
    assert (image["width"], image["height"]) == (512, 341)
    picture = download_png(root, image).convert("RGB")
    assert picture.size == (512, 341)
    red, green, blue = picture.getpixel((256, 170))  # type: ignore[misc]
    assert red >= 150 and green <= 105 and blue <= 105, "the red reference does not show"
    assert_debit(api, first["task_id"], "60.0000")

    second_created = post_task(
        api,
        IMAGE_TO_IMAGE,
        {
            "model": "image-model-2",
            "prompt": "again, wider",
            "quality": "hd",
            "aspect_ratio": "16:9",
            "image": {"type": "artifact", "artifact_id": image["artifact_id"]},
            "extra_images": [{"type": "artifact", "artifact_id": ingested}],
        },
    )
    second = wait_for_task(api, second_created["task_id"])
    assert second["status"] == "succeeded", second
    assert second["input"]["image"]["artifact_id"] == image["artifact_id"]
    assert [e["artifact_id"] for e in second["input"]["extra_images"]] == [ingested]
    (wide,) = second["output"]["images"]
    assert (wide["width"], wide["height"]) == (1024, 576)
    assert download_png(root, wide).size == (1024, 576)
    assert second["billing"]["charged_credits"] == "320.0000"
    assert_debit(api, second["task_id"], "320.0000")
    assert wallet_balance(api) == before - 60 - 320


def test_image_to_image_with_a_missing_artifact_is_rejected(api: httpx.Client) -> None:
    before = wallet_balance(api)
    response = api.post(
        IMAGE_TO_IMAGE,
        json={
            "model": "auto",
            "prompt": "x",
            "image": {"type": "artifact", "artifact_id": "art_doesnotexist000000000000"},
        },
    )
    assert response.status_code == 422, response.text
    assert response.json()["error"]["details"][0]["field"] == "image.artifact_id"
    # An artifact of the wrong kind is refused the same way, for images and for audio.
    wav = api.post("/v1/uploads", files={"file": ("a.wav", wav_bytes(0.3), "audio/wav")})
    png = api.post(
        "/v1/uploads", files={"file": ("a.png", png_bytes(4, 4, (0, 0, 0)), "image/png")}
    )
    wav_as_image = api.post(
        IMAGE_TO_IMAGE,
        json={
            "model": "auto",
            "prompt": "x",
            "extra_images": [{"type": "artifact", "artifact_id": wav.json()["artifact_id"]}],
            "image": {"type": "artifact", "artifact_id": png.json()["artifact_id"]},
        },
    )
    assert wav_as_image.status_code == 422, wav_as_image.text
    assert wav_as_image.json()["error"]["details"][0]["field"] == "extra_images[0].artifact_id"
    png_as_audio = api.post(
        REFERENCE_MUSIC,
        json={
            "model": "auto",
            "prompt": "x",
            "reference_audio": {"type": "artifact", "artifact_id": png.json()["artifact_id"]},
        },
    )
    assert png_as_audio.status_code == 422, png_as_audio.text
    assert png_as_audio.json()["error"]["details"][0]["field"] == "reference_audio.artifact_id"
    assert wallet_balance(api) == before


def test_sixteen_references_are_accepted(api: httpx.Client) -> None:
    references = [
        {"type": "data_uri", "data_uri": data_uri(png_bytes(16, 16, (i * 15, 0, 0)))}
        for i in range(16)
    ]
    created = post_task(
        api,
        IMAGE_TO_IMAGE,
        {"model": "auto", "prompt": "p", "image": references[0], "extra_images": references[1:]},
    )
    task = wait_for_task(api, created["task_id"])
    assert task["status"] == "succeeded", task
    assert len(task["input"]["extra_images"]) == 15
    assert all(ref["artifact_id"].startswith("art_") for ref in task["input"]["extra_images"])


@pytest.mark.parametrize(
    ("quality", "ratio", "size"),
    [
        ("standard", "9:16", (288, 512)),
        ("standard", "4:3", (512, 384)),
        ("standard", "3:4", (384, 512)),
        ("standard", "2:1", (512, 256)),
        ("standard", "auto", (512, 512)),
        ("hd", "9:16", (576, 1024)),
    ],
)
def test_image_sizes_follow_quality_and_aspect_ratio(
    api: httpx.Client, root: str, quality: str, ratio: str, size: tuple[int, int]
) -> None:
    body = {"model": "auto", "prompt": "s", "quality": quality, "aspect_ratio": ratio, "n": 4}
    created = post_task(api, IMAGES, body)
    unit = 50 if quality == "standard" else 300
    assert created["billing"]["charged_credits"] == f"{4 * unit}.0000"
    task = wait_for_task(api, created["task_id"])
    assert task["status"] == "succeeded", task
    assert len(task["output"]["images"]) == 4
    for image in task["output"]["images"]:
        assert (image["width"], image["height"]) == size
    assert download_png(root, task["output"]["images"][3]).size == size
    assert task["usage"]["image_pixels"] == 4 * size[0] * size[1]


def test_reference_data_uri_that_is_not_an_image_is_refused(api: httpx.Client) -> None:
    before = wallet_balance(api)
    fake = "data:image/png;base64," + base64.b64encode(b"hello, not a picture").decode()
    for image, codes in (
        ({"type": "data_uri", "data_uri": fake}, (415, 422)),
        ({"type": "data_uri", "data_uri": "data:image/png;base64,!!!"}, (422,)),
        ({"type": "data_uri", "data_uri": "https://example.com/a.png"}, (422,)),
    ):
        response = api.post(IMAGE_TO_IMAGE, json={"model": "auto", "prompt": "p", "image": image})
        assert response.status_code in codes, response.text
        if response.status_code == 422:
            assert response.json()["error"]["details"][0]["field"].startswith("image")
    assert wallet_balance(api) == before


# 3. music and uploads --------------------------------------------------------------------------


def test_text_to_music_alpha_two_clips_beta_one(api: httpx.Client, root: str) -> None:
    before = wallet_balance(api)
    alpha = post_task(
        api,
        TEXT_TO_MUSIC,
        {"model": "auto", "prompt": "calm piano by the sea", "title": "Harbour"},
    )
    assert_envelope(alpha, "text_to_music", "auto", "alpha-5.5")
    beta = post_task(
        api,
        TEXT_TO_MUSIC,
        {"model": "beta-music-2.6", "prompt": "fast drums", "instrumental": True},
    )
    assert_envelope(beta, "text_to_music", "beta-music-2.6", "beta-music-2.6")
    assert wallet_balance(api) == before - 80 - 50

    alpha = wait_for_task(api, alpha["task_id"])
    assert alpha["status"] == "succeeded", alpha
    assert_times(alpha)
    assert alpha["output"]["type"] == "text_to_music"
    assert alpha["output"]["model"] == "alpha-5.5"
    clips = alpha["output"]["clips"]
    assert [c["title"] for c in clips] == ["Harbour", "Harbour (take 2)"]
    assert len({c["artifact_id"] for c in clips}) == 2
    total = 0.0
    for clip in clips:
        assert clip["artifact_id"].startswith("art_")
        assert clip["format"] == "wav"
        assert clip["mime_type"] == "audio/wav"
        channels, width, rate, seconds = download_wav(root, clip)
        assert (channels, width) == (1, 2)
        assert 8000 <= rate <= 48000
        assert seconds > 0
        assert abs(seconds - clip["duration_seconds"]) < 0.01
        total += seconds
    assert alpha["usage"]["audio_seconds"] == pytest.approx(total, abs=0.01)
    assert alpha["usage"]["credits"] == "80.0000"
    assert alpha["billing"] == {
        **alpha["billing"],
        "charged_credits": "80.0000",
        "refunded_credits": "0.0000",
    }
    assert_debit(api, alpha["task_id"], "80.0000")

    beta = wait_for_task(api, beta["task_id"])
    assert beta["status"] == "succeeded", beta
    (clip,) = beta["output"]["clips"]
    _, _, _, seconds = download_wav(root, clip)
    assert seconds > 0
    assert clip["title"].lower() == "fast drums"
    assert beta["billing"]["charged_credits"] == "50.0000"
    assert_debit(api, beta["task_id"], "50.0000")
    assert wallet_balance(api) == before - 130


def test_upload_a_wav_and_use_it_as_reference_audio(api: httpx.Client, root: str) -> None:
    audio = wav_bytes(2.0)
    response = api.post("/v1/uploads", files={"file": ("hum.wav", audio, "audio/wav")})
    assert response.status_code == 201, response.text
    upload = response.json()
    assert upload["object"] == "artifact"
    assert upload["artifact_id"].startswith("art_")
    assert upload["filename"] == "hum.wav"
    assert upload["mime_type"] == "audio/wav"
    assert upload["size_bytes"] == len(audio)
    assert upload["sha256"] == hashlib.sha256(audio).hexdigest()
    parse_time(upload["created_at"])
    meta = api.get(f"/v1/artifacts/{upload['artifact_id']}")
    assert meta.status_code == 200
    assert meta.json() == upload
    assert api.get(f"/v1/artifacts/{upload['artifact_id']}/content").content == audio

    reference = {"type": "artifact", "artifact_id": upload["artifact_id"]}
    created = post_task(
        api,
        REFERENCE_MUSIC,
        {"model": "beta-music-2.6", "prompt": "the same, on strings", "reference_audio": reference},
    )
    assert_envelope(created, "reference_audio_to_music", "beta-music-2.6", "beta-music-2.6")
    task = wait_for_task(api, created["task_id"])
    assert task["status"] == "succeeded", task
    assert task["input"]["reference_audio"]["artifact_id"] == upload["artifact_id"]
    assert task["output"]["type"] == "reference_audio_to_music"
    (clip,) = task["output"]["clips"]
    _, _, _, seconds = download_wav(root, clip)
    # The simulator follows a WAV reference's length.
    assert seconds == pytest.approx(2.0, abs=0.01)
    assert clip["duration_seconds"] == pytest.approx(2.0, abs=0.01)
    assert_debit(api, task["task_id"], "50.0000")

    alpha = wait_for_task(
        api,
        post_task(
            api, REFERENCE_MUSIC, {"model": "auto", "prompt": "hum", "reference_audio": reference}
        )["task_id"],
    )
    assert alpha["status"] == "succeeded", alpha
    assert alpha["resolved_model"] == "alpha-5.5"
    assert len(alpha["output"]["clips"]) == 2


def test_upload_of_a_text_file_is_415(api: httpx.Client) -> None:
    response = api.post(
        "/v1/uploads", files={"file": ("notes.txt", b"just some words\n", "text/plain")}
    )
    assert response.status_code == 415, response.text
    assert response.json()["error"]["code"] == "unsupported_media_type"
    # A text file that claims to be audio is sniffed, not believed.
    lying = api.post("/v1/uploads", files={"file": ("x.wav", b"not a wav at all", "audio/wav")})
    assert lying.status_code == 415, lying.text
    as_json = api.post("/v1/uploads", json={"file": "x"})
    assert as_json.status_code == 415, as_json.text
    no_file = api.post(
        "/v1/uploads", files={"picture": ("a.png", png_bytes(4, 4, (0, 0, 0)), "image/png")}
    )
    assert no_file.status_code == 422, no_file.text
    assert no_file.json()["error"]["details"][0]["field"] == "file"


def test_upload_over_100_mib_is_413_and_leaves_nothing(
    media_gateway: GatewayProcess, api: httpx.Client, tmp_path: Path
) -> None:
    big = tmp_path / "big.png"
    with big.open("wb") as out:
        out.write(png_bytes(4, 4, (0, 0, 0)))
        out.truncate(100 * 1024 * 1024 + 1)
    with big.open("rb") as source:
        response = api.post(
            "/v1/uploads", files={"file": ("big.png", source, "image/png")}, timeout=120
        )
    assert response.status_code == 413, response.text
    assert response.json()["error"]["code"] == "payload_too_large"
    data_dir = Path(media_gateway.env["GATEWAY_DATA_DIR"])
    leftovers = [p for p in data_dir.rglob("*") if p.is_file() and p.stat().st_size > 50 << 20]
    assert leftovers == []


def test_upload_filename_is_sanitized(api: httpx.Client) -> None:
    png = png_bytes(4, 4, (9, 9, 9))
    response = api.post(
        "/v1/uploads", files={"file": ("../../etc/pass\nwd.png", png, "application/octet-stream")}
    )
    assert response.status_code == 201, response.text
    upload = response.json()
    assert upload["mime_type"] == "image/png"  # sniffed from the bytes, not the declared type
    filename = upload["filename"]
    assert "/" not in filename and "\\" not in filename and not filename.startswith("."), filename
    assert filename.endswith(".png")


def test_upload_a_png_and_use_it_as_an_image_reference(api: httpx.Client) -> None:
    png = png_bytes(64, 128, (0, 0, 255))
    response = api.post("/v1/uploads", files={"file": ("blue.png", png, "image/png")})
    assert response.status_code == 201, response.text
    assert response.json()["mime_type"] == "image/png"
    artifact = response.json()["artifact_id"]
    created = post_task(
        api,
        IMAGE_TO_IMAGE,
        {"model": "auto", "prompt": "p", "image": {"type": "artifact", "artifact_id": artifact}},
    )
    task = wait_for_task(api, created["task_id"])
    assert task["status"] == "succeeded", task
    (image,) = task["output"]["images"]
    assert (image["width"], image["height"]) == (512, 512)


# 4. failures and partial results ---------------------------------------------------------------


def test_failed_task_is_refunded_in_full(api: httpx.Client) -> None:
    before = wallet_balance(api)
    created = post_task(api, IMAGES, {"model": "auto", "prompt": "doomed [[sim:fail=502]]", "n": 2})
    assert wallet_balance(api) == before - 100
    task = wait_for_task(api, created["task_id"])
    assert task["status"] == "failed", task
    assert task["error"]["code"] == "upstream_error"
    assert task["error"]["message"]
    assert isinstance(task["error"]["retryable"], bool)
    assert not task["output"] or not task["output"].get("images")
    assert task["completed_at"] is not None
    assert task["billing"]["charged_credits"] == "100.0000"
    assert task["billing"]["refunded_credits"] == "100.0000"
    entries = task_entries(api, task["task_id"])
    assert [(e["kind"], e["amount_credits"]) for e in entries] == [
        ("debit", "-100.0000"),
        ("refund", "100.0000"),
    ]
    assert wallet_balance(api) == before
    assert_books_balance(api)


def test_failed_music_task_is_refunded_in_full(api: httpx.Client) -> None:
    before = wallet_balance(api)
    created = post_task(api, TEXT_TO_MUSIC, {"model": "alpha-5.5", "prompt": "x [[sim:fail=503]]"})
    task = wait_for_task(api, created["task_id"])
    assert task["status"] == "failed", task
    assert task["error"]["code"] == "model_unavailable"
    assert task["error"]["retryable"] is True
    entries = task_entries(api, task["task_id"])
    assert [(e["kind"], e["amount_credits"]) for e in entries] == [
        ("debit", "-80.0000"),
        ("refund", "80.0000"),
    ]
    assert wallet_balance(api) == before


def test_fewer_images_than_asked_refunds_the_difference(api: httpx.Client, root: str) -> None:
    before = wallet_balance(api)
    created = post_task(api, IMAGES, {"model": "auto", "prompt": "sparse [[sim:images=1]]", "n": 3})
    assert created["billing"]["charged_credits"] == "150.0000"
    task = wait_for_task(api, created["task_id"])
    assert task["status"] == "succeeded", task
    (image,) = task["output"]["images"]
    assert download_png(root, image).size == (512, 512)
    assert task["usage"]["image_count"] == 1
    assert [w["code"] for w in task["warnings"]] == ["fewer_images"]
    assert task["usage"]["credits"] == "50.0000"
    assert task["billing"]["charged_credits"] == "150.0000"
    assert task["billing"]["refunded_credits"] == "100.0000"
    entries = task_entries(api, task["task_id"])
    assert [(e["kind"], e["amount_credits"]) for e in entries] == [
        ("debit", "-150.0000"),
        ("refund", "100.0000"),
    ]
    assert wallet_balance(api) == before - 50
    assert_books_balance(api)


def test_no_images_at_all_fails_with_full_refund(api: httpx.Client) -> None:
    before = wallet_balance(api)
    created = post_task(api, IMAGES, {"model": "auto", "prompt": "none [[sim:images=0]]", "n": 2})
    task = wait_for_task(api, created["task_id"])
    assert task["status"] == "failed", task
    assert task["error"]["code"] == "no_output"
    assert task["billing"]["refunded_credits"] == "100.0000"
    entries = task_entries(api, task["task_id"])
    assert [(e["kind"], e["amount_credits"]) for e in entries] == [
        ("debit", "-100.0000"),
        ("refund", "100.0000"),
    ]
    assert wallet_balance(api) == before


@pytest.mark.parametrize(
    "url",
    [
        "https://127.0.0.1:1/picture.png",
        "https://localhost/picture.png",
        "https://169.254.169.254/latest/meta-data/",
        "https://[::1]/picture.png",
        "https://10.0.0.1/picture.png",
        "https://user:pw@example.com/picture.png",
    ],
)
def test_reference_urls_to_private_addresses_are_refused(api: httpx.Client, url: str) -> None:
    before = wallet_balance(api)
    response = api.post(
        IMAGE_TO_IMAGE,
        json={"model": "auto", "prompt": "p", "image": {"type": "url", "url": url}},
    )
    if response.status_code == 422:
        assert response.json()["error"]["details"][0]["field"].startswith("image")
        assert wallet_balance(api) == before
        return
    assert response.status_code == 202, response.text
    task = wait_for_task(api, response.json()["task_id"])
    assert task["status"] == "failed", task
    assert task["error"]["code"] == "validation_error"
    assert task["error"]["retryable"] is False
    assert "127.0.0.1" not in task["error"]["message"] or "127.0.0.1" in url
    assert task["billing"]["refunded_credits"] == task["billing"]["charged_credits"] == "60.0000"
    assert wallet_balance(api) == before


def test_progress_is_reported_while_a_task_runs(api: httpx.Client) -> None:
    created = post_task(
        api, IMAGES, {"model": "auto", "prompt": "steady [[sim:task_ms=3000]]", "n": 3}
    )
    percents: list[float] = []

    def look() -> dict[str, Any]:
        task: dict[str, Any] = api.get(f"/v1/tasks/{created['task_id']}").json()
        percents.append(task["progress"]["percent"])
        return task

    midway = wait_until(
        look,
        lambda task: task["status"] != "queued" and task["progress"]["percent"] > 0,
        timeout=10,
        what="progress",
    )
    assert midway["status"] == "running", (midway, percents)
    assert 0 < midway["progress"]["percent"] < 100
    assert midway["progress"]["stage"] in {"preparing", "starting", "generating", "encoding"}
    assert isinstance(midway["progress"]["message"], str)
    assert midway["started_at"] is not None and midway["completed_at"] is None
    assert midway["output"] in ({}, None)
    task = wait_until(look, lambda task: task["status"] in TERMINAL, what="the end")
    assert task["status"] == "succeeded"
    assert task["progress"]["percent"] == 100
    assert len(task["output"]["images"]) == 3
    assert percents == sorted(percents), f"progress went backwards: {percents}"
    assert len(set(percents)) >= 3, percents


def test_progress_never_goes_backwards_while_references_are_read(api: httpx.Client) -> None:
    """Reading 16 big references keeps the task in its first stage long enough to be seen."""
    reference = {"type": "data_uri", "data_uri": data_uri(png_bytes(2000, 2000, (5, 5, 5)))}
    created = post_task(
        api,
        IMAGE_TO_IMAGE,
        {
            "model": "auto",
            "prompt": "p [[sim:task_ms=1500]]",
            "image": reference,
            "extra_images": [reference] * 15,
        },
    )
    seen: list[tuple[str, float]] = []

    def look() -> dict[str, Any]:
        task: dict[str, Any] = api.get(f"/v1/tasks/{created['task_id']}").json()
        seen.append((task["progress"]["stage"], task["progress"]["percent"]))
        return task

    task = wait_until(look, lambda task: task["status"] in TERMINAL, what="the end")
    assert task["status"] == "succeeded", task
    changes = [s for i, s in enumerate(seen) if i == 0 or s != seen[i - 1]]
    percents = [percent for _, percent in seen]
    assert percents == sorted(percents), f"progress went backwards: {changes[:6]}"


def test_concurrent_creates_never_overdraw(media_gateway: GatewayProcess) -> None:
    media_gateway.grant("racer", "120")
    with _client(media_gateway, media_gateway.new_key("racer")) as racer:
        statuses: list[int] = []
        lock = threading.Lock()

        def create() -> None:
            response = racer.post(IMAGES, json={"model": "auto", "prompt": "race"})
            with lock:
                statuses.append(response.status_code)

        threads = [threading.Thread(target=create) for _ in range(10)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(statuses) == [202, 202] + [402] * 8
        assert wallet_balance(racer) == 20
        tasks = racer.get("/v1/tasks").json()["data"]
        assert len(tasks) == 2
        for task in tasks:
            assert wait_for_task(racer, task["task_id"])["status"] == "succeeded"
        assert [e["kind"] for e in ledger(racer)] == ["debit", "debit", "grant"]
        assert_books_balance(racer)


# 5. cancel -------------------------------------------------------------------------------------


def test_cancel_right_after_create_is_refunded_in_full(api: httpx.Client) -> None:
    before = wallet_balance(api)
    created = post_task(
        api, IMAGES, {"model": "auto", "prompt": "slow [[sim:task_ms=8000]]", "n": 2}
    )
    response = api.post(f"/v1/tasks/{created['task_id']}/cancel")
    assert response.status_code == 200, response.text
    canceling = response.json()
    assert canceling["task_id"] == created["task_id"]
    assert canceling["cancel_requested_at"] is not None
    assert canceling["status"] in {"canceled", "running"}, canceling
    task = wait_for_task(api, created["task_id"], timeout=6)
    assert task["status"] == "canceled", task
    assert task["completed_at"] is not None
    assert task["error"] is None or task["error"]["code"]
    assert not task["output"] or not task["output"].get("images")
    assert task["billing"]["refunded_credits"] == "100.0000"
    entries = task_entries(api, task["task_id"])
    assert [(e["kind"], e["amount_credits"]) for e in entries] == [
        ("debit", "-100.0000"),
        ("refund", "100.0000"),
    ]
    assert wallet_balance(api) == before


def test_cancel_a_running_stalled_task(api: httpx.Client) -> None:
    before = wallet_balance(api)
    created = post_task(api, TEXT_TO_MUSIC, {"model": "alpha-5.5", "prompt": "[[sim:stall]] x"})
    task_id = created["task_id"]
    running = wait_for_task(api, task_id, statuses=frozenset({"running"}), timeout=10)
    assert running["started_at"] is not None
    assert running["cancel_requested_at"] is None
    listed = api.get("/v1/tasks", params={"status": "running", "limit": "100"}).json()["data"]
    assert task_id in {t["task_id"] for t in listed}
    response = api.post(f"/v1/tasks/{task_id}/cancel")
    assert response.status_code == 200, response.text
    requested = response.json()
    assert requested["cancel_requested_at"] is not None
    assert requested["status"] in {"running", "canceled"}
    task = wait_for_task(api, task_id, timeout=10)
    assert task["status"] == "canceled", task
    assert task["cancel_requested_at"] == requested["cancel_requested_at"]
    assert parse_time(task["cancel_requested_at"]) <= parse_time(task["completed_at"])
    assert task["billing"]["charged_credits"] == "80.0000"
    assert task["billing"]["refunded_credits"] == "80.0000"
    assert wallet_balance(api) == before

    again = api.post(f"/v1/tasks/{task_id}/cancel")
    assert again.status_code == 200
    assert again.json()["status"] == "canceled"
    assert again.json()["completed_at"] == task["completed_at"]
    assert again.json()["cancel_requested_at"] == task["cancel_requested_at"]
    assert again.json()["billing"] == task["billing"]
    entries = task_entries(api, task_id)
    assert [(e["kind"], e["amount_credits"]) for e in entries] == [
        ("debit", "-80.0000"),
        ("refund", "80.0000"),
    ]
    assert wallet_balance(api) == before
    assert_books_balance(api)


def test_cancel_a_running_image_task_refunds_every_image(api: httpx.Client) -> None:
    before = wallet_balance(api)
    created = post_task(api, IMAGES, {"model": "auto", "prompt": "[[sim:stall]]", "n": 3})
    wait_for_task(api, created["task_id"], statuses=frozenset({"running"}))
    assert api.post(f"/v1/tasks/{created['task_id']}/cancel").status_code == 200
    task = wait_for_task(api, created["task_id"])
    assert task["status"] == "canceled"
    assert task["billing"]["refunded_credits"] == task["billing"]["charged_credits"] == "150.0000"
    assert task["usage"]["credits"] == "0.0000"
    assert wallet_balance(api) == before


def test_cancel_a_finished_task_changes_nothing(api: httpx.Client) -> None:
    created = post_task(api, IMAGES, {"model": "auto", "prompt": "done soon"})
    task = wait_for_task(api, created["task_id"])
    assert task["status"] == "succeeded"
    balance = wallet_balance(api)
    response = api.post(f"/v1/tasks/{task['task_id']}/cancel")
    assert response.status_code == 200
    unchanged = response.json()
    assert unchanged["status"] == "succeeded"
    assert unchanged["cancel_requested_at"] is None
    assert {k: v for k, v in unchanged["output"].items() if k != "images"} == {
        k: v for k, v in task["output"].items() if k != "images"
    }
    assert [i["artifact_id"] for i in unchanged["output"]["images"]] == [
        i["artifact_id"] for i in task["output"]["images"]
    ]
    assert unchanged["billing"] == task["billing"]
    assert [e["kind"] for e in task_entries(api, task["task_id"])] == ["debit"]
    assert wallet_balance(api) == balance


def test_unknown_task_is_404(api: httpx.Client) -> None:
    for response in (
        api.get("/v1/tasks/task_doesnotexist00000000000000"),
        api.post("/v1/tasks/task_doesnotexist00000000000000/cancel"),
    ):
        assert response.status_code == 404, response.text
        assert response.json()["error"]["code"] == "not_found"


def test_queued_task_cancel_and_a_later_worker(
    store_kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """With no worker the task stays queued: cancel ends it at once; a later worker runs the
    tasks that are still queued and leaves the canceled one alone."""
    store_url = _redis_db(request, 12) if store_kind == "redis" else None
    idle = _start(tmp_path, store_url, {"GATEWAY_WORKERS": "0"})
    try:
        with _client(idle, idle.api_key or "") as client:
            before = wallet_balance(client)
            doomed = post_task(client, IMAGES, {"model": "auto", "prompt": "q", "n": 2})
            kept = post_task(client, TEXT_TO_MUSIC, {"model": "beta-music-2.6", "prompt": "k"})
            time.sleep(0.5)
            queued = client.get(f"/v1/tasks/{doomed['task_id']}").json()
            assert queued["status"] == "queued"
            assert queued["started_at"] is None
            listed = client.get("/v1/tasks", params={"status": "queued"}).json()["data"]
            assert {t["task_id"] for t in listed} == {doomed["task_id"], kept["task_id"]}
            assert wallet_balance(client) == before - 100 - 50

            response = client.post(f"/v1/tasks/{doomed['task_id']}/cancel")
            assert response.status_code == 200, response.text
            canceled = response.json()
            assert canceled["status"] == "canceled"
            assert canceled["started_at"] is None
            assert canceled["completed_at"] is not None
            assert canceled["cancel_requested_at"] is not None
            assert canceled["billing"]["refunded_credits"] == "100.0000"
            assert wallet_balance(client) == before - 50
            again = client.post(f"/v1/tasks/{doomed['task_id']}/cancel").json()
            assert again["status"] == "canceled"
            assert again["completed_at"] == canceled["completed_at"]
            assert [e["kind"] for e in task_entries(client, doomed["task_id"])] == [
                "debit",
                "refund",
            ]
    finally:
        idle.stop()

    busy = start_gateway(tmp_path, MEDIA_CONFIG, store_url=store_url)
    busy.api_key = idle.api_key
    try:
        with _client(busy, busy.api_key or "") as client:
            done = wait_for_task(client, kept["task_id"])
            assert done["status"] == "succeeded", done
            assert len(done["output"]["clips"]) == 1
            assert client.get(f"/v1/tasks/{doomed['task_id']}").json()["status"] == "canceled"
            assert wallet_balance(client) == before - 50
            assert [e["kind"] for e in task_entries(client, kept["task_id"])] == ["debit"]
            assert_books_balance(client)
    finally:
        busy.stop()


def test_a_killed_gateways_task_is_taken_over_after_its_lease(
    store_kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    store_url = _redis_db(request, 13) if store_kind == "redis" else None
    first = _start(tmp_path, store_url)
    try:
        with _client(first, first.api_key or "") as client:
            quick = post_task(client, IMAGES, {"model": "auto", "prompt": "kept"})
            kept_url = wait_for_task(client, quick["task_id"])["output"]["images"][0]["url"]
            before = wallet_balance(client)
            created = post_task(
                client, IMAGES, {"model": "auto", "prompt": "survivor [[sim:task_ms=2500]]"}
            )
            wait_for_task(client, created["task_id"], statuses=frozenset({"running"}))
    finally:
        first.process.kill()
        first.process.wait(timeout=10)
    second = start_gateway(tmp_path, MEDIA_CONFIG, store_url=store_url)
    second.api_key = first.api_key
    try:
        with _client(second, second.api_key or "") as client:
            task = wait_for_task(client, created["task_id"], timeout=30)
            assert task["status"] == "succeeded", task
            (image,) = task["output"]["images"]
            assert download_png(root_of(second.base_url), image).size == (512, 512)
            # A URL handed out before the restart still opens its artifact.
            assert fetch_unsigned(root_of(second.base_url), kept_url).status_code == 200
            assert [e["kind"] for e in task_entries(client, task["task_id"])] == ["debit"]
            assert wallet_balance(client) == before - 50
            assert_books_balance(client)
    finally:
        second.stop()


def test_a_task_whose_workers_keep_dying_fails_once_with_a_full_refund(
    store_kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """A stalled task outlives gateway after gateway (killed, lease expires, claimed again) until
    its claims run out: then it fails, refunded exactly once; it never stays running."""
    store_url = _redis_db(request, 15) if store_kind == "redis" else None
    gateway = _start(tmp_path, store_url)
    key = gateway.api_key or ""
    with _client(gateway, key) as client:
        before = wallet_balance(client)
        created = post_task(client, IMAGES, {"model": "auto", "prompt": "[[sim:stall]]", "n": 2})
        wait_for_task(client, created["task_id"], statuses=frozenset({"running"}))
    final: dict[str, Any] | None = None
    for _ in range(6):
        gateway.process.kill()
        gateway.process.wait(timeout=10)
        gateway = start_gateway(tmp_path, MEDIA_CONFIG, store_url=store_url)
        with _client(gateway, key) as client:
            try:
                final = wait_for_task(client, created["task_id"], timeout=6)
                break
            except AssertionError:
                continue
    try:
        assert final is not None, "the task never ended"
        assert final["status"] == "failed", final
        assert final["error"]["code"]
        with _client(gateway, key) as client:
            entries = task_entries(client, created["task_id"])
            assert [(e["kind"], e["amount_credits"]) for e in entries] == [
                ("debit", "-100.0000"),
                ("refund", "100.0000"),
            ]
            assert wallet_balance(client) == before
            assert_books_balance(client)
    finally:
        gateway.stop()


def test_redis_replicas_one_takes_creates_the_other_runs_them(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Two replicas on one Redis with a shared artifact folder and signing secret: tasks made
    on the one without workers run on the other; URLs signed by one open on the other."""
    shared = _redis_db(request, 14)
    env = {
        "GATEWAY_ARTIFACTS_DIR": str(tmp_path / "artifacts"),
        "GATEWAY_SIGNING_SECRET": "media-e2e-shared-signing-secret-0123456789",
    }
    front = _start(tmp_path / "front", shared, {**env, "GATEWAY_WORKERS": "0"})
    try:
        back = start_gateway(tmp_path / "back", MEDIA_CONFIG, store_url=shared, extra_env=env)
        try:
            with (
                _client(front, front.api_key or "") as at_front,
                _client(back, front.api_key or "") as at_back,
            ):
                before = wallet_balance(at_front)
                upload = at_front.post(
                    "/v1/uploads", files={"file": ("r.wav", wav_bytes(1.5), "audio/wav")}
                )
                assert upload.status_code == 201, upload.text
                reference = {"type": "artifact", "artifact_id": upload.json()["artifact_id"]}
                music = post_task(
                    at_front,
                    REFERENCE_MUSIC,
                    {"model": "alpha-5.5", "prompt": "r", "reference_audio": reference},
                )
                image = post_task(at_front, IMAGES, {"model": "auto", "prompt": "i", "n": 2})
                stalled = post_task(at_front, IMAGES, {"model": "auto", "prompt": "[[sim:stall]]"})
                done = wait_for_task(at_front, music["task_id"])
                assert done["status"] == "succeeded", done
                assert [c["duration_seconds"] for c in done["output"]["clips"]] == [1.5, 1.5]
                for clip in done["output"]["clips"]:
                    assert (
                        fetch_unsigned(root_of(back.base_url), clip["audio_url"]).status_code == 200
                    )
                pictures = wait_for_task(at_back, image["task_id"])
                assert pictures["status"] == "succeeded"
                for picture in pictures["output"]["images"]:
                    assert download_png(root_of(front.base_url), picture).size == (512, 512)
                # Cancel on the front reaches the worker on the back.
                wait_for_task(at_front, stalled["task_id"], statuses=frozenset({"running"}))
                assert at_front.post(f"/v1/tasks/{stalled['task_id']}/cancel").status_code == 200
                canceled = wait_for_task(at_back, stalled["task_id"])
                assert canceled["status"] == "canceled"
                assert wallet_balance(at_back) == before - 80 - 100
                assert_books_balance(at_back)
        finally:
            back.stop()
    finally:
        front.stop()


# 6. idempotency and insufficient credits -------------------------------------------------------


def test_idempotent_create_is_replayed_and_debited_once(
    api: httpx.Client, other_api: httpx.Client
) -> None:
    before = wallet_balance(api)
    body = {"model": "beta-music-2.6", "prompt": "once only", "metadata": {"k": "v"}}
    first = api.post(TEXT_TO_MUSIC, json=body, headers={"Idempotency-Key": "media-idem-1"})
    assert first.status_code == 202, first.text
    assert "idempotent-replayed" not in first.headers
    second = api.post(TEXT_TO_MUSIC, json=body, headers={"Idempotency-Key": "media-idem-1"})
    assert second.status_code == 202, second.text
    assert second.headers["idempotent-replayed"] == "true"
    task_id = first.json()["task_id"]
    assert second.json()["task_id"] == task_id
    reordered = {"metadata": {"k": "v"}, "prompt": "once only", "model": "beta-music-2.6"}
    third = api.post(TEXT_TO_MUSIC, json=reordered, headers={"Idempotency-Key": "media-idem-1"})
    assert third.status_code == 202
    assert third.json()["task_id"] == task_id
    assert wallet_balance(api) == before - 50

    reused = api.post(
        TEXT_TO_MUSIC,
        json={**body, "prompt": "something else"},
        headers={"Idempotency-Key": "media-idem-1"},
    )
    assert reused.status_code == 422, reused.text
    assert reused.json()["error"]["code"] == "idempotency_key_reused"
    # The same key on another path is another scope.
    image = api.post(
        IMAGES, json={"model": "auto", "prompt": "p"}, headers={"Idempotency-Key": "media-idem-1"}
    )
    assert image.status_code == 202, image.text
    assert image.json()["task_id"] != task_id

    # The same key of another tenant is another scope too.
    theirs = other_api.post(TEXT_TO_MUSIC, json=body, headers={"Idempotency-Key": "media-idem-1"})
    assert theirs.status_code == 202, theirs.text
    assert "idempotent-replayed" not in theirs.headers
    assert theirs.json()["task_id"] != task_id
    wait_for_task(other_api, theirs.json()["task_id"])

    task = wait_for_task(api, task_id)
    assert task["status"] == "succeeded"
    wait_for_task(api, image.json()["task_id"])
    assert [e["kind"] for e in task_entries(api, task_id)] == ["debit"]
    listed = api.get("/v1/tasks", params={"limit": "100"}).json()["data"]
    assert sum(1 for t in listed if t["task_id"] == task_id) == 1
    assert wallet_balance(api) == before - 50 - 50


def test_insufficient_credits_is_402_and_creates_nothing(media_gateway: GatewayProcess) -> None:
    media_gateway.grant("poor", "10")
    with _client(media_gateway, media_gateway.new_key("poor")) as poor:
        assert wallet_balance(poor) == 10
        for path, body in (
            (IMAGES, {"model": "auto", "prompt": "too dear"}),
            (TEXT_TO_MUSIC, {"model": "alpha-5.5", "prompt": "too dear"}),
        ):
            response = poor.post(path, json=body, headers={"Idempotency-Key": f"poor-{path}"})
            assert response.status_code == 402, response.text
            error = response.json()["error"]
            assert error["code"] == "insufficient_credits"
            assert error["request_id"] == response.headers["x-request-id"]
        listed = poor.get("/v1/tasks")
        assert listed.status_code == 200
        assert listed.json()["data"] == []
        assert [(e["kind"], e["amount_credits"]) for e in ledger(poor)] == [("grant", "10.0000")]
        assert wallet_balance(poor) == 10

        # Exactly enough is enough; the wallet lands on zero, never below.
        # The 402 released its Idempotency-Key: the same key runs again, for real.
        media_gateway.grant("poor", "40")
        retried = poor.post(
            IMAGES,
            json={"model": "auto", "prompt": "too dear"},
            headers={"Idempotency-Key": f"poor-{IMAGES}"},
        )
        assert retried.status_code == 202, retried.text
        assert "idempotent-replayed" not in retried.headers
        created = retried.json()
        assert wallet_balance(poor) == 0
        wait_for_task(poor, created["task_id"])
        again = poor.post(TEXT_TO_MUSIC, json={"model": "beta-music-2.6", "prompt": "more"})
        assert again.status_code == 402
        assert len(poor.get("/v1/tasks").json()["data"]) == 1
        assert_books_balance(poor)


def _in_threads(count: int, work: Callable[[int], httpx.Response]) -> list[httpx.Response]:
    results: list[httpx.Response | None] = [None] * count
    barrier = threading.Barrier(count)

    def run(index: int) -> None:
        barrier.wait()
        results[index] = work(index)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(r is not None for r in results)
    return [r for r in results if r is not None]


def test_concurrent_same_key_creates_make_one_task(
    media_gateway: GatewayProcess, api: httpx.Client
) -> None:
    before = wallet_balance(api)
    body = {"model": "auto", "prompt": "racing key", "n": 2}

    def create(_: int) -> httpx.Response:
        with _client(media_gateway, media_gateway.api_key or "") as client:
            return client.post(IMAGES, json=body, headers={"Idempotency-Key": "media-race-1"})

    responses = _in_threads(8, create)
    assert {r.status_code for r in responses} <= {202, 409}, [r.text for r in responses]
    accepted = [r for r in responses if r.status_code == 202]
    assert accepted
    assert len({r.json()["task_id"] for r in accepted}) == 1
    for response in responses:
        if response.status_code == 409:
            assert response.json()["error"]["code"] == "idempotency_request_in_progress"
    task_id = accepted[0].json()["task_id"]
    wait_for_task(api, task_id)
    assert [e["kind"] for e in task_entries(api, task_id)] == ["debit"]
    assert wallet_balance(api) == before - 100


def test_concurrent_cancels_refund_once(media_gateway: GatewayProcess, api: httpx.Client) -> None:
    before = wallet_balance(api)
    created = post_task(api, TEXT_TO_MUSIC, {"model": "alpha-5.5", "prompt": "[[sim:stall]]"})
    wait_for_task(api, created["task_id"], statuses=frozenset({"running"}))

    def cancel(_: int) -> httpx.Response:
        with _client(media_gateway, media_gateway.api_key or "") as client:
            return client.post(f"/v1/tasks/{created['task_id']}/cancel")

    responses = _in_threads(8, cancel)
    assert {r.status_code for r in responses} == {200}
    assert len({r.json()["cancel_requested_at"] for r in responses}) == 1
    task = wait_for_task(api, created["task_id"])
    assert task["status"] == "canceled"
    assert [e["kind"] for e in task_entries(api, created["task_id"])] == ["debit", "refund"]
    assert wallet_balance(api) == before


def test_cancel_racing_completion_settles_one_way(api: httpx.Client) -> None:
    """Cancels that land around the moment tasks finish: each task either succeeded and keeps
    its charge and output, or was canceled with a full refund and no output; never both."""
    before = wallet_balance(api)
    made = [
        post_task(api, IMAGES, {"model": "auto", "prompt": f"edge {i} [[sim:task_ms=400]]"})
        for i in range(8)
    ]
    for index, task in enumerate(made):
        time.sleep(0.02 * index)
        assert api.post(f"/v1/tasks/{task['task_id']}/cancel").status_code == 200
    outcomes = []
    for task in made:
        final = wait_for_task(api, task["task_id"])
        entries = task_entries(api, task["task_id"])
        outcomes.append(final["status"])
        if final["status"] == "succeeded":
            assert len(final["output"]["images"]) == 1
            assert [e["kind"] for e in entries] == ["debit"]
            assert final["billing"]["refunded_credits"] == "0.0000"
        else:
            assert final["status"] == "canceled", final
            assert not final["output"] or not final["output"].get("images")
            assert [e["kind"] for e in entries] == ["debit", "refund"]
            assert final["billing"]["refunded_credits"] == "50.0000"
    kept = outcomes.count("succeeded")
    assert wallet_balance(api) == before - 50 * kept
    assert_books_balance(api)


def test_rate_limited_creates_are_429_and_cost_nothing(media_gateway: GatewayProcess) -> None:
    media_gateway.grant("limited", "1000")
    with _client(media_gateway, media_gateway.new_key("limited")) as limited:
        statuses = [
            limited.post(IMAGES, json={"model": "auto", "prompt": f"r{i}"}) for i in range(4)
        ]
        codes = [r.status_code for r in statuses]
        assert codes == [202, 202, 202, 429], codes
        refused = statuses[3]
        assert refused.json()["error"]["code"] == "rate_limited"
        assert refused.json()["error"]["retryable"] is True
        assert int(refused.headers["retry-after"]) >= 1
    # The limit is per key: another key of the tenant reads the books.
    with _client(media_gateway, media_gateway.new_key("limited")) as reader:
        # (Three requests a minute for this key as well: no polling here.)
        assert [e["kind"] for e in ledger(reader)] == ["debit", "debit", "debit", "grant"]
        assert wallet_balance(reader) == 1000 - 150
    # As on every limited response (and on chat's 429): OpenAI's x-ratelimit-* headers.
    assert refused.headers.get("x-ratelimit-limit-requests") == "3", dict(refused.headers)
    assert refused.headers.get("x-ratelimit-remaining-requests") == "0", dict(refused.headers)


def test_reference_audio_url_to_a_private_address_is_refused(api: httpx.Client) -> None:
    before = wallet_balance(api)
    response = api.post(
        REFERENCE_MUSIC,
        json={
            "model": "beta-music-2.6",
            "prompt": "p",
            "reference_audio": {"type": "url", "url": "https://127.0.0.1/hum.wav"},
        },
    )
    if response.status_code == 202:
        task = wait_for_task(api, response.json()["task_id"])
        assert task["status"] == "failed", task
        assert task["error"]["code"] == "validation_error"
    else:
        assert response.status_code == 422, response.text
    assert wallet_balance(api) == before


# 7. validation ---------------------------------------------------------------------------------

_PNG_URI = data_uri(png_bytes(8, 8, (1, 2, 3)))
_REF = {"type": "data_uri", "data_uri": _PNG_URI}
_I2I = {"model": "auto", "prompt": "p", "image": _REF}
_MUSIC = {"model": "alpha-5.5", "prompt": "p"}

VALIDATION_CASES = [
    ("n_zero", IMAGES, {"model": "auto", "prompt": "p", "n": 0}, {"n"}),
    ("n_five", IMAGES, {"model": "auto", "prompt": "p", "n": 5}, {"n"}),
    ("n_string", IMAGES, {"model": "auto", "prompt": "p", "n": "2"}, {"n"}),
    ("quality", IMAGES, {"model": "auto", "prompt": "p", "quality": "ultra"}, {"quality"}),
    ("ratio", IMAGES, {"model": "auto", "prompt": "p", "aspect_ratio": "5:4"}, {"aspect_ratio"}),
    (
        "auto_ratio_hd",
        IMAGES,
        {"model": "auto", "prompt": "p", "aspect_ratio": "auto", "quality": "hd"},
        {"aspect_ratio", "quality"},
    ),
    ("empty_prompt_image", IMAGES, {"model": "auto", "prompt": ""}, {"prompt"}),
    ("missing_prompt", IMAGES, {"model": "auto"}, {"prompt"}),
    (
        "metadata_not_strings",
        IMAGES,
        {"model": "auto", "prompt": "p", "metadata": {"k": 1}},
        {"metadata", "metadata.k"},
    ),
    ("unknown_model", IMAGES, {"model": "no-such-model", "prompt": "p"}, {"model"}),
    ("chat_model_for_images", IMAGES, {"model": "sim-chat-1", "prompt": "p"}, {"model"}),
    ("music_model_for_images", IMAGES, {"model": "alpha-5.5", "prompt": "p"}, {"model"}),
    ("unknown_field", IMAGES, {"model": "auto", "prompt": "p", "style": "vivid"}, {"style"}),
    (
        "seventeen_references",
        IMAGE_TO_IMAGE,
        {**_I2I, "extra_images": [_REF] * 16},
        {"extra_images"},
    ),
    ("missing_image", IMAGE_TO_IMAGE, {"model": "auto", "prompt": "p"}, {"image"}),
    (
        "image_kind",
        IMAGE_TO_IMAGE,
        {**_I2I, "image": {"type": "file", "path": "/etc/passwd"}},
        {"image", "image.type"},
    ),
    (
        "image_http_url",
        IMAGE_TO_IMAGE,
        {**_I2I, "image": {"type": "url", "url": "http://example.com/a.png"}},
        {"image", "image.url"},
    ),
    ("empty_prompt_music", TEXT_TO_MUSIC, {**_MUSIC, "prompt": ""}, {"prompt"}),
    (
        "lyrics_instrumental",
        TEXT_TO_MUSIC,
        {**_MUSIC, "lyrics": "la la", "instrumental": True},
        {"lyrics", "instrumental"},
    ),
    (
        "empty_lyrics_instrumental",
        TEXT_TO_MUSIC,
        {**_MUSIC, "lyrics": "", "instrumental": True},
        {"lyrics", "instrumental"},
    ),
    (
        "unknown_namespace",
        TEXT_TO_MUSIC,
        {**_MUSIC, "model_options": {"gamma": {}}},
        {"model_options.gamma"},
    ),
    (
        "other_models_namespace",
        TEXT_TO_MUSIC,
        {**_MUSIC, "model_options": {"beta": {}}},
        {"model_options.beta"},
    ),
    ("image_model_for_music", TEXT_TO_MUSIC, {**_MUSIC, "model": "image-model-2"}, {"model"}),
    ("instrumental_string", TEXT_TO_MUSIC, {**_MUSIC, "instrumental": "yes"}, {"instrumental"}),
    ("missing_reference_audio", REFERENCE_MUSIC, _MUSIC, {"reference_audio"}),
]


@pytest.mark.parametrize(
    ("path", "body", "fields"),
    [pytest.param(p, b, f, id=name) for name, p, b, f in VALIDATION_CASES],
)
def test_invalid_bodies_are_422_with_the_field(
    api: httpx.Client, path: str, body: dict[str, Any], fields: set[str]
) -> None:
    before = wallet_balance(api)
    response = api.post(path, json=body)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "validation_error"
    assert error["retryable"] is False
    assert error["request_id"] == response.headers["x-request-id"]
    assert error["details"], error
    assert error["details"][0]["field"] in fields, error
    assert error["details"][0]["message"]
    assert wallet_balance(api) == before


def test_music_with_its_own_options_namespace_and_lyrics(api: httpx.Client) -> None:
    created = post_task(
        api,
        TEXT_TO_MUSIC,
        {
            "model": "alpha-5.5",
            "prompt": "folk",
            "lyrics": "the river runs",
            "model_options": {"alpha": {"style_weight": 0.5}},
        },
    )
    assert created["input"]["lyrics"] == "the river runs"
    assert created["input"]["model_options"] == {"alpha": {"style_weight": 0.5}}
    task = wait_for_task(api, created["task_id"])
    assert task["status"] == "succeeded", task
    assert len(task["output"]["clips"]) == 2


def test_idempotency_key_too_long_is_rejected(api: httpx.Client) -> None:
    before = wallet_balance(api)
    response = api.post(
        IMAGES, json={"model": "auto", "prompt": "p"}, headers={"Idempotency-Key": "k" * 256}
    )
    assert response.status_code in (400, 422), response.text
    assert wallet_balance(api) == before


def test_non_json_body_is_rejected(api: httpx.Client) -> None:
    response = api.post(IMAGES, content=b"prompt=p", headers={"Content-Type": "text/plain"})
    assert response.status_code in (415, 422), response.text
    response = api.post(IMAGES, content=b"{not json", headers={"Content-Type": "application/json"})
    assert response.status_code in (400, 422), response.text


def test_media_endpoints_need_a_key(root: str) -> None:
    for path in (IMAGES, TEXT_TO_MUSIC, "/v1/uploads"):
        response = httpx.post(f"{root}{path}", json={"model": "auto", "prompt": "p"})
        assert response.status_code == 401, response.text
        assert response.json()["error"]["code"] == "invalid_api_key"
    response = httpx.get(f"{root}/v1/tasks")
    assert response.status_code == 401


# 8. tenant isolation ---------------------------------------------------------------------------


def test_other_tenants_tasks_and_artifacts_do_not_exist(
    media_gateway: GatewayProcess, api: httpx.Client, other_api: httpx.Client
) -> None:
    created = post_task(api, IMAGES, {"model": "auto", "prompt": "mine"})
    task = wait_for_task(api, created["task_id"])
    (image,) = task["output"]["images"]
    upload = api.post("/v1/uploads", files={"file": ("a.wav", wav_bytes(0.5), "audio/wav")})
    assert upload.status_code == 201
    other_before = wallet_balance(other_api)

    for response in (
        other_api.get(f"/v1/tasks/{task['task_id']}"),
        other_api.post(f"/v1/tasks/{task['task_id']}/cancel"),
        other_api.get(f"/v1/artifacts/{image['artifact_id']}"),
        other_api.get(f"/v1/artifacts/{image['artifact_id']}/content"),
        other_api.get(f"/v1/artifacts/{upload.json()['artifact_id']}"),
        other_api.get(f"/v1/artifacts/{upload.json()['artifact_id']}/content"),
    ):
        assert response.status_code == 404, (response.request.url, response.text)
        assert response.json()["error"]["code"] == "not_found"
    listed = other_api.get("/v1/tasks", params={"limit": "100"}).json()["data"]
    assert task["task_id"] not in {t["task_id"] for t in listed}
    # Another key of the same tenant sees it all.
    with _client(media_gateway, media_gateway.new_key("default")) as same_tenant:
        assert same_tenant.get(f"/v1/tasks/{task['task_id']}").status_code == 200
        assert same_tenant.get(f"/v1/artifacts/{image['artifact_id']}").status_code == 200

    # Another tenant cannot use my artifacts as references either.
    stolen = other_api.post(
        IMAGE_TO_IMAGE,
        json={
            "model": "auto",
            "prompt": "p",
            "image": {"type": "artifact", "artifact_id": image["artifact_id"]},
        },
    )
    assert stolen.status_code == 422, stolen.text
    missing = other_api.post(
        IMAGE_TO_IMAGE,
        json={
            "model": "auto",
            "prompt": "p",
            "image": {"type": "artifact", "artifact_id": "art_" + "0" * 32},
        },
    )
    # Indistinguishable from an artifact that does not exist.
    assert stolen.json()["error"]["details"] == missing.json()["error"]["details"]
    assert stolen.json()["error"]["details"][0]["field"] == "image.artifact_id"
    stolen_audio = other_api.post(
        REFERENCE_MUSIC,
        json={
            "model": "auto",
            "prompt": "p",
            "reference_audio": {"type": "artifact", "artifact_id": upload.json()["artifact_id"]},
        },
    )
    assert stolen_audio.status_code == 422, stolen_audio.text
    assert stolen_audio.json()["error"]["details"][0]["field"] == "reference_audio.artifact_id"
    assert wallet_balance(other_api) == other_before
    # And the owner's task was not touched by the cancel attempt.
    assert api.get(f"/v1/tasks/{task['task_id']}").json()["cancel_requested_at"] is None


# 9. task list ----------------------------------------------------------------------------------


def test_task_list_pages_newest_first_and_filters(media_gateway: GatewayProcess) -> None:
    media_gateway.grant("lister", "1000")
    with _client(media_gateway, media_gateway.new_key("lister")) as lister:
        made = [
            post_task(lister, IMAGES, {"model": "auto", "prompt": "one"}),
            post_task(lister, TEXT_TO_MUSIC, {"model": "beta-music-2.6", "prompt": "two"}),
            post_task(lister, IMAGES, {"model": "auto", "prompt": "three [[sim:fail=502]]"}),
            post_task(lister, IMAGES, {"model": "auto", "prompt": "four", "n": 2}),
        ]
        ids = [t["task_id"] for t in made]
        for task_id in ids:
            wait_for_task(lister, task_id)
        newest_first = list(reversed(ids))

        first = lister.get("/v1/tasks", params={"limit": "3"})
        assert first.status_code == 200, first.text
        page = first.json()
        assert page["object"] == "list"
        assert [t["task_id"] for t in page["data"]] == newest_first[:3]
        assert page["has_more"] is True
        assert page["next_after"] == newest_first[2]
        assert all(t["object"] == "task" for t in page["data"])
        second = lister.get("/v1/tasks", params={"limit": "3", "after": page["next_after"]}).json()
        assert [t["task_id"] for t in second["data"]] == newest_first[3:]
        assert second["has_more"] is False
        everything = lister.get("/v1/tasks").json()
        assert [t["task_id"] for t in everything["data"]] == newest_first
        assert everything["has_more"] is False

        failed = lister.get("/v1/tasks", params={"status": "failed"}).json()
        assert [t["task_id"] for t in failed["data"]] == [ids[2]]
        music = lister.get("/v1/tasks", params={"capability": "text_to_music"}).json()
        assert [t["task_id"] for t in music["data"]] == [ids[1]]
        both = lister.get(
            "/v1/tasks", params={"status": "succeeded", "capability": "text_to_image"}
        ).json()
        assert [t["task_id"] for t in both["data"]] == [ids[3], ids[0]]
        paged = lister.get(
            "/v1/tasks", params={"status": "succeeded", "capability": "text_to_image", "limit": 1}
        ).json()
        assert [t["task_id"] for t in paged["data"]] == [ids[3]]
        assert paged["has_more"] is True
        rest = lister.get(
            "/v1/tasks",
            params={
                "status": "succeeded",
                "capability": "text_to_image",
                "limit": 1,
                "after": paged["next_after"],
            },
        ).json()
        assert [t["task_id"] for t in rest["data"]] == [ids[0]]
        assert rest["has_more"] is False
        none = lister.get("/v1/tasks", params={"status": "canceled"}).json()
        assert none["data"] == [] and none["has_more"] is False

        for params in ({"limit": "0"}, {"limit": "101"}, {"status": "done"}, {"capability": "x"}):
            bad = lister.get("/v1/tasks", params=params)
            assert bad.status_code == 422, (params, bad.text)
            assert bad.json()["error"]["code"] == "validation_error"
        assert_books_balance(lister)


# 10. the books ---------------------------------------------------------------------------------


def test_every_task_ended_and_the_wallet_is_the_sum_of_the_ledger(
    api: httpx.Client, other_api: httpx.Client
) -> None:
    listed = api.get("/v1/tasks", params={"limit": "100"}).json()
    assert listed["data"], "no tasks were listed"
    assert all(task["status"] in TERMINAL for task in listed["data"])
    for task in listed["data"]:
        entries = task_entries(api, task["task_id"])
        debits = [e for e in entries if e["kind"] == "debit"]
        refunds = [e for e in entries if e["kind"] == "refund"]
        assert len(debits) == 1, (task["task_id"], entries)
        assert len(refunds) <= 1, (task["task_id"], entries)
        assert -Decimal(debits[0]["amount_credits"]) == Decimal(task["billing"]["charged_credits"])
        refunded = sum((Decimal(e["amount_credits"]) for e in refunds), Decimal(0))
        assert refunded == Decimal(task["billing"]["refunded_credits"])
    # Nothing changes by itself once every task has ended.
    balance = wallet_balance(api)
    wait_until(
        lambda: {"balance": wallet_balance(api)},
        lambda value: value["balance"] == balance,
        timeout=1,
    )
    assert_books_balance(api)
    assert_books_balance(other_api)
