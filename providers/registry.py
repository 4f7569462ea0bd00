"""Config names -> adapters. Adding a provider is a folder plus one line in `_KINDS`.

Each adapter module exposes `Options` (a msgspec Struct of its config table, so a config error
names the field) and `create(name, options)`, which returns a ready provider owning its own
pooled HTTP session (closed by `provider.close()`). The provider implements the protocol of
each capability in its spec's `capabilities` (`providers.base`: ChatProvider for "chat",
EmbeddingsProvider for "embeddings", ImageProvider for the image ones, MusicProvider for the
music ones) and no others.
"""

from __future__ import annotations

import importlib
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

_KINDS: dict[str, tuple[str, frozenset[str]]] = {
    "simulator": ("providers.simulator", _ALL),
    "anthropic": ("providers.anthropic", frozenset({"chat"})),
    "azure_openai": ("providers.azure_openai", frozenset({"chat", "embeddings"})),
    "bedrock": ("providers.bedrock", frozenset({"chat", "embeddings"})),
    "gemini": ("providers.gemini", frozenset({"chat", "embeddings"})),
    "openai": (
        "providers.openai",
        frozenset({"chat", "embeddings", "text_to_image", "image_to_image"}),
    ),
    "openai_compatible": ("providers.openai_compatible", frozenset({"chat", "embeddings"})),
    "replicate": ("providers.replicate", frozenset({"text_to_music", "reference_audio_to_music"})),
    "vertex": ("providers.vertex", frozenset({"chat", "embeddings"})),
}
"""kind -> (its adapter module, the capabilities it serves). A module is imported only when a
routing file names its kind: start-up time and memory stay those of the adapters in use."""


def known_kinds() -> list[str]:
    return sorted(_KINDS)


def spec_for(kind: str) -> ProviderSpec:
    """KeyError (with the known kinds) when no adapter has that name."""
    if kind not in _KINDS:
        raise KeyError(f"unknown provider kind {kind!r}; known: {', '.join(sorted(_KINDS))}")
    module_name, capabilities = _KINDS[kind]
    module = importlib.import_module(module_name)
    return ProviderSpec(module.Options, module.create, capabilities)


def serves(kind: str, capability: str) -> bool:
    """Whether adapters of `kind` serve `capability`; KeyError for an unknown kind, ValueError
    for an unknown capability name (a typo must not read as "not served")."""
    if capability not in CAPABILITIES:
        known = ", ".join(sorted(CAPABILITIES))
        raise ValueError(f"unknown capability {capability!r}; known: {known}")
    if kind not in _KINDS:
        raise KeyError(f"unknown provider kind {kind!r}; known: {', '.join(sorted(_KINDS))}")
    return capability in _KINDS[kind][1]
