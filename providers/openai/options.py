"""The `[providers.<name>]` table of an OpenAI-compatible upstream.

The fields are the shared HTTP ones (`providers.options.HttpOptions`: URL, key, timeouts,
pool, extra headers); OpenAI-only settings go here. Unknown fields stay an error, so a typo
names the field instead of being silently ignored.
"""

from __future__ import annotations

from providers.options import HttpOptions

__all__ = ["Options"]


class Options(HttpOptions, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """Config of one OpenAI-compatible upstream (OpenAI, Azure-style proxies, vLLM, Ollama...).

    The key goes out as `Authorization: Bearer <key>`; see `HttpOptions` for how it is found
    and for the timeouts.
    """
