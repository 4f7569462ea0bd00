"""GET and HEAD /api/hello: Claude Code's start-up probe of its `ANTHROPIC_BASE_URL`, answered
200 as Anthropic's API answers it.

Claude Code sends `HEAD /api/hello` when it starts (unless its non-essential traffic is turned
off) to open the connection and check the host; a 404 there fills the log with errors from a
client that works. No key is needed and nothing is looked up.
"""

from __future__ import annotations

from litestar import get, route
from litestar.response import Response

__all__ = ["HANDLERS", "hello", "hello_head"]


@get("/api/hello", include_in_schema=False)
async def hello() -> Response[dict[str, str]]:
    return Response({"message": "hello"})


@route("/api/hello", http_method=["HEAD"], include_in_schema=False)
async def hello_head() -> Response[bytes]:
    return Response(b"", media_type="application/json")


HANDLERS = [hello, hello_head]
