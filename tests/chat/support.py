"""A chat service on real parts (a SQLite store, the simulator provider), no HTTP at all; or
with scripted upstreams (`ScriptedChat`) where a test needs failures in a given order."""

from __future__ import annotations

import random
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from gateway.admission.finisher import CallFinisher
from gateway.admission.gatekeeper import Gatekeeper
from gateway.auth import Caller
from gateway.chat.outcomes import ChatOutcome
from gateway.chat.service import ChatService
from gateway.config.loader import GatewayConfig, load_config
from gateway.errors import InvalidRequest
from gateway.http.json_body import decode_json
from gateway.http.openai_sse import OPENAI_CHAT
from gateway.routing.resolver import Router
from gateway.schemas.chat import ChatRequest
from gateway.store.base import AdmissionResult, Call
from gateway.store.sqlite import SqliteStore
from providers.base import ChatCompletion, Usage
from providers.registry import spec_for
from tests.support.clock import Clock
from tests.support.routing_files import CHAT_SERVICE_CONFIG

__all__ = [
    "Break",
    "ChatParts",
    "RecordingGatekeeper",
    "ScriptedChat",
    "chat_parts",
    "decode_chat_body",
]


class RecordingGatekeeper(Gatekeeper):
    """The real one, noting the hold of every admission (`holds`)."""

    def __init__(self, store: SqliteStore) -> None:
        super().__init__(store)
        self.holds: list[int] = []

    async def admit(self, call: Call, *, hold_units: int = 0, **rest: Any) -> AdmissionResult:
        self.holds.append(hold_units)
        return await super().admit(call, hold_units=hold_units, **rest)


_REQUEST = msgspec.json.Decoder(ChatRequest)


@dataclass(frozen=True, slots=True)
class Break:
    """A scripted stream that fails with `error` after `after` chunks (0: before the first)."""

    error: Exception
    after: int = 0


class ScriptedChat:
    """A ChatProvider whose calls follow a script, one entry per call: an exception to raise
    (from `complete`, or from `stream` before anything), a `Break` for a stream, or None for
    an ordinary answer (also the answer once the script is used up). `bodies` records what
    each call was given."""

    def __init__(self, name: str, text: str = "Hello from a scripted upstream") -> None:
        self.name = name
        self.text = text
        self.script: deque[Exception | Break | None] = deque()
        self.bodies: list[dict[str, Any]] = []

    def then(self, *steps: Exception | Break | None) -> ScriptedChat:
        self.script.extend(steps)
        return self

    def _next(self, body: dict[str, Any]) -> Exception | Break | None:
        self.bodies.append(body)
        step = self.script.popleft() if self.script else None
        if isinstance(step, Exception):
            raise step
        return step

    async def complete(self, body: dict[str, Any]) -> ChatCompletion:
        self._next(body)
        message = {"role": "assistant", "content": self.text, "refusal": None}
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}
        usage = Usage(prompt_tokens=10, completion_tokens=5, total_tokens=15)
        answer = {"id": "x", "created": 1, "model": body["model"], "choices": [choice]}
        answer["usage"] = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        return ChatCompletion(body=answer, usage=usage)

    async def stream(self, body: dict[str, Any]) -> _ScriptedStream:
        step = self._next(body)
        return _ScriptedStream(self.text.split(" "), step if isinstance(step, Break) else None)

    async def close(self) -> None:
        pass


class _ScriptedStream:
    def __init__(self, words: list[str], fault: Break | None) -> None:
        self.usage: Usage | None = None
        self._words = words
        self._fault = fault
        self.closed = False

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[dict[str, Any]]:
        for index, word in enumerate(self._words):
            if self._fault is not None and index == self._fault.after:
                raise self._fault.error
            delta = {"content": word if index == 0 else " " + word}
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}
            yield {"id": "x", "object": "chat.completion.chunk", "created": 1, "choices": [choice]}
        self.usage = Usage(prompt_tokens=10, completion_tokens=len(self._words))
        yield {"id": "x", "object": "chat.completion.chunk", "created": 1, "choices": []}

    def ready(self) -> bool:
        return False

    async def aclose(self) -> None:
        self.closed = True


@dataclass(frozen=True, slots=True)
class ChatParts:
    service: ChatService
    store: SqliteStore
    config: GatewayConfig
    router: Router
    clock: Clock
    gatekeeper: RecordingGatekeeper
    providers: dict[str, Any]

    def caller(self, tenant: str = "default") -> Caller:
        return Caller(key_id=f"key_{tenant}", tenant=self.config.tenants[tenant])

    async def handle(
        self,
        caller: Caller,
        body: bytes,
        *,
        request_id: str,
        idempotency_key: str | None,
    ) -> ChatOutcome:
        """The call as the chat endpoint makes it: the body decoded, OpenAI's stream framing."""
        return await self.service.handle(
            caller,
            decode_chat_body(body),
            body_size=len(body),
            dialect=OPENAI_CHAT,
            request_id=request_id,
            idempotency_key=idempotency_key,
        )


def decode_chat_body(body: bytes) -> ChatRequest:
    """A request body as the HTTP edge decodes it (a malformed one: 400 `invalid_request`)."""
    return decode_json(body, _REQUEST, InvalidRequest)


@asynccontextmanager
async def chat_parts(
    tmp_path: Path,
    *,
    grant: int = 10**9,
    config_text: str = CHAT_SERVICE_CONFIG,
    scripted: tuple[str, ...] = (),
) -> AsyncIterator[ChatParts]:
    """A `ChatService` wired as the app wires it; the tenants' wallets hold `grant` units.
    The providers named in `scripted` are `ScriptedChat`s instead of what the file says."""
    path = tmp_path / "gateway.toml"
    path.write_text(config_text)
    config = load_config(path)
    store = SqliteStore(tmp_path / "gateway.db")
    await store.open()
    providers: dict[str, Any] = {}
    try:
        for tenant in config.tenants:
            await store.grant(tenant, grant, entry_id=f"grant:{tenant}", reason="test")
        for name, entry in config.providers.items():
            if name in scripted:
                providers[name] = ScriptedChat(name)
            else:
                providers[name] = spec_for(entry.kind).create(name, entry.options)
        clock = Clock()
        router = Router(config, providers, clock=clock, rng=random.Random(1))
        gatekeeper = RecordingGatekeeper(store)
        service = ChatService(CallFinisher(store), router, gatekeeper, hold_seconds=60)
        yield ChatParts(
            service=service,
            store=store,
            config=config,
            router=router,
            clock=clock,
            gatekeeper=gatekeeper,
            providers=providers,
        )
    finally:
        for provider in providers.values():
            await provider.close()
        await store.close()
