"""`POST /v1/messages` fetches a document named by URL itself, under the reference rules,
before the call: one they refuse is a 422 in Anthropic's shape naming the block's URL, and
no upstream is called."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.api.support import in_process_app

# As in test_app.py: Litestar 2.25's deprecations for 3.0, which only an in-process app sees.
pytestmark = [
    pytest.mark.filterwarnings("ignore::litestar.exceptions.LitestarDeprecationWarning"),
    pytest.mark.filterwarnings("ignore:Deprecated 'query' parameter:DeprecationWarning"),
]


def test_a_document_url_the_reference_rules_refuse_is_a_422_naming_it(tmp_path: Path) -> None:
    document = {"type": "document", "source": {"type": "url", "url": "http://127.0.0.1/r.pdf"}}
    body = {
        "model": "auto",
        "max_tokens": 16,
        "messages": [{"role": "user", "content": [document, {"type": "text", "text": "Read"}]}],
    }

    async def main() -> tuple[int, dict[str, object]]:
        async with in_process_app(tmp_path) as gateway:
            response = await gateway.client.post(
                "/v1/messages", json=body, headers={"x-api-key": gateway.key}
            )
            return response.status_code, response.json()

    status, answer = asyncio.run(main())
    assert status == 422, answer
    assert answer["type"] == "error"
    fields = answer["error"]["details"]["fields"]  # type: ignore[index]
    assert [f["field"] for f in fields] == ["messages[0].content[0].source.url"]
