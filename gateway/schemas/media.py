"""The media create requests as clients send them (images and music), decoded once.

Types and enumerations are checked by the decoder (a wrong one names its field); the bounds
and the rules that span fields are `media_problems` in `gateway.tasks.validation`. The bounds
are stated here as `extra_json_schema` for the OpenAPI document (the decoder ignores them).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

__all__ = [
    "IMAGE_RULES",
    "MAX_IMAGES",
    "MAX_METADATA_KEY",
    "MAX_METADATA_PAIRS",
    "MAX_METADATA_VALUE",
    "MAX_PROMPT",
    "MAX_REFERENCE_IMAGES",
    "MAX_TITLE",
    "MUSIC_RULES",
    "ArtifactInput",
    "CallbackRequest",
    "DataUriInput",
    "ImageGenerationBody",
    "ImageGenerationRequest",
    "ImageToImageBody",
    "ImageToImageRequest",
    "MediaRequest",
    "MusicBody",
    "MusicRequest",
    "ReferenceAudioToMusicBody",
    "ReferenceAudioToMusicRequest",
    "ReferenceInput",
    "UrlInput",
]

MAX_PROMPT = 4000
MAX_REFERENCE_IMAGES = 16
MAX_METADATA_PAIRS = 16
MAX_METADATA_KEY = 64
MAX_METADATA_VALUE = 512
MAX_TITLE = 200
MAX_IMAGES = 4


def _doc(**schema: Any) -> Meta:
    return Meta(extra_json_schema=schema)


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


class CallbackRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Where to deliver the task when it ends (docs/api.md, "Callbacks")."""

    url: Annotated[str, _doc(minLength=1, maxLength=2048, examples=["https://example.com/hooks"])]


class _Create(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    model: Annotated[str, _doc(minLength=1, examples=["auto"])]
    prompt: Annotated[str, _doc(minLength=1, maxLength=MAX_PROMPT)]
    metadata: Annotated[
        dict[str, str],
        _doc(
            maxProperties=MAX_METADATA_PAIRS,
            propertyNames={"minLength": 1, "maxLength": MAX_METADATA_KEY},
            allOf=[{"additionalProperties": {"maxLength": MAX_METADATA_VALUE}}],
        ),
    ] = {}
    model_options: Annotated[
        dict[str, Any],
        _doc(
            description="Options for one model, under its namespace (`alpha`, `beta`, ...); "
            "a namespace the chosen model does not read is refused.",
            allOf=[{"additionalProperties": {"type": "object"}}],
        ),
    ] = {}
    callback: CallbackRequest | None = None


class ImageGenerationRequest(_Create, kw_only=True, forbid_unknown_fields=True):
    quality: Quality = "standard"
    aspect_ratio: AspectRatio = "1:1"
    n: Annotated[int, _doc(minimum=1, maximum=MAX_IMAGES)] = 1


class ImageToImageRequest(ImageGenerationRequest, kw_only=True, forbid_unknown_fields=True):
    image: ReferenceInput
    extra_images: Annotated[list[ReferenceInput], _doc(maxItems=MAX_REFERENCE_IMAGES - 1)] = []


class MusicRequest(_Create, kw_only=True, forbid_unknown_fields=True):
    lyrics: str | None = None
    instrumental: bool = False
    title: Annotated[str | None, _doc(maxLength=MAX_TITLE)] = None


class ReferenceAudioToMusicRequest(MusicRequest, kw_only=True, forbid_unknown_fields=True):
    reference_audio: UrlInput | ArtifactInput


MediaRequest = (
    ImageGenerationRequest | ImageToImageRequest | MusicRequest | ReferenceAudioToMusicRequest
)


IMAGE_RULES: dict[str, Any] = {
    "not": {
        "required": ["aspect_ratio", "quality"],
        "properties": {"aspect_ratio": {"const": "auto"}, "quality": {"const": "hd"}},
    },
    "description": "`aspect_ratio: auto` runs at `standard` quality only.",
}
MUSIC_RULES: dict[str, Any] = {
    "if": {"required": ["instrumental"], "properties": {"instrumental": {"const": True}}},
    "then": {"properties": {"lyrics": {"type": "null"}}},
    "description": "`lyrics` must be omitted for instrumental music.",
}

ImageGenerationBody = Annotated[ImageGenerationRequest, Meta(extra_json_schema=IMAGE_RULES)]
ImageToImageBody = Annotated[ImageToImageRequest, Meta(extra_json_schema=IMAGE_RULES)]
MusicBody = Annotated[MusicRequest, Meta(extra_json_schema=MUSIC_RULES)]
ReferenceAudioToMusicBody = Annotated[
    ReferenceAudioToMusicRequest, Meta(extra_json_schema=MUSIC_RULES)
]
"""The requests with their cross-field rules, for the OpenAPI document."""
