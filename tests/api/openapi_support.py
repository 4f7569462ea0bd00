"""Checking real responses against the served OpenAPI document: the status is one the
operation documents, the body validates against the documented schema (JSON, or each event of
a stream), the required headers are there."""

from __future__ import annotations

import json
from typing import Any

import httpx
from jsonschema import Draft202012Validator

__all__ = ["Recorded", "check_response", "schema_errors"]

Recorded = tuple[str, str, httpx.Response]
"""(method, path template, response)."""


def _resolve(document: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        target: Any = document
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def schema_errors(document: dict[str, Any], schema: dict[str, Any], value: Any) -> list[str]:
    """Why `value` does not validate against `schema` (which may point into the document)."""
    root = {**schema, "components": document["components"]}
    validator = Draft202012Validator(root)
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(value)]


def check_response(document: dict[str, Any], recorded: Recorded) -> list[str]:
    """Every way `recorded` disagrees with the document."""
    method, path, response = recorded
    where = f"{method} {path} -> {response.status_code}"
    operation = document["paths"].get(path, {}).get(method.lower())
    if operation is None:
        return [f"{where}: not in the document"]
    documented = operation["responses"].get(str(response.status_code))
    if documented is None:
        return [f"{where}: status not documented ({sorted(operation['responses'])})"]
    problems = []
    for name, header in documented.get("headers", {}).items():
        if _resolve(document, header).get("required") and name.lower() not in response.headers:
            problems.append(f"{where}: required header {name} missing")
    media_type = response.headers.get("content-type", "").partition(";")[0].strip()
    content = documented.get("content")
    if content is None or method == "HEAD":  # a HEAD answer has the headers alone
        return problems
    if media_type not in content:
        matches = [m for m in content if m.endswith("/*") and media_type.startswith(m[:-1])]
        if not matches:
            return [*problems, f"{where}: content type {media_type} not documented"]
        return problems  # bytes: nothing to validate
    schema = content[media_type]["schema"]
    if media_type == "text/event-stream":
        for event in (e for e in response.text.split("\n\n") if e):
            data = event.removeprefix("data: ")
            errors = schema_errors(document, schema, {"event": "message", "data": data})
            if data != "[DONE]":
                chunk = schema["properties"]["data"]["anyOf"][1]["contentSchema"]
                errors += schema_errors(document, chunk, json.loads(data))
            problems += [f"{where} event {data[:60]}: {error}" for error in errors]
        return problems
    if media_type == "application/json":
        errors = schema_errors(document, schema, response.json())
        problems += [f"{where}: {error}" for error in errors]
    return problems
