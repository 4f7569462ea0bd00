"""What a client dialect gives the chat service: a value the HTTP edge passes in, so the
service never asks which dialect called.

`ChatDialect` frames answers that come back in the service's own format (OpenAI's chat
completions, which every `providers.base.ChatProvider` speaks) for the client: as they are for
OpenAI clients, translated for others. `NativeRequest` is what a dialect adds when some
upstreams speak it as is (Anthropic's Messages API to Anthropic upstreams): the client's
request, sent to those routes untranslated and answered as they answer, and what the service's
request could not carry, which restricts the call to those routes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from gateway.chat.framing import StreamFramer
from gateway.errors import ErrorDetail
from gateway.ids import new_completion_id
from providers.base import ChatCompletion, ChatStream

__all__ = ["ChatDialect", "NativeRequest", "NativeUpstream", "dropped_fields", "new_call_id"]


class ChatDialect(Protocol):
    """A dialect whose answers have ids of their own form (Anthropic's `msg_...`) also has
    `new_id() -> str`; without it an answer's id is a chat completion's (`new_call_id`)."""

    @property
    def name(self) -> str:
        """`openai` or `anthropic`: a label of the metrics and the log line (a bounded set)."""
        ...

    @property
    def path(self) -> str:
        """The endpoint: the scope of an Idempotency-Key, with the tenant and the key."""
        ...

    @property
    def limit_field(self) -> str | None:
        """The request's output limit as the dialect names it, for the errors that advise on
        it; None: the name the client used (OpenAI's chat takes two)."""
        ...

    @property
    def lowers_max_tokens(self) -> bool:
        """True: an output limit above a model's is lowered to the model's (the answer says
        so in `x-gateway-max-tokens`); False: it is a 400 naming the field."""
        ...

    def framer(self, *, include_usage: bool) -> StreamFramer:
        """A framer for one stream of chat.completion.chunks (`include_usage`: the request
        asked for OpenAI's usage chunk)."""
        ...

    def completion(self, body: dict[str, Any]) -> bytes:
        """A finished chat.completion (the gateway's id and model, usage with credits) as the
        client's JSON body."""
        ...


class NativeUpstream(Protocol):
    """A route's provider as it speaks the client's dialect."""

    async def complete(self, body: dict[str, Any]) -> ChatCompletion: ...
    async def stream(self, body: dict[str, Any]) -> ChatStream: ...


class NativeRequest(Protocol):
    """One that has fields only its dialect's upstreams take, which a call translated for
    another goes without, names them as `dropped: tuple[str, ...]` (`dropped_fields`)."""

    @property
    def request(self) -> object:
        """The client's request as decoded: what an Idempotency-Key's fingerprint covers."""
        ...

    @property
    def problems(self) -> Sequence[ErrorDetail]:
        """What the service's request could not carry (each naming the client's field): with
        any, only routes that speak the dialect may serve the call."""
        ...

    def upstream(self, provider: object) -> NativeUpstream | None:
        """`provider` as it speaks the dialect, None when it does not."""
        ...

    def body_for(self, upstream_model: str, max_tokens: int | None = None) -> dict[str, Any]:
        """A fresh upstream body: the client's, with the upstream model, and its output limit
        lowered to `max_tokens` when that is given and smaller."""
        ...

    def framer(self, *, call_id: str, model: str) -> StreamFramer:
        """A framer for one stream of native events (the gateway's id and model put in)."""
        ...

    def completion(self, body: dict[str, Any], credits: dict[str, str]) -> bytes:
        """A native answer (the gateway's id and model already in it) as the client's JSON,
        with the charge's `credits` fields added to its usage."""
        ...


def new_call_id(dialect: ChatDialect) -> str:
    """A new answer's id in the dialect's form (`ChatDialect`)."""
    make = getattr(dialect, "new_id", None)
    return new_completion_id() if make is None else str(make())


def dropped_fields(native: NativeRequest) -> tuple[str, ...]:
    """The fields a call translated for another upstream went without (`NativeRequest`)."""
    dropped = getattr(native, "dropped", ())
    return tuple(dropped)
