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
from collections.abc import Iterator
from typing import Any

from providers.base import (
    ChatCompletion,
    EmbeddingResult,
    ImageRequest,
    ImageResult,
    InputRules,
    MusicRequest,
    MusicResult,
    TaskControl,
    Usage,
)
from providers.errors import ProviderError, UpstreamUnavailable
from providers.simulator.directives import Directives, failure_for, parse_directives
from providers.simulator.generator import (
    SIMULATOR_INPUTS,
    Answer,
    ForcedCall,
    logprob_items,
    plan_answers,
    seed_of,
)
from providers.simulator.options import Options

__all__ = ["SimulatorProvider", "SimulatorStream", "create"]

_FINGERPRINT = "fp_simulator"


def create(name: str, options: Options) -> SimulatorProvider:
    return SimulatorProvider(name, options)


_EXTENSIONS = frozenset({"top_k"})


class SimulatorProvider:
    """Implements ChatProvider, EmbeddingsProvider, ImageProvider and MusicProvider
    (`providers.base`); holds no
    connections, so `close()` is a no-op."""

    def __init__(self, name: str, options: Options) -> None:
        self.name = name
        self._options = options
        self._random = random.Random()

    def extension_fields(self, upstream_model: str) -> frozenset[str]:
        """The extension fields taken (`providers.base`): `top_k`, as Anthropic's and
        Gemini's; the simulator does not sample, so it changes nothing."""
        return _EXTENSIONS

    async def complete(self, body: dict[str, Any]) -> ChatCompletion:
        directives = await self._start(body)
        if directives.fail_after is not None:
            raise failure_for(502)
        answers, seed = self._plan(body, directives)
        if self._options.tokens_per_second:
            pieces = sum(len(answer.pieces) for answer in answers)
            await asyncio.sleep(pieces / self._options.tokens_per_second)
        top = body.get("top_logprobs") or 0
        choices = []
        for index, answer in enumerate(answers):
            message: dict[str, Any] = {"role": "assistant", "refusal": None, "annotations": []}
            logprobs = None
            if answer.tool_name is not None:
                message["content"] = None
                message["tool_calls"] = [_tool_call(answer, "".join(answer.pieces))]
            else:
                message["content"] = "".join(answer.pieces)
                if body.get("logprobs"):
                    items = logprob_items(answer.pieces, _choice_seed(seed, index), top)
                    logprobs = {"content": items, "refusal": None}
            choices.append(
                {
                    "index": index,
                    "message": message,
                    "logprobs": logprobs,
                    "finish_reason": answer.finish_reason,
                }
            )
        usage = _usage(answers)
        completion = {
            "id": _completion_id(),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", ""),
            "choices": choices,
            "usage": _usage_body(usage),
            "system_fingerprint": _FINGERPRINT,
        }
        return ChatCompletion(body=completion, usage=usage)

    async def stream(self, body: dict[str, Any]) -> SimulatorStream:
        directives = await self._start(body)
        answers, seed = self._plan(body, directives)
        logprobs = None
        if body.get("logprobs"):
            top = body.get("top_logprobs") or 0
            logprobs = [
                None
                if answer.tool_name is not None
                else logprob_items(answer.pieces, _choice_seed(seed, index), top)
                for index, answer in enumerate(answers)
            ]
        stream_options = body.get("stream_options")
        return SimulatorStream(
            answers,
            model=body.get("model", ""),
            include_usage=bool(stream_options and stream_options.get("include_usage")),
            fail_after=directives.fail_after,
            tokens_per_second=self._options.tokens_per_second,
            logprobs=logprobs,
        )

    async def embed(self, body: dict[str, Any]) -> EmbeddingResult:
        from providers.simulator.embeddings import embed

        if self._options.latency_ms:
            await asyncio.sleep(self._options.latency_ms / 1000)
        if self._unlucky():
            raise UpstreamUnavailable(
                "simulated upstream failure (failure_rate)", upstream_status=503
            )
        return embed(body)

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

    def input_rules(self, upstream_model: str) -> InputRules:
        return SIMULATOR_INPUTS

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

    def _plan(self, body: dict[str, Any], directives: Directives) -> tuple[list[Answer], bytes]:
        seed = seed_of(body.get("messages"))
        limit = self._options.max_output_tokens
        requested = body.get("max_completion_tokens")
        if type(requested) is int and requested < limit:
            limit = requested
        forced = (
            ForcedCall(directives.tool_name, directives.tool_input)
            if directives.tool_call
            else None
        )
        answers = plan_answers(body, seed, forced=forced, tokens=directives.tokens, limit=limit)
        return answers, seed


class SimulatorStream:
    """Implements `providers.base.ChatStream`: for each choice a role chunk, then one chunk per
    token (the choices' tokens in turn), a finish chunk per choice, then usage.

    Paced by `tokens_per_second` against a start time (so slow consumers do not slow the
    clock; one token of every choice per tick); `aclose()` stops it at the next chunk.
    `fail_after` breaks it after that many content chunks.
    """

    def __init__(
        self,
        answers: list[Answer],
        *,
        model: str,
        include_usage: bool,
        fail_after: int | None,
        tokens_per_second: float,
        logprobs: list[list[dict[str, Any]] | None] | None,
    ) -> None:
        self.usage: Usage | None = None
        self._answers = answers
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
        self._steps = self._schedule()
        self._started = 0.0
        self._closed = False

    def __aiter__(self) -> SimulatorStream:
        return self

    async def __anext__(self) -> dict[str, Any]:
        if self._closed:
            raise StopAsyncIteration
        step = next(self._steps, None)
        if step is None:
            self._closed = True
            raise StopAsyncIteration
        kind, choice, index = step
        if kind == _TOKEN and self._interval:
            await self._pace(index)
            if self._closed:
                raise StopAsyncIteration
        if kind == _BREAK:
            self._closed = True
            raise ProviderError(f"simulated stream break after {index} chunks")
        if kind == _ROLE:
            if choice == 0:
                self._started = asyncio.get_running_loop().time()
                # The prompt is counted before the first token, as Anthropic's message_start
                # reports it: partial counts until the last choice finished.
                self.usage = Usage(prompt_tokens=self._answers[0].prompt_tokens, partial=True)
            return self._chunk(choice, self._first_delta(choice), None)
        if kind == _TOKEN:
            return self._token_chunk(choice, index)
        if kind == _FINISH:
            if choice == len(self._answers) - 1:
                self.usage = _usage(self._answers)
            return self._chunk(choice, {}, self._answers[choice].finish_reason)
        return {**self._base, "choices": [], "usage": _usage_body(_usage(self._answers))}

    def _schedule(self) -> Iterator[tuple[int, int, int]]:
        """(kind, choice, token index) of each chunk in order; a break where `fail_after` is."""
        answers = self._answers
        for choice in range(len(answers)):
            yield _ROLE, choice, 0
        sent = 0
        longest = max(len(answer.pieces) for answer in answers)
        for index in range(longest):
            for choice, answer in enumerate(answers):
                if index < len(answer.pieces):
                    if self._fail_after is not None and sent >= self._fail_after:
                        yield _BREAK, choice, sent
                    sent += 1
                    yield _TOKEN, choice, index
        if self._fail_after is not None and sent >= self._fail_after:
            yield _BREAK, 0, sent
        for choice in range(len(answers)):
            yield _FINISH, choice, 0
        if self._include_usage:
            yield _USAGE, 0, 0

    async def aclose(self) -> None:
        self._closed = True

    def ready(self) -> bool:
        return not self._interval  # unpaced: every chunk is made at once

    def _first_delta(self, choice: int) -> dict[str, Any]:
        answer = self._answers[choice]
        if answer.tool_name is None:
            return {"role": "assistant", "content": "", "refusal": None}
        call = _tool_call(answer, "")
        return {"role": "assistant", "content": None, "tool_calls": [{"index": 0, **call}]}

    def _token_chunk(self, choice: int, index: int) -> dict[str, Any]:
        answer = self._answers[choice]
        piece = answer.pieces[index]
        if answer.tool_name is not None:
            delta = {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}
            return self._chunk(choice, delta, None)
        logprobs = None
        items = self._logprobs[choice] if self._logprobs is not None else None
        if items is not None:
            logprobs = {"content": [items[index]], "refusal": None}
        return self._chunk(choice, {"content": piece}, None, logprobs)

    def _chunk(
        self, choice: int, delta: dict[str, Any], finish: str | None, logprobs: object = None
    ) -> dict[str, Any]:
        item = {"index": choice, "delta": delta, "logprobs": logprobs, "finish_reason": finish}
        return {**self._base, "choices": [item]}

    async def _pace(self, index: int) -> None:
        wait = self._started + index * self._interval - asyncio.get_running_loop().time()
        if wait > 0:
            await asyncio.sleep(wait)


_ROLE, _TOKEN, _FINISH, _USAGE, _BREAK = range(5)


def _usage(answers: list[Answer]) -> Usage:
    completion = sum(len(answer.pieces) for answer in answers)
    prompt = answers[0].prompt_tokens
    return Usage(
        prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion
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


def _choice_seed(seed: bytes, index: int) -> bytes:
    """Choice 0 draws from the seed itself, as an answer without `n` does."""
    return seed if index == 0 else seed + index.to_bytes(4, "big")


def _completion_id() -> str:
    return "chatcmpl-sim-" + os.urandom(12).hex()
