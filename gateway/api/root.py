"""GET and HEAD /: the front door answers 200, as Anthropic's API does at its root.

Claude Code probes `HEAD /` of its `ANTHROPIC_BASE_URL` at every start; a 404 there reads as a
gateway that is not one. No key is needed and nothing is looked up: `GET /` names where the
API's description and health are, `HEAD /` answers the same status with no body.
"""

from __future__ import annotations

from litestar import get, route
from litestar.response import Response

__all__ = ["HANDLERS", "root", "root_head"]

_ROOT = {"object": "gateway", "openapi": "/openapi.json", "health": "/v1/health"}


@get("/", include_in_schema=False)
async def root() -> Response[dict[str, str]]:
    return Response(_ROOT)


@route("/", http_method=["HEAD"], include_in_schema=False)
async def root_head() -> Response[bytes]:
    return Response(b"", media_type="application/json")


HANDLERS = [root, root_head]
