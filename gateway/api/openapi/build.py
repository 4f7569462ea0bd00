"""The finished OpenAPI document: Litestar's skeleton plus each operation's `OperationDoc`.

Litestar contributes the paths, operation ids and the path and query parameters it reads from
the handlers. Everything else comes from the code's own declarations: each handler's
`OperationDoc` (its `opt`, see `gateway.api.openapi.doc`) says what it reads and answers, and
the schemas are made by msgspec from the Structs the gateway decodes and encodes with (so they
describe exactly what msgspec accepts and writes). The raw ASGI chat handler, which Litestar
cannot describe, is documented the same way. What every operation shares is added here: the
error envelope on each error status, `X-Request-Id`, the rate-limit headers, the security
schemes. A route in the schema whose handler has no `OperationDoc` is a build error.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Iterable, Mapping, Sequence
from http import HTTPStatus
from typing import Any

import msgspec
from litestar.routes import ASGIRoute, BaseRoute, HTTPRoute

from gateway.api.openapi.components import (
    ADMIN_CODES,
    CODES,
    PARAMETERS,
    REQUIRED,
    SECURITY,
    SECURITY_SCHEMES,
    header_components,
)
from gateway.api.openapi.doc import OPT_KEY, Bodies, Body, Content, OperationDoc
from gateway.http.envelope import ErrorBody

__all__ = [
    "Documented",
    "UndocumentedRoute",
    "common_errors",
    "complete_document",
    "operation_docs",
]

_REF = "#/components/schemas/{name}"

_RATE = (
    "x-ratelimit-limit-requests",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-reset-requests",
)
_TOKENS = ("x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens")
_BEFORE_ANY_CHECK = (401, 403, 408, 431)
"""Statuses answered before the rate check ran: no x-ratelimit-* headers."""

_ERROR = ErrorBody


class UndocumentedRoute(Exception):
    """A route in the schema whose handler has no OperationDoc."""


def common_errors(doc: OperationDoc) -> set[int]:
    """Error statuses every operation like `doc` can answer, beyond its own."""
    errors = {408, 431, 500}
    if doc.auth in ("api_key", "api_key_or_link"):
        errors |= {401, 503}
    elif doc.auth == "admin":
        errors |= {401, 403, 503}
    if _limited(doc):
        errors.add(429)
    if doc.body is not None:
        errors |= {413, 415}
    return errors


Documented = dict[tuple[str, str], tuple[OperationDoc, str]]
"""(method, path) -> the operation's doc and its operation id."""


def _limited(doc: OperationDoc) -> bool:
    return doc.rate_limited and doc.auth in ("api_key", "api_key_or_link")


def operation_docs(
    routes: Iterable[BaseRoute], extra: Mapping[tuple[str, str], OperationDoc] | None = None
) -> Documented:
    """Every route handler in the schema, documented; `extra` documents handlers by (method,
    path) from outside their module. Operation ids are the handlers' names (`admin_` first
    for /admin)."""
    found: Documented = {}
    extra = extra or {}
    for route in routes:
        path = route.path_format or "/"
        prefix = "admin_" if path.startswith("/admin/") else ""
        if isinstance(route, HTTPRoute):
            for method, (handler, _) in route.route_handler_map.items():
                if method == "OPTIONS" or not handler.resolve_include_in_schema():
                    continue
                doc = handler.opt.get(OPT_KEY) or extra.get((method, path))
                if not isinstance(doc, OperationDoc):
                    raise UndocumentedRoute(f"{method} {path} has no OperationDoc")
                found[method, path] = (doc, prefix + handler.handler_name)
        elif isinstance(route, ASGIRoute):
            asgi_handler = route.route_handler
            if asgi_handler.opt.get("include_in_schema") is False:  # another API's (Anthropic's)
                continue
            doc = asgi_handler.opt.get(OPT_KEY)
            if not isinstance(doc, OperationDoc):
                raise UndocumentedRoute(f"{path} (ASGI) has no OperationDoc")
            found[doc.method or "POST", path] = (doc, prefix + asgi_handler.handler_name)
    return found


def complete_document(generated: Mapping[str, Any], documented: Documented) -> dict[str, Any]:
    """The served document: `generated` (Litestar's) completed with what is `documented`."""
    document = copy.deepcopy(dict(generated))
    refs = _Schemas(doc for doc, _ in documented.values())
    paths: dict[str, Any] = document.setdefault("paths", {})
    for (method, path), (doc, operation_id) in documented.items():
        operation = paths.setdefault(path, {}).setdefault(method.lower(), {})
        operation["operationId"] = operation_id
        _apply(operation, doc, refs)
    document["paths"] = {path: paths[path] for path in sorted(paths)}
    components = document.setdefault("components", {})
    components["schemas"] = refs.components
    components["headers"] = header_components()
    components["parameters"] = PARAMETERS
    components["securitySchemes"] = SECURITY_SCHEMES
    document["security"] = SECURITY["api_key"]
    return document


class _Schemas:
    """Every Struct the operations name, made into components in one msgspec call (so names
    are shared), and the `$ref` of each."""

    def __init__(self, docs: Iterable[OperationDoc]) -> None:
        types: list[Any] = [_ERROR]
        for doc in docs:
            bodies: list[Body] = [] if doc.body is None else [doc.body]
            for reply in doc.responses.values():
                bodies += reply if isinstance(reply, tuple) else [] if reply is None else [reply]
            bodies += [body.events for body in bodies if isinstance(body, Content) and body.events]
            types += [
                body for body in bodies if not isinstance(body, Content) and body not in types
            ]
        refs, components = msgspec.json.schema_components(types, ref_template=_REF)
        self.refs = dict(zip(types, refs, strict=True))
        self.components = {name: _clean(schema) for name, schema in sorted(components.items())}

    def content(self, bodies: Bodies) -> dict[str, Any]:
        content: dict[str, Any] = {}
        for body in bodies if isinstance(bodies, tuple) else (bodies,):
            content.update(self._content(body))
        return content

    def _content(self, body: Body) -> dict[str, Any]:
        if isinstance(body, Content):
            schema = self._event(body) if body.events else dict(body.schema)
            media: dict[str, Any] = {"schema": schema}
            if body.encoding:
                media["encoding"] = dict(body.encoding)
            return {body.media_type: media}
        return {"application/json": {"schema": self.refs[body]}}

    def _event(self, body: Content) -> dict[str, Any]:
        """One Server-Sent Event: `data` is the JSON of `body.events` (or, ending a stream
        that broke, the error envelope), or the `[DONE]` sentinel."""
        assert body.events is not None
        payload = {"anyOf": [self.refs[body.events], self.refs[_ERROR]]}
        data = {
            "anyOf": [
                {"const": "[DONE]"},
                {
                    "type": "string",
                    "contentMediaType": "application/json",
                    "contentSchema": payload,
                },
            ]
        }
        return {
            **body.schema,
            "type": "object",
            "required": ["data"],
            "properties": {"event": {"type": "string"}, "id": {"type": "string"}, "data": data},
        }


def _clean(schema: Any) -> Any:
    """Docstrings as descriptions, without their source indentation."""
    if isinstance(schema, dict):
        return {
            key: inspect.cleandoc(value)
            if key == "description" and isinstance(value, str)
            else _clean(value)
            for key, value in schema.items()
        }
    if isinstance(schema, list):
        return [_clean(item) for item in schema]
    return schema


def _apply(operation: dict[str, Any], doc: OperationDoc, refs: _Schemas) -> None:
    operation["summary"] = doc.summary
    operation["tags"] = [doc.tag]
    operation["x-release"] = doc.release
    release = f"Release: **{doc.release}**."
    operation["description"] = f"{doc.description}\n\n{release}" if doc.description else release
    operation["security"] = SECURITY[doc.auth]
    operation["parameters"] = _parameters(operation.get("parameters", ()), doc)
    if doc.body is not None:
        content = refs.content(doc.body)
        if doc.example is not None:
            for media in content.values():
                media["example"] = dict(doc.example)
        operation["requestBody"] = {"required": True, "content": content}
    responses: dict[str, Any] = {}
    for status, body in sorted(doc.responses.items()):
        responses[str(status)] = _response(status, doc, body, refs)
    for status in sorted((common_errors(doc) | set(doc.errors)) - set(doc.responses)):
        responses[str(status)] = _response(status, doc, _ERROR, refs)
    operation["responses"] = {status: responses[status] for status in sorted(responses)}
    operation.pop("deprecated", None)


def _parameters(generated: Sequence[dict[str, Any]], doc: OperationDoc) -> list[dict[str, Any]]:
    params = [dict(p) for p in generated if p.get("in") != "query" or p["name"] not in doc.query]
    for name, schema in doc.query.items():
        schema = dict(schema)
        description = schema.pop("description", None)
        param: dict[str, Any] = {"name": name, "in": "query", "required": False, "schema": schema}
        if description:
            param["description"] = description
        params.append(param)
    params.append({"$ref": "#/components/parameters/XRequestId"})
    if doc.idempotent:
        params.append({"$ref": "#/components/parameters/IdempotencyKey"})
    params += [{"$ref": f"#/components/parameters/{name}"} for name in doc.request_headers]
    return params


def _response(
    status: int, doc: OperationDoc, body: Bodies | None, refs: _Schemas
) -> dict[str, Any]:
    if body is _ERROR:
        codes = ADMIN_CODES if doc.auth == "admin" else {}
        description = codes.get(status) or CODES[status]
    else:
        description = HTTPStatus(status).phrase
    response: dict[str, Any] = {"description": description, "headers": _headers(status, doc)}
    if body is not None:
        response["content"] = refs.content(body)
    return response


def _headers(status: int, doc: OperationDoc) -> dict[str, Any]:
    names: dict[str, bool] = {"X-Request-Id": True}  # name -> required
    if _limited(doc) and status not in _BEFORE_ANY_CHECK:
        for name in (*_RATE, *(_TOKENS if doc.tokens else ())):
            names[name] = False
    if status == 429:
        names["Retry-After"] = True
    if status == 401:
        names["WWW-Authenticate"] = True
    for name, required in doc.headers.get(status, {}).items():
        names[name] = required
    return {
        name: {"$ref": f"#/components/headers/{name}{REQUIRED if required else ''}"}
        for name, required in names.items()
    }
