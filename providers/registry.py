"""Config names -> adapters. Adding a provider is a folder plus one line here.

Each adapter module exposes `Options` (a msgspec Struct of its config table, so a config error
names the field) and `create(name, options)`, which returns a ready provider owning its own
pooled HTTP session (closed by `provider.close()`). The provider implements the protocol of
each capability in its spec's `capabilities` (`providers.base`: ChatProvider for "chat",
ImageProvider for the image ones, MusicProvider for the music ones) and no others.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from providers.base import CAPABILITIES

__all__ = ["ProviderSpec", "known_kinds", "serves", "spec_for"]


class ProviderSpec(msgspec.Struct, frozen=True):
    options_type: type[msgspec.Struct]
    # Returns Any: the object implements the protocols of `capabilities` (a different set per
    # kind), so callers narrow it with `serves` or an isinstance check on the protocol.
    create: Callable[[str, Any], Any]
    capabilities: frozenset[str]


_ALL = CAPABILITIES


def _specs() -> dict[str, ProviderSpec]:
    from providers import anthropic, gemini, openai, replicate, simulator

    return {
        "simulator": ProviderSpec(simulator.Options, simulator.create, _ALL),
        "anthropic": ProviderSpec(anthropic.Options, anthropic.create, frozenset({"chat"})),
        "gemini": ProviderSpec(gemini.Options, gemini.create, frozenset({"chat"})),
        "openai": ProviderSpec(
            openai.Options,
            openai.create,
            frozenset({"chat", "text_to_image", "image_to_image"}),
        ),
        "replicate": ProviderSpec(
            replicate.Options,
            replicate.create,
            frozenset({"text_to_music", "reference_audio_to_music"}),
        ),
    }


def known_kinds() -> list[str]:
    return sorted(_specs())


def spec_for(kind: str) -> ProviderSpec:
    """KeyError (with the known kinds) when no adapter has that name."""
    specs = _specs()
    if kind not in specs:
        raise KeyError(f"unknown provider kind {kind!r}; known: {', '.join(sorted(specs))}")
    return specs[kind]


def serves(kind: str, capability: str) -> bool:
    """Whether adapters of `kind` serve `capability`; KeyError for an unknown kind, ValueError
    for an unknown capability name (a typo must not read as "not served")."""
    if capability not in CAPABILITIES:
        known = ", ".join(sorted(CAPABILITIES))
        raise ValueError(f"unknown capability {capability!r}; known: {known}")
    return capability in spec_for(kind).capabilities
