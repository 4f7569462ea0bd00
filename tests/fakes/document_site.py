"""A website serving documents, for the tests of URLs the gateway fetches itself: a PDF of `n`
empty pages at `/<n>.pdf`, and an HTML page at `/page.html`. A real aiohttp server on
127.0.0.1 (see `FakeServer`); `base_url` has no path."""

from __future__ import annotations

import base64

from aiohttp import web

from tests.fakes.server import FakeServer, RecordedRequest, record
from tests.support.documents import pdf_base64

__all__ = ["DocumentSite"]


class DocumentSite(FakeServer[RecordedRequest, None]):
    base_path = ""
    thread_name = "document-site"

    def routes(self, app: web.Application) -> None:
        app.router.add_get("/{pages:[0-9]+}.pdf", self._pdf)
        app.router.add_get("/page.html", self._page)

    async def _pdf(self, request: web.Request) -> web.Response:
        self.requests.append(await record(request))
        pdf = base64.b64decode(pdf_base64(int(request.match_info["pages"])))
        return web.Response(body=pdf, content_type="application/pdf")

    async def _page(self, request: web.Request) -> web.Response:
        self.requests.append(await record(request))
        return web.Response(body=b"<html></html>", content_type="text/html")
