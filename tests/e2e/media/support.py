"""What the media task tests share: the endpoints, a gateway on either store, clients, and
checks of a task's envelope, its debit and its outputs."""

from __future__ import annotations

import io
import time
import wave
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from PIL import Image

from tests.e2e.media_support import (
    TERMINAL,
    assert_books_balance,
    fetch_unsigned,
    parse_time,
    task_entries,
    wallet_balance,
)
from tests.support.gateway_process import GatewayProcess, start_gateway
from tests.support.routing_files import MEDIA_CONFIG
from tests.support.waiting import wait_until

__all__ = [
    "IMAGES",
    "IMAGE_TO_IMAGE",
    "REFERENCE_MUSIC",
    "TEXT_TO_MUSIC",
    "WAV_TYPES",
    "assert_debit",
    "assert_envelope",
    "assert_the_books_close",
    "assert_times",
    "download_png",
    "download_wav",
    "redis_db",
    "start_media_gateway",
]


IMAGES = "/v1/images/generations"
IMAGE_TO_IMAGE = "/v1/images/image-to-image"
TEXT_TO_MUSIC = "/v1/music/text-to-music"
REFERENCE_MUSIC = "/v1/music/reference-audio-to-music"
WAV_TYPES = {"audio/wav", "audio/x-wav", "audio/wave", "audio/vnd.wave"}


def redis_db(request: pytest.FixtureRequest, db: int) -> str:
    """A flushed database of the session's Redis, for one gateway (or one set of replicas)."""
    url: str = request.getfixturevalue("redis_url")
    shared = f"{url.rsplit('/', 1)[0]}/{db}"
    with redis.Redis.from_url(shared) as connection:
        connection.flushdb()
    return shared


def start_media_gateway(
    workdir: Path, store_url: str | None, extra_env: dict[str, str] | None = None
) -> GatewayProcess:
    process = start_gateway(workdir, MEDIA_CONFIG, store_url=store_url, extra_env=extra_env)
    try:
        if process.api_key is None:  # a shared store prints no key and grants nothing
            process.api_key = process.new_key("default")
            process.grant("default", "1000")
    except BaseException:
        process.stop()  # not left running when the test cannot have it
        raise
    return process


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


def assert_the_books_close(api: httpx.Client, other_api: httpx.Client) -> None:
    """Every task of `api`'s tenant ends, each with one debit and at most one refund that agree
    with its billing; then nothing changes by itself, and both tenants' wallets are the sum of
    their ledgers."""
    listed = wait_until(
        lambda: api.get("/v1/tasks", params={"limit": "100"}).json(),
        lambda page: all(task["status"] in TERMINAL for task in page["data"]),
        what="every task to end",
    )
    assert listed["data"], "no tasks were listed"
    for task in listed["data"]:
        entries = task_entries(api, task["task_id"])
        debits = [e for e in entries if e["kind"] == "debit"]
        refunds = [e for e in entries if e["kind"] == "refund"]
        assert len(debits) == 1, (task["task_id"], entries)
        assert len(refunds) <= 1, (task["task_id"], entries)
        assert -Decimal(debits[0]["amount_credits"]) == Decimal(task["billing"]["charged_credits"])
        refunded = sum((Decimal(e["amount_credits"]) for e in refunds), Decimal(0))
        assert refunded == Decimal(task["billing"]["refunded_credits"])
    balance = wallet_balance(api)
    time.sleep(0.3)  # the behaviour under test: a while later, nothing changed by itself
    assert wallet_balance(api) == balance
    assert_books_balance(api)
    assert_books_balance(other_api)
