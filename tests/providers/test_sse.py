"""The SSE parser: framing that real upstreams and proxies produce, however the bytes are cut."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from providers.errors import ProviderError
from providers.sse import MAX_EVENT_BYTES, SSEDecoder


def feed_all(*chunks: bytes) -> list[bytes]:
    decoder = SSEDecoder()
    events: list[bytes] = []
    for chunk in chunks:
        events += decoder.feed(chunk)
    return events + decoder.flush()


def test_one_event_per_chunk() -> None:
    assert feed_all(b'data: {"a":1}\n\n', b'data: {"b":2}\n\n') == [b'{"a":1}', b'{"b":2}']


def test_several_events_in_one_chunk_and_a_kept_tail() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: 1\n\ndata: 2\n\ndata: 3") == [b"1", b"2"]
    assert decoder.feed(b"\n\n") == [b"3"]


STREAM = (
    b': keep-alive comment\n\ndata: {"id":1}\n\nevent: message\nid: 7\ndata: {"id":2}\n\n'
    b"data: line one\ndata: line two\n\ndata:no-space\n\ndata\n\nretry: 10\n\n"
)
EXPECTED = [b'{"id":1}', b'{"id":2}', b"line one\nline two", b"no-space", b""]


@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"])
def test_every_split_point_gives_the_same_events(newline: bytes) -> None:
    stream = STREAM.replace(b"\n", newline)
    assert feed_all(stream) == EXPECTED
    for cut in range(1, len(stream)):
        assert feed_all(stream[:cut], stream[cut:]) == EXPECTED, cut


def test_byte_by_byte_crlf() -> None:
    stream = STREAM.replace(b"\n", b"\r\n")
    assert feed_all(*(stream[i : i + 1] for i in range(len(stream)))) == EXPECTED


def test_crlf_split_between_cr_and_lf_is_one_line_end() -> None:
    # Were the lone CR taken as a line end, the LF would make a blank line and split the event.
    assert feed_all(b"data: a\r", b"\ndata: b\r\n\r\n") == [b"a\nb"]


def test_done_ends_the_stream() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: 1\n\ndata: [DONE]\n\ndata: 2\n\n") == [b"1"]
    assert decoder.done
    assert decoder.feed(b"data: 3\n\n") == []
    assert decoder.flush() == []


def test_flush_returns_a_last_event_without_its_blank_line() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: 1\n\ndata: 2") == [b"1"]
    assert decoder.flush() == [b"2"]
    assert decoder.flush() == []


def test_blocks_without_data_are_not_events() -> None:
    assert feed_all(b": ping\n\nevent: x\n\n\n\n\ndata: y\n\n") == [b"y"]


def test_only_one_leading_space_is_stripped() -> None:
    assert feed_all(b"data:  two spaces\n\n") == [b" two spaces"]


def test_an_event_without_end_is_refused_once_past_the_limit() -> None:
    decoder = SSEDecoder()
    piece = b"x" * (1024 * 1024)
    assert decoder.feed(b'data: {"a":1}\n\ndata: ' + piece) == [b'{"a":1}']
    with pytest.raises(ProviderError, match="over"):
        for _ in range(MAX_EVENT_BYTES // len(piece) + 1):
            decoder.feed(piece)


def test_an_event_just_within_the_limit_passes() -> None:
    data = b"y" * (MAX_EVENT_BYTES - 16)
    assert feed_all(b"data: " + data[: len(data) // 2], data[len(data) // 2 :] + b"\n\n") == [data]


_LINES = st.sampled_from(
    [b"data: {}", b'data: {"a":"x y"}', b"data:tight", b"data:  two spaces", b"data: [DONE]",
     b"data", b"event: message", b"id: 3", b": comment", b"retry: 5", b"data: "]
)  # fmt: skip


def _spec_events(stream: bytes) -> list[bytes]:
    """The SSE grammar read line by line, as the specification words it (LF line ends)."""
    events: list[bytes] = []
    data: list[bytes] | None = None
    for line in stream.split(b"\n"):
        if not line:
            if data is not None:
                if b"\n".join(data) == b"[DONE]":
                    return events
                events.append(b"\n".join(data))
            data = None
            continue
        if line[:1] == b":":
            continue
        field, colon, value = line.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        if field == b"data":
            data = [*(data or []), value]
    return events


@given(
    blocks=st.lists(st.lists(_LINES, min_size=1, max_size=3), max_size=8),
    gaps=st.lists(st.sampled_from([b"\n\n", b"\n\n\n"]), min_size=8, max_size=8),
    cut=st.integers(min_value=0),
)
def test_any_mix_of_lines_reads_as_the_specification_reads_it(
    blocks: list[list[bytes]], gaps: list[bytes], cut: int
) -> None:
    """Reads made only of `data: ` lines take a shorter path; every other mix, and every cut
    of the bytes into two reads, gives what the line grammar gives."""
    stream = b"".join(b"\n".join(lines) + gap for lines, gap in zip(blocks, gaps, strict=False))
    expected = _spec_events(stream)
    assert feed_all(stream) == expected
    at = cut % (len(stream) + 1)
    assert feed_all(stream[:at], stream[at:]) == expected
