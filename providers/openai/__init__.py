"""Adapter for OpenAI-compatible chat upstreams (OpenAI, vLLM, Ollama, most proxies).

The folder shape every HTTP adapter copies: `options.py` (the config table), `client.py` (the
provider and its pooled session), `stream.py` (one streamed call), `translate.py` (upstream wire
format -> OpenAI shapes), `errors.py` (HTTP statuses and transport exceptions -> provider errors).
"""

from providers.openai.client import create
from providers.openai.options import Options

__all__ = ["Options", "create"]
