"""The `[providers.<name>]` table of an OpenAI-compatible upstream.

Unknown fields are an error (a typo like `timout_seconds` names the field instead of being
silently ignored); numeric bounds are checked at decode time for the same reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

import msgspec

__all__ = ["Options"]

_Seconds = Annotated[float, msgspec.Meta(gt=0)]


class Options(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """Config of one OpenAI-compatible upstream (OpenAI, Azure-style proxies, vLLM, Ollama...).

    The key: `api_key_env` names an environment variable; when that variable is set and
    non-empty it wins over `api_key` (so a deployment can override a checked-in value). When
    `api_key_env` is given but unset and there is no `api_key`, `create()` fails: a missing
    secret is a startup error, not a stream of 401s. No key at all sends no Authorization.

    Timeouts: `connect_timeout_seconds` bounds opening a TCP/TLS connection; a non-stream call
    must finish within `timeout_seconds` in total; a stream must deliver each next read within
    `stream_read_timeout_seconds` (and waiting for a free pooled connection plus connecting is
    bounded by `timeout_seconds`).
    """

    base_url: Annotated[str, msgspec.Meta(pattern=r"^https?://")]
    api_key: str | None = None
    api_key_env: str | None = None
    timeout_seconds: _Seconds = 60.0
    connect_timeout_seconds: _Seconds = 5.0
    stream_read_timeout_seconds: _Seconds = 60.0
    max_connections: Annotated[int, msgspec.Meta(ge=1)] = 100
    extra_headers: dict[str, str] = {}

    def resolve_api_key(self, environ: Mapping[str, str]) -> str | None:
        """The key to send, from `environ` first (see the class docstring)."""
        if self.api_key_env:
            from_env = environ.get(self.api_key_env)
            if from_env:
                return from_env
            if self.api_key is None:
                raise ValueError(
                    f"api_key_env: environment variable {self.api_key_env!r} is not set"
                )
        return self.api_key or None
