"""Backend failures become `gateway.errors.StoreUnavailable`, in one place per backend.

Like httpx's `map_httpcore_exceptions`: each backend names the library errors that mean "the
store could not do it now" (a lost connection, a timeout, a database locked past its busy
timeout) once, in a `StoreErrorMap`, and wraps every call into the library in it. Those errors
leave as `StoreUnavailable` (503, retryable) with the original as `__cause__`; everything else
passes through untouched (a bug should look like one).

A map is stateless and reentrant, so each backend keeps one instance and enters it for every
call: `with store_errors:`, no object made per use.
"""

from __future__ import annotations

from types import TracebackType

from gateway.errors import StoreUnavailable

__all__ = ["StoreErrorMap"]


class StoreErrorMap:
    """A context manager translating `types` into `StoreUnavailable` (`raise ... from exc`)."""

    __slots__ = ("types",)

    def __init__(self, *types: type[BaseException]) -> None:
        self.types = types

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc is not None and isinstance(exc, self.types):
            raise StoreUnavailable() from exc
