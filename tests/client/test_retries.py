"""What `TaskClient` retries and how long it waits, against a gateway stand-in that answers
from a script (a real HTTP server on a free port): Retry-After timing, dropped connections,
broken downloads, and the failures that must never be retried."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.client import (
    ApiError,
    BadRequest,
    DownloadError,
    ServiceUnavailable,
    TaskClient,
    TransportError,
    UpstreamError,
    ValidationError,
)
from gateway.client.retry import parse_retry_after
from tests.client.scripted_gateway import Reply, ScriptedGateway, error, task
from tests.fakes.server import Disconnect


class Sleeps(list[float]):
    """A `sleep` that remembers what it was asked; it really sleeps only when `real`."""

    def __init__(self, real: bool = False) -> None:
        super().__init__()
        self.real = real

    def __call__(self, seconds: float) -> None:
        self.append(seconds)
        if self.real:
            time.sleep(seconds)  # really waits when asked: the pacing is what is tested


@pytest.fixture
def fake() -> Iterator[ScriptedGateway]:
    server = ScriptedGateway()
    _, stop = server.start_in_thread()
    yield server
    stop()


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def client(fake: ScriptedGateway, sleeps: Sleeps) -> Iterator[TaskClient]:
    with TaskClient(fake.base_url, "gw-test", timeout=5, sleep=sleeps) as c:
        yield c


def test_429_waits_exactly_retry_after_then_succeeds(fake: ScriptedGateway) -> None:
    fake.enqueue(
        Reply(429, error("rate_limited", True), {"Retry-After": "1"}),
        Reply(200, task(status="running")),
    )
    sleeps = Sleeps(real=True)
    started = time.monotonic()
    with TaskClient(fake.base_url, "gw-test", timeout=5, sleep=sleeps) as client:
        got = client.get("task_scripted")
    elapsed = time.monotonic() - started
    assert got.status == "running"
    assert sleeps == [1.0]
    assert 1.0 <= elapsed < 5.0, elapsed  # slept for real; `sleeps` says for exactly how long
    assert [r.path for r in fake.requests] == ["/v1/tasks/task_scripted"] * 2
    assert fake.requests[1].headers["authorization"] == "Bearer gw-test"


def test_a_create_is_retried_with_the_same_idempotency_key(
    fake: ScriptedGateway, client: TaskClient, sleeps: Sleeps
) -> None:
    fake.enqueue(
        Disconnect(),  # the answer is lost: did the gateway create the task? the key decides
        Reply(503, error("model_unavailable", True), {"Retry-After": "0"}),
        Reply(409, error("idempotency_request_in_progress", True)),
        Reply(202, task()),
    )
    created = client.create_image(prompt="a fox", n=2)
    assert created.task_id == "task_scripted"
    keys = {r.headers.get("idempotency-key") for r in fake.requests}
    assert len(fake.requests) == 4 and len(keys) == 1 and None not in keys
    assert fake.requests[0].json == {"model": "auto", "prompt": "a fox", "n": 2}
    assert all(r.json == fake.requests[0].json for r in fake.requests)
    assert len(sleeps) == 3 and sleeps[1] == 0.0  # Retry-After 0 is honoured as it is
    assert 0.25 <= sleeps[0] <= 0.5 and 0.5 <= sleeps[2] <= 2.0  # jittered backoff


def test_each_create_call_gets_a_key_of_its_own(fake: ScriptedGateway, client: TaskClient) -> None:
    fake.enqueue(Reply(202, task("task_a")), Reply(202, task("task_b")), Reply(202, task("c")))
    client.create_music(prompt="one")
    client.create_music(prompt="two")
    client.create_music(prompt="three", idempotency_key="order-7")
    keys = [r.headers["idempotency-key"] for r in fake.requests]
    assert len(set(keys)) == 3 and keys[2] == "order-7"


@pytest.mark.parametrize(
    ("reply", "raised"),
    [
        (Reply(422, error("validation_error", False)), ValidationError),
        (Reply(400, error("invalid_request", False)), BadRequest),
        (Reply(502, error("upstream_error", False)), UpstreamError),
        (Reply(500, error("internal_error", True)), ApiError),
    ],
)
def test_final_failures_are_not_retried(
    fake: ScriptedGateway,
    client: TaskClient,
    sleeps: Sleeps,
    reply: Reply,
    raised: type[ApiError],
) -> None:
    fake.enqueue(reply, Reply(202, task()))
    with pytest.raises(raised) as caught:
        client.create_image(prompt="x")
    assert len(fake.requests) == 1 and sleeps == []
    assert caught.value.status == reply.status
    assert caught.value.request_id == "req_scripted"


def test_retries_stop_after_max_retries(
    fake: ScriptedGateway, client: TaskClient, sleeps: Sleeps
) -> None:
    busy = Reply(503, error("model_unavailable", True), {"Retry-After": "0"})
    fake.enqueue(busy, busy, busy, busy, Reply(200, task()))
    with pytest.raises(ServiceUnavailable) as caught:
        client.get("task_scripted")
    assert len(fake.requests) == 4 and sleeps == [0.0, 0.0, 0.0]
    assert caught.value.retryable and caught.value.retry_after == 0.0


def test_a_proxy_page_is_still_a_typed_error(fake: ScriptedGateway, client: TaskClient) -> None:
    page = Reply(502, b"<html>Bad Gateway</html>", content_type="text/html")
    fake.enqueue(page, page, page, page)
    with pytest.raises(UpstreamError) as caught:
        client.get("task_scripted")
    assert caught.value.code == "http_502" and caught.value.retryable
    assert "Bad Gateway" in caught.value.message
    assert len(fake.requests) == 4


def test_an_upload_whose_answer_was_lost_is_not_sent_twice(
    fake: ScriptedGateway, client: TaskClient, tmp_path: Path
) -> None:
    fake.enqueue(Disconnect(), Reply(201, {"object": "artifact", "artifact_id": "art_x"}))
    with pytest.raises(TransportError):
        client.upload(b"\x89PNG\r\n\x1a\n", filename="a.png")
    assert len(fake.requests) == 1


def test_an_upload_refused_by_the_rate_limit_is_sent_again(
    fake: ScriptedGateway, client: TaskClient, tmp_path: Path
) -> None:
    source = tmp_path / "tone.wav"
    source.write_bytes(b"RIFF" + bytes(100))
    fake.enqueue(
        Reply(429, error("rate_limited", True), {"Retry-After": "0"}),
        Reply(201, {"object": "artifact", "artifact_id": "art_x", "size_bytes": 104}),
    )
    assert client.upload(source).artifact_id == "art_x"
    for sent in fake.requests:  # the file is read again from its start for the retry
        assert b'filename="tone.wav"' in sent.body and b"audio/" in sent.body
        assert b"RIFF" + bytes(100) + b"\r\n--" in sent.body
    assert len(fake.requests) == 2


def test_wait_follows_the_servers_pace_and_rides_out_a_restart(
    fake: ScriptedGateway, client: TaskClient, sleeps: Sleeps
) -> None:
    fake.enqueue(
        Reply(200, task(status="running"), {"Retry-After": "0.2"}),
        Reply(503, error("store_unavailable", True), {"Retry-After": "0.1"}),
        Disconnect(),
        Reply(200, task(status="succeeded", progress={"percent": 100, "stage": "done"})),
    )
    seen: list[str] = []
    done = client.wait("task_scripted", timeout=10, on_progress=lambda t: seen.append(t.status))
    assert done.status == "succeeded" and seen == ["running", "succeeded"]
    assert sleeps[:2] == [0.2, 0.1] and len(sleeps) == 3


def test_wait_on_a_gateway_that_never_answers_fails_fast() -> None:
    sleeps = Sleeps()
    with (
        TaskClient("http://127.0.0.1:9/v1", "gw-test", sleep=sleeps) as client,
        pytest.raises(TransportError, match=r"127\.0\.0\.1:9"),
    ):
        client.wait("task_x", timeout=600)
    assert len(sleeps) == 3  # the usual retries, not ten minutes of them


def test_a_download_cut_short_is_fetched_again_and_written_whole(
    fake: ScriptedGateway, client: TaskClient, tmp_path: Path
) -> None:
    content = bytes(range(256)) * 64
    image = {
        "artifact_id": "art_1",
        "url": "/v1/artifacts/art_1/content?expires=1&signature=s",
        "format": "png",
        "mime_type": "image/png",
        "size_bytes": len(content),
    }
    done = task(status="succeeded", output={"type": "text_to_image", "images": [image]})
    fake.enqueue(
        Reply(200, done),
        Reply(200, content, cut_after=1000, content_type="image/png"),
        Reply(200, content, content_type="image/png"),
    )
    (path,) = client.download("task_scripted", tmp_path)
    assert path == tmp_path / "task_scripted-1.png"
    assert path.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["task_scripted-1.png"]
    fetches = fake.requests[1:]
    assert [r.path for r in fetches] == ["/v1/artifacts/art_1/content"] * 2
    assert all("authorization" not in r.headers for r in fetches)  # signed: no key sent


def test_a_short_file_leaves_nothing_behind(
    fake: ScriptedGateway, client: TaskClient, tmp_path: Path
) -> None:
    clip = {
        "artifact_id": "art_2",
        "audio_url": f"{fake.base_url}/files/art_2?signature=s",  # absolute: used as it is
        "format": "wav",
        "size_bytes": 10,
    }
    fake.enqueue(
        Reply(200, task(status="succeeded", output={"clips": [clip]})),
        Reply(200, b"RIFF", content_type="audio/wav"),
    )
    with pytest.raises(DownloadError, match="received 4 bytes, expected 10"):
        client.download("task_scripted", tmp_path)
    assert list(tmp_path.iterdir()) == []
    assert fake.requests[-1].path == "/v1/files/art_2"


@pytest.mark.parametrize(
    ("header", "seconds"),
    [("3", 3.0), ("0.25", 0.25), ("-1", 0.0), ("soon", None), (None, None)],
)
def test_parse_retry_after(header: str | None, seconds: float | None) -> None:
    assert parse_retry_after(header) == seconds


def test_parse_retry_after_http_date() -> None:
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:10 GMT", now=1445412480.0) == 10.0
