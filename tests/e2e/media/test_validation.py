"""Media task bodies a real gateway refuses: 422 with the field, options namespaces, headers,
bodies that are not JSON, calls without a key."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.e2e.media.support import IMAGE_TO_IMAGE, IMAGES, REFERENCE_MUSIC, TEXT_TO_MUSIC
from tests.e2e.media_support import data_uri, png_bytes, post_task, wait_for_task, wallet_balance

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
