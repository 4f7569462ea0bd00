"""Fake upstreams: real local servers the adapters are pointed at in tests."""

from tests.fakes.openai_upstream import (
    Disconnect,
    FakeOpenAI,
    RecordedRequest,
    Reply,
    StreamReply,
    default_chunks,
    default_completion,
)

__all__ = [
    "Disconnect",
    "FakeOpenAI",
    "RecordedRequest",
    "Reply",
    "StreamReply",
    "default_chunks",
    "default_completion",
]
