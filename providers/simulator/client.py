"""The offline provider: chat answers in the exact OpenAI shapes, images and music, no network.

Failures and latency happen before the answer starts, so for streams they raise from
`stream()` itself, as a real adapter's would; only `[[sim:fail_after=N]]` breaks a stream that
is already running. Image and music tasks live in `images` and `music`; this class only hands
them its options and the `failure_rate` draw.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from typing import Any

from providers.base import (
    ChatCompletion,
    ImageRequest,
    ImageResult,
    MusicRequest,
    MusicResult,
    TaskControl,
    Usage,
)
from providers.errors import ProviderError, UpstreamUnavailable
from providers.simulator.directives import Directives, failure_for, parse_directives
from providers.simulator.generator import Answer, logprob_items, plan_answer, seed_of
from providers.simulator.options import Options

__all__ = ["SimulatorProvider", "SimulatorStream", "create"]

_FINGERPRINT = "fp_simulator"


def create(name: str, options: Options) -> SimulatorProvider:
    return SimulatorProvider(name, options)


class SimulatorProvider:
    """Implements ChatProvider, ImageProvider and MusicProvider (`providers.base`); holds no
    connections, so `close()` is a no-op."""

    def __init__(self, name: str, options: Options) -> None:
        self.name = name
        self._options = options
        self._random = random.Random()

    async def complete(self, body: dict[str, Any]) -> ChatCompletion:
        directives = await self._start(body)
        if directives.fail_after is not None:
            raise failure_for(502)
        answer, seed = self._plan(body, directives)
        if self._options.tokens_per_second:
            await asyncio.sleep(len(answer.pieces) / self._options.tokens_per_second)
        usage = _usage(answer)
        message: dict[str, Any] = {"role": "assistant", "refusal": None, "annotations": []}
        logprobs = None
        if answer.tool_name is not None:
            message["content"] = None
            message["tool_calls"] = [_tool_call(answer, "".join(answer.pieces))]
        else:
            message["content"] = "".join(answer.pieces)
            if body.get("logprobs"):
                items = logprob_items(answer.pieces, seed, body.get("top_logprobs") or 0)
                logprobs = {"content": items, "refusal": None}
        completion = {
            "id": _completion_id(),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", ""),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": logprobs,
                    "finish_reason": answer.finish_reason,
                }
            ],
            "usage": _usage_body(usage),
            "system_fingerprint": _FINGERPRINT,
        }
        return ChatCompletion(body=completion, usage=usage)

    async def stream(self, body: dict[str, Any]) -> SimulatorStream:
        directives = await self._start(body)
        answer, seed = self._plan(body, directives)
        logprobs = None
        if body.get("logprobs") and answer.tool_name is None:
            logprobs = logprob_items(answer.pieces, seed, body.get("top_logprobs") or 0)
        stream_options = body.get("stream_options")
        return SimulatorStream(
            answer,
            model=body.get("model", ""),
            include_usage=bool(stream_options and stream_options.get("include_usage")),
            fail_after=directives.fail_after,
            tokens_per_second=self._options.tokens_per_second,
            logprobs=logprobs,
        )

    async def generate_images(self, request: ImageRequest, control: TaskControl) -> ImageResult:
        # Imported on first use: Pillow costs a chat-only gateway ~10 MB and ~50 ms at start.
        from providers.simulator.images import generate_images

        return await generate_images(
            self.name, self._options, request, control, unlucky=self._unlucky()
        )

    async def generate_music(self, request: MusicRequest, control: TaskControl) -> MusicResult:
        from providers.simulator.music import generate_music

        return await generate_music(
            self.name, self._options, request, control, unlucky=self._unlucky()
        )

    async def close(self) -> None:
        return None

    def _unlucky(self) -> bool:
        """Whether `failure_rate` picks this call to fail."""
        rate = self._options.failure_rate
        return bool(rate) and self._random.random() < rate

    async def _start(self, body: dict[str, Any]) -> Directives:
        """Directives, latency, then injected failures: everything before the first token."""
        directives = parse_directives(body.get("messages"))
        delay_ms = self._options.latency_ms + directives.delay_ms
        if delay_ms:
            await asyncio.sleep(delay_ms / 1000)
        if directives.fail is not None:
            raise failure_for(directives.fail)
        if self._unlucky():
            raise UpstreamUnavailable(
                "simulated upstream failure (failure_rate)", upstream_status=503
            )
        return directives

    def _plan(self, body: dict[str, Any], directives: Directives) -> tuple[Answer, bytes]:
        seed = seed_of(body.get("messages"))
        limit = self._options.max_output_tokens
        requested = body.get("max_completion_tokens")
        if type(requested) is int and requested < limit:
            limit = requested
        answer = plan_answer(
            body, seed, tool_call=directives.tool_call, tokens=directives.tokens, limit=limit
        )
        return answer, seed


class SimulatorStream:
    """Implements `providers.base.ChatStream`: role chunk, one chunk per token, finish, usage.

    Paced by `tokens_per_second` against a start time (so slow consumers do not slow the
    clock); `aclose()` stops it at the next chunk.
    """

    def __init__(
        self,
        answer: Answer,
        *,
        model: str,
        include_usage: bool,
        fail_after: int | None,
        tokens_per_second: float,
        logprobs: list[dict[str, Any]] | None,
    ) -> None:
        self.usage: Usage | None = None
        self._answer = answer
        self._include_usage = include_usage
        self._fail_after = fail_after
        self._interval = 1 / tokens_per_second if tokens_per_second else 0.0
        self._logprobs = logprobs
        self._base = {
            "id": _completion_id(),
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
            "system_fingerprint": _FINGERPRINT,
        }
        self._step = 0  # 0 = role chunk, 1..n = tokens, n+1 = finish, n+2 = usage
        self._started = 0.0
        self._closed = False

    def __aiter__(self) -> SimulatorStream:
        return self

    async def __anext__(self) -> dict[str, Any]:
        if self._closed:
            raise StopAsyncIteration
        step = self._step
        self._step = step + 1
        answer = self._answer
        pieces = answer.pieces
        if step == 0:
            self._started = asyncio.get_running_loop().time()
            return self._chunk(self._first_delta(), None)
        index = step - 1  # content chunks sent before this step
        if index <= len(pieces):
            if self._fail_after is not None and index >= self._fail_after:
                self._closed = True
                raise ProviderError(f"simulated stream break after {index} chunks")
            if index == len(pieces):
                self.usage = _usage(answer)
                return self._chunk({}, answer.finish_reason)
            if self._interval:
                await self._pace(index)
                if self._closed:
                    raise StopAsyncIteration
            return self._token_chunk(index)
        if index == len(pieces) + 1 and self._include_usage:
            return {**self._base, "choices": [], "usage": _usage_body(_usage(answer))}
        self._closed = True
        raise StopAsyncIteration

    async def aclose(self) -> None:
        self._closed = True

    def ready(self) -> bool:
        return not self._interval  # unpaced: every chunk is made at once

    def _first_delta(self) -> dict[str, Any]:
        if self._answer.tool_name is None:
            return {"role": "assistant", "content": "", "refusal": None}
        call = _tool_call(self._answer, "")
        return {"role": "assistant", "content": None, "tool_calls": [{"index": 0, **call}]}

    def _token_chunk(self, index: int) -> dict[str, Any]:
        piece = self._answer.pieces[index]
        if self._answer.tool_name is not None:
            return self._chunk(
                {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}, None
            )
        logprobs = None
        if self._logprobs is not None:
            logprobs = {"content": [self._logprobs[index]], "refusal": None}
        return self._chunk({"content": piece}, None, logprobs)

    def _chunk(
        self, delta: dict[str, Any], finish: str | None, logprobs: object = None
    ) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}
        return {**self._base, "choices": [choice]}

    async def _pace(self, index: int) -> None:
        wait = self._started + index * self._interval - asyncio.get_running_loop().time()
        if wait > 0:
            await asyncio.sleep(wait)


def _usage(answer: Answer) -> Usage:
    completion = len(answer.pieces)
    return Usage(
        prompt_tokens=answer.prompt_tokens,
        completion_tokens=completion,
        total_tokens=answer.prompt_tokens + completion,
    )


def _usage_body(usage: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
    }


def _tool_call(answer: Answer, arguments: str) -> dict[str, Any]:
    return {
        "id": answer.tool_call_id,
        "type": "function",
        "function": {"name": answer.tool_name, "arguments": arguments},
    }


def _completion_id() -> str:
    return "chatcmpl-sim-" + os.urandom(12).hex()
