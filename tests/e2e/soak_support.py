"""The parts of the soak test (tests/e2e/test_soak.py): the traffic each client thread sends and
what it remembers of every answer, the fault injector, and the RSS sampler.

Every call carries its own X-Request-Id, which the ledger keeps on each chat charge, so the
test can set every answer beside what was charged for it.
"""

from __future__ import annotations

import hashlib
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx

from tests.e2e.media_support import wav_bytes
from tests.fakes.openai_images_upstream import FakeOpenAIImages, ImageReply
from tests.fakes.openai_upstream import FakeOpenAI, Reply
from tests.support.fault_proxy import Fault, FaultProxy

__all__ = [
    "KINDS",
    "Client",
    "FaultInjector",
    "Outcome",
    "RssSampler",
    "rss_kib",
]

# Weights of the kinds of call the client threads make.
KINDS = {
    "chat": 30,
    "stream": 30,
    "chat_replay": 8,
    "image": 6,
    "music": 4,
    "task_replay": 4,
    "upload": 6,
}
THINK_SECONDS = 0.03
MESSAGES = [{"role": "user", "content": "Tell me about the sea."}]
SMALL_WAV = wav_bytes(2.0, rate=16000)  # ~64 KB


@dataclass
class Outcome:
    """One call as the client saw it."""

    kind: str
    tenant: str
    request_id: str
    status: int = 0  # -1: no answer (a connection error or a client timeout)
    code: str = ""  # error.code when it failed
    retryable: bool | None = None
    credits: Decimal | None = None  # usage.credits of a chat that completed
    broken: bool = False  # a stream that began and ended with an error event
    task_id: str | None = None
    replay_of: str | None = None  # request id of the original, for a replay
    seconds: float = 0.0
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status in (200, 201, 202) and not self.broken


class Client:
    """One client thread's calls, to the replicas in turn; every outcome lands in `outcomes`."""

    def __init__(
        self,
        name: str,
        bases: list[str],
        tenant: str,
        key: str,
        outcomes: list[Outcome],
        *,
        seed: int,
    ) -> None:
        self.name = name
        self.bases = bases
        self.tenant = tenant
        self.outcomes = outcomes
        self.rng = random.Random(seed)
        self.count = 0
        self.http = httpx.Client(timeout=30, headers={"Authorization": f"Bearer {key}"})

    def close(self) -> None:
        self.http.close()

    def _base(self) -> str:
        return self.bases[self.count % len(self.bases)]

    def _outcome(self, kind: str) -> Outcome:
        self.count += 1
        outcome = Outcome(kind, self.tenant, f"soak-{self.name}-{self.count}")
        self.outcomes.append(outcome)
        return outcome

    def step(self) -> None:
        """One call of a kind drawn by weight, then a short pause (a soak, not a stress test)."""
        kinds, weights = zip(*KINDS.items(), strict=True)
        kind = self.rng.choices(kinds, weights)[0]
        getattr(self, f"_{kind}")()
        time.sleep(THINK_SECONDS)  # a client's think time

    def _call(self, outcome: Outcome, send: Callable[[], httpx.Response]) -> httpx.Response | None:
        started = time.monotonic()
        try:
            response = send()
        except httpx.HTTPError as exc:
            outcome.status, outcome.detail = -1, repr(exc)
            return None
        finally:
            outcome.seconds = time.monotonic() - started
        outcome.status = response.status_code
        if response.status_code >= 400:
            error = response.json().get("error", {})
            outcome.code, outcome.retryable = error.get("code", "?"), error.get("retryable")
        return response

    def _headers(self, outcome: Outcome, key: str | None = None) -> dict[str, str]:
        headers = {"X-Request-Id": outcome.request_id}
        if key:
            headers["Idempotency-Key"] = key
        return headers

    # chat ---------------------------------------------------------------------------------

    def _chat(self, key: str | None = None) -> Outcome:
        outcome = self._outcome("chat")
        body = {"model": "up-chat", "messages": MESSAGES}
        url = f"{self._base()}/v1/chat/completions"
        response = self._call(
            outcome, lambda: self.http.post(url, json=body, headers=self._headers(outcome, key))
        )
        if response is not None and response.status_code == 200:
            outcome.credits = Decimal(response.json()["usage"]["credits"])
            outcome.detail = response.text
        return outcome

    def _chat_replay(self) -> None:
        key = f"chat-{self.name}-{self.count}"
        first = self._chat(key)
        if first.status != 200:
            return
        again = self._outcome("chat_replay")
        again.replay_of = first.request_id
        body = {"model": "up-chat", "messages": MESSAGES}
        url = f"{self._base()}/v1/chat/completions"
        response = self._call(
            again, lambda: self.http.post(url, json=body, headers=self._headers(again, key))
        )
        if response is not None and response.status_code == 200:
            assert response.headers.get("idempotent-replayed") == "true", response.headers
            assert response.text == first.detail, "a replay differs from the first answer"

    def _stream(self) -> None:
        outcome = self._outcome("stream")
        body = {
            "model": "up-chat",
            "messages": MESSAGES,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        url = f"{self._base()}/v1/chat/completions"
        started = time.monotonic()
        try:
            with self.http.stream(
                "POST", url, json=body, headers=self._headers(outcome)
            ) as response:
                text = response.read().decode()
        except httpx.HTTPError as exc:
            outcome.status, outcome.detail = -1, repr(exc)
            outcome.seconds = time.monotonic() - started
            return
        outcome.seconds = time.monotonic() - started
        outcome.status = response.status_code
        if response.status_code != 200:
            error = httpx.Response(400, content=text.encode()).json()["error"]
            outcome.code, outcome.retryable = error["code"], error["retryable"]
            return
        events = [e.removeprefix("data: ") for e in text.strip().split("\n\n")]
        if events[-1] != "[DONE]":
            error = httpx.Response(400, content=events[-1].encode()).json()["error"]
            outcome.broken, outcome.code, outcome.retryable = (
                True,
                error["code"],
                error["retryable"],
            )
            return
        usage = httpx.Response(200, content=events[-2].encode()).json()["usage"]
        outcome.credits = Decimal(usage["credits"])

    # tasks --------------------------------------------------------------------------------

    def _create(self, kind: str, path: str, body: dict[str, Any], key: str | None) -> Outcome:
        outcome = self._outcome(kind)
        url = f"{self._base()}{path}"
        response = self._call(
            outcome, lambda: self.http.post(url, json=body, headers=self._headers(outcome, key))
        )
        if response is not None and response.status_code == 202:
            outcome.task_id = response.json()["task_id"]
        return outcome

    def _image(self) -> None:
        body = {"model": "gpt-image", "prompt": f"a boat {self.count}", "n": self.rng.randint(1, 2)}
        self._create("image", "/v1/images/generations", body, None)

    def _music(self) -> None:
        body = {"model": "musicgen", "prompt": f"a shanty {self.count}"}
        self._create("music", "/v1/music/text-to-music", body, None)

    def _task_replay(self) -> None:
        key = f"task-{self.name}-{self.count}"
        body = {"model": "gpt-image", "prompt": f"a gull {self.count}"}
        first = self._create("image", "/v1/images/generations", body, key)
        if first.task_id is None:
            return
        again = self._create("task_replay", "/v1/images/generations", body, key)
        again.replay_of = first.request_id
        if again.status == 202:
            assert again.task_id == first.task_id, "a replayed create made another task"
            again.task_id = None  # the task is counted once, with its first create

    # uploads ------------------------------------------------------------------------------

    def _upload(self) -> None:
        outcome = self._outcome("upload")
        url = f"{self._base()}/v1/uploads"
        files = {"file": ("tone.wav", SMALL_WAV, "audio/wav")}
        response = self._call(
            outcome, lambda: self.http.post(url, files=files, headers=self._headers(outcome))
        )
        if response is None or response.status_code != 201:
            return
        artifact = response.json()["artifact_id"]
        other = self.bases[(self.count + 1) % len(self.bases)]
        content = self.http.get(f"{other}/v1/artifacts/{artifact}/content")
        assert content.status_code == 200, content.text
        assert hashlib.sha256(content.content).digest() == hashlib.sha256(SMALL_WAV).digest()


@dataclass
class FaultInjector:
    """Every `every` seconds, one fault on one upstream for `hold` seconds, then pass-through."""

    proxies: dict[str, FaultProxy]
    chat: FakeOpenAI
    images: FakeOpenAIImages
    every: float
    hold: float
    rng: random.Random = field(default_factory=lambda: random.Random(7))
    injected: Counter[str] = field(default_factory=Counter)

    def faults(self) -> list[tuple[str, Callable[[], None]]]:
        chat, images = self.proxies["chat"], self.proxies["images"]
        music = self.proxies["music"]
        return [
            ("chat:reset", lambda: chat.set(Fault.reset())),
            ("chat:stall", lambda: chat.set(Fault.stall())),
            ("chat:stall-mid-stream", lambda: chat.set(Fault.stall(after=400))),
            ("chat:truncate", lambda: chat.set(Fault.truncate(300))),
            ("chat:malformed", lambda: chat.set(Fault.malformed(b"HTTP/1.1 200 OK\r\n\r\n{x"))),
            ("chat:latency", lambda: chat.set(Fault.latency(0.2))),
            ("chat:5xx", lambda: self.chat.enqueue(*[Reply.error(503, "busy", type="x")] * 5)),
            ("chat:kill-open", chat.kill_open),
            ("images:reset", lambda: images.set(Fault.reset())),
            ("images:stall", lambda: images.set(Fault.stall())),
            ("images:5xx", lambda: self.images.enqueue(ImageReply.error(500, "x", type="x"))),
            ("music:reset", lambda: music.set(Fault.reset())),
            ("music:stall", lambda: music.set(Fault.stall())),
        ]

    def run(self, stop: threading.Event) -> None:
        faults = self.faults()
        self.rng.shuffle(faults)
        turn = 0
        while not stop.wait(self.every):
            name, apply = faults[turn % len(faults)]
            turn += 1
            apply()
            self.injected[name] += 1
            stop.wait(self.hold)
            for proxy in self.proxies.values():
                proxy.set(Fault.PASS)


def rss_kib(pid: int) -> int:
    """VmRSS of a process, in KiB, from /proc/<pid>/status."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


@dataclass
class RssSampler:
    """RSS of each pid every `every` seconds: (seconds since start, {pid: KiB})."""

    pids: list[int]
    every: float = 2.0
    samples: list[tuple[float, dict[int, int]]] = field(default_factory=list)

    def run(self, stop: threading.Event) -> None:
        started = time.monotonic()
        while True:
            self.samples.append(
                (time.monotonic() - started, {pid: rss_kib(pid) for pid in self.pids})
            )
            if stop.wait(self.every):
                return

    def at(self, seconds: float) -> dict[int, int]:
        """The first sample taken at or after `seconds`."""
        return next(s for t, s in self.samples if t >= seconds)
