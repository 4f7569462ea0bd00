"""The retry schedule: the standard's waits, the file's, and Retry-After within 24 h."""

from __future__ import annotations

from email.utils import formatdate

from hypothesis import given
from hypothesis import strategies as st

from gateway.callbacks.schedule import MAX_WAIT, STANDARD_WAITS, next_wait, retry_after_seconds


def test_the_standard_schedule_then_failed() -> None:
    waits = [next_wait(n, STANDARD_WAITS) for n in range(1, 11)]
    assert waits == [5, 300, 1800, 7200, 18000, 36000, 50400, 72000, 86400, None]
    assert next_wait(1, (0.2, 0.2)) == 0.2 and next_wait(3, (0.2, 0.2)) is None


@given(
    attempts=st.integers(min_value=1, max_value=9),
    retry_after=st.none() | st.floats(min_value=0, max_value=1e9),
)
def test_a_wait_is_at_least_the_schedule_and_retry_after_and_at_most_a_day(
    attempts: int, retry_after: float | None
) -> None:
    wait = next_wait(attempts, STANDARD_WAITS, retry_after)
    assert wait is not None
    floor = max(STANDARD_WAITS[attempts - 1], retry_after or 0)
    assert wait == min(floor, MAX_WAIT)


def test_retry_after_in_seconds_or_as_a_date() -> None:
    assert retry_after_seconds("120", 0) == 120
    assert retry_after_seconds(None, 0) is None
    assert retry_after_seconds("soon", 0) is None
    now = 1_800_000_000.0
    assert retry_after_seconds(formatdate(now + 60, usegmt=True), now) == 60
    assert retry_after_seconds(formatdate(now - 60, usegmt=True), now) == 0
