"""Image tasks as a client meets them on a real gateway: text to image, image to image, signed
output links and the artifact endpoints, sizes, references."""

from __future__ import annotations

import base64
import hashlib
import time
from decimal import Decimal
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest

from tests.e2e.media.support import (
    IMAGE_TO_IMAGE,
    IMAGES,
    REFERENCE_MUSIC,
    assert_debit,
    assert_envelope,
    assert_the_books_close,
    assert_times,
    download_png,
)
from tests.e2e.media_support import (
    assert_books_balance,
    data_uri,
    fetch_unsigned,
    png_bytes,
    post_task,
    wait_for_task,
    wallet_balance,
    wav_bytes,
)


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


def test_every_task_ended_and_the_wallet_is_the_sum_of_the_ledger(
    api: httpx.Client, other_api: httpx.Client
) -> None:
    assert_the_books_close(api, other_api)
