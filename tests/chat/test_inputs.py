"""The inventory of an OpenAI chat request (what its bytes do not bound) and the input bound
the hold adds for it, by the dearest of its routes' rules."""

from __future__ import annotations

import base64
from typing import Any

import msgspec
import pytest

from gateway.chat.inputs import NO_INPUTS, InputBound, InputInventory, inventory_of
from gateway.errors import InvalidRequest
from gateway.schemas.chat import ChatRequest
from providers.anthropic.inputs import ANTHROPIC_INPUTS
from providers.simulator.generator import SIMULATOR_INPUTS
from tests.support.documents import pdf_base64, png_header


def _request(*parts: dict[str, Any], **fields: Any) -> ChatRequest:
    body = {"model": "m", "messages": [{"role": "user", "content": list(parts)}], **fields}
    return msgspec.convert(body, ChatRequest)


def _image(url: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url}}


def test_a_text_chat_carries_nothing_its_bytes_do_not_bound() -> None:
    text = msgspec.convert(
        {"model": "m", "messages": [{"role": "user", "content": "Hello"}]}, ChatRequest
    )
    assert inventory_of(text) is NO_INPUTS
    assert inventory_of(_request({"type": "text", "text": "Hi"})) is NO_INPUTS


def test_images_pages_parts_and_tools_are_counted() -> None:
    png = base64.b64encode(png_header(3000, 2000)).decode()
    pdf = f"data:application/pdf;base64,{pdf_base64(3)}"
    request = _request(
        _image(f"data:image/png;base64,{png}"),
        _image("https://images.example/a.png"),
        {"type": "file", "file": {"filename": "a.pdf", "file_data": pdf}},
        {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
        tools=[{"type": "function", "function": {"name": "f"}}],
    )
    inputs = inventory_of(request)
    assert (inputs.images, inputs.pdf_pages, inputs.media_parts, inputs.tools) == (
        [(3000, 2000), None],
        3,
        1,
        True,
    )


@pytest.mark.parametrize(
    ("part", "field"),
    [
        ({"type": "file", "file": {"file_id": "file-abc"}}, "messages[0].content[0].file"),
        (
            {"type": "file", "file": {"file_data": "https://docs.example/a.pdf"}},
            "messages[0].content[0].file.file_data",
        ),
        (
            {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERi0="}},
            "messages[0].content[0].file.file_data",
        ),
    ],
)
def test_a_file_the_gateway_cannot_see_or_count_is_refused_naming_it(
    part: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidRequest) as refused:
        inventory_of(_request(part))
    assert refused.value.details[0].field == field


def test_a_web_search_billed_per_call_is_refused() -> None:
    with pytest.raises(InvalidRequest) as refused:
        inventory_of(_request({"type": "text", "text": "Hi"}, web_search_options={}))
    assert refused.value.details[0].field == "web_search_options"


def test_a_predicted_output_is_held_as_output_beyond_the_limit() -> None:
    prediction = {"type": "content", "content": "x" * 500}
    inputs = inventory_of(_request({"type": "text", "text": "Hi"}, prediction=prediction))
    assert inputs.extra_output_tokens >= 500


def test_the_bound_takes_the_dearest_rule_of_the_routes() -> None:
    bound = InputBound([ANTHROPIC_INPUTS, SIMULATOR_INPUTS])
    inputs = InputInventory(images=[(100, 100), None], pdf_pages=2, media_parts=1, tools=True)
    small = max(ANTHROPIC_INPUTS.image_tokens(100, 100), 85)  # the simulator's is dearer
    expected = 1000 + small + ANTHROPIC_INPUTS.image_max_tokens
    expected += 2 * ANTHROPIC_INPUTS.pdf_page_tokens + 85 + ANTHROPIC_INPUTS.tools_prompt_tokens
    assert bound.prompt_tokens(inputs, 1000, 64) == expected
    assert bound.prompt_tokens(NO_INPUTS, 1000, 64) == 1000


def test_each_server_tool_round_bills_the_context_again() -> None:
    bound = InputBound([ANTHROPIC_INPUTS])
    inputs = InputInventory(server_tool_uses=3, server_tool_content_tokens=30_000)
    assert bound.prompt_tokens(inputs, 1000, 64) == 4 * (1000 + 30_000 + 64)


@pytest.mark.parametrize(
    "url", ["https://docs.example/report.pdf", "https://v.example/clip.mp4?x=1"]
)
def test_an_image_url_that_names_another_kind_of_file_is_refused(url: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        inventory_of(_request(_image(url)))
    assert refused.value.details[0].field == "messages[0].content[0].image_url.url"


@pytest.mark.parametrize("url", ["https://i.example/a.png?size=2", "https://i.example/photo"])
def test_an_image_url_is_held_at_the_upstream_s_cap(url: str) -> None:
    assert inventory_of(_request(_image(url))).images == [None]
