"""Adapter for Azure OpenAI: deployments (`/openai/deployments/{deployment}/chat/completions
?api-version=`) or the v1 API (`/openai/v1/chat/completions`), with the `api-key` header or
Microsoft Entra ID tokens.

The wire format and streams are OpenAI's (`providers.openai`), and an answer Azure did not
count is counted as for any compatible server (`providers.openai_compatible`); what is
Azure's own is here: `options.py` (the table), `auth.py` (Entra ID tokens), `errors.py`
(Azure's error bodies: content filter results, `retry-after-ms`), `client.py` (URLs).
"""

from providers.azure_openai.client import create
from providers.azure_openai.options import Options

__all__ = ["Options", "create"]
