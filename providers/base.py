"""The narrow contracts an adapter implements: one small Protocol per capability.

An adapter implements only the protocols of the capabilities it has (the registry lists them
per adapter kind). Capability names, used everywhere: `CAPABILITIES`.

Chat speaks the OpenAI chat-completions wire format on both sides: the gateway hands the
adapter a validated request body (a dict, `model` already set to the upstream model name,
`max_completion_tokens` set, and for streams `stream_options.include_usage` forced on), and the
adapter returns OpenAI-format completions and chunks whatever its upstream speaks.

Extension fields: a chat body may carry top-level fields beyond OpenAI's (vLLM's `top_k`,
`min_p`, `repetition_penalty`, ..., sent by clients in the openai SDK's `extra_body`), exactly
as the client sent them. An adapter says which it takes with a method `extension_fields(
upstream_model) -> frozenset[str] | None`: None when its upstream is sent any as is (OpenAI and
OpenAI-compatible servers), else the ones it translates (`top_k`). The gateway calls an adapter
only with extension fields it takes (`extensions_refused` names the others); one without the
method takes none.

Anthropic's Messages API has a protocol of its own (`MessagesProvider`): an adapter whose
upstream speaks it takes a `/v1/messages` request as the client wrote it (`model` and
`max_tokens` already set by the gateway) and answers as its upstream did, so nothing of the
request or the answer is lost in translation. The gateway uses it when the client called in
that dialect; every other call goes through `ChatProvider`.

Embeddings (`EmbeddingsProvider`) take an OpenAI embeddings request body (`model` already the
upstream name, `input` always a list: of strings, or of token arrays) and give the vectors in
input order as floats, with the input tokens the upstream reported (None when it reports none).

Images and music are tasks: the gateway's worker calls the adapter with a typed request (model
already the upstream name, reference files already stored by the gateway) and a `TaskControl`
through which the adapter reports progress and learns that the caller canceled. The adapter
returns the media bytes; storing them as artifacts is the gateway's job.

References are never handed over as bytes: a `MediaInput` is a type, a size and a way to
stream the stored file, so a task's memory does not grow with its number of references. An
adapter sends them as streams (`MediaInput.chunks`), or, when it must decode one, reads one
at a time (`MediaInput.read`, at most `size_bytes`, which the gateway caps per kind).
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import msgspec

__all__ = [
    "CAPABILITIES",
    "ChatCompletion",
    "ChatProvider",
    "ChatStream",
    "EmbeddingResult",
    "EmbeddingsProvider",
    "GeneratedClip",
    "GeneratedImage",
    "ImageProvider",
    "ImageRequest",
    "ImageResult",
    "InputRules",
    "InputsBilled",
    "MediaInput",
    "MessagesProvider",
    "MusicProvider",
    "MusicRequest",
    "MusicResult",
    "OpenChunks",
    "ReferenceSizeMismatch",
    "ResponsesProvider",
    "TaskControl",
    "Usage",
    "extensions_refused",
]

CAPABILITIES: frozenset[str] = frozenset(
    {
        "chat",
        "embeddings",
        "text_to_image",
        "image_to_image",
        "text_to_music",
        "reference_audio_to_music",
    }
)


class Usage(msgspec.Struct, kw_only=True, frozen=True):
    """Token counts the upstream reported (OpenAI names).

    `cached_tokens` and `cache_creation_tokens` are the parts of `prompt_tokens` read from and
    written to the upstream's prompt cache (priced apart). `partial` marks the counts of a
    stream that had not ended: what the upstream reported so far, plus the adapter's estimate
    of the output it delivered since (reasoning included), which the gateway charges when the
    stream breaks off."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cached_tokens: int = 0
    cache_creation_tokens: int = 0
    partial: bool = False


class ChatCompletion(msgspec.Struct, kw_only=True):
    """`body` is an OpenAI `chat.completion` object with every field the upstream gave (or,
    from a `MessagesProvider`, the answer in its own dialect).

    `output_chars`: the characters of output in a body that is not a `chat.completion` (text,
    thinking, tool input), for the gateway to count what it delivered when the upstream's
    counts are not usable; it counts a `chat.completion`'s itself."""

    body: dict[str, Any]
    usage: Usage
    output_chars: int = 0


class ChatStream(Protocol):
    """One streamed call: iterate OpenAI `chat.completion.chunk` dicts as they arrive.

    `aclose()` stops the upstream request (client went away); it is safe to call twice.
    """

    @property
    def usage(self) -> Usage | None:
        """The final counts once the upstream reported them (normally in the last chunk).
        Before that, an adapter whose upstream reports counts as it goes (Anthropic's
        `message_start`, Gemini's `usageMetadata` in every chunk) gives what it learned so
        far with `partial=True`; None when nothing was reported yet. Read it when the stream
        is over (it may be computed on reading)."""
        ...

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]: ...
    async def aclose(self) -> None: ...

    def ready(self) -> bool:
        """True when the next chunk is already in memory, so taking it will not wait.

        The gateway then writes the chunks that arrived together in one go (one system call
        instead of one per chunk) without ever holding a chunk back to wait for another.

        A stream may also have `next_ready() -> dict | None`: the next chunk when it is in
        memory, taken without an await (None when taking it would wait), so the chunks of one
        read cost no coroutine each."""
        ...


@runtime_checkable
class ChatProvider(Protocol):
    name: str

    async def complete(self, body: dict[str, Any]) -> ChatCompletion: ...

    async def stream(self, body: dict[str, Any]) -> ChatStream:
        """Opens the upstream stream; raises ProviderError before the first chunk if it fails."""
        ...

    async def close(self) -> None: ...


@runtime_checkable
class MessagesProvider(Protocol):
    """An upstream that speaks Anthropic's Messages API as is (besides `ChatProvider`).

    `body` is the client's request with `model` (the upstream name) and `max_tokens` set;
    `headers` are the client's `anthropic-version` and `anthropic-beta`, sent in place of the
    adapter's own. Answers are the upstream's, every field kept: `messages` gives the message
    as `ChatCompletion.body` (with its counts in `usage`), `messages_stream` yields each
    stream event as a dict (its `usage` as `ChatStream.usage` says), `count_tokens` the
    upstream's `{"input_tokens": N}`. Failures raise ProviderError as chat calls do.
    """

    name: str

    async def messages(
        self, body: dict[str, Any], headers: Mapping[str, str]
    ) -> ChatCompletion: ...

    async def messages_stream(
        self, body: dict[str, Any], headers: Mapping[str, str]
    ) -> ChatStream: ...

    async def count_tokens(
        self, body: dict[str, Any], headers: Mapping[str, str]
    ) -> dict[str, Any]: ...


@runtime_checkable
class ResponsesProvider(Protocol):
    """An upstream that speaks OpenAI's Responses API as is (besides `ChatProvider`).

    `body` is the client's request with `model` (the upstream name); `responses_api` is false
    for an instance whose upstream does not serve the Responses API (configured so), which the
    gateway then translates for. Answers are the upstream's, every field kept: `responses`
    gives the response object as `ChatCompletion.body` (with its counts in `usage`),
    `responses_stream` yields each stream event as a dict (its `usage` as `ChatStream.usage`
    says). Failures raise ProviderError as chat calls do.
    """

    name: str
    responses_api: bool

    async def responses(self, body: dict[str, Any]) -> ChatCompletion: ...

    async def responses_stream(self, body: dict[str, Any]) -> ChatStream: ...


def extensions_refused(provider: object, upstream_model: str, names: Iterable[str]) -> list[str]:
    """Those of the extension fields `names` that `provider` cannot carry for `upstream_model`
    (see the module docstring): none for an upstream that is sent any as is."""
    method = getattr(provider, "extension_fields", None)
    taken: frozenset[str] | None = frozenset() if method is None else method(upstream_model)
    if taken is None:
        return []
    return [name for name in names if name not in taken]


@dataclass(frozen=True, slots=True)
class InputRules:
    """What an upstream bills for a request's inputs beyond the bytes of their text: each rule
    a worst case, as the upstream publishes it. The gateway adds them to the body's size when
    it sizes a call's hold (`gateway.chat.inputs`), so the hold bounds the charge.

    Text, tool definitions and audio need no rule: a byte-level tokenizer never makes more
    tokens than bytes, and no upstream bills audio at more than a token a byte of it."""

    image_tokens: Callable[[int, int], int]
    """Tokens of one image of width x height pixels (read from its header), resizing and
    caps included."""
    image_max_tokens: int
    """Tokens of an image whose size the gateway cannot read (a URL): the upstream's cap."""
    pdf_page_tokens: int
    """Tokens of one PDF page at most (its text and its picture)."""
    media_part_tokens: int = 0
    """Tokens counted for every non-text part whatever it holds (the simulator's 85)."""
    tools_prompt_tokens: int = 0
    """Tokens the upstream adds to a request that has tools (a tool-use system prompt)."""
    thinking_beyond_max_tokens: int = 0
    """Output tokens the upstream may bill beyond the request's token limit (reasoning that
    is not counted in it)."""


@runtime_checkable
class InputsBilled(Protocol):
    """A chat adapter that declares how its upstream bills inputs (`InputRules`); one that
    does not is held at the dearest rules the gateway knows."""

    def input_rules(self, upstream_model: str) -> InputRules: ...


class EmbeddingResult(msgspec.Struct, kw_only=True):
    """One vector per input, in input order; `prompt_tokens`: the input tokens the upstream
    reported, None when it reports none (the gateway then charges its own estimate)."""

    vectors: list[list[float]]
    prompt_tokens: int | None = None


@runtime_checkable
class EmbeddingsProvider(Protocol):
    name: str

    async def embed(self, body: dict[str, Any]) -> EmbeddingResult:
        """Raises ProviderError subclasses like chat; UpstreamRejectedRequest naming the field
        (`input`, `dimensions`) for what the upstream cannot take, before sending."""
        ...

    async def close(self) -> None: ...


OpenChunks = Callable[[], Awaitable[AsyncIterator[bytes]]]
"""Starts one read of a stored file: awaited, it gives the file's bytes in chunks (256 KiB from
the gateway's stores). Each call is a fresh read from the start, so a resent upload reads again."""


class ReferenceSizeMismatch(RuntimeError):
    """A reference's stream gave more or fewer bytes than its `size_bytes`: the stored file
    changed under the task. Not the upstream's fault, so no ProviderError."""


class MediaInput(msgspec.Struct, kw_only=True, frozen=True):
    """A reference file the gateway already stored: its type, its size and how to stream it.

    The bytes stay in the gateway's blob store until an adapter reads them: `chunks()` streams
    them (what an upload to an upstream should use), `read()` returns them whole for an adapter
    that must decode the file (one reference at a time, so at most one is held). `size_bytes`
    is exact, so an adapter may announce it (a multipart part's length) before reading.
    """

    mime_type: str  # e.g. image/png, audio/wav
    size_bytes: int
    open: OpenChunks

    @classmethod
    def of_bytes(cls, data: bytes, mime_type: str) -> MediaInput:
        """A reference already in memory (tests, adapters that build one)."""

        async def open_() -> AsyncIterator[bytes]:
            return _one(data)

        return cls(mime_type=mime_type, size_bytes=len(data), open=open_)

    async def chunks(self) -> AsyncGenerator[bytes, None]:
        """The bytes in chunks, from a fresh read; ReferenceSizeMismatch if they are not
        `size_bytes` long (raised as soon as they go past it, or at the end)."""
        stream = await self.open()
        seen = 0
        try:
            async for chunk in stream:
                seen += len(chunk)
                if seen > self.size_bytes:
                    raise ReferenceSizeMismatch(
                        f"the reference gave over its {self.size_bytes} bytes"
                    )
                yield chunk
        finally:
            closing = getattr(stream, "aclose", None)
            if closing is not None:
                await closing()
        if seen != self.size_bytes:
            raise ReferenceSizeMismatch(f"the reference gave {seen} of its {self.size_bytes} bytes")

    async def read(self) -> bytes:
        """The whole file (`size_bytes` of memory until dropped): read one at a time."""
        buffer = io.BytesIO()  # `getvalue` hands over its buffer: no second copy at the end
        async with contextlib.aclosing(self.chunks()) as chunks:
            async for chunk in chunks:
                buffer.write(chunk)
        return buffer.getvalue()


async def _one(data: bytes) -> AsyncIterator[bytes]:
    yield data


class ImageRequest(msgspec.Struct, kw_only=True, frozen=True):
    """One image task, already validated by the gateway against the public limits."""

    model: str  # upstream model name
    prompt: str
    n: int  # 1..4
    quality: str  # "standard" | "hd"
    aspect_ratio: str  # "auto" | "1:1" | "16:9" | "9:16" | "4:3" | "3:4" | "2:1"
    references: list[MediaInput] = []  # image_to_image: 1..16 images; empty for text_to_image
    options: dict[str, Any] = {}  # the model's model_options namespace, passed through


class GeneratedImage(msgspec.Struct, kw_only=True, frozen=True):
    data: bytes
    mime_type: str  # e.g. image/png
    format: str  # e.g. png
    width: int
    height: int


class ImageResult(msgspec.Struct, kw_only=True, frozen=True):
    """`images` may be fewer than requested: the gateway refunds the difference."""

    images: list[GeneratedImage]


class MusicRequest(msgspec.Struct, kw_only=True, frozen=True):
    """One music task; `reference_audio` is set for reference_audio_to_music."""

    model: str  # upstream model name
    prompt: str
    lyrics: str | None = None  # never together with instrumental=True
    instrumental: bool = False
    title: str | None = None
    reference_audio: MediaInput | None = None
    options: dict[str, Any] = {}  # the model's model_options namespace, passed through


class GeneratedClip(msgspec.Struct, kw_only=True, frozen=True):
    data: bytes
    mime_type: str  # e.g. audio/wav
    format: str  # e.g. wav
    duration_seconds: float
    title: str


class MusicResult(msgspec.Struct, kw_only=True, frozen=True):
    """How many clips a task gives depends on the model (some give two per task)."""

    clips: list[GeneratedClip]


class TaskControl(Protocol):
    """Given by the gateway's worker to a media call: the call's only way back to its task."""

    async def checkpoint(self, percent: float, stage: str, message: str = "") -> None:
        """Report progress; raises providers.errors.TaskCanceled when the caller asked to cancel.

        Adapters call it between steps (and while waiting on an upstream), so a cancel stops
        the work at the next step instead of at the end."""
        ...


@runtime_checkable
class ImageProvider(Protocol):
    name: str

    async def generate_images(self, request: ImageRequest, control: TaskControl) -> ImageResult:
        """Raises ProviderError subclasses like chat, and TaskCanceled from `control`."""
        ...

    async def close(self) -> None: ...


@runtime_checkable
class MusicProvider(Protocol):
    name: str

    async def generate_music(self, request: MusicRequest, control: TaskControl) -> MusicResult:
        """Raises ProviderError subclasses like chat, and TaskCanceled from `control`."""
        ...

    async def close(self) -> None: ...
