"""Gemini answers -> the gateway's OpenAI shapes: a whole `chat.completion`, or chunks.

    candidates[i]            choices[i] (its `index`)
    text parts               content, joined (null when there is none)
    `thought: true` parts    reasoning_content
    functionCall parts       tool_calls, args as a JSON string; the id is Gemini's own
                             (`functionCall.id`, Gemini 3) else `call_<hex>`; a
                             `thoughtSignature` rides along as Google's own OpenAI layer sends
                             it, `extra_content.google.thought_signature`, and comes back in
    text part signature      the message's (or a delta's) `extra_content.google.thought_signature`
                             when the turn calls no function
    finishReason             STOP -> stop (tool_calls when the turn calls functions),
                             MAX_TOKENS -> length, the safety family -> content_filter,
                             anything else -> stop
    logprobsResult           logprobs.content (token, logprob, bytes, top_logprobs)
    usageMetadata            usage: prompt (+ tool-use prompt), completion = candidates +
                             thoughts, cached_tokens and reasoning_tokens in the details,
                             and image_tokens / audio_tokens when counted per modality

Ids are `chatcmpl-<responseId>` (the gateway puts its own) and `model` is `modelVersion`, else
the upstream name asked for.
"""

from __future__ import annotations

import os
import time
from typing import Any

import msgspec

from providers.base import ChatCompletion, Usage
from providers.errors import ProviderError
from providers.gemini.errors import blocked_prompt, error_event
from providers.gemini.wire import (
    Candidate,
    GenerateContentResponse,
    LogprobsResult,
    ModalityTokenCount,
    Part,
    TokenLogprob,
    UsageMetadata,
    decode_response,
)

__all__ = ["StreamTranslator", "completion_from_bytes", "usage_of"]

_encode = msgspec.json.encode
_NO_USAGE = Usage()
_FILTERED = "content_filter"
_FINISH = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": _FILTERED,
    "RECITATION": _FILTERED,
    "BLOCKLIST": _FILTERED,
    "PROHIBITED_CONTENT": _FILTERED,
    "SPII": _FILTERED,
    "IMAGE_SAFETY": _FILTERED,
    "IMAGE_PROHIBITED_CONTENT": _FILTERED,
    "IMAGE_RECITATION": _FILTERED,
}


def completion_from_bytes(raw: bytes, model: str) -> ChatCompletion:
    """A `chat.completion` for a `generateContent` answer asked of `model`."""
    response = _decode(raw, "answer")
    candidates = _candidates(response)
    body: dict[str, Any] = {
        "id": _completion_id(response),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": response.model_version or model,
        "choices": [_choice(candidate) for candidate in candidates],
    }
    meta = response.usage_metadata
    if meta is None:
        return ChatCompletion(body=body, usage=_NO_USAGE)
    body["usage"] = _usage_body(meta)
    return ChatCompletion(body=body, usage=usage_of(meta))


def usage_of(meta: UsageMetadata, *, partial: bool = False) -> Usage:
    prompt = meta.prompt_token_count + meta.tool_use_prompt_token_count
    completion = meta.candidates_token_count + meta.thoughts_token_count
    total = meta.total_token_count
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=total or prompt + completion,
        cached_tokens=meta.cached_content_token_count,
        partial=partial,
    )


class StreamTranslator:
    """Per-stream state: each SSE event (a partial GenerateContentResponse) -> chunks.

    The first delta of each choice carries `role: assistant`; a finishReason becomes a chunk
    of its own with an empty delta, as OpenAI sends it. Gemini has no end marker: `finished`
    records that a finishReason arrived, so the end of the body after it is a proper end
    (and `end()` gives the usage chunk), while an end before it is a broken stream.

    Gemini reports `usageMetadata` as it goes (in every event; Vertex gives the output
    counts only in the last): `usage_so_far()` is the last one, `partial`, and the gateway
    charges a stream cut short from it and from what it delivered (`gateway.chat.usage`).
    """

    __slots__ = (
        "_base",
        "_calls",
        "_meta",
        "_model",
        "_started",
        "finished",
        "usage",
    )

    def __init__(self, model: str) -> None:
        self.usage: Usage | None = None
        self.finished = False
        self._model = model
        self._base: dict[str, Any] | None = None
        self._started: set[int] = set()
        self._calls: dict[int, int] = {}  # choice index -> tool calls sent
        self._meta: UsageMetadata | None = None

    def usage_so_far(self) -> Usage | None:
        """The final counts once the stream ended; before, the last reported ones
        (`partial`); None when Gemini reported none yet."""
        if self.usage is not None:
            return self.usage
        meta = self._meta
        if meta is None:
            return None
        return usage_of(meta, partial=True)

    @property
    def started(self) -> bool:
        """Whether an event with candidates arrived (so chunks went out)."""
        return self._base is not None

    def chunks(self, data: bytes) -> list[dict[str, Any]]:
        """The chunks for one event (none for an event that carries only usage)."""
        response = _decode(data, "stream event")
        if response.usage_metadata is not None:
            self._meta = response.usage_metadata
        if not response.candidates:
            feedback = response.prompt_feedback
            if response.error is not None or (feedback is not None and feedback.block_reason):
                _candidates(response)  # raises: an error event or a blocked prompt
            return []
        base = self._base
        if base is None:
            base = self._base = {
                "id": _completion_id(response),
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": response.model_version or self._model,
            }
        deltas: list[dict[str, Any]] = []
        finishes: list[dict[str, Any]] = []
        for candidate in response.candidates:
            delta = self._delta(candidate)
            if delta:
                logprobs = _logprobs(candidate.logprobs_result)
                deltas.append(
                    {
                        "index": candidate.index,
                        "delta": delta,
                        "logprobs": logprobs,
                        "finish_reason": None,
                    }
                )
            if candidate.finish_reason:
                called = self._calls.get(candidate.index, 0) > 0
                reason = _finish(candidate.finish_reason, called)
                finish = {"index": candidate.index, "delta": {}, "logprobs": None}
                finish["finish_reason"] = reason
                finishes.append(finish)
        out = [{**base, "choices": deltas}] if deltas else []
        if finishes:
            self.finished = True
            out.append({**base, "choices": finishes})
        return out

    def end(self) -> dict[str, Any] | None:
        """At a proper end: the usage chunk (`choices: []`) from the last usageMetadata."""
        meta = self._meta
        if meta is None:
            return None
        self.usage = usage_of(meta)
        base = self._base or {"id": "chatcmpl-" + os.urandom(12).hex(), "model": self._model}
        return {
            **base,
            "object": "chat.completion.chunk",
            "created": base.get("created", int(time.time())),
            "choices": [],
            "usage": _usage_body(meta),
        }

    def _delta(self, candidate: Candidate) -> dict[str, Any]:
        delta: dict[str, Any] = {}
        index = candidate.index
        if index not in self._started:
            self._started.add(index)
            delta["role"] = "assistant"
        parts = candidate.content.parts if candidate.content is not None else ()
        texts, thoughts, calls, signature = _split(parts)
        if texts:
            delta["content"] = "".join(texts)
        elif "role" in delta and not calls:
            delta["content"] = ""
        if thoughts:
            delta["reasoning_content"] = "".join(thoughts)
        if signature is not None and not calls:
            delta["extra_content"] = _google_signature(signature)
        if calls:
            sent = self._calls.get(index, 0)
            for position, call in enumerate(calls):
                call["index"] = sent + position
            self._calls[index] = sent + len(calls)
            delta["tool_calls"] = calls
        return delta


def _decode(raw: bytes, what: str) -> GenerateContentResponse:
    try:
        return decode_response(raw)
    except msgspec.ValidationError as exc:  # a DecodeError too: first
        raise ProviderError(f"upstream {what} is not a GenerateContentResponse: {exc}") from exc
    except msgspec.DecodeError as exc:
        raise ProviderError(f"upstream sent a malformed {what}: {exc}") from exc


def _candidates(response: GenerateContentResponse) -> list[Candidate]:
    if response.error is not None:
        raise error_event(response.error)
    if response.candidates:
        return response.candidates
    feedback = response.prompt_feedback
    if feedback is not None and feedback.block_reason:
        raise blocked_prompt(feedback)
    raise ProviderError("the upstream answered without any candidate")


def _completion_id(response: GenerateContentResponse) -> str:
    return "chatcmpl-" + (response.response_id or os.urandom(12).hex())


def _choice(candidate: Candidate) -> dict[str, Any]:
    parts = candidate.content.parts if candidate.content is not None else ()
    texts, thoughts, calls, signature = _split(parts)
    message: dict[str, Any] = {
        "role": "assistant",
        "content": "".join(texts) if texts else None,
        "refusal": None,
    }
    if thoughts:
        message["reasoning_content"] = "".join(thoughts)
    if calls:
        message["tool_calls"] = calls
    elif signature is not None:
        message["extra_content"] = _google_signature(signature)
    return {
        "index": candidate.index,
        "message": message,
        "logprobs": _logprobs(candidate.logprobs_result),
        "finish_reason": _finish(candidate.finish_reason, bool(calls)),
    }


def _split(parts: Any) -> tuple[list[str], list[str], list[dict[str, Any]], str | None]:
    """(texts, thoughts, tool calls, the signature of the last signed text part)."""
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[dict[str, Any]] = []
    signature: str | None = None
    for part in parts:
        if part.function_call is not None:
            calls.append(_tool_call(part))
        elif part.text is not None:
            if part.thought:
                thoughts.append(part.text)
            else:
                texts.append(part.text)
                if part.thought_signature:
                    signature = part.thought_signature
    return texts, thoughts, calls, signature


def _google_signature(signature: str) -> dict[str, Any]:
    return {"google": {"thought_signature": signature}}


def _tool_call(part: Part) -> dict[str, Any]:
    call = part.function_call
    assert call is not None
    out: dict[str, Any] = {
        "id": call.id or "call_" + os.urandom(12).hex(),
        "type": "function",
        "function": {"name": call.name, "arguments": _encode(call.args or {}).decode()},
    }
    if part.thought_signature:
        out["extra_content"] = _google_signature(part.thought_signature)
    return out


def _finish(reason: str | None, called: bool) -> str:
    mapped = _FINISH.get(reason or "STOP", "stop")
    return "tool_calls" if called and mapped == "stop" else mapped


def _logprobs(result: LogprobsResult | None) -> dict[str, Any] | None:
    if result is None:
        return None
    tops = result.top_candidates
    content = []
    for position, chosen in enumerate(result.chosen_candidates):
        top = tops[position].candidates if position < len(tops) else []
        item = _token_logprob(chosen)
        item["top_logprobs"] = [_token_logprob(t) for t in top]
        content.append(item)
    return {"content": content, "refusal": None}


def _token_logprob(token: TokenLogprob) -> dict[str, Any]:
    return {
        "token": token.token,
        "logprob": token.log_probability,
        "bytes": list(token.token.encode()),
    }


def _usage_body(meta: UsageMetadata) -> dict[str, Any]:
    usage = usage_of(meta)
    prompt_details: dict[str, int] = {"cached_tokens": meta.cached_content_token_count}
    completion_details: dict[str, int] = {"reasoning_tokens": meta.thoughts_token_count}
    _by_modality(prompt_details, meta.prompt_tokens_details)
    _by_modality(completion_details, meta.candidates_tokens_details)
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        "prompt_tokens_details": prompt_details,
        "completion_tokens_details": completion_details,
    }


def _by_modality(details: dict[str, int], counts: list[ModalityTokenCount]) -> None:
    """The image and audio tokens among the counts (`image_tokens`, `audio_tokens`), when
    Google reports them per modality (they are billed within the prompt or output)."""
    for count in counts:
        if count.modality in ("IMAGE", "AUDIO"):
            name = count.modality.lower() + "_tokens"
            details[name] = details.get(name, 0) + count.token_count
