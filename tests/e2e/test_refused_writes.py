"""A refused or replayed create writes nothing: data URI references are stored only once the
create was admitted (rate limit, credits, idempotency), against a running gateway.

Each request carries a ~1 MB PNG as a data URI; what is measured is the artifact folder on
disk (files and bytes) before and after, with the worker off so that no task output is written
meanwhile. Accepted creates are the control: each writes exactly its own references.
"""

from __future__ import annotations

import io
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image

from tests.e2e.media_support import data_uri, root_of, wav_bytes
from tests.support.gateway_process import GatewayProcess, start_gateway
from tests.support.routing_files import MEDIA_CONFIG

PATH = "/v1/images/image-to-image"


def _noisy_png(seed: int) -> bytes:
    """About 1 MB: random pixels do not compress."""
    pixels = random.Random(seed).randbytes(580 * 580 * 3)
    buffer = io.BytesIO()
    Image.frombytes("RGB", (580, 580), pixels).save(buffer, format="PNG")
    return buffer.getvalue()


REFERENCE = data_uri(_noisy_png(1))


def _body(prompt: str, *extra: dict[str, Any]) -> dict[str, Any]:
    image = {"type": "data_uri", "data_uri": REFERENCE}
    return {"model": "image-model-2", "prompt": prompt, "image": image, "extra_images": list(extra)}


def _on_disk(folder: Path) -> tuple[int, int]:
    """(files, bytes) under the artifact folder."""
    files = [Path(root) / name for root, _, names in os.walk(folder) for name in names]
    return len(files), sum(f.stat().st_size for f in files)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GatewayProcess, Path]]:
    workdir = tmp_path_factory.mktemp("refused")
    artifacts = workdir / "artifacts"
    env = {"GATEWAY_ARTIFACTS_DIR": str(artifacts), "GATEWAY_WORKERS": "0"}
    process = start_gateway(workdir / "gw", MEDIA_CONFIG, extra_env=env)
    yield process, artifacts
    process.stop()


def _client(process: GatewayProcess, tenant: str) -> httpx.Client:
    key = process.new_key(tenant)
    return httpx.Client(
        base_url=root_of(process.base_url),
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )


def test_rate_limited_creates_write_nothing(gateway: tuple[GatewayProcess, Path]) -> None:
    process, folder = gateway
    process.grant("limited", "10000")
    before = _on_disk(folder)
    with _client(process, "limited") as client:  # 3 requests a minute
        statuses = [client.post(PATH, json=_body(f"quay {i}")).status_code for i in range(12)]
    assert statuses.count(202) == 3 and statuses.count(429) == 9, statuses
    files, size = _on_disk(folder)
    assert files - before[0] == 3, "one reference per accepted create, none for a 429"
    assert size - before[1] < 3 * len(REFERENCE)


def test_creates_refused_for_credits_write_nothing(gateway: tuple[GatewayProcess, Path]) -> None:
    process, folder = gateway
    before = _on_disk(folder)
    with _client(process, "poor") as client:  # no credits at all
        statuses = [client.post(PATH, json=_body(f"fox {i}")).status_code for i in range(10)]
    assert statuses == [402] * 10
    assert _on_disk(folder) == before


def test_replays_write_nothing(gateway: tuple[GatewayProcess, Path]) -> None:
    process, folder = gateway
    before = _on_disk(folder)
    with _client(process, "default") as client:
        headers = {"Idempotency-Key": "replayed-create"}
        answers = [client.post(PATH, json=_body("lighthouse"), headers=headers) for _ in range(30)]
    assert [a.status_code for a in answers] == [202] * 30
    assert {a.json()["task_id"] for a in answers} == {answers[0].json()["task_id"]}
    assert [a.headers.get("Idempotent-Replayed") for a in answers[1:]] == ["true"] * 29
    files, size = _on_disk(folder)
    assert files - before[0] == 1, "the first create's one reference, no copy per replay"
    assert size - before[1] < len(REFERENCE)


def test_invalid_creates_write_nothing(gateway: tuple[GatewayProcess, Path]) -> None:
    process, folder = gateway
    before = _on_disk(folder)
    not_an_image = {"type": "data_uri", "data_uri": "data:image/png;base64,aGVsbG8="}
    audio = {"type": "data_uri", "data_uri": data_uri(wav_bytes(0.2)).replace("png", "wav")}
    unknown = {"type": "artifact", "artifact_id": "art_" + "0" * 32}
    with _client(process, "default") as client:
        for extra in (not_an_image, audio, unknown):
            answer = client.post(PATH, json=_body("a bad second image", extra))
            assert answer.status_code == 422, answer.text
            assert answer.json()["error"]["details"][0]["field"].startswith("extra_images[0]")
    assert _on_disk(folder) == before
