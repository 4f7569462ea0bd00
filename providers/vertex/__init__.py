"""Adapter for Gemini on Vertex AI (`generateContent` / `streamGenerateContent?alt=sse` under
a project and location), with Google's OAuth credentials.

The translation is the Gemini adapter's (`providers.gemini`), reused as it is; what is
Vertex's own is here: `options.py` (project, location, credentials), `credentials.py`
(service-account JWTs, authorized-user refresh tokens, the metadata server; tokens renewed
before expiry through `providers.tokens`), `client.py` (URLs).
"""

from providers.vertex.client import create
from providers.vertex.options import Options

__all__ = ["Options", "create"]
