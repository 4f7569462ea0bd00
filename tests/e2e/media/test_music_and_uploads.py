"""Music tasks and uploads as a client meets them on a real gateway: clips, reference audio, the
upload endpoint's limits, uploads used as references."""

from __future__ import annotations

import hashlib
from pathlib import Path

import httpx
import pytest

from tests.e2e.media.support import (
    IMAGE_TO_IMAGE,
    REFERENCE_MUSIC,
    TEXT_TO_MUSIC,
    assert_debit,
    assert_envelope,
    assert_the_books_close,
    assert_times,
    download_wav,
)
from tests.e2e.media_support import (
    parse_time,
    png_bytes,
    post_task,
    wait_for_task,
    wallet_balance,
    wav_bytes,
)
from tests.support.gateway_process import GatewayProcess


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


def test_every_task_ended_and_the_wallet_is_the_sum_of_the_ledger(
    api: httpx.Client, other_api: httpx.Client
) -> None:
    assert_the_books_close(api, other_api)
