"""The `[providers.<name>]` table of a Replicate upstream (`kind = "replicate"`)."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from providers.options import HttpOptions, Seconds

__all__ = ["Options"]


class Options(HttpOptions, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """Config of one Replicate account (or a server speaking its predictions API).

    The key goes out as `Authorization: Bearer <key>` to `base_url`'s origin only, never to
    the hosts output files are served from (see `HttpOptions` for how the key is found).
    `timeout_seconds` bounds each HTTP call (create, one poll, one download); the whole job
    may run for `max_wait_seconds`, polled every `poll_interval_seconds`, before it is
    canceled upstream and fails with UpstreamTimeout. `duration_seconds` is the clip length
    asked for (MusicGen's `duration`; a request's `model_options` may set its own) and
    `output_format` the file type. A reference up to `inline_reference_max_bytes` goes inline
    as a data URL; a larger one is uploaded through the Files API first.
    """

    base_url: Annotated[str, msgspec.Meta(pattern=r"^https?://")] = "https://api.replicate.com/v1"
    poll_interval_seconds: Seconds = 1.0
    max_wait_seconds: Seconds = 900.0
    duration_seconds: Annotated[int, msgspec.Meta(ge=1, le=300)] = 8
    output_format: Literal["wav", "mp3"] = "wav"
    inline_reference_max_bytes: Annotated[int, msgspec.Meta(ge=0)] = 256 * 1024
