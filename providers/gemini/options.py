"""The `[providers.<name>]` table of a Gemini API upstream (`generateContent`).

The shared HTTP fields come from `providers.options.HttpOptions`; `base_url` gets Google's
endpoint as its default. Unknown fields stay an error, so a typo names the field.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from providers.options import HttpOptions
from providers.storage_urls import storage_prefix

__all__ = ["Options"]


class Options(HttpOptions, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """Config of one Gemini API upstream.

    The key goes out as `x-goog-api-key: <key>`; see `HttpOptions` for how it is found and for
    the timeouts. `include_thoughts` asks thinking models for their thought summaries, which
    come back as `reasoning_content` (off by default: older models reject `thinkingConfig`).
    `safety_settings` maps a harm category to a threshold, sent as Gemini's `safetySettings`
    on every call (`{"HARM_CATEGORY_HARASSMENT" = "BLOCK_ONLY_HIGH"}`).
    `allowed_storage_prefixes` lists the `gs://` buckets or folders whose objects a request
    may name (the upstream reads them with the gateway's identity); none by default
    (`providers.storage_urls`).
    """

    base_url: Annotated[str, msgspec.Meta(pattern=r"^https?://")] = (
        "https://generativelanguage.googleapis.com/v1beta"
    )
    include_thoughts: bool = False
    safety_settings: dict[str, str] = {}
    allowed_storage_prefixes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        try:
            prefixes = tuple(storage_prefix(p, "gs") for p in self.allowed_storage_prefixes)
        except ValueError as exc:
            raise ValueError(f"allowed_storage_prefixes: {exc}") from exc
        msgspec.structs.force_setattr(self, "allowed_storage_prefixes", prefixes)
