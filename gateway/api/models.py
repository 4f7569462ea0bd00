"""GET /v1/models and /v1/models/{id} (Preview): the calling tenant's view."""

from __future__ import annotations

import msgspec
from litestar import get

from gateway.api.openapi.doc import OperationDoc, documented
from gateway.api.resources import Resources
from gateway.auth import Caller
from gateway.config.schema import ModelEntry
from gateway.routing.resolver import ModelNotFound

__all__ = ["HANDLERS", "ModelList", "ModelObject", "created_at", "list_models", "retrieve_model"]


class ModelObject(msgspec.Struct, kw_only=True):
    id: str
    object: str = "model"
    created: int
    owned_by: str


class ModelList(msgspec.Struct, kw_only=True):
    object: str = "list"
    data: list[ModelObject]


def _model_object(model: ModelEntry, created: int) -> ModelObject:
    return ModelObject(id=model.id, created=created, owned_by=model.owned_by)


def created_at(resources: Resources) -> int:
    try:
        return int(resources.config.path.stat().st_mtime)
    except OSError:
        return 0


@get(
    "/v1/models",
    opt=documented(
        OperationDoc(
            summary="List the models you may use",
            tag="Models",
            release="Preview",
            responses={200: ModelList},
        )
    ),
)
async def list_models(caller: Caller, resources: Resources) -> ModelList:
    created = created_at(resources)
    models = resources.router.visible_models(caller.tenant)
    return ModelList(data=[_model_object(m, created) for m in models])


@get(
    "/v1/models/{model_id:path}",
    opt=documented(
        OperationDoc(
            summary="Retrieve a model",
            tag="Models",
            release="Preview",
            responses={200: ModelObject},
            errors=(404,),
            description="404 `model_not_found` for a model that does not exist or that you "
            "may not use.",
        )
    ),
)
async def retrieve_model(model_id: str, caller: Caller, resources: Resources) -> ModelObject:
    wanted = model_id.lstrip("/")
    for model in resources.router.visible_models(caller.tenant):
        if model.id == wanted:
            return _model_object(model, created_at(resources))
    raise ModelNotFound(f"The model '{wanted}' does not exist or you do not have access to it.")


HANDLERS = [list_models, retrieve_model]
