"""`requested_range`: the one byte range a `Range` header asks of a content's size."""

from __future__ import annotations

import pytest

from gateway.errors import RangeNotSatisfiable
from gateway.http.byte_range import ByteRange, requested_range

SIZE = 1000


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("bytes=0-99", (0, 100)),
        ("bytes=100-199", (100, 200)),
        ("bytes=990-5000", (990, 1000)),  # clamped to the end
        ("bytes=999-999", (999, 1000)),
        ("bytes=500-", (500, 1000)),
        ("bytes=-1", (999, 1000)),
        ("bytes=-300", (700, 1000)),
        ("bytes=-5000", (0, 1000)),  # more than there is: all of it
        ("Bytes=0-0", (0, 1)),  # the unit is case-insensitive
        (" bytes=1-2 ", (1, 2 + 1)),
    ],
)
def test_single_ranges(header: str, expected: tuple[int, int]) -> None:
    wanted = requested_range(header, SIZE)
    assert wanted == ByteRange(*expected)
    assert wanted.length == expected[1] - expected[0]
    assert wanted.content_range(SIZE) == f"bytes {expected[0]}-{expected[1] - 1}/{SIZE}"


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "bytes=0-1,5-6",  # several ranges: the whole content
        "bytes=0-1, -5",
        "items=0-1",
        "bytes=",
        "bytes=-",
        "bytes=5-1",  # invalid: last before first
        "bytes=a-b",
        "bytes=1-2-3",
        "bytes 0-1",
        "bytes=0x10-",
        "bytes=\u0661-\u0662",  # digits, but not ASCII ones
        "bytes=" + "9" * 20 + "-",
        "bytes=0 - 1",
    ],
)
def test_anything_else_is_ignored(header: str | None) -> None:
    assert requested_range(header, SIZE) is None


@pytest.mark.parametrize(
    ("header", "size"),
    [("bytes=1000-", SIZE), ("bytes=1000-2000", SIZE), ("bytes=-0", SIZE), ("bytes=0-", 0)],
)
def test_a_range_past_the_end_is_416_naming_the_size(header: str, size: int) -> None:
    with pytest.raises(RangeNotSatisfiable) as caught:
        requested_range(header, size)
    assert caught.value.status_code == 416
    assert caught.value.code == "range_not_satisfiable"
    assert caught.value.headers == {"Content-Range": f"bytes */{size}"}
