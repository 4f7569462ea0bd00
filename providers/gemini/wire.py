"""Gemini's answer as it arrives on the wire: the fields of a `GenerateContentResponse` the
adapter reads, decoded once into typed Structs (unknown fields are skipped by msgspec, so
`safetyRatings`, `citationMetadata` and anything newer cost nothing and never fail a call).

Requests are built as plain dicts (`providers.gemini.request`): their shape follows the
OpenAI body field by field, and a Struct per optional field would only add copying.
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = [
    "Candidate",
    "Content",
    "FunctionCall",
    "GenerateContentResponse",
    "LogprobsResult",
    "ModalityTokenCount",
    "Part",
    "PromptFeedback",
    "TokenLogprob",
    "TopCandidates",
    "UsageMetadata",
    "WireError",
    "decode_response",
]


class FunctionCall(msgspec.Struct, kw_only=True):
    name: str
    args: dict[str, Any] | None = None
    id: str | None = None  # Gemini 3 names each call; its response must carry the same id


class Part(msgspec.Struct, kw_only=True, rename="camel"):
    """One part; only text, thoughts and function calls are read (inline data, executable
    code and their results are not part of the OpenAI chat shape)."""

    text: str | None = None
    thought: bool = False
    thought_signature: str | None = None
    function_call: FunctionCall | None = None


class Content(msgspec.Struct, kw_only=True):
    role: str = "model"
    parts: list[Part] = []


class TokenLogprob(msgspec.Struct, kw_only=True, rename="camel"):
    token: str = ""
    log_probability: float = 0.0


class TopCandidates(msgspec.Struct, kw_only=True):
    candidates: list[TokenLogprob] = []


class LogprobsResult(msgspec.Struct, kw_only=True, rename="camel"):
    top_candidates: list[TopCandidates] = []
    chosen_candidates: list[TokenLogprob] = []


class Candidate(msgspec.Struct, kw_only=True, rename="camel"):
    content: Content | None = None
    finish_reason: str | None = None
    index: int = 0  # proto3 JSON omits a zero
    logprobs_result: LogprobsResult | None = None


class ModalityTokenCount(msgspec.Struct, kw_only=True, rename="camel"):
    modality: str = ""
    token_count: int = 0


class UsageMetadata(msgspec.Struct, kw_only=True, rename="camel"):
    prompt_token_count: int = 0
    candidates_token_count: int = 0
    total_token_count: int = 0
    cached_content_token_count: int = 0
    thoughts_token_count: int = 0
    tool_use_prompt_token_count: int = 0
    prompt_tokens_details: list[ModalityTokenCount] = []  # per modality: TEXT, IMAGE, AUDIO...
    candidates_tokens_details: list[ModalityTokenCount] = []


class PromptFeedback(msgspec.Struct, kw_only=True, rename="camel"):
    block_reason: str | None = None
    block_reason_message: str | None = None


class WireError(msgspec.Struct, kw_only=True):
    """Google's error object (`google.rpc.Status` as JSON), in bodies and in stream events."""

    code: int = 0
    message: str = ""
    status: str = ""
    details: list[Any] = []


class GenerateContentResponse(msgspec.Struct, kw_only=True, rename="camel"):
    """A whole answer, or one event of a stream (the same type, holding a delta)."""

    candidates: list[Candidate] = []
    prompt_feedback: PromptFeedback | None = None
    usage_metadata: UsageMetadata | None = None
    model_version: str | None = None
    response_id: str | None = None
    error: WireError | None = None  # an error event inside a 200 stream


decode_response = msgspec.json.Decoder(GenerateContentResponse).decode
