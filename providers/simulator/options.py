"""The `[providers.<name>]` table of a simulator (`kind = "simulator"`)."""

from __future__ import annotations

from typing import Annotated

import msgspec

__all__ = ["Options"]


class Options(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """Timing and failure knobs; the defaults answer at once and never fail.

    `failure_rate` makes that share of calls (drawn at random per call, so a retry can succeed)
    fail with UpstreamUnavailable before the first token. `max_output_tokens` caps every answer
    (as the model's own output limit would) on top of the request's `max_completion_tokens`.
    """

    latency_ms: Annotated[float, msgspec.Meta(ge=0)] = 0.0
    tokens_per_second: Annotated[float, msgspec.Meta(ge=0)] = 0.0
    failure_rate: Annotated[float, msgspec.Meta(ge=0, le=1)] = 0.0
    max_output_tokens: Annotated[int, msgspec.Meta(ge=1)] = 4096
