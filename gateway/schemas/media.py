"""The media create requests as clients send them (images and music), decoded once.

Types and enumerations are checked by the decoder (a wrong one names its field); the rules
that span fields are `media_problems` in `gateway.tasks.validation`.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

__all__ = [
    "ArtifactInput",
    "DataUriInput",
    "ImageGenerationRequest",
    "ImageToImageRequest",
    "MediaRequest",
    "MusicRequest",
    "ReferenceAudioToMusicRequest",
    "ReferenceInput",
    "UrlInput",
]

Quality = Literal["standard", "hd"]
AspectRatio = Literal["auto", "1:1", "16:9", "9:16", "4:3", "3:4", "2:1"]


class UrlInput(
    msgspec.Struct, tag_field="type", tag="url", kw_only=True, forbid_unknown_fields=True
):
    url: str


class DataUriInput(
    msgspec.Struct, tag_field="type", tag="data_uri", kw_only=True, forbid_unknown_fields=True
):
    data_uri: str


class ArtifactInput(
    msgspec.Struct, tag_field="type", tag="artifact", kw_only=True, forbid_unknown_fields=True
):
    artifact_id: str


ReferenceInput = UrlInput | DataUriInput | ArtifactInput


class _Create(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    model: str
    prompt: str
    metadata: dict[str, str] = {}
    model_options: dict[str, Any] = {}


class ImageGenerationRequest(_Create, kw_only=True, forbid_unknown_fields=True):
    quality: Quality = "standard"
    aspect_ratio: AspectRatio = "1:1"
    n: int = 1


class ImageToImageRequest(ImageGenerationRequest, kw_only=True, forbid_unknown_fields=True):
    image: ReferenceInput
    extra_images: list[ReferenceInput] = []


class MusicRequest(_Create, kw_only=True, forbid_unknown_fields=True):
    lyrics: str | None = None
    instrumental: bool = False
    title: str | None = None


class ReferenceAudioToMusicRequest(MusicRequest, kw_only=True, forbid_unknown_fields=True):
    reference_audio: UrlInput | ArtifactInput


MediaRequest = (
    ImageGenerationRequest | ImageToImageRequest | MusicRequest | ReferenceAudioToMusicRequest
)
