"""Upstreams that fail on the wire, put between a real gateway and its fake upstreams by a
`FaultProxy` (tests/support/fault_proxy.py): 5xx answers, resets, a malformed body, an upstream
that never answers, one that stops (or breaks off) mid-stream; for chat (sync and stream, a
pinned model, so the client meets the failure) and for media tasks whose adapters speak HTTP
(the OpenAI Images API, MusicGen on Replicate).

Each failure reaches the client as a retryable error in the envelope, within the upstream's
configured timeout plus a generous margin: a sync call as its status and body, a stream before
its first byte as the JSON envelope, after it as a final `error` event without `[DONE]`, and a
task as `failed` with a retryable `error`, refunded in full. Then the fault is lifted, and the
same gateway (no restart) answers health 200 and serves the next call; the common end checks
of tests/e2e/fault_checks.py hold. Pausing the store (Redis SIGSTOP) under load is
tests/e2e/test_store_faults.py; killed workers, tests/e2e/test_task_faults.py.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.fault_checks import Books, check_all
from tests.e2e.media_support import post_task, root_of, task_entries, wait_for_task
from tests.fakes.openai_images_upstream import FakeOpenAIImages
from tests.fakes.openai_upstream import FakeOpenAI, Reply, StreamReply
from tests.fakes.replicate_upstream import FakeReplicate, Job
from tests.support.fault_proxy import Fault, FaultProxy
from tests.support.gateway_process import GatewayProcess, start_gateway
from tests.support.routing_files import UPSTREAM_MODELS
from tests.support.serving import serving
from tests.support.waiting import wait_until

TIMEOUT = 1.0  # the chat upstream's timeout_seconds and stream_read_timeout_seconds
IMAGE_TIMEOUT = 2.0
MARGIN = 8.0  # a 2-core machine shared with other tests: generous, never flaky
CONFIG = """
[gateway]
starting_grant_credits = 100000
hold_seconds = 60
task_lease_seconds = 3

[limits]
requests_per_minute = 100000
tokens_per_minute = 100000000

[providers.chat]
kind = "openai"
base_url = "{chat_url}"
api_key = "sk-chat"
timeout_seconds = {timeout}
stream_read_timeout_seconds = {timeout}

[providers.images]
kind = "openai"
base_url = "{images_url}"
api_key = "sk-images"
image_timeout_seconds = {image_timeout}
image_checkpoint_seconds = 0.2

[providers.music]
kind = "replicate"
base_url = "{music_url}"
api_key = "r8-music"
timeout_seconds = {timeout}
poll_interval_seconds = 0.05
duration_seconds = 1

{models}
[routing.breaker]
failure_threshold = 1000

[tenants.default]
"""
MESSAGES = [{"role": "user", "content": "Hello"}]
GARBAGE_JSON = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n{nope, no"
)
NOT_HTTP = b"SSH-2.0-OpenSSH_9.6\r\n"


@dataclass
class Rig:
    gateway: GatewayProcess
    tmp: Path
    chat: FakeOpenAI
    images: FakeOpenAIImages
    music: FakeReplicate
    chat_proxy: FaultProxy
    images_proxy: FaultProxy
    music_proxy: FaultProxy

    @property
    def key(self) -> str:
        assert self.gateway.api_key
        return self.gateway.api_key

    def client(self, timeout: float = 30) -> httpx.Client:
        return httpx.Client(
            base_url=root_of(self.gateway.base_url),
            headers={"Authorization": f"Bearer {self.key}"},
            timeout=timeout,
        )

    def lift(self) -> None:
        for proxy in (self.chat_proxy, self.images_proxy, self.music_proxy):
            proxy.set(Fault.PASS)


def _port(url: str) -> int:
    return int(url.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    chat, images, music = FakeOpenAI(), FakeOpenAIImages(), FakeReplicate()
    chat_url, stop_chat = chat.start_in_thread()
    try:
        with serving(images), serving(music):
            proxies = [
                FaultProxy(("127.0.0.1", _port(url))).start()
                for url in (chat_url, images.base_url, music.base_url)
            ]
            try:
                config = CONFIG.format(
                    chat_url=proxies[0].url("/v1"),
                    images_url=proxies[1].url("/v1"),
                    music_url=proxies[2].url("/v1"),
                    timeout=TIMEOUT,
                    image_timeout=IMAGE_TIMEOUT,
                    models=UPSTREAM_MODELS,
                )
                tmp = tmp_path_factory.mktemp("upstream-faults")
                gateway = start_gateway(tmp, config)
                try:
                    yield Rig(gateway, tmp, chat, images, music, *proxies)
                finally:
                    gateway.stop()
            finally:
                for proxy in proxies:
                    proxy.stop()
    finally:
        stop_chat()


@pytest.fixture
def lifted(rig: Rig) -> Iterator[Rig]:
    """The rig; after the test, the fault is lifted and the end checks run on the same process."""
    rig.lift()
    yield rig
    rig.lift()
    # The fake upstream first ends what it was sending (a test's 200 MiB answer, cut off by
    # the gateway), so that the check below is about the gateway, not the fake.
    wait_until(lambda: rig.chat.in_flight == 0, what="the fake upstream's last answer to end")
    with rig.client() as client:  # served again, no restart
        answer = client.post(
            "/v1/chat/completions", json={"model": "up-chat", "messages": MESSAGES}
        )
        assert answer.status_code == 200, answer.text
    check_all(
        rig.gateway.base_url,
        [Books("default", rig.key)],
        store_url=f"sqlite:///{rig.tmp / 'data' / 'gateway.db'}",
        blobs=rig.tmp / "data" / "artifacts",
    )


# A reset may come before the request is out (unavailable) or after (the answer broke off).
RESET = {(502, "upstream_error"), (503, "model_unavailable")}


def _envelope(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    error = response.json()["error"]
    if (status, code) in RESET:
        assert (response.status_code, error["code"]) in RESET, response.text
    else:
        assert response.status_code == status, response.text
        assert error["code"] == code, error
    assert error["retryable"] is True, error
    assert error["request_id"] == response.headers["x-request-id"]
    return error  # type: ignore[no-any-return]


def _sync(rig: Rig) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    with rig.client() as client:
        response = client.post(
            "/v1/chat/completions", json={"model": "up-chat", "messages": MESSAGES}
        )
    return response, time.monotonic() - started


def _stream(rig: Rig) -> tuple[httpx.Response, str, float]:
    started = time.monotonic()
    body = {"model": "up-chat", "messages": MESSAGES, "stream": True}
    with (
        rig.client() as client,
        client.stream("POST", "/v1/chat/completions", json=body) as response,
    ):
        text = response.read().decode()
    return response, text, time.monotonic() - started


def _charges(rig: Rig) -> int:
    with rig.client() as client:
        page = client.get("/v1/wallet/ledger", params={"limit": "100"}).json()
    return sum(1 for entry in page["data"] if entry["kind"] == "charge")


# --- chat, sync ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "status", "code"),
    [
        (Fault.reset(), 502, "upstream_error"),
        (Fault.stall(), 504, "upstream_timeout"),
        (Fault.malformed(GARBAGE_JSON), 502, "upstream_error"),
        (Fault.malformed(NOT_HTTP), 502, "upstream_error"),
        (Fault.truncate(60), 502, "upstream_error"),
    ],
    ids=["reset", "stall", "malformed-json", "not-http", "truncated"],
)
def test_a_sync_chat_meets_a_broken_upstream_as_a_retryable_error(
    lifted: Rig, fault: Fault, status: int, code: str
) -> None:
    charges = _charges(lifted)
    lifted.chat_proxy.set(fault)
    response, seconds = _sync(lifted)
    _envelope(response, status, code)
    assert seconds < TIMEOUT + MARGIN
    assert _charges(lifted) == charges, "a failed call was charged"


def test_a_sync_chat_whose_upstream_answers_5xx_is_retryable(lifted: Rig) -> None:
    lifted.chat.enqueue(Reply.error(500, "boom", type="server_error"))
    response, _ = _sync(lifted)
    _envelope(response, 502, "upstream_error")


def test_latency_below_the_timeout_is_only_slower(lifted: Rig) -> None:
    lifted.chat_proxy.set(Fault.latency(0.3))
    response, seconds = _sync(lifted)
    assert response.status_code == 200, response.text
    assert seconds >= 0.3


# --- chat, stream -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "status", "code"),
    [
        (Fault.reset(), 502, "upstream_error"),
        (Fault.stall(), 504, "upstream_timeout"),
        (Fault.malformed(GARBAGE_JSON), 502, "upstream_error"),
    ],
    ids=["reset", "stall", "malformed"],
)
def test_a_stream_that_fails_before_its_first_byte_is_a_json_envelope(
    lifted: Rig, fault: Fault, status: int, code: str
) -> None:
    lifted.chat_proxy.set(fault)
    response, text, seconds = _stream(lifted)
    assert response.headers["content-type"].startswith("application/json"), text
    _envelope(
        httpx.Response(response.status_code, content=text.encode(), headers=response.headers),
        status,
        code,
    )
    assert seconds < TIMEOUT + MARGIN


@pytest.mark.parametrize("kind", ["stall", "truncate", "reset"])
def test_a_stream_broken_mid_way_ends_with_a_retryable_error_event(lifted: Rig, kind: str) -> None:
    charges = _charges(lifted)
    # The first chunks pass; then the upstream goes silent, closes, or resets the connection.
    lifted.chat.enqueue(StreamReply(chunk_delay=0.3))
    started = time.monotonic()
    body = {"model": "up-chat", "messages": MESSAGES, "stream": True}
    with (
        lifted.client() as client,
        client.stream("POST", "/v1/chat/completions", json=body) as response,
    ):
        assert response.status_code == 200
        pieces = response.iter_text()
        text = next(pieces)
        assert text.startswith("data: ")
        if kind == "stall":
            lifted.chat_proxy.set(Fault.stall(after=1))
        elif kind == "truncate":
            lifted.chat_proxy.set(Fault.truncate(1))
        else:
            lifted.chat_proxy.kill_open()
        text += "".join(pieces)
    seconds = time.monotonic() - started
    assert "[DONE]" not in text
    last = text.strip().rsplit("data: ", 1)[-1]
    error = httpx.Response(200, content=last.encode()).json()["error"]
    assert error["retryable"] is True, error
    assert error["code"] == ("upstream_timeout" if kind == "stall" else "upstream_error")
    assert seconds < 0.3 * 8 + TIMEOUT + MARGIN
    assert _charges(lifted) <= charges + 1, "a broken stream is charged once at most"


# --- media tasks --------------------------------------------------------------------------------


def _failed_task(rig: Rig, path: str, body: dict[str, Any], within: float) -> dict[str, Any]:
    started = time.monotonic()
    with rig.client() as client:
        created = post_task(client, path, body)
        task = wait_for_task(client, created["task_id"], timeout=within + MARGIN)
        entries = [(e["kind"], e["amount_credits"]) for e in task_entries(client, task["task_id"])]
    assert time.monotonic() - started < within + MARGIN
    assert task["status"] == "failed", task
    assert task["error"]["retryable"] is True, task["error"]
    assert task["billing"]["refunded_credits"] == task["billing"]["charged_credits"]
    price = task["billing"]["charged_credits"]
    assert entries == [("debit", f"-{price}"), ("refund", price)], entries
    return task


@pytest.mark.parametrize(
    ("fault", "code"),
    [
        (Fault.reset(), "upstream_error"),
        (Fault.stall(), "upstream_timeout"),
        (Fault.malformed(GARBAGE_JSON), "upstream_error"),
        (Fault.stall(after=200), "upstream_timeout"),
        (Fault.truncate(200), "upstream_error"),
    ],
    ids=["reset", "stall", "malformed", "stall-mid-body", "truncated"],
)
def test_an_image_task_whose_upstream_breaks_fails_refunded(
    lifted: Rig, fault: Fault, code: str
) -> None:
    lifted.images_proxy.set(fault)
    task = _failed_task(
        lifted, "/v1/images/generations", {"model": "gpt-image", "prompt": "p"}, IMAGE_TIMEOUT
    )
    if fault.kind == "reset":
        assert task["error"]["code"] in {code for _, code in RESET}, task["error"]
    else:
        assert task["error"]["code"] == code, task["error"]


def test_an_image_task_whose_upstream_answers_5xx_fails_refunded(lifted: Rig) -> None:
    from tests.fakes.openai_images_upstream import ImageReply

    lifted.images.enqueue(ImageReply.error(503, "overloaded", type="server_error"))
    task = _failed_task(
        lifted, "/v1/images/generations", {"model": "gpt-image", "prompt": "p"}, IMAGE_TIMEOUT
    )
    assert task["error"]["code"] in ("upstream_error", "model_unavailable"), task["error"]


@pytest.mark.parametrize(
    ("fault", "code"),
    [
        (Fault.reset(), "upstream_error"),
        (Fault.stall(), "upstream_timeout"),
        (Fault.malformed(GARBAGE_JSON), "upstream_error"),
    ],
    ids=["reset", "stall", "malformed"],
)
def test_a_music_task_whose_create_breaks_fails_refunded(
    lifted: Rig, fault: Fault, code: str
) -> None:
    lifted.music_proxy.set(fault)
    task = _failed_task(
        lifted, "/v1/music/text-to-music", {"model": "musicgen", "prompt": "p"}, TIMEOUT
    )
    if fault.kind == "reset":
        assert task["error"]["code"] in {code for _, code in RESET}, task["error"]
    else:
        assert task["error"]["code"] == code, task["error"]


@pytest.mark.parametrize("kind", ["stall", "reset"])
def test_a_music_task_whose_polls_break_fails_refunded(lifted: Rig, kind: str) -> None:
    """The prediction is made, then every poll stalls or is reset: after the adapter's few
    retries the task fails, refunded, and the prediction is canceled (best effort)."""
    lifted.music.enqueue(Job(stall=True))
    count = len(lifted.music.created)
    with lifted.client() as client:
        created = post_task(client, "/v1/music/text-to-music", {"model": "musicgen", "prompt": "p"})
        wait_until(lambda: len(lifted.music.created) > count, what="the prediction")
        lifted.music_proxy.set(Fault.stall() if kind == "stall" else Fault.reset())
        started = time.monotonic()
        task = wait_for_task(client, created["task_id"], timeout=4 * (TIMEOUT + 1) + MARGIN)
    assert time.monotonic() - started < 4 * (TIMEOUT + 1) + MARGIN
    assert task["status"] == "failed", task
    assert task["error"]["retryable"] is True, task["error"]
    assert task["billing"]["refunded_credits"] == "80.0000"


# --- answers without end ------------------------------------------------------------------------


def _peak_mib(pid: int) -> float:
    """The process's peak resident set (VmHWM): what it ever held, even if freed since."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


ENDLESS_MIB = 200


def test_a_stream_event_without_end_is_cut_off_not_buffered(lifted: Rig) -> None:
    """An upstream that sends one event that never ends (no blank line) must not make the
    gateway hold it all: the stream ends with a retryable error event long before."""
    endless = [b"data: {" + b"x" * (1024 * 1024)] * ENDLESS_MIB
    lifted.chat.enqueue(StreamReply(chunks=[{"choices": []}, *endless]))
    pid = lifted.gateway.process.pid
    before = _peak_mib(pid)
    started = time.monotonic()
    response, text, _ = _stream(lifted)
    assert time.monotonic() - started < TIMEOUT + MARGIN
    assert response.status_code in (200, 502), text
    assert "[DONE]" not in text and '"retryable":true' in text.replace(" ", ""), text[-300:]
    assert _peak_mib(pid) - before < ENDLESS_MIB / 4, "the gateway buffered the endless event"


def test_a_sync_answer_without_end_is_cut_off_not_buffered(lifted: Rig) -> None:
    body = b"{" + b" " * (ENDLESS_MIB * 1024 * 1024)
    lifted.chat.enqueue(Reply(body=body))
    pid = lifted.gateway.process.pid
    before = _peak_mib(pid)
    response, seconds = _sync(lifted)
    # Refused on its declared length (502), or, on a machine too busy to send even the
    # head within the 1 s timeout, a 504: retryable either way, and never held whole.
    error = response.json()["error"]
    assert (response.status_code, error["code"], error["retryable"]) in {
        (502, "upstream_error", True),
        (504, "upstream_timeout", True),
    }, response.text
    assert seconds < TIMEOUT + MARGIN
    assert _peak_mib(pid) - before < ENDLESS_MIB / 4, "the gateway buffered the whole answer"
