"""How Anthropic bills a request's inputs beyond their text (`providers.base.InputRules`), and
the Messages API's own tools that add tokens of their own (the gateway's Messages dialect
bounds them, `gateway.http.anthropic.bounds`)."""

from __future__ import annotations

from math import ceil

from providers.base import InputRules

__all__ = [
    "ANTHROPIC_INPUTS",
    "IMAGE_MAX_TOKENS",
    "TYPED_TOOL_TOKENS",
    "anthropic_image_tokens",
]

IMAGE_MAX_TOKENS = 4_800
"""Claude resizes an image within 2,576 px and 4,784 tokens (1,568 px and ~1,600 tokens on
models before 4.7), plus a few tokens a block."""
_PAGE_TEXT_TOKENS = 6_000
"""The text of one dense PDF page (a typical page is 1,500 to 3,000 tokens)."""

TYPED_TOOL_TOKENS: tuple[tuple[str, int], ...] = (
    ("computer_", 1_300),  # 735 a definition + a system prompt of up to 499
    ("text_editor_", 700),
    ("bash_", 245),
    ("memory_", 700),
    ("web_fetch_", 700),
    ("tool_search_tool_", 700),
)
"""Anthropic's typed tools (type prefix -> input tokens their definition adds beyond its few
bytes, at most): its published tool-use prices, rounded up."""


def anthropic_image_tokens(width: int, height: int) -> int:
    """Claude bills (width x height) / 750 tokens (28-px patches on newer models) after
    scaling the image within its cap: never more than `IMAGE_MAX_TOKENS`."""
    if width <= 0 or height <= 0:
        return IMAGE_MAX_TOKENS
    pixels = ceil(width * height / 750)
    patches = ceil(width / 28) * ceil(height / 28)
    return min(max(pixels, patches) + 16, IMAGE_MAX_TOKENS)


ANTHROPIC_INPUTS = InputRules(
    image_tokens=anthropic_image_tokens,
    image_max_tokens=IMAGE_MAX_TOKENS,
    pdf_page_tokens=IMAGE_MAX_TOKENS + _PAGE_TEXT_TOKENS,
    tools_prompt_tokens=600,  # the tool-use system prompt: 346 on Claude 4, 530 on 3 Opus
)
"""Claude: images by their pixels, PDF pages as a picture and their text, a tool-use system
prompt; `max_tokens` covers extended thinking (its budget is below it)."""
