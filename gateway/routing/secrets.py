"""The gateway's upstream credentials, kept out of everything it shows or logs.

An upstream's error text reaches the client ("The model rejected the request: ...") and the log
(`upstream_failed`, `stream_broken`), and an upstream may echo the credentials it was sent (a
proxy that quotes the request's headers, a token endpoint that quotes its form, a "key sk-...
is not valid" message). So every provider error is scrubbed where the gateway first catches it
(`Route.scrub`, the worker), before it is logged, counted, stored with a task or answered:
each credential is replaced by `[redacted]` in the error's message.

Which credentials: whatever each provider's adapter reports to its `providers.secrets.SecretSink`
(the configured key and `extra_headers`, client secrets and refresh tokens, and what it obtains
while it runs: access tokens, signed JWT assertions, AWS keys and session tokens, each as it
is fetched or renewed). One `Scrubber` reads the sinks of every provider it watches; its
pattern is rebuilt only when a sink's `version` has changed since, so scrubbing costs one
tuple of versions and one regex search.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from providers.errors import ProviderError
from providers.secrets import MIN_SECRET_CHARS, SecretSink

__all__ = ["MASK", "MIN_SECRET_CHARS", "Scrubber", "sinks_of"]

MASK = "[redacted]"


def sinks_of(providers: Iterable[object]) -> list[SecretSink]:
    """The `SecretSink` of each provider that has one (a simulator sends no credentials)."""
    found = []
    for provider in providers:
        sink = getattr(provider, "secrets", None)
        if isinstance(sink, SecretSink):
            found.append(sink)
    return found


class Scrubber:
    """Replaces the credentials of the providers it watches in text and in provider errors
    (in place). `secrets`: fixed ones besides (tests, and values no adapter reports)."""

    __slots__ = ("_fixed", "_pattern", "_seen", "_sinks")

    def __init__(self, secrets: Iterable[str] = (), sinks: Iterable[SecretSink] = ()) -> None:
        self._fixed = frozenset(s for s in secrets if len(s) >= MIN_SECRET_CHARS)
        self._sinks: list[SecretSink] = []
        self._seen: tuple[int, ...] | None = None
        self._pattern: re.Pattern[str] | None = None
        self.watch(sinks)

    def watch(self, sinks: Iterable[SecretSink]) -> None:
        """Mask these providers' credentials too (a new generation of providers)."""
        for sink in sinks:
            if not any(sink is known for known in self._sinks):
                self._sinks.append(sink)
        self._seen = None

    def forget(self, sinks: Iterable[SecretSink]) -> None:
        """Stop reading these (providers closed)."""
        gone = {id(sink) for sink in sinks}
        self._sinks = [sink for sink in self._sinks if id(sink) not in gone]
        self._seen = None

    def text(self, value: str) -> str:
        pattern = self._current()
        return value if pattern is None else pattern.sub(MASK, value)

    def error(self, exc: BaseException) -> None:
        """Scrub a provider error's message before anyone shows or logs it."""
        if not isinstance(exc, ProviderError):
            return
        scrubbed = self.text(exc.message)
        if scrubbed != exc.message:
            exc.message = scrubbed
            exc.args = (scrubbed,)

    def _current(self) -> re.Pattern[str] | None:
        seen = tuple(sink.version for sink in self._sinks)
        if seen != self._seen:
            found = set(self._fixed)
            for sink in self._sinks:
                found |= sink.values()
            ordered = sorted(found, key=len, reverse=True)  # a longer one wins an overlap
            self._pattern = re.compile("|".join(map(re.escape, ordered))) if ordered else None
            self._seen = seen
        return self._pattern
