"""Adapter for the Gemini API (`generateContent` / `streamGenerateContent?alt=sse`).

The folder shape of `providers/openai/`, with the translation both ways: `options.py` (the
config table), `client.py` (the provider and its pooled session), `request.py` (OpenAI body ->
GenerateContentRequest) with `schema.py` (JSON Schema -> Gemini's Schema subset), `wire.py`
(the answer's typed wire structs), `translate.py` (answer -> OpenAI completion and chunks),
`stream.py` (one streamed call) and `errors.py` (Google's error bodies).
"""

from providers.gemini.client import create
from providers.gemini.options import Options

__all__ = ["Options", "create"]
