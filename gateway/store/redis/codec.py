"""Turning what the scripts and commands return into the store's types, and replies into bytes.

Scripts return bucket levels as exact decimal strings (a Lua number would reach the client
truncated to an integer), ledger entries as msgpack arrays packed by `append_entry` in
common.lua, and stored replies as the msgpack bytes `encode_reply` made. A task hash holds
`TaskRecord`'s fields by name (redis/tasks.py), the structured ones as msgpack.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from gateway.store import buckets
from gateway.store.base import (
    AdmissionOutcome,
    AdmissionResult,
    ApiKeyRecord,
    KeySettings,
    LedgerEntry,
    LedgerKind,
    RateLimits,
    StoredReply,
)
from gateway.store.callbacks import TaskCallback
from gateway.store.tasks import TaskRecord

__all__ = [
    "KEY_FIELDS",
    "admission_result",
    "callback_fields",
    "decode_entry",
    "decode_task",
    "encode_reply",
    "encode_settings",
    "key_record",
    "text",
]

KEY_FIELDS = (
    "key_id", "tenant", "created_at", "revoked_at", "prefix", "settings", "valid_until"
)  # fmt: skip
"""The fields of an API key hash, in the order `key_record` reads them."""

_OUTCOMES = {o.value.encode(): o for o in AdmissionOutcome}
_settings_decoder = msgspec.msgpack.Decoder(KeySettings)
_reply_encoder = msgspec.msgpack.Encoder()
_reply_decoder = msgspec.msgpack.Decoder(StoredReply)


class _PackedEntry(msgspec.Struct, array_like=True, frozen=True):
    """A ledger entry as common.lua packs it ('' stands for None). Entries packed before
    `model` existed have nine elements, before `key_id` ten; extra trailing elements are
    ignored (a newer gateway's entries stay readable by an older one during a rolling
    upgrade)."""

    id: str
    tenant: str
    kind: LedgerKind
    amount: int
    balance_after: int
    created_at: float
    reason: str
    task_id: str
    request_id: str
    model: str = ""
    key_id: str = ""


_entry_decoder = msgspec.msgpack.Decoder(_PackedEntry)
_blob = msgspec.msgpack.Decoder()
_BLOBS = frozenset(("input", "metadata", "output", "error", "usage", "warnings"))
_PROGRESS = ("percent", "stage", "message")
_INTERNAL = frozenset(("seq", "entry", "unconfirmed", "idem"))
_CALLBACK = "cb_"
"""The prefix of a task callback's fields in the task hash (`TaskCallback`'s names)."""


def encode_reply(reply: StoredReply) -> bytes:
    return _reply_encoder.encode(reply)


def decode_entry(packed: bytes) -> LedgerEntry:
    e = _entry_decoder.decode(packed)
    return LedgerEntry(
        id=e.id,
        tenant=e.tenant,
        kind=e.kind,
        amount_units=e.amount,
        balance_after_units=e.balance_after,
        created_at=e.created_at,
        reason=e.reason,
        task_id=e.task_id or None,
        request_id=e.request_id or None,
        model=e.model,
        key_id=e.key_id,
    )


def admission_result(raw: Sequence[Any], limits: RateLimits) -> AdmissionResult:
    """Decode admit.lua's {outcome, available, requests_level, tokens_level, held_units,
    tokens[, reply]}: `tokens` is the reservation taken (or that a refusal was measured by)."""
    outcome = _OUTCOMES[raw[0]]
    tpm = limits.tokens_per_minute
    tokens = raw[5]
    need = min(tokens, tpm) if tpm > 0 else 0
    admitted = outcome is AdmissionOutcome.ADMITTED
    limited = outcome is AdmissionOutcome.RATE_LIMITED
    return AdmissionResult(
        outcome=outcome,
        rate=buckets.state(limits, float(raw[2]), float(raw[3]), need, limited),
        reply=_reply_decoder.decode(raw[6]) if len(raw) > 6 else None,
        available_units=raw[1],
        hold_units=raw[4],
        tokens_reserved=tokens if admitted else 0,
    )


def text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def key_record(fields: Sequence[bytes | str | None]) -> ApiKeyRecord | None:
    """An API key hash read with KEY_FIELDS; None when the key does not exist."""
    key_id, tenant, created_at, revoked_at, prefix, settings, valid_until = fields
    if key_id is None or tenant is None or created_at is None:
        return None
    return ApiKeyRecord(
        key_id=text(key_id),
        tenant=text(tenant),
        created_at=float(created_at),
        revoked_at=float(revoked_at) if revoked_at is not None else None,
        prefix=text(prefix) if prefix is not None else "",
        settings=_settings_decoder.decode(settings)
        if isinstance(settings, bytes) and settings
        else KeySettings(),
        valid_until=float(valid_until) if valid_until is not None else None,
    )


def encode_settings(settings: KeySettings) -> bytes:
    """A key's settings as its record keeps them (b"" for none)."""
    return b"" if settings == KeySettings() else _reply_encoder.encode(settings)


def decode_task(raw: Sequence[bytes] | Mapping[bytes, bytes]) -> TaskRecord | None:
    """A task hash (HGETALL as a script returns it, flat, or as redis-py parses it)."""
    if not raw:
        return None
    h = raw if isinstance(raw, Mapping) else dict(zip(raw[::2], raw[1::2], strict=True))
    fields: dict[str, Any] = {}
    for name, value in h.items():
        key = name.decode()
        if key in _BLOBS:
            fields[key] = _blob.decode(value)
        elif key not in _INTERNAL:
            fields[key] = value.decode()
    fields["progress"] = {name: fields.pop(name) for name in _PROGRESS}
    callback = {
        name[len(_CALLBACK) :]: fields.pop(name)
        for name in [n for n in fields if n.startswith(_CALLBACK)]
    }
    if callback:
        fields["callback"] = callback
    # Non-strict: the numbers are strings in the hash; everything else is checked as usual.
    return msgspec.convert(fields, TaskRecord, strict=False)


def callback_fields(callback: TaskCallback) -> list[str]:
    """A callback as field, value pairs of its task hash (None and False fields left out)."""
    pairs: list[str] = []
    for name, value in msgspec.structs.asdict(callback).items():
        if value is None or value is False:
            continue
        pairs += [_CALLBACK + name, "1" if value is True else str(value)]
    return pairs
