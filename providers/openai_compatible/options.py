"""The `[providers.<name>]` table of an OpenAI-compatible server.

The shared HTTP fields (`providers.options.HttpOptions`) plus what servers do differently from
OpenAI, so that one adapter reaches them all. Unknown fields stay an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from providers.options import HttpOptions

__all__ = ["Options"]

MaxTokensField = Literal["max_completion_tokens", "max_tokens"]


class Options(HttpOptions, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """Config of one OpenAI-compatible server.

    `base_url` is where `/chat/completions` is (`http://localhost:11434/v1` for Ollama,
    `http://vllm:8000/v1`); with no key nothing is sent, with one it goes as `Authorization:
    Bearer`. `stream_options = false` leaves `stream_options` out of stream requests (servers
    that refuse it); `max_tokens_field = "max_tokens"` sends the output limit under its older
    name; `drop_fields` lists request fields the server refuses, left out of every request.
    A server that reports no usage (in a stream, or at all) is counted by the gateway from
    what it delivered, and the answer's `usage` says `estimated: true`.
    """

    stream_options: bool = True
    max_tokens_field: MaxTokensField = "max_completion_tokens"
    drop_fields: list[str] = []

    def config_problems(self, environ: Mapping[str, str]) -> list[tuple[str, str]]:
        """What `gateway config check` reports beyond the types (see the loader)."""
        problems = []
        for position, name in enumerate(self.drop_fields):
            if name in ("model", "messages", "stream"):
                problems.append((f"drop_fields[{position}]", f"{name!r} cannot be left out"))
        return problems
