"""Adapter for music generation on Replicate: MusicGen (`meta/musicgen`) through the
predictions API, an asynchronous job API (create, poll, cancel).

    POST {base_url}/predictions                      create ({version, input}), "owner/name:version"
    POST {base_url}/models/{owner}/{name}/predictions  create ({input}), "owner/name"
    GET  {base_url}/predictions/{id}                 poll: starting, processing, succeeded, ...
    POST {base_url}/predictions/{id}/cancel          when the task is canceled or gives up
    POST {base_url}/files                            a reference too large for a data URL

The folder has the shape of `providers/openai`: `options.py` (the config table), `client.py`
(the provider: the job's life, downloads), `translate.py` (the wire types and MusicRequest ->
MusicGen input), `audio.py` (WAV and MP3 durations read from the bytes).
"""

from providers.replicate.client import create
from providers.replicate.options import Options

__all__ = ["Options", "create"]
