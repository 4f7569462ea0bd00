"""The chat-completions body: the typed request, and the client's extension fields beside it.

OpenAI's fields are decoded into `ChatRequest`, which refuses unknown ones, so the common body
is decoded in one pass. A body with top-level fields beyond OpenAI's (vLLM's `top_k`, `min_p`,
`repetition_penalty`, `guided_json`, sent in the openai SDK's `extra_body`) is decoded again as
a plain object: those fields are kept as the client sent them, for the upstreams that take them
(`providers.base.extensions_refused` says which do), and the rest is typed as usual. Only such
bodies pay for the second decode.
"""

from __future__ import annotations

from typing import Any

import msgspec

from gateway.errors import InvalidRequest, decode_detail, fields_message
from gateway.http.json_body import decode_json
from gateway.schemas.chat import ChatRequest

__all__ = ["decode_chat_request"]

_REQUEST = msgspec.json.Decoder(ChatRequest)
_OBJECT = msgspec.json.Decoder(dict[str, Any])
_FIELDS = frozenset(ChatRequest.__struct_fields__)


def decode_chat_request(body: bytes) -> tuple[ChatRequest, dict[str, Any]]:
    """The request and its extension fields (empty for most bodies); a 400 naming the field
    for a body that breaks the request's types."""
    try:
        return decode_json(body, _REQUEST, InvalidRequest), {}
    except InvalidRequest as exc:
        if not _unknown_top_level_field(exc):
            raise
    raw = decode_json(body, _OBJECT, InvalidRequest)
    extensions = {name: raw.pop(name) for name in [name for name in raw if name not in _FIELDS]}
    try:
        request = msgspec.convert(raw, ChatRequest)
    except msgspec.ValidationError as exc:
        detail = decode_detail(exc)
        raise InvalidRequest(fields_message([detail]), details=[detail]) from exc
    return request, extensions


def _unknown_top_level_field(error: InvalidRequest) -> bool:
    details = error.details
    if len(details) != 1:
        return False
    detail = details[0]
    return detail.message == "unknown field" and not any(c in detail.field for c in ".[")
