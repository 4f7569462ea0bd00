"""`data:<mime>;base64,<payload>` reference inputs, decoded with a cap and a type check.

The cap is checked on the encoded length first, so an oversized payload is refused before a
byte is decoded. The base64 is strict (no whitespace, no stray characters, canonical padding):
a lenient decoder would accept inputs the client did not mean. The declared type is the
client's claim; the sniffed type of the decoded bytes is what must be allowed.
"""

from __future__ import annotations

import binascii
from dataclasses import dataclass

from gateway.artifacts.errors import invalid_input
from gateway.artifacts.sniff import sniff

__all__ = ["DecodedData", "decode_data_uri"]

_MAX_HEADER_CHARS = 256
"""`data:` through the comma: a media type and a few parameters, never more."""


@dataclass(frozen=True, slots=True)
class DecodedData:
    mime_type: str
    """The sniffed type, not the declared one."""
    data: bytes


def decode_data_uri(
    value: str, *, field: str, allowed_types: frozenset[str], max_bytes: int
) -> DecodedData:
    """Decode a base64 data URI; `ValidationFailed` naming `field` on any problem."""
    if value[:5].lower() != "data:":
        raise invalid_input(field, "must be a data URI ('data:<type>;base64,<data>').")
    comma = value.find(",", 0, _MAX_HEADER_CHARS + 1)
    if comma < 0:
        raise invalid_input(field, "must be a data URI ('data:<type>;base64,<data>').")
    params = [p.strip().lower() for p in value[5:comma].split(";")]
    if params[-1] != "base64":
        raise invalid_input(field, "must be base64-encoded (';base64,').")
    payload = value[comma + 1 :]
    if not payload:
        raise invalid_input(field, "is empty.")
    # Four characters carry three bytes: refuse from the encoded length, before decoding.
    if len(payload) > 4 * -(-max_bytes // 3):
        raise invalid_input(field, f"is larger than the limit of {max_bytes} bytes.")
    try:
        data = binascii.a2b_base64(payload, strict_mode=True)
    except (binascii.Error, ValueError) as exc:
        raise invalid_input(field, "is not valid base64.") from exc
    if len(data) > max_bytes:
        raise invalid_input(field, f"is larger than the limit of {max_bytes} bytes.")
    mime = sniff(data[:64])
    if mime is None or mime not in allowed_types:
        raise invalid_input(field, f"must be one of: {', '.join(sorted(allowed_types))}.")
    return DecodedData(mime_type=mime, data=data)
