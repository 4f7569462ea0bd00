"""GET /v1/artifacts/{id}/content: a signed link is `expires` and `signature` together; half a
link with the key is a 422, not a request served as if the half were not there (the OpenAPI
document says so, and schemathesis found it served)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.api.support import InProcessApp, in_process_app

pytestmark = [
    pytest.mark.filterwarnings("ignore::litestar.exceptions.LitestarDeprecationWarning"),
    pytest.mark.filterwarnings("ignore:Deprecated 'query' parameter:DeprecationWarning"),
]

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d49444154789c63fccfc0500f0004850180848c2cb30000000049454e44ae426082"
)


def test_half_a_signed_link_is_refused(tmp_path: Path) -> None:
    async def main() -> None:
        async with in_process_app(tmp_path) as gw:
            await _check(gw)

    asyncio.run(main())


async def _check(gw: InProcessApp) -> None:
    upload = await gw.client.post(
        "/v1/uploads", files={"file": ("a.png", PNG, "image/png")}, headers=gw.auth()
    )
    assert upload.status_code == 201, upload.text
    content = f"/v1/artifacts/{upload.json()['artifact_id']}/content"
    assert (await gw.client.get(content, headers=gw.auth())).content == PNG
    for params, missing in (({"expires": "-746"}, "signature"), ({"signature": "x"}, "expires")):
        response = await gw.client.get(content, params=params, headers=gw.auth())
        assert response.status_code == 422, response.text
        assert response.json()["error"]["details"][0]["field"] == missing
        keyless = await gw.client.get(content, params=params)  # the key is checked first
        assert keyless.status_code == 401, keyless.text
    both = await gw.client.get(content, params={"expires": "1", "signature": "x"})
    assert both.status_code == 404
