"""AWS's binary event stream decoder (`providers.bedrock.eventstream`), fed as a socket feeds
it: AWS's own test vectors, a stream recorded from Bedrock, byte by byte and in odd splits."""

from __future__ import annotations

import base64
import random
import uuid
import zlib

import pytest

from providers.bedrock.eventstream import MAX_MESSAGE_BYTES, EventStreamDecoder, Message
from providers.errors import ProviderError
from tests.fakes.bedrock_upstream import event_message
from tests.fakes.recorded import load

VECTORS = load("aws_eventstream_vectors")
LIVE = load("bedrock_converse_stream_live")


def _expected(vector: dict[str, object]) -> Message:
    headers: dict[str, object] = {}
    for name, kind, value in vector["headers"]:  # type: ignore[attr-defined]
        if kind == 6:
            value = bytes.fromhex(value)
        elif kind == 9:
            value = uuid.UUID(bytes=bytes.fromhex(value))
        headers[name] = value
    return Message(headers, bytes.fromhex(str(vector["payload"])))  # type: ignore[arg-type]


def _decode_in(data: bytes, cuts: list[int]) -> tuple[list[Message], EventStreamDecoder]:
    decoder = EventStreamDecoder()
    messages: list[Message] = []
    start = 0
    for cut in [*cuts, len(data)]:
        messages += decoder.feed(data[start:cut])
        start = cut
    return messages, decoder


@pytest.mark.parametrize("vector", VECTORS["positive"], ids=lambda v: v["name"])
def test_aws_vectors_decode_whole_and_byte_by_byte(vector: dict[str, object]) -> None:
    data = bytes.fromhex(str(vector["hex"]))
    expected = _expected(vector)
    assert _decode_in(data, [])[0] == [expected]
    one_by_one, decoder = _decode_in(data, list(range(1, len(data))))
    assert one_by_one == [expected]
    assert decoder.pending == 0


def test_every_vector_back_to_back_in_one_buffer() -> None:
    data = b"".join(bytes.fromhex(v["hex"]) for v in VECTORS["positive"])
    messages, decoder = _decode_in(data, [])
    assert messages == [_expected(v) for v in VECTORS["positive"]]
    assert decoder.pending == 0


@pytest.mark.parametrize("vector", VECTORS["negative"], ids=lambda v: v["name"])
def test_corrupted_vectors_are_refused(vector: dict[str, str]) -> None:
    data = bytes.fromhex(vector["hex"])
    for cuts in ([], list(range(1, len(data)))):
        with pytest.raises(ProviderError, match="event stream is corrupt"):
            _decode_in(data, cuts)


def test_the_recorded_stream_in_odd_splits_gives_the_same_messages() -> None:
    data = base64.b64decode(LIVE["bodyBase64"])
    whole, _ = _decode_in(data, [])
    assert [m.headers[":event-type"] for m in whole] == [
        "messageStart",
        "contentBlockDelta",
        "contentBlockDelta",
        "contentBlockStop",
        "messageStop",
        "metadata",
    ]
    rng = random.Random(20261125)
    for pieces in (2, 3, 7, 13, 50):
        cuts = sorted(rng.sample(range(1, len(data)), pieces))
        split, decoder = _decode_in(data, cuts)
        assert split == whole and decoder.pending == 0
    # Cut exactly inside every prelude and every message CRC, too.
    edges: list[int] = []
    at = 0
    for _ in whole:
        size = int.from_bytes(data[at : at + 4], "big")
        edges += [at + 5, at + 11, at + size - 2]
        at += size
    assert _decode_in(data, edges)[0] == whole


def test_messages_are_handed_out_as_soon_as_they_are_whole() -> None:
    first = event_message("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "a"}})
    second = event_message("messageStop", {"stopReason": "end_turn"})
    decoder = EventStreamDecoder()
    assert decoder.feed(first[:-1]) == []
    assert decoder.pending == len(first) - 1
    got = decoder.feed(first[-1:] + second[:3])
    assert [m.headers[":event-type"] for m in got] == ["contentBlockDelta"]
    assert decoder.pending == 3
    assert [m.headers[":event-type"] for m in decoder.feed(second[3:])] == ["messageStop"]


def test_a_prelude_is_checked_before_its_message_arrives() -> None:
    message = bytearray(event_message("metadata", {"usage": {}}))
    message[2] ^= 0xFF  # the total length: the prelude's CRC no longer matches
    decoder = EventStreamDecoder()
    with pytest.raises(ProviderError, match="prelude"):
        decoder.feed(bytes(message[:12]))  # nothing past the prelude needed to know


def test_an_oversized_message_is_refused_from_its_prelude() -> None:
    total = MAX_MESSAGE_BYTES + 1
    prelude = total.to_bytes(4, "big") + (0).to_bytes(4, "big")
    prelude += zlib.crc32(prelude).to_bytes(4, "big")
    with pytest.raises(ProviderError, match=f"a message of {total} bytes"):
        EventStreamDecoder().feed(prelude)


def test_a_payload_changed_in_flight_fails_its_crc() -> None:
    message = bytearray(event_message("contentBlockDelta", {"delta": {"text": "hello"}}))
    message[-8] ^= 0x01  # inside the payload
    with pytest.raises(ProviderError, match="message's CRC"):
        EventStreamDecoder().feed(bytes(message))
