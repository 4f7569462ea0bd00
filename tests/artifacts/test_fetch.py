"""The reference fetcher against real local servers.

127.0.0.1 is reachable only through an explicit test `FetchPolicy`; with the default policy
the same URL is refused before any connection is made (a TCP sentinel counts them).
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Sequence
from ipaddress import ip_network
from pathlib import Path

import pytest
from aiohttp import web

from gateway.artifacts.blobs import LocalBlobStore
from gateway.artifacts.fetch import FetchedBlob, FetchPolicy, ReferenceFetcher
from gateway.artifacts.sniff import AUDIO_TYPES, IMAGE_TYPES
from gateway.errors import ValidationFailed
from tests.artifacts.conftest import Run
from tests.artifacts.media import PNG, WAV, sample
from tests.artifacts.servers import HttpServer, sentinel, serve

FIELD = "image.url"
LOCAL = FetchPolicy(allow_http=True, allowed_networks=(ip_network("127.0.0.1/32"),))
HTTP_ONLY = FetchPolicy(allow_http=True)  # http allowed, but no private networks
IMAGE = sample(PNG, 50_000)


def _image_routes(server: HttpServer) -> list[web.RouteDef]:
    async def image(request: web.Request) -> web.Response:
        return web.Response(body=IMAGE, content_type="image/png")

    return [web.get("/img.png", image)]


async def _fetch(
    url: str,
    store: LocalBlobStore,
    policy: FetchPolicy = LOCAL,
    *,
    max_bytes: int = 1 << 20,
    deadline: float = 5.0,
    allowed: frozenset[str] = IMAGE_TYPES,
    fetcher: ReferenceFetcher | None = None,
) -> FetchedBlob:
    fetcher = fetcher or ReferenceFetcher(policy)
    return await fetcher.fetch(
        url,
        field=FIELD,
        store=store,
        key="tenant/art_1",
        allowed_types=allowed,
        max_bytes=max_bytes,
        timeout_seconds=deadline,
    )


def _refused(
    run: Run, url: str, store: LocalBlobStore, fetcher: ReferenceFetcher
) -> ValidationFailed:
    with pytest.raises(ValidationFailed) as caught:
        run(_fetch(url, store, fetcher=fetcher))
    error = caught.value
    assert error.status_code == 422
    assert [d.field for d in error.details] == [FIELD]
    return error


def _no_files(root: Path) -> bool:
    return not root.exists() or not any(p.is_file() for p in root.rglob("*"))


def test_allowed_fetch_streams_into_the_store(run: Run, tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path)

    async def scenario() -> tuple[FetchedBlob, list[web.Request], bytes]:
        async with serve(_image_routes) as server:
            fetched = await _fetch(server.url("/img.png"), store)
        return fetched, server.seen, await store.read_all("tenant/art_1", 1 << 20)

    fetched, seen, stored = run(scenario())
    assert fetched.mime_type == "image/png"
    assert fetched.info.size_bytes == len(IMAGE)
    assert fetched.info.sha256 == hashlib.sha256(IMAGE).hexdigest()
    assert stored == IMAGE
    assert len(seen) == 1
    assert seen[0].headers["Accept-Encoding"] == "identity"
    assert "Authorization" not in seen[0].headers


def test_default_policy_refuses_the_same_url_before_any_byte(run: Run, tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path)

    async def scenario() -> tuple[list[str], list[web.Request]]:
        messages = []
        async with serve(_image_routes) as server:
            for policy in (FetchPolicy(), HTTP_ONLY):
                with pytest.raises(ValidationFailed) as caught:
                    await _fetch(server.url("/img.png"), store, policy)
                messages.append(caught.value.details[0].message)
        return messages, server.seen

    (scheme, address), seen = run(scenario())
    assert "https" in scheme
    assert "not publicly routable" in address
    assert seen == []
    assert _no_files(tmp_path)


@pytest.mark.parametrize(
    "host",
    ["2130706433", "0177.0.0.1", "0x7f.1", "127.1", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]",
     "localhost", "[::1]", "0.0.0.0"],
)  # fmt: skip
def test_literal_spellings_of_loopback_are_refused(run: Run, tmp_path: Path, host: str) -> None:
    async def scenario() -> tuple[ValidationFailed, int]:
        async with sentinel() as watch:
            with pytest.raises(ValidationFailed) as caught:
                await _fetch(
                    f"http://{host}:{watch.port}/x.png", LocalBlobStore(tmp_path), HTTP_ONLY
                )
        return caught.value, watch.connections

    error, connections = run(scenario())
    assert connections == 0
    assert "not publicly routable" in error.message
    if "127.0.0.1" not in host:
        assert "127.0.0.1" not in error.message  # the resolved address is never echoed


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("http://example.com/a.png", "https"),
        ("ftp://example.com/a.png", "https"),
        ("file:///etc/passwd", "https"),
        ("s3://gateway-artifacts/gw/secret.png", "https"),  # no cloud identity lends a hand
        ("gs://gateway-artifacts/gw/secret.png", "https"),
        ("https://user:secret@example.com/a.png", "credentials"),
        ("https:///a.png", "host"),
        ("not a url", "https"),
    ],
)
def test_bad_urls_are_refused_without_a_lookup(
    run: Run, tmp_path: Path, url: str, words: str
) -> None:
    lookups: list[str] = []

    async def resolve(host: str, port: int) -> Sequence[str]:
        lookups.append(host)
        return ["93.184.216.34"]

    fetcher = ReferenceFetcher(resolve=resolve)
    error = _refused(run, url, LocalBlobStore(tmp_path), fetcher=fetcher)
    assert words in error.details[0].message
    assert "secret" not in error.message
    assert lookups == []


def test_any_private_address_among_the_answers_refuses(run: Run, tmp_path: Path) -> None:
    async def resolve(host: str, port: int) -> Sequence[str]:
        return ["93.184.216.34", "10.0.0.1"]

    fetcher = ReferenceFetcher(resolve=resolve)
    error = _refused(run, "https://mixed.example/a.png", LocalBlobStore(tmp_path), fetcher=fetcher)
    assert "mixed.example resolves to an address that is not publicly routable" in error.message
    assert "10.0.0.1" not in error.message


def test_connection_goes_to_the_vetted_address_without_a_second_lookup(
    run: Run, tmp_path: Path
) -> None:
    """A rebinding DNS answers 127.0.0.1 (allowed) first and 10.0.0.1 after; only one
    lookup happens, the connection uses its answer, and the Host header keeps the name."""
    answers = [["127.0.0.1"], ["10.0.0.1"]]
    lookups: list[str] = []

    async def rebinding(host: str, port: int) -> Sequence[str]:
        lookups.append(host)
        return answers[min(len(lookups), 2) - 1]

    async def scenario() -> tuple[FetchedBlob, list[web.Request], int]:
        async with serve(_image_routes) as server:
            fetcher = ReferenceFetcher(LOCAL, resolve=rebinding)
            url = f"http://images.test:{server.port}/img.png"  # .test never resolves for real
            fetched = await _fetch(url, LocalBlobStore(tmp_path), fetcher=fetcher)
        return fetched, server.seen, server.port

    fetched, seen, port = run(scenario())
    assert fetched.info.size_bytes == len(IMAGE)
    assert lookups == ["images.test"]
    assert seen[0].headers["Host"] == f"images.test:{port}"


@pytest.mark.parametrize(
    "target",
    [
        "http://127.0.0.1:{port}/x.png",
        "http://10.0.0.1/x.png",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:127.0.0.1]:{port}/x.png",
        "http://2130706433:{port}/x.png",
        "http://[fd00:ec2::254]/latest/meta-data/",
        "file:///etc/passwd",
        "http://admin:hunter2@127.0.0.1:{port}/x.png",
    ],
)
def test_redirects_to_internal_addresses_are_refused(run: Run, tmp_path: Path, target: str) -> None:
    """The allowed server lives on 127.0.0.2; the redirect targets are checked like the
    first URL and refused before a connection is made to them."""
    policy = FetchPolicy(allow_http=True, allowed_networks=(ip_network("127.0.0.2/32"),))

    async def scenario() -> tuple[ValidationFailed, int, int]:
        async with sentinel() as watch:

            def routes(server: HttpServer) -> list[web.RouteDef]:
                async def hop(request: web.Request) -> web.Response:
                    raise web.HTTPFound(target.format(port=watch.port))

                return [web.get("/start", hop)]

            async with serve(routes, host="127.0.0.2") as server:
                with pytest.raises(ValidationFailed) as caught:
                    await _fetch(server.url("/start"), LocalBlobStore(tmp_path), policy)
        return caught.value, len(server.seen), watch.connections

    error, first_hop_requests, connections = run(scenario())
    assert first_hop_requests == 1
    assert connections == 0
    assert "redirects to" in error.message
    for internal in ("127.0.0.1", "10.0.0.1", "169.254", "fd00", "2130706433", "hunter2"):
        assert internal not in error.message
    assert _no_files(tmp_path)


def _chain_routes(server: HttpServer) -> list[web.RouteDef]:
    async def hop(request: web.Request) -> web.Response:
        left = int(request.match_info["left"])
        raise web.HTTPFound(f"/chain/{left - 1}" if left else "/img.png")  # relative Location

    async def image(request: web.Request) -> web.Response:
        return web.Response(body=IMAGE, content_type="image/png")

    return [web.get("/chain/{left}", hop), web.get("/img.png", image)]


def test_redirects_are_followed_up_to_three_times(run: Run, tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path)

    async def scenario() -> tuple[FetchedBlob, ValidationFailed, list[str]]:
        async with serve(_chain_routes) as server:
            fetched = await _fetch(server.url("/chain/2"), store)  # 3 redirects
            with pytest.raises(ValidationFailed) as caught:
                await _fetch(server.url("/chain/3"), store)  # 4 redirects
        return fetched, caught.value, [r.path for r in server.seen]

    fetched, error, paths = run(scenario())
    assert fetched.info.sha256 == hashlib.sha256(IMAGE).hexdigest()
    assert "more than 3" in error.message
    assert paths[:4] == ["/chain/2", "/chain/1", "/chain/0", "/img.png"]
    assert "/img.png" not in paths[4:]  # the fourth redirect was not followed


def _size_routes(server: HttpServer) -> list[web.RouteDef]:
    async def declared_huge(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "image/png"})
        response.content_length = 500 * 1024 * 1024
        await response.prepare(request)
        await response.write(PNG)
        await server.release.wait()  # never sends the rest
        return response

    async def undeclared(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "image/png"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        await response.write(IMAGE)
        for _ in range(40):  # 40 x 64 KiB: well past the 1 MiB cap
            await response.write(b"\0" * 65536)
        await response.write_eof()
        return response

    return [web.get("/declared", declared_huge), web.get("/undeclared", undeclared)]


@pytest.mark.parametrize("path", ["/declared", "/undeclared"])
def test_size_cap_by_content_length_and_by_counting(run: Run, tmp_path: Path, path: str) -> None:
    async def scenario() -> ValidationFailed:
        async with serve(_size_routes) as server:
            with pytest.raises(ValidationFailed) as caught:
                await _fetch(server.url(path), LocalBlobStore(tmp_path), max_bytes=1 << 20)
        return caught.value

    started = time.monotonic()
    error = run(scenario())
    assert time.monotonic() - started < 3  # the declared size is refused without waiting
    assert "larger than the limit of 1048576 bytes" in error.message
    assert _no_files(tmp_path)  # no blob, no temp file


def _typed_routes(server: HttpServer) -> list[web.RouteDef]:
    async def html_claiming_png(request: web.Request) -> web.Response:
        return web.Response(body=b"<html>not an image</html>", content_type="image/png")

    async def wav_claiming_text(request: web.Request) -> web.Response:
        return web.Response(body=sample(WAV), content_type="text/plain")

    async def empty(request: web.Request) -> web.Response:
        return web.Response(body=b"", content_type="image/png")

    return [
        web.get("/html", html_claiming_png),
        web.get("/wav", wav_claiming_text),
        web.get("/empty", empty),
    ]


def test_sniffed_type_decides_not_the_declared_one(run: Run, tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path)

    async def scenario() -> tuple[list[str], FetchedBlob]:
        messages = []
        async with serve(_typed_routes) as server:
            for path, allowed in (("/html", IMAGE_TYPES), ("/empty", IMAGE_TYPES),
                                  ("/wav", IMAGE_TYPES)):  # fmt: skip
                with pytest.raises(ValidationFailed) as caught:
                    await _fetch(server.url(path), store, allowed=allowed)
                messages.append(caught.value.message)
            audio = await _fetch(server.url("/wav"), store, allowed=AUDIO_TYPES)
        return messages, audio

    messages, audio = run(scenario())
    assert all("is not one of: image/gif, image/jpeg, image/png, image/webp" in m for m in messages)
    assert audio.mime_type == "audio/wav"


def _slow_routes(server: HttpServer) -> list[web.RouteDef]:
    async def stalls(request: web.Request) -> web.Response:
        await server.release.wait()
        return web.Response(body=IMAGE)

    async def missing(request: web.Request) -> web.Response:
        raise web.HTTPNotFound()

    return [web.get("/stalls", stalls), web.get("/missing", missing)]


def test_total_timeout(run: Run, tmp_path: Path) -> None:
    async def scenario() -> ValidationFailed:
        async with serve(_slow_routes) as server:
            with pytest.raises(ValidationFailed) as caught:
                await _fetch(server.url("/stalls"), LocalBlobStore(tmp_path), deadline=0.3)
        return caught.value

    started = time.monotonic()
    error = run(scenario())
    assert time.monotonic() - started < 2.5
    assert "did not deliver within 0.3 s" in error.message
    assert _no_files(tmp_path)


def test_error_status_and_unreachable_host(run: Run, tmp_path: Path) -> None:
    async def scenario() -> tuple[str, str]:
        async with serve(_slow_routes) as server:
            with pytest.raises(ValidationFailed) as missing:
                await _fetch(server.url("/missing"), LocalBlobStore(tmp_path))
        async with sentinel() as closed:
            port = closed.port
        with pytest.raises(ValidationFailed) as unreachable:  # nothing listens there now
            await _fetch(f"http://127.0.0.1:{port}/a.png", LocalBlobStore(tmp_path))
        return missing.value.message, unreachable.value.message

    missing, unreachable = run(scenario())
    assert "answered HTTP 404" in missing
    assert "could not be fetched from 127.0.0.1" in unreachable


def test_sentinel_counts_connections(run: Run) -> None:
    """The instrument the refusal tests rely on does see a connection when one is made."""

    async def scenario() -> int:
        async with sentinel() as watch:
            _, writer = await asyncio.open_connection("127.0.0.1", watch.port)
            writer.close()
        return watch.connections

    assert run(scenario()) == 1
