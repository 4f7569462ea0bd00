"""What a Messages body carries that its bytes do not bound, and the limits the gateway puts
in it (`gateway.http.anthropic.bounds`)."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from gateway.errors import InvalidRequest
from gateway.http.anthropic.bounds import (
    SERVER_TOOL_MAX_CONTENT_TOKENS,
    SERVER_TOOL_MAX_USES,
    bound_messages,
)
from tests.support.documents import jpeg_header, pdf_base64


def _body(*blocks: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {
        "model": "m",
        "max_tokens": 8,
        "messages": [{"role": "user", "content": list(blocks)}],
    } | fields


def test_images_documents_and_tool_results_are_counted() -> None:
    jpeg = base64.b64encode(jpeg_header(800, 600)).decode()
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/jpeg", "data": jpeg},
    }
    by_url = {"type": "image", "source": {"type": "url", "url": "https://i.example/a.png"}}
    pdf = {"type": "base64", "media_type": "application/pdf", "data": pdf_base64(2)}
    text = {"type": "text", "media_type": "text/plain", "data": "words"}
    result = {"type": "tool_result", "tool_use_id": "t", "content": [image]}
    inputs = bound_messages(
        _body(
            image,
            by_url,
            {"type": "document", "source": pdf},
            {"type": "document", "source": text},
            result,
        )
    )
    assert (inputs.images, inputs.pdf_pages, inputs.tools) == (
        [(800, 600), None, (800, 600)],
        2,
        False,
    )


def test_web_fetch_is_capped_in_the_body_and_each_use_is_a_round() -> None:
    absent = {"type": "web_fetch_20250910", "name": "web_fetch"}
    above = {**absent, "max_uses": 50, "max_content_tokens": 10**6}
    below = {**absent, "max_uses": 1, "max_content_tokens": 500}
    body = _body({"type": "text", "text": "Read it"}, tools=[absent, above, below])
    inputs = bound_messages(body)
    capped = {
        "max_uses": SERVER_TOOL_MAX_USES,
        "max_content_tokens": SERVER_TOOL_MAX_CONTENT_TOKENS,
    }
    assert body["tools"][0] == absent | capped
    assert body["tools"][1] == absent | capped
    assert body["tools"][2] == below  # the client's own lower limits are kept
    assert inputs.server_tool_uses == 2 * SERVER_TOOL_MAX_USES + 1
    assert inputs.server_tool_content_tokens == (
        2 * SERVER_TOOL_MAX_USES * SERVER_TOOL_MAX_CONTENT_TOKENS + 500
    )


def test_typed_tools_add_their_definition_s_tokens() -> None:
    tools = [{"type": "bash_20250124", "name": "bash"}, {"name": "f", "input_schema": {}}]
    inputs = bound_messages(_body({"type": "text", "text": "ls"}, tools=tools))
    assert inputs.tools and inputs.extra_prompt_tokens >= 245


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (_body({"type": "text", "text": "x"}, mcp_servers=[{"type": "url"}]), "mcp_servers"),
        (_body({"type": "text", "text": "x"}, container="c_1"), "container"),
        (
            _body({"type": "document", "source": {"type": "file", "file_id": "f"}}),
            "messages[0].content[0].source.type",
        ),
        (
            _body({"type": "image", "source": {"type": "file", "file_id": "f"}}),
            "messages[0].content[0].source.type",
        ),
        (
            _body({"type": "document", "source": {"type": "url", "url": "https://a/b.pdf"}}),
            "messages[0].content[0].source.type",
        ),
        (
            _body(
                {
                    "type": "document",
                    "source": {
                        "type": "base64",
                        "media_type": "application/pdf",
                        "data": "JVBERi0=",
                    },
                }
            ),
            "messages[0].content[0].source.data",
        ),
    ],
)
def test_what_cannot_be_bounded_is_refused_naming_it(body: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        bound_messages(body)
    assert refused.value.details[0].field == field
