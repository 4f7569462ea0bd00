"""JSON Schema (as OpenAI tools and `response_format` carry it) -> Gemini's `Schema`.

Gemini's `Schema` is a subset of OpenAPI 3.0 decoded as a protobuf, so any key it does not
know fails the whole call ("Unknown name 'additionalProperties'"). The translation keeps an
allow-list instead of chasing keys to drop:

- kept: type, description, nullable, enum (all strings), items, properties, required (only
  names in properties), anyOf, min/maxItems, minimum/maximum, min/maxLength, pattern,
  min/maxProperties, propertyOrdering, and `format` where Gemini accepts it;
- rewritten: local `$ref`s into `$defs`/`definitions` are inlined (a recursive one becomes a
  bare object), `allOf` members are merged, `oneOf` is `anyOf`, `const` a one-value string enum,
  `type: [T, "null"]` and an `anyOf` member `{"type": "null"}` become `nullable: true`;
- dropped: everything else (`additionalProperties`, `$schema`, `strict`, `title`, `default`,
  `examples`, `not`, non-string enums, formats like `email` or `uri`, ...).
"""

from __future__ import annotations

from typing import Any

__all__ = ["gemini_schema"]

_PLAIN = frozenset(
    {
        "description",
        "nullable",
        "minItems",
        "maxItems",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "pattern",
        "minProperties",
        "maxProperties",
        "propertyOrdering",
    }
)
_FORMATS = {
    "string": frozenset({"enum", "date-time"}),
    "number": frozenset({"float", "double"}),
    "integer": frozenset({"int32", "int64"}),
}
_MAX_DEPTH = 40


def gemini_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The Gemini `Schema` for a JSON Schema object (a new dict; the input is not changed)."""
    defs: dict[str, Any] = {}
    for key in ("definitions", "$defs"):
        found = schema.get(key)
        if isinstance(found, dict):
            defs.update(found)
    return _clean(schema, defs, frozenset(), 0)


def _clean(node: object, defs: dict[str, Any], seen: frozenset[str], depth: int) -> dict[str, Any]:
    if not isinstance(node, dict) or depth > _MAX_DEPTH:
        return {"type": "object"}
    node = _resolve(node, defs, seen)
    if node is None:
        return {"type": "object"}
    if isinstance(node.get("$ref"), str):
        seen = seen | {node["$ref"]}
        node = {k: v for k, v in node.items() if k != "$ref"}
    out: dict[str, Any] = {key: node[key] for key in _PLAIN if key in node}
    nullable = False
    kind = node.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        nullable = len(kinds) < len(kind)
        if len(kinds) == 1:
            kind = kinds[0]
        else:
            kind = None
            if kinds:
                out["anyOf"] = [{"type": k} for k in kinds]
    if isinstance(kind, str):
        out["type"] = kind
        allowed = _FORMATS.get(kind, frozenset())
        if node.get("format") in allowed:
            out["format"] = node["format"]
    enum = node.get("enum")
    if "const" in node:
        enum = [node["const"]]
    if isinstance(enum, list) and enum and all(isinstance(v, str) for v in enum):
        out["enum"] = enum
        out.setdefault("type", "string")  # Gemini's enums are strings
    properties = node.get("properties")
    if isinstance(properties, dict):
        out["properties"] = {
            name: _clean(value, defs, seen, depth + 1) for name, value in properties.items()
        }
        required = node.get("required")
        if isinstance(required, list):
            names = [name for name in required if name in properties]
            if names:
                out["required"] = names
    if "items" in node:
        out["items"] = _clean(node["items"], defs, seen, depth + 1)
    members = node.get("anyOf", node.get("oneOf"))
    if isinstance(members, list):
        options = []
        for member in members:
            if isinstance(member, dict) and member.get("type") == "null":
                nullable = True
            else:
                options.append(_clean(member, defs, seen, depth + 1))
        if len(options) == 1 and "type" not in out:
            out = {**options[0], **out}
        elif options:
            out["anyOf"] = options
    if nullable:
        out["nullable"] = True
    return out


def _resolve(
    node: dict[str, Any], defs: dict[str, Any], seen: frozenset[str]
) -> dict[str, Any] | None:
    """`node` with a local `$ref` and `allOf` merged in; None for a recursive reference."""
    ref = node.get("$ref")
    if isinstance(ref, str):
        if ref in seen:
            return None
        target = defs.get(ref.rsplit("/", 1)[-1])
        if isinstance(target, dict):
            node = {**target, **node}
    parts = node.get("allOf")
    if isinstance(parts, list):
        merged = {k: v for k, v in node.items() if k != "allOf"}
        for part in parts:
            if not isinstance(part, dict):
                continue
            part = _resolve(part, defs, seen) or {}
            for key, value in part.items():
                if key == "properties" and isinstance(merged.get(key), dict):
                    merged[key] = {**value, **merged[key]}
                elif key == "required" and isinstance(merged.get(key), list):
                    merged[key] = [*merged[key], *value]
                else:
                    merged.setdefault(key, value)
        node = merged
    return node
