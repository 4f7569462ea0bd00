"""GET /v1/catalog/models and /v1/catalog/capabilities (Preview): what can be done today.

Catalog models are the `/v1/models` items plus capabilities, modalities, release label and
pricing. Capabilities list what the tenant's models can do, and the Planned ones by label.
"""

from __future__ import annotations

from decimal import Decimal

import msgspec
from litestar import get

from gateway.api.models import created_at
from gateway.api.openapi.doc import OperationDoc, documented
from gateway.api.resources import Resources
from gateway.auth import Caller
from gateway.config.schema import ModelEntry

__all__ = ["HANDLERS", "list_capabilities", "list_catalog_models"]

_ENDPOINTS: dict[str, list[str]] = {
    "chat": ["/v1/chat/completions"],
    "embeddings": ["/v1/embeddings"],
    "text_to_image": ["/v1/images/generations"],
    "image_to_image": ["/v1/images/image-to-image"],
    "text_to_music": ["/v1/music/text-to-music"],
    "reference_audio_to_music": ["/v1/music/reference-audio-to-music"],
}
_MODALITIES: dict[str, tuple[list[str], list[str]]] = {
    "chat": (["text"], ["text"]),
    "embeddings": (["text"], ["embedding"]),
    "text_to_image": (["text"], ["image"]),
    "image_to_image": (["text", "image"], ["image"]),
    "text_to_music": (["text"], ["audio"]),
    "reference_audio_to_music": (["text", "audio"], ["audio"]),
}
_LABELS = {"chat": "Available", "embeddings": "Available"}
_PLANNED: dict[str, list[str]] = {
    "video": ["/v1/videos"],
    "audio_speech": ["/v1/audio/speech", "/v1/audio/voices"],
    "realtime": ["/v1/realtime"],
}


class Modalities(msgspec.Struct, kw_only=True):
    input: list[str]
    output: list[str]


class CatalogModel(msgspec.Struct, kw_only=True):
    id: str
    object: str = "model"
    created: int
    owned_by: str
    capabilities: list[str]
    modalities: Modalities
    release_label: str
    pricing: dict[str, str | dict[str, str]]


class CatalogModelList(msgspec.Struct, kw_only=True):
    object: str = "list"
    data: list[CatalogModel]


class Capability(msgspec.Struct, kw_only=True):
    id: str
    object: str = "capability"
    release_label: str
    endpoints: list[str]
    models: list[str]


class CapabilityList(msgspec.Struct, kw_only=True):
    object: str = "list"
    data: list[Capability]


def _pricing(model: ModelEntry) -> dict[str, str | dict[str, str]]:
    pricing = model.pricing
    if model.serves("chat"):
        result: dict[str, str | dict[str, str]] = {
            "unit": "upstream_usd_per_million_tokens",
            "input": str(pricing.input_usd_per_mtok),
            "output": str(pricing.output_usd_per_mtok),
            "markup_credits_per_usd": str(model.markup),
        }
        if pricing.cached_input_usd_per_mtok is not None:
            result["cached_input"] = str(pricing.cached_input_usd_per_mtok)
        return result
    if model.serves("embeddings"):
        return {
            "unit": "upstream_usd_per_million_tokens",
            "input": str(pricing.input_usd_per_mtok),
            "markup_credits_per_usd": str(model.markup),
        }
    if pricing.credits_per_image:
        return {
            "unit": "credits_per_image",
            "credits_per_image": {
                quality: f"{Decimal(price):.4f}"
                for quality, price in pricing.credits_per_image.items()
            },
        }
    return {"unit": "credits_per_task", "credits_per_task": f"{pricing.credits_per_task:.4f}"}


@get(
    "/v1/catalog/models",
    opt=documented(
        OperationDoc(
            summary="Models with capabilities, modalities, release label and pricing",
            tag="Catalog",
            release="Preview",
            responses={200: CatalogModelList},
        )
    ),
)
async def list_catalog_models(caller: Caller, resources: Resources) -> CatalogModelList:
    created = created_at(resources)
    data = []
    for model in resources.router.visible_models(caller.tenant):
        inputs = sorted({m for c in model.capabilities for m in _MODALITIES[c][0]})
        outputs = sorted({m for c in model.capabilities for m in _MODALITIES[c][1]})
        data.append(
            CatalogModel(
                id=model.id,
                created=created,
                owned_by=model.owned_by,
                capabilities=list(model.capabilities),
                modalities=Modalities(input=inputs, output=outputs),
                release_label=model.release_label,
                pricing=_pricing(model),
            )
        )
    return CatalogModelList(data=data)


@get(
    "/v1/catalog/capabilities",
    opt=documented(
        OperationDoc(
            summary="What can be done today, capability by capability",
            tag="Catalog",
            release="Preview",
            responses={200: CapabilityList},
        )
    ),
)
async def list_capabilities(caller: Caller, resources: Resources) -> CapabilityList:
    by_capability: dict[str, list[str]] = {}
    for model in resources.router.visible_models(caller.tenant):
        for capability in model.capabilities:
            by_capability.setdefault(capability, []).append(model.id)
    data = [
        Capability(
            id=capability,
            release_label=_LABELS.get(capability, "Preview"),
            endpoints=_ENDPOINTS[capability],
            models=models,
        )
        for capability, models in by_capability.items()
    ]
    data += [
        Capability(id=name, release_label="Planned", endpoints=endpoints, models=[])
        for name, endpoints in _PLANNED.items()
    ]
    return CapabilityList(data=data)


HANDLERS = [list_capabilities, list_catalog_models]
