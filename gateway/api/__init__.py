"""Controllers, one module per resource. A module that exports `HANDLERS` is mounted as is:
adding an endpoint never means editing a central list."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

__all__ = ["route_handlers"]


def route_handlers() -> list[Any]:
    handlers: list[Any] = []
    for module_info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{module_info.name}")
        handlers.extend(getattr(module, "HANDLERS", ()))
    return handlers
