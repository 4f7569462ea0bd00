"""The `[providers.<name>]` table of an OpenAI-compatible upstream.

The fields are the shared HTTP ones (`providers.options.HttpOptions`: URL, key, timeouts,
pool, extra headers); OpenAI-only settings go here: the Images API knobs (`image_*`), since
the same provider object serves chat and images. Unknown fields stay an error, so a typo names
the field instead of being silently ignored.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from providers.options import HttpOptions, Seconds

__all__ = ["ImageQuality", "Options"]

GptImageQuality = Literal["low", "medium", "high", "auto"]


class ImageQuality(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """The `quality` sent to gpt-image-* models for each of the gateway's two qualities.

    dall-e-3 takes the gateway's names as they are (`standard`, `hd`); dall-e-2 takes none."""

    standard: GptImageQuality = "medium"
    hd: GptImageQuality = "high"


class Options(HttpOptions, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """Config of one OpenAI-compatible upstream (OpenAI, Azure-style proxies, vLLM, Ollama...).

    The key goes out as `Authorization: Bearer <key>`; see `HttpOptions` for how it is found
    and for the timeouts. Images (`providers.openai.images`): `image_quality` maps the
    gateway's qualities for gpt-image-* models, `image_output_format` is the file type they
    return, `image_timeout_seconds` bounds one Images API call (they take far longer than a
    chat answer), and `image_checkpoint_seconds` is how often a call that is still waiting
    reports progress (and so learns that its task was canceled). `responses_api`: whether the
    upstream serves OpenAI's Responses API (`<base_url>/responses`), so that a client's
    `/v1/responses` request is passed to it as sent; false for a chat-completions-only server
    (then the gateway translates the request to chat completions).
    """

    responses_api: bool = True

    image_quality: ImageQuality = msgspec.field(default_factory=ImageQuality)
    image_output_format: Literal["png", "jpeg", "webp"] = "png"
    image_timeout_seconds: Seconds = 300.0
    image_checkpoint_seconds: Seconds = 2.0
