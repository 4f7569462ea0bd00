"""Reference URLs through the task path, and a large upload, against running gateways.

- With the default policy a reference URL to a loopback or private address fails its task (a
  422-style error naming the field, full refund) before any byte is asked of that address.
- With a policy that allows a local network, a reference URL is fetched into an artifact that
  the task's `input` then names, and the model uses it.
- A 90 MB upload is streamed: the gateway's memory grows by far less than the file.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image

from tests.e2e.media_support import (
    assert_books_balance,
    png_bytes,
    post_task,
    root_of,
    wait_for_task,
    wav_bytes,
)
from tests.support.gateway_process import GatewayProcess, start_gateway
from tests.support.routing_files import MEDIA_CONFIG
from tests.support.serial import SERIAL


class _Files(BaseHTTPRequestHandler):
    """Serves one PNG at /ref.png and counts every request it gets."""

    hits: list[str] = []
    png = png_bytes(300, 150, (200, 30, 30))

    def do_GET(self) -> None:
        type(self).hits.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "image/png")
        self.send_header("Content-Length", str(len(self.png)))
        self.end_headers()
        self.wfile.write(self.png)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def file_server() -> Iterator[str]:
    _Files.hits = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Files)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _client(gateway: GatewayProcess) -> httpx.Client:
    headers = {"Authorization": f"Bearer {gateway.api_key}"}
    return httpx.Client(base_url=root_of(gateway.base_url), headers=headers, timeout=30)


@pytest.fixture
def strict_gateway(tmp_path: Path) -> Iterator[GatewayProcess]:
    gateway = start_gateway(tmp_path / "strict", MEDIA_CONFIG)
    yield gateway
    gateway.stop()


@pytest.fixture
def local_gateway(tmp_path: Path) -> Iterator[GatewayProcess]:
    config = MEDIA_CONFIG.replace(
        "[gateway]\n",
        '[gateway]\nfetch_allow_http = true\nfetch_allowed_networks = ["127.0.0.1/32"]\n',
        1,
    )
    gateway = start_gateway(tmp_path / "local", config)
    yield gateway
    gateway.stop()


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "2130706433", "[::ffff:127.0.0.1]"])
def test_a_loopback_reference_fails_its_task_without_a_byte_fetched(
    strict_gateway: GatewayProcess, file_server: str, host: str
) -> None:
    port = file_server.rsplit(":", 1)[1]
    with _client(strict_gateway) as client:
        body = {
            "model": "image-model-2",
            "prompt": "from a private address",
            "image": {"type": "url", "url": f"https://{host}:{port}/ref.png"},
        }
        task = wait_for_task(
            client, post_task(client, "/v1/images/image-to-image", body)["task_id"]
        )
        assert task["status"] == "failed"
        assert task["error"]["code"] == "validation_error"
        assert "image.url" in task["error"]["message"]
        assert (
            task["billing"]["refunded_credits"] == task["billing"]["charged_credits"] == "60.0000"
        )
        assert_books_balance(client)
    assert _Files.hits == []


def test_a_plain_http_reference_is_refused_at_creation(strict_gateway: GatewayProcess) -> None:
    with _client(strict_gateway) as client:
        body = {
            "model": "image-model-2",
            "prompt": "p",
            "image": {"type": "url", "url": "http://example.com/a.png"},
        }
        response = client.post("/v1/images/image-to-image", json=body)
        assert response.status_code == 422
        assert response.json()["error"]["details"][0]["field"] == "image.url"


def test_an_allowed_reference_url_becomes_an_artifact_the_model_uses(
    local_gateway: GatewayProcess, file_server: str
) -> None:
    with _client(local_gateway) as client:
        body = {
            "model": "image-model-2",
            "prompt": "use the red reference",
            "aspect_ratio": "auto",
            "image": {"type": "url", "url": f"http://{file_server}/ref.png"},
        }
        task = wait_for_task(
            client, post_task(client, "/v1/images/image-to-image", body)["task_id"]
        )
        assert task["status"] == "succeeded", task
        reference = task["input"]["image"]
        assert reference["type"] == "artifact" and reference["artifact_id"].startswith("art_")
        meta = client.get(f"/v1/artifacts/{reference['artifact_id']}").json()
        assert (meta["mime_type"], meta["source"]) == ("image/png", "reference")
        output = task["output"]["images"][0]
        assert (output["width"], output["height"]) == (512, 256)  # "auto" took the 2:1 reference
        image = Image.open(io.BytesIO(client.get(output["url"]).content))
        assert image.size == (512, 256)
    assert _Files.hits == ["/ref.png"]


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@SERIAL
def test_a_large_upload_is_streamed_not_held(strict_gateway: GatewayProcess) -> None:
    size = 90 * 1024 * 1024
    head = wav_bytes(0.1)
    boundary = "streamedboundary"

    def body() -> Iterator[bytes]:
        yield (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.wav"\r\n'
            "Content-Type: audio/wav\r\n\r\n"
        ).encode()
        yield head
        chunk = bytes(1024 * 1024)
        left = size - len(head)
        while left > 0:
            yield chunk[: min(left, len(chunk))]
            left -= len(chunk)
        yield f"\r\n--{boundary}--\r\n".encode()

    pid = strict_gateway.process.pid
    before = _rss_kib(pid)
    with _client(strict_gateway) as client:
        response = client.post(
            "/v1/uploads",
            content=body(),
            headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
        )
        assert response.status_code == 201, response.text
        assert response.json()["size_bytes"] == size
        grown_mib = (_rss_kib(pid) - before) / 1024
        assert grown_mib < 30, f"the gateway grew by {grown_mib:.0f} MiB for a 90 MiB upload"

        too_big = client.post(
            "/v1/uploads",
            files={"file": ("big.wav", head + bytes(100 * 1024 * 1024), "audio/wav")},
        )
        assert too_big.status_code == 413
        assert too_big.json()["error"]["code"] == "payload_too_large"
