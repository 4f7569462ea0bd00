"""Reference images are capped by their pixels before anything decodes them, seen from
outside a real `gateway serve` process (a fresh interpreter: its memory is measured).

The bomb: a PNG of 13,000 x 13,000 grey pixels, 169 megapixels in about 170 KB. Decoding it
takes 169 MB for the pixels and four times that in RGB; the simulator did both, and a few more
copies: the serving process's peak RSS rose by about 900 MB per such reference, for the price
of an image. Now its header says it is over the 40-megapixel cap, and nothing decodes it:

- as four data URIs sent at once: four 422s naming `image.data_uri`, nothing charged;
- as an upload: a 422 naming `file`;
- as a URL the worker fetches later: the task fails with a 422-style error naming
  `image.url`, refunded in full;
- past a gateway whose cap was raised: the simulator reads the size from the header too and
  refuses it (its own `max_reference_pixels`) before decoding, and the task is refunded.

Memory is the process's peak resident set, `VmHWM` in /proc/<pid>/status, after resetting it
(`clear_refs` 5) just before the requests (as tests/e2e/test_reference_memory.py does): no
timing in the assert, and a buffer freed before the read still counts.
"""

from __future__ import annotations

import struct
import threading
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.media_support import (
    TERMINAL,
    assert_books_balance,
    data_uri,
    ledger,
    root_of,
    wait_for_task,
    wallet_balance,
)
from tests.support.gateway_process import GatewayProcess, start_gateway
from tests.support.routing_files import MEDIA_CONFIG
from tests.support.serial import SERIAL

pytestmark = SERIAL

MiB = 1024 * 1024
SIDE = 13_000
PEAK_GROWTH_LIMIT = 150 * MiB
"""What refusing the bombs may add to the gateway's peak RSS: the request bodies and their
decoded bytes (a few MB). Decoding one took about 900 MB before the pixel cap."""


def _bomb(side: int) -> bytes:
    """An 8-bit grey PNG of `side` x `side` black pixels, compressed row by row (the test
    never holds its pixels)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    compressor = zlib.compressobj(9)
    row = bytes(side + 1)  # filter byte 0, then the row
    pixels = b"".join(compressor.compress(row) for _ in range(side)) + compressor.flush()
    header = struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


BOMB = _bomb(SIDE)


class _Files(BaseHTTPRequestHandler):
    """Serves the bomb at any path."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "image/png")
        self.send_header("Content-Length", str(len(BOMB)))
        self.end_headers()
        self.wfile.write(BOMB)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def file_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Files)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    config = MEDIA_CONFIG.replace(
        "[gateway]\n",
        '[gateway]\nfetch_allow_http = true\nfetch_allowed_networks = ["127.0.0.1/32"]\n',
        1,
    )
    process = start_gateway(tmp_path_factory.mktemp("reference-pixels"), config, fresh=True)
    yield process
    process.stop()


@pytest.fixture(scope="module")
def api(gateway: GatewayProcess) -> Iterator[httpx.Client]:
    with _client(gateway) as client:
        yield client


def _client(gateway: GatewayProcess) -> httpx.Client:
    assert gateway.api_key, "serve printed no key"
    headers = {"Authorization": f"Bearer {gateway.api_key}"}
    return httpx.Client(base_url=root_of(gateway.base_url), headers=headers, timeout=300)


def _peak_growth(gateway: GatewayProcess, run: Callable[[], None]) -> int:
    """How far the gateway's peak RSS rose above its RSS at the start of `run()`."""
    pid = gateway.process.pid

    def status() -> dict[str, int]:
        values = {}
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                values[name] = int(value.split()[0]) * 1024
        return values

    Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM := VmRSS now
    before = status()["VmRSS"]
    run()
    return status()["VmHWM"] - before


def _create(api: httpx.Client, image: dict[str, Any]) -> httpx.Response:
    """A create; when the gateway takes it, waits for the task to end (what it decodes)."""
    body = {"model": "image-model-2", "prompt": "a very large night", "image": image}
    response = api.post("/v1/images/image-to-image", json=body)
    if response.status_code == 202:
        wait_for_task(api, response.json()["task_id"], statuses=TERMINAL, timeout=240)
    return response


def _task_ids(api: httpx.Client) -> list[str]:
    return [t["task_id"] for t in api.get("/v1/tasks").json()["data"]]


def test_four_bombs_as_data_uris_at_once_are_refused_without_decoding(
    api: httpx.Client, gateway: GatewayProcess
) -> None:
    assert len(BOMB) < 256 * 1024
    balance, entries, tasks = wallet_balance(api), ledger(api), _task_ids(api)
    image = {"type": "data_uri", "data_uri": data_uri(BOMB)}
    responses: list[httpx.Response] = []

    def run() -> None:
        with ThreadPoolExecutor(4) as pool:
            responses.extend(pool.map(lambda _: _create(api, image), range(4)))

    growth = _peak_growth(gateway, run)
    assert growth < PEAK_GROWTH_LIMIT, (
        f"four {SIDE} x {SIDE} PNGs of {len(BOMB) // 1024} KB raised the gateway's peak RSS"
        f" by {growth / MiB:.0f} MiB"
    )
    for response in responses:
        assert response.status_code == 422, response.text
        [detail] = response.json()["error"]["details"]
        assert detail["field"] == "image.data_uri"
        assert f"{SIDE} x {SIDE} pixels" in detail["message"]
        assert "40000000" in detail["message"]
    assert wallet_balance(api) == balance
    assert ledger(api) == entries
    assert _task_ids(api) == tasks


def test_a_bomb_upload_is_refused_naming_the_file(
    api: httpx.Client, gateway: GatewayProcess
) -> None:
    responses: list[httpx.Response] = []

    def run() -> None:
        responses.append(api.post("/v1/uploads", files={"file": ("x.png", BOMB, "image/png")}))

    growth = _peak_growth(gateway, run)
    assert growth < PEAK_GROWTH_LIMIT, f"peak RSS grew by {growth / MiB:.0f} MiB"
    (response,) = responses
    assert response.status_code == 422, response.text
    [detail] = response.json()["error"]["details"]
    assert detail["field"] == "file"
    assert f"{SIDE} x {SIDE} pixels" in detail["message"]


def test_a_bomb_behind_a_url_fails_its_task_refunded_without_decoding(
    api: httpx.Client, gateway: GatewayProcess, file_server: str
) -> None:
    responses: list[httpx.Response] = []

    def run() -> None:
        responses.append(_create(api, {"type": "url", "url": f"{file_server}/night.png"}))

    growth = _peak_growth(gateway, run)
    assert growth < PEAK_GROWTH_LIMIT, f"peak RSS grew by {growth / MiB:.0f} MiB"
    (response,) = responses
    assert response.status_code == 202, response.text  # a URL is fetched by the worker
    task = wait_for_task(api, response.json()["task_id"])
    assert task["status"] == "failed"
    assert task["error"]["code"] == "validation_error"
    assert "image.url" in task["error"]["message"]
    assert f"{SIDE} x {SIDE} pixels" in task["error"]["message"]
    assert task["billing"]["refunded_credits"] == task["billing"]["charged_credits"] == "60.0000"
    assert_books_balance(api)


def test_past_a_raised_gateway_cap_the_simulator_refuses_before_decoding(
    tmp_path: Path,
) -> None:
    config = MEDIA_CONFIG.replace("[gateway]\n", "[gateway]\nmax_image_pixels = 500000000\n", 1)
    lax = start_gateway(tmp_path / "lax", config, fresh=True)
    try:
        with _client(lax) as api:
            responses: list[httpx.Response] = []

            def run() -> None:
                responses.append(_create(api, {"type": "data_uri", "data_uri": data_uri(BOMB)}))

            growth = _peak_growth(lax, run)
            assert growth < PEAK_GROWTH_LIMIT, f"peak RSS grew by {growth / MiB:.0f} MiB"
            (response,) = responses
            assert response.status_code == 202, response.text
            task = wait_for_task(api, response.json()["task_id"])
            assert task["status"] == "failed"
            assert task["error"]["code"] == "invalid_request"
            assert f"{SIDE} x {SIDE} pixels" in task["error"]["message"]
            assert "limit of 40000000 pixels" in task["error"]["message"]
            assert task["billing"]["refunded_credits"] == task["billing"]["charged_credits"]
            assert_books_balance(api)
    finally:
        lax.stop()
