"""Helpers for the media end-to-end tests: polling tasks, wallet books, test media files."""

from __future__ import annotations

import base64
import io
import math
import wave
from array import array
from datetime import datetime
from decimal import Decimal
from typing import Any

import httpx
from PIL import Image

from tests.support.waiting import wait_until

__all__ = [
    "TERMINAL",
    "assert_books_balance",
    "data_uri",
    "fetch_unsigned",
    "ledger",
    "parse_time",
    "png_bytes",
    "post_task",
    "root_of",
    "task_entries",
    "wait_for_task",
    "wallet_balance",
    "wav_bytes",
]


TERMINAL = frozenset({"succeeded", "failed", "canceled"})


def root_of(base_url: str) -> str:
    """`http://host:port` of a gateway whose base_url ends in `/v1`."""
    return base_url.removesuffix("/v1")


def post_task(
    client: httpx.Client, path: str, body: dict[str, Any], **headers: str
) -> dict[str, Any]:
    """Create a task; asserts 202 and returns the envelope."""
    response = client.post(path, json=body, headers=headers)
    assert response.status_code == 202, (
        f"POST {path} {body}: {response.status_code} {response.text}"
    )
    return response.json()  # type: ignore[no-any-return]


def wait_for_task(
    client: httpx.Client,
    task_id: str,
    *,
    statuses: frozenset[str] = TERMINAL,
    timeout: float = 20.0,
) -> dict[str, Any]:
    """Poll GET /v1/tasks/{id} until its status is one of `statuses`."""

    def check() -> dict[str, Any]:
        response = client.get(f"/v1/tasks/{task_id}")
        assert response.status_code == 200, response.text
        return response.json()  # type: ignore[no-any-return]

    return wait_until(
        check, lambda task: task["status"] in statuses, timeout=timeout, what=f"{task_id} status"
    )


def wallet_balance(client: httpx.Client) -> Decimal:
    response = client.get("/v1/wallet")
    assert response.status_code == 200, response.text
    return Decimal(response.json()["balance_credits"])


def ledger(client: httpx.Client) -> list[dict[str, Any]]:
    """Every ledger entry of the client's tenant, newest first (pages of 100)."""
    entries: list[dict[str, Any]] = []
    after: str | None = None
    while True:
        params = {"limit": "100", **({"after": after} if after else {})}
        response = client.get("/v1/wallet/ledger", params=params)
        assert response.status_code == 200, response.text
        page = response.json()
        entries += page["data"]
        if not page["has_more"]:
            return entries
        after = page["next_after"]


def task_entries(client: httpx.Client, task_id: str) -> list[dict[str, Any]]:
    """The ledger entries of one task, oldest first."""
    return [e for e in reversed(ledger(client)) if e.get("task_id") == task_id]


def assert_books_balance(client: httpx.Client) -> None:
    """The wallet balance is the sum of the ledger, and each entry's running balance agrees."""
    entries = ledger(client)
    total = sum((Decimal(e["amount_credits"]) for e in entries), Decimal(0))
    balance = wallet_balance(client)
    assert balance == total, f"wallet {balance} != sum of ledger {total}"
    if entries:
        assert Decimal(entries[0]["balance_after_credits"]) == balance
    running = Decimal(0)
    for entry in reversed(entries):
        running += Decimal(entry["amount_credits"])
        assert Decimal(entry["balance_after_credits"]) == running, entry


def parse_time(value: str) -> datetime:
    parsed = datetime.fromisoformat(value)
    assert parsed.tzinfo is not None, f"timestamp without a time zone: {value}"
    return parsed


def fetch_unsigned(root: str, url: str) -> httpx.Response:
    """GET an output URL (relative or absolute) without any Authorization header."""
    absolute = url if url.startswith("http") else f"{root}{url}"
    return httpx.get(absolute, timeout=10)


def png_bytes(width: int, height: int, colour: tuple[int, int, int]) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), colour).save(buffer, format="PNG")
    return buffer.getvalue()


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def wav_bytes(seconds: float, rate: int = 22050, frequency: float = 440.0) -> bytes:
    """A mono 16-bit sine tone."""
    frames = round(seconds * rate)
    samples = array(
        "h", (int(8000 * math.sin(2 * math.pi * frequency * i / rate)) for i in range(frames))
    )
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(samples.tobytes())
    return buffer.getvalue()
