"""Hostile request bodies against a running gateway: each a clear 4xx in the envelope within a
bounded time, and a few hundred of them leave the process no bigger.

Where tests/e2e/test_hostile_http.py sends bad bytes to chat through raw sockets, this covers
the media and upload endpoints too, bodies as large as the limit allows, non-finite numbers,
duplicate keys (the last one wins, everywhere the body is read: see docs/api.md) and multipart
abuse, and hostile file names coming back in a download's headers.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from urllib.parse import unquote

import httpx
import pytest

from tests.e2e.media_support import png_bytes, root_of, wait_for_task
from tests.security.support import rss_mib
from tests.support.gateway_process import GatewayProcess, start_gateway
from tests.support.routing_files import MEDIA_CONFIG
from tests.support.serial import SERIAL

BOUNDARY = "hostileboundary"
PNG = png_bytes(4, 4, (1, 2, 3))
LIMIT = 10 * 1024 * 1024  # max_body_bytes (the default)
SLOW = 5.0  # seconds: a refusal taking longer than this is holding the gateway


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    config = MEDIA_CONFIG.replace("starting_grant_credits = 1000", "starting_grant_credits = 10000")
    process = start_gateway(tmp_path_factory.mktemp("hostile"), config)
    yield process
    process.stop()


@pytest.fixture(scope="module")
def client(gateway: GatewayProcess) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {gateway.api_key}"}
    with httpx.Client(base_url=root_of(gateway.base_url), headers=headers, timeout=30) as c:
        yield c


@dataclass(frozen=True)
class Case:
    path: str
    body: bytes
    status: int
    code: str
    content_type: str = "application/json"


def _json(path: str, body: bytes, *, chat: bool) -> Case:
    if chat:
        return Case(path, body, 400, "invalid_request")
    return Case(path, body, 422, "validation_error")


def _both(body: Callable[[str], bytes]) -> list[Case]:
    """The same hostile JSON to chat (400 invalid_request) and to a media create (422)."""
    return [
        _json("/v1/chat/completions", body('"model":"sim-chat-1","messages":'), chat=True),
        _json(
            "/v1/images/generations",
            body('"model":"image-model-2","prompt":"p","metadata":'),
            chat=False,
        ),
    ]


def _part(name: str, value: bytes, *, filename: str | None = None, extra: str = "") -> bytes:
    disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
    head = f"--{BOUNDARY}\r\nContent-Disposition: {disposition}\r\n{extra}\r\n"
    return head.encode() + value + b"\r\n"


FILE = _part("file", PNG, filename="a.png", extra="Content-Type: image/png\r\n")
END = f"--{BOUNDARY}--\r\n".encode()
MULTIPART = f"multipart/form-data; boundary={BOUNDARY}"


def _upload(body: bytes, status: int = 422, code: str = "validation_error", **kw: str) -> Case:
    return Case("/v1/uploads", body, status, code, kw.get("content_type", MULTIPART))


def _with_value(head: str, *, value: str) -> bytes:
    return ("{" + head + value + "}").encode()


def small_cases() -> list[Case]:
    """Cheap enough to send hundreds of times."""
    cases = []
    cases += _both(lambda head: ("{" + head + "[" * 5000 + "]" * 5000 + "}").encode())
    cases += _both(lambda head: ("{" + head + '{"a":' * 300 + "1" + "}" * 301).encode())
    cases += _both(lambda head: ("{" + head + '"a\xffb"}').encode("latin-1"))
    cases += _both(lambda head: ("{" + head + '"\\udc00"}').encode())
    for literal in ("NaN", "Infinity", "-Infinity", "1e999", "0x10", "+1", "01"):
        cases += _both(functools.partial(_with_value, value=literal))
    cases += _both(lambda head: ("{" + head + "[],}").encode())  # trailing comma
    cases += _both(lambda head: ("{" + head + "[]}//").encode())  # a comment after
    cases += _both(lambda head: ("{" + head + "[]}\x00").encode())
    cases += _both(lambda head: b"\xef\xbb\xbf{" + head.encode() + b"[]}")  # a BOM
    cases += [
        _upload(b"".join(_part(f"f{i}", b"v") for i in range(50)) + FILE + END),
        _upload(_part("file", PNG, filename="a.png", extra=f"X-Big: {'a' * 20000}\r\n") + END),
        _upload(
            _part("file", PNG, filename="a.png", extra="".join(f"X-{i}: v\r\n" for i in range(200)))
            + END
        ),
        _upload(FILE + END, content_type="multipart/form-data"),  # no boundary
        _upload(FILE + END, content_type='multipart/form-data; boundary=""'),
        _upload(FILE + END, content_type="multipart/form-data; boundary=" + "b" * 80),
        _upload(_part("note", b"x") + END),  # no file part
        _upload(_part("file", PNG) + END),  # "file" without a filename
        _upload(FILE),  # no closing boundary
        _upload(FILE[:60]),  # a part that never ends
        _upload(FILE + FILE + END),  # two files
        _upload(_part("note", b"v" * 100_000) + FILE + END),
        _upload(b"\r\n".join([b"garbage"] * 100)),
        _upload(b"", 422),
        _upload(FILE + END, 415, "unsupported_media_type", content_type="application/json"),
        _upload(
            _part("file", b"<html><script>1</script></html>", filename="a.png") + END,
            415,
            "unsupported_media_type",
        ),
    ]
    return cases


def large_cases() -> list[Case]:
    """As large as the body limit lets them be, and one past it."""
    near = LIMIT - 4096
    return [
        *_both(lambda head: ("{" + head + "[" * (near // 2) + "]" * (near // 2) + "}").encode()),
        _json("/v1/images/generations",
              b'{"model":"image-model-2","prompt":"' + b"x" * near + b'"}', chat=False),
        _json("/v1/images/generations",
              b'{"model":"image-model-2","prompt":"p","n":[' + b"1," * (near // 2) + b"1]}",
              chat=False),
        _json("/v1/chat/completions",
              b'{"model":"sim-chat-1","messages":[' + b"1," * (near // 2) + b"1]}", chat=True),
        _json("/v1/chat/completions",
              b'{"model":"sim-chat-1","messages":[],"stop":"' + b"\\u0000" * (near // 6) + b'"}',
              chat=True),
        Case("/v1/chat/completions", b"[" * (LIMIT + 1), 413, "payload_too_large"),
        Case("/v1/images/generations", b" " * (LIMIT + 1), 413, "payload_too_large"),
    ]  # fmt: skip


def _send(client: httpx.Client, case: Case) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    response = client.post(
        case.path, content=case.body, headers={"Content-Type": case.content_type}
    )
    return response, time.monotonic() - started


def _check(case: Case, response: httpx.Response, elapsed: float) -> str | None:
    """What is wrong with the answer to `case`, or None."""
    try:
        error = response.json()["error"]
    except (ValueError, KeyError, TypeError):
        return f"{response.status_code} without the envelope: {response.text[:100]}"
    if (response.status_code, error["code"]) != (case.status, case.code):
        return f"{response.status_code} {error['code']}: {error['message'][:100]}"
    if error["request_id"] != response.headers.get("x-request-id"):
        return "the envelope's request_id is not X-Request-Id"
    if elapsed > SLOW:
        return f"took {elapsed:.1f} s"
    return None


def test_hostile_bodies_are_refused_clearly_and_quickly(client: httpx.Client) -> None:
    wrong = {}
    for case in small_cases() + large_cases():
        problem = _check(case, *_send(client, case))
        if problem:
            wrong[f"{case.path} {case.body[:50]!r}… ({len(case.body)} bytes)"] = problem
    assert not wrong, "\n".join(f"{k}: {v}" for k, v in wrong.items())
    assert client.get("/v1/health").json()["status"] == "ok"


@SERIAL
def test_hundreds_of_hostile_bodies_do_not_grow_the_gateway(
    gateway: GatewayProcess, client: httpx.Client
) -> None:
    cases = small_cases()
    for case in cases + large_cases():  # warm up: the allocator's high water is reached here
        _send(client, case)
    before = rss_mib(gateway.process.pid)
    sent = 0
    while sent < 300:
        for case in cases:
            response, elapsed = _send(client, case)
            assert _check(case, response, elapsed) is None, case
            sent += 1
    grown = rss_mib(gateway.process.pid) - before
    assert grown < 30, f"the gateway grew by {grown:.1f} MiB over {sent} hostile requests"


def test_duplicate_keys_last_one_wins_everywhere(client: httpx.Client) -> None:
    """The decoded request, what the task records, what a replay compares: all the last."""
    headers = {"Content-Type": "application/json", "Idempotency-Key": "dup-keys-1"}
    doubled = b'{"model":"image-model-2","prompt":"first","prompt":"second"}'
    created = client.post("/v1/images/generations", content=doubled, headers=headers)
    assert created.status_code == 202, created.text
    task = wait_for_task(client, created.json()["task_id"])
    assert task["input"]["prompt"] == "second"
    plain = b'{"model":"image-model-2","prompt":"second"}'
    replay = client.post("/v1/images/generations", content=plain, headers=headers)
    assert replay.headers.get("idempotent-replayed") == "true"
    assert replay.json()["task_id"] == task["task_id"]
    swapped = b'{"model":"image-model-2","prompt":"second","prompt":"first"}'
    reused = client.post("/v1/images/generations", content=swapped, headers=headers)
    assert reused.status_code == 422
    assert reused.json()["error"]["code"] == "idempotency_key_reused"

    chat = (
        b'{"model":"no-such-model","messages":[{"role":"user","content":"hi"}],'
        b'"model":"sim-chat-1","max_tokens":1,"max_tokens":5}'
    )
    answer = client.post(
        "/v1/chat/completions", content=chat, headers={"Content-Type": "application/json"}
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["model"] == "sim-chat-1"
    assert answer.json()["usage"]["completion_tokens"] <= 5


@pytest.mark.parametrize(
    "filename",
    ["файл.png", "résumé.png", "x\u2028y.png", 'quote".png', "semi;colon=1.png",
     "..\\..\\win.png", "tab\there.png", "\U0001f600.png", "bad\udcff.png"],
)  # fmt: skip
def test_hostile_file_names_come_back_as_safe_headers(
    client: httpx.Client, gateway: GatewayProcess, filename: str
) -> None:
    raw = filename.encode("utf-8", "surrogateescape")
    disposition = b'form-data; name="file"; filename="' + raw + b'"'
    body = b"".join(
        [
            f"--{BOUNDARY}\r\nContent-Disposition: ".encode(),
            disposition,
            b"\r\nContent-Type: image/png\r\n\r\n",
            PNG,
            b"\r\n",
            END,
        ]
    )
    upload = client.post("/v1/uploads", content=body, headers={"Content-Type": MULTIPART})
    assert upload.status_code == 201, upload.text
    stored = upload.json()["filename"]
    assert not any(c in stored for c in '"\\/\t\r\n'), stored
    content = client.get(f"/v1/artifacts/{upload.json()['artifact_id']}/content")
    assert content.status_code == 200, content.text
    assert content.content == PNG
    header = content.headers["content-disposition"]
    header.encode("ascii")  # nothing a proxy could read two ways
    assert header.count('"') == 2, header
    if "filename*=" in header:
        assert unquote(header.split("filename*=UTF-8''", 1)[1]) == stored
    else:
        assert header == f'inline; filename="{stored}"'
    assert content.headers["x-content-type-options"] == "nosniff"
