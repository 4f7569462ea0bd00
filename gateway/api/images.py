"""POST /v1/images/generations and /v1/images/image-to-image (Preview): 202 with a task."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Request, Response, post

from gateway.api.media_create import create_doc, create_task
from gateway.api.resources import Resources
from gateway.schemas.media import (
    ImageGenerationBody,
    ImageGenerationRequest,
    ImageToImageBody,
    ImageToImageRequest,
)

__all__ = ["HANDLERS"]

_PIXEL = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8"
    "z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
"""A 1x1 PNG, the example's reference image."""
_TEXT_TO_IMAGE = msgspec.json.Decoder(ImageGenerationRequest)
_IMAGE_TO_IMAGE = msgspec.json.Decoder(ImageToImageRequest)


@post(
    "/v1/images/generations",
    status_code=202,
    opt=create_doc(
        "Create a text-to-image task",
        "Images",
        ImageGenerationBody,
        "Up to 4 images (`n`) per task; `aspect_ratio: auto` runs at `standard` quality only.",
        {"model": "auto", "prompt": "A lighthouse at dawn", "n": 1},
    ),
)
async def text_to_image(request: Request[Any, Any, Any], resources: Resources) -> Response[bytes]:
    return await create_task(request, resources, "text_to_image", _TEXT_TO_IMAGE)


@post(
    "/v1/images/image-to-image",
    status_code=202,
    opt=create_doc(
        "Create an image-to-image task",
        "Images",
        ImageToImageBody,
        "References: `image` plus up to 15 `extra_images`, each an https URL, a data URI or an "
        "artifact id; data URIs and artifacts are checked now (422), URLs when the task runs.",
        {
            "model": "auto",
            "prompt": "The same in watercolour",
            "image": {"type": "data_uri", "data_uri": f"data:image/png;base64,{_PIXEL}"},
        },
    ),
)
async def image_to_image(request: Request[Any, Any, Any], resources: Resources) -> Response[bytes]:
    return await create_task(request, resources, "image_to_image", _IMAGE_TO_IMAGE)


HANDLERS = [image_to_image, text_to_image]
