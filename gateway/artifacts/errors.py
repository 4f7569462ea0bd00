"""Errors of the artifacts package: members of the one tree in `gateway.errors`.

    NotFound (404)
    └── BlobNotFound              404 not_found: a key with no stored blob

Everything else raised here is an existing class (`PayloadTooLarge`, `UnsupportedMediaType`,
`ValidationFailed`); `invalid_input` builds the 422 that names the offending field, so a
client learns which input was bad.
"""

from __future__ import annotations

from gateway.errors import ErrorDetail, NotFound, ValidationFailed

__all__ = ["BlobNotFound", "invalid_input"]


class BlobNotFound(NotFound):
    """The artifact's bytes are gone (deleted, or never written): a 404, not a 500."""

    default_message = "The artifact content does not exist."


def invalid_input(field: str, message: str) -> ValidationFailed:
    """A 422 whose message and single detail both say what was wrong with `field`."""
    return ValidationFailed(
        f"{field}: {message}", details=[ErrorDetail(field=field, message=message)]
    )
