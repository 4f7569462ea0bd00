"""POST /v1/music/text-to-music and /v1/music/reference-audio-to-music (Preview): 202, a task."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Request, Response, post

from gateway.api.media_create import create_doc, create_task
from gateway.api.resources import Resources
from gateway.schemas.media import (
    MusicBody,
    MusicRequest,
    ReferenceAudioToMusicBody,
    ReferenceAudioToMusicRequest,
)

__all__ = ["HANDLERS"]

_TEXT_TO_MUSIC = msgspec.json.Decoder(MusicRequest)
_REFERENCE_AUDIO = msgspec.json.Decoder(ReferenceAudioToMusicRequest)


@post(
    "/v1/music/text-to-music",
    status_code=202,
    opt=create_doc(
        "Create a text-to-music task",
        "Music",
        MusicBody,
        "`lyrics` must be omitted when `instrumental` is true.",
        {"model": "auto", "prompt": "A calm piano piece", "instrumental": True},
    ),
)
async def text_to_music(request: Request[Any, Any, Any], resources: Resources) -> Response[bytes]:
    return await create_task(request, resources, "text_to_music", _TEXT_TO_MUSIC)


@post(
    "/v1/music/reference-audio-to-music",
    status_code=202,
    opt=create_doc(
        "Create a music task from reference audio",
        "Music",
        ReferenceAudioToMusicBody,
        "`reference_audio` is an uploaded artifact or an https URL (fetched when the task runs).",
    ),
)
async def reference_audio_to_music(
    request: Request[Any, Any, Any], resources: Resources
) -> Response[bytes]:
    return await create_task(request, resources, "reference_audio_to_music", _REFERENCE_AUDIO)


HANDLERS = [reference_audio_to_music, text_to_music]
