"""A labelled counter or histogram counted in plain floats, handed to prometheus-client on fold.

prometheus-client's `labels()` validates its arguments and each `inc()` or `observe()` takes a
lock (one per bucket and sum): a few microseconds an event, a few events a request. Here an
event adds to a float in a dict keyed by the label tuple, and `fold()` (run when a scrape reads
the registry) sets each child's value to the total. Each total is summed in the order the
events came, starting from 0.0, so it is the float the library would have summed; children are
created in the order their label sets first came, so the exposition lists them as before.

Folding sets the library's value objects (`_value`, `_sum`, `_buckets`: prometheus-client's
own storage for a child, unchanged for years) because the library has no public way to set a
counter or a bucket; `tests/metrics/test_tally.py` compares the scrape with the library's own
counting so that a change there is seen. With a multiprocess folder the values must be in the
files when another process scrapes, so there every event goes to the library at once
(`DirectCounter`, `DirectHistogram`).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from typing import Any, Protocol

__all__ = [
    "CounterTally",
    "DirectCounter",
    "DirectHistogram",
    "HistogramTally",
    "TalliedCounter",
    "TalliedHistogram",
    "counter_tally",
    "histogram_tally",
]

Labels = tuple[str, ...]


class CounterTally(Protocol):
    def add(self, labels: Labels, amount: float = 1.0) -> None: ...
    def fold(self) -> None: ...


class HistogramTally(Protocol):
    def observe(self, labels: Labels, amount: float) -> None: ...
    def fold(self) -> None: ...


class _Children:
    """A metric's children by label tuple (the library's `labels()` checks and locks)."""

    __slots__ = ("_children", "_metric")

    def __init__(self, metric: Any) -> None:
        self._metric = metric
        self._children: dict[Labels, Any] = {}

    def __call__(self, labels: Labels) -> Any:
        child = self._children.get(labels)
        if child is None:
            child = self._children[labels] = self._metric.labels(*labels)
        return child


class TalliedCounter:
    __slots__ = ("_child", "totals")

    def __init__(self, metric: Any) -> None:
        self._child = _Children(metric)
        self.totals: dict[Labels, float] = {}

    def add(self, labels: Labels, amount: float = 1.0) -> None:
        totals = self.totals
        totals[labels] = totals.get(labels, 0.0) + amount

    def fold(self) -> None:
        for labels, total in list(self.totals.items()):
            self._child(labels)._value.set(total)


class TalliedHistogram:
    """Per label tuple a list: the sum of observations, then a count per bucket (`le`)."""

    __slots__ = ("_bounds", "_child", "series")

    def __init__(self, metric: Any, buckets: Sequence[float]) -> None:
        self._child = _Children(metric)
        bounds = [float(b) for b in buckets]
        if bounds[-1] != float("inf"):
            bounds.append(float("inf"))
        self._bounds = bounds
        self.series: dict[Labels, list[float]] = {}

    def observe(self, labels: Labels, amount: float) -> None:
        series = self.series.get(labels)
        if series is None:
            series = self.series[labels] = [0.0] * (len(self._bounds) + 1)
        series[0] += amount
        if amount <= self._bounds[-1]:  # the library counts NaN in no bucket, as here
            series[bisect_left(self._bounds, amount) + 1] += 1.0

    def fold(self) -> None:
        for labels, series in list(self.series.items()):
            child = self._child(labels)
            child._sum.set(series[0])
            for bucket, count in zip(child._buckets, series[1:], strict=True):
                bucket.set(count)


class DirectCounter:
    __slots__ = ("_child",)

    def __init__(self, metric: Any) -> None:
        self._child = _Children(metric)

    def add(self, labels: Labels, amount: float = 1.0) -> None:
        self._child(labels).inc(amount)

    def fold(self) -> None:
        pass


class DirectHistogram:
    __slots__ = ("_child",)

    def __init__(self, metric: Any) -> None:
        self._child = _Children(metric)

    def observe(self, labels: Labels, amount: float) -> None:
        self._child(labels).observe(amount)

    def fold(self) -> None:
        pass


def counter_tally(metric: Any, tallied: bool) -> CounterTally:
    return TalliedCounter(metric) if tallied else DirectCounter(metric)


def histogram_tally(metric: Any, buckets: Sequence[float], tallied: bool) -> HistogramTally:
    return TalliedHistogram(metric, buckets) if tallied else DirectHistogram(metric)
