"""The `[providers.<name>]` table of an Anthropic Messages API upstream.

The shared HTTP fields come from `providers.options.HttpOptions`; `base_url` gets Anthropic's
own default, and the two Messages-API settings are added. Unknown fields stay an error.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from providers.options import HttpOptions

__all__ = ["Options"]


class Options(HttpOptions, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """Config of one Anthropic upstream; the key goes out as `x-api-key`.

    `anthropic_version` is sent as the `anthropic-version` header on every request.
    `default_max_tokens` is the `max_tokens` sent when a request carries no
    `max_completion_tokens` (Anthropic requires one; the gateway normally sets it).
    `cache_control` opts models in to Anthropic's prompt caching, per upstream model name
    (`"*"` for every model): the system prompt and the tools of their requests are marked
    cacheable for that lifetime ("5m", or "1h" at Anthropic's higher write price).
    """

    base_url: Annotated[str, msgspec.Meta(pattern=r"^https?://")] = "https://api.anthropic.com/v1"
    anthropic_version: Annotated[str, msgspec.Meta(min_length=1)] = "2023-06-01"
    default_max_tokens: Annotated[int, msgspec.Meta(ge=1)] = 4096
    cache_control: dict[str, Literal["5m", "1h"]] = {}

    def cache_ttl(self, model: str) -> str | None:
        """The cache lifetime the routing file gives `model` (an upstream name), if any."""
        cache = self.cache_control
        return cache.get(model, cache.get("*")) if cache else None
