"""POST /v1/images/generations and /v1/images/image-to-image (Preview): 202 with a task."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Request, Response, post

from gateway.api.media_create import create_task
from gateway.resources import Resources
from gateway.schemas.media import ImageGenerationRequest, ImageToImageRequest

__all__ = ["HANDLERS"]

_TEXT_TO_IMAGE = msgspec.json.Decoder(ImageGenerationRequest)
_IMAGE_TO_IMAGE = msgspec.json.Decoder(ImageToImageRequest)


@post("/v1/images/generations", status_code=202)
async def text_to_image(request: Request[Any, Any, Any], resources: Resources) -> Response[bytes]:
    return await create_task(request, resources, "text_to_image", _TEXT_TO_IMAGE)


@post("/v1/images/image-to-image", status_code=202)
async def image_to_image(request: Request[Any, Any, Any], resources: Resources) -> Response[bytes]:
    return await create_task(request, resources, "image_to_image", _IMAGE_TO_IMAGE)


HANDLERS = [image_to_image, text_to_image]
