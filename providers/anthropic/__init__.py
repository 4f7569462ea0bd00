"""Adapter for Anthropic's Messages API, spoken to and from OpenAI chat completions.

The folder shape of `providers/openai/`: `options.py` (the config table), `client.py` (the
provider and its pooled session), `request.py` (OpenAI request -> Messages request) with
`thinking.py` (reasoning_effort, and the signed thinking blocks sent back), `translate.py`
(message and stream events -> OpenAI completion and chunks), `stream.py` (one streamed call),
`wire.py` (the upstream's wire types), `errors.py` (Anthropic's error objects).
"""

from providers.anthropic.client import create
from providers.anthropic.options import Options

__all__ = ["Options", "create"]
