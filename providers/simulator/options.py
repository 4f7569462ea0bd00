"""The `[providers.<name>]` table of a simulator (`kind = "simulator"`)."""

from __future__ import annotations

from typing import Annotated

import msgspec

__all__ = ["Options"]


def _default_music_clips() -> dict[str, int]:
    return {"alpha-5.5": 2}


class Options(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """Timing and failure knobs; the defaults answer at once and never fail.

    Chat: `failure_rate` makes that share of calls (drawn at random per call, so a retry can
    succeed) fail with UpstreamUnavailable before the first token. `max_output_tokens` caps
    every answer (as the model's own output limit would) on top of the request's
    `max_completion_tokens`.

    Media: `task_seconds` is how long one image or music task takes in total, spread over its
    progress checkpoints (`[[sim:task_ms=N]]` overrides it per task). `clip_seconds` is the
    length of each music clip without reference audio. `music_clips` maps an upstream model
    name to the clips one task gives (the real `alpha-5.5` gives two); other models give one.
    `max_reference_pixels` is the largest reference image (width x height) an image task
    decodes; a larger one is refused as a real upstream would, before it is decoded.
    """

    latency_ms: Annotated[float, msgspec.Meta(ge=0)] = 0.0
    tokens_per_second: Annotated[float, msgspec.Meta(ge=0)] = 0.0
    failure_rate: Annotated[float, msgspec.Meta(ge=0, le=1)] = 0.0
    max_output_tokens: Annotated[int, msgspec.Meta(ge=1)] = 4096
    task_seconds: Annotated[float, msgspec.Meta(ge=0, le=3600)] = 0.5
    clip_seconds: Annotated[float, msgspec.Meta(ge=0.5, le=60)] = 4.0
    max_reference_pixels: Annotated[int, msgspec.Meta(ge=1)] = 40_000_000
    music_clips: dict[str, Annotated[int, msgspec.Meta(ge=1, le=8)]] = msgspec.field(
        default_factory=_default_music_clips
    )
