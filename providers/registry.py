"""Config names -> adapters. Adding a provider is a folder plus one line here.

Each adapter module exposes `Options` (a msgspec Struct of its config table, so a config error
names the field) and `create(name, options)`, which returns a ready provider owning its own
pooled HTTP session (closed by `provider.close()`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from providers.base import ChatProvider

__all__ = ["ProviderSpec", "known_kinds", "spec_for"]


class ProviderSpec(msgspec.Struct, frozen=True):
    options_type: type[msgspec.Struct]
    create: Callable[[str, Any], ChatProvider]


def _specs() -> dict[str, ProviderSpec]:
    from providers import openai, simulator

    return {
        "simulator": ProviderSpec(simulator.Options, simulator.create),
        "openai": ProviderSpec(openai.Options, openai.create),
    }


def known_kinds() -> list[str]:
    return sorted(_specs())


def spec_for(kind: str) -> ProviderSpec:
    """KeyError (with the known kinds) when no adapter has that name."""
    specs = _specs()
    if kind not in specs:
        raise KeyError(f"unknown provider kind {kind!r}; known: {', '.join(sorted(specs))}")
    return specs[kind]
