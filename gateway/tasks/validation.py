"""Media create rules that span fields (types and enumerations are the decoder's).

Every problem is one `{field, message}` detail of one 422 `validation_error`.
"""

from __future__ import annotations

from gateway.errors import ErrorDetail
from gateway.schemas.media import (
    MAX_IMAGES,
    MAX_METADATA_KEY,
    MAX_METADATA_PAIRS,
    MAX_METADATA_VALUE,
    MAX_PROMPT,
    MAX_REFERENCE_IMAGES,
    MAX_TITLE,
    ImageGenerationRequest,
    ImageToImageRequest,
    MediaRequest,
    MusicRequest,
)

__all__ = [
    "MAX_METADATA_KEY",
    "MAX_METADATA_PAIRS",
    "MAX_METADATA_VALUE",
    "MAX_PROMPT",
    "MAX_REFERENCE_IMAGES",
    "media_problems",
]


def media_problems(request: MediaRequest) -> list[ErrorDetail]:
    out: list[ErrorDetail] = []

    def bad(field: str, message: str) -> None:
        out.append(ErrorDetail(field=field, message=message))

    if not request.model:
        bad("model", "must be a model id or 'auto'")
    if not request.prompt:
        bad("prompt", "must be at least 1 character")
    elif len(request.prompt) > MAX_PROMPT:
        bad("prompt", f"must be at most {MAX_PROMPT} characters")
    if len(request.metadata) > MAX_METADATA_PAIRS:
        bad("metadata", f"at most {MAX_METADATA_PAIRS} pairs")
    for key, value in request.metadata.items():
        if not 1 <= len(key) <= MAX_METADATA_KEY:
            bad(
                f"metadata.{key[:MAX_METADATA_KEY]}", f"keys are 1 to {MAX_METADATA_KEY} characters"
            )
        if len(value) > MAX_METADATA_VALUE:
            bad(f"metadata.{key}", f"values are at most {MAX_METADATA_VALUE} characters")
    for namespace, options in request.model_options.items():
        if not isinstance(options, dict):
            bad(f"model_options.{namespace}", "must be an object of the model's options")
    if isinstance(request, ImageGenerationRequest):
        if not 1 <= request.n <= MAX_IMAGES:
            bad("n", f"must be 1 to {MAX_IMAGES}")
        if request.aspect_ratio == "auto" and request.quality != "standard":
            bad("aspect_ratio", "'auto' runs at standard quality only")
    if (
        isinstance(request, ImageToImageRequest)
        and len(request.extra_images) > MAX_REFERENCE_IMAGES - 1
    ):
        bad(
            "extra_images",
            f"at most {MAX_REFERENCE_IMAGES - 1} (image plus extra_images: at most "
            f"{MAX_REFERENCE_IMAGES} references)",
        )
    if isinstance(request, MusicRequest):
        if request.instrumental and request.lyrics is not None:
            bad("lyrics", "must be omitted for instrumental music (instrumental: true)")
        if request.title is not None and len(request.title) > MAX_TITLE:
            bad("title", f"must be at most {MAX_TITLE} characters")
    return out
