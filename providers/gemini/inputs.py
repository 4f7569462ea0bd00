"""How Gemini (the Gemini API and Vertex AI) bills a request's inputs beyond their text
(`providers.base.InputRules`)."""

from __future__ import annotations

from math import ceil

from providers.base import InputRules

__all__ = ["GEMINI_INPUTS", "gemini_image_tokens"]

_TILE = 258
_HIGHEST_RESOLUTION = 2_240
"""Gemini 3 bills an image or a PDF page by media resolution, at most this (ultra high)."""
_MAX_TILES = 16


def gemini_image_tokens(width: int, height: int) -> int:
    """258 tokens an image of at most 384 px a side, else 258 a 768-px tile of the image
    scaled within 3,072 px (Gemini 2); at most 2,240 an image on Gemini 3."""
    if width <= 0 or height <= 0:
        return max(_TILE * _MAX_TILES, _HIGHEST_RESOLUTION)
    if width <= 384 and height <= 384:
        return max(_TILE, _HIGHEST_RESOLUTION)
    scale = min(1.0, 3072 / max(width, height))
    tiles = ceil(width * scale / 768) * ceil(height * scale / 768)
    return max(_TILE * min(tiles, _MAX_TILES), _HIGHEST_RESOLUTION)


GEMINI_INPUTS = InputRules(
    image_tokens=gemini_image_tokens,
    image_max_tokens=max(_TILE * _MAX_TILES, _HIGHEST_RESOLUTION),
    pdf_page_tokens=_HIGHEST_RESOLUTION,
)
"""Gemini: images by tiles or media resolution, a PDF page as one picture (its native text
is free); thinking counts within `maxOutputTokens` (Gemini stops at the cap with the
thoughts and the answer together)."""
