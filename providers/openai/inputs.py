"""How OpenAI bills a request's images (`providers.base.InputRules`), per model family.

Tile models scale an image within 2048 x 2048, then its short side to 768, and bill a base
plus a price per 512-px tile (at most 8 tiles); patch models bill 32-px patches, at most
1,536 (10,000 for `detail: original`), times a model multiplier. A model this table does not
know is held at the dearest of them."""

from __future__ import annotations

from collections.abc import Callable
from math import ceil

from providers.base import InputRules

__all__ = ["OPENAI_UNKNOWN_MODEL", "openai_input_rules"]

_PAGE_TEXT_TOKENS = 6_000
"""The text of one dense PDF page (OpenAI sends a page's text and its picture)."""


def _tiles(width: int, height: int) -> int:
    scale = min(1.0, 2048 / max(width, height))
    w, h = width * scale, height * scale
    shrink = min(1.0, 768 / min(w, h))
    w, h = w * shrink, h * shrink
    return min(ceil(w / 512) * ceil(h / 512), 8)


def _tile_rule(base: int, per_tile: int) -> tuple[Callable[[int, int], int], int]:
    def tokens(width: int, height: int) -> int:
        if width <= 0 or height <= 0:
            return base + 8 * per_tile
        return base + _tiles(width, height) * per_tile

    return tokens, base + 8 * per_tile


def _patch_rule(multiplier: float, cap: int = 1536) -> tuple[Callable[[int, int], int], int]:
    def tokens(width: int, height: int) -> int:
        if width <= 0 or height <= 0:
            return ceil(cap * multiplier)
        return ceil(min(ceil(width / 32) * ceil(height / 32), cap) * multiplier)

    return tokens, ceil(cap * multiplier)


_FAMILIES: tuple[tuple[str, tuple[Callable[[int, int], int], int]], ...] = (
    ("gpt-4o-mini", _tile_rule(2833, 5667)),
    ("gpt-4.1-mini", _patch_rule(1.62)),
    ("gpt-4.1-nano", _patch_rule(2.46)),
    ("gpt-5-mini", _patch_rule(1.62)),
    ("gpt-5-nano", _patch_rule(2.46)),
    ("o4-mini", _patch_rule(1.72)),
    ("o1", _tile_rule(75, 150)),
    ("o3", _tile_rule(75, 150)),
    ("gpt-5", _tile_rule(70, 140)),
    ("gpt-4", _tile_rule(85, 170)),
    ("chatgpt-4o", _tile_rule(85, 170)),
)
"""Upstream model prefix -> (tokens of a w x h image, tokens of an image of unknown size);
longer prefixes first."""
_ORIGINAL = _patch_rule(1.0, 10_000)


def _dearest(width: int, height: int) -> int:
    rules = [rule for _, (rule, _) in _FAMILIES]
    return max(rule(width, height) for rule in (*rules, _ORIGINAL[0]))


def _rules(image: Callable[[int, int], int], image_max: int) -> InputRules:
    return InputRules(
        image_tokens=image,
        image_max_tokens=image_max,
        pdf_page_tokens=image_max + _PAGE_TEXT_TOKENS,
    )


OPENAI_UNKNOWN_MODEL = _rules(_dearest, max(m for _, (_, m) in (*_FAMILIES, ("", _ORIGINAL))))
"""The dearest of the families: a model this table does not know, an OpenAI-compatible
server, an Azure deployment (whose name does not say its model)."""
_BY_FAMILY = {prefix: _rules(*rule) for prefix, rule in _FAMILIES}


def openai_input_rules(upstream_model: str) -> InputRules:
    """OpenAI's rule for `upstream_model`'s family; `max_completion_tokens` covers reasoning."""
    for prefix, _ in _FAMILIES:
        if upstream_model.startswith(prefix):
            return _BY_FAMILY[prefix]
    return OPENAI_UNKNOWN_MODEL
