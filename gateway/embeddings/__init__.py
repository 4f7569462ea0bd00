"""Embeddings: `POST /v1/embeddings`, a postpaid call charged by input tokens."""
