"""The Responses API dialect, as the chat service takes it (`gateway.chat.dialect`).

One per request: the `response` object repeats the request's tools, tool_choice and
settings, and a custom tool's call is told apart from a function's by its name, so the dialect
carries what the translation found (`gateway.http.openai_responses.request`). Answers come
back as chat completions (every upstream, translated by its adapter) and are framed as
Responses API objects and events.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gateway.http.openai_responses.answer import response_of
from gateway.http.openai_responses.events import ResponseEventFramer
from gateway.http.openai_responses.request import ResponsesTranslation

__all__ = ["RESPONSES_DIALECT", "RESPONSES_PATH", "OpenAIResponses"]

RESPONSES_DIALECT = "responses"
RESPONSES_PATH = "/v1/responses"


class OpenAIResponses:
    """The dialect of `POST /v1/responses` (`gateway.chat.dialect.ChatDialect`)."""

    name = RESPONSES_DIALECT
    path = RESPONSES_PATH
    limit_field = "max_output_tokens"
    lowers_max_tokens = False  # above a model's limit: a 400 naming the field, as OpenAI answers

    __slots__ = ("_echo", "_names", "_on_end")

    def __init__(
        self,
        translation: ResponsesTranslation,
        on_end: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self._echo = translation.echo
        self._names = translation.names
        self._on_end = on_end
        """Told a stream's finished response object, before its last events are framed."""

    def framer(self, *, include_usage: bool) -> ResponseEventFramer:
        return ResponseEventFramer(self._echo, self._names, self._on_end)

    def completion(self, body: dict[str, Any]) -> bytes:
        return response_of(body, self._echo, self._names)
