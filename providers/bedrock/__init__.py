"""Adapter for Amazon Bedrock's Converse API (`Converse`, `ConverseStream`).

The folder shape of `providers/gemini/`: `options.py` (the table, and what config check reads
of the AWS files), `credentials.py` (botocore's credential chain and SigV4 signer),
`request.py` (OpenAI body -> Converse request), `wire.py` (the answer's and the events' typed
Structs), `translate.py` (answer -> OpenAI completion and chunks), `eventstream.py` (AWS's
binary event stream, decoded as it arrives), `stream.py` (one streamed call), `errors.py`
(Bedrock's exceptions by cause) and `client.py` (the provider).
"""

from providers.bedrock.client import create
from providers.bedrock.options import Options

__all__ = ["Options", "create"]
