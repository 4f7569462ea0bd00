"""GET /openapi.json: the OpenAPI 3.1 document of every public operation, made once.

Litestar's OpenAPI plugin builds its part on the first request for the document;
`gateway.api.openapi.build` completes it and the bytes are kept for the process's life, so
serving it again costs one cached lookup and the request path pays nothing (the plugin adds no
middleware; it adds this one route). Only the JSON is served: Litestar's documentation pages
(Swagger, Redoc, Scalar, ...) load their scripts from a CDN, which a gateway without internet
access cannot reach. Anything under /openapi.json/ is a 404 in the envelope.
"""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import MediaType, Request, Router
from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import OpenAPIRenderPlugin
from litestar.openapi.spec import Server, Tag

from gateway.api.openapi.build import complete_document, operation_docs
from gateway.errors import NotFound

__all__ = ["DOCUMENT_PATH", "openapi_config"]

DOCUMENT_PATH = "/openapi.json"
VERSION = "0.1.0"

_DESCRIPTION = """\
OpenAI-compatible chat completions, asynchronous image and music tasks, uploads, a credits
wallet and an administration API, in front of upstream model providers.

Authentication: `Authorization: Bearer <API key>` on every /v1 operation except
`GET /v1/health`; /admin/v1 takes the admin token instead.

Every error is the envelope `{"error": {"code", "message", "retryable", "request_id",
"details"}}` with `error.request_id` equal to the `X-Request-Id` response header, which every
response carries. Each operation lists the statuses it can answer. Beyond them: an unknown
path is 404 `not_found`, another method on a known path 405 `method_not_allowed`, and a
request the HTTP parser cannot read 400 `invalid_request`, all in the envelope.

Release labels (`x-release` on each operation): **Available** is a public contract;
**Preview** is callable but may still change. Planned capabilities (video, audio and speech,
realtime, resumable uploads) are not callable and not described here:
their paths answer 501 `not_implemented`.
"""

_TAGS = [
    Tag(name="Chat", description="Chat completions (Available), JSON or Server-Sent Events."),
    Tag(name="Embeddings", description="Embeddings of texts or token arrays (Available)."),
    Tag(name="Models", description="The models the calling tenant may use (Preview)."),
    Tag(name="Catalog", description="Models with capabilities and prices (Preview)."),
    Tag(name="Images", description="Image generation tasks (Preview)."),
    Tag(name="Music", description="Music generation tasks (Preview)."),
    Tag(name="Tasks", description="Asynchronous tasks: lookup, list, cancel (Preview)."),
    Tag(name="Uploads", description="Single-shot uploads (Preview)."),
    Tag(name="Artifacts", description="Stored media files (Preview)."),
    Tag(name="Wallet", description="Credits balance and ledger (Preview, an extension)."),
    Tag(name="Health", description="Liveness of the gateway and its store."),
    Tag(name="Admin", description="Administration for platform operators (admin token)."),
]


class _Document(OpenAPIRenderPlugin):
    """Serves the completed document, built on first use and kept."""

    def __init__(self) -> None:
        # "/openapi.json" as well: else the plugin mounts its own handler of the raw document
        # there (at /openapi.json/openapi.json), which `_document_only` refuses anyway.
        super().__init__(path=["/", DOCUMENT_PATH], media_type=MediaType.JSON)
        self._bytes: bytes | None = None

    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        if self._bytes is None:
            # Imported here: it imports controllers, which the app factory imports only when
            # it builds the app (as `gateway.api.route_handlers` does).
            from gateway.api.openapi.admin import ADMIN_DOCS

            documented = operation_docs(request.app.routes, ADMIN_DOCS)
            self._bytes = msgspec.json.encode(complete_document(openapi_schema, documented))
        return self._bytes


def _document_only(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    """The plugin also mounts a catch-all under the document's path (an HTML 404), and the
    plugin's second path: only the document's own path answers."""
    if connection.scope["path"].rstrip("/") != DOCUMENT_PATH:
        raise NotFound("No such endpoint.")


def openapi_config() -> OpenAPIConfig:
    return OpenAPIConfig(
        title="Generation gateway API",
        version=VERSION,
        description=_DESCRIPTION,
        servers=[Server(url="/")],
        tags=_TAGS,
        render_plugins=[_Document()],
        openapi_router=Router(
            DOCUMENT_PATH, route_handlers=[], include_in_schema=False, guards=[_document_only]
        ),
    )
