"""A gateway `kill -9`'d with streams, task creations and a large upload in flight, then a new
process on the same store (the SQLite file, or a private durable Redis) and the same artifacts
folder.

The clients of the dead process see their connections break at once (no hang); a keyed create
retried with its Idempotency-Key is answered once, never debited twice; the new process
finishes or fails every task, the holds of the dead streams are released or expire
(`hold_seconds`), the books balance, the interrupted upload leaves no artifact, and its
half-written temp file is swept by the new process.
"""

from __future__ import annotations

import functools
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from tests.e2e.fault_checks import Books, Failure, all_tasks, assert_retryable, check_all
from tests.e2e.media_support import root_of
from tests.support.gateway_process import GatewayProcess, start_gateway
from tests.support.waiting import wait_until

HOLD_SECONDS = 4
STORY_TOKENS = 150
"""Each stream's length: 5 s at the simulator's 30 tokens a second, so the kill (once five
creates are answered and 8 MiB uploaded) finds them all still streaming on a loaded machine
too; the simulator's own length for a prompt (8 to 60 tokens) let one end before it."""


def _story(i: int) -> str:
    return f"tell me a long story {i} [[sim:tokens={STORY_TOKENS}]]"


CONFIG = f"""
[gateway]
starting_grant_credits = 100000
hold_seconds = {HOLD_SECONDS}
task_lease_seconds = 2

[limits]
requests_per_minute = 100000
tokens_per_minute = 100000000

[providers.sim]
kind = "simulator"
tokens_per_second = 30
task_seconds = 0.5

[[models]]
id = "sim-chat-1"
provider = "sim"
capability = "chat"
max_output_tokens = 200
pricing = {{ input_usd_per_mtok = 5, output_usd_per_mtok = 15 }}

[[models]]
id = "image-model-2"
provider = "sim"
capabilities = ["text_to_image"]
pricing = {{ credits_per_image = {{ standard = 50, hd = 300 }} }}

[tenants.default]
"""
UPLOAD_BYTES = 48 * 1024 * 1024
BOUNDARY = "kill-test-boundary"


def _start(workdir: Path, store_url: str | None, artifacts: Path) -> tuple[GatewayProcess, str]:
    env = {"GATEWAY_ARTIFACTS_DIR": str(artifacts)}
    gateway = start_gateway(workdir, CONFIG, store_url=store_url, extra_env=env)
    if store_url is None:
        key = gateway.api_key or (workdir / "key").read_text()
        (workdir / "key").write_text(key)
        return gateway, key
    key_file = workdir / "key"
    if not key_file.exists():
        key_file.write_text(gateway.new_key("default"))
        gateway.grant("default", "100000")
    return gateway, key_file.read_text()


def _upload_body(sent: list[int], stop: threading.Event) -> Iterator[bytes]:
    """A multipart body of a WAV file, sent slowly enough to be cut off mid-way."""
    yield (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="big.wav"\r\n'
        "Content-Type: audio/wav\r\n\r\n"
    ).encode()
    header = b"RIFF" + (UPLOAD_BYTES - 8).to_bytes(4, "little") + b"WAVEfmt "
    piece = bytes(1024 * 1024)
    yield header
    for _ in range(UPLOAD_BYTES // len(piece)):
        if stop.is_set():
            return
        yield piece
        sent[0] += len(piece)
        time.sleep(0.05)  # a slow upload: still sending when the gateway dies
    yield f"\r\n--{BOUNDARY}--\r\n".encode()


def _upload_length() -> int:
    head = (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="big.wav"\r\n'
        "Content-Type: audio/wav\r\n\r\n"
    )
    tail = f"\r\n--{BOUNDARY}--\r\n"
    return len(head) + 12 + (UPLOAD_BYTES // (1024 * 1024)) * 1024 * 1024 + len(tail)


def _timed(what: str, failures: list[Failure], call: Callable[[], tuple[int, str]]) -> None:
    """Run a client's call; what it saw is kept in `failures` unless it succeeded."""
    started = time.monotonic()
    try:
        status, text = call()
    except httpx.HTTPError as exc:
        failures.append(Failure(what, -1, repr(exc), time.monotonic() - started))
        return
    if status not in (200, 201, 202) or (what.startswith("stream") and "[DONE]" not in text):
        failures.append(Failure(what, status, text, time.monotonic() - started))


def test_a_gateway_killed_mid_flight_recovers_on_a_new_process(
    store_url: str | None, tmp_path: Path
) -> None:
    workdir, artifacts = tmp_path / "gw", tmp_path / "artifacts"
    gateway, key = _start(workdir, store_url, artifacts)
    url = root_of(gateway.base_url)
    headers = {"Authorization": f"Bearer {key}"}
    failures: list[Failure] = []
    streamed = threading.Event()
    stop = threading.Event()
    created: list[tuple[str, str]] = []  # (idempotency key, task id) of answered creates
    tried: list[str] = []  # idempotency keys of every create sent
    sent = [0]

    def stream(i: int) -> tuple[int, str]:
        body = {
            "model": "sim-chat-1",
            "messages": [{"role": "user", "content": _story(i)}],
            "stream": True,
        }
        extra = {"Idempotency-Key": f"stream-{i}"} if i % 2 else {}
        with (
            httpx.Client(timeout=30) as client,
            client.stream(
                "POST", f"{url}/v1/chat/completions", json=body, headers=headers | extra
            ) as response,
        ):
            text = ""
            for piece in response.iter_text():
                text += piece
                streamed.set()
            return response.status_code, text

    def creates() -> tuple[int, str]:
        with httpx.Client(timeout=30) as client:
            i = 0
            while not stop.is_set():
                idem = f"create-{i}"
                tried.append(idem)
                response = client.post(
                    f"{url}/v1/images/generations",
                    json={"model": "image-model-2", "prompt": f"harbour {i}"},
                    headers=headers | {"Idempotency-Key": idem},
                )
                if response.status_code != 202:
                    return response.status_code, response.text
                created.append((idem, response.json()["task_id"]))
                i += 1
                stop.wait(0.1)
        return 202, ""

    def upload() -> tuple[int, str]:
        with httpx.Client(timeout=30) as client:
            response = client.post(
                f"{url}/v1/uploads",
                content=_upload_body(sent, stop),
                headers=headers
                | {
                    "Content-Type": f"multipart/form-data; boundary={BOUNDARY}",
                    "Content-Length": str(_upload_length()),
                },
            )
            return response.status_code, response.text

    with ThreadPoolExecutor(max_workers=8) as pool:
        futures = [
            pool.submit(_timed, f"stream-{i}", failures, functools.partial(stream, i))
            for i in range(4)
        ]
        futures.append(pool.submit(_timed, "creates", failures, creates))
        futures.append(pool.submit(_timed, "upload", failures, upload))
        wait_until(
            lambda: (streamed.is_set(), len(created), sent[0]),
            lambda now: now[0] and now[1] >= 5 and now[2] >= 8 * 1024 * 1024,
            timeout=20,
            interval=0.02,
            what="streams, creates and an upload all under way",
        )
        os.kill(gateway.process.pid, signal.SIGKILL)
        gateway.process.wait(timeout=10)
        killed_at = time.monotonic()
        for future in futures:
            future.result(timeout=30)
        stop.set()
        assert time.monotonic() - killed_at < 10, "a client of the dead process hung"
    assert {f.what for f in failures} >= {"stream-0", "creates", "upload"}, failures
    assert_retryable(failures, within=30)

    temp_files = list(artifacts.rglob(".*.tmp"))
    assert temp_files, "the interrupted upload left no temp file: it was not in flight"
    old = time.time() - 2 * 3600  # as if the crash was long ago: the sweep may take them
    for path in temp_files:
        os.utime(path, (old, old))

    restarted, _ = _start(workdir, store_url, artifacts)
    try:
        url = root_of(restarted.base_url)
        with httpx.Client(base_url=url, headers=headers, timeout=15) as client:
            # Retries with the same keys: answered creates come back as they were; a create
            # whose answer was lost is answered now (created then, or now), debited once.
            answered = dict(created)
            for idem in tried:
                again = client.post(
                    "/v1/images/generations",
                    json={"model": "image-model-2", "prompt": f"harbour {idem.split('-')[1]}"},
                    headers={"Idempotency-Key": idem},
                )
                assert again.status_code == 202, again.text
                if idem in answered:
                    assert again.json()["task_id"] == answered[idem]
                    assert again.headers.get("idempotent-replayed") == "true"
            tasks = all_tasks(client)
            assert len(tasks) == len(tried), "a create retried with its key made a second task"
            # A dead stream's key is free again once its lease (hold_seconds) is over.
            body = {
                "model": "sim-chat-1",
                "messages": [{"role": "user", "content": _story(1)}],
                "stream": True,
            }

            def retried() -> httpx.Response:
                retry = client.post(
                    "/v1/chat/completions", json=body, headers={"Idempotency-Key": "stream-1"}
                )
                if retry.status_code == 409:  # still in flight: says so, retryably
                    assert retry.json()["error"]["retryable"] is True
                return retry

            retry = wait_until(
                retried,
                lambda answer: answer.status_code != 409,
                timeout=HOLD_SECONDS + 15,
                interval=0.5,
                what="a dead call's key free again",
            )
            assert retry.status_code == 200, retry.text
            assert retry.text.endswith("data: [DONE]\n\n")
        check_all(
            restarted.base_url,
            [Books("default", key)],
            store_url=store_url or f"sqlite:///{workdir / 'data' / 'gateway.db'}",
            blobs=artifacts,
            settle_seconds=HOLD_SECONDS + 40,
        )
        assert not any(path.exists() for path in temp_files), "the dead upload's temp file stayed"
    finally:
        restarted.stop()
