"""Reference URLs as an attacker writes them, against a real gateway in a network sandbox.

The gateway runs inside a `Sandbox` whose loopback also carries private, link-local and cloud
metadata addresses, each with a TCP canary on one port, and whose /etc/hosts makes DNS names
resolve to them. The gateway may fetch from one "public" server (127.0.0.2, the only network
its policy allows, as a test policy does) and from nothing else: every other address, however
it is spelled, whatever name resolves to it, and wherever a redirect points, must fail the task
with `validation_error` naming the field, refund it in full, and leave every canary at zero
connections. A positive control fetches from the public server through the same gateway, so a
refusal cannot pass because nothing could be fetched at all.
"""

from __future__ import annotations

import socket
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from tests.e2e.media_support import (
    assert_books_balance,
    png_bytes,
    root_of,
    wait_for_task,
    wallet_balance,
    wav_bytes,
)
from tests.security.canary import Canaries
from tests.security.sandbox import Sandbox, require_sandbox
from tests.support.gateway_process import GatewayProcess, start_gateway
from tests.support.routing_files import MEDIA_CONFIG

PUBLIC = "127.0.0.2"
CANARY_ADDRESSES = [
    "127.0.0.1", "::1", "10.0.0.1", "172.16.0.1", "192.168.0.1", "100.64.0.1",
    "169.254.169.254", "100.100.100.200", "fd00:ec2::254", "fc00::1",
]  # fmt: skip
HOSTS = {
    "metadata.google.internal": "169.254.169.254",
    "internal.example": "10.0.0.1",
    "loopback.example": "127.0.0.1",
    "v6-loopback.example": "::1",
    "public.example": PUBLIC,
}
CONFIG = MEDIA_CONFIG.replace(
    "[gateway]\n",
    f'[gateway]\nfetch_allow_http = true\nfetch_allowed_networks = ["{PUBLIC}/32"]\n',
    1,
)
PNG = png_bytes(64, 32, (10, 120, 200))
WAV = wav_bytes(0.2)
HTML = b"<!doctype html><html><body>not an image</body></html>"
IMAGE_LIMIT = 20 * 1024 * 1024  # REFERENCE_MAX_BYTES["image"]

# Every spelling of an address the gateway must not reach; {port} is the canaries' port.
FORBIDDEN_HOSTS = [
    "127.0.0.1", "127.1", "0.0.0.0", "0", "2130706433", "0177.0.0.1", "0x7f000001", "0x7f.1",
    "localhost", "localhost.", "LOCALHOST", "[::1]", "[::]", "[0:0:0:0:0:0:0:1]",
    "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[0:0:0:0:0:ffff:7f00:1]",
    "10.0.0.1", "012.0.0.1", "172.16.0.1", "192.168.0.1", "100.64.0.1", "[fc00::1]",
    "169.254.169.254", "0xa9fea9fe", "2852039166", "100.100.100.200", "[fd00:ec2::254]",
    "[::ffff:169.254.169.254]", "[::ffff:a9fe:a9fe]", "[64:ff9b::a9fe:a9fe]",
    "metadata.google.internal", "internal.example", "loopback.example", "v6-loopback.example",
]  # fmt: skip
REDIRECT_TARGETS = [
    "http://127.0.0.1:{port}/x.png",
    "http://[::1]:{port}/x.png",
    "http://2130706433:{port}/x.png",
    "http://[::ffff:7f00:1]:{port}/x.png",
    "http://10.0.0.1:{port}/x.png",
    "http://169.254.169.254:{port}/latest/meta-data/",
    "http://[fd00:ec2::254]:{port}/latest/meta-data/",
    "http://metadata.google.internal:{port}/computeMetadata/v1/",
    "http://internal.example:{port}/x.png",
    "http://user:pw@127.0.0.1:{port}/x.png",
    "file:///etc/passwd",
    "gopher://127.0.0.1:{port}/_x",
]


@dataclass
class Public:
    """The one server the gateway may fetch from; counts what it served."""

    port: int
    hits: list[str]

    def url(self, path: str) -> str:
        return f"http://public.example:{self.port}{path}"


class _Handler(BaseHTTPRequestHandler):
    hits: ClassVar[list[str]]

    def do_GET(self) -> None:
        type(self).hits.append(self.path)
        parts = urlsplit(self.path)
        if parts.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", parse_qs(parts.query)["to"][0])
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif parts.path in ("/ref.png", "/ref.wav", "/page.html"):
            body, kind = {
                "/ref.png": (PNG, "image/png"),
                "/ref.wav": (WAV, "audio/wav"),
                "/page.html": (HTML, "image/png"),
            }[parts.path]
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif parts.path.startswith("/named/"):  # a PNG, whatever the name after it
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.send_header("Content-Length", str(len(PNG)))
            self.end_headers()
            self.wfile.write(PNG)
        elif parts.path == "/declared-huge.png":  # says 25 MB, sends a PNG head, then stops
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.send_header("Content-Length", str(25 * 1024 * 1024))
            self.end_headers()
            self.wfile.write(PNG)
        elif parts.path == "/endless.png":  # no length: a PNG, then zeros past the limit
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.end_headers()
            self.wfile.write(PNG)
            zeros = bytes(1024 * 1024)
            for _ in range(IMAGE_LIMIT // len(zeros) + 2):
                self.wfile.write(zeros)
        else:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@dataclass
class World:
    box: Sandbox
    gateway: GatewayProcess
    canaries: Canaries
    public: Public

    def client(self) -> httpx.Client:
        return httpx.Client(
            base_url=root_of(self.gateway.base_url),
            headers={"Authorization": f"Bearer {self.gateway.api_key}"},
            timeout=30,
        )


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    require_sandbox()
    addresses = [a for a in CANARY_ADDRESSES if a not in ("127.0.0.1", "::1")]
    with Sandbox.start(addresses=addresses, hosts=HOSTS) as box:
        canaries = box.run(Canaries, CANARY_ADDRESSES)

        class Handler(_Handler):
            hits: ClassVar[list[str]] = []

        server = box.run(ThreadingHTTPServer, (PUBLIC, 0), Handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        workdir = tmp_path_factory.mktemp("ssrf")
        try:
            gateway = box.run(lambda: start_gateway(workdir, CONFIG, launcher=box.launcher))
            try:
                yield World(box, gateway, canaries, Public(server.server_address[1], Handler.hits))
            finally:
                gateway.stop()
        finally:
            server.shutdown()
            server.server_close()
            canaries.close()


def _run_tasks(world: World, requests: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Create every task (all accepted: URLs are fetched by the worker), then wait for each."""

    def scenario() -> list[dict[str, Any]]:
        with world.client() as client:
            ids = []
            for path, body in requests:
                response = client.post(path, json=body)
                assert response.status_code == 202, (body, response.text)
                ids.append(response.json()["task_id"])
            return [wait_for_task(client, task_id, timeout=30) for task_id in ids]

    return world.box.run(scenario)


def _image(url: str) -> tuple[str, dict[str, Any]]:
    body = {"model": "image-model-2", "prompt": "p", "image": {"type": "url", "url": url}}
    return "/v1/images/image-to-image", body


def _music(url: str) -> tuple[str, dict[str, Any]]:
    body = {
        "model": "alpha-5.5",
        "prompt": "p",
        "reference_audio": {"type": "url", "url": url},
    }
    return "/v1/music/reference-audio-to-music", body


def _assert_refused(tasks: list[dict[str, Any]], urls: list[str], field: str, *words: str) -> None:
    """Each task failed with validation_error naming `field` (and one of `words`), refunded."""
    wrong = []
    for url, task in zip(urls, tasks, strict=True):
        error = task.get("error") or {}
        billing = task["billing"]
        ok = (
            task["status"] == "failed"
            and error.get("code") == "validation_error"
            and field in error.get("message", "")
            and (not words or any(w in error.get("message", "") for w in words))
            and error.get("message", "").count(f"{field}:") == 1  # said once, not twice
            and billing["refunded_credits"] == billing["charged_credits"]
            and Decimal(billing["charged_credits"]) > 0
        )
        if not ok:
            wrong.append((url, task["status"], error, billing))
    assert not wrong, "not refused as they should be:\n" + "\n".join(map(repr, wrong))


def _balance(world: World) -> Decimal:
    def read() -> Decimal:
        with world.client() as client:
            return wallet_balance(client)

    return world.box.run(read)


def _books(world: World) -> None:
    def check() -> None:
        with world.client() as client:
            assert_books_balance(client)

    world.box.run(check)


def test_the_sandbox_and_the_canaries_do_see_connections(world: World) -> None:
    """The instruments: names resolve as the gateway sees them, and canaries count."""

    def probe() -> int:
        before = world.canaries.total()
        for address in ("10.0.0.1", "::1"):
            with socket.create_connection((address, world.canaries.port), timeout=2):
                pass
        return world.canaries.total() - before

    assert world.box.run(probe) == 2
    world.canaries.hits.clear()
    names = list(HOSTS)
    resolved = subprocess.run(
        [*world.box.launcher, "getent", "ahosts", *names], capture_output=True, text=True
    ).stdout
    for name, address in HOSTS.items():
        assert f"{address} " in resolved, (name, resolved)


def test_an_allowed_reference_is_fetched_through_the_same_gateway(world: World) -> None:
    """The positive control: the policy does let the gateway fetch from the public server."""
    image, music = _run_tasks(
        world, [_image(world.public.url("/ref.png")), _music(world.public.url("/ref.wav"))]
    )
    assert image["status"] == "succeeded", image
    assert image["input"]["image"]["type"] == "artifact"
    assert music["status"] == "succeeded", music
    assert "/ref.png" in world.public.hits and "/ref.wav" in world.public.hits


def test_forbidden_addresses_in_every_spelling_are_never_connected(world: World) -> None:
    port = world.canaries.port
    urls = [f"http://{host}:{port}/x.png" for host in FORBIDDEN_HOSTS]
    urls += [f"https://{host}:{port}/x.png" for host in ("127.0.0.1", "[::1]", "169.254.169.254")]
    before = _balance(world)
    tasks = _run_tasks(world, [_image(url) for url in urls])
    # (A name that does not resolve, like "localhost." here, is refused as well.)
    _assert_refused(tasks, urls, "image.url", "not publicly routable", "could not be resolved")
    for url, task in zip(urls, tasks, strict=True):  # the address is never echoed back
        message = task["error"]["message"]
        assert "127.0.0.1" not in message or "127.0.0.1" in url, (url, message)
        assert "169.254" not in message or "169.254" in url, (url, message)
    assert world.canaries.total() == 0, world.canaries.hits
    assert _balance(world) == before
    _books(world)


def test_forbidden_reference_audio_is_never_connected(world: World) -> None:
    port = world.canaries.port
    hosts = ["127.0.0.1", "[::1]", "[::ffff:7f00:1]", "169.254.169.254", "internal.example"]
    urls = [f"http://{host}:{port}/a.wav" for host in hosts]
    before = _balance(world)
    tasks = _run_tasks(world, [_music(url) for url in urls])
    _assert_refused(tasks, urls, "reference_audio.url", "not publicly routable")
    assert world.canaries.total() == 0, world.canaries.hits
    assert _balance(world) == before


def test_redirects_from_the_public_server_to_forbidden_places_are_not_followed(
    world: World,
) -> None:
    port = world.canaries.port
    targets = [target.format(port=port) for target in REDIRECT_TARGETS]
    chained = world.public.url("/redirect?to=" + httpx.QueryParams({"x": targets[0]})["x"])
    urls = [world.public.url("/redirect?" + str(httpx.QueryParams({"to": t}))) for t in targets]
    urls.append(world.public.url("/redirect?" + str(httpx.QueryParams({"to": chained}))))
    hits_before = len(world.public.hits)
    before = _balance(world)
    tasks = _run_tasks(world, [_image(url) for url in urls])
    _assert_refused(tasks, urls, "image.url", "redirects to")
    for task in tasks:
        message = task["error"]["message"]
        for internal in ("127.0.0.1", "::1", "169.254", "10.0.0.1", "metadata", "internal.ex"):
            assert internal not in message, message  # the target is never echoed
    assert world.canaries.total() == 0, world.canaries.hits
    assert len(world.public.hits) - hits_before == len(urls) + 1  # each first hop, + the chain
    music = _run_tasks(world, [_music(urls[0])])
    _assert_refused(music, urls[:1], "reference_audio.url", "redirects to")
    assert world.canaries.total() == 0, world.canaries.hits
    assert _balance(world) == before
    _books(world)


def test_oversized_and_mistyped_bodies_fail_their_task_with_a_refund(world: World) -> None:
    cases = [
        (_image(world.public.url("/declared-huge.png")), "image.url", "larger than the limit"),
        (_image(world.public.url("/endless.png")), "image.url", "larger than the limit"),
        (_image(world.public.url("/page.html")), "image.url", "is not one of"),
        (_music(world.public.url("/ref.png")), "reference_audio.url", "is not one of"),
        (_image(world.public.url("/ref.wav")), "image.url", "is not one of"),
        (_image(world.public.url("/missing.png")), "image.url", "answered HTTP 404"),
    ]
    before = _balance(world)
    tasks = _run_tasks(world, [request for request, _, _ in cases])
    for (request, field, words), task in zip(cases, tasks, strict=True):
        _assert_refused([task], [str(request)], field, words)
    assert _balance(world) == before
    _books(world)


def test_a_hostile_name_in_a_reference_url_comes_back_as_a_safe_header(world: World) -> None:
    """The artifact's name comes from the URL the client wrote: quotes, line breaks and
    non-Latin letters in it must not break (or inject into) the download's headers."""
    names = ['a"\r\nX-Injected: yes\r\n.png', "файл.png", "x\u2028y.png", "..%2F..%2Fetc.png"]
    urls = [world.public.url("/named/" + name) for name in names]
    tasks = _run_tasks(world, [_image(url) for url in urls])

    def download(artifact_id: str) -> tuple[dict[str, Any], httpx.Response]:
        with world.client() as client:
            return client.get(f"/v1/artifacts/{artifact_id}").json(), client.get(
                f"/v1/artifacts/{artifact_id}/content"
            )

    for url, task in zip(urls, tasks, strict=True):
        assert task["status"] == "succeeded", (url, task)
        meta, content = world.box.run(download, task["input"]["image"]["artifact_id"])
        assert not any(c in meta["filename"] for c in '"\\/\r\n'), meta["filename"]
        assert content.status_code == 200, (url, content.text)
        assert content.content == PNG
        assert "x-injected" not in content.headers
        content.headers["content-disposition"].encode("ascii")


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("file:///etc/passwd", "https"),
        ("gopher://127.0.0.1:70/_x", "https"),
        ("ftp://example.com/a.png", "https"),
        ("http://user:secret@public.example/a.png", "credentials"),
        ("http:///a.png", "host"),
        ("http://[::1/a.png", "valid URL"),
        ("javascript:alert(1)", "https"),
    ],
)
def test_urls_that_can_never_be_fetched_are_a_422_at_creation_with_no_debit(
    world: World, url: str, words: str
) -> None:
    def scenario() -> tuple[httpx.Response, Decimal, Decimal]:
        with world.client() as client:
            before = wallet_balance(client)
            path, body = _image(url)
            response = client.post(path, json=body)
            return response, before, wallet_balance(client)

    response, before, after = world.box.run(scenario)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "validation_error"
    assert error["details"][0]["field"] == "image.url"
    assert words in error["details"][0]["message"]
    assert "secret" not in response.text
    assert before == after


def test_the_gateway_itself_never_reached_a_canary(world: World) -> None:
    """Last in the module: nothing above, refused or not, touched a forbidden address."""
    assert world.canaries.total() == 0, world.canaries.hits
