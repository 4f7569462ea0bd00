"""The hold's input bound: what a request carries besides text, and what the upstreams of its
routes may bill for it.

`InputInventory` is what one request carries that its bytes do not bound: images (by their
size when a data URI's header says it), PDF pages, other non-text parts, tools, and the server
tools an upstream runs in a loop on its own (each use adding content, each round billing the
prompt again). Each dialect builds it: `inventory_of` for OpenAI's chat body, the Messages
dialect its own (`gateway.http.anthropic.bounds`). OpenAI's `web_search_options` (a search billed
per call) is refused; a predicted output's rejected tokens (billed as output beyond the limit)
are bounded by the prediction's bytes. `InputBound` combines the routes' declared
rules (`providers.base.InputRules`, the dearest of them) into the prompt tokens the hold
covers: the body's bytes (text, tool definitions and audio never make more tokens than
bytes), plus each image, page and part by its rule, plus a tool-use prompt, all of it again
for every server-tool round.

A request without any of them costs one pass over its messages: this is the hot path.
"""

from __future__ import annotations

import mimetypes
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
from msgspec import UNSET

from gateway.chat.media_size import PdfUncountable, image_size, pdf_pages
from gateway.errors import ErrorDetail, InvalidRequest, fields_message
from gateway.schemas.chat import ChatRequest
from providers.base import InputRules, InputsBilled

__all__ = [
    "NO_INPUTS",
    "UNDECLARED_RULES",
    "InputBound",
    "InputInventory",
    "data_uri_parts",
    "inventory_of",
    "rules_of",
]

_encode = msgspec.json.encode


@dataclass(slots=True)
class InputInventory:
    """What a request carries that its bytes do not bound."""

    images: list[tuple[int, int] | None] = field(default_factory=list)
    """One entry an image: its (width, height), None when the gateway cannot read it."""
    pdf_pages: int = 0
    media_parts: int = 0
    """Non-text parts that are neither images nor PDFs (audio, other files, refusals)."""
    tools: bool = False
    extra_prompt_tokens: int = 0
    """Tokens the dialect knows its own features add (Anthropic's typed tools)."""
    server_tool_uses: int = 0
    """Rounds an upstream may run server tools on its own, at most."""
    server_tool_content_tokens: int = 0
    """Tokens those rounds may add to the context, all of them together, at most."""
    extra_output_tokens: int = 0
    """Output tokens billed beyond the request's limit: a predicted output's rejected
    tokens (at most the prediction's bytes)."""

    def empty(self) -> bool:
        return not (
            self.images
            or self.pdf_pages
            or self.media_parts
            or self.tools
            or self.extra_prompt_tokens
            or self.server_tool_uses
            or self.extra_output_tokens
        )


NO_INPUTS = InputInventory()

UNDECLARED_RULES = InputRules(
    image_tokens=lambda width, height: 50_000,
    image_max_tokens=50_000,
    pdf_page_tokens=60_000,
    media_part_tokens=100,
    tools_prompt_tokens=1_000,
)
"""For a provider that declares no rules: above every adapter's declaration."""


def rules_of(provider: object, upstream_model: str) -> InputRules:
    """The provider's declared rules for the model, or `UNDECLARED_RULES`."""
    if isinstance(provider, InputsBilled):
        return provider.input_rules(upstream_model)
    return UNDECLARED_RULES


class InputBound:
    """The dearest of some routes' rules, per kind of input."""

    __slots__ = ("_image_rules", "image_max", "media_part", "page", "thinking", "tools_prompt")

    def __init__(self, rules: Sequence[InputRules]) -> None:
        self._image_rules = tuple({id(r.image_tokens): r.image_tokens for r in rules}.values())
        self.image_max = max(r.image_max_tokens for r in rules)
        self.page = max(r.pdf_page_tokens for r in rules)
        self.media_part = max(r.media_part_tokens for r in rules)
        self.tools_prompt = max(r.tools_prompt_tokens for r in rules)
        self.thinking = max(r.thinking_beyond_max_tokens for r in rules)

    def image_tokens(self, size: tuple[int, int] | None) -> int:
        if size is None:
            return self.image_max
        width, height = size
        return max(rule(width, height) for rule in self._image_rules)

    def prompt_tokens(self, inputs: InputInventory, body_size: int, completion: int) -> int:
        """Prompt tokens the upstream may bill, at most, for a body of `body_size` bytes
        carrying `inputs` and answering up to `completion` tokens."""
        if inputs.empty():
            return body_size
        tokens = body_size + inputs.extra_prompt_tokens
        tokens += sum(self.image_tokens(size) for size in inputs.images)
        tokens += inputs.pdf_pages * self.page + inputs.media_parts * self.media_part
        if inputs.tools:
            tokens += self.tools_prompt
        rounds = inputs.server_tool_uses
        if rounds:  # each round bills the context so far again: the prompt, what the tools
            # added and what the model wrote
            tokens = (rounds + 1) * (tokens + inputs.server_tool_content_tokens + completion)
        return tokens


def _refuse(field: str, message: str) -> InvalidRequest:
    detail = ErrorDetail(field=field, message=message)
    return InvalidRequest(fields_message([detail]), details=[detail])


def data_uri_parts(url: str) -> tuple[str, int] | None:
    """(media type, where its base64 begins) of a base64 `data:` URI, else None."""
    if not url.startswith("data:"):
        return None
    comma = url.find(",", 5, 300)
    if comma < 0:
        return None
    header = url[5:comma]
    if not header.endswith(";base64"):
        return None
    return header.split(";", 1)[0].lower(), comma + 1


def pages_of(payload: str, start: int, field: str) -> int:
    """A PDF's pages, or a 400 naming `field` when they cannot be counted."""
    try:
        return pdf_pages(payload, start)
    except PdfUncountable as exc:
        raise _refuse(field, f"is a PDF that {exc}: its pages bound what it costs") from exc


def inventory_of(request: ChatRequest) -> InputInventory:
    """The inventory of an OpenAI chat request. A file the gateway cannot see (`file_id`, a
    URL in `file_data`) is refused with a 400 naming it: nothing bounds what it costs."""
    inputs: InputInventory | None = None
    for index, message in enumerate(request.messages):
        content = message.content
        if type(content) is not list:
            continue
        for position, part in enumerate(content):
            kind = part.get("type")
            if kind == "text":
                continue
            if inputs is None:
                inputs = InputInventory()
            _part(inputs, part, kind, f"messages[{index}].content[{position}]")
    if request.tools is not UNSET or request.functions is not UNSET:
        if inputs is None:
            inputs = InputInventory()
        inputs.tools = True
    if request.web_search_options is not UNSET:
        raise _refuse(
            "web_search_options",
            "runs a web search billed per call beyond tokens, which this gateway does not charge",
        )
    prediction = request.prediction
    if prediction is not UNSET and prediction is not None:
        if inputs is None:
            inputs = InputInventory()
        inputs.extra_output_tokens = len(_encode(prediction))
    return NO_INPUTS if inputs is None else inputs


def _part(inputs: InputInventory, part: dict[str, Any], kind: object, field: str) -> None:
    if kind == "image_url":
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, dict) else image
        data = data_uri_parts(url) if isinstance(url, str) else None
        if data is None or not isinstance(url, str):
            if isinstance(url, str) and not url.startswith("data:"):
                _check_image_url(url, f"{field}.image_url.url")
            inputs.images.append(None)
        else:
            _medium(inputs, url, data, f"{field}.image_url.url")
        return
    if kind == "file":
        file = part.get("file")
        file = file if isinstance(file, dict) else {}
        url = file.get("file_data")
        if not isinstance(url, str):
            raise _refuse(
                f"{field}.file", "must carry its bytes as file_data (a file_id is not taken)"
            )
        data = data_uri_parts(url)
        if data is None:
            raise _refuse(f"{field}.file.file_data", "must be a base64 data: URI")
        _medium(inputs, url, data, f"{field}.file.file_data")
        return
    inputs.media_parts += 1


def _check_image_url(url: str, field: str) -> None:
    """An image URL whose name says it is something else (a PDF, a video) is refused: an
    upstream that fetches it by its type (Gemini) would bill what the hold cannot see."""
    guessed = mimetypes.guess_type(url.split("?", 1)[0].split("#", 1)[0])[0]
    if guessed is not None and not guessed.startswith("image/"):
        raise _refuse(field, f"names a {guessed} file, not an image")


def _medium(inputs: InputInventory, url: str, data: tuple[str, int], field: str) -> None:
    """A data URI's medium by its declared type: what an upstream takes it for."""
    media_type, start = data
    if media_type == "application/pdf":
        inputs.pdf_pages += pages_of(url, start, field)
    elif media_type.startswith("image/"):
        inputs.images.append(image_size(url, start))
    else:
        inputs.media_parts += 1
