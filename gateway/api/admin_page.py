"""GET /admin: the admin page for platform teams, and its script and style sheet.

The page holds no secret and needs none to load: it asks for the admin token and sends it to
/admin/v1 itself. The Content-Security-Policy allows only this gateway's own script, style and
API (no inline script, no string-to-HTML sinks), so data shown on the page cannot run as code.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files

from litestar import get
from litestar.response import Response

from gateway.errors import NotFound

__all__ = [
    "ASSET_PATH",
    "CONTENT_SECURITY_POLICY",
    "HANDLERS",
    "SCRIPTS",
    "admin_asset",
    "admin_page",
]

ASSET_PATH = "/admin/assets"

CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "img-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
        "require-trusted-types-for 'script'",
        "trusted-types 'none'",
    )
)

_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}

SCRIPTS = ("admin.js", "api.js", "dom.js", "pager.js", "keys.js", "key_form.js", "credits.js")
"""The page's script modules: admin.js imports the others."""

_MEDIA_TYPES = {
    "index.html": "text/html",
    "admin.css": "text/css",
    **dict.fromkeys(SCRIPTS, "text/javascript"),
}


@cache
def _read(name: str) -> bytes:
    """Package files do not change while the process runs: read each once."""
    return files("gateway.api.admin_assets").joinpath(name).read_bytes()


def _file_response(name: str) -> Response[bytes]:
    return Response(_read(name), media_type=_MEDIA_TYPES[name], headers=_HEADERS)


@get(["/admin", "/admin/"], sync_to_thread=False, include_in_schema=False)
def admin_page() -> Response[bytes]:
    return _file_response("index.html")


@get(f"{ASSET_PATH}/{{name:str}}", sync_to_thread=False, include_in_schema=False)
def admin_asset(name: str) -> Response[bytes]:
    if name == "index.html" or name not in _MEDIA_TYPES:
        raise NotFound()
    return _file_response(name)


HANDLERS = [admin_page, admin_asset]
