"""The config fields every HTTP adapter shares: an adapter's `Options` extends `HttpOptions`.

Struct inheritance keeps the strictness (`forbid_unknown_fields`, bounds checked at decode), so a
typo like `timout_seconds` or a bad `base_url` is named the same way in every adapter's table. An
adapter adds its own fields in its subclass, and may redeclare a shared one to change its default
(a slow media API, say, a longer `timeout_seconds`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

import msgspec
from yarl import URL

__all__ = ["HttpOptions", "Seconds"]

Seconds = Annotated[float, msgspec.Meta(gt=0)]


class HttpOptions(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """The `[providers.<name>]` fields of any upstream reached over HTTP.

    The key: `api_key_env` names an environment variable; when that variable is set and
    non-empty it wins over `api_key` (so a deployment can override a checked-in value). When
    `api_key_env` is given but unset and there is no `api_key`, `create()` fails: a missing
    secret is a startup error, not a stream of 401s. No key at all sends no credentials.

    Timeouts: `connect_timeout_seconds` bounds opening a TCP/TLS connection; a whole answer
    must arrive within `timeout_seconds`; a streamed answer must deliver each next read within
    `stream_read_timeout_seconds` (and waiting for a free pooled connection plus connecting is
    bounded by `timeout_seconds`). `max_connections` caps the pool; `extra_headers` go on every
    request and win over the adapter's own.
    """

    base_url: Annotated[str, msgspec.Meta(pattern=r"^https?://")]
    api_key: str | None = None
    api_key_env: str | None = None
    timeout_seconds: Seconds = 60.0
    connect_timeout_seconds: Seconds = 5.0
    stream_read_timeout_seconds: Seconds = 60.0
    max_connections: Annotated[int, msgspec.Meta(ge=1)] = 100
    extra_headers: dict[str, str] = {}

    def resolve_api_key(self, environ: Mapping[str, str]) -> str | None:
        """The key to send, from `environ` first (see the class docstring); ValueError naming
        the variable when `api_key_env` is unset and there is no `api_key` to fall back on."""
        if self.api_key_env:
            from_env = environ.get(self.api_key_env)
            if from_env:
                return from_env
            if self.api_key is None:
                raise ValueError(
                    f"api_key_env: environment variable {self.api_key_env!r} is not set"
                )
        return self.api_key or None

    def url(self, path: str) -> URL:
        """`base_url` joined with an endpoint path (`/chat/completions`); build it once."""
        return URL(self.base_url.rstrip("/") + path)
