"""A JSON value that a JSON Schema accepts, drawn deterministically from seed bytes.

Covers what OpenAI's structured outputs allow, and a little more: `type` (one or a list),
objects (`properties`, `required`; every declared property is given, as strict mode requires),
arrays (`items`, `prefixItems`, `minItems`/`maxItems`, `uniqueItems`), `enum`, `const`,
strings (`minLength`/`maxLength`, the common `format`s), numbers and integers (`minimum`,
`maximum`, the exclusive bounds, `multipleOf`), booleans, null, `anyOf`/`oneOf`, `allOf`, and
`$ref` into `$defs`/`definitions` (or any JSON pointer into the root), recursive ones included:
past `_MAX_DEPTH` nested levels a value takes its shortest form (null where allowed, no optional
items). Not generated: strings for a `pattern` (the value ignores it).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from hashlib import blake2b
from typing import Any

__all__ = ["schema_value"]

_MAX_DEPTH = 6
_DAY = datetime.datetime(2026, 1, 1)
_STRING_FORMATS: dict[str, Callable[[int], str]] = {
    "date-time": lambda n: (_DAY + datetime.timedelta(minutes=97 * n)).isoformat() + "Z",
    "date": lambda n: (_DAY + datetime.timedelta(days=n)).date().isoformat(),
    "time": lambda n: f"{n % 24:02d}:{n % 60:02d}:00",
    "duration": lambda n: f"P{n % 30 + 1}D",
    "email": lambda n: f"user{n}@example.com",
    "hostname": lambda n: f"host{n}.example.com",
    "ipv4": lambda n: f"192.0.2.{n % 256}",
    "ipv6": lambda n: f"2001:db8::{n % 65536:x}",
    "uri": lambda n: f"https://example.com/item/{n}",
    "uuid": lambda n: f"{n:08x}-0000-4000-8000-{n:012x}",
}


class _Draw:
    """An endless deterministic byte source (chained BLAKE2b blocks) and the root schema."""

    __slots__ = ("_block", "_position", "root", "words")

    def __init__(self, seed: bytes, root: dict[str, Any], words: tuple[str, ...]) -> None:
        self._block = blake2b(seed + b"schema", digest_size=64).digest()
        self._position = 0
        self.root = root
        self.words = words

    def byte(self) -> int:
        if self._position == len(self._block):
            self._block = blake2b(self._block, digest_size=64).digest()
            self._position = 0
        value = self._block[self._position]
        self._position += 1
        return value

    def pick(self, count: int) -> int:
        return self.byte() % count if count > 1 else 0


def schema_value(schema: dict[str, Any], seed: bytes, words: tuple[str, ...]) -> object:
    """A value `schema` accepts; the same seed gives the same value. `words` make the text."""
    return _value(schema, _Draw(seed, schema, words), 0)


def _resolve(schema: dict[str, Any], draw: _Draw) -> dict[str, Any]:
    """`schema` with its `$ref` (and `allOf`) folded in, keywords beside them kept."""
    seen = 0
    while isinstance(schema.get("$ref"), str) and seen < 32:
        seen += 1
        target = _pointer(draw.root, schema["$ref"])
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        schema = {**target, **rest}
    parts = schema.get("allOf")
    if isinstance(parts, list) and parts:
        merged = {k: v for k, v in schema.items() if k != "allOf"}
        for part in parts:
            if isinstance(part, dict):
                merged = _merge(merged, _resolve(part, draw))
        schema = merged
    return schema


def _pointer(root: dict[str, Any], ref: str) -> dict[str, Any]:
    if not ref.startswith("#"):
        return {}  # a remote document: nothing to follow offline
    node: Any = root
    for raw in ref[1:].split("/")[1:]:
        key = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict):
            node = node.get(key)
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            return {}
    return node if isinstance(node, dict) else {}


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    merged = {**a, **b}
    if isinstance(a.get("properties"), dict) and isinstance(b.get("properties"), dict):
        merged["properties"] = {**a["properties"], **b["properties"]}
    if isinstance(a.get("required"), list) and isinstance(b.get("required"), list):
        merged["required"] = list(dict.fromkeys([*a["required"], *b["required"]]))
    return merged


def _value(schema: object, draw: _Draw, depth: int) -> object:
    if not isinstance(schema, dict):
        return _text(draw, {}) if schema is not False else None
    schema = _resolve(schema, draw)
    if "const" in schema:
        return schema["const"]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[draw.pick(len(enum))]
    for union in ("anyOf", "oneOf"):
        branches = schema.get(union)
        if isinstance(branches, list) and branches:
            rest = {k: v for k, v in schema.items() if k != union}
            branch = _branch([b for b in branches if isinstance(b, dict)], draw, depth)
            return _value(_merge(rest, branch), draw, depth)
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if isinstance(k, str)]
        solid = [k for k in kinds if k != "null"]
        if not solid or (depth >= _MAX_DEPTH and "null" in kinds):
            return None
        kind = solid[draw.pick(len(solid))]
    if kind is None:
        kind = _implied_type(schema)
    if kind == "object":
        return _object(schema, draw, depth)
    if kind == "array":
        return _array(schema, draw, depth)
    if kind == "integer":
        return _integer(schema, draw)
    if kind == "number":
        return _number(schema, draw)
    if kind == "boolean":
        return draw.byte() % 2 == 0
    if kind == "null":
        return None
    return _text(draw, schema)


def _branch(branches: list[dict[str, Any]], draw: _Draw, depth: int) -> dict[str, Any]:
    """A branch to follow: one that is not just null while depth allows, else the null one."""
    if not branches:
        return {}

    def is_null(branch: dict[str, Any]) -> bool:
        return _resolve(branch, draw).get("type") == "null"

    nulls = [b for b in branches if is_null(b)]
    solid = [b for b in branches if not is_null(b)]
    if solid and (depth < _MAX_DEPTH or not nulls):
        return solid[draw.pick(len(solid))]
    return nulls[0] if nulls else branches[0]


def _implied_type(schema: dict[str, Any]) -> str:
    if "properties" in schema or "required" in schema or "additionalProperties" in schema:
        return "object"
    if "items" in schema or "prefixItems" in schema:
        return "array"
    if any(k in schema for k in ("minimum", "maximum", "multipleOf")):
        return "number"
    return "string"


def _object(schema: dict[str, Any], draw: _Draw, depth: int) -> dict[str, Any]:
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    required = schema.get("required")
    names = list(properties)
    if isinstance(required, list):
        names += [r for r in required if isinstance(r, str) and r not in properties]
    if depth >= _MAX_DEPTH and isinstance(required, list):
        names = [n for n in names if n in required]  # the shortest form: what must be there
    out = {name: _value(properties.get(name, {}), draw, depth + 1) for name in names}
    extra = schema.get("additionalProperties")
    wanted = schema.get("minProperties")
    if isinstance(wanted, int) and len(out) < wanted and extra is not False:
        value_schema = extra if isinstance(extra, dict) else {}
        while len(out) < wanted:
            out[f"{draw.words[draw.byte()]}_{len(out)}"] = _value(value_schema, draw, depth + 1)
    return out


def _array(schema: dict[str, Any], draw: _Draw, depth: int) -> list[object]:
    low = _int(schema.get("minItems"), 0)
    high = _int(schema.get("maxItems"), low + 3)
    prefix = schema.get("prefixItems")
    if not isinstance(prefix, list):
        prefix = []
    items = schema.get("items")
    span = 3 if depth < 2 else 1  # deep arrays stay short: recursive schemas grow fast
    count = low if depth >= _MAX_DEPTH else min(high, max(low, 1 + draw.pick(span)))
    if items is False:
        count = min(count, len(prefix))
    out: list[object] = []
    unique = schema.get("uniqueItems") is True
    tries = 0
    while len(out) < count and tries < 8 * count + 8:
        tries += 1
        position = len(out)
        item_schema = prefix[position] if position < len(prefix) else items
        value = _value(item_schema if isinstance(item_schema, dict) else {}, draw, depth + 1)
        if unique and value in out:
            continue
        out.append(value)
    return out


def _integer(schema: dict[str, Any], draw: _Draw) -> int:
    low, high = _bounds(schema, integer=True)
    step = schema.get("multipleOf")
    value = low + (draw.byte() * 256 + draw.byte()) % (high - low + 1)
    if isinstance(step, int) and step > 0:
        value = -(-low // step) * step + (value - low) // step * step
        if value > high:
            value = -(-low // step) * step
    return int(value)


def _number(schema: dict[str, Any], draw: _Draw) -> float | int:
    step = schema.get("multipleOf")
    if isinstance(step, int) and not isinstance(step, bool):
        return _integer(schema, draw)
    low, high = _bounds(schema, integer=False)
    value = low + (high - low) * (draw.byte() * 256 + draw.byte()) / 65535
    if isinstance(step, float) and step > 0:
        value = max(low, min(high, round(value / step) * step))
        return round(value, 10)
    value = round(value, 2)
    return min(max(value, low), high)


def _bounds(schema: dict[str, Any], *, integer: bool) -> tuple[float, float]:
    """The closed interval a value may take (exclusive bounds stepped in)."""
    nudge = 1 if integer else 0.01
    low = _number_or_none(schema.get("minimum"))
    high = _number_or_none(schema.get("maximum"))
    exclusive_low = _number_or_none(schema.get("exclusiveMinimum"))
    exclusive_high = _number_or_none(schema.get("exclusiveMaximum"))
    if exclusive_low is not None:
        low = max(low, exclusive_low + nudge) if low is not None else exclusive_low + nudge
    if exclusive_high is not None:
        high = min(high, exclusive_high - nudge) if high is not None else exclusive_high - nudge
    if low is None:
        low = 0 if high is None or high >= 0 else high - 100
    if high is None:
        high = low + 100
    if integer:
        low, high = -(-low // 1), high // 1
    return low, max(low, high)


def _number_or_none(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    return None


def _int(value: object, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _text(draw: _Draw, schema: dict[str, Any]) -> str:
    number = draw.byte() * 256 + draw.byte()
    format_ = schema.get("format")
    if isinstance(format_, str) and format_ in _STRING_FORMATS:
        return _STRING_FORMATS[format_](number)
    words = [draw.words[draw.byte()] for _ in range(1 + draw.pick(3))]
    text = " ".join(words)
    low = _int(schema.get("minLength"), 0)
    while len(text) < low:
        text += " " + draw.words[draw.byte()]
    high = schema.get("maxLength")
    if isinstance(high, int):
        text = text[:high]
    return text
