"""`model_options`: which namespaces a request may send, for chat and media alike.

A namespace belongs to a model (`options_namespace` in the routing file) and goes to that
model's provider only. A pinned request may send its model's; an `auto` request any of the
models it may be given to (it cannot know which will answer). Any other is refused, naming
`model_options.<namespace>`.
"""

from __future__ import annotations

from collections.abc import Iterable

from gateway.errors import ErrorDetail
from gateway.routing.route import Choice

__all__ = ["namespace_problems"]


def namespace_problems(namespaces: Iterable[str], choice: Choice) -> list[ErrorDetail]:
    """One problem per namespace in `namespaces` that no route of `choice` takes."""
    known = {route.model.options_namespace for route in choice.routes} - {""}
    unknown = [namespace for namespace in namespaces if namespace not in known]
    if not unknown:
        return []
    takes = ", ".join(f"'{n}'" for n in sorted(known))
    if choice.pinned:
        message = f"unknown namespace for model '{choice.routes[0].model.id}'"
        message += f"; it takes {takes}" if takes else ""
    else:
        message = "unknown namespace for the models 'auto' may use"
        message += f"; they take {takes}" if takes else ""
    return [ErrorDetail(field=f"model_options.{n}", message=message) for n in unknown]
