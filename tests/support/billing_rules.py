"""The upstreams' published billing rules at their worst case, applied to the JSON an upstream
received: what a fake reports as usage (`FakeServer.bill`) in the tests that check the hold
bounds the charge. Written from each upstream's documentation, independently of the gateway's
declarations (`providers/*/inputs.py`).

Input tokens are the worst a byte-level tokenizer makes of the request's text (a token a UTF-8
byte of every string that is not a medium, the JSON of tool schemas), a template of 4 tokens a
message, each image and PDF page by the upstream's rule, a tool-use prompt, and every round of
a server tool billing the context again; output tokens are the request's limit, times its
choices.
"""

from __future__ import annotations

import base64
import io
import re
from collections.abc import Callable
from dataclasses import dataclass
from math import ceil, sqrt
from typing import Any

import msgspec
from PIL import Image

__all__ = [
    "ANTHROPIC",
    "GEMINI",
    "OPENAI_4O_MINI",
    "BillingRule",
    "anthropic_image",
    "gemini_image",
    "openai_tiles",
]

_PAGE = re.compile(rb"/Type\s*/Page(?![a-z])")
_MEDIA_PREFIXES = ("iVBOR", "/9j/", "JVBER", "R0lGOD", "UklGR")
_SCHEMA_KEYS = ("input_schema", "parameters", "inputSchema", "json", "schema")
_MESSAGE_LISTS = ("messages", "contents")


def anthropic_image(width: int, height: int) -> int:
    """Claude: (w x h) / 750 within 1,568 px and 1.15 MP (before Claude 4.7); 28-px patches
    within 2,576 px and 4,784 patches, plus 4 a block (4.7 on): the larger of the two."""
    scale = min(1.0, 1568 / max(width, height), sqrt(1_150_000 / (width * height)))
    older = ceil(width * scale * height * scale / 750)
    scale = min(1.0, 2576 / max(width, height))
    patches = ceil(max(1, round(width * scale)) / 28) * ceil(max(1, round(height * scale)) / 28)
    return max(older, min(patches, 4784) + 4)


def _fit(width: int, height: int, longest: int) -> tuple[int, int]:
    """Scaled down (whole pixels) so that neither side is above `longest`."""
    side = max(width, height)
    if side <= longest:
        return width, height
    return max(1, width * longest // side), max(1, height * longest // side)


def openai_tiles(base: int, per_tile: int) -> Callable[[int, int], int]:
    """OpenAI's tile models: fit within 2048 x 2048, short side down to 768, 512-px tiles."""

    def tokens(width: int, height: int) -> int:
        w, h = _fit(width, height, 2048)
        short = min(w, h)
        if short > 768:
            w, h = w * 768 // short, h * 768 // short
        return base + ceil(w / 512) * ceil(h / 512) * per_tile

    return tokens


def gemini_image(width: int, height: int) -> int:
    """Gemini 2: 258 an image within 384 px, else 258 a 768-px tile of it scaled within
    3,072 px; Gemini 3: 1,120 an image at high media resolution: the larger."""
    if width <= 384 and height <= 384:
        return 1120
    w, h = _fit(width, height, 3072)
    return max(258 * ceil(w / 768) * ceil(h / 768), 1120)


@dataclass(frozen=True)
class BillingRule:
    """One upstream's rule: `bill(request_json) -> (input tokens, output tokens)`."""

    image: Callable[[int, int], int]
    image_by_url: int
    """An image the upstream fetches itself: its documented largest."""
    pdf_page: int
    tools_prompt: int = 0
    typed_tools: tuple[tuple[str, int], ...] = ()

    def __call__(self, request: dict[str, Any]) -> tuple[int, int]:
        tally = _Tally(self)
        tally.walk(request, "")
        messages = sum(len(request.get(key) or ()) for key in _MESSAGE_LISTS)
        prompt = tally.tokens + 4 * messages
        tools = request.get("tools") or (request.get("toolConfig") or {}).get("tools")
        if tools:
            prompt += self.tools_prompt
        output = _output_limit(request)
        rounds = content = 0
        for tool in request.get("tools") or ():
            kind = str(tool.get("type", "")) if isinstance(tool, dict) else ""
            for prefix, tokens in self.typed_tools:
                if kind.startswith(prefix):
                    prompt += tokens
            if kind.startswith(("web_fetch_", "tool_search_tool_")):
                uses = tool.get("max_uses") or 10  # no limit: ten fetches
                rounds += uses
                if kind.startswith("web_fetch_"):
                    content += uses * (tool.get("max_content_tokens") or 100_000)
        if rounds:
            prompt = (rounds + 1) * (prompt + content + output)
        return prompt, output


class _Tally:
    def __init__(self, rule: BillingRule) -> None:
        self.rule = rule
        self.tokens = 0

    def walk(self, value: object, key: str) -> None:
        if isinstance(value, dict):
            if key in _SCHEMA_KEYS:
                self.tokens += len(msgspec.json.encode(value))
                return
            for name, item in value.items():
                self.walk(item, name)
        elif isinstance(value, list):
            for item in value:
                self.walk(item, key)
        elif isinstance(value, str):
            self.string(value, key)

    def string(self, value: str, key: str) -> None:
        if value.startswith("data:") and ";base64," in value[:200]:
            self.medium(base64.b64decode(value.split(",", 1)[1]))
        elif value.startswith(_MEDIA_PREFIXES) and len(value) >= 16 and key != "text":
            self.medium(base64.b64decode(value))
        elif key in ("url", "fileUri") and value.startswith(("http://", "https://")):
            self.tokens += self.rule.image_by_url
        else:
            self.tokens += len(value.encode())

    def medium(self, data: bytes) -> None:
        if data.startswith(b"%PDF"):
            self.tokens += len(_PAGE.findall(data)) * self.rule.pdf_page
            return
        try:
            width, height = Image.open(io.BytesIO(data)).size
        except Exception:  # not an image either: its bytes, as a tokenizer would read them
            self.tokens += len(data)
            return
        self.tokens += self.rule.image(width, height)


def _output_limit(request: dict[str, Any]) -> int:
    config = request.get("generationConfig") or {}
    inference = request.get("inferenceConfig") or {}
    limit = (
        request.get("max_completion_tokens")
        or request.get("max_tokens")
        or config.get("maxOutputTokens")
        or inference.get("maxTokens")
        or 0
    )
    choices = request.get("n") or config.get("candidateCount") or 1
    return int(limit) * int(choices)


ANTHROPIC = BillingRule(
    image=anthropic_image,
    image_by_url=4784 + 4,
    pdf_page=4784 + 4 + 3000,  # the page as an image, and its text (1,500 to 3,000 tokens)
    tools_prompt=346,
    typed_tools=(("bash_", 245), ("text_editor_", 700), ("computer_", 735 + 499)),
)
OPENAI_4O_MINI = BillingRule(
    image=openai_tiles(2833, 5667),
    image_by_url=2833 + 8 * 5667,
    pdf_page=2833 + 8 * 5667 + 3000,
)
GEMINI = BillingRule(image=gemini_image, image_by_url=258 * 16, pdf_page=1120)
